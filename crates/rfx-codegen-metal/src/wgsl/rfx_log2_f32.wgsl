// log2: the special values of log, else Cephes log2f (exact at powers of two).
fn rfx_log2_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) == 0u) {
        return bitcast<f32>(0xff800000u);
    }
    if (bits >= 0x7f800000u) {
        return select(bitcast<f32>(0x7fc00000u), x, bits == 0x7f800000u);
    }
    let p = rfx_log_parts(x);
    let log2ea = 0.44269504088896340736f;
    return (((p.y * log2ea + p.m * log2ea) + p.y) + p.m) + p.e;
}
