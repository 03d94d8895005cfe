//! The `"cuda"` backend: NVRTC-compiled modules run through the CUDA driver API (cudarc).
//!
//! Without a driver or device nothing panics: cudarc panics when `libcuda` is missing, so the
//! driver library is probed first (`is_culib_present`) and every failure becomes
//! [`BackendError::Unavailable`]. The device (ordinal 0), its context, its stream and the module
//! cache are process-wide and created on first use. Each compiled program owns device buffers
//! for its inputs, outputs and arena, allocated once and reused by every call; a call copies the
//! inputs in, launches the kernels in order on the stream, copies the outputs back and waits.
//! Calls on one compiled program are serialised by a mutex (the buffers are shared); different
//! programs run concurrently.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use rfx_ir::lir::{LirProgram, Storage};
use rfx_ir::{ArrayView, ArrayViewMut, DType, DataMut, DataRef};
use rfx_lower::{Backend, BackendError, CompileOptions, Compiled, Scratch, validate_call};

use crate::codegen::{KernelLaunch, generate};
use crate::nvrtc::{compile_ptx, ensure_nvrtc};

/// CUDA kernels compiled by NVRTC and run on the first CUDA device.
///
/// `check_available` and `compile` return [`BackendError::Unavailable`] (never panic) when
/// NVRTC, the driver (`libcuda`) or a device is missing.
#[derive(Clone, Copy, Debug, Default)]
pub struct CudaBackend;

fn runtime_error(what: &str, err: impl std::fmt::Debug) -> BackendError {
    BackendError::Runtime {
        backend: "cuda",
        message: format!("{what}: {err:?}"),
    }
}

/// Threads per block: a multiple of the warp that leaves room for register-heavy kernels.
const BLOCK_THREADS: usize = 256;
/// Most resident blocks per SM the grid-stride loop is given; more blocks only add scheduling.
const BLOCKS_PER_SM: usize = 32;

/// The process-wide device: context, stream, properties and compiled modules.
struct Device {
    stream: Arc<CudaStream>,
    ordinal: usize,
    /// The virtual architecture PTX is compiled for (`compute_XY`); the driver JIT-compiles it
    /// for the device.
    arch: String,
    sm_count: usize,
    /// Loaded modules by CUDA source (which includes the fast-math choice).
    modules: Mutex<HashMap<String, Arc<CudaModule>>>,
}

fn device() -> Result<Arc<Device>, BackendError> {
    static DEVICE: OnceLock<Result<Arc<Device>, String>> = OnceLock::new();
    DEVICE
        .get_or_init(open_device)
        .clone()
        .map_err(|reason| BackendError::Unavailable {
            backend: "cuda",
            reason,
        })
}

fn open_device() -> Result<Arc<Device>, String> {
    // SAFETY: only `dlopen`s the candidate names of the driver library and closes them again.
    // `CudaContext::new` panics when the library is missing, so this check must come first.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(
            "no CUDA driver (libcuda.so) found: this machine has no NVIDIA driver or GPU".to_string(),
        );
    }
    let context = CudaContext::new(0).map_err(|e| format!("no usable CUDA device: {e:?}"))?;
    let (major, minor) = context
        .compute_capability()
        .map_err(|e| format!("cannot read the device's compute capability: {e:?}"))?;
    let sm_count = context
        .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| format!("cannot read the device's SM count: {e:?}"))?;
    // NVRTC 12.9 knows architectures up to 12.0; newer devices JIT the newest PTX it can emit.
    let cc = (major * 10 + minor).clamp(50, 120);
    Ok(Arc::new(Device {
        stream: context.default_stream(),
        ordinal: context.ordinal(),
        arch: format!("compute_{cc}"),
        sm_count: usize::try_from(sm_count).unwrap_or(1).max(1),
        modules: Mutex::new(HashMap::new()),
    }))
}

impl Device {
    /// The module for `source`, compiled and loaded once per device.
    fn module(&self, source: &str, name: &str, fast_math: bool) -> Result<Arc<CudaModule>, BackendError> {
        let mut modules = self
            .modules
            .lock()
            .map_err(|_| runtime_error("module cache", "poisoned lock"))?;
        if let Some(module) = modules.get(source) {
            return Ok(module.clone());
        }
        let ptx = compile_ptx(source, name, &self.arch, fast_math)?;
        let module = self
            .stream
            .context()
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(|e| runtime_error(&format!("loading the module on device {}", self.ordinal), e))?;
        modules.insert(source.to_string(), module.clone());
        Ok(module)
    }

