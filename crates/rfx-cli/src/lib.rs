//! `rfx-cli`: the `rfx` command (`bench`, `run`, `eval`, `dump`, `dot`, `grad`).
//!
//! **Owns:** argument parsing, `.npy` input and output, exit codes (0 ok, 1 user error, 2 internal)
//! and the benchmark harness's human and JSON output.
//!
//! **Depends on:** the `rfx` facade and the crates below it. **May not depend on:** nothing in the
//! workspace depends on this crate.
//!
//! Status: the command lands with the runtime and benchmark issues; see `ROADMAP.md`.
#![deny(missing_docs)]

pub mod bench;
