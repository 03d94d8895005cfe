//! The HIR reference interpreter: evaluates a [`Kernel`] node by node on host arrays.
//!
//! Every node's value is materialised as a dense row-major [`Array`]; arithmetic goes through
//! [`crate::semantics`] one scalar at a time. This is slow on purpose: it is the definition the
//! compiled paths are compared against, so it favours being obviously right.
//!
//! **Reduction order:** a reduction visits, for each output element, the reduced elements in
//! row-major order of the reduced axes (the last reduced axis varies fastest) and folds them
//! one at a time into an accumulator that starts at [`semantics::reduce_identity`]:
//! `acc = combine(acc, x)`. For `f32` sums this sequential order has an error bound of
//! `(n - 1) · 2^-24 · Σ|x|` over `n` elements, larger than NumPy's pairwise summation; paths
//! that sum in another order document their own bound.
//!
//! **Scan order:** a scan folds each line along its axis one element at a time from the first
//! element (the last with `reverse`), starting at the same identity ([`semantics::scan`]).
//!
//! **Oracle mode:** every `f32` value is held as `f64` (inputs and `f32` constants are widened
//! exactly, a `cast` to `f32` produces the `f64` value without rounding, and every op computes in
//! `f64`), so float outputs come back as `f64` arrays. `i32` and bool values are unchanged.

use crate::hir::{Kernel, Node, Op, ValueId};
use crate::interp::{InterpError, Mode};
use crate::ops::ReduceOp;
use crate::semantics;
use crate::{Array, ArrayData, ArrayView, DType, Scalar, Shape};

