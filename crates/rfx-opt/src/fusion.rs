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
//! (*roots*) that use it. Roots with the same iteration space are merged into one kernel when
//! their dependencies allow, so outputs that share inputs and intermediate values come out of one
//! loop; a reduction of a value computed in a kernel is that kernel's epilogue. Broadcasts never
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
//! gather's kernel like any operand.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rfx_ir::hir::{Kernel, Op, ValueId, verify};
use rfx_ir::mir::{BufKind, Buffer, MirInst, MirKernel, MirOp, MirProgram, MirValue, Reduction, Store};
use rfx_ir::{BinaryOp, BufId, Shape};

use crate::error::OptError;
use crate::report::MissReason;
use crate::saturate::op_cost;

/// What fusion decided, for the report.
pub(crate) struct FusionOutcome {
    pub(crate) program: MirProgram,
    pub(crate) missed: Vec<(ValueId, MissReason)>,
}

/// What a root's kernel must do besides elementwise work: a kernel reduces, or runs one axis
/// in order for its scans (all along that axis, one way), never both; elementwise roots join
/// either.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LoopKind {
    Elementwise,
    Reduce,
    Scan { axis: usize, reverse: bool },
}

impl LoopKind {
    /// The kind of a group of this kind once a root of kind `other` joins it, or `None` when
    /// they cannot share a loop nest.
    fn join(self, other: LoopKind) -> Option<LoopKind> {
        match (self, other) {
            (LoopKind::Elementwise, k) | (k, LoopKind::Elementwise) => Some(k),
            (a, b) if a == b => Some(a),
            _ => None,
        }
    }
}

/// How a root relates to the roots it reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dep {
    /// Its value can be shared inside one kernel.
    Soft,
    /// Its buffer must be complete first (a reduction, another iteration space, a reshape).
    Hard,
}

/// The most a pad's operand may cost per point of its window, computed at the pad's other
/// points, to be computed in the pad's kernel rather than stored (in the units of the
/// e-graph's cost model: an `f32` add is 1, an `f32` transcendental 20): storing costs a store
/// and a clamped read per point.
const PAD_RECOMPUTE_COST: f64 = 8.0;

/// The most windows (pads, slices and reshapes computed in place, reductions computed
/// elementwise, each one frame and an elementwise reduction two) one value is computed inside
/// of in a fused kernel. Deeper, fusion stores the operand of the window that would exceed it
/// ([`MissReason::Nesting`]) and reads it back; the emitter recurses once per frame, so this
/// bounds its stack on any kernel. Chains of other ops, however long, need no bound.
pub const MAX_FRAME_NESTING: usize = 64;

/// The most frames one value is computed in, in a fused kernel (see [`MAX_FRAME_NESTING`]):
/// past it the value is stored once instead.
const MAX_FRAME_COPIES: f64 = 256.0;

/// Recomputing a pad's operand at up to this much cost in all is cheaper than the second loop
/// nest that storing it takes (one transcendental at ten points).
const PAD_RECOMPUTE_TOTAL: f64 = 200.0;

struct Plan<'k> {
    kernel: &'k Kernel,
    live: Vec<bool>,
    roots: BTreeMap<ValueId, Option<MissReason>>,
    groups: Vec<(Shape, Vec<ValueId>)>,
    /// What each group's loop nest must do besides elementwise work ([`LoopKind`]).
    group_kinds: Vec<LoopKind>,
    group_of: HashMap<ValueId, usize>,
    /// The reductions computed where they are read, with the extents of their reduced axes
    /// ([`unrolled_reductions`]).
    unrolled: HashMap<ValueId, Vec<usize>>,
}

