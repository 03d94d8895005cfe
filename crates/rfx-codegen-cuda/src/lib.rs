//! `rfx-codegen-cuda`: CUDA kernels from LIR, compiled by NVRTC and run through `cudarc`.
//!
//! **Owns:** LIR → CUDA C (grid-stride loops, warp-shuffle reductions), NVRTC compilation to PTX,
//! the device context, module cache and buffer reuse, and a typed `BackendUnavailable` error where
//! no driver or GPU exists (never a panic).
//!
//! **Depends on:** `rfx-ir`, `rfx-lower`, `cudarc`. **May not depend on:** other code generators,
//! `rfx-opt` or `rfx-runtime`. `cudarc` types never appear in the public API.
//!
//! Status: code generation lands with the rfx-codegen-cuda issue; see `ROADMAP.md`.
#![deny(missing_docs)]
