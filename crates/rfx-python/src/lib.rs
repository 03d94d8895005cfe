//! `rfx-python`: the native module (`rfxjit._rfx`) of the `rfxjit` Python package.
//!
//! **Owns:** the bridge between Python and the engine: traced tensors ([`tracing`]) that the
//! pure-Python tracer drives while it runs the user's NumPy code, HIR kernels and their
//! transforms, compiled kernels called on NumPy arrays without copying ([`exec`]), kernels
//! exported as portable source ([`mod@export`]), and the Python exception classes that mirror
//! rfx's error families ([`errors`]). No kernel maths is done here or in Python: every op
//! records into rfx's HIR through the `rfx` facade.
//!
//! **Depends on:** `rfx`, `rfx-ir`, `rfx-runtime`, `rfx-lower`, `rfx-autodiff` (their error
//! types, to map each family onto its Python class), PyO3 and the `numpy` crate.
//!
//! The Python package lives beside this crate (`python/rfxjit`); `pip install
//! ./crates/rfx-python` builds both with maturin (see `pyproject.toml` and `docs/python.md`).

use pyo3::prelude::*;

#[cfg(feature = "alloc-count")]
mod alloc_count;
pub mod errors;
pub mod exec;
pub mod export;
pub mod tracing;

/// The `rfxjit._rfx` module.
#[pymodule]
fn _rfx(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    tracing::register(m)?;
    exec::register(m)?;
    export::register(m)?;
    #[cfg(feature = "alloc-count")]
    alloc_count::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
