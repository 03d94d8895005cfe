//! Observers that carry their estimate across calls in the crate's state convention.

use rfx::Jit;

use crate::build::{ControlKernel, func};
use crate::state::{batch_dims, components, stack_last};

/// The number of entries of [`alpha_beta`]'s `params`: `[alpha, beta, dt]`.
pub const ALPHA_BETA_PARAMS: usize = 3;

/// The number of entries of [`alpha_beta`]'s `state`: `[position, velocity]`.
pub const ALPHA_BETA_STATE: usize = 2;

/// The α-β tracker step (a steady-state Kalman filter of a constant-velocity model),
/// elementwise over a batch of tracked quantities, with its gains as a run-time input; it
/// follows the crate's state convention (`state` in, `state_next` out, one shape).
///
/// Inputs `measurement` `[..]` (a position), `params` `[ALPHA_BETA_PARAMS]` or `[..,
/// ALPHA_BETA_PARAMS]` (`[alpha, beta, dt]`: `0 < alpha <= 1`, `0 < beta <= 2`, stable for
/// `4 - 2·alpha - beta > 0`; `dt > 0`), `state` `[.., ALPHA_BETA_STATE]` (`[position,
/// velocity]`). Outputs `residual` `[..]` (the innovation) and `state_next`:
///
/// ```text
/// predicted = position + dt·velocity
/// residual  = measurement - predicted
/// position  = predicted + alpha·residual
/// velocity  = velocity + (beta/dt)·residual
/// ```
///
/// A target moving at constant velocity is tracked without steady-state error.
pub fn alpha_beta() -> Jit<ControlKernel> {
    let inputs = ["measurement", "params", "state"];
    let step = func("alpha_beta", inputs, |[z, params, state]| {
        let [alpha, beta, dt] = components::<ALPHA_BETA_PARAMS>(params);
        let [position, velocity] = components::<ALPHA_BETA_STATE>(state);
        let batch = batch_dims(state);
        let predicted = position + dt * velocity;
        let residual = z - predicted;
        let position = predicted + alpha * residual;
        let velocity = velocity + beta / dt * residual;
        vec![
            residual.broadcast_to(batch.clone()),
            stack_last(&[position, velocity], &batch),
        ]
    });
    ControlKernel::new("alpha_beta", &inputs)
        .part(step, &["residual", "state_next"])
        .jit()
}
