//! Tiled elementwise bodies: segments of inline code and ahead-of-time routine calls over tiles of `TILE` elements, with staged values in stack buffers.

use super::*;
use crate::aot::fused;

/// The values one body instruction reads that the body defines: `(defining body index, slot)`.
type Reads = Vec<(usize, SlotId)>;

/// One step of a tiled elementwise body, run over a whole tile before the next begins.
pub(super) enum Segment {
    /// Body instructions `insts`, vectorised over the tile. `loads` are the values it reads from
    /// staging buffers (or, for a program input's load that is not staged, from the input
    /// again), as `(reading instruction, defining body index, slot)`, each loaded right
    /// before the instruction unless that slot already holds it: a value can be staged out of
    /// the body's order (a `sin` computed by an earlier `cos`'s `sincos` call), so two staged
    /// values may share a slot. Every value it defines that a later segment reads is stored to
    /// its staging buffer right after its instruction.
    Ops {
        insts: Vec<usize>,
        loads: Vec<(usize, usize, SlotId)>,
    },
    /// A tile routine from the values `srcs` (one per argument) into the staging buffers of
    /// `dsts` (the body index of the instruction of each result: two for `sincos`, which a
    /// `sin` and a `cos` of one value pair into). `src_accesses` / `dst_accesses`: the routine
    /// reads an argument straight from a program input (its load is contiguous) or writes a
    /// result straight into a program output (its only use is a contiguous store), saving a
    /// staging copy; caller-supplied inputs and outputs never overlap.
    Call {
        routine: AotFn,
        srcs: Vec<TileSrc>,
        dsts: Vec<usize>,
        src_accesses: Vec<Option<usize>>,
        dst_accesses: Vec<Option<usize>>,
    },
}

/// Where an ops segment runs ([`Gen::emit_segment`]).
#[derive(Clone, Copy, Debug)]
pub(super) enum SegmentAt {
    /// Element `j` of the tile at row position `at`: position `at + j`, staged cell `j`.
    Tile { at: Value, j: Value },
    /// A point of a reduction with its outputs in lanes: loop position `pos` (the group's first
    /// output), staged cells from `cell` on (one per lane).
    Lanes { pos: Value, cell: Value },
}

/// An argument of a tile routine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TileSrc {
    /// A value computed in the body, by the instruction at this index.
    Body(usize),
    /// A preamble value (loop-invariant: `pow(x, 1.5)`'s exponent), which the routine reads from
    /// a buffer filled with it once per call, before the loops.
    Invariant(SlotId),
}

/// The tiled form of an elementwise body (or of a reduction's points): its segments, the staging
/// buffer (one per value that crosses a segment boundary or is reduced, `tile` cells of `cell`
/// bytes) of each staged value, and the buffer each invariant routine argument is broadcast
/// into.
pub(super) struct TilePlan {
    pub(super) segments: Vec<Segment>,
    /// Elements per tile: [`TILE`], or fewer where a full tile's staging would exceed
    /// [`TILE_STAGING_MAX`] (see [`tile_elems`]).
    pub(super) tile: usize,
    pub(super) staged: HashMap<usize, (StackSlot, u32)>,
    pub(super) invariant: Vec<(SlotId, StackSlot, u32)>,
    /// For a reduction: the staged value (its defining body index) each `Reduce` of the body
    /// folds, in body order; the reduction pass after a tile's segments reads them.
    pub(super) reduced: Vec<usize>,
    /// The whole body as one fused pass per row (then there are no segments).
    pub(super) fused: Option<FusedPass>,
}

impl TilePlan {
    /// The plan of a body run as one fused pass per row.
    fn fused(fused: FusedPass) -> TilePlan {
        TilePlan {
            segments: Vec::new(),
            tile: TILE,
            staged: HashMap::new(),
            invariant: Vec::new(),
            reduced: Vec::new(),
            fused: Some(fused),
        }
    }
}

/// The staging buffers of a tile plan: each buffer's cell size in bytes (a buffer holds `TILE`
/// cells) and the buffer of each staged value (its defining body index).
pub(super) struct StagingBuffers {
    pub(super) cells: Vec<u32>,
    pub(super) of_def: HashMap<usize, usize>,
}

