//! Local derivatives of the elementwise ops, shared by forward and reverse mode.
//!
//! Each elementwise op `y = f(a, b, ...)` is linear in its tangents: `dy = Σ ∂f/∂a_i · da_i`.
//! [`partials`] gives the `∂f/∂a_i` as [`Partial`]s built from primal values; forward mode
//! applies them to tangents, reverse mode to cotangents (then sums the result over the axes the
//! operand was broadcast along). The conventions at kinks are those of JAX and are listed in
//! the crate documentation.

use rfx_ir::hir::Op;
use rfx_ir::hir::ValueId;
use rfx_ir::{BinaryOp, CmpOp, DType, ReduceOp, ScanOp, Shape, UnaryOp};

use crate::error::AdError;
use crate::graph::Emitter;

/// How a derivative flows from a result to one operand.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Partial {
    /// No derivative (a non-differentiable operand or op).
    Zero,
    /// The derivative passes unchanged (`add`).
    One,
    /// The derivative is negated (`neg`, the subtrahend of `sub`).
    NegOne,
    /// Multiply the derivative by this value (computed from primal values).
    Mul(ValueId),
    /// Divide the derivative by this value (`div`'s dividend, as JAX: `g / b`).
    Div(ValueId),
    /// Keep the derivative where the bool value equals the flag, zero elsewhere (`select`,
    /// `clamp`): a select, never a multiplication by 0/1, so that a NaN or Inf derivative
    /// in the unselected branch does not leak.
    Mask(ValueId, bool),
}

impl Partial {
    /// The derivative `d` carried through this partial; `None` for [`Partial::Zero`].
    pub(crate) fn apply(self, em: &mut Emitter, d: ValueId) -> Result<Option<ValueId>, AdError> {
        Ok(Some(match self {
            Partial::Zero => return Ok(None),
            Partial::One => d,
            Partial::NegOne => em.neg(d)?,
            Partial::Mul(p) => em.mul(d, p)?,
            Partial::Div(p) => em.div(d, p)?,
            Partial::Mask(cond, pass_when) => em.mask(cond, pass_when, d)?,
        }))
    }
}

/// The partial derivatives of elementwise node `op(args) = out`, one per operand. `args` and
/// `out` are values in the derivative kernel. Non-elementwise ops give all [`Partial::Zero`]
/// (their derivatives are structural and handled by each mode).
pub(crate) fn partials(
    em: &mut Emitter,
    op: &Op,
    args: &[ValueId],
    out: ValueId,
) -> Result<Vec<Partial>, AdError> {
    let zeros = vec![Partial::Zero; args.len()];
    Ok(match (op, args) {
        (Op::Unary(u), &[x]) => vec![unary_partial(em, *u, x, out)?],
        (Op::Binary(bop), &[a, b]) => {
            let (pa, pb) = binary_partials(em, *bop, a, b, out)?;
            vec![pa, pb]
        }
        (Op::Select, &[cond, _, _]) => vec![
            Partial::Zero,
            Partial::Mask(cond, true),
            Partial::Mask(cond, false),
        ],
        (Op::Clamp, &[x, lo, hi]) => {
            // lax.clamp's rule: x gets the derivative strictly inside (lo, hi), lo where
            // x < lo < hi, hi where hi < max(x, lo) (the result is hi); on ties nobody.
            let above_lo = em.compare(CmpOp::Lt, lo, x)?;
            let below_hi = em.compare(CmpOp::Lt, x, hi)?;
            let inside = em.binary(BinaryOp::And, above_lo, below_hi)?;
            let x_below = em.compare(CmpOp::Lt, x, lo)?;
            let lo_below_hi = em.compare(CmpOp::Lt, lo, hi)?;
            let lo_wins = em.binary(BinaryOp::And, x_below, lo_below_hi)?;
            let lower = em.binary(BinaryOp::Max, x, lo)?;
            let hi_wins = em.compare(CmpOp::Lt, hi, lower)?;
            vec![
                Partial::Mask(inside, true),
                Partial::Mask(lo_wins, true),
                Partial::Mask(hi_wins, true),
            ]
        }
        _ => zeros,
    })
}

