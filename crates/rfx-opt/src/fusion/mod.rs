//! Fusion: partitioning an optimised HIR kernel into MIR kernels.
//!
//! Design (argued in ARCHITECTURE.md): fusion is a partition of the extracted HIR DAG, not an
//! e-graph rewrite. A value is *materialised* (given a buffer) only when it must be: a kernel
//! output, a reduction result (it is complete only after its kernel; a reduction of at most
//! four elements per result that is no kernel output is instead computed where it is read, a
//! chain of binary ops over its operand's windows in the interpreter's order), the operand of a
//! `reshape` or `transpose` of a computed value (both are index maps over a row-major buffer:
//! a transpose of an input or a stored value is a load with permuted strides; a reshape that
//! only inserts or removes axes of one is a frame instead, its operand computed at the point
//! with those coordinates dropped), a value
//! needed by more than one kernel (materialised once, never recomputed, unless it is a few cheap
//! ops of constants and `iota`s alone, which each kernel recomputes, or a plain view of an
//! input or a stored value, which each kernel reads through its strides), or a value of a
//! quarter or less of its kernel's iteration space whose computation there (one dear op, or a
//! chain of cheap ones) costs more per point than a load. Every other value is computed inside the kernel of the materialised values
//! (*roots*) that use it. Roots with the same iteration space, or one that differs only by axes of
//! one (`[n]` beside `vmap`'s `[n, 1]`: the same points in the same row-major order), are merged
//! into one kernel when their dependencies allow, so outputs that share inputs and intermediate
//! values come out of one loop; a root over the other space is computed in a frame that drops or
//! inserts those axes, and a root of the kernel read under such reshapes is taken where it was
//! computed. A reduction of a value computed in a kernel is that kernel's epilogue (a reduction
//! or scan fixes its kernel's iteration space: its axes are its own). Broadcasts never
//! copy: a value of shape `S` read in a kernel of domain `D` is loaded with the broadcast strides
//! of `S` in `D`, and since elementwise ops commute with broadcasting, in-kernel values of a
//! smaller shape are simply computed at every point. An `iota` is never stored: it is an `index`
//! instruction with the broadcast (and permuted) strides of its axis. A `pad` is computed in
//! its consumer's kernel under a mask: its operand is computed at the pad's point less `low`
//! (a `Frame`), where every buffer is read by a clamping `gather`; only an operand that
//! would cost more to compute at the pad's other points than to store is materialised. A
//! `slice` of a computed value is a frame without a mask: its operand is computed at the
//! window's points, read by plain loads at an offset. A `gather`'s table is read at the
//! points its index computes, so a computed table is stored; its index is computed in the
//! gather's kernel like any operand. A stored concatenation (a chain of `select`s by position
//! over `pad`s) is never computed as such: each part is computed at its own points and stored
//! where it lies in the whole, by a store with a region (see `regions`). Before any of this, a
//! window inside one part of a concatenation is rewritten to read that part, a part of
//! lower rank than its concatenation is broadcast where it is placed, and an output that is an
//! elementwise op of a concatenation becomes the concatenation of the op of each part, stored
//! part by part beside it (see `parts`).

mod emit;
mod parts;
mod plan;
mod regions;

use std::collections::{BTreeMap, HashMap};

use rfx_ir::hir::{Kernel, Op, ValueId, verify};
use rfx_ir::mir::MirProgram;

use crate::error::OptError;
use crate::report::MissReason;
pub use plan::MAX_FRAME_NESTING;
use plan::{
    Plan, is_computed, is_leaf, only_unit_axes_move, reshapes_a_buffer, slice_base, transpose_base,
    under_reshapes, unrolled_reductions,
};

/// What fusion decided, for the report.
pub(crate) struct FusionOutcome {
    pub(crate) program: MirProgram,
    pub(crate) missed: Vec<(ValueId, MissReason)>,
}

