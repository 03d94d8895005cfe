// C99 atan2 at y = ±0 (±0 or ±pi by the sign of x, -0 included), x = ±0 and infinite operands;
// else rfx's atan of y / x, moved by ±pi (in two parts) when x < 0. About 3 ULP.
fn rfx_atan2_f32(y: f32, x: f32) -> f32 {
    if (rfx_isnan(x) || rfx_isnan(y)) {
        return bitcast<f32>(0x7fc00000u);
    }
    if (y == 0.0f) {
        let r = select(0u, 0x40490fdbu, bitcast<u32>(x) >= 0x80000000u);
        return bitcast<f32>(r | (bitcast<u32>(y) & 0x80000000u));
    }
    let sign = bitcast<u32>(y) & 0x80000000u;
    let x_neg = bitcast<u32>(x) >= 0x80000000u;
    if ((bitcast<u32>(y) & 0x7fffffffu) == 0x7f800000u) {
        // pi/4, 3pi/4 or pi/2 by x.
        let x_inf = (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
        let m = select(0x3fc90fdbu, select(0x3f490fdbu, 0x4016cbe4u, x_neg), x_inf);
        return bitcast<f32>(m | sign);
    }
    if ((bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u) {
        return bitcast<f32>(select(0u, 0x40490fdbu, x_neg) | sign);
    }
    if (x == 0.0f) {
        return bitcast<f32>(0x3fc90fdbu | (bitcast<u32>(y) & 0x80000000u));
    }
    let r = rfx_atan_f32(y / x);
    if (x < 0.0f) {
        let pi_hi = select(3.1415927410125732f, -3.1415927410125732f, y < 0.0f);
        let pi_lo = select(-8.742278e-8f, 8.742278e-8f, y < 0.0f);
        return rfx_exact(pi_hi + r) + pi_lo;
    }
    return r;
}
