//! Forward mode: tangents computed alongside the primal values, in the same kernel; Jacobians
//! by forward mode; Hessian-vector products (forward over reverse); the shape-based choice
//! between forward and reverse Jacobians.

use rfx_ir::hir::{Kernel, Op, ValueId};
use rfx_ir::{ReduceOp, TensorType};

use crate::error::AdError;
use crate::graph::{Emitter, InputRef, WrtInput, active_values, keep_outputs, rebuild, resolve_wrt};
use crate::reverse::{concat, grad, jacrev};
use crate::rules::{Partial, chooser_weights, partials, prod_others};

/// Runs one forward sweep: `seeds[i]` is the tangent of `wrt[i]` (`None`: zero). Returns the
/// tangent of every primal value (`None`: zero), indexed by primal value.
pub(crate) fn forward(
    em: &mut Emitter,
    primal: &Kernel,
    active: &[bool],
    wrt: &[WrtInput],
    seeds: &[Option<ValueId>],
) -> Result<Vec<Option<ValueId>>, AdError> {
    let mut tangent: Vec<Option<ValueId>> = vec![None; primal.nodes().len()];
    for (input, seed) in wrt.iter().zip(seeds) {
        tangent[input.value.index()] = *seed;
    }
    for (index, node) in primal.nodes().iter().enumerate() {
        if matches!(node.op, Op::Input { .. }) || !active.get(index).copied().unwrap_or(false) {
            continue;
        }
        let arg_tangents: Vec<Option<ValueId>> = node.args.iter().map(|a| tangent[a.index()]).collect();
        if arg_tangents.iter().all(Option::is_none) {
            continue;
        }
        let out = em.primal(ValueId::new(index));
        let out_shape = node.ty.shape.clone();
        let args: Vec<ValueId> = node.args.iter().map(|&a| em.primal(a)).collect();
        let t = match &node.op {
            Op::Input { .. } | Op::Const(_) | Op::Compare(_) => None,
            Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Clamp => {
                let parts = partials(em, &node.op, &args, out)?;
                let mut sum = None;
                for (part, arg_tangent) in parts.into_iter().zip(&arg_tangents) {
                    let Some(arg_tangent) = arg_tangent else { continue };
                    if matches!(part, Partial::Zero) {
                        continue;
                    }
                    let carried = part.apply(em, *arg_tangent)?;
                    sum = em.add_opt(sum, carried)?;
                }
                match sum {
                    Some(s) => Some(em.broadcast_to(s, out_shape)?),
                    None => None,
                }
            }
            Op::Cast => match arg_tangents[0] {
                Some(t) if node.ty.dtype.is_float() => Some(em.cast(t, node.ty.dtype)?),
                _ => None,
            },
            Op::BroadcastTo => match arg_tangents[0] {
                Some(t) => Some(em.broadcast_to(t, out_shape)?),
                None => None,
            },
            Op::Reshape => match arg_tangents[0] {
                Some(t) => Some(em.reshape(t, out_shape)?),
                None => None,
            },
            Op::Reduce { op, axes, keepdims } => match arg_tangents[0] {
                Some(t) => Some(match op {
                    ReduceOp::Sum | ReduceOp::Mean => em.reduce(*op, t, axes, *keepdims)?,
                    ReduceOp::Prod => {
                        let others = prod_others(em, args[0], axes)?;
                        let weighted = em.mul(t, others)?;
                        em.reduce(ReduceOp::Sum, weighted, axes, *keepdims)?
                    }
                    ReduceOp::Max | ReduceOp::Min => {
                        let weights = chooser_weights(em, args[0], axes, *keepdims, out)?;
                        let weighted = em.mul(t, weights)?;
                        em.reduce(ReduceOp::Sum, weighted, axes, *keepdims)?
                    }
                }),
                None => None,
            },
        };
        tangent[index] = t;
    }
    Ok(tangent)
}

/// The Jacobian-vector product of `kernel` with respect to the inputs `wrt`.
///
/// - inputs: `kernel`'s inputs, then `tangent_<input>` (the input's type) per `wrt` input;
/// - outputs: `kernel`'s outputs, then `tangent_<output>` (the output's type) per float output:
///   `Σ_wrt ∂output/∂input · tangent_input`.
///
/// Bool and i32 outputs have no tangent. One kernel computes values and tangents together.
pub fn jvp<W: InputRef>(kernel: &Kernel, wrt: &[W]) -> Result<Kernel, AdError> {
    let wrt = resolve_wrt(kernel, wrt)?;
    let extra: Vec<(String, TensorType)> = wrt
        .iter()
        .map(|w| (format!("tangent_{}", w.name), w.ty.clone()))
        .collect();
    let (mut em, tangent_inputs) = Emitter::new(&format!("{}_jvp", kernel.name()), kernel, &extra)?;
    let active = active_values(kernel, &wrt);
    let seeds: Vec<Option<ValueId>> = tangent_inputs.into_iter().map(Some).collect();
    let tangents = forward(&mut em, kernel, &active, &wrt, &seeds)?;
    for output in kernel.outputs() {
        let value = em.primal(output.value);
        em.output(&output.name, value)?;
    }
    for output in kernel.outputs() {
        let Some(ty) = kernel.value_type(output.value).filter(|t| t.dtype.is_float()) else {
            continue;
        };
        let value = match tangents[output.value.index()] {
            Some(t) => t,
            None => em.constant(ty.dtype, 0.0, ty.shape.clone()),
        };
        em.output(&format!("tangent_{}", output.name), value)?;
    }
    em.finish()
}

