//! Reverse mode: one backward sweep over a copy of the primal kernel, in the same kernel.
//!
//! The sweep walks the primal nodes in reverse definition order and accumulates each value's
//! adjoint (fan-out sums). Adjoints may carry a leading *batch* shape: the adjoint of a value of
//! shape `S` has shape `batch ++ S`. `vjp` uses an empty batch; `jacrev` uses the output's shape
//! as the batch, so that one sweep computes every row of the Jacobian at once (a vectorised
//! VJP). NumPy's right-aligned broadcasting makes the elementwise rules batch-agnostic; only
//! the structural rules (reductions, reshapes, broadcasts) name the batch.

use std::collections::HashMap;

use rfx_ir::hir::{Kernel, Op, ValueId};
use rfx_ir::{CmpOp, DType, ReduceOp, ScanOp, Shape, TensorType};

use crate::error::AdError;
use crate::graph::{Batched, Emitter, InputRef, WrtInput, active_values, resolve_wrt};
use crate::loops::reverse_loop;
use crate::rules::{
    Partial, chooser_weights, cumprod_adjoint, keepdims_shape, linear_as_fold, partials, prod_others,
    reduced_count, scan_positions,
};

/// `slot + c`: two diagonal adjoints add their diagonals, anything else adds densely.
fn accumulate(
    em: &mut Emitter,
    slot: Option<Batched>,
    c: Batched,
    batch: &Shape,
    shape: &Shape,
) -> Result<Batched, AdError> {
    Ok(match (slot, c) {
        (None, c) => c,
        (Some(Batched::Diag(a)), Batched::Diag(b)) => Batched::Diag(em.add(a, b)?),
        (Some(a), b) => {
            let a = a.dense(em, batch, shape)?;
            let b = b.dense(em, batch, shape)?;
            Batched::Dense(em.add(a, b)?)
        }
    })
}

