//! What lowering did.

use std::fmt;

/// Lowering facts about one LIR kernel.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct KernelReport {
    /// The LIR kernel's name.
    pub name: String,
    /// MIR values the kernel computes (one slot each without reuse or pooling).
    pub values: usize,
    /// Slots after reuse and constant pooling.
    pub slots: usize,
    /// Loop dims before coalescing (the MIR domain's rank).
    pub dims_before: usize,
    /// Loop dims after coalescing.
    pub dims_after: usize,
    /// Elements per vector.
    pub vector_width: u32,
    /// Instructions hoisted out of the loop.
    pub preamble_insts: usize,
    /// Instructions in the loop body.
    pub body_insts: usize,
}

/// What lowering did to a program.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LowerReport {
    /// One entry per LIR kernel.
    pub kernels: Vec<KernelReport>,
    /// Arena size of the memory plan (peak bytes of temporaries).
    pub arena_bytes: usize,
    /// Bytes the temporaries would need without reuse (each as the arena places it:
    /// [`crate::arena_footprint`]).
    pub temp_bytes_without_reuse: usize,
}

impl fmt::Display for LowerReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<8} {:>6} {:>6} {:>9} {:>6} {:>9} {:>5}",
            "kernel", "values", "slots", "dims", "vector", "preamble", "body"
        )?;
        for k in &self.kernels {
            writeln!(
                f,
                "{:<8} {:>6} {:>6} {:>4} -> {:<2} {:>6} {:>9} {:>5}",
                k.name,
                k.values,
                k.slots,
                k.dims_before,
                k.dims_after,
                k.vector_width,
                k.preamble_insts,
                k.body_insts
            )?;
        }
        writeln!(
            f,
            "arena: {} bytes (without reuse: {} bytes)",
            self.arena_bytes, self.temp_bytes_without_reuse
        )
    }
}
