//! Scans (`cumsum`, `cumprod`, `cummax`, `cummin`) along one axis, either direction.

use super::*;

impl<'k> Gen<'_, 'k> {
    /// A kernel with scans: one unit per row of the innermost (scanned) dim, each row run point
    /// by point in the kernel's scan order with the scans' running accumulators carried from
    /// point to point in registers, starting at their ops' identities, so every scan folds
    /// sequentially, as the interpreters do: the same bits. A kernel of a few points (at most
    /// [`STRAIGHT_BUDGET`] instruction-equivalents) is written out without loops, as small
    /// elementwise kernels are.
    pub(super) fn emit_scan(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        order: ScanOrder,
    ) -> Result<KernelShape, BackendError> {
        let dims = self.kernel().dims.clone();
        let Some((&inner, outer)) = dims.split_last() else {
            return Err(internal("a scan in a kernel without loop dims"));
        };
        let outer = outer.to_vec();
        let rows: usize = outer.iter().product();
        let scans = self
            .kernel()
            .body
            .iter()
            .enumerate()
            .filter_map(|(i, inst)| match inst {
                Inst::Scan { op, dst, .. } => Some((i, op.reduce_op(), *dst)),
                _ => None,
            })
            .map(|(i, op, dst)| Ok((i, op, self.slot_dtype(dst)?)))
            .collect::<Result<Vec<_>, BackendError>>()?;
        self.cur.width = 1;
        self.cur.point_width = 1;
        self.cur.inner_axis = Some(dims.len() - 1);
        // The position of step `k` of a row in the scan's order.
        let position = |k: usize| match order {
            ScanOrder::Forward => k,
            ScanOrder::Reverse => inner - 1 - k,
        };
        let work = rows.saturating_mul(inner).saturating_mul(self.body_work());
        if work <= STRAIGHT_BUDGET {
            self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, _, _| {
                for row in 0..rows {
                    let ptrs = g.row_pointers(b, row, &outer)?;
                    g.hoist_row_indices(b, &ptrs)?;
                    let accs = g.scan_identities(b, &scans, 1, 1)?;
                    g.cur.scan_accs = scans.iter().map(|s| s.0).zip(accs).collect();
                    for k in 0..inner {
                        let at = g.const_i64(b, position(k) as i64);
                        g.emit_body(b, 1, at, &ptrs, &mut Vec::new())?;
                    }
                    g.cur.row_indices.clear();
                }
                Ok(Vec::new())
            })?;
            self.finish(b);
            let points = (rows * inner) as u64;
            return Ok(KernelShape::new(1, points, 1, self.min_points_per_thread()));
        }
        let zero = b.ins().iconst(types::I64, 0);
        let zeros = vec![zero; self.fx.info.accesses.len()];
        let last = i64::try_from(inner).map_err(|_| internal("a row beyond i64"))? - 1;
        if let Some(shape) = self.emit_scan_across_rows(b, lo, hi, order, &scans)? {
            return Ok(shape);
        }
        self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, row, _| {
            let offs = g.offsets(b, row, 0, &outer, &zeros);
            let ptrs = g.pointers(b, &offs)?;
            g.hoist_row_indices(b, &ptrs)?;
            let accs = g.scan_identities(b, &scans, 1, 1)?;
            g.emit_scan_row(b, order, last, SCAN_UNROLL, &accs, &mut |g, b, at, accs| {
                g.cur.scan_accs = scans.iter().map(|s| s.0).zip(accs.iter().copied()).collect();
                g.emit_body(b, 1, at, &ptrs, &mut Vec::new())?;
                Ok(g.cur.scan_accs.iter().map(|&(_, v)| v).collect())
            })?;
            g.cur.row_indices.clear();
            Ok(Vec::new())
        })?;
        self.finish(b);
        Ok(KernelShape::new(
            rows as u64,
            inner as u64,
            1,
            self.min_points_per_thread(),
        ))
    }

    /// The starting accumulators of `copies` sets of the `scans` (body index, op, dtype), each
    /// its op's identity at width `w`.
    pub(super) fn scan_identities(
        &self,
        b: &mut FunctionBuilder<'_>,
        scans: &[(usize, ReduceOp, DType)],
        w: u8,
        copies: usize,
    ) -> Result<Vec<Value>, BackendError> {
        let mut accs = Vec::with_capacity(copies * scans.len());
        for _ in 0..copies {
            for &(_, op, dtype) in scans {
                let value = identity(op, dtype)?;
                let imports = self.fx.imports;
                accs.push(
                    Emitter {
                        b: &mut *b,
                        w,
                        imports,
                    }
                    .constant(value),
                );
            }
        }
        Ok(accs)
    }

    /// The steps of one row of a kernel with scans, `last + 1` points in `order`: `step` at
    /// each point's position along the row, `unroll` points per pass of the loop and then one
    /// at a time, carrying the scans' accumulators `accs` from point to point.
    pub(super) fn emit_scan_row(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        order: ScanOrder,
        last: i64,
        unroll: i64,
        accs: &[Value],
        step: &mut LoopBody<'_, Self>,
    ) -> Result<(), BackendError> {
        let mut steps = |g: &mut Self, b: &mut FunctionBuilder<'_>, k: Value, accs: &[Value], count: i64| {
            let mut accs = accs.to_vec();
            for j in 0..count {
                let at = match order {
                    ScanOrder::Forward => g.add_imm(b, k, j),
                    ScanOrder::Reverse => {
                        let from = b.ins().iconst(types::I64, last - j);
                        b.ins().isub(from, k)
                    }
                };
                accs = step(g, b, at, &accs)?;
            }
            Ok(accs)
        };
        let start = b.ins().iconst(types::I64, 0);
        let end = b.ins().iconst(types::I64, last + 1);
        let (k, accs) = self.emit_loop(b, start, end, unroll, accs, &mut |g, b, k, accs| {
            steps(g, b, k, accs, unroll)
        })?;
        if unroll > 1 {
            self.emit_loop(b, k, end, 1, &accs, &mut |g, b, k, accs| steps(g, b, k, accs, 1))?;
        }
        Ok(())
    }

    /// A kernel with scans over rows `[R, N]` (at least a vector of rows): `w` rows at a time,
    /// one vector lane per row, each scan's accumulator a vector carried from step to step
    /// along the scanned dim, [`SCAN_ROW_VECTORS`] vectors of rows together; the rows past the
    /// last whole vector re-run the last `w` (the same values are stored again). Where
    /// neighbouring rows lie at neighbouring elements (a time-major batch scanned along its
    /// time axis) each step is a vector load, the body and a vector store per access; rows
    /// that lie apart (a batch-major one) gather their lanes, which still beats folding one
    /// row at a time: the lanes' dependency chains run side by side (1024 rows of 200 `f32`
    /// steps 0.6–0.8× a Rust loop's time, one row at a time about 1.05×). With several
    /// leading dims (`[L0, .., Lk, N]`, rows that do not coalesce, as a batch of trajectories
    /// scanned along time, `[B, T, D]` lowered to `[B, D, N = T]`) the lanes run along the
    /// first or the last of them (at least a vector long; one along which every access is
    /// contiguous when there is one), one unit of work per point of the others. `None`, and
    /// nothing emitted, for other kernels.
    pub(super) fn emit_scan_across_rows(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        order: ScanOrder,
        scans: &[(usize, ReduceOp, DType)],
    ) -> Result<Option<KernelShape>, BackendError> {
        let kernel = self.kernel();
        let Some((&inner, leading)) = kernel.dims.split_last() else {
            return Ok(None);
        };
        let leading = leading.to_vec();
        let rank = leading.len() + 1;
        let w = u8::try_from(kernel.schedule.vector_width).unwrap_or(1);
        let dtypes = kernel
            .slots
            .iter()
            .copied()
            .chain(self.fx.info.accesses.iter().map(|a| a.dtype));
        if leading.is_empty() || !matches!(w, 2 | 4) || !vectorizable(dtypes, w) {
            return Ok(None);
        }
        // The leading dim the lanes run along: the only one, or the first or the last (so the
        // others lie side by side, one unit's offsets unravelled over them), preferring one
        // along which every access is contiguous (or constant), then the longer.
        let contiguous = |j: usize| {
            self.fx
                .info
                .accesses
                .iter()
                .all(|a| a.strides.get(j).copied().unwrap_or(0) <= 1)
        };
        let lane_dim = [0, leading.len() - 1]
            .into_iter()
            .filter(|&j| leading[j] >= usize::from(w))
            .max_by_key(|&j| (contiguous(j), leading[j], j == 0));
        let Some(lane_dim) = lane_dim else {
            return Ok(None);
        };
        let lanes = leading[lane_dim];
        let others: Vec<usize> = leading
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != lane_dim)
            .map(|(_, &n)| n)
            .collect();
        let first_other = usize::from(lane_dim == 0);
        self.cur.width = w;
        self.cur.inner_axis = Some(lane_dim);
        self.hoist_splats(b);
        let zero = b.ins().iconst(types::I64, 0);
        let zeros = vec![zero; self.fx.info.accesses.len()];
        // Bytes (an index: counts) each access advances per step of the scanned dim.
        let step_bytes = self.last_dim_step_bytes(rank);
        let last = i64::try_from(inner).map_err(|_| internal("a row beyond i64"))? - 1;
        // `vectors` vectors of rows from `row` on (along the lane dim, from the pointers
        // `origin`), scanned together: their accumulators interleave, so the steps of
        // neighbouring rows overlap and each step of an access reads and writes `vectors`
        // neighbouring vectors (a time-major batch of `f32` rows reads a cache line per step
        // for four).
        let block =
            |g: &mut Self, b: &mut FunctionBuilder<'_>, origin: &[Value], row: Value, vectors: usize| {
                let accs = g.scan_identities(b, scans, w, vectors)?;
                let rows_at = (0..vectors)
                    .map(|v| g.add_imm(b, row, (v * usize::from(w)) as i64))
                    .collect::<Vec<_>>();
                // A pass of several vectors repays its loop's overhead in fewer steps.
                let unroll = (SCAN_UNROLL / vectors as i64).max(1);
                g.emit_scan_row(b, order, last, unroll, &accs, &mut |g, b, at, accs| {
                    let mut next = accs.to_vec();
                    let ptrs = origin
                        .iter()
                        .zip(&step_bytes)
                        .map(|(&p, &step)| match step {
                            0 => p,
                            _ => {
                                let moved = g.scale(b, at, step);
                                g.add(b, p, moved)
                            }
                        })
                        .collect::<Vec<_>>();
                    g.hoist_row_indices(b, &ptrs)?;
                    for (v, &row_at) in rows_at.iter().enumerate() {
                        let mine = &mut next[v * scans.len()..(v + 1) * scans.len()];
                        g.cur.scan_accs = scans.iter().map(|s| s.0).zip(mine.iter().copied()).collect();
                        g.emit_body(b, w, row_at, &ptrs, &mut Vec::new())?;
                        for (slot, &(_, acc)) in mine.iter_mut().zip(&g.cur.scan_accs) {
                            *slot = acc;
                        }
                    }
                    g.cur.row_indices.clear();
                    Ok(next)
                })
            };
        // Rows `start..end` of the lane dim from `origin`: groups of vectors, then single
        // vectors, the ragged end re-running the last whole one.
        let rows = |g: &mut Self, b: &mut FunctionBuilder<'_>, origin: &[Value], start: Value, end: Value| {
            let group = SCAN_ROW_VECTORS * usize::from(w);
            let (at, _) = g.emit_loop(b, start, end, group as i64, &[], &mut |g, b, row, _| {
                block(g, b, origin, row, SCAN_ROW_VECTORS)?;
                Ok(Vec::new())
            })?;
            g.emit_vector_positions(b, at, end, &mut |g, b, row| block(g, b, origin, row, 1))
        };
        let min_points = self.min_points_per_thread();
        let shape = if others.is_empty() {
            // One unit per row: a thread's range of rows is at least a vector long.
            let origin = self.pointers(b, &zeros)?;
            rows(self, b, &origin, lo, hi)?;
            KernelShape::new(lanes as u64, inner as u64, w, min_points)
        } else {
            // One unit per point of the other leading dims, each running the whole lane dim.
            let units: usize = others.iter().product();
            let end = b.ins().iconst(types::I64, lanes as i64);
            self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, unit, _| {
                let offs = g.offsets(b, unit, first_other, &others, &zeros);
                let origin = g.pointers(b, &offs)?;
                let start = b.ins().iconst(types::I64, 0);
                rows(g, b, &origin, start, end)?;
                Ok(Vec::new())
            })?;
            KernelShape::new(units as u64, (lanes * inner) as u64, w, min_points)
        };
        self.finish(b);
        Ok(Some(shape))
    }
}
