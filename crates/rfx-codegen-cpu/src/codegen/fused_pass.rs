//! Fused elementwise passes of a body: the plan of its steps over registers
//! ([`crate::aot::fused::Plan`]) built from the LIR, and the calls of the fused routine, of a
//! whole-row routine or of an assembled pass ([`crate::asm`]) that run it.

use super::*;
use crate::aot::fused;

/// A constant register of a fused pass: a preamble value or a literal of the body.
#[derive(Clone, Copy, Debug)]
pub(super) enum FusedConst {
    Preamble(SlotId),
    Literal(Scalar),
}

/// An elementwise body run as one fused pass ([`crate::aot::fused`]) per row: the plan, what
/// fills its constant registers, the accesses of its input and output rows, and the stack
/// slots the plan, the constants (both written once per call) and the row pointers (per row)
/// are passed in.
pub(super) struct FusedPass {
    routine: AotFn,
    plan: fused::Plan,
    consts: Vec<FusedConst>,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    plan_slot: StackSlot,
    consts_slot: StackSlot,
    rows_slot: StackSlot,
    /// The whole-row routine that runs the plan instead, with its two input rows and its
    /// output (indices into `inputs` and `outputs`): a one-op plan of a binary exact op.
    row: Option<(AotFn, usize, usize, usize)>,
    /// The assembled pass that runs the plan instead ([`crate::asm`]): `(constants, rows, n)`.
    assembled: Option<cranelift_codegen::ir::FuncRef>,
}

/// A reduction body's whole vector steps as an assembled reduction pass
/// ([`crate::asm::assemble_reduction`]): the pass, the accesses of its input and output rows,
/// the stack slots of its constants (written once per call) and of the row pointers (per
/// row), and the partials per reduction.
pub(super) struct ReducePass {
    func: cranelift_codegen::ir::FuncRef,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    consts_slot: StackSlot,
    rows_slot: StackSlot,
    lanes: u32,
}

/// The shortest row a reduction pass runs (the call and the pass's set-up against the inline
/// code's 128-bit loop).
pub(super) const ASSEMBLED_REDUCE_MIN_POINTS: usize = 128;

/// Which fused passes [`Gen::fused_pass`] builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FusedKind {
    /// A plan of one op, which the routine runs as one whole-row loop.
    OneOp,
    /// Any plan, run by the fused routine.
    Any,
    /// A plan the host runs as an assembled pass.
    Assembled,
}

/// The shortest row of an elementwise body of exact ops that runs as an assembled pass: below
/// it, the call and the pass's set-up cost more than its 256-bit vectors save over the inline
/// code's 128-bit ones (the PID clip, `rfx bench` through the checked call: 64 elements 71–84
/// ns against 65–67 inline, 128 elements 103–109 against 114–118, 2026-11-29).
pub(super) const ASSEMBLED_MIN_ELEMS: usize = 128;

/// The machine code of the assembled pass of `plan` (with its constant registers' literal
/// values, `literals`), on a host that runs one.
fn assembled_code(plan: &fused::Plan, literals: &[Option<f64>]) -> Option<Vec<u8>> {
    #[cfg(target_arch = "x86_64")]
    {
        crate::asm::assemble(plan, literals)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (plan, literals);
        None
    }
}

/// A stack slot of `bytes` (at least 8), 8-byte aligned, for a pass's plan, constants or row
/// pointers.
fn pass_slot(b: &mut FunctionBuilder<'_>, bytes: usize) -> StackSlot {
    b.create_sized_stack_slot(StackSlotData::new(
        StackSlotKind::ExplicitSlot,
        bytes.max(8) as u32,
        3,
    ))
}

