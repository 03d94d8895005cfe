//! Lowering settings.

/// How to shape the loops of lowered kernels. The defaults fit x86-64 with 128-bit vectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LowerConfig {
    /// Bytes per SIMD vector; a kernel's vector width is this divided by its widest element.
    pub vector_bytes: usize,
    /// Fewest elements a worker thread is given; smaller kernels run on the caller's thread.
    pub min_elems_per_thread: usize,
    /// Elements per tile for kernels that hand steps to out-of-line routines.
    pub tile: usize,
    /// Alignment of every temporary in the arena (the widest vector, or a cache line).
    pub arena_align: usize,
    /// Partial accumulators per reduction (see `rfx_ir::lir::Schedule::reduce_lanes`); `None`
    /// gives two vectors' worth (`2 * vector_width`), which lets a vector backend keep two
    /// independent accumulators in flight, except along rows of the innermost reduced dimension
    /// of at most one and a half times that many points, which reduce sequentially (`1`), and
    /// except where neighbouring outputs fill a vector (`1`, one output per lane); a reduction
    /// of more than `rfx_ir::lir::REDUCE_LEAF_POINTS` points per output gets four vectors' worth
    /// (unless its outputs fill vector lanes), so that a float sum is blocked and combined
    /// pairwise, and so does a row of at least 64 vectors' worth of points (four accumulators
    /// in flight). `Some(1)` reduces
    /// sequentially, exactly like the HIR interpreter, at any length.
    pub reduce_lanes: Option<u32>,
}

impl Default for LowerConfig {
    fn default() -> LowerConfig {
        LowerConfig {
            vector_bytes: 16,
            min_elems_per_thread: 32_768,
            tile: 1024,
            arena_align: 64,
            reduce_lanes: None,
        }
    }
}