/// Partitions `kernel` (verified, ideally simplified) into a MIR program.
pub(crate) fn fuse(kernel: &Kernel) -> Result<FusionOutcome, OptError> {
    verify(kernel).map_err(OptError::InvalidKernel)?;
    // Windows inside one part of a concatenation read the part (`parts`).
    let read_by_part = parts::read_by_part(kernel)?;
    let kernel = read_by_part.as_ref().unwrap_or(kernel);
    let live = crate::passes::live_values(kernel);
    let unrolled = unrolled_reductions(kernel, &live);
    let mut roots: BTreeMap<ValueId, Option<MissReason>> = BTreeMap::new();
    for output in kernel.outputs() {
        roots.insert(output.value, None);
    }
    for (index, node) in kernel.nodes().iter().enumerate() {
        if !live[index] {
            continue;
        }
        match &node.op {
            Op::Reduce { .. } if !unrolled.contains_key(&ValueId::new(index)) => {
                roots
                    .entry(ValueId::new(index))
                    .or_insert(Some(MissReason::Reduction));
            }
            // A running fold is computed by a kernel that runs its axis in order.
            Op::Scan { .. } => {
                roots.entry(ValueId::new(index)).or_insert(Some(MissReason::Scan));
            }
            // A reshape that only inserts or removes axes of one is computed in its consumer's
            // kernel (a frame); any other needs its operand row-major in a buffer.
            Op::Reshape => {
                if let Some(&operand) = node.args.first()
                    && is_computed(kernel, operand)
                    && !reshapes_a_buffer(kernel, operand)
                    && !kernel
                        .value_type(operand)
                        .is_some_and(|t| only_unit_axes_move(&t.shape, &node.ty.shape))
                {
                    roots.entry(operand).or_insert(Some(MissReason::Reshape));
                }
            }
            // A slice of a computed value is computed in its consumer's kernel at the shifted
            // points (a frame), unless `store_dear_window_operands` decides otherwise.
            Op::Slice { .. } if slice_base(kernel, ValueId::new(index)).is_some() => {}
            // A table is read at computed points: only a buffer (under views) can be.
            Op::Gather { .. } => {
                if let Some(&table) = node.args.first() {
                    let base = transpose_base(kernel, table);
                    if is_computed(kernel, base) && !reshapes_a_buffer(kernel, base) {
                        // A reshape's elements lie row-major in its operand's buffer, which
                        // the gather reads in place: what is under the reshapes is stored.
                        let stored = under_reshapes(kernel, base, |_| false);
                        roots.entry(stored).or_insert(Some(MissReason::Gather));
                    }
                }
            }
            Op::Transpose { .. } | Op::Slice { .. } => {
                // A reshape's elements lie row-major in its operand's buffer, which the view
                // reads in place: what is under the reshapes is stored (if computed), never a
                // copy of it. A reshape of an `iota` or a constant, which have no buffer, is.
                let base = transpose_base(kernel, ValueId::new(index));
                let under = under_reshapes(kernel, base, |_| false);
                let base = match kernel.node(under).map(|n| &n.op) {
                    Some(Op::Iota { .. } | Op::Const(_)) => base,
                    _ => under,
                };
                let reason = match node.op {
                    Op::Slice { .. } => MissReason::Slice,
                    _ => MissReason::Transpose,
                };
                if kernel.node(base).is_some_and(|n| !is_leaf(&n.op)) {
                    roots.entry(base).or_insert(Some(reason));
                }
            }
            _ => {}
        }
    }
    // Outputs assembled from parts are stored part by part, each where it lies in the whole.
    let mut live = live;
    let splits = regions::split_concatenations(kernel, &regions::live_uses(kernel, &live), &roots);
    for &dead in &splits.dead {
        if let Some(flag) = live.get_mut(dead.index()) {
            *flag = false;
        }
    }
    // Each placing pad is a root computed at its part's points; no other node reads it, and
    // no rule should treat it as the pad it was.
    for &pad in splits.parts.keys() {
        roots.insert(pad, None);
        if let Some(flag) = live.get_mut(pad.index()) {
            *flag = false;
        }
    }
    let mut plan = Plan {
        kernel,
        live,
        roots,
        regions: splits.parts,
        split_wholes: splits.wholes,
        fills: splits.fills,
        groups: Vec::new(),
        group_kinds: Vec::new(),
        group_fixed: Vec::new(),
        group_of: HashMap::new(),
        unrolled,
    };
    plan.bound_frame_nesting();
    plan.store_dear_window_operands();
    // Each round either finishes or materialises at least one more value, so this ends after
    // at most one round per node.
    for _ in 0..=kernel.nodes().len() {
        plan.group_roots();
        if !plan.materialise_shared()? {
            break;
        }
    }
    if plan.drop_stored_views() {
        plan.group_roots();
    }
    let (program, unstored) = plan.emit()?;
    let consumers = plan.consumer_counts();
    let missed = plan
        .roots
        .iter()
        .filter_map(|(&v, reason)| reason.map(|r| (v, r)))
        .filter(|(v, _)| consumers.get(v.index()).is_some_and(|&c| c > 0) && !unstored.contains(v))
        .collect();
    Ok(FusionOutcome { program, missed })
}
