//! The `"metal"` backend behind the [`Backend`] trait, and the text dumps.

use std::sync::Arc;

use rfx_ir::lir::LirProgram;
use rfx_ir::{Array, ArrayView, BinaryOp, DType, TensorType, UnaryOp};
use rfx_lower::{Backend, BackendError, CompileOptions, Compiled, LowerError, Transcendental};

use crate::gpu::DeviceArray;
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

    /// Compiles `program` into a [`MetalProgram`], which runs on host arrays (as the
    /// [`Compiled`] of [`Backend::compile`] does) and also on device-resident
    /// [`DeviceArray`]s.
    pub fn compile_program(
        &self,
        program: &LirProgram,
        _options: &CompileOptions,
    ) -> Result<MetalProgram, BackendError> {
        let shader = verified_shader(program)?;
        let gpu = gpu::gpu()?;
        Ok(MetalProgram(Arc::new(gpu::compile(gpu, program, &shader)?)))
    }

    /// Copies `array` into new device memory (queued before any later launch). `f64` is
    /// [`BackendError::Unsupported`].
    pub fn to_device(&self, array: ArrayView<'_>) -> Result<DeviceArray, BackendError> {
        let ty = TensorType::new(array.dtype(), array.shape().clone());
        let mut device = DeviceArray::zeros(gpu::gpu()?, &ty)?;
        device.copy_from_host(array)?;
        Ok(device)
    }

    /// A device array of `ty` filled with zeros (`false` for bool).
    pub fn zeros(&self, ty: &TensorType) -> Result<DeviceArray, BackendError> {
        DeviceArray::zeros(gpu::gpu()?, ty)
    }

    /// Copies `array` back into a new host array (waits for the work queued before it).
    pub fn from_device(&self, array: &DeviceArray) -> Result<Array, BackendError> {
        array.to_host()
    }
}

/// A program compiled for the GPU by [`MetalBackend::compile_program`].
///
/// [`Compiled::run`] takes host arrays (copy in, run, copy out, wait);
/// [`MetalProgram::launch`] takes [`DeviceArray`]s and only queues the work, so a control
/// loop can keep its state on the device and read it back when it needs it
/// ([`MetalBackend::from_device`] waits for what was queued before). Inputs and outputs are
/// copied device to device into and out of the program's own buffers, in the same command
/// buffer as its kernels. Launches of one program take turns (they share its buffers), in the
/// order they were made.
#[derive(Clone)]
pub struct MetalProgram(Arc<gpu::MetalCompiled>);

impl std::fmt::Debug for MetalProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetalProgram")
            .field("program", &self.0.program().name())
            .finish_non_exhaustive()
    }
}

impl MetalProgram {
    /// Queues the program on device-resident arrays, in the program's input and output order;
    /// checks every array's dtype and shape first (nothing is queued on a mismatch). Returns
    /// without waiting for the GPU.
    pub fn launch(
        &self,
        inputs: &[&DeviceArray],
        outputs: &mut [&mut DeviceArray],
    ) -> Result<(), BackendError> {
        self.0.launch(inputs, outputs)
    }

    /// Queues the program ([`MetalProgram::launch`]) and waits for it.
    pub fn run_resident(
        &self,
        inputs: &[&DeviceArray],
        outputs: &mut [&mut DeviceArray],
    ) -> Result<(), BackendError> {
        self.0.launch(inputs, outputs)?;
        self.0.wait()
    }

    /// The program as a backend-independent [`Compiled`] (host arrays in and out).
    pub fn compiled(&self) -> Arc<dyn Compiled> {
        self.0.clone()
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

    /// The transcendentals are the device's built-ins, so bounds are documented for one device
    /// only: lavapipe (llvmpipe), the table in the crate documentation, for `f32` arguments in
    /// each op's range whose arguments and exact result are not subnormal (llvmpipe flushes
    /// those). `None` elsewhere, and on every other device.
    fn ulp_bound(&self, op: Transcendental, dtype: DType, args: &[f64]) -> Option<u64> {
        if dtype != DType::F32 || args.len() != op.arity() || !gpu::gpu().is_ok_and(|g| g.is_llvmpipe()) {
            return None;
        }
        lavapipe_ulp_bound(op, args)
    }
}

/// The bound of `op` at `args` on lavapipe (the crate documentation's table), `None` outside
/// the table's ranges. rfx's own functions hold over every argument (`sin`, `cos`, `tan` too,
/// by Payne and Hanek's reduction beyond 32768); `tanh`, which is the built-in above 0.625, only
/// for normal arguments and results in its range.
pub(crate) fn lavapipe_ulp_bound(op: Transcendental, args: &[f64]) -> Option<u64> {
    let within = |x: f64, lo: f64, hi: f64| (lo..=hi).contains(&x);
    match (op, args) {
        (Transcendental::Unary(u), &[x]) => match u {
            UnaryOp::Exp | UnaryOp::Exp2 | UnaryOp::Log | UnaryOp::Log2 => Some(2),
            UnaryOp::Atan | UnaryOp::Asin | UnaryOp::Acos => Some(3),
            UnaryOp::Sigmoid => Some(4),
            UnaryOp::Sin | UnaryOp::Cos => Some(3),
            UnaryOp::Tan => Some(6),
            UnaryOp::Erf => Some(2),
            UnaryOp::Tanh => {
                let subnormal = |v: f64| v != 0.0 && v.abs() < f64::from(f32::MIN_POSITIVE);
                let normal = !subnormal(x) && !subnormal(op.oracle(args));
                (within(x, -10.0, 10.0) && normal).then_some(2)
            }
            // Exact or correctly rounded: no approximation to bound.
            rfx_ir::exact_unary_ops!() => None,
        },
        (Transcendental::Binary(BinaryOp::Pow), [_, _]) => Some(2),
        (Transcendental::Binary(BinaryOp::Atan2), [_, _]) => Some(4),
        _ => None,
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
