//! Plain-Rust f64 references, written from the math, independent of the kernels (no code is
//! shared with `src/`): per element, arrays of structs, full 4×4 DH matrices, the sandwich
//! product for rotations.

use std::f64::consts::PI;

/// PID constants (a copy of the kernel's, so the reference does not use the crate).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pid {
    pub(crate) kp: f64,
    pub(crate) ki: f64,
    pub(crate) kd: f64,
    pub(crate) dt: f64,
    pub(crate) i_lo: f64,
    pub(crate) i_hi: f64,
    pub(crate) u_lo: f64,
    pub(crate) u_hi: f64,
}

/// One PID step: `(command, integral)`.
pub(crate) fn pid(p: &Pid, setpoint: f64, y: f64, y_prev: f64, integral: f64) -> (f64, f64) {
    let e = setpoint - y;
    let mut i = integral + p.ki * e * p.dt;
    if i > p.i_hi {
        i = p.i_hi;
    }
    if i < p.i_lo {
        i = p.i_lo;
    }
    let d = -p.kd * (y - y_prev) / p.dt;
    let u = p.kp * e + i + d;
    (u.max(p.u_lo).min(p.u_hi), i)
}

pub(crate) fn low_pass(x: f64, y_prev: f64, alpha: f64) -> f64 {
    alpha * x + (1.0 - alpha) * y_prev
}

pub(crate) fn complementary(angle: f64, gyro: f64, ay: f64, az: f64, alpha: f64, dt: f64) -> f64 {
    alpha * (angle + gyro * dt) + (1.0 - alpha) * ay.atan2(az)
}

pub(crate) fn moving_average(window: &[f64]) -> f64 {
    window.iter().sum::<f64>() / window.len() as f64
}

/// The gain at `x` of a schedule whose knots are `x0 + j·dx`: the end values outside them, else
/// the segment holding `x` found by walking the knots, interpolated by distance.
pub(crate) fn gain_schedule(x: f64, x0: f64, dx: f64, table: &[f64]) -> f64 {
    let knot = |j: usize| x0 + j as f64 * dx;
    let last = table.len() - 1;
    if x.is_nan() {
        return f64::NAN;
    }
    if x <= x0 || last == 0 {
        return table[0];
    }
    if x >= knot(last) {
        return table[last];
    }
    let j = (0..last).rev().find(|&j| knot(j) <= x).unwrap_or(0);
    let w = (x - knot(j)) / dx;
    (1.0 - w) * table[j] + w * table[j + 1]
}

