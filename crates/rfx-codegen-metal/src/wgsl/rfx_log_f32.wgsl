// log: -Inf at ±0, NaN below 0 and for NaN, +Inf at +Inf, else Cephes logf.
fn rfx_log_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) == 0u) {
        return bitcast<f32>(0xff800000u);
    }
    if (bits >= 0x7f800000u) {
        return select(bitcast<f32>(0x7fc00000u), x, bits == 0x7f800000u);
    }
    let p = rfx_log_parts(x);
    return (p.m + (p.y - 2.12194440e-4f * p.e)) + 0.693359375f * p.e;
}
