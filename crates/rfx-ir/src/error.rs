//! Errors of the IR layer: typing, parsing, verification and interpretation.

use crate::{DType, Shape};

/// A violation of an op's typing rule, found by the builders and the verifiers.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    /// The op got the wrong number of operands.
    #[error("`{op}` takes {expected} operand(s), got {found}")]
    Arity {
        /// The op's text name.
        op: &'static str,
        /// Operands the op takes.
        expected: usize,
        /// Operands it got.
        found: usize,
    },
    /// The op does not accept operands of this dtype.
    #[error("`{op}` does not accept {dtype} operands")]
    UnsupportedDType {
        /// The op's text name.
        op: &'static str,
        /// The rejected dtype.
        dtype: DType,
    },
    /// Two operands that must share a dtype do not.
    #[error("`{op}` needs operands of one dtype, got {lhs} and {rhs}")]
    DTypeMismatch {
        /// The op's text name.
        op: &'static str,
        /// The first operand's dtype.
        lhs: DType,
        /// The mismatching operand's dtype.
        rhs: DType,
    },
    /// A `select` condition that is not bool.
    #[error("`select` needs a bool condition, got {found}")]
    ConditionNotBool {
        /// The condition's dtype.
        found: DType,
    },
    /// Operand shapes that do not broadcast together (NumPy rules).
    #[error("`{op}`: shapes {lhs} and {rhs} do not broadcast")]
    Broadcast {
        /// The op's text name.
        op: &'static str,
        /// The shape broadcast so far.
        lhs: Shape,
        /// The operand shape that does not fit.
        rhs: Shape,
    },
    /// Operands that must share one shape exactly (a linear recurrence's operand and
    /// coefficient) but do not.
    #[error("`{op}` needs operands of one shape, got {lhs} and {rhs}")]
    ShapeMismatch {
        /// The op's text name.
        op: &'static str,
        /// The first operand's shape.
        lhs: Shape,
        /// The mismatching operand's shape.
        rhs: Shape,
    },
    /// `broadcast_to` to a shape the operand does not broadcast to.
    #[error("cannot broadcast {from} to {to}")]
    BroadcastTo {
        /// The operand's shape.
        from: Shape,
        /// The requested shape.
        to: Shape,
    },
    /// `reshape` to a shape with a different element count.
    #[error("cannot reshape {from} ({from_numel} elements) to {to} ({to_numel} elements)")]
    Reshape {
        /// The operand's shape.
        from: Shape,
        /// Its element count.
        from_numel: usize,
        /// The requested shape.
        to: Shape,
        /// Its element count.
        to_numel: usize,
    },
    /// A reduction axis outside the operand's rank.
    #[error("axis {axis} is out of range for rank {rank}")]
    AxisOutOfRange {
        /// The axis.
        axis: usize,
        /// The operand's rank.
        rank: usize,
    },
    /// A reduction axis named twice.
    #[error("axis {axis} is listed twice")]
    DuplicateAxis {
        /// The axis.
        axis: usize,
    },
    /// A `transpose` whose `perm` is not a permutation of the operand's axes.
    #[error("`perm` {perm:?} does not list each axis below {rank} exactly once")]
    Permutation {
        /// The permutation given.
        perm: Vec<usize>,
        /// The operand's rank.
        rank: usize,
    },
    /// A `slice` whose window does not lie inside its operand.
    #[error("`slice` of {to} at {starts:?} does not lie inside the operand's {from}")]
    Slice {
        /// The operand's shape.
        from: Shape,
        /// The window's first index.
        starts: Vec<usize>,
        /// The window's (the node's) shape.
        to: Shape,
    },
    /// A `pad` whose operand, placed at `low`, does not lie inside the result.
    #[error("`pad` of the operand's {from} at {low:?} does not lie inside the result's {to}")]
    Pad {
        /// The operand's shape.
        from: Shape,
        /// Where the operand's first element goes.
        low: Vec<usize>,
        /// The result's (the node's) shape.
        to: Shape,
    },
    /// A `gather` whose index differs from its table in rank or off `axis` in extent, or whose
    /// table is empty along `axis`.
    #[error(
        "`gather` along axis {axis}: the index's {index} must match the table's {table} in rank \
         and off that axis, and the table must not be empty along it"
    )]
    Gather {
        /// The table's shape.
        table: Shape,
        /// The index's shape.
        index: Shape,
        /// The axis the index selects along.
        axis: usize,
    },
    /// A `set_row` whose `x` has no axis 0 or no row along it, whose row is not shaped like one
    /// row of `x`, or whose index is not a scalar.
    #[error(
        "`set_row`: the row's {row} must be the shape of {x} without axis 0 (which must hold a \
         row), and the index's {index} must be a scalar"
    )]
    SetRow {
        /// The updated operand's shape.
        x: Shape,
        /// The row's shape.
        row: Shape,
        /// The index's shape.
        index: Shape,
    },
    /// The index of an element along an axis with no elements (the tracing API's `argmin` and
    /// `argmax`): there is none to give.
    #[error("no element to point at along the empty axis {axis} of {shape}")]
    EmptyAxis {
        /// The operand's shape.
        shape: Shape,
        /// The empty axis.
        axis: usize,
    },
    /// A matrix product whose contracted extents differ, or with a scalar operand (the
    /// tracing API's `matmul` and `dot`): the last axis of `lhs` against the next-to-last of
    /// `rhs` (its only axis when it is a vector).
    #[error(
        "`{op}` of {lhs} and {rhs}: the last axis of the first must match the second's \
         next-to-last (its only one for a vector), and `matmul` takes no scalar"
    )]
    Contraction {
        /// The op's name in the tracing API.
        op: &'static str,
        /// The first operand's shape.
        lhs: Shape,
        /// The second operand's shape.
        rhs: Shape,
    },
    /// An operand without the extent an op needs along an axis (the tracing API's `cross`:
    /// three components).
    #[error("`{op}` needs extent {expected} along axis {axis} of {shape}")]
    AxisExtent {
        /// The op's name in the tracing API.
        op: &'static str,
        /// The operand's shape (with leading axes of one where it broadcasts to a higher rank).
        shape: Shape,
        /// The axis.
        axis: usize,
        /// The extent the op needs.
        expected: usize,
    },
    /// A matrix function of an operand whose last two axes are not a square matrix (the
    /// tracing API's `inv`, `det` and `solve`).
    #[error("`{op}` needs square matrices in the last two axes, got {shape}")]
    NotSquare {
        /// The op's name in the tracing API.
        op: &'static str,
        /// The operand's shape.
        shape: Shape,
    },
    /// An `iota` longer than its dtype counts exactly.
    #[error("`iota` of extent {extent} does not count exactly in {dtype}")]
    IotaExtent {
        /// The node's dtype.
        dtype: DType,
        /// The extent along the counted axis.
        extent: usize,
    },
    /// A loop whose body, test or operands do not agree (see `hir::Loop`).
    #[error("malformed loop: {reason}")]
    Loop {
        /// What disagrees.
        reason: String,
    },
    /// A constant whose literal dtype differs from its declared type.
    #[error("constant of dtype {literal} declared as {declared}")]
    ConstantDType {
        /// The literal's dtype.
        literal: DType,
        /// The declared dtype.
        declared: DType,
    },
    /// A `literal` (or literal buffer) whose value count is not its type's element count.
    #[error("literal has {found} value(s) but its type has {expected} element(s)")]
    LiteralLength {
        /// The type's element count.
        expected: usize,
        /// The values given.
        found: usize,
    },
    /// A node whose declared result type differs from the one its typing rule gives.
    #[error("declared type {declared} but the operands give {inferred}")]
    ResultType {
        /// The declared type, printed.
        declared: String,
        /// The inferred type, printed.
        inferred: String,
    },
    /// A type with more elements than any buffer can hold (more than `isize::MAX` bytes).
    #[error("type {ty} does not fit in memory (more than isize::MAX bytes)")]
    TooLarge {
        /// The type, printed.
        ty: String,
    },
}

impl TypeError {
    /// `Ok` when the op `op` that takes `expected` operands got `found`, else [`TypeError::Arity`].
    pub(crate) fn check_arity(op: &'static str, expected: usize, found: usize) -> Result<(), TypeError> {
        if found == expected {
            Ok(())
        } else {
            Err(TypeError::Arity { op, expected, found })
        }
    }
}

/// A text-format error with its 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{col}: {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub col: usize,
    /// What was wrong, usually "expected X, found Y".
    pub message: String,
}
