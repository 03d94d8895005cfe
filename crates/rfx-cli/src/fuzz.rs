//! `rfx fuzz`: the differential fuzzer of [`rfx_check`] over the backends this command was
//! built with (the CPU always; metal and CUDA with their features; the exported C, `c`, when
//! asked for with `--backend c`). The generator, the oracle, the shrinker and the comparison
//! rules live in `rfx-check`; this module only hands it the backends. Built with the `fuzz`
//! feature (on by default).

use std::path::Path;
use std::sync::{Arc, LazyLock};

use rfx_check::Backends;
pub use rfx_check::{FuzzConfig, FuzzReport, Mismatch, PathStats};
use rfx_lower::Backend;

/// The backend paths `--backend` may name.
pub const PATHS: [&str; 4] = ["cpu", "metal", "cuda", "c"];

/// The backends of this build run by default: the CPU, and metal and CUDA when built in
/// (whether a device is present is found when a run starts). The `c` path compiles every
/// kernel with the system C compiler (tens of milliseconds each), so it runs only when
/// selected ([`select`]).
pub fn backends() -> Backends {
    Backends {
        cpu: Ok(&rfx_codegen_cpu::CpuBackend),
        metal: metal_backend(),
        cuda: cuda_backend(),
        c: Err("not selected (--backend c)".to_string()),
    }
}

/// The backends of this build whose paths `names` lists (each one of [`PATHS`]); the others are
/// skipped as not selected. `Err` names an unknown path.
pub fn select(names: &[String]) -> Result<Backends, String> {
    if let Some(unknown) = names.iter().find(|n| !PATHS.contains(&n.as_str())) {
        return Err(format!(
            "unknown backend `{unknown}` for --backend (one of {})",
            PATHS.join(", ")
        ));
    }
    let chosen = |path: &str, backend: Result<&'static dyn Backend, String>| {
        if names.iter().any(|n| n == path) {
            backend
        } else {
            Err("not selected (--backend)".to_string())
        }
    };
    Ok(Backends {
        cpu: chosen("cpu", Ok(&rfx_codegen_cpu::CpuBackend)),
        metal: chosen("metal", metal_backend()),
        cuda: chosen("cuda", cuda_backend()),
        c: chosen("c", c_backend()),
    })
}

/// The runtime's `"c"` backend, kept for the process (the checking crate takes backends by
/// `'static` reference).
static C_BACKEND: LazyLock<Result<Arc<dyn Backend>, String>> =
    LazyLock::new(|| rfx_runtime::registry().get("c").map_err(|e| e.to_string()));

fn c_backend() -> Result<&'static dyn Backend, String> {
    match &*C_BACKEND {
        Ok(backend) => Ok(backend.as_ref()),
        Err(reason) => Err(reason.clone()),
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
    run_with(config, backends())
}

/// [`run`] on `backends` ([`backends`], or those [`select`] chose).
pub fn run_with(config: &FuzzConfig, backends: Backends) -> anyhow::Result<FuzzReport> {
    #[cfg(feature = "cuda")]
    rfx_codegen_cuda::set_ptx_disk_cache(false);
    let config = FuzzConfig {
        backends,
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