fn unary_partial(em: &mut Emitter, op: UnaryOp, x: ValueId, y: ValueId) -> Result<Partial, AdError> {
    let ln2 = std::f64::consts::LN_2;
    Ok(match op {
        UnaryOp::Neg => Partial::NegOne,
        UnaryOp::Abs => {
            // JAX: select(x >= 0, g, -g), so d|x|/dx = 1 at ±0.
            let zero = em.scalar_like(x, 0.0)?;
            let nonneg = em.compare(CmpOp::Ge, x, zero)?;
            let one = em.scalar_like(x, 1.0)?;
            let minus_one = em.scalar_like(x, -1.0)?;
            Partial::Mul(em.select(nonneg, one, minus_one)?)
        }
        UnaryOp::Sign | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Not => Partial::Zero,
        UnaryOp::Sqrt => {
            // 0.5 / sqrt(x): +Inf at 0, as JAX.
            let half = em.scalar_like(x, 0.5)?;
            Partial::Mul(em.div(half, y)?)
        }
        UnaryOp::Rsqrt => {
            // -0.5 * rsqrt(x) / x.
            let minus_half = em.scalar_like(x, -0.5)?;
            let ratio = em.div(y, x)?;
            Partial::Mul(em.mul(minus_half, ratio)?)
        }
        UnaryOp::Recip => {
            let square = em.mul(y, y)?;
            Partial::Mul(em.neg(square)?)
        }
        UnaryOp::Exp => Partial::Mul(y),
        UnaryOp::Exp2 => {
            let c = em.scalar_like(x, ln2)?;
            Partial::Mul(em.mul(y, c)?)
        }
        // g / x: +Inf at +0 and -Inf at -0, as JAX.
        UnaryOp::Log => Partial::Div(x),
        UnaryOp::Log2 => {
            let c = em.scalar_like(x, ln2)?;
            Partial::Div(em.mul(x, c)?)
        }
        UnaryOp::Sin => Partial::Mul(em.unary(UnaryOp::Cos, x)?),
        UnaryOp::Cos => {
            let s = em.unary(UnaryOp::Sin, x)?;
            Partial::Mul(em.neg(s)?)
        }
        UnaryOp::Tan => {
            let one = em.scalar_like(x, 1.0)?;
            let square = em.mul(y, y)?;
            Partial::Mul(em.add(one, square)?)
        }
        UnaryOp::Tanh => {
            let one = em.scalar_like(x, 1.0)?;
            let square = em.mul(y, y)?;
            Partial::Mul(em.sub(one, square)?)
        }
        UnaryOp::Atan => {
            let one = em.scalar_like(x, 1.0)?;
            let square = em.mul(x, x)?;
            Partial::Div(em.add(one, square)?)
        }
        UnaryOp::Asin | UnaryOp::Acos => {
            let one = em.scalar_like(x, 1.0)?;
            let square = em.mul(x, x)?;
            let rest = em.sub(one, square)?;
            let r = em.unary(UnaryOp::Rsqrt, rest)?;
            if op == UnaryOp::Asin {
                Partial::Mul(r)
            } else {
                Partial::Mul(em.neg(r)?)
            }
        }
        UnaryOp::Sigmoid => {
            let one = em.scalar_like(x, 1.0)?;
            let rest = em.sub(one, y)?;
            Partial::Mul(em.mul(y, rest)?)
        }
        UnaryOp::Erf => {
            // 2/√π e^(−x²).
            let square = em.mul(x, x)?;
            let minus_square = em.neg(square)?;
            let gauss = em.unary(UnaryOp::Exp, minus_square)?;
            let c = em.scalar_like(x, std::f64::consts::FRAC_2_SQRT_PI)?;
            Partial::Mul(em.mul(c, gauss)?)
        }
    })
}

