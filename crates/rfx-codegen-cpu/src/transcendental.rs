//! Transcendental functions: the bridge from LIR ops to the vector math library.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{
    BlockArg, FuncRef, InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Type, Value, types,
};
use rfx_ir::{BinaryOp, DType, Scalar, UnaryOp};
use rfx_lower::{BackendError, Unsupported};

use crate::aot::AotFn;
use crate::ops::{Emitter, cl_type};

fn unsupported(op: &'static str, dtype: DType) -> BackendError {
    BackendError::Unsupported {
        backend: "cpu",
        what: Unsupported::OpDType(op, dtype),
    }
}

/// `|x|` above which `sin`, `cos` and `tan` leave the inline polynomials: their three-part
/// Cody–Waite reduction keeps 4 ULP up to 1.6e6 (`math`), beyond it the argument needs the
/// full Payne–Hanek reduction, which the rare lanes that need it get from the host's libm.
const TRIG_INLINE_MAX: f64 = 1.0e6;

/// `op(x)` for a transcendental unary op: inline vector polynomials; for the trigonometric
/// functions, lanes with `|x| > TRIG_INLINE_MAX` (huge arguments and ±Inf) are recomputed on a
/// cold path by [`crate::imports`]' exact helpers, taken only when some lane needs it.
pub(crate) fn unary(
    e: &mut Emitter<'_, '_>,
    op: UnaryOp,
    x: Value,
    dtype: DType,
) -> Result<Value, BackendError> {
    let ty = cl_type(dtype, e.w);
    let fast = crate::math::emit_unary(e.b, op, x, ty).ok_or_else(|| unsupported(op.name(), dtype))?;
    let code = match op {
        UnaryOp::Sin => 0,
        UnaryOp::Cos => 1,
        UnaryOp::Tan => 2,
        _ => return Ok(fast),
    };
    let (bound, helper) = match dtype {
        DType::F32 => (
            e.constant(Scalar::F32(TRIG_INLINE_MAX as f32)),
            e.imports.trig_f32,
        ),
        DType::F64 => (e.constant(Scalar::F64(TRIG_INLINE_MAX)), e.imports.trig_f64),
        _ => return Ok(fast),
    };
    let magnitude = e.b.ins().fabs(x);
    let huge = e.b.ins().fcmp(FloatCC::GreaterThan, magnitude, bound);
    let any = if e.w == 1 { huge } else { e.b.ins().vany_true(huge) };
    let slow = e.b.create_block();
    let merge = e.b.create_block();
    e.b.append_block_param(merge, ty);
    e.b.ins().brif(any, slow, &[], merge, &[BlockArg::Value(fast)]);
    e.b.switch_to_block(slow);
    e.b.set_cold_block(slow);
    let code = e.b.ins().iconst(types::I32, code);
    let exact = if e.w == 1 {
        let call = e.b.ins().call(helper, &[code, x]);
        e.b.inst_results(call)[0]
    } else {
        let mut all = fast;
        for lane in 0..e.w {
            let xi = e.b.ins().extractlane(x, lane);
            let call = e.b.ins().call(helper, &[code, xi]);
            let yi = e.b.inst_results(call)[0];
            all = e.b.ins().insertlane(all, yi, lane);
        }
        // Only the huge lanes take the helper's value, so a lane's bits never depend on its
        // neighbours.
        e.select(huge, all, fast, ty)
    };
    e.b.ins().jump(merge, &[BlockArg::Value(exact)]);
    e.b.switch_to_block(merge);
    Ok(e.b.block_params(merge)[0])
}

/// `op(x)` computed by its tile routine on the `w` lanes of `x` (staged through the stack), or
/// `None` when the routine is not linked (no AVX2 and FMA, or no routine for `op` and `dtype`).
/// Scalar code's transcendentals take this path (the preamble, reductions one output at a time,
/// scalar tails), where the routine, call included, costs less than the inline polynomial: at
/// width 1 a direct call of the routine's one-element entry ([`AotFn::one`]), the same bits
/// without staging or the routine's array setup.
pub(crate) fn unary_by_routine(
    e: &mut Emitter<'_, '_>,
    op: UnaryOp,
    x: Value,
    dtype: DType,
) -> Option<Value> {
    let routine = AotFn::for_op(op, dtype)?;
    if e.w == 1
        && let Some(one) = e.imports.routine_one(routine)
    {
        let call = e.b.ins().call(one, &[x]);
        return Some(e.b.inst_results(call)[0]);
    }
    let func = e.imports.routine(routine)?;
    Some(routine_on_lanes(e, func, &[x], cl_type(dtype, e.w)))
}

