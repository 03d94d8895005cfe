//! The executable definition of every elementwise op, reduction and scan, one scalar at a time.
//!
//! The reference interpreters call these functions and nothing else for arithmetic, so they are
//! the semantics of rfx. Each follows the documentation on its op's variant.
//!
//! Every function is pure and total: it never panics, and returns `None` when the op does not
//! accept its operands' dtype (or the operands' dtypes differ). A verified kernel never reaches
//! a `None`.
//!
//! **Floats** are computed in the operands' own dtype with Rust's `std` (`f32::sin` and the
//! like call the system libm, so transcendental results are as accurate as the platform's libm:
//! glibc's are within 1–2 ULP). The exactly-rounded ops (`add`, `sub`, `mul`, `div`, `sqrt`,
//! `recip`, `fmod`, `min`, `max`, `abs`, `neg`, `floor`, `ceil`, `round`, `sign`, comparisons)
//! give the IEEE 754 result bit for bit. Compound ops round at each step of their formula:
//! `rsqrt(x) = 1 / sqrt(x)` and `sigmoid(x)` is `1 / (1 + exp(-x))` for `x >= 0` (and NaN) and `exp(x) / (1 + exp(x))` for
//! `x < 0`, so it stays accurate where the result is subnormal; each step rounds.
//!
//! **`i32`** arithmetic wraps (two's complement) and never traps:
//! - `add`, `sub`, `mul`, `neg`, `abs` wrap (`abs(i32::MIN) = i32::MIN`, `neg(i32::MIN) = i32::MIN`);
//! - `div` is floor division (NumPy's `//`): the quotient is rounded toward −∞, so
//!   `-7 / 2 = -4` and `7 / -2 = -4`; `x / 0 = 0` (NumPy also gives 0) and `i32::MIN / -1`
//!   wraps to `i32::MIN`;
//! - `fmod` is the truncated remainder, with the sign of the dividend (`-7 fmod 2 = -1`,
//!   `7 fmod -2 = 1`); `x fmod 0 = 0` and `i32::MIN fmod -1 = 0`;
//! - `min` and `max` are the plain integer minimum and maximum; `sign` is −1, 0 or 1.
//!
//! **`bool`** accepts `not`, `and`, `or`, `eq`, `ne` and `select`; `true > false` is not defined
//! (ordering comparisons reject bool).

use crate::error::TypeError;
use crate::ops::{BinaryOp, CmpOp, ReduceOp, ScanOp, UnaryOp};
use crate::{DType, Scalar, TensorType};

/// The element a `gather` reads from a buffer (or along a table axis) of `len` elements at
/// index `i`: an `i32`, or a float truncated toward zero (NaN as 0), clamped into `0..len`.
/// `None` for a bool or an empty buffer.
pub fn clamp_index(i: Scalar, len: usize) -> Option<usize> {
    let last = len.checked_sub(1)?;
    match i {
        Scalar::I32(v) => Some(usize::try_from(v).unwrap_or(0).min(last)),
        // Rust's `as` truncates toward zero, saturates and maps NaN to 0.
        Scalar::F64(v) => Some(usize::try_from(v as i64).unwrap_or(0).min(last)),
        Scalar::F32(v) => Some(usize::try_from(v as i64).unwrap_or(0).min(last)),
        Scalar::Bool(_) => None,
    }
}

/// Converts `x` to `to` (see [`crate::hir::Op::Cast`] for the rules).
///
/// Float → `i32` truncates toward zero and saturates, NaN → 0; number → bool is `x != 0`
/// (so NaN → `true`, `-0.0` → `false`); bool → number is 0 or 1; `f64` → `f32` and
/// `i32` → `f32` round to nearest, ties to even.
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

/// The largest index that `dtype` holds exactly, so that every value of an `iota` (HIR) or an
/// `index` (MIR, LIR) is exact: 2^24 for `f32`, 2^31 − 1 for `i32`, 2^53 for `f64`, 0 for bool
/// (which holds no index).
pub fn max_exact_index(dtype: DType) -> usize {
    match dtype {
        DType::F32 => 1 << 24,
        DType::I32 => i32::MAX as usize,
        DType::F64 => 1 << 53,
        DType::Bool => 0,
    }
}

