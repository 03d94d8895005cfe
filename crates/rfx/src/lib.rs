//! `rfx`: a small, fast JIT compiler for robotics control kernels.
//!
//! **Owns:** the facade most users depend on: the tracing API (Rust closures over a traced value
//! type), `jit`, `grad`, `value_and_grad`, `jvp`, `jacobian`, the expression front end and a
//! prelude. It re-exports the host array types of `rfx-ir`.
//!
//! **Depends on:** `rfx-ir`, `rfx-runtime`. **May not depend on:** code generators directly; it
//! reaches them through the runtime.
//!
//! Status: the facade lands with the runtime issue; until then, build kernels with
//! `rfx_ir::hir::Builder` and run them with `rfx_ir::interp`. See `ROADMAP.md`.
#![deny(missing_docs)]