/// Partitions `kernel` (verified, ideally simplified) into a MIR program.
pub(crate) fn fuse(kernel: &Kernel) -> Result<FusionOutcome, OptError> {
    verify(kernel).map_err(OptError::InvalidKernel)?;
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
                let base = transpose_base(kernel, ValueId::new(index));
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
    let mut plan = Plan {
        kernel,
        live,
        roots,
        groups: Vec::new(),
        group_kinds: Vec::new(),
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

/// A value computed by an op (not an input, not a constant).
fn is_computed(kernel: &Kernel, value: ValueId) -> bool {
    kernel
        .node(value)
        .is_some_and(|n| !matches!(n.op, Op::Input { .. } | Op::Const(_) | Op::Literal(_)))
}

/// A value no kernel stores unless it is an output: an input, a constant, a literal or an
/// `iota`.
/// The most a value of constants and indices may cost per point (in `op_cost` units) to be
/// recomputed wherever it is needed rather than stored (`Plan::index_only`).
const INDEX_ONLY_MAX_COST: f64 = 4.0;

fn is_leaf(op: &Op) -> bool {
    matches!(
        op,
        Op::Input { .. } | Op::Const(_) | Op::Literal(_) | Op::Iota { .. }
    )
}

/// The most elements a reduction may combine per result element to be computed as a chain of
/// binary ops over its operand's windows, in row-major order of the reduced elements (the
/// reference interpreter's order, from the identity, which each first step leaves exact: the
/// same bits). Such a reduction is elementwise work like any other, so it fuses with what
/// reads its result instead of ending a loop nest: a product of small matrices, the squared
/// length of a 3-vector.
const UNROLL_MAX: usize = 4;

/// The live reductions combining between one and [`UNROLL_MAX`] elements per result element,
/// with the extents of their reduced axes: each is computed where it is read. A kernel output
/// stays a reduction over its operand's points: its loop nest can then also compute what else
/// is computed there (a gradient beside its loss).
fn unrolled_reductions(kernel: &Kernel, live: &[bool]) -> HashMap<ValueId, Vec<usize>> {
    let outputs: BTreeSet<ValueId> = kernel.outputs().iter().map(|o| o.value).collect();
    let extents = |node: &rfx_ir::hir::Node| -> Option<Vec<usize>> {
        let Op::Reduce { axes, .. } = &node.op else {
            return None;
        };
        let operand = kernel.value_type(*node.args.first()?)?;
        let extents: Vec<usize> = axes
            .iter()
            .map(|&a| operand.shape.dims().get(a).copied())
            .collect::<Option<_>>()?;
        let count: usize = extents.iter().product();
        (1..=UNROLL_MAX).contains(&count).then_some(extents)
    };
    kernel
        .nodes()
        .iter()
        .enumerate()
        .filter(|&(i, _)| live.get(i).copied().unwrap_or(false) && !outputs.contains(&ValueId::new(i)))
        .filter_map(|(i, node)| Some((ValueId::new(i), extents(node)?)))
        .collect()
}

/// The value under the chain of reshapes ending at `value` (`value` itself when it is no
/// reshape), stopping at a value `stop` accepts.
fn under_reshapes(kernel: &Kernel, mut value: ValueId, stop: impl Fn(ValueId) -> bool) -> ValueId {
    while !stop(value)
        && let Some(node) = kernel.node(value)
        && matches!(node.op, Op::Reshape)
        && let Some(&operand) = node.args.first()
    {
        value = operand;
    }
    value
}

/// Whether `value` is a chain of reshapes of an input or a literal: a row-major buffer, which
/// any reshape of it reads in place.
fn reshapes_a_buffer(kernel: &Kernel, value: ValueId) -> bool {
    let source = under_reshapes(kernel, value, |_| false);
    kernel
        .node(source)
        .is_some_and(|n| matches!(n.op, Op::Input { .. } | Op::Literal(_)))
}

/// The value under the chain of slices ending at `value` when it is computed by an op other
/// than a transpose or a broadcast (`None` otherwise, or when `value` is no slice): such a slice
/// is computed in its consumer's kernel, from its operand computed at the window's points.
fn slice_base(kernel: &Kernel, value: ValueId) -> Option<ValueId> {
    let mut node = kernel.node(value).filter(|n| matches!(n.op, Op::Slice { .. }))?;
    loop {
        let operand = node.args.first().copied()?;
        node = kernel.node(operand)?;
        match &node.op {
            Op::Slice { .. } => {}
            op if is_leaf(op) || matches!(op, Op::Transpose { .. } | Op::BroadcastTo) => return None,
            _ => return Some(operand),
        }
    }
}

/// The value under a chain of transposes, slices and broadcasts starting at `value` (`value`
/// itself when it is none of them): what a transposed read loads from.
fn transpose_base(kernel: &Kernel, mut value: ValueId) -> ValueId {
    while let Some(node) = kernel.node(value)
        && is_view(&node.op)
        && let Some(&operand) = node.args.first()
    {
        value = operand;
    }
    value
}

/// Whether reshaping `from` to `to` only inserts or removes axes of one: the other extents are
/// the same, in the same order, so element `idx` of `to` is `idx` with those axes dropped.
fn only_unit_axes_move(from: &Shape, to: &Shape) -> bool {
    from.dims()
        .iter()
        .filter(|&&d| d != 1)
        .eq(to.dims().iter().filter(|&&d| d != 1))
}

/// The strides over `outer` of a value whose strides over `inner` are `strides`, where `outer`
/// is `inner` with axes of one inserted or removed (see [`only_unit_axes_move`]): the other
/// axes keep their strides, an axis of one gets 0.
fn regrouped(inner: &Shape, strides: &[usize], outer: &Shape) -> Option<Vec<usize>> {
    let mut kept = inner
        .dims()
        .iter()
        .zip(strides)
        .filter(|(d, _)| **d != 1)
        .map(|(d, s)| (*d, *s));
    let out = outer
        .dims()
        .iter()
        .map(|&d| match d {
            1 => Some(0),
            _ => kept.next().filter(|&(e, _)| e == d).map(|(_, s)| s),
        })
        .collect::<Option<Vec<_>>>()?;
    kept.next().is_none().then_some(out)
}

/// Reads a value of `shape`, whose element `idx` sits at `sum(idx[i] * strides[i])`, at every
/// point of `domain` (NumPy broadcasting: dimensions aligned at the right, size-1 dimensions
/// repeat). `None` when `shape` does not broadcast to `domain`.
fn strides_in_domain(shape: &Shape, strides: &[usize], domain: &Shape) -> Option<Vec<usize>> {
    if !shape.broadcasts_to(domain) || strides.len() != shape.rank() {
        return None;
    }
    let offset = domain.rank() - shape.rank();
    Some(
        (0..domain.rank())
            .map(|axis| match axis.checked_sub(offset) {
                Some(i) if shape.dims()[i] != 1 => strides[i],
                _ => 0,
            })
            .collect(),
    )
}

/// `true` for the ops that read their operand number `arg` through an index map of their own
/// (the operand must be complete before their kernel runs): a `gather` its table.
fn reads_buffer(op: &Op, arg: usize) -> bool {
    match op {
        Op::Reshape | Op::Transpose { .. } | Op::Slice { .. } | Op::Pad { .. } => true,
        Op::Gather { .. } => arg == 0,
        // A reduction computed in its consumer's kernel (see `unrolled_reductions`) reads its
        // operand at the points of its windows; any other reduction is a root, never walked
        // through.
        Op::Reduce { .. } => true,
        _ => false,
    }
}

/// `true` for the links of a strided read: transposes, slices and broadcasts.
fn is_view(op: &Op) -> bool {
    matches!(op, Op::Transpose { .. } | Op::Slice { .. } | Op::BroadcastTo)
}

impl Plan<'_> {
    fn op(&self, v: ValueId) -> Option<&Op> {
        self.kernel.node(v).map(|n| &n.op)
    }

    fn shape(&self, v: ValueId) -> Shape {
        self.kernel
            .value_type(v)
            .map(|t| t.shape.clone())
            .unwrap_or_default()
    }

    /// The iteration space a root's kernel runs over.
    fn domain(&self, root: ValueId) -> Shape {
        match (self.op(root), self.kernel.node(root)) {
            (Some(Op::Reduce { .. }), Some(node)) if self.is_reduce(root) => {
                node.args.first().map(|&a| self.shape(a)).unwrap_or_default()
            }
            _ => self.shape(root),
        }
    }

    /// What `root`'s kernel must do for it besides elementwise work.
    fn loop_kind(&self, root: ValueId) -> LoopKind {
        match self.op(root) {
            Some(&Op::Scan { axis, reverse, .. }) => LoopKind::Scan { axis, reverse },
            _ if self.is_reduce(root) => LoopKind::Reduce,
            _ => LoopKind::Elementwise,
        }
    }

    /// Whether `v` is a reduction its kernel ends with (not one computed elementwise, see
    /// [`unrolled_reductions`]).
    fn is_reduce(&self, v: ValueId) -> bool {
        matches!(self.op(v), Some(Op::Reduce { .. })) && !self.unrolled.contains_key(&v)
    }

    /// The values a root's kernel computes for it, and the roots it reads with their kind.
    /// The walk stops at roots, inputs and constants.
    fn walk(&self, root: ValueId) -> (Vec<ValueId>, Vec<(ValueId, Dep)>) {
        let domain = self.domain(root);
        let start: Vec<(ValueId, bool)> = match self.kernel.node(root) {
            Some(node) if self.is_reduce(root) => node.args.iter().map(|&a| (a, false)).collect(),
            Some(node) if is_leaf(&node.op) => Vec::new(),
            Some(node) => node
                .args
                .iter()
                .enumerate()
                .map(|(i, &a)| (a, reads_buffer(&node.op, i)))
                .collect(),
            None => Vec::new(),
        };
        let mut stack = start;
        let mut seen = BTreeSet::new();
        let mut computed = Vec::new();
        let mut deps = Vec::new();
        while let Some((v, through_reshape)) = stack.pop() {
            if !seen.insert((v, through_reshape)) {
                continue;
            }
            if self.roots.contains_key(&v) {
                let soft = !through_reshape
                    && !self.is_reduce(v)
                    && is_computed(self.kernel, v)
                    && self.domain(v) == domain;
                deps.push((v, if soft { Dep::Soft } else { Dep::Hard }));
                continue;
            }
            let Some(node) = self.kernel.node(v) else { continue };
            if is_leaf(&node.op) {
                continue;
            }
            computed.push(v);
            // Everything under a buffer read is read at other points than the consumer's, so
            // a root there must be complete first.
            stack.extend(
                node.args
                    .iter()
                    .enumerate()
                    .map(|(i, &a)| (a, through_reshape || reads_buffer(&node.op, i))),
            );
        }
        computed.sort();
        computed.dedup();
        (computed, deps)
    }

    /// Assigns roots (in definition order) to kernels: the earliest kernel with the same
    /// iteration space, whose loop nest can also do what the root needs ([`LoopKind`]), that
    /// runs after everything the root needs complete.
    fn group_roots(&mut self) {
        self.groups.clear();
        self.group_kinds.clear();
        self.group_of.clear();
        let roots: Vec<ValueId> = self.roots.keys().copied().collect();
        for root in roots {
            let domain = self.domain(root);
            let kind = self.loop_kind(root);
            let (_, deps) = self.walk(root);
            let mut earliest = 0;
            for (dep, kind) in deps {
                if let Some(&g) = self.group_of.get(&dep) {
                    earliest = earliest.max(if kind == Dep::Hard { g + 1 } else { g });
                }
            }
            let found = (earliest..self.groups.len())
                .find(|&g| self.groups[g].0 == domain && self.group_kinds[g].join(kind).is_some());
            let g = match found {
                Some(g) => g,
                None => {
                    self.groups.push((domain, Vec::new()));
                    self.group_kinds.push(LoopKind::Elementwise);
                    self.groups.len() - 1
                }
            };
            if let Some(joined) = self.group_kinds[g].join(kind) {
                self.group_kinds[g] = joined;
            }
            self.groups[g].1.push(root);
            self.group_of.insert(root, g);
        }
    }

    /// Materialises values needed by several kernels, or too expensive to recompute at every
    /// point of a larger iteration space. Returns whether anything changed.
    fn materialise_shared(&mut self) -> Result<bool, OptError> {
        // The most elements any live consumer of each value has.
        let mut widest_consumer = vec![0usize; self.kernel.nodes().len()];
        for (i, node) in self.kernel.nodes().iter().enumerate() {
            if self.live[i] {
                for a in &node.args {
                    if let Some(w) = widest_consumer.get_mut(a.index()) {
                        *w = (*w).max(node.ty.shape.numel());
                    }
                }
            }
        }
        let mut users: BTreeMap<ValueId, BTreeSet<usize>> = BTreeMap::new();
        for (&root, &g) in &self.group_of {
            for v in self.walk(root).0 {
                users.entry(v).or_default().insert(g);
            }
        }
        // Only the shared values closest to their consumers are materialised in one round: a
        // value shared only because a shared consumer is will be read through that consumer's
        // buffer once it has one.
        let shared: BTreeSet<ValueId> = users
            .iter()
            .filter(|(_, g)| g.len() > 1)
            .map(|(&v, _)| v)
            .collect();
        // The operands of shared values, gathered once (asking each shared value for each
        // candidate made this quadratic in the number of shared values).
        let shared_operands: BTreeSet<ValueId> = shared
            .iter()
            .filter_map(|&s| self.kernel.node(s))
            .flat_map(|n| n.args.iter().copied())
            .collect();
        let consumed_by_shared = |v: ValueId| shared_operands.contains(&v);
        let mut changed = false;
        for (v, groups) in users {
            if groups.len() > 1 {
                // A value of constants and indices alone costs a few ops at each point, less
                // than storing it and loading it back in each kernel.
                if self.index_only(v) || self.plain_view(v) {
                    continue;
                }
                if !consumed_by_shared(v) {
                    self.roots.insert(v, Some(MissReason::FanOut));
                    changed = true;
                }
                continue;
            }
            let Some(&g) = groups.iter().next() else { continue };
            let (domain, node) = (
                &self.groups[g].0,
                self.kernel.node(v).ok_or(OptError::InvalidValue(v))?,
            );
            // Computed at the points of its widest consumer, which can be wider than the kernel
            // under a reduction computed elementwise (its operand's points).
            let widest = widest_consumer.get(v.index()).copied().unwrap_or(0);
            let small = node.ty.shape.numel().saturating_mul(4) <= domain.numel().max(widest);
            let widens = widest > node.ty.shape.numel();
            if small && widens && self.recompute_cost(v) >= 4.0 {
                self.roots.insert(v, Some(MissReason::Shape));
                changed = true;
            }
        }
        Ok(changed)
    }

    /// Whether `v` is computed from constants and `iota`s alone by elementwise ops costing at
    /// most [`INDEX_ONLY_MAX_COST`] per point (a position compared with a constant, a mask of
    /// two such tests): such a value is recomputed in every kernel that needs it, never stored.
    fn index_only(&self, v: ValueId) -> bool {
        let mut stack = vec![v];
        let mut seen = BTreeSet::new();
        while let Some(u) = stack.pop() {
            if !seen.insert(u) {
                continue;
            }
            if u != v && self.roots.contains_key(&u) {
                return false;
            }
            let Some(node) = self.kernel.node(u) else {
                return false;
            };
            match &node.op {
                Op::Const(_) | Op::Iota { .. } => {}
                Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Cast | Op::BroadcastTo => {
                    stack.extend(node.args.iter().copied());
                }
                _ => return false,
            }
        }
        self.recompute_cost(v) <= INDEX_ONLY_MAX_COST
    }

    /// Stops storing the values stored for their consumers' sake (shared, or small and dear
    /// when they were chosen) that turned out to be plain views of stored values
    /// ([`Plan::plain_view`]); a later round may have stored what made them dear. Returns
    /// whether any was dropped.
    fn drop_stored_views(&mut self) -> bool {
        let views: Vec<ValueId> = self
            .roots
            .iter()
            .filter(|(_, reason)| matches!(reason, Some(MissReason::FanOut | MissReason::Shape)))
            .map(|(&v, _)| v)
            .collect();
        let mut dropped = false;
        for v in views {
            if self.plain_view(v) {
                self.roots.remove(&v);
                dropped = true;
            }
        }
        dropped
    }

    /// Whether `v` is a chain of reshapes, transposes, slices and broadcasts of an input, a
    /// stored value, a constant or an `iota`: a strided read in each kernel that needs it,
    /// which costs no more than loading a stored copy and saves the kernel that stores it.
    fn plain_view(&self, v: ValueId) -> bool {
        let mut u = v;
        loop {
            if u != v && self.roots.contains_key(&u) {
                return true;
            }
            let Some(node) = self.kernel.node(u) else {
                return false;
            };
            match (&node.op, node.args.first()) {
                (op, _) if is_leaf(op) => return u != v,
                (Op::Reshape | Op::Transpose { .. } | Op::Slice { .. } | Op::BroadcastTo, Some(&a)) => u = a,
                _ => return false,
            }
        }
    }

    /// What recomputing `v` at each point of its kernel costs per point: the ops of `v`'s
    /// shape and smaller computed in the kernel to make it (up to roots and leaves), each
    /// counted once, so a chain of cheap ops costs as much as one dear op. Asked only where a
    /// smaller computation meets a larger shape (a consumer with more elements reads `v`), so
    /// a small chain is materialised where it widens, not inside.
    fn recompute_cost(&self, v: ValueId) -> f64 {
        let mut cost = 0.0;
        let mut seen = BTreeSet::new();
        let mut stack = vec![v];
        while let Some(u) = stack.pop() {
            if !seen.insert(u) || (u != v && self.roots.contains_key(&u)) {
                continue;
            }
            let Some(node) = self.kernel.node(u) else { continue };
            if is_leaf(&node.op) {
                continue;
            }
            cost += match &node.op {
                Op::Unary(op) => op_cost(&crate::lang::Head::Unary(*op), node.ty.dtype),
                Op::Binary(op) => op_cost(&crate::lang::Head::Binary(*op), node.ty.dtype),
                // A reduction computed elementwise computes its operand once per element it
                // combines (counted once below) and combines them.
                Op::Reduce { .. } => match (self.unrolled.get(&u), node.args.first()) {
                    (Some(extents), Some(&operand)) => {
                        let more = extents.iter().product::<usize>().saturating_sub(1) as f64;
                        more * (1.0 + self.recompute_cost(operand))
                    }
                    _ => 1.0,
                },
                _ => 1.0,
            };
            stack.extend(node.args.iter().copied());
        }
        cost
    }

    /// Stores the operands of pads and slices that would cost more to compute where they are
    /// read than to store once and read back. A pad's operand is otherwise computed in its
    /// consumer's kernel at each point less `low` (and its value discarded outside the
    /// window), so a pad of `k` times its operand's size computes it `k` times over; a slice's
    /// operand is computed at the window's points only, but once per window when it has other
    /// consumers (two windows of one value, or a window and the value).
    fn store_dear_window_operands(&mut self) {
        let consumers = self.consumer_counts();
        for index in 0..self.kernel.nodes().len() {
            if !self.live[index] {
                continue;
            }
            let Some(base) = slice_base(self.kernel, ValueId::new(index)) else {
                continue;
            };
            if !self.roots.contains_key(&base)
                && consumers.get(base.index()).copied().unwrap_or(0) > 1
                && self.recompute_cost(base) > PAD_RECOMPUTE_COST
            {
                self.roots.insert(base, Some(MissReason::Slice));
            }
        }
        for (index, node) in self.kernel.nodes().iter().enumerate() {
            let (Op::Pad { .. }, true, Some(&operand)) = (&node.op, self.live[index], node.args.first())
            else {
                continue;
            };
            if !is_computed(self.kernel, operand) || self.roots.contains_key(&operand) {
                continue;
            }
            let (outer, inner) = (node.ty.shape.numel(), self.shape(operand).numel());
            let extra = self.recompute_cost(operand) * (outer - inner) as f64;
            if extra > PAD_RECOMPUTE_TOTAL.max(PAD_RECOMPUTE_COST * inner as f64) {
                self.roots.insert(operand, Some(MissReason::Pad));
            }
        }
    }

    /// Whether the slice `v` is computed in a frame: the values under its chain of slices are
    /// computed, by an op other than a transpose or a broadcast, and none is stored.
    fn slice_in_frame(&self, v: ValueId) -> bool {
        let mut u = v;
        while let Some(node) = self.kernel.node(u)
            && matches!(node.op, Op::Slice { .. })
            && let Some(&operand) = node.args.first()
        {
            if self.roots.contains_key(&operand) {
                return false;
            }
            u = operand;
        }
        u != v && slice_base(self.kernel, v) == Some(u)
    }

    /// How many live nodes read each value (a node reading it twice counts once).
    fn consumer_counts(&self) -> Vec<usize> {
        let mut counts = vec![0usize; self.kernel.nodes().len()];
        for (i, node) in self.kernel.nodes().iter().enumerate() {
            if !self.live[i] {
                continue;
            }
            for (k, a) in node.args.iter().enumerate() {
                if !node.args[..k].contains(a)
                    && let Some(count) = counts.get_mut(a.index())
                {
                    *count += 1;
                }
            }
        }
        counts
    }

    /// Stores the values whose computation in place would nest more than
    /// [`MAX_FRAME_NESTING`] frames (pads, slices and reshapes computed in place, reductions
    /// computed elementwise), or would be repeated in more than [`MAX_FRAME_COPIES`] frames
    /// (each frame recomputes its operand with a memo of its own, so nested windows multiply:
    /// a chain of two-element reductions would double its work per link). The emitter recurses
    /// once per nested frame, so the first bound bounds its stack on any kernel, and the second
    /// keeps the work per stored value linear. Every other chain of ops is emitted iteratively
    /// and needs neither.
    ///
    /// Consumers come after their operands, so one pass from the last node down sees every
    /// consumer of a value before the value: its frame depth is the deepest of its consumers'
    /// plus their frames, its copies the most of its plain consumers' plus those its windows
    /// make. A stored value starts again from one copy at depth zero (frames load it).
    fn bound_frame_nesting(&mut self) {
        let n_nodes = self.kernel.nodes().len();
        let mut depth = vec![0usize; n_nodes];
        let mut copies = vec![0.0f64; n_nodes];
        for (index, node) in self.kernel.nodes().iter().enumerate().rev() {
            let v = ValueId::new(index);
            if !self.live[index] || is_leaf(&node.op) {
                continue;
            }
            if !self.roots.contains_key(&v)
                && is_computed(self.kernel, v)
                && (depth[index] > MAX_FRAME_NESTING || copies[index] > MAX_FRAME_COPIES)
            {
                self.roots.insert(v, Some(MissReason::Nesting));
            }
            if self.roots.contains_key(&v) {
                depth[index] = 0;
                copies[index] = 1.0;
            }
            let (own_depth, own_copies) = (depth[index], copies[index].max(1.0));
            let (frames, windows) = match &node.op {
                Op::Pad { .. } | Op::Slice { .. } | Op::Reshape => (1, 1.0),
                // A frame per reduced point inside one that drops the reduced axes.
                Op::Reduce { .. } => match self.unrolled.get(&v) {
                    Some(extents) => (2, extents.iter().product::<usize>() as f64),
                    None => (0, 1.0),
                },
                _ => (0, 1.0),
            };
            for (k, operand) in node.args.iter().enumerate() {
                let Some(i) = Some(operand.index()).filter(|&i| i < n_nodes) else {
                    continue;
                };
                if k == 0 && frames > 0 {
                    depth[i] = depth[i].max(own_depth + frames);
                    copies[i] += own_copies * windows;
                } else {
                    depth[i] = depth[i].max(own_depth);
                    copies[i] = copies[i].max(own_copies);
                }
            }
        }
    }

    /// Writes the MIR program: buffers for inputs, outputs and temporaries, one kernel per group.
    /// Also returns the roots stored in no buffer after all: every reader computes in the
    /// root's own kernel, at its own points (see [`drop_unread_temps`]).
    fn emit(&self) -> Result<(MirProgram, BTreeSet<ValueId>), OptError> {
        let kernel = self.kernel;
        let mut buffers = Vec::new();
        let mut input_buf: HashMap<ValueId, BufId> = HashMap::new();
        for (v, name, ty) in kernel.inputs() {
            input_buf.insert(v, BufId::new(buffers.len()));
            buffers.push(Buffer {
                ty: ty.clone(),
                kind: BufKind::Input {
                    name: name.to_string(),
                },
            });
        }
        // A literal is read like an input, from a buffer of its values (one per distinct
        // literal: the e-graph merged equal ones).
        for (index, node) in kernel.nodes().iter().enumerate() {
            if let (Op::Literal(values), true) = (&node.op, self.live[index]) {
                input_buf.insert(ValueId::new(index), BufId::new(buffers.len()));
                buffers.push(Buffer {
                    ty: node.ty.clone(),
                    kind: BufKind::Literal {
                        values: values.clone(),
                    },
                });
            }
        }
        // Every buffer a root writes; the first one is where other kernels read it.
        let mut root_bufs: BTreeMap<ValueId, Vec<BufId>> = BTreeMap::new();
        for output in kernel.outputs() {
            let ty = kernel
                .value_type(output.value)
                .ok_or(OptError::InvalidValue(output.value))?;
            root_bufs
                .entry(output.value)
                .or_default()
                .push(BufId::new(buffers.len()));
            buffers.push(Buffer {
                ty: ty.clone(),
                kind: BufKind::Output {
                    name: output.name.clone(),
                },
            });
        }
        for &root in self.roots.keys() {
            if let std::collections::btree_map::Entry::Vacant(slot) = root_bufs.entry(root) {
                let ty = kernel.value_type(root).ok_or(OptError::InvalidValue(root))?;
                slot.insert(vec![BufId::new(buffers.len())]);
                buffers.push(Buffer {
                    ty: ty.clone(),
                    kind: BufKind::Temp,
                });
            }
        }
        let mut kernels = Vec::new();
        for (g, (domain, roots)) in self.groups.iter().enumerate() {
            let mut emitter = KernelEmitter {
                plan: self,
                group: g,
                domain,
                input_buf: &input_buf,
                root_bufs: &root_bufs,
                body: Vec::new(),
                memo: HashMap::new(),
                numbered: HashMap::new(),
                frames: Vec::new(),
            };
            let mut stores = Vec::new();
            let mut reductions = Vec::new();
            for &root in roots {
                let bufs = root_bufs.get(&root).ok_or(OptError::InvalidValue(root))?;
                match self.op(root) {
                    Some(Op::Reduce { op, axes, .. }) if self.is_reduce(root) => {
                        let operand = kernel
                            .node(root)
                            .and_then(|n| n.args.first().copied())
                            .ok_or(OptError::InvalidValue(root))?;
                        let value = emitter.value(operand)?;
                        for &buf in bufs {
                            reductions.push(Reduction {
                                op: *op,
                                value,
                                axes: axes.clone(),
                                buf,
                            });
                        }
                    }
                    _ => {
                        let value = emitter.compute(root)?;
                        for &buf in bufs {
                            stores.push(Store { buf, value });
                        }
                    }
                }
            }
            kernels.push(MirKernel {
                name: format!("k{g}"),
                domain: domain.clone(),
                body: emitter.body,
                stores,
                reductions,
            });
        }
        let read: BTreeSet<BufId> = kernels.iter().flat_map(MirKernel::reads).collect();
        let unstored = root_bufs
            .iter()
            .filter(|(_, bufs)| {
                bufs.iter().all(|b| {
                    !read.contains(b)
                        && buffers
                            .get(b.index())
                            .is_some_and(|buf| buf.kind == BufKind::Temp)
                })
            })
            .map(|(&v, _)| v)
            .collect();
        Ok((
            drop_unread_temps(kernel.name(), buffers, kernels, &read),
            unstored,
        ))
    }
}

/// The program without the temporaries no kernel reads, nor the writes into them: a value
/// stored only because it is a root (a scan, which must be computed by its ordered kernel)
/// whose every reader computes in that kernel at its own points needs no buffer.
/// `read` holds every buffer some kernel reads.
fn drop_unread_temps(
    name: &str,
    buffers: Vec<Buffer>,
    mut kernels: Vec<MirKernel>,
    read: &BTreeSet<BufId>,
) -> MirProgram {
    let keep: Vec<bool> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| b.kind != BufKind::Temp || read.contains(&BufId::new(i)))
        .collect();
    if keep.iter().all(|&k| k) {
        return MirProgram::from_parts(name, buffers, kernels);
    }
    let mut renumbered = vec![None; buffers.len()];
    let mut kept = Vec::with_capacity(buffers.len());
    for (i, buffer) in buffers.into_iter().enumerate() {
        if keep[i] {
            renumbered[i] = Some(BufId::new(kept.len()));
            kept.push(buffer);
        }
    }
    let new_id = |buf: BufId| renumbered.get(buf.index()).copied().flatten();
    for kernel in &mut kernels {
        kernel.stores.retain(|s| new_id(s.buf).is_some());
        kernel.reductions.retain(|r| new_id(r.buf).is_some());
        for store in &mut kernel.stores {
            store.buf = new_id(store.buf).unwrap_or(store.buf);
        }
        for reduction in &mut kernel.reductions {
            reduction.buf = new_id(reduction.buf).unwrap_or(reduction.buf);
        }
        for inst in &mut kernel.body {
            if let MirOp::Load { buf, .. } | MirOp::Gather { buf } = &mut inst.op {
                *buf = new_id(*buf).unwrap_or(*buf);
            }
        }
    }
    kernels.retain(|k| !k.stores.is_empty() || !k.reductions.is_empty());
    MirProgram::from_parts(name, kept, kernels)
}

