//! The executable definition of every elementwise op and reduction, one scalar at a time.
//!
//! The reference interpreters call these functions and nothing else for arithmetic, so they are
//! the semantics of rfx. Each follows the documentation on its op's variant.

use crate::{DType, Scalar};

/// Converts `x` to `to` (see [`crate::hir::Op::Cast`] for the rules).
pub fn cast(x: Scalar, to: DType) -> Scalar {
    match (x, to) {
        (Scalar::Bool(b), DType::Bool) => Scalar::Bool(b),
        (Scalar::Bool(b), DType::I32) => Scalar::I32(i32::from(b)),
        (Scalar::Bool(b), DType::F32) => Scalar::F32(f32::from(u8::from(b))),
        (Scalar::Bool(b), DType::F64) => Scalar::F64(f64::from(u8::from(b))),
        (Scalar::I32(v), DType::Bool) => Scalar::Bool(v != 0),
        (Scalar::I32(v), DType::I32) => Scalar::I32(v),
        // Rounds to nearest even for |v| > 2^24, as C does.
        (Scalar::I32(v), DType::F32) => Scalar::F32(v as f32),
        (Scalar::I32(v), DType::F64) => Scalar::F64(f64::from(v)),
        (Scalar::F32(v), DType::Bool) => Scalar::Bool(v != 0.0),
        // Truncates toward zero, saturates, NaN → 0 (Rust's `as`).
        (Scalar::F32(v), DType::I32) => Scalar::I32(v as i32),
        (Scalar::F32(v), DType::F32) => Scalar::F32(v),
        (Scalar::F32(v), DType::F64) => Scalar::F64(f64::from(v)),
        (Scalar::F64(v), DType::Bool) => Scalar::Bool(v != 0.0),
        (Scalar::F64(v), DType::I32) => Scalar::I32(v as i32),
        (Scalar::F64(v), DType::F32) => Scalar::F32(v as f32),
        (Scalar::F64(v), DType::F64) => Scalar::F64(v),
    }
}

// ---------------------------------------------------------------------------------------------
// Temporary stand-ins written on branch `wt-mirlir` so the MIR/LIR interpreters compile; the
// real implementations come from the semantics branch (take theirs when merging).
// ---------------------------------------------------------------------------------------------

use crate::{BinaryOp, CmpOp, ReduceOp, UnaryOp};

macro_rules! float_unary {
    ($op:expr, $v:expr, $t:ty) => {{
        let v: $t = $v;
        match $op {
            UnaryOp::Neg => -v,
            UnaryOp::Abs => v.abs(),
            UnaryOp::Sign => {
                if v.is_nan() {
                    v
                } else if v > 0.0 {
                    1.0
                } else if v < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            UnaryOp::Floor => v.floor(),
            UnaryOp::Ceil => v.ceil(),
            UnaryOp::Round => v.round_ties_even(),
            UnaryOp::Sqrt => v.sqrt(),
            UnaryOp::Rsqrt => 1.0 / v.sqrt(),
            UnaryOp::Recip => 1.0 / v,
            UnaryOp::Exp => v.exp(),
            UnaryOp::Exp2 => v.exp2(),
            UnaryOp::Log => v.ln(),
            UnaryOp::Log2 => v.log2(),
            UnaryOp::Sin => v.sin(),
            UnaryOp::Cos => v.cos(),
            UnaryOp::Tan => v.tan(),
            UnaryOp::Tanh => v.tanh(),
            UnaryOp::Atan => v.atan(),
            UnaryOp::Asin => v.asin(),
            UnaryOp::Acos => v.acos(),
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-v).exp()),
            UnaryOp::Not => return None,
        }
    }};
}

/// Applies a one-operand op; `None` when the op does not accept the operand's dtype.
pub fn unary(op: UnaryOp, x: Scalar) -> Option<Scalar> {
    if !op.accepts(x.dtype()) {
        return None;
    }
    Some(match x {
        Scalar::Bool(b) => Scalar::Bool(!b),
        Scalar::I32(v) => Scalar::I32(match op {
            UnaryOp::Neg => v.wrapping_neg(),
            UnaryOp::Abs => v.wrapping_abs(),
            UnaryOp::Sign => v.signum(),
            _ => return None,
        }),
        Scalar::F32(v) => Scalar::F32(float_unary!(op, v, f32)),
        Scalar::F64(v) => Scalar::F64(float_unary!(op, v, f64)),
    })
}

macro_rules! float_binary {
    ($op:expr, $a:expr, $b:expr) => {{
        let (a, b) = ($a, $b);
        match $op {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Pow => a.powf(b),
            BinaryOp::Min => {
                if a < b || a.is_nan() {
                    a
                } else {
                    b
                }
            }
            BinaryOp::Max => {
                if a > b || a.is_nan() {
                    a
                } else {
                    b
                }
            }
            BinaryOp::Atan2 => a.atan2(b),
            BinaryOp::Fmod => a % b,
            BinaryOp::And | BinaryOp::Or => return None,
        }
    }};
}

