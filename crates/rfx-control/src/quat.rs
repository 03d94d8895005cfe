//! Quaternions: `(w, x, y, z)`, scalar first, Hamilton convention (`i·j = k`), each component
//! its own array (struct of arrays).

use rfx::lie::{cross_parts, quat_mul_parts};
use rfx::{Jit, Tensor, where_};

use crate::build::{ControlKernel, func};

/// Below this norm [`quat_normalize`] and [`quat_from_axis_angle`] return the identity.
pub const NORM_EPS: f64 = 1e-12;

/// Above this `|a·b|` [`quat_slerp`] falls back to a normalised linear interpolation.
pub const SLERP_LERP_THRESHOLD: f64 = 0.9995;

const Q: [&str; 4] = ["w", "x", "y", "z"];

type Quat = [Tensor; 4];

/// `q / |q|`, or the identity where `|q| < NORM_EPS`.
fn normalize(q: Quat) -> Quat {
    let [w, x, y, z] = q;
    let n2 = w * w + x * x + y * y + z * z;
    let small = n2.lt(NORM_EPS * NORM_EPS);
    let inv = n2.max(NORM_EPS * NORM_EPS).sqrt().recip();
    [
        where_(small, 1.0, w * inv),
        where_(small, 0.0, x * inv),
        where_(small, 0.0, y * inv),
        where_(small, 0.0, z * inv),
    ]
}

/// The Hamilton product `a ⊗ b` (apply `b`, then `a`).
///
/// Inputs `aw, ax, ay, az, bw, bx, by, bz`; outputs `w, x, y, z`.
pub fn quat_mul() -> Jit<ControlKernel> {
    let inputs = ["aw", "ax", "ay", "az", "bw", "bx", "by", "bz"];
    let f = func("quat_mul", inputs, |[aw, ax, ay, az, bw, bx, by, bz]| {
        quat_mul_parts([aw, ax, ay, az], [bw, bx, by, bz]).to_vec()
    });
    ControlKernel::new("quat_mul", &inputs).part(f, &Q).jit()
}

/// The conjugate `(w, -x, -y, -z)` (the inverse of a unit quaternion).
///
/// Inputs and outputs `w, x, y, z`.
pub fn quat_conj() -> Jit<ControlKernel> {
    let f = func("quat_conj", Q, |[w, x, y, z]| vec![w, -x, -y, -z]);
    ControlKernel::new("quat_conj", &Q).part(f, &Q).jit()
}

/// `q / |q|`. **Near zero:** where `|q| < NORM_EPS` (1e-12) the result is the identity
/// `(1, 0, 0, 0)`, never NaN or Inf (a zero quaternion has no direction).
///
/// Inputs and outputs `w, x, y, z`.
pub fn quat_normalize() -> Jit<ControlKernel> {
    let f = func("quat_normalize", Q, |q| normalize(q).to_vec());
    ControlKernel::new("quat_normalize", &Q).part(f, &Q).jit()
}

/// Rotates the vector `v` by the unit quaternion `q`: `q ⊗ (0, v) ⊗ q*`, computed as
/// `v + w·t + u × t` with `u = (x, y, z)`, `t = 2·u × v`. `q` is assumed unit (not normalised
/// here; a non-unit `q` also scales by `|q|²`).
///
/// Inputs `w, x, y, z, vx, vy, vz`; outputs `x, y, z`.
pub fn quat_rotate() -> Jit<ControlKernel> {
    let inputs = ["w", "x", "y", "z", "vx", "vy", "vz"];
    let f = func("quat_rotate", inputs, |[w, x, y, z, vx, vy, vz]| {
        let u = [x, y, z];
        let v = [vx, vy, vz];
        let t = cross_parts(u, v).map(|c| c * 2.0);
        let ut = cross_parts(u, t);
        (0..3).map(|i| v[i] + w * t[i] + ut[i]).collect()
    });
    ControlKernel::new("quat_rotate", &inputs)
        .part(f, &["x", "y", "z"])
        .jit()
}

/// The rotation by `angle` (rad, right-handed) about the axis `(ax, ay, az)`:
/// `(cos(angle/2), sin(angle/2)·axis/|axis|)`. The axis need not be unit; where
/// `|axis| < NORM_EPS` the result is the identity.
///
/// Inputs `ax, ay, az, angle`; outputs `w, x, y, z`.
pub fn quat_from_axis_angle() -> Jit<ControlKernel> {
    let inputs = ["ax", "ay", "az", "angle"];
    let f = func("quat_from_axis_angle", inputs, |[ax, ay, az, angle]| {
        let n2 = ax * ax + ay * ay + az * az;
        let small = n2.lt(NORM_EPS * NORM_EPS);
        let half = angle * 0.5;
        let scale = half.sin() / n2.max(NORM_EPS * NORM_EPS).sqrt();
        vec![
            where_(small, 1.0, half.cos()),
            where_(small, 0.0, ax * scale),
            where_(small, 0.0, ay * scale),
            where_(small, 0.0, az * scale),
        ]
    });
    ControlKernel::new("quat_from_axis_angle", &inputs)
        .part(f, &Q)
        .jit()
}

