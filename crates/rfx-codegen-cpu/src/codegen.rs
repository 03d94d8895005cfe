//! LIR kernel → one native function `fn(table: *const *mut u8, lo: u64, hi: u64)`.
//!
//! `table[i]` is the base address of buffer `i` (inputs, outputs and arena temporaries alike).
//! The function computes the *units* `lo..hi` of its kernel: for an elementwise kernel of rank
//! at most 1 a unit is one element; for a higher-rank elementwise kernel it is one row of the
//! innermost dimension; for a reduction it is one leading point (one output element), or, with
//! one accumulator per output, one row of outputs (one output when a single kept dim is left). Threads split a kernel by units. Within a unit range the innermost dimension runs
//! as a vector loop of `w` lanes followed by a scalar tail; reductions keep `reduce_lanes`
//! partial accumulators (two vectors for the default schedule) and combine them exactly as the
//! LIR interpreter does, or, with one accumulator per output, accumulate `w` neighbouring
//! outputs in one vector lane by lane (one output at a time, in registers, when a row of
//! outputs is narrower than a vector); either way results are bit-identical to it.

use cranelift_codegen::Context;
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

use rfx_ir::{BinaryOp, BufId, DType, ReduceOp, Scalar, UnaryOp};
use rfx_lower::{BackendError, Unsupported};

use crate::aot::{AotFn, MIN_TILED_ELEMS, TILE};

/// Innermost loop length from which the body's constant splats are built once, before the loop
/// (`Gen::hoist_splats`): one pass of four vectors.
const HOIST_MIN_ELEMS: usize = 16;
use crate::imports::ImportIds;
use crate::ops::{Emitter, bitcast_flags, cl_type, vectorizable};

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
}

impl KernelShape {
    /// One unit of work on one thread: a function that runs a whole program of small kernels.
    pub(crate) fn one_unit() -> KernelShape {
        KernelShape {
            units: 1,
            width: 1,
            thread_limit: 0,
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

/// How many positions [`row_positions`] returns for `n` and `width`, without building them: a
/// row's length comes from the user's shapes, so a plan checks it against its budget first.
fn row_position_count(n: usize, width: u8) -> usize {
    let w = usize::from(width.max(1));
    n / w + n % w
}

/// The positions and widths an elementwise row of `n` points written out without a loop runs
/// at: whole vectors of `width` from 0, then the points left over one by one (each point
/// computed and stored once).
fn row_positions(n: usize, width: u8) -> Vec<(usize, u8)> {
    let w = usize::from(width.max(1));
    let whole = n / w * w;
    (0..whole)
        .step_by(w)
        .map(|at| (at, width.max(1)))
        .chain((whole..n).map(|at| (at, 1)))
        .collect()
}

/// How many positions [`written_out_positions`] returns, without building them.
fn written_out_position_count(n: usize, width: u8) -> usize {
    let w = usize::from(width.max(1));
    n / w + usize::from(!n.is_multiple_of(w) && n >= w)
}

/// The positions [`Gen::emit_vector_positions`] runs a body at over `0..n` in vectors of `w`
/// (at least one vector long when `w > 1`): every whole vector, then `n - w` for a ragged end.
fn written_out_positions(n: usize, width: u8) -> Vec<usize> {
    let w = usize::from(width.max(1));
    let mut positions: Vec<usize> = (0..n / w).map(|i| i * w).collect();
    if !n.is_multiple_of(w) && n >= w {
        positions.push(n - w);
    }
    positions
}

/// `(x / d, x % d)` for a constant `d`: a shift and a mask for a power of two; with `small`
/// (the caller knows `x <= 2^32`), a multiply-high by `ceil(2^64 / d)`, exact for every such `x`
/// and `d < 2^32` (the error `x * e / 2^64 < 2^-32` never reaches the next multiple, which is at
/// least `1/d` away); otherwise a division.
fn div_rem_const(b: &mut FunctionBuilder<'_>, x: Value, d: u64, small: bool) -> (Value, Value) {
    if d <= 1 {
        // `x / 1`; a dimension of 0 has no points, so its code never runs.
        let zero = b.ins().iconst(types::I64, 0);
        return (x, zero);
    }
    if d.is_power_of_two() {
        let q = b.ins().ushr_imm_s(x, i64::from(d.trailing_zeros()));
        let r = b.ins().band_imm_s(x, (d - 1) as i64);
        return (q, r);
    }
    if small && d < 1 << 32 {
        let magic = (u128::from(u64::MAX) + 1).div_ceil(u128::from(d)) as u64;
        let m = b.ins().iconst(types::I64, magic as i64);
        let q = b.ins().umulhi(x, m);
        let qd = b.ins().imul_imm_s(q, d as i64);
        let r = b.ins().isub(x, qd);
        return (q, r);
    }
    let q = b.ins().udiv_imm_s(x, d as i64);
    let r = b.ins().urem_imm_s(x, d as i64);
    (q, r)
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
    let result = build_into(
        module,
        items,
        program,
        kernel,
        id,
        &name,
        want_disasm,
        contract,
        &mut ctx,
        &mut fbc,
    );
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
/// values live at once, not the kernel's length; a kernel that needs more runs untiled (inline
/// vector transcendentals, no staging).
pub(crate) const TILE_STAGING_MAX: u32 = 64 * 1024;

/// The largest stack frame a generated function may have, in bytes: staging buffers (at most
/// [`TILE_STAGING_MAX`]), spill slots, saved registers and the partial accumulators of a
/// reduction. Every function's frame is read from Cranelift's compiled code and checked against
/// it; a larger one is refused with `Unsupported::Size`. Spill slots are most of a large
/// kernel's frame: code without loops (a kernel of one to a few elements, whose ops all run
/// once) spills about 12 bytes per op when values stay live far along it, so a kernel of
/// 20,000 ops takes up to about 250 KiB and the bound is reached near 80,000. Kernels with
/// loops spill less (about 6 bytes per op). The worker threads' stacks ([`crate::pool`]) hold
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

/// Compiles every kernel of `program` into one function, `(table, _, _)`, that runs them in
/// program order, each on its whole range of units: each kernel's code is what
/// [`build_kernel`] makes of it, with its return replaced by a jump to the next kernel's code.
/// Returns the function, each kernel's vector width and its frame; `None` (and nothing defined in
/// `module`) when the function's stack slots would exceed [`PROGRAM_MAX_FRAME`].
pub(crate) fn build_program(
    module: &mut JITModule,
    items: ModuleItems<'_>,
    program: &LirProgram,
    contract: bool,
) -> Result<Option<(FuncId, Vec<u8>, u32)>, BackendError> {
    let ptr = module.target_config().pointer_type();
    let name = "rfx_program";
    let mut ctx = module.make_context();
    let mut fbc = FunctionBuilderContext::new();
    ctx.func.signature = kernel_signature(module);
    let infos = program
        .kernels()
        .iter()
        .map(|kernel| kernel_info(program, kernel))
        .collect::<Result<Vec<_>, _>>()?;
    let mut widths = Vec::with_capacity(infos.len());
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
        let (funcs, literal_bases, [table, _, _]) = begin_function(&mut b, items, module);
        for info in &infos {
            // Each kernel runs units `0..units`; its unit count is known once its code is made,
            // so its bound starts as a placeholder constant, set afterwards.
            let lo = b.ins().iconst(types::I64, 0);
            let hi = b.ins().iconst(types::I64, 0);
            let exit = b.create_block();
            let mut generator = Gen::new(info, &funcs, ptr, program, literal_bases.clone(), contract);
            generator.exit = Some(exit);
            let shape = generator.emit(&mut b, table, lo, hi)?;
            let units = i64::try_from(shape.units).map_err(|_| internal("units beyond i64"))?;
            let bound = b
                .func
                .dfg
                .value_def(hi)
                .inst()
                .ok_or_else(|| internal("a kernel's bound is not an instruction"))?;
            b.func.replace(bound).iconst(types::I64, units);
            widths.push(shape.width);
            b.switch_to_block(exit);
        }
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    let frame: u64 = ctx
        .func
        .sized_stack_slots
        .values()
        .map(|slot| u64::from(slot.size))
        .sum();
    if frame > u64::from(PROGRAM_MAX_FRAME) {
        return Ok(None);
    }
    let (id, _) = declare_kernel_function(module, name)?;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    module
        .define_function(id, &mut ctx)
        .map_err(|e| internal(format!("define {name}: {e:?}")))?;
    let frame = checked_frame(&ctx)?;
    Ok(Some((id, widths, frame)))
}

/// The body of [`build_kernel`] on borrowed (reused) Cranelift contexts.
#[allow(clippy::too_many_arguments)]
fn build_into(
    module: &mut JITModule,
    items: ModuleItems<'_>,
    program: &LirProgram,
    kernel: &LirKernel,
    id: FuncId,
    name: &str,
    want_disasm: bool,
    contract: bool,
    ctx: &mut Context,
    fbc: &mut FunctionBuilderContext,
) -> Result<(String, Option<String>, KernelShape, u32), BackendError> {
    let ptr = module.target_config().pointer_type();

    let info = kernel_info(program, kernel)?;
    let shape;
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fbc);
        let (funcs, literal_bases, [table, lo, hi]) = begin_function(&mut b, items, module);
        let mut generator = Gen::new(&info, &funcs, ptr, program, literal_bases, contract);
        shape = generator.emit(&mut b, table, lo, hi)?;
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    // Printing CLIF costs a sizeable part of a small kernel's compile time: only for dumps.
    let clif = if want_disasm {
        ctx.func.display().to_string()
    } else {
        String::new()
    };
    module
        .define_function(id, ctx)
        .map_err(|e| internal(format!("define {name}: {e:?}")))?;
    let frame = checked_frame(ctx)?;
    let disasm = if want_disasm {
        ctx.compiled_code().and_then(|c| c.vcode.clone())
    } else {
        None
    };
    Ok((clif, disasm, shape, frame))
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
            Inst::Store { buf, strides, .. } => {
                let dtype = *buffer_dtypes
                    .get(buf.index())
                    .ok_or_else(|| internal("store to an unknown buffer"))?;
                Some((Some(*buf), strides, 0, dtype))
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
            info,
            imports,
            ptr,
            bases: Vec::new(),
            table_entries: table_entries(program),
            literal_bases,
            pre_scalar: Vec::new(),
            pre_splat: Vec::new(),
            pre_const: Vec::new(),
            width: 1,
            point_width: 1,
            inner_axis: None,
            contract,
            products: HashMap::new(),
            tiles: None,
            memo: RefCell::new(HashMap::new()),
            known: RefCell::new(HashMap::new()),
            sincos: HashMap::new(),
            row_indices: HashMap::new(),
            col_indices: HashMap::new(),
            segment_unroll: SEGMENT_UNROLL,
            preloaded: HashMap::new(),
            rows_in_tiles: false,
            // Tracked only where a gather can use them.
            lane_steps: info
                .kernel
                .body
                .iter()
                .any(|inst| matches!(inst, Inst::Gather { .. }))
                .then(HashMap::new),
            scan_accs: Vec::new(),

            exit: None,
            index_ranges: HashMap::new(),
        }
    }

    /// Ends the kernel's code: a return, or in a function running several kernels, a jump to
    /// the next kernel's code.
    fn finish(&self, b: &mut FunctionBuilder<'_>) {
        match self.exit {
            Some(exit) => {
                b.ins().jump(exit, &[]);
            }
            None => {
                b.ins().return_(&[]);
            }
        }
    }
}

struct Gen<'i, 'k> {
    info: &'i KernelInfo<'k>,
    imports: &'i crate::imports::Imports,
    ptr: Type,
    /// Base address of each buffer (loaded lazily from the table in the entry block).
    bases: Vec<Option<Value>>,
    /// The table entry of each buffer ([`table_entries`]).
    table_entries: Vec<Option<usize>>,
    /// The module data of each literal buffer, as a global value of this function.
    literal_bases: Vec<Option<GlobalValue>>,
    /// Scalar values of the slots the preamble defines.
    pre_scalar: Vec<Option<Value>>,
    /// Splats at the kernel's vector width of the preamble slots the body reads, built once in
    /// the entry block when the loop runs enough passes to repay them (see `hoist_splats`).
    pre_splat: Vec<Option<Value>>,
    /// The value of each preamble slot last defined by a float `Const`.
    pre_const: Vec<Option<f64>>,
    width: u8,
    /// For a reduction whose outputs run one at a time (width 1): the vector width its points
    /// may be evaluated at, lanes added in order.
    point_width: u8,
    /// The loop dim the vector loop runs along (`None`: a single point per row, as for a
    /// reduction with no reduced dims left after coalescing).
    inner_axis: Option<usize>,
    /// Fast math on a target with fused multiply-add: float `a * b ± c` becomes one `fma`.
    contract: bool,
    /// The operands of every float product emitted so far, by its (SSA) result.
    products: HashMap<Value, (Value, Value)>,
    /// For elementwise kernels with transcendentals the tile routines compute: the tiled plan.
    tiles: Option<TilePlan>,
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
    /// A reduction with one accumulator per output whose rows run in tiles, one output at a
    /// time, folded into a one-lane partial (`Gen::emit_reduction`).
    rows_in_tiles: bool,
    /// `i32` vectors whose lanes step evenly, by (SSA) value: lane `j` is lane 0 plus `j`
    /// times the step, wrapping. Indices, splats and their sums and differences; a gather by
    /// such an index reads a vector (step 1) or one element (step 0) where it can. `None` in a
    /// kernel without gathers.
    lane_steps: Option<HashMap<Value, i64>>,
    /// In a kernel with scans, at the point being emitted: each scan's body index and its
    /// running accumulator, which its instruction folds into and replaces.
    scan_accs: Vec<(usize, Value)>,
    /// Where the kernel's code continues when it is done: `None` returns (a function per
    /// kernel); a block of the function that runs the program's next kernel otherwise.
    exit: Option<Block>,
    /// The largest value of each index offset that is not a constant but whose range is known
    /// (a unit's offset along the units of [`Gen::emit_units_written_out`]; the smallest is 0).
    index_ranges: HashMap<Value, i64>,
}

/// An integer value's known form ([`Gen::known`]).
#[derive(Clone, Copy, Debug)]
enum Known {
    /// The constant.
    Const(i64),
    /// `base + offset`, `base` of no known form.
    Offset(Value, i64),
}

/// What [`Gen::emit_body`] does with one body instruction at a position where some values are
/// constants ([`Gen::fold_plan`]).
#[derive(Clone, Debug)]
enum Fold {
    /// Emit it.
    Emit,
    /// Nothing live reads it: emit nothing.
    Skip,
    /// Its value is these constants, one per lane.
    Constant(Vec<Scalar>),
    /// A select whose condition is the same constant in every lane: its value is this slot's.
    Alias(SlotId),
    /// A gather whose index is a constant in every lane: a load of these elements (already
    /// clamped), one per lane.
    GatherAt(Vec<usize>),
    /// A gather whose index is a row's offset (this value, of a known range) plus a constant
    /// per lane, inside the buffer at every row: a load of these elements past the offset.
    GatherPast(Value, Vec<i64>),
}

/// The pure operations [`Gen::memo`] shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Pure {
    AddImm,
    Scale,
    Add,
    StackAddr,
    Splat,
}

/// One step of a tiled elementwise body, run over a whole tile before the next begins.
enum Segment {
    /// Body instructions `insts`, vectorised over the tile. `loads` are the values it reads from
    /// staging buffers, as `(reading instruction, defining body index, slot)`, each loaded right
    /// before the instruction unless that slot already holds it: a value can be staged out of
    /// the body's order (a `sin` computed by an earlier `cos`'s `sincos` call), so two staged
    /// values may share a slot. Every value it defines that a later segment reads is stored to
    /// its staging buffer right after its instruction.
    Ops {
        insts: Vec<usize>,
        loads: Vec<(usize, usize, SlotId)>,
    },
    /// A tile routine from the values `srcs` (one per argument) into the staging buffers of
    /// `dsts` (the body index of the instruction of each result: two for `sincos`, which a
    /// `sin` and a `cos` of one value pair into). `src_accesses` / `dst_accesses`: the routine
    /// reads an argument straight from a program input (its load is contiguous) or writes a
    /// result straight into a program output (its only use is a contiguous store), saving a
    /// staging copy; caller-supplied inputs and outputs never overlap.
    Call {
        routine: AotFn,
        srcs: Vec<TileSrc>,
        dsts: Vec<usize>,
        src_accesses: Vec<Option<usize>>,
        dst_accesses: Vec<Option<usize>>,
    },
}

/// Where an ops segment runs ([`Gen::emit_segment`]).
#[derive(Clone, Copy, Debug)]
enum SegmentAt {
    /// Element `j` of the tile at row position `at`: position `at + j`, staged cell `j`.
    Tile { at: Value, j: Value },
    /// A point of a reduction with its outputs in lanes: loop position `pos` (the group's first
    /// output), staged cells from `cell` on (one per lane).
    Lanes { pos: Value, cell: Value },
}

/// The reduced rows of a reduction with its outputs in lanes ([`Gen::emit_across_tiles`]).
struct AcrossRow<'a> {
    /// Bytes each access advances per point of the reduced row.
    row_steps: &'a [i64],
    /// Points in the reduced row.
    inner: usize,
    /// Outputs in a row of outputs.
    cols: usize,
    /// Points each output reduces (a mean divides by it).
    reduced_numel: usize,
}

/// An argument of a tile routine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TileSrc {
    /// A value computed in the body, by the instruction at this index.
    Body(usize),
    /// A preamble value (loop-invariant: `pow(x, 1.5)`'s exponent), which the routine reads from
    /// a buffer filled with it once per call, before the loops.
    Invariant(SlotId),
}

/// The tiled form of an elementwise body (or of a reduction's points): its segments, the staging
/// buffer (one per value that crosses a segment boundary or is reduced, `TILE` cells of `cell`
/// bytes) of each staged value, and the buffer each invariant routine argument is broadcast
/// into.
struct TilePlan {
    segments: Vec<Segment>,
    staged: HashMap<usize, (StackSlot, u32)>,
    invariant: Vec<(SlotId, StackSlot, u32)>,
    /// For a reduction: the staged value (its defining body index) each `Reduce` of the body
    /// folds, in body order; the reduction pass after a tile's segments reads them.
    reduced: Vec<usize>,
}

/// The staging buffers of a tile plan: each buffer's cell size in bytes (a buffer holds `TILE`
/// cells) and the buffer of each staged value (its defining body index).
struct StagingBuffers {
    cells: Vec<u32>,
    of_def: HashMap<usize, usize>,
}

/// Assigns the staged values of `segments` (with their cell sizes, `cells`) to staging buffers
/// by liveness: a value holds its buffer from the segment that defines it to the last segment
/// that reads it (to the end for the `reduced` values, which the reduction pass after the
/// segments reads), and a buffer freed by the end of one segment serves a value of the same cell
/// size defined in a later one. A segment never writes a buffer it reads (its ops segments'
/// last pass recomputes a few elements from their inputs), so a buffer is reused only by a value
/// defined strictly after the last read of its previous value. A chain of routines stages two
/// buffers, not one per value; the number of buffers is the most values live across a segment
/// boundary.
fn staging_buffers(segments: &[Segment], cells: &HashMap<usize, u32>, reduced: &[usize]) -> StagingBuffers {
    let end = segments.len();
    let mut last_read: HashMap<usize, usize> = HashMap::with_capacity(cells.len());
    for (k, segment) in segments.iter().enumerate() {
        let reads: Vec<usize> = match segment {
            Segment::Ops { loads, .. } => loads.iter().map(|&(_, def, _)| def).collect(),
            Segment::Call {
                srcs, src_accesses, ..
            } => srcs
                .iter()
                .zip(src_accesses)
                .filter_map(|(src, access)| match (src, access) {
                    (TileSrc::Body(def), None) => Some(*def),
                    _ => None,
                })
                .collect(),
        };
        for def in reads {
            last_read.insert(def, k);
        }
    }
    for &def in reduced {
        last_read.insert(def, end);
    }
    let mut buffers = StagingBuffers {
        cells: Vec::new(),
        of_def: HashMap::with_capacity(cells.len()),
    };
    // Free buffers, and the buffers each segment frees when it ends.
    let mut free: Vec<usize> = Vec::new();
    let mut freed_after: Vec<Vec<usize>> = vec![Vec::new(); end + 1];
    let take = |buffers: &mut StagingBuffers, free: &mut Vec<usize>, cell: u32| {
        let reused = free
            .iter()
            .enumerate()
            .filter(|&(_, &buffer)| buffers.cells[buffer] == cell)
            .min_by_key(|&(_, &buffer)| buffer)
            .map(|(at, _)| at);
        match reused {
            Some(at) => free.swap_remove(at),
            None => {
                buffers.cells.push(cell);
                buffers.cells.len() - 1
            }
        }
    };
    for (k, segment) in segments.iter().enumerate() {
        let defs: &[usize] = match segment {
            Segment::Ops { insts, .. } => insts,
            Segment::Call { dsts, .. } => dsts,
        };
        for &def in defs {
            let Some(&cell) = cells.get(&def) else { continue };
            if buffers.of_def.contains_key(&def) {
                continue;
            }
            let buffer = take(&mut buffers, &mut free, cell);
            buffers.of_def.insert(def, buffer);
            let last = last_read.get(&def).copied().unwrap_or(k).max(k);
            freed_after[last].push(buffer);
        }
        free.append(&mut freed_after[k]);
    }
    // A staged value no segment defines (none should be) keeps a buffer of its own.
    let mut orphans: Vec<usize> = cells
        .keys()
        .copied()
        .filter(|def| !buffers.of_def.contains_key(def))
        .collect();
    orphans.sort_unstable();
    for def in orphans {
        buffers.cells.push(cells[&def]);
        buffers.of_def.insert(def, buffers.cells.len() - 1);
    }
    buffers
}

