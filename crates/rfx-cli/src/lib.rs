//! `rfx-cli`: the `rfx` command (`bench`, `run`, `eval`, `dump`, `dot`, `grad`).
//!
//! **Owns:** argument parsing, `.npy` input and output, exit codes (0 ok, 1 user error, 2 internal)
//! and the benchmark harness's human and JSON output.
//!
//! **Depends on:** the `rfx` facade and the crates below it. **May not depend on:** nothing in the
//! workspace depends on this crate.
//!
//! The crate is the `rfx` binary (`src/main.rs`); this small library part holds the benchmark
//! harness ([`mod@bench`], with its SVG plot in [`mod@plot`]), whose argument struct and entry
//! point other tools may reuse, and the differential fuzzer ([`mod@fuzz`]) behind `rfx fuzz`.
#![deny(missing_docs)]

pub mod bench;
pub mod fuzz;
pub mod npy_read;
pub mod plot;
