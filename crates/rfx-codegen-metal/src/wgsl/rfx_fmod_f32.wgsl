// C fmod, exact: integer remainders of the significands, 8 exponent bits per step.
fn rfx_fmod_f32(x: f32, y: f32) -> f32 {
    let ux = bitcast<u32>(x);
    let sx = ux & 0x80000000u;
    let ax = ux & 0x7fffffffu;
    let ay = bitcast<u32>(y) & 0x7fffffffu;
    if (ay == 0u || ay > 0x7f800000u || ax >= 0x7f800000u) {
        return bitcast<f32>(0x7fc00000u);
    }
    if (ax < ay) {
        return x;
    }
    if (ax == ay) {
        return bitcast<f32>(sx);
    }
    let ex = max(i32(ax >> 23u), 1);
    let ey = max(i32(ay >> 23u), 1);
    let mx = select(ax, (ax & 0x007fffffu) | 0x00800000u, ax >= 0x00800000u);
    let my = select(ay, (ay & 0x007fffffu) | 0x00800000u, ay >= 0x00800000u);
    let d = u32(ex - ey);
    var r = (mx << (d & 7u)) % my;
    let steps = d >> 3u;
    if (steps > 0u) { r = (r << 8u) % my; }
    if (steps > 1u) { r = (r << 8u) % my; }
    if (steps > 2u) { r = (r << 8u) % my; }
    if (steps > 3u) { r = (r << 8u) % my; }
    if (steps > 4u) { r = (r << 8u) % my; }
    if (steps > 5u) { r = (r << 8u) % my; }
    if (steps > 6u) { r = (r << 8u) % my; }
    if (steps > 7u) { r = (r << 8u) % my; }
    if (steps > 8u) { r = (r << 8u) % my; }
    if (steps > 9u) { r = (r << 8u) % my; }
    if (steps > 10u) { r = (r << 8u) % my; }
    if (steps > 11u) { r = (r << 8u) % my; }
    if (steps > 12u) { r = (r << 8u) % my; }
    if (steps > 13u) { r = (r << 8u) % my; }
    if (steps > 14u) { r = (r << 8u) % my; }
    if (steps > 15u) { r = (r << 8u) % my; }
    if (steps > 16u) { r = (r << 8u) % my; }
    if (steps > 17u) { r = (r << 8u) % my; }
    if (steps > 18u) { r = (r << 8u) % my; }
    if (steps > 19u) { r = (r << 8u) % my; }
    if (steps > 20u) { r = (r << 8u) % my; }
    if (steps > 21u) { r = (r << 8u) % my; }
    if (steps > 22u) { r = (r << 8u) % my; }
    if (steps > 23u) { r = (r << 8u) % my; }
    if (steps > 24u) { r = (r << 8u) % my; }
    if (steps > 25u) { r = (r << 8u) % my; }
    if (steps > 26u) { r = (r << 8u) % my; }
    if (steps > 27u) { r = (r << 8u) % my; }
    if (steps > 28u) { r = (r << 8u) % my; }
    if (steps > 29u) { r = (r << 8u) % my; }
    if (steps > 30u) { r = (r << 8u) % my; }
    if (r == 0u) {
        return bitcast<f32>(sx);
    }
    let shift = i32(countLeadingZeros(r)) - 8;
    let e = ey - shift;
    if (e >= 1) {
        return bitcast<f32>(sx | (u32(e) << 23u) | ((r << u32(shift)) & 0x007fffffu));
    }
    return bitcast<f32>(sx | (r << u32(ey - 1)));
}
