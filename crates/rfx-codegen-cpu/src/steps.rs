//! The order in which a compiled program's kernels run: each once, in program order, or, for a
//! program with loops ([`rfx_ir::repeat`]), ranges of them repeated.
//!
//! [`run_steps`] resolves the program's loop nest once, at compile time, into [`RunStep`]s
//! whose exit flags are entries of the buffer table a call builds, so a call walks the tree
//! without allocating or looking anything up. The per-kernel runner
//! (`CpuCompiled::launch`) and the one-function program (`codegen::build_program`) follow the
//! same tree.

use rfx_ir::DType;
use rfx_ir::lir::LirProgram;
use rfx_ir::repeat::{Step, steps};
use rfx_lower::BackendError;

/// One step of a call: a kernel, or a loop over steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RunStep {
    /// Run kernel `index` once.
    Kernel(usize),
    /// Run `body` up to `trips` times; with `exit`, stop after an iteration that leaves the
    /// `bool` element at that buffer-table entry false (zero).
    Loop {
        /// The trip count, or with `exit` the most iterations.
        trips: u64,
        /// The buffer-table entry of the loop's exit flag.
        exit: Option<usize>,
        /// Its kernels and inner loops, in order.
        body: Vec<RunStep>,
    },
}

fn plan_error(message: String) -> BackendError {
    BackendError::Compile {
        backend: "cpu",
        message,
    }
}

/// The steps that run `program`, its exit flags resolved to the entries of `entries` (the
/// buffer table's entry of each buffer, `None` for literals). A program without loops runs
/// each kernel once.
pub(crate) fn run_steps(
    program: &LirProgram,
    entries: &[Option<usize>],
) -> Result<Vec<RunStep>, BackendError> {
    let plan = steps(program.kernels().len(), program.loops())
        .map_err(|e| plan_error(format!("the program's loops: {e}")))?;
    plan.iter().map(|step| resolve(program, entries, step)).collect()
}

fn resolve(program: &LirProgram, entries: &[Option<usize>], step: &Step) -> Result<RunStep, BackendError> {
    match step {
        Step::Kernel(index) => Ok(RunStep::Kernel(*index)),
        Step::Loop { spec, body } => {
            let exit = match spec.exit {
                None => None,
                Some(flag) => {
                    let is_flag = program
                        .buffer(flag)
                        .is_some_and(|b| b.ty.dtype == DType::Bool && b.ty.shape.numel() == 1);
                    let entry = entries.get(flag.index()).copied().flatten();
                    match entry {
                        Some(entry) if is_flag => Some(entry),
                        _ => {
                            return Err(plan_error(format!(
                                "loop over kernels {}..{}: its exit flag {flag} is not a bool scalar \
                                 buffer in the buffer table",
                                spec.first, spec.end
                            )));
                        }
                    }
                }
            };
            let body = body
                .iter()
                .map(|inner| resolve(program, entries, inner))
                .collect::<Result<_, _>>()?;
            Ok(RunStep::Loop {
                trips: spec.trips,
                exit,
                body,
            })
        }
    }
}
