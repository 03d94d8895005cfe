//! LIR kernel → one native function `fn(table: *const *mut u8, lo: u64, hi: u64)`.
//!
//! `table[i]` is the base address of buffer `i` (inputs, outputs and arena temporaries alike).
//! The function computes the *units* `lo..hi` of its kernel: for an elementwise kernel of rank
//! at most 1 a unit is one element; for a higher-rank elementwise kernel it is one row of the
//! innermost dimension; for a reduction it is one leading point (one output element), or, with
//! one accumulator per output, one row of outputs (one output when a single kept dim is left).
//! Threads split a kernel by units; a long float reduction with too few outputs to share out
//! also runs in parts of its outputs' leaf trees, merged in the trees' order (`reduce_split`).
//! Within a unit range the innermost dimension runs as a vector
//! loop of `w` lanes whose ragged end is one more vector ending at the row's end (rows shorter
//! than a vector run scalar code); small kernels are written out without loops; reductions keep
//! `reduce_lanes` partial accumulators (two or four vectors by default) and combine them
//! exactly as the LIR interpreter does, or, with one accumulator per output, accumulate `w`
//! neighbouring outputs in one vector lane by lane (one output at a time, in registers, when a
//! row of outputs is narrower than a vector); either way results are bit-identical to it.
//!
//! Files: `plan` chooses the loop shape and dispatches; `elementwise`, `tiles` (AOT routine
//! calls over tiles), `reduce` (with `reduce_split`), `lanes` (outputs in lanes) and `scan`
//! emit one shape each;
//! `loops` holds the loop skeletons, `body` one position's instructions, `fold` constant folding
//! at written-out positions, `addr` and `access` address arithmetic and memory accesses. A
//! [`Gen`] holds the function's context ([`FnContext`]), the caches ([`Caches`]) and the cursor
//! ([`Cursor`]).

use cranelift_codegen::Context;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    AbiParam, Block, BlockArg, ConstantData, GlobalValue, InstBuilder, MemFlagsData, Signature, StackSlot,
    StackSlotData, StackSlotKind, Type, UserFuncName, Value, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module};
use rfx_ir::lir::{Inst, LirKernel, LirProgram, ReduceLeaves, ScanOrder, SlotId, Storage};
use std::cell::RefCell;
use std::collections::HashMap;

use rfx_ir::{BinaryOp, BufId, DType, ReduceOp, Scalar, ScanOp, UnaryOp};
use rfx_lower::{BackendError, Unsupported};

use crate::aot::{AotFn, MIN_TILED_ELEMS, TILE};

mod access;
mod addr;
mod arms;
mod body;
mod elementwise;
mod fold;
#[cfg(test)]
mod frame_tests;
mod fused_pass;
mod joined;
mod known;
mod lanes;
mod loops;
#[cfg(test)]
mod mid_end_tests;
mod plan;
mod reduce;
mod reduce_split;
mod scan;
mod tiles;

use self::access::*;
use self::body::*;
use self::elementwise::*;
use self::fold::*;
use self::fused_pass::*;
use self::loops::*;
use self::plan::*;
use self::reduce::*;
use self::reduce_split::*;
pub(crate) use self::reduce_split::{SPLIT_COMBINE, SPLIT_PARTS};
use self::tiles::*;

/// Innermost loop length from which the body's constant splats are built once, before the loop
/// (`Gen::hoist_splats`): one pass of four vectors.
const HOIST_MIN_ELEMS: usize = 16;
use crate::imports::ImportIds;
use crate::ops::{Emitter, bitcast_flags, cl_type, vectorizable};
use crate::steps::{ExitFlag, RunStep};

fn internal(message: impl Into<String>) -> BackendError {
    BackendError::Compile {
        backend: "cpu",
        message: message.into(),
    }
}

/// Memory flags for buffer accesses: unaligned, never trapping (bounds are checked before the
/// call; the verifier proved every index in range).
fn mem() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Vectors per iteration of the unrolled elementwise loop.
const UNROLL: usize = 4;
/// Vectors per iteration of a tiled kernel's ops segments.
const SEGMENT_UNROLL: i64 = 4;
/// Points per iteration of a scan's row loop.
const SCAN_UNROLL: i64 = 8;
/// Vectors of rows a scan across rows runs together.
const SCAN_ROW_VECTORS: usize = 8;
/// The longest body (in LIR instructions) that is unrolled.
const UNROLL_MAX_BODY: usize = 12;
/// The most body work (instruction-equivalents, `Gen::body_work`) an elementwise kernel of a
/// few points (a small matrix, a short vector) holds once written out at every row and vector
/// position, with no loop: each row's pointers are constant displacements and each position a
/// constant, so no index arithmetic remains.
const STRAIGHT_BUDGET: usize = 192;
/// The most body work (as [`STRAIGHT_BUDGET`]) of one unit of an elementwise kernel whose
/// leading loop dims are many units of a small block (a batch of small matrices): the block is
/// written out, row by row and position by position, inside one loop over the units.
const UNIT_BUDGET: usize = 384;
/// The most points of such a unit's block.
const UNIT_MAX_POINTS: usize = 64;