struct KernelEmitter<'p, 'k> {
    plan: &'p Plan<'k>,
    group: usize,
    domain: &'p Shape,
    input_buf: &'p HashMap<ValueId, BufId>,
    root_bufs: &'p BTreeMap<ValueId, Vec<BufId>>,
    body: Vec<MirInst>,
    /// The values computed so far at the points of the innermost frame.
    memo: HashMap<ValueId, MirValue>,
    /// Each instruction of `body`, to find equal ones.
    numbered: HashMap<MirInst, MirValue>,
    /// The pads whose operands are being computed, outermost first.
    frames: Vec<Frame>,
}

/// Where the elements of a value of `shape` lie: element `idx` at
/// `offset + sum(idx[i] * strides[i])` of a buffer (or, for an `iota`, that count).
#[derive(Clone, Copy)]
struct Layout<'a> {
    shape: &'a Shape,
    strides: &'a [usize],
    offset: usize,
}

/// Where the elements of a chain of views come from.
enum View {
    /// A splat constant.
    Splat(rfx_ir::Scalar),
    /// An `iota`: element `idx` is `offset + sum(idx[i] * strides[i])`.
    Count { strides: Vec<usize>, offset: usize },
    /// Element `idx` is at `offset + sum(idx[i] * strides[i])` of `buf` (of `len` elements).
    Buffer {
        buf: BufId,
        len: usize,
        strides: Vec<usize>,
        offset: usize,
    },
}