/// The machine code of the assembled reduction pass of `plan` with `folds` (each reduction's
/// op, as the inline code combines it, and its partials' offset) and `lanes` partials, on a host that runs one.
fn assembled_reduction_code(
    plan: &fused::Plan,
    folds: &[(ReduceOp, u32)],
    lanes: u32,
    literals: &[Option<f64>],
) -> Option<Vec<u8>> {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::asm::{Fold, FoldOp};
        let folds: Vec<Fold> = folds
            .iter()
            .map(|&(op, offset)| Fold {
                op: match op {
                    ReduceOp::Sum | ReduceOp::Mean => FoldOp::Add,
                    ReduceOp::Prod => FoldOp::Mul,
                    ReduceOp::Min => FoldOp::Min,
                    ReduceOp::Max => FoldOp::Max,
                },
                offset,
            })
            .collect();
        crate::asm::assemble_reduction(plan, &folds, lanes, literals)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (plan, folds, lanes, literals);
        None
    }
}

/// Where a value of a fused body is: an operand code of the plan (a register or an input row).
type FusedCode = u32;

/// A value of a fused body while its plan is built: a body value (its defining instruction's
/// step), an input row, or a constant register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FusedValue {
    Step(usize),
    Input(u32),
    Const(u32),
}

/// A step of a fused body before register allocation: an op of `srcs` (its value is step
/// `index`), or a store of `src` into output row `out`.
enum FusedStep {
    Op { op: u32, srcs: Vec<FusedValue> },
    Store { out: u32, src: FusedValue },
    Fold { reduction: u32, src: FusedValue },
}

/// A body as a fused plan ([`Gen::fused_body`]): its dtype and the fused routine of the dtype,
/// the plan, what fills its constant registers, and the accesses of its input and output rows.
struct FusedBody {
    dtype: DType,
    routine: AotFn,
    plan: fused::Plan,
    consts: Vec<FusedConst>,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
}

