//! `rfx-runtime`: the compiled-kernel cache, the executor and the dispatch queue.
//!
//! **Owns:** the cache keyed by (kernel fingerprint, shapes, dtypes, backend, options) with
//! explanations of every miss ([`Cache`], [`CacheMiss`]), the compile path through every stage
//! ([`compile`], with `RFX_DUMP=DIR` writing every stage of every compiled kernel), the compiled
//! result ([`Executable`]: easy calls returning owned arrays), the real-time call path
//! ([`BoundKernel`]: borrowed inputs, caller-provided outputs, no allocation and no lock once
//! the first call has run), the backend [`registry`] (GPU backends behind the `cuda` and `metal`
//! cargo features), and the single-worker [`DispatchQueue`].
//!
//! **Depends on:** every compiler crate (`rfx-ir`, `rfx-opt`, `rfx-autodiff`, `rfx-lower`,
//! `rfx-codegen-cpu`; the GPU code generators behind cargo features). **May not depend on:** the
//! `rfx` facade or the CLI.
//!
//! ```
//! use rfx_ir::hir::parse;
//! use rfx_ir::Array;
//! use rfx_runtime::{Cache, CacheKey, CompileConfig, registry};
//!
//! let kernel = parse("kernel k { %x = input x : f32[3]  %y = mul %x, %x : f32[3]  output y = %y }")?;
//! let cache = Cache::new("k");
//! let config = CompileConfig::default();
//! let key = CacheKey::of_kernel(&kernel, &config);
//! let exe = cache.get_or_compile(key, &config, registry(), || Ok::<_, rfx_runtime::RuntimeError>(kernel.clone()))?;
//! let x = Array::from_slice(&[1.0f32, 2.0, 3.0]);
//! let out = exe.call(&[x.view()])?;
//! assert_eq!(out[0].as_slice::<f32>(), Some(&[1.0f32, 4.0, 9.0][..]));
//! assert_eq!(cache.compile_count(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod backends;
mod bound;
mod cache;
mod config;
mod error;
mod executable;
mod queue;

pub use backends::registry;
pub use bound::BoundKernel;
pub use cache::{Cache, CacheKey, CacheMiss, MissReason, explain_miss};
pub use config::CompileConfig;
pub use error::RuntimeError;
pub use executable::{Executable, Fingerprint, compile, stage_dumps};
pub use queue::{DispatchQueue, JobError, JobHandle, SubmitError};
pub use rfx_lower::{CallArgs, CompileOptions, CpuTarget};
