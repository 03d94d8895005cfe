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
//! TABLE_PLACEHOLDER

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
        UnaryOp::Neg
        | UnaryOp::Abs
        | UnaryOp::Sign
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Recip
        | UnaryOp::Not => return None,
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
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Div
        | BinaryOp::Min
        | BinaryOp::Max
        | BinaryOp::Fmod
        | BinaryOp::And
        | BinaryOp::Or => return None,
    };
    emit_lanes(b, ty, &[lhs, rhs], |v, args| kernel(v, args[0], args[1]))
}
