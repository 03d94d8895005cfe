// `x` itself, through a zero the shader compiler cannot see (`gid.z`, always 0 here):
// it keeps every float op a separately rounded IEEE op. Without it, Mesa's NIR fuses `a * b + c`
// into an FMA and folds `x - x` to 0 and `x * 0` to 0, which are wrong for NaN, Inf and -0.
fn rfx_exact(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) | rfx_zero);
}

// The same with another opaque op, for second operands: `rfx_exact(x) - rfx_exact2(x)` is not
// `x - x` to the compiler, so it cannot fold it to 0 (NaN for infinite x). An add, not an xor:
// `rfx_exact2(rfx_exact(0.0))` would be `(0 | z) ^ z`, a zero the compiler can see, and it
// folds `acc + 0.0` to `acc` (wrong for `acc = -0.0`).
fn rfx_exact2(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) + rfx_zero);
}
