//! The integration tests of `rfx-opt` in one test binary (one link instead of one per file);
//! each file is a module of it. `corpus.rs` (its snapshots are named after its binary) stays a binary of its own.

mod loop_cases;

#[path = "deep_chains.rs"]
mod deep_chains;
#[path = "error_variants.rs"]
mod error_variants;
#[path = "loops.rs"]
mod loops;
#[path = "parts.rs"]
mod parts;
#[path = "set_row.rs"]
mod set_row;
#[path = "soundness.rs"]
mod soundness;
#[path = "unit_axes.rs"]
mod unit_axes;
#[path = "views.rs"]
mod views;
