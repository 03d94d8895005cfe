//! The `"interp"` backend: the LIR reference interpreter behind the `Backend` trait.

use std::sync::Arc;

use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::{ArrayData, ArrayView, ArrayViewMut, DataMut};

use crate::backend::{Backend, CompileOptions, Compiled, Scratch, validate_call};
use crate::error::BackendError;

/// Runs LIR on [`rfx_ir::interp::run_lir`]: slow, exact, always available. It defines what
/// every other backend must compute.
#[derive(Clone, Copy, Debug, Default)]
pub struct InterpBackend;

struct InterpCompiled {
    program: LirProgram,
}

impl Backend for InterpBackend {
    fn name(&self) -> &'static str {
        "interp"
    }

    fn check_available(&self) -> Result<(), BackendError> {
        Ok(())
    }

    fn compile(
        &self,
        program: &LirProgram,
        _options: &CompileOptions,
    ) -> Result<Arc<dyn Compiled>, BackendError> {
        rfx_ir::lir::verify(program)
            .map_err(|e| BackendError::Lower(crate::error::LowerError::InvalidLir(e)))?;
        Ok(Arc::new(InterpCompiled {
            program: program.clone(),
        }))
    }
}

impl Compiled for InterpCompiled {
    fn backend(&self) -> &'static str {
        "interp"
    }

    fn program(&self) -> &LirProgram {
        &self.program
    }

    fn run(
        &self,
        inputs: &[ArrayView<'_>],
        outputs: &mut [ArrayViewMut<'_>],
        _scratch: &mut Scratch,
    ) -> Result<(), BackendError> {
        validate_call(&self.program, inputs, outputs)?;
        let results = run_lir(&self.program, inputs, Mode::Native).map_err(|e| BackendError::Runtime {
            backend: "interp",
            message: e.to_string(),
        })?;
        for (out, result) in outputs.iter_mut().zip(results) {
            copy_into(out.data_mut(), result.data());
        }
        Ok(())
    }
}

/// Copies `src` into `dst`; both were checked to have one dtype and length.
fn copy_into(dst: &mut DataMut<'_>, src: &ArrayData) {
    match (dst, src) {
        (DataMut::Bool(d), ArrayData::Bool(s)) if d.len() == s.len() => d.copy_from_slice(s),
        (DataMut::I32(d), ArrayData::I32(s)) if d.len() == s.len() => d.copy_from_slice(s),
        (DataMut::F32(d), ArrayData::F32(s)) if d.len() == s.len() => d.copy_from_slice(s),
        (DataMut::F64(d), ArrayData::F64(s)) if d.len() == s.len() => d.copy_from_slice(s),
        _ => {}
    }
}