impl<'k> Gen<'_, 'k> {
    /// The fused pass of this elementwise body, where every instruction fits one: contiguous
    /// loads of program inputs and stores into program outputs, all of one float dtype (that
    /// of its routines), exact ops with a fused step, transcendentals with a routine,
    /// constants and preamble values (broadcast into registers), and at most
    /// [`fused::MAX_REGS`] registers live at once, and exact mode; of `kind`: a plan the
    /// routine runs as one whole-row loop ([`fused::Plan::is_one_op_row`]), any plan, or one
    /// assembled ([`crate::asm`]). `None` otherwise (the staged segments or the inline code run
    /// it).
    pub(super) fn fused_pass(
        &self,
        b: &mut FunctionBuilder<'_>,
        kind: FusedKind,
    ) -> Result<Option<FusedPass>, BackendError> {
        let one_op = kind == FusedKind::OneOp;
        let Some(FusedBody {
            dtype,
            routine,
            plan,
            consts,
            inputs,
            outputs,
        }) = self.fused_body(false)?
        else {
            return Ok(None);
        };
        if one_op && !plan.is_one_op_row() {
            return Ok(None);
        }
        let assembled = match kind {
            // One op alone keeps the inline code below the whole-row loop's length: `x + y` at
            // 128 elements took 84–95 ns assembled against 71–81 inline (2026-11-29).
            FusedKind::Assembled if plan.is_one_op_row() => return Ok(None),
            FusedKind::Assembled => match assembled_code(&plan, &self.literal_values(&consts)) {
                Some(code) => Some(self.fx.imports.assembled_pass(b.func, self.fx.ptr, code, false)),
                None => return Ok(None),
            },
            // A body with routines: assembled where it can be (the exact steps between the
            // routine calls in 256-bit registers, no plan to check or dispatch), else the fused
            // routine. The 10-op chain took 0.80–0.85× the fused routine's time at 1,024 and
            // 65,536 elements; `sin(x*2)+y`, one routine and two exact ops, measured the same
            // either way (`compare.sh`, alternating, 2026-11-29).
            FusedKind::Any => assembled_code(&plan, &self.literal_values(&consts))
                .map(|code| self.fx.imports.assembled_pass(b.func, self.fx.ptr, code, false)),
            FusedKind::OneOp => None,
        };
        let row = plan
            .row_binary()
            .filter(|_| one_op)
            .and_then(|(op, x, y, out)| Some((AotFn::whole_row(op, dtype)?, x, y, out)));
        // An assembled pass holds its plan in its code.
        let plan_words = if assembled.is_some() {
            0
        } else {
            plan.words().len()
        };
        let plan_slot = pass_slot(b, plan_words * 4);
        let consts_slot = pass_slot(b, consts.len() * dtype.size_bytes());
        let rows_slot = pass_slot(b, (inputs.len() + outputs.len()) * 8);
        Ok(Some(FusedPass {
            routine,
            plan,
            consts,
            inputs,
            outputs,
            plan_slot,
            consts_slot,
            rows_slot,
            row,
            assembled,
        }))
    }

    /// The assembled reduction pass of this reduction body, with its constants written: where
    /// the body fits a fused plan with its reductions ([`Gen::fused_body`]), of exact steps
    /// only, every reduction a float one of the plan's dtype, rows of at least
    /// [`ASSEMBLED_REDUCE_MIN_POINTS`], and the host runs assembled passes. `None` otherwise.
    pub(super) fn reduce_pass(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        partials: &Partials,
        row_points: usize,
    ) -> Result<Option<ReducePass>, BackendError> {
        if row_points < ASSEMBLED_REDUCE_MIN_POINTS {
            return Ok(None);
        }
        let Some(body) = self.fused_body(true)? else {
            return Ok(None);
        };
        // The fused routine links only on hosts with AVX2 and FMA, which a pass needs too.
        if self.fx.imports.routine(body.routine).is_none() || partials.reduces.is_empty() {
            return Ok(None);
        }
        let mut folds = Vec::with_capacity(partials.reduces.len());
        for r in &partials.reduces {
            let Ok(offset) = u32::try_from(r.offset) else {
                return Ok(None);
            };
            if r.dtype != body.dtype {
                return Ok(None);
            }
            folds.push((r.op, offset));
        }
        let literals = self.literal_values(&body.consts);
        let Some(code) = assembled_reduction_code(&body.plan, &folds, partials.lanes, &literals) else {
            return Ok(None);
        };
        let func = self.fx.imports.assembled_pass(b.func, self.fx.ptr, code, true);
        let consts_slot = pass_slot(b, body.consts.len() * body.dtype.size_bytes());
        let rows_slot = pass_slot(b, (body.inputs.len() + body.outputs.len()) * 8);
        self.store_fused_consts(b, &body.consts, consts_slot)?;
        Ok(Some(ReducePass {
            func,
            inputs: body.inputs,
            outputs: body.outputs,
            consts_slot,
            rows_slot,
            lanes: partials.lanes,
        }))
    }

    /// The reduction pass over the row `start..end` (`ptrs`: its addresses at position 0),
    /// folding into `partials`: the row pointers written, one call. Returns the first point it
    /// did not run (the last `(end - start) % lanes` points are left).
    pub(super) fn emit_reduce_pass_call(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        pass: &ReducePass,
        (start, end): (Value, Value),
        ptrs: &[Value],
        partials: &Partials,
    ) -> Result<Value, BackendError> {
        let [consts, rows, count] = self.pass_arguments(
            b,
            (&pass.inputs, &pass.outputs),
            (pass.consts_slot, pass.rows_slot),
            (start, end, ptrs),
        );
        let block = self.stack_base(b, partials.slot);
        b.ins().call(pass.func, &[consts, rows, count, block]);
        let whole = b.ins().band_imm_s(count, -i64::from(pass.lanes));
        Ok(b.ins().iadd(start, whole))
    }

    /// The plan of the body where every instruction fits a fused pass: contiguous loads of
    /// program inputs and stores into program outputs, all of one float dtype (that of its
    /// routines), exact ops with a fused step, transcendentals with a routine, constants and
    /// preamble values (broadcast into registers), and with `reduce` the body's reductions (a
    /// [`fused::op::FOLD`] step each, of a value of the dtype); at most [`fused::MAX_REGS`]
    /// registers live at once, and exact mode. `None` otherwise.
    fn fused_body(&self, reduce: bool) -> Result<Option<FusedBody>, BackendError> {
        // Fast math contracts multiply-adds in the inline code; a fused pass has no FMA step.
        if self.fx.contract {
            return Ok(None);
        }
        let body = &self.kernel().body;
        // The dtype of its routines, or of its first op (or load, in a copy).
        let mut dtype = None;
        for inst in body {
            if let Some(routine) = self.routine_of(inst)? {
                dtype = Some(routine.dtype());
                break;
            }
        }
        if dtype.is_none() {
            let op = body
                .iter()
                .find(|i| matches!(i, Inst::Unary { .. } | Inst::Binary { .. }));
            let load = body.iter().find(|i| matches!(i, Inst::Load { .. }));
            if let Some(dst) = op.or(load).and_then(Inst::dst) {
                dtype = Some(self.slot_dtype(dst)?);
            }
        }
        let (dtype, routine) = match dtype {
            Some(DType::F32) => (DType::F32, AotFn::FusedF32),
            Some(DType::F64) => (DType::F64, AotFn::FusedF64),
            _ => return Ok(None),
        };
        // The fused routine links only on hosts with AVX2 and FMA, which an assembled pass
        // needs too.
        if self.fx.imports.routine(routine).is_none() {
            return Ok(None);
        }
        let mut current: HashMap<SlotId, FusedValue> = HashMap::new();
        let mut consts: Vec<FusedConst> = Vec::new();
        let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
        let mut steps: Vec<FusedStep> = Vec::new();
        let mut folds = 0;
        for (i, inst) in body.iter().enumerate() {
            let mut operand = |slot: SlotId| -> Result<Option<FusedValue>, BackendError> {
                if let Some(&value) = current.get(&slot) {
                    return Ok(Some(value));
                }
                let in_preamble = self.fx.pre_scalar.get(slot.index()).copied().flatten().is_some();
                if !in_preamble || self.slot_dtype(slot)? != dtype {
                    return Ok(None);
                }
                consts.push(FusedConst::Preamble(slot));
                let value = FusedValue::Const(consts.len() as u32 - 1);
                current.insert(slot, value);
                Ok(Some(value))
            };
            let (dst, op, srcs) = match inst {
                Inst::Reduce { buf, src, .. } if reduce => {
                    let buf_dtype = self.fx.info.buffer_dtypes.get(buf.index()).copied();
                    let Some(src) = operand(*src)?.filter(|_| buf_dtype == Some(dtype)) else {
                        return Ok(None);
                    };
                    steps.push(FusedStep::Fold {
                        reduction: folds,
                        src,
                    });
                    folds += 1;
                    continue;
                }
                Inst::Load { dst, .. } => {
                    let Some(k) = self.contiguous_access(i, true, dtype) else {
                        return Ok(None);
                    };
                    inputs.push(k);
                    current.insert(*dst, FusedValue::Input(inputs.len() as u32 - 1));
                    continue;
                }
                Inst::Store { src, .. } => {
                    let (Some(k), Some(src)) = (self.contiguous_access(i, false, dtype), operand(*src)?)
                    else {
                        return Ok(None);
                    };
                    outputs.push(k);
                    steps.push(FusedStep::Store {
                        out: outputs.len() as u32 - 1,
                        src,
                    });
                    continue;
                }
                Inst::Const { dst, value } if value.dtype() == dtype => {
                    consts.push(FusedConst::Literal(*value));
                    current.insert(*dst, FusedValue::Const(consts.len() as u32 - 1));
                    continue;
                }
                Inst::Unary { dst, op, src } => (dst, fused_unary(*op, dtype), vec![*src]),
                Inst::Binary { dst, op, lhs, rhs } => (dst, fused_binary(*op, dtype), vec![*lhs, *rhs]),
                _ => return Ok(None),
            };
            let Some(op) = op else { return Ok(None) };
            if self.slot_dtype(*dst)? != dtype {
                return Ok(None);
            }
            let mut values = Vec::with_capacity(srcs.len());
            for src in srcs {
                let Some(value) = operand(src)? else {
                    return Ok(None);
                };
                values.push(value);
            }
            current.insert(*dst, FusedValue::Step(steps.len()));
            steps.push(FusedStep::Op { op, srcs: values });
        }
        let steps = folds_early(steps);
        let Some(plan) = fused_plan(&steps, consts.len() as u32, (inputs.len(), outputs.len()), dtype) else {
            return Ok(None);
        };
        // The fused routine's plans (the exact steps of a reduction's, whose folds it does not
        // run) pass its own check.
        if !plan.without_folds().is_valid() {
            return Err(internal("fused plan fails its own check"));
        }
        Ok(Some(FusedBody {
            dtype,
            routine,
            plan,
            consts,
            inputs,
            outputs,
        }))
    }

    /// The value of each constant register of a fused pass that is a float literal: of the
    /// body, or a preamble slot defined by one.
    fn literal_values(&self, consts: &[FusedConst]) -> Vec<Option<f64>> {
        consts
            .iter()
            .map(|c| match *c {
                FusedConst::Literal(Scalar::F32(v)) => Some(f64::from(v)),
                FusedConst::Literal(Scalar::F64(v)) => Some(v),
                FusedConst::Literal(_) => None,
                FusedConst::Preamble(slot) => self.fx.pre_const.get(slot.index()).copied().flatten(),
            })
            .collect()
    }

    /// Writes a fused pass's plan and constants into their stack slots, once per call.
    pub(super) fn fill_fused_plan(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        fused: &FusedPass,
    ) -> Result<(), BackendError> {
        if fused.row.is_some() {
            return Ok(());
        }
        let flags = MemFlagsData::trusted();
        let plan = self.stack_base(b, fused.plan_slot);
        // An assembled pass holds its plan in its code.
        let words = if fused.assembled.is_some() {
            Vec::new()
        } else {
            fused.plan.words()
        };
        for (k, pair) in words.chunks(2).enumerate() {
            let offset = (k * 8) as i32;
            if let [lo, hi] = *pair {
                let v = b
                    .ins()
                    .iconst(types::I64, (u64::from(hi) << 32 | u64::from(lo)) as i64);
                b.ins().store(flags, v, plan, offset);
            } else {
                let v = b.ins().iconst(types::I32, i64::from(pair[0]));
                b.ins().store(flags, v, plan, offset);
            }
        }
        self.store_fused_consts(b, &fused.consts, fused.consts_slot)
    }

    /// Writes the values of a pass's constant registers into `slot`, one element each.
    fn store_fused_consts(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        consts: &[FusedConst],
        slot: StackSlot,
    ) -> Result<(), BackendError> {
        let base = self.stack_base(b, slot);
        for (k, c) in consts.iter().enumerate() {
            let value = match *c {
                FusedConst::Preamble(slot) => self
                    .preamble_slot(b, 1, slot.index())
                    .ok_or_else(|| internal(format!("fused constant {slot} not in the preamble")))?,
                FusedConst::Literal(Scalar::F32(v)) => b.ins().f32const(v),
                FusedConst::Literal(Scalar::F64(v)) => b.ins().f64const(v),
                FusedConst::Literal(_) => return Err(internal("fused constant not a float")),
            };
            let bytes = b.func.dfg.value_type(value).bytes() as usize;
            b.ins()
                .store(MemFlagsData::trusted(), value, base, (k * bytes) as i32);
        }
        Ok(())
    }

    /// A pass's first three arguments over the row `start..end` (`ptrs`: its addresses at
    /// position 0): its constants' slot, its row table (the input then output accesses'
    /// addresses at `start`, written into `rows_slot`) and the row length.
    fn pass_arguments(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        (inputs, outputs): (&[usize], &[usize]),
        (consts_slot, rows_slot): (StackSlot, StackSlot),
        (start, end, ptrs): (Value, Value, &[Value]),
    ) -> [Value; 3] {
        let rows = self.stack_base(b, rows_slot);
        for (j, &k) in inputs.iter().chain(outputs).enumerate() {
            let addr = self.address(b, k, start, start, ptrs, 0);
            b.ins().store(MemFlagsData::trusted(), addr, rows, (j * 8) as i32);
        }
        let consts = self.stack_base(b, consts_slot);
        [consts, rows, b.ins().isub(end, start)]
    }

    /// The fused pass over the row `start..end` (`ptrs`: its addresses at position 0): the row
    /// pointers written, one call.
    pub(super) fn emit_fused_call(
        &mut self,
        b: &mut FunctionBuilder<'_>,
        fused: &FusedPass,
        start: Value,
        end: Value,
        ptrs: &[Value],
    ) -> Result<(), BackendError> {
        if let Some((routine, x, y, out)) = fused.row {
            let func = self
                .fx
                .imports
                .routine(routine)
                .ok_or_else(|| internal("whole-row routine not linked"))?;
            let mut args = Vec::with_capacity(4);
            for k in [fused.inputs.get(x), fused.inputs.get(y), fused.outputs.get(out)] {
                let k = *k.ok_or_else(|| internal("whole-row routine's row not in its pass"))?;
                args.push(self.address(b, k, start, start, ptrs, 0));
            }
            args.push(b.ins().isub(end, start));
            b.ins().call(func, &args);
            return Ok(());
        }
        let func = self
            .fx
            .imports
            .routine(fused.routine)
            .ok_or_else(|| internal("fused routine not linked"))?;
        let [consts, rows, count] = self.pass_arguments(
            b,
            (&fused.inputs, &fused.outputs),
            (fused.consts_slot, fused.rows_slot),
            (start, end, ptrs),
        );
        if let Some(pass) = fused.assembled {
            b.ins().call(pass, &[consts, rows, count]);
            return Ok(());
        }
        let plan = self.stack_base(b, fused.plan_slot);
        b.ins().call(func, &[plan, consts, rows, count]);
        Ok(())
    }
}