/// Checks the values of a `literal` (or a literal buffer) of type `ty`: one value per element,
/// each of the type's dtype. The HIR typing rule and both buffer verifiers call it.
pub fn check_literal(values: &[Scalar], ty: &TensorType) -> Result<(), TypeError> {
    if values.len() != ty.shape.numel() {
        return Err(TypeError::LiteralLength {
            expected: ty.shape.numel(),
            found: values.len(),
        });
    }
    match values.iter().find(|v| v.dtype() != ty.dtype) {
        Some(value) => Err(TypeError::ConstantDType {
            literal: value.dtype(),
            declared: ty.dtype,
        }),
        None => Ok(()),
    }
}

/// The index `i` as a value of `dtype`: exact for `i <= max_exact_index(dtype)`, which the
/// verifiers guarantee. `None` for bool or an index beyond that bound.
pub fn index_value(i: usize, dtype: DType) -> Option<Scalar> {
    if i > max_exact_index(dtype) {
        return None;
    }
    match dtype {
        DType::F32 => Some(Scalar::F32(i as f32)),
        DType::F64 => Some(Scalar::F64(i as f64)),
        DType::I32 => i32::try_from(i).ok().map(Scalar::I32),
        DType::Bool => None,
    }
}

/// Applies a one-operand elementwise op; the result has `x`'s dtype.
///
/// `None` when the op does not accept `x`'s dtype ([`UnaryOp::accepts`]): `not` takes bool only,
/// `neg`/`abs`/`sign` take any number, the rest take floats only.
pub fn unary(op: UnaryOp, x: Scalar) -> Option<Scalar> {
    if !op.accepts(x.dtype()) {
        return None;
    }
    match x {
        Scalar::Bool(v) => match op {
            UnaryOp::Not => Some(Scalar::Bool(!v)),
            _ => None,
        },
        Scalar::I32(v) => unary_i32(op, v).map(Scalar::I32),
        Scalar::F32(v) => unary_f32(op, v).map(Scalar::F32),
        Scalar::F64(v) => unary_f64(op, v).map(Scalar::F64),
    }
}

/// Applies a two-operand elementwise op to operands of one dtype; the result has that dtype.
///
/// `None` when the dtypes differ or the op does not accept them ([`BinaryOp::accepts`]).
/// For `i32` the rules are those in the [module documentation](self): wrapping arithmetic,
/// floor division with `x / 0 = 0`, truncated remainder with `x fmod 0 = 0`.
pub fn binary(op: BinaryOp, a: Scalar, b: Scalar) -> Option<Scalar> {
    if !op.accepts(a.dtype()) {
        return None;
    }
    match (a, b) {
        (Scalar::Bool(a), Scalar::Bool(b)) => match op {
            BinaryOp::And => Some(Scalar::Bool(a && b)),
            BinaryOp::Or => Some(Scalar::Bool(a || b)),
            _ => None,
        },
        (Scalar::I32(a), Scalar::I32(b)) => binary_i32(op, a, b).map(Scalar::I32),
        (Scalar::F32(a), Scalar::F32(b)) => binary_f32(op, a, b).map(Scalar::F32),
        (Scalar::F64(a), Scalar::F64(b)) => binary_f64(op, a, b).map(Scalar::F64),
        _ => None,
    }
}

/// Compares two operands of one dtype.
///
/// IEEE comparisons: any comparison with NaN is `false` except `ne`, which is `true`, and
/// `-0 == 0`. Bool operands accept only `eq` and `ne`. `None` when the dtypes differ or the
/// comparison does not accept them ([`CmpOp::accepts`]).
pub fn compare(op: CmpOp, a: Scalar, b: Scalar) -> Option<bool> {
    if !op.accepts(a.dtype()) {
        return None;
    }
    match (a, b) {
        (Scalar::Bool(a), Scalar::Bool(b)) => Some(op.holds(&a, &b)),
        (Scalar::I32(a), Scalar::I32(b)) => Some(op.holds(&a, &b)),
        (Scalar::F32(a), Scalar::F32(b)) => Some(op.holds(&a, &b)),
        (Scalar::F64(a), Scalar::F64(b)) => Some(op.holds(&a, &b)),
        _ => None,
    }
}

