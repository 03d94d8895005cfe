//! The four kernels as hand-written, straight-line `f64` Rust.
//!
//! `quat_local_coords`, `quat_interpolate` and `integrate_imu` follow the structure of
//! wrenfold's hand-written C++ (`benchmarks/*_handwritten.h` in wrenfold-benchmarks): the
//! chain rule through 4×4 quaternion-product derivatives, the 4×3 derivative of the right
//! retraction `q ∘ Exp(δ)` and the 3×4 derivative of the right local coordinates, with no
//! small-angle branches. Two deliberate differences: quaternions are stored `[w, x, y, z]`
//! (rfx's order) and every derivative is written for that order, and the local coordinates
//! take the shorter arc (the sign of `q0⁻¹ ∘ q1` is normalised to `w ≥ 0`), as wrenfold's
//! generated code and `rfx::lie::so3_log` do. wrenfold publishes no hand-written rolling
//! shutter projection (its comparison there is Ceres' automatic differentiation), so
//! `integrate_and_project` is written here with the same right-perturbation chain rule.
//!
//! Matrices are arrays of rows; every output matrix is written row-major.

/// A quaternion `[w, x, y, z]`.
pub type Quat = [f64; 4];
/// A 3-vector.
pub type V3 = [f64; 3];
/// An `R × C` matrix, row by row.
pub type Mat<const R: usize, const C: usize> = [[f64; C]; R];

/// `a · b`.
#[inline(always)]
pub fn mm<const R: usize, const K: usize, const C: usize>(a: &Mat<R, K>, b: &Mat<K, C>) -> Mat<R, C> {
    let mut out = [[0.0; C]; R];
    for i in 0..R {
        for j in 0..C {
            let mut acc = 0.0;
            for k in 0..K {
                acc += a[i][k] * b[k][j];
            }
            out[i][j] = acc;
        }
    }
    out
}

#[inline(always)]
fn mv<const R: usize, const C: usize>(a: &Mat<R, C>, v: &[f64; C]) -> [f64; R] {
    let mut out = [0.0; R];
    for i in 0..R {
        let mut acc = 0.0;
        for k in 0..C {
            acc += a[i][k] * v[k];
        }
        out[i] = acc;
    }
    out
}

#[inline(always)]
fn scale<const R: usize, const C: usize>(a: &Mat<R, C>, s: f64) -> Mat<R, C> {
    a.map(|row| row.map(|x| x * s))
}

#[inline(always)]
fn add<const R: usize, const C: usize>(a: &Mat<R, C>, b: &Mat<R, C>) -> Mat<R, C> {
    std::array::from_fn(|i| std::array::from_fn(|j| a[i][j] + b[i][j]))
}

#[inline(always)]
fn transpose<const R: usize, const C: usize>(a: &Mat<R, C>) -> Mat<C, R> {
    std::array::from_fn(|i| std::array::from_fn(|j| a[j][i]))
}

#[inline(always)]
fn skew(v: V3) -> Mat<3, 3> {
    [[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]]
}

const I3: Mat<3, 3> = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];

/// The Hamilton product `a ∘ b`.
#[inline(always)]
pub fn quat_mul(a: Quat, b: Quat) -> Quat {
    let [aw, ax, ay, az] = a;
    let [bw, bx, by, bz] = b;
    [
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ]
}

/// `L(a)`: `a ∘ b = L(a) b`, the derivative of the product with respect to `b`.
#[inline(always)]
fn left_mat(a: Quat) -> Mat<4, 4> {
    let [w, x, y, z] = a;
    [[w, -x, -y, -z], [x, w, -z, y], [y, z, w, -x], [z, -y, x, w]]
}

/// `R(b)`: `a ∘ b = R(b) a`, the derivative of the product with respect to `a`.
#[inline(always)]
fn right_mat(b: Quat) -> Mat<4, 4> {
    let [w, x, y, z] = b;
    [[w, -x, -y, -z], [x, w, z, -y], [y, -z, w, x], [z, y, -x, w]]
}

/// `d[q ∘ Exp(δ)]/dδ` at `δ = 0` (4×3).
#[inline(always)]
pub fn retract_derivative(q: Quat) -> Mat<4, 3> {
    let [w, x, y, z] = q.map(|c| c * 0.5);
    [[-x, -y, -z], [w, -z, y], [z, w, -x], [-y, x, w]]
}