/// A pad or a slice whose operand this kernel computes: the operand's element at `idx` is
/// computed where the pad or slice holds it, at `idx + shift` (a pad's `low`, a slice's
/// negated `starts`). A pad's operand is also computed, from clamped reads, wherever else the
/// pad is read.
struct Frame {
    /// The operand's shape.
    inner: Shape,
    /// The pad's or slice's shape.
    outer: Shape,
    shift: Vec<i64>,
    /// Every point of the frame is a point of the operand (a slice, a reshape): reads stay
    /// inside their buffers, at offsets that are never negative.
    exact: bool,
    /// A reshape that inserts or removes axes of one (`shift` is unused): the operand's
    /// element is the frame's point with those axes dropped or added.
    regroup: bool,
}

impl KernelEmitter<'_, '_> {
    /// Appends an instruction, or returns the equal one already there: every MIR instruction
    /// is a pure function of the domain point, so equal instructions are equal values (a
    /// pad's frame recomputes what does not move, such as a broadcast input's element).
    fn push(&mut self, op: MirOp, args: Vec<MirValue>, dtype: rfx_ir::DType) -> MirValue {
        // A choice between equal values is that value (a frame can make both sides one load).
        if let (MirOp::Select, [_, a, b]) = (&op, args.as_slice())
            && a == b
        {
            return *a;
        }
        let inst = MirInst { op, args, dtype };
        if let Some(&value) = self.numbered.get(&inst) {
            return value;
        }
        let value = MirValue::new(self.body.len());
        self.numbered.insert(inst.clone(), value);
        self.body.push(inst);
        value
    }

