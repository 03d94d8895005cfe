//! The one error type of the crate.

use rfx_ir::hir::{BuildError, ValueId, VerifyErrors};
use rfx_ir::{DType, Shape, TensorType};

/// Why a transform rejected its arguments. Nothing is built when an error is returned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdError {
    /// The kernel to differentiate does not verify.
    #[error("the kernel to differentiate is invalid:\n{0}")]
    InvalidKernel(VerifyErrors),
    /// `wrt` names an input the kernel does not have.
    #[error("the kernel has no input named `{name}`")]
    UnknownInput {
        /// The name asked for.
        name: String,
    },
    /// `wrt` gives an input position past the last input.
    #[error("input position {position} is out of range: the kernel has {n_inputs} input(s)")]
    InputPosition {
        /// The position asked for.
        position: usize,
        /// How many inputs the kernel has.
        n_inputs: usize,
    },
    /// `wrt` names one input twice.
    #[error("input `{name}` is listed twice in `wrt`")]
    DuplicateWrt {
        /// The repeated input.
        name: String,
    },
    /// `wrt` is empty: there is nothing to differentiate with respect to.
    #[error("`wrt` is empty")]
    EmptyWrt,
    /// Only float inputs can be differentiated.
    #[error("input `{name}` has dtype {dtype}; only f32 and f64 inputs can be differentiated")]
    NonFloatInput {
        /// The input.
        name: String,
        /// Its dtype.
        dtype: DType,
    },
    /// `grad` and `value_and_grad` need exactly one output.
    #[error("`grad` needs a kernel with exactly one output, found {found}")]
    OutputCount {
        /// How many outputs the kernel has.
        found: usize,
    },
    /// `grad` and `value_and_grad` need a float output.
    #[error("output `{name}` has dtype {dtype}; `grad` needs an f32 or f64 output")]
    NonFloatOutput {
        /// The output.
        name: String,
        /// Its dtype.
        dtype: DType,
    },
    /// `grad` and `value_and_grad` need an output with one element.
    #[error(
        "output `{name}` has shape {shape}; `grad` needs a single-element output (use `vjp` or `jacrev`)"
    )]
    NonScalarOutput {
        /// The output.
        name: String,
        /// Its shape.
        shape: Shape,
    },
    /// `keep_outputs` names an output the kernel does not have.
    #[error("the kernel has no output named `{name}`")]
    UnknownOutput {
        /// The name asked for.
        name: String,
    },
    /// `keep_outputs` names one output twice.
    #[error("output `{name}` is listed twice in `keep_outputs`")]
    DuplicateOutput {
        /// The name listed twice.
        name: String,
    },
    /// `keep_outputs` names no output (a kernel needs at least one).
    #[error("`keep_outputs` names no output; a kernel needs at least one")]
    NoOutputsKept,
    /// A name the transform generates (`ct_y`, `grad_x`, ...) is already taken in the kernel.
    #[error("the generated name `{name}` is already used by the kernel")]
    NameClash {
        /// The generated name.
        name: String,
    },
    /// `vmap`'s `in_axes` does not have one entry per input.
    #[error("`in_axes` has {found} entries; the kernel has {expected} input(s)")]
    BatchAxesCount {
        /// How many inputs the kernel has.
        expected: usize,
        /// How many entries `in_axes` has.
        found: usize,
    },
    /// `vmap`'s batch axis for an input is past the input's rank.
    #[error("input `{name}` has rank {rank}; its batch axis {axis} must be at most {rank}")]
    BatchAxis {
        /// The input.
        name: String,
        /// The axis asked for.
        axis: usize,
        /// The input's rank (one example's).
        rank: usize,
    },
    /// `vmap`'s `out_axes` does not have one entry per output.
    #[error("`out_axes` has {found} entries; the kernel has {expected} output(s)")]
    OutAxesCount {
        /// How many outputs the kernel has.
        expected: usize,
        /// How many entries `out_axes` has.
        found: usize,
    },
    /// `vmap`'s batch axis for an output is past the output's rank.
    #[error("output `{name}` has rank {rank}; its batch axis {axis} must be at most {rank}")]
    OutAxis {
        /// The output.
        name: String,
        /// The axis asked for.
        axis: usize,
        /// The output's rank (one example's).
        rank: usize,
    },
    /// `vmap`'s `out_axes` leaves an output without a batch axis (`None`), but the output
    /// differs from example to example (a batched input reaches it).
    #[error("output `{name}` depends on a batched input, so it needs a batch axis in `out_axes`")]
    BatchedOutput {
        /// The output.
        name: String,
    },
    /// Every entry of `vmap`'s `in_axes` is `None`: there is no batch to map over.
    #[error("`in_axes` batches no input; at least one input must carry the batch")]
    NothingBatched,
    /// A value of the batched kernel would not fit in memory (`size` examples of `ty`).
    #[error("a batch of {size} examples of {ty} does not fit in memory")]
    BatchTooLarge {
        /// The batch size.
        size: usize,
        /// One example's type.
        ty: TensorType,
    },
    /// A loop the transform cannot carry through, with the reason: reverse mode stores the
    /// carries of every iteration (`trips · |carry|` elements), and those would not fit in
    /// memory.
    #[error("cannot transform the loop at {value}: {reason}")]
    Loop {
        /// The loop's value in the kernel being transformed.
        value: ValueId,
        /// Why.
        reason: String,
    },
    /// A derivative node failed to type-check: a bug in this crate, reported instead of a panic.
    #[error("internal error: a derivative node was rejected: {0}")]
    Internal(#[from] BuildError),
}
