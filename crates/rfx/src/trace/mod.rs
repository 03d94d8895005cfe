//! Tracing: [`Tensor`], the traced value type, and the thread-local trace it records into.
//!
//! While a function is traced, every [`Tensor`] operation adds one node to the trace's HIR
//! [`Builder`]. A trace lives on the thread that runs the function; tensors are `Copy` handles
//! (the trace's id and a value index). An operation that breaks a typing rule (mismatched
//! shapes, a float op on bool, ...) does not panic: the first such error is kept and returned by
//! the `jit` call as a [`TraceError`], and the operation returns a poisoned tensor that every
//! later operation passes through.

mod linalg;
mod loops;
mod ops;
mod scan;
mod state;
mod tensor;

use rfx_ir::DType;
use rfx_ir::hir::BuildError;

pub(crate) use loops::{fori_loop, while_loop};
pub use ops::{concat, constant, where_};
pub use state::TraceOutput;
pub(crate) use state::{TraceGuard, inline_kernel, innermost_error, output_names};
pub use tensor::{All, Axes, Operand, Tensor};

/// Why tracing a function failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// An operation broke a typing rule; `op` is the method or operator that was called.
    #[error("{}", build_message(op, source))]
    Build {
        /// The operation (`mul`, `sin`, `sum`, ...).
        op: &'static str,
        /// The rule that was broken.
        #[source]
        source: BuildError,
    },
    /// A tensor from another trace (or one kept after its trace ended) was used.
    #[error("`{op}`: a tensor from another trace was used (tensors must not escape the traced function)")]
    ForeignTensor {
        /// The operation.
        op: &'static str,
    },
    /// A scalar literal that cannot take the tensor's dtype (`x * 2.5` on a bool tensor).
    #[error("`{op}`: the literal {literal} cannot be used with a {dtype} tensor")]
    Literal {
        /// The operation.
        op: &'static str,
        /// The literal, as written.
        literal: String,
        /// The tensor's dtype.
        dtype: DType,
    },
    /// The traced function returned no tensor.
    #[error("the traced function returned no outputs")]
    NoOutputs,
    /// A loop that cannot be built: a body that returns other carries than it takes (in
    /// number, dtype or shape), a test that is not a `bool` scalar, or a bad trip count.
    #[error("`{op}`: {reason}")]
    Loop {
        /// `fori_loop` or `while_loop`.
        op: &'static str,
        /// What does not fit.
        reason: String,
    },
}

/// The message of a failed build: the typing rule when one was broken (it names the op).
fn build_message(op: &str, source: &BuildError) -> String {
    match source {
        BuildError::Type { source, .. } => source.to_string(),
        other => format!("`{op}`: {other}"),
    }
}
