//! Elementwise kernels: written out without loops when small, units of small blocks, rows of vector loops.

use super::*;

/// How many positions [`row_positions`] returns for `n` and `width`, without building them: a
/// row's length comes from the user's shapes, so a plan checks it against its budget first.
pub(super) fn row_position_count(n: usize, width: u8) -> usize {
    let w = usize::from(width.max(1));
    n / w + n % w
}

/// The positions and widths an elementwise row of `n` points written out without a loop runs
/// at: whole vectors of `width` from 0, then the points left over one by one (each point
/// computed and stored once).
pub(super) fn row_positions(n: usize, width: u8) -> Vec<(usize, u8)> {
    let w = usize::from(width.max(1));
    let whole = n / w * w;
    (0..whole)
        .step_by(w)
        .map(|at| (at, width.max(1)))
        .chain((whole..n).map(|at| (at, 1)))
        .collect()
}

/// How many positions [`written_out_positions`] returns, without building them.
pub(super) fn written_out_position_count(n: usize, width: u8) -> usize {
    let w = usize::from(width.max(1));
    n / w + usize::from(!n.is_multiple_of(w) && n >= w)
}

/// The positions [`Gen::emit_vector_positions`] runs a body at over `0..n` in vectors of `w`
/// (at least one vector long when `w > 1`): every whole vector, then `n - w` for a ragged end.
pub(super) fn written_out_positions(n: usize, width: u8) -> Vec<usize> {
    let w = usize::from(width.max(1));
    let mut positions: Vec<usize> = (0..n / w).map(|i| i * w).collect();
    if !n.is_multiple_of(w) && n >= w {
        positions.push(n - w);
    }
    positions
}

