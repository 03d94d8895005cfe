//! Cranelift code for every LIR op, in scalar form (`w == 1`) and in vector form (`w == 2` for
//! 64-bit lanes, `w == 4` for 32-bit lanes), with the IEEE semantics of `rfx_ir::semantics`.
//!
//! Representation: `f32`/`f64`/`i32` values are `F32`/`F64`/`I32` scalars or `F32X4`/`F64X2`/
//! `I32X4` vectors; a `bool` is an `I8` holding 0 or 1 in scalar form and an all-ones/all-zeros
//! lane mask (`I32X4` or `I64X2`) in vector form, which is what vector comparisons produce.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    Endianness, InstBuilder, InstructionData, MemFlagsData, Opcode, Type, Value, types,
};
use cranelift_frontend::FunctionBuilder;
use rfx_ir::{BinaryOp, CmpOp, DType, ReduceOp, Scalar, UnaryOp};
use rfx_lower::{BackendError, Unsupported};

use crate::imports::Imports;

/// The Cranelift type of a `dtype` value at width `w`.
pub(crate) fn cl_type(dtype: DType, w: u8) -> Type {
    match (dtype, w) {
        (DType::F32, 1) => types::F32,
        (DType::F64, 1) => types::F64,
        (DType::I32, 1) => types::I32,
        (DType::Bool, 1) => types::I8,
        (DType::F32, _) => types::F32X4,
        (DType::F64, _) => types::F64X2,
        (DType::I32, _) => types::I32X4,
        (DType::Bool, 2) => types::I64X2,
        (DType::Bool, _) => types::I32X4,
    }
}

/// Whether a kernel whose slots have these dtypes can run `w` lanes at a time: every lane
/// type must fill a 128-bit vector with the same number of lanes.
pub(crate) fn vectorizable(dtypes: impl IntoIterator<Item = DType>, w: u8) -> bool {
    dtypes.into_iter().all(|d| {
        matches!(
            (d, w),
            (DType::Bool, 2 | 4) | (DType::F32 | DType::I32, 4) | (DType::F64, 2)
        )
    })
}

fn unsupported(op: &'static str, dtype: DType) -> BackendError {
    BackendError::Unsupported {
        backend: "cpu",
        what: Unsupported::OpDType(op, dtype),
    }
}

/// Flags for bitcasts between vector types (they need an explicit lane order).
pub(crate) fn bitcast_flags() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// A scalar op applied to each lane by [`Emitter::per_lane`].
type LaneFn<'a> = dyn FnMut(&mut Emitter<'_, '_>, &[Value]) -> Result<Value, BackendError> + 'a;

/// Emits ops for one kernel at one width.
pub(crate) struct Emitter<'a, 'f> {
    pub(crate) b: &'a mut FunctionBuilder<'f>,
    pub(crate) w: u8,
    pub(crate) imports: &'a Imports,
}

impl Emitter<'_, '_> {
    /// A constant of `dtype` (splatted in vector form). A vector constant is a `vconst`: one
    /// load from the constant pool, where a splat of an immediate takes a move to a general
    /// register, a move to a vector register and a shuffle, at every use in a loop.
    pub(crate) fn constant(&mut self, value: Scalar) -> Value {
        if self.w > 1 {
            let lane: Vec<u8> = match value {
                Scalar::F32(v) => v.to_le_bytes().to_vec(),
                Scalar::F64(v) => v.to_le_bytes().to_vec(),
                Scalar::I32(v) => v.to_le_bytes().to_vec(),
                Scalar::Bool(v) => {
                    let bytes = if self.w == 2 { 8 } else { 4 };
                    vec![if v { 0xff } else { 0 }; bytes]
                }
            };
            let lanes = 16 / lane.len();
            let handle = self.b.func.dfg.constants.insert(lane.repeat(lanes).into());
            return self.b.ins().vconst(cl_type(value.dtype(), self.w), handle);
        }
        let scalar = match value {
            Scalar::F32(v) => self.b.ins().f32const(v),
            Scalar::F64(v) => self.b.ins().f64const(v),
            Scalar::I32(v) => self.b.ins().iconst(types::I32, i64::from(v)),
            Scalar::Bool(v) => {
                if self.w == 1 {
                    return self.b.ins().iconst(types::I8, i64::from(v));
                }
                let lane = if self.w == 2 { types::I64 } else { types::I32 };
                let bits = self.b.ins().iconst(lane, if v { -1 } else { 0 });
                return self.b.ins().splat(cl_type(DType::Bool, self.w), bits);
            }
        };
        self.splat(scalar, value.dtype())
    }