/// `a` when `cond` is true, else `b`. The unselected operand is never inspected, so its NaN
/// (or any other value) cannot leak into the result.
pub fn select(cond: bool, a: Scalar, b: Scalar) -> Scalar {
    if cond { a } else { b }
}

/// `clamp(x, lo, hi) = min(max(x, lo), hi)` with the NaN-propagating [`BinaryOp::Max`] and
/// [`BinaryOp::Min`] (NumPy's `clip`): NaN in any operand propagates, and `lo > hi` gives `hi`.
///
/// `None` unless all three operands share one numeric dtype.
pub fn clamp(x: Scalar, lo: Scalar, hi: Scalar) -> Option<Scalar> {
    binary(BinaryOp::Min, binary(BinaryOp::Max, x, lo)?, hi)
}

/// The value a reduction's accumulator starts from, in `dtype`.
///
/// - `sum` and `mean`: `-0.0` for floats (the IEEE additive identity: `-0 + x` is `x` for every
///   `x`, `+0` included, so a one-element sum is that element bit for bit), `0` for `i32`;
/// - `prod`: 1;
/// - `max`: −Inf for floats, `i32::MIN`; `min`: +Inf for floats, `i32::MAX`.
///
/// `None` when the reduction does not accept `dtype` ([`ReduceOp::accepts`]).
pub fn reduce_identity(op: ReduceOp, dtype: DType) -> Option<Scalar> {
    if !op.accepts(dtype) {
        return None;
    }
    let value = match (op, dtype) {
        (_, DType::Bool) => return None,
        (ReduceOp::Sum | ReduceOp::Mean, DType::I32) => Scalar::I32(0),
        (ReduceOp::Sum | ReduceOp::Mean, DType::F32) => Scalar::F32(-0.0),
        (ReduceOp::Sum | ReduceOp::Mean, DType::F64) => Scalar::F64(-0.0),
        (ReduceOp::Prod, DType::I32) => Scalar::I32(1),
        (ReduceOp::Prod, DType::F32) => Scalar::F32(1.0),
        (ReduceOp::Prod, DType::F64) => Scalar::F64(1.0),
        (ReduceOp::Max, DType::I32) => Scalar::I32(i32::MIN),
        (ReduceOp::Max, DType::F32) => Scalar::F32(f32::NEG_INFINITY),
        (ReduceOp::Max, DType::F64) => Scalar::F64(f64::NEG_INFINITY),
        (ReduceOp::Min, DType::I32) => Scalar::I32(i32::MAX),
        (ReduceOp::Min, DType::F32) => Scalar::F32(f32::INFINITY),
        (ReduceOp::Min, DType::F64) => Scalar::F64(f64::INFINITY),
    };
    Some(value)
}

/// Folds one more element `x` into the accumulator: `acc + x` for `sum` and `mean`, `acc * x`
/// for `prod`, `max(acc, x)` / `min(acc, x)` (the NaN-propagating [`BinaryOp::Max`] /
/// [`BinaryOp::Min`]) for `max` / `min`.
///
/// Because the accumulator is the first operand, a NaN anywhere in the reduced elements makes
/// the result NaN, and on a `±0` tie the later element wins. `None` on a dtype mismatch or a
/// dtype the reduction does not accept.
pub fn reduce_combine(op: ReduceOp, acc: Scalar, x: Scalar) -> Option<Scalar> {
    if !op.accepts(acc.dtype()) {
        return None;
    }
    let binary_op = match op {
        ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
        ReduceOp::Prod => BinaryOp::Mul,
        ReduceOp::Max => BinaryOp::Max,
        ReduceOp::Min => BinaryOp::Min,
    };
    binary(binary_op, acc, x)
}

