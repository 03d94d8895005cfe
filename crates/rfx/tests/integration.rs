//! The integration tests of `rfx` in one test binary (one link instead of one per file); each
//! file is a module of it. `alloc.rs` (a counting global allocator) and `dump.rs` (it sets
//! `RFX_DUMP` for the whole process) stay binaries of their own.

mod common;
mod lie_common;
mod lie_ref;

#[path = "arg_extrema.rs"]
mod arg_extrema;
#[path = "caller_trace.rs"]
mod caller_trace;
#[path = "concat_regions.rs"]
mod concat_regions;
#[path = "cpu_target.rs"]
mod cpu_target;
#[path = "deep_inputs.rs"]
mod deep_inputs;
#[path = "erf.rs"]
mod erf;
#[path = "error_variants.rs"]
mod error_variants;
#[path = "errors_doc.rs"]
mod errors_doc;
#[path = "export.rs"]
mod export;
#[path = "expr.rs"]
mod expr;
#[path = "jit.rs"]
mod jit;
#[path = "lie.rs"]
mod lie;
#[path = "lie_accuracy.rs"]
mod lie_accuracy;
#[path = "lie_exp_jacobians.rs"]
mod lie_exp_jacobians;
#[path = "lie_log_jacobians.rs"]
mod lie_log_jacobians;
#[path = "lie_se.rs"]
mod lie_se;
#[path = "linalg.rs"]
mod linalg;
#[path = "lookup.rs"]
mod lookup;
#[path = "loops.rs"]
mod loops;
#[path = "nalgebra.rs"]
mod nalgebra;
#[path = "scans.rs"]
mod scans;
#[path = "vmap.rs"]
mod vmap;
#[path = "windows.rs"]
mod windows;
