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
    #[cfg(feature = "c")]
    registry.register(Arc::new(rfx_codegen_c::CBackend::default()));
    registry
});

/// The process-wide backend registry: `"interp"` and `"cpu"` always, `"cuda"`, `"metal"` and
/// `"c"` when rfx-runtime is built with the cargo feature of that name (`c` is on by default;
/// its backend reads `$CC` when the registry is first used). A known backend left out of
/// the build is reported by [`Registry::get`] as unavailable, with the feature to enable.
pub fn registry() -> &'static Registry {
    &REGISTRY
}
