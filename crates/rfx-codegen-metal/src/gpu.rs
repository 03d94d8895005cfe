//! The `wgpu` runtime: one device per process, pipelines and buffers per compiled program.

use std::sync::{Arc, Mutex, OnceLock};

use rfx_ir::lir::{LirProgram, Storage};
use rfx_ir::repeat::Step;
use rfx_ir::{Array, ArrayView, ArrayViewMut, BufId, DType, DataMut, DataRef, Scalar, TensorType};
use rfx_lower::{BackendError, Compiled, Scratch, Signature, Unsupported, check_type, validate_call};

use crate::BACKEND;
use crate::codegen::{KernelLayout, Shader};

/// The process's device, found once.
pub(crate) struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
}

static GPU: OnceLock<Result<Gpu, String>> = OnceLock::new();

/// The backends rfx asks `wgpu` for: Metal on Apple, Vulkan elsewhere (DX12 is not built in).
/// `WGPU_BACKEND` may narrow it; nothing requires it.
fn default_backends() -> wgpu::Backends {
    wgpu::Backends::PRIMARY.with_env()
}

/// The process-wide device, created on first use. Without an adapter (no GPU, no driver, no
/// Vulkan loader) every later call gets the same [`BackendError::Unavailable`].
pub(crate) fn gpu() -> Result<&'static Gpu, BackendError> {
    GPU.get_or_init(|| init(default_backends()))
        .as_ref()
        .map_err(|reason| unavailable(reason.clone()))
}

fn unavailable(reason: String) -> BackendError {
    BackendError::Unavailable {
        backend: BACKEND,
        reason,
    }
}

fn runtime_error(message: impl std::fmt::Display) -> BackendError {
    BackendError::Runtime {
        backend: BACKEND,
        message: message.to_string(),
    }
}

/// Finds an adapter among `backends` and opens a device with the adapter's own limits (more
/// storage buffers per kernel than WebGPU's default of 8).
pub(crate) fn init(backends: wgpu::Backends) -> Result<Gpu, String> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends,
        flags: wgpu::InstanceFlags::empty().with_env(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
        ..Default::default()
    }))
    .map_err(|e| {
        format!(
            "no wgpu adapter found ({e}); needs a Metal GPU (macOS) or a Vulkan driver \
             (Linux: `apt-get install mesa-vulkan-drivers libvulkan1` gives the lavapipe software device)"
        )
    })?;
    let limits = adapter.limits();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("rfx"),
        required_features: wgpu::Features::empty(),
        required_limits: limits.clone(),
        ..Default::default()
    }))
    .map_err(|e| format!("the wgpu adapter refused a device: {e}"))?;
    // Errors outside an error scope would otherwise panic; every call that can fail runs in a
    // scope, so this handler only sees errors already reported (or a lost device).
    device.on_uncaptured_error(Arc::new(|_error: wgpu::Error| {}));
    let limits = device.limits();
    Ok(Gpu {
        device,
        queue,
        info: adapter.get_info(),
        limits,
    })
}

/// llvmpipe's budget of loop iterations per invocation (`LP_MAX_TGSI_LOOP_ITERATIONS`).
const LLVMPIPE_LOOP_LIMIT: u64 = 65535;

impl Gpu {
    /// Whether this is Mesa's llvmpipe (lavapipe on Vulkan), with its loop budget.
    pub(crate) fn is_llvmpipe(&self) -> bool {
        self.info.driver.contains("llvmpipe") || self.info.name.contains("llvmpipe")
    }

    /// The adapter, for test logs: name, backend and device type.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} ({:?}, {:?}, driver {} {})",
            self.info.name, self.info.backend, self.info.device_type, self.info.driver, self.info.driver_info
        )
    }
}

/// Element bytes of a buffer of `dtype` on the device (bool is a u32 0/1).
fn device_bytes(dtype: DType, numel: usize) -> u64 {
    let size = match dtype {
        DType::F64 => 8,
        _ => 4,
    };
    (numel as u64).saturating_mul(size)
}

