//! `rfx-opt`: the optimiser that turns a traced HIR kernel into an optimised, fused MIR program.
//!
//! **Owns:** decomposition of composite ops, e-graph rewriting with `egg` (constant folding in the
//! value's dtype, IEEE-exact algebraic simplification, fast-math rules behind an explicit switch,
//! CSE by hash-consing), dead-code elimination, and partitioning into fused MIR kernels, with an
//! `OptReport` of what happened and why some fusions were missed.
//!
//! **Depends on:** `rfx-ir`, `egg`, `petgraph`. `egg` never appears in this crate's public API.
//! **May not depend on:** `rfx-lower`, any code generator, `rfx-runtime`.
//!
//! Status: the passes land with the rfx-opt issue; see `ROADMAP.md`.
#![deny(missing_docs)]