/// The body of a loop emitted by `Gen::emit_loop`: `(generator, builder, position, carried)`.
type LoopBody<'a, G, R = Vec<Value>> =
    dyn FnMut(&mut G, &mut FunctionBuilder<'_>, Value, &[Value]) -> Result<R, BackendError> + 'a;

/// The body at one vector position of [`Gen::emit_vector_positions`]:
/// `(generator, builder, position)`.
type PositionBody<'a, G> =
    dyn FnMut(&mut G, &mut FunctionBuilder<'_>, Value) -> Result<(), BackendError> + 'a;

/// Values carried from one vector position to the next by
/// [`Gen::emit_vector_positions_carrying`]: `(generator, builder, values)` → the next values.
type CarryAdvance<'a, G> =
    dyn FnMut(&mut G, &mut FunctionBuilder<'_>, &[Value]) -> Result<Vec<Value>, BackendError> + 'a;

/// The carried values at a position: `(generator, builder, position)` → the values.
type CarryFresh<'a, G> =
    dyn FnMut(&mut G, &mut FunctionBuilder<'_>, Value) -> Result<Vec<Value>, BackendError> + 'a;

/// The body of a loop emitted by `Gen::emit_while_below`: `(generator, builder, position)` →
/// the next position.
type WhileBody<'a, G> =
    dyn FnMut(&mut G, &mut FunctionBuilder<'_>, Value) -> Result<Value, BackendError> + 'a;

/// What the runtime needs to call a compiled kernel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KernelShape {
    pub(crate) units: u64,
    /// Lanes the vector loop uses (1: scalar code).
    pub(crate) width: u8,
    /// The most threads the kernel can use ([`KernelShape::new`]), computed once so that a call
    /// does not divide.
    pub(crate) thread_limit: usize,
    /// Parts per output of a reduction that splits within its outputs ([`reduce_split`]); 0
    /// for any other kernel.
    pub(crate) parts: u64,
}

impl KernelShape {
    /// One unit of work on one thread: a function that runs a whole program of small kernels.
    pub(crate) fn one_unit() -> KernelShape {
        KernelShape {
            units: 1,
            width: 1,
            thread_limit: 0,
            parts: 0,
        }
    }

    /// A kernel shape; its thread limit is one thread per `min_points_per_thread` loop points,
    /// with every chunk keeping at least 64 units (so a vector loop can always re-run its last
    /// full vector on the ragged end of its own range).
    pub(crate) fn new(
        units: u64,
        points_per_unit: u64,
        width: u8,
        min_points_per_thread: usize,
    ) -> KernelShape {
        let points = units.saturating_mul(points_per_unit.max(1));
        let min_points = min_points_per_thread.max(1) as u64;
        let wanted = usize::try_from(points / min_points).unwrap_or(usize::MAX);
        let thread_limit = wanted.min(usize::try_from(units / 64).unwrap_or(usize::MAX));
        KernelShape {
            units,
            width,
            thread_limit,
            parts: 0,
        }
    }
}

/// One memory access of the body (a load or a store): its buffer and strides per loop dim.
/// A load, a store or an index of the body. An index (`buf: None`) is addressed like a load of
/// one-byte elements at address 0: its "address" is its value.
struct Access {
    buf: Option<BufId>,
    strides: Vec<usize>,
    /// Elements before the access's first point (a load's window).
    offset: usize,
    dtype: DType,
}

impl Access {
    /// Bytes per element step of the access's address.
    fn elem_bytes(&self) -> usize {
        if self.buf.is_some() {
            self.dtype.size_bytes()
        } else {
            1
        }
    }
}

struct KernelInfo<'k> {
    kernel: &'k LirKernel,
    accesses: Vec<Access>,
    /// For each body instruction, its access index (loads and stores only).
    access_of: Vec<Option<usize>>,
    buffer_dtypes: Vec<DType>,
    /// Per buffer: its element count.
    buffer_lens: Vec<usize>,
    /// Per buffer: `Some(true)` for a program input, `Some(false)` for an output, `None` for an
    /// arena temporary (which may share bytes with another temporary).
    buffer_is_input: Vec<Option<bool>>,
    /// Per buffer: its values when it is a literal (constant data of the program).
    literals: Vec<Option<&'k [Scalar]>>,
}

/// The entry of each buffer in the table a kernel function receives: buffers in order, literals
/// skipped (their data lives in the module; `None`).
pub(crate) fn table_entries(program: &LirProgram) -> Vec<Option<usize>> {
    let mut next = 0;
    program
        .buffers()
        .iter()
        .map(|b| match b.storage {
            Storage::Literal { .. } => None,
            _ => {
                next += 1;
                Some(next - 1)
            }
        })
        .collect()
}

/// The address of literal data `data` in `func`: what `Module::declare_data_in_func` gives, but
/// not colocated, so the address is a 64-bit absolute relocation (the JIT's data and code
/// segments are separate allocations, which a 32-bit PC-relative offset may not reach).
fn literal_global(data: DataId, func: &mut cranelift_codegen::ir::Function) -> GlobalValue {
    let name = func.declare_imported_user_function(cranelift_codegen::ir::UserExternalName {
        namespace: 1,
        index: data.as_u32(),
    });
    func.create_global_value(cranelift_codegen::ir::GlobalValueData::Symbol {
        name: cranelift_codegen::ir::ExternalName::user(name),
        offset: cranelift_codegen::ir::immediates::Imm64::new(0),
        colocated: false,
        tls: false,
    })
}

/// The zeroed, writable module data of a reduction that runs in parts ([`reduce_split`]), as
/// a global value of `func`.
fn declare_split_scratch(
    module: &mut JITModule,
    func: &mut cranelift_codegen::ir::Function,
    plan: SplitPlan,
) -> Result<SplitScratch, BackendError> {
    let id = module
        .declare_anonymous_data(true, false)
        .map_err(|e| internal(format!("declare split scratch: {e}")))?;
    let mut data = DataDescription::new();
    data.define_zeroinit(plan.bytes.max(16));
    data.set_align(16);
    module
        .define_data(id, &data)
        .map_err(|e| internal(format!("define split scratch: {e}")))?;
    Ok(SplitScratch {
        data: literal_global(id, func),
        parts: plan.parts,
        stride: plan.stride,
    })
}

/// Writes the literal buffers of `program` into `module` as read-only data, aligned for their
/// dtype; returns each buffer's data (`None` for the others).
pub(crate) fn define_literals(
    module: &mut JITModule,
    program: &LirProgram,
) -> Result<Vec<Option<DataId>>, BackendError> {
    program
        .buffers()
        .iter()
        .map(|buffer| {
            let Storage::Literal { values } = &buffer.storage else {
                return Ok(None);
            };
            let size = buffer.ty.dtype.size_bytes();
            // Each value's bits, zero-extended to 64 (`Scalar::to_bits`), keep their low `size`
            // bytes: the element in memory, little-endian.
            let mut bytes: Vec<u8> = values
                .iter()
                .flat_map(|v| v.to_bits().to_le_bytes().into_iter().take(size))
                .collect();
            // An empty literal is never read; its data still needs an address.
            bytes.resize(bytes.len().max(size), 0);
            let id = module
                .declare_anonymous_data(false, false)
                .map_err(|e| internal(format!("declare literal data: {e}")))?;
            let mut data = DataDescription::new();
            data.define(bytes.into_boxed_slice());
            data.set_align(size as u64);
            module
                .define_data(id, &data)
                .map_err(|e| internal(format!("define literal data: {e}")))?;
            Ok(Some(id))
        })
        .collect()
}

/// What the kernels of one program reference in their module: the imported helpers and the
/// literal data (per buffer, `None` for the others).
#[derive(Clone, Copy)]
pub(crate) struct ModuleItems<'a> {
    pub(crate) imports: &'a ImportIds,
    pub(crate) literals: &'a [Option<DataId>],
    /// The target's ISA with Cranelift's mid-end on ([`wants_mid_end`]).
    pub(crate) mid_end: crate::target::MidEnd,
}

/// A kernel's function, built into its module.
pub(crate) struct BuiltKernel {
    pub(crate) id: FuncId,
    /// Its CLIF text (empty unless asked for).
    pub(crate) clif: String,
    /// Its machine code, as text (when asked for).
    pub(crate) disasm: Option<String>,
    pub(crate) shape: KernelShape,
    /// Its stack frame in bytes (at most [`MAX_FRAME`]).
    pub(crate) frame: u32,
}

/// The fewest LIR instructions in a kernel (preamble and body) for which its function runs Cranelift's
/// mid-end (e-graph GVN, LICM, constant folding, redundant-load elimination) before it is
/// compiled. A long straight-line body (a per-example robotics kernel with its Jacobians:
/// 200–350 instructions) repeats loads and arithmetic the mid-end merges, and its compile
/// time is spent once on many points; a smaller kernel executes about the same instructions
/// either way (some more: values hoisted out of its inner loops stay live across them), and
/// its compile time is most of what it costs. The mid-end's rewrites are IEEE-exact, so a
/// kernel gives the same bits either way. (The one function of a program of small kernels runs
/// the mid-end whatever its size: [`build_program`].)
pub(crate) const MID_END_MIN_BODY: usize = 200;

/// Whether `kernel`'s function runs Cranelift's mid-end ([`MID_END_MIN_BODY`]).
pub(crate) fn wants_mid_end(kernel: &LirKernel) -> bool {
    kernel.preamble.len() + kernel.body.len() >= MID_END_MIN_BODY
}

/// Builds the function for `kernel` into `module`.
pub(crate) fn build_kernel(
    module: &mut JITModule,
    items: ModuleItems<'_>,
    program: &LirProgram,
    kernel: &LirKernel,
    index: usize,
    want_disasm: bool,
    contract: bool,
) -> Result<BuiltKernel, BackendError> {
    let name = format!("rfx_{}_{index}", kernel.name);
    let (id, sig) = declare_kernel_function(module, &name)?;
    // Cranelift's contexts keep their allocations across functions when reused: one pair per
    // thread (a fresh pair when re-entered, which only a panic-free nested compile could do).
    thread_local! {
        static CONTEXTS: RefCell<Option<(Context, FunctionBuilderContext)>> = const { RefCell::new(None) };
    }
    let (mut ctx, mut fbc) = CONTEXTS
        .with(|cell| cell.try_borrow_mut().ok().and_then(|mut slot| slot.take()))
        .unwrap_or_else(|| (module.make_context(), FunctionBuilderContext::new()));
    module.clear_context(&mut ctx);
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    ctx.set_disasm(want_disasm);
    let function = KernelFunction {
        program,
        kernel,
        id,
        name: &name,
        want_disasm,
        contract,
    };
    let result = build_into(module, items, &function, &mut ctx, &mut fbc);
    module.clear_context(&mut ctx);
    CONTEXTS.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            *slot = Some((ctx, fbc));
        }
    });
    result.map(|(clif, disasm, shape, frame)| BuiltKernel {
        id,
        clif,
        disasm,
        shape,
        frame,
    })
}

