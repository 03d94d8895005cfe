// asin t for |t| <= 1/2 (z = t * t): Cephes asinf's polynomial.
fn rfx_asin_poly(t: f32, z: f32) -> f32 {
    return (((($ASIN_F32[4] * z + $ASIN_F32[3]) * z + $ASIN_F32[2]) * z
        + $ASIN_F32[1]) * z + $ASIN_F32[0]) * z * t + t;
}
