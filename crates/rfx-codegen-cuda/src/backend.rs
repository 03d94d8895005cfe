//! The `"cuda"` backend: NVRTC-compiled modules run through the CUDA driver API (cudarc).
//!
//! Without a driver or device nothing panics: cudarc panics when `libcuda` is missing, so the
//! driver library is probed first (`is_culib_present`) and every failure becomes
//! [`BackendError::Unavailable`]. The device (ordinal 0), its context, its stream and the module
//! cache are process-wide and created on first use. Each compiled program owns device buffers
//! for its inputs, outputs and arena, allocated once and reused by every call; a call copies the
//! inputs in, launches the kernels in order on the stream, copies the outputs back and waits.
//! A program whose inputs and outputs are small (at most [`STAGING_MAX_BYTES`] together, the
//! control-loop case) keeps them in one device buffer mirrored by one page-locked host buffer,
//! so a call makes one copy in and one copy out, whatever its number of arrays.
//! Calls on one compiled program are serialised by a mutex (the buffers are shared); different
//! programs run concurrently.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PinnedHostSlice,
    PushKernelArg,
};
use rfx_ir::lir::{LirProgram, Storage};
use rfx_ir::repeat::Step;
use rfx_ir::{
    Array, ArrayView, ArrayViewMut, BinaryOp, BufId, DType, DataMut, DataRef, Scalar, TensorType, UnaryOp,
};
use rfx_lower::{
    Backend, BackendError, CompileOptions, Compiled, Scratch, Signature, Transcendental, check_type,
    validate_call,
};

use crate::codegen::{KernelLaunch, ONE_LAUNCH_BLOCK, TREE_BLOCK, generate};
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
/// Programs whose inputs and outputs take at most this many bytes together (each rounded up
/// to [`STAGING_ALIGN`]) copy them through one staging buffer: page-locked host memory is
/// scarce, and past this size a call's time is the copies' bandwidth, not their number.
pub(crate) const STAGING_MAX_BYTES: usize = 1 << 20;
/// Alignment of each array in the staging buffers: the driver's allocation alignment, so the
/// kernels' vector loads see the same alignment as in a buffer of their own.
const STAGING_ALIGN: usize = 256;

/// The process-wide device: context, stream, properties and compiled modules.
struct Device {
    stream: Arc<CudaStream>,
    ordinal: usize,
    /// The virtual architecture PTX is compiled for (`compute_XY`); the driver JIT-compiles it
    /// for the device.
    arch: String,
    sm_count: usize,
    /// Loaded modules by CUDA source (which includes the fast-math choice). The map's lock is
    /// held only to find a source's cell; the cell's own lock is held while its module
    /// compiles, so different sources compile in parallel and one source compiles once.
    modules: Mutex<HashMap<String, ModuleCell>>,
}

