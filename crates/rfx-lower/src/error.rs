//! Errors of lowering, of backends and of calls.

use rfx_ir::{DType, Shape};

/// Why lowering failed. Only an invalid input program is the caller's fault; `Malformed` is a
/// lowering bug reported instead of a panic.
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// The MIR program does not verify.
    #[error("invalid MIR program:\n{0}")]
    InvalidMir(rfx_ir::mir::VerifyErrors),
    /// A value of a kernel could not be lowered (a lowering bug).
    #[error("internal error: kernel `{kernel}` value %{value} could not be lowered")]
    Malformed {
        /// The MIR kernel.
        kernel: String,
        /// The MIR value index.
        value: usize,
    },
    /// The lowered program does not verify (a lowering bug).
    #[error("internal error: lowering produced an invalid LIR program:\n{0}")]
    InvalidLir(rfx_ir::lir::VerifyErrors),
}

/// A call rejected before anything ran: nothing was written to any output.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The wrong number of inputs or outputs.
    #[error("expected {expected} {what}, got {found}")]
    Arity {
        /// `"inputs"` or `"outputs"`.
        what: &'static str,
        /// How many the kernel takes.
        expected: usize,
        /// How many were given.
        found: usize,
    },
    /// A named input the kernel does not have.
    #[error("unknown input `{0}`")]
    UnknownInput(String),
    /// An input given twice.
    #[error("input `{0}` given twice")]
    DuplicateInput(String),
    /// An input the call did not give.
    #[error("missing input `{0}`")]
    MissingInput(String),
    /// An argument of the wrong dtype.
    #[error("`{name}`: expected dtype {expected}, got {found}")]
    DType {
        /// The input or output name.
        name: String,
        /// The declared dtype.
        expected: DType,
        /// The given dtype.
        found: DType,
    },
    /// An argument of the wrong shape (for outputs: a buffer of the wrong length or shape).
    #[error("`{name}`: expected shape {expected}, got {found}")]
    Shape {
        /// The input or output name.
        name: String,
        /// The declared shape.
        expected: Shape,
        /// The given shape.
        found: Shape,
    },
    /// An output buffer that overlaps an input or another output.
    #[error("output `{output}` overlaps `{other}` in memory")]
    Alias {
        /// The output.
        output: String,
        /// The input or output it overlaps.
        other: String,
    },
}

/// What a backend cannot do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unsupported {
    /// An op the backend has no code for.
    Op(&'static str),
    /// A dtype the backend cannot compute in.
    DType(DType),
    /// An op on a dtype.
    OpDType(&'static str, DType),
    /// A size beyond the backend's limits.
    Size {
        /// What is too large.
        what: &'static str,
        /// Its size.
        size: usize,
        /// The backend's limit.
        limit: usize,
    },
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsupported::Op(op) => write!(f, "op `{op}`"),
            Unsupported::DType(dtype) => write!(f, "dtype {dtype}"),
            Unsupported::OpDType(op, dtype) => write!(f, "op `{op}` on {dtype}"),
            Unsupported::Size { what, size, limit } => write!(f, "{what} of {size} (limit {limit})"),
        }
    }
}

/// Errors of backends: compiling, running, and finding one.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// No backend of that name is registered.
    #[error("unknown backend `{name}` (known: {known})")]
    UnknownBackend {
        /// The name asked for.
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
    /// The backend exists but cannot run here (no GPU, no driver, no compiler library).
    #[error("backend `{backend}` is unavailable: {reason}")]
    Unavailable {
        /// The backend.
        backend: &'static str,
        /// Why, and how to fix it.
        reason: String,
    },
    /// The program uses something the backend cannot compile.
    #[error("backend `{backend}` does not support {what}")]
    Unsupported {
        /// The backend.
        backend: &'static str,
        /// What it cannot do.
        what: Unsupported,
    },
    /// The backend's compiler failed (a backend bug or an environment problem).
    #[error("backend `{backend}` failed to compile: {message}")]
    Compile {
        /// The backend.
        backend: &'static str,
        /// The compiler's message.
        message: String,
    },
    /// The device or runtime failed while running.
    #[error("backend `{backend}` failed while running: {message}")]
    Runtime {
        /// The backend.
        backend: &'static str,
        /// The runtime's message.
        message: String,
    },
    /// The call's arguments were rejected before anything ran.
    #[error(transparent)]
    Call(#[from] CallError),
    /// Lowering failed.
    #[error(transparent)]
    Lower(#[from] LowerError),
}
