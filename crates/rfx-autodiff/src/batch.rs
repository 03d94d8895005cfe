//! Vectorising map: a kernel written for one example, rewritten to run a batch of them.

use std::collections::HashMap;

use rfx_ir::hir::{Builder, Kernel, Op, ValueId, verify};
use rfx_ir::{Shape, TensorType};

use crate::error::AdError;
use crate::graph::mapped_args;
use crate::loops::vmap_loop;

/// `kernel` mapped over a batch of `size` examples (JAX's `vmap` with `out_axes = 0`; see
/// [`vmap_out`] for other output axes).
///
/// `in_axes` has one entry per input of `kernel`, in order: `Some(a)` makes the input batched,
/// its type in the new kernel being the old one with an axis of extent `size` inserted at
/// position `a` (`0 ..= rank`); `None` keeps the input as it is, shared by every example. Every
/// output of the new kernel has the batch as its axis 0: output `[b, ...]` is the old kernel's
/// output for example `b`. Names (kernel, inputs, outputs) are unchanged.
///
/// The result is one HIR kernel, so the batch fuses into one loop like any other kernel; each
/// op maps to the same op one axis up (reductions and transposes shift their axes past the
/// batch, reshapes and broadcasts keep it in front), and values no batched input reaches are
/// computed once and broadcast only where they meet batched ones. Example `b` of the result
/// has the bits of the old kernel run on example `b` under the reference interpreter.
/// Derivatives compose both ways: `vmap` of a `grad` kernel gives per-example gradients, and
/// the derivative of a `vmap` kernel is the batched derivative.
///
/// # Errors
/// [`AdError::InvalidKernel`] when `kernel` does not verify, [`AdError::BatchAxesCount`] when
/// `in_axes` does not have one entry per input, [`AdError::BatchAxis`] for an axis past an
/// input's rank, [`AdError::NothingBatched`] when every entry is `None`, and
/// [`AdError::BatchTooLarge`] when a batched value would not fit in memory.
///
/// # Example
/// ```
/// use rfx_autodiff::vmap;
/// use rfx_ir::hir::Builder;
/// use rfx_ir::interp::{Mode, run_hir};
/// use rfx_ir::{Array, BinaryOp, DType, ReduceOp, TensorType};
///
/// // One example: the squared norm of a 3-vector, scaled by a shared gain.
/// let mut b = Builder::new("cost");
/// let x = b.input("x", TensorType::new(DType::F64, [3]))?;
/// let k = b.input("k", TensorType::new(DType::F64, []))?;
/// let sq = b.binary(BinaryOp::Mul, x, x)?;
/// let s = b.reduce_all(ReduceOp::Sum, sq)?;
/// let cost = b.binary(BinaryOp::Mul, s, k)?;
/// b.output("cost", cost)?;
///
/// // Two examples of `x` (rows), one gain.
/// let batched = vmap(&b.finish()?, &[Some(0), None], 2)?;
/// let x = Array::from_vec(vec![2, 3], vec![1.0f64, 2.0, 3.0, 0.5, 0.5, 0.5])?;
/// let k = Array::from_vec(vec![], vec![2.0f64])?;
/// let out = run_hir(&batched, &[x.view(), k.view()], Mode::Native)?;
/// assert_eq!(out[0].shape().dims(), &[2]);
/// assert_eq!(out[0].as_slice::<f64>(), Some(&[28.0, 1.5][..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn vmap(kernel: &Kernel, in_axes: &[Option<usize>], size: usize) -> Result<Kernel, AdError> {
    let out_axes = vec![Some(0); kernel.outputs().len()];
    vmap_out(kernel, in_axes, &out_axes, size)
}