/// One source's module: `None` until it has compiled and loaded (a failed compile leaves it
/// `None`, so a later call tries again and reports the error again).
type ModuleCell = Arc<Mutex<Option<Arc<CudaModule>>>>;

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
        let poisoned = || runtime_error("module cache", "poisoned lock");
        let cell = self
            .modules
            .lock()
            .map_err(|_| poisoned())?
            .entry(source.to_string())
            .or_default()
            .clone();
        let mut slot = cell.lock().map_err(|_| poisoned())?;
        if let Some(module) = slot.as_ref() {
            return Ok(module.clone());
        }
        let ptx = compile_ptx(source, name, &self.arch, fast_math)?;
        let module = self
            .stream
            .context()
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(|e| runtime_error(&format!("loading the module on device {}", self.ordinal), e))?;
        *slot = Some(module.clone());
        Ok(module)
    }

    fn launch_config(&self, launch: &KernelLaunch) -> LaunchConfig {
        let units = launch.units;
        if let Some(tree) = launch.tree {
            let blocks = units.saturating_mul(tree.chunks);
            return LaunchConfig {
                grid_dim: (u32::try_from(blocks).unwrap_or(u32::MAX), 1, 1),
                block_dim: (TREE_BLOCK as u32, 1, 1),
                shared_mem_bytes: 0,
            };
        }
        if launch.single_block {
            return LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (
                    u32::try_from(units.div_ceil(32).clamp(1, ONE_LAUNCH_BLOCK / 32) * 32).unwrap_or(256),
                    1,
                    1,
                ),
                shared_mem_bytes: 0,
            };
        }
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

    /// The buffer's device address, for a kernel parameter. (The context runs one stream, so
    /// cudarc records no events and the returned guard has nothing to do.)
    fn device_address(&self, stream: &Arc<CudaStream>) -> CUdeviceptr {
        match self {
            DeviceBuffer::Bool(b) => b.device_ptr(stream).0,
            DeviceBuffer::I32(b) => b.device_ptr(stream).0,
            DeviceBuffer::F32(b) => b.device_ptr(stream).0,
            DeviceBuffer::F64(b) => b.device_ptr(stream).0,
        }
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

/// The inputs and outputs of a program with small ones, in one device buffer and its
/// page-locked host mirror: inputs first, then outputs, each at a multiple of
/// [`STAGING_ALIGN`].
struct Staging {
    host: PinnedHostSlice<u8>,
    device: CudaSlice<u8>,
    /// Per program buffer: its bytes in both buffers, for inputs and outputs.
    ranges: Vec<Option<Range<usize>>>,
    /// The inputs are the bytes before this offset, the outputs those from it to
    /// `outputs_end`.
    outputs_start: usize,
    outputs_end: usize,
    /// Set while a copy from or into `host` may still be running (a call that failed before
    /// its wait): the next call waits before writing `host`.
    in_flight: bool,
}

impl Staging {
    /// Lays out the program's inputs and outputs; `None` when they are too large to stage or
    /// the driver refuses page-locked memory.
    fn new(device: &Device, program: &LirProgram) -> Result<Option<Staging>, BackendError> {
        let mut ranges = vec![None; program.buffers().len()];
        // Each array at the next aligned offset; `None` on overflow or a bad buffer id.
        let mut place = |end: usize, buf: BufId, ty: &TensorType| -> Option<usize> {
            let bytes = ty.shape.numel().checked_mul(ty.dtype.size_bytes())?.max(1);
            *ranges.get_mut(buf.index())? = Some(end..end.checked_add(bytes)?);
            end.checked_add(bytes.checked_next_multiple_of(STAGING_ALIGN)?)
        };
        let mut end = Some(0usize);
        for (buf, _, ty) in program.inputs() {
            end = end.and_then(|end| place(end, buf, ty));
        }
        let outputs_start = end;
        for (buf, _, ty) in program.outputs() {
            end = end.and_then(|end| place(end, buf, ty));
        }
        let (Some(outputs_start), Some(end)) = (outputs_start, end) else {
            return Ok(None);
        };
        if end > STAGING_MAX_BYTES {
            return Ok(None);
        }
        let outputs_end = end;
        let total = end.max(STAGING_ALIGN);
        let context = device.stream.context();
        // Page-locked memory is a system resource: where the driver refuses it, the program
        // copies its arrays one by one instead.
        // SAFETY: the allocation is `total` uninitialised bytes; they are zeroed through the raw
        // pointer before any reference to them is made. Flags 0: ordinary cached page-locked
        // memory (write-combined memory is slow to read back on the host).
        let Ok(mut host) = (unsafe { context.alloc_pinned_with_flags::<u8>(total, 0) }) else {
            return Ok(None);
        };
        let Ok(pointer) = host.as_mut_ptr() else {
            return Ok(None);
        };
        // SAFETY: `pointer` is the start of the `total`-byte allocation just made, which nothing
        // else uses yet.
        unsafe { std::ptr::write_bytes(pointer, 0, total) };
        let device_bytes = device
            .stream
            .alloc_zeros::<u8>(total)
            .map_err(|e| runtime_error("allocating device memory", e))?;
        Ok(Some(Staging {
            host,
            device: device_bytes,
            ranges,
            outputs_start,
            outputs_end,
            in_flight: false,
        }))
    }
}

/// Writes `data`'s elements into `bytes` (native byte order; bool as 0/1).
fn write_bytes(data: DataRef<'_>, bytes: &mut [u8]) {
    match data {
        DataRef::Bool(v) => bytes.iter_mut().zip(v).for_each(|(b, &x)| *b = u8::from(x)),
        DataRef::I32(v) => bytes
            .chunks_exact_mut(4)
            .zip(v)
            .for_each(|(b, x)| b.copy_from_slice(&x.to_ne_bytes())),
        DataRef::F32(v) => bytes
            .chunks_exact_mut(4)
            .zip(v)
            .for_each(|(b, x)| b.copy_from_slice(&x.to_ne_bytes())),
        DataRef::F64(v) => bytes
            .chunks_exact_mut(8)
            .zip(v)
            .for_each(|(b, x)| b.copy_from_slice(&x.to_ne_bytes())),
    }
}

/// Reads `data`'s elements from `bytes` (the layout of [`write_bytes`]).
fn read_bytes(bytes: &[u8], data: &mut DataMut<'_>) {
    match data {
        DataMut::Bool(v) => v.iter_mut().zip(bytes).for_each(|(x, &b)| *x = b != 0),
        DataMut::I32(v) => v
            .iter_mut()
            .zip(bytes.chunks_exact(4))
            .for_each(|(x, b)| *x = i32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        DataMut::F32(v) => v
            .iter_mut()
            .zip(bytes.chunks_exact(4))
            .for_each(|(x, b)| *x = f32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        DataMut::F64(v) => v.iter_mut().zip(bytes.chunks_exact(8)).for_each(|(x, b)| {
            *x = f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        }),
    }
}

/// Device memory of one compiled program, reused by every call.
struct Buffers {
    /// Where host-array calls keep the inputs and outputs: one staging buffer for small ones,
    /// else one device buffer per input and output.
    io: CallerMemory,
    /// The arena of temporaries (bytes).
    arena: CudaSlice<u8>,
    /// Per kernel: the scratch of a tree reduction (partials and zeroed arrival counters).
    trees: Vec<Option<CudaSlice<u8>>>,
}

enum CallerMemory {
    Staged(Staging),
    /// Per program buffer: its device buffer when it is an input or output.
    PerBuffer(Vec<Option<DeviceBuffer>>),
}

struct CudaCompiled {
    program: LirProgram,
    signature: Signature,
    device: Arc<Device>,
    kernels: Vec<(CudaFunction, KernelLaunch)>,
    /// The launches of one call: `Step::Kernel(i)` launches `kernels[i]`; a loop repeats its
    /// steps `trips` times (see [`CudaCompiled::launch_steps`]).
    steps: Vec<Step>,
    buffers: Mutex<Buffers>,
}

/// Options of the CUDA backend beyond [`CompileOptions`], for
/// [`CudaBackend::compile_program_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CudaOptions {
    /// Copy small inputs and outputs of host-array calls through one page-locked staging
    /// buffer (default `true`; see [`CudaProgram::stages_host_arrays`]). `false` copies them
    /// array by array from the caller's memory and keeps no page-locked memory.
    pub stage_host_arrays: bool,
    /// Run a program of two or more small kernels (none of more than 1024 units, none a
    /// block-tree reduction), or of one such kernel in a loop, as one kernel launched as one
    /// block, with a barrier between its kernels and the program's loops as loops of the
    /// function (default `true`; see [`CudaProgram::launches`]). `false` launches each kernel
    /// on its own, repeating a loop's launches on the host.
    pub one_launch: bool,
}

impl Default for CudaOptions {
    fn default() -> CudaOptions {
        CudaOptions {
            stage_host_arrays: true,
            one_launch: true,
        }
    }
}

impl CudaBackend {
    /// Compiles `program` into a [`CudaProgram`], which runs on host arrays (as the
    /// [`Compiled`] of [`Backend::compile`] does) and also on device-resident
    /// [`DeviceArray`]s.
    pub fn compile_program(
        &self,
        program: &LirProgram,
        options: &CompileOptions,
    ) -> Result<CudaProgram, BackendError> {
        self.compile_program_with(program, options, &CudaOptions::default())
    }

    /// [`CudaBackend::compile_program`] with the CUDA backend's own options.
    pub fn compile_program_with(
        &self,
        program: &LirProgram,
        options: &CompileOptions,
        cuda: &CudaOptions,
    ) -> Result<CudaProgram, BackendError> {
        compile(program, options, cuda).map(|compiled| CudaProgram(Arc::new(compiled)))
    }

    /// Copies `array` into new device memory (synchronously).
    pub fn to_device(&self, array: ArrayView<'_>) -> Result<DeviceArray, BackendError> {
        let device = device()?;
        let ty = view_type(array.dtype(), array.shape());
        let mut buffer = DeviceBuffer::new(&device.stream, ty.dtype, ty.shape.numel())?;
        buffer.upload(&device.stream, array.data())?;
        Ok(DeviceArray { ty, buffer, device })
    }

    /// A device array of `ty` filled with zeros (`false` for bool).
    pub fn zeros(&self, ty: &TensorType) -> Result<DeviceArray, BackendError> {
        let device = device()?;
        let buffer = DeviceBuffer::new(&device.stream, ty.dtype, ty.shape.numel())?;
        Ok(DeviceArray {
            ty: ty.clone(),
            buffer,
            device,
        })
    }

    /// Copies `array` back into a new host array (waits for the work queued before it).
    pub fn from_device(&self, array: &DeviceArray) -> Result<Array, BackendError> {
        let mut host = Array::filled(Scalar::zero(array.ty.dtype), array.ty.shape.clone());
        array.copy_to_host(host.view_mut())?;
        Ok(host)
    }

    /// Waits until every copy and kernel queued on the device has finished.
    pub fn synchronize(&self) -> Result<(), BackendError> {
        device()?
            .stream
            .synchronize()
            .map_err(|e| runtime_error("waiting for the device", e))
    }
}

/// An array resident in GPU memory: made by [`CudaBackend::to_device`] or
/// [`CudaBackend::zeros`], read back by [`CudaBackend::from_device`].
///
/// Passing device arrays to [`CudaProgram::launch`] keeps a control loop's state on the GPU:
/// no host copy happens between calls. Device memory is freed in stream order when the array
/// is dropped, so dropping one while a kernel that uses it is still running is safe.
pub struct DeviceArray {
    ty: TensorType,
    buffer: DeviceBuffer,
    device: Arc<Device>,
}

impl std::fmt::Debug for DeviceArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray")
            .field("ty", &self.ty)
            .finish_non_exhaustive()
    }
}