    /// A load of `buf`, read as a row-major array of `shape`, at every point of the domain.
    fn load(
        &mut self,
        buf: BufId,
        shape: &Shape,
        dtype: rfx_ir::DType,
        at: ValueId,
    ) -> Result<MirValue, OptError> {
        let layout = Layout {
            shape,
            strides: &shape.strides(),
            offset: 0,
        };
        self.read(buf, shape.numel(), layout, dtype, at)
    }

    /// Where the element `idx` of a value laid out by `layout` is taken at each domain point:
    /// strides over the domain and an offset. Inside a frame a point of the operand is the
    /// frame's point less `shift`, so inside a pad's frame the offset may be negative.
    fn place(&self, layout: Layout<'_>, at: ValueId) -> Result<(Vec<usize>, i64), OptError> {
        let range = || OptError::IndexRange(at);
        let mut offset = i64::try_from(layout.offset).map_err(|_| range())?;
        let mut shape = layout.shape.clone();
        let mut strides = layout.strides.to_vec();
        for frame in self.frames.iter().rev() {
            strides = strides_in_domain(&shape, &strides, &frame.inner).ok_or(OptError::InvalidValue(at))?;
            if frame.regroup {
                strides =
                    regrouped(&frame.inner, &strides, &frame.outer).ok_or(OptError::InvalidValue(at))?;
            }
            for (&shift, &stride) in frame.shift.iter().zip(&strides) {
                let step = i64::try_from(stride).ok().and_then(|s| s.checked_mul(shift));
                offset = step.and_then(|n| offset.checked_sub(n)).ok_or_else(range)?;
            }
            shape = frame.outer.clone();
        }
        let strides = strides_in_domain(&shape, &strides, self.domain).ok_or(OptError::InvalidValue(at))?;
        Ok((strides, offset))
    }

    /// Whether every frame is a slice's (or there is none): every point of the domain is then a
    /// point of every value computed in the innermost frame.
    fn exact(&self) -> bool {
        self.frames.iter().all(|f| f.exact)
    }

    /// The largest `sum(point[i] * strides[i])` over the domain (`None` past `i64`).
    fn reach(&self, strides: &[usize]) -> Option<i64> {
        self.domain
            .dims()
            .iter()
            .zip(strides)
            .try_fold(0usize, |acc, (&d, &s)| {
                d.saturating_sub(1)
                    .checked_mul(s)
                    .and_then(|n| acc.checked_add(n))
            })
            .and_then(|n| i64::try_from(n).ok())
    }

    /// `offset + sum(point[i] * strides[i])` at every domain point in `dtype`: in a float dtype
    /// when every value is an integer it holds exactly (so a kernel of `f64` values needs no
    /// `i32` lanes, which would keep it from running in vectors on the CPU), in `i32`
    /// otherwise, converted.
    fn index_in(
        &mut self,
        dtype: rfx_ir::DType,
        strides: Vec<usize>,
        offset: i64,
        at: ValueId,
    ) -> Result<MirValue, OptError> {
        let exact = i64::try_from(rfx_ir::semantics::max_exact_index(dtype)).unwrap_or(i64::MAX);
        let fits = self
            .reach(&strides)
            .and_then(|r| r.checked_add(offset.checked_abs()?))
            .is_some_and(|n| n <= exact);
        if !dtype.is_float() || !fits {
            let index = self.index_i32(strides, offset, at)?;
            return Ok(match dtype {
                rfx_ir::DType::I32 => index,
                _ => self.push(MirOp::Cast, vec![index], dtype),
            });
        }
        let index = self.push(MirOp::Index { strides }, Vec::new(), dtype);
        if offset == 0 {
            return Ok(index);
        }
        // Exact: `|offset|` is at most the largest integer the dtype holds exactly.
        let constant = rfx_ir::Scalar::from_f64(dtype, offset as f64);
        let constant = self.push(MirOp::Const(constant), Vec::new(), dtype);
        Ok(self.push(MirOp::Binary(BinaryOp::Add), vec![index, constant], dtype))
    }

    /// `offset + sum(point[i] * strides[i])` at every domain point, as an `i32` (an error when
    /// some point's value does not fit).
    fn index_i32(&mut self, strides: Vec<usize>, offset: i64, at: ValueId) -> Result<MirValue, OptError> {
        let range = || OptError::IndexRange(at);
        let reach = self.reach(&strides).ok_or_else(range)?;
        let (i32_max, i32_min) = (i64::from(i32::MAX), i64::from(i32::MIN));
        if reach > i32_max || offset < i32_min || reach.saturating_add(offset) > i32_max {
            return Err(range());
        }
        let i32 = rfx_ir::DType::I32;
        let index = self.push(MirOp::Index { strides }, Vec::new(), i32);
        if offset == 0 {
            return Ok(index);
        }
        let (op, magnitude) = match offset {
            o if o < 0 => (BinaryOp::Sub, o.unsigned_abs()),
            o => (BinaryOp::Add, o.unsigned_abs()),
        };
        // `|offset| <= 2^31`, and `2^31` is `i32::MIN`, which subtracts like `+2^31` wrapping.
        let constant = i32::try_from(magnitude).unwrap_or(i32::MIN);
        let constant = self.push(MirOp::Const(rfx_ir::Scalar::I32(constant)), Vec::new(), i32);
        Ok(self.push(MirOp::Binary(op), vec![index, constant], i32))
    }

    /// `buf`'s element for the element `idx` of a value laid out in it by `layout`, at every
    /// domain point: a strided load, or inside a pad's frame, where some
    /// point's element lies outside `buf` (of `len` elements), a gather by clamped index (the
    /// index leaves the buffer only outside the pad's window, whose values the pad discards;
    /// an `i32`, or an `f64` for an `f64` buffer).
    fn read(
        &mut self,
        buf: BufId,
        len: usize,
        layout: Layout<'_>,
        dtype: rfx_ir::DType,
        at: ValueId,
    ) -> Result<MirValue, OptError> {
        let (strides, shifted) = self.place(layout, at)?;
        // Along an axis where the operand has one element, a pad's shift moves no read.
        let inside = || {
            let last = i64::try_from(len).ok().and_then(|n| n.checked_sub(1));
            shifted >= 0
                && self
                    .reach(&strides)
                    .and_then(|r| r.checked_add(shifted))
                    .zip(last)
                    .is_some_and(|(r, last)| r <= last)
        };
        if self.exact() || inside() {
            let offset = usize::try_from(shifted).map_err(|_| OptError::InvalidValue(at))?;
            return Ok(self.push(MirOp::Load { buf, strides, offset }, Vec::new(), dtype));
        }
        // An `f64` read counts its index in `f64` (exact, see `index_in`), so that an `f64`
        // kernel needs no `i32` lanes.
        let index = match dtype {
            rfx_ir::DType::F64 => self.index_in(dtype, strides, shifted, at)?,
            _ => self.index_i32(strides, shifted, at)?,
        };
        Ok(self.push(MirOp::Gather { buf }, vec![index], dtype))
    }

