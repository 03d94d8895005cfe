// tanh: Cephes tanhf's odd polynomial below 0.625 (GPU built-ins lose accuracy to
// cancellation there), the built-in above.
fn rfx_tanh_f32(x: f32) -> f32 {
    if (abs(x) < 0.625f) {
        let z = x * x;
        let p = (((($TANH_F32[4] * z + $TANH_F32[3]) * z - $-TANH_F32[2]) * z
            + $TANH_F32[1]) * z - $-TANH_F32[0]) * z;
        return select(p * x + x, x, abs(x) < 0x1p-12f);
    }
    return tanh(x);
}
