// z * 2^n for z in [0.5, 2] and n in [-151, 128], as two products by powers of two built
// from the bits: exact unless the result is subnormal, then rounded once (WGSL's `ldexp` may
// flush subnormal results).
fn rfx_scale2(z: f32, n: i32) -> f32 {
    let n1 = n / 2;
    let n2 = n - n1;
    return z * bitcast<f32>(u32(n1 + 127) << 23u) * bitcast<f32>(u32(n2 + 127) << 23u);
}