    /// The count `layout` gives the element `idx` of its value, at every domain point, in
    /// `dtype`: what an `iota` and its views read.
    fn count(&mut self, layout: Layout<'_>, dtype: rfx_ir::DType, at: ValueId) -> Result<MirValue, OptError> {
        let (strides, shifted) = self.place(layout, at)?;
        if !self.exact() {
            // Exact wherever the pad keeps the value (an index of the operand).
            return self.index_in(dtype, strides, shifted, at);
        }
        let index = self.push(MirOp::Index { strides }, Vec::new(), dtype);
        if shifted == 0 {
            return Ok(index);
        }
        // Exact: the sum is an index of the unsliced `iota`, which its dtype holds.
        let start = usize::try_from(shifted)
            .ok()
            .and_then(|n| rfx_ir::semantics::index_value(n, dtype))
            .ok_or(OptError::InvalidValue(at))?;
        let start = self.push(MirOp::Const(start), Vec::new(), dtype);
        Ok(self.push(MirOp::Binary(BinaryOp::Add), vec![index, start], dtype))
    }

    /// The buffer other kernels read `v` from: its input buffer, or the first buffer its root
    /// writes.
    fn stored_buf(&self, v: ValueId) -> Result<BufId, OptError> {
        match self.input_buf.get(&v) {
            Some(&buf) => Ok(buf),
            None => self
                .root_bufs
                .get(&v)
                .and_then(|b| b.first().copied())
                .ok_or(OptError::InvalidValue(v)),
        }
    }

    /// The value whose buffer holds `v` row-major: under `v`'s chain of reshapes, the first
    /// input, literal or stored value (`v` itself when there is none).
    fn buffer_under_reshapes(&self, v: ValueId) -> ValueId {
        let stored = |u: ValueId| self.input_buf.contains_key(&u) || self.plan.roots.contains_key(&u);
        let source = under_reshapes(self.plan.kernel, v, stored);
        if stored(source) { source } else { v }
    }

    /// An `iota` of type `ty` along `axis`, at every domain point.
    fn iota(&mut self, ty: &rfx_ir::TensorType, axis: usize, at: ValueId) -> Result<MirValue, OptError> {
        let unit: Vec<usize> = (0..ty.shape.rank()).map(|i| usize::from(i == axis)).collect();
        let layout = Layout {
            shape: &ty.shape,
            strides: &unit,
            offset: 0,
        };
        self.count(layout, ty.dtype, at)
    }

    /// The chain of transposes, slices and broadcasts ending at `v`, resolved down to what is
    /// under it (a root below `v` ends it: it is read stored).
    fn view(&self, v: ValueId) -> Result<View, OptError> {
        let kernel = self.plan.kernel;
        let mut chain = Vec::new();
        let mut base = v;
        while let Some(n) = kernel.node(base)
            && is_view(&n.op)
            && !(base != v && self.plan.roots.contains_key(&base))
        {
            chain.push(base);
            base = n.args.first().copied().ok_or(OptError::InvalidValue(base))?;
        }
        let base_node = kernel.node(base).ok_or(OptError::InvalidValue(base))?;
        // A reshape of a buffer reads it in place: its elements lie row-major there.
        let stored = self.buffer_under_reshapes(base);
        // Where element `idx` of the base sits: row-major in its buffer, or the index along an
        // `iota`'s axis.
        let iota = match &base_node.op {
            Op::Const(value) => return Ok(View::Splat(*value)),
            Op::Iota { axis } if !self.plan.roots.contains_key(&base) => Some(*axis),
            _ => None,
        };
        let mut strides: Vec<usize> = match iota {
            Some(axis) => (0..base_node.ty.shape.rank())
                .map(|i| usize::from(i == axis))
                .collect(),
            None => base_node.ty.shape.strides(),
        };
        let mut shape = base_node.ty.shape.clone();
        // The element (or index) at the chain's first point.
        let mut offset = 0usize;
        for &link in chain.iter().rev() {
            let n = kernel.node(link).ok_or(OptError::InvalidValue(link))?;
            strides = match &n.op {
                Op::Transpose { perm } => perm
                    .iter()
                    .map(|&a| strides.get(a).copied().ok_or(OptError::InvalidValue(link)))
                    .collect::<Result<_, _>>()?,
                Op::Slice { starts } => {
                    offset += starts.iter().zip(&strides).map(|(a, s)| a * s).sum::<usize>();
                    strides
                }
                _ => strides_in_domain(&shape, &strides, &n.ty.shape).ok_or(OptError::InvalidValue(link))?,
            };
            shape = n.ty.shape.clone();
        }
        Ok(match iota {
            Some(_) => View::Count { strides, offset },
            None => View::Buffer {
                buf: self.stored_buf(stored)?,
                len: base_node.ty.shape.numel(),
                strides,
                offset,
            },
        })
    }

    /// A chain of transposes and broadcasts ending at `v`, read from what is under it: a splat
    /// constant, an `iota` (an index with the chain's strides), or a buffer (with the chain's
    /// strides).
    fn transposed(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        let ty = &self.plan.kernel.node(v).ok_or(OptError::InvalidValue(v))?.ty;
        match self.view(v)? {
            View::Splat(value) => Ok(self.push(MirOp::Const(value), Vec::new(), ty.dtype)),
            View::Count { strides, offset } => {
                let layout = Layout {
                    shape: &ty.shape,
                    strides: &strides,
                    offset,
                };
                self.count(layout, ty.dtype, v)
            }
            View::Buffer {
                buf,
                len,
                strides,
                offset,
            } => {
                let layout = Layout {
                    shape: &ty.shape,
                    strides: &strides,
                    offset,
                };
                self.read(buf, len, layout, ty.dtype, v)
            }
        }
    }

    /// A `gather` at every domain point: its index computed here, clamped into the table's
    /// extent along `axis`, and the table's element there read from its buffer by a MIR
    /// `gather` (fusion stores a computed table). A whole one-axis table is read by the index
    /// itself (the MIR `gather` clamps into the buffer, truncating a float).
    fn gathered(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        use rfx_ir::DType;
        let kernel = self.plan.kernel;
        let node = kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let (Op::Gather { axis }, [table, index]) = (&node.op, node.args.as_slice()) else {
            return Err(OptError::InvalidValue(v));
        };
        let (axis, dtype) = (*axis, node.ty.dtype);
        let table_shape = &kernel
            .value_type(*table)
            .ok_or(OptError::InvalidValue(*table))?
            .shape;
        let extent = table_shape
            .dims()
            .get(axis)
            .copied()
            .ok_or(OptError::InvalidValue(v))?;
        if table_shape.numel() == 0 {
            // Another axis is empty, and so is the gather: no point reads the table.
            return Ok(self.push(MirOp::Const(rfx_ir::Scalar::zero(dtype)), Vec::new(), dtype));
        }
        let (buf, len, mut strides, offset) = match self.view(*table)? {
            View::Splat(value) => return Ok(self.push(MirOp::Const(value), Vec::new(), dtype)),
            View::Buffer {
                buf,
                len,
                strides,
                offset,
            } => (buf, len, strides, offset),
            // Fusion stores a table that is an `iota`.
            View::Count { .. } => return Err(OptError::InvalidValue(v)),
        };
        let index_dtype = kernel
            .value_type(*index)
            .ok_or(OptError::InvalidValue(*index))?
            .dtype;
        let mut at = self.value(*index)?;
        // The count's dtype: `f64` for a float index into an `f64` table (a kernel of `f64`
        // values then needs no `i32` lanes), `i32` otherwise (a float cast to it truncates
        // toward zero, saturates and maps NaN to 0, as the clamp below wants).
        let count = match (index_dtype, dtype) {
            (DType::F64, _) | (DType::F32, DType::F64) => DType::F64,
            _ => DType::I32,
        };
        if index_dtype != count {
            at = self.push(MirOp::Cast, vec![at], count);
        }
        let step = strides.get(axis).copied().ok_or(OptError::InvalidValue(v))?;
        let rest_zero = strides
            .iter()
            .zip(table_shape.dims())
            .enumerate()
            .all(|(d, (&s, &n))| d == axis || s == 0 || n == 1);
        if rest_zero && offset == 0 && (step == 1 || extent == 1) && len == extent {
            return Ok(self.push(MirOp::Gather { buf }, vec![at], dtype));
        }
        let constant = |e: &mut Self, n: usize| -> Result<MirValue, OptError> {
            let value = rfx_ir::semantics::index_value(n, count).ok_or(OptError::IndexRange(v))?;
            Ok(e.push(MirOp::Const(value), Vec::new(), count))
        };
        // `clamp(trunc(at), 0, extent - 1)`: in `f64`, `at >= 0` is false for NaN and the
        // negatives, and `floor` truncates the rest.
        let last = constant(self, extent - 1)?;
        let zero = constant(self, 0)?;
        let row = if count == DType::F64 {
            let floor = self.push(MirOp::Unary(rfx_ir::UnaryOp::Floor), vec![at], count);
            let low = self.push(MirOp::Binary(BinaryOp::Min), vec![floor, last], count);
            let positive = self.push(MirOp::Compare(rfx_ir::CmpOp::Ge), vec![at, zero], DType::Bool);
            self.push(MirOp::Select, vec![positive, low, zero], count)
        } else {
            let low = self.push(MirOp::Binary(BinaryOp::Min), vec![at, last], count);
            self.push(MirOp::Binary(BinaryOp::Max), vec![low, zero], count)
        };
        // The element at the point's other coordinates, plus the row's.
        if let Some(s) = strides.get_mut(axis) {
            *s = 0;
        }
        let layout = Layout {
            shape: &node.ty.shape,
            strides: &strides,
            offset,
        };
        let (strides, shifted) = self.place(layout, v)?;
        let base = match count {
            DType::F64 => self.index_in(count, strides, shifted, v)?,
            _ => self.index_i32(strides, shifted, v)?,
        };
        let row = match step {
            0 => None,
            1 => Some(row),
            s => {
                let s = constant(self, s)?;
                Some(self.push(MirOp::Binary(BinaryOp::Mul), vec![row, s], count))
            }
        };
        let flat = match row {
            Some(row) => self.push(MirOp::Binary(BinaryOp::Add), vec![base, row], count),
            None => base,
        };
        Ok(self.push(MirOp::Gather { buf }, vec![flat], dtype))
    }

