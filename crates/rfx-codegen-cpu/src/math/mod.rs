//! Vectorised transcendental functions emitted as straight-line Cranelift IR.
//!
//! [`emit_unary`] and [`emit_binary`] compute one transcendental op on an `f32x4`, `f64x2`,
//! `f32` or `f64` value. Everything is inline SIMD code: range reduction, a polynomial or
//! rational approximation, exponent manipulation through `bitcast` and integer lane ops, and
//! lane-wise `bitselect` on comparison masks for the special values. There are no calls into
//! libm and no branches. Scalars are computed by splatting them into a vector, running the
//! vector code and extracting lane 0, so the scalar tail of a loop gives bit-identical results
//! to its vector body.
//!
//! No fused multiply-add is used (Cranelift would lower a vector `fma` to a libcall on CPUs
//! without FMA), so every formula is written for separately rounded products.
//!
//! # Methods
//!
//! Every function reduces its argument, evaluates a short polynomial (or rational function),
//! and rebuilds the result; `f32x4` and `f64x2` share the code with per-precision coefficients.
//!
//! | op | range reduction | approximation (source) |
//! |---|---|---|
//! | `exp` | `x = n ln2 + r`, `|r| <= ln2/2`, two-part Cody–Waite ln2 | f32: Cephes `expf` degree-5 minimax; f64: Taylor to `r^13`; `2^n` built in the exponent field, applied in two steps (gradual underflow) |
//! | `exp2` | `x = n + r` (exact) | `e^(r ln2)` with the `exp` polynomial |
//! | `log` | `x = 2^k (1+f)`, `1+f` in `[sqrt(1/2), sqrt(2))` via integer bit tricks; subnormals pre-scaled | `s = f/(2+f)`, `R(s^2)`: musl `logf` Lg1–Lg4 / fdlibm `e_log.c` Lg1–Lg7 |
//! | `log2` | as `log` | musl `log2`/`log2f`: head/tail split of `f - f^2/2`, two-part `1/ln2` |
//! | `sin`, `cos` | `x = q π/2 + r`, fdlibm `__rem_pio2` medium case (π/2 in three 33-bit parts, all three rounds) in `f64` lanes — for `f32x4` too, after promoting each half | f32: Cephes `sinf`/`cosf` polynomials; f64: fdlibm `__kernel_sin`/`__cos` with the reduction tail; quadrant by select and sign-bit xor |
//! | `tan` | as `sin` | `sin r / cos r`, or `-cos r / sin r` in odd quadrants (one division) |
//! | `atan` | Cephes: `-1/x` above `tan(3π/8)`, `(x-1)/(x+1)` above `tan(π/8)` (f32) / `0.66` (f64); two-part π/2, π/4 | f32: Cephes `atanf` polynomial; f64: Cephes `atan` rational P4/Q5 |
//! | `atan2` | `atan(min/max)` of the magnitudes, then `t`, `π/2 ∓ t`, `π - t` by quadrant with two-part offsets | the `atan` kernel |
//! | `asin`, `acos` | `|x| <= 1/2` direct; else `s = sqrt((1-|x|)/2)`, `asin = π/2 - 2 asin s`, `acos = 2 asin s` or `π - 2 asin s` | f32: Cephes `asinf` polynomial; f64: fdlibm `e_asin.c` rational pS/qS |
//! | `tanh` | `|x| < 0.625`: odd polynomial/rational; else `1 - 2/(e^{2|x|}+1)` | f32: Cephes `tanhf`; f64: Cephes `tanh` rational P2/Q3 |
//! | `sigmoid` | `e = exp(-|x|)`: `1/(1+e)` for `x >= 0`, `e/(1+e)` for `x < 0` | the `exp` kernel |
//! | `erf` | by `|x|`: `[0, 0.84375)`, `[0.84375, 1.25)`, `[1.25, 1/0.35)`, `[1/0.35, 6)`, `±1` beyond; every interval on every lane, chosen by select | FreeBSD `s_erf.c` (the `libm` crate's coefficients): `x + x P/Q(x²)`, `erx + P/Q(|x|-1)`, `1 - e^(-z²-0.5625) e^((z-|x|)(z+|x|) + R/S(1/x²))/|x|` with `z` the high half of `|x|`; `f32` lanes computed in `f64` lanes |
//! | `pow` | `2^(y log2|x|)` | f32: computed in `f64` lanes with the f64 `log2`/`exp2` (error ≪ 1 f32 ULP before the final rounding); f64: fdlibm `e_pow.c` (`log2|x|` as a 64-bit double-double from `(x-bp)/(x+bp)` with L1–L6, `y` split head/tail, `exp` via P1–P5), two-step `ldexp` |
//!
//! # Measured accuracy
//!
//! Max error in ULP against Rust's `std` (glibc libm) computed in `f64` and rounded to the
//! type (`erf`: the `libm` crate's, as `std` has none), over 100,000 inputs per function and type (half random bit patterns, i.e.
//! log-uniform magnitudes over the whole exponent range with NaN/±Inf/subnormals, half
//! uniform in the function's interesting range) plus about 300 edge values (and all their
//! pairs for `atan2`/`pow`). Scalars run the vector code, so their rows equal the vector
//! rows up to the different random draw. The `f64` column includes the reference's own
//! error (glibc, < 1 ULP). `tests::accuracy_within_bounds` asserts ≤ 4 ULP everywhere.
//!
//! | op | f32x4 | f32 | f64x2 | f64 |
//! |---|---|---|---|---|
//! | sin | 1 | 1 | 1 | 1 |
//! | cos | 1 | 1 | 1 | 1 |
//! | tan | 3 | 3 | 2 | 3 |
//! | exp | 1 | 1 | 1 | 1 |
//! | exp2 | 1 | 1 | 1 | 1 |
//! | log | 1 | 1 | 1 | 1 |
//! | log2 | 1 | 1 | 1 | 1 |
//! | tanh | 1 | 1 | 2 | 2 |
//! | atan | 2 | 2 | 1 | 1 |
//! | asin | 2 | 2 | 2 | 2 |
//! | acos | 1 | 1 | 1 | 1 |
//! | sigmoid | 2 | 2 | 2 | 2 |
//! | atan2 | 2 | 2 | 1 | 2 |
//! | pow | 0 | 0 | 1 | 1 |
//! | erf | 0 | 0 | 1 | 1 |
//!
//! # Special values and known deviations
//!
//! NaN in gives NaN out (except `pow(x, ±0) = pow(1, y) = pow(-1, ±Inf) = 1`); ±Inf, ±0,
//! overflow (→ +Inf), underflow (gradual, then +0), `log` of zero/negatives, the odd
//! functions' `−0`, and the C99 `atan2`/`pow` tables are exact and checked bit for bit by
//! `tests::special_values_exact`. NaN payloads are not preserved.
//!
//! **Large trigonometric arguments:** the Cody–Waite reduction is exact while `|q| < 2^20`,
//! i.e. `|x| < 1.6e6`, where sin/cos/tan meet the bound in both precisions. The code generator
//! (`crate::transcendental`) therefore recomputes lanes with `|x| > 1e6` through libm on a cold
//! path, so kernels meet the bound over the whole domain. The polynomials alone (what this
//! module emits and its tests measure) have no Payne–Hanek reduction: the reduced argument
//! carries an absolute error of about
//! `|x| 2^-53`, so `f32` stays within about 1–2 ULP up to 1e7 and loses accuracy above
//! (≈1e3 ULP to 1e9, meaningless above 1e12), `f64` loses accuracy from about 2e6 on.
//! Where the reduced argument is lost entirely (`|x| >= 2^52` or so) it is replaced by 0, so
//! results stay finite and sin/cos stay in `[-1, 1]`; `tests::report_large_argument_trig`
//! prints the measured error per decade.
//!
//! **Speed** (`tests::report_speed`, 2-core shared x86-64 with AVX, 1 Mi f32 elements, JIT loop
//! without unrolling vs a Rust loop calling glibc per element): f32x4 `sin` 3.0 ns/elem vs
//! 10.5 (3.5×), `exp` 1.6 vs 3.0 (1.9×), `log` 2.0 vs 3.3 (1.6×), `tanh` 2.9 vs 14.7 (5.1×).