/// `d Log(q⁻¹ ∘ (q + dq)) / d dq` at `dq = 0` (3×4).
#[inline(always)]
pub fn local_coordinates_derivative(q: Quat) -> Mat<3, 4> {
    let [w, x, y, z] = q.map(|c| c * 2.0);
    [[-x, w, z, -y], [-y, -z, w, x], [-z, y, -x, w]]
}

/// The rotation matrix of a unit quaternion.
#[inline(always)]
pub fn rotation_matrix(q: Quat) -> Mat<3, 3> {
    let [w, x, y, z] = q;
    [
        [
            1.0 - 2.0 * (y * y + z * z),
            2.0 * (x * y - w * z),
            2.0 * (x * z + w * y),
        ],
        [
            2.0 * (x * y + w * z),
            1.0 - 2.0 * (x * x + z * z),
            2.0 * (y * z - w * x),
        ],
        [
            2.0 * (x * z - w * y),
            2.0 * (y * z + w * x),
            1.0 - 2.0 * (x * x + y * y),
        ],
    ]
}

/// `v / ‖v‖`, `‖v‖`, and their derivatives with respect to `v`.
#[inline(always)]
fn normalize(v: V3) -> (f64, V3, [f64; 3], Mat<3, 3>) {
    let n = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    let u = v.map(|c| c / n);
    let n_d_v = u;
    let inv = 1.0 / n;
    let u_d_v = std::array::from_fn(|i| std::array::from_fn(|j| (I3[i][j] - u[i] * u[j]) * inv));
    (n, u, n_d_v, u_d_v)
}

/// `Log(q)` (no small-angle branch) and its 3×4 derivative with respect to `[w, x, y, z]`.
#[inline(always)]
fn quaternion_log(q: Quat) -> (V3, Mat<3, 4>) {
    let (n, u, n_d_v, u_d_v) = normalize([q[1], q[2], q[3]]);
    let w = q[0];
    let angle = 2.0 * n.atan2(w);
    let denom = n * n + w * w;
    let angle_d_n = 2.0 * w / denom;
    let angle_d_w = -2.0 * n / denom;
    let mut d = [[0.0; 4]; 3];
    for i in 0..3 {
        d[i][0] = u[i] * angle_d_w;
        for j in 0..3 {
            d[i][j + 1] = u_d_v[i][j] * angle + u[i] * angle_d_n * n_d_v[j];
        }
    }
    (u.map(|c| c * angle), d)
}

/// `Exp(w)` (no small-angle branch) and its 4×3 derivative with respect to `w`.
#[inline(always)]
fn quaternion_exp(w: V3) -> (Quat, Mat<4, 3>) {
    let (angle, u, angle_d_w, u_d_w) = normalize(w);
    let (s, c) = (angle * 0.5).sin_cos();
    let mut d = [[0.0; 3]; 4];
    for j in 0..3 {
        d[0][j] = -0.5 * s * angle_d_w[j];
        for i in 0..3 {
            d[i + 1][j] = s * u_d_w[i][j] + u[i] * 0.5 * c * angle_d_w[j];
        }
    }
    ([c, s * u[0], s * u[1], s * u[2]], d)
}

/// `Log(q0⁻¹ ∘ q1)` on the shorter arc and its right-tangent Jacobians with respect to `q0`
/// and `q1` (wrenfold's `QuatLocalCoords`).
#[inline(always)]
pub fn quat_local_coords(q0: Quat, q1: Quat) -> (V3, Mat<3, 3>, Mat<3, 3>) {
    let conj0 = [q0[0], -q0[1], -q0[2], -q0[3]];
    let delta = quat_mul(conj0, q1);
    let sign = if delta[0] < 0.0 { -1.0 } else { 1.0 };
    let (w, w_d_delta) = quaternion_log(delta.map(|c| c * sign));
    let w_d_delta = scale(&w_d_delta, sign);
    // d(q0⁻¹ ∘ q1)/dq0: the product's derivative with respect to its first factor, with the
    // conjugate's sign flips on x, y, z.
    let r1 = right_mat(q1);
    let delta_d_q0: Mat<4, 4> = std::array::from_fn(|i| [r1[i][0], -r1[i][1], -r1[i][2], -r1[i][3]]);
    let delta_d_q1 = left_mat(conj0);
    let d0 = mm(&mm(&w_d_delta, &delta_d_q0), &retract_derivative(q0));
    let d1 = mm(&mm(&w_d_delta, &delta_d_q1), &retract_derivative(q1));
    (w, d0, d1)
}