    /// A `pad` at every domain point: its operand where the point lies inside the operand's
    /// window, zero elsewhere. The operand is computed in this kernel at the pad's point less
    /// `low` (in a frame), or read there by clamped index from its buffer.
    fn padded(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        let kernel = self.plan.kernel;
        let node = kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let (Op::Pad { low }, Some(&operand)) = (&node.op, node.args.first()) else {
            return Err(OptError::InvalidValue(v));
        };
        let ty = &node.ty;
        let inner = kernel
            .value_type(operand)
            .ok_or(OptError::InvalidValue(operand))?
            .shape
            .clone();
        let zero = self.push(MirOp::Const(rfx_ir::Scalar::zero(ty.dtype)), Vec::new(), ty.dtype);
        if inner.numel() == 0 {
            return Ok(zero);
        }
        // Inside the window along every axis the operand does not fill.
        let mut inside = None;
        for (axis, ((&lo, &n), &p)) in low.iter().zip(inner.dims()).zip(ty.shape.dims()).enumerate() {
            if n == p {
                continue;
            }
            let unit: Vec<usize> = (0..ty.shape.rank()).map(|i| usize::from(i == axis)).collect();
            let layout = Layout {
                shape: &ty.shape,
                strides: &unit,
                offset: 0,
            };
            let (strides, offset) = self.place(layout, v)?;
            // Counted in `f64` for an `f64` pad (`index_in` keeps it exact): a kernel of `f64`
            // values then needs no `i32` lanes, which would keep it from running in vectors on
            // the CPU (four `i32` lanes against two `f64`). In `i32` otherwise.
            let count = match ty.dtype {
                rfx_ir::DType::F64 => rfx_ir::DType::F64,
                _ => rfx_ir::DType::I32,
            };
            let at = self.index_in(count, strides, offset, v)?;
            let mut bounds = Vec::new();
            if lo > 0 {
                bounds.push((rfx_ir::CmpOp::Ge, lo));
            }
            if lo + n < p {
                bounds.push((rfx_ir::CmpOp::Lt, lo + n));
            }
            for (cmp, bound) in bounds {
                let bound = rfx_ir::semantics::index_value(bound, count).ok_or(OptError::IndexRange(v))?;
                let bound = self.push(MirOp::Const(bound), Vec::new(), count);
                let test = self.push(MirOp::Compare(cmp), vec![at, bound], rfx_ir::DType::Bool);
                inside = Some(match inside {
                    None => test,
                    Some(acc) => {
                        self.push(MirOp::Binary(BinaryOp::And), vec![acc, test], rfx_ir::DType::Bool)
                    }
                });
            }
        }
        // The operand at the pad's points less `low`; its values computed at this kernel's
        // own points do not hold there.
        let shift = low
            .iter()
            .map(|&l| i64::try_from(l).map_err(|_| OptError::IndexRange(v)))
            .collect::<Result<_, _>>()?;
        let value = self.in_frame(
            Frame {
                inner,
                outer: ty.shape.clone(),
                shift,
                exact: false,
                regroup: false,
            },
            operand,
        )?;
        Ok(match inside {
            Some(inside) => self.push(MirOp::Select, vec![inside, value, zero], ty.dtype),
            None => value,
        })
    }

    /// A slice of a value this kernel computes: the value computed at the slice's point plus
    /// `starts`.
    fn sliced(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        let kernel = self.plan.kernel;
        let node = kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let (Op::Slice { starts }, Some(&operand)) = (&node.op, node.args.first()) else {
            return Err(OptError::InvalidValue(v));
        };
        let inner = kernel
            .value_type(operand)
            .ok_or(OptError::InvalidValue(operand))?
            .shape
            .clone();
        let shift = starts
            .iter()
            .map(|&s| i64::try_from(s).map(|s| -s).map_err(|_| OptError::IndexRange(v)))
            .collect::<Result<_, _>>()?;
        self.in_frame(
            Frame {
                inner,
                outer: node.ty.shape.clone(),
                shift,
                exact: true,
                regroup: false,
            },
            operand,
        )
    }