/// Runs `kernel` on `inputs` (positional, in the order of [`Kernel::inputs`]) and returns the
/// outputs in the order of [`Kernel::outputs`].
///
/// The kernel is verified first ([`InterpError::InvalidHir`]), then the number, dtypes and shapes
/// of the inputs are checked ([`InterpError::Arity`], [`InterpError::InputDType`],
/// [`InterpError::InputShape`]) before anything is computed. Zero-size shapes are allowed
/// everywhere. In [`Mode::Oracle`] float outputs are `f64` arrays (see the module documentation).
pub fn run_hir(kernel: &Kernel, inputs: &[ArrayView<'_>], mode: Mode) -> Result<Vec<Array>, InterpError> {
    crate::hir::verify(kernel).map_err(InterpError::InvalidHir)?;
    let inputs = check_inputs(kernel, inputs, mode)?;
    eval_kernel(kernel, inputs, mode).map_err(|value| unverified(kernel, value))
}

/// Evaluates a verified kernel on inputs already in their storage dtype. `Err` names the
/// first value whose operands break the typing rules (impossible for a verified kernel).
fn eval_kernel(kernel: &Kernel, inputs: Vec<Array>, mode: Mode) -> Result<Vec<Array>, ValueId> {
    let mut input_values = inputs.into_iter();
    let mut values: Vec<Array> = Vec::with_capacity(kernel.nodes().len());
    // The final carries of each loop node, by node index, for its `loop_output` nodes.
    let mut carries: std::collections::BTreeMap<usize, Vec<Array>> = std::collections::BTreeMap::new();
    for (index, node) in kernel.nodes().iter().enumerate() {
        let value_id = ValueId::new(index);
        let value = match &node.op {
            Op::Input { .. } => input_values.next(),
            Op::Loop(spec) => {
                let operands = node
                    .args
                    .iter()
                    .map(|arg| values.get(arg.index()).cloned())
                    .collect::<Option<Vec<Array>>>()
                    .ok_or(value_id)?;
                let finals = eval_loop(spec, operands, mode)?;
                let first = finals.first().cloned();
                carries.insert(index, finals);
                first
            }
            Op::LoopOutput { index: carry } => node
                .args
                .first()
                .and_then(|l| carries.get(&l.index()))
                .and_then(|finals| finals.get(*carry))
                .cloned(),
            _ => eval_node(node, &values, mode),
        };
        values.push(value.ok_or(value_id)?);
    }
    kernel
        .outputs()
        .iter()
        .map(|output| values.get(output.value.index()).cloned().ok_or(output.value))
        .collect()
}

/// Runs a loop (see [`crate::hir::Loop`]) from its operands and gives the final carries. An
/// error inside the body or the test is reported at the loop's own value by the caller's
/// `unverified`, so the `ValueId` returned here is the inner kernel's.
fn eval_loop(spec: &crate::hir::Loop, operands: Vec<Array>, mode: Mode) -> Result<Vec<Array>, ValueId> {
    let invariants = operands.get(spec.carries..).ok_or(ValueId::new(0))?.to_vec();
    let mut carry: Vec<Array> = operands.into_iter().take(spec.carries).collect();
    for _ in 0..spec.trips {
        let args: Vec<Array> = carry.iter().chain(&invariants).cloned().collect();
        if let Some(cond) = &spec.cond {
            let test = eval_kernel(cond, args.clone(), mode)?;
            match test.first().map(|t| t.get(0)) {
                Some(Some(Scalar::Bool(true))) => {}
                Some(Some(Scalar::Bool(false))) => break,
                _ => return Err(ValueId::new(0)),
            }
        }
        carry = eval_kernel(&spec.body, args, mode)?;
    }
    Ok(carry)
}

/// The error for a kernel the verifier should have rejected: evaluating `value` found operands
/// that break the typing rules. Unreachable for a verified kernel; kept so that a verifier gap
/// gives an error instead of a panic.
fn unverified(_kernel: &Kernel, value: ValueId) -> InterpError {
    InterpError::Inconsistent {
        location: value.to_string(),
    }
}

/// The dtype a value of `dtype` is held in under `mode`: `f64` for `f32` in oracle mode.
fn storage_dtype(dtype: DType, mode: Mode) -> DType {
    match (mode, dtype) {
        (Mode::Oracle, DType::F32) => DType::F64,
        _ => dtype,
    }
}

/// Checks the inputs against the kernel's declared inputs and copies them into arrays of their
/// storage dtype.
fn check_inputs(kernel: &Kernel, inputs: &[ArrayView<'_>], mode: Mode) -> Result<Vec<Array>, InterpError> {
    let expected = kernel.inputs().count();
    if inputs.len() != expected {
        return Err(InterpError::Arity {
            expected,
            found: inputs.len(),
        });
    }
    let mut arrays = Vec::with_capacity(expected);
    for (view, (_, name, ty)) in inputs.iter().zip(kernel.inputs()) {
        if view.dtype() != ty.dtype {
            return Err(InterpError::InputDType {
                name: name.to_string(),
                expected: ty.dtype,
                found: view.dtype(),
            });
        }
        if view.shape() != &ty.shape {
            return Err(InterpError::InputShape {
                name: name.to_string(),
                expected: ty.shape.clone(),
                found: view.shape().clone(),
            });
        }
        let array = match (storage_dtype(ty.dtype, mode), view.data()) {
            (DType::F64, crate::DataRef::F32(values)) => Array::new(
                ty.shape.clone(),
                ArrayData::F64(values.iter().map(|&v| f64::from(v)).collect()),
            ),
            _ => Ok(view.to_owned()),
        };
        // The length was checked when the view was made and the shape matches, so this holds.
        let array = array.map_err(|_| InterpError::InputShape {
            name: name.to_string(),
            expected: ty.shape.clone(),
            found: view.shape().clone(),
        })?;
        arrays.push(array);
    }
    Ok(arrays)
}

/// Evaluates one non-input node from the values of earlier nodes. `None` when the node breaks
/// the typing rules (impossible for a verified kernel).
fn eval_node(node: &Node, values: &[Array], mode: Mode) -> Option<Array> {
    let args = node
        .args
        .iter()
        .map(|arg| values.get(arg.index()))
        .collect::<Option<Vec<&Array>>>()?;
    if args.len() != node.op.arity() {
        return None;
    }
    let out_shape = &node.ty.shape;
    let out_dtype = storage_dtype(node.ty.dtype, mode);
    match &node.op {
        // Inputs and loops are evaluated by `eval_kernel`, which holds their inputs and carries.
        Op::Input { .. } | Op::Loop(_) | Op::LoopOutput { .. } => None,
        Op::Const(value) => {
            let value = semantics::cast(*value, out_dtype);
            Some(Array::filled(value, out_shape.clone()))
        }
        Op::Literal(values) => {
            let values = values.iter().map(|&v| semantics::cast(v, out_dtype));
            Array::new(out_shape.clone(), ArrayData::from_scalars(out_dtype, values)?).ok()
        }
        Op::Unary(op) => eval_elementwise(out_shape, out_dtype, &args, |x| {
            semantics::unary(*op, *x.first()?)
        }),
        Op::Binary(op) => eval_elementwise(out_shape, out_dtype, &args, |x| match x {
            [a, b] => semantics::binary(*op, *a, *b),
            _ => None,
        }),
        Op::Compare(op) => eval_elementwise(out_shape, out_dtype, &args, |x| match x {
            [a, b] => semantics::compare(*op, *a, *b).map(Scalar::Bool),
            _ => None,
        }),
        Op::Select => eval_elementwise(out_shape, out_dtype, &args, |x| match x {
            [Scalar::Bool(cond), a, b] => Some(semantics::select(*cond, *a, *b)),
            _ => None,
        }),
        Op::Clamp => eval_elementwise(out_shape, out_dtype, &args, |x| match x {
            [v, lo, hi] => semantics::clamp(*v, *lo, *hi),
            _ => None,
        }),
        Op::Cast => eval_elementwise(out_shape, out_dtype, &args, |x| {
            Some(semantics::cast(*x.first()?, out_dtype))
        }),
        Op::BroadcastTo => eval_elementwise(out_shape, out_dtype, &args, |x| x.first().copied()),
        Op::Reshape => {
            let operand = args.first()?;
            if operand.dtype() != out_dtype {
                return None;
            }
            Array::new(out_shape.clone(), operand.data().clone()).ok()
        }
        Op::Iota { axis } => {
            let mut index = vec![0usize; out_shape.rank()];
            let results = (0..out_shape.numel())
                .map(|linear| {
                    out_shape.unravel(linear, &mut index);
                    semantics::index_value(*index.get(*axis)?, out_dtype)
                })
                .collect::<Option<Vec<_>>>()?;
            Array::new(out_shape.clone(), ArrayData::from_scalars(out_dtype, results)?).ok()
        }
        Op::Transpose { perm } => {
            let operand = args.first()?;
            let strides = transposed_strides(operand.shape(), perm)?;
            let mut index = vec![0usize; out_shape.rank()];
            let results = (0..out_shape.numel())
                .map(|linear| {
                    out_shape.unravel(linear, &mut index);
                    operand.get(index.iter().zip(&strides).map(|(i, s)| i * s).sum())
                })
                .collect::<Option<Vec<_>>>()?;
            Array::new(out_shape.clone(), ArrayData::from_scalars(out_dtype, results)?).ok()
        }
        Op::Slice { starts } => {
            let operand = args.first()?;
            let strides = operand.shape().strides();
            let base: usize = starts.iter().zip(&strides).map(|(a, s)| a * s).sum();
            let mut index = vec![0usize; out_shape.rank()];
            let results = (0..out_shape.numel())
                .map(|linear| {
                    out_shape.unravel(linear, &mut index);
                    operand.get(base + index.iter().zip(&strides).map(|(i, s)| i * s).sum::<usize>())
                })
                .collect::<Option<Vec<_>>>()?;
            Array::new(out_shape.clone(), ArrayData::from_scalars(out_dtype, results)?).ok()
        }
        Op::Pad { low } => {
            let operand = args.first()?;
            let (inner, strides) = (operand.shape().dims(), operand.shape().strides());
            let zero = Scalar::zero(out_dtype);
            let mut index = vec![0usize; out_shape.rank()];
            let results = (0..out_shape.numel())
                .map(|linear| {
                    out_shape.unravel(linear, &mut index);
                    let mut at = 0;
                    for (d, &i) in index.iter().enumerate() {
                        match i.checked_sub(*low.get(d)?) {
                            Some(j) if j < *inner.get(d)? => at += j * strides.get(d)?,
                            _ => return Some(zero),
                        }
                    }
                    operand.get(at)
                })
                .collect::<Option<Vec<_>>>()?;
            Array::new(out_shape.clone(), ArrayData::from_scalars(out_dtype, results)?).ok()
        }
        Op::Gather { axis } => {
            let (table, at) = (args.first()?, args.get(1)?);
            let strides = table.shape().strides();
            let extent = *table.shape().dims().get(*axis)?;
            let mut index = vec![0usize; out_shape.rank()];
            let results = (0..out_shape.numel())
                .map(|linear| {
                    out_shape.unravel(linear, &mut index);
                    let row = semantics::clamp_index(at.get(linear)?, extent)?;
                    *index.get_mut(*axis)? = row;
                    table.get(index.iter().zip(&strides).map(|(i, s)| i * s).sum())
                })
                .collect::<Option<Vec<_>>>()?;
            Array::new(out_shape.clone(), ArrayData::from_scalars(out_dtype, results)?).ok()
        }
        Op::SetRow => {
            let (x, row, at) = (args.first()?, args.get(1)?, args.get(2)?);
            let rows = *out_shape.dims().first()?;
            let target = semantics::clamp_index(at.get(0)?, rows)?;
            let width = row.shape().numel();
            let results = (0..out_shape.numel())
                .map(|i| {
                    if i / width.max(1) == target && width > 0 {
                        row.get(i % width)
                    } else {
                        x.get(i)
                    }
                })
                .collect::<Option<Vec<_>>>()?;
            Array::new(out_shape.clone(), ArrayData::from_scalars(out_dtype, results)?).ok()
        }
        Op::Reduce {
            op,
            axes,
            keepdims: _,
        } => eval_reduce(*op, args.first()?, axes, out_shape, out_dtype),
        Op::Scan { op, axis, reverse } => {
            let elements = |array: &Array| {
                (0..array.shape().numel())
                    .map(|i| array.get(i))
                    .collect::<Option<Vec<_>>>()
            };
            let values = elements(args.first()?)?;
            let coefs = match args.get(1) {
                Some(coef) => Some(elements(coef)?),
                None => None,
            };
            let results = semantics::scan(*op, &values, coefs.as_deref(), out_shape.dims(), *axis, *reverse)?;
            Array::new(out_shape.clone(), ArrayData::from_scalars(out_dtype, results)?).ok()
        }
    }
}

/// The strides (in elements of a row-major buffer of `shape`) that read its transpose by
/// `perm` in row-major order of the result. `None` when `perm` does not fit the rank.
fn transposed_strides(shape: &Shape, perm: &[usize]) -> Option<Vec<usize>> {
    let own = shape.strides();
    perm.iter().map(|&axis| own.get(axis).copied()).collect()
}

/// Computes `out[i] = f(operands broadcast to out_shape at i)` for every element, row-major.
/// `None` when an operand does not broadcast, `f` rejects its operands, or a result is not of
/// `out_dtype`.
fn eval_elementwise(
    out_shape: &Shape,
    out_dtype: DType,
    operands: &[&Array],
    f: impl Fn(&[Scalar]) -> Option<Scalar>,
) -> Option<Array> {
    let strides = operands
        .iter()
        .map(|operand| operand.shape().broadcast_strides(out_shape))
        .collect::<Option<Vec<Vec<usize>>>>()?;
    let n_elems = out_shape.numel();
    let mut index = vec![0usize; out_shape.rank()];
    let mut scalars = Vec::with_capacity(operands.len());
    let mut results = Vec::with_capacity(n_elems);
    for linear in 0..n_elems {
        out_shape.unravel(linear, &mut index);
        scalars.clear();
        for (operand, operand_strides) in operands.iter().zip(&strides) {
            let offset = index
                .iter()
                .zip(operand_strides)
                .map(|(i, s)| i * s)
                .sum::<usize>();
            scalars.push(operand.get(offset)?);
        }
        results.push(f(&scalars)?);
    }
    let data = ArrayData::from_scalars(out_dtype, results)?;
    Array::new(out_shape.clone(), data).ok()
}

/// Reduces `operand` over `axes` (sorted, distinct), folding each output's reduced elements in
/// row-major order of the reduced axes (see the module documentation).
fn eval_reduce(
    op: ReduceOp,
    operand: &Array,
    axes: &[usize],
    out_shape: &Shape,
    out_dtype: DType,
) -> Option<Array> {
    let in_shape = operand.shape();
    if axes.iter().any(|&axis| axis >= in_shape.rank()) {
        return None;
    }
    let in_strides = in_shape.strides();
    let is_reduced = |axis: usize| axes.contains(&axis);
    // The kept and the reduced axes, each with their extent and input stride, outermost first.
    let (kept, reduced): (Vec<_>, Vec<_>) = in_shape
        .dims()
        .iter()
        .zip(&in_strides)
        .enumerate()
        .partition(|&(axis, _)| !is_reduced(axis));
    let kept_shape = Shape::new(kept.iter().map(|&(_, (&dim, _))| dim).collect::<Vec<_>>());
    let kept_strides = kept.iter().map(|&(_, (_, &stride))| stride).collect::<Vec<_>>();
    let reduced_shape = Shape::new(reduced.iter().map(|&(_, (&dim, _))| dim).collect::<Vec<_>>());
    let reduced_strides = reduced
        .iter()
        .map(|&(_, (_, &stride))| stride)
        .collect::<Vec<_>>();

    // Inserting or removing size-1 axes (keepdims) does not change the row-major order, so the
    // outputs in `kept_shape` order are the outputs in `out_shape` order.
    let n_out = kept_shape.numel();
    if n_out != out_shape.numel() {
        return None;
    }
    let n_reduced = reduced_shape.numel();
    let identity = semantics::reduce_identity(op, operand.dtype())?;
    let mut kept_index = vec![0usize; kept_shape.rank()];
    let mut reduced_index = vec![0usize; reduced_shape.rank()];
    let mut results = Vec::with_capacity(n_out);
    for out_linear in 0..n_out {
        kept_shape.unravel(out_linear, &mut kept_index);
        let base = kept_index
            .iter()
            .zip(&kept_strides)
            .map(|(i, s)| i * s)
            .sum::<usize>();
        let mut acc = identity;
        for reduced_linear in 0..n_reduced {
            reduced_shape.unravel(reduced_linear, &mut reduced_index);
            let offset = base
                + reduced_index
                    .iter()
                    .zip(&reduced_strides)
                    .map(|(i, s)| i * s)
                    .sum::<usize>();
            acc = semantics::reduce_combine(op, acc, operand.get(offset)?)?;
        }
        results.push(semantics::reduce_finish(op, acc, n_reduced)?);
    }
    let data = ArrayData::from_scalars(out_dtype, results)?;
    Array::new(out_shape.clone(), data).ok()
}
