//! Reference interpreters: the executable semantics of rfx.
//!
//! Each IR level has an interpreter that takes inputs positionally (in the order the program
//! declares them) as borrowed [`ArrayView`](crate::ArrayView)s and returns the outputs in
//! declaration order. They verify the program first and check every input's dtype and shape
//! before computing anything. The HIR interpreter is [`run_hir`].
//!
//! [`Mode::Native`] computes in each value's own dtype (an `f32` kernel computes in `f32`, giving
//! the bits an exact backend must give). [`Mode::Oracle`] computes every float in `f64`, so the
//! error of other paths can be measured against it; its float outputs are `f64` arrays.

mod hir;

pub use hir::run_hir;

use crate::{DType, Shape};

mod host;
mod lir;
mod mir;

pub use lir::run_lir;
pub use mir::run_mir;

/// How floats are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// In each value's own dtype.
    #[default]
    Native,
    /// Every float in `f64`; float outputs come back as `f64`.
    Oracle,
}

/// Why an interpreter rejected a call. Nothing is computed when an error is returned.
#[derive(Debug, thiserror::Error)]
pub enum InterpError {
    /// The wrong number of inputs.
    #[error("expected {expected} input(s), got {found}")]
    Arity {
        /// Inputs the program declares.
        expected: usize,
        /// Inputs supplied.
        found: usize,
    },
    /// An input of the wrong dtype.
    #[error("input `{name}`: expected dtype {expected}, got {found}")]
    InputDType {
        /// The input's name.
        name: String,
        /// The declared dtype.
        expected: DType,
        /// The supplied dtype.
        found: DType,
    },
    /// An input of the wrong shape.
    #[error("input `{name}`: expected shape {expected}, got {found}")]
    InputShape {
        /// The input's name.
        name: String,
        /// The declared shape.
        expected: Shape,
        /// The supplied shape.
        found: Shape,
    },
    /// The HIR kernel does not verify.
    #[error("invalid HIR kernel:\n{0}")]
    InvalidHir(crate::hir::VerifyErrors),
    /// The MIR program does not verify.
    #[error("invalid MIR program:\n{0}")]
    InvalidMir(crate::mir::VerifyErrors),
    /// A program that verified but could not be evaluated at `location`: a gap in the
    /// verifier, reported instead of panicking.
    #[error("internal error: {location} could not be evaluated although the program verified")]
    Inconsistent {
        /// The value, slot or kernel where evaluation failed.
        location: String,
    },
    /// The LIR program does not verify.
    #[error("invalid LIR program:\n{0}")]
    InvalidLir(crate::lir::VerifyErrors),
}
