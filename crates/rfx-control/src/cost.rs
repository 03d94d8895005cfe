//! A quadratic tracking cost and its gradient.

use rfx::Jit;

use crate::build::{ControlKernel, func};

const INPUTS: [&str; 5] = ["x", "x_ref", "u", "q", "r"];

fn cost_func() -> impl rfx::KernelFn + 'static {
    func("tracking_cost", INPUTS, |[x, x_ref, u, q, r]| {
        let error = x - x_ref;
        vec![(q * error * error).sum_all() * 0.5 + (r * u * u).sum_all() * 0.5]
    })
}

/// The quadratic tracking cost `J = ½·Σ q·(x - x_ref)² + ½·Σ r·u²`, summed over every element
/// (N robots × a horizon of H steps, or any shape).
///
/// Inputs `x`, `x_ref` (states and their references, one shape), `u` (controls, any shape),
/// `q`, `r` (diagonal weights, broadcasting against `x` and `u`: `[]` for one weight);
/// output `cost` (a scalar).
pub fn tracking_cost() -> Jit<ControlKernel> {
    ControlKernel::new("tracking_cost", &INPUTS)
        .part(cost_func(), &["cost"])
        .jit()
}

/// [`tracking_cost`] and its gradient with respect to the states and the controls, from rfx's
/// reverse mode, as one kernel: outputs `cost`, `grad_x = q·(x - x_ref)`, `grad_u = r·u`.
/// A gradient step of an MPC-style solver is `u -= step·grad_u` (and `x` likewise for a
/// direct-transcription formulation).
pub fn tracking_cost_grad() -> Jit<ControlKernel> {
    let value_and_grad = rfx::value_and_grad(cost_func()).wrt(&[0, 2]);
    ControlKernel::new("tracking_cost_grad", &INPUTS)
        .part(value_and_grad, &["cost", "grad_x", "grad_u"])
        .jit()
}
