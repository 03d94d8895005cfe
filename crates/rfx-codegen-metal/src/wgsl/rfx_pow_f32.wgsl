// C99 powf: the special values exactly, negative bases with integer exponents,
// otherwise 2^(y log2|x|) with y log2|x| carried as a double-f32 pair (about 2^-33 relative):
// rounding that product to one f32 cost up to 93 ULP where the result is large or tiny.
fn rfx_pow_f32(x: f32, y: f32) -> f32 {
    let inf = bitcast<f32>(0x7f800000u);
    if (y == 0.0f || x == 1.0f) {
        return 1.0f;
    }
    if (rfx_isnan(x) || rfx_isnan(y)) {
        return bitcast<f32>(0x7fc00000u);
    }
    let ax = abs(x);
    let ay = abs(y);
    // |log2|x|| >= 2^-24.5 for |x| != 1, so from |y| = 2^64 on, |y log2|x|| >= 2^39: the
    // limits of the infinite y (and the split below never overflows).
    if (ay == inf || ay >= 0x1p64f) {
        if (ax == 1.0f) {
            return 1.0f;
        }
        return select(0.0f, inf, (ax > 1.0f) == (y > 0.0f));
    }
    let y_int = trunc(y) == y;
    // Every f32 of magnitude 2^24 or more is an even integer.
    let y_odd = y_int && ay < 16777216.0f && (i32(ay) & 1) == 1;
    let neg = bitcast<u32>(x) >= 0x80000000u;
    let sign = select(0u, 0x80000000u, neg && y_odd);
    if (ax == 0.0f) {
        return bitcast<f32>(bitcast<u32>(select(0.0f, inf, y < 0.0f)) | sign);
    }
    if (ax == inf) {
        return bitcast<f32>(bitcast<u32>(select(inf, 0.0f, y < 0.0f)) | sign);
    }
    if (neg && !y_int) {
        return bitcast<f32>(0x7fc00000u);
    }
    let l = rfx_log2_dd(ax);
    let t = rfx_two_prod(y, l.x);
    let tl = rfx_exact(t.y + rfx_exact(y * l.y));
    var v = 0.0f;
    if (t.x > 130.0f) {
        v = inf;
    } else if (t.x >= -152.0f) {
        // 2^t = 2^n 2^r with |r| <= 1/2 (t.x - n is exact).
        let n = floor(t.x + 0.5f);
        v = rfx_scale2(rfx_exp2_poly(rfx_exact(rfx_exact(t.x - n) + tl)), i32(n));
    }
    return bitcast<f32>(bitcast<u32>(v) | sign);
}