/// `q0 ∘ Exp(α Log(q0⁻¹ ∘ q1))` and its right-tangent Jacobians with respect to `q0` and `q1`
/// (wrenfold's `QuatInterpolation`).
#[inline(always)]
pub fn quat_interpolate(q0: Quat, q1: Quat, alpha: f64) -> (Quat, Mat<3, 3>, Mat<3, 3>) {
    let (w01, w01_d_q0, w01_d_q1) = quat_local_coords(q0, q1);
    let (delta, delta_d_aw) = quaternion_exp(w01.map(|c| c * alpha));
    let q_out = quat_mul(q0, delta);
    let out_d_w01 = scale(&mm(&left_mat(q0), &delta_d_aw), alpha);
    let lcd = local_coordinates_derivative(q_out);
    let out_d_q0 = mm(&right_mat(delta), &retract_derivative(q0));
    let d0 = add(&mm(&lcd, &out_d_q0), &mm(&lcd, &mm(&out_d_w01, &w01_d_q0)));
    let d1 = mm(&mm(&lcd, &out_d_w01), &w01_d_q1);
    (q_out, d0, d1)
}

/// The 3×4 derivative of `R(q) v` with respect to `[w, x, y, z]` (the polynomial rotation
/// matrix differentiated entry by entry).
#[inline(always)]
fn rotation_vec_derivative(q: Quat, v: V3) -> Mat<3, 4> {
    let [w, x, y, z] = q;
    let [a, b, c] = v;
    [
        [
            2.0 * (y * c - z * b),
            2.0 * (y * b + z * c),
            2.0 * (x * b + w * c) - 4.0 * y * a,
            2.0 * (x * c - w * b) - 4.0 * z * a,
        ],
        [
            2.0 * (z * a - x * c),
            2.0 * (y * a - w * c) - 4.0 * x * b,
            2.0 * (x * a + z * c),
            2.0 * (w * a + y * c) - 4.0 * z * b,
        ],
        [
            2.0 * (x * b - y * a),
            2.0 * (z * a + w * b) - 4.0 * x * c,
            2.0 * (z * b - w * a) - 4.0 * y * c,
            2.0 * (x * a + y * b),
        ],
    ]
}

/// The outputs of [`integrate_imu`].
#[derive(Clone, Copy, Debug)]
pub struct ImuOut {
    /// `i_R_k`, `[w, x, y, z]`.
    pub i_r_k: Quat,
    /// `i_p_k`.
    pub i_p_k: V3,
    /// `i_v_k`.
    pub i_v_k: V3,
    /// `∂(R, p, v)_k / ∂(R, p, v)_j`, 9×9.
    pub k_d_j: Mat<9, 9>,
    /// `∂(R, p, v)_k / ∂(gyro, accel)`, 9×6.
    pub k_d_measurements: Mat<9, 6>,
    /// `∂(R, p, v)_k / ∂(gyro bias, accel bias)`, 9×6.
    pub k_d_bias: Mat<9, 6>,
}