/// Declares a function `(buffer table, first unit, end unit)` named `name` in `module`.
fn declare_kernel_function(module: &mut JITModule, name: &str) -> Result<(FuncId, Signature), BackendError> {
    let sig = kernel_signature(module);
    let id = module
        .declare_function(name, Linkage::Local, &sig)
        .map_err(|e| internal(format!("declare {name}: {e}")))?;
    Ok((id, sig))
}

/// The signature of a kernel function: `(buffer table, first unit, end unit)`.
fn kernel_signature(module: &JITModule) -> Signature {
    let mut sig = module.make_signature();
    sig.params.extend([
        AbiParam::new(module.target_config().pointer_type()),
        AbiParam::new(types::I64),
        AbiParam::new(types::I64),
    ]);
    sig
}

/// Starts a kernel function's code: its imports, its literal data's addresses and its entry
/// block, whose parameters `(table, first unit, end unit)` it returns.
fn begin_function(
    b: &mut FunctionBuilder<'_>,
    items: ModuleItems<'_>,
    module: &mut JITModule,
) -> (crate::imports::Imports, Vec<Option<GlobalValue>>, [Value; 3]) {
    let funcs = items.imports.in_func(module, b.func);
    let literal_bases = items
        .literals
        .iter()
        .map(|data| data.map(|id| literal_global(id, b.func)))
        .collect();
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry);
    (funcs, literal_bases, [params[0], params[1], params[2]])
}

/// Kernels of fewer loop points than this never split across threads (a thread takes at
/// least 1024 points), so a program of such kernels can run them all in one function.
pub(crate) const PROGRAM_MAX_POINTS: usize = 1024;

/// Whether [`build_program`] should compile `program`: two or more kernels, each of fewer
/// than [`PROGRAM_MAX_POINTS`] loop points (a control loop's call: a Kalman step's 15 kernels
/// of a few points each), where calling each kernel's function (a call, a prologue, its table
/// loads) costs as much as a kernel's work.
pub(crate) fn runs_as_one_function(program: &LirProgram) -> bool {
    program.kernels().len() > 1
        && program.kernels().iter().all(|k| {
            k.dims
                .iter()
                .try_fold(1usize, |n, &d| n.checked_mul(d))
                .is_some_and(|n| n < PROGRAM_MAX_POINTS)
        })
}

/// The most stack a function running a whole program may reserve for its kernels' staging
/// buffers (a control loop's call stays small and close to the caller's stack top); a program
/// of kernels that stage tiles of values keeps one function, and one frame, per kernel.
const PROGRAM_MAX_FRAME: u32 = 16 * 1024;

/// The most bytes a tiled kernel's staging buffers (each `TILE` cells of one value: 2 KiB in
/// `f32`, 4 KiB in `f64`) may take: 32 `f32` or 16 `f64` values live across the routine calls
/// of a tile at once. Buffers are reused by liveness ([`staging_buffers`]), so this bounds the
/// values live at once, not the kernel's length. A kernel that needs more runs on shorter tiles
/// (the longest multiple of 64 elements that fits) where each routine call stages at most 128
/// bytes per element, and untiled (inline vector transcendentals, no staging) otherwise
/// (`tiles::tile_elems`).
pub(crate) const TILE_STAGING_MAX: u32 = 64 * 1024;

/// The largest stack frame a generated function may have, in bytes: staging buffers (at most
/// [`TILE_STAGING_MAX`]), spill slots, saved registers and the partial accumulators of a
/// reduction. Every function's frame is read from Cranelift's compiled code and checked against
/// it; a larger one is refused with `Unsupported::Size`. Spill slots are most of a large
/// kernel's frame: a kernel of 100,000 ops on one element, heavy in transcendentals (each a
/// call of a routine's one-element entry), takes about 26 KiB; 32,000 distinct constants whose
/// vectors are built before a loop take 500 KiB. The worker threads' stacks ([`crate::pool`]) hold
/// several such frames; the caller's thread needs the program's frame free
/// (`CpuCompiled::max_frame_bytes`). Frames above 4 KiB probe each page as they grow
/// (Cranelift's inline stack probes), so an overflow stops at the guard page instead of
/// stepping over it.
pub(crate) const MAX_FRAME: u32 = 1024 * 1024;

