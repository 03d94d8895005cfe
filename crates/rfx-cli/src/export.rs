//! `rfx export`: a kernel (or its value and gradient) as portable C99, `DIR/NAME.c` and
//! `DIR/NAME.h` written all or nothing through [`rfx_cli::output`].

use std::path::Path;

use clap::ValueEnum;
use rfx::Kernel;
use rfx_cli::output::OutputSet;

use crate::CliError;

/// The languages `rfx export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Lang {
    /// C99 with `<stdint.h>` only: `NAME.c` and `NAME.h`.
    C,
}

/// Exports `kernel` (its value and the gradients of `grad`, in that order, when `grad` is not
/// empty) as function `name` into `dir`.
pub(crate) fn export(
    kernel: &Kernel,
    lang: Lang,
    name: &str,
    grad: &[String],
    fast_math: bool,
    dir: &Path,
) -> Result<(), CliError> {
    let Lang::C = lang;
    rfx_codegen_c::validate_name(name).map_err(|e| CliError::User(e.to_string()))?;
    let program = if grad.is_empty() {
        kernel.clone()
    } else {
        let wrt: Vec<&str> = grad.iter().map(String::as_str).collect();
        rfx_autodiff::value_and_grad(kernel, &wrt).map_err(|e| CliError::User(e.to_string()))?
    };
    let lir = crate::lower_with(&program, fast_math)?;
    let files = rfx_codegen_c::c_source(&lir, name).map_err(|e| match e {
        rfx_codegen_c::ExportError::InvalidProgram(_) => CliError::Internal(e.to_string()),
        _ => CliError::User(e.to_string()),
    })?;
    let mut set = OutputSet::new();
    set.create_dir(dir)?;
    set.stage(&dir.join(format!("{name}.h")), |out| {
        out.write_all(files.header.as_bytes())
    })?;
    set.stage(&dir.join(format!("{name}.c")), |out| {
        out.write_all(files.source.as_bytes())
    })?;
    set.commit()?;
    Ok(())
}