/// One segment of a path as a vehicle at `(x, y)` with `heading` sees it:
/// `(squared distance to the segment's nearest point, signed distance, heading error)`.
pub(crate) fn path_segment(x: f64, y: f64, heading: f64, a: [f64; 2], b: [f64; 2]) -> (f64, f64, f64) {
    let (ex, ey) = (b[0] - a[0], b[1] - a[1]);
    let (dx, dy) = (x - a[0], y - a[1]);
    let len2 = ex * ex + ey * ey;
    // The foot of the perpendicular, kept on the segment (its start for a point-like segment).
    let t = if len2 > 0.0 {
        ((dx * ex + dy * ey) / len2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let (nx, ny) = (a[0] + t * ex, a[1] + t * ey);
    let d2 = (x - nx).powi(2) + (y - ny).powi(2);
    let left = ex * dy - ey * dx >= 0.0;
    let signed = if left { d2.sqrt() } else { -d2.sqrt() };
    // The segment's direction less the heading, brought into [-π, π].
    let turn = ey.atan2(ex) - heading;
    let wrapped = (turn + PI).rem_euclid(2.0 * PI) - PI;
    (d2, signed, wrapped)
}

/// Kalman state: `[pos, vel]`, covariance 2×2.
pub(crate) type Mat2 = [[f64; 2]; 2];

fn mat2_mul(a: &Mat2, b: &Mat2) -> Mat2 {
    let mut c = [[0.0; 2]; 2];
    for i in 0..2 {
        for j in 0..2 {
            for k in 0..2 {
                c[i][j] += a[i][k] * b[k][j];
            }
        }
    }
    c
}

fn transpose(a: &Mat2) -> Mat2 {
    [[a[0][0], a[1][0]], [a[0][1], a[1][1]]]
}

pub(crate) fn kalman_predict(x: [f64; 2], p: Mat2, dt: f64, q: f64) -> ([f64; 2], Mat2) {
    let f = [[1.0, dt], [0.0, 1.0]];
    let x = [x[0] + dt * x[1], x[1]];
    let fpft = mat2_mul(&mat2_mul(&f, &p), &transpose(&f));
    let qm = [
        [q * dt.powi(3) / 3.0, q * dt.powi(2) / 2.0],
        [q * dt.powi(2) / 2.0, q * dt],
    ];
    let mut p = fpft;
    for i in 0..2 {
        for j in 0..2 {
            p[i][j] += qm[i][j];
        }
    }
    (x, p)
}

pub(crate) fn kalman_update(x: [f64; 2], p: Mat2, z: f64, r: f64) -> ([f64; 2], Mat2) {
    // H = [1 0].
    let s = p[0][0] + r;
    let k = [p[0][0] / s, p[1][0] / s];
    let y = z - x[0];
    let x = [x[0] + k[0] * y, x[1] + k[1] * y];
    let i_kh = [[1.0 - k[0], 0.0], [-k[1], 1.0]];
    (x, mat2_mul(&i_kh, &p))
}

/// Quaternion `[w, x, y, z]`.
pub(crate) type Quat = [f64; 4];

pub(crate) fn qmul(a: Quat, b: Quat) -> Quat {
    // From the vector form: (s1 s2 - v1·v2, s1 v2 + s2 v1 + v1 × v2).
    let (s1, v1) = (a[0], [a[1], a[2], a[3]]);
    let (s2, v2) = (b[0], [b[1], b[2], b[3]]);
    let dot = v1[0] * v2[0] + v1[1] * v2[1] + v1[2] * v2[2];
    let c = cross(v1, v2);
    [
        s1 * s2 - dot,
        s1 * v2[0] + s2 * v1[0] + c[0],
        s1 * v2[1] + s2 * v1[1] + c[1],
        s1 * v2[2] + s2 * v1[2] + c[2],
    ]
}

pub(crate) fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

pub(crate) fn qconj(q: Quat) -> Quat {
    [q[0], -q[1], -q[2], -q[3]]
}

pub(crate) fn qnorm(q: Quat) -> f64 {
    q.iter().map(|c| c * c).sum::<f64>().sqrt()
}

/// Normalised, or the identity below `eps`.
pub(crate) fn qnormalize(q: Quat, eps: f64) -> Quat {
    let n = qnorm(q);
    if n < eps {
        [1.0, 0.0, 0.0, 0.0]
    } else {
        q.map(|c| c / n)
    }
}

/// `q v q*` by two Hamilton products.
pub(crate) fn qrotate(q: Quat, v: [f64; 3]) -> [f64; 3] {
    let r = qmul(qmul(q, [0.0, v[0], v[1], v[2]]), qconj(q));
    [r[1], r[2], r[3]]
}

pub(crate) fn qfrom_axis_angle(axis: [f64; 3], angle: f64, eps: f64) -> Quat {
    let n = (axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]).sqrt();
    if n < eps {
        return [1.0, 0.0, 0.0, 0.0];
    }
    let (s, c) = (angle / 2.0).sin_cos();
    [c, s * axis[0] / n, s * axis[1] / n, s * axis[2] / n]
}

/// Slerp as `a (a* b)^t` (the geodesic form), with the short-arc flip and, above
/// `threshold`, normalised lerp.
pub(crate) fn qslerp(a: Quat, b: Quat, t: f64, threshold: f64) -> Quat {
    let mut b = b;
    let mut dot: f64 = (0..4).map(|i| a[i] * b[i]).sum();
    if dot < 0.0 {
        b = b.map(|c| -c);
        dot = -dot;
    }
    if dot > threshold {
        let l = [0, 1, 2, 3].map(|i| a[i] + t * (b[i] - a[i]));
        return qnormalize(l, 0.0);
    }
    // delta = a* b = (cos θ, sin θ · n); delta^t = (cos tθ, sin tθ · n).
    let delta = qmul(qconj(a), b);
    let theta = delta[0].clamp(-1.0, 1.0).acos();
    let vn = (delta[1] * delta[1] + delta[2] * delta[2] + delta[3] * delta[3]).sqrt();
    let (s, c) = (t * theta).sin_cos();
    let power = [c, s * delta[1] / vn, s * delta[2] / vn, s * delta[3] / vn];
    qmul(a, power)
}

/// Row-major rotation matrix of a unit quaternion, from the rotated basis vectors.
pub(crate) fn qto_rotmat(q: Quat) -> [f64; 9] {
    let q = qnormalize(q, 0.0);
    let ex = qrotate(q, [1.0, 0.0, 0.0]);
    let ey = qrotate(q, [0.0, 1.0, 0.0]);
    let ez = qrotate(q, [0.0, 0.0, 1.0]);
    // Columns are the images of the basis vectors.
    [ex[0], ey[0], ez[0], ex[1], ey[1], ez[1], ex[2], ey[2], ez[2]]
}

/// Quaternion of a rotation matrix through its axis and angle (Rodrigues), sign `w >= 0`.
pub(crate) fn rotmat_to_quat(m: [f64; 9]) -> Quat {
    let trace = m[0] + m[4] + m[8];
    let cos = ((trace - 1.0) / 2.0).clamp(-1.0, 1.0);
    let angle = cos.acos();
    if angle < 1e-9 {
        return [1.0, 0.0, 0.0, 0.0];
    }
    let axis = if angle < PI - 1e-3 {
        let v = [m[7] - m[5], m[2] - m[6], m[3] - m[1]];
        let n = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
        v.map(|c| c / n)
    } else {
        // Near π: M ≈ 2 n nᵀ - I; take the largest column of (M + I)/2.
        let b = [
            [(m[0] + 1.0) / 2.0, m[1] / 2.0, m[2] / 2.0],
            [m[3] / 2.0, (m[4] + 1.0) / 2.0, m[5] / 2.0],
            [m[6] / 2.0, m[7] / 2.0, (m[8] + 1.0) / 2.0],
        ];
        let k = (0..3)
            .max_by(|&i, &j| b[i][i].total_cmp(&b[j][j]))
            .expect("three rows");
        let n = b[k][k].sqrt();
        let mut v = [b[0][k] / n, b[1][k] / n, b[2][k] / n];
        // Fix the sign with the antisymmetric part when it is not zero.
        let s = [m[7] - m[5], m[2] - m[6], m[3] - m[1]];
        if v[0] * s[0] + v[1] * s[1] + v[2] * s[2] < 0.0 {
            v = v.map(|c| -c);
        }
        v
    };
    let q = qfrom_axis_angle(axis, angle, 0.0);
    if q[0] < 0.0 { q.map(|c| -c) } else { q }
}

pub(crate) fn fk_planar2(l1: f64, l2: f64, q1: f64, q2: f64) -> [f64; 2] {
    // Sum of link vectors, each rotated by its absolute angle.
    let joint = [l1 * q1.cos(), l1 * q1.sin()];
    let a = q1 + q2;
    [joint[0] + l2 * a.cos(), joint[1] + l2 * a.sin()]
}

/// `(a, alpha, d, offset)`.
pub(crate) type Dh = (f64, f64, f64, f64);

type Mat4 = [[f64; 4]; 4];

fn dh_matrix(p: Dh, q: f64) -> Mat4 {
    let (a, alpha, d, offset) = p;
    let (st, ct) = (q + offset).sin_cos();
    let (sa, ca) = alpha.sin_cos();
    let rz = [
        [ct, -st, 0.0, 0.0],
        [st, ct, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ];
    let tz = [
        [1.0, 0.0, 0.0, 0.0],
        [0.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, d],
        [0.0, 0.0, 0.0, 1.0],
    ];
    let tx = [
        [1.0, 0.0, 0.0, a],
        [0.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ];
    let rx = [
        [1.0, 0.0, 0.0, 0.0],
        [0.0, ca, -sa, 0.0],
        [0.0, sa, ca, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ];
    mat4_mul(&mat4_mul(&mat4_mul(&rz, &tz), &tx), &rx)
}

fn mat4_mul(a: &Mat4, b: &Mat4) -> Mat4 {
    let mut c = [[0.0; 4]; 4];
    for i in 0..4 {
        for j in 0..4 {
            for k in 0..4 {
                c[i][j] += a[i][k] * b[k][j];
            }
        }
    }
    c
}

/// The end-effector position of a DH chain: the last column of the product of 4×4 matrices.
pub(crate) fn fk_dh(params: &[Dh], q: &[f64]) -> [f64; 3] {
    let mut t = [[0.0; 4]; 4];
    for (i, row) in t.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for (p, &qi) in params.iter().zip(q) {
        t = mat4_mul(&t, &dh_matrix(*p, qi));
    }
    [t[0][3], t[1][3], t[2][3]]
}

/// The geometric (position) Jacobian of a revolute DH chain: column `i` is
/// `z_{i-1} × (p_end - p_{i-1})`. Returned row-major, `[3][n]`.
pub(crate) fn fk_dh_jacobian(params: &[Dh], q: &[f64]) -> Vec<[f64; 3]> {
    let mut frames = Vec::with_capacity(params.len() + 1);
    let mut t = [[0.0; 4]; 4];
    for (i, row) in t.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    frames.push(t);
    for (p, &qi) in params.iter().zip(q) {
        t = mat4_mul(&t, &dh_matrix(*p, qi));
        frames.push(t);
    }
    let end = [t[0][3], t[1][3], t[2][3]];
    (0..params.len())
        .map(|i| {
            let f = &frames[i];
            let z = [f[0][2], f[1][2], f[2][2]];
            let o = [f[0][3], f[1][3], f[2][3]];
            cross(z, [end[0] - o[0], end[1] - o[1], end[2] - o[2]])
        })
        .collect()
}

/// Central finite differences of `f` at `q`, step `h`: `[output][input]`.
pub(crate) fn central_differences<const O: usize>(
    f: impl Fn(&[f64]) -> [f64; O],
    q: &[f64],
    h: f64,
) -> Vec<[f64; O]> {
    (0..q.len())
        .map(|j| {
            let mut plus = q.to_vec();
            let mut minus = q.to_vec();
            plus[j] += h;
            minus[j] -= h;
            let (fp, fm) = (f(&plus), f(&minus));
            std::array::from_fn(|o| (fp[o] - fm[o]) / (2.0 * h))
        })
        .collect()
}

/// `½ Σ q (x - x_ref)² + ½ Σ r u²` and its gradients by hand.
pub(crate) fn tracking_cost(
    x: &[f64],
    x_ref: &[f64],
    u: &[f64],
    q: f64,
    r: f64,
) -> (f64, Vec<f64>, Vec<f64>) {
    let mut cost = 0.0;
    let mut gx = Vec::with_capacity(x.len());
    for (xi, ri) in x.iter().zip(x_ref) {
        cost += 0.5 * q * (xi - ri).powi(2);
        gx.push(q * (xi - ri));
    }
    let mut gu = Vec::with_capacity(u.len());
    for ui in u {
        cost += 0.5 * r * ui * ui;
        gu.push(r * ui);
    }
    (cost, gx, gu)
}
