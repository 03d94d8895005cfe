//! The MIR reference interpreter.

use super::host::{Runner, bind_inputs, compute_dtype, offset, take_outputs, unravel};
use super::{InterpError, Mode};
use crate::mir::{self, BufKind, MirKernel, MirOp, MirProgram};
use crate::semantics::{
    binary, cast, compare, index_value, reduce_combine, reduce_finish, reduce_identity, scan_step, select,
    unary,
};
use crate::shape::Shape;
use crate::{Array, ArrayView, Scalar};

/// Runs a MIR program on `inputs` (one per input buffer, in buffer order) and returns the output
/// buffers in buffer order.
///
/// The program is verified first ([`InterpError::InvalidMir`]) and every input checked against
/// its buffer's dtype and shape. Kernels run in order; each evaluates its body at every domain
/// point in row-major order. A reduction starts from the op's identity and combines the points
/// of each reduced slice sequentially in row-major order of the reduced axes, then finishes
/// (`mean` divides by the number of reduced points). A kernel with scans visits its points in
/// row-major order with the scanned axis's coordinate counted down for a reverse scan, so each
/// line along the axis is met in scan order, and keeps one running accumulator per scan and
/// line, starting at the op's identity. A program loop ([`MirProgram::loops`]) runs its range
/// of kernels up to `trips` times and, with an exit flag, stops after the first iteration that
/// leaves the flag `false`. Temps start as zeros, but the verifier guarantees none is read
/// before it is written.
pub fn run_mir(
    program: &MirProgram,
    inputs: &[ArrayView<'_>],
    mode: Mode,
) -> Result<Vec<Array>, InterpError> {
    mir::verify(program).map_err(InterpError::InvalidMir)?;
    let mut bound = bind_inputs(program.inputs().map(|(_, name, ty)| (name, ty)), inputs, mode)?.into_iter();
    let mut memory = Vec::with_capacity(program.buffers().len());
    for buffer in program.buffers() {
        memory.push(match &buffer.kind {
            BufKind::Input { .. } => bound.next().unwrap_or_default(),
            BufKind::Literal { values } => {
                let dtype = compute_dtype(mode, buffer.ty.dtype);
                values.iter().map(|&v| crate::semantics::cast(v, dtype)).collect()
            }
            _ => vec![Scalar::zero(compute_dtype(mode, buffer.ty.dtype)); buffer.ty.shape.numel()],
        });
    }
    let runner = Runner {
        kernels: program.kernels().iter().map(|k| (k.name.as_str(), k)).collect(),
        run: &|kernel, memory: &mut Vec<Vec<Scalar>>| run_kernel(kernel, memory, mode),
        flag: &|memory: &Vec<Vec<Scalar>>, buf| match memory.get(buf.index())?.first()? {
            Scalar::Bool(keep) => Some(*keep),
            _ => None,
        },
    };
    runner.run(program.loops(), &mut memory)?;
    take_outputs(
        program.outputs().map(|(buf, _, ty)| (buf, buf.index(), ty)),
        &mut memory,
        mode,
    )
}

/// Evaluates one kernel; `None` only if the kernel breaks a rule the verifier checks.
fn run_kernel(kernel: &MirKernel, memory: &mut [Vec<Scalar>], mode: Mode) -> Option<()> {
    let dims = kernel.domain.dims();
    let mut idx = vec![0usize; dims.len()];
    let mut values: Vec<Scalar> = Vec::with_capacity(kernel.body.len());

    // Per reduction: the stride of each domain axis in the row-major index of the kept axes
    // (0 for reduced axes), the accumulators, and the number of reduced points.
    let mut reductions = Vec::with_capacity(kernel.reductions.len());
    for red in &kernel.reductions {
        let mut kept_strides = vec![0usize; dims.len()];
        let (mut acc_len, mut count) = (1usize, 1usize);
        for axis in (0..dims.len()).rev() {
            if red.axes.contains(&axis) {
                count = count.saturating_mul(dims[axis]);
            } else {
                kept_strides[axis] = acc_len;
                acc_len = acc_len.saturating_mul(dims[axis]);
            }
        }
        let dtype = compute_dtype(mode, kernel.inst(red.value)?.dtype);
        let accs = vec![reduce_identity(red.op, dtype)?; acc_len];
        reductions.push((kept_strides, accs, count));
    }

    // Per scan instruction: its running accumulators, one per line along the scanned axis, at
    // the row-major index of the point's other coordinates.
    let scan = kernel.scan();
    let mut line_strides = vec![0usize; dims.len()];
    let mut lines = 1usize;
    for axis in (0..dims.len()).rev() {
        if scan.is_none_or(|(scanned, _)| scanned != axis) {
            line_strides[axis] = lines;
            lines = lines.saturating_mul(dims[axis]);
        }
    }
    let mut scan_accs: Vec<Vec<Scalar>> = Vec::new();
    for inst in &kernel.body {
        if let MirOp::Scan { op, .. } = inst.op {
            let identity = reduce_identity(op.reduce_op(), compute_dtype(mode, inst.dtype))?;
            scan_accs.push(vec![identity; lines]);
        }
    }
    let domain_strides = Shape::new(dims.to_vec()).strides();

    for linear in 0..kernel.domain.numel() {
        unravel(dims, linear, &mut idx);
        // A reverse scan meets each line from its last point.
        let point = match scan {
            Some((axis, true)) => {
                let along = idx.get_mut(axis)?;
                *along = dims.get(axis)?.checked_sub(1)?.checked_sub(*along)?;
                offset(&idx, &domain_strides)
            }
            _ => linear,
        };
        let line = offset(&idx, &line_strides);
        let mut next_scan = 0;
        values.clear();
        for inst in &kernel.body {
            let arg = |i: usize| inst.args.get(i).and_then(|a| values.get(a.index())).copied();
            let value = match &inst.op {
                MirOp::Load {
                    buf,
                    strides,
                    offset: at,
                } => *memory.get(buf.index())?.get(at + offset(&idx, strides))?,
                MirOp::Gather { buf } => {
                    let data = memory.get(buf.index())?;
                    *data.get(crate::semantics::clamp_index(arg(0)?, data.len())?)?
                }
                MirOp::Index { strides } => {
                    index_value(offset(&idx, strides), compute_dtype(mode, inst.dtype))?
                }
                MirOp::Const(literal) => cast(*literal, compute_dtype(mode, literal.dtype())),
                MirOp::Unary(op) => unary(*op, arg(0)?)?,
                MirOp::Binary(op) => binary(*op, arg(0)?, arg(1)?)?,
                MirOp::Compare(op) => Scalar::Bool(compare(*op, arg(0)?, arg(1)?)?),
                MirOp::Select => match arg(0)? {
                    Scalar::Bool(cond) => select(cond, arg(1)?, arg(2)?),
                    _ => return None,
                },
                MirOp::Cast => cast(arg(0)?, compute_dtype(mode, inst.dtype)),
                MirOp::Scan { op, .. } => {
                    let acc = scan_accs.get_mut(next_scan)?.get_mut(line)?;
                    next_scan += 1;
                    let coef = if inst.args.len() > 1 { Some(arg(1)?) } else { None };
                    *acc = scan_step(*op, *acc, arg(0)?, coef)?;
                    *acc
                }
            };
            values.push(value);
        }
        for store in &kernel.stores {
            let shift = match store.row() {
                Some(row) => match memory.get(row.index.index())?.first()? {
                    Scalar::I32(at) => row.shift(*at),
                    _ => return None,
                },
                None => 0,
            };
            *memory
                .get_mut(store.buf.index())?
                .get_mut(store.element(point, &idx) + shift)? = *values.get(store.value.index())?;
        }
        for (red, (kept_strides, accs, _)) in kernel.reductions.iter().zip(&mut reductions) {
            let acc = accs.get_mut(offset(&idx, kept_strides))?;
            *acc = reduce_combine(red.op, *acc, *values.get(red.value.index())?)?;
        }
    }

    for (red, (_, accs, count)) in kernel.reductions.iter().zip(reductions) {
        let target = memory.get_mut(red.buf.index())?;
        for (slot, acc) in target.iter_mut().zip(accs) {
            *slot = reduce_finish(red.op, acc, count)?;
        }
    }
    Some(())
}