fn binary_partials(
    em: &mut Emitter,
    op: BinaryOp,
    a: ValueId,
    b: ValueId,
    y: ValueId,
) -> Result<(Partial, Partial), AdError> {
    Ok(match op {
        BinaryOp::Add => (Partial::One, Partial::One),
        BinaryOp::Sub => (Partial::One, Partial::NegOne),
        BinaryOp::Mul => (Partial::Mul(b), Partial::Mul(a)),
        BinaryOp::Div => {
            // JAX: g / b and -g * a / b².
            let square = em.mul(b, b)?;
            let ratio = em.div(a, square)?;
            (Partial::Div(b), Partial::Mul(em.neg(ratio)?))
        }
        BinaryOp::Pow => {
            // JAX: d/da = 0 where b == 0, else b * a^(b-1); d/db = log(a) * a^b with log(0)
            // replaced by log(1) = 0, so the exponent's derivative at base 0 is 0.
            let zero = em.scalar_like(a, 0.0)?;
            let one = em.scalar_like(a, 1.0)?;
            let b_minus_one = em.sub(b, one)?;
            let power = em.binary(BinaryOp::Pow, a, b_minus_one)?;
            let scaled = em.mul(b, power)?;
            let b_is_zero = em.compare(CmpOp::Eq, b, zero)?;
            let da = em.select(b_is_zero, zero, scaled)?;
            let a_is_zero = em.compare(CmpOp::Eq, a, zero)?;
            let safe_a = em.select(a_is_zero, one, a)?;
            let log_a = em.unary(UnaryOp::Log, safe_a)?;
            let db = em.mul(log_a, y)?;
            (Partial::Mul(da), Partial::Mul(db))
        }
        BinaryOp::Min | BinaryOp::Max => {
            // JAX's balanced rule: the operand equal to the result gets the derivative; when
            // both are equal, each gets half.
            let a_wins = em.compare(CmpOp::Eq, a, y)?;
            let b_wins = em.compare(CmpOp::Eq, b, y)?;
            let zero = em.scalar_like(a, 0.0)?;
            let half = em.scalar_like(a, 0.5)?;
            let one = em.scalar_like(a, 1.0)?;
            let a_share = em.select(b_wins, half, one)?;
            let da = em.select(a_wins, a_share, zero)?;
            let b_share = em.select(a_wins, half, one)?;
            let db = em.select(b_wins, b_share, zero)?;
            (Partial::Mul(da), Partial::Mul(db))
        }
        BinaryOp::Atan2 => {
            // atan2(a, b): d/da = b / (a² + b²), d/db = -a / (a² + b²); NaN at the origin.
            let a2 = em.mul(a, a)?;
            let b2 = em.mul(b, b)?;
            let den = em.add(a2, b2)?;
            let da = em.div(b, den)?;
            let na = em.neg(a)?;
            let db = em.div(na, den)?;
            (Partial::Mul(da), Partial::Mul(db))
        }
        BinaryOp::Fmod => {
            // fmod(a, b) = a - trunc(a / b) * b: d/da = 1, d/db = -trunc(a / b) (JAX's `rem`).
            let q = em.div(a, b)?;
            let s = em.unary(UnaryOp::Sign, q)?;
            let m = em.unary(UnaryOp::Abs, q)?;
            let f = em.unary(UnaryOp::Floor, m)?;
            let t = em.mul(s, f)?;
            (Partial::One, Partial::Mul(em.neg(t)?))
        }
        BinaryOp::And | BinaryOp::Or => (Partial::Zero, Partial::Zero),
    })
}

/// For `max`/`min` reductions of `x` over `axes` giving `y`: the weight of each element of `x`
/// (shape of `x`): `1/count` on the elements equal to the result, 0 elsewhere (JAX's rule: ties
/// share the derivative equally).
pub(crate) fn chooser_weights(
    em: &mut Emitter,
    x: ValueId,
    axes: &[usize],
    keepdims: bool,
    y: ValueId,
) -> Result<ValueId, AdError> {
    let x_shape = em.shape(x)?;
    let kept = keepdims_shape(&x_shape, axes);
    let y_kept = if keepdims { y } else { em.reshape(y, kept)? };
    let hit = em.compare(CmpOp::Eq, x, y_kept)?;
    let dtype = em.dtype(x)?;
    let indicator = em.cast(hit, dtype)?;
    let count = em.reduce(ReduceOp::Sum, indicator, axes, true)?;
    em.div(indicator, count)
}

/// For a `prod` reduction of `x` over `axes`: the product of the *other* elements of each
/// reduced slice (shape of `x`), exact at zeros: with no zero in the slice it is `prod / x_i`;
/// with exactly one zero it is the product of the non-zero elements at the zero and 0
/// elsewhere; with two or more zeros it is 0.
pub(crate) fn prod_others(em: &mut Emitter, x: ValueId, axes: &[usize]) -> Result<ValueId, AdError> {
    let dtype = em.dtype(x)?;
    let zero = em.scalar(dtype, 0.0);
    let one = em.scalar(dtype, 1.0);
    let is_zero = em.compare(CmpOp::Eq, x, zero)?;
    let nonzero = em.select(is_zero, one, x)?;
    let prod_nonzero = em.reduce(ReduceOp::Prod, nonzero, axes, true)?;
    let zero_flags = em.cast(is_zero, dtype)?;
    let n_zeros = em.reduce(ReduceOp::Sum, zero_flags, axes, true)?;
    let no_zero = em.compare(CmpOp::Eq, n_zeros, zero)?;
    let one_zero = em.compare(CmpOp::Eq, n_zeros, one)?;
    let quotient = em.div(prod_nonzero, nonzero)?;
    let at_single_zero = em.select(is_zero, prod_nonzero, zero)?;
    let with_zero = em.select(one_zero, at_single_zero, zero)?;
    em.select(no_zero, quotient, with_zero)
}

