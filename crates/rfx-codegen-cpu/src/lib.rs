//! `rfx-codegen-cpu`: native CPU kernels from LIR through Cranelift.
//!
//! **Owns:** LIR → Cranelift IR (vector main loop, scalar tail, f32/f64/i32/bool), vectorised
//! polynomial transcendentals with documented ULP bounds, the persistent thread pool for large
//! kernels, and the safe wrapper that checks every buffer before JIT code sees a pointer.
//!
//! **Depends on:** `rfx-ir`, `rfx-lower`, `cranelift-*`. **May not depend on:** other code
//! generators, `rfx-opt` or `rfx-runtime`. Cranelift types never appear in the public API.
//!
//! Status: code generation lands with the rfx-codegen-cpu issue; see `ROADMAP.md`.
#![deny(missing_docs)]

#[cfg_attr(
    not(test),
    expect(dead_code, reason = "used by the code generator, which lands next")
)]
mod math;
