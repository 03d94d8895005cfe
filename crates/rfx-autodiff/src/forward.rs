//! Forward mode: tangents computed alongside the primal values, in the same kernel; Jacobians
//! by forward mode; Hessian-vector products (forward over reverse); the shape-based choice
//! between forward and reverse Jacobians.

use std::collections::HashMap;

use rfx_ir::hir::{Kernel, Op, ValueId};
use rfx_ir::{ReduceOp, ScanOp, Shape, TensorType};

use crate::error::AdError;
use crate::graph::{Batched, Emitter, InputRef, WrtInput, active_values, keep_outputs, rebuild, resolve_wrt};
use crate::loops::forward_loop;
use crate::reverse::{batched_perm, behind, concat, grad, jacrev};
use crate::rules::{
    Partial, chooser_weights, cumprod_tangent, linear_as_fold, partials, prod_others, scan_positions,
};

/// A loop's tangent loop: its final carries (the primal ones first; none when no tangent
/// loop was needed) and the tangent of each of the primal loop's final carries.
type LoopTangents = (Vec<ValueId>, Vec<Option<ValueId>>);

/// The tangents of the loop or `loop_output` node `index` of `primal` (see `forward`). An
/// active loop gets a tangent loop ([`forward_loop`]), whose primal carries replace the
/// loop's own, and each `loop_output` reads its carry's tangent there.
fn loop_tangent(
    em: &mut Emitter,
    primal: &Kernel,
    index: usize,
    active: &[bool],
    tangent: &mut [Option<Batched>],
    loop_tangents: &mut HashMap<usize, LoopTangents>,
    batch: &Shape,
) -> Result<(), AdError> {
    let Some(node) = primal.nodes().get(index) else {
        return Ok(());
    };
    match &node.op {
        // Every final carry of a loop that got a tangent loop reads that loop, active or not.
        &Op::LoopOutput { index: carry } => {
            if let Some((finals, tangents)) = node.args.first().and_then(|of| loop_tangents.get(&of.index()))
            {
                if let Some(&carried) = finals.get(carry) {
                    em.substitute(em.primal(ValueId::new(index)), carried);
                }
                tangent[index] = tangents.get(carry).copied().flatten().map(Batched::Dense);
            }
        }
        Op::Loop(spec) if active.get(index).copied().unwrap_or(false) => {
            let arg_tangents: Vec<Option<Batched>> = node.args.iter().map(|a| tangent[a.index()]).collect();
            let args: Vec<ValueId> = node.args.iter().map(|&a| em.primal(a)).collect();
            let (finals, tangents) = forward_loop(em, spec, &args, &arg_tangents, batch)?;
            if let Some(&first) = finals.first() {
                em.substitute(em.primal(ValueId::new(index)), first);
            }
            tangent[index] = tangents.first().copied().flatten().map(Batched::Dense);
            loop_tangents.insert(index, (finals, tangents));
        }
        _ => {}
    }
    Ok(())
}

