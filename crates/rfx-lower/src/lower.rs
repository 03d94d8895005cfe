//! MIR kernel → LIR kernel: iteration space, slots, hoisting, schedule.

use std::collections::HashMap;

use rfx_ir::lir::{Inst, LirKernel, RowStore, ScanOrder, Schedule, SlotId};
use rfx_ir::mir::{MirKernel, MirOp, MirValue};
use rfx_ir::{BufId, DType, Scalar, Shape};

use crate::config::LowerConfig;
use crate::error::LowerError;
use crate::report::KernelReport;

/// Reductions of at least this many points per output run as GPU block trees
/// ([`Schedule::gpu_tree`]); smaller ones are folded by one thread each in the LIR `lanes`
/// order, bit for bit the interpreter's.
const GPU_TREE_MIN_POINTS: usize = 1024;

/// One memory access of a kernel, as strides over the (permuted) loop dims.
struct Access {
    strides: Vec<usize>,
}

/// The loop nest of one LIR kernel before coalescing: MIR domain axes in loop order (kept axes
/// first, then the reduced axes or the scanned axis, each group in its original order).
struct LoopNest {
    order: Vec<usize>,
    dims: Vec<usize>,
    reduce_dims: usize,
    /// The innermost dim is the scanned axis (which is never coalesced or dropped).
    scanned: bool,
}

impl LoopNest {
    /// The loop nest over `domain` with the axes `tail` innermost: the reduced axes, or with
    /// `scanned` the one scanned axis.
    fn new(domain: &Shape, tail: &[usize], scanned: bool) -> LoopNest {
        let rank = domain.rank();
        let mut order: Vec<usize> = (0..rank).filter(|a| !tail.contains(a)).collect();
        order.extend((0..rank).filter(|a| tail.contains(a)));
        let dims = order.iter().map(|&a| domain.dims()[a]).collect();
        LoopNest {
            order,
            dims,
            reduce_dims: if scanned { 0 } else { tail.len() },
            scanned,
        }
    }

    /// The number of innermost dims after the leading group: the reduced dims, or the scanned
    /// one.
    fn tail_len(&self) -> usize {
        if self.scanned { 1 } else { self.reduce_dims }
    }

    /// MIR strides (one per domain axis) in loop order.
    fn permute(&self, strides: &[usize]) -> Vec<usize> {
        self.order
            .iter()
            .map(|&a| strides.get(a).copied().unwrap_or(0))
            .collect()
    }
}

/// Merges adjacent loop dims that every access walks contiguously, and drops size-1 dims, so
/// that a kernel over contiguous or broadcast operands becomes a flat loop. The leading and
/// reduced groups are coalesced separately, which keeps the row-major order of the points (and
/// so the reduction order and the reduction output index) unchanged. A scanned dim stays the
/// innermost one, even of size 1: the rows of the scans are its rows.
fn coalesce(nest: &mut LoopNest, accesses: &mut [Access]) {
    let lead = nest.dims.len() - nest.tail_len();
    let mut groups: Vec<Vec<usize>> = vec![(0..lead).collect(), (lead..nest.dims.len()).collect()];
    let mut new_dims = Vec::new();
    let mut new_strides: Vec<Vec<usize>> = vec![Vec::new(); accesses.len()];
    let mut new_reduce = 0;
    for (g, group) in groups.iter_mut().enumerate() {
        // Dims of size 1 contribute nothing to any index.
        if !(nest.scanned && g == 1) {
            group.retain(|&d| nest.dims[d] != 1);
        }
        let mut merged: Vec<(usize, Vec<usize>)> = Vec::new();
        for &d in group.iter() {
            let size = nest.dims[d];
            let strides: Vec<usize> = accesses.iter().map(|a| a.strides[d]).collect();
            if let Some((last_size, last_strides)) = merged.last_mut()
                && last_strides
                    .iter()
                    .zip(&strides)
                    .all(|(&outer, &inner)| outer == inner * size)
            {
                *last_size *= size;
                *last_strides = strides;
                continue;
            }
            merged.push((size, strides));
        }
        if g == 1 && !nest.scanned {
            new_reduce = merged.len();
        }
        for (size, strides) in merged {
            new_dims.push(size);
            for (acc, s) in new_strides.iter_mut().zip(strides) {
                acc.push(s);
            }
        }
    }
    nest.dims = new_dims;
    nest.reduce_dims = new_reduce;
    for (access, strides) in accesses.iter_mut().zip(new_strides) {
        access.strides = strides;
    }
}