    fn launch_config(&self, units: usize) -> LaunchConfig {
        let block = if units >= BLOCK_THREADS {
            BLOCK_THREADS
        } else {
            units.div_ceil(32).max(1) * 32
        };
        let grid = units.div_ceil(block).clamp(1, self.sm_count * BLOCKS_PER_SM);
        LaunchConfig {
            grid_dim: (u32::try_from(grid).unwrap_or(u32::MAX), 1, 1),
            block_dim: (u32::try_from(block).unwrap_or(256), 1, 1),
            shared_mem_bytes: 0,
        }
    }
}

/// A device buffer of one dtype (bool as bytes 0/1).
enum DeviceBuffer {
    Bool(CudaSlice<bool>),
    I32(CudaSlice<i32>),
    F32(CudaSlice<f32>),
    F64(CudaSlice<f64>),
}

impl DeviceBuffer {
    /// A zeroed buffer of `len` elements (at least one: the driver rejects empty allocations).
    fn new(stream: &Arc<CudaStream>, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
        let len = len.max(1);
        let alloc = |e| runtime_error("allocating device memory", e);
        Ok(match dtype {
            DType::Bool => DeviceBuffer::Bool(stream.alloc_zeros(len).map_err(alloc)?),
            DType::I32 => DeviceBuffer::I32(stream.alloc_zeros(len).map_err(alloc)?),
            DType::F32 => DeviceBuffer::F32(stream.alloc_zeros(len).map_err(alloc)?),
            DType::F64 => DeviceBuffer::F64(stream.alloc_zeros(len).map_err(alloc)?),
        })
    }

    fn upload(&mut self, stream: &Arc<CudaStream>, data: DataRef<'_>) -> Result<(), BackendError> {
        let err = |e| runtime_error("copying an input to the device", e);
        match (self, data) {
            (_, data) if data.is_empty() => Ok(()),
            (DeviceBuffer::Bool(d), DataRef::Bool(s)) => stream.memcpy_htod(s, d).map_err(err),
            (DeviceBuffer::I32(d), DataRef::I32(s)) => stream.memcpy_htod(s, d).map_err(err),
            (DeviceBuffer::F32(d), DataRef::F32(s)) => stream.memcpy_htod(s, d).map_err(err),
            (DeviceBuffer::F64(d), DataRef::F64(s)) => stream.memcpy_htod(s, d).map_err(err),
            _ => Err(runtime_error("copying an input to the device", "dtype mismatch")),
        }
    }

    fn download(&self, stream: &Arc<CudaStream>, data: &mut DataMut<'_>) -> Result<(), BackendError> {
        let err = |e| runtime_error("copying an output from the device", e);
        match (self, data) {
            (_, data) if data.is_empty() => Ok(()),
            // The kernels store only 0 or 1 into bool buffers, so the bytes are valid `bool`s.
            (DeviceBuffer::Bool(s), DataMut::Bool(d)) => {
                stream.memcpy_dtoh(&s.slice(..d.len()), &mut **d).map_err(err)
            }
            (DeviceBuffer::I32(s), DataMut::I32(d)) => {
                stream.memcpy_dtoh(&s.slice(..d.len()), &mut **d).map_err(err)
            }
            (DeviceBuffer::F32(s), DataMut::F32(d)) => {
                stream.memcpy_dtoh(&s.slice(..d.len()), &mut **d).map_err(err)
            }
            (DeviceBuffer::F64(s), DataMut::F64(d)) => {
                stream.memcpy_dtoh(&s.slice(..d.len()), &mut **d).map_err(err)
            }
            _ => Err(runtime_error(
                "copying an output from the device",
                "dtype mismatch",
            )),
        }
    }
}

/// Device memory of one compiled program, reused by every call.
struct Buffers {
    /// Per program buffer: its device buffer when it is an input or output.
    caller: Vec<Option<DeviceBuffer>>,
    /// The arena of temporaries (bytes).
    arena: CudaSlice<u8>,
}

