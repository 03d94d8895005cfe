//! The timing loop the examples share: rfx's examples' loop, warmed up with at least 100 calls
//! and taking 101 samples.

#[path = "../../../rfx/examples/timing/mod.rs"]
mod loop_of_rfx;

/// Median over 101 samples of the mean time of `calls` calls, in ns.
pub(crate) fn median_ns(calls: usize, f: impl FnMut()) -> f64 {
    loop_of_rfx::median_ns(calls.max(100), 101, calls, f)
}