    /// Broadcasts a scalar of `dtype` to the current width (a bool becomes a lane mask).
    pub(crate) fn splat(&mut self, scalar: Value, dtype: DType) -> Value {
        if self.w == 1 {
            return scalar;
        }
        if dtype == DType::Bool {
            let lane = if self.w == 2 { types::I64 } else { types::I32 };
            let wide = self.b.ins().uextend(lane, scalar);
            let mask = self.b.ins().ineg(wide);
            return self.b.ins().splat(cl_type(DType::Bool, self.w), mask);
        }
        self.b.ins().splat(cl_type(dtype, self.w), scalar)
    }

    fn float_const(&mut self, dtype: DType, value: f64) -> Value {
        let s = if dtype == DType::F64 {
            Scalar::F64(value)
        } else {
            Scalar::F32(value as f32)
        };
        self.constant(s)
    }

    fn int_const(&mut self, value: i32) -> Value {
        self.constant(Scalar::I32(value))
    }

    /// `cond ? a : b` lane-wise; `cond` is a bool of the current width, `a`/`b` of `ty`.
    pub(crate) fn select(&mut self, cond: Value, a: Value, b: Value, ty: Type) -> Value {
        if self.w == 1 {
            return self.b.ins().select(cond, a, b);
        }
        let mask_ty = self.b.func.dfg.value_type(cond);
        let mask = if mask_ty == ty {
            cond
        } else {
            self.b.ins().bitcast(ty, bitcast_flags(), cond)
        };
        // A select against +0 (all bits zero) is the mask ANDed with the other operand: one
        // instruction where `bitselect` takes three (a Jacobian placing its diagonal).
        if self.is_zero_bits(b) {
            return self.b.ins().band(mask, a);
        }
        if self.is_zero_bits(a) {
            return self.b.ins().band_not(b, mask);
        }
        self.b.ins().bitselect(mask, a, b)
    }

    /// Whether `v` is a constant with every bit zero (`+0.0`, `0`, `false`, splatted or not).
    fn is_zero_bits(&self, v: Value) -> bool {
        let dfg = &self.b.func.dfg;
        let Some(inst) = dfg.value_def(v).inst() else {
            return false;
        };
        match dfg.insts[inst] {
            InstructionData::Unary {
                opcode: Opcode::Splat,
                arg,
            } => self.is_zero_bits(arg),
            InstructionData::UnaryIeee64 {
                opcode: Opcode::F64const,
                imm,
            } => imm.bits() == 0,
            InstructionData::UnaryIeee32 {
                opcode: Opcode::F32const,
                imm,
            } => imm.bits() == 0,
            InstructionData::UnaryImm {
                opcode: Opcode::Iconst,
                imm,
            } => imm.bits() == 0,
            InstructionData::UnaryConst {
                opcode: Opcode::Vconst,
                constant_handle,
            } => dfg
                .constants
                .get(constant_handle)
                .as_slice()
                .iter()
                .all(|&byte| byte == 0),
            _ => false,
        }
    }

    /// `min(a, c)` or `max(a, c)` (`op`) of a float `a` and a constant `c` that is not NaN,
    /// as `c < a ? c : a` (`a < c ? c : a`): Cranelift lowers this form to one `minps`/`maxps`
    /// (`minss`/`maxss`). It equals the NaN-propagating `op(c, a)` bit for bit, and `op(a, c)`
    /// too when `c` is not a zero (they differ only in which of `-0`, `+0` a tie gives).
    pub(crate) fn min_max_by_const(&mut self, op: BinaryOp, a: Value, c: Value, ty: Type) -> Value {
        let c_wins = if op == BinaryOp::Min {
            self.fcmp(FloatCC::LessThan, c, a)
        } else {
            self.fcmp(FloatCC::LessThan, a, c)
        };
        self.select(c_wins, c, a, ty)
    }

    fn fcmp(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(cc, a, b)
    }

    fn or(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().bor(a, b)
    }

