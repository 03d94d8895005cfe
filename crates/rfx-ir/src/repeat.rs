//! Bounded loops over a range of a program's kernels, shared by MIR and LIR.
//!
//! A program (MIR or LIR) runs its kernels in order. A [`KernelLoop`] makes the kernels
//! `first..end` run up to `trips` times before the program goes on; loops nest (an inner
//! loop's range lies inside its outer loop's, and two ranges either nest or are disjoint).
//! A carried value lives in a temporary buffer that the range reads at its start and writes at
//! its end, so one iteration's results are the next one's operands. With `exit`, the range
//! writes a `bool` scalar buffer on every iteration and the loop stops after the first
//! iteration that leaves it `false` (a `while_loop`, whose body is written so that running the
//! remaining iterations would change nothing: backends that cannot read the flag cheaply may
//! run all `trips`).
//!
//! HIR's [`crate::hir::Loop`] is compiled to this form by the optimiser.

use crate::BufId;

/// Kernels `first..end` of a program, run up to `trips` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct KernelLoop {
    /// The first kernel of the range.
    pub first: usize,
    /// One past the last kernel of the range; `first < end`.
    pub end: usize,
    /// The trip count, or with `exit` the most iterations.
    pub trips: u64,
    /// A `bool` scalar temporary the range writes each iteration; the loop stops after an
    /// iteration that leaves it `false`.
    pub exit: Option<BufId>,
}