mod kernels;
mod vb;

#[cfg(test)]
mod tests;

use cranelift_codegen::ir::{InstBuilder, Type, Value, types};
use cranelift_frontend::FunctionBuilder;
use rfx_ir::{BinaryOp, UnaryOp};

use vb::{Prec, Vb};

/// The vector type a value of type `ty` is computed in, and its precision.
fn vector_of(ty: Type) -> Option<(Type, Prec)> {
    match ty {
        types::F32 | types::F32X4 => Some((types::F32X4, Prec::F32)),
        types::F64 | types::F64X2 => Some((types::F64X2, Prec::F64)),
        _ => None,
    }
}

/// Runs `kernel` on the vector form of `args` (all of type `ty`) and returns a value of `ty`.
fn emit_lanes(
    b: &mut FunctionBuilder<'_>,
    ty: Type,
    args: &[Value],
    kernel: impl FnOnce(&mut Vb<'_, '_>, &[Value]) -> Value,
) -> Option<Value> {
    let (vty, prec) = vector_of(ty)?;
    let scalar = !ty.is_vector();
    let lanes: Vec<Value> = args
        .iter()
        .map(|&a| if scalar { b.ins().splat(vty, a) } else { a })
        .collect();
    let mut v = Vb { b, prec };
    let res = kernel(&mut v, &lanes);
    Some(if scalar { b.ins().extractlane(res, 0) } else { res })
}

