//! Export of a traced kernel as portable source through [`rfx::export`]: `rfxjit.export`
//! (python/rfxjit/_export.py) traces the function at its example arguments, calls
//! `rfxjit._rfx.export` on the kernel, then writes the files it returns.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use rfx::export::{Derivative, ExportError, ExportOptions, KernelExportError, Lang};

use crate::errors::{self, AutodiffError, CompileError};
use crate::tracing::PyKernel;

/// The Python exception for an export error: a refused name or op is `rfxjit.ExportError`, a
/// derivative autodiff rejects `AutodiffError`, a failed compile step `CompileError`.
pub fn export_error(error: KernelExportError) -> PyErr {
    let message = error.to_string();
    match error {
        KernelExportError::Codegen(ExportError::InvalidProgram(_)) => CompileError::new_err(message),
        KernelExportError::Codegen(_) => errors::ExportError::new_err(message),
        KernelExportError::Autodiff(_) | KernelExportError::NoFloatOutput { .. } => {
            AutodiffError::new_err(message)
        }
        KernelExportError::Compile(runtime) => errors::runtime_error(runtime),
        KernelExportError::Trace(jit) => errors::jit_error(*jit),
    }
}

fn lang_of(name: &str) -> PyResult<Lang> {
    match name {
        "c" => Ok(Lang::C),
        "rust" => Ok(Lang::Rust),
        other => Err(PyValueError::new_err(format!(
            "unknown export language {other:?} (one of: \"c\", \"rust\")"
        ))),
    }
}

/// `kernel` exported as function `name` in `lang` (`"c"` or `"rust"`): `[(file name, text),
/// ...]`, the C header first. `grad` names the inputs of a value-and-gradient export, `jacobian` the
/// input of a value-and-Jacobian export (at most one of them).
#[pyfunction]
#[pyo3(signature = (kernel, name, lang = "c", grad = None, jacobian = None, fast_math = false))]
fn export(
    kernel: &PyKernel,
    name: &str,
    lang: &str,
    grad: Option<Vec<String>>,
    jacobian: Option<String>,
    fast_math: bool,
) -> PyResult<Vec<(String, String)>> {
    let derivative = match (grad, jacobian) {
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err("export takes grad or jacobian, not both"));
        }
        (Some(wrt), None) => Derivative::Grad(wrt),
        (None, Some(wrt)) => Derivative::Jacobian(wrt),
        (None, None) => Derivative::None,
    };
    let options = ExportOptions {
        derivative,
        fast_math,
    };
    let files = rfx::export::files(&kernel.kernel, name, lang_of(lang)?, &options).map_err(export_error)?;
    Ok(files.into_iter().map(|f| (f.file_name, f.text)).collect())
}

/// Adds `export` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(export, m)?)?;
    Ok(())
}