/// Turns the accumulator of `count` combined elements into the reduction's result.
///
/// `mean` divides by `count` converted to the accumulator's dtype (rounded to nearest for
/// counts above 2^24 in `f32`), so the empty mean is `-0 / 0`, NaN. An empty float `sum` gives
/// `+0` (NumPy's `sum([])`), not the `-0.0` identity. Every other case returns `acc` unchanged.
/// `None` when the reduction does not accept the accumulator's dtype.
pub fn reduce_finish(op: ReduceOp, acc: Scalar, count: usize) -> Option<Scalar> {
    if !op.accepts(acc.dtype()) {
        return None;
    }
    match (op, acc) {
        (ReduceOp::Mean, Scalar::F32(sum)) => Some(Scalar::F32(sum / count as f32)),
        (ReduceOp::Mean, Scalar::F64(sum)) => Some(Scalar::F64(sum / count as f64)),
        (ReduceOp::Mean, _) => None,
        (ReduceOp::Sum, Scalar::F32(_)) if count == 0 => Some(Scalar::F32(0.0)),
        (ReduceOp::Sum, Scalar::F64(_)) if count == 0 => Some(Scalar::F64(0.0)),
        _ => Some(acc),
    }
}

/// One step of the scan `op`: the accumulator `acc` combined with the operand `x` (and, for
/// [`ScanOp::Linear`], scaled by the coefficient `coef` first: `coef * acc + x`, rounded
/// twice). `None` when the dtypes differ or the op rejects them, or when `coef` is missing for
/// the linear recurrence.
pub fn scan_step(op: ScanOp, acc: Scalar, x: Scalar, coef: Option<Scalar>) -> Option<Scalar> {
    if op == ScanOp::Linear {
        let scaled = binary(BinaryOp::Mul, coef?, acc)?;
        return reduce_combine(ReduceOp::Sum, scaled, x);
    }
    reduce_combine(op.reduce_op(), acc, x)
}

/// The scan [`ScanOp`] `op` of `values`, a row-major array of extents `dims`, along `axis`:
/// each line along the axis starts from the op's identity ([`reduce_identity`] of
/// [`ScanOp::reduce_op`]) and takes its elements one at a time with [`scan_step`], from the
/// first (or with `reverse` the last) element on, element `i` getting the accumulator so far.
/// `coefs` holds [`ScanOp::Linear`]'s coefficient, one per element as `values` (`None` for the
/// folds). `None` when `axis` is not below the rank, `values` (or `coefs`) does not hold one
/// element per point of `dims`, the linear recurrence has no `coefs`, or the op rejects the
/// elements' dtype.
pub fn scan(
    op: ScanOp,
    values: &[Scalar],
    coefs: Option<&[Scalar]>,
    dims: &[usize],
    axis: usize,
    reverse: bool,
) -> Option<Vec<Scalar>> {
    let extent = *dims.get(axis)?;
    let inner: usize = dims.get(axis + 1..)?.iter().product();
    let outer: usize = dims.get(..axis)?.iter().product();
    if outer.checked_mul(extent)?.checked_mul(inner)? != values.len()
        || coefs.is_some_and(|c| c.len() != values.len())
        || coefs.is_some() != (op == ScanOp::Linear)
    {
        return None;
    }
    let Some(first) = values.first() else {
        return Some(Vec::new());
    };
    let identity = reduce_identity(op.reduce_op(), first.dtype())?;
    let mut out = values.to_vec();
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = identity;
            for step in 0..extent {
                let k = if reverse { extent - 1 - step } else { step };
                let at = (o * extent + k) * inner + i;
                let coef = match coefs {
                    Some(c) => Some(*c.get(at)?),
                    None => None,
                };
                acc = scan_step(op, acc, *values.get(at)?, coef)?;
                *out.get_mut(at)? = acc;
            }
        }
    }
    Some(out)
}

fn unary_i32(op: UnaryOp, x: i32) -> Option<i32> {
    match op {
        UnaryOp::Neg => Some(x.wrapping_neg()),
        UnaryOp::Abs => Some(x.wrapping_abs()),
        UnaryOp::Sign => Some(x.signum()),
        _ => None,
    }
}

