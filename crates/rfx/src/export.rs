//! Export of kernels as portable source code: a kernel, its value and gradients, or its value
//! and Jacobian, as C99 (`NAME.c` and `NAME.h`) or as a `no_std` Rust module (`NAME.rs`); see
//! `docs/export.md` for the ABI and the Rust API.
//!
//! [`c`] returns the C files of a kernel, [`rust`] the Rust module, [`files`] the files of any
//! [`Lang`] by name (what `rfx export` writes), and [`program`] the lowered program they are
//! printed from (run it with [`rfx_ir::interp::run_lir`] to get the exported code's reference
//! outputs). A [`Jit`] exports what it traces for given input types with [`Jit::export_c`] and
//! [`Jit::export_files`].
//!
//! ```
//! use rfx::export::{Derivative, ExportOptions};
//! use rfx::{DType, Tensor, TensorType};
//!
//! let energy = rfx::jit(|x: Tensor| (x * x).sum_all());
//! let options = ExportOptions {
//!     derivative: Derivative::Grad(vec!["x".to_string()]),
//!     ..ExportOptions::default()
//! };
//! let files = energy.export_c(&[TensorType::new(DType::F32, [3])], "energy", &options)?;
//! assert!(files.header.contains("int energy(const float *in_0, float *out_0, float *out_1, void *work);"));
//! # Ok::<(), rfx::export::KernelExportError>(())
//! ```

use rfx_ir::TensorType;
use rfx_ir::hir::Kernel;
use rfx_ir::lir::LirProgram;
use rfx_opt::OptConfig;
use rfx_runtime::RuntimeError;

pub use rfx_codegen_c::{CExport, ExportError, RustExport};

use crate::AdError;
use crate::func::KernelFn;
use crate::jit::{Jit, JitError};

/// What an export computes besides the kernel's outputs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Derivative {
    /// The kernel's outputs only.
    #[default]
    None,
    /// The value and its gradients with respect to these inputs, by name (the kernel must have
    /// one single-element float output): the outputs are the value, then `grad_<input>` (the
    /// input's shape) per name, in this order.
    Grad(Vec<String>),
    /// The value and the Jacobian with respect to this input: the outputs are the kernel's
    /// outputs in order, then `jac_<output>_<input>` per float output, in order, of shape
    /// `shape(output) ++ shape(input)` (row-major: element `[i.., j..]` is
    /// `∂output[i..] / ∂input[j..]`).
    Jacobian(String),
}

/// How a kernel is exported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// The derivatives exported with the value.
    pub derivative: Derivative,
    /// Apply the optimiser's fast-math rewrites before exporting (as a jit compiled with
    /// fast math does before code generation); the emitted code itself is the same exact-mode
    /// code.
    pub fast_math: bool,
}

/// The languages an export can be written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lang {
    /// C99 with `<stdint.h>` only: `NAME.c` and `NAME.h`.
    #[default]
    C,
    /// A Rust module usable from a `#![no_std]` crate (slices in and out, a `Result` for
    /// length mismatches, no `unsafe`; the `libm` crate where it needs a function `core`
    /// lacks): `NAME.rs`.
    Rust,
}

/// One generated file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportFile {
    /// The file's name (`NAME.h`), without a directory.
    pub file_name: String,
    /// Its contents.
    pub text: String,
}

