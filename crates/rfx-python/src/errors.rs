//! The Python exception classes, one per rfx error family, and the mapping onto them.
//!
//! Every class derives from `rfxjit.RfxError`. [`TraceError`] also covers NumPy functions
//! the tracer does not support (raised from Python); [`CallError`] covers arguments that do not
//! fit a kernel; [`BackendUnavailable`] is a backend that is not built in or has no device.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use rfx::JitError;
use rfx_lower::BackendError;
use rfx_runtime::RuntimeError;

create_exception!(
    rfxjit,
    RfxError,
    PyException,
    "The base class of every rfx error."
);
create_exception!(
    rfxjit,
    TraceError,
    RfxError,
    "Tracing a function failed: an op broke a typing rule, or the function called a NumPy function rfx does not support."
);
create_exception!(
    rfxjit,
    CallError,
    RfxError,
    "The arguments do not fit the kernel (count, dtype, shape, layout, aliasing)."
);
create_exception!(
    rfxjit,
    AutodiffError,
    RfxError,
    "A transform (a derivative or vmap) rejected the function or its arguments."
);
create_exception!(
    rfxjit,
    CompileError,
    RfxError,
    "Optimising, lowering, compiling or running a kernel failed."
);
create_exception!(
    rfxjit,
    BackendUnavailable,
    CompileError,
    "The backend is not built into this rfx or has no device here."
);
create_exception!(
    rfxjit,
    ExportError,
    RfxError,
    "A kernel could not be exported as source: a name that is not a C identifier, or an op the export cannot emit."
);
create_exception!(
    rfxjit,
    ExprError,
    RfxError,
    "An expression string (rfxjit.eval) or HIR text did not parse or type-check."
);

/// Adds the exception classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RfxError", py.get_type::<RfxError>())?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("CallError", py.get_type::<CallError>())?;
    m.add("AutodiffError", py.get_type::<AutodiffError>())?;
    m.add("CompileError", py.get_type::<CompileError>())?;
    m.add("BackendUnavailable", py.get_type::<BackendUnavailable>())?;
    m.add("ExprError", py.get_type::<ExprError>())?;
    m.add("ExportError", py.get_type::<ExportError>())?;
    Ok(())
}

/// The Python exception for a runtime error.
pub fn runtime_error(error: RuntimeError) -> PyErr {
    let message = error.to_string();
    match error {
        RuntimeError::Call(_) => CallError::new_err(message),
        RuntimeError::Backend(BackendError::Unavailable { .. } | BackendError::UnknownBackend { .. }) => {
            BackendUnavailable::new_err(message)
        }
        _ => CompileError::new_err(message),
    }
}

/// The Python exception for a jit error.
pub fn jit_error(error: JitError) -> PyErr {
    let message = error.to_string();
    match error {
        JitError::Trace(_) => TraceError::new_err(message),
        JitError::Call(_) => CallError::new_err(message),
        JitError::Runtime(runtime) => runtime_error(runtime),
        JitError::Autodiff(_)
        | JitError::BatchAxisMissing { .. }
        | JitError::BatchSize { .. }
        | JitError::InputCount { .. } => AutodiffError::new_err(message),
    }
}