/// [`vmap`] with the batch placed in each output by `out_axes` (JAX's `out_axes`): one entry per
/// output, in order. `Some(a)` puts the batch at axis `a` (`0 ..= rank` of one example's
/// output; the batch in the middle of a result is a strided store, not a copy, once fused);
/// `None` returns the output without a batch axis, which only an output that no batched input
/// reaches can have (one value shared by every example, computed once).
///
/// # Errors
/// Those of [`vmap`], and [`AdError::OutAxesCount`] when `out_axes` does not have one entry
/// per output, [`AdError::OutAxis`] for an axis past an output's rank, and
/// [`AdError::BatchedOutput`] for `None` on an output that a batched input reaches.
///
/// # Example
/// ```
/// use rfx_autodiff::vmap_out;
/// use rfx_ir::hir::Builder;
/// use rfx_ir::interp::{Mode, run_hir};
/// use rfx_ir::{Array, BinaryOp, DType, TensorType};
///
/// // One example: a 2-vector scaled by a shared gain; the gain doubled, shared too.
/// let mut b = Builder::new("scale");
/// let x = b.input("x", TensorType::new(DType::F64, [2]))?;
/// let k = b.input("k", TensorType::new(DType::F64, []))?;
/// let y = b.binary(BinaryOp::Mul, x, k)?;
/// let k2 = b.binary(BinaryOp::Add, k, k)?;
/// b.output("y", y)?;
/// b.output("k2", k2)?;
///
/// // Three examples as rows of `x`; `y` with the examples as its columns, `k2` unbatched.
/// let batched = vmap_out(&b.finish()?, &[Some(0), None], &[Some(1), None], 3)?;
/// let x = Array::from_vec(vec![3, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0])?;
/// let k = Array::from_vec(vec![], vec![10.0f64])?;
/// let out = run_hir(&batched, &[x.view(), k.view()], Mode::Native)?;
/// assert_eq!(out[0].shape().dims(), &[2, 3]);
/// assert_eq!(out[0].as_slice::<f64>(), Some(&[10.0, 30.0, 50.0, 20.0, 40.0, 60.0][..]));
/// assert_eq!(out[1].as_slice::<f64>(), Some(&[20.0][..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn vmap_out(
    kernel: &Kernel,
    in_axes: &[Option<usize>],
    out_axes: &[Option<usize>],
    size: usize,
) -> Result<Kernel, AdError> {
    verify(kernel).map_err(AdError::InvalidKernel)?;
    if out_axes.len() != kernel.outputs().len() {
        return Err(AdError::OutAxesCount {
            expected: kernel.outputs().len(),
            found: out_axes.len(),
        });
    }
    for (output, axis) in kernel.outputs().iter().zip(out_axes) {
        let rank = kernel
            .value_type(output.value)
            .ok_or(rfx_ir::hir::BuildError::UnknownValue(output.value))?
            .shape
            .rank();
        if let Some(axis) = *axis
            && axis > rank
        {
            return Err(AdError::OutAxis {
                name: output.name.clone(),
                axis,
                rank,
            });
        }
    }
    let n_inputs = kernel.inputs().count();
    if in_axes.len() != n_inputs {
        return Err(AdError::BatchAxesCount {
            expected: n_inputs,
            found: in_axes.len(),
        });
    }
    for ((_, name, ty), axis) in kernel.inputs().zip(in_axes) {
        if let Some(axis) = *axis
            && axis > ty.shape.rank()
        {
            return Err(AdError::BatchAxis {
                name: name.to_string(),
                axis,
                rank: ty.shape.rank(),
            });
        }
    }
    if in_axes.iter().all(Option::is_none) {
        return Err(AdError::NothingBatched);
    }

    let mut b = Builder::new(kernel.name());
    // For each old value: the new value and whether it carries the batch as axis 0.
    let mut map: Vec<Option<(ValueId, bool)>> = vec![None; kernel.nodes().len()];
    // Every input first (in order), then the transposes that bring batch axes to the front.
    let inputs: Vec<_> = kernel.inputs().collect();
    let mut declared = Vec::with_capacity(n_inputs);
    for (&(_, name, ty), axis) in inputs.iter().zip(in_axes) {
        let ty = match *axis {
            None => ty.clone(),
            Some(axis) => {
                let mut dims = batched_type(ty, size)?.shape.dims().to_vec();
                dims.remove(0);
                dims.insert(axis, size);
                TensorType::new(ty.dtype, dims)
            }
        };
        declared.push(b.input(name, ty)?);
    }
    for ((&(value, _, ty), axis), input) in inputs.iter().zip(in_axes).zip(declared) {
        map[value.index()] = Some(match *axis {
            None => (input, false),
            Some(0) => (input, true),
            Some(axis) => {
                // Result axis 0 is input axis `axis`; the others keep their order.
                let perm: Vec<usize> = std::iter::once(axis)
                    .chain((0..=ty.shape.rank()).filter(|&i| i != axis))
                    .collect();
                (b.transpose(input, &perm)?, true)
            }
        });
    }

    // The final carries of each batched loop (each with whether it is batched), by the loop's
    // index.
    let mut loop_finals: HashMap<usize, Vec<(ValueId, bool)>> = HashMap::new();
    for (index, node) in kernel.nodes().iter().enumerate() {
        if matches!(node.op, Op::Input { .. }) {
            continue;
        }
        let args = mapped_args(&map, &node.args, index)?;
        if let &Op::LoopOutput { index: carry } = &node.op
            && let Some(finals) = node.args.first().and_then(|of| loop_finals.get(&of.index()))
        {
            map[index] = finals.get(carry).copied();
            continue;
        }
        if let Op::Loop(spec) = &node.op
            && args.iter().any(|&(_, batched)| batched)
        {
            let finals = vmap_loop(&mut b, spec, &args, size)?;
            map[index] = finals.first().copied();
            loop_finals.insert(index, finals);
            continue;
        }
        if !args.iter().any(|&(_, batched)| batched) {
            let plain: Vec<ValueId> = args.iter().map(|&(v, _)| v).collect();
            map[index] = Some((b.copy(&node.op, &plain, &node.ty)?, false));
            continue;
        }
        let ty = batched_type(&node.ty, size)?;
        let value = match &node.op {
            Op::Reduce { op, axes, keepdims } => {
                let op = Op::Reduce {
                    op: *op,
                    axes: axes.iter().map(|a| a + 1).collect(),
                    keepdims: *keepdims,
                };
                b.copy(&op, &[args[0].0], &ty)?
            }
            // A running fold (or a linear recurrence, its coefficient broadcast along the batch
            // when unbatched) along the same axis of every example.
            &Op::Scan { op, axis, reverse } => {
                let op = Op::Scan {
                    op,
                    axis: axis + 1,
                    reverse,
                };
                let mut operands = Vec::with_capacity(args.len());
                for &(v, batched) in &args {
                    operands.push(if batched {
                        v
                    } else {
                        b.broadcast_to(v, ty.shape.clone())?
                    });
                }
                b.copy(&op, &operands, &ty)?
            }
            Op::Transpose { perm } => {
                let perm: Vec<usize> = std::iter::once(0).chain(perm.iter().map(|p| p + 1)).collect();
                b.copy(&Op::Transpose { perm }, &[args[0].0], &ty)?
            }
            // A window or a padding of every example: nothing moves along the batch.
            Op::Slice { starts } => {
                let starts = std::iter::once(0).chain(starts.iter().copied()).collect();
                b.copy(&Op::Slice { starts }, &[args[0].0], &ty)?
            }
            Op::Pad { low } => {
                let low = std::iter::once(0).chain(low.iter().copied()).collect();
                b.copy(&Op::Pad { low }, &[args[0].0], &ty)?
            }
            // A lookup in every example's table at every example's index: an unbatched table
            // or index is the same for each example (a broadcast, read with stride 0).
            Op::Gather { axis } => {
                let mut operands = Vec::with_capacity(2);
                for &(v, batched) in &args {
                    operands.push(if batched {
                        v
                    } else {
                        let ty = b.value_type(v)?.clone();
                        b.broadcast_to(v, batched_type(&ty, size)?.shape)?
                    });
                }
                b.copy(&Op::Gather { axis: axis + 1 }, &operands, &ty)?
            }
            // One row of every example: a select by row (an index may differ per example).
            Op::SetRow => set_row_batched(&mut b, &args, &ty, size)?,
            // A reshape keeps the batch in front (row-major: each example stays contiguous).
            Op::Reshape => b.copy(&Op::Reshape, &[args[0].0], &ty)?,
            Op::Loop(_) | Op::LoopOutput { .. } => {
                return Err(AdError::Internal(rfx_ir::hir::BuildError::UnknownValue(
                    ValueId::new(index),
                )));
            }
            // Elementwise ops and `broadcast_to`: a batched operand of lower rank than the
            // result gets unit axes after the batch, so that NumPy's right alignment lines its
            // axes up with the example's and the batch with the batch.
            _ => {
                let rank = node.ty.shape.rank();
                let mut operands = Vec::with_capacity(args.len());
                for &(v, batched) in &args {
                    operands.push(if batched { align(&mut b, v, rank)? } else { v });
                }
                b.copy(&node.op, &operands, &ty)?
            }
        };
        map[index] = Some((value, true));
    }

    for (output, axis) in kernel.outputs().iter().zip(out_axes) {
        let (value, batched) = map
            .get(output.value.index())
            .copied()
            .flatten()
            .ok_or(rfx_ir::hir::BuildError::UnknownValue(output.value))?;
        let value = match (*axis, batched) {
            (None, false) => value,
            (None, true) => {
                return Err(AdError::BatchedOutput {
                    name: output.name.clone(),
                });
            }
            (Some(axis), _) => {
                let value = if batched {
                    value
                } else {
                    let ty = b.value_type(value)?.clone();
                    b.broadcast_to(value, batched_type(&ty, size)?.shape)?
                };
                if axis == 0 {
                    value
                } else {
                    // The batch (axis 0) moved to `axis`, the example's axes keeping their order.
                    let rank = b.value_type(value)?.shape.rank();
                    let perm: Vec<usize> = (1..=axis)
                        .chain(std::iter::once(0))
                        .chain(axis + 1..rank)
                        .collect();
                    b.transpose(value, &perm)?
                }
            }
        };
        b.output(output.name.clone(), value)?;
    }
    Ok(b.finish()?)
}

