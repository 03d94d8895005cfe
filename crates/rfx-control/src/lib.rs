//! `rfx-control`: ready-made control kernels built with rfx's tracing API, batched over N
//! robots or joints, with their gradients.
//!
//! **Owns:** the kernel library below and the glue it needs on top of the
//! facade ([`ControlKernel`]: named outputs, more than six inputs, a value and its gradients
//! stitched into one kernel), and kinematic chains read from URDF ([`Chain`]). **Depends on:**
//! `rfx` (the facade), `rfx-ir` (HIR, to stitch kernels) and `urdf-rs` (to parse URDF).
//! **May not depend on:** the compiler crates directly.
//!
//! # Conventions
//!
//! - **Struct of arrays.** Every kernel is elementwise over a batch: each scalar quantity is
//!   its own array of N elements (a quaternion is four arrays `w, x, y, z`; a 2×2 covariance
//!   three). All inputs of one call have one shape, except inputs documented as broadcasting
//!   (gains, `alpha`, `dt`, `t`), which may also be `[]`. N = 1 is a single robot. The
//!   exception is [`kalman_filter`], whose states, covariances and model are vectors and
//!   matrices (`[N, n]`, `[N, n, n]`), as a model of any size needs.
//! - **f32 and f64.** Each constructor returns an [`rfx::Jit`] that compiles one kernel per
//!   input signature: call it with `f32` arrays or `f64` arrays (all inputs one dtype).
//!   Constants of the kernel (gains, DH parameters, noise variances) are Rust `f64` values
//!   captured when the kernel is traced; to change one, build a new kernel. The kernels that
//!   take their parameters as an input instead ([`pid_tunable`], [`biquad`], [`alpha_beta`],
//!   [`kalman_filter`]) are retuned by writing new numbers into that input: no new compile.
//! - **State in, state out.** A kernel that carries state from one call to the next (a
//!   controller's integral, a filter's delays) takes it as an input named `state` `[.., S]`
//!   (the batch shape, then the `S` components along the last axis) and returns the updated
//!   state as an output named `state_next` of the same shape and dtype. The caller keeps two
//!   buffers and swaps them after each call (`std::mem::swap(&mut state, &mut state_next)`,
//!   no copy), so a bound call ([`rfx::BoundKernel::run_slices`]) allocates nothing. The
//!   meaning of each component is the kernel's ([`PID_STATE`], [`BIQUAD_STATE`],
//!   [`ALPHA_BETA_STATE`]), with helpers for a starting state ([`PidGains::initial_state`],
//!   [`biquad_rest_state`]). The older kernels ([`pid`], [`low_pass`], the Kalman steps) name
//!   their state inputs and outputs one by one instead.
//! - **Calls.** [`rfx::Jit::call`] for convenience (`[&[f64]; K]` arrays of slices work for
//!   any K), or [`rfx::Jit::bind`] for the real-time handle ([`rfx::BoundKernel::run_slices`]
//!   allocates nothing once warmed up). Outputs come in the order listed, with the names
//!   listed ([`ControlKernel::output_names`]).
//! - **Gradients** follow `rfx-autodiff`'s conventions (reverse mode, JAX's sub-gradients).
//!
//! # Kernels
//!
//! | constructor | inputs | outputs |
//! |---|---|---|
//! | [`pid`]`(PidConfig)` | `setpoint, measurement, prev_measurement, integral` | `command, integral` |
//! | [`pid_tunable`]`()` | `setpoint, measurement`, `params` `[.., 10]`, `state` `[.., 3]` | `command`, `state_next` `[.., 3]` (gains as an input, filtered derivative, back-calculation anti-windup) |
//! | [`low_pass`]`()` | `x, y_prev, alpha` | `y` |
//! | [`low_pass_signal`]`()` | `x` `[N, T]`, `y_prev` `[N]`, `alpha` | `y` `[N, T]`, `y_last` `[N]` (the filter run over each whole signal) |
//! | [`complementary`]`()` | `angle, gyro, accel_y, accel_z, alpha, dt` | `angle` |
//! | [`moving_average`]`()` | `window` `[N, K]` | `mean` `[N]` |
//! | [`biquad`]`()` | `x`, `coefficients` `[.., 5]`, `state` `[.., 2]` | `y`, `state_next` `[.., 2]` (a second-order IIR section; [`butterworth_low_pass`]) |
//! | [`gain_schedule`]`(x0, dx)` | `x`, `table` `[K]` | `gain` (linear interpolation in `table`) |
//! | [`path_tracking`]`()` | `x, y, heading`, `path_x, path_y` `[M]` | `segment` (`i32`), `cross_track`, `heading_error` (to the nearest point of the path) |
//! | [`kalman_predict`]`(dt, accel_var)` | `pos, vel, p00, p01, p11` | `pos, vel, p00, p01, p11` |
//! | [`kalman_update`]`(meas_var)` | `pos, vel, p00, p01, p11, z` | `pos, vel, p00, p01, p11` |
//! | [`alpha_beta`]`()` | `measurement`, `params` `[.., 3]`, `state` `[.., 2]` | `residual`, `state_next` `[.., 2]` (the α-β tracker of position and velocity) |
//! | [`kalman_filter`]`()` | `x` `[.., n]`, `p` `[.., n, n]`, `z` `[.., m]`, `f` `[n, n]`, `h` `[m, n]`, `q` `[n, n]`, `r` `[m, m]` | `x`, `p`, `nis` `[..]` (predict and update of any linear model; matrices, not arrays per entry) |
//! | [`quat_mul`]`()` | `aw, ax, ay, az, bw, bx, by, bz` | `w, x, y, z` |
//! | [`quat_conj`]`()` | `w, x, y, z` | `w, x, y, z` |
//! | [`quat_normalize`]`()` | `w, x, y, z` | `w, x, y, z` (identity where `‖q‖ < 1e-12`) |
//! | [`quat_rotate`]`()` | `w, x, y, z, vx, vy, vz` | `x, y, z` |
//! | [`quat_from_axis_angle`]`()` | `ax, ay, az, angle` | `w, x, y, z` |
//! | [`quat_slerp`]`()` | `aw, ax, ay, az, bw, bx, by, bz, t` | `w, x, y, z` |
//! | [`quat_to_rotmat`]`()` | `w, x, y, z` | `m00, m01, m02, m10, m11, m12, m20, m21, m22` |
//! | [`rotmat_to_quat`]`()` | `m00` … `m22` (row-major) | `w, x, y, z` (`w >= 0`) |
//! | [`fk_planar2`]`(l1, l2)` | `q1, q2` | `x, y` |
//! | [`fk_planar2_jacobian`]`(l1, l2)` | `q1, q2` | `x, y, jac_x_q1, jac_x_q2, jac_y_q1, jac_y_q2` |
//! | [`fk_dh6`]`([DhParam; 6])` | `q1` … `q6` | `x, y, z` |
//! | [`fk_dh6_jacobian`]`([DhParam; 6])` | `q1` … `q6` | `x, y, z, jac_x_q1` … `jac_z_q6` (21) |
//! | [`Chain::kernel`]`(link, outputs)` (a [`Chain`] read from URDF) | `q` `[.., n]` | `transform` `[.., 4, 4]`, `pose` `[.., 7]`, `jacobian` `[.., 6, n]` (any of them; see [`Chain`]) |
//! | [`tracking_cost`]`()` | `x, x_ref, u, q, r` | `cost` (scalar) |
//! | [`tracking_cost_grad`]`()` | `x, x_ref, u, q, r` | `cost, grad_x, grad_u` |
//!
//! Quaternions are `(w, x, y, z)`, scalar first, Hamilton convention (`i·j = k`), and rotate
//! vectors actively (`v' = q ⊗ v ⊗ q*`). Angles are radians. Edge cases: [`quat_normalize`] and
//! [`quat_from_axis_angle`] return the identity below a norm of [`NORM_EPS`]; [`quat_slerp`]
//! takes the short arc (flipping `b` where `a·b < 0`) and falls back to normalised lerp above
//! `|a·b| = ` [`SLERP_LERP_THRESHOLD`]. The Jacobians of the arm kernels are exact derivatives
//! of the traced kinematics (no finite differences), also at singular configurations.
//!
//! # Example
//!
//! ```
//! use rfx_control::{PidConfig, pid};
//!
//! let config = PidConfig {
//!     kp: 2.0, ki: 1.0, kd: 0.1, dt: 0.001,
//!     integral_min: -1.0, integral_max: 1.0, command_min: -5.0, command_max: 5.0,
//! };
//! let step = pid(config);
//! let out = step.call([&[1.0f64, 0.0][..], &[0.0, 0.5], &[0.0, 0.5], &[0.0, 0.0]])?;
//! let command = out[0].as_slice::<f64>().expect("f64");
//! assert!((command[0] - (2.0 * 1.0 + 1.0 * 0.001 * 1.0)).abs() < 1e-12);
//! # Ok::<(), rfx::JitError>(())
//! ```
#![deny(missing_docs)]

