//! Which values get stored: the roots of a fused kernel (outputs, reductions, scans, operands
//! of reshapes, transposes and gathers that must lie in a buffer, values shared between
//! kernels, values dearer to compute in place than to load), grouped into loop nests by
//! iteration space ([`Plan`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rfx_ir::Shape;
use rfx_ir::hir::{Kernel, Op, ValueId};

use crate::error::OptError;
use crate::report::MissReason;
use crate::saturate::op_cost;

/// What a root's kernel must do besides elementwise work: a kernel reduces, or runs one axis
/// in order for its scans (all along that axis, one way), never both; elementwise roots join
/// either.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum LoopKind {
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
pub(super) enum Dep {
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

pub(super) struct Plan<'k> {
    pub(super) kernel: &'k Kernel,
    pub(super) live: Vec<bool>,
    pub(super) roots: BTreeMap<ValueId, Option<MissReason>>,
    /// The `pad`s placing the parts of split outputs, with the output and region each part is
    /// stored at ([`super::regions`]): roots computed at their operand's points, with no buffer
    /// of their own.
    pub(super) regions: BTreeMap<ValueId, (ValueId, rfx_ir::mir::Region)>,
    /// The roots whose buffers those parts fill, with the `pad`s placing their parts: no kernel
    /// computes them, and their readers run after their parts are stored.
    pub(super) split_wholes: BTreeMap<ValueId, Vec<ValueId>>,
    /// Their constant parts, stored first by kernels that read nothing.
    pub(super) fills: Vec<super::regions::Fill>,
    /// Each loop nest: its iteration space and its roots. A root's own iteration space may
    /// differ from its group's by axes of one ([`same_points`]); the emitter computes it in a
    /// frame that inserts or removes them.
    pub(super) groups: Vec<(Shape, Vec<ValueId>)>,
    /// What each group's loop nest must do besides elementwise work ([`LoopKind`]).
    pub(super) group_kinds: Vec<LoopKind>,
    /// Whether a group's iteration space is fixed: one of its roots reduces, scans or stores a
    /// part at a region, whose axes or region are those of its own iteration space.
    pub(super) group_fixed: Vec<bool>,
    pub(super) group_of: HashMap<ValueId, usize>,
    /// The reductions computed where they are read, with the extents of their reduced axes
    /// ([`unrolled_reductions`]).
    pub(super) unrolled: HashMap<ValueId, Vec<usize>>,
}

/// A value computed by an op (not an input, not a constant).
pub(super) fn is_computed(kernel: &Kernel, value: ValueId) -> bool {
    kernel
        .node(value)
        .is_some_and(|n| !matches!(n.op, Op::Input { .. } | Op::Const(_) | Op::Literal(_)))
}

/// A value no kernel stores unless it is an output: an input, a constant, a literal or an
/// `iota`.
/// The most a value of constants and indices may cost per point (in `op_cost` units) to be
/// recomputed wherever it is needed rather than stored (`Plan::index_only`).
const INDEX_ONLY_MAX_COST: f64 = 4.0;

pub(super) fn is_leaf(op: &Op) -> bool {
    matches!(
        op,
        Op::Input { .. } | Op::Const(_) | Op::Literal(_) | Op::Iota { .. }
    )
}