/// `ty` with the batch axis in front, or [`AdError::BatchTooLarge`] when a buffer of it could
/// not exist (more than `isize::MAX` bytes).
fn batched_type(ty: &TensorType, size: usize) -> Result<TensorType, AdError> {
    let bytes = ty
        .shape
        .dims()
        .iter()
        .try_fold(size, |n, &d| n.checked_mul(d))
        .and_then(|n| n.checked_mul(ty.dtype.size_bytes()));
    if bytes.is_none_or(|b| b > isize::MAX as usize) {
        return Err(AdError::BatchTooLarge { size, ty: ty.clone() });
    }
    let dims: Vec<usize> = std::iter::once(size)
        .chain(ty.shape.dims().iter().copied())
        .collect();
    Ok(TensorType::new(ty.dtype, dims))
}

/// The batched value `v` (`[B, s...]`) reshaped to rank `rank + 1` by unit axes after the batch.
fn align(b: &mut Builder, v: ValueId, rank: usize) -> Result<ValueId, AdError> {
    let dims = b.value_type(v)?.shape.dims().to_vec();
    let missing = (rank + 1).saturating_sub(dims.len());
    if missing == 0 {
        return Ok(v);
    }
    let mut aligned = Vec::with_capacity(rank + 1);
    aligned.push(dims[0]);
    aligned.extend(std::iter::repeat_n(1, missing));
    aligned.extend_from_slice(&dims[1..]);
    Ok(b.reshape(v, Shape::new(aligned))?)
}

