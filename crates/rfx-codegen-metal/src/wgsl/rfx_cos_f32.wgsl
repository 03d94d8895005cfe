fn rfx_cos_f32(x: f32) -> f32 {
    if (rfx_trig_fallback(x)) {
        return cos(x);
    }
    let t = rfx_trig(x);
    let v = select(t.c, t.s, (t.q & 1u) == 1u);
    return select(v, -v, t.q == 1u || t.q == 2u);
}