/// Lowers the part of `kernel` that writes `stores` and the reductions over `reduced_axes`.
pub(crate) fn lower_kernel(
    kernel: &MirKernel,
    name: String,
    reduced_axes: &[usize],
    include_stores: bool,
    buf_dtype: &dyn Fn(BufId) -> Option<DType>,
    config: &LowerConfig,
) -> Result<(LirKernel, KernelReport), LowerError> {
    // A kernel that scans runs its scanned axis innermost, in order.
    let scan = kernel.scan();
    let mut nest = match scan {
        Some((axis, _)) => LoopNest::new(&kernel.domain, &[axis], true),
        None => LoopNest::new(&kernel.domain, reduced_axes, false),
    };
    let domain_strides = kernel.domain.strides();
    let reductions: Vec<_> = kernel
        .reductions
        .iter()
        .filter(|r| r.axes == reduced_axes)
        .collect();
    let stores: Vec<_> = if include_stores {
        kernel.stores.iter().collect()
    } else {
        Vec::new()
    };

    // Which body values this LIR kernel needs.
    let mut needed = vec![false; kernel.body.len()];
    let mut stack: Vec<MirValue> = stores
        .iter()
        .map(|s| s.value)
        .chain(reductions.iter().map(|r| r.value))
        .collect();
    while let Some(v) = stack.pop() {
        if let Some(slot) = needed.get_mut(v.index())
            && !*slot
        {
            *slot = true;
            if let Some(inst) = kernel.inst(v) {
                stack.extend(inst.args.iter().copied());
            }
        }
    }

    // Accesses in loop order: loads and indices (an index is a load without a buffer: its
    // value is the offset), then stores (a store writes the row-major index of the point in
    // the MIR domain, or where its region puts the point).
    let mut accesses: Vec<Access> = Vec::new();
    let mut load_access: HashMap<usize, usize> = HashMap::new();
    for (i, inst) in kernel.body.iter().enumerate() {
        if let (true, MirOp::Load { strides, .. } | MirOp::Index { strides }) = (needed[i], &inst.op) {
            load_access.insert(i, accesses.len());
            accesses.push(Access {
                strides: nest.permute(strides),
            });
        }
    }
    let first_store_access = accesses.len();
    for store in &stores {
        let strides = store.region.as_ref().map_or(&domain_strides, |r| &r.strides);
        accesses.push(Access {
            strides: nest.permute(strides),
        });
    }
    // A reduction of one point per output (every reduced axis of size 1) is that point:
    // `combine(identity, x)` is `x` for every op and dtype (`-0 + x`, `1 * x`, `max(-inf, x)`,
    // NaN kept) and `finish` of one point returns it (`mean` divides by 1). It is lowered as a
    // store at the output's index, so backends run an elementwise loop, with the code (and the
    // transcendental bits) of every other elementwise loop.
    let single_point = !reductions.is_empty()
        && reduced_axes
            .iter()
            .all(|&a| kernel.domain.dims().get(a) == Some(&1));
    let first_single_access = accesses.len();
    if single_point {
        let mut output_strides = vec![0; kernel.domain.rank()];
        let mut stride = 1;
        for a in (0..kernel.domain.rank()).rev() {
            if !reduced_axes.contains(&a) {
                output_strides[a] = stride;
                stride *= kernel.domain.dims()[a];
            }
        }
        for _ in &reductions {
            accesses.push(Access {
                strides: nest.permute(&output_strides),
            });
        }
    }
    let dims_before = nest.dims.len();
    coalesce(&mut nest, &mut accesses);

    // Loop-invariant values go to the preamble: constants, loads and indices with all-zero
    // strides, and ops whose operands are all invariant.
    let mut invariant = vec![false; kernel.body.len()];
    for (i, inst) in kernel.body.iter().enumerate() {
        invariant[i] = match &inst.op {
            MirOp::Const(_) => true,
            // A running fold changes along its axis whatever it folds.
            MirOp::Scan { .. } => false,
            MirOp::Load { .. } | MirOp::Index { .. } => load_access
                .get(&i)
                .is_some_and(|&a| accesses[a].strides.iter().all(|&s| s == 0)),
            _ => inst
                .args
                .iter()
                .all(|a| invariant.get(a.index()).copied().unwrap_or(false)),
        };
    }

    // Last use of each body value (in body order), for slot reuse.
    let n = kernel.body.len();
    let mut last_use = vec![0usize; n];
    for (i, inst) in kernel.body.iter().enumerate() {
        for a in &inst.args {
            if let Some(l) = last_use.get_mut(a.index()) {
                *l = (*l).max(i);
            }
        }
    }
    // Values read by stores and reductions live to the end of the body.
    for v in stores
        .iter()
        .map(|s| s.value)
        .chain(reductions.iter().map(|r| r.value))
    {
        if let Some(l) = last_use.get_mut(v.index()) {
            *l = n;
        }
    }

    let mut slots: Vec<DType> = Vec::new();
    let mut slot_of: Vec<Option<SlotId>> = vec![None; n];
    let mut const_pool: HashMap<Scalar, SlotId> = HashMap::new();
    let mut free: Vec<SlotId> = Vec::new();
    // Whether a slot is in `free`, by slot index: a kernel of many live values has a long free
    // list, and searching it for every freed slot made lowering quadratic.
    let mut is_free: Vec<bool> = Vec::new();
    let mut preamble = Vec::new();
    let mut body = Vec::new();
    let mut values_needed = 0;
    for (i, inst) in kernel.body.iter().enumerate() {
        if !needed[i] {
            continue;
        }
        values_needed += 1;
        let operand = |k: usize| -> Result<SlotId, LowerError> {
            inst.args
                .get(k)
                .and_then(|a| slot_of.get(a.index()).copied().flatten())
                .ok_or(LowerError::Malformed {
                    kernel: kernel.name.clone(),
                    value: i,
                })
        };
        // Constants are pooled; everything else gets a slot, reusing a dead body slot of the same
        // dtype when there is one (preamble slots are never reused: the body reads them on every
        // iteration).
        if let MirOp::Const(value) = &inst.op
            && let Some(&slot) = const_pool.get(value)
        {
            slot_of[i] = Some(slot);
            continue;
        }
        let dst = if invariant[i] {
            new_slot(&mut slots, inst.dtype)
        } else {
            match free
                .iter()
                .position(|s| slots.get(s.index()) == Some(&inst.dtype))
            {
                Some(k) => {
                    let slot = free.swap_remove(k);
                    if let Some(flag) = is_free.get_mut(slot.index()) {
                        *flag = false;
                    }
                    slot
                }
                None => new_slot(&mut slots, inst.dtype),
            }
        };
        let lir = match &inst.op {
            MirOp::Load { buf, offset, .. } => {
                let access = load_access.get(&i).copied().ok_or(LowerError::Malformed {
                    kernel: kernel.name.clone(),
                    value: i,
                })?;
                Inst::Load {
                    dst,
                    buf: *buf,
                    strides: accesses[access].strides.clone(),
                    offset: *offset,
                }
            }
            MirOp::Gather { buf } => Inst::Gather {
                dst,
                buf: *buf,
                index: operand(0)?,
            },
            MirOp::Index { .. } => {
                let access = load_access.get(&i).copied().ok_or(LowerError::Malformed {
                    kernel: kernel.name.clone(),
                    value: i,
                })?;
                Inst::Index {
                    dst,
                    strides: accesses[access].strides.clone(),
                }
            }
            MirOp::Const(value) => {
                const_pool.insert(*value, dst);
                Inst::Const { dst, value: *value }
            }
            MirOp::Unary(op) => Inst::Unary {
                dst,
                op: *op,
                src: operand(0)?,
            },
            MirOp::Binary(op) => Inst::Binary {
                dst,
                op: *op,
                lhs: operand(0)?,
                rhs: operand(1)?,
            },
            MirOp::Compare(op) => Inst::Compare {
                dst,
                op: *op,
                lhs: operand(0)?,
                rhs: operand(1)?,
            },
            MirOp::Select => Inst::Select {
                dst,
                cond: operand(0)?,
                on_true: operand(1)?,
                on_false: operand(2)?,
            },
            MirOp::Cast => Inst::Cast {
                dst,
                src: operand(0)?,
            },
            MirOp::Scan { op, .. } => Inst::Scan {
                dst,
                op: *op,
                src: operand(0)?,
                coef: if op.arity() > 1 { Some(operand(1)?) } else { None },
            },
        };
        // Free the body slots whose last use is this instruction (after reading them).
        if !invariant[i] {
            for a in &inst.args {
                let k = a.index();
                if last_use.get(k) == Some(&i)
                    && !invariant.get(k).copied().unwrap_or(true)
                    && let Some(slot) = slot_of[k]
                    && !is_free.get(slot.index()).copied().unwrap_or(false)
                {
                    if is_free.len() <= slot.index() {
                        is_free.resize(slot.index() + 1, false);
                    }
                    is_free[slot.index()] = true;
                    free.push(slot);
                }
            }
        }
        slot_of[i] = Some(dst);
        if invariant[i] {
            preamble.push(lir)
        } else {
            body.push(lir)
        }
    }
    for (k, store) in stores.iter().enumerate() {
        let src = slot_of
            .get(store.value.index())
            .copied()
            .flatten()
            .ok_or(LowerError::Malformed {
                kernel: kernel.name.clone(),
                value: store.value.index(),
            })?;
        body.push(Inst::Store {
            buf: store.buf,
            strides: accesses[first_store_access + k].strides.clone(),
            offset: store.region.as_ref().map_or(0, |r| r.offset),
            src,
        });
    }
    for (k, reduction) in reductions.iter().enumerate() {
        let src = slot_of
            .get(reduction.value.index())
            .copied()
            .flatten()
            .ok_or(LowerError::Malformed {
                kernel: kernel.name.clone(),
                value: reduction.value.index(),
            })?;
        body.push(if single_point {
            Inst::Store {
                buf: reduction.buf,
                strides: accesses[first_single_access + k].strides.clone(),
                offset: 0,
                src,
            }
        } else {
            Inst::Reduce {
                op: reduction.op,
                buf: reduction.buf,
                src,
            }
        });
    }
    // A store or reduction of an invariant value still runs per point: it reads a preamble slot.
    // A row store's index is read once, by the preamble, for the backends to shift the
    // buffer's base address when the kernel starts.
    let row_store = match stores.iter().find_map(|s| s.row().map(|row| (s.buf, row))) {
        Some((buf, row)) => {
            let index = new_slot(&mut slots, DType::I32);
            preamble.push(Inst::Load {
                dst: index,
                buf: row.index,
                strides: vec![0; nest.dims.len()],
                offset: 0,
            });
            Some(RowStore {
                buf,
                index,
                rows: row.rows,
                stride: row.stride,
            })
        }
        None => None,
    };

    let widest = slots
        .iter()
        .copied()
        .chain(kernel.stores.iter().filter_map(|s| buf_dtype(s.buf)))
        .map(DType::size_bytes)
        .max()
        .unwrap_or(4)
        .max(4);
    let vector_width = u32::try_from(config.vector_bytes / widest).unwrap_or(1).max(1);
    let reduce_lanes = if nest.reduce_dims == 0 {
        1
    } else {
        // Two vectors of partials keep two accumulators in flight along long rows; along a row
        // of at most one and a half of them (a small matrix product's 3 to 12 points) the
        // partials cost more than they save, and one sequential accumulator is the HIR's order.
        // With at least a vector of outputs along the innermost kept dim, one accumulator per
        // output lets a backend put outputs in its vector lanes (the CPU does): always when
        // neighbouring outputs read neighbouring or shared elements while the row's points lie
        // apart (a matrix product's `b` read down a column), where partials along the row would
        // gather every vector; and for rows of up to 16 vectors (a matrix-vector product),
        // where each output's partials cost more to set up and combine than gathering the
        // outputs' rows does (measured up to 48×48 `f64`: docs/measurements/, 2026-11-24).
        let lanes = 2 * vector_width;
        let dims = &nest.dims;
        let row = dims.last().copied().unwrap_or(1);
        let split = dims.len() - nest.reduce_dims;
        let stride = |a: &Access, d: usize| a.strides.get(d).copied().unwrap_or(0);
        let outputs_fill_a_vector = split >= 1 && dims[split - 1] >= vector_width as usize;
        let across = outputs_fill_a_vector
            && (row <= 16 * vector_width as usize
                || (accesses.iter().all(|a| stride(a, split - 1) <= 1)
                    && accesses.iter().any(|a| stride(a, dims.len() - 1) > 1)));
        // A reduction longer than a leaf keeps partials, four vectors of them: a float sum is
        // then blocked into leaves combined pairwise (`rfx_ir::lir::ReduceLeaves`), whose error
        // grows with the logarithm of its length where one accumulator's grows linearly, and
        // four independent accumulators hide the latency of the adds. Not where its outputs
        // fill vector lanes (a column sum): partials along a strided row would gather every
        // vector (slower in every measured case), so those keep one sequential accumulator.
        // A row of at least 64 vectors also keeps four vectors of partials: two accumulators
        // leave the loop waiting on the latency of their adds, and the pairwise combination
        // of the partials costs only two more vector adds.
        let points: usize = dims[split..].iter().product();
        let long_row = row >= 64 * vector_width as usize;
        let default = if (points > rfx_ir::lir::REDUCE_LEAF_POINTS || long_row) && !across {
            2 * lanes
        } else if 2 * row <= 3 * lanes as usize || across {
            1
        } else {
            lanes
        };
        config.reduce_lanes.unwrap_or(default).max(1)
    };
    // Reductions of many points per output run as GPU block trees; one thread folds the rest in
    // the lanes' order, bit for bit the interpreter's. A scan's kernel runs its rows in order.
    let reduced_points: usize = nest.dims[nest.dims.len().saturating_sub(nest.reduce_dims)..]
        .iter()
        .product();
    let gpu_tree = scan.is_none() && nest.reduce_dims > 0 && reduced_points >= GPU_TREE_MIN_POINTS;
    let schedule = Schedule {
        vector_width,
        min_elems_per_thread: config.min_elems_per_thread,
        tile: config.tile,
        reduce_lanes,
        gpu_tree,
    };
    let report = KernelReport {
        name: name.clone(),
        values: values_needed,
        slots: slots.len(),
        dims_before,
        dims_after: nest.dims.len(),
        vector_width,
        preamble_insts: preamble.len(),
        body_insts: body.len(),
    };
    Ok((
        LirKernel {
            name,
            dims: nest.dims,
            reduce_dims: nest.reduce_dims,
            scan: scan.map(|(_, reverse)| {
                if reverse {
                    ScanOrder::Reverse
                } else {
                    ScanOrder::Forward
                }
            }),
            schedule,
            slots,
            preamble,
            body,
            row_store,
        },
        report,
    ))
}

fn new_slot(slots: &mut Vec<DType>, dtype: DType) -> SlotId {
    slots.push(dtype);
    SlotId::new(slots.len() - 1)
}
