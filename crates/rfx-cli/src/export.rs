//! `rfx export`: a kernel (or its value and gradients, or its value and Jacobian) as portable
//! source through [`rfx::export`], written all or nothing through [`rfx_cli::output`].

use std::path::Path;

use clap::ValueEnum;
use rfx::Kernel;
use rfx::export::{Derivative, ExportOptions, KernelExportError};
use rfx_cli::output::OutputSet;

use crate::CliError;

/// The languages `rfx export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Lang {
    /// C99 with `<stdint.h>` only: `NAME.c` and `NAME.h`.
    C,
    /// A module usable from a `#![no_std]` Rust crate: `NAME.rs`.
    Rust,
}

impl Lang {
    fn facade(self) -> rfx::export::Lang {
        match self {
            Lang::C => rfx::export::Lang::C,
            Lang::Rust => rfx::export::Lang::Rust,
        }
    }
}

/// What `rfx export` writes, from its flags.
pub(crate) struct ExportArgs<'a> {
    pub(crate) lang: Lang,
    pub(crate) name: &'a str,
    /// `--grad`: empty when not given.
    pub(crate) grad: &'a [String],
    /// `--jacobian` (clap refuses it together with `--grad`).
    pub(crate) jacobian: Option<&'a str>,
    pub(crate) fast_math: bool,
    pub(crate) dir: &'a Path,
}

impl From<KernelExportError> for CliError {
    fn from(error: KernelExportError) -> CliError {
        if error.is_user_error() {
            CliError::User(error.to_string())
        } else {
            CliError::Internal(error.to_string())
        }
    }
}

/// Exports `kernel` as `args` say into `args.dir`: every file or none.
pub(crate) fn export(kernel: &Kernel, args: &ExportArgs<'_>) -> Result<(), CliError> {
    let derivative = match (args.jacobian, args.grad) {
        (Some(wrt), _) => Derivative::Jacobian(wrt.to_string()),
        (None, []) => Derivative::None,
        (None, grad) => Derivative::Grad(grad.to_vec()),
    };
    let options = ExportOptions {
        derivative,
        fast_math: args.fast_math,
    };
    let files = rfx::export::files(kernel, args.name, args.lang.facade(), &options)?;
    let mut set = OutputSet::new();
    set.create_dir(args.dir)?;
    for file in &files {
        set.stage(&args.dir.join(&file.file_name), |out| {
            out.write_all(file.text.as_bytes())
        })?;
    }
    set.commit()?;
    Ok(())
}
