//! The lowered executor: named inputs in, owned outputs out.

use rfx_ir::lir::LirProgram;
use rfx_ir::{Array, ArrayView};

use crate::backend::{Backend, CompileOptions};
use crate::error::{BackendError, CallError};

/// Compiles `program` with `backend` and runs it once on named inputs (any order), returning
/// the outputs by name in the program's output order — rfxJIT's `execute_lowered`. Every input
/// is checked (unknown, missing or duplicate names, dtypes, shapes) before anything runs.
pub fn execute_lowered(
    program: &LirProgram,
    inputs: &[(&str, ArrayView<'_>)],
    backend: &dyn Backend,
) -> Result<Vec<(String, Array)>, BackendError> {
    let ordered = order_inputs(program, inputs)?;
    backend.check_available()?;
    let results = backend
        .compile(program, &CompileOptions::default())?
        .run_to_new(&ordered)?;
    Ok(program
        .outputs()
        .map(|(_, name, _)| name.to_string())
        .zip(results)
        .collect())
}

/// Puts named inputs into the program's positional order.
pub fn order_inputs<'a>(
    program: &LirProgram,
    inputs: &[(&str, ArrayView<'a>)],
) -> Result<Vec<ArrayView<'a>>, CallError> {
    for (i, (name, _)) in inputs.iter().enumerate() {
        if !program.inputs().any(|(_, declared, _)| declared == *name) {
            return Err(CallError::UnknownInput(name.to_string()));
        }
        if inputs[..i].iter().any(|(other, _)| other == name) {
            return Err(CallError::DuplicateInput(name.to_string()));
        }
    }
    program
        .inputs()
        .map(|(_, declared, _)| {
            inputs
                .iter()
                .find(|(name, _)| *name == declared)
                .map(|(_, view)| *view)
                .ok_or_else(|| CallError::MissingInput(declared.to_string()))
        })
        .collect()
}
