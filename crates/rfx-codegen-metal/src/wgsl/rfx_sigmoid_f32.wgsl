// rfx sigmoid: exp(x)/(1+exp(x)) below 0 keeps tiny results; 1/(1+exp(-x)) otherwise.
fn rfx_sigmoid_f32(x: f32) -> f32 {
    if (x < 0.0f) {
        let e = rfx_exp_f32(x);
        return e / (1.0f + e);
    }
    return 1.0f / (1.0f + rfx_exp_f32(-x));
}
