//! How a kernel runs: the loop shape chosen from its dimensions, reductions and routines, and the dispatch to the emitter of that shape.

use super::*;

impl<'k> Gen<'_, 'k> {
    pub(super) fn emit(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        table: Value,
        lo: Value,
        hi: Value,
    ) -> Result<KernelShape, BackendError> {
        let kernel = self.kernel();
        // Buffer bases, loaded once.
        self.fx.bases = vec![None; self.fx.info.buffer_dtypes.len()];
        let mut used: Vec<BufId> = Vec::new();
        for inst in kernel.preamble.iter().chain(&kernel.body) {
            if let Some(buf) = inst.buf()
                && !used.contains(&buf)
            {
                used.push(buf);
            }
        }
        for buf in used {
            let base = match (
                self.fx.literal_bases.get(buf.index()).copied().flatten(),
                self.fx.table_entries.get(buf.index()).copied().flatten(),
            ) {
                (Some(data), _) => b.ins().symbol_value(self.fx.ptr, data),
                (None, Some(entry)) => {
                    let offset = i32::try_from(entry * 8).map_err(|_| internal("too many buffers"))?;
                    b.ins().load(self.fx.ptr, mem().with_readonly(), table, offset)
                }
                (None, None) => return Err(internal(format!("no table entry for {buf}"))),
            };
            if let Some(slot) = self.fx.bases.get_mut(buf.index()) {
                *slot = Some(base);
            }
        }
        // The preamble, once, in scalar form.
        self.fx.pre_scalar = vec![None; kernel.slots.len()];
        self.fx.pre_const = vec![None; kernel.slots.len()];
        for inst in &kernel.preamble {
            if let Some(dst) = inst.dst()
                && let Some(c) = self.fx.pre_const.get_mut(dst.index())
            {
                *c = match inst {
                    Inst::Const { value, .. } if value.dtype().is_float() => Some(value.to_f64()),
                    _ => None,
                };
            }
            let mut slots = self.fx.pre_scalar.clone();
            let place = InstAt {
                w: 1,
                access: None,
                offs: &[],
                body_index: None,
            };
            self.emit_inst(b, inst, place, &mut slots, &mut Vec::new())?;
            self.fx.pre_scalar = slots;
        }
        let rank = kernel.dims.len();
        if let Some(order) = kernel.scan {
            return self.emit_scan(b, lo, hi, order);
        }
        let reduce_dims = kernel.reduce_dims.min(rank);
        let sched = u8::try_from(kernel.schedule.vector_width).unwrap_or(1);
        let dtypes = kernel
            .slots
            .iter()
            .copied()
            .chain(self.fx.info.accesses.iter().map(|a| a.dtype));
        self.cur.width = if matches!(sched, 2 | 4) && vectorizable(dtypes, sched) {
            sched
        } else {
            1
        };
        let has_reduce = kernel.body.iter().any(|i| matches!(i, Inst::Reduce { .. }));
        // One accumulator per output and too few outputs along the innermost kept dim to fill a
        // vector (a 3×3 `f32` product, a 3-vector's norm): the outputs run one at a time, with
        // their accumulators in registers, rather than through a one-lane stack partial.
        self.cur.point_width = 1;
        let inner = kernel.dims.last().copied().unwrap_or(1);
        let routines = self.fx.imports.aot.is_some() && self.body_has_routines()?;
        // Outputs in lanes run their routines in tiles where a group's whole rows fit in one
        // (one reduced dim); other rows with routines run one output at a time (below), so that
        // every transcendental of a kernel has the routines' bits.
        let lanes_fit = reduce_dims == 1 && inner * usize::from(self.cur.width) <= TILE;
        let in_lanes = has_reduce && self.outputs_in_lanes(reduce_dims);
        let one_at_a_time =
            has_reduce && kernel.schedule.reduce_lanes <= 1 && (!in_lanes || (routines && !lanes_fit));
        // Unless its rows hold routines: then each row runs in tiles, its staged values folded
        // in row order into one accumulator (the routines' bits, as in the elementwise kernel,
        // and faster on short rows of transcendentals).
        let row_tiles = one_at_a_time && reduce_dims > 0 && routines && inner >= MIN_TILED_ELEMS;
        if one_at_a_time && !row_tiles {
            // A reduction to one value evaluates its points a vector at a time and adds the
            // lanes in order (see `Gen::emit_reduction_across`).
            self.cur.point_width = self.cur.width;
            self.cur.width = 1;
        }
        self.hoist_splats(b);
        self.cur.inner_axis = if rank == 0 || (has_reduce && reduce_dims == 0) {
            None
        } else {
            Some(rank - 1)
        };
        // Only the innermost loop runs in tiles, so a short one never needs the plan (nor its
        // staging buffers). A reduction runs its innermost reduced rows in tiles when it keeps
        // partial accumulators (`reduce_lanes` > 1, long rows) or runs its outputs one at a time
        // (above); outputs in lanes have their own plan (below).
        let tiled_reduction = (kernel.schedule.reduce_lanes > 1 && reduce_dims > 0) || row_tiles;
        if self.fx.imports.aot.is_some() && inner >= MIN_TILED_ELEMS && (!has_reduce || tiled_reduction) {
            self.plan_tiles(b, inner)?;
        }
        if row_tiles && self.cur.tiles.is_none() {
            // A row shorter than a vector with ops around its routine: scalar code, which calls
            // the routines one element at a time.
            self.cur.width = 1;
        }
        self.cur.rows_in_tiles = row_tiles && self.cur.tiles.is_some();
        // Outputs in lanes, one reduced dim: a group of `w` outputs stages its values for the
        // whole row, `w` lanes per point, and the routines run over all of them
        // (`Gen::emit_across_tiles`).
        if self.fx.imports.aot.is_some() && has_reduce && in_lanes && !one_at_a_time && lanes_fit {
            self.cur.tiles = self.tile_plan(b, false)?;
            if let Some(plan) = self.cur.tiles.take() {
                self.fill_invariant_buffers(b, &plan)?;
                self.cur.tiles = Some(plan);
            }
        }
        if has_reduce {
            self.emit_reduction(b, lo, hi, reduce_dims)
        } else {
            self.emit_elementwise(b, lo, hi)
        }
    }

    /// Sets `tiles` (and `segment_unroll`) for innermost rows of `inner` elements, and fills
    /// the invariant routine arguments' buffers, once per call (not per row).
    pub(super) fn plan_tiles(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        inner: usize,
    ) -> Result<(), BackendError> {
        self.cur.tiles = self.tile_plan(b, true)?;
        // An ops segment runs whole passes of `segment_unroll` vectors and a tile must hold one:
        // rows shorter than `SEGMENT_UNROLL` vectors pass one vector at a time, and rows shorter
        // than a vector keep the inline code.
        let w = usize::from(self.cur.width);
        self.cur.segment_unroll = if inner >= w * SEGMENT_UNROLL as usize {
            SEGMENT_UNROLL
        } else {
            1
        };
        if inner < w
            && self
                .cur
                .tiles
                .as_ref()
                .is_some_and(|plan| plan.segments.iter().any(|s| matches!(s, Segment::Ops { .. })))
        {
            self.cur.tiles = None;
        }
        if let Some(plan) = self.cur.tiles.take() {
            self.fill_invariant_buffers(b, &plan)?;
            self.cur.tiles = Some(plan);
        }
        Ok(())
    }
}
