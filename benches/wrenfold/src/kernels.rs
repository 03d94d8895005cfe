//! The four kernels traced with rfx, written for one example: `rfx::lie`'s SO(3) operations and
//! its closed-form tangent-space Jacobians (`Exp` and `Log` each with theirs, sharing one
//! transcendental evaluation), composed by the chain rule on the right tangent
//! (`q ∘ Exp(δ)`), as wrenfold's outputs are defined. `vmap` maps them over a batch.
//!
//! Quaternions are `[w, x, y, z]`; matrices are `[rows, cols]`.

use rfx::lie::{self, Side};
use rfx::{DType, Kernel, Tensor, TensorType, Trace, TraceError, concat};

/// One of the benchmark's kernels: its name, its inputs' shapes and its outputs' shapes (one
/// example each).
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// wrenfold's name of the benchmark.
    pub name: &'static str,
    /// `(name, shape)` of every input.
    pub inputs: &'static [(&'static str, &'static [usize])],
    /// `(name, shape)` of every output.
    pub outputs: &'static [(&'static str, &'static [usize])],
    /// Which inputs the batch shares (not mapped by `vmap`): the interpolation's `alpha`, the
    /// projection's camera.
    pub shared: &'static [&'static str],
    build: fn(&[Tensor]) -> Vec<Tensor>,
}

impl Spec {
    /// The kernel for one example, traced.
    pub fn kernel(&self) -> Result<Kernel, TraceError> {
        let trace = Trace::begin(self.name);
        let inputs: Vec<Tensor> = self
            .inputs
            .iter()
            .map(|(name, dims)| trace.input(name, TensorType::new(DType::F64, dims.to_vec())))
            .collect();
        let outputs = (self.build)(&inputs);
        let named: Vec<(String, Tensor)> = self
            .outputs
            .iter()
            .zip(outputs)
            .map(|((name, _), t)| ((*name).to_string(), t))
            .collect();
        trace.finish(&named)
    }

    /// `vmap`'s `in_axes`: axis 0 for every input but the shared ones.
    pub fn in_axes(&self) -> Vec<Option<usize>> {
        self.inputs
            .iter()
            .map(|(name, _)| (!self.shared.contains(name)).then_some(0))
            .collect()
    }

    /// The elements of input `i` for one example.
    pub fn input_len(&self, i: usize) -> usize {
        self.inputs[i].1.iter().product()
    }

    /// The elements of output `j` for one example.
    pub fn output_len(&self, j: usize) -> usize {
        self.outputs[j].1.iter().product()
    }
}

const Q: &[usize] = &[4];
const V: &[usize] = &[3];
const S: &[usize] = &[];
const M3: &[usize] = &[3, 3];
const M23: &[usize] = &[2, 3];

/// `QuatLocalCoords`: `Log(q0⁻¹ ∘ q1)` and its Jacobians with respect to `q0` and `q1`.
pub const QUAT_LOCAL_COORDS: Spec = Spec {
    name: "QuatLocalCoords",
    inputs: &[("q0", Q), ("q1", Q)],
    outputs: &[("out", V), ("d0", M3), ("d1", M3)],
    shared: &[],
    build: |x| {
        let (v, d0, d1) = local_coords(x[0], x[1]);
        vec![v, d0, d1]
    },
};

/// `QuatInterpolation`: `q0 ∘ Exp(α Log(q0⁻¹ ∘ q1))` and its Jacobians with respect to `q0`
/// and `q1`.
pub const QUAT_INTERPOLATION: Spec = Spec {
    name: "QuatInterpolation",
    inputs: &[("q0", Q), ("q1", Q), ("alpha", S)],
    outputs: &[("q_out", Q), ("d0", M3), ("d1", M3)],
    shared: &["alpha"],
    build: |x| quat_interpolation(x[0], x[1], x[2]),
};

/// `ImuIntegration`: one preintegration step and its Jacobians with respect to the previous
/// state, the measurements and the biases.
pub const IMU_INTEGRATION: Spec = Spec {
    name: "ImuIntegration",
    inputs: &[
        ("i_R_j", Q),
        ("i_p_j", V),
        ("i_v_j", V),
        ("gyro_bias", V),
        ("accelerometer_bias", V),
        ("angular_velocity", V),
        ("linear_acceleration", V),
        ("dt", S),
    ],
    outputs: &[
        ("i_R_k", Q),
        ("i_p_k", V),
        ("i_v_k", V),
        ("k_D_j", &[9, 9]),
        ("k_D_measurements", &[9, 6]),
        ("k_D_bias", &[9, 6]),
    ],
    shared: &[],
    build: imu_integration,
};