    /// Applies a scalar function lane by lane (for ops with no vector instruction).
    fn per_lane(
        &mut self,
        args: &[Value],
        dtype_in: DType,
        dtype_out: DType,
        f: &mut LaneFn<'_>,
    ) -> Result<Value, BackendError> {
        if self.w == 1 {
            return f(self, args);
        }
        let w = self.w;
        let out_ty = cl_type(dtype_out, w);
        let mut result: Option<Value> = None;
        for lane in 0..w {
            let lanes: Vec<Value> = args.iter().map(|&a| self.lane(a, dtype_in, lane)).collect();
            let mut scalar = Emitter {
                b: &mut *self.b,
                w: 1,
                imports: self.imports,
            };
            let r = f(&mut scalar, &lanes)?;
            let r = if dtype_out == DType::Bool {
                let wide_ty = if w == 2 { types::I64 } else { types::I32 };
                let wide = self.b.ins().uextend(wide_ty, r);
                self.b.ins().ineg(wide)
            } else {
                r
            };
            result = Some(match result {
                None => self.b.ins().splat(out_ty, r),
                Some(v) => self.b.ins().insertlane(v, r, lane),
            });
        }
        result.ok_or_else(|| unsupported("per-lane", dtype_out))
    }

    /// Lane `lane` of a vector value as a scalar of `dtype` (a mask lane becomes 0/1 `I8`).
    pub(crate) fn lane(&mut self, v: Value, dtype: DType, lane: u8) -> Value {
        let x = self.b.ins().extractlane(v, lane);
        if dtype == DType::Bool {
            let one = self.b.ins().band_imm_s(x, 1);
            self.b.ins().ireduce(types::I8, one)
        } else {
            x
        }
    }

    /// `op(x)` for a value of `dtype`.
    pub(crate) fn unary(&mut self, op: UnaryOp, x: Value, dtype: DType) -> Result<Value, BackendError> {
        let ty = cl_type(dtype, self.w);
        let float = dtype.is_float();
        Ok(match (op, dtype) {
            (UnaryOp::Neg, _) if float => self.b.ins().fneg(x),
            (UnaryOp::Neg, DType::I32) => self.b.ins().ineg(x),
            (UnaryOp::Abs, _) if float => self.b.ins().fabs(x),
            (UnaryOp::Abs, DType::I32) => self.b.ins().iabs(x),
            (UnaryOp::Sign, _) if float => {
                let zero = self.float_const(dtype, 0.0);
                let one = self.float_const(dtype, 1.0);
                let minus = self.float_const(dtype, -1.0);
                let gt = self.fcmp(FloatCC::GreaterThan, x, zero);
                let lt = self.fcmp(FloatCC::LessThan, x, zero);
                let nan = self.fcmp(FloatCC::Unordered, x, x);
                // sign(NaN) = NaN, sign(±0) = +0.
                let zero_or_nan = self.select(nan, x, zero, ty);
                let neg = self.select(lt, minus, zero_or_nan, ty);
                self.select(gt, one, neg, ty)
            }
            (UnaryOp::Sign, DType::I32) => {
                let zero = self.int_const(0);
                let one = self.int_const(1);
                let minus = self.int_const(-1);
                let gt = self.b.ins().icmp(IntCC::SignedGreaterThan, x, zero);
                let lt = self.b.ins().icmp(IntCC::SignedLessThan, x, zero);
                let neg = self.select(lt, minus, zero, ty);
                self.select(gt, one, neg, ty)
            }
            (UnaryOp::Floor, _) if float => self.b.ins().floor(x),
            (UnaryOp::Ceil, _) if float => self.b.ins().ceil(x),
            (UnaryOp::Round, _) if float => self.b.ins().nearest(x),
            (UnaryOp::Sqrt, _) if float => self.b.ins().sqrt(x),
            (UnaryOp::Rsqrt, _) if float => {
                let one = self.float_const(dtype, 1.0);
                let root = self.b.ins().sqrt(x);
                self.b.ins().fdiv(one, root)
            }
            (UnaryOp::Recip, _) if float => {
                let one = self.float_const(dtype, 1.0);
                self.b.ins().fdiv(one, x)
            }
            (UnaryOp::Not, DType::Bool) => {
                if self.w == 1 {
                    self.b.ins().bxor_imm_s(x, 1)
                } else {
                    self.b.ins().bnot(x)
                }
            }
            (op, _) if float && op.is_transcendental() => crate::transcendental::unary(self, op, x, dtype)?,
            _ => return Err(unsupported(op.name(), dtype)),
        })
    }