/// Assigns the staged values of `segments` (with their cell sizes, `cells`) to staging buffers
/// by liveness: a value holds its buffer from the segment that defines it to the last segment
/// that reads it (to the end for the `reduced` values, which the reduction pass after the
/// segments reads), and a buffer freed by the end of one segment serves a value of the same cell
/// size defined in a later one. A segment never writes a buffer it reads (its ops segments'
/// last pass recomputes a few elements from their inputs), so a buffer is reused only by a value
/// defined strictly after the last read of its previous value. A chain of routines stages two
/// buffers, not one per value; the number of buffers is the most values live across a segment
/// boundary.
pub(super) fn staging_buffers(
    segments: &[Segment],
    cells: &HashMap<usize, u32>,
    reduced: &[usize],
) -> StagingBuffers {
    let end = segments.len();
    let mut last_read: HashMap<usize, usize> = HashMap::with_capacity(cells.len());
    for (k, segment) in segments.iter().enumerate() {
        let reads: Vec<usize> = match segment {
            Segment::Ops { loads, .. } => loads.iter().map(|&(_, def, _)| def).collect(),
            Segment::Call {
                srcs, src_accesses, ..
            } => srcs
                .iter()
                .zip(src_accesses)
                .filter_map(|(src, access)| match (src, access) {
                    (TileSrc::Body(def), None) => Some(*def),
                    _ => None,
                })
                .collect(),
        };
        for def in reads {
            last_read.insert(def, k);
        }
    }
    for &def in reduced {
        last_read.insert(def, end);
    }
    let mut buffers = StagingBuffers {
        cells: Vec::new(),
        of_def: HashMap::with_capacity(cells.len()),
    };
    // Free buffers, and the buffers each segment frees when it ends.
    let mut free: Vec<usize> = Vec::new();
    let mut freed_after: Vec<Vec<usize>> = vec![Vec::new(); end + 1];
    let take = |buffers: &mut StagingBuffers, free: &mut Vec<usize>, cell: u32| {
        let reused = free
            .iter()
            .enumerate()
            .filter(|&(_, &buffer)| buffers.cells[buffer] == cell)
            .min_by_key(|&(_, &buffer)| buffer)
            .map(|(at, _)| at);
        match reused {
            Some(at) => free.swap_remove(at),
            None => {
                buffers.cells.push(cell);
                buffers.cells.len() - 1
            }
        }
    };
    for (k, segment) in segments.iter().enumerate() {
        let defs: &[usize] = match segment {
            Segment::Ops { insts, .. } => insts,
            Segment::Call { dsts, .. } => dsts,
        };
        for &def in defs {
            let Some(&cell) = cells.get(&def) else { continue };
            if buffers.of_def.contains_key(&def) {
                continue;
            }
            let buffer = take(&mut buffers, &mut free, cell);
            buffers.of_def.insert(def, buffer);
            let last = last_read.get(&def).copied().unwrap_or(k).max(k);
            freed_after[last].push(buffer);
        }
        free.append(&mut freed_after[k]);
    }
    // A staged value no segment defines (none should be) keeps a buffer of its own.
    let mut orphans: Vec<usize> = cells
        .keys()
        .copied()
        .filter(|def| !buffers.of_def.contains_key(def))
        .collect();
    orphans.sort_unstable();
    for def in orphans {
        buffers.cells.push(cells[&def]);
        buffers.of_def.insert(def, buffers.cells.len() - 1);
    }
    buffers
}

/// Bytes each staging buffer (a stack slot) ends after its cells: one cache line. A full
/// tile's buffer is a multiple of 4 KiB (1,024 `f64` cells), and the slots lie one after
/// another, so without it every buffer would start at the same address modulo 4 KiB: a segment
/// reading or writing a dozen staged values at one cell would touch one L1 cache set for all of
/// them (more lines than the set holds) and each load would wait on the earlier stores to the
/// other buffers' cells with the same low address bits (4 KiB aliasing). With it, each buffer
/// starts one line further round than the one before.
pub(super) const STAGING_SKEW: u32 = 64;

/// The granule of a shortened tile's length, in elements: a whole number of passes of the
/// segments at any width, and of 32-byte vectors of any cell size.
const TILE_GRAIN: usize = 64;

/// Elements per tile for staging buffers of `point_bytes` bytes per element in all, around
/// `calls` routine calls a tile: [`TILE`] where a full tile's buffers fit in
/// [`TILE_STAGING_MAX`]. Otherwise the staging is worth its stores and loads only while each
/// call pays for at most a full tile's share of it (`TILE_STAGING_MAX / TILE` bytes an element:
/// staging 16 `f64` values around each call, a kernel runs faster in shorter tiles than untiled;
/// 25 a call, slower); then the tile is the longest multiple of [`TILE_GRAIN`] whose buffers
/// fit, when that is at least `min_tile`. `None` otherwise (the untiled code). A kernel with
/// many values live across its routine calls so keeps calling the routines, on shorter tiles,
/// and computes every element as a full tile would (the segments' order within a tile and the
/// routines' results do not depend on the tile's length).
pub(super) fn tile_elems(point_bytes: u64, calls: usize, min_tile: usize) -> Option<usize> {
    let budget = u64::from(TILE_STAGING_MAX);
    if point_bytes.saturating_mul(TILE as u64) <= budget {
        return Some(TILE);
    }
    if point_bytes > budget / TILE as u64 * calls as u64 {
        return None;
    }
    let fits = usize::try_from(budget / point_bytes).ok()?;
    let tile = fits / TILE_GRAIN * TILE_GRAIN;
    (tile >= min_tile.max(TILE_GRAIN)).then_some(tile)
}

