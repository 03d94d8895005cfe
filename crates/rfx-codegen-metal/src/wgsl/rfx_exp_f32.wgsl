// exp: Cephes expf (x = n ln2 + r, ln2 in two parts, the first of 9 bits so n * part is
// exact; a degree-6 polynomial), about 1 ULP, subnormal results included. Built-ins: 59 ULP
// on lavapipe.
fn rfx_exp_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return x;
    }
    if (x > 88.72283f) {
        return bitcast<f32>(0x7f800000u);
    }
    if (x < -104.0f) {
        return 0.0f;
    }
    let n = floor(x * 1.44269504088896341f + 0.5f);
    var r = rfx_exact(x) - n * 0.693359375f;
    r = rfx_exact(r) - n * -2.12194440e-4f;
    let p = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r
        + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * (r * r) + r + 1.0f;
    return rfx_scale2(p, i32(n));
}