fn binary_i32(op: BinaryOp, a: i32, b: i32) -> Option<i32> {
    match op {
        BinaryOp::Add => Some(a.wrapping_add(b)),
        BinaryOp::Sub => Some(a.wrapping_sub(b)),
        BinaryOp::Mul => Some(a.wrapping_mul(b)),
        BinaryOp::Div => Some(floor_div_i32(a, b)),
        BinaryOp::Fmod => Some(if b == 0 { 0 } else { a.wrapping_rem(b) }),
        BinaryOp::Min => Some(a.min(b)),
        BinaryOp::Max => Some(a.max(b)),
        BinaryOp::Pow | BinaryOp::Atan2 | BinaryOp::And | BinaryOp::Or => None,
    }
}

/// Floor division: `x / 0 = 0`, `i32::MIN / -1` wraps to `i32::MIN`.
fn floor_div_i32(a: i32, b: i32) -> i32 {
    if b == 0 {
        return 0;
    }
    let quotient = a.wrapping_div(b);
    let remainder = a.wrapping_rem(b);
    // Truncation rounded toward zero; step down when the exact quotient was negative and inexact.
    if remainder != 0 && ((remainder < 0) != (b < 0)) {
        quotient.wrapping_sub(1)
    } else {
        quotient
    }
}

macro_rules! float_ops {
    ($unary:ident, $binary:ident, $t:ty, $erf:path) => {
        fn $unary(op: UnaryOp, x: $t) -> Option<$t> {
            let one: $t = 1.0;
            Some(match op {
                UnaryOp::Neg => -x,
                UnaryOp::Abs => x.abs(),
                UnaryOp::Sign => {
                    // NumPy: sign(±0) = +0, sign(NaN) = NaN.
                    if x > 0.0 {
                        1.0
                    } else if x < 0.0 {
                        -1.0
                    } else if x == 0.0 {
                        0.0
                    } else {
                        x
                    }
                }
                UnaryOp::Floor => x.floor(),
                UnaryOp::Ceil => x.ceil(),
                UnaryOp::Round => x.round_ties_even(),
                UnaryOp::Sqrt => x.sqrt(),
                UnaryOp::Rsqrt => one / x.sqrt(),
                UnaryOp::Recip => one / x,
                UnaryOp::Exp => x.exp(),
                UnaryOp::Exp2 => x.exp2(),
                UnaryOp::Log => x.ln(),
                UnaryOp::Log2 => x.log2(),
                UnaryOp::Sin => x.sin(),
                UnaryOp::Cos => x.cos(),
                UnaryOp::Tan => x.tan(),
                UnaryOp::Tanh => x.tanh(),
                UnaryOp::Atan => x.atan(),
                UnaryOp::Asin => x.asin(),
                UnaryOp::Acos => x.acos(),
                // For x < 0, exp(x)/(1+exp(x)) keeps the tiny results that 1/(1+exp(-x))
                // flushes to zero once exp(-x) overflows (x below about -88.7 in f32).
                UnaryOp::Sigmoid => {
                    if x < 0.0 {
                        let e = x.exp();
                        e / (one + e)
                    } else {
                        one / (one + (-x).exp())
                    }
                }
                UnaryOp::Erf => $erf(x),
                UnaryOp::Not => return None,
            })
        }

        fn $binary(op: BinaryOp, a: $t, b: $t) -> Option<$t> {
            Some(match op {
                BinaryOp::Add => a + b,
                BinaryOp::Sub => a - b,
                BinaryOp::Mul => a * b,
                BinaryOp::Div => a / b,
                BinaryOp::Pow => a.powf(b),
                // NumPy's minimum/maximum: the first operand when it wins or is NaN, else the second.
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
                // Rust's float `%` is C's fmod: exact, with the dividend's sign.
                BinaryOp::Fmod => a % b,
                BinaryOp::And | BinaryOp::Or => return None,
            })
        }
    };
}

/// `erf` of an `f32`: `libm`'s `f64` `erf` (under 1 ULP of `f64`) rounded, so the reference
/// is correctly rounded but for the rare double rounding.
fn erf_f32(x: f32) -> f32 {
    libm::erf(f64::from(x)) as f32
}

float_ops!(unary_f32, binary_f32, f32, erf_f32);
float_ops!(unary_f64, binary_f64, f64, libm::erf);
