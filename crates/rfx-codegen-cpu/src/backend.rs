//! The `"cpu"` backend: compiles LIR with Cranelift and runs it behind a checked, safe call.

use std::sync::Arc;

use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::default_libcall_names;
use rfx_ir::lir::{LirProgram, Storage};
use rfx_ir::{ArrayView, ArrayViewMut, DType, DataMut, DataRef};
use rfx_lower::{
    Backend, BackendError, CallArgs, CallError, CompileOptions, Compiled, CpuTarget, DirectEntry, Scratch,
    Signature, Transcendental,
};

use crate::codegen::{
    KernelShape, ModuleItems, build_kernel, build_program, define_literals, runs_as_one_function,
    table_entries,
};
use crate::imports::{ImportIds, register_symbols};
use crate::pool::{self, KernelFn};
use crate::steps::{RunStep, run_steps};
use crate::target::{self, Target};

/// Native code through Cranelift: vector loops, inline vector transcendentals, threads for
/// large kernels.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

fn compile_error(message: impl std::fmt::Display) -> BackendError {
    BackendError::Compile {
        backend: "cpu",
        message: message.to_string(),
    }
}

fn new_module(target: &Target) -> JITModule {
    let mut builder = JITBuilder::with_isa(target.isa.clone(), default_libcall_names());
    register_symbols(&mut builder);
    JITModule::new(builder)
}

/// The compiled code of one program, its text dumps, and the module that owns the code.
pub(crate) struct CpuCode {
    /// The functions to run in order: one per kernel, or one for the whole program
    /// ([`crate::codegen::runs_as_one_function`]).
    pub(crate) kernels: Vec<(KernelFn, KernelShape)>,
    /// Each kernel's vector width.
    pub(crate) widths: Vec<u8>,
    pub(crate) clif: Vec<String>,
    pub(crate) asm: Vec<Option<String>>,
    /// The largest stack frame of its functions, in bytes.
    pub(crate) max_frame: u32,
    /// The order `kernels` run in when it is not each once in turn: the program's loops over
    /// the per-kernel functions (`None` for a program without loops, and for one function,
    /// whose code runs the loops itself).
    pub(crate) plan: Option<Vec<RunStep>>,
    /// The code keeps the program's temporaries in its own stack frame and takes a table of
    /// the arguments' addresses in call order ([`crate::steps::argument_entries`]); otherwise
    /// the table has an entry per buffer ([`table_entries`]), the temporaries in the arena.
    pub(crate) arguments_only: bool,
    module: Option<JITModule>,
}

impl Drop for CpuCode {
    fn drop(&mut self) {
        if let Some(module) = self.module.take() {
            // SAFETY: the function pointers into this module live in `self.kernels`, which is
            // being dropped with it; no caller can hold one (they are private to this crate).
            unsafe { module.free_memory() };
        }
    }
}

/// What every compilation of a program starts from: its target, a fresh module with the
/// routines declared and the program's literals defined, and the plan of its run.
struct ModuleStart {
    target: Target,
    /// Fast math asked for and FMA on the target: multiply-adds are contracted.
    fast_math: bool,
    module: JITModule,
    imports: ImportIds,
    literals: Vec<Option<cranelift_module::DataId>>,
    plan: Vec<RunStep>,
}

impl ModuleStart {
    /// Verifies `program` and starts its module for `options.cpu_target`.
    fn new(program: &LirProgram, options: &CompileOptions) -> Result<ModuleStart, BackendError> {
        rfx_ir::lir::verify(program)
            .map_err(|e| BackendError::Lower(rfx_lower::LowerError::InvalidLir(e)))?;
        let target = target::target(options.cpu_target)?;
        let fast_math = options.fast_math && target.features.fma;
        let mut module = new_module(&target);
        let imports = ImportIds::declare(&mut module, target.features.routines).map_err(compile_error)?;
        let literals = define_literals(&mut module, program)?;
        let plan = run_steps(program, &table_entries(program))?;
        Ok(ModuleStart {
            target,
            fast_math,
            module,
            imports,
            literals,
            plan,
        })
    }
}