/// `RollingShutterCamera`: a point projected through a camera whose pose moves at constant
/// velocity during readout, with the pixel's Jacobians with respect to the poses, the
/// velocities and the point.
pub const ROLLING_SHUTTER_CAMERA: Spec = Spec {
    name: "RollingShutterCamera",
    inputs: &[
        ("world_R_imu", Q),
        ("world_t_imu", V),
        ("imu_R_cam", Q),
        ("imu_t_cam", V),
        ("angular_velocity_imu", V),
        ("world_v_imu", V),
        ("p_world", V),
        ("row_time", S),
        ("camera", &[9]),
    ],
    outputs: &[
        ("p_image", &[2]),
        ("D_world_R_imu", M23),
        ("D_world_t_imu", M23),
        ("D_imu_R_cam", M23),
        ("D_imu_t_cam", M23),
        ("D_angular_velocity_imu", M23),
        ("D_world_v_imu", M23),
        ("D_p_world", M23),
    ],
    shared: &["camera"],
    build: rolling_shutter_camera,
};

/// The four kernels, in wrenfold's order.
pub const ALL: [Spec; 4] = [
    QUAT_LOCAL_COORDS,
    IMU_INTEGRATION,
    QUAT_INTERPOLATION,
    ROLLING_SHUTTER_CAMERA,
];

fn local_coords(q0: Tensor, q1: Tensor) -> (Tensor, Tensor, Tensor) {
    let (v, jr_inv, jl_inv) = lie::so3_log_with_jacobians(lie::so3_between(q0, q1));
    // q1 ∘ Exp(δ): Log(x ∘ Exp(δ)) = Log(x) + Jr⁻¹ δ. q0 ∘ Exp(δ): the difference becomes
    // Exp(-δ) ∘ x, so Log moves by -Jl⁻¹ δ.
    (v, -jl_inv, jr_inv)
}

fn quat_interpolation(q0: Tensor, q1: Tensor, alpha: Tensor) -> Vec<Tensor> {
    let (w01, w01_d_q0, w01_d_q1) = local_coords(q0, q1);
    let aw = w01 * alpha;
    let (delta, jr_aw, _) = lie::so3_exp_with_jacobians(aw);
    let q_out = lie::so3_compose(q0, delta);
    // q_out = q0 ∘ Exp(α w01): the right Jacobian of compose for q0, and Jr(α w01) α for w01.
    let (out_d_q0, _) = lie::so3_compose_jacobians(q0, delta, Side::Right);
    let out_d_w01 = jr_aw * alpha;
    let d0 = out_d_q0 + out_d_w01.matmul(w01_d_q0);
    let d1 = out_d_w01.matmul(w01_d_q1);
    vec![q_out, d0, d1]
}

/// A 3×3 matrix from its nine entries (scalars), row by row.
fn mat3(entries: [Tensor; 9]) -> Tensor {
    concat(&entries.map(|t| t.reshape([1])), 0).reshape([3, 3])
}

/// The 3×3 zero and identity matrices, made from a scalar of the trace.
fn zeros3(like: Tensor) -> Tensor {
    mat3([like.full_like(0.0); 9])
}

fn eye3(like: Tensor) -> Tensor {
    let (o, z) = (like.full_like(1.0), like.full_like(0.0));
    mat3([o, z, z, z, o, z, z, z, o])
}

/// A block matrix from rows of equally tall blocks.
fn blocks(rows: &[&[Tensor]]) -> Tensor {
    let rows: Vec<Tensor> = rows.iter().map(|row| concat(row, 1)).collect();
    concat(&rows, 0)
}

fn imu_integration(x: &[Tensor]) -> Vec<Tensor> {
    let [i_r_j, i_p_j, i_v_j, gyro_bias, accel_bias, omega, accel, dt] =
        [x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]];
    let w_dt = (omega - gyro_bias) * dt;
    let (j_r_k, jr_w_dt, _) = lie::so3_exp_with_jacobians(w_dt);
    let i_r_k = lie::so3_compose(i_r_j, j_r_k);
    let accel = accel - accel_bias;
    let accel_i = lie::so3_act(i_r_j, accel);
    let dt2 = dt.abs() * dt * 0.5;
    let i_p_k = i_p_j + i_v_j * dt + accel_i * dt2;
    let i_v_k = i_v_j + accel_i * dt;

    let (rot_d_rot, _) = lie::so3_compose_jacobians(i_r_j, j_r_k, Side::Right);
    let (accel_d_rot, r) = lie::so3_act_jacobians(i_r_j, accel, Side::Right);
    let (zero, eye) = (zeros3(dt), eye3(dt));
    let k_d_j = blocks(&[
        &[rot_d_rot, zero, zero],
        &[accel_d_rot * dt2, eye, eye * dt],
        &[accel_d_rot * dt, zero, eye],
    ]);
    let k_d_measurements = blocks(&[&[jr_w_dt * dt, zero], &[zero, r * dt2], &[zero, r * dt]]);
    let k_d_bias = -k_d_measurements;
    vec![i_r_k, i_p_k, i_v_k, k_d_j, k_d_measurements, k_d_bias]
}