    /// A reduction combining a few elements per result element (see [`unrolled_reductions`]),
    /// at every domain point: its operand computed at each of the result element's reduced
    /// points (a frame each, as a slice's window), combined in row-major order of those points
    /// as the reference interpreter combines them.
    fn unrolled(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        use rfx_ir::ReduceOp;
        let kernel = self.plan.kernel;
        let node = kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let (Op::Reduce { op, axes, .. }, Some(&operand), Some(extents)) =
            (&node.op, node.args.first(), self.plan.unrolled.get(&v))
        else {
            return Err(OptError::InvalidValue(v));
        };
        let inner = &kernel
            .value_type(operand)
            .ok_or(OptError::InvalidValue(operand))?
            .shape;
        // The operand with the reduced axes kept as one: the result with `keepdims`.
        let mut kept_dims = inner.dims().to_vec();
        for &axis in axes {
            *kept_dims.get_mut(axis).ok_or(OptError::InvalidValue(v))? = 1;
        }
        let kept = Shape::new(kept_dims);
        let combine = match op {
            ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        let dtype = node.ty.dtype;
        let count: usize = extents.iter().product();
        let windows = |e: &mut Self| -> Result<MirValue, OptError> {
            let mut acc = None;
            for flat in 0..count {
                // The reduced point's coordinates, row-major (the last reduced axis fastest).
                let mut shift = vec![0i64; inner.rank()];
                let mut rest = flat;
                for (&axis, &extent) in axes.iter().zip(extents).rev() {
                    let at = i64::try_from(rest % extent).map_err(|_| OptError::IndexRange(v))?;
                    *shift.get_mut(axis).ok_or(OptError::InvalidValue(v))? = -at;
                    rest /= extent;
                }
                let frame = Frame {
                    inner: inner.clone(),
                    outer: kept.clone(),
                    shift,
                    exact: true,
                    regroup: false,
                };
                let x = e.in_frame(frame, operand)?;
                acc = Some(match acc {
                    None => x,
                    Some(a) => e.push(MirOp::Binary(combine), vec![a, x], dtype),
                });
            }
            acc.ok_or(OptError::InvalidValue(v))
        };
        let mut acc = if kept == node.ty.shape {
            windows(self)?
        } else {
            // Without `keepdims` the reduced axes are removed: the result's point with axes of
            // one inserted.
            let regroup = Frame {
                inner: kept.clone(),
                outer: node.ty.shape.clone(),
                shift: Vec::new(),
                exact: true,
                regroup: true,
            };
            self.within(regroup, windows)?
        };
        if *op == ReduceOp::Mean {
            let count = rfx_ir::Scalar::from_f64(dtype, count as f64);
            let count = self.push(MirOp::Const(count), Vec::new(), dtype);
            acc = self.push(MirOp::Binary(BinaryOp::Div), vec![acc, count], dtype);
        }
        Ok(acc)
    }

    /// `operand` computed at the points `frame` maps this kernel's points to. Its values
    /// computed at the frame's own points do not hold there, so the frame has its own memo.
    fn in_frame(&mut self, frame: Frame, operand: ValueId) -> Result<MirValue, OptError> {
        self.within(frame, |e| e.value(operand))
    }

    /// What `compute` gives inside `frame`, with the frame's own memo.
    fn within(
        &mut self,
        frame: Frame,
        compute: impl FnOnce(&mut Self) -> Result<MirValue, OptError>,
    ) -> Result<MirValue, OptError> {
        self.frames.push(frame);
        let outside = std::mem::take(&mut self.memo);
        let value = compute(self);
        self.memo = outside;
        self.frames.pop();
        value
    }

    /// The value of `v` at every domain point: loaded when it lives in a buffer this kernel
    /// does not write, computed otherwise.
    ///
    /// The operands that `v`'s computation reads in this frame are made first, by an explicit
    /// post-order walk (operands left to right, as a recursive evaluation would, so the body
    /// is the same), so that a chain of any length costs no native stack: `compute` then finds
    /// every operand in the memo. Only a new frame (a pad, a slice or reshape computed in
    /// place, an unrolled reduction, a gather's index) recurses, once per nested frame.
    fn value(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        if let Some(&m) = self.memo.get(&v) {
            return Ok(m);
        }
        let mut stack = vec![(v, false)];
        while let Some((u, expanded)) = stack.pop() {
            if self.memo.contains_key(&u) {
                continue;
            }
            let node = self.plan.kernel.node(u).ok_or(OptError::InvalidValue(u))?;
            if !expanded && self.computes_in_frame(u, &node.op) {
                stack.push((u, true));
                stack.extend(node.args.iter().rev().map(|&a| (a, false)));
                continue;
            }
            if !expanded && let Some(index) = self.gather_index_first(u, node) {
                stack.push((u, true));
                stack.push((index, false));
                continue;
            }
            self.value_here(u)?;
        }
        self.memo.get(&v).copied().ok_or(OptError::InvalidValue(v))
    }

    /// Whether `value_here(v)` computes `v` from operands read in this frame (its operands'
    /// `value`s and nothing else), so they can be made before it.
    fn computes_in_frame(&self, v: ValueId, op: &Op) -> bool {
        let plain = matches!(
            op,
            Op::Unary(_)
                | Op::Binary(_)
                | Op::Compare(_)
                | Op::Select
                | Op::Clamp
                | Op::Cast
                | Op::BroadcastTo
                | Op::Scan { .. }
        );
        plain && !self.input_buf.contains_key(&v) && !self.reads_stored(v)
    }

    /// The index operand of the gather `v` when `gathered` computes it (a chain of lookups,
    /// each indexed by the one before, is then made iteratively too).
    fn gather_index_first(&self, v: ValueId, node: &rfx_ir::hir::Node) -> Option<ValueId> {
        let (Op::Gather { .. }, [table, index]) = (&node.op, node.args.as_slice()) else {
            return None;
        };
        if self.input_buf.contains_key(&v) || self.reads_stored(v) {
            return None;
        }
        let table_elems = self.plan.kernel.value_type(*table)?.shape.numel();
        match self.view(*table) {
            Ok(View::Buffer { .. }) if table_elems > 0 => Some(*index),
            _ => None,
        }
    }

    /// Whether `v` is a root this kernel reads from its buffer.
    fn reads_stored(&self, v: ValueId) -> bool {
        self.plan.roots.contains_key(&v)
            && (self.plan.group_of.get(&v) != Some(&self.group)
                || self.plan.is_reduce(v)
                || !self.frames.is_empty())
    }

    /// [`Self::value`] of `v` alone: its operands are either in the memo already or made here
    /// recursively.
    fn value_here(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        if let Some(&m) = self.memo.get(&v) {
            return Ok(m);
        }
        let node = self.plan.kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let result = if let Some(&buf) = self.input_buf.get(&v) {
            self.load(buf, &node.ty.shape, node.ty.dtype, v)?
        } else if let Op::Const(value) = node.op {
            self.push(MirOp::Const(value), Vec::new(), node.ty.dtype)
        } else if let (Op::Iota { axis }, false) = (&node.op, self.plan.roots.contains_key(&v)) {
            self.iota(&node.ty, *axis, v)?
        } else if self.reads_stored(v) {
            let buf = self.stored_buf(v)?;
            self.load(buf, &node.ty.shape, node.ty.dtype, v)?
        } else {
            return self.compute(v);
        };
        self.memo.insert(v, result);
        Ok(result)
    }

    /// Computes `v` in this kernel from its operands.
    fn compute(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        if let Some(&m) = self.memo.get(&v) {
            return Ok(m);
        }
        let node = self.plan.kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        let dtype = node.ty.dtype;
        let operand = |i: usize| node.args.get(i).copied().ok_or(OptError::InvalidValue(v));
        let result = match &node.op {
            Op::Input { .. } | Op::Const(_) | Op::Literal(_) => return self.value_here(v),
            Op::Iota { axis } => self.iota(&node.ty, *axis, v)?,
            Op::Slice { .. } if self.plan.slice_in_frame(v) => self.sliced(v)?,
            Op::Transpose { .. } | Op::Slice { .. } => self.transposed(v)?,
            Op::Pad { .. } => self.padded(v)?,
            Op::Gather { .. } => self.gathered(v)?,
            Op::Unary(op) => {
                let x = self.value(operand(0)?)?;
                self.push(MirOp::Unary(*op), vec![x], dtype)
            }
            Op::Binary(op) => {
                let (a, b) = (self.value(operand(0)?)?, self.value(operand(1)?)?);
                self.push(MirOp::Binary(*op), vec![a, b], dtype)
            }
            Op::Compare(op) => {
                let (a, b) = (self.value(operand(0)?)?, self.value(operand(1)?)?);
                self.push(MirOp::Compare(*op), vec![a, b], dtype)
            }
            Op::Select => {
                let c = self.value(operand(0)?)?;
                let (a, b) = (self.value(operand(1)?)?, self.value(operand(2)?)?);
                self.push(MirOp::Select, vec![c, a, b], dtype)
            }
            // `clamp` is `min(max(x, lo), hi)` by definition; `decompose` normally removed it.
            Op::Clamp => {
                let x = self.value(operand(0)?)?;
                let (lo, hi) = (self.value(operand(1)?)?, self.value(operand(2)?)?);
                let lower = self.push(MirOp::Binary(BinaryOp::Max), vec![x, lo], dtype);
                self.push(MirOp::Binary(BinaryOp::Min), vec![lower, hi], dtype)
            }
            Op::Cast => {
                let x = self.value(operand(0)?)?;
                self.push(MirOp::Cast, vec![x], dtype)
            }
            Op::BroadcastTo => self.value(operand(0)?)?,
            Op::Reshape => {
                let source = operand(0)?;
                let src_node = self
                    .plan
                    .kernel
                    .node(source)
                    .ok_or(OptError::InvalidValue(source))?;
                let stored = self.buffer_under_reshapes(source);
                if let Op::Const(value) = src_node.op {
                    self.push(MirOp::Const(value), Vec::new(), dtype)
                } else if !self.input_buf.contains_key(&stored) && !self.plan.roots.contains_key(&stored) {
                    // Only axes of one move (fusion stores the operand of any other reshape):
                    // the operand computed at this point with them dropped or added.
                    let inner = src_node.ty.shape.clone();
                    let frame = Frame {
                        shift: Vec::new(),
                        inner,
                        outer: node.ty.shape.clone(),
                        exact: true,
                        regroup: true,
                    };
                    self.in_frame(frame, source)?
                } else {
                    let buf = self.stored_buf(stored)?;
                    self.load(buf, &node.ty.shape, dtype, v)?
                }
            }
            Op::Reduce { .. } => self.unrolled(v)?,
            // Only a scan's own kernel computes it, at its own points (fusion makes every scan a
            // root, read stored elsewhere): its axis is one of the domain's.
            &Op::Scan { op, axis, reverse } => {
                let mut args = vec![self.value(operand(0)?)?];
                if op.arity() > 1 {
                    args.push(self.value(operand(1)?)?);
                }
                self.push(MirOp::Scan { op, axis, reverse }, args, dtype)
            }
        };
        self.memo.insert(v, result);
        Ok(result)
    }
}
