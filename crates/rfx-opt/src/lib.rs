//! `rfx-opt`: the optimiser that turns a traced HIR kernel into an optimised, fused MIR program.
//!
//! **Owns:** decomposition of composite ops, e-graph rewriting with `egg` (constant folding in the
//! value's dtype, IEEE-exact algebraic simplification, refining and fast-math rules behind
//! explicit switches, CSE by hash-consing), dead-code elimination, and partitioning into fused
//! MIR kernels, with an [`OptReport`] of what happened and why some fusions were missed.
//!
//! **Depends on:** `rfx-ir`, `egg`. `egg` never appears in this crate's public API.
//! **May not depend on:** `rfx-lower`, any code generator, `rfx-runtime`.
//!
//! The passes are plain functions usable alone ([`constant_fold`], [`eliminate_dead_ops`],
//! [`decompose`], [`simplify`], [`fuse_chains`]); [`optimize`] calls them in order and verifies
//! between them.

#![deny(missing_docs)]

mod config;
mod error;
mod fusion;
mod guarded;
mod lang;
mod passes;
mod report;
mod rules;
mod saturate;
mod staged;

pub use config::OptConfig;
pub use error::OptError;
pub use fusion::MAX_FRAME_NESTING;
pub use passes::{
    constant_fold, decompose, eliminate_dead_ops, fuse_chains, optimize, simplify, sink_transposes,
};
pub use report::{MissReason, OptReport, StopReason};
pub use rules::{Exactness, RuleInfo, rule_table};
#[cfg(test)]
mod guarded_tests;
#[cfg(test)]
mod rule_tests;