/// Compiles every kernel of `program` into one JIT module for `options.cpu_target`; with
/// `options.fast_math`, float multiply-adds are contracted into FMA instructions where the
/// target has them.
pub(crate) fn compile_code(
    program: &LirProgram,
    want_disasm: bool,
    options: &CompileOptions,
) -> Result<CpuCode, BackendError> {
    let ModuleStart {
        target,
        fast_math,
        mut module,
        imports,
        literals,
        plan,
    } = ModuleStart::new(program, options)?;
    let one_function = if !want_disasm && runs_as_one_function(program) {
        let items = ModuleItems {
            imports: &imports,
            literals: &literals,
            mid_end: target.mid_end,
        };
        build_program(&mut module, items, program, &plan, fast_math, false)?
    } else {
        None
    };
    if let Some(function) = one_function {
        module.finalize_definitions().map_err(compile_error)?;
        let ptr = module.get_finalized_function(function.id);
        // SAFETY: the program's function was declared with the signature `(ptr, i64, i64)`
        // and the C calling convention of the host, which is `KernelFn`.
        let func: KernelFn = unsafe { std::mem::transmute::<*const u8, KernelFn>(ptr) };
        return Ok(CpuCode {
            kernels: vec![(func, KernelShape::one_unit())],
            widths: function.widths,
            clif: Vec::new(),
            asm: Vec::new(),
            max_frame: function.frame,
            plan: None,
            arguments_only: function.arguments_only,
            module: Some(module),
        });
    }
    let mut built = Vec::new();
    let mut clif = Vec::new();
    let mut asm = Vec::new();
    let mut max_frame = 0;
    for (index, kernel) in program.kernels().iter().enumerate() {
        let items = ModuleItems {
            imports: &imports,
            literals: &literals,
            mid_end: target.mid_end,
        };
        let kernel = build_kernel(&mut module, items, program, kernel, index, want_disasm, fast_math)?;
        built.push((kernel.id, kernel.shape));
        clif.push(kernel.clif);
        asm.push(kernel.disasm);
        max_frame = max_frame.max(kernel.frame);
    }
    module.finalize_definitions().map_err(compile_error)?;
    let kernels: Vec<(KernelFn, KernelShape)> = built
        .into_iter()
        .map(|(id, shape)| {
            let ptr = module.get_finalized_function(id);
            // SAFETY: every kernel function was declared with the signature
            // `(ptr, i64, i64)` and the C calling convention of the host, which is `KernelFn`.
            let func: KernelFn = unsafe { std::mem::transmute::<*const u8, KernelFn>(ptr) };
            (func, shape)
        })
        .collect();
    let widths = kernels.iter().map(|(_, shape)| shape.width).collect();
    Ok(CpuCode {
        kernels,
        widths,
        clif,
        asm,
        max_frame,
        plan: (!program.loops().is_empty()).then_some(plan),
        arguments_only: false,
        module: Some(module),
    })
}

/// A program compiled for the CPU.
pub struct CpuCompiled {
    program: LirProgram,
    code: CpuCode,
    /// The options it was compiled with (the CLIF dump compiles it again with them).
    options: CompileOptions,
    clif: std::sync::OnceLock<Vec<String>>,
    max_threads: usize,
    signature: Signature,
    /// The buffer-table layout: where each input's, output's and arena temporary's base
    /// address goes.
    table: TablePlan,
    /// This program's [`Compiled::args_id`].
    id: u64,
    /// The one function a call runs on the caller's thread, when that is all a call does (see
    /// [`DirectCall`]).
    direct_call: Option<DirectCall>,
}

/// A program whose call is one function run once on the caller's thread over all its units: a
/// single kernel, or the one function of a program compiled whole
/// ([`crate::codegen::runs_as_one_function`], loops included), that no call splits across
/// threads (its thread limit, or the program's, is one). A call jumps straight into it with
/// the argument table instead of walking the kernel list and the pool's split decision.
#[derive(Clone, Copy, Debug)]
struct DirectCall {
    func: KernelFn,
    units: u64,
}

impl DirectCall {
    /// The direct call of `code`, if its call is one unsplit function (what
    /// [`pool::run_kernel`] does with a thread limit of one).
    fn of(code: &CpuCode, max_threads: usize) -> Option<DirectCall> {
        match (&code.plan, code.kernels.as_slice()) {
            (None, [(func, shape)]) if shape.thread_limit.min(max_threads) <= 1 => Some(DirectCall {
                func: *func,
                units: shape.units,
            }),
            _ => None,
        }
    }
}

/// Buffer-table entries a call keeps on the stack (beyond them, or with an arena, the table
/// lives in the caller's `Scratch`).
const STACK_TABLE: usize = 64;