    /// `op(a, b)` for values of `dtype`.
    pub(crate) fn binary(
        &mut self,
        op: BinaryOp,
        a: Value,
        b: Value,
        dtype: DType,
    ) -> Result<Value, BackendError> {
        let ty = cl_type(dtype, self.w);
        let float = dtype.is_float();
        Ok(match (op, dtype) {
            (BinaryOp::Add, _) if float => self.b.ins().fadd(a, b),
            (BinaryOp::Sub, _) if float => self.b.ins().fsub(a, b),
            (BinaryOp::Mul, _) if float => self.b.ins().fmul(a, b),
            (BinaryOp::Div, _) if float => self.b.ins().fdiv(a, b),
            (BinaryOp::Add, DType::I32) => self.b.ins().iadd(a, b),
            (BinaryOp::Sub, DType::I32) => self.b.ins().isub(a, b),
            (BinaryOp::Mul, DType::I32) => self.b.ins().imul(a, b),
            // NumPy's NaN-propagating minimum/maximum: `a` when `a < b` (`a > b`) or `a` is NaN,
            // else `b` — not Cranelift's `fmin`/`fmax`, which differ on ±0 ties.
            (BinaryOp::Min | BinaryOp::Max, _) if float => {
                let cc = if op == BinaryOp::Min {
                    FloatCC::LessThan
                } else {
                    FloatCC::GreaterThan
                };
                let wins = self.fcmp(cc, a, b);
                let nan = self.fcmp(FloatCC::Unordered, a, a);
                let take_a = self.or(wins, nan);
                self.select(take_a, a, b, ty)
            }
            (BinaryOp::Min, DType::I32) => self.b.ins().smin(a, b),
            (BinaryOp::Max, DType::I32) => self.b.ins().smax(a, b),
            (BinaryOp::And, DType::Bool) => self.b.ins().band(a, b),
            (BinaryOp::Or, DType::Bool) => self.b.ins().bor(a, b),
            (BinaryOp::Div, DType::I32) => {
                self.per_lane(&[a, b], dtype, dtype, &mut |e, v| Ok(e.floor_div_i32(v[0], v[1])))?
            }
            (BinaryOp::Fmod, DType::I32) => {
                self.per_lane(&[a, b], dtype, dtype, &mut |e, v| Ok(e.rem_i32(v[0], v[1])))?
            }
            (BinaryOp::Fmod, _) if float => self.per_lane(&[a, b], dtype, dtype, &mut |e, v| {
                let func = if dtype == DType::F64 {
                    e.imports.fmod
                } else {
                    e.imports.fmodf
                };
                let call = e.b.ins().call(func, &[v[0], v[1]]);
                Ok(e.b.inst_results(call)[0])
            })?,
            (BinaryOp::Pow | BinaryOp::Atan2, _) if float => {
                crate::transcendental::binary(self, op, a, b, dtype)?
            }
            _ => return Err(unsupported(op.name(), dtype)),
        })
    }

