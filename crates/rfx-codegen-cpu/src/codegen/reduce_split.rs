//! A blocked reduction split across threads at nodes of its leaf tree, with the one-thread bits.
//!
//! The leaves of one output are combined by a binary counter ([`ReduceLeaves`]), which is a
//! fixed tree: over `n` leaves from leaf `o` it gives `F(o, n)`, and
//!
//! - `F(o, n) = F(o, n/2) ∘ F(o + n/2, n/2)` when `n` is a power of two (a perfect tree),
//! - `F(o, n) = F(o, 2^a) ∘ F(o + 2^a, n - 2^a)` otherwise, `2^a` the largest power of two
//!   below `n` (the counter's oldest stack entry, folded last, on the left),
//!
//! every merge lane by lane. So the leaves can be cut into *parts*, each a node `F(o, n)` of
//! that tree, which the same counter code computes from a fresh stack; the parts' partials,
//! merged as the tree merges those nodes, are bit for bit the whole counter's.
//!
//! A kernel that splits this way has more than one mode, chosen by the top bits of its first
//! unit (`lo`): without them its units are outputs, as for any reduction (the one-thread
//! call); with [`SPLIT_PARTS`], its units are `(output, part)` pairs, `output * parts + part`,
//! and each part's partials go to the kernel's scratch (module data); with [`SPLIT_COMBINE`],
//! its units are outputs again, whose parts' partials are merged in the tree's order, then
//! combined across lanes, finished and stored as the one-thread code stores them. The pool
//! (`crate::pool`) runs the parts on its threads and then the combination on the caller's,
//! both under its lock, so one call at a time uses the scratch.

use super::addr::div_rem_const;
use super::*;

/// The flag of `lo` that runs a split kernel's parts (see the module's documentation).
pub(crate) const SPLIT_PARTS: u64 = 1 << 63;
/// The flag of `lo` that merges a split kernel's parts into its outputs.
pub(crate) const SPLIT_COMBINE: u64 = 1 << 62;
const MODE_BITS: u64 = SPLIT_PARTS | SPLIT_COMBINE;

/// The most parts one output's leaves are cut into: enough that a late worker leaves little
/// for the caller to wait on at any thread count this pool runs well with, few enough that
/// their merges cost nothing beside the leaves.
const MAX_PARTS: usize = 32;
/// The most `(output, part)` units of a kernel (its scratch holds one set of partials each).
const MAX_PART_UNITS: usize = 256;

/// A node of the leaf tree above the parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    /// Part `p` (its partials, from the scratch).
    Part(usize),
    /// `left ∘ right`, lane by lane.
    Merge(Box<Node>, Box<Node>),
}

/// One output's leaves cut into parts at tree nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TreeSplit {
    /// Each part's first leaf and leaf count, in leaf order.
    pub(crate) parts: Vec<(usize, usize)>,
    /// How the parts merge.
    pub(crate) tree: Node,
}

/// The two children of the tree node over `count` (at least 2) leaves from `first` (see the
/// module's documentation): `(first, count)` each.
fn children(first: usize, count: usize) -> ((usize, usize), (usize, usize)) {
    let left = if count.is_power_of_two() {
        count / 2
    } else {
        1 << (usize::BITS - 1 - count.leading_zeros())
    };
    ((first, left), (first + left, count - left))
}

/// The node over `count` leaves from `first`, cut down to parts of at most `most` leaves.
fn cut(first: usize, count: usize, most: usize, parts: &mut Vec<(usize, usize)>) -> Node {
    if count <= most.max(1) {
        parts.push((first, count));
        return Node::Part(parts.len() - 1);
    }
    let (left, right) = children(first, count);
    let left = cut(left.0, left.1, most, parts);
    let right = cut(right.0, right.1, most, parts);
    Node::Merge(Box::new(left), Box::new(right))
}

