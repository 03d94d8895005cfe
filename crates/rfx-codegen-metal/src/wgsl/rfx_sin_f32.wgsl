fn rfx_sin_f32(x: f32) -> f32 {
    if (rfx_trig_fallback(x)) {
        return sin(x);
    }
    let t = rfx_trig(x);
    let v = select(t.s, t.c, (t.q & 1u) == 1u);
    return select(v, -v, t.q >= 2u);
}
