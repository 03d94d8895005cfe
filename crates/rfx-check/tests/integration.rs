//! The integration tests of `rfx-check` in one test binary (one link instead of one per file);
//! each file is a module of it. `generator.rs` and `lowering.rs` stay binaries of their own: `cargo xtask miri` runs them alone.

#[path = "autodiff.rs"]
mod autodiff;
#[path = "corpus.rs"]
mod corpus;
#[path = "loop_fuzz.rs"]
mod loop_fuzz;
#[path = "loop_programs.rs"]
mod loop_programs;
#[path = "saturation_limits.rs"]
mod saturation_limits;
#[path = "soundness.rs"]
mod soundness;
#[path = "vmap.rs"]
mod vmap;
