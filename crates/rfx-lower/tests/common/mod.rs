//! Optimising and lowering a kernel for the lowering tests: `rfx-lower`'s `tests/lowering.rs`
//! (hand-written kernels and the optimiser's corpus) and, through a `#[path]` include,
//! `rfx-check`'s `tests/lowering.rs` (random kernels).

use std::time::Duration;

use rfx_ir::hir::Kernel;
use rfx_ir::lir::LirProgram;
use rfx_lower::{LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

/// `kernel` optimised exactly and lowered with the default configuration.
pub(crate) fn lower_kernel(kernel: &Kernel) -> LirProgram {
    lower_with(kernel, &LowerConfig::default())
}

/// `kernel` optimised exactly and lowered with `config`.
pub(crate) fn lower_with(kernel: &Kernel, config: &LowerConfig) -> LirProgram {
    let (mir, _) = optimize(
        kernel,
        &OptConfig {
            time_limit: Duration::from_secs(60),
            ..OptConfig::exact()
        },
    )
    .expect("optimize");
    lower(&mir, config).expect("lower").0
}
