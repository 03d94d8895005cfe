//! `rfx-codegen-metal`: Metal kernels from LIR through `naga`, executed with `wgpu`.
//!
//! **Owns:** LIR → `naga::Module`, validation, MSL output with an explicit binding map, WGSL for
//! `wgpu`, and the `wgpu` runtime (Metal on Apple, Vulkan elsewhere, lavapipe in CI).
//!
//! **Depends on:** `rfx-ir`, `rfx-lower`, `naga`, `wgpu`. **May not depend on:** other code
//! generators, `rfx-opt` or `rfx-runtime`. `naga`/`wgpu` types never appear in the public API.
//!
//! Status: code generation lands with the rfx-codegen-metal issue; see `ROADMAP.md`.
#![deny(missing_docs)]
