//! Reductions: partial accumulators in the LIR's documented order, pairwise leaf trees for long sums, and one output at a time.

use super::*;

/// Accumulator-loop vectors per iteration of a small reduction body's loop
/// ([`Gen::emit_vector_partials`]).
const REDUCE_UNROLL_VECTORS: u32 = 8;

/// The most LIR instructions of a reduction body whose loop runs several steps per iteration.
const REDUCE_UNROLL_MAX_BODY: usize = 16;

pub(super) struct ReduceInfo {
    pub(super) index: usize,
    pub(super) op: ReduceOp,
    pub(super) buf: BufId,
    pub(super) dtype: DType,
    pub(super) offset: usize,
}

/// The partial accumulators of a reduction kernel.
pub(super) struct Partials {
    pub(super) slot: cranelift_codegen::ir::StackSlot,
    pub(super) lanes: u32,
    pub(super) reduces: Vec<ReduceInfo>,
}

/// The binary counter of a blocked reduction's leaves ([`ReduceLeaves`]): a stack of entries
/// laid out as the partials' slot, and the count of leaves pushed for the current output.
pub(super) struct LeafTree {
    pub(super) stack: StackSlot,
    pub(super) counter: StackSlot,
    /// Bytes per stack entry: the partials' slot size, a multiple of 16.
    pub(super) level_bytes: usize,
    /// Entries on the stack once every leaf is pushed: the set bits of the leaf count.
    pub(super) entries_at_end: usize,
}

impl LeafTree {
    /// The stack and counter for `leaves` leaves of partials laid out in `level_bytes`.
    pub(super) fn new(
        b: &mut FunctionBuilder<'_>,
        leaves: usize,
        level_bytes: usize,
    ) -> Result<LeafTree, BackendError> {
        let depth = rfx_ir::lir::reduce_stack_depth(leaves);
        let bytes =
            u32::try_from(depth.saturating_mul(level_bytes)).map_err(|_| internal("leaf stack too large"))?;
        let stack = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, bytes, 4));
        let counter = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
        Ok(LeafTree {
            stack,
            counter,
            level_bytes,
            entries_at_end: leaves.count_ones() as usize,
        })
    }
}

impl Partials {
    /// Every reduction's partials as vectors of `w` lanes (`lanes / w` each, 16 bytes apart),
    /// in reduction order: the accumulators a vector loop carries.
    pub(super) fn load_vectors(
        &self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
    ) -> Result<Vec<Value>, BackendError> {
        let mut vectors = Vec::new();
        for r in &self.reduces {
            for k in 0..(self.lanes / u32::from(w)) as usize {
                let off = i32::try_from(r.offset + k * 16).map_err(|_| internal("partials too large"))?;
                vectors.push(
                    b.ins()
                        .stack_load(types::I64, cl_type(r.dtype, w), self.slot, off),
                );
            }
        }
        Ok(vectors)
    }

    /// Stores the vectors [`Partials::load_vectors`] loaded (as the loop left them) back.
    pub(super) fn store_vectors(
        &self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        vectors: &[Value],
    ) -> Result<(), BackendError> {
        let chunks = (self.lanes / u32::from(w)) as usize;
        for r in &self.reduces {
            for k in 0..chunks {
                let off = i32::try_from(r.offset + k * 16).map_err(|_| internal("partials too large"))?;
                let vector = *vectors
                    .get(r.index * chunks + k)
                    .ok_or_else(|| internal("missing partial vector"))?;
                b.ins().stack_store(types::I64, vector, self.slot, off);
            }
        }
        Ok(())
    }

    /// Whether reduction `r` is blocked into leaves (`rfx_ir::lir::reduce_is_blocked`).
    pub(super) fn blocked(&self, r: &ReduceInfo) -> bool {
        rfx_ir::lir::reduce_is_blocked(r.op, r.dtype, self.lanes)
    }

