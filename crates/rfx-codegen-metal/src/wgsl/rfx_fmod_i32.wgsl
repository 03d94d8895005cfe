// Truncated remainder; x fmod 0 = 0 and x fmod -1 = 0 (no overflow).
fn rfx_fmod_i32(a: i32, b: i32) -> i32 {
    return a % select(b, 1, b == 0 || b == -1);
}
