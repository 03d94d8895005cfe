//! Tracing driven by the caller: a trace begun, fed and finished explicitly, for front ends
//! (such as the Python binding) whose functions are not Rust closures of a fixed arity.

use std::marker::PhantomData;

use rfx_ir::TensorType;
use rfx_ir::hir::Kernel;

use rfx_lower::CallError;

use crate::trace::{Tensor, TraceError, TraceGuard, inline_kernel, innermost_error};

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

    /// The first error recorded so far by the innermost trace of this thread: this one, or the
    /// body of a [`crate::lax`] loop being traced inside it.
    pub fn innermost_error() -> Option<TraceError> {
        innermost_error()
    }
}

/// Records `kernel` into the trace of `args` as if its ops were called on them (a kernel
/// traced or transformed earlier, such as a gradient, used inside another traced function) and
/// returns its outputs in order. `args` must match the kernel's inputs in number, dtype and
/// shape.
///
/// ```
/// use rfx::{DType, TensorType, Trace};
///
/// // The gradient of Σ x², as a kernel, then used inside another trace.
/// let square = Trace::begin("square");
/// let x = square.input("x", TensorType::new(DType::F64, [2]));
/// let kernel = square.finish(&[("out".to_string(), (x * x).sum_all())])?;
/// let grad = rfx::jit(rfx::grad(rfx::KernelSource::new(kernel)))
///     .trace(&[TensorType::new(DType::F64, [2])])?;
///
/// let outer = Trace::begin("outer");
/// let y = outer.input("y", TensorType::new(DType::F64, [2]));
/// let g = rfx::inline(&grad, &[y])?;
/// let kernel = outer.finish(&[("out".to_string(), g[0] * 3.0)])?;
/// let out = rfx::jit_kernel(kernel).call((&[1.0f64, 2.0],))?;
/// assert_eq!(out[0].as_slice::<f64>(), Some(&[6.0, 12.0][..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn inline(kernel: &Kernel, args: &[Tensor]) -> Result<Vec<Tensor>, CallError> {
    let inputs: Vec<_> = kernel.inputs().collect();
    if inputs.len() != args.len() {
        return Err(CallError::Arity {
            what: "inputs",
            expected: inputs.len(),
            found: args.len(),
        });
    }
    for ((_, name, declared), arg) in inputs.iter().zip(args) {
        // A poisoned argument (its error already recorded) poisons the outputs.
        let Some(ty) = arg.ty() else { continue };
        if ty.dtype != declared.dtype {
            return Err(CallError::DType {
                name: (*name).to_string(),
                expected: declared.dtype,
                found: ty.dtype,
            });
        }
        if ty.shape != declared.shape {
            return Err(CallError::Shape {
                name: (*name).to_string(),
                expected: declared.shape.clone(),
                found: ty.shape,
            });
        }
    }
    Ok(inline_kernel(kernel, args))
}
