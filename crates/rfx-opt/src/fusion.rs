//! Fusion: partitioning an optimised HIR kernel into MIR kernels.
//!
//! Design (argued in ARCHITECTURE.md): fusion is a partition of the extracted HIR DAG, not an
//! e-graph rewrite. A value is *materialised* (given a buffer) only when it must be: a kernel
//! output, a reduction result (it is complete only after its kernel), the operand of a
//! `reshape` or `transpose` of a computed value (both are index maps over a row-major buffer:
//! a transpose of an input or a stored value is a load with permuted strides), a value
//! needed by more than one kernel (materialised once, never recomputed), or a value of a
//! quarter or less of its kernel's iteration space whose computation there (one dear op, or a
//! chain of cheap ones) costs more per point than a load. Every other value is computed inside the kernel of the materialised values
//! (*roots*) that use it. Roots with the same iteration space are merged into one kernel when
//! their dependencies allow, so outputs that share inputs and intermediate values come out of one
//! loop; a reduction of a value computed in a kernel is that kernel's epilogue. Broadcasts never
//! copy: a value of shape `S` read in a kernel of domain `D` is loaded with the broadcast strides
//! of `S` in `D`, and since elementwise ops commute with broadcasting, in-kernel values of a
//! smaller shape are simply computed at every point. An `iota` is never stored: it is an `index`
//! instruction with the broadcast (and permuted) strides of its axis.

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

/// How a root relates to the roots it reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dep {
    /// Its value can be shared inside one kernel.
    Soft,
    /// Its buffer must be complete first (a reduction, another iteration space, a reshape).
    Hard,
}

struct Plan<'k> {
    kernel: &'k Kernel,
    live: Vec<bool>,
    roots: BTreeMap<ValueId, Option<MissReason>>,
    groups: Vec<(Shape, Vec<ValueId>)>,
    group_of: HashMap<ValueId, usize>,
}