impl<'k> Gen<'_, 'k> {
    fn kernel(&self) -> &'k LirKernel {
        self.info.kernel
    }

    fn slot_dtype(&self, slot: SlotId) -> Result<DType, BackendError> {
        self.kernel()
            .slot_dtype(slot)
            .ok_or_else(|| internal(format!("undeclared slot {slot}")))
    }

    fn emit(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        table: Value,
        lo: Value,
        hi: Value,
    ) -> Result<KernelShape, BackendError> {
        let kernel = self.kernel();
        // Buffer bases, loaded once.
        self.bases = vec![None; self.info.buffer_dtypes.len()];
        let mut used: Vec<BufId> = Vec::new();
        for inst in kernel.preamble.iter().chain(&kernel.body) {
            if let Some(buf) = inst.buf()
                && !used.contains(&buf)
            {
                used.push(buf);
            }
        }
        for buf in used {
            let base = match (
                self.literal_bases.get(buf.index()).copied().flatten(),
                self.table_entries.get(buf.index()).copied().flatten(),
            ) {
                (Some(data), _) => b.ins().symbol_value(self.ptr, data),
                (None, Some(entry)) => {
                    let offset = i32::try_from(entry * 8).map_err(|_| internal("too many buffers"))?;
                    b.ins().load(self.ptr, mem().with_readonly(), table, offset)
                }
                (None, None) => return Err(internal(format!("no table entry for {buf}"))),
            };
            if let Some(slot) = self.bases.get_mut(buf.index()) {
                *slot = Some(base);
            }
        }
        // The preamble, once, in scalar form.
        self.pre_scalar = vec![None; kernel.slots.len()];
        self.pre_const = vec![None; kernel.slots.len()];
        for inst in &kernel.preamble {
            if let Some(dst) = inst.dst()
                && let Some(c) = self.pre_const.get_mut(dst.index())
            {
                *c = match inst {
                    Inst::Const { value, .. } if value.dtype().is_float() => Some(value.to_f64()),
                    _ => None,
                };
            }
            let mut slots = self.pre_scalar.clone();
            self.emit_inst(b, 1, inst, None, &mut slots, &[], None, &mut Vec::new())?;
            self.pre_scalar = slots;
        }
        let rank = kernel.dims.len();
        if let Some(order) = kernel.scan {
            return self.emit_scan(b, lo, hi, order);
        }
        let reduce_dims = kernel.reduce_dims.min(rank);
        let sched = u8::try_from(kernel.schedule.vector_width).unwrap_or(1);
        let dtypes = kernel
            .slots
            .iter()
            .copied()
            .chain(self.info.accesses.iter().map(|a| a.dtype));
        self.width = if matches!(sched, 2 | 4) && vectorizable(dtypes, sched) {
            sched
        } else {
            1
        };
        let has_reduce = kernel.body.iter().any(|i| matches!(i, Inst::Reduce { .. }));
        // One accumulator per output and too few outputs along the innermost kept dim to fill a
        // vector (a 3×3 `f32` product, a 3-vector's norm): the outputs run one at a time, with
        // their accumulators in registers, rather than through a one-lane stack partial.
        self.point_width = 1;
        let inner = kernel.dims.last().copied().unwrap_or(1);
        let routines = self.imports.aot.is_some() && self.body_has_routines()?;
        // Outputs in lanes run their routines in tiles where a group's whole rows fit in one
        // (one reduced dim); other rows with routines run one output at a time (below), so that
        // every transcendental of a kernel has the routines' bits.
        let lanes_fit = reduce_dims == 1 && inner * usize::from(self.width) <= TILE;
        let in_lanes = has_reduce && self.outputs_in_lanes(reduce_dims);
        let one_at_a_time =
            has_reduce && kernel.schedule.reduce_lanes <= 1 && (!in_lanes || (routines && !lanes_fit));
        // Unless its rows hold routines: then each row runs in tiles, its staged values folded
        // in row order into one accumulator (the routines' bits, as in the elementwise kernel;
        // `f32` sum of `sin x * cos x` over 12 points 132 → 64 ns, `f64` `tanh` over 6 103 → 64).
        let row_tiles = one_at_a_time && reduce_dims > 0 && routines && inner >= MIN_TILED_ELEMS;
        if one_at_a_time && !row_tiles {
            // A reduction to one value evaluates its points a vector at a time and adds the
            // lanes in order (see `Gen::emit_reduction_across`).
            self.point_width = self.width;
            self.width = 1;
        }
        self.hoist_splats(b);
        self.inner_axis = if rank == 0 || (has_reduce && reduce_dims == 0) {
            None
        } else {
            Some(rank - 1)
        };
        // Only the innermost loop runs in tiles, so a short one never needs the plan (nor its
        // staging buffers). A reduction runs its innermost reduced rows in tiles when it keeps
        // partial accumulators (`reduce_lanes` > 1, long rows) or runs its outputs one at a time
        // (above); outputs in lanes have their own plan (below).
        let tiled_reduction = (kernel.schedule.reduce_lanes > 1 && reduce_dims > 0) || row_tiles;
        if self.imports.aot.is_some() && inner >= MIN_TILED_ELEMS && (!has_reduce || tiled_reduction) {
            self.plan_tiles(b, inner)?;
        }
        if row_tiles && self.tiles.is_none() {
            // A row shorter than a vector with ops around its routine: scalar code, which calls
            // the routines one element at a time.
            self.width = 1;
        }
        self.rows_in_tiles = row_tiles && self.tiles.is_some();
        // Outputs in lanes, one reduced dim: a group of `w` outputs stages its values for the
        // whole row, `w` lanes per point, and the routines run over all of them
        // (`Gen::emit_across_tiles`).
        if self.imports.aot.is_some() && has_reduce && in_lanes && !one_at_a_time && lanes_fit {
            self.tiles = self.tile_plan(b, false)?;
            if let Some(plan) = self.tiles.take() {
                self.fill_invariant_buffers(b, &plan)?;
                self.tiles = Some(plan);
            }
        }
        if has_reduce {
            self.emit_reduction(b, lo, hi, reduce_dims)
        } else {
            self.emit_elementwise(b, lo, hi)
        }
    }

    /// Sets `tiles` (and `segment_unroll`) for innermost rows of `inner` elements, and fills
    /// the invariant routine arguments' buffers, once per call (not per row).
    fn plan_tiles(&mut self, b: &mut FunctionBuilder<'_>, inner: usize) -> Result<(), BackendError> {
        self.tiles = self.tile_plan(b, true)?;
        // An ops segment runs whole passes of `segment_unroll` vectors and a tile must hold one:
        // rows shorter than `SEGMENT_UNROLL` vectors pass one vector at a time, and rows shorter
        // than a vector keep the inline code.
        let w = usize::from(self.width);
        self.segment_unroll = if inner >= w * SEGMENT_UNROLL as usize {
            SEGMENT_UNROLL
        } else {
            1
        };
        if inner < w
            && self
                .tiles
                .as_ref()
                .is_some_and(|plan| plan.segments.iter().any(|s| matches!(s, Segment::Ops { .. })))
        {
            self.tiles = None;
        }
        if let Some(plan) = self.tiles.take() {
            self.fill_invariant_buffers(b, &plan)?;
            self.tiles = Some(plan);
        }
        Ok(())
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

    fn base(&self, buf: BufId) -> Result<Value, BackendError> {
        self.bases
            .get(buf.index())
            .copied()
            .flatten()
            .ok_or_else(|| internal(format!("no base for {buf}")))
    }

    /// Element offsets (per access) of the point whose index over `dims` (the loop dims
    /// `first..first + dims.len()`) is `linear`.
    fn offsets(
        &self,
        b: &mut FunctionBuilder<'_>,
        linear: Value,
        first: usize,
        dims: &[usize],
        start: &[Value],
    ) -> Vec<Value> {
        let mut offs = start.to_vec();
        let mut rem = linear;
        // `linear` is below the product of `dims`: below 2^32, a division by a constant is a
        // multiply-high (Cranelift's mid-end, which would do it, is off).
        let small = dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
            .is_some_and(|n| n <= 1 << 32);
        for d in (0..dims.len()).rev() {
            let size = dims[d] as u64;
            if size == 1 {
                continue;
            }
            let idx = if d == 0 {
                rem
            } else {
                let (quotient, remainder) = div_rem_const(b, rem, size, small);
                rem = quotient;
                remainder
            };
            // Shared within the block (`Gen::memo`): accesses with the same strides (the
            // loads of one row at several offsets) get one offset value, so one pointer.
            for (k, access) in self.info.accesses.iter().enumerate() {
                let stride = access.strides.get(first + d).copied().unwrap_or(0) as i64;
                if stride != 0 {
                    let step = self.scale(b, idx, stride);
                    offs[k] = self.add(b, offs[k], step);
                }
            }
        }
        offs
    }

    /// A kernel with scans: one unit per row of the innermost (scanned) dim, each row run point
    /// by point in the kernel's scan order with the scans' running accumulators carried from
    /// point to point in registers, starting at their ops' identities, so every scan folds
    /// sequentially, as the interpreters do: the same bits. A kernel of a few points (at most
    /// [`STRAIGHT_BUDGET`] instruction-equivalents) is written out without loops, as small
    /// elementwise kernels are.
    fn emit_scan(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        order: ScanOrder,
    ) -> Result<KernelShape, BackendError> {
        let dims = self.kernel().dims.clone();
        let Some((&inner, outer)) = dims.split_last() else {
            return Err(internal("a scan in a kernel without loop dims"));
        };
        let outer = outer.to_vec();
        let rows: usize = outer.iter().product();
        let scans = self
            .kernel()
            .body
            .iter()
            .enumerate()
            .filter_map(|(i, inst)| match inst {
                Inst::Scan { op, dst, .. } => Some((i, op.reduce_op(), *dst)),
                _ => None,
            })
            .map(|(i, op, dst)| Ok((i, op, self.slot_dtype(dst)?)))
            .collect::<Result<Vec<_>, BackendError>>()?;
        self.width = 1;
        self.point_width = 1;
        self.inner_axis = Some(dims.len() - 1);
        // The position of step `k` of a row in the scan's order.
        let position = |k: usize| match order {
            ScanOrder::Forward => k,
            ScanOrder::Reverse => inner - 1 - k,
        };
        let work = rows.saturating_mul(inner).saturating_mul(self.body_work());
        if work <= STRAIGHT_BUDGET {
            self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, _, _| {
                for row in 0..rows {
                    let ptrs = g.row_pointers(b, row, &outer)?;
                    g.hoist_row_indices(b, &ptrs)?;
                    let accs = g.scan_identities(b, &scans, 1, 1)?;
                    g.scan_accs = scans.iter().map(|s| s.0).zip(accs).collect();
                    for k in 0..inner {
                        let at = g.const_i64(b, position(k) as i64);
                        g.emit_body(b, 1, at, &ptrs, &mut Vec::new())?;
                    }
                    g.row_indices.clear();
                }
                Ok(Vec::new())
            })?;
            self.finish(b);
            let points = (rows * inner) as u64;
            return Ok(KernelShape::new(1, points, 1, self.min_points_per_thread()));
        }
        let zero = b.ins().iconst(types::I64, 0);
        let zeros = vec![zero; self.info.accesses.len()];
        let last = i64::try_from(inner).map_err(|_| internal("a row beyond i64"))? - 1;
        if let Some(shape) = self.emit_scan_across_rows(b, lo, hi, order, &scans)? {
            return Ok(shape);
        }
        self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, row, _| {
            let offs = g.offsets(b, row, 0, &outer, &zeros);
            let ptrs = g.pointers(b, &offs)?;
            g.hoist_row_indices(b, &ptrs)?;
            let accs = g.scan_identities(b, &scans, 1, 1)?;
            g.emit_scan_row(b, order, last, SCAN_UNROLL, &accs, &mut |g, b, at, accs| {
                g.scan_accs = scans.iter().map(|s| s.0).zip(accs.iter().copied()).collect();
                g.emit_body(b, 1, at, &ptrs, &mut Vec::new())?;
                Ok(g.scan_accs.iter().map(|&(_, v)| v).collect())
            })?;
            g.row_indices.clear();
            Ok(Vec::new())
        })?;
        self.finish(b);
        Ok(KernelShape::new(
            rows as u64,
            inner as u64,
            1,
            self.min_points_per_thread(),
        ))
    }

    /// The starting accumulators of `copies` sets of the `scans` (body index, op, dtype), each
    /// its op's identity at width `w`.
    fn scan_identities(
        &self,
        b: &mut FunctionBuilder<'_>,
        scans: &[(usize, ReduceOp, DType)],
        w: u8,
        copies: usize,
    ) -> Result<Vec<Value>, BackendError> {
        let mut accs = Vec::with_capacity(copies * scans.len());
        for _ in 0..copies {
            for &(_, op, dtype) in scans {
                let value = identity(op, dtype)?;
                let imports = self.imports;
                accs.push(
                    Emitter {
                        b: &mut *b,
                        w,
                        imports,
                    }
                    .constant(value),
                );
            }
        }
        Ok(accs)
    }

    /// The steps of one row of a kernel with scans, `last + 1` points in `order`: `step` at
    /// each point's position along the row, `unroll` points per pass of the loop and then one
    /// at a time, carrying the scans' accumulators `accs` from point to point.
    fn emit_scan_row(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        order: ScanOrder,
        last: i64,
        unroll: i64,
        accs: &[Value],
        step: &mut LoopBody<'_, Self>,
    ) -> Result<(), BackendError> {
        let mut steps = |g: &mut Self, b: &mut FunctionBuilder<'_>, k: Value, accs: &[Value], count: i64| {
            let mut accs = accs.to_vec();
            for j in 0..count {
                let at = match order {
                    ScanOrder::Forward => g.add_imm(b, k, j),
                    ScanOrder::Reverse => {
                        let from = b.ins().iconst(types::I64, last - j);
                        b.ins().isub(from, k)
                    }
                };
                accs = step(g, b, at, &accs)?;
            }
            Ok(accs)
        };
        let start = b.ins().iconst(types::I64, 0);
        let end = b.ins().iconst(types::I64, last + 1);
        let (k, accs) = self.emit_loop(b, start, end, unroll, accs, &mut |g, b, k, accs| {
            steps(g, b, k, accs, unroll)
        })?;
        if unroll > 1 {
            self.emit_loop(b, k, end, 1, &accs, &mut |g, b, k, accs| steps(g, b, k, accs, 1))?;
        }
        Ok(())
    }

    /// A kernel with scans over rows `[R, N]` (at least a vector of rows): `w` rows at a time,
    /// one vector lane per row, each scan's accumulator a vector carried from step to step
    /// along the scanned dim, [`SCAN_ROW_VECTORS`] vectors of rows together; the rows past the
    /// last whole vector re-run the last `w` (the same values are stored again). Where
    /// neighbouring rows lie at neighbouring elements (a time-major batch scanned along its
    /// time axis) each step is a vector load, the body and a vector store per access; rows
    /// that lie apart (a batch-major one) gather their lanes, which still beats folding one
    /// row at a time: the lanes' dependency chains run side by side (1024 rows of 200 `f32`
    /// steps 0.6–0.8× a Rust loop's time, one row at a time about 1.05×). With several
    /// leading dims (`[L0, .., Lk, N]`, rows that do not coalesce, as a batch of trajectories
    /// scanned along time, `[B, T, D]` lowered to `[B, D, N = T]`) the lanes run along the
    /// first or the last of them (at least a vector long; one along which every access is
    /// contiguous when there is one), one unit of work per point of the others. `None`, and
    /// nothing emitted, for other kernels.
    fn emit_scan_across_rows(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        order: ScanOrder,
        scans: &[(usize, ReduceOp, DType)],
    ) -> Result<Option<KernelShape>, BackendError> {
        let kernel = self.kernel();
        let Some((&inner, leading)) = kernel.dims.split_last() else {
            return Ok(None);
        };
        let leading = leading.to_vec();
        let rank = leading.len() + 1;
        let w = u8::try_from(kernel.schedule.vector_width).unwrap_or(1);
        let dtypes = kernel
            .slots
            .iter()
            .copied()
            .chain(self.info.accesses.iter().map(|a| a.dtype));
        if leading.is_empty() || !matches!(w, 2 | 4) || !vectorizable(dtypes, w) {
            return Ok(None);
        }
        // The leading dim the lanes run along: the only one, or the first or the last (so the
        // others lie side by side, one unit's offsets unravelled over them), preferring one
        // along which every access is contiguous (or constant), then the longer.
        let contiguous = |j: usize| {
            self.info
                .accesses
                .iter()
                .all(|a| a.strides.get(j).copied().unwrap_or(0) <= 1)
        };
        let lane_dim = [0, leading.len() - 1]
            .into_iter()
            .filter(|&j| leading[j] >= usize::from(w))
            .max_by_key(|&j| (contiguous(j), leading[j], j == 0));
        let Some(lane_dim) = lane_dim else {
            return Ok(None);
        };
        let lanes = leading[lane_dim];
        let others: Vec<usize> = leading
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != lane_dim)
            .map(|(_, &n)| n)
            .collect();
        let first_other = usize::from(lane_dim == 0);
        self.width = w;
        self.inner_axis = Some(lane_dim);
        self.hoist_splats(b);
        let zero = b.ins().iconst(types::I64, 0);
        let zeros = vec![zero; self.info.accesses.len()];
        // Bytes (an index: counts) each access advances per step of the scanned dim.
        let step_bytes: Vec<i64> = self
            .info
            .accesses
            .iter()
            .map(|a| (a.strides.get(rank - 1).copied().unwrap_or(0) * a.elem_bytes()) as i64)
            .collect();
        let last = i64::try_from(inner).map_err(|_| internal("a row beyond i64"))? - 1;
        // `vectors` vectors of rows from `row` on (along the lane dim, from the pointers
        // `origin`), scanned together: their accumulators interleave, so the steps of
        // neighbouring rows overlap and each step of an access reads and writes `vectors`
        // neighbouring vectors (a time-major batch of `f32` rows reads a cache line per step
        // for four).
        let block =
            |g: &mut Self, b: &mut FunctionBuilder<'_>, origin: &[Value], row: Value, vectors: usize| {
                let accs = g.scan_identities(b, scans, w, vectors)?;
                let rows_at = (0..vectors)
                    .map(|v| g.add_imm(b, row, (v * usize::from(w)) as i64))
                    .collect::<Vec<_>>();
                // A pass of several vectors repays its loop's overhead in fewer steps.
                let unroll = (SCAN_UNROLL / vectors as i64).max(1);
                g.emit_scan_row(b, order, last, unroll, &accs, &mut |g, b, at, accs| {
                    let mut next = accs.to_vec();
                    let ptrs = origin
                        .iter()
                        .zip(&step_bytes)
                        .map(|(&p, &step)| match step {
                            0 => p,
                            _ => {
                                let moved = g.scale(b, at, step);
                                g.add(b, p, moved)
                            }
                        })
                        .collect::<Vec<_>>();
                    g.hoist_row_indices(b, &ptrs)?;
                    for (v, &row_at) in rows_at.iter().enumerate() {
                        let mine = &mut next[v * scans.len()..(v + 1) * scans.len()];
                        g.scan_accs = scans.iter().map(|s| s.0).zip(mine.iter().copied()).collect();
                        g.emit_body(b, w, row_at, &ptrs, &mut Vec::new())?;
                        for (slot, &(_, acc)) in mine.iter_mut().zip(&g.scan_accs) {
                            *slot = acc;
                        }
                    }
                    g.row_indices.clear();
                    Ok(next)
                })
            };
        // Rows `start..end` of the lane dim from `origin`: groups of vectors, then single
        // vectors, the ragged end re-running the last whole one.
        let rows = |g: &mut Self, b: &mut FunctionBuilder<'_>, origin: &[Value], start: Value, end: Value| {
            let group = SCAN_ROW_VECTORS * usize::from(w);
            let (at, _) = g.emit_loop(b, start, end, group as i64, &[], &mut |g, b, row, _| {
                block(g, b, origin, row, SCAN_ROW_VECTORS)?;
                Ok(Vec::new())
            })?;
            g.emit_vector_positions(b, at, end, &mut |g, b, row| block(g, b, origin, row, 1))
        };
        let min_points = self.min_points_per_thread();
        let shape = if others.is_empty() {
            // One unit per row: a thread's range of rows is at least a vector long.
            let origin = self.pointers(b, &zeros)?;
            rows(self, b, &origin, lo, hi)?;
            KernelShape::new(lanes as u64, inner as u64, w, min_points)
        } else {
            // One unit per point of the other leading dims, each running the whole lane dim.
            let units: usize = others.iter().product();
            let end = b.ins().iconst(types::I64, lanes as i64);
            self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, unit, _| {
                let offs = g.offsets(b, unit, first_other, &others, &zeros);
                let origin = g.pointers(b, &offs)?;
                let start = b.ins().iconst(types::I64, 0);
                rows(g, b, &origin, start, end)?;
                Ok(Vec::new())
            })?;
            KernelShape::new(units as u64, (lanes * inner) as u64, w, min_points)
        };
        self.finish(b);
        Ok(Some(shape))
    }

    /// Elementwise kernels: a vector loop over the innermost dimension plus a scalar tail.
    fn emit_elementwise(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
    ) -> Result<KernelShape, BackendError> {
        let dims = self.kernel().dims.clone();
        let rank = dims.len();
        let (outer, inner) = match dims.split_last() {
            Some((&inner, outer)) => (outer, inner),
            None => (&[][..], 1),
        };
        if let Some(shape) = self.emit_written_out(b, lo, hi, outer, inner)? {
            return Ok(shape);
        }
        if let Some(shape) = self.emit_units_written_out(b, lo, hi, &dims)? {
            return Ok(shape);
        }
        let zero = b.ins().iconst(types::I64, 0);
        let zeros = vec![zero; self.info.accesses.len()];
        let shape = if rank <= 1 {
            let n = dims.first().copied().unwrap_or(1) as u64;
            let ptrs = self.pointers(b, &zeros)?;
            self.hoist_row_indices(b, &ptrs)?;
            self.emit_elementwise_loop(b, lo, hi, n as usize, &ptrs)?;
            self.row_indices.clear();
            KernelShape::new(n, 1, self.width, self.min_points_per_thread())
        } else {
            let inner = dims[rank - 1];
            let rows: usize = dims[..rank - 1].iter().product();
            let outer_dims = dims[..rank - 1].to_vec();
            let inner_count = b.ins().iconst(types::I64, inner as i64);
            self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, row, _| {
                let offs = g.offsets(b, row, 0, &outer_dims, &zeros);
                let ptrs = g.pointers(b, &offs)?;
                let zero = b.ins().iconst(types::I64, 0);
                g.hoist_row_indices(b, &ptrs)?;
                g.emit_elementwise_loop(b, zero, inner_count, inner, &ptrs)?;
                g.row_indices.clear();
                Ok(Vec::new())
            })?;
            KernelShape::new(
                rows as u64,
                inner as u64,
                self.width,
                self.min_points_per_thread(),
            )
        };
        self.finish(b);
        Ok(shape)
    }

    /// An elementwise kernel of rows of `inner` points, one per point of the loop dims of
    /// extents `outer` (none: one row), written out without loops when it fits
    /// [`STRAIGHT_BUDGET`] (`None`, and nothing emitted, otherwise): one unit of work (so the
    /// pool never splits it; it has too few points to be split anyway), row by row at constant
    /// pointers, position by position. Ends the function.
    fn emit_written_out(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        outer: &[usize],
        inner: usize,
    ) -> Result<Option<KernelShape>, BackendError> {
        let rows: usize = outer.iter().product();
        let work = rows
            .saturating_mul(row_position_count(inner, self.width))
            .saturating_mul(self.body_work());
        if self.tiles.is_some() || work > STRAIGHT_BUDGET {
            return Ok(None);
        }
        let positions = row_positions(inner, self.width);
        self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, _, _| {
            for row in 0..rows {
                let ptrs = g.row_pointers(b, row, outer)?;
                g.emit_written_row(b, &ptrs, &positions)?;
            }
            Ok(Vec::new())
        })?;
        self.finish(b);
        let points = (rows * inner) as u64;
        Ok(Some(KernelShape::new(
            1,
            points,
            self.width,
            self.min_points_per_thread(),
        )))
    }

    /// The body written out at each `(position, width)` of one row whose pointers are `ptrs`.
    fn emit_written_row(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        ptrs: &[Value],
        positions: &[(usize, u8)],
    ) -> Result<(), BackendError> {
        self.hoist_row_indices(b, ptrs)?;
        for &(at, w) in positions {
            let at = self.const_i64(b, at as i64);
            self.emit_body(b, w, at, ptrs, &mut Vec::new())?;
        }
        self.row_indices.clear();
        Ok(())
    }

    /// An elementwise kernel of two or more loop dims whose trailing dims make a small block
    /// (at most [`UNIT_MAX_POINTS`] points and [`UNIT_BUDGET`] body work written out) repeated
    /// over the leading dims (the units: a batch of small matrices), as one loop over the
    /// units with each unit's block written out: the unit's pointers once per iteration, then
    /// row by row at constant displacements from them, position by position (`None`, and
    /// nothing emitted, when no split fits or the kernel runs in tiles). The leading dims are
    /// the fewest whose block fits. A row loop of two to four points per row spends more on
    /// its index arithmetic and loop control than on the body. Ends the function.
    fn emit_units_written_out(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        dims: &[usize],
    ) -> Result<Option<KernelShape>, BackendError> {
        let rank = dims.len();
        if self.tiles.is_some() || rank < 2 {
            return Ok(None);
        }
        let inner = dims[rank - 1];
        let n_positions = row_position_count(inner, self.width);
        let body = self.body_work();
        let Some(lead) = (1..rank).find(|&lead| {
            let rows: usize = dims[lead..rank - 1].iter().product();
            rows.saturating_mul(inner) <= UNIT_MAX_POINTS
                && rows.saturating_mul(n_positions).saturating_mul(body) <= UNIT_BUDGET
        }) else {
            return Ok(None);
        };
        let positions = row_positions(inner, self.width);
        let units: usize = dims[..lead].iter().product();
        let block = &dims[lead..rank - 1];
        let rows: usize = block.iter().product();
        if units < 2 || rows * inner == 0 {
            return Ok(None);
        }
        let zero = self.const_i64(b, 0);
        let zeros = vec![zero; self.info.accesses.len()];
        let leading = dims[..lead].to_vec();
        let block = block.to_vec();
        self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, unit, _| {
            let offs = g.offsets(b, unit, 0, &leading, &zeros);
            let unit_ptrs = g.pointers(b, &offs)?;
            // An index's offset at a unit lies between 0 and its value at the last unit.
            g.index_ranges.clear();
            for (access, &offset) in g.info.accesses.iter().zip(&unit_ptrs) {
                if access.buf.is_none() {
                    let last: usize = leading
                        .iter()
                        .zip(&access.strides)
                        .map(|(&n, &stride)| n.saturating_sub(1) * stride)
                        .sum();
                    if let Ok(last) = i64::try_from(last) {
                        g.index_ranges.insert(offset, last);
                    }
                }
            }
            for row in 0..rows {
                let ptrs = g.displaced_pointers(b, &unit_ptrs, row, lead, &block);
                g.emit_written_row(b, &ptrs, &positions)?;
            }
            Ok(Vec::new())
        })?;
        self.finish(b);
        Ok(Some(KernelShape::new(
            units as u64,
            (rows * inner) as u64,
            self.width,
            self.min_points_per_thread(),
        )))
    }

    /// The innermost loop of an elementwise kernel over `start..end` (at least `n_static` long
    /// when the whole range is one call's): vector positions ([`Gen::emit_vector_positions`]),
    /// first four vectors at a time for short bodies. Shorter ranges run scalar code only.
    fn emit_elementwise_loop(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        n_static: usize,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        let w = self.width;
        if self.tiles.is_some() && n_static >= MIN_TILED_ELEMS {
            return self.emit_tiled_loop(b, start, end, ptrs);
        }
        if w == 1 || n_static < usize::from(w) {
            self.emit_loop(b, start, end, 1, &[], &mut |g, b, at, _| {
                g.emit_body(b, 1, at, ptrs, &mut Vec::new())?;
                Ok(Vec::new())
            })?;
            return Ok(());
        }
        // Column indices advance by a vector add per step (see `Gen::col_indices`).
        let columns: Vec<(usize, DType, usize)> = (0..self.info.accesses.len())
            .filter(|&k| {
                self.info.accesses[k].buf.is_none()
                    && self.inner_stride(k) != 0
                    && !self.row_indices.contains_key(&k)
            })
            .map(|k| (k, self.info.accesses[k].dtype, self.inner_stride(k)))
            .collect();
        let mut fresh = |g: &mut Self, b: &mut FunctionBuilder<'_>, at: Value| {
            g.col_indices.clear();
            columns
                .iter()
                .map(|&(k, dtype, _)| g.index(b, w, k, at, ptrs, dtype))
                .collect::<Result<Vec<_>, _>>()
        };
        // The column indices `points` positions on.
        let advance = |g: &mut Self, b: &mut FunctionBuilder<'_>, values: &[Value], points: usize| {
            columns
                .iter()
                .zip(values)
                .map(|(&(_, dtype, stride), &v)| {
                    let step = rfx_ir::semantics::index_value(points * stride, dtype)
                        .ok_or_else(|| internal(format!("index of dtype {dtype}")))?;
                    let mut e = Emitter {
                        b: &mut *b,
                        w,
                        imports: g.imports,
                    };
                    let step = e.constant(step);
                    Ok(if dtype == DType::I32 {
                        b.ins().iadd(v, step)
                    } else {
                        b.ins().fadd(v, step)
                    })
                })
                .collect::<Result<Vec<_>, BackendError>>()
        };
        let set = |g: &mut Self, values: &[Value]| {
            g.col_indices = columns.iter().zip(values).map(|(&(k, ..), &v)| (k, v)).collect();
        };
        let mut start = start;
        let mut carried = fresh(self, b, start)?;
        // Short bodies (memory-bound kernels) first run four vectors per iteration: the loop
        // overhead would otherwise rival the work, and the loads of four vectors overlap.
        if self.kernel().body.len() <= UNROLL_MAX_BODY && n_static >= UNROLL * usize::from(w) {
            let step = (UNROLL * usize::from(w)) as i64;
            let (after, last) = self.emit_loop(b, start, end, step, &carried, &mut |g, b, at, values| {
                for k in 0..UNROLL {
                    let pos = if k == 0 {
                        set(g, values);
                        at
                    } else {
                        let moved = advance(g, b, values, k * usize::from(w))?;
                        set(g, &moved);
                        b.ins().iadd_imm_s(at, (k * usize::from(w)) as i64)
                    };
                    g.emit_body(b, w, pos, ptrs, &mut Vec::new())?;
                }
                advance(g, b, values, UNROLL * usize::from(w))
            })?;
            start = after;
            carried = last;
        }
        self.emit_vector_positions_carrying(
            b,
            start,
            end,
            &carried,
            &mut |g, b, values: &[Value]| advance(g, b, values, usize::from(w)),
            &mut fresh,
            &mut |g, b, at, values| {
                set(g, values);
                g.emit_body(b, w, at, ptrs, &mut Vec::new())
            },
        )?;
        self.col_indices.clear();
        Ok(())
    }

    /// The tiled plan of this (elementwise) kernel's body, or `None` when no instruction of it is
    /// computed by a tile routine. An op gets a routine when one exists for its op and dtype and
    /// an argument is computed in the body; a binary routine's other argument may be a preamble
    /// value (broadcast into a buffer once per call).
    ///
    /// With `direct`, a routine reads a contiguous program input and writes a contiguous
    /// program output itself; without, every routine argument and result is staged (the
    /// staging layout of a reduction with its outputs in lanes is not the buffers').
    fn tile_plan(&self, b: &mut FunctionBuilder<'_>, direct: bool) -> Result<Option<TilePlan>, BackendError> {
        let kernel = self.kernel();
        let body = &kernel.body;
        // For each instruction, the defining body index of each value it reads (`None`: the
        // preamble's), and the routine computing it.
        let mut current: Vec<Option<usize>> = vec![None; kernel.slots.len()];
        let mut reads: Vec<Vec<(usize, SlotId)>> = Vec::with_capacity(body.len());
        let mut routines: Vec<Option<AotFn>> = Vec::with_capacity(body.len());
        for (i, inst) in body.iter().enumerate() {
            let mut defs = Vec::new();
            for src in inst.srcs() {
                if let Some(def) = current.get(src.index()).copied().flatten() {
                    defs.push((def, src));
                }
            }
            // A routine of values computed per point only (an invariant one is in the preamble).
            let routine = self.routine_of(inst)?.filter(|_| !defs.is_empty());
            reads.push(defs);
            routines.push(routine);
            if let Some(dst) = inst.dst()
                && let Some(def) = current.get_mut(dst.index())
            {
                *def = Some(i);
            }
        }
        if routines.iter().all(Option::is_none) {
            return Ok(None);
        }
        let routine_srcs = |i: usize| -> Vec<TileSrc> {
            body[i]
                .srcs()
                .into_iter()
                .map(|slot| match reads[i].iter().find(|&&(_, s)| s == slot) {
                    Some(&(def, _)) => TileSrc::Body(def),
                    None => TileSrc::Invariant(slot),
                })
                .collect()
        };
        let mut segments = Vec::new();
        let mut segment_of = vec![0usize; body.len()];
        let mut ops = Vec::new();
        let mut reduced = Vec::new();
        for (i, routine) in routines.iter().enumerate() {
            if let Inst::Reduce { src, .. } = &body[i] {
                // Folded after the segments, by the reduction pass, from its value's staging
                // buffer. A reduction of a preamble value, or of a non-float one, keeps the
                // untiled loop.
                let Some(&(def, _)) = reads[i].first() else {
                    return Ok(None);
                };
                if !self.slot_dtype(*src)?.is_float() {
                    return Ok(None);
                }
                segment_of[i] = usize::MAX;
                reduced.push(def);
                continue;
            }
            if let Some(routine) = *routine {
                let srcs = routine_srcs(i);
                // A `sin` and a `cos` of one value share a `sincos` call, where the first of the
                // two is: the second's value is ready there, and later segments read it staged.
                if let Some((pair, part)) = routine.sincos_part() {
                    let partner = segments.iter_mut().enumerate().find(|(_, segment)| {
                        matches!(segment, Segment::Call { routine: r, srcs: s, .. }
                            if r.sincos_part().is_some_and(|(p, other)| p == pair && other != part)
                                && *s == srcs)
                    });
                    if let Some((
                        index,
                        Segment::Call {
                            routine,
                            dsts,
                            dst_accesses,
                            ..
                        },
                    )) = partner
                    {
                        *routine = pair;
                        dsts.insert(part, i);
                        dst_accesses.push(None);
                        segment_of[i] = index;
                        continue;
                    }
                }
                if !ops.is_empty() {
                    segments.push(Segment::Ops {
                        insts: std::mem::take(&mut ops),
                        loads: Vec::new(),
                    });
                }
                segment_of[i] = segments.len();
                segments.push(Segment::Call {
                    routine,
                    src_accesses: vec![None; srcs.len()],
                    srcs,
                    dsts: vec![i],
                    dst_accesses: vec![None],
                });
            } else {
                segment_of[i] = segments.len();
                ops.push(i);
            }
        }
        if !ops.is_empty() {
            segments.push(Segment::Ops {
                insts: ops,
                loads: Vec::new(),
            });
        }
        // Direct routine arguments: a contiguous load of a program input, and a result whose
        // only use is a contiguous store into a program output (of the routine's dtype: a load
        // gives and a store takes its buffer's dtype).
        let contiguous = |i: usize, input: bool, dtype: DType| {
            self.info.access_of.get(i).copied().flatten().filter(|&k| {
                direct && {
                    let access = &self.info.accesses[k];
                    access.dtype == dtype
                        && self.inner_stride(k) == 1
                        && access
                            .buf
                            .and_then(|buf| self.info.buffer_is_input.get(buf.index()).copied().flatten())
                            == Some(input)
                }
            })
        };
        let mut skipped = vec![false; body.len()];
        for segment in &mut segments {
            if let Segment::Call {
                routine,
                srcs,
                dsts,
                src_accesses,
                dst_accesses,
            } = segment
            {
                let dtype = routine.dtype();
                for (src, access) in srcs.iter().zip(src_accesses.iter_mut()) {
                    if let TileSrc::Body(def) = *src
                        && matches!(body[def], Inst::Load { .. })
                    {
                        *access = contiguous(def, true, dtype);
                    }
                }
                for (&dst, dst_access) in dsts.iter().zip(dst_accesses.iter_mut()) {
                    let users: Vec<usize> = (0..body.len())
                        .filter(|&i| reads[i].iter().any(|&(def, _)| def == dst))
                        .collect();
                    if let [user] = users[..]
                        && matches!(body[user], Inst::Store { .. })
                    {
                        *dst_access = contiguous(user, false, dtype);
                        if dst_access.is_some() {
                            skipped[user] = true;
                        }
                    }
                }
            }
        }
        // Values read in a later segment than their own are staged, except a direct routine
        // argument; so are routine results that are not written directly.
        // `(routine instruction, argument definition)` for every argument read directly.
        let direct_src: Vec<(usize, usize)> = segments
            .iter()
            .flat_map(|segment| match segment {
                Segment::Call {
                    srcs,
                    dsts,
                    src_accesses,
                    ..
                } => dsts
                    .iter()
                    .flat_map(|&dst| {
                        srcs.iter()
                            .zip(src_accesses)
                            .filter_map(move |(&src, access)| match (src, access) {
                                (TileSrc::Body(def), Some(_)) => Some((dst, def)),
                                _ => None,
                            })
                    })
                    .collect::<Vec<_>>(),
                Segment::Ops { .. } => Vec::new(),
            })
            .collect();
        let direct_dst: Vec<usize> = segments
            .iter()
            .flat_map(|segment| match segment {
                Segment::Call {
                    dsts, dst_accesses, ..
                } => dsts
                    .iter()
                    .zip(dst_accesses)
                    .filter_map(|(&dst, access)| access.map(|_| dst))
                    .collect(),
                Segment::Ops { .. } => Vec::new(),
            })
            .collect();
        let mut staged_defs: Vec<usize> = Vec::new();
        for (i, defs) in reads.iter().enumerate() {
            if skipped[i] {
                continue;
            }
            for &(def, slot) in defs {
                if segment_of[def] == segment_of[i] || direct_src.contains(&(i, def)) {
                    continue;
                }
                if !staged_defs.contains(&def) {
                    staged_defs.push(def);
                }
                if let Some(Segment::Ops { loads, .. }) = segments.get_mut(segment_of[i]) {
                    loads.push((i, def, slot));
                }
            }
            if routines[i].is_some() && !direct_dst.contains(&i) && !staged_defs.contains(&i) {
                staged_defs.push(i);
            }
        }
        // Drop the stores a routine now does itself, and loads nothing reads any more.
        let read_in_segment = |i: usize, insts: &[usize]| {
            insts
                .iter()
                .any(|&j| reads[j].iter().any(|&(def, _)| def == i) && !skipped[j])
        };
        for segment in &mut segments {
            if let Segment::Ops { insts, .. } = segment {
                let keep: Vec<usize> = insts
                    .iter()
                    .copied()
                    .filter(|&i| {
                        let dead_load = matches!(body[i], Inst::Load { .. })
                            && !staged_defs.contains(&i)
                            && !read_in_segment(i, insts);
                        !skipped[i] && !dead_load
                    })
                    .collect();
                *insts = keep;
            }
        }
        segments.retain(|segment| !matches!(segment, Segment::Ops { insts, .. } if insts.is_empty()));
        let mut cells = HashMap::with_capacity(staged_defs.len());
        for &def in &staged_defs {
            let slot = body[def]
                .dst()
                .ok_or_else(|| internal("staged value without a slot"))?;
            cells.insert(
                def,
                cl_type(self.slot_dtype(slot)?, self.width).lane_type().bytes(),
            );
        }
        let mut invariant_cells: Vec<(SlotId, u32)> = Vec::new();
        for segment in &segments {
            if let Segment::Call { srcs, .. } = segment {
                for src in srcs {
                    if let TileSrc::Invariant(slot) = *src
                        && !invariant_cells.iter().any(|&(s, _)| s == slot)
                    {
                        invariant_cells.push((
                            slot,
                            cl_type(self.slot_dtype(slot)?, self.width).lane_type().bytes(),
                        ));
                    }
                }
            }
        }
        let buffers = staging_buffers(&segments, &cells, &reduced);
        let tile_bytes = |cell: u32| u64::from(cell) * TILE as u64;
        let staging_bytes: u64 = buffers.cells.iter().map(|&cell| tile_bytes(cell)).sum::<u64>()
            + invariant_cells
                .iter()
                .map(|&(_, cell)| tile_bytes(cell))
                .sum::<u64>();
        if staging_bytes > u64::from(TILE_STAGING_MAX) {
            // More values live across the segments than the staging budget holds: the untiled
            // code, whose frame holds only its spills, runs the kernel instead.
            return Ok(None);
        }
        // 32-byte alignment: the tile routines read and write whole AVX2 vectors.
        let stacks: Vec<StackSlot> = buffers
            .cells
            .iter()
            .map(|&cell| {
                b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    cell * TILE as u32,
                    5,
                ))
            })
            .collect();
        let staged = buffers
            .of_def
            .iter()
            .map(|(&def, &buffer)| (def, (stacks[buffer], buffers.cells[buffer])))
            .collect();
        let invariant = invariant_cells
            .into_iter()
            .map(|(slot, cell)| {
                let stack = b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    cell * TILE as u32,
                    5,
                ));
                (slot, stack, cell)
            })
            .collect();
        Ok(Some(TilePlan {
            segments,
            staged,
            invariant,
            reduced,
        }))
    }

    /// The elementwise loop over `start..end` in tiles of up to `TILE` elements: each segment of
    /// the plan runs over the whole tile in turn, ops segments as a vector loop whose last pass
    /// ends at the tile's end, routine segments as one call.
    fn emit_tiled_loop(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        let plan = self
            .tiles
            .take()
            .ok_or_else(|| internal("tiled loop without a plan"))?;
        let result = self.emit_tiles(b, start, end, ptrs, &plan);
        self.tiles = Some(plan);
        result
    }

    fn emit_tiles(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        ptrs: &[Value],
        plan: &TilePlan,
    ) -> Result<(), BackendError> {
        let w = self.width;
        self.emit_while_below(b, start, end, &mut |g, b, at| {
            // A tile is `TILE` elements, or all that is left; a full tile stops short when it
            // would leave fewer than `step` elements, so that no tile is shorter than one pass
            // of the segments (ranges hold at least 64 elements: `KernelShape::new`,
            // `pool::run_split`).
            let unroll = g.segment_unroll;
            let step = i64::from(w) * unroll;
            let left = b.ins().isub(end, at);
            let tile = b.ins().iconst(types::I64, TILE as i64);
            let rest = b.ins().iadd_imm_s(left, -step);
            let rest_short = b.ins().icmp(IntCC::UnsignedLessThan, rest, tile);
            let full = b.ins().select(rest_short, rest, tile);
            let last = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, left, tile);
            let count = b.ins().select(last, left, full);
            g.emit_tile_segments(b, plan, at, count, ptrs)?;
            Ok(b.ins().iadd(at, count))
        })
    }

    /// Runs `body` at `at = start`, then at each position it returns, while `at < end` (tested
    /// before each run: `body` may not run at all).
    fn emit_while_below(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        body: &mut WhileBody<'_, Self>,
    ) -> Result<(), BackendError> {
        let header = b.create_block();
        let body_block = b.create_block();
        let exit = b.create_block();
        b.append_block_param(header, types::I64);
        b.ins().jump(header, &[BlockArg::Value(start)]);
        b.switch_to_block(header);
        let at = b.block_params(header)[0];
        let more = b.ins().icmp(IntCC::UnsignedLessThan, at, end);
        b.ins().brif(more, body_block, &[], exit, &[]);
        b.switch_to_block(body_block);
        let next = body(self, b, at)?;
        b.ins().jump(header, &[BlockArg::Value(next)]);
        b.switch_to_block(exit);
        Ok(())
    }

    /// Every segment of `plan` over the tile of `count` elements at row position `at` (at least
    /// one pass of `segment_unroll` vectors long).
    fn emit_tile_segments(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &TilePlan,
        at: Value,
        count: Value,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        let w = self.width;
        let unroll = self.segment_unroll;
        let step = i64::from(w) * unroll;
        for segment in &plan.segments {
            match segment {
                Segment::Ops { insts, loads } => {
                    // `unroll` vectors per pass; the elements left after the last full pass are
                    // covered by one more pass ending at the tile's end, which recomputes a
                    // few elements (harmless: a segment never reads what it writes, and no
                    // output overlaps an input). Every segment passes over a tile at the same
                    // points, so a staged value is written and read at the same width, and
                    // there is no scalar tail: one copy of the body per segment keeps the
                    // compile time down. The loop is tested at its bottom (one branch per
                    // pass); a tile holds at least one pass (`count >= step`), so the first
                    // pass needs no test.
                    let body = b.create_block();
                    let ragged = b.create_block();
                    let done = b.create_block();
                    for block in [body, ragged] {
                        b.append_block_param(block, types::I64);
                    }
                    let zero = b.ins().iconst(types::I64, 0);
                    b.ins().jump(body, &[BlockArg::Value(zero)]);
                    b.switch_to_block(body);
                    let j = b.block_params(body)[0];
                    for k in 0..unroll {
                        let jk = if k == 0 {
                            j
                        } else {
                            b.ins().iadd_imm_s(j, k * i64::from(w))
                        };
                        self.emit_segment(b, w, plan, insts, loads, SegmentAt::Tile { at, j: jk }, ptrs)?;
                    }
                    let next = b.ins().iadd_imm_s(j, step);
                    let after = b.ins().iadd_imm_s(next, step);
                    let fits = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, after, count);
                    b.ins().brif(
                        fits,
                        body,
                        &[BlockArg::Value(next)],
                        ragged,
                        &[BlockArg::Value(next)],
                    );
                    b.switch_to_block(ragged);
                    let j = b.block_params(ragged)[0];
                    let more = b.ins().icmp(IntCC::UnsignedLessThan, j, count);
                    let last_pass = b.ins().iadd_imm_s(count, -step);
                    b.ins().brif(more, body, &[BlockArg::Value(last_pass)], done, &[]);
                    b.switch_to_block(done);
                }
                Segment::Call { .. } => self.emit_routine_call(b, plan, segment, at, count, ptrs)?,
            }
        }
        Ok(())
    }

    /// The routine call of a `Segment::Call` over the `count` elements of the tile at row
    /// position `at`.
    fn emit_routine_call(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &TilePlan,
        segment: &Segment,
        at: Value,
        count: Value,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        let Segment::Call {
            routine,
            srcs,
            dsts,
            src_accesses,
            dst_accesses,
        } = segment
        else {
            return Err(internal("not a routine segment"));
        };
        let func = self
            .imports
            .routine(*routine)
            .ok_or_else(|| internal("tile routine not linked"))?;
        // A routine reads and writes the buffer directly where the access is
        // contiguous, and the value's staging cell otherwise.
        let place = |g: &Self, b: &mut FunctionBuilder<'_>, def: usize, access: Option<usize>| match access {
            Some(k) => Ok(g.address(b, k, at, at, ptrs, 0)),
            None => {
                let (stack, _) = *plan
                    .staged
                    .get(&def)
                    .ok_or_else(|| internal("routine argument or result not staged"))?;
                Ok::<_, BackendError>(g.stack_base(b, stack))
            }
        };
        let mut args = Vec::with_capacity(srcs.len() + dsts.len() + 1);
        for (src, access) in srcs.iter().zip(src_accesses) {
            args.push(match *src {
                TileSrc::Body(def) => place(self, b, def, *access)?,
                TileSrc::Invariant(slot) => {
                    let (_, stack, _) = plan
                        .invariant
                        .iter()
                        .find(|&&(s, _, _)| s == slot)
                        .copied()
                        .ok_or_else(|| internal("invariant routine argument without a buffer"))?;
                    self.stack_base(b, stack)
                }
            });
        }
        for (&dst, &access) in dsts.iter().zip(dst_accesses) {
            let dst_addr = place(self, b, dst, access)?;
            args.push(dst_addr);
        }
        args.push(count);
        b.ins().call(func, &args);
        Ok(())
    }

    /// Broadcasts each invariant routine argument into its buffer (`TILE` cells, by a loop of
    /// vector stores), once per call before the loops whose tiles read it.
    fn fill_invariant_buffers(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &TilePlan,
    ) -> Result<(), BackendError> {
        if plan.invariant.is_empty() {
            return Ok(());
        }
        let w = self.width;
        let values = self.preamble_slots(b, w);
        for &(slot, stack, cell) in &plan.invariant {
            let value =
                values.get(slot.index()).copied().flatten().ok_or_else(|| {
                    internal(format!("invariant routine argument {slot} not in the preamble"))
                })?;
            let base = self.stack_base(b, stack);
            let step = i64::from(cell) * i64::from(w);
            let bytes = i64::from(cell) * TILE as i64;
            let fill = b.create_block();
            let done = b.create_block();
            b.append_block_param(fill, types::I64);
            let zero = b.ins().iconst(types::I64, 0);
            b.ins().jump(fill, &[BlockArg::Value(zero)]);
            b.switch_to_block(fill);
            let offset = b.block_params(fill)[0];
            let addr = b.ins().iadd(base, offset);
            b.ins().store(MemFlagsData::trusted(), value, addr, 0);
            let next = b.ins().iadd_imm_s(offset, step);
            let more = b.ins().icmp_imm_s(IntCC::SignedLessThan, next, bytes);
            b.ins().brif(more, fill, &[BlockArg::Value(next)], done, &[]);
            b.switch_to_block(done);
        }
        Ok(())
    }

    /// One ops segment `at` a point of the loop (`ptrs`: the addresses at position 0), `w`
    /// lanes at once.
    #[allow(clippy::too_many_arguments)]
    fn emit_segment(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        plan: &TilePlan,
        insts: &[usize],
        loads: &[(usize, usize, SlotId)],
        at: SegmentAt,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        let j = match at {
            SegmentAt::Tile { j, .. } => j,
            SegmentAt::Lanes { cell, .. } => cell,
        };
        let mut slots = self.preamble_slots_read(b, w, insts);
        let cell_addr = |g: &Self, b: &mut FunctionBuilder<'_>, def: usize| {
            let (stack, cell) = *plan
                .staged
                .get(&def)
                .ok_or_else(|| internal("value not staged"))?;
            let base = g.stack_base(b, stack);
            let offset = g.scale(b, j, i64::from(cell));
            Ok::<_, BackendError>(g.add(b, base, offset))
        };
        // The staged value (its defining body index) each slot holds.
        let mut held: HashMap<SlotId, usize> = HashMap::new();
        let pos = match at {
            SegmentAt::Tile { at, j } => self.add(b, at, j),
            SegmentAt::Lanes { pos, .. } => pos,
        };
        let body = &self.kernel().body;
        for &i in insts {
            let inst = body
                .get(i)
                .ok_or_else(|| internal("segment instruction out of range"))?;
            for &(_, def, slot) in loads.iter().filter(|&&(reader, _, _)| reader == i) {
                if held.get(&slot) != Some(&def) {
                    let addr = cell_addr(self, b, def)?;
                    let ty = cl_type(self.slot_dtype(slot)?, w);
                    let value = b.ins().load(ty, MemFlagsData::trusted(), addr, 0);
                    if let Some(s) = slots.get_mut(slot.index()) {
                        *s = Some(value);
                    }
                    held.insert(slot, def);
                }
            }
            let access = self.info.access_of.get(i).copied().flatten();
            self.emit_inst(
                b,
                w,
                inst,
                access.map(|a| (a, pos)),
                &mut slots,
                ptrs,
                Some(i),
                &mut Vec::new(),
            )?;
            if let Some(dst) = inst.dst() {
                held.insert(dst, i);
            }
            if plan.staged.contains_key(&i)
                && let Some(dst) = inst.dst()
            {
                let value = slots
                    .get(dst.index())
                    .copied()
                    .flatten()
                    .ok_or_else(|| internal("staged value not computed"))?;
                let addr = cell_addr(self, b, i)?;
                b.ins().store(MemFlagsData::trusted(), value, addr, 0);
            }
        }
        Ok(())
    }

    /// The innermost loop over `start..end` at element offsets `offs` (per access, at index 0).
    /// With `partials`, reductions combine into the accumulators of that stack slot.
    fn emit_inner(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        offs: &[Value],
        partials: Option<&Partials>,
    ) -> Result<(), BackendError> {
        let w = self.width;
        let lanes = partials.map_or(1, |p| p.lanes);
        let vector_reduce = partials.is_some_and(|p| w > 1 && p.lanes % u32::from(w) == 0);
        let mut j = start;
        if w > 1 && (partials.is_none() || vector_reduce) {
            let step = if vector_reduce {
                i64::from(lanes)
            } else {
                i64::from(w)
            };
            // Accumulator vectors are carried through the loop as block parameters.
            let carried = match partials {
                Some(p) => p.load_vectors(b, w)?,
                None => Vec::new(),
            };
            let (after, accs) = self.emit_loop(b, j, end, step, &carried, &mut |g, b, at, accs| {
                let mut accs = accs.to_vec();
                let chunks = if vector_reduce { lanes / u32::from(w) } else { 1 };
                for k in 0..chunks {
                    let pos = if k == 0 {
                        at
                    } else {
                        b.ins().iadd_imm_s(at, i64::from(k) * i64::from(w))
                    };
                    let mut reduced = Vec::new();
                    g.emit_body(b, w, pos, offs, &mut reduced)?;
                    if let Some(p) = partials {
                        for (r, (_, value)) in p.reduces.iter().zip(reduced) {
                            let idx = r.index * (lanes / u32::from(w)) as usize + k as usize;
                            let mut e = Emitter {
                                b: &mut *b,
                                w,
                                imports: g.imports,
                            };
                            accs[idx] = e.combine(r.op, accs[idx], value, r.dtype)?;
                        }
                    }
                }
                Ok(accs)
            })?;
            if let Some(p) = partials {
                p.store_vectors(b, w, &accs)?;
            }
            j = after;
        }
        // Scalar tail (or the whole loop when not vectorised).
        self.emit_scalar_points(b, j, end, offs, partials)
    }

    /// The points `start..end` of the innermost loop one at a time (scalar code); with
    /// `partials`, reductions fold into partial `j % lanes` through the slot.
    fn emit_scalar_points(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        offs: &[Value],
        partials: Option<&Partials>,
    ) -> Result<(), BackendError> {
        self.emit_loop(b, start, end, 1, &[], &mut |g, b, at, _| {
            let mut reduced = Vec::new();
            g.emit_body(b, 1, at, offs, &mut reduced)?;
            if let Some(p) = partials {
                let lane = p.lane_of(b, at);
                for (r, (_, value)) in p.reduces.iter().zip(reduced) {
                    p.fold_scalar(b, g.ptr, g.imports, r, lane, value)?;
                }
            }
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// Reduction kernels: with one accumulator per output, [`Gen::emit_reduction_across`];
    /// otherwise per leading point, partial accumulators in a stack slot, the reduced
    /// dimensions looped (the innermost vectorised), then the lane-order combination and the
    /// store of the finished value.
    fn emit_reduction(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        reduce_dims: usize,
    ) -> Result<KernelShape, BackendError> {
        // One accumulator per output runs across the outputs (in lanes, or one at a time inline)
        // unless its rows run in tiles with a one-lane partial (see `Gen::emit`).
        if self.kernel().schedule.reduce_lanes <= 1 && !self.rows_in_tiles {
            return self.emit_reduction_across(b, lo, hi, reduce_dims);
        }
        let kernel = self.kernel();
        let dims = kernel.dims.clone();
        let rank = dims.len();
        let split = rank - reduce_dims;
        let leading = dims[..split].to_vec();
        let reduced = dims[split..].to_vec();
        let inner = *reduced.last().unwrap_or(&1);
        let outer_reduced = reduced[..reduce_dims.saturating_sub(1)].to_vec();
        let reduced_numel: usize = reduced.iter().product();
        let lanes = kernel.schedule.reduce_lanes.max(1);
        // Lay out the partials: each reduction gets `lanes` elements, 16-byte aligned.
        let mut reduces = Vec::new();
        let mut offset = 0usize;
        for (index, (op, buf, dtype)) in self.reductions()?.into_iter().enumerate() {
            reduces.push(ReduceInfo {
                index,
                op,
                buf,
                dtype,
                offset,
            });
            offset += (lanes as usize * dtype.size_bytes()).div_ceil(16) * 16;
        }
        let size = u32::try_from(offset.max(16)).map_err(|_| internal("partials too large"))?;
        let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, size, 4));
        let partials = Partials { slot, lanes, reduces };
        // A long float sum is blocked into leaves whose partials a binary counter combines
        // pairwise (`ReduceLeaves`): the interpreter's order, whatever the vector width.
        let rows: usize = outer_reduced.iter().product();
        let leaves = if partials.reduces.iter().any(|r| partials.blocked(r)) {
            ReduceLeaves::of(lanes, rows, inner)
        } else {
            ReduceLeaves::One
        };
        let tree = match leaves {
            ReduceLeaves::One => None,
            _ => Some(LeafTree::new(b, leaves.count(rows, inner), size as usize)?),
        };
        // Bytes each access advances per point of the innermost reduced dim (a row's pieces
        // start at these multiples).
        let row_steps: Vec<i64> = self
            .info
            .accesses
            .iter()
            .map(|a| (a.strides.get(rank - 1).copied().unwrap_or(0) * a.elem_bytes()) as i64)
            .collect();

        let zero = b.ins().iconst(types::I64, 0);
        let zeros = vec![zero; self.info.accesses.len()];
        let tiles = self.tiles.take();
        self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, lead, _| {
            let lead_offs = g.offsets(b, lead, 0, &leading, &zeros);
            // Every partial starts at the identity.
            for r in &partials.reduces {
                let identity = identity(r.op, r.dtype)?;
                let mut e = Emitter {
                    b: &mut *b,
                    w: 1,
                    imports: g.imports,
                };
                let value = e.constant(identity);
                for lane in 0..partials.lanes as usize {
                    let off = i32::try_from(r.offset + lane * r.dtype.size_bytes())
                        .map_err(|_| internal("partials"))?;
                    b.ins().stack_store(types::I64, value, partials.slot, off);
                }
            }
            if let Some(tree) = &tree {
                let zero = b.ins().iconst(types::I64, 0);
                b.ins().stack_store(types::I64, zero, tree.counter, 0);
            }
            let outer_reduced = outer_reduced.clone();
            // The rows `row_lo..row_hi`, whole.
            let emit_rows = |g: &mut Self, b: &mut FunctionBuilder<'_>, row_lo: Value, row_hi: Value| {
                g.emit_loop(b, row_lo, row_hi, 1, &[], &mut |g, b, row, _| {
                    let offs = g.offsets(b, row, split, &outer_reduced, &lead_offs);
                    let offs = g.pointers(b, &offs)?;
                    if let Some(plan) = &tiles {
                        g.emit_tiled_row(b, inner, &offs, &partials, plan)?;
                    } else {
                        let start = b.ins().iconst(types::I64, 0);
                        let end = b.ins().iconst(types::I64, inner as i64);
                        g.emit_inner(b, start, end, &offs, Some(&partials))?;
                    }
                    Ok(Vec::new())
                })
            };
            match (leaves, &tree) {
                (ReduceLeaves::RowGroups { rows_per_leaf }, Some(tree)) => {
                    // Groups of `rows_per_leaf` rows, a leaf each, then the rows left.
                    let full = rows - rows % rows_per_leaf;
                    let start = b.ins().iconst(types::I64, 0);
                    let end = b.ins().iconst(types::I64, full as i64);
                    g.emit_loop(b, start, end, rows_per_leaf as i64, &[], &mut |g, b, first, _| {
                        let last = b.ins().iadd_imm_s(first, rows_per_leaf as i64);
                        emit_rows(g, b, first, last)?;
                        g.push_leaf(b, &partials, tree)?;
                        Ok(Vec::new())
                    })?;
                    if full < rows {
                        let start = b.ins().iconst(types::I64, full as i64);
                        let end = b.ins().iconst(types::I64, rows as i64);
                        emit_rows(g, b, start, end)?;
                        g.push_leaf(b, &partials, tree)?;
                    }
                }
                (ReduceLeaves::RowPieces { points }, Some(tree)) => {
                    // Each row in pieces of `points`, a leaf each, then the piece left.
                    let full = inner - inner % points;
                    let row_lo = b.ins().iconst(types::I64, 0);
                    let row_hi = b.ins().iconst(types::I64, rows as i64);
                    let outer_reduced = outer_reduced.clone();
                    g.emit_loop(b, row_lo, row_hi, 1, &[], &mut |g, b, row, _| {
                        let offs = g.offsets(b, row, split, &outer_reduced, &lead_offs);
                        let ptrs = g.pointers(b, &offs)?;
                        let piece = |g: &mut Self, b: &mut FunctionBuilder<'_>, start: Value, len: usize| {
                            // A tile holds at least one pass of the segments; a shorter last
                            // piece runs as scalar code, which calls the same routines one
                            // point at a time (the same bits).
                            let pass = usize::from(g.width) * g.segment_unroll.max(1) as usize;
                            match &tiles {
                                Some(plan) if len >= pass => {
                                    let at = g.point_pointers(b, &ptrs, &row_steps, start);
                                    g.emit_tiled_row(b, len, &at, &partials, plan)?;
                                }
                                Some(_) => {
                                    let end = b.ins().iadd_imm_s(start, len as i64);
                                    g.emit_scalar_points(b, start, end, &ptrs, Some(&partials))?;
                                }
                                None => {
                                    let end = b.ins().iadd_imm_s(start, len as i64);
                                    g.emit_inner(b, start, end, &ptrs, Some(&partials))?;
                                }
                            }
                            g.push_leaf(b, &partials, tree)
                        };
                        let start = b.ins().iconst(types::I64, 0);
                        let end = b.ins().iconst(types::I64, full as i64);
                        g.emit_loop(b, start, end, points as i64, &[], &mut |g, b, at, _| {
                            piece(g, b, at, points)?;
                            Ok(Vec::new())
                        })?;
                        if full < inner {
                            let start = b.ins().iconst(types::I64, full as i64);
                            piece(g, b, start, inner - full)?;
                        }
                        Ok(Vec::new())
                    })?;
                }
                _ => {
                    let row_lo = b.ins().iconst(types::I64, 0);
                    let row_hi = b.ins().iconst(types::I64, rows as i64);
                    emit_rows(g, b, row_lo, row_hi)?;
                }
            }
            if let Some(tree) = &tree {
                g.fold_leaves(b, &partials, tree)?;
            }
            // Combine the partials in lane order, finish, store at the leading index.
            for r in &partials.reduces {
                let ty = cl_type(r.dtype, 1);
                let mut total = b.ins().stack_load(
                    types::I64,
                    ty,
                    partials.slot,
                    i32::try_from(r.offset).unwrap_or(0),
                );
                for lane in 1..partials.lanes as usize {
                    let off = i32::try_from(r.offset + lane * r.dtype.size_bytes())
                        .map_err(|_| internal("partials"))?;
                    let part = b.ins().stack_load(types::I64, ty, partials.slot, off);
                    let mut e = Emitter {
                        b: &mut *b,
                        w: 1,
                        imports: g.imports,
                    };
                    total = e.combine(r.op, total, part, r.dtype)?;
                }
                let mut e = Emitter {
                    b: &mut *b,
                    w: 1,
                    imports: g.imports,
                };
                let finished = finish(&mut e, r.op, total, r.dtype, reduced_numel)?;
                let base = g.base(r.buf)?;
                let byte = b.ins().imul_imm_s(lead, r.dtype.size_bytes() as i64);
                let addr = b.ins().iadd(base, byte);
                b.ins().store(mem(), finished, addr, 0);
            }
            Ok(Vec::new())
        })?;
        self.finish(b);
        let units: usize = leading.iter().product();
        Ok(KernelShape::new(
            units as u64,
            reduced_numel as u64,
            self.width,
            self.min_points_per_thread(),
        ))
    }

    /// Pushes the leaf the partials hold onto the binary counter of `tree` (see
    /// [`ReduceLeaves`]): merged `trailing_zeros(count)` times with the top of the stack, the
    /// older partials on the left, then stored at the new top; the blocked partials restart at
    /// the identity. Once per leaf (a thousand points or more), so the merges run lane by lane
    /// in whole vectors without care for speed.
    fn push_leaf(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        partials: &Partials,
        tree: &LeafTree,
    ) -> Result<(), BackendError> {
        let count = b.ins().stack_load(types::I64, types::I64, tree.counter, 0);
        let next = b.ins().iadd_imm_s(count, 1);
        b.ins().stack_store(types::I64, next, tree.counter, 0);
        let merges = b.ins().ctz(next);
        let depth = b.ins().popcnt(count);
        let base = b.ins().stack_addr(self.ptr, tree.stack, 0);
        let level_bytes = tree.level_bytes as i64;
        let zero = b.ins().iconst(types::I64, 0);
        self.emit_loop(b, zero, merges, 1, &[], &mut |g, b, i, _| {
            // The entry `i` below the top: level `depth - 1 - i`.
            let level = b.ins().isub(depth, i);
            let level = b.ins().iadd_imm_s(level, -1);
            let bytes = b.ins().imul_imm_s(level, level_bytes);
            let entry = b.ins().iadd(base, bytes);
            for (r, ty, off) in partials.blocked_chunks()? {
                let older = b.ins().load(ty, MemFlagsData::trusted(), entry, off);
                let leaf = b.ins().stack_load(types::I64, ty, partials.slot, off);
                let mut e = Emitter {
                    b: &mut *b,
                    w: partials.unit(r),
                    imports: g.imports,
                };
                let merged = e.combine(r.op, older, leaf, r.dtype)?;
                b.ins().stack_store(types::I64, merged, partials.slot, off);
            }
            Ok(Vec::new())
        })?;
        let level = b.ins().isub(depth, merges);
        let bytes = b.ins().imul_imm_s(level, level_bytes);
        let entry = b.ins().iadd(base, bytes);
        for (r, ty, off) in partials.blocked_chunks()? {
            let leaf = b.ins().stack_load(types::I64, ty, partials.slot, off);
            b.ins().store(MemFlagsData::trusted(), leaf, entry, off);
            let mut e = Emitter {
                b: &mut *b,
                w: partials.unit(r),
                imports: self.imports,
            };
            let restart = e.constant(identity(r.op, r.dtype)?);
            b.ins().stack_store(types::I64, restart, partials.slot, off);
        }
        Ok(())
    }

    /// Folds the stack of `tree` from the top (`s0 ∘ (s1 ∘ (… ∘ s_top))`) into the blocked
    /// partials, once every leaf is pushed: the entries are those of the set bits of the leaf
    /// count, known at compile time.
    fn fold_leaves(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        partials: &Partials,
        tree: &LeafTree,
    ) -> Result<(), BackendError> {
        for (r, ty, off) in partials.blocked_chunks()? {
            let mut total = None;
            for level in (0..tree.entries_at_end).rev() {
                let at = i32::try_from(level * tree.level_bytes)
                    .ok()
                    .and_then(|l| l.checked_add(off))
                    .ok_or_else(|| internal("leaf stack too large"))?;
                let entry = b.ins().stack_load(types::I64, ty, tree.stack, at);
                total = Some(match total {
                    None => entry,
                    Some(newer) => Emitter {
                        b: &mut *b,
                        w: partials.unit(r),
                        imports: self.imports,
                    }
                    .combine(r.op, entry, newer, r.dtype)?,
                });
            }
            if let Some(total) = total {
                b.ins().stack_store(types::I64, total, partials.slot, off);
            }
        }
        Ok(())
    }

    /// One innermost reduced row of `n` elements (`ptrs`: its addresses at position 0) in tiles:
    /// the plan's segments over a tile, then [`Gen::emit_tile_reduction`] folds the tile's
    /// reduced values into the partials. Every tile but the last holds a multiple of the
    /// partials' `lanes` elements, so point `j` of the row folds into lane `j % lanes` in row
    /// order, as [`Gen::emit_inner`] folds it: the same sums (up to the last bit by which a tile
    /// routine may differ from the inline polynomial).
    fn emit_tiled_row(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        n: usize,
        ptrs: &[Value],
        partials: &Partials,
        plan: &TilePlan,
    ) -> Result<(), BackendError> {
        let lanes = partials.lanes.max(1) as usize;
        let step = usize::from(self.width) * self.segment_unroll.max(1) as usize;
        // Tiles of `size` elements and the rest; a rest shorter than one pass of the segments
        // borrows `shift` elements (a multiple of `lanes`) from the tile before it.
        let size = (TILE / lanes * lanes).max(lanes);
        let rest = n % size;
        let shift = if n > size && rest != 0 && rest < step {
            (step - rest).next_multiple_of(lanes)
        } else {
            0
        };
        let zero = b.ins().iconst(types::I64, 0);
        let end = b.ins().iconst(types::I64, n as i64);
        self.emit_while_below(b, zero, end, &mut |g, b, at| {
            let left = b.ins().isub(end, at);
            let full = b.ins().iconst(types::I64, size as i64);
            let mut count = full;
            if shift > 0 {
                let borrows = b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedLessThan, left, (size + step) as i64);
                let shortened = b.ins().iconst(types::I64, (size - shift) as i64);
                count = b.ins().select(borrows, shortened, full);
            }
            let last = b
                .ins()
                .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, left, size as i64);
            let count = b.ins().select(last, left, count);
            g.emit_tile_segments(b, plan, at, count, ptrs)?;
            g.emit_tile_reduction(b, plan, partials, count)?;
            Ok(b.ins().iadd(at, count))
        })
    }

    /// Folds the `count` staged values of each reduction in a tile (whose first point's lane is
    /// 0) into the partials: vectors of `w` lanes `lanes` points at a time where `w` divides
    /// `lanes`, as [`Gen::emit_inner`]'s vector loop does, and the points left one at a time
    /// into lane `j % lanes`.
    fn emit_tile_reduction(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &TilePlan,
        partials: &Partials,
        count: Value,
    ) -> Result<(), BackendError> {
        let w = self.width;
        let lanes = partials.lanes.max(1);
        let cells = partials
            .reduces
            .iter()
            .zip(&plan.reduced)
            .map(|(r, def)| {
                plan.staged
                    .get(def)
                    .map(|&(stack, cell)| (r, stack, i64::from(cell)))
                    .ok_or_else(|| internal("reduced value not staged"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if cells.len() != partials.reduces.len() {
            return Err(internal("tiled reduction without its reduced values"));
        }
        let cell_addr = |g: &Self, b: &mut FunctionBuilder<'_>, stack: StackSlot, cell: i64, j: Value| {
            let base = g.stack_base(b, stack);
            let offset = g.scale(b, j, cell);
            g.add(b, base, offset)
        };
        let mut j = b.ins().iconst(types::I64, 0);
        // Vectors of `w` lanes, `lanes` points a pass; one lane folds its points one at a time
        // with the accumulators in registers (a fold through the stack slot would put a store
        // and a load on the chain of every point).
        let w = if lanes == 1 { 1 } else { w };
        if (w > 1 || lanes == 1) && lanes.is_multiple_of(u32::from(w)) {
            let chunks = (lanes / u32::from(w)) as usize;
            let carried = partials.load_vectors(b, w)?;
            let (after, accs) =
                self.emit_loop(b, j, count, i64::from(lanes), &carried, &mut |g, b, at, accs| {
                    let mut accs = accs.to_vec();
                    for (c, &(r, stack, cell)) in cells.iter().enumerate() {
                        for k in 0..chunks {
                            let pos = g.add_imm(b, at, (k * usize::from(w)) as i64);
                            let addr = cell_addr(g, b, stack, cell, pos);
                            let value = b
                                .ins()
                                .load(cl_type(r.dtype, w), MemFlagsData::trusted(), addr, 0);
                            let mut e = Emitter {
                                b: &mut *b,
                                w,
                                imports: g.imports,
                            };
                            accs[c * chunks + k] = e.combine(r.op, accs[c * chunks + k], value, r.dtype)?;
                        }
                    }
                    Ok(accs)
                })?;
            partials.store_vectors(b, w, &accs)?;
            if lanes == 1 {
                return Ok(());
            }
            j = after;
        }
        self.emit_loop(b, j, count, 1, &[], &mut |g, b, at, _| {
            let lane = partials.lane_of(b, at);
            for &(r, stack, cell) in &cells {
                let addr = cell_addr(g, b, stack, cell, at);
                let value = b
                    .ins()
                    .load(cl_type(r.dtype, 1), MemFlagsData::trusted(), addr, 0);
                partials.fold_scalar(b, g.ptr, g.imports, r, lane, value)?;
            }
            Ok(Vec::new())
        })?;
        Ok(())
    }

    /// The tile routine computing `inst` (linked or not), if it has one.
    fn routine_of(&self, inst: &Inst) -> Result<Option<AotFn>, BackendError> {
        Ok(match inst {
            Inst::Unary { op, src, .. } => AotFn::for_op(*op, self.slot_dtype(*src)?),
            Inst::Binary { op, lhs, .. } => AotFn::for_binary(*op, self.slot_dtype(*lhs)?),
            _ => None,
        })
    }

    /// Whether a body instruction has a tile routine (linked or not).
    fn body_has_routines(&self) -> Result<bool, BackendError> {
        for inst in &self.kernel().body {
            if self.routine_of(inst)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The body's reductions in order: op, output buffer and its dtype.
    fn reductions(&self) -> Result<Vec<(ReduceOp, BufId, DType)>, BackendError> {
        let mut reduces = Vec::new();
        for inst in &self.kernel().body {
            if let Inst::Reduce { op, buf, .. } = inst {
                let dtype = *self
                    .info
                    .buffer_dtypes
                    .get(buf.index())
                    .ok_or_else(|| internal("unknown buffer"))?;
                reduces.push((*op, *buf, dtype));
            }
        }
        Ok(reduces)
    }

    /// Whether a reduction kernel runs with its outputs in the vector lanes
    /// ([`Gen::emit_reduction_across`]): when each output accumulates in one sequential
    /// accumulator (`reduce_lanes` 1, the short rows of small matrix products) and the
    /// innermost kept dim holds at least a vector of outputs.
    fn outputs_in_lanes(&self, reduce_dims: usize) -> bool {
        let kernel = self.kernel();
        let w = usize::from(self.width);
        let split = kernel.dims.len() - reduce_dims;
        let reduces_vectorise = self
            .reductions()
            .is_ok_and(|r| r.iter().all(|&(_, _, dtype)| dtype != DType::Bool));
        w > 1
            && kernel.schedule.reduce_lanes == 1
            && split >= 1
            && kernel.dims[split - 1] >= w
            && reduces_vectorise
    }

    /// Reduction kernels with one accumulator per output (`reduce_lanes` 1), with one output
    /// per vector lane: `w` neighbouring outputs along the
    /// innermost kept dim accumulate together, each lane adding its own points in row-major
    /// order, which is the order of a single sequential accumulator, so the bits are those of
    /// `reduce_lanes` 1. At width 1 (too few outputs in a row to fill a vector, or a reduction
    /// to one value) the same code runs one output at a time. A short innermost reduced row (a small matrix product's 3 to 12
    /// points) is unrolled, and the accumulators stay in registers. Loads that the outputs
    /// share (stride 0 along the vector dim) are splats, contiguous ones vector loads, others
    /// gathered by lane. The vector positions end like an elementwise row: the last vector
    /// re-runs at `end - w`, storing a few outputs again with the same values.
    fn emit_reduction_across(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lo: Value,
        hi: Value,
        reduce_dims: usize,
    ) -> Result<KernelShape, BackendError> {
        /// Innermost reduced rows up to this long are unrolled.
        const UNROLL_ROW: usize = 16;
        let kernel = self.kernel();
        let w = self.width;
        let dims = kernel.dims.clone();
        let rank = dims.len();
        let split = rank - reduce_dims;
        // A reduction to one value has no kept dim: one column of one row.
        let vec_axis = split.checked_sub(1);
        let cols = vec_axis.map_or(1, |a| dims[a]);
        let outer_leading = dims[..vec_axis.unwrap_or(0)].to_vec();
        let reduced = dims[split..].to_vec();
        let reduced_numel: usize = reduced.iter().product();
        let inner = if reduce_dims > 0 { dims[rank - 1] } else { 1 };
        let outer_reduced = reduced[..reduce_dims.saturating_sub(1)].to_vec();
        let rows_reduced: usize = outer_reduced.iter().product();
        self.inner_axis = vec_axis;
        // Bytes each access advances per point of the innermost reduced dim.
        let row_steps: Vec<i64> = self
            .info
            .accesses
            .iter()
            .map(|a| {
                let stride = if reduce_dims > 0 {
                    a.strides.get(rank - 1).copied().unwrap_or(0)
                } else {
                    0
                };
                (stride * a.elem_bytes()) as i64
            })
            .collect();
        let reduces = self.reductions()?;
        let tiles = self.tiles.take().filter(|_| rows_reduced == 1);
        // A single output (no kept dim) with a short row: its points are evaluated `pw` at a
        // time, as the body's vector code, and their lanes added to the scalar accumulator in
        // order, which is the order of one accumulator, so the bits are the same.
        let pw = usize::from(self.point_width);
        let points_in_vectors = w == 1
            && vec_axis.is_none()
            && reduce_dims > 0
            && pw > 1
            && inner >= pw
            && inner <= UNROLL_ROW
            && reduces.iter().all(|&(_, _, dtype)| dtype != DType::Bool);

        // Loads of one element per output lane whose rows run contiguously along the reduced
        // dim, in full 128-bit vectors: read `w` points of each output's row as one vector and
        // transpose (`Gen::transposed_rows`).
        let transposable: Vec<(usize, usize)> = if w > 1 && !points_in_vectors && reduce_dims > 0 {
            kernel
                .body
                .iter()
                .enumerate()
                .filter_map(|(i, inst)| {
                    let Inst::Load { dst, .. } = inst else { return None };
                    let k = self.info.access_of.get(i).copied().flatten()?;
                    let access = &self.info.accesses[k];
                    let dtype = self.slot_dtype(*dst).ok()?;
                    let bytes = access.elem_bytes();
                    let gathered = !matches!(self.inner_stride(k), 0 | 1);
                    let along_row = row_steps.get(k).copied() == Some(bytes as i64);
                    (gathered && along_row && dtype != DType::Bool && bytes * usize::from(w) == 16)
                        .then_some((i, k))
                })
                .collect()
        } else {
            Vec::new()
        };

        // One group of `w` outputs at column `col` of the row whose offsets are `row_offs`.
        let group = |g: &mut Self,
                     b: &mut FunctionBuilder<'_>,
                     row: Value,
                     row_offs: &[Value],
                     col: Value| {
            let mut accs = Vec::with_capacity(reduces.len());
            for &(op, _, dtype) in &reduces {
                let mut e = Emitter {
                    b: &mut *b,
                    w,
                    imports: g.imports,
                };
                accs.push(e.constant(identity(op, dtype)?));
            }
            // The points of one outer reduced row: the innermost reduced dim, unrolled when short.
            let reduced_row = |g: &mut Self, b: &mut FunctionBuilder<'_>, ptrs: &[Value], accs: &[Value]| {
                let mut accs = accs.to_vec();
                if points_in_vectors {
                    // Positions along the row's own axis: vectors of `pw` points, then single
                    // points for what is left.
                    let outer = g.inner_axis;
                    g.inner_axis = Some(rank - 1);
                    let chunks = inner / pw;
                    let width = u8::try_from(pw).unwrap_or(1);
                    for (start, count) in (0..chunks)
                        .map(|c| (c * pw, width))
                        .chain((chunks * pw..inner).map(|j| (j, 1)))
                    {
                        let at = b.ins().iconst(types::I64, start as i64);
                        let mut values = Vec::new();
                        g.emit_body(b, count, at, ptrs, &mut values)?;
                        for ((acc, (_, value)), &(op, _, dtype)) in accs.iter_mut().zip(values).zip(&reduces)
                        {
                            for lane in 0..count {
                                let mut e = Emitter {
                                    b: &mut *b,
                                    w: count,
                                    imports: g.imports,
                                };
                                let x = if count == 1 {
                                    value
                                } else {
                                    e.lane(value, dtype, lane)
                                };
                                let mut e = Emitter {
                                    b: &mut *b,
                                    w: 1,
                                    imports: g.imports,
                                };
                                *acc = e.combine(op, *acc, x, dtype)?;
                            }
                        }
                    }
                    g.inner_axis = outer;
                    return Ok(accs);
                }
                let point =
                    |g: &mut Self, b: &mut FunctionBuilder<'_>, ptrs: &[Value], accs: &mut [Value]| {
                        let mut values = Vec::new();
                        g.emit_body(b, w, col, ptrs, &mut values)?;
                        for ((acc, (_, value)), &(op, _, dtype)) in accs.iter_mut().zip(values).zip(&reduces)
                        {
                            let mut e = Emitter {
                                b: &mut *b,
                                w,
                                imports: g.imports,
                            };
                            *acc = e.combine(op, *acc, value, dtype)?;
                        }
                        Ok::<(), BackendError>(())
                    };
                // `w` points at a time where rows can be read as vectors and transposed (the
                // gathered loads, one element per output, become `w` vector loads and a
                // transpose), then single points.
                let chunked = if transposable.is_empty() {
                    0
                } else {
                    inner - inner % usize::from(w)
                };
                let chunk = |g: &mut Self, b: &mut FunctionBuilder<'_>, at: &[Value], accs: &mut [Value]| {
                    let points = g.transposed_rows(b, &transposable, col, at)?;
                    for t in 0..usize::from(w) {
                        let at_t: Vec<Value> = at
                            .iter()
                            .zip(&row_steps)
                            .map(|(&p, &step)| g.add_imm(b, p, step * t as i64))
                            .collect();
                        for (&(i, _), vectors) in transposable.iter().zip(&points) {
                            g.preloaded.insert(i, vectors[t]);
                        }
                        let done = point(g, b, &at_t, accs);
                        g.preloaded.clear();
                        done?;
                    }
                    Ok::<(), BackendError>(())
                };
                if inner <= UNROLL_ROW {
                    let at_j = |g: &mut Self, b: &mut FunctionBuilder<'_>, j: usize| -> Vec<Value> {
                        ptrs.iter()
                            .zip(&row_steps)
                            .map(|(&p, &step)| g.add_imm(b, p, step * j as i64))
                            .collect()
                    };
                    for j0 in (0..chunked).step_by(usize::from(w)) {
                        let at = at_j(g, b, j0);
                        chunk(g, b, &at, &mut accs)?;
                    }
                    for j in chunked..inner {
                        let at = at_j(g, b, j);
                        point(g, b, &at, &mut accs)?;
                    }
                    return Ok(accs);
                }
                let start = b.ins().iconst(types::I64, 0);
                let end = b.ins().iconst(types::I64, inner as i64);
                let accs = if chunked > 0 {
                    let chunks_end = b.ins().iconst(types::I64, chunked as i64);
                    let (_, accs) = g.emit_loop(
                        b,
                        start,
                        chunks_end,
                        i64::from(w),
                        &accs,
                        &mut |g, b, j, carried| {
                            let mut accs = carried.to_vec();
                            let at = g.point_pointers(b, ptrs, &row_steps, j);
                            chunk(g, b, &at, &mut accs)?;
                            Ok(accs)
                        },
                    )?;
                    accs
                } else {
                    accs
                };
                let start = b.ins().iconst(types::I64, chunked as i64);
                let (_, accs) = g.emit_loop(b, start, end, 1, &accs, &mut |g, b, j, carried| {
                    let mut accs = carried.to_vec();
                    let at = g.point_pointers(b, ptrs, &row_steps, j);
                    point(g, b, &at, &mut accs)?;
                    Ok(accs)
                })?;
                Ok::<Vec<Value>, BackendError>(accs)
            };
            if rows_reduced == 1 {
                let ptrs = g.pointers(b, row_offs)?;
                accs = reduced_row(g, b, &ptrs, &accs)?;
            } else {
                let start = b.ins().iconst(types::I64, 0);
                let end = b.ins().iconst(types::I64, rows_reduced as i64);
                let outer_reduced = outer_reduced.clone();
                let (_, carried) = g.emit_loop(b, start, end, 1, &accs, &mut |g, b, rr, carried| {
                    let offs = g.offsets(b, rr, split, &outer_reduced, row_offs);
                    let ptrs = g.pointers(b, &offs)?;
                    reduced_row(g, b, &ptrs, carried)
                })?;
                accs = carried;
            }
            g.store_reduced(b, &accs, row, cols, col, reduced_numel)
        };
        let across = AcrossRow {
            row_steps: &row_steps,
            inner,
            cols,
            reduced_numel,
        };

        let zero = b.ins().iconst(types::I64, 0);
        let zeros = vec![zero; self.info.accesses.len()];
        let shape = if vec_axis == Some(0) {
            // The units are the outputs themselves: a thread's chunk is a range of columns.
            if let Some(plan) = &tiles {
                self.emit_across_tiles(b, plan, &across, zero, &zeros, lo, hi)?;
            } else {
                self.emit_vector_positions(b, lo, hi, &mut |g, b, col| group(g, b, zero, &zeros, col))?;
            }
            KernelShape::new(cols as u64, reduced_numel as u64, w, self.min_points_per_thread())
        } else {
            let rows: usize = outer_leading.iter().product();
            let cols_end = b.ins().iconst(types::I64, cols as i64);
            // A short row of outputs whose points are all unrolled (a batch of small matrix
            // products) is written out: its vector positions (the ragged end's included, as
            // the loop would run it) at constant columns, with no loop over them.
            let written_out = (tiles.is_none()
                && rows_reduced == 1
                && inner <= UNROLL_ROW
                && written_out_position_count(cols, w)
                    .saturating_mul(reduced_numel)
                    .saturating_mul(self.body_work())
                    <= UNIT_BUDGET)
                .then(|| written_out_positions(cols, w));
            self.emit_loop(b, lo, hi, 1, &[], &mut |g, b, row, _| {
                let row_offs = g.offsets(b, row, 0, &outer_leading, &zeros);
                let start = b.ins().iconst(types::I64, 0);
                if let Some(positions) = &written_out {
                    for &at in positions {
                        let col = g.const_i64(b, at as i64);
                        group(g, b, row, &row_offs, col)?;
                    }
                } else if let Some(plan) = &tiles {
                    g.emit_across_tiles(b, plan, &across, row, &row_offs, start, cols_end)?;
                } else {
                    g.emit_vector_positions(b, start, cols_end, &mut |g, b, col| {
                        group(g, b, row, &row_offs, col)
                    })?;
                }
                Ok(Vec::new())
            })?;
            KernelShape::new(
                rows as u64,
                (cols * reduced_numel) as u64,
                w,
                self.min_points_per_thread(),
            )
        };
        self.finish(b);
        Ok(shape)
    }

    /// For each `(body index, access)` of `loads` (an access of one element per output lane,
    /// contiguous along the reduced row, in 128-bit vectors): the `w` points from `ptrs` on of
    /// the `w` outputs' rows at column `col`, as one vector per point (lane `l`: output
    /// `col + l`). Each row is one vector load; the `w × w` block is transposed with
    /// interleaving shuffles (`unpcklps`/`unpckhps`, then `unpcklpd`/`unpckhpd` for 32-bit
    /// lanes).
    fn transposed_rows(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        loads: &[(usize, usize)],
        col: Value,
        ptrs: &[Value],
    ) -> Result<Vec<Vec<Value>>, BackendError> {
        let w = self.width;
        let mut out = Vec::with_capacity(loads.len());
        for &(i, k) in loads {
            let Some(Inst::Load { dst, buf, .. }) = self.kernel().body.get(i).cloned() else {
                return Err(internal("transposed row of a non-load"));
            };
            let dtype = self.slot_dtype(dst)?;
            let base = self.base(buf)?;
            let ty = cl_type(dtype, w);
            let rows: Vec<Value> = (0..w)
                .map(|lane| {
                    let addr = self.address(b, k, base, col, ptrs, lane);
                    let row = b.ins().load(ty, mem(), addr, 0);
                    b.ins().bitcast(types::I8X16, bitcast_flags(), row)
                })
                .collect();
            // Byte masks of `shuffle(a, b)`: bytes 0–15 from `a`, 16–31 from `b`.
            let interleave = |b: &mut FunctionBuilder<'_>, x: Value, y: Value, lane_bytes: u8, high: bool| {
                let start = if high { 16 / 2 } else { 0 };
                let mut mask = [0u8; 16];
                for (n, byte) in mask.iter_mut().enumerate() {
                    let n = n as u8;
                    let (pair, within) = (n / (2 * lane_bytes), n % (2 * lane_bytes));
                    let from_y = within >= lane_bytes;
                    let offset = start as u8 + pair * lane_bytes + within % lane_bytes;
                    *byte = if from_y { 16 + offset } else { offset };
                }
                let mask = b.func.dfg.immediates.push(ConstantData::from(&mask[..]));
                b.ins().shuffle(x, y, mask)
            };
            let columns = if w == 2 {
                vec![
                    interleave(b, rows[0], rows[1], 8, false),
                    interleave(b, rows[0], rows[1], 8, true),
                ]
            } else {
                let low01 = interleave(b, rows[0], rows[1], 4, false);
                let low23 = interleave(b, rows[2], rows[3], 4, false);
                let high01 = interleave(b, rows[0], rows[1], 4, true);
                let high23 = interleave(b, rows[2], rows[3], 4, true);
                vec![
                    interleave(b, low01, low23, 8, false),
                    interleave(b, low01, low23, 8, true),
                    interleave(b, high01, high23, 8, false),
                    interleave(b, high01, high23, 8, true),
                ]
            };
            out.push(
                columns
                    .into_iter()
                    .map(|v| b.ins().bitcast(ty, bitcast_flags(), v))
                    .collect(),
            );
        }
        Ok(out)
    }

    /// The addresses of point `j` of a reduced row: each access's `ptrs` entry advanced by `j`
    /// of its `steps` (bytes per point; a step of 0 keeps the address).
    fn point_pointers(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        ptrs: &[Value],
        steps: &[i64],
        j: Value,
    ) -> Vec<Value> {
        ptrs.iter()
            .zip(steps)
            .map(|(&p, &step)| {
                if step == 0 {
                    p
                } else {
                    let bytes = self.scale(b, j, step);
                    self.add(b, p, bytes)
                }
            })
            .collect()
    }

    /// Finishes the accumulators `accs` of the `w` outputs at column `col` of row `row` (a
    /// mean divides by `reduced_numel`) and stores them at `row * cols + col ..`.
    fn store_reduced(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        accs: &[Value],
        row: Value,
        cols: usize,
        col: Value,
        reduced_numel: usize,
    ) -> Result<(), BackendError> {
        let w = self.width;
        let first = b.ins().imul_imm_s(row, cols as i64);
        let first = b.ins().iadd(first, col);
        for (&acc, (op, buf, dtype)) in accs.iter().zip(self.reductions()?) {
            let mut e = Emitter {
                b: &mut *b,
                w,
                imports: self.imports,
            };
            let finished = finish(&mut e, op, acc, dtype, reduced_numel)?;
            let base = self.base(buf)?;
            let byte = b.ins().imul_imm_s(first, dtype.size_bytes() as i64);
            let addr = b.ins().iadd(base, byte);
            b.ins().store(mem(), finished, addr, 0);
        }
        Ok(())
    }

    /// The groups of `w` outputs at the vector positions of columns `start..end` (at least a
    /// vector long) of row `row` (`row_offs`: its offsets), in tiles of as many groups as
    /// `TILE` cells hold (`TILE / (inner * w)`, each group's reduced row staged `w` lanes per
    /// point): each ops segment runs over the tile's groups and their rows' points, each
    /// routine once over all the tile's staged values (long calls keep the routines in their
    /// vector loops), then each group folds its own values in row order into one accumulator
    /// per lane, as the untiled loop folds them, and stores its outputs. The last group of a
    /// ragged end starts at `end - w`, as [`Gen::emit_vector_positions`] does, and stores a few
    /// outputs again with the same values.
    #[allow(clippy::too_many_arguments)]
    fn emit_across_tiles(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        plan: &TilePlan,
        row: &AcrossRow<'_>,
        row_index: Value,
        row_offs: &[Value],
        start: Value,
        end: Value,
    ) -> Result<(), BackendError> {
        /// Groups whose rows fold side by side.
        const FOLD_GROUPS: i64 = 4;
        let w = self.width;
        let lanes = i64::from(w);
        let point_cells = (row.inner as i64) * lanes;
        // An empty reduced row (no points) stages nothing: one group per tile then.
        let per_tile = (TILE as i64).checked_div(point_cells).unwrap_or(1).max(1);
        let ptrs = self.pointers(b, row_offs)?;
        let reduces = self.reductions()?;
        let cells = reduces
            .iter()
            .zip(&plan.reduced)
            .map(|(&(op, _, dtype), def)| {
                plan.staged
                    .get(def)
                    .map(|&(stack, cell)| (op, dtype, stack, i64::from(cell)))
                    .ok_or_else(|| internal("reduced value not staged"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if cells.len() != reduces.len() {
            return Err(internal("tiled reduction without its reduced values"));
        }
        self.emit_while_below(b, start, end, &mut |g, b, first| {
            // The tile's groups: up to `per_tile`, as many as cover what is left of the row.
            let left = b.ins().isub(end, first);
            let left = b.ins().iadd_imm_s(left, lanes - 1);
            let lanes_value = b.ins().iconst(types::I64, lanes);
            let groups = b.ins().udiv(left, lanes_value);
            let cap = b.ins().iconst(types::I64, per_tile);
            let groups = b.ins().umin(groups, cap);
            let last = b.ins().iadd_imm_s(end, -lanes);
            let position = |b: &mut FunctionBuilder<'_>, k: Value| {
                let offset = b.ins().imul_imm_s(k, lanes);
                let col = b.ins().iadd(first, offset);
                b.ins().umin(col, last)
            };
            let zero = b.ins().iconst(types::I64, 0);
            let points = b.ins().iconst(types::I64, row.inner as i64);
            for segment in &plan.segments {
                match segment {
                    Segment::Ops { insts, loads } => {
                        g.emit_loop(b, zero, groups, 1, &[], &mut |g, b, k, _| {
                            let col = position(b, k);
                            let group_cell = b.ins().imul_imm_s(k, point_cells);
                            g.emit_loop(b, zero, points, 1, &[], &mut |g, b, j, _| {
                                let at = g.point_pointers(b, &ptrs, row.row_steps, j);
                                let point = g.scale(b, j, lanes);
                                let cell = g.add(b, group_cell, point);
                                g.emit_segment(
                                    b,
                                    w,
                                    plan,
                                    insts,
                                    loads,
                                    SegmentAt::Lanes { pos: col, cell },
                                    &at,
                                )?;
                                Ok(Vec::new())
                            })?;
                            Ok(Vec::new())
                        })?;
                    }
                    Segment::Call { .. } => {
                        let count = b.ins().imul_imm_s(groups, point_cells);
                        g.emit_routine_call(b, plan, segment, first, count, &ptrs)?;
                    }
                }
            }
            // Each group folds its values in row order, one dependent add per point: `FOLD_GROUPS`
            // groups fold side by side (independent chains hide the add's latency), then single
            // groups fold what is left.
            let fold = |g: &mut Self, b: &mut FunctionBuilder<'_>, k: Value, count: i64| {
                let mut accs = Vec::with_capacity(reduces.len() * count as usize);
                for _ in 0..count {
                    for &(op, _, dtype) in &reduces {
                        let mut e = Emitter {
                            b: &mut *b,
                            w,
                            imports: g.imports,
                        };
                        accs.push(e.constant(identity(op, dtype)?));
                    }
                }
                let (_, accs) = g.emit_loop(b, zero, points, 1, &accs, &mut |g, b, j, accs| {
                    let mut accs = accs.to_vec();
                    let row_cell = b.ins().imul_imm_s(k, row.inner as i64);
                    let row_cell = b.ins().iadd(row_cell, j);
                    for (n, group_accs) in accs.chunks_mut(reduces.len()).enumerate() {
                        let cell = b.ins().iadd_imm_s(row_cell, n as i64 * row.inner as i64);
                        for (acc, &(op, dtype, stack, bytes)) in group_accs.iter_mut().zip(&cells) {
                            let base = g.stack_base(b, stack);
                            let offset = g.scale(b, cell, bytes * lanes);
                            let addr = g.add(b, base, offset);
                            let value = b.ins().load(cl_type(dtype, w), MemFlagsData::trusted(), addr, 0);
                            let mut e = Emitter {
                                b: &mut *b,
                                w,
                                imports: g.imports,
                            };
                            *acc = e.combine(op, *acc, value, dtype)?;
                        }
                    }
                    Ok(accs)
                })?;
                for (n, group_accs) in accs.chunks(reduces.len()).enumerate() {
                    let kn = b.ins().iadd_imm_s(k, n as i64);
                    let col = position(b, kn);
                    g.store_reduced(b, group_accs, row_index, row.cols, col, row.reduced_numel)?;
                }
                Ok::<(), BackendError>(())
            };
            let (k, _) = g.emit_loop(b, zero, groups, FOLD_GROUPS, &[], &mut |g, b, k, _| {
                fold(g, b, k, FOLD_GROUPS)?;
                Ok(Vec::new())
            })?;
            g.emit_loop(b, k, groups, 1, &[], &mut |g, b, k, _| {
                fold(g, b, k, 1)?;
                Ok(Vec::new())
            })?;
            Ok(b.ins().iadd_imm_s(first, per_tile * lanes))
        })
    }

    /// Runs `body` at every vector position `at` of `start..end` (at least a vector long): one
    /// body, entered once more at `end - w` for a ragged end (recomputing a few points is
    /// harmless: no output overlaps an input, so the same values are stored again). One body
    /// copy keeps compile time low.
    fn emit_vector_positions(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        body: &mut PositionBody<'_, Self>,
    ) -> Result<(), BackendError> {
        self.emit_vector_positions_carrying(
            b,
            start,
            end,
            &[],
            &mut |_, _, _: &[Value]| Ok(Vec::new()),
            &mut |_, _, _: Value| Ok(Vec::new()),
            &mut |g, b, at, _| body(g, b, at),
        )
    }

    /// [`Gen::emit_vector_positions`] carrying values (`init` at `start`) from one position to
    /// the next: `advance` gives the next position's from the current ones, `fresh` the ones at
    /// a position (the ragged end's).
    #[allow(clippy::too_many_arguments)]
    fn emit_vector_positions_carrying(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        init: &[Value],
        advance: &mut CarryAdvance<'_, Self>,
        fresh: &mut CarryFresh<'_, Self>,
        body: &mut LoopBody<'_, Self, ()>,
    ) -> Result<(), BackendError> {
        let w = i64::from(self.width);
        let header = b.create_block();
        let body_block = b.create_block();
        let ragged = b.create_block();
        let exit = b.create_block();
        for block in [header, body_block, ragged] {
            b.append_block_param(block, types::I64);
        }
        for &v in init {
            let ty = b.func.dfg.value_type(v);
            b.append_block_param(header, ty);
            b.append_block_param(body_block, ty);
        }
        b.ins().jump(header, &position_args(start, init));
        b.switch_to_block(header);
        let params = b.block_params(header).to_vec();
        let (at, vals) = (params[0], &params[1..]);
        let next = b.ins().iadd_imm_s(at, w);
        let fits = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, next, end);
        b.ins().brif(
            fits,
            body_block,
            &position_args(at, vals),
            ragged,
            &[BlockArg::Value(at)],
        );
        b.switch_to_block(body_block);
        let params = b.block_params(body_block).to_vec();
        let (at, vals) = (params[0], &params[1..]);
        body(self, b, at, vals)?;
        let next = b.ins().iadd_imm_s(at, w);
        let next_vals = advance(self, b, vals)?;
        b.ins().jump(header, &position_args(next, &next_vals));
        // Points left over: run the body once more on the last `w` points of the range.
        b.switch_to_block(ragged);
        let at = b.block_params(ragged)[0];
        let left = b.ins().icmp(IntCC::UnsignedLessThan, at, end);
        let last = b.ins().iadd_imm_s(end, -w);
        if init.is_empty() {
            b.ins()
                .brif(left, body_block, &[BlockArg::Value(last)], exit, &[]);
        } else {
            // The carried values at `end - w` are only made when a ragged end is there.
            let ragged_end = b.create_block();
            b.ins().brif(left, ragged_end, &[], exit, &[]);
            b.switch_to_block(ragged_end);
            let last_vals = fresh(self, b, last)?;
            b.ins().jump(body_block, &position_args(last, &last_vals));
        }
        b.switch_to_block(exit);
        Ok(())
    }

    /// `for at in (start..end).step_by(step)` while a whole step fits (`at + step <= end`),
    /// carrying `carried` values through block parameters. Returns the first `at` not processed
    /// and the final carried values.
    fn emit_loop(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        start: Value,
        end: Value,
        step: i64,
        carried: &[Value],
        body: &mut LoopBody<'_, Self>,
    ) -> Result<(Value, Vec<Value>), BackendError> {
        let header = b.create_block();
        let body_block = b.create_block();
        let exit = b.create_block();
        b.append_block_param(header, types::I64);
        b.append_block_param(exit, types::I64);
        for &v in carried {
            let ty = b.func.dfg.value_type(v);
            b.append_block_param(header, ty);
            b.append_block_param(exit, ty);
        }
        b.ins().jump(header, &position_args(start, carried));
        b.switch_to_block(header);
        let params = b.block_params(header).to_vec();
        let (at, vals) = (params[0], params[1..].to_vec());
        let next = b.ins().iadd_imm_s(at, step);
        let fits = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, next, end);
        b.ins()
            .brif(fits, body_block, &[], exit, &position_args(at, &vals));
        b.switch_to_block(body_block);
        let new_vals = body(self, b, at, &vals)?;
        let new_vals = if new_vals.is_empty() {
            vals.clone()
        } else {
            new_vals
        };
        let next = b.ins().iadd_imm_s(at, step);
        b.ins().jump(header, &position_args(next, &new_vals));
        b.switch_to_block(exit);
        let out = b.block_params(exit).to_vec();
        Ok((out[0], out[1..].to_vec()))
    }

    /// The body at position `at` of the innermost dimension, `w` lanes at once. Reduction
    /// sources are returned in `reduced` (in `Reduce` order) for the caller to combine.
    fn emit_body(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        at: Value,
        offs: &[Value],
        reduced: &mut Vec<(usize, Value)>,
    ) -> Result<(), BackendError> {
        let mut slots = self.preamble_slots(b, w);
        if w > 1 && self.lane_steps.is_some() {
            // The preamble's values are splats.
            for (s, v) in slots.iter().enumerate() {
                if let (Some(v), Some(DType::I32)) = (v, self.kernel().slots.get(s)) {
                    self.note_step(*v, 0);
                }
            }
        }
        let body = self.kernel().body.clone();
        let plan = self.fold_plan(w, at, offs);
        for (i, inst) in body.iter().enumerate() {
            match (plan.as_ref().map(|p| &p[i]), inst) {
                (Some(Fold::Skip), _) => continue,
                (Some(Fold::Constant(lanes)), _) => {
                    if let Some(dst) = inst.dst() {
                        slots[dst.index()] = Some(self.lane_constants(b, w, lanes));
                    }
                    continue;
                }
                (Some(Fold::Alias(src)), _) => {
                    if let Some(dst) = inst.dst() {
                        slots[dst.index()] = slots.get(src.index()).copied().flatten();
                    }
                    continue;
                }
                (Some(Fold::GatherPast(offset, elements)), Inst::Gather { dst, buf, .. }) => {
                    let dtype = self.slot_dtype(*dst)?;
                    let base = self.base(*buf)?;
                    let size = dtype.size_bytes() as i64;
                    let bytes = self.scale(b, *offset, size);
                    let row = self.add(b, base, bytes);
                    let lanes: Vec<Value> = elements
                        .iter()
                        .map(|&e| {
                            let addr = self.add_imm(b, row, e * size);
                            self.load_scalar(b, addr, None, dtype)
                        })
                        .collect();
                    slots[dst.index()] = Some(self.assemble(b, w, &lanes, dtype));
                    continue;
                }
                (Some(Fold::GatherAt(elements)), Inst::Gather { dst, buf, .. }) => {
                    let dtype = self.slot_dtype(*dst)?;
                    let base = self.base(*buf)?;
                    let lanes: Vec<Value> = elements
                        .iter()
                        .map(|&e| {
                            let addr = self.add_imm(b, base, (e * dtype.size_bytes()) as i64);
                            self.load_scalar(b, addr, None, dtype)
                        })
                        .collect();
                    slots[dst.index()] = Some(self.assemble(b, w, &lanes, dtype));
                    continue;
                }
                _ => {}
            }
            let access = self.info.access_of.get(i).copied().flatten();
            self.emit_inst(
                b,
                w,
                inst,
                access.map(|a| (a, at)),
                &mut slots,
                offs,
                Some(i),
                reduced,
            )?;
        }
        Ok(())
    }

    /// What to do with each body instruction at position `at` (`w` lanes) of the row whose
    /// pointers are `offs`, when some values there are constants: a position written out at a
    /// constant column (a small block, a concatenation's row) knows its indices lane by lane,
    /// and the elements of literal tables it reads, so the comparisons of a position with a
    /// bound, the selects they drive and lookups in literal tables are decided at compile time;
    /// a gather at a known index is a load of a known element (no clamp), and what only an
    /// unselected arm reads is not emitted at all (its loads included, which Cranelift would
    /// keep). `None` when nothing folds (a loop's positions): the body is emitted as it is.
    /// Folded values are computed by `rfx_ir::semantics`, the interpreters' definitions, and
    /// only for exactly rounded ops (whose CPU code gives those bits): indices, literals,
    /// comparisons, `not`, `and`, `or`, `neg`, `abs`, `floor`, `ceil`, `round`, `sqrt`, `add`,
    /// `sub`, `mul`, `div`, `min`, `max`, casts and selects.
    fn fold_plan(&self, w: u8, at: Value, offs: &[Value]) -> Option<Vec<Fold>> {
        let kernel = self.kernel();
        if kernel.body.iter().any(|inst| matches!(inst, Inst::Scan { .. })) {
            return None;
        }
        let lanes = usize::from(w.max(1));
        let known = |v: Value| self.known.borrow().get(&v).copied();
        let at = match known(at) {
            Some(Known::Const(p)) => Some(p),
            _ => None,
        };
        // Element `e` of access `k` in each lane (its position's elements, or every lane's
        // when the access does not advance along the vector).
        let lane_elements = |k: usize, first: i64| -> Option<Vec<i64>> {
            let stride = i64::try_from(self.inner_stride(k)).ok()?;
            if stride == 0 {
                return Some(vec![first; lanes]);
            }
            let p = at?;
            Some((0..lanes as i64).map(|l| first + (p + l) * stride).collect())
        };
        let slot_count = kernel.slots.len();
        // The preamble's constants, by slot.
        let mut pre_known: Vec<Option<Vec<Scalar>>> = vec![None; slot_count];
        for inst in &kernel.preamble {
            if let Inst::Const { dst, value } = inst
                && let Some(slot) = pre_known.get_mut(dst.index())
            {
                *slot = Some(vec![*value; lanes]);
            }
        }
        let n = kernel.body.len();
        // The body instruction whose value each slot holds (`None`: the preamble's).
        let mut current: Vec<Option<usize>> = vec![None; slot_count];
        let mut values: Vec<Option<Vec<Scalar>>> = vec![None; n];
        let mut chosen: Vec<Option<SlotId>> = vec![None; n];
        let mut gathered: Vec<Option<Vec<usize>>> = vec![None; n];
        // Values that are an index offset of known range plus a constant per lane.
        let mut affine: Vec<Option<(Value, Vec<i64>)>> = vec![None; n];
        let mut past: Vec<Option<(Value, Vec<i64>)>> = vec![None; n];
        let mut operands: Vec<Vec<Option<usize>>> = Vec::with_capacity(n);
        let mut folds = false;
        for (i, inst) in kernel.body.iter().enumerate() {
            let value_of = |slot: SlotId| -> Option<Vec<Scalar>> {
                match current.get(slot.index()).copied().flatten() {
                    Some(j) => values[j].clone(),
                    None => pre_known.get(slot.index()).cloned().flatten(),
                }
            };
            let lanewise =
                |f: &dyn Fn(usize) -> Option<Scalar>| -> Option<Vec<Scalar>> { (0..lanes).map(f).collect() };
            operands.push(
                inst.srcs()
                    .iter()
                    .map(|s| current.get(s.index()).copied().flatten())
                    .collect(),
            );
            let access = self.info.access_of.get(i).copied().flatten();
            let affine_of = |slot: SlotId| match current.get(slot.index()).copied().flatten() {
                Some(j) => affine[j].clone(),
                None => None,
            };
            // An integral constant per lane, exact in the index's dtype.
            let offsets_of = |v: Option<Vec<Scalar>>| -> Option<Vec<i64>> {
                v?.into_iter()
                    .map(|x| match x {
                        Scalar::I32(k) => Some(i64::from(k)),
                        Scalar::F64(k) if k.fract() == 0.0 && k.abs() < 9.0e15 => Some(k as i64),
                        _ => None,
                    })
                    .collect()
            };
            let this_affine = match inst {
                Inst::Index { dst, .. }
                    if matches!(kernel.slots.get(dst.index()), Some(DType::I32 | DType::F64)) =>
                {
                    access.and_then(|k| {
                        let offset = *offs.get(k)?;
                        let (row, first) = match known(offset) {
                            Some(Known::Offset(row, c)) => (row, c),
                            None => (offset, 0),
                            Some(Known::Const(_)) => return None,
                        };
                        self.index_ranges.contains_key(&row).then_some(())?;
                        Some((row, lane_elements(k, first)?))
                    })
                }
                Inst::Binary {
                    op: op @ (BinaryOp::Add | BinaryOp::Sub),
                    lhs,
                    rhs,
                    ..
                } => match (affine_of(*lhs), affine_of(*rhs)) {
                    (Some((row, a)), None) => offsets_of(value_of(*rhs)).map(|b| {
                        let sign = if *op == BinaryOp::Sub { -1 } else { 1 };
                        (row, a.iter().zip(&b).map(|(x, y)| x + sign * y).collect())
                    }),
                    (None, Some((row, b))) if *op == BinaryOp::Add => offsets_of(value_of(*lhs))
                        .map(|a| (row, a.iter().zip(&b).map(|(x, y)| x + y).collect())),
                    _ => None,
                },
                _ => None,
            };
            values[i] = match inst {
                Inst::Const { value, .. } => Some(vec![*value; lanes]),
                Inst::Index { dst, .. } => access.and_then(|k| {
                    let Some(Known::Const(o)) = offs.get(k).and_then(|&v| known(v)) else {
                        return None;
                    };
                    let dtype = *kernel.slots.get(dst.index())?;
                    lane_elements(k, o)?
                        .into_iter()
                        .map(|e| {
                            usize::try_from(e)
                                .ok()
                                .and_then(|e| rfx_ir::semantics::index_value(e, dtype))
                        })
                        .collect()
                }),
                Inst::Load { buf, .. } => access.and_then(|k| {
                    let values = self.info.literals.get(buf.index()).copied().flatten()?;
                    // The pointer is the literal's base plus a known displacement.
                    let (literal, ptr) = (self.base(*buf).ok()?, *offs.get(k)?);
                    let bytes = match known(ptr) {
                        Some(Known::Offset(base, bytes)) if base == literal => bytes,
                        None if ptr == literal => 0,
                        _ => return None,
                    };
                    let size = i64::try_from(self.info.accesses.get(k)?.dtype.size_bytes()).ok()?;
                    if bytes % size != 0 {
                        return None;
                    }
                    lane_elements(k, bytes / size)?
                        .into_iter()
                        .map(|e| usize::try_from(e).ok().and_then(|e| values.get(e).copied()))
                        .collect()
                }),
                Inst::Unary { op, src, .. } => (|| {
                    let exact = matches!(
                        op,
                        UnaryOp::Not
                            | UnaryOp::Neg
                            | UnaryOp::Abs
                            | UnaryOp::Floor
                            | UnaryOp::Ceil
                            | UnaryOp::Round
                            | UnaryOp::Sqrt
                    );
                    let x = value_of(*src).filter(|_| exact)?;
                    lanewise(&|l| rfx_ir::semantics::unary(*op, x[l]))
                })(),
                Inst::Cast { dst, src } => (|| {
                    let x = value_of(*src)?;
                    let to = *kernel.slots.get(dst.index())?;
                    lanewise(&|l| Some(rfx_ir::semantics::cast(x[l], to)))
                })(),
                Inst::Compare { op, lhs, rhs, .. } => (|| {
                    let (a, b) = (value_of(*lhs)?, value_of(*rhs)?);
                    lanewise(&|l| rfx_ir::semantics::compare(*op, a[l], b[l]).map(Scalar::Bool))
                })(),
                Inst::Binary { op, lhs, rhs, .. } => (|| {
                    let (a, b) = (value_of(*lhs), value_of(*rhs));
                    let all = |v: &Option<Vec<Scalar>>, x: bool| {
                        v.as_ref()
                            .is_some_and(|v| v.iter().all(|&s| s == Scalar::Bool(x)))
                    };
                    match op {
                        BinaryOp::And if all(&a, false) || all(&b, false) => {
                            Some(vec![Scalar::Bool(false); lanes])
                        }
                        BinaryOp::Or if all(&a, true) || all(&b, true) => {
                            Some(vec![Scalar::Bool(true); lanes])
                        }
                        BinaryOp::And
                        | BinaryOp::Or
                        | BinaryOp::Add
                        | BinaryOp::Sub
                        | BinaryOp::Mul
                        | BinaryOp::Div
                        | BinaryOp::Min
                        | BinaryOp::Max => {
                            let (a, b) = (a?, b?);
                            lanewise(&|l| rfx_ir::semantics::binary(*op, a[l], b[l]))
                        }
                        _ => None,
                    }
                })(),
                Inst::Select {
                    cond,
                    on_true,
                    on_false,
                    ..
                } => {
                    let c = value_of(*cond);
                    let (t, f) = (value_of(*on_true), value_of(*on_false));
                    match c.as_deref() {
                        Some([Scalar::Bool(first), rest @ ..])
                            if rest.iter().all(|&x| x == Scalar::Bool(*first)) =>
                        {
                            let pick = if *first { *on_true } else { *on_false };
                            chosen[i] = Some(pick);
                            folds = true;
                            if *first { t } else { f }
                        }
                        Some(c) => match (t, f) {
                            (Some(t), Some(f)) => lanewise(&|l| {
                                Some(rfx_ir::semantics::select(c[l] == Scalar::Bool(true), t[l], f[l]))
                            }),
                            _ => None,
                        },
                        None => None,
                    }
                }
                Inst::Gather { buf, index, .. } => {
                    let len = self.info.buffer_lens.get(buf.index()).copied();
                    let elements: Option<Vec<usize>> = value_of(*index).zip(len).and_then(|(index, len)| {
                        index
                            .into_iter()
                            .map(|i| rfx_ir::semantics::clamp_index(i, len))
                            .collect()
                    });
                    // An offset of known range plus constants that stay inside the buffer at
                    // every row: loads past the row's offset, no clamp.
                    if let (Some((row, firsts)), Some(len)) = (affine_of(*index), len)
                        && let Some(&last) = self.index_ranges.get(&row)
                        && firsts
                            .iter()
                            .all(|&c| c >= 0 && i64::try_from(len).is_ok_and(|len| last + c < len))
                    {
                        past[i] = Some((row, firsts));
                        folds = true;
                    }
                    match elements {
                        None => None,
                        Some(elements) => {
                            folds = true;
                            // A lookup in a literal table is its value; elsewhere a load.
                            match self.info.literals.get(buf.index()).copied().flatten() {
                                Some(values) => elements.iter().map(|&e| values.get(e).copied()).collect(),
                                None => {
                                    gathered[i] = Some(elements);
                                    None
                                }
                            }
                        }
                    }
                }
                _ => None,
            };
            affine[i] = this_affine;
            folds |= values[i].is_some() && !matches!(inst, Inst::Const { .. });
            if let Some(dst) = inst.dst()
                && let Some(slot) = current.get_mut(dst.index())
            {
                *slot = Some(i);
            }
        }
        if !folds {
            return None;
        }
        // Live instructions, from the stores and reductions back.
        let mut live = vec![false; n];
        for (i, inst) in kernel.body.iter().enumerate().rev() {
            let root = matches!(inst, Inst::Store { .. } | Inst::Reduce { .. });
            if !(root || live[i]) {
                continue;
            }
            live[i] = true;
            if !root && (values[i].is_some() || gathered[i].is_some() || past[i].is_some()) {
                continue;
            }
            let srcs = inst.srcs();
            for (src, def) in srcs.iter().zip(&operands[i]) {
                if chosen[i].is_some_and(|pick| pick != *src) {
                    continue;
                }
                if let Some(j) = *def {
                    live[j] = true;
                }
            }
        }
        Some(
            kernel
                .body
                .iter()
                .enumerate()
                .map(|(i, inst)| {
                    if !live[i] {
                        Fold::Skip
                    } else if matches!(
                        inst,
                        Inst::Const { .. } | Inst::Store { .. } | Inst::Reduce { .. }
                    ) {
                        Fold::Emit
                    } else if let Some(lanes) = values[i].take() {
                        Fold::Constant(lanes)
                    } else if let Some(pick) = chosen[i] {
                        Fold::Alias(pick)
                    } else if let Some(elements) = gathered[i].take() {
                        Fold::GatherAt(elements)
                    } else if let Some((row, elements)) = past[i].take() {
                        Fold::GatherPast(row, elements)
                    } else {
                        Fold::Emit
                    }
                })
                .collect(),
        )
    }

    /// A `w`-lane value of the constants `lanes` (one per lane; a scalar at width 1).
    fn lane_constants(&self, b: &mut FunctionBuilder<'_>, w: u8, lanes: &[Scalar]) -> Value {
        let mut e = Emitter {
            b: &mut *b,
            w,
            imports: self.imports,
        };
        match lanes {
            [first, rest @ ..] if rest.iter().all(|x| x == first) => e.constant(*first),
            _ => {
                let mut bytes = Vec::with_capacity(16);
                for lane in lanes {
                    match *lane {
                        Scalar::F32(v) => bytes.extend_from_slice(&v.to_le_bytes()),
                        Scalar::F64(v) => bytes.extend_from_slice(&v.to_le_bytes()),
                        Scalar::I32(v) => bytes.extend_from_slice(&v.to_le_bytes()),
                        Scalar::Bool(v) => {
                            let width = if w == 2 { 8 } else { 4 };
                            bytes.extend(std::iter::repeat_n(if v { 0xff } else { 0 }, width));
                        }
                    }
                }
                let dtype = lanes.first().map_or(DType::F32, |s| s.dtype());
                let handle = b.func.dfg.constants.insert(bytes.into());
                b.ins().vconst(cl_type(dtype, w), handle)
            }
        }
    }

    /// Splats the preamble slots the body reads to the kernel's vector width, once, in the
    /// current (entry) block, when the innermost loop has at least `HOIST_MIN_ELEMS` elements.
    /// Without Cranelift's mid-end (no LICM) a splat made in a loop body is rebuilt on every
    /// pass: five broadcasts per pass of PID's clamp. Short kernels (a control loop's n = 1
    /// call) keep building them where they are used, and pay nothing when no pass runs.
    fn hoist_splats(&mut self, b: &mut FunctionBuilder<'_>) {
        let kernel = self.kernel();
        let w = self.width;
        self.pre_splat = vec![None; self.pre_scalar.len()];
        if w == 1 || kernel.dims.last().copied().unwrap_or(1) < HOIST_MIN_ELEMS {
            return;
        }
        let mut read = vec![false; self.pre_scalar.len()];
        for inst in &kernel.body {
            for src in inst.srcs() {
                if let Some(r) = read.get_mut(src.index()) {
                    *r = true;
                }
            }
        }
        let imports = self.imports;
        for (s, v) in self.pre_scalar.iter().enumerate() {
            if let (Some(v), true) = (v, read[s]) {
                let dtype = kernel.slots[s];
                self.pre_splat[s] = Some(
                    Emitter {
                        b: &mut *b,
                        w,
                        imports,
                    }
                    .splat(*v, dtype),
                );
            }
        }
    }

    /// The slot values at the start of a body of width `w`: the preamble's, splatted.
    fn preamble_slots(&self, b: &mut FunctionBuilder<'_>, w: u8) -> Vec<Option<Value>> {
        (0..self.pre_scalar.len())
            .map(|s| self.preamble_slot(b, w, s))
            .collect()
    }

    /// The preamble value of slot `s` at `w` lanes ([`Gen::preamble_slots`]).
    fn preamble_slot(&self, b: &mut FunctionBuilder<'_>, w: u8, s: usize) -> Option<Value> {
        let v = self.pre_scalar.get(s).copied().flatten();
        let hoisted = self
            .pre_splat
            .get(s)
            .copied()
            .flatten()
            .filter(|_| w == self.width);
        match (v, w) {
            _ if hoisted.is_some() => hoisted,
            (Some(v), 1) => Some(v),
            (Some(v), _) => {
                let dtype = self.kernel().slots[s];
                let imports = self.imports;
                Some(self.pure(b, Pure::Splat, v.as_u32(), i64::from(w), |b| {
                    Emitter { b, w, imports }.splat(v, dtype)
                }))
            }
            (None, _) => None,
        }
    }

    /// [`Gen::preamble_slots`] for only the slots that the body instructions `insts` read (the
    /// others `None`): a tiled kernel has an ops segment between every two routine calls, and
    /// building every preamble value in each would make its compile time quadratic in its
    /// length.
    fn preamble_slots_read(&self, b: &mut FunctionBuilder<'_>, w: u8, insts: &[usize]) -> Vec<Option<Value>> {
        let body = &self.kernel().body;
        let mut slots = vec![None; self.pre_scalar.len()];
        for inst in insts.iter().filter_map(|&i| body.get(i)) {
            for src in inst.srcs() {
                if slots.get(src.index()).is_some_and(Option::is_none) {
                    slots[src.index()] = self.preamble_slot(b, w, src.index());
                }
            }
        }
        slots
    }

    /// Emits one instruction at width `w`. `access` is `(access index, position)` for loads and
    /// stores of the body; preamble loads read element 0.
    #[allow(clippy::too_many_arguments)]
    fn emit_inst(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        inst: &Inst,
        access: Option<(usize, Value)>,
        slots: &mut [Option<Value>],
        offs: &[Value],
        body_index: Option<usize>,
        reduced: &mut Vec<(usize, Value)>,
    ) -> Result<(), BackendError> {
        let get = |slots: &[Option<Value>], s: SlotId| {
            slots
                .get(s.index())
                .copied()
                .flatten()
                .ok_or_else(|| internal(format!("slot {s} read before written")))
        };
        let value = match inst {
            Inst::Load { dst, buf, offset, .. } => {
                let dtype = self.slot_dtype(*dst)?;
                let base = self.base(*buf)?;
                let preloaded = body_index.and_then(|i| self.preloaded.get(&i).copied());
                let v = match (preloaded, access) {
                    (Some(v), _) => v,
                    (None, None) => {
                        let addr = self.add_imm(b, base, (offset * dtype.size_bytes()) as i64);
                        self.load_scalar(b, addr, None, dtype)
                    }
                    (None, Some((k, at))) => self.load(b, w, k, base, at, offs, dtype)?,
                };
                Some((*dst, v))
            }
            Inst::Gather { dst, buf, index } => {
                let dtype = self.slot_dtype(*dst)?;
                let index_dtype = self.slot_dtype(*index)?;
                let index = get(slots, *index)?;
                let step = self.step_of(index);
                Some((*dst, self.gather(b, w, *buf, (index, index_dtype), step, dtype)?))
            }
            Inst::Index { dst, .. } => {
                let dtype = self.slot_dtype(*dst)?;
                let v = match access {
                    // In the preamble every stride is 0.
                    None => {
                        let zero = rfx_ir::semantics::index_value(0, dtype)
                            .ok_or_else(|| internal(format!("index of dtype {dtype}")))?;
                        Emitter {
                            b: &mut *b,
                            w: 1,
                            imports: self.imports,
                        }
                        .constant(zero)
                    }
                    Some((k, at)) => {
                        let v = self.index(b, w, k, at, offs, dtype)?;
                        if w > 1 && dtype == DType::I32 {
                            let step = if self.row_indices.contains_key(&k) {
                                0
                            } else {
                                self.inner_stride(k)
                            };
                            if let Ok(step) = i64::try_from(step) {
                                self.note_step(v, step);
                            }
                        }
                        v
                    }
                };
                Some((*dst, v))
            }
            Inst::Const { dst, value } => {
                let mut e = Emitter {
                    b: &mut *b,
                    w,
                    imports: self.imports,
                };
                let v = e.constant(*value);
                if w > 1 && matches!(value, Scalar::I32(_)) {
                    self.note_step(v, 0);
                }
                Some((*dst, v))
            }
            Inst::Unary { dst, op, src } => {
                let dtype = self.slot_dtype(*src)?;
                let x = get(slots, *src)?;
                let mut e = Emitter {
                    b: &mut *b,
                    w,
                    imports: self.imports,
                };
                // Scalar code (the preamble: loop invariants and all of a one-element kernel;
                // reductions one output at a time; scalar tails) calls the tile routine where
                // there is one: about 5 ns for one element where the inline polynomial takes
                // 9–22.
                let by_routine = if w == 1 && op.is_transcendental() {
                    // A `sin` and a `cos` of one value: one `sincos` call computes both.
                    let pair = AotFn::for_op(*op, dtype).and_then(AotFn::sincos_part);
                    let block = e.b.current_block();
                    match (pair, block) {
                        (Some((routine, part)), Some(block))
                            if self.sincos.contains_key(&(block, x)) || self.has_trig_partner(*op, *src) =>
                        {
                            let results = match self.sincos.get(&(block, x)) {
                                Some(&pair) => Some(pair),
                                None => crate::transcendental::pair_by_routine(&mut e, routine, x, dtype),
                            };
                            if let Some(pair) = results {
                                self.sincos.insert((block, x), pair);
                            }
                            results.map(|(sin, cos)| if part == 0 { sin } else { cos })
                        }
                        _ => crate::transcendental::unary_by_routine(&mut e, *op, x, dtype),
                    }
                } else {
                    None
                };
                match by_routine {
                    Some(v) => Some((*dst, v)),
                    None => Some((*dst, e.unary(*op, x, dtype)?)),
                }
            }
            Inst::Binary { dst, op, lhs, rhs } => {
                let dtype = self.slot_dtype(*lhs)?;
                let (x, y) = (get(slots, *lhs)?, get(slots, *rhs)?);
                // A clamp's bounds are usually constants: one `minps`/`maxps` each instead of
                // the five-op NaN-propagating select (see `Emitter::min_max_by_const`).
                let constant = |s: SlotId| {
                    self.pre_const
                        .get(s.index())
                        .copied()
                        .flatten()
                        .filter(|c| !c.is_nan())
                };
                let by_const = match op {
                    BinaryOp::Min | BinaryOp::Max if dtype.is_float() && body_index.is_some() => {
                        match (constant(*lhs), constant(*rhs)) {
                            (_, Some(c)) if c != 0.0 => Some((x, y)),
                            (Some(_), _) => Some((y, x)),
                            _ => None,
                        }
                    }
                    _ => None,
                };
                if let Some((a, c)) = by_const {
                    let mut e = Emitter {
                        b: &mut *b,
                        w,
                        imports: self.imports,
                    };
                    Some((*dst, e.min_max_by_const(*op, a, c, cl_type(dtype, w))))
                } else if let Some(v) = self.contracted(b, *op, x, y, dtype) {
                    Some((*dst, v))
                } else {
                    let mut e = Emitter {
                        b: &mut *b,
                        w,
                        imports: self.imports,
                    };
                    let v = e.binary(*op, x, y, dtype)?;
                    if self.contract && *op == BinaryOp::Mul && dtype.is_float() {
                        self.products.insert(v, (x, y));
                    }
                    // Wrapping sums of evenly stepping lanes step evenly.
                    if let (Some(sx), Some(sy)) = (self.step_of(x), self.step_of(y)) {
                        let step = match op {
                            BinaryOp::Add => sx.checked_add(sy),
                            BinaryOp::Sub => sx.checked_sub(sy),
                            _ => None,
                        };
                        if let (Some(step), DType::I32) = (step, dtype) {
                            self.note_step(v, step);
                        }
                    }
                    Some((*dst, v))
                }
            }
            Inst::Compare { dst, op, lhs, rhs } => {
                let dtype = self.slot_dtype(*lhs)?;
                let (x, y) = (get(slots, *lhs)?, get(slots, *rhs)?);
                let mut e = Emitter {
                    b: &mut *b,
                    w,
                    imports: self.imports,
                };
                Some((*dst, e.compare(*op, x, y, dtype)))
            }
            Inst::Select {
                dst,
                cond,
                on_true,
                on_false,
            } => {
                let dtype = self.slot_dtype(*dst)?;
                let (c, x, y) = (get(slots, *cond)?, get(slots, *on_true)?, get(slots, *on_false)?);
                let mut e = Emitter {
                    b: &mut *b,
                    w,
                    imports: self.imports,
                };
                Some((*dst, e.select(c, x, y, cl_type(dtype, w))))
            }
            Inst::Cast { dst, src } => {
                let (from, to) = (self.slot_dtype(*src)?, self.slot_dtype(*dst)?);
                let x = get(slots, *src)?;
                let mut e = Emitter {
                    b: &mut *b,
                    w,
                    imports: self.imports,
                };
                Some((*dst, e.cast(x, from, to)?))
            }
            Inst::Store { buf, src, .. } => {
                let (k, at) = access.ok_or_else(|| internal("store outside the body"))?;
                let v = get(slots, *src)?;
                let base = self.base(*buf)?;
                self.store(b, w, k, base, at, offs, v)?;
                None
            }
            Inst::Reduce { src, .. } => {
                reduced.push((body_index.unwrap_or(0), get(slots, *src)?));
                None
            }
            Inst::Scan { dst, op, src, coef } => {
                let dtype = self.slot_dtype(*src)?;
                let x = get(slots, *src)?;
                let coef = coef.map(|c| get(slots, c)).transpose()?;
                let acc = body_index
                    .and_then(|i| self.scan_accs.iter_mut().find(|(at, _)| *at == i))
                    .ok_or_else(|| internal("a scan outside a scanning kernel's body"))?;
                let mut em = Emitter {
                    b: &mut *b,
                    w,
                    imports: self.imports,
                };
                // A linear recurrence scales the accumulator first (`coef * acc + x`, rounded
                // twice: never contracted, even under fast math).
                let scaled = match coef {
                    Some(coef) => em.binary(BinaryOp::Mul, coef, acc.1, dtype)?,
                    None => acc.1,
                };
                let next = em.combine(op.reduce_op(), scaled, x, dtype)?;
                acc.1 = next;
                Some((*dst, next))
            }
        };
        if let Some((dst, v)) = value
            && let Some(slot) = slots.get_mut(dst.index())
        {
            *slot = Some(v);
        }
        Ok(())
    }

    /// Fast-math contraction: `a * b + c`, `c + a * b`, `a * b - c` and `c - a * b` (float,
    /// any width) as one fused multiply-add when the first operand pair is a product emitted
    /// earlier in this function. The product itself stays for its other uses (Cranelift
    /// removes it when it has none). Only with fast math: the fused result is rounded once, so
    /// it can differ from the two-step result (it is never less accurate).
    fn contracted(
        &self,
        b: &mut FunctionBuilder<'_>,
        op: BinaryOp,
        x: Value,
        y: Value,
        dtype: DType,
    ) -> Option<Value> {
        if !self.contract || !dtype.is_float() {
            return None;
        }
        match op {
            BinaryOp::Add => {
                if let Some(&(a, c)) = self.products.get(&x) {
                    Some(b.ins().fma(a, c, y))
                } else {
                    let &(a, c) = self.products.get(&y)?;
                    Some(b.ins().fma(a, c, x))
                }
            }
            BinaryOp::Sub => {
                if let Some(&(a, c)) = self.products.get(&x) {
                    let neg = b.ins().fneg(y);
                    Some(b.ins().fma(a, c, neg))
                } else {
                    let &(a, c) = self.products.get(&y)?;
                    let neg = b.ins().fneg(a);
                    Some(b.ins().fma(neg, c, x))
                }
            }
            _ => None,
        }
    }

    /// The value `make` builds, or the one it built earlier in the current block for the same
    /// `(op, a, b)`.
    fn pure(
        &self,
        b: &mut FunctionBuilder<'_>,
        op: Pure,
        a: u32,
        imm: i64,
        make: impl FnOnce(&mut FunctionBuilder<'_>) -> Value,
    ) -> Value {
        let Some(block) = b.current_block() else {
            return make(b);
        };
        let key = (block, op, a, imm);
        if let Some(&value) = self.memo.borrow().get(&key) {
            return value;
        }
        let value = make(b);
        self.memo.borrow_mut().insert(key, value);
        value
    }

    /// The `i64` constant `c` (its form known to the folds below).
    fn const_i64(&self, b: &mut FunctionBuilder<'_>, c: i64) -> Value {
        let value = b.ins().iconst(types::I64, c);
        self.known.borrow_mut().insert(value, Known::Const(c));
        value
    }

    /// `v + imm` (an `i64`, wrapping), shared within the block: a constant for a constant `v`,
    /// and one addition to the base for a `v` that is itself a base plus a constant.
    fn add_imm(&self, b: &mut FunctionBuilder<'_>, v: Value, imm: i64) -> Value {
        if imm == 0 {
            return v;
        }
        let known = self.known.borrow().get(&v).copied();
        match known {
            Some(Known::Const(c)) => self.const_i64(b, c.wrapping_add(imm)),
            Some(Known::Offset(base, c)) => self.add_imm(b, base, c.wrapping_add(imm)),
            None => {
                let sum = self.pure(b, Pure::AddImm, v.as_u32(), imm, |b| b.ins().iadd_imm_s(v, imm));
                self.known.borrow_mut().insert(sum, Known::Offset(v, imm));
                sum
            }
        }
    }

    /// `v * factor` (a shift for powers of two: a byte size or a stride; wrapping), shared within
    /// the block; a constant for a constant `v`.
    fn scale(&self, b: &mut FunctionBuilder<'_>, v: Value, factor: i64) -> Value {
        let known = self.known.borrow().get(&v).copied();
        if let Some(Known::Const(c)) = known {
            return self.const_i64(b, c.wrapping_mul(factor));
        }
        self.pure(b, Pure::Scale, v.as_u32(), factor, |b| {
            if factor > 0 && (factor as u64).is_power_of_two() {
                b.ins().ishl_imm_u(v, i64::from(factor.trailing_zeros()))
            } else {
                b.ins().imul_imm_s(v, factor)
            }
        })
    }

    /// `x + y` (integers), shared within the block; an addition of a constant when either is
    /// one (see [`Gen::add_imm`]).
    fn add(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) -> Value {
        let (kx, ky) = {
            let known = self.known.borrow();
            (known.get(&x).copied(), known.get(&y).copied())
        };
        match (kx, ky) {
            (_, Some(Known::Const(c))) => self.add_imm(b, x, c),
            (Some(Known::Const(c)), _) => self.add_imm(b, y, c),
            _ => self.pure(b, Pure::Add, x.as_u32(), i64::from(y.as_u32()), |b| {
                b.ins().iadd(x, y)
            }),
        }
    }

    /// The address of stack slot `slot`, shared within the block.
    fn stack_base(&self, b: &mut FunctionBuilder<'_>, slot: StackSlot) -> Value {
        let ptr = self.ptr;
        self.pure(b, Pure::StackAddr, slot.as_u32(), 0, |b| {
            b.ins().stack_addr(ptr, slot, 0)
        })
    }

    /// The byte address of element `offs[k] + (at + lane) * inner_stride` of access `k`.
    fn address(
        &self,
        b: &mut FunctionBuilder<'_>,
        k: usize,
        _base: Value,
        at: Value,
        ptrs: &[Value],
        lane: u8,
    ) -> Value {
        // `ptrs[k]` is the byte address of access `k` at position 0 of the innermost loop.
        let access = &self.info.accesses[k];
        let step_bytes = (self.inner_stride(k) * access.elem_bytes()) as i64;
        if step_bytes == 0 {
            return ptrs[k];
        }
        let pos = self.add_imm(b, at, i64::from(lane));
        let step = self.scale(b, pos, step_bytes);
        self.add(b, ptrs[k], step)
    }

    /// Byte addresses from element offsets (per access).
    fn pointers(&self, b: &mut FunctionBuilder<'_>, offs: &[Value]) -> Result<Vec<Value>, BackendError> {
        self.info
            .accesses
            .iter()
            .zip(offs)
            .map(|(access, &off)| match access.buf {
                Some(buf) => {
                    let base = self.base(buf)?;
                    let size = access.dtype.size_bytes();
                    let bytes = self.scale(b, off, size as i64);
                    let at = self.add(b, base, bytes);
                    Ok(self.add_imm(b, at, (access.offset * size) as i64))
                }
                // An index's "address" is its value: the element offset itself.
                None => Ok(off),
            })
            .collect()
    }

    /// The pointers (as [`Gen::pointers`] makes them) of row `row` of a kernel whose rows
    /// span the loop dims `0..outer.len()` of extents `outer`, as constants: each access's base
    /// plus a constant byte offset, which instruction selection folds into every load and store.
    fn row_pointers(
        &self,
        b: &mut FunctionBuilder<'_>,
        row: usize,
        outer: &[usize],
    ) -> Result<Vec<Value>, BackendError> {
        let zero = self.const_i64(b, 0);
        let first = self.pointers(b, &vec![zero; self.info.accesses.len()])?;
        Ok(self.displaced_pointers(b, &first, row, 0, outer))
    }

    /// `ptrs` (as [`Gen::pointers`] makes them) moved to row `row` of a block that spans the
    /// loop dims `first..first + block.len()` of extents `block`: a constant displacement per
    /// access, in bytes for a buffer's pointer and in elements for an index's value.
    fn displaced_pointers(
        &self,
        b: &mut FunctionBuilder<'_>,
        ptrs: &[Value],
        row: usize,
        first: usize,
        block: &[usize],
    ) -> Vec<Value> {
        let mut idx = vec![0usize; block.len()];
        let mut rem = row;
        for d in (0..block.len()).rev() {
            let n = block[d].max(1);
            idx[d] = rem % n;
            rem /= n;
        }
        self.info
            .accesses
            .iter()
            .zip(ptrs)
            .map(|(access, &ptr)| {
                let elems: usize = idx
                    .iter()
                    .enumerate()
                    .map(|(d, &i)| i * access.strides.get(first + d).copied().unwrap_or(0))
                    .sum();
                let unit = if access.buf.is_some() {
                    access.dtype.size_bytes()
                } else {
                    1
                };
                // Inside the buffer (or below the verified index bound): far below i64::MAX.
                self.add_imm(b, ptr, (elems * unit) as i64)
            })
            .collect()
    }

    /// Elements access `k` advances per step of the vector loop.
    fn inner_stride(&self, k: usize) -> usize {
        self.inner_axis
            .and_then(|a| self.info.accesses[k].strides.get(a).copied())
            .unwrap_or(0)
    }

    fn load_scalar(
        &self,
        b: &mut FunctionBuilder<'_>,
        addr: Value,
        _k: Option<usize>,
        dtype: DType,
    ) -> Value {
        b.ins().load(cl_type(dtype, 1), mem(), addr, 0)
    }

    #[allow(clippy::too_many_arguments)]
    fn load(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        k: usize,
        base: Value,
        at: Value,
        offs: &[Value],
        dtype: DType,
    ) -> Result<Value, BackendError> {
        let inner = self.inner_stride(k);
        if w == 1 {
            let addr = self.address(b, k, base, at, offs, 0);
            return Ok(self.load_scalar(b, addr, Some(k), dtype));
        }
        if inner == 1 && dtype != DType::Bool {
            let addr = self.address(b, k, base, at, offs, 0);
            return Ok(b.ins().load(cl_type(dtype, w), mem(), addr, 0));
        }
        let lanes = if inner == 0 { 1 } else { w };
        if dtype == DType::F64 && lanes == 2 {
            // Lane 0 is read into a vector at once (`movsd` from memory, which zeroes lane
            // 1): a load can only be folded into the instruction that uses it when no other
            // load comes between them. Lane 1 then goes in by `movlhps`.
            let addr = self.address(b, k, base, at, offs, 0);
            let first = self.load_scalar(b, addr, Some(k), dtype);
            let v = b.ins().scalar_to_vector(types::F64X2, first);
            let addr = self.address(b, k, base, at, offs, 1);
            let second = self.load_scalar(b, addr, Some(k), dtype);
            return Ok(b.ins().insertlane(v, second, 1));
        }
        let mut e_lanes = Vec::new();
        for lane in 0..lanes {
            let addr = self.address(b, k, base, at, offs, lane);
            e_lanes.push(self.load_scalar(b, addr, Some(k), dtype));
        }
        Ok(self.assemble(b, w, &e_lanes, dtype))
    }

    /// Records that the lanes of the `i32` vector `v` step by `step` (see `Gen::lane_steps`).
    fn note_step(&mut self, v: Value, step: i64) {
        if let Some(steps) = &mut self.lane_steps {
            steps.insert(v, step);
        }
    }

    /// How the lanes of `v` step, when known.
    fn step_of(&self, v: Value) -> Option<i64> {
        self.lane_steps.as_ref()?.get(&v).copied()
    }

    /// `buf[clamp(index, 0, len - 1)]` per lane of the value `index` (`w` lanes of an `i32`, or
    /// of an `f64` truncated toward zero), whose lanes step by `step` when that is known (see
    /// `Gen::lane_steps`, which tracks `i32` values only).
    ///
    /// Lanes that all hold one index (step 0) read one element. Consecutive lanes (step 1, the
    /// gathers of a pad's window) read one vector when they lie inside the buffer, and one
    /// element when they all lie on one side of it (every lane clamps to the same end);
    /// otherwise, and for other steps, each lane reads its own element.
    #[allow(clippy::too_many_arguments)]
    fn gather(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        buf: BufId,
        (index, index_dtype): (Value, DType),
        step: Option<i64>,
        dtype: DType,
    ) -> Result<Value, BackendError> {
        let base = self.base(buf)?;
        let len = self
            .info
            .buffer_lens
            .get(buf.index())
            .copied()
            .filter(|&n| n > 0)
            .ok_or_else(|| internal(format!("gather from {buf}, which has no elements")))?;
        // An `i32` index never exceeds `i32::MAX`: clamping there reaches no further.
        let last = i32::try_from(len - 1).unwrap_or(i32::MAX);
        let lanes = if w > 1 && step == Some(0) { 1 } else { w };
        // `f64` indices are read lane by lane: checking two lanes for a step of one, with a
        // branch per gather and the saturating conversions, cost more than it saved (tried:
        // `f64` halves at 65536 1.66 → 2.37 ns per element, a 6-element Euler step 42 → 56 ns).
        if index_dtype != DType::I32 || w == 1 || lanes == 1 || step != Some(1) || dtype == DType::Bool {
            let values = self.gather_lanes(b, lanes, w, base, (index, index_dtype), last, dtype);
            return Ok(self.assemble(b, w, &values, dtype));
        }
        // Lanes `lo ..= lo + w - 1` (no lane wraps when the sum fits an `i32`).
        let lo = b.ins().extractlane(index, 0);
        let lo = b.ins().sextend(types::I64, lo);
        let hi = b.ins().iadd_imm_s(lo, i64::from(w) - 1);
        let above_zero = b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, lo, 0);
        let below_end = b
            .ins()
            .icmp_imm_s(IntCC::SignedLessThanOrEqual, hi, i64::from(last));
        let inside = b.ins().band(above_zero, below_end);
        let ty = cl_type(dtype, w);
        let (vector, not_inside, one, lanewise, join) = (
            b.create_block(),
            b.create_block(),
            b.create_block(),
            b.create_block(),
            b.create_block(),
        );
        b.append_block_param(join, ty);
        b.ins().brif(inside, vector, &[], not_inside, &[]);

        b.switch_to_block(vector);
        let bytes = self.scale(b, lo, dtype.size_bytes() as i64);
        let addr = b.ins().iadd(base, bytes);
        let v = b.ins().load(ty, mem(), addr, 0);
        b.ins().jump(join, &[BlockArg::Value(v)]);

        // All below the buffer, or all above it without wrapping: every lane clamps alike.
        b.switch_to_block(not_inside);
        let all_below = b.ins().icmp_imm_s(IntCC::SignedLessThan, hi, 0);
        let all_above = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, lo, i64::from(last));
        let no_wrap = b
            .ins()
            .icmp_imm_s(IntCC::SignedLessThanOrEqual, hi, i64::from(i32::MAX));
        let all_above = b.ins().band(all_above, no_wrap);
        let alike = b.ins().bor(all_below, all_above);
        b.ins().brif(alike, one, &[], lanewise, &[]);

        b.switch_to_block(one);
        let values = self.gather_lanes(b, 1, w, base, (index, index_dtype), last, dtype);
        let v = self.assemble(b, w, &values, dtype);
        b.ins().jump(join, &[BlockArg::Value(v)]);

        b.switch_to_block(lanewise);
        let values = self.gather_lanes(b, w, w, base, (index, index_dtype), last, dtype);
        let v = self.assemble(b, w, &values, dtype);
        b.ins().jump(join, &[BlockArg::Value(v)]);

        b.switch_to_block(join);
        Ok(b.block_params(join)[0])
    }

    /// `buf[clamp(index[lane], 0, last)]` for the first `lanes` lanes of the `w`-lane value
    /// `index` (`i32`, or `f64` truncated toward zero with NaN as 0), as scalars.
    #[allow(clippy::too_many_arguments)]
    fn gather_lanes(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        lanes: u8,
        w: u8,
        base: Value,
        (index, index_dtype): (Value, DType),
        last: i32,
        dtype: DType,
    ) -> Vec<Value> {
        // Clamped as `i32`, or as `i64` after a saturating conversion (NaN gives 0).
        let int = if index_dtype == DType::I32 {
            types::I32
        } else {
            types::I64
        };
        let (zero, top) = (b.ins().iconst(int, 0), b.ins().iconst(int, i64::from(last)));
        let mut values = Vec::with_capacity(usize::from(lanes));
        for lane in 0..lanes {
            let i = if w == 1 {
                index
            } else {
                b.ins().extractlane(index, lane)
            };
            let i = if index_dtype == DType::I32 {
                i
            } else {
                b.ins().fcvt_to_sint_sat(types::I64, i)
            };
            let below = b.ins().icmp_imm_s(IntCC::SignedLessThan, i, 0);
            let i = b.ins().select(below, zero, i);
            let above = b.ins().icmp_imm_s(IntCC::SignedGreaterThan, i, i64::from(last));
            let i = b.ins().select(above, top, i);
            let i = if int == self.ptr {
                i
            } else {
                b.ins().uextend(self.ptr, i)
            };
            let bytes = self.scale(b, i, dtype.size_bytes() as i64);
            let addr = b.ins().iadd(base, bytes);
            values.push(self.load_scalar(b, addr, None, dtype));
        }
        values
    }

    /// A vector of `w` lanes from scalar lanes (one lane broadcast when there is one).
    fn assemble(&self, b: &mut FunctionBuilder<'_>, w: u8, e_lanes: &[Value], dtype: DType) -> Value {
        if w == 1 {
            return e_lanes[0];
        }
        let mut e = Emitter {
            b: &mut *b,
            w,
            imports: self.imports,
        };
        let mut v = e.splat(e_lanes[0], dtype);
        for (lane, &x) in e_lanes.iter().enumerate().skip(1) {
            let x = if dtype == DType::Bool {
                let wide_ty = if w == 2 { types::I64 } else { types::I32 };
                let wide = b.ins().uextend(wide_ty, x);
                b.ins().ineg(wide)
            } else {
                x
            };
            v = b.ins().insertlane(v, x, lane as u8);
        }
        v
    }

    /// Converts the body's indices that the vector loop does not advance (see
    /// [`Gen::row_indices`]) from the row's offsets `ptrs`, in the current block.
    fn hoist_row_indices(&mut self, b: &mut FunctionBuilder<'_>, ptrs: &[Value]) -> Result<(), BackendError> {
        self.row_indices.clear();
        for (k, access) in self.info.accesses.iter().enumerate() {
            if access.buf.is_none() && self.inner_stride(k) == 0 && self.inner_axis.is_some() {
                let scalar = index_scalar(b, ptrs[k], access.dtype)?;
                let splat = Emitter {
                    b: &mut *b,
                    w: self.width,
                    imports: self.imports,
                }
                .splat(scalar, access.dtype);
                self.row_indices.insert(k, (scalar, splat));
            }
        }
        Ok(())
    }

    /// The value of index access `k` at position `at` of the innermost loop: lane 0's offset
    /// converted to `dtype` (exact: the verifier bounds every value), plus `lane · stride` per
    /// lane from a constant vector.
    fn index(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        k: usize,
        at: Value,
        offs: &[Value],
        dtype: DType,
    ) -> Result<Value, BackendError> {
        if let Some(&(scalar, splat)) = self.row_indices.get(&k) {
            return Ok(if w == 1 { scalar } else { splat });
        }
        if w > 1
            && w == self.width
            && let Some(&vector) = self.col_indices.get(&k)
        {
            return Ok(vector);
        }
        let offset = self.address(b, k, at, at, offs, 0);
        let scalar = index_scalar(b, offset, dtype)?;
        let inner = self.inner_stride(k);
        let mut e = Emitter {
            b: &mut *b,
            w,
            imports: self.imports,
        };
        let splat = e.splat(scalar, dtype);
        if w == 1 || inner == 0 {
            return Ok(splat);
        }
        let mut bytes = Vec::new();
        for lane in 0..usize::from(w) {
            let step = lane * inner;
            match dtype {
                DType::I32 => bytes.extend_from_slice(&(step as i32).to_le_bytes()),
                DType::F32 => bytes.extend_from_slice(&(step as f32).to_le_bytes()),
                _ => bytes.extend_from_slice(&(step as f64).to_le_bytes()),
            }
        }
        let ty = cl_type(dtype, w);
        let handle = b.func.dfg.constants.insert(bytes.into());
        let steps = b.ins().vconst(ty, handle);
        Ok(if dtype == DType::I32 {
            b.ins().iadd(splat, steps)
        } else {
            b.ins().fadd(splat, steps)
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        k: usize,
        base: Value,
        at: Value,
        offs: &[Value],
        v: Value,
    ) -> Result<(), BackendError> {
        let access = &self.info.accesses[k];
        let (dtype, inner) = (access.dtype, self.inner_stride(k));
        if w == 1 {
            let addr = self.address(b, k, base, at, offs, 0);
            b.ins().store(mem(), v, addr, 0);
            return Ok(());
        }
        if inner == 1 && dtype != DType::Bool {
            let addr = self.address(b, k, base, at, offs, 0);
            b.ins().store(mem(), v, addr, 0);
            return Ok(());
        }
        for lane in 0..w {
            let addr = self.address(b, k, base, at, offs, lane);
            let mut e = Emitter {
                b: &mut *b,
                w,
                imports: self.imports,
            };
            let x = e.lane(v, dtype, lane);
            b.ins().store(mem(), x, addr, 0);
        }
        Ok(())
    }
}

/// A loop block's arguments: the position, then the carried values.
fn position_args(at: Value, vals: &[Value]) -> Vec<BlockArg> {
    std::iter::once(at)
        .chain(vals.iter().copied())
        .map(BlockArg::Value)
        .collect()
}

/// An element offset as an index value of `dtype` (exact: the verifier bounds every value).
fn index_scalar(b: &mut FunctionBuilder<'_>, offset: Value, dtype: DType) -> Result<Value, BackendError> {
    Ok(match dtype {
        DType::I32 => b.ins().ireduce(types::I32, offset),
        DType::F32 => b.ins().fcvt_from_sint(types::F32, offset),
        DType::F64 => b.ins().fcvt_from_sint(types::F64, offset),
        DType::Bool => return Err(internal("index of dtype bool")),
    })
}

struct ReduceInfo {
    index: usize,
    op: ReduceOp,
    buf: BufId,
    dtype: DType,
    offset: usize,
}

/// The partial accumulators of a reduction kernel.
struct Partials {
    slot: cranelift_codegen::ir::StackSlot,
    lanes: u32,
    reduces: Vec<ReduceInfo>,
}

/// The binary counter of a blocked reduction's leaves ([`ReduceLeaves`]): a stack of entries
/// laid out as the partials' slot, and the count of leaves pushed for the current output.
struct LeafTree {
    stack: StackSlot,
    counter: StackSlot,
    /// Bytes per stack entry: the partials' slot size, a multiple of 16.
    level_bytes: usize,
    /// Entries on the stack once every leaf is pushed: the set bits of the leaf count.
    entries_at_end: usize,
}

impl LeafTree {
    /// The stack and counter for `leaves` leaves of partials laid out in `level_bytes`.
    fn new(b: &mut FunctionBuilder<'_>, leaves: usize, level_bytes: usize) -> Result<LeafTree, BackendError> {
        let depth = rfx_ir::lir::reduce_stack_depth(leaves);
        let bytes =
            u32::try_from(depth.saturating_mul(level_bytes)).map_err(|_| internal("leaf stack too large"))?;
        let stack = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, bytes, 4));
        let counter = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
        Ok(LeafTree {
            stack,
            counter,
            level_bytes,
            entries_at_end: leaves.count_ones() as usize,
        })
    }
}

