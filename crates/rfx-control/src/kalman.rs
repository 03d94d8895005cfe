//! Linear Kalman filters: a constant-velocity model as elementwise arrays, and any model in
//! matrix form.

use rfx::{Jit, Tensor};

use crate::build::{ControlKernel, column, func};

const STATE: [&str; 5] = ["pos", "vel", "p00", "p01", "p11"];

/// The constant-velocity predict step, elementwise over N filters.
///
/// State `x = (pos, vel)`, covariance `P = [[p00, p01], [p01, p11]]` (symmetric, three
/// arrays). With `F = [[1, dt], [0, 1]]` and the white-noise-acceleration process noise
/// `Q = accel_var·[[dt³/3, dt²/2], [dt²/2, dt]]`: `x = F x`, `P = F P Fᵀ + Q`.
///
/// Inputs and outputs `pos`, `vel`, `p00`, `p01`, `p11`; `dt` and `accel_var` are constants
/// of the kernel.
pub fn kalman_predict(dt: f64, accel_var: f64) -> Jit<ControlKernel> {
    let step = func("kalman_predict", STATE, move |[pos, vel, p00, p01, p11]| {
        let q00 = accel_var * dt * dt * dt / 3.0;
        let q01 = accel_var * dt * dt / 2.0;
        let q11 = accel_var * dt;
        vec![
            pos + vel * dt,
            vel,
            p00 + p01 * (2.0 * dt) + p11 * (dt * dt) + q00,
            p01 + p11 * dt + q01,
            p11 + q11,
        ]
    });
    ControlKernel::new("kalman_predict", &STATE)
        .part(step, &STATE)
        .jit()
}

/// The update step with a position measurement, elementwise over N filters.
///
/// `H = [1, 0]`, measurement variance `meas_var` (a constant of the kernel):
/// `S = p00 + meas_var`, `K = (p00, p01)/S`, `x += K (z - pos)`, `P = (I - K H) P`, i.e.
/// `p00 = (1 - K0) p00`, `p01 = (1 - K0) p01`, `p11 = p11 - K1 p01`.
///
/// Inputs `pos`, `vel`, `p00`, `p01`, `p11`, `z`; outputs `pos`, `vel`, `p00`, `p01`, `p11`.
pub fn kalman_update(meas_var: f64) -> Jit<ControlKernel> {
    let inputs = ["pos", "vel", "p00", "p01", "p11", "z"];
    let step = func("kalman_update", inputs, move |[pos, vel, p00, p01, p11, z]| {
        let s = p00 + meas_var;
        let k0 = p00 / s;
        let k1 = p01 / s;
        let innovation = z - pos;
        vec![
            pos + k0 * innovation,
            vel + k1 * innovation,
            (1.0 - k0) * p00,
            (1.0 - k0) * p01,
            p11 - k1 * p01,
        ]
    });
    ControlKernel::new("kalman_update", &inputs)
        .part(step, &STATE)
        .jit()
}

/// The last two axes of `t` swapped (a batch of matrices transposed); a typed error
/// (`TypeError::Permutation`) for a tensor of fewer than two axes.
fn transposed(t: Tensor) -> Tensor {
    let rank = t.shape().rank();
    if rank < 2 {
        return t.transpose(&[1, 0]);
    }
    let mut perm: Vec<usize> = (0..rank).collect();
    perm.swap(rank - 2, rank - 1);
    t.transpose(&perm)
}

/// One predict-and-update step of a linear Kalman filter with `n` states and `m`
/// measurements, for a batch of filters: the matrix form of [`kalman_predict`] and
/// [`kalman_update`], for any model.
///
/// Inputs: the state `x` `[.., n]` and its covariance `p` `[.., n, n]`, the measurement `z`
/// `[.., m]`, and the model: the transition `f` `[n, n]`, the measurement matrix `h` `[m, n]`,
/// the process noise `q` `[n, n]` and the measurement noise `r` `[m, m]` (inputs, so a new
/// `dt` or noise level needs no recompile; each may also be batched like `p`). The step:
///
/// - predict: `x = F x`, `P = F P Fᵀ + Q`;
/// - innovation `y = z - H x` and its covariance `S = H P Hᵀ + R`;
/// - gain `K = P Hᵀ S⁻¹`, by solving `S Kᵀ = H P` (no inverse is formed);
/// - update: `x += K y`, and `P = (I - K H) P (I - K H)ᵀ + K R Kᵀ` (Joseph's form: it keeps
///   `P` symmetric and positive semi-definite under rounding, where `(I - K H) P` may not).
///
/// Outputs: `x` `[.., n]`, `p` `[.., n, n]`, and `nis` `[..]`, the normalised innovation
/// squared `yᵀ S⁻¹ y`, the usual gate for rejecting outliers (χ² with `m` degrees of freedom
/// for a consistent filter). The step is differentiable in every input (tuning `q` and `r` by
/// gradients of a likelihood). Mismatched shapes are typed errors at the first call.
pub fn kalman_filter() -> Jit<ControlKernel> {
    let inputs = ["x", "p", "z", "f", "h", "q", "r"];
    let step = func("kalman_filter", inputs, |[x, p, z, f, h, q, r]| {
        let x = f.matmul(column(x));
        let p = f.matmul(p).matmul(transposed(f)) + q;
        let y = column(z) - h.matmul(x);
        let hp = h.matmul(p);
        let s = hp.matmul(transposed(h)) + r;
        let k = transposed(s.solve(hp));
        let x = x + k.matmul(y);
        let identity = f.indices(0).eq(f.indices(1)).select(f.full_like(1.0), 0.0);
        let a = identity - k.matmul(h);
        let p = a.matmul(p).matmul(transposed(a)) + k.matmul(r).matmul(transposed(k));
        // yᵀ S⁻¹ y of each filter: the last two axes summed away.
        let rank = y.shape().rank();
        let nis = (y * s.solve(y)).sum(&[rank.saturating_sub(2), rank.saturating_sub(1)][..]);
        let mut x_dims = x.shape().dims().to_vec();
        x_dims.pop();
        vec![x.reshape(x_dims), p, nis]
    });
    ControlKernel::new("kalman_filter", &inputs)
        .part(step, &["x", "p", "nis"])
        .jit()
}