/// Runs one backward sweep. `seeds` are `(primal output value, adjoint)` pairs, each adjoint of
/// shape `batch ++ shape(output)` (or diagonal, where the batch is the output's shape). Returns
/// the adjoint of each `wrt` input (`None`: zero).
///
/// A diagonal adjoint stays diagonal through elementwise ops into operands of the op's own
/// shape, and through float casts; anything else reads it densely.
pub(crate) fn backward(
    em: &mut Emitter,
    primal: &Kernel,
    active: &[bool],
    wrt: &[WrtInput],
    batch: &Shape,
    seeds: &[(ValueId, Batched)],
) -> Result<Vec<Option<Batched>>, AdError> {
    let batch_rank = batch.rank();
    let mut adjoint: Vec<Option<Batched>> = vec![None; primal.nodes().len()];
    for &(value, seed) in seeds {
        if !active.get(value.index()).copied().unwrap_or(false) {
            continue;
        }
        let shape = em.shape(em.primal(value))?;
        let slot = adjoint[value.index()];
        adjoint[value.index()] = Some(accumulate(em, slot, seed, batch, &shape)?);
    }
    // The adjoints of the final carries past carry 0 of each loop (its `loop_output`s), by
    // the loop's index: every user of a loop's results comes after it, so they are complete
    // when the sweep reaches the loop.
    let mut loop_adjoints: HashMap<usize, Vec<Option<Batched>>> = HashMap::new();
    for (index, node) in primal.nodes().iter().enumerate().rev() {
        if matches!(node.op, Op::Input { .. }) {
            continue;
        }
        if let &Op::LoopOutput { index: carry } = &node.op {
            if let (Some(ct), Some(&of)) = (adjoint[index], node.args.first())
                && let Some(Op::Loop(spec)) = primal.node(of).map(|n| &n.op)
            {
                let shape = node.ty.shape.clone();
                let slots = loop_adjoints
                    .entry(of.index())
                    .or_insert_with(|| vec![None; spec.carries]);
                if let Some(slot) = slots.get_mut(carry) {
                    *slot = Some(accumulate(em, *slot, ct, batch, &shape)?);
                }
            }
            continue;
        }
        let args: Vec<ValueId> = node.args.iter().map(|&a| em.primal(a)).collect();
        if let Op::Loop(spec) = &node.op {
            let mut cts = loop_adjoints
                .remove(&index)
                .unwrap_or_else(|| vec![None; spec.carries]);
            if let Some(first) = cts.first_mut() {
                *first = adjoint[index];
            }
            let arg_active: Vec<bool> = node
                .args
                .iter()
                .map(|a| active.get(a.index()).copied().unwrap_or(false))
                .collect();
            let value = ValueId::new(index);
            let (contributions, recorded) = reverse_loop(em, value, spec, &args, &arg_active, &cts, batch)?;
            // The recording loop computes the primal carries too: they replace the primal
            // loop's, which then need not run.
            if let Some(&first) = recorded.first() {
                em.substitute(em.primal(value), first);
                for (later, reader) in primal.nodes().iter().enumerate().skip(index + 1) {
                    if let &Op::LoopOutput { index: carry } = &reader.op
                        && reader.args.first() == Some(&value)
                        && let Some(&carried) = recorded.get(carry)
                    {
                        em.substitute(em.primal(ValueId::new(later)), carried);
                    }
                }
            }
            add_contributions(em, &mut adjoint, active, &node.args, &args, contributions, batch)?;
            continue;
        }
        let Some(ct) = adjoint[index] else { continue };
        let out = em.primal(ValueId::new(index));
        // Elementwise ops and casts keep a diagonal adjoint diagonal (into operands of the op's
        // own shape); every other rule reads it densely.
        let elementwise = matches!(
            node.op,
            Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Clamp | Op::Cast
        );
        let ct = match ct {
            Batched::Diag(_) if elementwise => ct,
            _ => Batched::Dense(ct.dense(em, batch, &node.ty.shape)?),
        };
        let dense = |em: &mut Emitter| ct.dense(em, batch, &node.ty.shape);
        let contributions: Vec<Option<Batched>> = match &node.op {
            Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Clamp => {
                let parts = partials(em, &node.op, &args, out)?;
                let mut contributions = Vec::with_capacity(args.len());
                for (i, (&arg, part)) in args.iter().zip(parts).enumerate() {
                    let is_active = active.get(node.args[i].index()).copied().unwrap_or(false);
                    if !is_active || matches!(part, Partial::Zero) {
                        contributions.push(None);
                        continue;
                    }
                    let arg_shape = em.shape(arg)?;
                    contributions.push(match ct {
                        Batched::Diag(d) if arg_shape == node.ty.shape => {
                            part.apply(em, d)?.map(Batched::Diag)
                        }
                        // An operand broadcast by the op: its adjoint sums densely.
                        _ => {
                            let ct = dense(em)?;
                            match part.apply(em, ct)? {
                                Some(c) => Some(Batched::Dense(em.unbroadcast(c, batch_rank, &arg_shape)?)),
                                None => None,
                            }
                        }
                    });
                }
                contributions
            }
            Op::Cast => {
                let arg_dtype = em.dtype(args[0])?;
                vec![if !arg_dtype.is_float() {
                    None
                } else if let Batched::Diag(d) = ct {
                    Some(Batched::Diag(em.cast(d, arg_dtype)?))
                } else {
                    let ct = dense(em)?;
                    Some(Batched::Dense(em.cast(ct, arg_dtype)?))
                }]
            }
            _ => {
                let ct = dense(em)?;
                dense_contributions(em, node, &args, out, ct, batch)?
                    .into_iter()
                    .map(|c| c.map(Batched::Dense))
                    .collect()
            }
        };
        add_contributions(em, &mut adjoint, active, &node.args, &args, contributions, batch)?;
    }
    Ok(wrt.iter().map(|w| adjoint[w.value.index()]).collect())
}

/// Adds each operand's adjoint contribution (operand `arg` of the primal, `primal_arg` its
/// copy) into the adjoints of the active operands.
fn add_contributions(
    em: &mut Emitter,
    adjoint: &mut [Option<Batched>],
    active: &[bool],
    operands: &[ValueId],
    primal_args: &[ValueId],
    contributions: Vec<Option<Batched>>,
    batch: &Shape,
) -> Result<(), AdError> {
    for ((&arg, &primal_arg), contribution) in operands.iter().zip(primal_args).zip(contributions) {
        if let Some(c) = contribution
            && active.get(arg.index()).copied().unwrap_or(false)
        {
            let shape = em.shape(primal_arg)?;
            let slot = adjoint[arg.index()];
            adjoint[arg.index()] = Some(accumulate(em, slot, c, batch, &shape)?);
        }
    }
    Ok(())
}