/// The fused opcode of a unary op on `dtype`: an exact op's, or its routine's.
fn fused_unary(op: UnaryOp, dtype: DType) -> Option<u32> {
    use fused::op as o;
    Some(match op {
        UnaryOp::Neg => o::NEG,
        UnaryOp::Abs => o::ABS,
        UnaryOp::Sqrt => o::SQRT,
        UnaryOp::Rsqrt => o::RSQRT,
        UnaryOp::Recip => o::RECIP,
        UnaryOp::Floor => o::FLOOR,
        UnaryOp::Ceil => o::CEIL,
        UnaryOp::Round => o::ROUND,
        _ => return routine_code(AotFn::for_op(op, dtype)?),
    })
}

/// The fused opcode of a binary op on `dtype`.
fn fused_binary(op: BinaryOp, dtype: DType) -> Option<u32> {
    use fused::op as o;
    Some(match op {
        BinaryOp::Add => o::ADD,
        BinaryOp::Sub => o::SUB,
        BinaryOp::Mul => o::MUL,
        BinaryOp::Div => o::DIV,
        BinaryOp::Min => o::MIN,
        BinaryOp::Max => o::MAX,
        _ => return routine_code(AotFn::for_binary(op, dtype)?),
    })
}

/// A routine's fused opcode.
fn routine_code(routine: AotFn) -> Option<u32> {
    let index = AotFn::ALL.iter().position(|&r| r == routine)?;
    Some(fused::op::ROUTINE + index as u32)
}

