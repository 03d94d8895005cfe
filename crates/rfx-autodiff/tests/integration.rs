//! The integration tests of `rfx-autodiff` in one test binary (one link instead of one per file);
//! each file is a module of it. The snapshot tests (their snapshots are named after their binaries) stay binaries of their own.

mod common;

#[path = "error_variants.rs"]
mod error_variants;
#[path = "fusion.rs"]
mod fusion;
#[path = "higher_order.rs"]
mod higher_order;
#[path = "loops.rs"]
mod loops;
#[path = "ops.rs"]
mod ops;
#[path = "scans.rs"]
mod scans;
#[path = "set_row.rs"]
mod set_row;
#[path = "structure.rs"]
mod structure;