/// Runs `body` in a validation and out-of-memory error scope and turns a captured error into
/// `make_error(message)`.
fn scoped<T>(
    gpu: &Gpu,
    make_error: fn(String) -> BackendError,
    body: impl FnOnce() -> T,
) -> Result<T, BackendError> {
    let oom = gpu.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let value = body();
    let validation_error = pollster::block_on(validation.pop());
    let oom_error = pollster::block_on(oom.pop());
    match validation_error.or(oom_error) {
        Some(error) => Err(make_error(error.to_string())),
        None => Ok(value),
    }
}

fn compile_error(message: String) -> BackendError {
    BackendError::Compile {
        backend: BACKEND,
        message,
    }
}

fn runtime_message(message: String) -> BackendError {
    runtime_error(message)
}

struct KernelRun {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    groups: (u32, u32),
}

/// Where an output lies in the readback buffer.
struct Readback {
    buffer: usize,
    offset: u64,
    bytes: u64,
}

/// A program compiled to compute pipelines, with its device buffers.
pub(crate) struct MetalCompiled {
    program: LirProgram,
    gpu: &'static Gpu,
    /// One per LIR kernel; `None` for a kernel without units (never dispatched).
    kernels: Vec<Option<KernelRun>>,
    /// The dispatches of one call: `Step::Kernel(i)` dispatches `kernels[i]`; a loop repeats
    /// its steps `trips` times (see [`Recorder`]).
    steps: Vec<Step>,
    /// One device buffer per LIR buffer (at least 4 bytes; temporaries each get their own).
    buffers: Vec<wgpu::Buffer>,
    readback: Option<wgpu::Buffer>,
    /// Where a host call copies a loop's exit flag to read it (a program with exit flags).
    exit_readback: Option<wgpu::Buffer>,
    outputs: Vec<Readback>,
    signature: Signature,
    /// Calls share the device buffers, so they take turns.
    lock: Mutex<HostStaging>,
}

/// Host memory reused across calls: the bool inputs widened to u32.
#[derive(Default)]
struct HostStaging {
    words: Vec<u32>,
}

impl std::fmt::Debug for MetalCompiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetalCompiled")
            .field("program", &self.program.name())
            .field("adapter", &self.gpu.info.name)
            .finish_non_exhaustive()
    }
}

fn too_large(what: &'static str, size: u64, limit: u64) -> BackendError {
    BackendError::Unsupported {
        backend: BACKEND,
        what: Unsupported::Size {
            what,
            size: usize::try_from(size).unwrap_or(usize::MAX),
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
        },
    }
}

/// The most weighted instructions (a transcendental counts 20, `pow` and `atan2` 40, any
/// other instruction 1) a program's kernels may hold together on llvmpipe. Its LLVM compile of
/// the shader grows about quadratically with the inlined code (measured on 2 cores: 50 `sin`s,
/// weight about 1,100, 9 s; 100, weight about 2,200, 43 s; 400 more than 5 minutes), so a larger
/// program is refused with `Unsupported::Size` instead (at this bound, about 35 s).
pub(crate) const LLVMPIPE_MAX_WEIGHTED_INSTS: usize = 2_000;

/// A program's weighted instruction count ([`LLVMPIPE_MAX_WEIGHTED_INSTS`]).
fn weighted_insts(program: &LirProgram) -> usize {
    program
        .kernels()
        .iter()
        .flat_map(|kernel| kernel.preamble.iter().chain(&kernel.body))
        .map(rfx_ir::lir::Inst::work)
        .sum()
}