/// Partitions `kernel` (verified, ideally simplified) into a MIR program.
pub(crate) fn fuse(kernel: &Kernel) -> Result<FusionOutcome, OptError> {
    verify(kernel).map_err(OptError::InvalidKernel)?;
    let live = crate::passes::live_values(kernel);
    let mut roots: BTreeMap<ValueId, Option<MissReason>> = BTreeMap::new();
    for output in kernel.outputs() {
        roots.insert(output.value, None);
    }
    for (index, node) in kernel.nodes().iter().enumerate() {
        if !live[index] {
            continue;
        }
        match &node.op {
            Op::Reduce { .. } => {
                roots
                    .entry(ValueId::new(index))
                    .or_insert(Some(MissReason::Reduction));
            }
            Op::Reshape => {
                if let Some(&operand) = node.args.first()
                    && is_computed(kernel, operand)
                {
                    roots.entry(operand).or_insert(Some(MissReason::Reshape));
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
            // A pad reads its operand by clamped index from a buffer: an input, a literal or a
            // stored value (a splat needs none).
            Op::Pad { .. } => {
                if let Some(&operand) = node.args.first()
                    && kernel
                        .node(operand)
                        .is_some_and(|n| !matches!(n.op, Op::Input { .. } | Op::Literal(_) | Op::Const(_)))
                {
                    roots.entry(operand).or_insert(Some(MissReason::Pad));
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
        group_of: HashMap::new(),
    };
    // Each round either finishes or materialises at least one more value, so this ends after
    // at most one round per node.
    for _ in 0..=kernel.nodes().len() {
        plan.group_roots();
        if !plan.materialise_shared()? {
            break;
        }
    }
    let program = plan.emit()?;
    let missed = plan
        .roots
        .iter()
        .filter_map(|(&v, reason)| reason.map(|r| (v, r)))
        .filter(|(v, _)| plan.has_consumers(*v))
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
fn is_leaf(op: &Op) -> bool {
    matches!(
        op,
        Op::Input { .. } | Op::Const(_) | Op::Literal(_) | Op::Iota { .. }
    )
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

/// `true` for the ops that read their operand's buffer through an index map of their own
/// (the operand must be complete before their kernel runs).
fn reads_buffer(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape | Op::Transpose { .. } | Op::Slice { .. } | Op::Pad { .. }
    )
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
            (Some(Op::Reduce { .. }), Some(node)) => {
                node.args.first().map(|&a| self.shape(a)).unwrap_or_default()
            }
            _ => self.shape(root),
        }
    }

    fn is_reduce(&self, v: ValueId) -> bool {
        matches!(self.op(v), Some(Op::Reduce { .. }))
    }

    /// The values a root's kernel computes for it, and the roots it reads with their kind.
    /// The walk stops at roots, inputs and constants.
    fn walk(&self, root: ValueId) -> (Vec<ValueId>, Vec<(ValueId, Dep)>) {
        let domain = self.domain(root);
        let start: Vec<(ValueId, bool)> = match self.kernel.node(root) {
            Some(node) if self.is_reduce(root) => node.args.iter().map(|&a| (a, false)).collect(),
            Some(node) if is_leaf(&node.op) => Vec::new(),
            Some(node) => node.args.iter().map(|&a| (a, reads_buffer(&node.op))).collect(),
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
            // A broadcast under a transpose is part of the transposed read.
            let reshape = reads_buffer(&node.op) || (through_reshape && matches!(node.op, Op::BroadcastTo));
            stack.extend(node.args.iter().map(|&a| (a, reshape)));
        }
        computed.sort();
        computed.dedup();
        (computed, deps)
    }

    /// Assigns roots (in definition order) to kernels: the earliest kernel with the same
    /// iteration space that runs after everything the root needs complete.
    fn group_roots(&mut self) {
        self.groups.clear();
        self.group_of.clear();
        let roots: Vec<ValueId> = self.roots.keys().copied().collect();
        for root in roots {
            let domain = self.domain(root);
            let (_, deps) = self.walk(root);
            let mut earliest = 0;
            for (dep, kind) in deps {
                if let Some(&g) = self.group_of.get(&dep) {
                    earliest = earliest.max(if kind == Dep::Hard { g + 1 } else { g });
                }
            }
            let found = (earliest..self.groups.len()).find(|&g| self.groups[g].0 == domain);
            let g = match found {
                Some(g) => g,
                None => {
                    self.groups.push((domain, Vec::new()));
                    self.groups.len() - 1
                }
            };
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
        let consumed_by_shared = |v: ValueId| {
            shared
                .iter()
                .any(|&s| self.kernel.node(s).is_some_and(|n| n.args.contains(&v)))
        };
        let mut changed = false;
        for (v, groups) in users {
            if groups.len() > 1 {
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
            let small = node.ty.shape.numel().saturating_mul(4) <= domain.numel();
            let widens = widest_consumer
                .get(v.index())
                .is_some_and(|&n| n > node.ty.shape.numel());
            if small && widens && self.recompute_cost(v) >= 4.0 {
                self.roots.insert(v, Some(MissReason::Shape));
                changed = true;
            }
        }
        Ok(changed)
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
                _ => 1.0,
            };
            stack.extend(node.args.iter().copied());
        }
        cost
    }

    fn has_consumers(&self, v: ValueId) -> bool {
        self.kernel
            .nodes()
            .iter()
            .enumerate()
            .any(|(i, n)| self.live[i] && n.args.contains(&v))
    }

    /// Writes the MIR program: buffers for inputs, outputs and temporaries, one kernel per group.
    fn emit(&self) -> Result<MirProgram, OptError> {
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
            };
            let mut stores = Vec::new();
            let mut reductions = Vec::new();
            for &root in roots {
                let bufs = root_bufs.get(&root).ok_or(OptError::InvalidValue(root))?;
                match self.op(root) {
                    Some(Op::Reduce { op, axes, .. }) => {
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
        Ok(MirProgram::from_parts(kernel.name(), buffers, kernels))
    }
}

struct KernelEmitter<'p, 'k> {
    plan: &'p Plan<'k>,
    group: usize,
    domain: &'p Shape,
    input_buf: &'p HashMap<ValueId, BufId>,
    root_bufs: &'p BTreeMap<ValueId, Vec<BufId>>,
    body: Vec<MirInst>,
    memo: HashMap<ValueId, MirValue>,
}

impl KernelEmitter<'_, '_> {
    fn push(&mut self, op: MirOp, args: Vec<MirValue>, dtype: rfx_ir::DType) -> MirValue {
        self.body.push(MirInst { op, args, dtype });
        MirValue::new(self.body.len() - 1)
    }

    /// A load of `buf`, read as a row-major array of `shape`, at every point of the domain.
    fn load(
        &mut self,
        buf: BufId,
        shape: &Shape,
        dtype: rfx_ir::DType,
        at: ValueId,
    ) -> Result<MirValue, OptError> {
        let strides = shape
            .broadcast_strides(self.domain)
            .ok_or(OptError::InvalidValue(at))?;
        Ok(self.push(
            MirOp::Load {
                buf,
                strides,
                offset: 0,
            },
            Vec::new(),
            dtype,
        ))
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

    /// An `iota` of type `ty` along `axis`, at every domain point.
    fn iota(&mut self, ty: &rfx_ir::TensorType, axis: usize, at: ValueId) -> Result<MirValue, OptError> {
        let unit: Vec<usize> = (0..ty.shape.rank()).map(|i| usize::from(i == axis)).collect();
        let strides = strides_in_domain(&ty.shape, &unit, self.domain).ok_or(OptError::InvalidValue(at))?;
        Ok(self.push(MirOp::Index { strides }, Vec::new(), ty.dtype))
    }

    /// A chain of transposes and broadcasts ending at `v`, read from what is under it: a splat
    /// constant, an `iota` (an index with the chain's strides), or a buffer (with the chain's
    /// strides).
    fn transposed(&mut self, v: ValueId) -> Result<MirValue, OptError> {
        let kernel = self.plan.kernel;
        let node = kernel.node(v).ok_or(OptError::InvalidValue(v))?;
        // The chain from `v` down to its base (a root below `v` ends it: it is read stored).
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
        let ty = &node.ty;
        // Where element `idx` of the base sits: row-major in its buffer, or the index along an
        // `iota`'s axis.
        let iota = match &base_node.op {
            Op::Const(value) => return Ok(self.push(MirOp::Const(*value), Vec::new(), ty.dtype)),
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
        let strides = strides_in_domain(&ty.shape, &strides, self.domain).ok_or(OptError::InvalidValue(v))?;
        Ok(match iota {
            Some(_) => {
                let index = self.push(MirOp::Index { strides }, Vec::new(), ty.dtype);
                if offset == 0 {
                    index
                } else {
                    // Exact: the sum is an index of the unsliced `iota`, which its dtype holds.
                    let start =
                        rfx_ir::semantics::index_value(offset, ty.dtype).ok_or(OptError::InvalidValue(v))?;
                    let start = self.push(MirOp::Const(start), Vec::new(), ty.dtype);
                    self.push(MirOp::Binary(BinaryOp::Add), vec![index, start], ty.dtype)
                }
            }
            None => {
                let buf = self.stored_buf(base)?;
                self.push(MirOp::Load { buf, strides, offset }, Vec::new(), ty.dtype)
            }
        })
    }

    /// A `pad` at every domain point: its operand read by clamped index from its buffer where
    /// the point lies inside the operand's window, zero elsewhere.
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
        let i32_index =
            |n: usize| rfx_ir::semantics::index_value(n, rfx_ir::DType::I32).ok_or(OptError::IndexRange(v));
        // Inside the window along every axis the operand does not fill.
        let mut inside = None;
        for (axis, ((&lo, &n), &p)) in low.iter().zip(inner.dims()).zip(ty.shape.dims()).enumerate() {
            if n == p {
                continue;
            }
            i32_index(p - 1)?;
            let unit: Vec<usize> = (0..ty.shape.rank()).map(|i| usize::from(i == axis)).collect();
            let strides =
                strides_in_domain(&ty.shape, &unit, self.domain).ok_or(OptError::InvalidValue(v))?;
            let at = self.push(MirOp::Index { strides }, Vec::new(), rfx_ir::DType::I32);
            let mut bounds = Vec::new();
            if lo > 0 {
                bounds.push((rfx_ir::CmpOp::Ge, lo));
            }
            if lo + n < p {
                bounds.push((rfx_ir::CmpOp::Lt, lo + n));
            }
            for (cmp, bound) in bounds {
                let bound = self.push(MirOp::Const(i32_index(bound)?), Vec::new(), rfx_ir::DType::I32);
                let test = self.push(MirOp::Compare(cmp), vec![at, bound], rfx_ir::DType::Bool);
                inside = Some(match inside {
                    None => test,
                    Some(acc) => {
                        self.push(MirOp::Binary(BinaryOp::And), vec![acc, test], rfx_ir::DType::Bool)
                    }
                });
            }
        }
        let value = match kernel.node(operand).map(|n| &n.op) {
            Some(Op::Const(c)) => self.push(MirOp::Const(*c), Vec::new(), ty.dtype),
            _ => {
                // The operand's element at `point - low`: its row-major offset at `point`,
                // less that of `low` (negative, and clamped, only outside the window).
                let own = inner.strides();
                let reach: usize = ty.shape.dims().iter().zip(&own).map(|(&p, s)| (p - 1) * s).sum();
                i32_index(reach)?;
                let strides =
                    strides_in_domain(&ty.shape, &own, self.domain).ok_or(OptError::InvalidValue(v))?;
                let mut at = self.push(MirOp::Index { strides }, Vec::new(), rfx_ir::DType::I32);
                let start: usize = low.iter().zip(&own).map(|(l, s)| l * s).sum();
                if start > 0 {
                    let start = self.push(MirOp::Const(i32_index(start)?), Vec::new(), rfx_ir::DType::I32);
                    at = self.push(MirOp::Binary(BinaryOp::Sub), vec![at, start], rfx_ir::DType::I32);
                }
                let buf = self.stored_buf(operand)?;
                self.push(MirOp::Gather { buf }, vec![at], ty.dtype)
            }
        };
        Ok(match inside {
            Some(inside) => self.push(MirOp::Select, vec![inside, value, zero], ty.dtype),
            None => value,
        })
    }

    /// The value of `v` at every domain point: loaded when it lives in a buffer this kernel
    /// does not write, computed otherwise.
    fn value(&mut self, v: ValueId) -> Result<MirValue, OptError> {
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
        } else if self.plan.roots.contains_key(&v)
            && (self.plan.group_of.get(&v) != Some(&self.group) || self.plan.is_reduce(v))
        {
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
            Op::Input { .. } | Op::Const(_) | Op::Literal(_) => return self.value(v),
            Op::Iota { axis } => self.iota(&node.ty, *axis, v)?,
            Op::Transpose { .. } | Op::Slice { .. } => self.transposed(v)?,
            Op::Pad { .. } => self.padded(v)?,
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
                if let Op::Const(value) = src_node.op {
                    self.push(MirOp::Const(value), Vec::new(), dtype)
                } else {
                    let buf = self.stored_buf(source)?;
                    self.load(buf, &node.ty.shape, dtype, v)?
                }
            }
            Op::Reduce { .. } => return Err(OptError::InvalidValue(v)),
        };
        self.memo.insert(v, result);
        Ok(result)
    }
}
