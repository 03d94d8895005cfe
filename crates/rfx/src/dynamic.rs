//! Tracing driven by the caller: a trace begun, fed and finished explicitly, for front ends
//! (such as the Python binding) whose functions are not Rust closures of a fixed arity.

use std::marker::PhantomData;

use rfx_ir::TensorType;
use rfx_ir::hir::Kernel;

use crate::trace::{Tensor, TraceError, TraceGuard};

/// A trace the caller drives: [`Trace::begin`] makes it the innermost trace of this thread,
/// [`Trace::input`] adds inputs, every [`Tensor`] operation on this thread records into it, and
/// [`Trace::finish`] names the outputs and returns the HIR kernel.
///
/// A trace belongs to the thread that began it (the type is not `Send`). Dropping it without
/// finishing discards it, also during unwinding.
///
/// ```
/// use rfx::{DType, Trace, TensorType};
///
/// let trace = Trace::begin("affine");
/// let x = trace.input("x", TensorType::new(DType::F32, [3]));
/// let y = x * 2.0 + 1.0;
/// assert!(trace.error().is_none());
/// let kernel = trace.finish(&[("out".to_string(), y)])?;
/// assert_eq!(kernel.inputs().count(), 1);
/// # Ok::<(), rfx::TraceError>(())
/// ```
pub struct Trace {
    guard: TraceGuard,
    _thread_bound: PhantomData<*const ()>,
}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace").finish_non_exhaustive()
    }
}

impl Trace {
    /// Starts a trace of a kernel called `name`, innermost on this thread.
    pub fn begin(name: &str) -> Trace {
        Trace {
            guard: TraceGuard::begin(name),
            _thread_bound: PhantomData,
        }
    }

    /// Adds an input called `name` of type `ty` and returns its tensor.
    pub fn input(&self, name: &str, ty: TensorType) -> Tensor {
        self.guard.input(name, ty)
    }

    /// The first error recorded so far (an operation that broke a typing rule returns a
    /// poisoned tensor and records its error here).
    pub fn error(&self) -> Option<TraceError> {
        self.guard.error()
    }

    /// Ends the trace with the named `outputs` and returns the kernel, or the first error.
    pub fn finish(self, outputs: &[(String, Tensor)]) -> Result<Kernel, TraceError> {
        self.guard.finish(outputs)
    }
}
