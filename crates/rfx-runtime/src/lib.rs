//! `rfx-runtime`: the compiled-kernel cache, the executor and the dispatch queue.
//!
//! **Owns:** the cache keyed by (kernel fingerprint, shapes, dtypes, backend, options) with
//! explanations of every miss, the real-time call path (borrowed inputs, caller-provided outputs,
//! no allocation and no lock once bound), and the single-worker dispatch queue.
//!
//! **Depends on:** every compiler crate (`rfx-ir`, `rfx-opt`, `rfx-autodiff`, `rfx-lower`,
//! `rfx-codegen-cpu`; the GPU code generators behind cargo features). **May not depend on:** the
//! `rfx` facade or the CLI.
//!
//! Status: the runtime lands with the runtime issue; see `ROADMAP.md`.
#![deny(missing_docs)]
