// asin: Cephes asinf (above 1/2, pi/2 - 2 asin(sqrt((1 - |x|) / 2)) with pi/2 in two parts),
// about 2 ULP; NaN outside [-1, 1]. Built-ins: 3825 ULP on lavapipe.
fn rfx_asin_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) > 0x3f800000u) {
        return bitcast<f32>(0x7fc00000u);
    }
    let a = bitcast<f32>(bits & 0x7fffffffu);
    var r: f32;
    if (a > 0.5f) {
        let z = 0.5f * (1.0f - a);
        let s = rfx_asin_poly(sqrt(z), z);
        r = rfx_exact(1.5707963705062866f - rfx_exact(s + s)) - 4.371139e-8f;
    } else {
        r = rfx_asin_poly(a, a * a);
    }
    return bitcast<f32>(bitcast<u32>(r) | (bits & 0x80000000u));
}