/// Spherical linear interpolation from `a` (t = 0) to `b` (t = 1) along the shorter arc; `a`
/// and `b` are assumed unit.
///
/// **Antipodal inputs:** where `a·b < 0`, `b` is replaced by `-b` (the same rotation), so the
/// path is the short one; `b = -a` gives `a` for every `t`. **Near-identical inputs:** where
/// `|a·b| > SLERP_LERP_THRESHOLD` (0.9995, angles under ~3.6°) `sin θ` is too small to divide
/// by, and the result is the normalised linear interpolation `normalize(a + t·(b - a))`
/// (error below 1e-7 relative to slerp at the threshold).
///
/// Inputs `aw, ax, ay, az, bw, bx, by, bz, t` (`t` broadcasts: `[]` for one `t`); outputs
/// `w, x, y, z`.
pub fn quat_slerp() -> Jit<ControlKernel> {
    let inputs = ["aw", "ax", "ay", "az", "bw", "bx", "by", "bz", "t"];
    let f = func("quat_slerp", inputs, |[aw, ax, ay, az, bw, bx, by, bz, t]| {
        let a = [aw, ax, ay, az];
        let dot = aw * bw + ax * bx + ay * by + az * bz;
        let flip = dot.lt(0.0);
        let b = [bw, bx, by, bz].map(|c| where_(flip, -c, c));
        let cos = dot.abs();
        let lerp = normalize(std::array::from_fn(|i| a[i] + t * (b[i] - a[i])));
        let theta = cos.min(1.0).acos();
        let sin = theta.sin().max(1e-30);
        let wa = ((1.0 - t) * theta).sin() / sin;
        let wb = (t * theta).sin() / sin;
        let near = cos.gt(SLERP_LERP_THRESHOLD);
        (0..4)
            .map(|i| where_(near, lerp[i], wa * a[i] + wb * b[i]))
            .collect()
    });
    ControlKernel::new("quat_slerp", &inputs).part(f, &Q).jit()
}

const M: [&str; 9] = ["m00", "m01", "m02", "m10", "m11", "m12", "m20", "m21", "m22"];

/// The rotation matrix of `q` (row-major, `v' = M v`), computed with `s = 2/|q|²` so that any
/// non-zero `q` gives the rotation of `q/|q|`; the zero quaternion gives the identity matrix.
///
/// Inputs `w, x, y, z`; outputs `m00, m01, m02, m10, m11, m12, m20, m21, m22`.
pub fn quat_to_rotmat() -> Jit<ControlKernel> {
    let f = func("quat_to_rotmat", Q, |[w, x, y, z]| {
        let n2 = w * w + x * x + y * y + z * z;
        let s = where_(n2.gt(0.0), 2.0 / n2, 0.0);
        let (xx, yy, zz) = (x * x * s, y * y * s, z * z * s);
        let (xy, xz, yz) = (x * y * s, x * z * s, y * z * s);
        let (wx, wy, wz) = (w * x * s, w * y * s, w * z * s);
        vec![
            1.0 - (yy + zz),
            xy - wz,
            xz + wy,
            xy + wz,
            1.0 - (xx + zz),
            yz - wx,
            xz - wy,
            yz + wx,
            1.0 - (xx + yy),
        ]
    });
    ControlKernel::new("quat_to_rotmat", &Q).part(f, &M).jit()
}

/// The unit quaternion of a rotation matrix (row-major), by Shepperd's method: of the four
/// formulas (from the trace, or from the largest diagonal element) the best conditioned is
/// used, so no division by a small number happens. The sign is chosen so that `w >= 0`.
/// The input is assumed orthonormal with determinant +1.
///
/// Inputs `m00, m01, m02, m10, m11, m12, m20, m21, m22`; outputs `w, x, y, z`.
pub fn rotmat_to_quat() -> Jit<ControlKernel> {
    let f = func(
        "rotmat_to_quat",
        M,
        |[m00, m01, m02, m10, m11, m12, m20, m21, m22]| {
            let trace = m00 + m11 + m22;
            // s = 4·(the component computed from the diagonal); clamped so unselected branches
            // stay finite.
            let s0 = (trace + 1.0).max(1e-30).sqrt() * 2.0;
            let s1 = (1.0 + m00 - m11 - m22).max(1e-30).sqrt() * 2.0;
            let s2 = (1.0 + m11 - m00 - m22).max(1e-30).sqrt() * 2.0;
            let s3 = (1.0 + m22 - m00 - m11).max(1e-30).sqrt() * 2.0;
            let q0 = [s0 * 0.25, (m21 - m12) / s0, (m02 - m20) / s0, (m10 - m01) / s0];
            let q1 = [(m21 - m12) / s1, s1 * 0.25, (m01 + m10) / s1, (m02 + m20) / s1];
            let q2 = [(m02 - m20) / s2, (m01 + m10) / s2, s2 * 0.25, (m12 + m21) / s2];
            let q3 = [(m10 - m01) / s3, (m02 + m20) / s3, (m12 + m21) / s3, s3 * 0.25];
            let use0 = trace.ge(m00) & trace.ge(m11) & trace.ge(m22);
            let use1 = m00.ge(m11) & m00.ge(m22);
            let use2 = m11.ge(m22);
            let q: Quat =
                std::array::from_fn(|i| where_(use0, q0[i], where_(use1, q1[i], where_(use2, q2[i], q3[i]))));
            // (`where_(negative, -1.0, 1.0)` would be f64 whatever the inputs: two literals
            // carry no dtype.)
            let negative = q[0].lt(0.0);
            q.map(|c| where_(negative, -c, c)).to_vec()
        },
    );
    ControlKernel::new("rotmat_to_quat", &M).part(f, &Q).jit()
}