impl DeviceArray {
    /// The array's dtype and shape.
    pub fn ty(&self) -> &TensorType {
        &self.ty
    }

    /// Overwrites the array with `array` (same dtype and shape), synchronously.
    pub fn copy_from_host(&mut self, array: ArrayView<'_>) -> Result<(), BackendError> {
        check_type(
            "copy_from_host",
            &self.ty,
            &view_type(array.dtype(), array.shape()),
        )?;
        self.buffer.upload(&self.device.stream, array.data())
    }

    /// Copies the array into `out` (same dtype and shape); waits for the work queued before.
    pub fn copy_to_host(&self, mut out: ArrayViewMut<'_>) -> Result<(), BackendError> {
        check_type("copy_to_host", &self.ty, &view_type(out.dtype(), out.shape()))?;
        self.buffer.download(&self.device.stream, out.data_mut())?;
        self.device
            .stream
            .synchronize()
            .map_err(|e| runtime_error("waiting for the device", e))
    }

    /// Queues a device-to-device copy of `source` (same dtype and shape) into this array.
    pub fn copy_from_device(&mut self, source: &DeviceArray) -> Result<(), BackendError> {
        check_type("copy_from_device", &self.ty, &source.ty)?;
        let stream = &self.device.stream;
        let err = |e| runtime_error("copying on the device", e);
        match (&mut self.buffer, &source.buffer) {
            (DeviceBuffer::Bool(d), DeviceBuffer::Bool(s)) => stream.memcpy_dtod(s, d).map_err(err),
            (DeviceBuffer::I32(d), DeviceBuffer::I32(s)) => stream.memcpy_dtod(s, d).map_err(err),
            (DeviceBuffer::F32(d), DeviceBuffer::F32(s)) => stream.memcpy_dtod(s, d).map_err(err),
            (DeviceBuffer::F64(d), DeviceBuffer::F64(s)) => stream.memcpy_dtod(s, d).map_err(err),
            _ => Err(runtime_error("copying on the device", "dtype mismatch")),
        }
    }
}