    /// The lanes a leaf merge of reduction `r` handles at once: a 128-bit vector where the
    /// lanes fill whole ones, else one. Merges are lane by lane, so the width changes no bit.
    pub(super) fn unit(&self, r: &ReduceInfo) -> u8 {
        let vector = 16 / r.dtype.size_bytes().max(1);
        if vector > 1 && (self.lanes as usize).is_multiple_of(vector) {
            u8::try_from(vector).unwrap_or(1)
        } else {
            1
        }
    }

    /// The blocked reductions' partials in merge units: the reduction, the unit's type and its
    /// byte offset in the slot (and in each entry of a leaf stack, laid out alike).
    pub(super) fn blocked_chunks(&self) -> Result<Vec<(&ReduceInfo, Type, i32)>, BackendError> {
        let mut chunks = Vec::new();
        for r in self.reduces.iter().filter(|r| self.blocked(r)) {
            let unit = self.unit(r);
            let bytes = usize::from(unit) * r.dtype.size_bytes();
            for k in 0..(self.lanes as usize / usize::from(unit)) {
                let off = i32::try_from(r.offset + k * bytes).map_err(|_| internal("partials too large"))?;
                chunks.push((r, cl_type(r.dtype, unit), off));
            }
        }
        Ok(chunks)
    }

    /// The partial lane of row point `at` (`at % lanes`, a mask for a power of two lanes;
    /// `None` for a single lane).
    pub(super) fn lane_of(&self, b: &mut FunctionBuilder<'_>, at: Value) -> Option<Value> {
        (self.lanes > 1).then(|| {
            if self.lanes.is_power_of_two() {
                b.ins().band_imm_s(at, i64::from(self.lanes - 1))
            } else {
                b.ins().urem_imm_s(at, i64::from(self.lanes))
            }
        })
    }

    /// Folds one point's `value` of reduction `r` into its partial `lane`, through the slot.
    pub(super) fn fold_scalar(
        &self,
        b: &mut FunctionBuilder<'_>,
        ptr: Type,
        imports: &crate::imports::Imports,
        r: &ReduceInfo,
        lane: Option<Value>,
        value: Value,
    ) -> Result<(), BackendError> {
        let base = b
            .ins()
            .stack_addr(ptr, self.slot, i32::try_from(r.offset).unwrap_or(0));
        let addr = match lane {
            Some(lane) => {
                let byte = b.ins().imul_imm_s(lane, r.dtype.size_bytes() as i64);
                b.ins().iadd(base, byte)
            }
            None => base,
        };
        let ty = cl_type(r.dtype, 1);
        let acc = b.ins().load(ty, MemFlagsData::trusted(), addr, 0);
        let acc = Emitter {
            b: &mut *b,
            w: 1,
            imports,
        }
        .combine(r.op, acc, value, r.dtype)?;
        b.ins().store(MemFlagsData::trusted(), acc, addr, 0);
        Ok(())
    }
}

/// The bytes of one reduction's `lanes` partials in the partials' slot (16-byte aligned); the
/// slot holds every reduction's, and at least 16 bytes.
pub(super) fn partial_bytes(lanes: u32, dtype: DType) -> usize {
    (lanes as usize * dtype.size_bytes()).div_ceil(16) * 16
}

/// Where one output's reduced points lie: the loop dims from `split` on, rows of `inner`
/// points (the innermost dim) over the `outer_reduced` dims, cut into `leaves`.
pub(super) struct RowLayout {
    /// The kept (leading) dims: one output per point.
    pub(super) leading: Vec<usize>,
    /// The first reduced loop dim.
    pub(super) split: usize,
    /// The reduced dims before the innermost.
    pub(super) outer_reduced: Vec<usize>,
    pub(super) inner: usize,
    /// Rows per output: the product of `outer_reduced`.
    pub(super) rows: usize,
    pub(super) leaves: ReduceLeaves,
    /// Bytes each access advances per point of the innermost reduced dim.
    pub(super) row_steps: Vec<i64>,
    /// Reduced points per output.
    pub(super) reduced_numel: usize,
}

pub(super) fn identity(op: ReduceOp, dtype: DType) -> Result<Scalar, BackendError> {
    rfx_ir::semantics::reduce_identity(op, dtype).ok_or(BackendError::Unsupported {
        backend: "cpu",
        what: Unsupported::OpDType(op.name(), dtype),
    })
}