/// The adjoint contributions of a structural node (`transpose`, `broadcast_to`, `reshape`,
/// `reduce`; none for leaves and comparisons) to its operands, from its dense adjoint `ct`.
fn dense_contributions(
    em: &mut Emitter,
    node: &rfx_ir::hir::Node,
    args: &[ValueId],
    out: ValueId,
    ct: ValueId,
    batch: &Shape,
) -> Result<Vec<Option<ValueId>>, AdError> {
    let batch_rank = batch.rank();
    Ok(match &node.op {
        // Handled by the sweep itself, which gathers a loop's adjoints first.
        Op::Loop(_)
        | Op::LoopOutput { .. }
        | Op::Input { .. }
        | Op::Const(_)
        | Op::Literal(_)
        | Op::Iota { .. }
        | Op::Compare(_)
        | Op::Unary(_)
        | Op::Binary(_)
        | Op::Select
        | Op::Clamp
        | Op::Cast => vec![None; args.len()],
        Op::Transpose { perm } => {
            // The adjoint of a permutation is the inverse permutation.
            let mut inverse = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p] = i;
            }
            vec![Some(em.transpose(ct, &batched_perm(batch_rank, &inverse))?)]
        }
        Op::BroadcastTo => {
            let arg_shape = em.shape(args[0])?;
            vec![Some(em.unbroadcast(ct, batch_rank, &arg_shape)?)]
        }
        Op::Reshape => {
            let arg_shape = em.shape(args[0])?;
            vec![Some(em.reshape(ct, concat(batch, &arg_shape))?)]
        }
        // A window's adjoint is zeros around it; a padding's is its window.
        Op::Slice { starts } => {
            let arg_shape = em.shape(args[0])?;
            let at = behind(batch, starts);
            vec![Some(em.pad(ct, &at, concat(batch, &arg_shape))?)]
        }
        Op::Pad { low } => {
            let arg_shape = em.shape(args[0])?;
            let at = behind(batch, low);
            vec![Some(em.slice(ct, &at, concat(batch, &arg_shape))?)]
        }
        // The table's adjoint adds each element's adjoint into the row it read; the index's
        // adjoint is zero (the lookup is piecewise constant in it).
        Op::Gather { axis } => {
            let table_shape = em.shape(args[0])?;
            vec![
                Some(scatter_rows(em, ct, args[1], &table_shape, *axis, batch)?),
                None,
            ]
        }
        // `x`'s adjoint is the adjoint with row `index` zeroed (that row was replaced), the
        // row's is that row of the adjoint; the index's is zero (piecewise constant).
        Op::SetRow => {
            let dims = em.shape(args[0])?.dims().to_vec();
            let dtype = em.dtype(ct)?;
            let zeros = em.constant(
                dtype,
                0.0,
                concat(batch, &Shape::new(dims.get(1..).unwrap_or_default())),
            );
            vec![
                Some(em.set_row(ct, zeros, args[2], batch_rank)?),
                Some(em.row_at(ct, args[2], batch_rank)?),
                None,
            ]
        }
        // The adjoint of `y[i] = a[i] y[i-1] + x[i]` runs the recurrence backwards: `λ[i] =
        // ct[i] + a[i+1] λ[i+1]`, the operand's adjoint `λ` and the coefficient's `λ[i] y[i-1]`.
        &Op::Scan {
            op: ScanOp::Linear,
            axis,
            reverse,
        } => {
            let full = concat(batch, &em.shape(out)?);
            let next = em.shift_along(args[1], axis, !reverse, 0.0)?;
            let next = em.broadcast_to(next, full)?;
            let lambda = em.linrec(ct, next, batch_rank + axis, !reverse)?;
            let previous = em.shift_along(out, axis, reverse, 0.0)?;
            vec![Some(lambda), Some(em.mul(lambda, previous)?)]
        }
        Op::Scan { op, axis, reverse } => {
            let (x, axis, reverse) = (args[0], *axis, *reverse);
            vec![Some(match op {
                ScanOp::Linear => return Err(linear_as_fold()),
                // The transpose of a running sum is the running sum from the other end.
                ScanOp::Sum => em.scan(ScanOp::Sum, ct, batch_rank + axis, !reverse)?,
                ScanOp::Prod => cumprod_adjoint(em, x, out, ct, axis, reverse, batch)?,
                // Each result is one element of `x`: its adjoint goes back there. (An empty
                // operand has an empty adjoint.)
                ScanOp::Max | ScanOp::Min if em.shape(x)?.numel() == 0 => ct,
                ScanOp::Max | ScanOp::Min => cumextreme_adjoint(em, x, out, ct, axis, reverse, batch)?,
            })]
        }
        Op::Reduce { op, axes, keepdims } => {
            let x = args[0];
            let x_shape = em.shape(x)?;
            let spread = spread_reduced(em, ct, batch, &x_shape, axes, *keepdims)?;
            vec![Some(match op {
                ReduceOp::Sum => spread,
                ReduceOp::Mean => {
                    let count = reduced_count(&x_shape, axes) as f64;
                    let scale = em.scalar_like(x, 1.0 / count)?;
                    em.mul(spread, scale)?
                }
                ReduceOp::Prod => {
                    let others = prod_others(em, x, axes)?;
                    em.mul(spread, others)?
                }
                ReduceOp::Max | ReduceOp::Min => {
                    let weights = chooser_weights(em, x, axes, *keepdims, out)?;
                    em.mul(spread, weights)?
                }
            })]
        }
    })
}