/// The stack frame of the function just compiled in `ctx`, checked against [`MAX_FRAME`].
fn checked_frame(ctx: &Context) -> Result<u32, BackendError> {
    let frame = ctx
        .compiled_code()
        .and_then(|code| code.buffer.frame_layout())
        .map_or(0, |layout| layout.frame_to_fp_offset);
    if frame > MAX_FRAME {
        return Err(BackendError::Unsupported {
            backend: "cpu",
            what: Unsupported::Size {
                what: "a generated function's stack frame (bytes)",
                size: frame as usize,
                limit: MAX_FRAME as usize,
            },
        });
    }
    Ok(frame)
}

/// Pads `func`'s stack slots to a multiple of 16 bytes. Cranelift places the spill area right
/// after the sized stack slots (each slot at its alignment, at least 8 bytes, in order) and a
/// vector's 16-byte spill slots at multiples of 16 bytes from the area's start: after an
/// 8-byte slot (a `sincos` routine's cosine) every vector spill slot sits 8 bytes off 16, so
/// one in four straddles two cache lines, and when the caller's stack puts a page boundary
/// inside the spill area, one straddles two pages and each of its reloads is a page-split
/// load (an unbatched call then took up to 1.5x as long at some stack depths of its caller).
fn pad_spill_area(func: &mut cranelift_codegen::ir::Function) {
    let end = func.sized_stack_slots.values().fold(0u64, |end, slot| {
        let align = (1u64 << slot.align_shift).max(8);
        end.next_multiple_of(align) + u64::from(slot.size)
    });
    let end = end.next_multiple_of(8);
    if !end.is_multiple_of(16) {
        func.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
    }
}

/// Compiles every kernel of `program` into one function, `(table, _, _)`, that runs them as
/// `plan` says ([`crate::steps::run_steps`]), each on its whole range of units: each kernel's
/// code is what [`build_kernel`] makes of it, with its return replaced by a jump to the code
/// that follows it. A loop of the plan is a counted loop around its body's code that, with an
/// exit flag, also leaves after an iteration that leaves the flag false; the code's size does not
/// depend on the trip count. The function runs Cranelift's mid-end whatever its size (see
/// [`MID_END_MIN_BODY`]): it is a call's whole work, and its kernels repeat constants, splats
/// and addresses that only the mid-end merges across them. With `want_disasm` the function's
/// CLIF (after the mid-end) and machine code are kept. Returns the function, each kernel's
/// vector width and its frame; `None` (and nothing defined in `module`) when the function's
/// stack slots would exceed [`PROGRAM_MAX_FRAME`].
pub(crate) fn build_program(
    module: &mut JITModule,
    items: ModuleItems<'_>,
    program: &LirProgram,
    plan: &[RunStep],
    contract: bool,
    want_disasm: bool,
) -> Result<Option<ProgramFunction>, BackendError> {
    let ptr = module.target_config().pointer_type();
    let name = "rfx_program";
    let mut ctx = module.make_context();
    let mut fbc = FunctionBuilderContext::new();
    ctx.func.signature = kernel_signature(module);
    ctx.set_disasm(want_disasm);
    let infos = program
        .kernels()
        .iter()
        .map(|kernel| kernel_info(program, kernel))
        .collect::<Result<Vec<_>, _>>()?;
    let mut widths = vec![1; infos.len()];
    let in_frame = program.arena_bytes() <= PROGRAM_FRAME_ARENA_MAX;
    let entries = if in_frame {
        crate::steps::argument_entries(program)
    } else {
        table_entries(program)
    };
    let assembled;
    let arena_bytes = {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
        let (funcs, literal_bases, [table, _, _]) = begin_function(&mut b, items, module);
        let arena = in_frame.then(|| FrameArena::new(&mut b, program));
        let cx = ProgramCode {
            program,
            infos: &infos,
            funcs: &funcs,
            literal_bases: &literal_bases,
            ptr,
            table,
            contract,
            entries: &entries,
            arena: arena.as_ref(),
        };
        cx.emit_steps(&mut b, plan, &mut widths)?;
        assembled = funcs.take_assembled();
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(module.target_config());
        arena.map_or(0, |a| a.bytes)
    };
    pad_spill_area(&mut ctx.func);
    // The arena has its own bound; the staging buffers and partials share this one.
    let frame: u64 = ctx
        .func
        .sized_stack_slots
        .values()
        .map(|slot| u64::from(slot.size))
        .sum::<u64>()
        - u64::from(arena_bytes);
    if frame > u64::from(PROGRAM_MAX_FRAME) {
        return Ok(None);
    }
    assembled
        .define(module, &mut ctx.func)
        .map_err(|e| internal(format!("define {name}'s assembled passes: {e}")))?;
    let listing = if want_disasm {
        assembled.listing()
    } else {
        String::new()
    };
    let (id, _) = declare_kernel_function(module, name)?;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    // The kernels' code in one function repeats what each kernel builds for itself (constants,
    // splats, buffer addresses) and reloads values another kernel just stored: the mid-end
    // merges the repeats (GVN) and drops the loads that repeat one before them.
    ctx.optimize(&*items.mid_end.isa()?, &mut ControlPlane::default())
        .map_err(|e| internal(format!("optimize {name}: {e:?}")))?;
    let clif = if want_disasm {
        without_unused_declarations(&ctx.func.display().to_string())
    } else {
        String::new()
    };
    module
        .define_function(id, &mut ctx)
        .map_err(|e| internal(format!("define {name}: {e:?}")))?;
    let frame = checked_frame(&ctx)?;
    let disasm = if want_disasm {
        ctx.compiled_code()
            .and_then(|c| c.vcode.clone())
            .map(|code| code + &listing)
    } else {
        None
    };
    Ok(Some(ProgramFunction {
        id,
        widths,
        frame,
        arguments_only: in_frame,
        clif,
        disasm,
    }))
}

/// What [`build_program`] made.
pub(crate) struct ProgramFunction {
    pub(crate) id: FuncId,
    /// Each kernel's vector width.
    pub(crate) widths: Vec<u8>,
    /// The function's stack frame, in bytes.
    pub(crate) frame: u32,
    /// The program's temporaries live in the function's frame, and its table is the arguments'
    /// addresses in call order ([`crate::steps::argument_entries`]); otherwise the table is the
    /// per-kernel functions' ([`table_entries`]), the arena in the caller's scratch.
    pub(crate) arguments_only: bool,
    /// Its CLIF text as compiled, after the mid-end (empty unless asked for).
    pub(crate) clif: String,
    /// Its machine code, as text (when asked for).
    pub(crate) disasm: Option<String>,
}

/// The largest arena a program compiled as one function keeps in its stack frame (beside the
/// [`PROGRAM_MAX_FRAME`] of staging): its temporaries are then addressed from the frame, and a
/// call passes its arguments' addresses as they are, with no table to build. A larger arena
/// stays in the caller's scratch.
pub(crate) const PROGRAM_FRAME_ARENA_MAX: usize = 8 * 1024;

/// A program's arena in its one function's stack frame: the slot, and each buffer's byte offset
/// in it (`None` for buffers that are not temporaries).
pub(crate) struct FrameArena {
    slot: StackSlot,
    offsets: Vec<Option<usize>>,
    bytes: u32,
}