/// Why a kernel could not be exported. Nothing is written on any of them.
#[derive(Debug, thiserror::Error)]
pub enum KernelExportError {
    /// The code generator refused the name or the program (an op it cannot emit yet), or the
    /// lowered program does not verify.
    #[error(transparent)]
    Codegen(#[from] ExportError),
    /// The derivative could not be built (an unknown or non-float input, a gradient of a
    /// kernel without one single-element float output).
    #[error("export: {0}")]
    Autodiff(#[from] AdError),
    /// [`Derivative::Jacobian`] of a kernel without a float output: there is no Jacobian to
    /// export.
    #[error("export: the kernel has no f32 or f64 output, so it has no Jacobian with respect to `{wrt}`")]
    NoFloatOutput {
        /// The input the Jacobian was asked for.
        wrt: String,
    },
    /// Optimising or lowering the kernel failed: [`RuntimeError::Opt`] (a documented limit
    /// such as a `pad` past `i32` indices, or an optimiser bug) or [`RuntimeError::Lower`].
    #[error("export: {0}")]
    Compile(RuntimeError),
    /// [`Jit::export_c`] and [`Jit::export_files`]: tracing the function for the given types
    /// failed.
    #[error(transparent)]
    Trace(Box<JitError>),
}

impl From<JitError> for KernelExportError {
    fn from(error: JitError) -> KernelExportError {
        KernelExportError::Trace(Box::new(error))
    }
}

impl KernelExportError {
    /// `true` when the error is the caller's doing (a bad name, an op the export lacks, a bad
    /// derivative, a documented limit) rather than a compiler bug.
    pub fn is_user_error(&self) -> bool {
        match self {
            KernelExportError::Codegen(e) => !matches!(e, ExportError::InvalidProgram(_)),
            KernelExportError::Autodiff(_) | KernelExportError::NoFloatOutput { .. } => true,
            KernelExportError::Compile(e) => e.is_user_error(),
            KernelExportError::Trace(e) => e.is_user_error(),
        }
    }
}

/// The kernel an export computes: `kernel` itself, or its value with the derivatives
/// `options` asks for.
fn with_derivative(kernel: &Kernel, derivative: &Derivative) -> Result<Kernel, KernelExportError> {
    match derivative {
        Derivative::None => Ok(kernel.clone()),
        Derivative::Grad(wrt) => {
            let wrt: Vec<&str> = wrt.iter().map(String::as_str).collect();
            Ok(rfx_autodiff::value_and_grad(kernel, &wrt)?)
        }
        Derivative::Jacobian(wrt) => {
            let jacobian = rfx_autodiff::jacobian(kernel, &[wrt.as_str()])?;
            // The Jacobian kernel keeps the outputs and adds one per float output.
            if jacobian.outputs().len() == kernel.outputs().len() {
                return Err(KernelExportError::NoFloatOutput { wrt: wrt.clone() });
            }
            Ok(jacobian)
        }
    }
}

/// The lowered program an export of `kernel` with `options` prints: the derivative built,
/// optimised (with fast-math rewrites when asked) and lowered with the default configuration.
pub fn program(kernel: &Kernel, options: &ExportOptions) -> Result<LirProgram, KernelExportError> {
    let kernel = with_derivative(kernel, &options.derivative)?;
    let config = OptConfig {
        fast_math: options.fast_math,
        ..OptConfig::default()
    };
    let (mir, _) =
        rfx_opt::optimize(&kernel, &config).map_err(|e| KernelExportError::Compile(RuntimeError::Opt(e)))?;
    let (lir, _) = rfx_lower::lower(&mir, &rfx_lower::LowerConfig::default())
        .map_err(|e| KernelExportError::Compile(RuntimeError::Lower(e)))?;
    Ok(lir)
}

/// `kernel` exported as C function `name` (a C identifier, checked before any work is done):
/// the header and the source.
pub fn c(kernel: &Kernel, name: &str, options: &ExportOptions) -> Result<CExport, KernelExportError> {
    rfx_codegen_c::validate_name(name)?;
    Ok(rfx_codegen_c::c_source(&program(kernel, options)?, name)?)
}

/// `kernel` exported as a `no_std` Rust module with the function `name` (a Rust identifier,
/// not a keyword and not starting with `rfx_`, checked before any work is done).
pub fn rust(kernel: &Kernel, name: &str, options: &ExportOptions) -> Result<RustExport, KernelExportError> {
    rfx_codegen_c::validate_rust_name(name)?;
    Ok(rfx_codegen_c::rust_source(&program(kernel, options)?, name)?)
}

/// Checks that `name` can name the function and the files in `lang`.
fn validate_name(name: &str, lang: Lang) -> Result<(), ExportError> {
    match lang {
        Lang::C => rfx_codegen_c::validate_name(name),
        Lang::Rust => rfx_codegen_c::validate_rust_name(name),
    }
}

/// `kernel` exported as function `name` in `lang`: the files, by name, in the order a writer
/// may create them.
pub fn files(
    kernel: &Kernel,
    name: &str,
    lang: Lang,
    options: &ExportOptions,
) -> Result<Vec<ExportFile>, KernelExportError> {
    match lang {
        Lang::C => {
            let CExport { header, source } = c(kernel, name, options)?;
            Ok(vec![
                ExportFile {
                    file_name: format!("{name}.h"),
                    text: header,
                },
                ExportFile {
                    file_name: format!("{name}.c"),
                    text: source,
                },
            ])
        }
        Lang::Rust => Ok(vec![ExportFile {
            file_name: format!("{name}.rs"),
            text: rust(kernel, name, options)?.source,
        }]),
    }
}

impl<K: KernelFn> Jit<K> {
    /// The kernel this jit traces for inputs of `types`, exported as C function `name` (see
    /// [`c`]). The jit's configuration (backend, compile options) plays no part; `options`
    /// says what is exported.
    pub fn export_c(
        &self,
        types: &[TensorType],
        name: &str,
        options: &ExportOptions,
    ) -> Result<CExport, KernelExportError> {
        rfx_codegen_c::validate_name(name)?;
        c(&self.trace(types)?, name, options)
    }

    /// The kernel this jit traces for inputs of `types`, exported as function `name` in
    /// `lang` (see [`files`]).
    pub fn export_files(
        &self,
        types: &[TensorType],
        name: &str,
        lang: Lang,
        options: &ExportOptions,
    ) -> Result<Vec<ExportFile>, KernelExportError> {
        validate_name(name, lang)?;
        files(&self.trace(types)?, name, lang, options)
    }
}