/// `(sin x, cos x)` by the `sincos` routine `routine` on the `w` lanes of `x` (at width 1 by its
/// one-element entry, the cosine written to a stack cell), or `None` when the routines are not
/// linked.
pub(crate) fn pair_by_routine(
    e: &mut Emitter<'_, '_>,
    routine: AotFn,
    x: Value,
    dtype: DType,
) -> Option<(Value, Value)> {
    if e.w == 1
        && let Some(one) = e.imports.routine_one(routine)
    {
        // The second result comes back through one stack cell.
        let ty = cl_type(dtype, 1);
        let slot =
            e.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, ty.bytes(), 3));
        let cell = e.b.ins().stack_addr(types::I64, slot, 0);
        let call = e.b.ins().call(one, &[x, cell]);
        let first = e.b.inst_results(call)[0];
        let second = e.b.ins().load(ty, MemFlagsData::trusted(), cell, 0);
        return Some((first, second));
    }
    let func = e.imports.routine(routine)?;
    match routine_on_lanes_n(e, func, &[x], cl_type(dtype, e.w), 2)[..] {
        [sin, cos] => Some((sin, cos)),
        _ => None,
    }
}

/// Calls the tile routine `func` on the `w` lanes of `args` (each of type `ty`), staged
/// through the stack: one run of `w` cells per argument and one for the result, the routine
/// called as `func(arg cells.., result cells, w)`.
fn routine_on_lanes(e: &mut Emitter<'_, '_>, func: FuncRef, args: &[Value], ty: Type) -> Value {
    routine_on_lanes_n(e, func, args, ty, 1)[0]
}

/// `routine_on_lanes` for a routine with `results` results (a run of `w` cells each, after
/// the arguments').
fn routine_on_lanes_n(
    e: &mut Emitter<'_, '_>,
    func: FuncRef,
    args: &[Value],
    ty: Type,
    results: usize,
) -> Vec<Value> {
    let run = ty.bytes();
    let cells = u32::try_from(args.len() + results).unwrap_or(u32::MAX);
    let slot = e.b.create_sized_stack_slot(StackSlotData::new(
        StackSlotKind::ExplicitSlot,
        cells.saturating_mul(run),
        5,
    ));
    // The routines are only linked on x86-64, where pointers are 64 bits.
    let base = e.b.ins().stack_addr(types::I64, slot, 0);
    let flags = MemFlagsData::trusted();
    let mut call_args = Vec::with_capacity(args.len() + 2);
    for (k, &arg) in (0u32..).zip(args) {
        let offset = i64::from(k * run);
        e.b.ins()
            .store(flags, arg, base, i32::try_from(offset).unwrap_or(i32::MAX));
        call_args.push(if k == 0 {
            base
        } else {
            e.b.ins().iadd_imm_s(base, offset)
        });
    }
    let outs: Vec<Value> = (args.len()..args.len() + results)
        .map(|k| {
            let offset = u32::try_from(k).unwrap_or(u32::MAX).saturating_mul(run);
            e.b.ins().iadd_imm_s(base, i64::from(offset))
        })
        .collect();
    call_args.extend(&outs);
    call_args.push(e.b.ins().iconst(types::I64, i64::from(e.w)));
    e.b.ins().call(func, &call_args);
    outs.into_iter()
        .map(|out| e.b.ins().load(ty, flags, out, 0))
        .collect()
}

/// `op(a, b)` for `pow` and `atan2`: inline vector code, except where the tile routines are
/// linked (AVX2 and FMA), which calls the routine on the `w` lanes (staged through the stack;
/// scalar code calls its one-element entry directly):
/// the inline `pow` costs about as much for one lane as for a vector, several times the
/// routine's scalar path, and a kernel then gets the routines' bits in every loop (were scalar
/// code to compute `atan2` inline, a one-element kernel and a reduction's scalar rows could
/// differ from the tiles in the last bit, as `rfx fuzz` finds).
pub(crate) fn binary(
    e: &mut Emitter<'_, '_>,
    op: BinaryOp,
    a: Value,
    b: Value,
    dtype: DType,
) -> Result<Value, BackendError> {
    let ty = cl_type(dtype, e.w);
    if let Some(routine) = AotFn::for_binary(op, dtype) {
        if e.w == 1
            && let Some(one) = e.imports.routine_one(routine)
        {
            let call = e.b.ins().call(one, &[a, b]);
            return Ok(e.b.inst_results(call)[0]);
        }
        if let Some(func) = e.imports.routine(routine) {
            return Ok(routine_on_lanes(e, func, &[a, b], ty));
        }
    }
    crate::math::emit_binary(e.b, op, a, b, ty).ok_or_else(|| unsupported(op.name(), dtype))
}
