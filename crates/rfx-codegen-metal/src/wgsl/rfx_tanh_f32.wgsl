// tanh: Cephes tanhf's odd polynomial below 0.625 (GPU built-ins lose accuracy to
// cancellation there), the built-in above.
fn rfx_tanh_f32(x: f32) -> f32 {
    if (abs(x) < 0.625f) {
        let z = x * x;
        let p = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z
            + 1.33314422036e-1f) * z - 3.33332819422e-1f) * z;
        return select(p * x + x, x, abs(x) < 0x1p-12f);
    }
    return tanh(x);
}
