//! Transcendental functions: the bridge from LIR ops to the vector math library.

use cranelift_codegen::ir::Value;
use rfx_ir::{BinaryOp, DType, UnaryOp};
use rfx_lower::{BackendError, Unsupported};

use crate::ops::{Emitter, cl_type};

fn unsupported(op: &'static str, dtype: DType) -> BackendError {
    BackendError::Unsupported {
        backend: "cpu",
        what: Unsupported::OpDType(op, dtype),
    }
}

/// `op(x)` for a transcendental unary op: inline vector polynomials, no libm calls.
pub(crate) fn unary(
    e: &mut Emitter<'_, '_>,
    op: UnaryOp,
    x: Value,
    dtype: DType,
) -> Result<Value, BackendError> {
    let ty = cl_type(dtype, e.w);
    crate::math::emit_unary(e.b, op, x, ty).ok_or_else(|| unsupported(op.name(), dtype))
}

/// `op(a, b)` for `pow` and `atan2`.
pub(crate) fn binary(
    e: &mut Emitter<'_, '_>,
    op: BinaryOp,
    a: Value,
    b: Value,
    dtype: DType,
) -> Result<Value, BackendError> {
    let ty = cl_type(dtype, e.w);
    crate::math::emit_binary(e.b, op, a, b, ty).ok_or_else(|| unsupported(op.name(), dtype))
}