/// Applies a two-operand op; `None` when the operands' dtypes differ or the op rejects them.
pub fn binary(op: BinaryOp, a: Scalar, b: Scalar) -> Option<Scalar> {
    if a.dtype() != b.dtype() || !op.accepts(a.dtype()) {
        return None;
    }
    Some(match (a, b) {
        (Scalar::Bool(a), Scalar::Bool(b)) => Scalar::Bool(match op {
            BinaryOp::And => a && b,
            BinaryOp::Or => a || b,
            _ => return None,
        }),
        (Scalar::I32(a), Scalar::I32(b)) => Scalar::I32(match op {
            BinaryOp::Add => a.wrapping_add(b),
            BinaryOp::Sub => a.wrapping_sub(b),
            BinaryOp::Mul => a.wrapping_mul(b),
            BinaryOp::Div => {
                if b == 0 {
                    0
                } else {
                    let q = a.wrapping_div(b);
                    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) { q.wrapping_sub(1) } else { q }
                }
            }
            BinaryOp::Min => a.min(b),
            BinaryOp::Max => a.max(b),
            BinaryOp::Fmod => {
                if b == 0 {
                    0
                } else {
                    a.wrapping_rem(b)
                }
            }
            _ => return None,
        }),
        (Scalar::F32(a), Scalar::F32(b)) => Scalar::F32(float_binary!(op, a, b)),
        (Scalar::F64(a), Scalar::F64(b)) => Scalar::F64(float_binary!(op, a, b)),
        _ => return None,
    })
}

/// Compares two scalars; `None` when their dtypes differ or the comparison rejects them.
pub fn compare(op: CmpOp, a: Scalar, b: Scalar) -> Option<bool> {
    if a.dtype() != b.dtype() || !op.accepts(a.dtype()) {
        return None;
    }
    let ordering = match (a, b) {
        (Scalar::Bool(a), Scalar::Bool(b)) => a.partial_cmp(&b),
        (Scalar::I32(a), Scalar::I32(b)) => a.partial_cmp(&b),
        (Scalar::F32(a), Scalar::F32(b)) => a.partial_cmp(&b),
        (Scalar::F64(a), Scalar::F64(b)) => a.partial_cmp(&b),
        _ => return None,
    };
    use std::cmp::Ordering::{Equal, Greater, Less};
    Some(match op {
        CmpOp::Lt => ordering == Some(Less),
        CmpOp::Le => matches!(ordering, Some(Less | Equal)),
        CmpOp::Gt => ordering == Some(Greater),
        CmpOp::Ge => matches!(ordering, Some(Greater | Equal)),
        CmpOp::Eq => ordering == Some(Equal),
        CmpOp::Ne => ordering != Some(Equal),
    })
}

/// `on_true` when `cond`, else `on_false`.
pub fn select(cond: bool, on_true: Scalar, on_false: Scalar) -> Scalar {
    if cond { on_true } else { on_false }
}

/// The starting accumulator of a reduction; `None` when the reduction rejects `dtype`.
pub fn reduce_identity(op: ReduceOp, dtype: DType) -> Option<Scalar> {
    if !op.accepts(dtype) {
        return None;
    }
    Some(match (op, dtype) {
        (ReduceOp::Sum | ReduceOp::Mean, _) => Scalar::zero(dtype),
        (ReduceOp::Prod, _) => cast(Scalar::I32(1), dtype),
        (ReduceOp::Max, DType::I32) => Scalar::I32(i32::MIN),
        (ReduceOp::Min, DType::I32) => Scalar::I32(i32::MAX),
        (ReduceOp::Max, _) => Scalar::from_f64(dtype, f64::NEG_INFINITY),
        (ReduceOp::Min, _) => Scalar::from_f64(dtype, f64::INFINITY),
    })
}

/// Folds `x` into the accumulator `acc`.
pub fn reduce_combine(op: ReduceOp, acc: Scalar, x: Scalar) -> Option<Scalar> {
    let bin = match op {
        ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
        ReduceOp::Prod => BinaryOp::Mul,
        ReduceOp::Max => BinaryOp::Max,
        ReduceOp::Min => BinaryOp::Min,
    };
    binary(bin, acc, x)
}

/// The result of a reduction of `count` elements whose accumulator is `acc`.
pub fn reduce_finish(op: ReduceOp, acc: Scalar, count: usize) -> Option<Scalar> {
    match op {
        ReduceOp::Mean => binary(BinaryOp::Div, acc, Scalar::from_f64(acc.dtype(), count as f64)),
        _ => Some(acc),
    }
}