impl<'k> Gen<'_, 'k> {
    /// The tiled plan of this (elementwise) kernel's body, or `None` when no instruction of it is
    /// computed by a tile routine. An op gets a routine when one exists for its op and dtype and
    /// an argument is computed in the body; a binary routine's other argument may be a preamble
    /// value (broadcast into a buffer once per call).
    ///
    /// With `direct`, a routine reads a contiguous program input and writes a contiguous
    /// program output itself; without, every routine argument and result is staged (the
    /// staging layout of a reduction with its outputs in lanes is not the buffers').
    pub(super) fn tile_plan(
        &self,
        b: &mut FunctionBuilder<'_>,
        direct: bool,
    ) -> Result<Option<TilePlan>, BackendError> {
        let body = &self.kernel().body;
        let (reads, routines) = self.body_reads()?;
        if routines.iter().all(Option::is_none) {
            // Exact ops only. One op over long rows: a fused pass's whole-row loop (AVX2
            // vectors). Otherwise an assembled pass where the host runs one, which holds the
            // values between the ops in 256-bit registers; else the inline code, which holds
            // them in 128-bit ones (the fused routine runs each op over a chunk in memory:
            // slower).
            let inner = self.kernel().dims.last().copied().unwrap_or(1);
            if !direct {
                return Ok(None);
            }
            if inner >= fused::MIN_ONE_OP_ELEMS
                && let Some(pass) = self.fused_pass(b, FusedKind::OneOp)?
            {
                return Ok(Some(TilePlan::fused(pass)));
            }
            if inner < ASSEMBLED_MIN_ELEMS {
                return Ok(None);
            }
            return Ok(self.fused_pass(b, FusedKind::Assembled)?.map(TilePlan::fused));
        }
        let Some((mut segments, segment_of, reduced)) = self.segments(&reads, &routines)? else {
            return Ok(None);
        };
        let skipped = self.direct_accesses(&mut segments, &reads, direct);
        // A load of a program input reads the same value in any segment (nothing the kernel
        // writes overlaps an input): an ops segment loads it again instead of staging it.
        let reloadable: Vec<bool> = body
            .iter()
            .map(|inst| match inst {
                Inst::Load { buf, .. } => {
                    self.fx.info.buffer_is_input.get(buf.index()).copied().flatten() == Some(true)
                }
                _ => false,
            })
            .collect();
        let staged_defs = staged_values(
            body,
            &mut segments,
            (&reads, &routines, &reloadable),
            (&segment_of, &skipped),
        );
        // A body that stages values runs as one fused pass instead where it can; routine calls
        // that read and write the program's rows themselves have nothing to fuse.
        if direct
            && !staged_defs.is_empty()
            && let Some(fused) = self.fused_pass(b, FusedKind::Any)?
        {
            return Ok(Some(TilePlan::fused(fused)));
        }
        // Tiles in lanes hold whole groups of rows (`emit_across_tiles`), so only row tiles
        // shorten; a row tile holds at least one pass of the segments and, for a reduction, a
        // whole number of its partials' lanes.
        let min_tile = if direct {
            let pass = usize::from(self.cur.width) * SEGMENT_UNROLL as usize;
            let lanes = self.kernel().schedule.reduce_lanes as usize;
            TILE_GRAIN.max(pass).max(lanes.next_multiple_of(TILE_GRAIN))
        } else {
            TILE
        };
        self.allocate_staging(b, segments, &staged_defs, (reduced, min_tile))
    }

    /// For each body instruction, the defining body index of each value it reads (the
    /// preamble's are left out) and the routine computing it (only for values computed per
    /// point: an invariant one is in the preamble).
    fn body_reads(&self) -> Result<(Vec<Reads>, Vec<Option<AotFn>>), BackendError> {
        let kernel = self.kernel();
        let body = &kernel.body;
        let mut current: Vec<Option<usize>> = vec![None; kernel.slots.len()];
        let mut reads: Vec<Reads> = Vec::with_capacity(body.len());
        let mut routines: Vec<Option<AotFn>> = Vec::with_capacity(body.len());
        for (i, inst) in body.iter().enumerate() {
            let mut defs = Vec::new();
            for src in inst.srcs() {
                if let Some(def) = current.get(src.index()).copied().flatten() {
                    defs.push((def, src));
                }
            }
            // A routine of values computed per point only (an invariant one is in the preamble).
            let routine = self.routine_of(inst)?.filter(|_| !defs.is_empty());
            reads.push(defs);
            routines.push(routine);
            if let Some(dst) = inst.dst()
                && let Some(def) = current.get_mut(dst.index())
            {
                *def = Some(i);
            }
        }
        Ok((reads, routines))
    }

    /// The body cut into segments: runs of inline instructions between routine calls (a `sin`
    /// and a `cos` of one value share one `sincos` call), with each instruction's segment and
    /// the values the reductions fold (`None`: the body does not tile).
    #[expect(
        clippy::type_complexity,
        reason = "the segments and two per-instruction facts"
    )]
    fn segments(
        &self,
        reads: &[Reads],
        routines: &[Option<AotFn>],
    ) -> Result<Option<(Vec<Segment>, Vec<usize>, Vec<usize>)>, BackendError> {
        let body = &self.kernel().body;
        let routine_srcs = |i: usize| -> Vec<TileSrc> {
            body[i]
                .srcs()
                .into_iter()
                .map(|slot| match reads[i].iter().find(|&&(_, s)| s == slot) {
                    Some(&(def, _)) => TileSrc::Body(def),
                    None => TileSrc::Invariant(slot),
                })
                .collect()
        };
        let mut segments = Vec::new();
        let mut segment_of = vec![0usize; body.len()];
        let mut ops = Vec::new();
        let mut reduced = Vec::new();
        for (i, routine) in routines.iter().enumerate() {
            if let Inst::Reduce { src, .. } = &body[i] {
                // Folded after the segments, by the reduction pass, from its value's staging
                // buffer. A reduction of a preamble value, or of a non-float one, keeps the
                // untiled loop.
                let Some(&(def, _)) = reads[i].first() else {
                    return Ok(None);
                };
                if !self.slot_dtype(*src)?.is_float() {
                    return Ok(None);
                }
                segment_of[i] = usize::MAX;
                reduced.push(def);
                continue;
            }
            if let Some(routine) = *routine {
                let srcs = routine_srcs(i);
                // A `sin` and a `cos` of one value share a `sincos` call, where the first of the
                // two is: the second's value is ready there, and later segments read it staged.
                if let Some((pair, part)) = routine.sincos_part() {
                    let partner = segments.iter_mut().enumerate().find(|(_, segment)| {
                        matches!(segment, Segment::Call { routine: r, srcs: s, .. }
                            if r.sincos_part().is_some_and(|(p, other)| p == pair && other != part)
                                && *s == srcs)
                    });
                    if let Some((
                        index,
                        Segment::Call {
                            routine,
                            dsts,
                            dst_accesses,
                            ..
                        },
                    )) = partner
                    {
                        *routine = pair;
                        dsts.insert(part, i);
                        dst_accesses.push(None);
                        segment_of[i] = index;
                        continue;
                    }
                }
                if !ops.is_empty() {
                    segments.push(Segment::Ops {
                        insts: std::mem::take(&mut ops),
                        loads: Vec::new(),
                    });
                }
                segment_of[i] = segments.len();
                segments.push(Segment::Call {
                    routine,
                    src_accesses: vec![None; srcs.len()],
                    srcs,
                    dsts: vec![i],
                    dst_accesses: vec![None],
                });
            } else {
                segment_of[i] = segments.len();
                ops.push(i);
            }
        }
        if !ops.is_empty() {
            segments.push(Segment::Ops {
                insts: ops,
                loads: Vec::new(),
            });
        }
        Ok(Some((segments, segment_of, reduced)))
    }

    /// Marks the routine arguments read straight from a contiguous program input and the
    /// results written straight into a contiguous program output (with `direct`); returns the
    /// stores a routine now does itself.
    fn direct_accesses(&self, segments: &mut [Segment], reads: &[Reads], direct: bool) -> Vec<bool> {
        let body = &self.kernel().body;
        // Direct routine arguments: a contiguous load of a program input, and a result whose
        // only use is a contiguous store into a program output (of the routine's dtype: a load
        // gives and a store takes its buffer's dtype).
        let contiguous =
            |i: usize, input: bool, dtype: DType| self.contiguous_access(i, input, dtype).filter(|_| direct);
        let mut skipped = vec![false; body.len()];
        for segment in segments.iter_mut() {
            if let Segment::Call {
                routine,
                srcs,
                dsts,
                src_accesses,
                dst_accesses,
            } = segment
            {
                let dtype = routine.dtype();
                for (src, access) in srcs.iter().zip(src_accesses.iter_mut()) {
                    if let TileSrc::Body(def) = *src
                        && matches!(body[def], Inst::Load { .. })
                    {
                        *access = contiguous(def, true, dtype);
                    }
                }
                for (&dst, dst_access) in dsts.iter().zip(dst_accesses.iter_mut()) {
                    let users: Vec<usize> = (0..body.len())
                        .filter(|&i| reads[i].iter().any(|&(def, _)| def == dst))
                        .collect();
                    if let [user] = users[..]
                        && matches!(body[user], Inst::Store { .. })
                    {
                        *dst_access = contiguous(user, false, dtype);
                        if dst_access.is_some() {
                            skipped[user] = true;
                        }
                    }
                }
            }
        }
        skipped
    }

    /// The access of body instruction `i` where it is a contiguous row of a program input
    /// (`input`) or output, of `dtype`: a routine may read or write it directly (caller-supplied
    /// inputs and outputs never overlap).
    pub(super) fn contiguous_access(&self, i: usize, input: bool, dtype: DType) -> Option<usize> {
        self.fx.info.access_of.get(i).copied().flatten().filter(|&k| {
            let access = &self.fx.info.accesses[k];
            access.dtype == dtype
                && self.inner_stride(k) == 1
                && access
                    .buf
                    .and_then(|buf| self.fx.info.buffer_is_input.get(buf.index()).copied().flatten())
                    == Some(input)
        })
    }

    /// The staging buffers of the plan's staged values and invariant arguments, shared by
    /// liveness and 32-byte aligned, in tiles as long as [`tile_elems`] allows with tiles of at
    /// least `min_tile` elements (`None` when even those exceed [`TILE_STAGING_MAX`]).
    fn allocate_staging(
        &self,
        b: &mut FunctionBuilder<'_>,
        segments: Vec<Segment>,
        staged_defs: &[usize],
        (reduced, min_tile): (Vec<usize>, usize),
    ) -> Result<Option<TilePlan>, BackendError> {
        let body = &self.kernel().body;
        let mut cells = HashMap::with_capacity(staged_defs.len());
        for &def in staged_defs {
            let slot = body[def]
                .dst()
                .ok_or_else(|| internal("staged value without a slot"))?;
            cells.insert(
                def,
                cl_type(self.slot_dtype(slot)?, self.cur.width)
                    .lane_type()
                    .bytes(),
            );
        }
        let mut invariant_cells: Vec<(SlotId, u32)> = Vec::new();
        for segment in &segments {
            if let Segment::Call { srcs, .. } = segment {
                for src in srcs {
                    if let TileSrc::Invariant(slot) = *src
                        && !invariant_cells.iter().any(|&(s, _)| s == slot)
                    {
                        invariant_cells.push((
                            slot,
                            cl_type(self.slot_dtype(slot)?, self.cur.width)
                                .lane_type()
                                .bytes(),
                        ));
                    }
                }
            }
        }
        let buffers = staging_buffers(&segments, &cells, &reduced);
        let point_bytes: u64 = buffers.cells.iter().map(|&cell| u64::from(cell)).sum::<u64>()
            + invariant_cells
                .iter()
                .map(|&(_, cell)| u64::from(cell))
                .sum::<u64>();
        let calls = segments
            .iter()
            .filter(|segment| matches!(segment, Segment::Call { .. }))
            .count();
        let Some(tile) = tile_elems(point_bytes, calls, min_tile) else {
            // More values live across the segments than the routine calls repay, or than the
            // staging budget holds even in the shortest tile: the untiled code, whose frame
            // holds only its spills, runs the kernel instead.
            return Ok(None);
        };
        let tile_cells = u32::try_from(tile).map_err(|_| internal("tile too long"))?;
        // 32-byte alignment: the tile routines read and write whole AVX2 vectors. Each buffer
        // ends `STAGING_SKEW` bytes after its cells.
        let stacks: Vec<StackSlot> = buffers
            .cells
            .iter()
            .map(|&cell| {
                b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    cell * tile_cells + STAGING_SKEW,
                    5,
                ))
            })
            .collect();
        let staged = buffers
            .of_def
            .iter()
            .map(|(&def, &buffer)| (def, (stacks[buffer], buffers.cells[buffer])))
            .collect();
        let invariant = invariant_cells
            .into_iter()
            .map(|(slot, cell)| {
                let stack = b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    cell * tile_cells,
                    5,
                ));
                (slot, stack, cell)
            })
            .collect();
        Ok(Some(TilePlan {
            segments,
            tile,
            staged,
            invariant,
            reduced,
            fused: None,
        }))
    }

    /// The elementwise loop over `start..end` in tiles of up to `TILE` elements: each segment of
    /// the plan runs over the whole tile in turn, ops segments as a vector loop whose last pass
    /// ends at the tile's end, routine segments as one call.
    pub(super) fn emit_tiled_loop(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        let plan = self
            .cur
            .tiles
            .take()
            .ok_or_else(|| internal("tiled loop without a plan"))?;
        let result = self.emit_tiles(b, start, end, ptrs, &plan);
        self.cur.tiles = Some(plan);
        result
    }

    pub(super) fn emit_tiles(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        ptrs: &[Value],
        plan: &TilePlan,
    ) -> Result<(), BackendError> {
        if let Some(fused) = &plan.fused {
            return self.emit_fused_call(b, fused, start, end, ptrs);
        }
        let w = self.cur.width;
        self.emit_while_below(b, start, end, &mut |g, b, at| {
            // A tile is `TILE` elements, or all that is left; a full tile stops short when it
            // would leave fewer than `step` elements, so that no tile is shorter than one pass
            // of the segments (ranges hold at least 64 elements: `KernelShape::new`,
            // `pool::run_split`).
            let unroll = g.cur.segment_unroll;
            let step = i64::from(w) * unroll;
            let left = b.ins().isub(end, at);
            let tile = b.ins().iconst(types::I64, plan.tile as i64);
            let rest = b.ins().iadd_imm_s(left, -step);
            let rest_short = b.ins().icmp(IntCC::UnsignedLessThan, rest, tile);
            let full = b.ins().select(rest_short, rest, tile);
            let last = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, left, tile);
            let count = b.ins().select(last, left, full);
            g.emit_tile_segments(b, plan, at, count, ptrs)?;
            Ok(b.ins().iadd(at, count))
        })
    }

    /// Runs `body` at `at = start`, then at each position it returns, while `at < end` (tested
    /// before each run: `body` may not run at all).
    pub(super) fn emit_while_below(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        body: &mut WhileBody<'_, Self>,
    ) -> Result<(), BackendError> {
        let header = b.create_block();
        let body_block = b.create_block();
        let exit = b.create_block();
        b.append_block_param(header, types::I64);
        b.ins().jump(header, &[BlockArg::Value(start)]);
        b.switch_to_block(header);
        let at = b.block_params(header)[0];
        let more = b.ins().icmp(IntCC::UnsignedLessThan, at, end);
        b.ins().brif(more, body_block, &[], exit, &[]);
        b.switch_to_block(body_block);
        let next = body(self, b, at)?;
        b.ins().jump(header, &[BlockArg::Value(next)]);
        b.switch_to_block(exit);
        Ok(())
    }

    /// Every segment of `plan` over the tile of `count` elements at row position `at` (at least
    /// one pass of `segment_unroll` vectors long).
    pub(super) fn emit_tile_segments(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &TilePlan,
        at: Value,
        count: Value,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        let w = self.cur.width;
        let unroll = self.cur.segment_unroll;
        let step = i64::from(w) * unroll;
        for segment in &plan.segments {
            match segment {
                Segment::Ops { insts, loads } => {
                    // `unroll` vectors per pass; the elements left after the last full pass are
                    // covered by one more pass ending at the tile's end, which recomputes a
                    // few elements (harmless: a segment never reads what it writes, and no
                    // output overlaps an input). Every segment passes over a tile at the same
                    // points, so a staged value is written and read at the same width, and
                    // there is no scalar tail: one copy of the body per segment keeps the
                    // compile time down. The loop is tested at its bottom (one branch per
                    // pass); a tile holds at least one pass (`count >= step`), so the first
                    // pass needs no test.
                    let body = b.create_block();
                    let ragged = b.create_block();
                    let done = b.create_block();
                    for block in [body, ragged] {
                        b.append_block_param(block, types::I64);
                    }
                    let zero = b.ins().iconst(types::I64, 0);
                    b.ins().jump(body, &[BlockArg::Value(zero)]);
                    b.switch_to_block(body);
                    let j = b.block_params(body)[0];
                    for k in 0..unroll {
                        let jk = if k == 0 {
                            j
                        } else {
                            b.ins().iadd_imm_s(j, k * i64::from(w))
                        };
                        self.emit_segment(b, (w, plan), (insts, loads), SegmentAt::Tile { at, j: jk }, ptrs)?;
                    }
                    let next = b.ins().iadd_imm_s(j, step);
                    let after = b.ins().iadd_imm_s(next, step);
                    let fits = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, after, count);
                    b.ins().brif(
                        fits,
                        body,
                        &[BlockArg::Value(next)],
                        ragged,
                        &[BlockArg::Value(next)],
                    );
                    b.switch_to_block(ragged);
                    let j = b.block_params(ragged)[0];
                    let more = b.ins().icmp(IntCC::UnsignedLessThan, j, count);
                    let last_pass = b.ins().iadd_imm_s(count, -step);
                    b.ins().brif(more, body, &[BlockArg::Value(last_pass)], done, &[]);
                    b.switch_to_block(done);
                }
                Segment::Call { .. } => self.emit_routine_call(b, plan, segment, at, count, ptrs)?,
            }
        }
        Ok(())
    }

    /// The routine call of a `Segment::Call` over the `count` elements of the tile at row
    /// position `at`.
    pub(super) fn emit_routine_call(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &TilePlan,
        segment: &Segment,
        at: Value,
        count: Value,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        let Segment::Call {
            routine,
            srcs,
            dsts,
            src_accesses,
            dst_accesses,
        } = segment
        else {
            return Err(internal("not a routine segment"));
        };
        let func = self
            .fx
            .imports
            .routine(*routine)
            .ok_or_else(|| internal("tile routine not linked"))?;
        // A routine reads and writes the buffer directly where the access is
        // contiguous, and the value's staging cell otherwise.
        let place = |g: &Self, b: &mut FunctionBuilder<'_>, def: usize, access: Option<usize>| match access {
            Some(k) => Ok(g.address(b, k, at, at, ptrs, 0)),
            None => {
                let (stack, _) = *plan
                    .staged
                    .get(&def)
                    .ok_or_else(|| internal("routine argument or result not staged"))?;
                Ok::<_, BackendError>(g.stack_base(b, stack))
            }
        };
        let mut args = Vec::with_capacity(srcs.len() + dsts.len() + 1);
        for (src, access) in srcs.iter().zip(src_accesses) {
            args.push(match *src {
                TileSrc::Body(def) => place(self, b, def, *access)?,
                TileSrc::Invariant(slot) => {
                    let (_, stack, _) = plan
                        .invariant
                        .iter()
                        .find(|&&(s, _, _)| s == slot)
                        .copied()
                        .ok_or_else(|| internal("invariant routine argument without a buffer"))?;
                    self.stack_base(b, stack)
                }
            });
        }
        for (&dst, &access) in dsts.iter().zip(dst_accesses) {
            let dst_addr = place(self, b, dst, access)?;
            args.push(dst_addr);
        }
        args.push(count);
        b.ins().call(func, &args);
        Ok(())
    }

    /// Broadcasts each invariant routine argument into its buffer (`TILE` cells, by a loop of
    /// vector stores), once per call before the loops whose tiles read it.
    pub(super) fn fill_invariant_buffers(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &TilePlan,
    ) -> Result<(), BackendError> {
        if let Some(fused) = &plan.fused {
            return self.fill_fused_plan(b, fused);
        }
        if plan.invariant.is_empty() {
            return Ok(());
        }
        let w = self.cur.width;
        let values = self.preamble_slots(b, w);
        for &(slot, stack, cell) in &plan.invariant {
            let value =
                values.get(slot.index()).copied().flatten().ok_or_else(|| {
                    internal(format!("invariant routine argument {slot} not in the preamble"))
                })?;
            let base = self.stack_base(b, stack);
            let step = i64::from(cell) * i64::from(w);
            let bytes = i64::from(cell) * plan.tile as i64;
            let fill = b.create_block();
            let done = b.create_block();
            b.append_block_param(fill, types::I64);
            let zero = b.ins().iconst(types::I64, 0);
            b.ins().jump(fill, &[BlockArg::Value(zero)]);
            b.switch_to_block(fill);
            let offset = b.block_params(fill)[0];
            let addr = b.ins().iadd(base, offset);
            b.ins().store(MemFlagsData::trusted(), value, addr, 0);
            let next = b.ins().iadd_imm_s(offset, step);
            let more = b.ins().icmp_imm_s(IntCC::SignedLessThan, next, bytes);
            b.ins().brif(more, fill, &[BlockArg::Value(next)], done, &[]);
            b.switch_to_block(done);
        }
        Ok(())
    }

    /// One ops segment (`Segment::Ops`'s instructions and staged loads) `at` a point of the
    /// loop (`ptrs`: the addresses at position 0), `w` lanes at once.
    pub(super) fn emit_segment(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (w, plan): (u8, &TilePlan),
        (insts, loads): (&[usize], &[(usize, usize, SlotId)]),
        at: SegmentAt,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        let j = match at {
            SegmentAt::Tile { j, .. } => j,
            SegmentAt::Lanes { cell, .. } => cell,
        };
        let mut slots = self.preamble_slots_read(b, w, insts);
        if self.joins_lane_stores() {
            self.cur.joined = Some(joined::JoinedStores::lanes());
        }
        let cell_addr = |g: &Self, b: &mut FunctionBuilder<'_>, def: usize| {
            let (stack, cell) = *plan
                .staged
                .get(&def)
                .ok_or_else(|| internal("value not staged"))?;
            let base = g.stack_base(b, stack);
            let offset = g.scale(b, j, i64::from(cell));
            Ok::<_, BackendError>(g.add(b, base, offset))
        };
        // The staged value (its defining body index) each slot holds.
        let mut held: HashMap<SlotId, usize> = HashMap::new();
        let pos = match at {
            SegmentAt::Tile { at, j } => self.add(b, at, j),
            SegmentAt::Lanes { pos, .. } => pos,
        };
        let body = &self.kernel().body;
        for &i in insts {
            let inst = body
                .get(i)
                .ok_or_else(|| internal("segment instruction out of range"))?;
            for &(_, def, slot) in loads.iter().filter(|&&(reader, _, _)| reader == i) {
                if held.get(&slot) != Some(&def) && !plan.staged.contains_key(&def) {
                    // A program input's load, loaded again here (see `staged_values`).
                    let load = body
                        .get(def)
                        .filter(|inst| matches!(inst, Inst::Load { .. }))
                        .ok_or_else(|| internal("value not staged"))?;
                    let access = self.fx.info.access_of.get(def).copied().flatten();
                    let place = InstAt {
                        w,
                        access: access.map(|a| (a, pos)),
                        offs: ptrs,
                        body_index: Some(def),
                    };
                    self.emit_inst(b, load, place, &mut slots, &mut Vec::new())?;
                    held.insert(slot, def);
                } else if held.get(&slot) != Some(&def) {
                    let addr = cell_addr(self, b, def)?;
                    let ty = cl_type(self.slot_dtype(slot)?, w);
                    let value = b.ins().load(ty, MemFlagsData::trusted(), addr, 0);
                    if let Some(s) = slots.get_mut(slot.index()) {
                        *s = Some(value);
                    }
                    held.insert(slot, def);
                }
            }
            let access = self.fx.info.access_of.get(i).copied().flatten();
            let place = InstAt {
                w,
                access: access.map(|a| (a, pos)),
                offs: ptrs,
                body_index: Some(i),
            };
            self.emit_inst(b, inst, place, &mut slots, &mut Vec::new())?;
            if let Some(dst) = inst.dst() {
                held.insert(dst, i);
            }
            if plan.staged.contains_key(&i)
                && let Some(dst) = inst.dst()
            {
                let value = slots
                    .get(dst.index())
                    .copied()
                    .flatten()
                    .ok_or_else(|| internal("staged value not computed"))?;
                let addr = cell_addr(self, b, i)?;
                b.ins().store(MemFlagsData::trusted(), value, addr, 0);
            }
        }
        self.flush_joined(b);
        self.cur.joined = None;
        Ok(())
    }

    /// One innermost reduced row of `n` elements (`ptrs`: its addresses at position 0) in tiles:
    /// the plan's segments over a tile, then [`Gen::emit_tile_reduction`] folds the tile's
    /// reduced values into the partials. Every tile but the last holds a multiple of the
    /// partials' `lanes` elements, so point `j` of the row folds into lane `j % lanes` in row
    /// order, as [`Gen::emit_inner`] folds it: the same sums (up to the last bit by which a tile
    /// routine may differ from the inline polynomial).
    pub(super) fn emit_tiled_row(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        n: usize,
        ptrs: &[Value],
        partials: &Partials,
        plan: &TilePlan,
    ) -> Result<(), BackendError> {
        let lanes = partials.lanes.max(1) as usize;
        let step = usize::from(self.cur.width) * self.cur.segment_unroll.max(1) as usize;
        // Tiles of `size` elements and the rest; a rest shorter than one pass of the segments
        // borrows `shift` elements (a multiple of `lanes`) from the tile before it.
        let size = (plan.tile / lanes * lanes).max(lanes);
        if size > plan.tile {
            return Err(internal("a tile shorter than the partials' lanes"));
        }
        let rest = n % size;
        let shift = if n > size && rest != 0 && rest < step {
            (step - rest).next_multiple_of(lanes)
        } else {
            0
        };
        let zero = b.ins().iconst(types::I64, 0);
        let end = b.ins().iconst(types::I64, n as i64);
        self.emit_while_below(b, zero, end, &mut |g, b, at| {
            let left = b.ins().isub(end, at);
            let full = b.ins().iconst(types::I64, size as i64);
            let mut count = full;
            if shift > 0 {
                let borrows = b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedLessThan, left, (size + step) as i64);
                let shortened = b.ins().iconst(types::I64, (size - shift) as i64);
                count = b.ins().select(borrows, shortened, full);
            }
            let last = b
                .ins()
                .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, left, size as i64);
            let count = b.ins().select(last, left, count);
            g.emit_tile_segments(b, plan, at, count, ptrs)?;
            g.emit_tile_reduction(b, plan, partials, count)?;
            Ok(b.ins().iadd(at, count))
        })
    }

    /// Folds the `count` staged values of each reduction in a tile (whose first point's lane is
    /// 0) into the partials: vectors of `w` lanes `lanes` points at a time where `w` divides
    /// `lanes`, as [`Gen::emit_inner`]'s vector loop does, and the points left one at a time
    /// into lane `j % lanes`.
    pub(super) fn emit_tile_reduction(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &TilePlan,
        partials: &Partials,
        count: Value,
    ) -> Result<(), BackendError> {
        let w = self.cur.width;
        let lanes = partials.lanes.max(1);
        let cells = partials
            .reduces
            .iter()
            .zip(&plan.reduced)
            .map(|(r, def)| {
                plan.staged
                    .get(def)
                    .map(|&(stack, cell)| (r, stack, i64::from(cell)))
                    .ok_or_else(|| internal("reduced value not staged"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if cells.len() != partials.reduces.len() {
            return Err(internal("tiled reduction without its reduced values"));
        }
        let cell_addr = |g: &Self, b: &mut FunctionBuilder<'_>, stack: StackSlot, cell: i64, j: Value| {
            let base = g.stack_base(b, stack);
            let offset = g.scale(b, j, cell);
            g.add(b, base, offset)
        };
        let mut j = b.ins().iconst(types::I64, 0);
        // Vectors of `w` lanes, `lanes` points a pass; one lane folds its points one at a time
        // with the accumulators in registers (a fold through the stack slot would put a store
        // and a load on the chain of every point).
        let w = if lanes == 1 { 1 } else { w };
        if (w > 1 || lanes == 1) && lanes.is_multiple_of(u32::from(w)) {
            let chunks = (lanes / u32::from(w)) as usize;
            let carried = partials.load_vectors(b, w)?;
            let (after, accs) =
                self.emit_loop(b, j, count, i64::from(lanes), &carried, &mut |g, b, at, accs| {
                    let mut accs = accs.to_vec();
                    for (c, &(r, stack, cell)) in cells.iter().enumerate() {
                        for k in 0..chunks {
                            let pos = g.add_imm(b, at, (k * usize::from(w)) as i64);
                            let addr = cell_addr(g, b, stack, cell, pos);
                            let value = b
                                .ins()
                                .load(cl_type(r.dtype, w), MemFlagsData::trusted(), addr, 0);
                            let mut e = Emitter {
                                b: &mut *b,
                                w,
                                imports: g.fx.imports,
                            };
                            accs[c * chunks + k] = e.combine(r.op, accs[c * chunks + k], value, r.dtype)?;
                        }
                    }
                    Ok(accs)
                })?;
            partials.store_vectors(b, w, &accs)?;
            if lanes == 1 {
                return Ok(());
            }
            j = after;
        }
        self.emit_loop(b, j, count, 1, &[], &mut |g, b, at, _| {
            let lane = partials.lane_of(b, at);
            for &(r, stack, cell) in &cells {
                let addr = cell_addr(g, b, stack, cell, at);
                let value = b
                    .ins()
                    .load(cl_type(r.dtype, 1), MemFlagsData::trusted(), addr, 0);
                partials.fold_scalar(b, g.fx.ptr, g.fx.imports, r, lane, value)?;
            }
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// The tile routine computing `inst` (linked or not), if it has one.
    pub(super) fn routine_of(&self, inst: &Inst) -> Result<Option<AotFn>, BackendError> {
        Ok(match inst {
            Inst::Unary { op, src, .. } => AotFn::for_op(*op, self.slot_dtype(*src)?),
            Inst::Binary { op, lhs, .. } => AotFn::for_binary(*op, self.slot_dtype(*lhs)?),
            _ => None,
        })
    }

    /// Whether a body instruction has a tile routine (linked or not).
    pub(super) fn body_has_routines(&self) -> Result<bool, BackendError> {
        for inst in &self.kernel().body {
            if self.routine_of(inst)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The values staged across segments (their defining body indices): those read in a later
/// segment than their own, except a direct routine argument and a program input's load that
/// only ops segments read later (they load it again), and routine results not written
/// directly. Adds each staged read to its ops segment's loads, drops the stores a routine now
/// does itself and loads nothing reads any more, and empty ops segments.
fn staged_values(
    body: &[Inst],
    segments: &mut Vec<Segment>,
    (reads, routines, reloadable): (&[Reads], &[Option<AotFn>], &[bool]),
    (segment_of, skipped): (&[usize], &[bool]),
) -> Vec<usize> {
    // `(routine instruction, argument definition)` for every argument read directly.
    let direct_src: Vec<(usize, usize)> = segments
        .iter()
        .flat_map(|segment| match segment {
            Segment::Call {
                srcs,
                dsts,
                src_accesses,
                ..
            } => dsts
                .iter()
                .flat_map(|&dst| {
                    srcs.iter()
                        .zip(src_accesses)
                        .filter_map(move |(&src, access)| match (src, access) {
                            (TileSrc::Body(def), Some(_)) => Some((dst, def)),
                            _ => None,
                        })
                })
                .collect::<Vec<_>>(),
            Segment::Ops { .. } => Vec::new(),
        })
        .collect();
    let direct_dst: Vec<usize> = segments
        .iter()
        .flat_map(|segment| match segment {
            Segment::Call {
                dsts, dst_accesses, ..
            } => dsts
                .iter()
                .zip(dst_accesses)
                .filter_map(|(&dst, access)| access.map(|_| dst))
                .collect(),
            Segment::Ops { .. } => Vec::new(),
        })
        .collect();
    // A reloadable load read in later segments only by ops segments is loaded again there
    // (its reads stay in the segments' loads; `Gen::emit_segment` reloads what is not staged);
    // one a routine or the reduction pass reads is staged.
    let in_ops = |i: usize| matches!(segments.get(segment_of[i]), Some(Segment::Ops { .. }));
    let reloaded: Vec<bool> = (0..body.len())
        .map(|def| {
            reloadable.get(def).copied().unwrap_or(false)
                && reads.iter().enumerate().all(|(i, defs)| {
                    skipped[i]
                        || segment_of[i] == segment_of[def]
                        || !defs.iter().any(|&(d, _)| d == def)
                        || in_ops(i)
                })
        })
        .collect();
    let mut staged_defs: Vec<usize> = Vec::new();
    for (i, defs) in reads.iter().enumerate() {
        if skipped[i] {
            continue;
        }
        for &(def, slot) in defs {
            if segment_of[def] == segment_of[i] || direct_src.contains(&(i, def)) {
                continue;
            }
            if !staged_defs.contains(&def) && !reloaded[def] {
                staged_defs.push(def);
            }
            if let Some(Segment::Ops { loads, .. }) = segments.get_mut(segment_of[i]) {
                loads.push((i, def, slot));
            }
        }
        if routines[i].is_some() && !direct_dst.contains(&i) && !staged_defs.contains(&i) {
            staged_defs.push(i);
        }
    }
    // Drop the stores a routine now does itself, and loads nothing reads any more.
    let read_in_segment = |i: usize, insts: &[usize]| {
        insts
            .iter()
            .any(|&j| reads[j].iter().any(|&(def, _)| def == i) && !skipped[j])
    };
    for segment in segments.iter_mut() {
        if let Segment::Ops { insts, .. } = segment {
            let keep: Vec<usize> = insts
                .iter()
                .copied()
                .filter(|&i| {
                    let dead_load = matches!(body[i], Inst::Load { .. })
                        && !staged_defs.contains(&i)
                        && !read_in_segment(i, insts);
                    !skipped[i] && !dead_load
                })
                .collect();
            *insts = keep;
        }
    }
    segments.retain(|segment| !matches!(segment, Segment::Ops { insts, .. } if insts.is_empty()));
    staged_defs
}