impl FrameArena {
    /// The slot of `program`'s arena (at least one byte, aligned as the arena asks, up to the
    /// frame's 16 bytes: every access is unaligned-safe) in the function `b` builds.
    fn new(b: &mut FunctionBuilder<'_>, program: &LirProgram) -> FrameArena {
        // Bounded by `PROGRAM_FRAME_ARENA_MAX`, so the size fits.
        let bytes = u32::try_from(program.arena_bytes().max(1)).unwrap_or(u32::MAX);
        let align = program.arena_align().clamp(1, 64).trailing_zeros() as u8;
        let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, bytes, align));
        let offsets = program
            .buffers()
            .iter()
            .map(|buffer| match buffer.storage {
                Storage::Arena { offset } => Some(offset),
                _ => None,
            })
            .collect();
        FrameArena { slot, offsets, bytes }
    }

    /// The address of `buf` in the frame, if it is a temporary.
    pub(crate) fn address(&self, b: &mut FunctionBuilder<'_>, ptr: Type, buf: BufId) -> Option<Value> {
        let offset = self.offsets.get(buf.index()).copied().flatten()?;
        let offset = i32::try_from(offset).ok()?;
        Some(b.ins().stack_addr(ptr, self.slot, offset))
    }
}

/// What [`build_program`]'s function shares among its kernels' code.
struct ProgramCode<'a, 'k> {
    program: &'a LirProgram,
    infos: &'a [KernelInfo<'k>],
    funcs: &'a crate::imports::Imports,
    literal_bases: &'a [Option<GlobalValue>],
    ptr: Type,
    /// The function's buffer table.
    table: Value,
    contract: bool,
    /// The entry of each buffer in `table`.
    entries: &'a [Option<usize>],
    /// The arena, when it lives in the function's frame.
    arena: Option<&'a FrameArena>,
}

impl ProgramCode<'_, '_> {
    /// Emits the code of `plan` at the builder's block, which it leaves at the block where the
    /// code after the plan goes; records each kernel's vector width in `widths`.
    fn emit_steps(
        &self,
        b: &mut FunctionBuilder<'_>,
        plan: &[RunStep],
        widths: &mut [u8],
    ) -> Result<(), BackendError> {
        for step in plan {
            match step {
                RunStep::Kernel(index) => {
                    let info = self.infos.get(*index).ok_or_else(|| {
                        internal(format!("the plan runs kernel {index}, which does not exist"))
                    })?;
                    let width = self.emit_kernel(b, info)?;
                    if let Some(slot) = widths.get_mut(*index) {
                        *slot = width;
                    }
                }
                RunStep::Loop { trips, exit, body } => self.emit_loop(b, *trips, *exit, body, widths)?,
            }
        }
        Ok(())
    }

    /// One kernel's code on its whole range of units; returns its vector width.
    fn emit_kernel(&self, b: &mut FunctionBuilder<'_>, info: &KernelInfo<'_>) -> Result<u8, BackendError> {
        // Each kernel runs units `0..units`; its unit count is known once its code is made,
        // so its bound starts as a placeholder constant, set afterwards.
        let lo = b.ins().iconst(types::I64, 0);
        let hi = b.ins().iconst(types::I64, 0);
        let exit = b.create_block();
        let mut generator = Gen::new(
            info,
            self.funcs,
            self.ptr,
            self.program,
            self.literal_bases.to_vec(),
            self.contract,
        );
        generator.fx.exit = Some(exit);
        generator.fx.table_entries = self.entries.to_vec();
        generator.fx.frame_arena = self.arena;
        let shape = generator.emit(b, self.table, lo, hi)?;
        let units = i64::try_from(shape.units).map_err(|_| internal("units beyond i64"))?;
        let bound = b
            .func
            .dfg
            .value_def(hi)
            .inst()
            .ok_or_else(|| internal("a kernel's bound is not an instruction"))?;
        b.func.replace(bound).iconst(types::I64, units);
        b.switch_to_block(exit);
        Ok(shape.width)
    }

    /// A loop of the plan: `for t in 0..trips { body; if exit flag is false { break } }`, with
    /// the counter compared unsigned so that every `u64` trip count is exact.
    fn emit_loop(
        &self,
        b: &mut FunctionBuilder<'_>,
        trips: u64,
        exit: Option<ExitFlag>,
        body: &[RunStep],
        widths: &mut [u8],
    ) -> Result<(), BackendError> {
        let header = b.create_block();
        let counter = b.append_block_param(header, types::I64);
        let iteration = b.create_block();
        let after = b.create_block();
        let zero = b.ins().iconst(types::I64, 0);
        b.ins().jump(header, &[BlockArg::Value(zero)]);
        b.switch_to_block(header);
        // The immediate is the trip count's bits; the comparison is unsigned.
        let more = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedLessThan, counter, trips.cast_signed());
        b.ins().brif(more, iteration, &[], after, &[]);
        b.switch_to_block(iteration);
        self.emit_steps(b, body, widths)?;
        if let Some(flag) = exit {
            let flag_base = match self.arena.and_then(|arena| arena.address(b, self.ptr, flag.buf)) {
                Some(address) => address,
                None => {
                    let entry = self.entries.get(flag.buf.index()).copied().flatten();
                    let entry = entry.ok_or_else(|| internal(format!("no table entry for {}", flag.buf)))?;
                    let offset = i32::try_from(entry * 8).map_err(|_| internal("too many buffers"))?;
                    b.ins().load(self.ptr, mem().with_readonly(), self.table, offset)
                }
            };
            let flag = b.ins().uload8(types::I32, mem(), flag_base, 0);
            let next = b.create_block();
            b.ins().brif(flag, next, &[], after, &[]);
            b.switch_to_block(next);
        }
        let next_counter = b.ins().iadd_imm_u(counter, 1);
        b.ins().jump(header, &[BlockArg::Value(next_counter)]);
        b.switch_to_block(after);
        Ok(())
    }
}

/// One kernel's function for [`build_into`]: the kernel, the function declared for it, and
/// how to build it.
struct KernelFunction<'a> {
    program: &'a LirProgram,
    kernel: &'a LirKernel,
    id: FuncId,
    name: &'a str,
    /// Keep the CLIF text and the disassembly.
    want_disasm: bool,
    /// Contract float multiply-adds into `fma` (fast math on a target with FMA).
    contract: bool,
}