/// The adjoint of `x` of a running maximum or minimum `out` along `axis` from the result's
/// adjoint `ct` (shape `batch ++ S`), in `O(n)` per line. The results that are element `j`
/// form one run of consecutive steps starting at step `j` ([`scan_positions`]), so the
/// adjoints summed from the run's end, `s[i] = ct[i] + [result i+1 is element i's] s[i+1]` (a
/// linear recurrence from the other end whose coefficients are ones and zeros), give element
/// `j` its sum at `s[j]` where step `j` took its own element, and zero elsewhere.
fn cumextreme_adjoint(
    em: &mut Emitter,
    x: ValueId,
    out: ValueId,
    ct: ValueId,
    axis: usize,
    reverse: bool,
    batch: &Shape,
) -> Result<ValueId, AdError> {
    let shape = em.shape(x)?;
    let full = em.shape(ct)?;
    let taken = scan_positions(em, x, out, axis, reverse)?;
    // The next result's element, in the scan's order (the last result's coefficient scales the
    // recurrence's starting `-0`, so its value does not matter).
    let next = em.shift_along(taken, axis, !reverse, 0.0)?;
    let same = em.compare(CmpOp::Eq, next, taken)?;
    let one = em.scalar_like(ct, 1.0)?;
    let coef = em.mask(same, true, one)?;
    let coef = em.broadcast_to(coef, full)?;
    let runs = em.linrec(ct, coef, batch.rank() + axis, !reverse)?;
    let position = em.iota(DType::I32, shape, axis)?;
    let own = em.compare(CmpOp::Eq, taken, position)?;
    em.mask(own, true, runs)
}

/// The adjoint of a table of `table_shape` read along `axis` at `index` (a `gather`), from the
/// lookups' adjoint `ct` (shape `batch ++ index's shape`): each lookup's adjoint added into the
/// row it read (a scatter-add), written as a sum over the index's extent along `axis` of the
/// adjoint where the row read is the row counted, which every backend runs as a fused
/// reduction.
fn scatter_rows(
    em: &mut Emitter,
    ct: ValueId,
    index: ValueId,
    table_shape: &Shape,
    axis: usize,
    batch: &Shape,
) -> Result<ValueId, AdError> {
    let index_shape = em.shape(index)?;
    let extent = table_shape.dims()[axis];
    // Index axis `axis` becomes two: the table's rows (1 here), then the index's.
    let mut split = index_shape.dims().to_vec();
    split.insert(axis, 1);
    let row = em.gather_row(index, extent)?;
    let row = em.reshape(row, Shape::new(split.clone()))?;
    let mut rows = vec![1; split.len() - axis];
    rows[0] = extent;
    let count = em.dtype(row)?;
    let counted = em.iota(count, Shape::new(rows), 0)?;
    let read = em.compare(CmpOp::Eq, counted, row)?;
    let ct = em.reshape(ct, concat(batch, &Shape::new(split)))?;
    let mut full = concat(batch, table_shape).dims().to_vec();
    full.insert(batch.rank() + axis + 1, index_shape.dims()[axis]);
    let ct = em.broadcast_to(ct, Shape::new(full.clone()))?;
    let read = em.broadcast_to(read, Shape::new(full))?;
    let spread = em.mask(read, true, ct)?;
    em.reduce(ReduceOp::Sum, spread, &[batch.rank() + axis + 1], false)
}