/// `[v]×`.
fn skew(v: Tensor) -> Tensor {
    let [a, b, c] = [0, 1, 2].map(|i| v.index_axis(0, i));
    let z = a.full_like(0.0);
    mat3([z, -c, b, c, z, -a, -b, a, z])
}

/// The distorted pixel of a camera-frame point and its 2×3 derivative.
fn project(p: Tensor, camera: Tensor) -> (Tensor, Tensor) {
    let c = |i: usize| camera.index_axis(0, i);
    let [fx, fy, cx, cy, k1, k2, k3, p1, p2] = [0, 1, 2, 3, 4, 5, 6, 7, 8].map(c);
    let inv_z = p.index_axis(0, 2).recip();
    let (x, y) = (p.index_axis(0, 0) * inv_z, p.index_axis(0, 1) * inv_z);
    let r2 = x * x + y * y;
    let radial = k1 * r2 + k2 * r2 * r2 + k3 * r2 * r2 * r2 + 1.0;
    let radial_d_r2 = k1 + k2 * r2 * 2.0 + k3 * r2 * r2 * 3.0;
    let xd = radial * x + p1 * x * y * 2.0 + p2 * (r2 + x * x * 2.0);
    let yd = radial * y + p1 * (r2 + y * y * 2.0) * 2.0 + p2 * x * y;
    let xy_r = x * y * radial_d_r2 * 2.0;
    let d00 = fx * (radial + x * x * radial_d_r2 * 2.0 + p1 * y * 2.0 + p2 * x * 6.0);
    let d01 = fx * (xy_r + p1 * x * 2.0 + p2 * y * 2.0);
    let d10 = fy * (xy_r + p1 * x * 4.0 + p2 * y);
    let d11 = fy * (radial + y * y * radial_d_r2 * 2.0 + p1 * y * 12.0 + p2 * x);
    let zero = inv_z.full_like(0.0);
    let row = |a: Tensor, b: Tensor, c: Tensor| concat(&[a, b, c].map(|t| t.reshape([1])), 0);
    let xy_d_p = concat(
        &[
            row(inv_z, zero, -x * inv_z).reshape([1, 3]),
            row(zero, inv_z, -y * inv_z).reshape([1, 3]),
        ],
        0,
    );
    let d = concat(&[d00, d01, d10, d11].map(|t| t.reshape([1])), 0).reshape([2, 2]);
    let pixel = concat(&[(xd * fx + cx).reshape([1]), (yd * fy + cy).reshape([1])], 0);
    (pixel, d.matmul(xy_d_p))
}

fn rolling_shutter_camera(x: &[Tensor]) -> Vec<Tensor> {
    let [
        world_r_imu,
        world_t_imu,
        imu_r_cam,
        imu_t_cam,
        omega,
        world_v_imu,
        p_world,
        t,
        camera,
    ] = [x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8]];
    let wt = omega * t;
    let (e, jr_wt, _) = lie::so3_exp_with_jacobians(wt);
    let r_row = lie::so3_compose(world_r_imu, e);
    let t_row = world_t_imu + world_v_imu * t;
    let r_wc = lie::so3_compose(r_row, imu_r_cam);
    let d = p_world - t_row - lie::so3_act(r_row, imu_t_cam);
    let p_cam = lie::so3_act(lie::so3_inverse(r_wc), d);
    let (pixel, p_d_cam) = project(p_cam, camera);

    let rwc_t = lie::so3_to_matrix(r_wc).t();
    let d_p_world = p_d_cam.matmul(rwc_t);
    let ric_t = lie::so3_to_matrix(imu_r_cam).t();
    let p_cam_skew = skew(p_cam);
    let cam_d_row = p_cam_skew.matmul(ric_t) + ric_t.matmul(skew(imu_t_cam));
    let p_d_row = p_d_cam.matmul(cam_d_row);
    vec![
        pixel,
        p_d_row.matmul(lie::so3_to_matrix(e).t()),
        -d_p_world,
        p_d_cam.matmul(p_cam_skew),
        -p_d_cam.matmul(ric_t),
        p_d_row.matmul(jr_wt) * t,
        -d_p_world * t,
        d_p_world,
    ]
}
