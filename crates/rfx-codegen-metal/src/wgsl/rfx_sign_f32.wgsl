// NumPy sign: -1, +0 or 1; NaN stays NaN; sign(-0) = +0.
fn rfx_sign_f32(x: f32) -> f32 {
    return select(select(select(x, 0.0f, x == 0.0f), -1.0f, x < 0.0f), 1.0f, x > 0.0f);
}