/// Creates the pipelines, buffers and bind groups of `program` from its generated `shader`.
pub(crate) fn compile(
    gpu: &'static Gpu,
    program: &LirProgram,
    shader: &Shader,
) -> Result<MetalCompiled, BackendError> {
    let limits = &gpu.limits;
    let steps = rfx_ir::repeat::steps(program.kernels().len(), program.loops())
        .map_err(|e| compile_error(format!("the program's loops: {e}")))?;
    let weight = weighted_insts(program);
    if gpu.is_llvmpipe() && weight > LLVMPIPE_MAX_WEIGHTED_INSTS {
        return Err(too_large(
            "weighted instructions of a program on llvmpipe (transcendentals count 20, pow and atan2 40)",
            weight as u64,
            LLVMPIPE_MAX_WEIGHTED_INSTS as u64,
        ));
    }
    for layout in &shader.kernels {
        let n = layout.bindings.len() as u64;
        if n > u64::from(limits.max_storage_buffers_per_shader_stage) {
            return Err(too_large(
                "storage buffers of one kernel",
                n,
                u64::from(limits.max_storage_buffers_per_shader_stage),
            ));
        }
        // llvmpipe ends an invocation's loops after 65535 iterations in total, silently.
        if gpu.is_llvmpipe() && layout.loop_iterations > LLVMPIPE_LOOP_LIMIT {
            return Err(too_large(
                "loop iterations per invocation on llvmpipe (a reduction this long)",
                layout.loop_iterations,
                LLVMPIPE_LOOP_LIMIT,
            ));
        }
        let (x, y) = layout.groups;
        let max = u64::from(limits.max_compute_workgroups_per_dimension);
        if u64::from(x) > max || u64::from(y) > max {
            return Err(too_large(
                "workgroups per grid dimension",
                u64::from(x.max(y)),
                max,
            ));
        }
    }
    let max_binding = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
    let device = &gpu.device;
    let buffers: Vec<wgpu::Buffer> = program
        .buffers()
        .iter()
        .enumerate()
        .map(|(i, buffer)| {
            let bytes = device_bytes(buffer.ty.dtype, buffer.ty.shape.numel());
            if bytes > max_binding {
                return Err(too_large("bytes of one buffer", bytes, max_binding));
            }
            Ok(device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&format!("buf{i}")),
                size: bytes.max(4),
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }))
        })
        .collect::<Result<_, _>>()?;
    // Literal data goes to the device once; the first submit orders it before every kernel.
    for (buffer, device_buffer) in program.buffers().iter().zip(&buffers) {
        if let Storage::Literal { values } = &buffer.storage
            && !values.is_empty()
        {
            write_words(
                &gpu.queue,
                device_buffer,
                // Every dtype here is a 32-bit word on the device (bool as 0/1); f64 was
                // rejected at code generation.
                values.iter().map(|v| v.to_bits() as u32),
            );
        }
    }
    let mut outputs = Vec::new();
    let mut readback_bytes = 0u64;
    for (buf, _, ty) in program.outputs() {
        let bytes = device_bytes(ty.dtype, ty.shape.numel());
        outputs.push(Readback {
            buffer: buf.index(),
            offset: readback_bytes,
            bytes,
        });
        // Copies start at multiples of 4 bytes; every element is 4 bytes.
        readback_bytes += bytes;
    }
    let exit_readback = program.loops().iter().any(|l| l.exit.is_some()).then(|| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rfx exit flag"),
            size: 4,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    });
    let readback = (readback_bytes > 0).then(|| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rfx readback"),
            size: readback_bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    });
    let kernels = scoped(gpu, compile_error, || {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(program.name()),
            source: wgpu::ShaderSource::Wgsl(shader.source.as_str().into()),
        });
        shader
            .kernels
            .iter()
            .map(|layout| (layout.units > 0).then(|| kernel_run(device, &module, layout, &buffers)))
            .collect::<Vec<_>>()
    })?;
    Ok(MetalCompiled {
        program: program.clone(),
        gpu,
        kernels,
        steps,
        buffers,
        readback,
        exit_readback,
        outputs,
        signature: Signature::of(program),
        lock: Mutex::new(HostStaging::default()),
    })
}

fn kernel_run(
    device: &wgpu::Device,
    module: &wgpu::ShaderModule,
    layout: &KernelLayout,
    buffers: &[wgpu::Buffer],
) -> KernelRun {
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(&layout.entry),
        layout: None,
        module,
        entry_point: Some(&layout.entry),
        compilation_options: Default::default(),
        cache: None,
    });
    let entries: Vec<wgpu::BindGroupEntry<'_>> = layout
        .bindings
        .iter()
        .filter_map(|&binding| {
            buffers.get(binding).map(|buffer| wgpu::BindGroupEntry {
                binding: binding as u32,
                resource: buffer.as_entire_binding(),
            })
        })
        .collect();
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some(&layout.entry),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    });
    KernelRun {
        pipeline,
        bind_group,
        groups: layout.groups,
    }
}

