// acos: Cephes acosf (pi - 2 asin(sqrt((1 + x) / 2)) below -1/2, 2 asin(sqrt((1 - x) / 2))
// above 1/2, pi/2 - asin(x) between, pi and pi/2 in two parts), about 2 ULP; NaN outside
// [-1, 1]. Built-ins: 3741 ULP on lavapipe.
fn rfx_acos_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) > 0x3f800000u) {
        return bitcast<f32>(0x7fc00000u);
    }
    if (x < -0.5f) {
        let z = 0.5f * (1.0f + x);
        let s = rfx_asin_poly(sqrt(z), z);
        return rfx_exact(3.1415927410125732f - rfx_exact(s + s)) - 8.742278e-8f;
    }
    if (x > 0.5f) {
        let z = 0.5f * (1.0f - x);
        let s = rfx_asin_poly(sqrt(z), z);
        return s + s;
    }
    return rfx_exact(1.5707963705062866f - rfx_asin_poly(x, x * x)) - 4.371139e-8f;
}
