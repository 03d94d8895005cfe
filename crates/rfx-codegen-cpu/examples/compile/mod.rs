//! The compile path the timing examples share.

use std::sync::Arc;

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::lir::LirProgram;
use rfx_lower::{Backend, CompileOptions, Compiled, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

/// `text` (a kernel in HIR text) optimised, lowered and compiled for one thread: its LIR and the
/// compiled kernel.
pub(crate) fn compile_one_thread(
    text: &str,
) -> Result<(LirProgram, Arc<dyn Compiled>), Box<dyn std::error::Error>> {
    let kernel = rfx_ir::hir::parse(text)?;
    let (mir, _) = optimize(&kernel, &OptConfig::default())?;
    let (lir, _) = lower(&mir, &LowerConfig::default())?;
    let options = CompileOptions {
        max_threads: Some(1),
        ..Default::default()
    };
    let compiled = CpuBackend.compile(&lir, &options)?;
    Ok((lir, compiled))
}
