//! The integration tests of `rfx-ir` in one test binary (one link instead of one per file);
//! each file is a module of it. The snapshot tests (their snapshots are named after their binaries) stay binaries of their own.

#[path = "erf.rs"]
mod erf;
#[path = "error_variants.rs"]
mod error_variants;
#[path = "hir_loops.rs"]
mod hir_loops;
#[path = "interp_hir.rs"]
mod interp_hir;
#[path = "lir_loops.rs"]
mod lir_loops;
#[path = "mir_loops.rs"]
mod mir_loops;
#[path = "mir_regions.rs"]
mod mir_regions;
#[path = "oracle.rs"]
mod oracle;
#[path = "row_stores.rs"]
mod row_stores;
#[path = "scan.rs"]
mod scan;
#[path = "set_row.rs"]
mod set_row;
#[path = "verify_kinds.rs"]
mod verify_kinds;