/// One IMU preintegration step with its Jacobians (wrenfold's `ImuIntegration`): rotation
/// `i_R_k = i_R_j ∘ Exp((ω - b_g) dt)`, position and velocity by Euler integration of the
/// unbiased acceleration rotated into frame `i`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn integrate_imu(
    i_r_j: Quat,
    i_p_j: V3,
    i_v_j: V3,
    gyro_bias: V3,
    accel_bias: V3,
    angular_velocity: V3,
    linear_acceleration: V3,
    dt: f64,
) -> ImuOut {
    let w_unbiased: V3 = std::array::from_fn(|i| angular_velocity[i] - gyro_bias[i]);
    let (j_r_k, j_r_k_d_wdt) = quaternion_exp(w_unbiased.map(|c| c * dt));
    let i_r_k = quat_mul(i_r_j, j_r_k);
    let i_r_k_d_i_r_j = right_mat(j_r_k);
    let i_r_k_d_j_r_k = left_mat(i_r_j);

    let r = rotation_matrix(i_r_j);
    let accel: V3 = std::array::from_fn(|i| linear_acceleration[i] - accel_bias[i]);
    let accel_i = mv(&r, &accel);
    let accel_i_d_r = mm(&rotation_vec_derivative(i_r_j, accel), &retract_derivative(i_r_j));

    let dt2 = dt.abs() * dt / 2.0;
    let i_p_k = std::array::from_fn(|i| i_p_j[i] + i_v_j[i] * dt + accel_i[i] * dt2);
    let i_v_k = std::array::from_fn(|i| i_v_j[i] + accel_i[i] * dt);

    let lcd = local_coordinates_derivative(i_r_k);
    let rot_d_rot = mm(&mm(&lcd, &i_r_k_d_i_r_j), &retract_derivative(i_r_j));
    let rot_d_gyro = scale(&mm(&mm(&lcd, &i_r_k_d_j_r_k), &j_r_k_d_wdt), dt);
    let mut k_d_j = [[0.0; 9]; 9];
    let mut k_d_measurements = [[0.0; 6]; 9];
    for i in 0..3 {
        for j in 0..3 {
            k_d_j[i][j] = rot_d_rot[i][j];
            k_d_j[3 + i][j] = accel_i_d_r[i][j] * dt2;
            k_d_j[6 + i][j] = accel_i_d_r[i][j] * dt;
            k_d_measurements[i][j] = rot_d_gyro[i][j];
            k_d_measurements[3 + i][3 + j] = r[i][j] * dt2;
            k_d_measurements[6 + i][3 + j] = r[i][j] * dt;
        }
        k_d_j[3 + i][3 + i] = 1.0;
        k_d_j[3 + i][6 + i] = dt;
        k_d_j[6 + i][6 + i] = 1.0;
    }
    let k_d_bias = scale(&k_d_measurements, -1.0);
    ImuOut {
        i_r_k,
        i_p_k,
        i_v_k,
        k_d_j,
        k_d_measurements,
        k_d_bias,
    }
}

/// The OpenCV-style camera of wrenfold's benchmark: `fx, fy, cx, cy`, radial `k1, k2, k3`,
/// tangential `p1, p2`, in that order.
pub type Camera = [f64; 9];

/// The outputs of [`integrate_and_project`]: the pixel and its 2×3 Jacobians.
#[derive(Clone, Copy, Debug)]
pub struct ProjectionOut {
    /// The pixel `[u, v]`.
    pub p_image: [f64; 2],
    /// With respect to `world_R_imu` (right tangent), `world_t_imu`, `imu_R_cam` (right
    /// tangent), `imu_t_cam`, `angular_velocity_imu`, `world_v_imu`, `p_world`, in that order.
    pub jacobians: [Mat<2, 3>; 7],
}

/// The distorted pixel of a camera-frame point and its 2×3 derivative.
#[inline(always)]
fn project(p: V3, cam: &Camera) -> ([f64; 2], Mat<2, 3>) {
    let [fx, fy, cx, cy, k1, k2, k3, p1, p2] = *cam;
    let inv_z = 1.0 / p[2];
    let (x, y) = (p[0] * inv_z, p[1] * inv_z);
    let r2 = x * x + y * y;
    let radial = 1.0 + k1 * r2 + k2 * r2 * r2 + k3 * r2 * r2 * r2;
    let radial_d_r2 = k1 + 2.0 * k2 * r2 + 3.0 * k3 * r2 * r2;
    let xd = radial * x + 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x);
    let yd = radial * y + 2.0 * p1 * (r2 + 2.0 * y * y) + p2 * x * y;
    // d(xd, yd)/d(x, y), scaled by the focal lengths.
    let d = [
        [
            fx * (radial + 2.0 * x * x * radial_d_r2 + 2.0 * p1 * y + 6.0 * p2 * x),
            fx * (2.0 * x * y * radial_d_r2 + 2.0 * p1 * x + 2.0 * p2 * y),
        ],
        [
            fy * (2.0 * x * y * radial_d_r2 + 4.0 * p1 * x + p2 * y),
            fy * (radial + 2.0 * y * y * radial_d_r2 + 12.0 * p1 * y + p2 * x),
        ],
    ];
    // d(x, y)/dp.
    let xy_d_p = [[inv_z, 0.0, -x * inv_z], [0.0, inv_z, -y * inv_z]];
    ([xd * fx + cx, yd * fy + cy], mm(&d, &xy_d_p))
}

