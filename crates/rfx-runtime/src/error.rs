//! The runtime's errors.

use rfx_lower::{BackendError, CallError, LowerError};
use rfx_opt::OptError;

/// Why compiling or running a kernel failed. A [`RuntimeError::Call`] is the caller's fault and
/// is found before anything runs; the others come from the compiler stages.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The call's arguments do not fit the kernel (arity, dtype, shape, aliasing): nothing ran.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The optimiser rejected the kernel or failed.
    #[error("optimisation failed: {0}")]
    Opt(#[from] OptError),
    /// Lowering failed.
    #[error("lowering failed: {0}")]
    Lower(#[from] LowerError),
    /// The backend is unknown, unavailable, cannot compile the program, or failed while running.
    #[error(transparent)]
    Backend(BackendError),
    /// An output of the easy call ([`crate::Executable::call`]) needs more bytes than the
    /// allocator can give: nothing ran.
    #[error("output `{name}` needs {bytes} bytes, more than can be allocated")]
    OutputTooLarge {
        /// The output.
        name: String,
        /// Its size in bytes (saturated at `usize::MAX`).
        bytes: usize,
    },
}

impl From<BackendError> for RuntimeError {
    fn from(error: BackendError) -> RuntimeError {
        match error {
            BackendError::Call(call) => RuntimeError::Call(call),
            other => RuntimeError::Backend(other),
        }
    }
}

impl RuntimeError {
    /// `true` when the error is the caller's doing (bad arguments, an unknown or unavailable
    /// backend, an invalid kernel, a size past one of rfx's documented limits) rather than a
    /// compiler bug.
    pub fn is_user_error(&self) -> bool {
        match self {
            RuntimeError::Call(_) | RuntimeError::OutputTooLarge { .. } => true,
            RuntimeError::Opt(e) => matches!(e, OptError::InvalidKernel(_) | OptError::IndexRange(_)),
            RuntimeError::Lower(e) => matches!(e, LowerError::InvalidMir(_)),
            RuntimeError::Backend(e) => matches!(
                e,
                BackendError::UnknownBackend { .. }
                    | BackendError::Unavailable { .. }
                    | BackendError::Unsupported { .. }
                    | BackendError::Call(_)
                    | BackendError::Lower(LowerError::InvalidMir(_))
            ),
        }
    }
}