/// Runs one forward sweep: `seeds[i]` is the tangent of `wrt[i]` (`None`: zero). Returns the
/// tangent of every primal value (`None`: zero), indexed by primal value.
///
/// Tangents are *batched*: the tangent of a value of shape `S` has shape `batch ++ S` (`jvp`
/// uses an empty batch; `jacfwd` seeds a multi-element input with the identity, batch = the
/// input's shape, so one sweep carries every column of the Jacobian). Primal-shaped partials
/// broadcast against batched tangents from the right once a tangent is lifted to its
/// result's rank (`batch ++ 1… ++ S`); structural ops keep the batch in front.
pub(crate) fn forward(
    em: &mut Emitter,
    primal: &Kernel,
    active: &[bool],
    wrt: &[WrtInput],
    seeds: &[Option<Batched>],
    batch: &Shape,
) -> Result<Vec<Option<Batched>>, AdError> {
    // `t` (shape `batch ++ S`) reshaped to `batch ++ [1; rank - rank(S)] ++ S`.
    let lift = |em: &mut Emitter, t: ValueId, rank: usize| -> Result<ValueId, AdError> {
        if batch.rank() == 0 {
            return Ok(t);
        }
        let shape = em.shape(t)?;
        let inner = &shape.dims()[batch.rank()..];
        let ones = vec![1; rank.saturating_sub(inner.len())];
        em.reshape(t, Shape::new([batch.dims(), &ones, inner].concat()))
    };
    let mut tangent: Vec<Option<Batched>> = vec![None; primal.nodes().len()];
    for (input, seed) in wrt.iter().zip(seeds) {
        tangent[input.value.index()] = *seed;
    }
    // The tangent of every final carry of each loop, by the loop's index.
    let mut loop_tangents: HashMap<usize, LoopTangents> = HashMap::new();
    for (index, node) in primal.nodes().iter().enumerate() {
        if matches!(node.op, Op::Loop(_) | Op::LoopOutput { .. }) {
            loop_tangent(em, primal, index, active, &mut tangent, &mut loop_tangents, batch)?;
            continue;
        }
        if matches!(node.op, Op::Input { .. }) || !active.get(index).copied().unwrap_or(false) {
            continue;
        }
        let arg_tangents: Vec<Option<Batched>> = node.args.iter().map(|a| tangent[a.index()]).collect();
        if arg_tangents.iter().all(Option::is_none) {
            continue;
        }
        let out = em.primal(ValueId::new(index));
        let out_shape = node.ty.shape.clone();
        let args: Vec<ValueId> = node.args.iter().map(|&a| em.primal(a)).collect();
        // Diagonal tangents stay diagonal through elementwise ops whose operands with a tangent
        // all have the result's shape, and through float casts.
        let elementwise = matches!(node.op, Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Clamp);
        let diagonal = arg_tangents.iter().zip(&node.args).all(|(t, a)| match t {
            None => true,
            Some(Batched::Dense(_)) => false,
            Some(Batched::Diag(_)) => primal.value_type(*a).is_some_and(|ty| ty.shape == out_shape),
        });
        if diagonal && elementwise {
            let parts = partials(em, &node.op, &args, out)?;
            let mut sum = None;
            for (part, arg_tangent) in parts.into_iter().zip(&arg_tangents) {
                if let Some(Batched::Diag(d)) = arg_tangent {
                    let carried = part.apply(em, *d)?;
                    sum = em.add_opt(sum, carried)?;
                }
            }
            tangent[index] = sum.map(Batched::Diag);
            continue;
        }
        if diagonal
            && matches!(node.op, Op::Cast)
            && let Some(Batched::Diag(d)) = arg_tangents[0]
        {
            tangent[index] = node
                .ty
                .dtype
                .is_float()
                .then(|| em.cast(d, node.ty.dtype))
                .transpose()?
                .map(Batched::Diag);
            continue;
        }
        // Anything else reads the tangents densely.
        let mut arg_tangents_dense = Vec::with_capacity(arg_tangents.len());
        for (t, a) in arg_tangents.iter().zip(&node.args) {
            arg_tangents_dense.push(match t {
                Some(t) => {
                    let shape = em.shape(em.primal(*a))?;
                    Some(t.dense(em, batch, &shape)?)
                }
                None => None,
            });
        }
        let arg_tangents = arg_tangents_dense;
        let t = match &node.op {
            Op::Input { .. } | Op::Const(_) | Op::Literal(_) | Op::Iota { .. } | Op::Compare(_) => None,
            // Handled above, before the operands' tangents are made dense.
            Op::Loop(_) | Op::LoopOutput { .. } => None,
            Op::Transpose { perm } => match arg_tangents[0] {
                Some(t) => Some(em.transpose(t, &batched_perm(batch.rank(), perm))?),
                None => None,
            },
            Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Clamp => {
                let parts = partials(em, &node.op, &args, out)?;
                let mut sum = None;
                for (part, arg_tangent) in parts.into_iter().zip(&arg_tangents) {
                    let Some(arg_tangent) = arg_tangent else { continue };
                    if matches!(part, Partial::Zero) {
                        continue;
                    }
                    let lifted = lift(em, *arg_tangent, out_shape.rank())?;
                    let carried = part.apply(em, lifted)?;
                    sum = em.add_opt(sum, carried)?;
                }
                match sum {
                    Some(s) => Some(em.broadcast_to(s, concat(batch, &out_shape))?),
                    None => None,
                }
            }
            Op::Cast => match arg_tangents[0] {
                Some(t) if node.ty.dtype.is_float() => Some(em.cast(t, node.ty.dtype)?),
                _ => None,
            },
            Op::BroadcastTo => match arg_tangents[0] {
                Some(t) => {
                    let lifted = lift(em, t, out_shape.rank())?;
                    Some(em.broadcast_to(lifted, concat(batch, &out_shape))?)
                }
                None => None,
            },
            Op::Reshape => match arg_tangents[0] {
                Some(t) => Some(em.reshape(t, concat(batch, &out_shape))?),
                None => None,
            },
            // Both are linear: the same window (or zeros) of the tangent, behind its batch axes.
            Op::Slice { starts } => match arg_tangents[0] {
                Some(t) => Some(em.slice(t, &behind(batch, starts), concat(batch, &out_shape))?),
                None => None,
            },
            Op::Pad { low } => match arg_tangents[0] {
                Some(t) => Some(em.pad(t, &behind(batch, low), concat(batch, &out_shape))?),
                None => None,
            },
            // Linear in the table (the index's tangent is zero: the lookup is piecewise
            // constant in it): the tangent's rows at the same index, behind its batch axes.
            Op::Gather { axis } => match arg_tangents[0] {
                Some(t) => {
                    let index = em.broadcast_to(args[1], concat(batch, &out_shape))?;
                    Some(em.gather(t, index, axis + batch.rank())?)
                }
                None => None,
            },
            // Linear in `x` and `row` (the index's tangent is zero: piecewise constant): the
            // tangent of `x` with the row's tangent in row `index`, behind its batch axes.
            Op::SetRow => match (arg_tangents[0], arg_tangents[1]) {
                (None, None) => None,
                (tx, trow) => {
                    let full = concat(batch, &out_shape);
                    let row_shape = concat(batch, &Shape::new(out_shape.dims().get(1..).unwrap_or_default()));
                    let tx = match tx {
                        Some(t) => em.broadcast_to(t, full)?,
                        None => em.constant(node.ty.dtype, 0.0, full),
                    };
                    let trow = match trow {
                        Some(t) => em.broadcast_to(t, row_shape)?,
                        None => em.constant(node.ty.dtype, 0.0, row_shape),
                    };
                    Some(em.set_row(tx, trow, args[2], batch.rank())?)
                }
            },
            // `y[i] = a[i] y[i-1] + x[i]` gives `dy[i] = a[i] dy[i-1] + (da[i] y[i-1] + dx[i])`:
            // the same recurrence of the tangents.
            &Op::Scan {
                op: ScanOp::Linear,
                axis,
                reverse,
            } => {
                let full = concat(batch, &out_shape);
                let mut driven = arg_tangents[0];
                if let Some(da) = arg_tangents[1] {
                    let previous = em.shift_along(out, axis, reverse, 0.0)?;
                    let term = em.mul(da, previous)?;
                    driven = em.add_opt(driven, Some(term))?;
                }
                match driven {
                    Some(driven) => {
                        let driven = em.broadcast_to(driven, full.clone())?;
                        let coef = em.broadcast_to(args[1], full)?;
                        Some(em.linrec(driven, coef, batch.rank() + axis, reverse)?)
                    }
                    None => None,
                }
            }
            &Op::Scan { op, axis, reverse } => match arg_tangents[0] {
                Some(t) => Some(match op {
                    ScanOp::Sum => em.scan(ScanOp::Sum, t, batch.rank() + axis, reverse)?,
                    ScanOp::Prod => cumprod_tangent(em, args[0], out, t, axis, reverse, batch)?,
                    ScanOp::Linear => return Err(linear_as_fold()),
                    // Each result is one element of `x`: its tangent is that element's.
                    // (An empty operand has an empty tangent, which no lookup can read.)
                    ScanOp::Max | ScanOp::Min if out_shape.numel() == 0 => t,
                    ScanOp::Max | ScanOp::Min => {
                        let taken = scan_positions(em, args[0], out, axis, reverse)?;
                        let taken = em.broadcast_to(taken, concat(batch, &out_shape))?;
                        em.gather(t, taken, batch.rank() + axis)?
                    }
                }),
                None => None,
            },
            Op::Reduce { op, axes, keepdims } => match arg_tangents[0] {
                Some(t) => Some({
                    let axes: Vec<usize> = axes.iter().map(|a| a + batch.rank()).collect();
                    let axes = &axes;
                    match op {
                        ReduceOp::Sum | ReduceOp::Mean => em.reduce(*op, t, axes, *keepdims)?,
                        ReduceOp::Prod => {
                            let primal_axes: Vec<usize> = axes.iter().map(|a| a - batch.rank()).collect();
                            let others = prod_others(em, args[0], &primal_axes)?;
                            let weighted = em.mul(t, others)?;
                            em.reduce(ReduceOp::Sum, weighted, axes, *keepdims)?
                        }
                        ReduceOp::Max | ReduceOp::Min => {
                            let primal_axes: Vec<usize> = axes.iter().map(|a| a - batch.rank()).collect();
                            let weights = chooser_weights(em, args[0], &primal_axes, *keepdims, out)?;
                            let weighted = em.mul(t, weights)?;
                            em.reduce(ReduceOp::Sum, weighted, axes, *keepdims)?
                        }
                    }
                }),
                None => None,
            },
        };
        tangent[index] = t.map(Batched::Dense);
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
    let seeds: Vec<Option<Batched>> = tangent_inputs
        .into_iter()
        .map(|t| Some(Batched::Dense(t)))
        .collect();
    let tangents = forward(&mut em, kernel, &active, &wrt, &seeds, &Shape::scalar())?;
    em.primal_outputs(kernel)?;
    for output in kernel.outputs() {
        let Some(ty) = kernel.value_type(output.value).filter(|t| t.dtype.is_float()) else {
            continue;
        };
        let value = match tangents[output.value.index()] {
            Some(t) => t.dense(&mut em, &Shape::scalar(), &ty.shape)?,
            None => em.constant(ty.dtype, 0.0, ty.shape.clone()),
        };
        em.output(&format!("tangent_{}", output.name), value)?;
    }
    em.finish()
}

/// The Jacobians of every float output with respect to `wrt`, by forward mode: one forward
/// sweep per `wrt` input, all in one kernel with the forward computation.
///
/// - inputs: `kernel`'s inputs;
/// - outputs: `kernel`'s outputs, then `jac_<output>_<input>` of shape
///   `shape(output) ++ shape(input)` for each float output and `wrt` input (output-major), as
///   [`jacrev`].
///
/// A multi-element input's sweep is batched (see `forward`): it is seeded with the identity of
/// `shape(input) ++ shape(input)`, built in the kernel from two `iota`s, and its tangents have
/// shape `shape(input) ++ S`, one column of the Jacobian per batch index; a `transpose` lays
/// them out output-major. A single-element input is seeded with the constant 1.
pub fn jacfwd<W: InputRef>(kernel: &Kernel, wrt: &[W]) -> Result<Kernel, AdError> {
    let wrt = resolve_wrt(kernel, wrt)?;
    let name = format!("{}_jacfwd", kernel.name());
    jacfwd_named(kernel, &wrt, &name, &|output, input| {
        Some(format!("jac_{output}_{input}"))
    })
}

/// What [`jacfwd_named`] calls a derivative: `name(output, input)` names the Jacobian of
/// `output` with respect to `input`; `None` leaves it out.
type JacobianName<'a> = dyn Fn(&str, &str) -> Option<String> + 'a;

/// [`jacfwd`] with the kernel called `kernel_name` and only the Jacobians `name` names.
fn jacfwd_named(
    kernel: &Kernel,
    wrt: &[WrtInput],
    kernel_name: &str,
    name: &JacobianName<'_>,
) -> Result<Kernel, AdError> {
    let (mut em, _) = Emitter::new(kernel_name, kernel, &[])?;
    let active = active_values(kernel, wrt);
    let mut columns = Vec::with_capacity(wrt.len());
    for (i, input) in wrt.iter().enumerate() {
        let mut seeds: Vec<Option<Batched>> = vec![None; wrt.len()];
        let batched = input.ty.shape.numel() != 1;
        let (seed, batch) = if batched {
            // The identity of `shape ++ shape`, as its diagonal of ones.
            let one = em.scalar(input.ty.dtype, 1.0);
            (Batched::Diag(one), input.ty.shape.clone())
        } else {
            (
                Batched::Dense(em.constant(input.ty.dtype, 1.0, input.ty.shape.clone())),
                Shape::scalar(),
            )
        };
        seeds[i] = Some(seed);
        columns.push((
            forward(&mut em, kernel, &active, wrt, &seeds, &batch)?,
            batched,
            batch,
        ));
    }
    em.primal_outputs(kernel)?;
    for output in kernel.outputs() {
        let Some(ty) = kernel.value_type(output.value).filter(|t| t.dtype.is_float()) else {
            continue;
        };
        for (input, (column, batched, batch)) in wrt.iter().zip(&columns) {
            let Some(jacobian_name) = name(&output.name, &input.name) else {
                continue;
            };
            let shape = concat(&ty.shape, &input.ty.shape);
            let value = match (column[output.value.index()], batched) {
                // A diagonal tangent (`in` = `out`) is its own transpose.
                (Some(Batched::Diag(d)), true) => Batched::Diag(d).dense(&mut em, batch, &ty.shape)?,
                (Some(t), false) => {
                    let t = t.dense(&mut em, batch, &ty.shape)?;
                    em.reshape(t, shape)?
                }
                // `t` has shape `in ++ out` (broadcast up to it): transposed to `out ++ in`.
                (Some(t), true) => {
                    let t = t.dense(&mut em, batch, &ty.shape)?;
                    let t = em.broadcast_to(t, concat(&input.ty.shape, &ty.shape))?;
                    let (ri, ro) = (input.ty.shape.rank(), ty.shape.rank());
                    let perm: Vec<usize> = (ri..ri + ro).chain(0..ri).collect();
                    em.transpose(t, &perm)?
                }
                (None, _) => em.constant(ty.dtype, 0.0, shape),
            };
            em.output(&jacobian_name, value)?;
        }
    }
    em.finish()
}

/// The first and second derivatives of every float output with respect to `wrt`, in one
/// kernel: forward mode over reverse mode, as `jax.hessian` (the [`jacrev`] sweeps, then
/// [`jacfwd`] of their results).
///
/// - inputs: `kernel`'s inputs;
/// - outputs: `kernel`'s outputs; then `jac_<output>_<x>` of shape `shape(output) ++ shape(x)`
///   per float output and `wrt` input `x`, as [`jacrev`]; then `hess_<output>_<x>_<y>` of shape
///   `shape(output) ++ shape(x) ++ shape(y)` per float output and pair of `wrt` inputs
///   (output-major, then `x`, then `y`): element `[i.., j.., k..]` is
///   `∂²output[i..] / ∂x[j..] ∂y[k..]`.
///
/// A Newton or iLQR step needs the value, gradient and Hessian of a cost; they come from one
/// kernel sharing the forward computation. (A [`jacobian`] of a [`jacobian`] fails with a
/// [`AdError::NameClash`], because the outer Jacobian of `output` would be called
/// `jac_<output>_<x>` too; this names the second derivatives apart.)
pub fn hessian<W: InputRef>(kernel: &Kernel, wrt: &[W]) -> Result<Kernel, AdError> {
    let resolved = resolve_wrt(kernel, wrt)?;
    let first = jacrev(kernel, wrt)?;
    // The (output, x) behind each first derivative `first` outputs.
    let mut origin: HashMap<String, (String, String)> = HashMap::new();
    for output in kernel.outputs() {
        if kernel
            .value_type(output.value)
            .is_some_and(|t| t.dtype.is_float())
        {
            for x in &resolved {
                let key = format!("jac_{}_{}", output.name, x.name);
                origin.insert(key, (output.name.clone(), x.name.clone()));
            }
        }
    }
    // `first` has `kernel`'s inputs, so `wrt` resolves to the same inputs there.
    let second_wrt = resolve_wrt(&first, wrt)?;
    let name = format!("{}_hessian", kernel.name());
    jacfwd_named(&first, &second_wrt, &name, &|jacobian, y| {
        let (output, x) = origin.get(jacobian)?;
        Some(format!("hess_{output}_{x}_{y}"))
    })
}

/// The Jacobians of every float output with respect to `wrt`, choosing the mode by shape as
/// JAX's advice goes: forward mode ([`jacfwd`]) when the `wrt` inputs have fewer elements in
/// total than the float outputs, reverse mode ([`jacrev`]) otherwise. Both give the same
/// outputs and take only `kernel`'s inputs.
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
    if n_in < n_out {
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