impl Partials {
    /// Every reduction's partials as vectors of `w` lanes (`lanes / w` each, 16 bytes apart),
    /// in reduction order: the accumulators a vector loop carries.
    fn load_vectors(&self, b: &mut FunctionBuilder<'_>, w: u8) -> Result<Vec<Value>, BackendError> {
        let mut vectors = Vec::new();
        for r in &self.reduces {
            for k in 0..(self.lanes / u32::from(w)) as usize {
                let off = i32::try_from(r.offset + k * 16).map_err(|_| internal("partials too large"))?;
                vectors.push(
                    b.ins()
                        .stack_load(types::I64, cl_type(r.dtype, w), self.slot, off),
                );
            }
        }
        Ok(vectors)
    }

    /// Stores the vectors [`Partials::load_vectors`] loaded (as the loop left them) back.
    fn store_vectors(
        &self,
        b: &mut FunctionBuilder<'_>,
        w: u8,
        vectors: &[Value],
    ) -> Result<(), BackendError> {
        let chunks = (self.lanes / u32::from(w)) as usize;
        for r in &self.reduces {
            for k in 0..chunks {
                let off = i32::try_from(r.offset + k * 16).map_err(|_| internal("partials too large"))?;
                let vector = *vectors
                    .get(r.index * chunks + k)
                    .ok_or_else(|| internal("missing partial vector"))?;
                b.ins().stack_store(types::I64, vector, self.slot, off);
            }
        }
        Ok(())
    }