fn view_type(dtype: DType, shape: &rfx_ir::Shape) -> TensorType {
    TensorType::new(dtype, shape.clone())
}

/// A program compiled for the GPU by [`CudaBackend::compile_program`].
///
/// [`Compiled::run`] takes host arrays (copy in, run, copy out, wait);
/// [`CudaProgram::launch`] takes [`DeviceArray`]s and only queues the kernels, so a control
/// loop can keep its data resident and wait once ([`CudaBackend::synchronize`], or any copy
/// back to the host). Launches of one program are serialised (they share the program's
/// temporaries), in the order they were made.
#[derive(Clone)]
pub struct CudaProgram(Arc<CudaCompiled>);

impl std::fmt::Debug for CudaProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaProgram")
            .field("program", &self.0.program.name())
            .field("kernels", &self.0.kernels.len())
            .finish_non_exhaustive()
    }
}

impl CudaProgram {
    /// Queues the program on device-resident arrays, in the program's input and output
    /// order; checks every array's dtype and shape first (nothing is queued on a mismatch).
    /// Returns without waiting for the GPU. If the driver refuses a later kernel of a
    /// multi-kernel program, the kernels before it stay queued (their outputs may be written).
    pub fn launch(
        &self,
        inputs: &[&DeviceArray],
        outputs: &mut [&mut DeviceArray],
    ) -> Result<(), BackendError> {
        let compiled = &*self.0;
        compiled
            .signature
            .check_types(inputs.iter().map(|a| &a.ty), outputs.iter().map(|a| &a.ty))?;
        let mut table: Vec<Option<&DeviceBuffer>> = vec![None; compiled.program.buffers().len()];
        for ((buf, _, _), array) in compiled.program.inputs().zip(inputs) {
            if let Some(slot) = table.get_mut(buf.index()) {
                *slot = Some(&array.buffer);
            }
        }
        for ((buf, _, _), array) in compiled.program.outputs().zip(outputs.iter()) {
            if let Some(slot) = table.get_mut(buf.index()) {
                *slot = Some(&array.buffer);
            }
        }
        let buffers = compiled
            .buffers
            .lock()
            .map_err(|_| runtime_error("device buffers", "poisoned lock"))?;
        let stream = &compiled.device.stream;
        compiled.launch_kernels(
            &|buf: BufId| {
                let buffer = table.get(buf.index()).copied().flatten()?;
                Some(buffer.device_address(stream))
            },
            &buffers.arena,
            &buffers.trees,
            false,
        )
    }

