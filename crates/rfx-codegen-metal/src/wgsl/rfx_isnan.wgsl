// NaN test on the bits: a fast-math compiler may fold `x != x` away.
fn rfx_isnan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}