    /// Whether reduction `r` is blocked into leaves (`rfx_ir::lir::reduce_is_blocked`).
    fn blocked(&self, r: &ReduceInfo) -> bool {
        rfx_ir::lir::reduce_is_blocked(r.op, r.dtype, self.lanes)
    }

    /// The lanes a leaf merge of reduction `r` handles at once: a 128-bit vector where the
    /// lanes fill whole ones, else one. Merges are lane by lane, so the width changes no bit.
    fn unit(&self, r: &ReduceInfo) -> u8 {
        let vector = 16 / r.dtype.size_bytes().max(1);
        if vector > 1 && (self.lanes as usize).is_multiple_of(vector) {
            u8::try_from(vector).unwrap_or(1)
        } else {
            1
        }
    }

    /// The blocked reductions' partials in merge units: the reduction, the unit's type and its
    /// byte offset in the slot (and in each entry of a leaf stack, laid out alike).
    fn blocked_chunks(&self) -> Result<Vec<(&ReduceInfo, Type, i32)>, BackendError> {
        let mut chunks = Vec::new();
        for r in self.reduces.iter().filter(|r| self.blocked(r)) {
            let unit = self.unit(r);
            let bytes = usize::from(unit) * r.dtype.size_bytes();
            for k in 0..(self.lanes as usize / usize::from(unit)) {
                let off = i32::try_from(r.offset + k * bytes).map_err(|_| internal("partials too large"))?;
                chunks.push((r, cl_type(r.dtype, unit), off));
            }
        }
        Ok(chunks)
    }