/// The Jacobians of every float output with respect to `wrt`, by forward mode: one forward
/// sweep per `wrt` input, seeded with 1, all in one kernel with the forward computation.
///
/// Outputs: `kernel`'s outputs, then `jac_<output>_<input>` of shape
/// `shape(output) ++ shape(input)` for each float output and `wrt` input (output-major), as
/// [`jacrev`]. Every `wrt` input must have one element ([`AdError::ForwardJacobianShape`]
/// otherwise): seeding one tangent per element of a larger input needs an identity, and
/// laying the result out output-major needs a transpose, and HIR has neither.
pub fn jacfwd<W: InputRef>(kernel: &Kernel, wrt: &[W]) -> Result<Kernel, AdError> {
    let wrt = resolve_wrt(kernel, wrt)?;
    if let Some(w) = wrt.iter().find(|w| w.ty.shape.numel() != 1) {
        return Err(AdError::ForwardJacobianShape {
            name: w.name.clone(),
            shape: w.ty.shape.clone(),
        });
    }
    let (mut em, _) = Emitter::new(&format!("{}_jacfwd", kernel.name()), kernel, &[])?;
    let active = active_values(kernel, &wrt);
    let mut columns = Vec::with_capacity(wrt.len());
    for (i, input) in wrt.iter().enumerate() {
        let mut seeds: Vec<Option<ValueId>> = vec![None; wrt.len()];
        seeds[i] = Some(em.constant(input.ty.dtype, 1.0, input.ty.shape.clone()));
        columns.push(forward(&mut em, kernel, &active, &wrt, &seeds)?);
    }
    for output in kernel.outputs() {
        let value = em.primal(output.value);
        em.output(&output.name, value)?;
    }
    for output in kernel.outputs() {
        let Some(ty) = kernel.value_type(output.value).filter(|t| t.dtype.is_float()) else {
            continue;
        };
        for (input, column) in wrt.iter().zip(&columns) {
            let shape = concat(&ty.shape, &input.ty.shape);
            let value = match column[output.value.index()] {
                Some(t) => em.reshape(t, shape)?,
                None => em.constant(ty.dtype, 0.0, shape),
            };
            em.output(&format!("jac_{}_{}", output.name, input.name), value)?;
        }
    }
    em.finish()
}

/// The Jacobians of every float output with respect to `wrt`, choosing the mode by shape as
/// JAX's advice goes: forward mode ([`jacfwd`]) when the `wrt` inputs have fewer elements in
/// total than the float outputs and every `wrt` input has one element (what `jacfwd`
/// supports), reverse mode ([`jacrev`]) otherwise. Both give the same outputs; `jacrev` may add
/// `basis_<output>` inputs (see there).
pub fn jacobian<W: InputRef>(kernel: &Kernel, wrt: &[W]) -> Result<Kernel, AdError> {
    let resolved = resolve_wrt(kernel, wrt)?;
    let n_in: usize = resolved.iter().map(|w| w.ty.shape.numel()).sum();
    let n_out: usize = kernel
        .outputs()
        .iter()
        .filter_map(|o| kernel.value_type(o.value))
        .filter(|t| t.dtype.is_float())
        .map(|t| t.shape.numel())
        .sum();
    let all_scalar = resolved.iter().all(|w| w.ty.shape.numel() == 1);
    if n_in < n_out && all_scalar {
        jacfwd(kernel, wrt)
    } else {
        jacrev(kernel, wrt)
    }
}

/// The Hessian-vector product of a kernel with one single-element float output, by forward
/// mode over reverse mode (`jvp` of [`grad`]).
///
/// - inputs: `kernel`'s inputs, then `tangent_<input>` (the vector `v`, the input's type) per
///   `wrt` input;
/// - outputs: `hvp_<input>` per `wrt` input: `Σ_j ∂²f / ∂input ∂input_j · tangent_input_j`.
pub fn hvp<W: InputRef>(kernel: &Kernel, wrt: &[W]) -> Result<Kernel, AdError> {
    let resolved = resolve_wrt(kernel, wrt)?;
    let gradient = grad(kernel, wrt)?;
    let names: Vec<String> = resolved.iter().map(|w| w.name.clone()).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let second = jvp(&gradient, &name_refs)?;
    let tangent_names: Vec<String> = names.iter().map(|n| format!("tangent_grad_{n}")).collect();
    let tangent_refs: Vec<&str> = tangent_names.iter().map(String::as_str).collect();
    let only = keep_outputs(&second, &tangent_refs)?;
    let renamed: Vec<(String, ValueId)> = only
        .outputs()
        .iter()
        .zip(&names)
        .map(|(o, n)| (format!("hvp_{n}"), o.value))
        .collect();
    let result = rebuild(&only, &renamed)?;
    Ok(rfx_ir::hir::Kernel::from_parts(
        format!("{}_hvp", kernel.name()),
        result.nodes().to_vec(),
        result.outputs().to_vec(),
    ))
}
