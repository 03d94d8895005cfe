//! The LIR reference interpreter.

use super::host::{Runner, bind_inputs, compute_dtype, offset, take_outputs, unravel};
use super::{InterpError, Mode};
use crate::lir::{self, Inst, LirKernel, LirProgram, ReduceLeaves, ScanOrder, Storage};
use crate::semantics::{
    binary, cast, compare, index_value, reduce_combine, reduce_finish, reduce_identity, select, unary,
};
use crate::{Array, ArrayView, BufId, DType, Scalar};

/// Runs an LIR program on `inputs` (one per input buffer, in buffer order) and returns the output
/// buffers in buffer order.
///
/// The program is verified first ([`InterpError::InvalidLir`]) and every input checked against
/// its buffer's dtype and shape. Kernels run in order: the preamble once, then the body at every
/// point of the loop nest in row-major order. For each leading point, reductions start from the
/// op's identity, combine the reduced points in row-major order into the partials that
/// [`lir::Schedule::reduce_lanes`] fixes (a blocked reduction leaf by leaf, the leaves combined by
/// the tree of [`lir::ReduceLeaves`]), and after the last one the partials are combined by the
/// pairwise tree of [`lir::reduce_lane_levels`], finished and written. A kernel
/// with a scan order runs each row of its innermost dim in that order (from its last index for
/// `scan reverse`), each scan's accumulator starting from the op's identity at the row's first
/// point. A program loop ([`LirProgram::loops`]) runs its range of kernels up to `trips` times
/// and, with an exit flag, stops after the first iteration that leaves the flag `false`.
///
/// The arena is modelled as bytes, so the memory plan is honoured: buffers placed at overlapping
/// offsets really share storage, and a plan that overlaps two live buffers gives wrong results
/// here as it would on a backend. (In [`Mode::Oracle`] every arena byte offset is doubled, so
/// `f32` buffers held as `f64` keep the plan's overlaps and non-overlaps.)
pub fn run_lir(
    program: &LirProgram,
    inputs: &[ArrayView<'_>],
    mode: Mode,
) -> Result<Vec<Array>, InterpError> {
    lir::verify(program).map_err(InterpError::InvalidLir)?;
    let bound = bind_inputs(program.inputs().map(|(_, name, ty)| (name, ty)), inputs, mode)?;
    let mut memory = Memory::new(program, bound, mode);
    let runner = Runner {
        kernels: program.kernels().iter().map(|k| (k.name.as_str(), k)).collect(),
        run: &|kernel, memory: &mut Memory| run_kernel(kernel, memory, mode),
        flag: &|memory: &Memory, buf| match memory.read(buf, 0)? {
            Scalar::Bool(keep) => Some(keep),
            _ => None,
        },
    };
    runner.run(program.loops(), &mut memory)?;
    take_outputs(
        program.outputs().map(|(buf, _, ty)| (buf, buf.index(), ty)),
        &mut memory.host,
        mode,
    )
}

/// Buffer storage: caller buffers as scalars, arena buffers as bytes of one shared arena.
struct Memory {
    /// Input and output buffers (empty for arena buffers).
    host: Vec<Vec<Scalar>>,
    /// For each buffer: `Some((byte offset, byte stride per element))` when it lives in the
    /// arena, and its compute dtype.
    places: Vec<(Option<(usize, usize)>, DType)>,
    /// Each buffer's element count.
    lens: Vec<usize>,
    arena: Vec<u8>,
}

impl Memory {
    fn new(program: &LirProgram, inputs: Vec<Vec<Scalar>>, mode: Mode) -> Memory {
        // Oracle mode holds f32 as f64: scaling every byte offset and stride by 2 keeps which
        // bytes of which buffers overlap.
        let scale = if mode == Mode::Oracle { 2 } else { 1 };
        let mut inputs = inputs.into_iter();
        let mut host = Vec::with_capacity(program.buffers().len());
        let mut places = Vec::with_capacity(program.buffers().len());
        for buffer in program.buffers() {
            let dtype = compute_dtype(mode, buffer.ty.dtype);
            let numel = buffer.ty.shape.numel();
            match &buffer.storage {
                Storage::Input { .. } => {
                    host.push(inputs.next().unwrap_or_default());
                    places.push((None, dtype));
                }
                Storage::Literal { values } => {
                    host.push(values.iter().map(|&v| crate::semantics::cast(v, dtype)).collect());
                    places.push((None, dtype));
                }
                Storage::Output { .. } => {
                    host.push(vec![Scalar::zero(dtype); numel]);
                    places.push((None, dtype));
                }
                Storage::Arena { offset } => {
                    host.push(Vec::new());
                    places.push((
                        Some((offset * scale, buffer.ty.dtype.size_bytes() * scale)),
                        dtype,
                    ));
                }
            }
        }
        // Only the bytes some buffer covers are ever touched; sizing the arena by them (rather
        // than the declared `arena_bytes`) keeps a huge declared arena from allocating.
        let arena_len = program
            .buffers()
            .iter()
            .filter_map(|b| match b.storage {
                Storage::Arena { offset } => {
                    Some(offset.saturating_add(b.ty.size_bytes()).saturating_mul(scale))
                }
                _ => None,
            })
            .max()
            .unwrap_or(0);
        Memory {
            host,
            places,
            lens: program.buffers().iter().map(|b| b.ty.shape.numel()).collect(),
            arena: vec![0; arena_len],
        }
    }

    /// The element count of buffer `buf`.
    fn len(&self, buf: BufId) -> Option<usize> {
        self.lens.get(buf.index()).copied()
    }

    fn read(&self, buf: BufId, index: usize) -> Option<Scalar> {
        match *self.places.get(buf.index())? {
            (None, _) => self.host.get(buf.index())?.get(index).copied(),
            (Some((base, stride)), dtype) => {
                let start = base + index * stride;
                let bytes = self.arena.get(start..start + dtype.size_bytes())?;
                Some(decode(dtype, bytes))
            }
        }
    }

    fn write(&mut self, buf: BufId, index: usize, value: Scalar) -> Option<()> {
        match *self.places.get(buf.index())? {
            (None, _) => *self.host.get_mut(buf.index())?.get_mut(index)? = value,
            (Some((base, stride)), dtype) => {
                let start = base + index * stride;
                let bytes = self.arena.get_mut(start..start + dtype.size_bytes())?;
                encode(value, bytes);
            }
        }
        Some(())
    }
}

fn decode(dtype: DType, bytes: &[u8]) -> Scalar {
    let mut b8 = [0u8; 8];
    b8[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
    let b4 = [b8[0], b8[1], b8[2], b8[3]];
    match dtype {
        DType::Bool => Scalar::Bool(b8[0] != 0),
        DType::I32 => Scalar::I32(i32::from_le_bytes(b4)),
        DType::F32 => Scalar::F32(f32::from_le_bytes(b4)),
        DType::F64 => Scalar::F64(f64::from_le_bytes(b8)),
    }
}

fn encode(value: Scalar, out: &mut [u8]) {
    let bytes: Vec<u8> = match value {
        Scalar::Bool(b) => vec![u8::from(b)],
        Scalar::I32(v) => v.to_le_bytes().to_vec(),
        Scalar::F32(v) => v.to_le_bytes().to_vec(),
        Scalar::F64(v) => v.to_le_bytes().to_vec(),
    };
    for (dst, src) in out.iter_mut().zip(bytes) {
        *dst = src;
    }
}

/// Runs one kernel; `None` only if the kernel breaks a rule the verifier checks.
fn run_kernel(kernel: &LirKernel, memory: &mut Memory, mode: Mode) -> Option<()> {
    let mut slots: Vec<Scalar> = kernel
        .slots
        .iter()
        .map(|&d| Scalar::zero(compute_dtype(mode, d)))
        .collect();
    let rank = kernel.dims.len();
    let split = rank.checked_sub(kernel.reduce_dims)?;
    let (leading, reduced) = kernel.dims.split_at(split);
    let mut idx = vec![0usize; rank];
    let lanes = (kernel.schedule.reduce_lanes.max(1)) as usize;
    // Per body instruction: one partial accumulator per lane (only `Reduce` uses them).
    let mut accs: Vec<Vec<Option<Scalar>>> = vec![vec![None; lanes]; kernel.body.len()];
    let leading_numel = leading.iter().fold(1usize, |acc, &d| acc.saturating_mul(d));
    let reduced_numel = reduced.iter().fold(1usize, |acc, &d| acc.saturating_mul(d));
    // Blocked reductions: the leaves of one output, and per body instruction the binary
    // counter's stack of leaf partials (`None` for instructions that are not blocked).
    let row_len = if kernel.reduce_dims > 0 {
        reduced.last().copied().unwrap_or(1)
    } else {
        1
    };
    let rows = reduced_numel.checked_div(row_len).unwrap_or(0);
    let leaves = ReduceLeaves::of(kernel.schedule.reduce_lanes, rows, row_len);
    let lane_levels = lir::reduce_lane_levels(kernel.schedule.reduce_lanes);
    let mut stacks: Vec<Option<LeafStack>> = Vec::with_capacity(kernel.body.len());
    for inst in &kernel.body {
        stacks.push(match inst {
            Inst::Reduce { op, buf, .. } => {
                let dtype = memory.places.get(buf.index())?.1;
                lir::reduce_is_blocked(*op, dtype, kernel.schedule.reduce_lanes).then(LeafStack::default)
            }
            _ => None,
        });
    }
    // The preamble only feeds the body, so it runs only when the body does (its loads are
    // bounds-checked by the verifier only for non-empty loop nests).
    if leading_numel > 0 && reduced_numel > 0 {
        for inst in &kernel.preamble {
            exec(kernel, inst, &idx, &mut slots, memory, &mut [], mode)?;
        }
    }
    for lead in 0..leading_numel {
        unravel(leading, lead, &mut idx[..split]);
        if let Some(order) = kernel.scan {
            // Each row of the innermost dim is a line of the scans, met in their order from
            // their identity.
            let last = rank.checked_sub(1)?;
            let step = *idx.get(last)?;
            if step == 0 {
                for (partials, inst) in accs.iter_mut().zip(&kernel.body) {
                    if let Inst::Scan { op, dst, .. } = inst {
                        let dtype = compute_dtype(mode, kernel.slot_dtype(*dst)?);
                        partials.fill(Some(reduce_identity(op.reduce_op(), dtype)?));
                    }
                }
            }
            if order == ScanOrder::Reverse {
                idx[last] = kernel.dims.get(last)?.checked_sub(1 + step)?;
            }
        }
        for ((partials, stack), inst) in accs.iter_mut().zip(&mut stacks).zip(&kernel.body) {
            if let Inst::Reduce { op, buf, .. } = inst {
                let dtype = memory.places.get(buf.index())?.1;
                partials.fill(Some(reduce_identity(*op, dtype)?));
                if let Some(stack) = stack {
                    *stack = LeafStack::default();
                }
            }
        }
        for point in 0..reduced_numel {
            unravel(reduced, point, &mut idx[split..]);
            // The lane is the position along the innermost loop dimension (see `Schedule`).
            let lane = if kernel.reduce_dims > 0 {
                idx.last().copied().unwrap_or(0) % lanes
            } else {
                0
            };
            for (i, inst) in kernel.body.iter().enumerate() {
                let partial = accs.get_mut(i)?.get_mut(lane..=lane)?;
                exec(kernel, inst, &idx, &mut slots, memory, partial, mode)?;
            }
            if leaves.ends_leaf(point / row_len, point % row_len, rows, row_len) {
                for ((partials, stack), inst) in accs.iter_mut().zip(&mut stacks).zip(&kernel.body) {
                    if let (Inst::Reduce { op, buf, .. }, Some(stack)) = (inst, stack) {
                        let dtype = memory.places.get(buf.index())?.1;
                        let identity = reduce_identity(*op, dtype)?;
                        let leaf = std::mem::replace(partials, vec![Some(identity); lanes]);
                        stack.push(*op, leaf)?;
                    }
                }
            }
        }
        for ((partials, stack), inst) in accs.iter_mut().zip(&stacks).zip(&kernel.body) {
            if let (Inst::Reduce { op, .. }, Some(stack)) = (inst, stack)
                && let Some(total) = stack.fold(*op)?
            {
                *partials = total;
            }
        }
        for (partials, inst) in accs.iter_mut().zip(&kernel.body) {
            if let Inst::Reduce { op, buf, .. } = inst {
                for &(half, offset) in &lane_levels {
                    for i in 0..half {
                        let right = (*partials.get(i + offset)?)?;
                        let left = partials.get_mut(i)?;
                        *left = Some(reduce_combine(*op, (*left)?, right)?);
                    }
                }
                let total = (*partials.first()?)?;
                memory.write(*buf, lead, reduce_finish(*op, total, reduced_numel)?)?;
            }
        }
    }
    Some(())
}

/// The binary counter of a blocked reduction (see [`ReduceLeaves`]): the partials of the
/// leaves pushed so far, merged pairwise as the count of leaves carries.
#[derive(Default)]
struct LeafStack {
    /// Leaves pushed since the output's first point.
    count: usize,
    /// Merged partials, the oldest (earliest points) first.
    entries: Vec<Vec<Option<Scalar>>>,
}

impl LeafStack {
    /// Pushes one leaf's partials: merged `trailing_zeros(count)` times with the top of the
    /// stack, the older partials on the left, lane by lane.
    fn push(&mut self, op: crate::ReduceOp, mut leaf: Vec<Option<Scalar>>) -> Option<()> {
        self.count += 1;
        for _ in 0..self.count.trailing_zeros() {
            let top = self.entries.pop()?;
            leaf = merge(op, &top, &leaf)?;
        }
        self.entries.push(leaf);
        Some(())
    }

    /// The stack folded from the top, `s0 ∘ (s1 ∘ (… ∘ s_top))` (`s0` the oldest and largest),
    /// so that no point passes through more merges than the bit length of the leaf count;
    /// `Some(None)` when no leaf was pushed.
    fn fold(&self, op: crate::ReduceOp) -> Option<Option<Vec<Option<Scalar>>>> {
        let Some((last, rest)) = self.entries.split_last() else {
            return Some(None);
        };
        let mut total = last.clone();
        for entry in rest.iter().rev() {
            total = merge(op, entry, &total)?;
        }
        Some(Some(total))
    }
}

/// `left ∘ right` lane by lane.
fn merge(
    op: crate::ReduceOp,
    left: &[Option<Scalar>],
    right: &[Option<Scalar>],
) -> Option<Vec<Option<Scalar>>> {
    left.iter()
        .zip(right)
        .map(|(l, r)| Some(Some(reduce_combine(op, (*l)?, (*r)?)?)))
        .collect()
}

/// Executes one instruction at loop point `idx`. `acc` is the accumulator of this instruction
/// when it is a `Reduce` or a `Scan` (a one-element slice), unused otherwise.
fn exec(
    kernel: &LirKernel,
    inst: &Inst,
    idx: &[usize],
    slots: &mut [Scalar],
    memory: &mut Memory,
    acc: &mut [Option<Scalar>],
    mode: Mode,
) -> Option<()> {
    let get = |slot: crate::lir::SlotId| slots.get(slot.index()).copied();
    let value = match inst {
        Inst::Load {
            buf,
            strides,
            offset: at,
            ..
        } => memory.read(*buf, at + offset(idx, strides))?,
        Inst::Gather { buf, index, .. } => {
            let len = memory.len(*buf)?;
            memory.read(*buf, crate::semantics::clamp_index(get(*index)?, len)?)?
        }
        Inst::Index { dst, strides } => index_value(
            offset(idx, strides),
            compute_dtype(mode, kernel.slot_dtype(*dst)?),
        )?,
        Inst::Const { value, .. } => cast(*value, compute_dtype(mode, value.dtype())),
        Inst::Unary { op, src, .. } => unary(*op, get(*src)?)?,
        Inst::Binary { op, lhs, rhs, .. } => binary(*op, get(*lhs)?, get(*rhs)?)?,
        Inst::Compare { op, lhs, rhs, .. } => Scalar::Bool(compare(*op, get(*lhs)?, get(*rhs)?)?),
        Inst::Select {
            cond,
            on_true,
            on_false,
            ..
        } => match get(*cond)? {
            Scalar::Bool(cond) => select(cond, get(*on_true)?, get(*on_false)?),
            _ => return None,
        },
        Inst::Cast { dst, src } => cast(get(*src)?, compute_dtype(mode, kernel.slot_dtype(*dst)?)),
        Inst::Store {
            buf,
            strides,
            offset: at,
            src,
        } => {
            let shift = match &kernel.row_store {
                Some(row) if row.buf == *buf => match get(row.index)? {
                    Scalar::I32(index) => row.shift(index),
                    _ => return None,
                },
                _ => 0,
            };
            return memory.write(*buf, at + shift + offset(idx, strides), get(*src)?);
        }
        Inst::Reduce { op, src, .. } => {
            let acc = acc.first_mut()?;
            *acc = Some(reduce_combine(*op, (*acc)?, get(*src)?)?);
            return Some(());
        }
        Inst::Scan { op, src, coef, .. } => {
            let acc = acc.first_mut()?;
            let coef = match coef {
                Some(coef) => Some(get(*coef)?),
                None => None,
            };
            let next = crate::semantics::scan_step(*op, (*acc)?, get(*src)?, coef)?;
            *acc = Some(next);
            next
        }
    };
    *slots.get_mut(inst.dst()?.index())? = value;
    Some(())
}