    /// The partial lane of row point `at` (`at % lanes`; `None` for a single lane).
    fn lane_of(&self, b: &mut FunctionBuilder<'_>, at: Value) -> Option<Value> {
        (self.lanes > 1).then(|| b.ins().urem_imm_s(at, i64::from(self.lanes)))
    }

    /// Folds one point's `value` of reduction `r` into its partial `lane`, through the slot.
    fn fold_scalar(
        &self,
        b: &mut FunctionBuilder<'_>,
        ptr: Type,
        imports: &crate::imports::Imports,
        r: &ReduceInfo,
        lane: Option<Value>,
        value: Value,
    ) -> Result<(), BackendError> {
        let base = b
            .ins()
            .stack_addr(ptr, self.slot, i32::try_from(r.offset).unwrap_or(0));
        let addr = match lane {
            Some(lane) => {
                let byte = b.ins().imul_imm_s(lane, r.dtype.size_bytes() as i64);
                b.ins().iadd(base, byte)
            }
            None => base,
        };
        let ty = cl_type(r.dtype, 1);
        let acc = b.ins().load(ty, MemFlagsData::trusted(), addr, 0);
        let acc = Emitter {
            b: &mut *b,
            w: 1,
            imports,
        }
        .combine(r.op, acc, value, r.dtype)?;
        b.ins().store(MemFlagsData::trusted(), acc, addr, 0);
        Ok(())
    }
}