impl MetalCompiled {
    fn upload(&self, inputs: &[ArrayView<'_>], staging: &mut HostStaging) {
        let queue = &self.gpu.queue;
        let input_buffers = self.program.inputs().map(|(buf, _, _)| buf.index());
        for (index, view) in input_buffers.zip(inputs) {
            if let Some(buffer) = self.buffers.get(index) {
                upload_view(queue, buffer, view, staging);
            }
        }
    }

    /// Records every kernel in the order of the program's steps after what `encoder` holds,
    /// and returns the encoder holding the last dispatches (see [`Recorder`]); with
    /// `read_exits`, reads loops' exit flags back from time to time and stops a loop early.
    fn encode_kernels(
        &self,
        encoder: wgpu::CommandEncoder,
        read_exits: bool,
    ) -> Result<wgpu::CommandEncoder, BackendError> {
        let mut recorder = Recorder {
            compiled: self,
            encoder,
            pass: None,
            dispatches: 0,
            read_exits,
        };
        recorder.steps(&self.steps)?;
        recorder.pass = None;
        Ok(recorder.encoder)
    }

    fn dispatch(&self) -> Result<(), BackendError> {
        let device = &self.gpu.device;
        let encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some(self.program.name()),
        });
        let mut encoder = self.encode_kernels(encoder, true)?;
        if let Some(readback) = &self.readback {
            for output in &self.outputs {
                if let (Some(src), true) = (self.buffers.get(output.buffer), output.bytes > 0) {
                    encoder.copy_buffer_to_buffer(src, 0, readback, output.offset, output.bytes);
                }
            }
        }
        self.gpu.queue.submit([encoder.finish()]);
        Ok(())
    }

    fn download(&self, outputs: &mut [ArrayViewMut<'_>]) -> Result<(), BackendError> {
        let Some(readback) = &self.readback else {
            return Ok(());
        };
        map_and_read(self.gpu, readback, |view| {
            for (out, place) in outputs.iter_mut().zip(&self.outputs) {
                let start = usize::try_from(place.offset).map_err(runtime_error)?;
                let end = start + usize::try_from(place.bytes).map_err(runtime_error)?;
                let bytes = view
                    .get(start..end)
                    .ok_or_else(|| runtime_error("readback range"))?;
                read_words(bytes, out);
            }
            Ok(())
        })
    }

    /// Queues the program on device arrays: copies each input array into the program's input
    /// buffer and each output buffer into its output array on the device (no host copy), with
    /// every kernel between them in one command buffer. Checks arity, dtypes and shapes first.
    pub(crate) fn launch(
        &self,
        inputs: &[&DeviceArray],
        outputs: &mut [&mut DeviceArray],
    ) -> Result<(), BackendError> {
        self.signature
            .check_types(inputs.iter().map(|a| &a.ty), outputs.iter().map(|a| &a.ty))?;
        let _turn = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        scoped(self.gpu, runtime_message, || {
            let mut encoder = self
                .gpu
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some(self.program.name()),
                });
            for ((buf, _, _), array) in self.program.inputs().zip(inputs) {
                if let Some(buffer) = self.buffers.get(buf.index()) {
                    copy_words(&mut encoder, &array.buffer, buffer, array.bytes());
                }
            }
            // Queued without waiting: every trip of a loop runs (see `Recorder`).
            let mut encoder = self.encode_kernels(encoder, false)?;
            for ((buf, _, _), array) in self.program.outputs().zip(outputs.iter()) {
                if let Some(buffer) = self.buffers.get(buf.index()) {
                    copy_words(&mut encoder, buffer, &array.buffer, array.bytes());
                }
            }
            self.gpu.queue.submit([encoder.finish()]);
            Ok(())
        })?
    }

    /// Waits until every command submitted to the device has finished.
    pub(crate) fn wait(&self) -> Result<(), BackendError> {
        wait(self.gpu)
    }
}

/// Dispatches recorded into one command buffer before it is submitted and recording goes on
/// in a new one: a loop of many trips would otherwise hold every dispatch of the call in
/// memory at once. Submissions to the queue run in order, so the split changes nothing else.
const DISPATCHES_PER_SUBMIT: usize = 4096;