/// wrenfold's `RollingShutterCamera`: the IMU pose integrated to a row's time at constant
/// velocity, the camera extrinsics applied, and the world point projected, with the Jacobians
/// of the pixel with respect to every input but the row time and the camera.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn integrate_and_project(
    world_r_imu: Quat,
    world_t_imu: V3,
    imu_r_cam: Quat,
    imu_t_cam: V3,
    angular_velocity_imu: V3,
    world_v_imu: V3,
    p_world: V3,
    row_time: f64,
    camera: &Camera,
) -> ProjectionOut {
    let wt = angular_velocity_imu.map(|c| c * row_time);
    let (e, _) = quaternion_exp(wt);
    let r_row = quat_mul(world_r_imu, e);
    let t_row: V3 = std::array::from_fn(|i| world_t_imu[i] + world_v_imu[i] * row_time);
    let r_wc = quat_mul(r_row, imu_r_cam);
    let rm_row = rotation_matrix(r_row);
    let off = mv(&rm_row, &imu_t_cam);
    let d: V3 = std::array::from_fn(|i| p_world[i] - t_row[i] - off[i]);
    let rwc_t = transpose(&rotation_matrix(r_wc));
    let p_cam = mv(&rwc_t, &d);
    let (p_image, p_d_cam) = project(p_cam, camera);

    let d_p_world = mm(&p_d_cam, &rwc_t);
    let d_world_t = scale(&d_p_world, -1.0);
    let d_world_v = scale(&d_p_world, -row_time);
    let ric_t = transpose(&rotation_matrix(imu_r_cam));
    let d_imu_t_cam = scale(&mm(&p_d_cam, &ric_t), -1.0);
    let p_cam_skew = skew(p_cam);
    let d_imu_r_cam = mm(&p_d_cam, &p_cam_skew);
    // d p_cam / dδ for a right perturbation of the pose at the row.
    let cam_d_row = add(&mm(&p_cam_skew, &ric_t), &mm(&ric_t, &skew(imu_t_cam)));
    let p_d_row = mm(&p_d_cam, &cam_d_row);
    let d_world_r = mm(&p_d_row, &transpose(&rotation_matrix(e)));
    let d_angular = scale(&mm(&p_d_row, &so3_jr(wt)), row_time);
    ProjectionOut {
        p_image,
        jacobians: [
            d_world_r,
            d_world_t,
            d_imu_r_cam,
            d_imu_t_cam,
            d_angular,
            d_world_v,
            d_p_world,
        ],
    }
}

/// The right Jacobian of `Exp`: `I - a [w]× + b [w]×²` with `a = (1 - cos θ)/θ²` and
/// `b = (θ - sin θ)/θ³`, both from their Taylor series below `θ = 0.2` (where the closed forms
/// cancel; the row-time rotation of the benchmark is a few milliradians).
#[inline(always)]
fn so3_jr(w: V3) -> Mat<3, 3> {
    let t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2];
    let (a, b) = if t2 < 0.04 {
        (
            0.5 - t2 / 24.0 * (1.0 - t2 / 30.0 * (1.0 - t2 / 56.0 * (1.0 - t2 / 90.0))),
            (1.0 - t2 / 20.0 * (1.0 - t2 / 42.0 * (1.0 - t2 / 72.0 * (1.0 - t2 / 110.0)))) / 6.0,
        )
    } else {
        let theta = t2.sqrt();
        ((1.0 - theta.cos()) / t2, (theta - theta.sin()) / (t2 * theta))
    };
    let k = skew(w);
    let k2 = mm(&k, &k);
    std::array::from_fn(|i| std::array::from_fn(|j| I3[i][j] - a * k[i][j] + b * k2[i][j]))
}
