//! Reductions with their outputs in lanes: `w` neighbouring outputs accumulated in one vector, lane by lane, and their tiled form.

use super::*;

/// The reduced rows of a reduction with its outputs in lanes ([`Gen::emit_across_tiles`]).
pub(super) struct AcrossRow<'a> {
    /// Bytes each access advances per point of the reduced row.
    pub(super) row_steps: &'a [i64],
    /// Points in the reduced row.
    pub(super) inner: usize,
    /// Outputs in a row of outputs.
    pub(super) cols: usize,
    /// Points each output reduces (a mean divides by it).
    pub(super) reduced_numel: usize,
}

/// Innermost reduced rows up to this long are unrolled (reductions with outputs in lanes).
const UNROLL_ROW: usize = 16;

/// What [`Gen::emit_output_group`] needs to reduce a group of outputs in lanes.
#[derive(Clone, Copy)]
pub(super) struct GroupPlan<'a> {
    /// Lanes: outputs per group.
    pub(super) w: u8,
    /// The body's reductions, in order.
    pub(super) reduces: &'a [(ReduceOp, BufId, DType)],
    /// Bytes each access advances per point of the innermost reduced dim.
    pub(super) row_steps: &'a [i64],
    /// Loads read as rows and transposed ([`Gen::transposed_rows`]).
    pub(super) transposable: &'a [(usize, usize)],
    /// Points in the innermost reduced dim.
    pub(super) inner: usize,
    /// Outer reduced rows per output.
    pub(super) rows_reduced: usize,
    /// The first reduced loop dim.
    pub(super) split: usize,
    /// The reduced dims before the innermost.
    pub(super) outer_reduced: &'a [usize],
    /// Outputs in a row of outputs.
    pub(super) cols: usize,
    /// Points each output reduces.
    pub(super) reduced_numel: usize,
    /// A single output whose short row is evaluated `pw` points at a time.
    pub(super) points_in_vectors: bool,
    pub(super) pw: usize,
    /// Loop dims of the kernel.
    pub(super) rank: usize,
}