/// The body of [`build_kernel`] on borrowed (reused) Cranelift contexts.
fn build_into(
    module: &mut JITModule,
    items: ModuleItems<'_>,
    function: &KernelFunction<'_>,
    ctx: &mut Context,
    fbc: &mut FunctionBuilderContext,
) -> Result<(String, Option<String>, KernelShape, u32), BackendError> {
    let KernelFunction {
        program,
        kernel,
        id,
        name,
        want_disasm,
        contract,
    } = *function;
    let ptr = module.target_config().pointer_type();

    let info = kernel_info(program, kernel)?;
    let shape;
    let chosen;
    let mut listing = String::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fbc);
        let (funcs, literal_bases, [table, lo, hi]) = begin_function(&mut b, items, module);
        let mut generator = Gen::new(&info, &funcs, ptr, program, literal_bases, contract);
        if let Some(plan) = generator.split_plan()? {
            generator.fx.split_scratch = Some(declare_split_scratch(module, b.func, plan)?);
        }
        shape = generator.emit(&mut b, table, lo, hi)?;
        chosen = generator.cur.plan;
        let passes = funcs.take_assembled();
        passes
            .define(module, b.func)
            .map_err(|e| internal(format!("define {name}'s assembled passes: {e}")))?;
        if want_disasm {
            listing = passes.listing();
        }
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    pad_spill_area(&mut ctx.func);
    // Printing CLIF costs a sizeable part of a small kernel's compile time: only for dumps.
    let clif = if want_disasm {
        let plan = chosen.map(|p| format!("; plan: {p}\n")).unwrap_or_default();
        plan + &without_unused_declarations(&ctx.func.display().to_string())
    } else {
        String::new()
    };
    if wants_mid_end(kernel) {
        ctx.optimize(&*items.mid_end.isa()?, &mut ControlPlane::default())
            .map_err(|e| internal(format!("optimize {name}: {e:?}")))?;
    }
    module
        .define_function(id, ctx)
        .map_err(|e| internal(format!("define {name}: {e:?}")))?;
    let frame = checked_frame(ctx)?;
    let disasm = if want_disasm {
        ctx.compiled_code()
            .and_then(|c| c.vcode.clone())
            .map(|code| code + &listing)
    } else {
        None
    };
    Ok((clif, disasm, shape, frame))
}

