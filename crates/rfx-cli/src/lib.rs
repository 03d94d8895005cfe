//! `rfx-cli`: the `rfx` command (`bench`, `run`, `eval`, `dump`, `dot`, `grad`, `fuzz`, `export`, `completions`).
//!
//! **Owns:** argument parsing, `.npy` input and output, the files and stdout the command
//! writes ([`mod@output`]: all or nothing, atomic per file, never through a link), exit codes
//! (0 ok, 1 user error, 2 usage error, 70 internal error) and the benchmark harness's human and
//! JSON output.
//!
//! **Depends on:** the `rfx` facade and the crates below it. **May not depend on:** nothing in the
//! workspace depends on this crate.
//!
//! The crate is the `rfx` binary (`src/main.rs`); this small library part holds the benchmark
//! harness ([`mod@bench`], with its SVG plot in [`mod@plot`]), whose argument struct and entry
//! point other tools may reuse, `rfx fuzz` over the checking crate `rfx-check` ([`mod@fuzz`],
//! with the feature of that name), and the output writer ([`mod@output`]) every subcommand
//! shares.
#![deny(missing_docs)]

pub mod bench;
#[cfg(feature = "fuzz")]
pub mod fuzz;
pub mod npy_read;
pub mod output;
pub mod plot;

/// Directory listings and hand-made `.npy` files for the unit tests (shared with the
/// integration tests).
#[cfg(test)]
#[path = "../tests/common/fixtures.rs"]
mod fixtures;