/// The finished reduction value, as `rfx_ir::semantics::reduce_finish` gives it.
pub(super) fn finish(
    e: &mut Emitter<'_, '_>,
    op: ReduceOp,
    total: Value,
    dtype: DType,
    count: usize,
) -> Result<Value, BackendError> {
    Ok(match (op, dtype) {
        (ReduceOp::Mean, DType::F32) => {
            let n = e.constant(Scalar::F32(count as f32));
            e.b.ins().fdiv(total, n)
        }
        (ReduceOp::Mean, DType::F64) => {
            let n = e.constant(Scalar::F64(count as f64));
            e.b.ins().fdiv(total, n)
        }
        (ReduceOp::Sum, DType::F32 | DType::F64) if count == 0 => e.constant(Scalar::zero(dtype)),
        _ => total,
    })
}

impl<'k> Gen<'_, 'k> {
    /// Ends the kernel's code: a return, or in a function running several kernels, a jump to
    /// the next kernel's code.
    pub(super) fn finish(&self, b: &mut FunctionBuilder<'_>) {
        match self.fx.exit {
            Some(exit) => {
                b.ins().jump(exit, &[]);
            }
            None => {
                b.ins().return_(&[]);
            }
        }
    }

    /// The innermost loop over `start..end` at element offsets `offs` (per access, at index 0).
    /// With `partials`, reductions combine into the accumulators of that stack slot.
    pub(super) fn emit_inner(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        offs: &[Value],
        partials: Option<&Partials>,
    ) -> Result<(), BackendError> {
        let w = self.cur.width;
        let mut j = start;
        match partials {
            Some(p) if w > 1 && p.lanes % u32::from(w) == 0 => {
                j = self.emit_vector_partials(b, (start, end), offs, p)?;
            }
            Some(_) => {}
            None if w > 1 => {
                let (after, _) = self.emit_loop(b, j, end, i64::from(w), &[], &mut |g, b, at, _| {
                    g.emit_body(b, w, at, offs, &mut Vec::new())?;
                    Ok(Vec::new())
                })?;
                j = after;
            }
            None => {}
        }
        // Scalar tail (or the whole loop when not vectorised).
        self.emit_scalar_points(b, j, end, offs, partials)
    }

    /// The whole vector steps of `start..end` (a step is `p.lanes` points, one vector per
    /// `width` lanes of partials) with the accumulator vectors carried in registers; returns
    /// the first point not processed. Where the kernel has an assembled reduction pass
    /// ([`Gen::reduce_pass`]), one call of it. A small body runs [`REDUCE_UNROLL_VECTORS`] vectors per
    /// iteration of a loop tested at its end (then the steps left one at a time): every lane
    /// still adds its points in the order of the steps, so the bits are those of one step per
    /// iteration.
    fn emit_vector_partials(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (start, end): (Value, Value),
        offs: &[Value],
        p: &Partials,
    ) -> Result<Value, BackendError> {
        if let Some(pass) = self.cur.reduce_pass.take() {
            let after = self.emit_reduce_pass_call(b, &pass, (start, end), offs, p);
            self.cur.reduce_pass = Some(pass);
            return after;
        }
        let w = self.cur.width;
        let chunks = p.lanes / u32::from(w);
        let small = self.kernel().body.len() <= REDUCE_UNROLL_MAX_BODY;
        let steps = if small {
            (REDUCE_UNROLL_VECTORS / chunks).max(1)
        } else {
            1
        };
        let step = i64::from(p.lanes);
        // Accumulator vectors are carried through the loop as block parameters.
        let carried = p.load_vectors(b, w)?;
        let group = |g: &mut Self, b: &mut FunctionBuilder<'_>, at: Value, accs: &[Value], steps: u32| {
            let mut accs = accs.to_vec();
            for k in 0..steps * chunks {
                // Tracked as `at` plus a constant: the chunks' accesses share `at`'s address
                // and differ in their immediate offsets.
                let pos = g.add_imm(b, at, i64::from(k) * i64::from(w));
                let mut reduced = Vec::new();
                g.emit_body(b, w, pos, offs, &mut reduced)?;
                for (r, (_, value)) in p.reduces.iter().zip(reduced) {
                    let idx = r.index * chunks as usize + (k % chunks) as usize;
                    let mut e = Emitter {
                        b: &mut *b,
                        w,
                        imports: g.fx.imports,
                    };
                    accs[idx] = e.combine(r.op, accs[idx], value, r.dtype)?;
                }
            }
            Ok(accs)
        };
        let (mut after, mut accs) = self.emit_loop_tested_at_end(
            b,
            start,
            end,
            step * i64::from(steps),
            &carried,
            &mut |g, b, at, accs| group(g, b, at, accs, steps),
        )?;
        if steps > 1 {
            (after, accs) = self.emit_loop(b, after, end, step, &accs, &mut |g, b, at, accs| {
                group(g, b, at, accs, 1)
            })?;
        }
        p.store_vectors(b, w, &accs)?;
        Ok(after)
    }

    /// Reduction kernels: with one accumulator per output, [`Gen::emit_reduction_across`];
    /// otherwise per leading point, partial accumulators in a stack slot, the reduced
    /// dimensions looped (the innermost vectorised), then the lane-order combination and the
    /// store of the finished value. A long blocked reduction whose outputs are too few to
    /// share among threads can also run in parts of its leaf tree ([`super::reduce_split`]).
    pub(super) fn emit_reduction(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        reduce_dims: usize,
    ) -> Result<KernelShape, BackendError> {
        // One accumulator per output runs across the outputs (in lanes, or one at a time inline)
        // unless its rows run in tiles with a one-lane partial (the plan: `Strategy::RowTiles`).
        let strategy = self.cur.plan.map(|p| p.strategy);
        if !matches!(strategy, Some(Strategy::PartialSums | Strategy::RowTiles)) {
            return self.emit_reduction_across(b, lo, hi, reduce_dims);
        }
        let kernel = self.kernel();
        let dims = kernel.dims.clone();
        let rank = dims.len();
        let split = rank - reduce_dims;
        let leading = dims[..split].to_vec();
        let reduced = dims[split..].to_vec();
        let inner = *reduced.last().unwrap_or(&1);
        let outer_reduced = reduced[..reduce_dims.saturating_sub(1)].to_vec();
        let reduced_numel: usize = reduced.iter().product();
        let lanes = kernel.schedule.reduce_lanes.max(1);
        let (partials, size) = self.partials(b, lanes)?;
        // A long float sum is blocked into leaves whose partials a binary counter combines
        // pairwise (`ReduceLeaves`): the interpreter's order, whatever the vector width.
        let rows: usize = outer_reduced.iter().product();
        let leaves = if partials.reduces.iter().any(|r| partials.blocked(r)) {
            ReduceLeaves::of(lanes, rows, inner)
        } else {
            ReduceLeaves::One
        };
        let tree = match leaves {
            ReduceLeaves::One => None,
            _ => Some(LeafTree::new(b, leaves.count(rows, inner), size as usize)?),
        };
        let layout = RowLayout {
            leading,
            split,
            outer_reduced,
            inner,
            rows,
            leaves,
            // Bytes each access advances per point of the innermost reduced dim (a row's
            // pieces start at these multiples).
            row_steps: self.last_dim_step_bytes(rank),
            reduced_numel,
        };
        let tiles = self.cur.tiles.take();
        // Rows of exact ops (not tiled) run their whole vector steps as an assembled pass
        // where the host has one.
        self.cur.reduce_pass = match tiles {
            None if self.cur.width > 1 => self.reduce_pass(b, &partials, inner)?,
            _ => None,
        };
        let units: usize = layout.leading.iter().product();
        let mut shape = KernelShape::new(
            units as u64,
            reduced_numel as u64,
            self.cur.width,
            self.min_points_per_thread(),
        );
        if let (Some(tree), Some(scratch)) = (&tree, self.fx.split_scratch) {
            let tree_split =
                self.emit_split_modes(b, (lo, hi), &layout, (&partials, tree), tiles.as_ref(), scratch)?;
            let points = (units as u64).saturating_mul(reduced_numel as u64);
            shape = shape.in_parts(
                tree_split.parts.len() as u64,
                self.min_points_per_thread(),
                points,
            );
        }
        let zero = b.ins().iconst(types::I64, 0);
        let zeros = vec![zero; self.fx.info.accesses.len()];
        self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, lead, _| {
            let lead_offs = g.offsets(b, lead, 0, &layout.leading, &zeros);
            g.reset_partials(b, &partials, tree.as_ref())?;
            match &tree {
                Some(tree) => g.emit_all_leaves(b, &layout, &lead_offs, (&partials, tree), tiles.as_ref())?,
                None => {
                    let row_lo = b.ins().iconst(types::I64, 0);
                    let row_hi = b.ins().iconst(types::I64, layout.rows as i64);
                    g.emit_rows(
                        b,
                        &layout,
                        &lead_offs,
                        (row_lo, row_hi),
                        &partials,
                        tiles.as_ref(),
                    )?;
                }
            }
            if let Some(tree) = &tree {
                g.fold_leaves(b, &partials, tree)?;
            }
            g.store_partials(b, &partials, lead, reduced_numel)?;
            Ok(Vec::new())
        })?;
        self.cur.reduce_pass = None;
        self.finish(b);
        Ok(shape)
    }

    /// The rows `row_lo..row_hi` of one output, whole, folded into `partials`.
    pub(super) fn emit_rows(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        layout: &RowLayout,
        lead_offs: &[Value],
        (row_lo, row_hi): (Value, Value),
        partials: &Partials,
        tiles: Option<&TilePlan>,
    ) -> Result<(), BackendError> {
        self.emit_loop(b, row_lo, row_hi, 1, &[], &mut |g, b, row, _| {
            let offs = g.offsets(b, row, layout.split, &layout.outer_reduced, lead_offs);
            let offs = g.pointers(b, &offs)?;
            if let Some(plan) = tiles {
                g.emit_tiled_row(b, layout.inner, &offs, partials, plan)?;
            } else {
                let start = b.ins().iconst(types::I64, 0);
                let end = b.ins().iconst(types::I64, layout.inner as i64);
                g.emit_inner(b, start, end, &offs, Some(partials))?;
            }
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// The `len` points of a row (at pointers `ptrs`) from point `start`, folded into
    /// `partials`. A tile holds at least one pass of the segments; a shorter piece runs as
    /// scalar code, which calls the same routines one point at a time (the same bits).
    pub(super) fn emit_piece(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        layout: &RowLayout,
        ptrs: &[Value],
        (start, len): (Value, usize),
        partials: &Partials,
        tiles: Option<&TilePlan>,
    ) -> Result<(), BackendError> {
        let pass = usize::from(self.cur.width) * self.cur.segment_unroll.max(1) as usize;
        match tiles {
            Some(plan) if len >= pass => {
                let at = self.point_pointers(b, ptrs, &layout.row_steps, start);
                self.emit_tiled_row(b, len, &at, partials, plan)
            }
            Some(_) => {
                let end = b.ins().iadd_imm_s(start, len as i64);
                self.emit_scalar_points(b, start, end, ptrs, Some(partials))
            }
            None => {
                let end = b.ins().iadd_imm_s(start, len as i64);
                self.emit_inner(b, start, end, ptrs, Some(partials))
            }
        }
    }

    /// Every leaf of one output in order, each pushed onto the binary counter of `tree`.
    fn emit_all_leaves(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        layout: &RowLayout,
        lead_offs: &[Value],
        (partials, tree): (&Partials, &LeafTree),
        tiles: Option<&TilePlan>,
    ) -> Result<(), BackendError> {
        let (rows, inner) = (layout.rows, layout.inner);
        match layout.leaves {
            ReduceLeaves::RowGroups { rows_per_leaf } => {
                // Groups of `rows_per_leaf` rows, a leaf each, then the rows left.
                let full = rows - rows % rows_per_leaf;
                let start = b.ins().iconst(types::I64, 0);
                let end = b.ins().iconst(types::I64, full as i64);
                self.emit_loop(b, start, end, rows_per_leaf as i64, &[], &mut |g, b, first, _| {
                    let last = b.ins().iadd_imm_s(first, rows_per_leaf as i64);
                    g.emit_rows(b, layout, lead_offs, (first, last), partials, tiles)?;
                    g.push_leaf(b, partials, tree)?;
                    Ok(Vec::new())
                })?;
                if full < rows {
                    let start = b.ins().iconst(types::I64, full as i64);
                    let end = b.ins().iconst(types::I64, rows as i64);
                    self.emit_rows(b, layout, lead_offs, (start, end), partials, tiles)?;
                    self.push_leaf(b, partials, tree)?;
                }
            }
            ReduceLeaves::RowPieces { points } => {
                // Each row in pieces of `points`, a leaf each, then the piece left.
                let full = inner - inner % points;
                let row_lo = b.ins().iconst(types::I64, 0);
                let row_hi = b.ins().iconst(types::I64, rows as i64);
                self.emit_loop(b, row_lo, row_hi, 1, &[], &mut |g, b, row, _| {
                    let offs = g.offsets(b, row, layout.split, &layout.outer_reduced, lead_offs);
                    let ptrs = g.pointers(b, &offs)?;
                    let start = b.ins().iconst(types::I64, 0);
                    let end = b.ins().iconst(types::I64, full as i64);
                    g.emit_loop(b, start, end, points as i64, &[], &mut |g, b, at, _| {
                        g.emit_piece(b, layout, &ptrs, (at, points), partials, tiles)?;
                        g.push_leaf(b, partials, tree)?;
                        Ok(Vec::new())
                    })?;
                    if full < inner {
                        let start = b.ins().iconst(types::I64, full as i64);
                        g.emit_piece(b, layout, &ptrs, (start, inner - full), partials, tiles)?;
                        g.push_leaf(b, partials, tree)?;
                    }
                    Ok(Vec::new())
                })?;
            }
            ReduceLeaves::One => {
                let row_lo = b.ins().iconst(types::I64, 0);
                let row_hi = b.ins().iconst(types::I64, rows as i64);
                self.emit_rows(b, layout, lead_offs, (row_lo, row_hi), partials, tiles)?;
            }
        }
        Ok(())
    }

    /// The partials of the kernel's reductions: each gets `lanes` elements, 16-byte aligned,
    /// in one stack slot; with the slot's size in bytes.
    fn partials(&mut self, b: &mut FunctionBuilder<'_>, lanes: u32) -> Result<(Partials, u32), BackendError> {
        let mut reduces = Vec::new();
        let mut offset = 0usize;
        for (index, (op, buf, dtype)) in self.reductions()?.into_iter().enumerate() {
            reduces.push(ReduceInfo {
                index,
                op,
                buf,
                dtype,
                offset,
            });
            offset += partial_bytes(lanes, dtype);
        }
        let size = u32::try_from(offset.max(16)).map_err(|_| internal("partials too large"))?;
        let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, size, 4));
        Ok((Partials { slot, lanes, reduces }, size))
    }

    /// Every partial set to its reduction's identity, and the leaf counter of `tree` to 0.
    pub(super) fn reset_partials(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        partials: &Partials,
        tree: Option<&LeafTree>,
    ) -> Result<(), BackendError> {
        for r in &partials.reduces {
            let identity = identity(r.op, r.dtype)?;
            // Whole 128-bit vectors where float partials fill them, else one lane at a time.
            let unit = if r.dtype.is_float() { partials.unit(r) } else { 1 };
            let mut e = Emitter {
                b: &mut *b,
                w: unit,
                imports: self.fx.imports,
            };
            let value = e.constant(identity);
            let bytes = usize::from(unit) * r.dtype.size_bytes();
            for k in 0..partials.lanes as usize / usize::from(unit) {
                let off = i32::try_from(r.offset + k * bytes).map_err(|_| internal("partials"))?;
                b.ins().stack_store(types::I64, value, partials.slot, off);
            }
        }
        if let Some(tree) = tree {
            let zero = b.ins().iconst(types::I64, 0);
            b.ins().stack_store(types::I64, zero, tree.counter, 0);
        }
        Ok(())
    }

    /// The partials combined by the pairwise tree of [`rfx_ir::lir::reduce_lane_levels`],
    /// finished (a mean divides by `reduced_numel`) and stored at output element `lead`.
    pub(super) fn store_partials(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        partials: &Partials,
        lead: Value,
        reduced_numel: usize,
    ) -> Result<(), BackendError> {
        let levels = rfx_ir::lir::reduce_lane_levels(partials.lanes);
        for r in &partials.reduces {
            let total = self.combine_lanes(b, partials, r, &levels)?;
            self.store_finished(b, 1, (r.op, r.buf, r.dtype), (total, reduced_numel), lead)?;
        }
        Ok(())
    }

    /// Reduction `r`'s partials combined into one value by the tree `levels`: in whole 128-bit
    /// vectors while a level adds whole vectors onto whole vectors (float partials that fill
    /// vectors), then lane by lane. Every combination is the tree's, so the width changes no bit.
    fn combine_lanes(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        partials: &Partials,
        r: &ReduceInfo,
        levels: &[(usize, usize)],
    ) -> Result<Value, BackendError> {
        let unit = if r.dtype.is_float() {
            usize::from(partials.unit(r))
        } else {
            1
        };
        let ty = cl_type(r.dtype, unit as u8);
        let bytes = unit * r.dtype.size_bytes();
        let mut values = Vec::new();
        for k in 0..(partials.lanes as usize).div_ceil(unit) {
            let off = i32::try_from(r.offset + k * bytes).map_err(|_| internal("partials"))?;
            values.push(b.ins().stack_load(types::I64, ty, partials.slot, off));
        }
        let mut levels = levels.iter().peekable();
        let mut e = Emitter {
            b: &mut *b,
            w: unit as u8,
            imports: self.fx.imports,
        };
        while let Some(&&(half, offset)) = levels.peek() {
            if !(half.is_multiple_of(unit) && offset.is_multiple_of(unit)) {
                break;
            }
            for i in 0..half / unit {
                values[i] = e.combine(r.op, values[i], values[i + offset / unit], r.dtype)?;
            }
            values.truncate(offset / unit);
            levels.next();
        }
        if unit > 1 {
            values = values
                .iter()
                .flat_map(|&v| (0..unit as u8).map(move |lane| (v, lane)))
                .map(|(v, lane)| b.ins().extractlane(v, lane))
                .collect();
            let mut e = Emitter {
                b: &mut *b,
                w: 1,
                imports: self.fx.imports,
            };
            for &(half, offset) in levels {
                for i in 0..half {
                    values[i] = e.combine(r.op, values[i], values[i + offset], r.dtype)?;
                }
                values.truncate(offset);
            }
        }
        values.first().copied().ok_or_else(|| internal("no partials"))
    }

    /// Pushes the leaf the partials hold onto the binary counter of `tree` (see
    /// [`ReduceLeaves`]): merged `trailing_zeros(count)` times with the top of the stack, the
    /// older partials on the left, then stored at the new top; the blocked partials restart at
    /// the identity. Once per leaf (a thousand points or more), so the merges run lane by lane
    /// in whole vectors without care for speed.
    pub(super) fn push_leaf(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        partials: &Partials,
        tree: &LeafTree,
    ) -> Result<(), BackendError> {
        let count = b.ins().stack_load(types::I64, types::I64, tree.counter, 0);
        let next = b.ins().iadd_imm_s(count, 1);
        b.ins().stack_store(types::I64, next, tree.counter, 0);
        let merges = b.ins().ctz(next);
        let depth = b.ins().popcnt(count);
        let base = b.ins().stack_addr(self.fx.ptr, tree.stack, 0);
        let level_bytes = tree.level_bytes as i64;
        let zero = b.ins().iconst(types::I64, 0);
        self.emit_loop(b, zero, merges, 1, &[], &mut |g, b, i, _| {
            // The entry `i` below the top: level `depth - 1 - i`.
            let level = b.ins().isub(depth, i);
            let level = b.ins().iadd_imm_s(level, -1);
            let bytes = b.ins().imul_imm_s(level, level_bytes);
            let entry = b.ins().iadd(base, bytes);
            for (r, ty, off) in partials.blocked_chunks()? {
                let older = b.ins().load(ty, MemFlagsData::trusted(), entry, off);
                let leaf = b.ins().stack_load(types::I64, ty, partials.slot, off);
                let mut e = Emitter {
                    b: &mut *b,
                    w: partials.unit(r),
                    imports: g.fx.imports,
                };
                let merged = e.combine(r.op, older, leaf, r.dtype)?;
                b.ins().stack_store(types::I64, merged, partials.slot, off);
            }
            Ok(Vec::new())
        })?;
        let level = b.ins().isub(depth, merges);
        let bytes = b.ins().imul_imm_s(level, level_bytes);
        let entry = b.ins().iadd(base, bytes);
        for (r, ty, off) in partials.blocked_chunks()? {
            let leaf = b.ins().stack_load(types::I64, ty, partials.slot, off);
            b.ins().store(MemFlagsData::trusted(), leaf, entry, off);
            let mut e = Emitter {
                b: &mut *b,
                w: partials.unit(r),
                imports: self.fx.imports,
            };
            let restart = e.constant(identity(r.op, r.dtype)?);
            b.ins().stack_store(types::I64, restart, partials.slot, off);
        }
        Ok(())
    }

    /// Folds the stack of `tree` from the top (`s0 ∘ (s1 ∘ (… ∘ s_top))`) into the blocked
    /// partials, once every leaf is pushed: the entries are those of the set bits of the leaf
    /// count, known at compile time.
    pub(super) fn fold_leaves(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        partials: &Partials,
        tree: &LeafTree,
    ) -> Result<(), BackendError> {
        for (r, ty, off) in partials.blocked_chunks()? {
            let mut total = None;
            for level in (0..tree.entries_at_end).rev() {
                let at = i32::try_from(level * tree.level_bytes)
                    .ok()
                    .and_then(|l| l.checked_add(off))
                    .ok_or_else(|| internal("leaf stack too large"))?;
                let entry = b.ins().stack_load(types::I64, ty, tree.stack, at);
                total = Some(match total {
                    None => entry,
                    Some(newer) => Emitter {
                        b: &mut *b,
                        w: partials.unit(r),
                        imports: self.fx.imports,
                    }
                    .combine(r.op, entry, newer, r.dtype)?,
                });
            }
            if let Some(total) = total {
                b.ins().stack_store(types::I64, total, partials.slot, off);
            }
        }
        Ok(())
    }

    /// Finishes the accumulator `acc` (`w` lanes) of the reduction `(op, buf, dtype)` (a mean
    /// divides by `reduced_numel`) and stores it at element `index` of `buf`.
    pub(super) fn store_finished(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        (op, buf, dtype): (ReduceOp, BufId, DType),
        (acc, reduced_numel): (Value, usize),
        index: Value,
    ) -> Result<(), BackendError> {
        let mut e = Emitter {
            b: &mut *b,
            w,
            imports: self.fx.imports,
        };
        let finished = finish(&mut e, op, acc, dtype, reduced_numel)?;
        let base = self.base(buf)?;
        let byte = b.ins().imul_imm_s(index, dtype.size_bytes() as i64);
        let addr = b.ins().iadd(base, byte);
        b.ins().store(mem(), finished, addr, 0);
        Ok(())
    }

    /// The body's reductions in order: op, output buffer and its dtype.
    pub(super) fn reductions(&self) -> Result<Vec<(ReduceOp, BufId, DType)>, BackendError> {
        let mut reduces = Vec::new();
        for inst in &self.kernel().body {
            if let Inst::Reduce { op, buf, .. } = inst {
                let dtype = *self
                    .fx
                    .info
                    .buffer_dtypes
                    .get(buf.index())
                    .ok_or_else(|| internal("unknown buffer"))?;
                reduces.push((*op, *buf, dtype));
            }
        }
        Ok(reduces)
    }
}
