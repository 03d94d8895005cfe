//! `rfx fuzz`: the differential fuzzer of [`rfx_check`] over the backends this command was
//! built with (the CPU always; metal and CUDA with their features). The generator, the oracle,
//! the shrinker and the comparison rules live in `rfx-check`; this module only hands it the
//! backends. Built with the `fuzz` feature (on by default).

use std::path::Path;

use rfx_check::Backends;
pub use rfx_check::{FuzzConfig, FuzzReport, Mismatch, PathStats};
use rfx_lower::Backend;

/// The backends of this build: the CPU, and metal and CUDA when built in (whether a device is
/// present is found when a run starts).
pub fn backends() -> Backends {
    Backends {
        cpu: Ok(&rfx_codegen_cpu::CpuBackend),
        metal: metal_backend(),
        cuda: cuda_backend(),
    }
}

#[cfg(feature = "metal")]
fn metal_backend() -> Result<&'static dyn Backend, String> {
    Ok(&rfx_codegen_metal::MetalBackend)
}

#[cfg(not(feature = "metal"))]
fn metal_backend() -> Result<&'static dyn Backend, String> {
    Err("not built (feature `metal`)".to_string())
}

#[cfg(feature = "cuda")]
fn cuda_backend() -> Result<&'static dyn Backend, String> {
    Ok(&rfx_codegen_cuda::CudaBackend)
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend() -> Result<&'static dyn Backend, String> {
    Err("not built (feature `cuda`)".to_string())
}

/// [`rfx_check::run`] with `config` on this build's [`backends`] (whatever
/// `config.backends` holds). Turns the CUDA backend's on-disk PTX cache off for the process:
/// every kernel is compiled once, so storing them would only fill the cache folder.
pub fn run(config: &FuzzConfig) -> anyhow::Result<FuzzReport> {
    #[cfg(feature = "cuda")]
    rfx_codegen_cuda::set_ptx_disk_cache(false);
    let config = FuzzConfig {
        backends: backends(),
        ..config.clone()
    };
    Ok(rfx_check::run(&config)?)
}

/// [`rfx_check::replay_file`] on this build's [`backends`]: a saved `.rfx` file run through
/// every path, its `# seed: N` header giving the inputs.
pub fn replay_file(config: &FuzzConfig, path: &Path, report: &mut FuzzReport) -> anyhow::Result<()> {
    let config = FuzzConfig {
        backends: backends(),
        ..config.clone()
    };
    Ok(rfx_check::replay_file(&config, path, report)?)
}