/// `leaves` leaves cut at tree nodes into at most `max_parts` parts, as even as the tree
/// allows: every node of more than `most` leaves is cut, `most` the smallest power of two that
/// keeps the count within `max_parts`.
pub(crate) fn split_tree(leaves: usize, max_parts: usize) -> TreeSplit {
    let mut most = 1usize;
    loop {
        let mut parts = Vec::new();
        let tree = cut(0, leaves, most, &mut parts);
        if parts.len() <= max_parts.max(1) || most >= leaves {
            return TreeSplit { parts, tree };
        }
        most *= 2;
    }
}

/// The scratch of a kernel that runs in parts: its module data (one set of partials per
/// `(output, part)` unit) and the parts per output.
#[derive(Clone, Copy, Debug)]
pub(super) struct SplitScratch {
    pub(super) data: GlobalValue,
    pub(super) parts: usize,
    /// Bytes of one set of partials (the partials' slot).
    pub(super) stride: usize,
}

/// What [`Gen::split_plan`] decides before the function is built: the parts per output and the
/// scratch's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SplitPlan {
    pub(crate) parts: usize,
    pub(crate) stride: usize,
    pub(crate) bytes: usize,
}

impl KernelShape {
    /// This reduction's shape when it also runs in `parts` parts per output: as many threads
    /// as its points pay for, up to one per `(output, part)` unit.
    pub(crate) fn in_parts(self, parts: u64, min_points_per_thread: usize, points: u64) -> KernelShape {
        let wanted = usize::try_from(points / min_points_per_thread.max(1) as u64).unwrap_or(usize::MAX);
        let units = usize::try_from(self.units.saturating_mul(parts)).unwrap_or(usize::MAX);
        KernelShape {
            thread_limit: wanted.min(units),
            parts,
            ..self
        }
    }
}

