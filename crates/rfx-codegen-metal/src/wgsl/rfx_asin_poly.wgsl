// asin t for |t| <= 1/2 (z = t * t): Cephes asinf's polynomial.
fn rfx_asin_poly(t: f32, z: f32) -> f32 {
    return ((((4.2163199048e-2f * z + 2.4181311049e-2f) * z + 4.5470025998e-2f) * z
        + 7.4953002686e-2f) * z + 1.6666752422e-1f) * z * t + t;
}