/// The table a call with at most this many entries clears.
const SHORT_TABLE: usize = 16;

/// The table of a direct call with at most this many arguments (a control kernel's few
/// inputs and outputs: a PID's three and one), cleared instead of the short one.
const TINY_TABLE: usize = 4;

/// Runs `f` on a zeroed table of `len` entries on the stack (`None` when `len` exceeds
/// [`STACK_TABLE`]). The table is cleared on every call, so it is only made when it is used,
/// and short for the usual few entries: a call clears no more than it needs.
#[inline(always)]
fn on_stack_table<T: Copy + Default, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> Option<R> {
    if len <= SHORT_TABLE {
        let mut short = [T::default(); SHORT_TABLE];
        Some(f(&mut short[..len]))
    } else if len <= STACK_TABLE {
        let mut long = [T::default(); STACK_TABLE];
        Some(f(&mut long[..len]))
    } else {
        None
    }
}

/// Which entry of the buffer table each argument fills (the table is in buffer order).
#[derive(Debug)]
struct TablePlan {
    len: usize,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    /// `(entry, byte offset in the arena)` of each temporary in the caller's scratch.
    arena: Vec<(usize, usize)>,
    /// The bytes of that arena (0 when the code keeps its temporaries in its own frame).
    arena_bytes: usize,
    /// The table is exactly the inputs then the outputs, in call order, and fits on the stack
    /// (every control kernel): validation writes it directly.
    direct: bool,
}

// SAFETY: the JIT code is immutable after `finalize_definitions`; `CpuCode` only hands out
// function pointers and never mutates the module until it is dropped. Calls share nothing but
// read-only code; all mutable state (the buffers and the scratch) belongs to each caller.
unsafe impl Send for CpuCompiled {}
// SAFETY: as above; `&CpuCompiled` gives no access to mutable state.
unsafe impl Sync for CpuCompiled {}

impl std::fmt::Debug for CpuCompiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuCompiled")
            .field("program", &self.program.name())
            .finish_non_exhaustive()
    }
}

impl CpuCompiled {
    /// The Cranelift IR of each kernel, as text (`rfx dump --stage clif`). Generated on first
    /// use by compiling the program once more with printing on (a plain compile skips it: it
    /// costs a sizeable part of a small kernel's compile time); empty if that fails.
    pub fn clif(&self) -> &[String] {
        self.clif.get_or_init(|| {
            compile_code(&self.program, true, &self.options)
                .map(|code| code.clif.clone())
                .unwrap_or_default()
        })
    }

    /// The number of JIT functions a call runs: one per kernel, or one for the whole program
    /// when every kernel is too small to split across threads (a control loop's call; the
    /// kernels' code is the same, each continuing into the next instead of returning). Dumps
    /// (`dump`, [`CpuCompiled::clif`]) show one function per kernel; [`dump_program`] shows the
    /// one function.
    pub fn function_count(&self) -> usize {
        self.code.kernels.len()
    }

    /// The largest stack frame of the program's JIT functions, in bytes: at most 1 MiB, the
    /// bound every compile checks (a program whose frame would exceed it fails to compile with
    /// `Unsupported::Size`). A thread calling the program needs this much free stack: a few KiB
    /// for most kernels, about 250 KiB for one of 20,000 ops.
    pub fn max_frame_bytes(&self) -> u32 {
        self.code.max_frame
    }