impl<'k> Gen<'_, 'k> {
    /// Whether this kernel runs in parts of its leaf trees, and how: a reduction kept in
    /// partials (`reduce_lanes` > 1) whose every reduction is blocked, of two leaves or more
    /// per output, with points for two threads or more that its outputs alone cannot share
    /// out (a unit split keeps 64 outputs per thread). Decided from the kernel alone, before
    /// its function is built, so that the scratch can be declared.
    pub(crate) fn split_plan(&self) -> Result<Option<SplitPlan>, BackendError> {
        let kernel = self.kernel();
        let lanes = kernel.schedule.reduce_lanes;
        let rank = kernel.dims.len();
        let reduce_dims = kernel.reduce_dims.min(rank);
        let reductions = self.reductions()?;
        if kernel.scan.is_some()
            || reduce_dims == 0
            || reductions.is_empty()
            || !reductions
                .iter()
                .all(|&(op, _, dtype)| rfx_ir::lir::reduce_is_blocked(op, dtype, lanes))
        {
            return Ok(None);
        }
        let split = rank - reduce_dims;
        let units: usize = kernel.dims[..split].iter().product();
        let inner = kernel.dims.last().copied().unwrap_or(1);
        let rows: usize = kernel.dims[split..rank - 1].iter().product();
        let leaves = ReduceLeaves::of(lanes, rows, inner).count(rows, inner);
        let points = units.saturating_mul(rows.saturating_mul(inner));
        let wanted = points / self.min_points_per_thread().max(1);
        let by_outputs = wanted.min(units / 64);
        let parts = leaves.min(MAX_PARTS).min(MAX_PART_UNITS / units.max(1));
        if wanted < 2 || by_outputs >= wanted || parts < 2 {
            return Ok(None);
        }
        let parts = split_tree(leaves, parts).parts.len();
        let stride = reductions
            .iter()
            .map(|&(_, _, dtype)| partial_bytes(lanes.max(1), dtype))
            .sum::<usize>()
            .max(16);
        Ok(Some(SplitPlan {
            parts,
            stride,
            bytes: units * parts * stride,
        }))
    }

    /// The split modes' code (see the module's documentation): a branch on the mode bits of
    /// `lo`, to the parts' loop and the combination (each ending the kernel's code); the
    /// builder is left in the one-thread mode's block.
    pub(super) fn emit_split_modes(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (lo, hi): (Value, Value),
        layout: &RowLayout,
        (partials, tree): (&Partials, &LeafTree),
        tiles: Option<&TilePlan>,
        scratch: SplitScratch,
    ) -> Result<TreeSplit, BackendError> {
        let leaves = layout.leaves.count(layout.rows, layout.inner);
        let split = split_tree(leaves, scratch.parts);
        if split.parts.len() != scratch.parts || scratch.stride != tree.level_bytes {
            return Err(internal("split reduction: the parts planned and emitted differ"));
        }
        let mode = b.ins().band_imm_s(lo, MODE_BITS as i64);
        let modes = b.create_block();
        let one_thread = b.create_block();
        b.ins().brif(mode, modes, &[], one_thread, &[]);
        b.switch_to_block(modes);
        let first = b.ins().band_imm_s(lo, !MODE_BITS as i64);
        let combine = b.ins().band_imm_s(lo, SPLIT_COMBINE as i64);
        let base = b.ins().symbol_value(self.fx.ptr, scratch.data);
        let parts_block = b.create_block();
        let combine_block = b.create_block();
        b.ins().brif(combine, combine_block, &[], parts_block, &[]);
        b.switch_to_block(parts_block);
        self.emit_parts(b, (first, hi), layout, (partials, tree), tiles, (base, &split))?;
        self.finish(b);
        b.switch_to_block(combine_block);
        self.emit_combine(b, (first, hi), layout, partials, (base, &split))?;
        self.finish(b);
        b.switch_to_block(one_thread);
        Ok(split)
    }

    /// The parts' loop: for each `(output, part)` unit of `first..hi`, the part's leaves through
    /// a fresh counter, folded, and its partials stored at the unit's place in the scratch.
    fn emit_parts(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (first, hi): (Value, Value),
        layout: &RowLayout,
        (partials, tree): (&Partials, &LeafTree),
        tiles: Option<&TilePlan>,
        (base, split): (Value, &TreeSplit),
    ) -> Result<(), BackendError> {
        let parts = split.parts.len();
        let zero = b.ins().iconst(types::I64, 0);
        let zeros = vec![zero; self.fx.info.accesses.len()];
        self.emit_loop(b, first, hi, 1, &[], &mut |g, b, unit, _| {
            let (lead, part) = div_rem_const(b, unit, parts as u64, true);
            let lead_offs = g.offsets(b, lead, 0, &layout.leading, &zeros);
            g.reset_partials(b, partials, Some(tree))?;
            // The part's leaves: constants chosen by the part's index.
            let mut leaf_lo = b.ins().iconst(types::I64, 0);
            let mut leaf_hi = b.ins().iconst(types::I64, split.parts[0].1 as i64);
            for (k, &(start, count)) in split.parts.iter().enumerate().skip(1) {
                let at_or_after = b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, part, k as i64);
                let start_k = b.ins().iconst(types::I64, start as i64);
                let end_k = b.ins().iconst(types::I64, (start + count) as i64);
                leaf_lo = b.ins().select(at_or_after, start_k, leaf_lo);
                leaf_hi = b.ins().select(at_or_after, end_k, leaf_hi);
            }
            g.emit_loop(b, leaf_lo, leaf_hi, 1, &[], &mut |g, b, leaf, _| {
                g.emit_leaf(b, layout, &lead_offs, leaf, partials, tiles)?;
                g.push_leaf(b, partials, tree)?;
                Ok(Vec::new())
            })?;
            let bytes = b.ins().imul_imm_s(unit, tree.level_bytes as i64);
            let dest = b.ins().iadd(base, bytes);
            g.fold_leaves_into(b, partials, tree, dest).map(|()| Vec::new())
        })?;
        Ok(())
    }

    /// One leaf, whose index `leaf` is known only when the code runs, folded into `partials`.
    fn emit_leaf(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        layout: &RowLayout,
        lead_offs: &[Value],
        leaf: Value,
        partials: &Partials,
        tiles: Option<&TilePlan>,
    ) -> Result<(), BackendError> {
        let (rows, inner) = (layout.rows, layout.inner);
        match layout.leaves {
            ReduceLeaves::RowGroups { rows_per_leaf } => {
                let first = b.ins().imul_imm_s(leaf, rows_per_leaf as i64);
                let last = b.ins().iadd_imm_s(first, rows_per_leaf as i64);
                let rows = b.ins().iconst(types::I64, rows as i64);
                let last = b.ins().umin(last, rows);
                self.emit_rows(b, layout, lead_offs, (first, last), partials, tiles)
            }
            ReduceLeaves::RowPieces { points } => {
                let per_row = inner.div_ceil(points);
                let small = rows.saturating_mul(per_row) <= 1 << 32;
                let (row, piece) = div_rem_const(b, leaf, per_row as u64, small);
                let offs = self.offsets(b, row, layout.split, &layout.outer_reduced, lead_offs);
                let ptrs = self.pointers(b, &offs)?;
                let start = b.ins().imul_imm_s(piece, points as i64);
                let full = inner / points;
                if inner.is_multiple_of(points) {
                    return self.emit_piece(b, layout, &ptrs, (start, points), partials, tiles);
                }
                // The last piece of a row is shorter.
                let whole = b.ins().icmp_imm_s(IntCC::UnsignedLessThan, piece, full as i64);
                let (whole_block, last_block, join) = (b.create_block(), b.create_block(), b.create_block());
                b.ins().brif(whole, whole_block, &[], last_block, &[]);
                b.switch_to_block(whole_block);
                self.emit_piece(b, layout, &ptrs, (start, points), partials, tiles)?;
                b.ins().jump(join, &[]);
                b.switch_to_block(last_block);
                self.emit_piece(b, layout, &ptrs, (start, inner - full * points), partials, tiles)?;
                b.ins().jump(join, &[]);
                b.switch_to_block(join);
                Ok(())
            }
            ReduceLeaves::One => Err(internal("split reduction of a single leaf")),
        }
    }

    /// The stack of `tree` folded from the top, as [`Gen::fold_leaves`] folds it but with the
    /// entry count (the set bits of the leaves pushed) known only when the code runs, stored
    /// at `dest` laid out as the partials' slot.
    fn fold_leaves_into(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        partials: &Partials,
        tree: &LeafTree,
        dest: Value,
    ) -> Result<(), BackendError> {
        let chunks = partials.blocked_chunks()?;
        let count = b.ins().stack_load(types::I64, types::I64, tree.counter, 0);
        let entries = b.ins().popcnt(count);
        let top = b.ins().iadd_imm_s(entries, -1);
        let stack = b.ins().stack_addr(self.fx.ptr, tree.stack, 0);
        let level_bytes = tree.level_bytes as i64;
        let top_bytes = b.ins().imul_imm_s(top, level_bytes);
        let top_entry = b.ins().iadd(stack, top_bytes);
        let newest: Vec<Value> = chunks
            .iter()
            .map(|&(_, ty, off)| b.ins().load(ty, MemFlagsData::trusted(), top_entry, off))
            .collect();
        let zero = b.ins().iconst(types::I64, 0);
        let (_, totals) = self.emit_loop(b, zero, top, 1, &newest, &mut |g, b, i, totals| {
            // The entry `i + 1` below the top: level `top - 1 - i`, older, on the left.
            let level = b.ins().isub(top, i);
            let level = b.ins().iadd_imm_s(level, -1);
            let bytes = b.ins().imul_imm_s(level, level_bytes);
            let entry = b.ins().iadd(stack, bytes);
            chunks
                .iter()
                .zip(totals)
                .map(|(&(r, ty, off), &total)| {
                    let older = b.ins().load(ty, MemFlagsData::trusted(), entry, off);
                    Emitter {
                        b: &mut *b,
                        w: partials.unit(r),
                        imports: g.fx.imports,
                    }
                    .combine(r.op, older, total, r.dtype)
                })
                .collect()
        })?;
        for (&(_, _, off), total) in chunks.iter().zip(totals) {
            b.ins().store(MemFlagsData::trusted(), total, dest, off);
        }
        Ok(())
    }

    /// The combination: for each output of `first..hi`, its parts' partials merged in the
    /// tree's order into the partials' slot, then combined across lanes, finished and stored.
    fn emit_combine(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (first, hi): (Value, Value),
        layout: &RowLayout,
        partials: &Partials,
        (base, split): (Value, &TreeSplit),
    ) -> Result<(), BackendError> {
        let stride = i64::try_from(split.parts.len() * partials_stride(partials))
            .map_err(|_| internal("split scratch too large"))?;
        self.emit_loop(b, first, hi, 1, &[], &mut |g, b, lead, _| {
            let bytes = b.ins().imul_imm_s(lead, stride);
            let parts = b.ins().iadd(base, bytes);
            for (r, ty, off) in partials.blocked_chunks()? {
                let total = g.merge_node(b, &split.tree, (r, ty, off), parts, partials)?;
                b.ins().stack_store(types::I64, total, partials.slot, off);
            }
            g.store_partials(b, partials, lead, layout.reduced_numel)?;
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// The merge unit `(r, ty, off)` of `node`'s partials, its parts read from `parts` (an
    /// output's first part in the scratch).
    fn merge_node(
        &self,
        b: &mut FunctionBuilder<'_>,
        node: &Node,
        (r, ty, off): (&ReduceInfo, Type, i32),
        parts: Value,
        partials: &Partials,
    ) -> Result<Value, BackendError> {
        match node {
            Node::Part(p) => {
                let at = i32::try_from(p * partials_stride(partials))
                    .ok()
                    .and_then(|a| a.checked_add(off))
                    .ok_or_else(|| internal("split scratch too large"))?;
                Ok(b.ins().load(ty, MemFlagsData::trusted(), parts, at))
            }
            Node::Merge(left, right) => {
                let left = self.merge_node(b, left, (r, ty, off), parts, partials)?;
                let right = self.merge_node(b, right, (r, ty, off), parts, partials)?;
                Emitter {
                    b: &mut *b,
                    w: partials.unit(r),
                    imports: self.fx.imports,
                }
                .combine(r.op, left, right, r.dtype)
            }
        }
    }
}

/// Bytes of one set of partials in the scratch: the partials' slot.
fn partials_stride(partials: &Partials) -> usize {
    partials
        .reduces
        .iter()
        .map(|r| partial_bytes(partials.lanes, r.dtype))
        .sum::<usize>()
        .max(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value the binary counter gives over `leaves` one-element leaves whose values are
    /// their indices, with a merge that records its operands: `(a b)`.
    fn counter(first: usize, count: usize) -> String {
        let mut stack: Vec<String> = Vec::new();
        for c in 1..=count {
            let mut leaf = (first + c - 1).to_string();
            for _ in 0..c.trailing_zeros() {
                let top = stack.pop().unwrap_or_default();
                leaf = format!("({top} {leaf})");
            }
            stack.push(leaf);
        }
        let mut total = stack.pop().unwrap_or_default();
        while let Some(older) = stack.pop() {
            total = format!("({older} {total})");
        }
        total
    }

    fn merged(node: &Node, split: &TreeSplit) -> String {
        match node {
            Node::Part(p) => {
                let (first, count) = split.parts[*p];
                counter(first, count)
            }
            Node::Merge(l, r) => format!("({} {})", merged(l, split), merged(r, split)),
        }
    }

    #[test]
    fn parts_merged_by_the_tree_are_the_whole_counter() {
        for leaves in 1..=300 {
            for max_parts in [1, 2, 3, 4, 8, 32] {
                let split = split_tree(leaves, max_parts);
                assert!(
                    split.parts.len() <= max_parts.max(1),
                    "{leaves} leaves, {max_parts} parts"
                );
                let mut next = 0;
                for &(first, count) in &split.parts {
                    assert_eq!(first, next, "{leaves} leaves: parts in order, contiguous");
                    assert!(count >= 1);
                    next = first + count;
                }
                assert_eq!(next, leaves);
                assert_eq!(
                    merged(&split.tree, &split),
                    counter(0, leaves),
                    "{leaves} leaves, {max_parts} parts"
                );
            }
        }
    }

    #[test]
    fn a_power_of_two_of_leaves_cuts_into_equal_parts() {
        let split = split_tree(512, 32);
        assert_eq!(split.parts.len(), 32);
        assert!(split.parts.iter().all(|&(_, count)| count == 16));
        // 489 leaves (10⁶ points of 2,048): nodes of at most 16 leaves.
        let split = split_tree(489, 32);
        assert!(split.parts.len() <= 32 && split.parts.iter().all(|&(_, c)| c <= 16));
    }

    /// The shapes of the kernels of `text` lowered with 128 points per reference body (a
    /// thread for every 1,024 points of a sum).
    fn shapes(text: &str) -> Vec<KernelShape> {
        let kernel = rfx_ir::hir::parse(text).expect("parse");
        let (mir, _) = rfx_opt::optimize(&kernel, &Default::default()).expect("optimize");
        let config = rfx_lower::LowerConfig {
            min_elems_per_thread: 128,
            ..Default::default()
        };
        let (lir, _) = rfx_lower::lower(&mir, &config).expect("lower");
        let code = crate::backend::compile_code(&lir, false, &Default::default()).expect("compile");
        code.kernels.iter().map(|(_, shape)| *shape).collect()
    }

    #[test]
    fn few_outputs_of_long_sums_run_in_parts() {
        let sum = |ty: &str, axes: &str, out: &str| {
            format!(
                "kernel k {{\n  %x = input x : {ty}\n  %r = sum %x axes {axes} : {out}\n  output r = %r\n}}\n"
            )
        };
        // 9,000 points: 5 leaves of 2,048 (the last short), a part each.
        let full = shapes(&sum("f32[9000]", "[0]", "f32[]"));
        assert_eq!((full[0].units, full[0].parts), (1, 5));
        assert!(full[0].thread_limit >= 2);
        // Three rows of 50,000 points: 25 leaves each, three outputs in parts.
        let rows = shapes(&sum("f32[3, 50000]", "[1]", "f32[3]"));
        assert_eq!((rows[0].units, rows[0].parts), (3, 25));
        // Leaves of whole rows (two outputs of 300 rows of 1,000 points: 150 leaves) and of row
        // pieces (5 rows of 3,000: 10 leaves), the reduced dims apart.
        let groups = shapes(&sum("f32[300, 2, 1000]", "[0, 2]", "f32[2]"));
        assert_eq!(
            (groups[0].units, groups[0].parts),
            (2, split_tree(150, 32).parts.len() as u64)
        );
        let pieces = shapes(&sum("f32[5, 2, 3000]", "[0, 2]", "f32[2]"));
        assert_eq!((pieces[0].units, pieces[0].parts), (2, 10));
        // Enough outputs to share by outputs: no parts.
        let many = shapes(&sum("f32[512, 4096]", "[1]", "f32[512]"));
        assert_eq!((many[0].units, many[0].parts), (512, 0));
        // Two leaves: two parts. A sum of one leaf, or too few points for two threads: none.
        assert_eq!(shapes(&sum("f32[4096]", "[0]", "f32[]"))[0].parts, 2);
        assert_eq!(shapes(&sum("f32[2048]", "[0]", "f32[]"))[0].parts, 0);
        // A maximum is not blocked (its order changes no bit, but it has no leaf tree).
        let max =
            "kernel k {\n  %x = input x : f32[9000]\n  %r = max %x axes [0] : f32[]\n  output r = %r\n}\n";
        assert_eq!(shapes(max)[0].parts, 0);
    }
}