/// Spreads the adjoint of a reduction result (shape `batch ++ reduced`) back over the reduced
/// axes: shape `batch ++ x_shape`.
fn spread_reduced(
    em: &mut Emitter,
    ct: ValueId,
    batch: &Shape,
    x_shape: &Shape,
    axes: &[usize],
    keepdims: bool,
) -> Result<ValueId, AdError> {
    // Reducing a leading run of axes without keepdims leaves a shape that broadcasts back
    // directly (right-aligned); otherwise the reduced axes are put back as 1s first.
    let leading = batch.rank() == 0 && axes.iter().enumerate().all(|(i, &a)| i == a);
    let aligned = if keepdims || leading {
        ct
    } else {
        em.reshape(ct, concat(batch, &keepdims_shape(x_shape, axes)))?
    };
    em.broadcast_to(aligned, concat(batch, x_shape))
}

/// `perm` acting on the trailing axes of a value with `batch_rank` leading batch axes.
pub(crate) fn batched_perm(batch_rank: usize, perm: &[usize]) -> Vec<usize> {
    (0..batch_rank)
        .chain(perm.iter().map(|p| p + batch_rank))
        .collect()
}

/// Per-axis offsets `at` of an example, behind `batch`'s axes (offset 0 along each).
pub(crate) fn behind(batch: &Shape, at: &[usize]) -> Vec<usize> {
    std::iter::repeat_n(0, batch.rank())
        .chain(at.iter().copied())
        .collect()
}

pub(crate) fn concat(a: &Shape, b: &Shape) -> Shape {
    Shape::new([a.dims(), b.dims()].concat())
}

/// A zero adjoint of shape `batch ++ shape(input)`.
pub(crate) fn zeros_for(em: &mut Emitter, batch: &Shape, input: &WrtInput) -> ValueId {
    em.constant(input.ty.dtype, 0.0, concat(batch, &input.ty.shape))
}

/// The float outputs of `kernel` (those with a cotangent): name, value and type, in order.
fn float_outputs(kernel: &Kernel) -> Vec<(String, ValueId, TensorType)> {
    kernel
        .outputs()
        .iter()
        .filter_map(|o| {
            kernel
                .value_type(o.value)
                .filter(|t| t.dtype.is_float())
                .map(|t| (o.name.clone(), o.value, t.clone()))
        })
        .collect()
}

/// The vector-Jacobian product of `kernel` with respect to the inputs `wrt`.
///
/// The result computes everything `kernel` does and, in the same kernel, the gradients:
/// - inputs: `kernel`'s inputs, then one cotangent input `ct_<output>` (the output's type) per
///   float output, in output order;
/// - outputs: `kernel`'s outputs, then `grad_<input>` (the input's type) per `wrt` input, in
///   `wrt` order: `Σ_outputs ct_output · ∂output/∂input`.
///
/// Bool and i32 outputs have no cotangent. An input no output depends on gets a zero gradient.
pub fn vjp<W: InputRef>(kernel: &Kernel, wrt: &[W]) -> Result<Kernel, AdError> {
    let wrt = resolve_wrt(kernel, wrt)?;
    let float_outputs = float_outputs(kernel);
    let extra: Vec<(String, TensorType)> = float_outputs
        .iter()
        .map(|(name, _, ty)| (format!("ct_{name}"), ty.clone()))
        .collect();
    let (mut em, ct_inputs) = Emitter::new(&format!("{}_vjp", kernel.name()), kernel, &extra)?;
    let active = active_values(kernel, &wrt);
    let seeds: Vec<(ValueId, Batched)> = float_outputs
        .iter()
        .zip(&ct_inputs)
        .map(|((_, value, _), &ct)| (*value, Batched::Dense(ct)))
        .collect();
    let grads = backward(&mut em, kernel, &active, &wrt, &Shape::scalar(), &seeds)?;
    em.primal_outputs(kernel)?;
    emit_grads(&mut em, &wrt, &grads, "grad_", &Shape::scalar())?;
    em.finish()
}

fn emit_grads(
    em: &mut Emitter,
    wrt: &[WrtInput],
    grads: &[Option<Batched>],
    prefix: &str,
    batch: &Shape,
) -> Result<(), AdError> {
    for (input, grad) in wrt.iter().zip(grads) {
        let value = match grad {
            Some(g) => g.dense(em, batch, &input.ty.shape)?,
            None => zeros_for(em, batch, input),
        };
        em.output(&format!("{prefix}{}", input.name), value)?;
    }
    Ok(())
}

