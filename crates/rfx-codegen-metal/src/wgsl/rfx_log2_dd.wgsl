// log2 x for finite x > 0 as a double-f32 pair (hi + lo, about 2^-33 relative): x = 2^e u,
// u in [1, 2), c = 1 + k/8 the nearest eighth, log2 u = log2 c + (2/ln 2) atanh(s) with
// s = (u - c)/(u + c), |s| <= 1/32, carried as sh + sl (u - c is exact, the quotient's error
// is recovered from the residual); the atanh tail s^3/3 + s^5/5 + s^7/7 is under 2^-11 of s, so
// f32 is enough for it; log2 c from a table of pairs.
fn rfx_log2_dd(x: f32) -> vec2<f32> {
    var bits = bitcast<u32>(x);
    var e = -127;
    if (bits < 0x00800000u) {
        bits = bitcast<u32>(f32(bits) * 0x1p-126f);
        e = e - 23;
    }
    e = e + i32(bits >> 23u);
    let u = bitcast<f32>((bits & 0x007fffffu) | 0x3f800000u);
    let k = floor(rfx_exact(u - 1.0f) * 8.0f + 0.5f);
    let c = 1.0f + 0.125f * k;
    let n = rfx_exact(u - c);
    let d = rfx_two_sum(u, c);
    let sh = rfx_exact(n / d.x);
    let p = rfx_two_prod(sh, d.x);
    let r = rfx_exact(rfx_exact(rfx_exact(n - p.x) - p.y) - rfx_exact(sh * d.y));
    let sl = rfx_exact(r / d.x);
    let z = sh * sh;
    let tail = rfx_exact(sh * z) * ((0x1.24924ap-3f * z + 0x1.99999ap-3f) * z + 0x1.555556p-2f);
    // 2/ln 2 = 0x1.715476p+1 + 0x1.4ae0cp-25.
    let a = rfx_two_prod(0x1.715476p+1f, sh);
    let b = rfx_exact(rfx_exact(a.y + rfx_exact(0x1.715476p+1f * rfx_exact(sl + tail)))
        + rfx_exact(0x1.4ae0cp-25f * sh));
    var c_hi = array<f32, 9>(0.0f, 0x1.5c01a4p-3f, 0x1.49a784p-2f, 0x1.d6753ep-2f, 0x1.2b8034p-1f,
        0x1.66a008p-1f, 0x1.9d5dap-1f, 0x1.d053f6p-1f, 1.0f);
    var c_lo = array<f32, 9>(0.0f, -0x1.810a5ep-29f, 0x1.79a372p-27f, 0x1.975078p-33f,
        0x1.cfdeb4p-27f, 0x1.c8f11ap-26f, -0x1.57f7a6p-28f, 0x1.a4c112p-26f, 0.0f);
    let i = u32(k);
    let s1 = rfx_two_sum(f32(e), c_hi[i]);
    let s2 = rfx_two_sum(s1.x, a.x);
    return rfx_two_sum(s2.x, rfx_exact(rfx_exact(s2.y + b) + rfx_exact(s1.y + c_lo[i])));
}