    /// Queues the program and waits for it ([`CudaProgram::launch`], then synchronise).
    pub fn run_resident(
        &self,
        inputs: &[&DeviceArray],
        outputs: &mut [&mut DeviceArray],
    ) -> Result<(), BackendError> {
        self.launch(inputs, outputs)?;
        self.0
            .device
            .stream
            .synchronize()
            .map_err(|e| runtime_error("waiting for the device", e))
    }

    /// The program as a backend-independent [`Compiled`] (host arrays in and out).
    pub fn compiled(&self) -> Arc<dyn Compiled> {
        self.0.clone()
    }

    /// The kernel launches one call makes: one for a program of small kernels, which runs as
    /// one function, loops included (see the crate documentation), else one per LIR kernel,
    /// each kernel in a loop counted once per trip (saturating at `usize::MAX`).
    pub fn launches(&self) -> usize {
        count_launches(&self.0.steps)
    }

    /// Whether host-array calls copy the inputs and outputs through one staging buffer (one
    /// copy each way, from page-locked memory): true when they take at most 1 MiB together
    /// and the driver granted the page-locked memory; otherwise they are copied array by
    /// array.
    pub fn stages_host_arrays(&self) -> bool {
        self.0
            .buffers
            .lock()
            .is_ok_and(|buffers| matches!(buffers.io, CallerMemory::Staged(_)))
    }
}