impl<'k> Gen<'_, 'k> {
    /// Whether a reduction kernel runs with its outputs in the vector lanes
    /// ([`Gen::emit_reduction_across`]): when each output accumulates in one sequential
    /// accumulator (`reduce_lanes` 1, the short rows of small matrix products) and the
    /// innermost kept dim holds at least a vector of outputs.
    pub(super) fn outputs_in_lanes(&self, reduce_dims: usize) -> bool {
        let kernel = self.kernel();
        let w = usize::from(self.cur.width);
        let split = kernel.dims.len() - reduce_dims;
        let reduces_vectorise = self
            .reductions()
            .is_ok_and(|r| r.iter().all(|&(_, _, dtype)| dtype != DType::Bool));
        w > 1
            && kernel.schedule.reduce_lanes == 1
            && split >= 1
            && kernel.dims[split - 1] >= w
            && reduces_vectorise
    }

    /// Reduction kernels with one accumulator per output (`reduce_lanes` 1), with one output
    /// per vector lane: `w` neighbouring outputs along the
    /// innermost kept dim accumulate together, each lane adding its own points in row-major
    /// order, which is the order of a single sequential accumulator, so the bits are those of
    /// `reduce_lanes` 1. At width 1 (too few outputs in a row to fill a vector, or a reduction
    /// to one value) the same code runs one output at a time. A short innermost reduced row (a small matrix product's 3 to 12
    /// points) is unrolled, and the accumulators stay in registers. Loads that the outputs
    /// share (stride 0 along the vector dim) are splats, contiguous ones vector loads, others
    /// gathered by lane. The vector positions end like an elementwise row: the last vector
    /// re-runs at `end - w`, storing a few outputs again with the same values.
    pub(super) fn emit_reduction_across(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        reduce_dims: usize,
    ) -> Result<KernelShape, BackendError> {
        let kernel = self.kernel();
        let w = self.cur.width;
        let dims = kernel.dims.clone();
        let rank = dims.len();
        let split = rank - reduce_dims;
        // A reduction to one value has no kept dim: one column of one row.
        let vec_axis = split.checked_sub(1);
        let cols = vec_axis.map_or(1, |a| dims[a]);
        let outer_leading = dims[..vec_axis.unwrap_or(0)].to_vec();
        let reduced = dims[split..].to_vec();
        let reduced_numel: usize = reduced.iter().product();
        let inner = if reduce_dims > 0 { dims[rank - 1] } else { 1 };
        let outer_reduced = reduced[..reduce_dims.saturating_sub(1)].to_vec();
        let rows_reduced: usize = outer_reduced.iter().product();
        self.cur.inner_axis = vec_axis;
        // Bytes each access advances per point of the innermost reduced dim.
        let row_steps: Vec<i64> = self
            .fx
            .info
            .accesses
            .iter()
            .map(|a| {
                let stride = if reduce_dims > 0 {
                    a.strides.get(rank - 1).copied().unwrap_or(0)
                } else {
                    0
                };
                (stride * a.elem_bytes()) as i64
            })
            .collect();
        let reduces = self.reductions()?;
        let tiles = self.cur.tiles.take().filter(|_| rows_reduced == 1);
        // A single output (no kept dim) with a short row: its points are evaluated `pw` at a
        // time, as the body's vector code, and their lanes added to the scalar accumulator in
        // order, which is the order of one accumulator, so the bits are the same.
        let pw = usize::from(self.cur.point_width);
        let points_in_vectors = w == 1
            && vec_axis.is_none()
            && reduce_dims > 0
            && pw > 1
            && inner >= pw
            && inner <= UNROLL_ROW
            && reduces.iter().all(|&(_, _, dtype)| dtype != DType::Bool);

        // Loads of one element per output lane whose rows run contiguously along the reduced
        // dim, in full 128-bit vectors: read `w` points of each output's row as one vector and
        // transpose (`Gen::transposed_rows`).
        let transposable = if w > 1 && !points_in_vectors && reduce_dims > 0 {
            self.transposable_loads(&row_steps)
        } else {
            Vec::new()
        };

        let plan = GroupPlan {
            w,
            reduces: &reduces,
            row_steps: &row_steps,
            transposable: &transposable,
            inner,
            rows_reduced,
            split,
            outer_reduced: &outer_reduced,
            cols,
            reduced_numel,
            points_in_vectors,
            pw,
            rank,
        };
        let group =
            |g: &mut Self, b: &mut FunctionBuilder<'_>, row: Value, row_offs: &[Value], col: Value| {
                g.emit_output_group(b, &plan, (row, row_offs), col)
            };
        let across = AcrossRow {
            row_steps: &row_steps,
            inner,
            cols,
            reduced_numel,
        };

        let zero = b.ins().iconst(types::I64, 0);
        let zeros = vec![zero; self.fx.info.accesses.len()];
        let shape = if vec_axis == Some(0) {
            // The units are the outputs themselves: a thread's chunk is a range of columns.
            if let Some(plan) = &tiles {
                self.emit_across_tiles(b, (plan, &across), (zero, &zeros), (lo, hi))?;
            } else {
                self.emit_vector_positions(b, lo, hi, &mut |g, b, col| group(g, b, zero, &zeros, col))?;
            }
            KernelShape::new(cols as u64, reduced_numel as u64, w, self.min_points_per_thread())
        } else {
            let rows: usize = outer_leading.iter().product();
            let cols_end = b.ins().iconst(types::I64, cols as i64);
            // A short row of outputs whose points are all unrolled (a batch of small matrix
            // products) is written out: its vector positions (the ragged end's included, as
            // the loop would run it) at constant columns, with no loop over them.
            let written_out = (tiles.is_none()
                && rows_reduced == 1
                && inner <= UNROLL_ROW
                && written_out_position_count(cols, w)
                    .saturating_mul(reduced_numel)
                    .saturating_mul(self.body_work())
                    <= UNIT_BUDGET)
                .then(|| written_out_positions(cols, w));
            self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, row, _| {
                let row_offs = g.offsets(b, row, 0, &outer_leading, &zeros);
                let start = b.ins().iconst(types::I64, 0);
                if let Some(positions) = &written_out {
                    for &at in positions {
                        let col = g.const_i64(b, at as i64);
                        group(g, b, row, &row_offs, col)?;
                    }
                } else if let Some(plan) = &tiles {
                    g.emit_across_tiles(b, (plan, &across), (row, &row_offs), (start, cols_end))?;
                } else {
                    g.emit_vector_positions(b, start, cols_end, &mut |g, b, col| {
                        group(g, b, row, &row_offs, col)
                    })?;
                }
                Ok(Vec::new())
            })?;
            KernelShape::new(
                rows as u64,
                (cols * reduced_numel) as u64,
                w,
                self.min_points_per_thread(),
            )
        };
        self.finish(b);
        Ok(shape)
    }

    /// The loads of one element per output lane whose rows run contiguously along the reduced
    /// dim (`row_steps`), in full 128-bit vectors: `(body index, access)` of each.
    fn transposable_loads(&self, row_steps: &[i64]) -> Vec<(usize, usize)> {
        let w = self.cur.width;
        let kernel = self.kernel();
        kernel
            .body
            .iter()
            .enumerate()
            .filter_map(|(i, inst)| {
                let Inst::Load { dst, .. } = inst else { return None };
                let k = self.fx.info.access_of.get(i).copied().flatten()?;
                let access = &self.fx.info.accesses[k];
                let dtype = self.slot_dtype(*dst).ok()?;
                let bytes = access.elem_bytes();
                let gathered = !matches!(self.inner_stride(k), 0 | 1);
                let along_row = row_steps.get(k).copied() == Some(bytes as i64);
                (gathered && along_row && dtype != DType::Bool && bytes * usize::from(w) == 16)
                    .then_some((i, k))
            })
            .collect()
    }

    /// One group of `w` outputs at column `col` of row `row`, whose offsets are `row_offs`:
    /// its accumulators over every reduced row, finished and stored.
    fn emit_output_group(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &GroupPlan<'_>,
        (row, row_offs): (Value, &[Value]),
        col: Value,
    ) -> Result<(), BackendError> {
        let g = self;
        let GroupPlan {
            w,
            reduces,
            rows_reduced,
            split,
            outer_reduced,
            cols,
            reduced_numel,
            ..
        } = *plan;
        let mut accs = Vec::with_capacity(reduces.len());
        for &(op, _, dtype) in reduces {
            let mut e = Emitter {
                b: &mut *b,
                w,
                imports: g.fx.imports,
            };
            accs.push(e.constant(identity(op, dtype)?));
        }
        if rows_reduced == 1 {
            let ptrs = g.pointers(b, row_offs)?;
            accs = g.emit_reduced_row(b, plan, &ptrs, &accs, col)?;
        } else {
            let start = b.ins().iconst(types::I64, 0);
            let end = b.ins().iconst(types::I64, rows_reduced as i64);
            let (_, carried) = g.emit_loop(b, start, end, 1, &accs, &mut |g, b, rr, carried| {
                let offs = g.offsets(b, rr, split, outer_reduced, row_offs);
                let ptrs = g.pointers(b, &offs)?;
                g.emit_reduced_row(b, plan, &ptrs, carried, col)
            })?;
            accs = carried;
        }
        g.store_reduced(b, &accs, row, cols, col, reduced_numel)
    }

    /// The points of one outer reduced row (from `ptrs`) folded into the accumulators `accs`
    /// of the group at column `col`: the innermost reduced dim, unrolled when short.
    fn emit_reduced_row(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &GroupPlan<'_>,
        ptrs: &[Value],
        accs: &[Value],
        col: Value,
    ) -> Result<Vec<Value>, BackendError> {
        let g = self;
        let GroupPlan {
            w,
            reduces,
            row_steps,
            transposable,
            inner,
            points_in_vectors,
            ..
        } = *plan;
        let mut accs = accs.to_vec();
        if points_in_vectors {
            return g.reduce_points_in_vectors(b, plan, ptrs, accs);
        }
        let point = |g: &mut Self, b: &mut FunctionBuilder<'_>, ptrs: &[Value], accs: &mut [Value]| {
            let mut values = Vec::new();
            g.emit_body(b, w, col, ptrs, &mut values)?;
            for ((acc, (_, value)), &(op, _, dtype)) in accs.iter_mut().zip(values).zip(reduces) {
                let mut e = Emitter {
                    b: &mut *b,
                    w,
                    imports: g.fx.imports,
                };
                *acc = e.combine(op, *acc, value, dtype)?;
            }
            Ok::<(), BackendError>(())
        };
        // `w` points at a time where rows can be read as vectors and transposed (the
        // gathered loads, one element per output, become `w` vector loads and a
        // transpose), then single points.
        let chunked = if transposable.is_empty() {
            0
        } else {
            inner - inner % usize::from(w)
        };
        let chunk = |g: &mut Self, b: &mut FunctionBuilder<'_>, at: &[Value], accs: &mut [Value]| {
            let points = g.transposed_rows(b, transposable, col, at)?;
            for t in 0..usize::from(w) {
                let at_t: Vec<Value> = at
                    .iter()
                    .zip(row_steps)
                    .map(|(&p, &step)| g.add_imm(b, p, step * t as i64))
                    .collect();
                for (&(i, _), vectors) in transposable.iter().zip(&points) {
                    g.cur.preloaded.insert(i, vectors[t]);
                }
                let done = point(g, b, &at_t, accs);
                g.cur.preloaded.clear();
                done?;
            }
            Ok::<(), BackendError>(())
        };
        if inner <= UNROLL_ROW {
            let at_j = |g: &mut Self, b: &mut FunctionBuilder<'_>, j: usize| -> Vec<Value> {
                ptrs.iter()
                    .zip(row_steps)
                    .map(|(&p, &step)| g.add_imm(b, p, step * j as i64))
                    .collect()
            };
            for j0 in (0..chunked).step_by(usize::from(w)) {
                let at = at_j(g, b, j0);
                chunk(g, b, &at, &mut accs)?;
            }
            for j in chunked..inner {
                let at = at_j(g, b, j);
                point(g, b, &at, &mut accs)?;
            }
            return Ok(accs);
        }
        let start = b.ins().iconst(types::I64, 0);
        let end = b.ins().iconst(types::I64, inner as i64);
        let accs = if chunked > 0 {
            let chunks_end = b.ins().iconst(types::I64, chunked as i64);
            let (_, accs) = g.emit_loop(
                b,
                start,
                chunks_end,
                i64::from(w),
                &accs,
                &mut |g, b, j, carried| {
                    let mut accs = carried.to_vec();
                    let at = g.point_pointers(b, ptrs, row_steps, j);
                    chunk(g, b, &at, &mut accs)?;
                    Ok(accs)
                },
            )?;
            accs
        } else {
            accs
        };
        let start = b.ins().iconst(types::I64, chunked as i64);
        let (_, accs) = g.emit_loop(b, start, end, 1, &accs, &mut |g, b, j, carried| {
            let mut accs = carried.to_vec();
            let at = g.point_pointers(b, ptrs, row_steps, j);
            point(g, b, &at, &mut accs)?;
            Ok(accs)
        })?;
        Ok(accs)
    }

    /// A single output's short row evaluated `pw` points at a time along the row's own axis,
    /// then single points, each lane folded into `accs` in order.
    fn reduce_points_in_vectors(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &GroupPlan<'_>,
        ptrs: &[Value],
        mut accs: Vec<Value>,
    ) -> Result<Vec<Value>, BackendError> {
        let g = self;
        let GroupPlan {
            reduces,
            inner,
            pw,
            rank,
            ..
        } = *plan;
        // Positions along the row's own axis: vectors of `pw` points, then single
        // points for what is left.
        let outer = g.cur.inner_axis;
        g.cur.inner_axis = Some(rank - 1);
        let chunks = inner / pw;
        let width = u8::try_from(pw).unwrap_or(1);
        for (start, count) in (0..chunks)
            .map(|c| (c * pw, width))
            .chain((chunks * pw..inner).map(|j| (j, 1)))
        {
            let at = b.ins().iconst(types::I64, start as i64);
            let mut values = Vec::new();
            g.emit_body(b, count, at, ptrs, &mut values)?;
            for ((acc, (_, value)), &(op, _, dtype)) in accs.iter_mut().zip(values).zip(reduces) {
                for lane in 0..count {
                    let mut e = Emitter {
                        b: &mut *b,
                        w: count,
                        imports: g.fx.imports,
                    };
                    let x = if count == 1 {
                        value
                    } else {
                        e.lane(value, dtype, lane)
                    };
                    let mut e = Emitter {
                        b: &mut *b,
                        w: 1,
                        imports: g.fx.imports,
                    };
                    *acc = e.combine(op, *acc, x, dtype)?;
                }
            }
        }
        g.cur.inner_axis = outer;
        Ok(accs)
    }

    /// For each `(body index, access)` of `loads` (an access of one element per output lane,
    /// contiguous along the reduced row, in 128-bit vectors): the `w` points from `ptrs` on of
    /// the `w` outputs' rows at column `col`, as one vector per point (lane `l`: output
    /// `col + l`). Each row is one vector load; the `w × w` block is transposed with
    /// interleaving shuffles (`unpcklps`/`unpckhps`, then `unpcklpd`/`unpckhpd` for 32-bit
    /// lanes).
    pub(super) fn transposed_rows(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        loads: &[(usize, usize)],
        col: Value,
        ptrs: &[Value],
    ) -> Result<Vec<Vec<Value>>, BackendError> {
        let w = self.cur.width;
        let mut out = Vec::with_capacity(loads.len());
        for &(i, k) in loads {
            let Some(Inst::Load { dst, buf, .. }) = self.kernel().body.get(i).cloned() else {
                return Err(internal("transposed row of a non-load"));
            };
            let dtype = self.slot_dtype(dst)?;
            let base = self.base(buf)?;
            let ty = cl_type(dtype, w);
            let rows: Vec<Value> = (0..w)
                .map(|lane| {
                    let addr = self.address(b, k, base, col, ptrs, lane);
                    let row = b.ins().load(ty, mem(), addr, 0);
                    b.ins().bitcast(types::I8X16, bitcast_flags(), row)
                })
                .collect();
            // Byte masks of `shuffle(a, b)`: bytes 0–15 from `a`, 16–31 from `b`.
            let interleave = |b: &mut FunctionBuilder<'_>, x: Value, y: Value, lane_bytes: u8, high: bool| {
                let start = if high { 16 / 2 } else { 0 };
                let mut mask = [0u8; 16];
                for (n, byte) in mask.iter_mut().enumerate() {
                    let n = n as u8;
                    let (pair, within) = (n / (2 * lane_bytes), n % (2 * lane_bytes));
                    let from_y = within >= lane_bytes;
                    let offset = start as u8 + pair * lane_bytes + within % lane_bytes;
                    *byte = if from_y { 16 + offset } else { offset };
                }
                let mask = b.func.dfg.immediates.push(ConstantData::from(&mask[..]));
                b.ins().shuffle(x, y, mask)
            };
            let columns = if w == 2 {
                vec![
                    interleave(b, rows[0], rows[1], 8, false),
                    interleave(b, rows[0], rows[1], 8, true),
                ]
            } else {
                let low01 = interleave(b, rows[0], rows[1], 4, false);
                let low23 = interleave(b, rows[2], rows[3], 4, false);
                let high01 = interleave(b, rows[0], rows[1], 4, true);
                let high23 = interleave(b, rows[2], rows[3], 4, true);
                vec![
                    interleave(b, low01, low23, 8, false),
                    interleave(b, low01, low23, 8, true),
                    interleave(b, high01, high23, 8, false),
                    interleave(b, high01, high23, 8, true),
                ]
            };
            out.push(
                columns
                    .into_iter()
                    .map(|v| b.ins().bitcast(ty, bitcast_flags(), v))
                    .collect(),
            );
        }
        Ok(out)
    }

    /// The addresses of point `j` of a reduced row: each access's `ptrs` entry advanced by `j`
    /// of its `steps` (bytes per point; a step of 0 keeps the address).
    pub(super) fn point_pointers(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        ptrs: &[Value],
        steps: &[i64],
        j: Value,
    ) -> Vec<Value> {
        ptrs.iter()
            .zip(steps)
            .map(|(&p, &step)| {
                if step == 0 {
                    p
                } else {
                    let bytes = self.scale(b, j, step);
                    self.add(b, p, bytes)
                }
            })
            .collect()
    }

    /// Finishes the accumulators `accs` of the `w` outputs at column `col` of row `row` (a
    /// mean divides by `reduced_numel`) and stores them at `row * cols + col ..`.
    pub(super) fn store_reduced(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        accs: &[Value],
        row: Value,
        cols: usize,
        col: Value,
        reduced_numel: usize,
    ) -> Result<(), BackendError> {
        let w = self.cur.width;
        let first = b.ins().imul_imm_s(row, cols as i64);
        let first = b.ins().iadd(first, col);
        for (&acc, reduction) in accs.iter().zip(self.reductions()?) {
            self.store_finished(b, w, reduction, (acc, reduced_numel), first)?;
        }
        Ok(())
    }

    /// The groups of `w` outputs at the vector positions of columns `start..end` (at least a
    /// vector long) of row `row` (`row_offs`: its offsets), in tiles of as many groups as
    /// `TILE` cells hold (`TILE / (inner * w)`, each group's reduced row staged `w` lanes per
    /// point): each ops segment runs over the tile's groups and their rows' points, each
    /// routine once over all the tile's staged values (long calls keep the routines in their
    /// vector loops), then each group folds its own values in row order into one accumulator
    /// per lane, as the untiled loop folds them, and stores its outputs. The last group of a
    /// ragged end starts at `end - w`, as [`Gen::emit_vector_positions`] does, and stores a few
    /// outputs again with the same values. `(row_index, row_offs)`: the row of outputs and
    /// each access's offset at it; `(start, end)`: the outputs of the row.
    pub(super) fn emit_across_tiles(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (plan, row): (&TilePlan, &AcrossRow<'_>),
        (row_index, row_offs): (Value, &[Value]),
        (start, end): (Value, Value),
    ) -> Result<(), BackendError> {
        /// Groups whose rows fold side by side.
        const FOLD_GROUPS: i64 = 4;
        let w = self.cur.width;
        let lanes = i64::from(w);
        let point_cells = (row.inner as i64) * lanes;
        // An empty reduced row (no points) stages nothing: one group per tile then.
        let per_tile = (TILE as i64).checked_div(point_cells).unwrap_or(1).max(1);
        let ptrs = self.pointers(b, row_offs)?;
        let reduces = self.reductions()?;
        let cells = reduces
            .iter()
            .zip(&plan.reduced)
            .map(|(&(op, _, dtype), def)| {
                plan.staged
                    .get(def)
                    .map(|&(stack, cell)| (op, dtype, stack, i64::from(cell)))
                    .ok_or_else(|| internal("reduced value not staged"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if cells.len() != reduces.len() {
            return Err(internal("tiled reduction without its reduced values"));
        }
        self.emit_while_below(b, start, end, &mut |g, b, first| {
            // The tile's groups: up to `per_tile`, as many as cover what is left of the row.
            let left = b.ins().isub(end, first);
            let left = b.ins().iadd_imm_s(left, lanes - 1);
            let lanes_value = b.ins().iconst(types::I64, lanes);
            let groups = b.ins().udiv(left, lanes_value);
            let cap = b.ins().iconst(types::I64, per_tile);
            let groups = b.ins().umin(groups, cap);
            let last = b.ins().iadd_imm_s(end, -lanes);
            let position = |b: &mut FunctionBuilder<'_>, k: Value| {
                let offset = b.ins().imul_imm_s(k, lanes);
                let col = b.ins().iadd(first, offset);
                b.ins().umin(col, last)
            };
            let zero = b.ins().iconst(types::I64, 0);
            let points = b.ins().iconst(types::I64, row.inner as i64);
            for segment in &plan.segments {
                match segment {
                    Segment::Ops { insts, loads } => {
                        g.emit_loop(b, zero, groups, 1, &[], &mut |g, b, k, _| {
                            let col = position(b, k);
                            let group_cell = b.ins().imul_imm_s(k, point_cells);
                            g.emit_loop(b, zero, points, 1, &[], &mut |g, b, j, _| {
                                let at = g.point_pointers(b, &ptrs, row.row_steps, j);
                                let point = g.scale(b, j, lanes);
                                let cell = g.add(b, group_cell, point);
                                g.emit_segment(
                                    b,
                                    (w, plan),
                                    (insts, loads),
                                    SegmentAt::Lanes { pos: col, cell },
                                    &at,
                                )?;
                                Ok(Vec::new())
                            })?;
                            Ok(Vec::new())
                        })?;
                    }
                    Segment::Call { .. } => {
                        let count = b.ins().imul_imm_s(groups, point_cells);
                        g.emit_routine_call(b, plan, segment, first, count, &ptrs)?;
                    }
                }
            }
            // Each group folds its values in row order, one dependent add per point: `FOLD_GROUPS`
            // groups fold side by side (independent chains hide the add's latency), then single
            // groups fold what is left.
            let fold = |g: &mut Self, b: &mut FunctionBuilder<'_>, k: Value, count: i64| {
                let mut accs = Vec::with_capacity(reduces.len() * count as usize);
                for _ in 0..count {
                    for &(op, _, dtype) in &reduces {
                        let mut e = Emitter {
                            b: &mut *b,
                            w,
                            imports: g.fx.imports,
                        };
                        accs.push(e.constant(identity(op, dtype)?));
                    }
                }
                let (_, accs) = g.emit_loop(b, zero, points, 1, &accs, &mut |g, b, j, accs| {
                    let mut accs = accs.to_vec();
                    let row_cell = b.ins().imul_imm_s(k, row.inner as i64);
                    let row_cell = b.ins().iadd(row_cell, j);
                    for (n, group_accs) in accs.chunks_mut(reduces.len()).enumerate() {
                        let cell = b.ins().iadd_imm_s(row_cell, n as i64 * row.inner as i64);
                        for (acc, &(op, dtype, stack, bytes)) in group_accs.iter_mut().zip(&cells) {
                            let base = g.stack_base(b, stack);
                            let offset = g.scale(b, cell, bytes * lanes);
                            let addr = g.add(b, base, offset);
                            let value = b.ins().load(cl_type(dtype, w), MemFlagsData::trusted(), addr, 0);
                            let mut e = Emitter {
                                b: &mut *b,
                                w,
                                imports: g.fx.imports,
                            };
                            *acc = e.combine(op, *acc, value, dtype)?;
                        }
                    }
                    Ok(accs)
                })?;
                for (n, group_accs) in accs.chunks(reduces.len()).enumerate() {
                    let kn = b.ins().iadd_imm_s(k, n as i64);
                    let col = position(b, kn);
                    g.store_reduced(b, group_accs, row_index, row.cols, col, row.reduced_numel)?;
                }
                Ok::<(), BackendError>(())
            };
            let (k, _) = g.emit_loop(b, zero, groups, FOLD_GROUPS, &[], &mut |g, b, k, _| {
                fold(g, b, k, FOLD_GROUPS)?;
                Ok(Vec::new())
            })?;
            g.emit_loop(b, k, groups, 1, &[], &mut |g, b, k, _| {
                fold(g, b, k, 1)?;
                Ok(Vec::new())
            })?;
            Ok(b.ins().iadd_imm_s(first, per_tile * lanes))
        })
    }
}
