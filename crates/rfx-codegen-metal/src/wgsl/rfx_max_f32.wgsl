// NumPy maximum: `a` when `a > b` or `a` is NaN, else `b`.
fn rfx_max_f32(a: f32, b: f32) -> f32 {
    return select(b, a, a > b || rfx_isnan(a));
}