/// The CLIF text of one function without the declarations of the functions it never calls
/// and of the signatures no kept declaration or indirect call uses: every kernel function
/// declares every helper (Cranelift compiles the unused ones to nothing), which would
/// otherwise fill most of a small kernel's dump.
fn without_unused_declarations(text: &str) -> String {
    fn declared(line: &str) -> Option<(&str, &str)> {
        let (name, rest) = line.trim_start().split_once(" = ")?;
        let digits = name.strip_prefix("sig").or_else(|| name.strip_prefix("fn"))?;
        (!digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit())).then_some((name, rest))
    }
    fn words(text: &str) -> impl Iterator<Item = &str> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
    }
    let mut used: std::collections::HashSet<&str> = text
        .lines()
        .filter(|line| declared(line).is_none())
        .flat_map(words)
        .collect();
    for line in text.lines() {
        if let Some((name, rest)) = declared(line)
            && name.starts_with("fn")
            && used.contains(name)
        {
            let sigs: Vec<&str> = words(rest).filter(|w| w.starts_with("sig")).collect();
            used.extend(sigs);
        }
    }
    let mut kept = String::with_capacity(text.len());
    for line in text.lines() {
        if declared(line).is_none_or(|(name, _)| used.contains(name)) {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

/// What the emitter needs to know of `kernel`'s accesses and of `program`'s buffers.
fn kernel_info<'k>(program: &'k LirProgram, kernel: &'k LirKernel) -> Result<KernelInfo<'k>, BackendError> {
    let buffer_dtypes: Vec<DType> = program.buffers().iter().map(|b| b.ty.dtype).collect();
    let mut accesses = Vec::new();
    let mut access_of = Vec::new();
    for inst in &kernel.body {
        let slot_dtype = |dst: &SlotId, what: &str| {
            kernel
                .slot_dtype(*dst)
                .ok_or_else(|| internal(format!("{what} into an undeclared slot")))
        };
        let access = match inst {
            Inst::Load {
                dst,
                buf,
                strides,
                offset,
            } => Some((Some(*buf), strides, *offset, slot_dtype(dst, "load")?)),
            Inst::Index { dst, strides } => Some((None, strides, 0, slot_dtype(dst, "index")?)),
            Inst::Store {
                buf, strides, offset, ..
            } => {
                let dtype = *buffer_dtypes
                    .get(buf.index())
                    .ok_or_else(|| internal("store to an unknown buffer"))?;
                Some((Some(*buf), strides, *offset, dtype))
            }
            _ => None,
        };
        access_of.push(access.as_ref().map(|_| accesses.len()));
        if let Some((buf, strides, offset, dtype)) = access {
            accesses.push(Access {
                buf,
                strides: strides.clone(),
                offset,
                dtype,
            });
        }
    }
    let buffer_is_input = program
        .buffers()
        .iter()
        .map(|b| match b.storage {
            // Literal data is read-only memory of the module, read like an input.
            Storage::Input { .. } | Storage::Literal { .. } => Some(true),
            Storage::Output { .. } => Some(false),
            Storage::Arena { .. } => None,
        })
        .collect();
    Ok(KernelInfo {
        kernel,
        accesses,
        access_of,
        buffer_dtypes,
        buffer_lens: program.buffers().iter().map(|b| b.ty.shape.numel()).collect(),
        buffer_is_input,
        literals: program
            .buffers()
            .iter()
            .map(|b| match &b.storage {
                Storage::Literal { values } => Some(values.as_slice()),
                _ => None,
            })
            .collect(),
    })
}

impl<'i, 'k> Gen<'i, 'k> {
    /// A generator for the kernel `info` describes, in a function whose imports are `imports`
    /// and whose literal data are `literal_bases`.
    fn new(
        info: &'i KernelInfo<'k>,
        imports: &'i crate::imports::Imports,
        ptr: Type,
        program: &LirProgram,
        literal_bases: Vec<Option<GlobalValue>>,
        contract: bool,
    ) -> Self {
        Gen {
            fx: FnContext {
                info,
                imports,
                ptr,
                bases: Vec::new(),
                table_entries: table_entries(program),
                frame_arena: None,
                literal_bases,
                pre_scalar: Vec::new(),
                pre_splat: Vec::new(),
                pre_const: Vec::new(),
                contract,
                exit: None,
                split_scratch: None,
            },
            caches: Caches {
                products: HashMap::new(),
                memo: RefCell::new(HashMap::new()),
                known: RefCell::new(HashMap::new()),
                sincos: HashMap::new(),
                // Tracked only where a gather can use them.
                lane_steps: info
                    .kernel
                    .body
                    .iter()
                    .any(|inst| matches!(inst, Inst::Gather { .. }))
                    .then(HashMap::new),
            },
            cur: Cursor {
                width: 1,
                point_width: 1,
                inner_axis: None,
                tiles: None,
                reduce_pass: None,
                row_indices: HashMap::new(),
                col_indices: HashMap::new(),
                segment_unroll: SEGMENT_UNROLL,
                preloaded: HashMap::new(),
                plan: None,
                scan_accs: Vec::new(),
                index_ranges: HashMap::new(),
                joined: None,
            },
        }
    }
}

/// The emitter of one kernel's code: the function's context, the caches of values already
/// built, and the cursor (the loop shape and the loop state at the point being emitted).
struct Gen<'i, 'k> {
    fx: FnContext<'i, 'k>,
    caches: Caches,
    cur: Cursor,
}

/// What the emitter knows of the function it writes into: the kernel, the helpers, the buffers'
/// addresses and the preamble's values (set at the function's entry, then only read).
struct FnContext<'i, 'k> {
    info: &'i KernelInfo<'k>,
    imports: &'i crate::imports::Imports,
    ptr: Type,
    /// Base address of each buffer (loaded lazily from the table in the entry block).
    bases: Vec<Option<Value>>,
    /// The table entry of each buffer ([`table_entries`]).
    table_entries: Vec<Option<usize>>,
    /// The program's arena, when it lives in the frame of the program's one function.
    frame_arena: Option<&'i FrameArena>,
    /// The module data of each literal buffer, as a global value of this function.
    literal_bases: Vec<Option<GlobalValue>>,
    /// Scalar values of the slots the preamble defines.
    pre_scalar: Vec<Option<Value>>,
    /// Splats at the kernel's vector width of the preamble slots the body reads, built once in
    /// the entry block when the loop runs enough passes to repay them (see `hoist_splats`).
    pre_splat: Vec<Option<Value>>,
    /// The value of each preamble slot last defined by a float `Const`.
    pre_const: Vec<Option<f64>>,
    /// Fast math on a target with fused multiply-add: float `a * b ± c` becomes one `fma`.
    contract: bool,
    /// Where the kernel's code continues when it is done: `None` returns (a function per
    /// kernel); a block of the function that runs the program's next kernel otherwise.
    exit: Option<Block>,
    /// The scratch of a reduction that also runs in parts of its leaf trees.
    split_scratch: Option<SplitScratch>,
}

/// Values already built, for repeats to reuse, and facts about values.
struct Caches {
    /// Pure integer values (addresses, offsets, splats) already built, by block: a repeat in the
    /// same block reuses the value, so the CLIF handed to Cranelift is smaller and compiles
    /// faster. A value is only reused in the block that defines it (which dominates every
    /// later instruction of that block).
    memo: RefCell<HashMap<(Block, Pure, u32, i64), Value>>,
    /// What is known of integer values built through [`Gen::const_i64`] and [`Gen::add_imm`],
    /// so that arithmetic on constants folds here (Cranelift's mid-end, which would fold it,
    /// is off) and address offsets collect into one displacement: a kernel written out at
    /// constant positions addresses every element as a base plus a constant.
    known: RefCell<HashMap<Value, Known>>,
    /// Scalar code's `sin` and `cos` of a value (by block and argument) from one `sincos`
    /// routine call, for the second of the pair to reuse (only in the defining block, as `memo`).
    sincos: HashMap<(Block, Value), (Value, Value)>,
    /// The operands of every float product emitted so far, by its (SSA) result.
    products: HashMap<Value, (Value, Value)>,
    /// `i32` vectors whose lanes step evenly, by (SSA) value: lane `j` is lane 0 plus `j`
    /// times the step, wrapping. Indices, splats and their sums and differences; a gather by
    /// such an index reads a vector (step 1) or one element (step 0) where it can. `None` in a
    /// kernel without gathers.
    lane_steps: Option<HashMap<Value, i64>>,
}

/// The loop shape being emitted and the state at the point being emitted.
struct Cursor {
    width: u8,
    /// For a reduction whose outputs run one at a time (width 1): the vector width its points
    /// may be evaluated at, lanes added in order.
    point_width: u8,
    /// The loop dim the vector loop runs along (`None`: a single point per row, as for a
    /// reduction with no reduced dims left after coalescing).
    inner_axis: Option<usize>,
    /// For elementwise kernels with transcendentals the tile routines compute: the tiled plan.
    tiles: Option<TilePlan>,
    /// For a reduction with partial accumulators: the assembled pass that runs its rows'
    /// whole vector steps ([`Gen::reduce_pass`]).
    reduce_pass: Option<ReducePass>,
    /// Indices that do not change along the vector loop (a row index), converted once per row
    /// before it: access index → (scalar, splat at the kernel's width). Cranelift does not hoist
    /// them out of the loop itself. Set only around an elementwise row's loop.
    row_indices: HashMap<usize, (Value, Value)>,
    /// Indices the vector loop advances (a column index), carried through an elementwise row's
    /// vector loops as vectors, one add per step instead of a conversion and a splat: access
    /// index → the vector at the current position. Set only inside those loops.
    col_indices: HashMap<usize, Value>,
    /// Vectors per pass of a tiled kernel's ops segments: `SEGMENT_UNROLL`, or 1 for rows
    /// shorter than that many vectors.
    segment_unroll: i64,
    /// Body loads already in registers for the point being emitted, by body index: the
    /// transposed rows of a reduction with its outputs in lanes (`Gen::transposed_rows`).
    preloaded: HashMap<usize, Value>,
    /// The loop shape chosen for the kernel, once chosen.
    plan: Option<KernelPlan>,
    /// In a kernel with scans, at the point being emitted: each scan's body index and its
    /// running accumulator, which its instruction folds into and replaces.
    scan_accs: Vec<(usize, Value)>,
    /// The largest value of each index offset that is not a constant but whose range is known
    /// (a unit's offset along the units of [`Gen::emit_units_written_out`]; the smallest is 0).
    index_ranges: HashMap<Value, i64>,
    /// The `f64` stores of a unit of small blocks held back to be stored two adjacent
    /// elements at a time (`joined.rs`); `None` elsewhere.
    joined: Option<joined::JoinedStores>,
}

/// An integer value's known form ([`Caches::known`]).
#[derive(Clone, Copy, Debug)]
enum Known {
    /// The constant.
    Const(i64),
    /// `base + offset`, `base` of no known form.
    Offset(Value, i64),
}

/// The pure operations [`Caches::memo`] shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pure {
    AddImm,
    Scale,
    Add,
    StackAddr,
    Splat,
}

impl<'k> Gen<'_, 'k> {
    fn kernel(&self) -> &'k LirKernel {
        self.fx.info.kernel
    }

    fn slot_dtype(&self, slot: SlotId) -> Result<DType, BackendError> {
        self.kernel()
            .slot_dtype(slot)
            .ok_or_else(|| internal(format!("undeclared slot {slot}")))
    }

    /// Whether the kernel also takes the other of `sin` and `cos` (`op`) of a value in `src`
    /// (the same slot may hold another value by then: this only decides whether scalar code
    /// calls `sincos`, whose second result is reused only for the same value).
    fn has_trig_partner(&self, op: UnaryOp, src: SlotId) -> bool {
        let partner = match op {
            UnaryOp::Sin => UnaryOp::Cos,
            UnaryOp::Cos => UnaryOp::Sin,
            _ => return false,
        };
        let kernel = self.kernel();
        kernel
            .preamble
            .iter()
            .chain(&kernel.body)
            .any(|inst| matches!(inst, Inst::Unary { op, src: s, .. } if *op == partner && *s == src))
    }

    /// [`Gen::body_work`] at a position written out at constant indices, where what depends
    /// on nothing but the indices and constants (a concatenation's comparisons of the position
    /// with its parts' bounds) is folded at compile time ([`Gen::fold_plan`]) and costs
    /// nothing. Selects, transcendentals and everything that reads a buffer count as there.
    fn written_out_work(&self) -> usize {
        let kernel = self.kernel();
        let mut constant = vec![false; kernel.slots.len()];
        for inst in &kernel.preamble {
            if let Some(dst) = inst.dst()
                && let Some(c) = constant.get_mut(dst.index())
            {
                *c = matches!(inst, Inst::Const { .. });
            }
        }
        let mut work = 0;
        for inst in &kernel.body {
            let folded = match inst {
                Inst::Index { .. } | Inst::Const { .. } => true,
                Inst::Unary { .. } | Inst::Binary { .. } | Inst::Compare { .. } | Inst::Cast { .. } => {
                    inst.work() == 1
                        && (inst.srcs().iter()).all(|s| constant.get(s.index()).copied().unwrap_or(false))
                }
                _ => false,
            };
            if let Some(dst) = inst.dst()
                && let Some(c) = constant.get_mut(dst.index())
            {
                *c = folded;
            }
            if !folded {
                work += inst.work();
            }
        }
        work.max(1)
    }

    /// The body's work per point in instruction-equivalents (at least 1): a transcendental
    /// counts 20, `pow` and `atan2` 40, anything else 1.
    fn body_work(&self) -> usize {
        self.kernel().body.iter().map(Inst::work).sum::<usize>().max(1)
    }

    /// `min_elems_per_thread` is for a body of `REFERENCE_WORK` instruction-equivalents; a
    /// costlier body (transcendentals count 20, `pow`/`atan2` 40) splits at fewer points, a
    /// cheaper one (a memory-bound `add`) at more, because handing a chunk to a worker costs
    /// microseconds that only enough work repays.
    fn min_points_per_thread(&self) -> usize {
        const REFERENCE_WORK: usize = 16;
        let work = self.body_work();
        (self
            .kernel()
            .schedule
            .min_elems_per_thread
            .saturating_mul(REFERENCE_WORK)
            / work)
            .max(1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unused_declarations_leave_the_dump() {
        let text = "function u0:1(i64, i64, i64) system_v {\n    sig0 = (f32, f32) -> f32 system_v\n    sig1 = (i64, i64, i64) system_v\n    sig2 = (f64) -> f64 system_v\n    fn0 = u0:2 sig0\n    fn1 = u0:3 sig1\n    fn10 = u0:4 sig2\n\nblock0(v0: i64, v1: i64, v2: i64):\n    call fn1(v0, v1, v2)\n    v3 = call_indirect sig2, v0(v1)\n    return\n}\n";
        let kept = without_unused_declarations(text);
        assert_eq!(
            kept,
            "function u0:1(i64, i64, i64) system_v {\n    sig1 = (i64, i64, i64) system_v\n    sig2 = (f64) -> f64 system_v\n    fn1 = u0:3 sig1\n\nblock0(v0: i64, v1: i64, v2: i64):\n    call fn1(v0, v1, v2)\n    v3 = call_indirect sig2, v0(v1)\n    return\n}\n"
        );
    }

    /// The counts a plan checks against its budget are the lengths of the lists it then builds.
    #[test]
    fn position_counts_are_the_lengths_of_the_position_lists() {
        for width in [0u8, 1, 2, 4, 8, 16] {
            for n in 0..70 {
                assert_eq!(row_position_count(n, width), row_positions(n, width).len());
                assert_eq!(
                    written_out_position_count(n, width),
                    written_out_positions(n, width).len()
                );
            }
        }
        assert_eq!(row_position_count(usize::MAX, 8), usize::MAX / 8 + 7);
        assert_eq!(written_out_position_count(usize::MAX, 8), usize::MAX / 8 + 1);
    }

    fn call(src: usize, dst: usize) -> Segment {
        Segment::Call {
            routine: AotFn::SinF32,
            srcs: vec![TileSrc::Body(src)],
            dsts: vec![dst],
            src_accesses: vec![None],
            dst_accesses: vec![None],
        }
    }

    /// An ops segment defining value 0, then calls making 1 from 0, 2 from 1 and 3 from 2.
    fn load_and_three_calls() -> Vec<Segment> {
        vec![
            Segment::Ops {
                insts: vec![0],
                loads: Vec::new(),
            },
            call(0, 1),
            call(1, 2),
            call(2, 3),
        ]
    }

    /// A load, a chain of three routine calls and an ops segment reading the last result: each
    /// value is live from its segment to the next, so two buffers serve all five; a value never
    /// shares a buffer with one its own segment reads.
    #[test]
    fn a_chain_of_routines_stages_two_buffers() {
        let mut segments = load_and_three_calls();
        segments.push(Segment::Ops {
            insts: vec![4],
            loads: vec![(4, 3, SlotId::new(0))],
        });
        let cells: HashMap<usize, u32> = (0..4).map(|def| (def, 4)).collect();
        let buffers = staging_buffers(&segments, &cells, &[]);
        assert_eq!(buffers.cells, vec![4, 4]);
        for (reader, def) in [(1, 0), (2, 1), (3, 2)] {
            assert_ne!(
                buffers.of_def[&reader], buffers.of_def[&def],
                "{reader} reads {def}"
            );
        }
        assert_eq!(buffers.of_def[&0], buffers.of_def[&2]);
        assert_eq!(buffers.of_def[&1], buffers.of_def[&3]);
    }

    /// A reduced value stays staged to the end of the tile (the reduction pass reads it after
    /// the segments), and buffers of different cell sizes are never shared.
    #[test]
    fn reduced_values_and_cell_sizes_keep_their_buffers() {
        let segments = load_and_three_calls();
        let cells: HashMap<usize, u32> = [(0, 4), (1, 4), (2, 8), (3, 4)].into_iter().collect();
        let buffers = staging_buffers(&segments, &cells, &[0]);
        // 0 is reduced (live to the end); 1 is dead after segment 2, so 3 takes its buffer; 2
        // has 8-byte cells, a buffer of its own.
        assert_eq!(buffers.cells, vec![4, 4, 8]);
        assert_eq!(buffers.of_def[&3], buffers.of_def[&1]);
        assert_ne!(buffers.of_def[&3], buffers.of_def[&0]);
        assert_eq!(buffers.cells[buffers.of_def[&2]], 8);
    }
}