    /// Floor division with `x / 0 = 0` and `MIN / -1 = MIN` (scalar `I32`).
    fn floor_div_i32(&mut self, a: Value, b: Value) -> Value {
        let zero = self.b.ins().iconst(types::I32, 0);
        let one = self.b.ins().iconst(types::I32, 1);
        let b_zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
        let b_m1 = self.b.ins().icmp_imm_s(IntCC::Equal, b, -1);
        let a_min = self.b.ins().icmp_imm_s(IntCC::Equal, a, i64::from(i32::MIN));
        let overflow = self.b.ins().band(b_m1, a_min);
        let unsafe_div = self.b.ins().bor(b_zero, overflow);
        // Divide by 1 where the hardware would trap; the result is fixed up below.
        let divisor = self.b.ins().select(unsafe_div, one, b);
        let q = self.b.ins().sdiv(a, divisor);
        let r = self.b.ins().srem(a, divisor);
        // Round toward −∞: subtract one when the remainder is non-zero and the signs differ.
        let r_nonzero = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
        let sign_differs = {
            let x = self.b.ins().bxor(r, divisor);
            self.b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0)
        };
        let adjust = self.b.ins().band(r_nonzero, sign_differs);
        let q_minus = self.b.ins().iadd_imm_s(q, -1);
        let floored = self.b.ins().select(adjust, q_minus, q);
        // MIN / -1 wraps to MIN, which is `a / 1`.
        self.b.ins().select(b_zero, zero, floored)
    }

    /// Truncated remainder with `x % 0 = 0` (scalar `I32`).
    fn rem_i32(&mut self, a: Value, b: Value) -> Value {
        let zero = self.b.ins().iconst(types::I32, 0);
        let one = self.b.ins().iconst(types::I32, 1);
        let b_zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
        let b_m1 = self.b.ins().icmp_imm_s(IntCC::Equal, b, -1);
        let fix = self.b.ins().bor(b_zero, b_m1);
        let divisor = self.b.ins().select(fix, one, b);
        let r = self.b.ins().srem(a, divisor);
        self.b.ins().select(b_zero, zero, r)
    }

    /// A comparison of values of `dtype`, giving a bool of the current width.
    pub(crate) fn compare(&mut self, op: CmpOp, a: Value, b: Value, dtype: DType) -> Value {
        if dtype.is_float() {
            let cc = match op {
                CmpOp::Lt => FloatCC::LessThan,
                CmpOp::Le => FloatCC::LessThanOrEqual,
                CmpOp::Gt => FloatCC::GreaterThan,
                CmpOp::Ge => FloatCC::GreaterThanOrEqual,
                CmpOp::Eq => FloatCC::Equal,
                // Unordered or unequal: NaN != anything is true.
                CmpOp::Ne => FloatCC::NotEqual,
            };
            self.fcmp(cc, a, b)
        } else {
            let cc = match op {
                CmpOp::Lt => IntCC::SignedLessThan,
                CmpOp::Le => IntCC::SignedLessThanOrEqual,
                CmpOp::Gt => IntCC::SignedGreaterThan,
                CmpOp::Ge => IntCC::SignedGreaterThanOrEqual,
                CmpOp::Eq => IntCC::Equal,
                CmpOp::Ne => IntCC::NotEqual,
            };
            self.b.ins().icmp(cc, a, b)
        }
    }

    /// Converts `x` from `from` to `to` with the semantics of `rfx_ir::semantics::cast`.
    pub(crate) fn cast(&mut self, x: Value, from: DType, to: DType) -> Result<Value, BackendError> {
        let to_ty = cl_type(to, self.w);
        Ok(match (from, to) {
            (f, t) if f == t => x,
            (DType::F32, DType::F64) => self.b.ins().fpromote(to_ty, x),
            (DType::F64, DType::F32) => self.b.ins().fdemote(to_ty, x),
            // Saturating, NaN → 0: Rust's `as`.
            (DType::F32 | DType::F64, DType::I32) => self.b.ins().fcvt_to_sint_sat(to_ty, x),
            (DType::I32, DType::F32 | DType::F64) => self.b.ins().fcvt_from_sint(to_ty, x),
            (DType::F32 | DType::F64, DType::Bool) => {
                let zero = self.float_const(from, 0.0);
                self.fcmp(FloatCC::NotEqual, x, zero)
            }
            (DType::I32, DType::Bool) => {
                let zero = self.int_const(0);
                self.b.ins().icmp(IntCC::NotEqual, x, zero)
            }
            // A vector mask is all ones or all zeros per lane: AND it with the lanes of 1.
            (DType::Bool, DType::F32 | DType::F64 | DType::I32) if self.w > 1 => {
                let one = match to {
                    DType::I32 => self.int_const(1),
                    _ => self.float_const(to, 1.0),
                };
                let mask = self.b.ins().bitcast(to_ty, bitcast_flags(), x);
                self.b.ins().band(mask, one)
            }
            (DType::Bool, _) => {
                let (one, zero) = match to {
                    DType::F32 | DType::F64 => (self.float_const(to, 1.0), self.float_const(to, 0.0)),
                    _ => (self.int_const(1), self.int_const(0)),
                };
                self.select(x, one, zero, to_ty)
            }
            _ => return Err(unsupported("cast", to)),
        })
    }

    /// Folds `x` into the accumulator `acc` (both of `dtype`).
    pub(crate) fn combine(
        &mut self,
        op: ReduceOp,
        acc: Value,
        x: Value,
        dtype: DType,
    ) -> Result<Value, BackendError> {
        let bin = match op {
            ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        self.binary(bin, acc, x, dtype)
    }
}