struct CudaCompiled {
    program: LirProgram,
    device: Arc<Device>,
    kernels: Vec<(CudaFunction, KernelLaunch)>,
    buffers: Mutex<Buffers>,
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn check_available(&self) -> Result<(), BackendError> {
        ensure_nvrtc()?;
        device().map(|_| ())
    }

    fn compile(
        &self,
        program: &LirProgram,
        options: &CompileOptions,
    ) -> Result<Arc<dyn Compiled>, BackendError> {
        let module_source = generate(program, options)?;
        ensure_nvrtc()?;
        let device = device()?;
        let module = device.module(&module_source.source, program.name(), options.fast_math)?;
        let kernels = module_source
            .kernels
            .into_iter()
            .map(|launch| {
                let function = module
                    .load_function(&launch.entry)
                    .map_err(|e| runtime_error(&format!("loading kernel `{}`", launch.entry), e))?;
                Ok((function, launch))
            })
            .collect::<Result<Vec<_>, BackendError>>()?;
        let caller = program
            .buffers()
            .iter()
            .map(|buffer| match buffer.storage {
                Storage::Input { .. } | Storage::Output { .. } => {
                    DeviceBuffer::new(&device.stream, buffer.ty.dtype, buffer.ty.shape.numel()).map(Some)
                }
                Storage::Arena { .. } => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let arena = device
            .stream
            .alloc_zeros::<u8>(program.arena_bytes().max(1))
            .map_err(|e| runtime_error("allocating the arena", e))?;
        Ok(Arc::new(CudaCompiled {
            program: program.clone(),
            device,
            kernels,
            buffers: Mutex::new(Buffers { caller, arena }),
        }))
    }
}

impl Compiled for CudaCompiled {
    fn backend(&self) -> &'static str {
        "cuda"
    }

    fn program(&self) -> &LirProgram {
        &self.program
    }

    fn run(
        &self,
        inputs: &[ArrayView<'_>],
        outputs: &mut [ArrayViewMut<'_>],
        _scratch: &mut Scratch,
    ) -> Result<(), BackendError> {
        validate_call(&self.program, inputs, outputs)?;
        let stream = &self.device.stream;
        let mut buffers = self
            .buffers
            .lock()
            .map_err(|_| runtime_error("device buffers", "poisoned lock"))?;
        let Buffers { caller, arena } = &mut *buffers;
        for ((buf, _, _), input) in self.program.inputs().zip(inputs) {
            if let Some(Some(device_buf)) = caller.get_mut(buf.index()) {
                device_buf.upload(stream, input.data())?;
            }
        }
        for (function, launch) in &self.kernels {
            if launch.units == 0 {
                continue;
            }
            let mut args = stream.launch_builder(function);
            for buf in &launch.params {
                match caller.get(buf.index()) {
                    Some(Some(DeviceBuffer::Bool(b))) => args.arg(b),
                    Some(Some(DeviceBuffer::I32(b))) => args.arg(b),
                    Some(Some(DeviceBuffer::F32(b))) => args.arg(b),
                    Some(Some(DeviceBuffer::F64(b))) => args.arg(b),
                    _ => return Err(runtime_error("binding kernel arguments", buf)),
                };
            }
            if launch.uses_arena {
                args.arg(&*arena);
            }
            let config = self.device.launch_config(launch.units);
            // SAFETY: the parameters are exactly the kernel's (same buffers, same order, as
            // `codegen` declared them), every buffer has the element count and dtype of its LIR
            // buffer, and the LIR verifier checked every address the kernel computes is in
            // bounds; `validate_call` checked the host arrays have those counts too.
            unsafe { args.launch(config) }
                .map_err(|e| runtime_error(&format!("launching `{}`", launch.entry), e))?;
        }
        for ((buf, _, _), output) in self.program.outputs().zip(outputs.iter_mut()) {
            if let Some(Some(device_buf)) = caller.get(buf.index()) {
                device_buf.download(stream, output.data_mut())?;
            }
        }
        stream
            .synchronize()
            .map_err(|e| runtime_error("waiting for the device", e))
    }
}
