// Cephes logf's core for finite x > 0: x = 2^e (1 + m) with 1 + m in [sqrt(1/2), sqrt(2)),
// log(1 + m) = m + y. GPU built-ins compute log with an absolute, not relative, error near 1
// (lavapipe: log(0.99999994) off by 70%), so rfx computes log and log2 itself (about 1 ULP).
struct RfxLogParts {
    e: f32,
    m: f32,
    y: f32,
}

fn rfx_log_parts(x: f32) -> RfxLogParts {
    var bits = bitcast<u32>(x);
    var e = -126;
    // Subnormals scaled by 2^23 on the bits' integer value: exact, and no flush can touch it.
    if (bits < 0x00800000u) {
        bits = bitcast<u32>(f32(bits) * 0x1p-126f);
        e = e - 23;
    }
    e = e + i32(bits >> 23u);
    var m = bitcast<f32>((bits & 0x007fffffu) | 0x3f000000u);
    if (m < 0.70710678118654752f) {
        e = e - 1;
        m = m + m - 1.0f;
    } else {
        m = m - 1.0f;
    }
    let z = m * m;
    let p = (((((((7.0376836292e-2f * m - 1.1514610310e-1f) * m + 1.1676998740e-1f) * m
        - 1.2420140846e-1f) * m + 1.4249322787e-1f) * m - 1.6668057665e-1f) * m
        + 2.0000714765e-1f) * m - 2.4999993993e-1f) * m + 3.3333331174e-1f;
    return RfxLogParts(f32(e), m, m * z * p - 0.5f * z);
}