    /// The SIMD lanes each kernel's main loop uses (1: scalar code).
    pub fn vector_widths(&self) -> Vec<u8> {
        self.code.widths.clone()
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn check_available(&self) -> Result<(), BackendError> {
        target::target(CpuTarget::Host).map(|_| ())
    }

    fn compile(
        &self,
        program: &LirProgram,
        options: &CompileOptions,
    ) -> Result<Arc<dyn Compiled>, BackendError> {
        Ok(Arc::new(compile(program, options)?))
    }

    /// 4 ULP for every transcendental op on `f32` and `f64`, over the whole domain (the
    /// measured maxima are in `math`'s and `aot`'s tables; trigonometric lanes beyond `1e6`
    /// are recomputed through libm).
    fn ulp_bound(&self, op: Transcendental, dtype: DType, args: &[f64]) -> Option<u64> {
        (dtype.is_float() && args.len() == op.arity()).then_some(ULP_BOUND)
    }
}

/// The documented bound of every transcendental op (`CpuBackend::ulp_bound`), asserted by the
/// conformance suite and the `math` and `aot` tests.
const ULP_BOUND: u64 = 4;

/// Compiles `program` for `options.cpu_target` (the concrete type behind
/// [`CpuBackend::compile`], with the CLIF dumps).
pub fn compile(program: &LirProgram, options: &CompileOptions) -> Result<CpuCompiled, BackendError> {
    let code = compile_code(program, false, options)?;
    let max_threads = options.max_threads.unwrap_or_else(pool::default_threads).max(1);
    let entries = if code.arguments_only {
        crate::steps::argument_entries(program)
    } else {
        table_entries(program)
    };
    let mut table = TablePlan {
        len: entries.iter().flatten().count(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        arena: Vec::new(),
        arena_bytes: if code.arguments_only {
            0
        } else {
            program.arena_bytes()
        },
        direct: false,
    };
    for (buffer, entry) in program.buffers().iter().zip(entries) {
        match (&buffer.storage, entry) {
            (Storage::Input { .. }, Some(entry)) => table.inputs.push(entry),
            (Storage::Output { .. }, Some(entry)) => table.outputs.push(entry),
            (Storage::Arena { offset }, Some(entry)) => table.arena.push((entry, *offset)),
            // Literal data lives in the module: no entry.
            _ => {}
        }
    }
    table.direct = table.len <= STACK_TABLE
        && table.arena_bytes == 0
        && table.arena.is_empty()
        && table
            .inputs
            .iter()
            .chain(&table.outputs)
            .copied()
            .eq(0..table.len);
    let direct_call = DirectCall::of(&code, max_threads);
    Ok(CpuCompiled {
        program: program.clone(),
        code,
        options: options.clone(),
        clif: std::sync::OnceLock::new(),
        max_threads,
        signature: Signature::of(program),
        table,
        id: rfx_lower::new_compiled_id(),
        direct_call,
    })
}

/// The CLIF text and the machine code listing (Cranelift's own disassembly) of every kernel of
/// `program`, for `rfx dump --stage clif|asm`.
pub fn dump(program: &LirProgram) -> Result<Vec<(String, String, String)>, BackendError> {
    dump_with(program, &CompileOptions::default())
}

/// [`dump`] with `options`: fast math changes the code (multiply-adds become FMAs), and so
/// does the target (`options.cpu_target`).
pub fn dump_with(
    program: &LirProgram,
    options: &CompileOptions,
) -> Result<Vec<(String, String, String)>, BackendError> {
    let code = compile_code(program, true, options)?;
    Ok(program
        .kernels()
        .iter()
        .zip(code.clif.iter().zip(&code.asm))
        .map(|(k, (clif, asm))| (k.name.clone(), clif.clone(), asm.clone().unwrap_or_default()))
        .collect())
}

/// The CLIF text (after Cranelift's mid-end, as compiled) and the machine code listing of the one
/// function `program` compiles to when a call runs it whole
/// (a program of two or more kernels, each of fewer than 1,024 loop points: the unbatched call
/// of a control kernel);
/// `None` for a program compiled one function per kernel ([`dump_with`] shows those).
pub fn dump_program(
    program: &LirProgram,
    options: &CompileOptions,
) -> Result<Option<(String, String)>, BackendError> {
    rfx_ir::lir::verify(program).map_err(|e| BackendError::Lower(rfx_lower::LowerError::InvalidLir(e)))?;
    if !runs_as_one_function(program) {
        return Ok(None);
    }
    let ModuleStart {
        target,
        fast_math,
        mut module,
        imports,
        literals,
        plan,
    } = ModuleStart::new(program, options)?;
    let items = ModuleItems {
        imports: &imports,
        literals: &literals,
        mid_end: target.mid_end,
    };
    let function = build_program(&mut module, items, program, &plan, fast_math, true)?;
    // SAFETY: nothing of the module's code is kept; it is freed before any of it could run.
    unsafe { module.free_memory() };
    Ok(function.map(|f| (f.clif, f.disasm.unwrap_or_default())))
}

#[inline]
fn data_ref_ptr(data: DataRef<'_>) -> *mut u8 {
    match data {
        DataRef::Bool(v) => v.as_ptr() as *mut u8,
        DataRef::I32(v) => v.as_ptr() as *mut u8,
        DataRef::F32(v) => v.as_ptr() as *mut u8,
        DataRef::F64(v) => v.as_ptr() as *mut u8,
    }
}

#[inline]
fn data_mut_ptr(data: &mut DataMut<'_>) -> *mut u8 {
    match data {
        DataMut::Bool(v) => v.as_mut_ptr().cast(),
        DataMut::I32(v) => v.as_mut_ptr().cast(),
        DataMut::F32(v) => v.as_mut_ptr().cast(),
        DataMut::F64(v) => v.as_mut_ptr().cast(),
    }
}

impl Compiled for CpuCompiled {
    fn backend(&self) -> &'static str {
        "cpu"
    }

    fn program(&self) -> &LirProgram {
        &self.program
    }

    /// Validates the call, fills the buffer table (in `scratch`, after the arena) and runs every
    /// kernel. Allocates nothing once `scratch` has grown to the program's size.
    fn run(
        &self,
        inputs: &[ArrayView<'_>],
        outputs: &mut [ArrayViewMut<'_>],
        scratch: &mut Scratch,
    ) -> Result<(), BackendError> {
        // Every buffer's dtype and length is checked here: the code touches exactly the
        // elements the verified LIR indexes, all of which lie inside buffers of these shapes.
        if self.table.direct {
            // The table is the arguments' addresses in call order: validation fills it (a
            // short table for the usual few arguments, so a call clears no more than it uses;
            // written out here rather than through `on_stack_table`, whose closure returning
            // the validation's `Result` made this call measurably slower).
            let mut tiny = [0usize; TINY_TABLE];
            let mut short;
            let mut long;
            let all: &mut [usize] = if self.table.len <= TINY_TABLE {
                &mut tiny
            } else if self.table.len <= SHORT_TABLE {
                short = [0usize; SHORT_TABLE];
                &mut short
            } else {
                long = [0usize; STACK_TABLE];
                &mut long
            };
            let table = &mut all[..self.table.len];
            self.signature.validate_into(inputs, outputs, table)?;
            // SAFETY: as below; `table` holds one checked address per buffer.
            unsafe { self.launch(table.as_ptr().cast()) };
            return Ok(());
        }
        self.signature.validate(inputs, outputs)?;
        // SAFETY: the call was checked above: one view per planned entry, each buffer with the
        // length its type declares, and outputs overlapping no other buffer.
        unsafe {
            self.run_table(scratch, |table| {
                for (&entry, view) in self.table.inputs.iter().zip(inputs) {
                    if let Some(slot) = table.get_mut(entry) {
                        *slot = data_ref_ptr(view.data()) as u64;
                    }
                }
                for (&entry, view) in self.table.outputs.iter().zip(outputs.iter_mut()) {
                    if let Some(slot) = table.get_mut(entry) {
                        *slot = data_mut_ptr(view.data_mut()) as u64;
                    }
                }
            })
        };
        Ok(())
    }

    fn args_id(&self) -> Option<u64> {
        Some(self.id)
    }

    /// The real-time path: arguments made for this program ([`CallArgs::new`]) are run on their
    /// recorded addresses with no check at all; any others are checked like [`Compiled::run`].
    fn run_args(&self, args: &mut CallArgs, scratch: &mut Scratch) -> Result<(), BackendError> {
        if args.id() != self.id {
            let (inputs, mut outputs) = args.views();
            return self.run(&inputs, &mut outputs, scratch);
        }
        // SAFETY: `args` was made for this program (its id is ours, and ids are never
        // reused): it holds one array per input and output with exactly the declared dtype and
        // shape, owned by `args`, borrowed mutably for this call, distinct, and `addresses`
        // lists their elements in call order.
        unsafe { self.run_on(args.addresses(), scratch) };
        Ok(())
    }

    /// Launches on `addresses` as they are, after checking only their count.
    unsafe fn run_addresses(&self, addresses: &[usize], scratch: &mut Scratch) -> Result<(), BackendError> {
        let expected = self.table.inputs.len() + self.table.outputs.len();
        if addresses.len() != expected {
            return Err(CallError::Arity {
                what: "argument addresses",
                expected,
                found: addresses.len(),
            }
            .into());
        }
        // SAFETY: guaranteed by the caller; the count is checked.
        unsafe { self.run_on(addresses, scratch) };
        Ok(())
    }

    /// The one function of a program whose table is its arguments' addresses in call order,
    /// as the backend's own direct call runs it.
    fn direct_entry(&self) -> Option<DirectEntry> {
        let DirectCall { func, units } = self.direct_call?;
        // SAFETY: a direct table is the arguments' addresses in call order, and the function
        // runs all its units on the calling thread (what `run_on` does with it); the code
        // lives as long as `self`.
        self.table
            .direct
            .then(|| unsafe { DirectEntry::new(func, units) })
    }
}

impl CpuCompiled {
    /// Runs every kernel on `table`: each once in turn, or as the program's loops say.
    ///
    /// # Safety
    /// `table` points at one valid base address per buffer of the program, each buffer with
    /// the length its type declares, inputs only read during the call and outputs overlapping
    /// no other buffer. The JIT code then only indexes elements the verified LIR proves in
    /// range.
    #[inline(always)]
    unsafe fn launch(&self, table: *const *mut u8) {
        if let Some(DirectCall { func, units }) = self.direct_call {
            // SAFETY: guaranteed by the caller; the function runs all its units on this
            // thread, as `pool::run_kernel` runs an unsplit kernel.
            unsafe { func(table, 0, units) };
            return;
        }
        match &self.code.plan {
            None => {
                for (func, shape) in &self.code.kernels {
                    // SAFETY: guaranteed by the caller.
                    unsafe { pool::run_kernel(*func, table, shape, self.max_threads) };
                }
            }
            // SAFETY: guaranteed by the caller.
            Some(plan) => unsafe { self.run_plan(plan, table) },
        }
    }

    /// Runs `plan`'s kernels on `table`, each loop's body up to its trip count, leaving a loop
    /// with an exit flag after the first iteration that leaves the flag false. A split kernel
    /// has finished on every thread when `run_kernel` returns, so the flag read after it is
    /// the iteration's.
    ///
    /// # Safety
    /// As [`CpuCompiled::launch`]; `plan` is this program's, so every kernel index is one of
    /// its functions and every exit entry a `bool` buffer's entry of `table`.
    unsafe fn run_plan(&self, plan: &[RunStep], table: *const *mut u8) {
        for step in plan {
            match step {
                RunStep::Kernel(index) => {
                    if let Some((func, shape)) = self.code.kernels.get(*index) {
                        // SAFETY: guaranteed by the caller.
                        unsafe { pool::run_kernel(*func, table, shape, self.max_threads) };
                    }
                }
                RunStep::Loop { trips, exit, body } => {
                    for _ in 0..*trips {
                        // SAFETY: guaranteed by the caller.
                        unsafe { self.run_plan(body, table) };
                        if let Some(flag) = exit {
                            // SAFETY: the entry is a `bool` buffer's (checked when the plan was
                            // made), whose first element the table's address points at.
                            let going = unsafe { table.add(flag.entry).read().read() } != 0;
                            if !going {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Runs every kernel on the arguments whose first elements lie at `addresses` (call order).
    ///
    /// # Safety
    /// As [`Compiled::run_addresses`] requires, with one address per input and output.
    #[inline(always)]
    unsafe fn run_on(&self, addresses: &[usize], scratch: &mut Scratch) {
        if self.table.direct
            && let Some(DirectCall { func, units }) = self.direct_call
        {
            // SAFETY: a direct table is the arguments' addresses in call order; the function
            // runs all its units on this thread (as `launch` runs it).
            unsafe { func(addresses.as_ptr().cast(), 0, units) };
            return;
        }
        // SAFETY: as the caller guarantees.
        unsafe { self.run_on_plan(addresses, scratch) }
    }

    /// [`CpuCompiled::run_on`] of a program that is not one direct call on its arguments:
    /// kept out of line, so that the direct call's path saves no more registers than it uses.
    ///
    /// # Safety
    /// As [`CpuCompiled::run_on`].
    #[inline(never)]
    unsafe fn run_on_plan(&self, addresses: &[usize], scratch: &mut Scratch) {
        if self.table.direct {
            // SAFETY: a direct table is the arguments' addresses in call order.
            unsafe { self.launch(addresses.as_ptr().cast()) };
            return;
        }
        // SAFETY: the plan places every argument's address in its entry.
        unsafe {
            self.run_table(scratch, |table| {
                let entries = self.table.inputs.iter().chain(&self.table.outputs);
                for (&entry, &address) in entries.zip(addresses) {
                    if let Some(slot) = table.get_mut(entry) {
                        *slot = address as u64;
                    }
                }
            })
        }
    }

    /// Builds the buffer table (on the stack for programs without temporaries and with a
    /// short table, which is every control kernel; otherwise after the arena in `scratch`),
    /// lets `fill` write the arguments' entries, and runs every kernel on it.
    ///
    /// # Safety
    /// `fill` writes, for every input and output entry of the plan, the base address of a
    /// buffer as [`CpuCompiled::launch`] requires.
    unsafe fn run_table(&self, scratch: &mut Scratch, fill: impl FnOnce(&mut [u64])) {
        let arena_bytes = self.table.arena_bytes;
        let len = self.table.len;
        if arena_bytes == 0 && len <= STACK_TABLE {
            // SAFETY: as the caller guarantees.
            on_stack_table(len, |table| unsafe { self.fill_and_launch(table, fill) });
            return;
        }
        let arena_words = arena_bytes.div_ceil(8);
        let words = scratch.words((arena_words + len) * 8);
        let (arena, table) = words.split_at_mut(arena_words);
        let arena_base = arena.as_mut_ptr().cast::<u8>();
        for &(entry, offset) in &self.table.arena {
            if let Some(slot) = table.get_mut(entry) {
                // The arena holds `arena_bytes`; the verifier checked every temporary fits.
                *slot = arena_base.wrapping_add(offset) as u64;
            }
        }
        // SAFETY: `table` holds the arena's temporaries (in bounds by construction); the rest
        // is as the caller guarantees.
        unsafe { self.fill_and_launch(table, fill) }
    }

    /// Lets `fill` write the arguments' entries of `table` and runs every kernel on it.
    ///
    /// # Safety
    /// `table` holds every arena temporary's entry, and `fill` writes the others, as
    /// [`CpuCompiled::launch`] requires.
    #[inline(always)]
    unsafe fn fill_and_launch(&self, table: &mut [u64], fill: impl FnOnce(&mut [u64])) {
        fill(table);
        // SAFETY: guaranteed by the caller.
        unsafe { self.launch(table.as_ptr().cast()) }
    }
}

#[cfg(test)]
mod direct_call_tests {
    use super::*;

    fn compiled(text: &str, max_threads: usize) -> CpuCompiled {
        let kernel = rfx_ir::hir::parse(text).expect("parse");
        let (mir, _) = rfx_opt::optimize(&kernel, &Default::default()).expect("optimize");
        let (lir, _) = rfx_lower::lower(&mir, &Default::default()).expect("lower");
        let options = CompileOptions {
            max_threads: Some(max_threads),
            ..CompileOptions::default()
        };
        compile(&lir, &options).expect("compile")
    }

    fn elementwise(n: usize) -> String {
        format!("kernel k {{\n %x = input x : f32[{n}]\n %y = mul %x, %x : f32[{n}]\n output y = %y\n}}")
    }

    /// A call that is one function on the caller's thread jumps into it; a kernel the pool may
    /// split and a program of several kernels keep the general launch.
    #[test]
    fn only_an_unsplit_single_function_is_called_directly() {
        assert!(compiled(&elementwise(1), 2).direct_call.is_some(), "n = 1");
        assert!(
            compiled(&elementwise(1), 2).direct_entry().is_some(),
            "n = 1: an entry"
        );
        assert!(
            compiled(&elementwise(1 << 20), 2).direct_entry().is_none(),
            "1M on 2 threads: no entry"
        );
        // 1M elements: split across 2 threads, but not with one.
        assert!(
            compiled(&elementwise(1 << 20), 2).direct_call.is_none(),
            "1M on 2 threads"
        );
        assert!(
            compiled(&elementwise(1 << 20), 1).direct_call.is_some(),
            "1M on 1 thread"
        );
        // Two kernels (a sum, then a use of it): one function when small, two when large.
        let two = |n: usize| {
            format!(
                "kernel k {{\n %x = input x : f32[{n}]\n %s = sum %x axes [0] : f32[]\n \
                 %y = sub %x, %s : f32[{n}]\n output y = %y\n}}"
            )
        };
        let small = compiled(&two(8), 2);
        assert_eq!(small.function_count(), 1);
        assert!(small.direct_call.is_some(), "one function for the program");
        let large = compiled(&two(1 << 20), 2);
        assert!(large.function_count() > 1);
        assert!(large.direct_call.is_none(), "one function per kernel");
    }
}
