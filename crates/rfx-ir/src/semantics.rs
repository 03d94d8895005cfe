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
