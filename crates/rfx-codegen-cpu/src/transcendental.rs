//! Transcendental functions: the bridge from LIR ops to the vector math library.

use cranelift_codegen::ir::Value;
use rfx_ir::{BinaryOp, DType, UnaryOp};
use rfx_lower::{BackendError, Unsupported};

use crate::ops::Emitter;

/// `op(x)` for a transcendental unary op.
pub(crate) fn unary(_e: &mut Emitter<'_, '_>, op: UnaryOp, _x: Value, dtype: DType) -> Result<Value, BackendError> {
    Err(BackendError::Unsupported { backend: "cpu", what: Unsupported::OpDType(op.name(), dtype) })
}

/// `op(a, b)` for `pow` and `atan2`.
pub(crate) fn binary(
    _e: &mut Emitter<'_, '_>,
    op: BinaryOp,
    _a: Value,
    _b: Value,
    dtype: DType,
) -> Result<Value, BackendError> {
    Err(BackendError::Unsupported { backend: "cpu", what: Unsupported::OpDType(op.name(), dtype) })
}
