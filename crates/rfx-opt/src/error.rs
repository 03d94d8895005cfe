//! The optimiser's errors.

use rfx_ir::hir::{BuildError, ValueId, VerifyErrors};

/// Why optimisation failed. Only an invalid input kernel is the caller's fault; the other
/// variants are optimiser bugs, reported rather than panicking.
#[derive(Debug, thiserror::Error)]
pub enum OptError {
    /// The input kernel does not verify.
    #[error("invalid input kernel:\n{0}")]
    InvalidKernel(VerifyErrors),
    /// A value the optimiser could not type (an optimiser bug).
    #[error("internal error: value {0} has no consistent type in the e-graph")]
    InvalidValue(ValueId),
    /// Extraction met a cycle, or a rebuild found an operand missing (an optimiser bug).
    #[error("internal error: extraction met a cycle or a missing operand")]
    Cycle,
    /// Rebuilding HIR from the e-graph broke a typing rule (a rewrite-rule bug).
    #[error("internal error: rebuilt kernel is ill-typed: {0}")]
    Rebuild(#[source] BuildError),
    /// A loop node given to a pass that takes loop-free kernels ([`crate::simplify`],
    /// [`crate::constant_fold`]); [`crate::optimize`] and [`crate::fuse_chains`] compile loops.
    #[error("{0} is a loop: this pass takes kernels without loops (`optimize` compiles loops)")]
    Loop(ValueId),
    /// A `pad` too large to index with `i32` (more than 2^31 elements along its reads).
    #[error("`pad` {0} reaches an element index that `i32` does not hold")]
    IndexRange(ValueId),
    /// A pass produced a kernel that does not verify (a pass bug).
    #[error("internal error: pass `{pass}` produced an invalid kernel:\n{errors}")]
    PassBroke {
        /// The pass.
        pass: &'static str,
        /// What the verifier found.
        errors: String,
    },
}