fn compile(
    program: &LirProgram,
    options: &CompileOptions,
    cuda: &CudaOptions,
) -> Result<CudaCompiled, BackendError> {
    let module_source = generate(program, options, cuda.one_launch)?;
    let steps = module_source.steps;
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
    let staging = if cuda.stage_host_arrays {
        Staging::new(&device, program)?
    } else {
        None
    };
    let io = match staging {
        Some(staging) => CallerMemory::Staged(staging),
        None => CallerMemory::PerBuffer(
            program
                .buffers()
                .iter()
                .map(|buffer| match buffer.storage {
                    Storage::Input { .. } | Storage::Output { .. } => {
                        DeviceBuffer::new(&device.stream, buffer.ty.dtype, buffer.ty.shape.numel()).map(Some)
                    }
                    Storage::Arena { .. } | Storage::Literal { .. } => Ok(None),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let arena = device
        .stream
        .alloc_zeros::<u8>(program.arena_bytes().max(1))
        .map_err(|e| runtime_error("allocating the arena", e))?;
    let trees = kernels
        .iter()
        .map(|(_, launch)| match launch.tree {
            Some(tree) => device
                .stream
                .alloc_zeros::<u8>(tree.scratch_bytes.max(1))
                .map(Some)
                .map_err(|e| runtime_error("allocating reduction scratch", e)),
            None => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CudaCompiled {
        signature: Signature::of(program),
        program: program.clone(),
        device,
        kernels,
        steps,
        buffers: Mutex::new(Buffers { io, arena, trees }),
    })
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
        Ok(Arc::new(compile(program, options, &CudaOptions::default())?))
    }

    /// The CUDA C++ Programming Guide's full-range bounds of the accurate device functions
    /// (the table in the crate documentation); `sigmoid` is `exp`'s bound plus its three
    /// rounding steps.
    fn ulp_bound(&self, op: Transcendental, dtype: DType, args: &[f64]) -> Option<u64> {
        if args.len() != op.arity() {
            return None;
        }
        match (op, dtype) {
            (Transcendental::Unary(op), DType::F32 | DType::F64) => unary_ulp_bound(op, dtype),
            (Transcendental::Binary(op), DType::F32 | DType::F64) => binary_ulp_bound(op, dtype),
            (_, DType::I32 | DType::Bool) => None,
        }
    }
}

/// The bound of the device function computing `op` on `dtype` (`f32` or `f64`); every op is
/// named, so a new transcendental does not compile without its bound.
fn unary_ulp_bound(op: UnaryOp, dtype: DType) -> Option<u64> {
    let f64 = dtype == DType::F64;
    match op {
        UnaryOp::Exp | UnaryOp::Exp2 => Some(if f64 { 1 } else { 2 }),
        UnaryOp::Log | UnaryOp::Log2 => Some(1),
        UnaryOp::Tan => Some(if f64 { 2 } else { 4 }),
        UnaryOp::Sigmoid => Some(if f64 { 3 } else { 4 }),
        UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tanh
        | UnaryOp::Atan
        | UnaryOp::Asin
        | UnaryOp::Acos
        | UnaryOp::Erf => Some(2),
        // Exact or correctly rounded: no approximation to bound.
        rfx_ir::exact_unary_ops!() => None,
    }
}

/// The bound of the device function computing the binary `op` on `dtype`, as
/// [`unary_ulp_bound`].
fn binary_ulp_bound(op: BinaryOp, dtype: DType) -> Option<u64> {
    let f64 = dtype == DType::F64;
    match op {
        BinaryOp::Pow => Some(if f64 { 2 } else { 4 }),
        BinaryOp::Atan2 => Some(if f64 { 2 } else { 3 }),
        rfx_ir::exact_binary_ops!() => None,
    }
}

/// The launches `steps` make: each kernel once per trip of the loops around it.
fn count_launches(steps: &[Step]) -> usize {
    steps.iter().fold(0usize, |total, step| {
        let launches = match step {
            Step::Kernel(_) => 1,
            Step::Loop { spec, body } => {
                count_launches(body).saturating_mul(usize::try_from(spec.trips).unwrap_or(usize::MAX))
            }
        };
        total.saturating_add(launches)
    })
}

/// Trips of a loop with an exit flag that a host-array call runs before it first reads the
/// flag back; each later read comes after twice as many trips as the one before, at most
/// [`EXIT_CHECK_MAX_TRIPS`]. A read waits for the device, so reading after every trip would
/// cost a synchronisation each; this way a loop that stops early runs at most about twice its
/// trips (or 1024 more), with about `log2` of them reads.
const EXIT_CHECK_FIRST_TRIPS: u64 = 4;
/// The most trips between two reads of an exit flag ([`EXIT_CHECK_FIRST_TRIPS`]).
const EXIT_CHECK_MAX_TRIPS: u64 = 1024;

/// What every launch of one call shares: the device addresses of the caller's buffers, the
/// program's arena and reduction scratch, and the argument list reused between launches.
struct LaunchContext<'a> {
    caller: &'a dyn Fn(BufId) -> Option<CUdeviceptr>,
    arena: &'a CudaSlice<u8>,
    trees: &'a [Option<CudaSlice<u8>>],
    addresses: Vec<CUdeviceptr>,
    /// Whether to read exit flags back (a host-array call, which waits anyway).
    read_exits: bool,
}

impl CudaCompiled {
    /// Queues every kernel in the order of the program's steps, with the device addresses of
    /// the caller's buffers from `caller` and the program's own arena and reduction scratch;
    /// with `read_exits`, reads loops' exit flags back from time to time (see
    /// [`CudaCompiled::launch_steps`]).
    fn launch_kernels(
        &self,
        caller: &dyn Fn(BufId) -> Option<CUdeviceptr>,
        arena: &CudaSlice<u8>,
        trees: &[Option<CudaSlice<u8>>],
        read_exits: bool,
    ) -> Result<(), BackendError> {
        let mut context = LaunchContext {
            caller,
            arena,
            trees,
            addresses: Vec::new(),
            read_exits,
        };
        self.launch_steps(&self.steps, &mut context)
    }

    /// Queues `steps`: a kernel once, a loop's steps up to `trips` times. A loop with an exit
    /// flag has a masked body (once the flag is false its carries stop changing), so trips
    /// after the flag went false leave the results as they are: a host-array call reads a
    /// flag in the arena back after [`EXIT_CHECK_FIRST_TRIPS`] trips, then at doubling
    /// intervals, and stops the loop when it is false; a device-resident launch, which must
    /// not wait, queues every trip.
    fn launch_steps(&self, steps: &[Step], context: &mut LaunchContext<'_>) -> Result<(), BackendError> {
        for step in steps {
            match step {
                Step::Kernel(index) => self.launch_kernel(*index, context)?,
                Step::Loop { spec, body } => {
                    let exit = spec
                        .exit
                        .filter(|_| context.read_exits)
                        .and_then(|flag| self.arena_byte(flag));
                    let (mut interval, mut check) = (EXIT_CHECK_FIRST_TRIPS, EXIT_CHECK_FIRST_TRIPS);
                    for trip in 1..=spec.trips {
                        self.launch_steps(body, context)?;
                        if let Some(offset) = exit
                            && trip == check
                            && trip < spec.trips
                        {
                            if !self.flag_is_set(context.arena, offset)? {
                                break;
                            }
                            interval = (interval * 2).min(EXIT_CHECK_MAX_TRIPS);
                            check += interval;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The arena offset of the `bool` scalar `buf`, `None` when it is not in the arena.
    fn arena_byte(&self, buf: BufId) -> Option<usize> {
        let buffer = self.program.buffer(buf)?;
        match buffer.storage {
            Storage::Arena { offset } if buffer.ty.dtype == DType::Bool && buffer.ty.shape.numel() == 1 => {
                Some(offset)
            }
            _ => None,
        }
    }

    /// Waits for what is queued and reads the flag byte at `offset` of the arena.
    fn flag_is_set(&self, arena: &CudaSlice<u8>, offset: usize) -> Result<bool, BackendError> {
        let stream = &self.device.stream;
        let mut byte = [0u8; 1];
        stream
            .memcpy_dtoh(&arena.slice(offset..offset + 1), &mut byte[..])
            .map_err(|e| runtime_error("copying a loop's exit flag from the device", e))?;
        stream
            .synchronize()
            .map_err(|e| runtime_error("waiting for the device", e))?;
        Ok(byte[0] != 0)
    }

    /// Queues kernel `index` (nothing for a kernel without units).
    fn launch_kernel(&self, index: usize, context: &mut LaunchContext<'_>) -> Result<(), BackendError> {
        let stream = &self.device.stream;
        let Some((function, launch)) = self.kernels.get(index) else {
            return Err(runtime_error("launching kernels", format!("no kernel {index}")));
        };
        if launch.units == 0 {
            return Ok(());
        }
        context.addresses.clear();
        for &buf in &launch.params {
            let address =
                (context.caller)(buf).ok_or_else(|| runtime_error("binding kernel arguments", buf))?;
            context.addresses.push(address);
        }
        let mut args = stream.launch_builder(function);
        for address in &context.addresses {
            args.arg(address);
        }
        if launch.uses_arena {
            args.arg(context.arena);
        }
        if launch.tree.is_some() {
            match context.trees.get(index) {
                Some(Some(scratch)) => args.arg(scratch),
                _ => return Err(runtime_error("binding kernel arguments", "reduction scratch")),
            };
        }
        let config = self.device.launch_config(launch);
        // SAFETY: the parameters are exactly the kernel's (same buffers, same order, as
        // `codegen` declared them), every buffer address is the start of device memory of
        // the element count and dtype of its LIR buffer (checked by the callers against the
        // program's signature, or laid out so by `Staging::new`), the tree
        // scratch has the size `codegen` laid out, and the LIR verifier checked every
        // address the kernel computes is in bounds.
        unsafe { args.launch(config) }
            .map_err(|e| runtime_error(&format!("launching `{}`", launch.entry), e))?;
        Ok(())
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
        let Buffers { io, arena, trees } = &mut *buffers;
        let wait = |stream: &Arc<CudaStream>| {
            stream
                .synchronize()
                .map_err(|e| runtime_error("waiting for the device", e))
        };
        match io {
            CallerMemory::Staged(staging) => {
                if staging.in_flight {
                    wait(stream)?;
                    staging.in_flight = false;
                }
                let host = staging
                    .host
                    .as_mut_slice()
                    .map_err(|e| runtime_error("staging the inputs", e))?;
                for ((buf, _, _), input) in self.program.inputs().zip(inputs) {
                    if let Some(Some(range)) = staging.ranges.get(buf.index()) {
                        write_bytes(input.data(), &mut host[range.clone()]);
                    }
                }
                let (outputs_start, outputs_end) = (staging.outputs_start, staging.outputs_end);
                // From here until the wait the driver may be reading or writing `host`.
                staging.in_flight = true;
                if outputs_start > 0 {
                    stream
                        .memcpy_htod(
                            &host[..outputs_start],
                            &mut staging.device.slice_mut(..outputs_start),
                        )
                        .map_err(|e| runtime_error("copying the inputs to the device", e))?;
                }
                let (device, ranges) = (&staging.device, &staging.ranges);
                self.launch_kernels(
                    &|buf: BufId| {
                        let range = ranges.get(buf.index())?.as_ref()?;
                        Some(device.device_ptr(stream).0 + range.start as CUdeviceptr)
                    },
                    arena,
                    trees,
                    true,
                )?;
                if outputs_end > outputs_start {
                    stream
                        .memcpy_dtoh(
                            &staging.device.slice(outputs_start..outputs_end),
                            &mut host[outputs_start..outputs_end],
                        )
                        .map_err(|e| runtime_error("copying the outputs from the device", e))?;
                }
                wait(stream)?;
                staging.in_flight = false;
                for ((buf, _, _), output) in self.program.outputs().zip(outputs.iter_mut()) {
                    if let Some(Some(range)) = staging.ranges.get(buf.index()) {
                        read_bytes(&host[range.clone()], output.data_mut());
                    }
                }
                Ok(())
            }
            CallerMemory::PerBuffer(caller) => {
                for ((buf, _, _), input) in self.program.inputs().zip(inputs) {
                    if let Some(Some(device_buf)) = caller.get_mut(buf.index()) {
                        device_buf.upload(stream, input.data())?;
                    }
                }
                let caller = &*caller;
                self.launch_kernels(
                    &|buf: BufId| {
                        caller
                            .get(buf.index())?
                            .as_ref()
                            .map(|b| b.device_address(stream))
                    },
                    arena,
                    trees,
                    true,
                )?;
                for ((buf, _, _), output) in self.program.outputs().zip(outputs.iter_mut()) {
                    if let Some(Some(device_buf)) = caller.get(buf.index()) {
                        device_buf.download(stream, output.data_mut())?;
                    }
                }
                wait(stream)
            }
        }
    }
}
