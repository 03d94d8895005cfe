//! The `"metal"` backend behind the [`Backend`] trait, and the text dumps.

use std::sync::Arc;

use rfx_ir::lir::LirProgram;
use rfx_lower::{Backend, BackendError, CompileOptions, Compiled, LowerError};

use crate::{codegen, gpu, shader};

/// GPU kernels through naga and wgpu: Metal on Apple, Vulkan elsewhere (lavapipe, the Mesa
/// software device, on Linux CI).
#[derive(Clone, Copy, Debug, Default)]
pub struct MetalBackend;

impl MetalBackend {
    /// The adapter kernels run on — name, graphics API, device type and driver — or
    /// [`BackendError::Unavailable`] saying why there is none. Finds the device on first use.
    pub fn adapter(&self) -> Result<String, BackendError> {
        gpu::gpu().map(gpu::Gpu::describe)
    }
}

/// The program's WGSL, generated from the verified LIR; not yet validated by naga.
fn generate(program: &LirProgram) -> Result<codegen::Shader, BackendError> {
    rfx_ir::lir::verify(program).map_err(|e| BackendError::Lower(LowerError::InvalidLir(e)))?;
    codegen::generate(program)
}

/// The program's WGSL, validated by naga.
fn verified_shader(program: &LirProgram) -> Result<codegen::Shader, BackendError> {
    let shader = generate(program)?;
    shader::validate(&shader)?;
    Ok(shader)
}

impl Backend for MetalBackend {
    fn name(&self) -> &'static str {
        crate::BACKEND
    }

    fn check_available(&self) -> Result<(), BackendError> {
        gpu::gpu().map(|_| ())
    }

    /// Generates and validates the shader (`f64` anywhere is [`BackendError::Unsupported`]),
    /// then builds one compute pipeline per kernel and the program's device buffers. Needs a
    /// device ([`BackendError::Unavailable`] without one). `fast_math` and `max_threads` change
    /// nothing: the shader is the same either way.
    fn compile(
        &self,
        program: &LirProgram,
        _options: &CompileOptions,
    ) -> Result<Arc<dyn Compiled>, BackendError> {
        let shader = verified_shader(program)?;
        let gpu = gpu::gpu()?;
        Ok(Arc::new(gpu::compile(gpu, program, &shader)?))
    }
}

/// The WGSL module of `program` (`rfx dump --stage wgsl`): one `@compute` entry point per kernel,
/// buffer `N` at `@binding(N)`. Needs no device. `f64` is [`BackendError::Unsupported`].
pub fn wgsl(program: &LirProgram) -> Result<String, BackendError> {
    Ok(verified_shader(program)?.source)
}

/// The Metal Shading Language of `program` (`rfx dump --stage msl`), written by naga from the
/// validated module: one `kernel` function per LIR kernel, buffer `N` at `[[buffer(N)]]`.
/// Needs no device. Compile it with fast math off (`-fno-fast-math`) for rfx's exact results.
pub fn msl(program: &LirProgram) -> Result<String, BackendError> {
    shader::to_msl(&generate(program)?)
}