/// The most a one-element value may cost (in `op_cost` units: an `f32` add is 1, an `f32`
/// transcendental 20) to be computed in each kernel that reads it rather than stored by a
/// kernel of its own ([`Plan::cheap_scalar`]). Lowering computes such a value once per call of
/// each reader, in its preamble; a GPU computes a preamble once per thread, so a dear chain of
/// scalar work is still stored once.
const SCALAR_RECOMPUTE_COST: f64 = 64.0;

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
pub(super) fn unrolled_reductions(kernel: &Kernel, live: &[bool]) -> HashMap<ValueId, Vec<usize>> {
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
pub(super) fn under_reshapes(kernel: &Kernel, mut value: ValueId, stop: impl Fn(ValueId) -> bool) -> ValueId {
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
pub(super) fn reshapes_a_buffer(kernel: &Kernel, value: ValueId) -> bool {
    let source = under_reshapes(kernel, value, |_| false);
    kernel
        .node(source)
        .is_some_and(|n| matches!(n.op, Op::Input { .. } | Op::Literal(_)))
}

/// The value under the chain of slices ending at `value` when it is computed by an op other
/// than a transpose or a broadcast (`None` otherwise, or when `value` is no slice): such a slice
/// is computed in its consumer's kernel, from its operand computed at the window's points.
pub(super) fn slice_base(kernel: &Kernel, value: ValueId) -> Option<ValueId> {
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
pub(super) fn transpose_base(kernel: &Kernel, mut value: ValueId) -> ValueId {
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
pub(super) fn only_unit_axes_move(from: &Shape, to: &Shape) -> bool {
    from.dims()
        .iter()
        .filter(|&&d| d != 1)
        .eq(to.dims().iter().filter(|&&d| d != 1))
}

/// Whether iteration spaces `a` and `b` have the same points in the same row-major order: they
/// differ only by axes of one ([`only_unit_axes_move`]), so point `p` of one is the element of
/// the same row-major index in the other, and a loop nest over either computes a value of the
/// other's shape at its own points through a frame that drops or inserts those axes.
pub(super) fn same_points(a: &Shape, b: &Shape) -> bool {
    a == b || only_unit_axes_move(a, b)
}

/// The strides over `outer` of a value whose strides over `inner` are `strides`, where `outer`
/// is `inner` with axes of one inserted or removed (see [`only_unit_axes_move`]): the other
/// axes keep their strides, an axis of one gets 0.
pub(super) fn regrouped(inner: &Shape, strides: &[usize], outer: &Shape) -> Option<Vec<usize>> {
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
pub(super) fn strides_in_domain(shape: &Shape, strides: &[usize], domain: &Shape) -> Option<Vec<usize>> {
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

/// Where a value met in [`Plan::walk`] is read, relative to the root's point.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Reach {
    /// At the root's point, through elementwise ops.
    Point,
    /// At the point with axes of one inserted or removed (through reshapes that only move
    /// those): the same row-major element where the value has as many elements as the root.
    Regrouped,
    /// At other points (through a buffer read: a window, a gather's table, a reduction).
    Elsewhere,
}

impl Reach {
    /// Where operand `arg` of `node` is read when `node` is read here.
    fn through(self, kernel: &Kernel, node: &rfx_ir::hir::Node, arg: usize) -> Reach {
        if self == Reach::Elsewhere || !reads_buffer(&node.op, arg) {
            return self;
        }
        let unit_reshape = matches!(node.op, Op::Reshape)
            && node
                .args
                .get(arg)
                .and_then(|&a| kernel.value_type(a))
                .is_some_and(|t| only_unit_axes_move(&t.shape, &node.ty.shape));
        if unit_reshape {
            Reach::Regrouped
        } else {
            Reach::Elsewhere
        }
    }
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
pub(super) fn is_view(op: &Op) -> bool {
    matches!(op, Op::Transpose { .. } | Op::Slice { .. } | Op::BroadcastTo)
}

impl Plan<'_> {
    pub(super) fn op(&self, v: ValueId) -> Option<&Op> {
        self.kernel.node(v).map(|n| &n.op)
    }

    pub(super) fn shape(&self, v: ValueId) -> Shape {
        self.kernel
            .value_type(v)
            .map(|t| t.shape.clone())
            .unwrap_or_default()
    }

    /// The iteration space a root's kernel runs over.
    pub(super) fn domain(&self, root: ValueId) -> Shape {
        if let Some(part) = self.placed_part(root) {
            return self.shape(part);
        }
        match (self.op(root), self.kernel.node(root)) {
            (Some(Op::Reduce { .. }), Some(node)) if self.is_reduce(root) => {
                node.args.first().map(|&a| self.shape(a)).unwrap_or_default()
            }
            _ => self.shape(root),
        }
    }

    /// The part a root placing a part of a split output stores (the `pad`'s operand).
    pub(super) fn placed_part(&self, root: ValueId) -> Option<ValueId> {
        if !self.regions.contains_key(&root) {
            return None;
        }
        self.kernel.node(root).and_then(|n| n.args.first().copied())
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
    pub(super) fn is_reduce(&self, v: ValueId) -> bool {
        matches!(self.op(v), Some(Op::Reduce { .. })) && !self.unrolled.contains_key(&v)
    }

    /// The values a root's kernel computes for it, and the roots it reads with their kind.
    /// The walk stops at roots, inputs and constants.
    pub(super) fn walk(&self, root: ValueId) -> (Vec<ValueId>, Vec<(ValueId, Dep)>) {
        let domain = self.domain(root);
        if let Some(pads) = self.split_wholes.get(&root) {
            return (Vec::new(), pads.iter().map(|&p| (p, Dep::Hard)).collect());
        }
        let start: Vec<(ValueId, Reach)> = match self.kernel.node(root) {
            _ if self.placed_part(root).is_some() => self
                .placed_part(root)
                .map(|p| (p, Reach::Point))
                .into_iter()
                .collect(),
            Some(node) if self.is_reduce(root) => node.args.iter().map(|&a| (a, Reach::Point)).collect(),
            Some(node) if is_leaf(&node.op) => Vec::new(),
            Some(node) => node
                .args
                .iter()
                .enumerate()
                .map(|(i, &a)| (a, Reach::Point.through(self.kernel, node, i)))
                .collect(),
            None => Vec::new(),
        };
        let mut stack = start;
        let mut seen = BTreeSet::new();
        let mut computed = Vec::new();
        let mut deps = Vec::new();
        while let Some((v, reach)) = stack.pop() {
            if !seen.insert((v, reach)) {
                continue;
            }
            if self.roots.contains_key(&v) {
                // A root read at the same points (under unit-axis reshapes at most) can be
                // computed in the same loop nest, over either's iteration space.
                let soft = reach != Reach::Elsewhere
                    && !self.is_reduce(v)
                    && !self.split_wholes.contains_key(&v)
                    && is_computed(self.kernel, v)
                    && same_points(&self.domain(v), &domain);
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
                    .map(|(i, &a)| (a, reach.through(self.kernel, node, i))),
            );
        }
        computed.sort();
        computed.dedup();
        (computed, deps)
    }

    /// Assigns roots (in definition order) to kernels: the earliest kernel over the same points
    /// ([`same_points`]), whose loop nest can also do what the root needs ([`LoopKind`]), that
    /// runs after everything the root needs complete. A kernel runs over its first root's
    /// iteration space, or that of a root that fixes it (a reduction's, a scan's, a placed
    /// part's: their axes and regions are those of their own), which then admits no other.
    pub(super) fn group_roots(&mut self) {
        self.groups.clear();
        self.group_kinds.clear();
        self.group_fixed.clear();
        self.group_of.clear();
        let roots: Vec<ValueId> = self.roots.keys().copied().collect();
        for root in roots {
            let domain = self.domain(root);
            let kind = self.loop_kind(root);
            let fixes = kind != LoopKind::Elementwise || self.placed_part(root).is_some();
            let (_, deps) = self.walk(root);
            let mut earliest = 0;
            for (dep, kind) in deps {
                if let Some(&g) = self.group_of.get(&dep) {
                    earliest = earliest.max(if kind == Dep::Hard { g + 1 } else { g });
                }
            }
            let fits = |g: usize| {
                let group = &self.groups[g].0;
                let space =
                    *group == domain || (same_points(group, &domain) && !(fixes && self.group_fixed[g]));
                space && self.group_kinds[g].join(kind).is_some()
            };
            let g = match (earliest..self.groups.len()).find(|&g| fits(g)) {
                Some(g) => g,
                None => {
                    self.groups.push((domain.clone(), Vec::new()));
                    self.group_kinds.push(LoopKind::Elementwise);
                    self.group_fixed.push(false);
                    self.groups.len() - 1
                }
            };
            if let Some(joined) = self.group_kinds[g].join(kind) {
                self.group_kinds[g] = joined;
            }
            if fixes {
                self.groups[g].0 = domain;
                self.group_fixed[g] = true;
            }
            self.groups[g].1.push(root);
            self.group_of.insert(root, g);
        }
    }

    /// Materialises values needed by several kernels, or too expensive to recompute at every
    /// point of a larger iteration space. Returns whether anything changed.
    pub(super) fn materialise_shared(&mut self) -> Result<bool, OptError> {
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
                if self.index_only(v) || self.plain_view(v) || self.cheap_scalar(v) {
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
            if small && widens && !self.cheap_scalar(v) && self.recompute_cost(v) >= 4.0 {
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

    /// Whether `v` is one element computed at no more than [`SCALAR_RECOMPUTE_COST`]: in a
    /// kernel of any shape, each of its loads reads the same element at every point, so lowering
    /// computes it once per call in the kernel's preamble (a loop-invariant value), which costs
    /// less than a kernel of its own that stores it and a load of it in each reader.
    fn cheap_scalar(&self, v: ValueId) -> bool {
        self.kernel.node(v).is_some_and(|n| n.ty.shape.numel() == 1)
            && self.recompute_cost(v) <= SCALAR_RECOMPUTE_COST
    }

    /// Stops storing the values stored for their consumers' sake (shared, or small and dear
    /// when they were chosen) that turned out to be plain views of stored values
    /// ([`Plan::plain_view`]); a later round may have stored what made them dear. Returns
    /// whether any was dropped.
    pub(super) fn drop_stored_views(&mut self) -> bool {
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
    pub(super) fn store_dear_window_operands(&mut self) {
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
    pub(super) fn slice_in_frame(&self, v: ValueId) -> bool {
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
    pub(super) fn consumer_counts(&self) -> Vec<usize> {
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
    pub(super) fn bound_frame_nesting(&mut self) {
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
}
