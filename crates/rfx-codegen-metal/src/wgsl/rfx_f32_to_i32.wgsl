// Truncation toward zero, saturating, NaN -> 0 (Rust's `as`).
fn rfx_f32_to_i32(x: f32) -> i32 {
    if (rfx_isnan(x)) {
        return 0;
    }
    if (x >= 2147483648.0f) {
        return 2147483647;
    }
    if (x <= -2147483648.0f) {
        return bitcast<i32>(0x80000000u);
    }
    return i32(x);
}
