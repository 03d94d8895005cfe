// atan: Cephes atanf (|x| reduced to at most tan(pi/8) through pi/4 and pi/2, a degree-9
// odd polynomial), about 2 ULP; the sign of x (atan(-0) = -0). Built-ins: 343 ULP on lavapipe.
fn rfx_atan_f32(x: f32) -> f32 {
    let a = bitcast<f32>(bitcast<u32>(x) & 0x7fffffffu);
    var t = a;
    var base = 0.0f;
    if (a > 2.414213562373095f) {
        base = 1.5707963267948966f;
        t = -1.0f / a;
    } else if (a > 0.41421356237309505f) {
        base = 0.7853981633974483f;
        t = (a - 1.0f) / (a + 1.0f);
    }
    let z = t * t;
    let p = ((($ATAN_F32[3] * z - $-ATAN_F32[2]) * z + $ATAN_F32[1]) * z
        - $-ATAN_F32[0]) * z * t + t;
    let r = base + rfx_exact(p);
    return bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(x) & 0x80000000u));
}
