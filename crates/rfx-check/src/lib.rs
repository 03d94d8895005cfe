//! `rfx-check`: the checking tools of rfx, apart from the compiler they check.
//!
//! **Owns:** the differential fuzzer behind `rfx fuzz` — the random kernels of a seed
//! ([`mod@generator`]), the oracle that runs one kernel on the interpreters and the backends and
//! compares them under exact rules ([`mod@oracle`]), the greedy shrinker ([`mod@shrink`]), the
//! corpus runner over seeds and saved kernels ([`mod@corpus`]) and its report — and the backend
//! conformance suite every code generator's tests instantiate ([`mod@conformance`], with the
//! hand-written LIR programs of [`mod@loop_programs`] for program loops).
//!
//! **Depends on:** `rfx-ir`, `rfx-opt`, `rfx-autodiff` and `rfx-lower` (the [`Backend`]
//! trait). **May not depend on:** any code generator (backends are handed in as
//! `&dyn Backend`, [`Backends`]), the runtime or the facade. Code generators use this crate
//! as a dev-dependency only; the `rfx` command links it behind its `fuzz` feature.
//!
//! [`Backend`]: rfx_lower::Backend
#![deny(missing_docs)]

pub mod conformance;
pub mod corpus;
mod error;
pub mod generator;
mod loop_cases;
pub mod loop_programs;
pub mod oracle;
pub mod probe;
mod report;
pub mod shrink;

pub use corpus::{FuzzConfig, InjectedMismatch, check_kernel, replay_file, run};
pub use error::CheckError;
pub use oracle::{Backends, LARGE_TOLERANCE_F32, LARGE_TOLERANCE_F64};
pub use report::{FuzzReport, Mismatch, PathStats};
pub use shrink::shrink;