/// `vmap` of `set_row(x, row, index)` over `args` (each with whether it carries the batch as
/// axis 0) into the batched type `ty`: `select(iota == clamp(index), row, x)` along axis 1, an
/// unbatched operand broadcast (the index per example when batched).
fn set_row_batched(
    b: &mut Builder,
    args: &[(ValueId, bool)],
    ty: &TensorType,
    size: usize,
) -> Result<ValueId, AdError> {
    let (&[(x, x_batched), (row, row_batched), (index, index_batched)], Some(&rows)) =
        (args, ty.shape.dims().get(1))
    else {
        return Err(AdError::Internal(rfx_ir::hir::BuildError::UnknownValue(
            ValueId::new(0),
        )));
    };
    let rank = ty.shape.rank();
    let x = if x_batched {
        x
    } else {
        b.broadcast_to(x, ty.shape.clone())?
    };
    let last = i32::try_from(rows.saturating_sub(1)).unwrap_or(i32::MAX);
    let zero = b.scalar(rfx_ir::Scalar::I32(0));
    let last = b.scalar(rfx_ir::Scalar::I32(last));
    let at = b.binary(rfx_ir::BinaryOp::Max, index, zero)?;
    let at = b.binary(rfx_ir::BinaryOp::Min, at, last)?;
    let mut at_shape = vec![1; rank];
    if index_batched {
        at_shape[0] = size;
    }
    let at = b.reshape(at, Shape::new(at_shape))?;
    let mut column = vec![1; rank];
    column[1] = rows;
    let iota = b.iota(rfx_ir::DType::I32, Shape::new(column), 1)?;
    let here = b.compare(rfx_ir::CmpOp::Eq, iota, at)?;
    let mut row_shape = ty.shape.dims().to_vec();
    row_shape[1] = 1;
    if !row_batched {
        row_shape[0] = 1;
    }
    let row = b.reshape(row, Shape::new(row_shape))?;
    Ok(b.select(here, row, x)?)
}
