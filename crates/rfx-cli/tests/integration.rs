//! The integration tests of `rfx-cli` in one test binary (one link instead of one per file);
//! each file is a module of it. `fuzz.rs` (it needs the `fuzz` feature) stays a binary of its own.

mod common;
#[path = "common/fixtures.rs"]
mod fixtures;

#[path = "bench.rs"]
mod bench;
#[path = "bench_memory.rs"]
mod bench_memory;
#[path = "c_backend.rs"]
mod c_backend;
#[path = "cli.rs"]
mod cli;
#[path = "command_line.rs"]
mod command_line;
#[path = "deep_inputs.rs"]
mod deep_inputs;
#[path = "export.rs"]
mod export;
#[path = "hardening.rs"]
mod hardening;
#[path = "metal_quiet.rs"]
mod metal_quiet;
#[path = "npy_inputs.rs"]
mod npy_inputs;
#[path = "numpy_min_max.rs"]
mod numpy_min_max;
#[path = "printing_and_errors.rs"]
mod printing_and_errors;
