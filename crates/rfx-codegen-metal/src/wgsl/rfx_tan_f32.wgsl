fn rfx_tan_f32(x: f32) -> f32 {
    if (rfx_trig_fallback(x)) {
        return tan(x);
    }
    let t = rfx_trig(x);
    let odd = (t.q & 1u) == 1u;
    return select(t.s, -t.c, odd) / select(t.c, t.s, odd);
}