/// Emits `op(x)` for a transcendental [`UnaryOp`] on a value of type `ty` (`F32`, `F64`,
/// `F32X4` or `F64X2`).
///
/// `None` when `op` is not transcendental ([`UnaryOp::is_transcendental`]) or `ty` is not one
/// of those four types; nothing is emitted then.
pub(crate) fn emit_unary(b: &mut FunctionBuilder<'_>, op: UnaryOp, x: Value, ty: Type) -> Option<Value> {
    let kernel: fn(&mut Vb<'_, '_>, Value) -> Value = match op {
        UnaryOp::Exp => kernels::exp,
        UnaryOp::Exp2 => kernels::exp2,
        UnaryOp::Log => kernels::log,
        UnaryOp::Log2 => kernels::log2,
        UnaryOp::Sin => kernels::sin,
        UnaryOp::Cos => kernels::cos,
        UnaryOp::Tan => kernels::tan,
        UnaryOp::Tanh => kernels::tanh,
        UnaryOp::Atan => kernels::atan,
        UnaryOp::Asin => kernels::asin,
        UnaryOp::Acos => kernels::acos,
        UnaryOp::Sigmoid => kernels::sigmoid,
        UnaryOp::Erf => kernels::erf,
        rfx_ir::exact_unary_ops!() => return None,
    };
    emit_lanes(b, ty, &[x], |v, args| kernel(v, args[0]))
}

/// Emits `op(lhs, rhs)` for [`BinaryOp::Pow`] (`pow(lhs, rhs)`) and [`BinaryOp::Atan2`]
/// (`atan2(lhs, rhs)`, the angle of the point `(rhs, lhs)`) on values of type `ty`.
///
/// `None` for any other op or type; nothing is emitted then.
pub(crate) fn emit_binary(
    b: &mut FunctionBuilder<'_>,
    op: BinaryOp,
    lhs: Value,
    rhs: Value,
    ty: Type,
) -> Option<Value> {
    let kernel: fn(&mut Vb<'_, '_>, Value, Value) -> Value = match op {
        BinaryOp::Pow => kernels::pow,
        BinaryOp::Atan2 => kernels::atan2,
        rfx_ir::exact_binary_ops!() => return None,
    };
    emit_lanes(b, ty, &[lhs, rhs], |v, args| kernel(v, args[0], args[1]))
}
