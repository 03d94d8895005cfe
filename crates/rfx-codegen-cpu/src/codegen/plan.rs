//! How a kernel runs: the loop shape ([`KernelPlan`]) chosen by [`plan`] from the kernel's
//! facts and the target, and the dispatch to the emitter of that shape.

use super::*;

/// What [`plan`] chooses a kernel's loop shape from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernelFacts {
    /// Reduced loop dims (trailing).
    pub(crate) reduce_dims: usize,
    /// The body reduces.
    pub(crate) has_reduce: bool,
    /// Extent of the innermost loop dim.
    pub(crate) inner: usize,
    /// The vector width the schedule and the kernel's dtypes allow (1: scalar code).
    pub(crate) width: u8,
    /// The schedule's partial accumulators per reduction.
    pub(crate) reduce_lanes: u32,
    /// One accumulator per output, with a vector of outputs along the innermost kept dim
    /// ([`Gen::outputs_in_lanes`]).
    pub(crate) outputs_in_lanes: bool,
    /// Some body op has an ahead-of-time routine ([`Gen::body_has_routines`]).
    pub(crate) routine_ops: bool,
}

/// A kernel's loop shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// A scan along one axis.
    Scan,
    /// Elementwise: written out when small, units of small blocks, or vector loops over rows.
    Elementwise,
    /// A reduction with `reduce_lanes` partial accumulators per output, in the LIR's order.
    PartialSums,
    /// A reduction with `w` neighbouring outputs accumulated in one vector's lanes.
    OutputsInLanes,
    /// A reduction one output at a time, its points evaluated `point_width` at a time.
    OneAtATime,
    /// A reduction one output at a time, each row in tiles through the routines.
    RowTiles,
}

/// The loop shape chosen for a kernel ([`plan`]); printed at the top of its CLIF dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernelPlan {
    pub(crate) strategy: Strategy,
    /// Vector lanes of the loops (1: scalar code).
    pub(crate) width: u8,
    /// Lanes a one-output-at-a-time reduction evaluates its points at.
    pub(crate) point_width: u8,
    /// Try the tiled form of the innermost rows (the routines on tiles of `TILE` elements).
    pub(crate) row_tiles: bool,
    /// Try the tiled form of outputs in lanes (a group's whole rows staged).
    pub(crate) lane_tiles: bool,
    /// The tiled form was planned (its staging fits): set once emission has planned it.
    pub(crate) tiled: bool,
}

impl KernelPlan {
    fn scan() -> KernelPlan {
        KernelPlan {
            strategy: Strategy::Scan,
            width: 1,
            point_width: 1,
            row_tiles: false,
            lane_tiles: false,
            tiled: false,
        }
    }
}

impl std::fmt::Display for KernelPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shape = match self.strategy {
            Strategy::Scan => "scan",
            Strategy::Elementwise => "elementwise",
            Strategy::PartialSums => "reduction, partial sums",
            Strategy::OutputsInLanes => "reduction, outputs in lanes",
            Strategy::OneAtATime => "reduction, one output at a time",
            Strategy::RowTiles => "reduction, one output at a time in tiled rows",
        };
        write!(
            f,
            "{shape}, {} lane{}",
            self.width,
            if self.width == 1 { "" } else { "s" }
        )?;
        if self.point_width > 1 {
            write!(f, ", points {} at a time", self.point_width)?;
        }
        if self.tiled {
            f.write_str(", AOT routines on tiles")?;
        }
        Ok(())
    }
}