mod arm;
mod build;
mod chain;
mod cost;
mod filter;
mod kalman;
mod observer;
mod path;
mod pid;
mod quat;
mod schedule;
mod state;

pub use arm::{
    DhParam, UR5, fk_dh6, fk_dh6_jacobian, fk_dh6_jacobian_outputs, fk_planar2, fk_planar2_jacobian,
};
pub use build::ControlKernel;
pub use chain::{Chain, ChainError, ChainJoint, ChainKernel, ChainOutput, JointKind};
pub use cost::{tracking_cost, tracking_cost_grad};
pub use filter::{
    BIQUAD_COEFFICIENTS, BIQUAD_STATE, biquad, biquad_rest_state, butterworth_low_pass, complementary,
    low_pass, low_pass_alpha, low_pass_signal, moving_average,
};
pub use kalman::{kalman_filter, kalman_predict, kalman_update};
pub use observer::{ALPHA_BETA_PARAMS, ALPHA_BETA_STATE, alpha_beta};
pub use path::path_tracking;
pub use pid::{PID_PARAMS, PID_STATE, PidConfig, PidGains, pid, pid_tunable};
pub use quat::{
    NORM_EPS, SLERP_LERP_THRESHOLD, quat_conj, quat_from_axis_angle, quat_mul, quat_normalize, quat_rotate,
    quat_slerp, quat_to_rotmat, rotmat_to_quat,
};
pub use schedule::gain_schedule;

/// What every constructor returns: a jit of a [`ControlKernel`].
pub type ControlJit = rfx::Jit<ControlKernel>;
