// exp2: Cephes exp2f (x = n + r, |r| <= 1/2 exactly; a degree-6 polynomial), about 1 ULP,
// subnormal results included. Built-ins flush subnormal results.
fn rfx_exp2_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return x;
    }
    if (x >= 128.0f) {
        return bitcast<f32>(0x7f800000u);
    }
    if (x < -151.0f) {
        return 0.0f;
    }
    let n = floor(x + 0.5f);
    return rfx_scale2(rfx_exp2_poly(rfx_exact(x) - n), i32(n));
}
