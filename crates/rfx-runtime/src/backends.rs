//! The backends this build includes.

use std::sync::{Arc, LazyLock};

use rfx_lower::Registry;

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    let mut registry = Registry::default();
    registry.register(Arc::new(rfx_codegen_cpu::CpuBackend));
    #[cfg(feature = "cuda")]
    registry.register(Arc::new(rfx_codegen_cuda::CudaBackend));
    #[cfg(feature = "metal")]
    registry.register(Arc::new(rfx_codegen_metal::MetalBackend));
    registry
});

/// The process-wide backend registry: `"interp"` and `"cpu"` always, `"cuda"` and `"metal"`
/// when rfx-runtime is built with the cargo feature of that name. A known backend left out of
/// the build is reported by [`Registry::get`] as unavailable, with the feature to enable.
pub fn registry() -> &'static Registry {
    &REGISTRY
}
