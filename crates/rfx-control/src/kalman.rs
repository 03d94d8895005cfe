//! The linear Kalman filter of a constant-velocity model.

use rfx::Jit;

use crate::build::{ControlKernel, func};

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