impl<'k> Gen<'_, 'k> {
    /// Elementwise kernels: written out when small, units of small blocks, else a vector loop
    /// over the innermost dimension of each row.
    pub(super) fn emit_elementwise(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
    ) -> Result<KernelShape, BackendError> {
        let dims = self.kernel().dims.clone();
        let rank = dims.len();
        let (outer, inner) = match dims.split_last() {
            Some((&inner, outer)) => (outer, inner),
            None => (&[][..], 1),
        };
        if let Some(shape) = self.emit_written_out(b, lo, hi, outer, inner)? {
            return Ok(shape);
        }
        if let Some(shape) = self.emit_units_written_out(b, lo, hi, &dims)? {
            return Ok(shape);
        }
        let zero = b.ins().iconst(types::I64, 0);
        let zeros = vec![zero; self.fx.info.accesses.len()];
        let shape = if rank <= 1 {
            let n = dims.first().copied().unwrap_or(1) as u64;
            let ptrs = self.pointers(b, &zeros)?;
            self.hoist_row_indices(b, &ptrs)?;
            self.emit_elementwise_loop(b, lo, hi, n as usize, &ptrs)?;
            self.cur.row_indices.clear();
            KernelShape::new(n, 1, self.cur.width, self.min_points_per_thread())
        } else {
            let inner = dims[rank - 1];
            let rows: usize = dims[..rank - 1].iter().product();
            let outer_dims = dims[..rank - 1].to_vec();
            let inner_count = b.ins().iconst(types::I64, inner as i64);
            self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, row, _| {
                let offs = g.offsets(b, row, 0, &outer_dims, &zeros);
                let ptrs = g.pointers(b, &offs)?;
                let zero = b.ins().iconst(types::I64, 0);
                g.hoist_row_indices(b, &ptrs)?;
                g.emit_elementwise_loop(b, zero, inner_count, inner, &ptrs)?;
                g.cur.row_indices.clear();
                Ok(Vec::new())
            })?;
            KernelShape::new(
                rows as u64,
                inner as u64,
                self.cur.width,
                self.min_points_per_thread(),
            )
        };
        self.finish(b);
        Ok(shape)
    }

    /// An elementwise kernel of rows of `inner` points, one per point of the loop dims of
    /// extents `outer` (none: one row), written out without loops when it fits
    /// [`STRAIGHT_BUDGET`] (`None`, and nothing emitted, otherwise): one unit of work (so the
    /// pool never splits it; it has too few points to be split anyway), row by row at constant
    /// pointers, position by position. Ends the function.
    pub(super) fn emit_written_out(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        outer: &[usize],
        inner: usize,
    ) -> Result<Option<KernelShape>, BackendError> {
        let rows: usize = outer.iter().product();
        let work = rows
            .saturating_mul(row_position_count(inner, self.cur.width))
            .saturating_mul(self.written_out_work());
        if self.cur.tiles.is_some() || work > STRAIGHT_BUDGET {
            return Ok(None);
        }
        let positions = row_positions(inner, self.cur.width);
        let mut body = |g: &mut Self, b: &mut FunctionBuilder<'_>, _: Value, _: &[Value]| {
            for row in 0..rows {
                let ptrs = g.row_pointers(b, row, outer)?;
                g.emit_written_row(b, &ptrs, &positions)?;
            }
            Ok(Vec::new())
        };
        if self.fx.exit.is_some() {
            // In a program's one function the kernel runs its one unit exactly once.
            body(self, b, lo, &[])?;
        } else {
            self.emit_loop(b, lo, hi, 1, &[], &mut body)?;
        }
        self.finish(b);
        let points = (rows * inner) as u64;
        Ok(Some(KernelShape::new(
            1,
            points,
            self.cur.width,
            self.min_points_per_thread(),
        )))
    }

    /// The body written out at each `(position, width)` of one row whose pointers are `ptrs`.
    pub(super) fn emit_written_row(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        ptrs: &[Value],
        positions: &[(usize, u8)],
    ) -> Result<(), BackendError> {
        self.hoist_row_indices(b, ptrs)?;
        for &(at, w) in positions {
            let at = self.const_i64(b, at as i64);
            self.emit_body(b, w, at, ptrs, &mut Vec::new())?;
        }
        self.cur.row_indices.clear();
        Ok(())
    }

    /// An elementwise kernel of two or more loop dims whose trailing dims make a small block
    /// (at most [`UNIT_MAX_POINTS`] points and [`UNIT_BUDGET`] body work written out) repeated
    /// over the leading dims (the units: a batch of small matrices), as one loop over the
    /// units with each unit's block written out: the unit's pointers once per iteration, then
    /// row by row at constant displacements from them, position by position (`None`, and
    /// nothing emitted, when no split fits or the kernel runs in tiles). The leading dims are
    /// the fewest whose block fits. A row loop of two to four points per row spends more on
    /// its index arithmetic and loop control than on the body. Ends the function.
    pub(super) fn emit_units_written_out(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        dims: &[usize],
    ) -> Result<Option<KernelShape>, BackendError> {
        let rank = dims.len();
        if self.cur.tiles.is_some() || rank < 2 {
            return Ok(None);
        }
        let inner = dims[rank - 1];
        let n_positions = row_position_count(inner, self.cur.width);
        let body = self.body_work();
        let Some(lead) = (1..rank).find(|&lead| {
            let rows: usize = dims[lead..rank - 1].iter().product();
            rows.saturating_mul(inner) <= UNIT_MAX_POINTS
                && rows.saturating_mul(n_positions).saturating_mul(body) <= UNIT_BUDGET
        }) else {
            return Ok(None);
        };
        let positions = row_positions(inner, self.cur.width);
        let units: usize = dims[..lead].iter().product();
        let block = &dims[lead..rank - 1];
        let rows: usize = block.iter().product();
        if units < 2 || rows * inner == 0 {
            return Ok(None);
        }
        let zero = self.const_i64(b, 0);
        let zeros = vec![zero; self.fx.info.accesses.len()];
        let leading = dims[..lead].to_vec();
        let block = block.to_vec();
        let join = self.joins_stores();
        self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, unit, _| {
            let offs = g.offsets(b, unit, 0, &leading, &zeros);
            let unit_ptrs = g.pointers(b, &offs)?;
            // An index's offset at a unit lies between 0 and its value at the last unit.
            g.cur.index_ranges.clear();
            for (access, &offset) in g.fx.info.accesses.iter().zip(&unit_ptrs) {
                if access.buf.is_none() {
                    let last: usize = leading
                        .iter()
                        .zip(&access.strides)
                        .map(|(&n, &stride)| n.saturating_sub(1) * stride)
                        .sum();
                    if let Ok(last) = i64::try_from(last) {
                        g.cur.index_ranges.insert(offset, last);
                    }
                }
            }
            g.cur.joined = join.then(Default::default);
            for row in 0..rows {
                let ptrs = g.displaced_pointers(b, &unit_ptrs, row, lead, &block);
                g.emit_written_row(b, &ptrs, &positions)?;
            }
            g.flush_joined(b);
            g.cur.joined = None;
            Ok(Vec::new())
        })?;
        self.finish(b);
        Ok(Some(KernelShape::new(
            units as u64,
            (rows * inner) as u64,
            self.cur.width,
            self.min_points_per_thread(),
        )))
    }

    /// The innermost loop of an elementwise kernel over `start..end` (at least `n_static` long
    /// when the whole range is one call's): vector positions ([`Gen::emit_vector_positions`]),
    /// first four vectors at a time for short bodies. Shorter ranges run scalar code only.
    pub(super) fn emit_elementwise_loop(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        n_static: usize,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        let w = self.cur.width;
        if self.cur.tiles.is_some() && n_static >= MIN_TILED_ELEMS {
            return self.emit_tiled_loop(b, start, end, ptrs);
        }
        if w == 1 || n_static < usize::from(w) {
            self.emit_loop(b, start, end, 1, &[], &mut |g, b, at, _| {
                g.emit_body(b, 1, at, ptrs, &mut Vec::new())?;
                Ok(Vec::new())
            })?;
            return Ok(());
        }
        // Column indices advance by a vector add per step (see `Cursor::col_indices`).
        let columns: Vec<(usize, DType, usize)> = (0..self.fx.info.accesses.len())
            .filter(|&k| {
                self.fx.info.accesses[k].buf.is_none()
                    && self.inner_stride(k) != 0
                    && !self.cur.row_indices.contains_key(&k)
            })
            .map(|k| (k, self.fx.info.accesses[k].dtype, self.inner_stride(k)))
            .collect();
        let mut fresh = |g: &mut Self, b: &mut FunctionBuilder<'_>, at: Value| {
            g.cur.col_indices.clear();
            columns
                .iter()
                .map(|&(k, dtype, _)| g.index(b, w, k, at, ptrs, dtype))
                .collect::<Result<Vec<_>, _>>()
        };
        // The column indices `points` positions on.
        let advance = |g: &mut Self, b: &mut FunctionBuilder<'_>, values: &[Value], points: usize| {
            columns
                .iter()
                .zip(values)
                .map(|(&(_, dtype, stride), &v)| {
                    let step = rfx_ir::semantics::index_value(points * stride, dtype)
                        .ok_or_else(|| internal(format!("index of dtype {dtype}")))?;
                    let mut e = Emitter {
                        b: &mut *b,
                        w,
                        imports: g.fx.imports,
                    };
                    let step = e.constant(step);
                    Ok(if dtype == DType::I32 {
                        b.ins().iadd(v, step)
                    } else {
                        b.ins().fadd(v, step)
                    })
                })
                .collect::<Result<Vec<_>, BackendError>>()
        };
        let set = |g: &mut Self, values: &[Value]| {
            g.cur.col_indices = columns.iter().zip(values).map(|(&(k, ..), &v)| (k, v)).collect();
        };
        let mut start = start;
        let mut carried = fresh(self, b, start)?;
        // Short bodies (memory-bound kernels) first run four vectors per iteration: the loop
        // overhead would otherwise rival the work, and the loads of four vectors overlap.
        if self.kernel().body.len() <= UNROLL_MAX_BODY && n_static >= UNROLL * usize::from(w) {
            let step = (UNROLL * usize::from(w)) as i64;
            let (after, last) = self.emit_loop(b, start, end, step, &carried, &mut |g, b, at, values| {
                for k in 0..UNROLL {
                    let pos = if k == 0 {
                        set(g, values);
                        at
                    } else {
                        let moved = advance(g, b, values, k * usize::from(w))?;
                        set(g, &moved);
                        b.ins().iadd_imm_s(at, (k * usize::from(w)) as i64)
                    };
                    g.emit_body(b, w, pos, ptrs, &mut Vec::new())?;
                }
                advance(g, b, values, UNROLL * usize::from(w))
            })?;
            start = after;
            carried = last;
        }
        self.emit_vector_positions_carrying(
            b,
            (start, end),
            Carried {
                init: &carried,
                advance: &mut |g, b, values: &[Value]| advance(g, b, values, usize::from(w)),
                fresh: &mut fresh,
            },
            &mut |g, b, at, values| {
                set(g, values);
                g.emit_body(b, w, at, ptrs, &mut Vec::new())
            },
        )?;
        self.cur.col_indices.clear();
        Ok(())
    }
}