/// The steps with each fold moved up to right after the step computing its value (first, for
/// an input row or a constant), other steps in order: a fold only reads its value, and folds
/// of different reductions touch different partials, so the order changes no bit, while each
/// folded value's register is free from there on (the LIR puts a body's reductions last).
fn folds_early(steps: Vec<FusedStep>) -> Vec<FusedStep> {
    let after = |step: &FusedStep| match step {
        FusedStep::Fold {
            src: FusedValue::Step(def),
            ..
        } => Some(*def),
        _ => None,
    };
    let mut order: Vec<usize> = Vec::with_capacity(steps.len());
    order.extend(
        (0..steps.len())
            .filter(|&j| matches!(steps[j], FusedStep::Fold { .. }) && after(&steps[j]).is_none()),
    );
    for j in 0..steps.len() {
        if matches!(steps[j], FusedStep::Fold { .. }) {
            continue;
        }
        order.push(j);
        order.extend((0..steps.len()).filter(|&f| after(&steps[f]) == Some(j)));
    }
    let mut new_index = vec![0; steps.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let remap = |v: FusedValue| match v {
        FusedValue::Step(def) => FusedValue::Step(new_index[def]),
        other => other,
    };
    let mut slots: Vec<Option<FusedStep>> = steps.into_iter().map(Some).collect();
    order
        .iter()
        .filter_map(|&old| slots[old].take())
        .map(|step| match step {
            FusedStep::Op { op, srcs } => FusedStep::Op {
                op,
                srcs: srcs.into_iter().map(remap).collect(),
            },
            FusedStep::Store { out, src } => FusedStep::Store { out, src: remap(src) },
            FusedStep::Fold { reduction, src } => FusedStep::Fold {
                reduction,
                src: remap(src),
            },
        })
        .collect()
}

/// Allocates the registers of a fused body's steps (`consts` constant registers first, then
/// each value's register from its step to its last use; a value whose one use is a store is
/// written straight into its output row) and returns its plan, or `None` when more than
/// [`fused::MAX_REGS`] registers would be live at once.
fn fused_plan(
    steps: &[FusedStep],
    consts: u32,
    (inputs, outputs): (usize, usize),
    dtype: DType,
) -> Option<fused::Plan> {
    // The constants alone take more registers than a plan has.
    if consts > fused::MAX_REGS {
        return None;
    }
    let reads = |step: &FusedStep| -> Vec<FusedValue> {
        match step {
            FusedStep::Op { srcs, .. } => srcs.clone(),
            FusedStep::Store { src, .. } | FusedStep::Fold { src, .. } => vec![*src],
        }
    };
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for (j, step) in steps.iter().enumerate() {
        for value in reads(step) {
            if let FusedValue::Step(def) = value
                && !users[def].contains(&j)
            {
                users[def].push(j);
            }
        }
    }
    // The output a value is written to directly: its one use is a store.
    let direct = |def: usize| match users[def][..] {
        [user] => match steps[user] {
            FusedStep::Store { out, .. } => Some(out),
            FusedStep::Op { .. } | FusedStep::Fold { .. } => None,
        },
        _ => None,
    };
    let mut free: Vec<u32> = (consts..fused::MAX_REGS).rev().collect();
    let mut code_of: Vec<FusedCode> = vec![0; steps.len()];
    let mut regs = consts;
    let mut out = Vec::with_capacity(steps.len());
    let code = |code_of: &[FusedCode], value: FusedValue| match value {
        FusedValue::Step(def) => code_of[def],
        FusedValue::Input(k) => fused::INPUT + k,
        FusedValue::Const(c) => c,
    };
    for (j, step) in steps.iter().enumerate() {
        let srcs: Vec<FusedCode> = reads(step).into_iter().map(|v| code(&code_of, v)).collect();
        match *step {
            FusedStep::Op { op, .. } => {
                let dst = match direct(j) {
                    Some(k) => fused::OUTPUT + k,
                    None => {
                        let reg = free.pop()?;
                        regs = regs.max(reg + 1);
                        reg
                    }
                };
                code_of[j] = dst;
                out.push(fused::Step {
                    op,
                    dst,
                    a: srcs[0],
                    b: srcs.get(1).copied().unwrap_or(srcs[0]),
                });
                if users[j].is_empty() && dst < fused::INPUT {
                    free.push(dst);
                }
            }
            FusedStep::Fold { reduction, .. } => out.push(fused::Step {
                op: fused::op::FOLD,
                dst: reduction,
                a: srcs[0],
                b: srcs[0],
            }),
            FusedStep::Store { out: k, src } => {
                // Stored by its step already.
                if matches!(src, FusedValue::Step(def) if direct(def).is_some()) {
                    continue;
                }
                out.push(fused::Step {
                    op: fused::op::COPY,
                    dst: fused::OUTPUT + k,
                    a: srcs[0],
                    b: srcs[0],
                });
            }
        }
        // Registers whose value is read for the last time here are free for later steps.
        for value in reads(step) {
            if let FusedValue::Step(def) = value
                && users[def].last() == Some(&j)
                && code_of[def] < fused::INPUT
                && !free.contains(&code_of[def])
            {
                free.push(code_of[def]);
            }
        }
    }
    Some(fused::Plan {
        head: fused::Head {
            steps: out.len() as u32,
            regs,
            consts,
            inputs: inputs as u32,
            outputs: outputs as u32,
            dtype_bytes: dtype.size_bytes() as u32,
        },
        steps: out,
    })
}