/// Trips of a loop with an exit flag that a host call runs before it first reads the flag
/// back; each later read comes after twice as many trips as the one before, at most
/// [`EXIT_CHECK_MAX_TRIPS`]. A read waits for the device, so reading after every trip would
/// cost a synchronisation each; this way a loop that stops early runs at most about twice its
/// trips (or 1024 more), with about `log2` of them reads.
const EXIT_CHECK_FIRST_TRIPS: u64 = 4;
/// The most trips between two reads of an exit flag ([`EXIT_CHECK_FIRST_TRIPS`]).
const EXIT_CHECK_MAX_TRIPS: u64 = 1024;

/// Records a call's dispatches: every kernel in the order of the program's steps, in compute
/// passes (wgpu orders the dispatches of a pass and makes each one's writes visible to the
/// next), a loop's steps once per trip. A loop with an exit flag has a masked body (once the
/// flag is false its carries stop changing), so trips after the flag went false leave the
/// results as they are: a host call (`read_exits`) reads the flag back from time to time
/// ([`EXIT_CHECK_FIRST_TRIPS`]) and stops the loop when it is false, while a device-resident
/// launch, which must not wait, runs every trip.
struct Recorder<'a> {
    compiled: &'a MetalCompiled,
    encoder: wgpu::CommandEncoder,
    /// The open compute pass of `encoder`; ended before `encoder` is finished or used for
    /// anything else.
    pass: Option<wgpu::ComputePass<'static>>,
    /// Dispatches recorded into `encoder`.
    dispatches: usize,
    /// Whether to read exit flags back (a host call, which waits anyway).
    read_exits: bool,
}