/// For a running maximum or minimum `out` of `x` along `axis` (from its end with `reverse`):
/// the position along the axis of the element each result is (`i32`, `x`'s shape). Each step
/// `max(acc, x_i)` gives `x_i` itself (ties included, and a NaN `x_i`) or keeps `acc`, so a
/// result is the element of the last step, in the scan's order up to its own, that gave its
/// element: one where `x_i == out_i` or `x_i` is NaN. That last position is itself a running
/// maximum (a running minimum from the end) of the positions where a step gave its element.
/// The derivative flows to that element, the one whose bits the result holds (on a tie the
/// later one, as the value; a reduction's `max` shares a tie instead).
pub(crate) fn scan_positions(
    em: &mut Emitter,
    x: ValueId,
    out: ValueId,
    axis: usize,
    reverse: bool,
) -> Result<ValueId, AdError> {
    let shape = em.shape(x)?;
    let extent = shape.dims().get(axis).copied().unwrap_or(1);
    let same = em.compare(CmpOp::Eq, x, out)?;
    let nan = em.compare(CmpOp::Ne, x, x)?;
    let taken = em.binary(BinaryOp::Or, same, nan)?;
    let position = em.iota(DType::I32, shape, axis)?;
    // Never taken: below every position in the scan's order.
    let (never, latest) = if reverse {
        (extent as f64, ScanOp::Min)
    } else {
        (-1.0, ScanOp::Max)
    };
    let never = em.scalar(DType::I32, never);
    let marked = em.select(taken, position, never)?;
    em.scan(latest, marked, axis, reverse)
}

/// The error for a linear recurrence met by a fold's rule, which has one operand (its own rule
/// comes first, so this is never raised).
pub(crate) fn linear_as_fold() -> AdError {
    let op = ScanOp::Linear.name();
    AdError::Internal(rfx_ir::hir::BuildError::Type {
        op,
        source: rfx_ir::TypeError::Arity {
            op,
            expected: 2,
            found: 1,
        },
    })
}

/// The tangent of a running product `y` of `x` (shape `S`) along `axis` for the tangent `t`
/// of `x` (shape `batch ++ S`): `dy[i] = x[i] dy[i-1] + t[i] y[i-1]` (with `y[-1] = 1`), a
/// linear recurrence. No division, so exact at zeros, and `O(n)` per line.
pub(crate) fn cumprod_tangent(
    em: &mut Emitter,
    x: ValueId,
    y: ValueId,
    t: ValueId,
    axis: usize,
    reverse: bool,
    batch: &Shape,
) -> Result<ValueId, AdError> {
    let full = em.shape(t)?;
    let previous = em.shift_along(y, axis, reverse, 1.0)?;
    let driven = em.mul(t, previous)?;
    let coef = em.broadcast_to(x, full)?;
    em.linrec(driven, coef, batch.rank() + axis, reverse)
}

/// The adjoint of `x` (shape `S`) of a running product `y` along `axis` from the result's
/// adjoint `ct` (shape `batch ++ S`): `λ[i] = ct[i] + x[i+1] λ[i+1]` (the recurrence run
/// backwards) and the adjoint `λ[i] y[i-1]` (with `y[-1] = 1`). No division, so exact at
/// zeros, and `O(n)` per line.
pub(crate) fn cumprod_adjoint(
    em: &mut Emitter,
    x: ValueId,
    y: ValueId,
    ct: ValueId,
    axis: usize,
    reverse: bool,
    batch: &Shape,
) -> Result<ValueId, AdError> {
    let full = em.shape(ct)?;
    let next = em.shift_along(x, axis, !reverse, 0.0)?;
    let next = em.broadcast_to(next, full)?;
    let lambda = em.linrec(ct, next, batch.rank() + axis, !reverse)?;
    let previous = em.shift_along(y, axis, reverse, 1.0)?;
    em.mul(lambda, previous)
}

/// `shape` with the reduced `axes` kept as size 1.
pub(crate) fn keepdims_shape(shape: &rfx_ir::Shape, axes: &[usize]) -> rfx_ir::Shape {
    rfx_ir::Shape::new(
        shape
            .dims()
            .iter()
            .enumerate()
            .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
            .collect::<Vec<_>>(),
    )
}

/// The number of elements each output of a reduction of `shape` over `axes` combines.
pub(crate) fn reduced_count(shape: &rfx_ir::Shape, axes: &[usize]) -> usize {
    axes.iter()
        .map(|&a| shape.dims().get(a).copied().unwrap_or(1))
        .product()
}