fn identity(op: ReduceOp, dtype: DType) -> Result<Scalar, BackendError> {
    rfx_ir::semantics::reduce_identity(op, dtype).ok_or(BackendError::Unsupported {
        backend: "cpu",
        what: Unsupported::OpDType(op.name(), dtype),
    })
}

/// The finished reduction value, as `rfx_ir::semantics::reduce_finish` gives it.
fn finish(
    e: &mut Emitter<'_, '_>,
    op: ReduceOp,
    total: Value,
    dtype: DType,
    count: usize,
) -> Result<Value, BackendError> {
    Ok(match (op, dtype) {
        (ReduceOp::Mean, DType::F32) => {
            let n = e.constant(Scalar::F32(count as f32));
            e.b.ins().fdiv(total, n)
        }
        (ReduceOp::Mean, DType::F64) => {
            let n = e.constant(Scalar::F64(count as f64));
            e.b.ins().fdiv(total, n)
        }
        (ReduceOp::Sum, DType::F32 | DType::F64) if count == 0 => e.constant(Scalar::zero(dtype)),
        _ => total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A load, a chain of three routine calls and an ops segment reading the last result: each
    /// value is live from its segment to the next, so two buffers serve all five; a value never
    /// shares a buffer with one its own segment reads.
    #[test]
    fn a_chain_of_routines_stages_two_buffers() {
        let segments = vec![
            Segment::Ops {
                insts: vec![0],
                loads: Vec::new(),
            },
            call(0, 1),
            call(1, 2),
            call(2, 3),
            Segment::Ops {
                insts: vec![4],
                loads: vec![(4, 3, SlotId::new(0))],
            },
        ];
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
        let segments = vec![
            Segment::Ops {
                insts: vec![0],
                loads: Vec::new(),
            },
            call(0, 1),
            call(1, 2),
            call(2, 3),
        ];
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