impl Recorder<'_> {
    fn steps(&mut self, steps: &[Step]) -> Result<(), BackendError> {
        for step in steps {
            match step {
                Step::Kernel(index) => self.dispatch(*index),
                Step::Loop { spec, body } => {
                    let exit = spec.exit.filter(|_| self.read_exits);
                    let (mut interval, mut check) = (EXIT_CHECK_FIRST_TRIPS, EXIT_CHECK_FIRST_TRIPS);
                    for trip in 1..=spec.trips {
                        self.steps(body)?;
                        if let Some(flag) = exit
                            && trip == check
                            && trip < spec.trips
                        {
                            if !self.flag_is_set(flag)? {
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

    /// Submits what is recorded and reads the `bool` flag `buf` (a 32-bit word on the device)
    /// once it has run.
    fn flag_is_set(&mut self, buf: BufId) -> Result<bool, BackendError> {
        let (Some(readback), Some(flag)) = (
            &self.compiled.exit_readback,
            self.compiled.buffers.get(buf.index()),
        ) else {
            return Err(runtime_error("reading a loop's exit flag: no such buffer"));
        };
        self.pass = None;
        self.encoder.copy_buffer_to_buffer(flag, 0, readback, 0, 4);
        self.submit();
        let mut set = true;
        map_and_read(self.compiled.gpu, readback, |bytes| {
            let word = bytes
                .get(..4)
                .ok_or_else(|| runtime_error("exit flag readback"))?;
            set = word.iter().any(|&b| b != 0);
            Ok(())
        })?;
        Ok(set)
    }

    fn dispatch(&mut self, index: usize) {
        let Some(Some(kernel)) = self.compiled.kernels.get(index) else {
            return;
        };
        if self.dispatches >= DISPATCHES_PER_SUBMIT {
            self.submit();
        }
        let label = self.compiled.program.name();
        let pass = self.pass.get_or_insert_with(|| {
            self.encoder
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(label),
                    timestamp_writes: None,
                })
                .forget_lifetime()
        });
        pass.set_pipeline(&kernel.pipeline);
        pass.set_bind_group(0, &kernel.bind_group, &[]);
        pass.dispatch_workgroups(kernel.groups.0, kernel.groups.1, 1);
        self.dispatches += 1;
    }

    /// Ends the pass, submits what `encoder` holds and goes on in a new encoder.
    fn submit(&mut self) {
        self.pass = None;
        let gpu = self.compiled.gpu;
        let next = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some(self.compiled.program.name()),
            });
        let full = std::mem::replace(&mut self.encoder, next);
        gpu.queue.submit([full.finish()]);
        self.dispatches = 0;
    }
}

/// Waits until every command submitted to `gpu` has finished.
pub(crate) fn wait(gpu: &Gpu) -> Result<(), BackendError> {
    gpu.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map(|_| ())
        .map_err(runtime_error)
}

/// Records a device-side copy of the first `bytes` of `src` into `dst` (nothing for none).
fn copy_words(encoder: &mut wgpu::CommandEncoder, src: &wgpu::Buffer, dst: &wgpu::Buffer, bytes: u64) {
    if bytes > 0 {
        encoder.copy_buffer_to_buffer(src, 0, dst, 0, bytes);
    }
}

/// Queues `view`'s elements as 32-bit words into the start of `buffer` (bool as 0/1; `f64`
/// is rejected before this).
fn upload_view(queue: &wgpu::Queue, buffer: &wgpu::Buffer, view: &ArrayView<'_>, staging: &mut HostStaging) {
    match view.data() {
        DataRef::F32(values) => {
            if !values.is_empty() {
                write_words(queue, buffer, values.iter().map(|v| v.to_bits()));
            }
        }
        DataRef::I32(values) => {
            if !values.is_empty() {
                write_words(queue, buffer, values.iter().map(|&v| v as u32));
            }
        }
        DataRef::Bool(values) => {
            if !values.is_empty() {
                staging.words.clear();
                staging.words.extend(values.iter().map(|&b| u32::from(b)));
                write_words(queue, buffer, staging.words.iter().copied());
            }
        }
        DataRef::F64(_) => {}
    }
}

/// Maps `buffer` (a `MAP_READ` buffer whose copies were submitted), waits, hands its bytes to
/// `read` and unmaps it.
fn map_and_read(
    gpu: &Gpu,
    buffer: &wgpu::Buffer,
    read: impl FnOnce(&[u8]) -> Result<(), BackendError>,
) -> Result<(), BackendError> {
    let (sender, receiver) = std::sync::mpsc::channel();
    buffer.map_async(wgpu::MapMode::Read, .., move |result| {
        let _ = sender.send(result);
    });
    wait(gpu)?;
    receiver.recv().map_err(runtime_error)?.map_err(runtime_error)?;
    let result = {
        let view = buffer.get_mapped_range(..).map_err(runtime_error)?;
        read(&view)
    };
    buffer.unmap();
    result
}

/// Writes the little-endian 32-bit words of `bytes` into `out` (bool from 0/1).
fn read_words(bytes: &[u8], out: &mut ArrayViewMut<'_>) {
    let words = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    match out.data_mut() {
        DataMut::F32(values) => {
            for (v, w) in values.iter_mut().zip(words) {
                *v = f32::from_bits(w);
            }
        }
        DataMut::I32(values) => {
            for (v, w) in values.iter_mut().zip(words) {
                *v = w as i32;
            }
        }
        DataMut::Bool(values) => {
            for (v, w) in values.iter_mut().zip(words) {
                *v = w != 0;
            }
        }
        DataMut::F64(_) => {}
    }
}

/// An array resident in device memory, as 32-bit words (`f32`, `i32`, bool as 0/1): made by
/// [`crate::MetalBackend::to_device`] or [`crate::MetalBackend::zeros`], read back by
/// [`crate::MetalBackend::from_device`].
///
/// Passing device arrays to [`crate::MetalProgram::launch`] keeps a control loop's state on
/// the GPU: inputs and outputs are copied on the device, never through the host.
pub struct DeviceArray {
    ty: TensorType,
    buffer: wgpu::Buffer,
    gpu: &'static Gpu,
}

impl std::fmt::Debug for DeviceArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray")
            .field("ty", &self.ty)
            .finish_non_exhaustive()
    }
}