/// The loop shape of a (non-scan) kernel with `facts`, on a target whose AOT routines are
/// linked or not (`routines_linked`). Pure: the emitters follow it.
pub(crate) fn plan(facts: &KernelFacts, routines_linked: bool) -> KernelPlan {
    let KernelFacts {
        reduce_dims,
        has_reduce,
        inner,
        width,
        reduce_lanes,
        outputs_in_lanes,
        routine_ops,
    } = *facts;
    let routines = routines_linked && routine_ops;
    // Outputs in lanes run their routines in tiles where a group's whole rows fit in one
    // (one reduced dim); other rows with routines run one output at a time (below), so that
    // every transcendental of a kernel has the routines' bits.
    let lanes_fit = reduce_dims == 1 && inner * usize::from(width) <= TILE;
    let in_lanes = has_reduce && outputs_in_lanes;
    // One accumulator per output and too few outputs along the innermost kept dim to fill a
    // vector (a 3×3 `f32` product, a 3-vector's norm): the outputs run one at a time, with
    // their accumulators in registers, rather than through a one-lane stack partial.
    let one_at_a_time = has_reduce && reduce_lanes <= 1 && (!in_lanes || (routines && !lanes_fit));
    // Unless its rows hold routines: then each row runs in tiles, its staged values folded
    // in row order into one accumulator (the routines' bits, as in the elementwise kernel,
    // and faster on short rows of transcendentals).
    let row_tiles = one_at_a_time && reduce_dims > 0 && routines && inner >= MIN_TILED_ELEMS;
    // A reduction to one value evaluates its points a vector at a time and adds the lanes in
    // order (see `Gen::emit_reduction_across`).
    let (width, point_width) = if one_at_a_time && !row_tiles {
        (1, width)
    } else {
        (width, 1)
    };
    // Only the innermost loop runs in tiles, so a short one never needs the tile plan (nor
    // its staging buffers). A reduction runs its innermost reduced rows in tiles when it keeps
    // partial accumulators (`reduce_lanes` > 1, long rows) or runs its outputs one at a time
    // (above); outputs in lanes with one reduced dim stage a group's whole rows, `w` lanes per
    // point, and the routines run over all of them (`Gen::emit_across_tiles`).
    let tiled_reduction = (reduce_lanes > 1 && reduce_dims > 0) || row_tiles;
    let strategy = if !has_reduce {
        Strategy::Elementwise
    } else if row_tiles {
        Strategy::RowTiles
    } else if reduce_lanes > 1 {
        Strategy::PartialSums
    } else if one_at_a_time {
        Strategy::OneAtATime
    } else {
        Strategy::OutputsInLanes
    };
    KernelPlan {
        strategy,
        width,
        point_width,
        row_tiles: routines_linked && inner >= MIN_TILED_ELEMS && (!has_reduce || tiled_reduction),
        lane_tiles: routines_linked && in_lanes && !one_at_a_time && lanes_fit,
        tiled: false,
    }
}

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
            // A temporary of a program whose arena is in the function's frame.
            let in_frame = (self.fx.frame_arena).and_then(|a| a.address(b, self.fx.ptr, buf));
            let base = match (
                self.fx.literal_bases.get(buf.index()).copied().flatten(),
                in_frame,
                self.fx.table_entries.get(buf.index()).copied().flatten(),
            ) {
                (Some(data), _, _) => b.ins().symbol_value(self.fx.ptr, data),
                (None, Some(address), _) => address,
                (None, None, Some(entry)) => {
                    let offset = i32::try_from(entry * 8).map_err(|_| internal("too many buffers"))?;
                    b.ins().load(self.fx.ptr, mem().with_readonly(), table, offset)
                }
                (None, None, None) => return Err(internal(format!("no table entry for {buf}"))),
            };
            if let Some(slot) = self.fx.bases.get_mut(buf.index()) {
                *slot = Some(base);
            }
        }
        self.emit_preamble(b)?;
        if let Some(row) = &kernel.row_store {
            self.shift_row_base(b, row)?;
        }
        let rank = kernel.dims.len();
        if let Some(order) = kernel.scan {
            self.cur.plan = Some(KernelPlan::scan());
            return self.emit_scan(b, lo, hi, order);
        }
        let reduce_dims = kernel.reduce_dims.min(rank);
        let sched = u8::try_from(kernel.schedule.vector_width).unwrap_or(1);
        let dtypes = kernel
            .slots
            .iter()
            .copied()
            .chain(self.fx.info.accesses.iter().map(|a| a.dtype));
        let has_reduce = kernel.body.iter().any(|i| matches!(i, Inst::Reduce { .. }));
        // Whether the outputs fill vector lanes depends on the vector width.
        self.cur.width = if matches!(sched, 2 | 4) && vectorizable(dtypes, sched) {
            sched
        } else {
            1
        };
        let facts = KernelFacts {
            reduce_dims,
            has_reduce,
            inner: kernel.dims.last().copied().unwrap_or(1),
            width: self.cur.width,
            reduce_lanes: kernel.schedule.reduce_lanes,
            outputs_in_lanes: has_reduce && self.outputs_in_lanes(reduce_dims),
            routine_ops: self.body_has_routines()?,
        };
        let routines_linked = self.fx.imports.aot.is_some();
        let plan = plan(&facts, routines_linked);
        self.cur.width = plan.width;
        self.cur.point_width = plan.point_width;
        let inner = facts.inner;
        self.hoist_splats(b);
        self.cur.inner_axis = if rank == 0 || (has_reduce && reduce_dims == 0) {
            None
        } else {
            Some(rank - 1)
        };
        if plan.row_tiles {
            self.plan_tiles(b, inner)?;
        }
        if plan.strategy == Strategy::RowTiles && self.cur.tiles.is_none() {
            // A row shorter than a vector with ops around its routine: scalar code, which calls
            // the routines one element at a time.
            self.cur.width = 1;
        }
        if plan.lane_tiles {
            self.cur.tiles = self.tile_plan(b, false)?;
            if let Some(plan) = self.cur.tiles.take() {
                self.fill_invariant_buffers(b, &plan)?;
                self.cur.tiles = Some(plan);
            }
        }
        let tiled = self.cur.tiles.is_some();
        self.cur.plan = Some(KernelPlan {
            // Rows that could not be tiled run one output at a time in scalar code.
            strategy: if plan.strategy == Strategy::RowTiles && !tiled {
                Strategy::OneAtATime
            } else {
                plan.strategy
            },
            width: self.cur.width,
            tiled,
            ..plan
        });
        if plan.strategy != Strategy::Elementwise {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An elementwise kernel of 4096 points at 4 lanes with transcendentals.
    const LONG_SIN: KernelFacts = KernelFacts {
        reduce_dims: 0,
        has_reduce: false,
        inner: 4096,
        width: 4,
        reduce_lanes: 1,
        outputs_in_lanes: false,
        routine_ops: true,
    };

    /// A sum over the last of two dims (rows of 8), one accumulator per output.
    const ROW_SUMS: KernelFacts = KernelFacts {
        reduce_dims: 1,
        has_reduce: true,
        inner: 8,
        width: 4,
        reduce_lanes: 1,
        outputs_in_lanes: true,
        routine_ops: false,
    };

    #[test]
    fn elementwise_tiles_only_where_the_routines_are_linked() {
        let avx2 = plan(&LONG_SIN, true);
        assert_eq!(
            (avx2.strategy, avx2.width, avx2.row_tiles),
            (Strategy::Elementwise, 4, true)
        );
        let baseline = plan(&LONG_SIN, false);
        assert_eq!(
            (baseline.strategy, baseline.width, baseline.row_tiles),
            (Strategy::Elementwise, 4, false)
        );
        let no_routines = plan(
            &KernelFacts {
                routine_ops: false,
                ..LONG_SIN
            },
            true,
        );
        assert!(
            no_routines.row_tiles,
            "tiling is tried; the tile plan finds no routine"
        );
        assert!(!no_routines.lane_tiles);
    }

    #[test]
    fn partial_sums_follow_the_schedules_lanes() {
        let facts = KernelFacts {
            reduce_lanes: 8,
            outputs_in_lanes: false,
            inner: 4096,
            routine_ops: true,
            ..ROW_SUMS
        };
        let p = plan(&facts, true);
        assert_eq!(
            (p.strategy, p.width, p.point_width),
            (Strategy::PartialSums, 4, 1)
        );
        assert!(p.row_tiles && !p.lane_tiles);
        assert!(!plan(&facts, false).row_tiles);
    }

    #[test]
    fn outputs_in_lanes_when_a_row_of_outputs_fills_a_vector() {
        let p = plan(&ROW_SUMS, true);
        assert_eq!(
            (p.strategy, p.width, p.point_width),
            (Strategy::OutputsInLanes, 4, 1)
        );
        assert!(p.lane_tiles, "a group's rows (8 points × 4 lanes) fit one tile");
        assert!(!p.row_tiles);
        assert!(!plan(&ROW_SUMS, false).lane_tiles);
    }

    #[test]
    fn too_few_outputs_run_one_at_a_time_with_points_in_vectors() {
        let facts = KernelFacts {
            outputs_in_lanes: false,
            inner: 3,
            ..ROW_SUMS
        };
        let p = plan(&facts, true);
        assert_eq!((p.strategy, p.width, p.point_width), (Strategy::OneAtATime, 1, 4));
        assert!(!p.row_tiles && !p.lane_tiles);
    }

    #[test]
    fn rows_with_routines_run_in_tiles_one_output_at_a_time() {
        // Outputs in lanes, but a group's rows (200 points × 4 lanes) exceed a tile: the
        // outputs run one at a time, each row through the routines in tiles.
        let facts = KernelFacts {
            inner: 200,
            routine_ops: true,
            ..ROW_SUMS
        };
        let p = plan(&facts, true);
        assert_eq!((p.strategy, p.width, p.point_width), (Strategy::RowTiles, 4, 1));
        assert!(p.row_tiles && !p.lane_tiles);
        // Without the routines the same kernel keeps its outputs in lanes.
        let baseline = plan(&facts, false);
        assert_eq!(baseline.strategy, Strategy::OutputsInLanes);
    }

    #[test]
    fn the_plan_prints_as_one_line() {
        let mut p = plan(&LONG_SIN, true);
        p.tiled = true;
        assert_eq!(p.to_string(), "elementwise, 4 lanes, AOT routines on tiles");
        let q = plan(
            &KernelFacts {
                outputs_in_lanes: false,
                inner: 3,
                ..ROW_SUMS
            },
            false,
        );
        assert_eq!(
            q.to_string(),
            "reduction, one output at a time, 1 lane, points 4 at a time"
        );
        assert_eq!(KernelPlan::scan().to_string(), "scan, 1 lane");
    }
}