/// Checks that `kernel` has one float output with one element; returns it.
fn scalar_output(kernel: &Kernel) -> Result<(String, ValueId, TensorType), AdError> {
    let [output] = kernel.outputs() else {
        return Err(AdError::OutputCount {
            found: kernel.outputs().len(),
        });
    };
    let ty = kernel
        .value_type(output.value)
        .cloned()
        .ok_or(rfx_ir::hir::BuildError::UnknownValue(output.value))?;
    if !ty.dtype.is_float() {
        return Err(AdError::NonFloatOutput {
            name: output.name.clone(),
            dtype: ty.dtype,
        });
    }
    if ty.shape.numel() != 1 {
        return Err(AdError::NonScalarOutput {
            name: output.name.clone(),
            shape: ty.shape,
        });
    }
    Ok((output.name.clone(), output.value, ty))
}

fn grad_kernel<W: InputRef>(kernel: &Kernel, wrt: &[W], keep_value: bool) -> Result<Kernel, AdError> {
    let wrt = resolve_wrt(kernel, wrt)?;
    let (name, value, ty) = scalar_output(kernel)?;
    let suffix = if keep_value { "value_and_grad" } else { "grad" };
    let (mut em, _) = Emitter::new(&format!("{}_{suffix}", kernel.name()), kernel, &[])?;
    let active = active_values(kernel, &wrt);
    let seed = em.constant(ty.dtype, 1.0, ty.shape.clone());
    let grads = backward(
        &mut em,
        kernel,
        &active,
        &wrt,
        &Shape::scalar(),
        &[(value, Batched::Dense(seed))],
    )?;
    if keep_value {
        let v = em.primal(value);
        em.output(&name, v)?;
    }
    emit_grads(&mut em, &wrt, &grads, "grad_", &Shape::scalar())?;
    em.finish()
}

/// The gradient of a kernel with one single-element float output (`[]`, `[1]`, ...), with
/// respect to the inputs `wrt`: a kernel with the same inputs and one output `grad_<input>`
/// (the input's type) per `wrt` input, in `wrt` order. The output is seeded with 1.
pub fn grad<W: InputRef>(kernel: &Kernel, wrt: &[W]) -> Result<Kernel, AdError> {
    grad_kernel(kernel, wrt, false)
}

/// Like [`grad`], but the kernel also returns the value: outputs are the original output, then
/// `grad_<input>` per `wrt` input. Value and gradients come from one kernel sharing the
/// forward computation.
pub fn value_and_grad<W: InputRef>(kernel: &Kernel, wrt: &[W]) -> Result<Kernel, AdError> {
    grad_kernel(kernel, wrt, true)
}

/// The Jacobians of every float output with respect to `wrt`, by reverse mode: one vectorised
/// backward sweep per output, all in one kernel with the forward computation.
///
/// Outputs: `kernel`'s outputs, then `jac_<output>_<input>` of shape
/// `shape(output) ++ shape(input)` for each float output and `wrt` input (output-major):
/// element `[i.., j..]` is `∂output[i..] / ∂input[j..]`.
///
/// Inputs: `kernel`'s inputs. Each sweep is seeded with the identity of `shape(output) ++
/// shape(output)`, built in the kernel from two `iota`s (single-element outputs with the
/// constant 1), so the seed fuses into the sweep and nothing extra is passed or stored.
pub fn jacrev<W: InputRef>(kernel: &Kernel, wrt: &[W]) -> Result<Kernel, AdError> {
    let wrt = resolve_wrt(kernel, wrt)?;
    let float_outputs = float_outputs(kernel);
    let (mut em, _) = Emitter::new(&format!("{}_jacrev", kernel.name()), kernel, &[])?;
    let active = active_values(kernel, &wrt);
    let mut jacobians = Vec::new();
    for (name, value, ty) in &float_outputs {
        // The identity of `shape ++ shape`, as its diagonal of ones.
        let seed = if ty.shape.numel() == 1 {
            Batched::Dense(em.identity(ty.dtype, &ty.shape)?)
        } else {
            Batched::Diag(em.scalar(ty.dtype, 1.0))
        };
        let grads = backward(&mut em, kernel, &active, &wrt, &ty.shape, &[(*value, seed)])?;
        jacobians.push((name.clone(), ty.shape.clone(), grads));
    }
    em.primal_outputs(kernel)?;
    for (name, shape, grads) in jacobians {
        emit_grads(&mut em, &wrt, &grads, &format!("jac_{name}_"), &shape)?;
    }
    em.finish()
}