impl DeviceArray {
    /// A device array of `ty`, all bits zero (`0`, `+0.0`, `false`). `f64` is
    /// [`BackendError::Unsupported`] (WGSL has no `f64`).
    pub(crate) fn zeros(gpu: &'static Gpu, ty: &TensorType) -> Result<DeviceArray, BackendError> {
        if ty.dtype == DType::F64 {
            return Err(BackendError::Unsupported {
                backend: BACKEND,
                what: Unsupported::DType(DType::F64),
            });
        }
        let bytes = device_bytes(ty.dtype, ty.shape.numel());
        let max = gpu
            .limits
            .max_storage_buffer_binding_size
            .min(gpu.limits.max_buffer_size);
        if bytes > max {
            return Err(too_large("bytes of one buffer", bytes, max));
        }
        let buffer = scoped(gpu, runtime_message, || {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("rfx device array"),
                size: bytes.max(4),
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC,
                // Buffers start zeroed in wgpu.
                mapped_at_creation: false,
            })
        })?;
        Ok(DeviceArray {
            ty: ty.clone(),
            buffer,
            gpu,
        })
    }

    /// The array's dtype and shape.
    pub fn ty(&self) -> &TensorType {
        &self.ty
    }

    fn bytes(&self) -> u64 {
        device_bytes(self.ty.dtype, self.ty.shape.numel())
    }

    /// Overwrites the array with `array` (same dtype and shape); the copy is queued before
    /// any later launch.
    pub fn copy_from_host(&mut self, array: ArrayView<'_>) -> Result<(), BackendError> {
        check_type(
            "copy_from_host",
            &self.ty,
            &TensorType::new(array.dtype(), array.shape().clone()),
        )?;
        let mut staging = HostStaging::default();
        scoped(self.gpu, runtime_message, || {
            upload_view(&self.gpu.queue, &self.buffer, &array, &mut staging);
        })
    }

    /// Copies the array into `out` (same dtype and shape), after the work queued before it.
    pub fn copy_to_host(&self, mut out: ArrayViewMut<'_>) -> Result<(), BackendError> {
        check_type(
            "copy_to_host",
            &self.ty,
            &TensorType::new(out.dtype(), out.shape().clone()),
        )?;
        let bytes = self.bytes();
        if bytes == 0 {
            return Ok(());
        }
        let gpu = self.gpu;
        let readback = scoped(gpu, runtime_message, || {
            let readback = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("rfx device array readback"),
                size: bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut encoder = gpu
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("rfx readback"),
                });
            encoder.copy_buffer_to_buffer(&self.buffer, 0, &readback, 0, bytes);
            gpu.queue.submit([encoder.finish()]);
            readback
        })?;
        map_and_read(gpu, &readback, |view| {
            read_words(view, &mut out);
            Ok(())
        })
    }

    /// The array copied into a new host array.
    pub(crate) fn to_host(&self) -> Result<Array, BackendError> {
        let mut host = Array::filled(Scalar::zero(self.ty.dtype), self.ty.shape.clone());
        self.copy_to_host(host.view_mut())?;
        Ok(host)
    }
}

/// Queues a copy of `words` (little-endian) into the start of `buffer`.
fn write_words(queue: &wgpu::Queue, buffer: &wgpu::Buffer, words: impl ExactSizeIterator<Item = u32>) {
    let bytes = words.len() as u64 * 4;
    let Some(size) = wgpu::BufferSize::new(bytes) else {
        return;
    };
    if let Some(mut view) = queue.write_buffer_with(buffer, 0, size) {
        view.slice(..).write_iter(words.flat_map(u32::to_le_bytes));
    }
}

impl Compiled for MetalCompiled {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn program(&self) -> &LirProgram {
        &self.program
    }

    /// Copies the inputs to the device, runs every kernel in one command buffer, copies the
    /// outputs back and waits. Calls on one compiled program take turns (they share its device
    /// buffers); `scratch` is unused (temporaries live on the device).
    fn run(
        &self,
        inputs: &[ArrayView<'_>],
        outputs: &mut [ArrayViewMut<'_>],
        _scratch: &mut Scratch,
    ) -> Result<(), BackendError> {
        validate_call(&self.program, inputs, outputs)?;
        let mut staging = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        scoped(self.gpu, runtime_message, || {
            self.upload(inputs, &mut staging);
            self.dispatch()
        })??;
        self.download(outputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No backend enabled stands in for a machine without a GPU or driver: the error is
    /// `Unavailable` with a reason, and nothing panics.
    #[test]
    fn no_adapter_is_unavailable_not_a_panic() {
        let reason = match init(wgpu::Backends::empty()) {
            Ok(_) => panic!("an adapter with no backends enabled"),
            Err(reason) => reason,
        };
        assert!(reason.contains("no wgpu adapter"), "{reason}");
        let err = unavailable(reason);
        assert!(
            matches!(err, BackendError::Unavailable { backend: "metal", .. }),
            "{err}"
        );
    }
}
