//! The order in which a compiled program's kernels run: each once, in program order, or, for a
//! program with loops ([`rfx_ir::repeat`]), ranges of them repeated.
//!
//! [`run_steps`] resolves the program's loop nest once, at compile time, into [`RunStep`]s
//! whose exit flags are entries of the buffer table a call builds, so a call walks the tree
//! without allocating or looking anything up. The per-kernel runner
//! (`CpuCompiled::launch`) and the one-function program (`codegen::build_program`) follow the
//! same tree.

use rfx_ir::lir::{LirProgram, Storage};
use rfx_ir::repeat::{Step, steps};
use rfx_ir::{BufId, DType};
use rfx_lower::BackendError;

/// One step of a call: a kernel, or a loop over steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RunStep {
    /// Run kernel `index` once.
    Kernel(usize),
    /// Run `body` up to `trips` times; with `exit`, stop after an iteration that leaves the
    /// loop's `bool` exit flag false (zero).
    Loop {
        /// The trip count, or with `exit` the most iterations.
        trips: u64,
        /// The loop's exit flag.
        exit: Option<ExitFlag>,
        /// Its kernels and inner loops, in order.
        body: Vec<RunStep>,
    },
}

/// A loop's exit flag: a `bool` scalar buffer of the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExitFlag {
    /// The buffer.
    pub(crate) buf: BufId,
    /// Its entry in the buffer table of the per-kernel functions
    /// ([`crate::codegen::table_entries`]).
    pub(crate) entry: usize,
}

/// The table of a program compiled as one function whose arena lives in its own stack frame:
/// the arguments' addresses in call order, the inputs then the outputs (what the caller passes,
/// so a call hands its argument list over as it is). The entry of each buffer; `None` for
/// temporaries and literals, which the function addresses itself.
pub(crate) fn argument_entries(program: &LirProgram) -> Vec<Option<usize>> {
    let inputs = program
        .buffers()
        .iter()
        .filter(|b| matches!(b.storage, Storage::Input { .. }))
        .count();
    let (mut next_input, mut next_output) = (0, inputs);
    program
        .buffers()
        .iter()
        .map(|b| match b.storage {
            Storage::Input { .. } => {
                next_input += 1;
                Some(next_input - 1)
            }
            Storage::Output { .. } => {
                next_output += 1;
                Some(next_output - 1)
            }
            _ => None,
        })
        .collect()
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
                        Some(entry) if is_flag => Some(ExitFlag { buf: flag, entry }),
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
