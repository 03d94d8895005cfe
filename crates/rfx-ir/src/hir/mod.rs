//! HIR: a kernel as traced.
//!
//! A [`Kernel`] is a list of [`Node`]s in definition order (an immutable DAG: a node's operands
//! are defined before it), whose `input` nodes are the kernel's named, typed inputs, plus one
//! or more named outputs. Every node carries its result [`TensorType`]; the verifier checks it
//! against the op's typing rule. Elementwise ops broadcast their operands NumPy style.
//!
//! Kernels are made with the [`Builder`] (which type-checks every node as it is added) or parsed
//! from text with [`parse`]; they print with `Display` in the same text format.

mod builder;
mod text;
mod verify;

use std::fmt;

pub use builder::{BuildError, Builder};
pub use text::{parse, parse_unverified};
pub use verify::{MAX_LOOP_DEPTH, VerifyError, VerifyErrorKind, VerifyErrors, VerifyLocation, verify};

use crate::error::TypeError;
use crate::ops::{BinaryOp, CmpOp, ReduceOp, ScanOp, UnaryOp};
use crate::shape::broadcast_shapes;
use crate::{DType, Scalar, Shape, TensorType};

/// The id of a HIR value: the index of the node that defines it. Prints as `%N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct ValueId(u32);

impl ValueId {
    /// The id of node number `index`.
    pub fn new(index: usize) -> ValueId {
        ValueId(u32::try_from(index).unwrap_or(u32::MAX))
    }

    /// The index of the defining node.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// A HIR operation. The operands are the node's `args`; the result type is the node's `ty`.
///
/// Typing rules (checked by [`result_type`]): elementwise ops broadcast their operands to a
/// common shape (NumPy rules) and require one dtype among the data operands; see each op
/// vocabulary ([`UnaryOp`], [`BinaryOp`], [`CmpOp`], [`ReduceOp`]) for accepted dtypes and
/// IEEE behaviour.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// A kernel input named `name`; no operands; the node's type is the input's type.
    Input {
        /// The input's name, unique within the kernel.
        name: String,
    },
    /// A constant: the scalar splatted to the node's shape. No operands; the literal's dtype
    /// must equal the node's dtype.
    Const(Scalar),
    /// A constant tensor: one value per element of the node's type, in row-major order, each of
    /// the node's dtype. No operands. Small matrices (a Kalman transition, a DH table) are
    /// literals of the kernel rather than inputs.
    Literal(Vec<Scalar>),
    /// An elementwise one-operand op.
    Unary(UnaryOp),
    /// An elementwise two-operand op; operands broadcast.
    Binary(BinaryOp),
    /// A comparison giving bool; operands broadcast.
    Compare(CmpOp),
    /// `select(cond, a, b)`: `a` where `cond` is true, else `b`. `cond` is bool, `a` and `b` share
    /// any dtype, all three broadcast. Never reads the unselected value's NaN.
    Select,
    /// `clamp(x, lo, hi) = min(max(x, lo), hi)` with NumPy's `clip` semantics (NaN in `x`
    /// propagates; `lo > hi` gives `hi`). Numeric; all three broadcast.
    Clamp,
    /// Converts the operand to the node's dtype, keeping the shape. Float → i32 truncates toward
    /// zero and saturates (NaN → 0); number → bool is `x != 0` (NaN → true); bool → number is 0/1;
    /// f64 → f32 rounds to nearest even.
    Cast,
    /// Broadcasts the operand to the node's shape (NumPy `broadcast_to`).
    BroadcastTo,
    /// Reinterprets the operand (row-major) as the node's shape; element counts must agree.
    Reshape,
    /// The index along `axis`: element `idx` is `idx[axis]` in the node's dtype (NumPy's
    /// `indices(shape)[axis]`). No operands; the node's type is the target. Numeric; the extent
    /// along `axis` must keep every index exact in the dtype (at most 2^24 for `f32`, 2^31 for
    /// `i32`, 2^53 for `f64`).
    Iota {
        /// The axis whose index each element holds; below the rank.
        axis: usize,
    },
    /// Permutes the operand's axes (NumPy's `transpose(x, perm)`): result axis `i` is operand
    /// axis `perm[i]`, so `out[idx] = x[j]` with `j[perm[i]] = idx[i]`. `perm` lists every axis
    /// of the operand once.
    Transpose {
        /// The operand axis each result axis comes from.
        perm: Vec<usize>,
    },
    /// A window of the operand (NumPy's `x[s0:s0+n0, s1:s1+n1, ...]`): `out[idx] =
    /// x[idx + starts]`, where the node's shape gives the window's extents. The operand and the
    /// node have one rank, and `starts[d] + out[d] <= x[d]` along every axis. Any dtype.
    Slice {
        /// The operand index of the window's first element, per axis.
        starts: Vec<usize>,
    },
    /// Places the operand inside a zero tensor of the node's shape (NumPy's `pad` with zeros
    /// before and after): `out[idx + low] = x[idx]`, every other element `0` (`false` for
    /// `bool`). The operand and the node have one rank, and `low[d] + x[d] <= out[d]` along every
    /// axis. The transpose of [`Op::Slice`]; a sum of pads concatenates.
    Pad {
        /// Zeros before the operand, per axis.
        low: Vec<usize>,
    },
    /// A table lookup (NumPy's `take_along_axis` with `mode="clip"`): operands `(table,
    /// index)` of one rank, equal in extent off `axis`; the node has the index's shape and the
    /// table's dtype, and `out[idx] = table[j]` where `j` is `idx` with `j[axis] =
    /// clamp(index[idx], 0, n - 1)` for the table's extent `n >= 1` along `axis`. The index is
    /// an `i32`, or a float truncated toward zero first (NaN reads element 0), so a lookup can
    /// never leave the table. The table may have any dtype.
    Gather {
        /// The table axis the index selects along.
        axis: usize,
    },
    /// One row replaced (JAX's `x.at[i].set(row)`): operands `(x, row, index)`, where `x` has
    /// rank at least 1 and at least one row along axis 0, `row` has `x`'s dtype and the shape of
    /// one row (`x`'s shape without axis 0), and `index` is an `i32` scalar. The node has `x`'s
    /// type: `out[j] = row` for `j = clamp(index, 0, n - 1)` along axis 0 of extent `n` (a
    /// run-time index is clamped as JAX clamps it), every other row `x`'s. No arithmetic: the
    /// bits are moved, so every dtype is exact.
    SetRow,
    /// Reduces the operand over `axes` (each `< rank`, no duplicates, any order).
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// The reduced axes, sorted ascending.
        axes: Vec<usize>,
        /// Keep reduced axes as size 1.
        keepdims: bool,
    },
    /// A running fold of the operand along `axis` (an inclusive scan: NumPy's `cumsum` and
    /// friends, JAX's `lax.cumsum(x, axis, reverse)`): element `i` along the axis is the fold
    /// of elements `0..=i` in order, or with `reverse` of elements `i..n` from the last one
    /// down, starting from the op's identity (see [`ScanOp`]). Numeric; the node has the
    /// operand's type. [`ScanOp::Linear`] takes a second operand, the coefficient, of the
    /// first one's type.
    Scan {
        /// The running fold.
        op: ScanOp,
        /// The scanned axis; below the rank.
        axis: usize,
        /// Fold from the last element of the axis toward the first.
        reverse: bool,
    },
    /// A bounded loop (see [`Loop`]): operands are the initial carries, then the invariants, in
    /// the order of the body's inputs and of their types exactly (no broadcasting). The node's
    /// value is the final carry 0; [`Op::LoopOutput`] reads the others.
    Loop(Box<Loop>),
    /// Final carry `index` of the [`Op::Loop`] node that is the one operand; the node's type is
    /// that carry's type.
    LoopOutput {
        /// The carry, below the loop's `carries`.
        index: usize,
    },
}

/// A bounded loop: `fori_loop` (a fixed trip count) or `while_loop` (a test and a maximum).
///
/// Semantics: `c = operands[..carries]`; repeat at most `trips` times: if `cond` exists and
/// `cond(c, invariants)` is false, stop; else `c = body(c, invariants)`. The loop's results are
/// the final `c`. Without `cond` the body runs exactly `trips` times (`trips` may be 0).
///
/// The body and the test are kernels of their own, whose inputs in definition order are the
/// carries then the invariants, with the operands' types. The body has one output per carry,
/// of that carry's type, in carry order; the test has one output, a `bool` scalar.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Loop {
    /// The number of carries: the first `carries` operands and body inputs; at least 1.
    pub carries: usize,
    /// The trip count, or with `cond` the most iterations.
    pub trips: u64,
    /// One iteration: carries and invariants in, the next carries out.
    pub body: Kernel,
    /// `while_loop`'s test, run before each iteration.
    pub cond: Option<Kernel>,
}

impl Loop {
    /// The operand types the loop takes: the body's input types in order.
    pub fn operand_types(&self) -> Vec<&TensorType> {
        self.body.inputs().map(|(_, _, ty)| ty).collect()
    }

    /// The type of final carry `index`, if the loop has it.
    pub fn carry_type(&self, index: usize) -> Option<&TensorType> {
        if index >= self.carries {
            return None;
        }
        self.body.inputs().nth(index).map(|(_, _, ty)| ty)
    }
}

impl Op {
    /// The op's name in the text format.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Input { .. } => "input",
            Op::Const(_) => "const",
            Op::Literal(_) => "literal",
            Op::Unary(op) => op.name(),
            Op::Binary(op) => op.name(),
            Op::Compare(op) => op.name(),
            Op::Select => "select",
            Op::Clamp => "clamp",
            Op::Cast => "cast",
            Op::BroadcastTo => "broadcast_to",
            Op::Reshape => "reshape",
            Op::Iota { .. } => "iota",
            Op::Transpose { .. } => "transpose",
            Op::Slice { .. } => "slice",
            Op::Pad { .. } => "pad",
            Op::Gather { .. } => "gather",
            Op::SetRow => "set_row",
            Op::Reduce { op, .. } => op.name(),
            Op::Scan { op, .. } => op.name(),
            Op::Loop(l) if l.cond.is_some() => "while_loop",
            Op::Loop(_) => "loop",
            Op::LoopOutput { .. } => "loop_output",
        }
    }

    /// The number of operands the op takes.
    pub fn arity(&self) -> usize {
        match self {
            Op::Input { .. } | Op::Const(_) | Op::Literal(_) | Op::Iota { .. } => 0,
            Op::Unary(_)
            | Op::Cast
            | Op::BroadcastTo
            | Op::Reshape
            | Op::Transpose { .. }
            | Op::Slice { .. }
            | Op::Pad { .. }
            | Op::Reduce { .. }
            | Op::LoopOutput { .. } => 1,
            Op::Scan { op, .. } => op.arity(),
            Op::Loop(l) => l.body.inputs().count(),
            Op::Binary(_) | Op::Compare(_) | Op::Gather { .. } => 2,
            Op::Select | Op::Clamp | Op::SetRow => 3,
        }
    }

    /// `true` for ops computed independently per element of the (broadcast) result.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Clamp | Op::Cast
        )
    }
}

/// One HIR node: an op applied to operands, with its result type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Node {
    /// The operation.
    pub op: Op,
    /// The operands, each defined by an earlier node.
    pub args: Vec<ValueId>,
    /// The result type.
    pub ty: TensorType,
}

/// A named kernel output.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Output {
    /// The output's name, unique among outputs.
    pub name: String,
    /// The value it returns.
    pub value: ValueId,
}

/// A HIR kernel: nodes in definition order and named outputs.
///
/// A `Kernel` is a value: passes build new kernels rather than editing one in place.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Kernel {
    name: String,
    nodes: Vec<Node>,
    outputs: Vec<Output>,
}

/// A loop carry updated by one row per iteration ([`Kernel::row_updates`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowUpdate {
    /// The carry's position among the body's inputs and outputs.
    pub carry: usize,
    /// The body's `set_row` node.
    pub node: ValueId,
    /// The row stored.
    pub row: ValueId,
    /// The row's index (clamped as `set_row` clamps it).
    pub index: ValueId,
    /// Whether the body also reads the carry other than through the `set_row` (the row it
    /// replaces, say): then the row may be stored only after every such read.
    pub read_elsewhere: bool,
}

impl Kernel {
    /// Assembles a kernel from parts without checking them; run [`verify`] before trusting it.
    /// The [`Builder`] is the checked way to make kernels.
    pub fn from_parts(name: impl Into<String>, nodes: Vec<Node>, outputs: Vec<Output>) -> Kernel {
        Kernel {
            name: name.into(),
            nodes,
            outputs,
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// All nodes, in definition order; node `i` defines value `%i`.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node defining `value`, if it exists.
    pub fn node(&self, value: ValueId) -> Option<&Node> {
        self.nodes.get(value.index())
    }

    /// The type of `value`, if it exists.
    pub fn value_type(&self, value: ValueId) -> Option<&TensorType> {
        self.node(value).map(|n| &n.ty)
    }

    /// The named outputs, in order.
    pub fn outputs(&self) -> &[Output] {
        &self.outputs
    }

    /// The inputs in order of definition: `(value, name, type)`.
    pub fn inputs(&self) -> impl Iterator<Item = (ValueId, &str, &TensorType)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, node)| match &node.op {
                Op::Input { name } => Some((ValueId::new(i), name.as_str(), &node.ty)),
                _ => None,
            })
    }

    /// The value ids in definition order.
    pub fn values(&self) -> impl Iterator<Item = ValueId> {
        (0..self.nodes.len()).map(ValueId::new)
    }

    /// Read as a loop body whose first `carries` inputs are the carries: each carry whose next
    /// value is `set_row(c_k, row, index)` and is read only as that output. Such a carry can stay
    /// in its buffer and have one row stored per iteration, after every other read of `c_k`
    /// ([`RowUpdate::read_elsewhere`]).
    pub fn row_updates(&self, carries: usize) -> Vec<RowUpdate> {
        let mut uses = vec![0usize; self.nodes.len()];
        let reads = self.nodes.iter().flat_map(|node| &node.args);
        for value in reads.chain(self.outputs.iter().map(|o| &o.value)) {
            if let Some(count) = uses.get_mut(value.index()) {
                *count += 1;
            }
        }
        let inputs: Vec<ValueId> = self.inputs().map(|(v, _, _)| v).collect();
        let mut updates = Vec::new();
        for (carry, output) in self.outputs.iter().enumerate().take(carries) {
            let Some(node) = self.node(output.value) else {
                continue;
            };
            if let (Op::SetRow, &[x, row, index]) = (&node.op, node.args.as_slice())
                && inputs.get(carry) == Some(&x)
                && uses.get(output.value.index()) == Some(&1)
            {
                updates.push(RowUpdate {
                    carry,
                    node: output.value,
                    row,
                    index,
                    read_elsewhere: uses.get(x.index()).is_none_or(|&n| n > 1),
                });
            }
        }
        updates
    }

    /// The number of nodes that are not inputs: the "op count" reports use.
    pub fn op_count(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| !matches!(n.op, Op::Input { .. }))
            .count()
    }
}

/// Computes the result type of `op` applied to operands of types `args`.
///
/// `target` supplies what the operands cannot determine: the type of an `input`, `const`,
/// `literal` or `iota`, the dtype of a `cast`, the shape of `broadcast_to` and `reshape`. It is ignored by other ops.
/// The builders and the verifiers both call this function, so they agree by construction.
pub fn result_type(
    op: &Op,
    args: &[&TensorType],
    target: Option<&TensorType>,
) -> Result<TensorType, TypeError> {
    let name = op.name();
    TypeError::check_arity(name, op.arity(), args.len())?;
    let need_target = || {
        target.cloned().ok_or(TypeError::Arity {
            op: name,
            expected: op.arity(),
            found: args.len(),
        })
    };
    match op {
        Op::Input { .. } => need_target(),
        Op::Const(value) => {
            let ty = need_target()?;
            if value.dtype() != ty.dtype {
                return Err(TypeError::ConstantDType {
                    literal: value.dtype(),
                    declared: ty.dtype,
                });
            }
            Ok(ty)
        }
        Op::Literal(values) => {
            let ty = need_target()?;
            crate::semantics::check_literal(values, &ty)?;
            Ok(ty)
        }
        Op::Unary(u) => {
            let dtype = args[0].dtype;
            if !u.accepts(dtype) {
                return Err(TypeError::UnsupportedDType { op: name, dtype });
            }
            Ok(args[0].clone())
        }
        Op::Binary(b) => {
            let dtype = same_dtype(name, args)?;
            if !b.accepts(dtype) {
                return Err(TypeError::UnsupportedDType { op: name, dtype });
            }
            Ok(TensorType {
                dtype,
                shape: broadcast_all(name, args)?,
            })
        }
        Op::Compare(c) => {
            let dtype = same_dtype(name, args)?;
            if !c.accepts(dtype) {
                return Err(TypeError::UnsupportedDType { op: name, dtype });
            }
            Ok(TensorType {
                dtype: DType::Bool,
                shape: broadcast_all(name, args)?,
            })
        }
        Op::Select => {
            if args[0].dtype != DType::Bool {
                return Err(TypeError::ConditionNotBool { found: args[0].dtype });
            }
            let dtype = same_dtype(name, &args[1..])?;
            Ok(TensorType {
                dtype,
                shape: broadcast_all(name, args)?,
            })
        }
        Op::Clamp => {
            let dtype = same_dtype(name, args)?;
            if !dtype.is_numeric() {
                return Err(TypeError::UnsupportedDType { op: name, dtype });
            }
            Ok(TensorType {
                dtype,
                shape: broadcast_all(name, args)?,
            })
        }
        Op::Cast => Ok(TensorType {
            dtype: need_target()?.dtype,
            shape: args[0].shape.clone(),
        }),
        Op::BroadcastTo => {
            let to = need_target()?.shape;
            if !args[0].shape.broadcasts_to(&to) {
                return Err(TypeError::BroadcastTo {
                    from: args[0].shape.clone(),
                    to,
                });
            }
            Ok(TensorType {
                dtype: args[0].dtype,
                shape: to,
            })
        }
        Op::Reshape => {
            let to = need_target()?.shape;
            let (from_numel, to_numel) = (args[0].shape.numel(), to.numel());
            if from_numel != to_numel {
                return Err(TypeError::Reshape {
                    from: args[0].shape.clone(),
                    from_numel,
                    to,
                    to_numel,
                });
            }
            Ok(TensorType {
                dtype: args[0].dtype,
                shape: to,
            })
        }
        Op::Iota { axis } => {
            let ty = need_target()?;
            if !ty.dtype.is_numeric() {
                return Err(TypeError::UnsupportedDType {
                    op: name,
                    dtype: ty.dtype,
                });
            }
            let rank = ty.shape.rank();
            let extent = *ty
                .shape
                .dims()
                .get(*axis)
                .ok_or(TypeError::AxisOutOfRange { axis: *axis, rank })?;
            if extent.saturating_sub(1) > crate::semantics::max_exact_index(ty.dtype) {
                return Err(TypeError::IotaExtent {
                    dtype: ty.dtype,
                    extent,
                });
            }
            Ok(ty)
        }
        Op::Transpose { perm } => {
            let dims = args[0].shape.dims();
            if !is_permutation(perm, dims.len()) {
                return Err(TypeError::Permutation {
                    perm: perm.clone(),
                    rank: dims.len(),
                });
            }
            Ok(TensorType {
                dtype: args[0].dtype,
                shape: Shape::new(perm.iter().map(|&a| dims[a]).collect::<Vec<_>>()),
            })
        }
        // A slice's node is a window of its operand; a pad's operand is a window of its node.
        Op::Slice { starts: at } | Op::Pad { low: at } => {
            let to = need_target()?.shape;
            let from = args[0].shape.clone();
            let is_slice = matches!(op, Op::Slice { .. });
            let (window, whole) = if is_slice { (&to, &from) } else { (&from, &to) };
            if !window_fits(window.dims(), at, whole.dims()) {
                let at = at.clone();
                return Err(if is_slice {
                    TypeError::Slice { from, starts: at, to }
                } else {
                    TypeError::Pad { from, low: at, to }
                });
            }
            Ok(TensorType {
                dtype: args[0].dtype,
                shape: to,
            })
        }
        Op::Gather { axis } => {
            let (table, index) = (&args[0], &args[1]);
            if !matches!(index.dtype, DType::I32 | DType::F32 | DType::F64) {
                return Err(TypeError::UnsupportedDType {
                    op: name,
                    dtype: index.dtype,
                });
            }
            let rank = table.shape.rank();
            let extent = *table
                .shape
                .dims()
                .get(*axis)
                .ok_or(TypeError::AxisOutOfRange { axis: *axis, rank })?;
            let (t, i) = (table.shape.dims(), index.shape.dims());
            let agree = t.len() == i.len()
                && t.iter()
                    .zip(i)
                    .enumerate()
                    .all(|(d, (a, b))| d == *axis || a == b);
            if !agree || extent == 0 {
                return Err(TypeError::Gather {
                    table: table.shape.clone(),
                    index: index.shape.clone(),
                    axis: *axis,
                });
            }
            Ok(TensorType {
                dtype: table.dtype,
                shape: index.shape.clone(),
            })
        }
        Op::SetRow => {
            let (x, row, index) = (&args[0], &args[1], &args[2]);
            if index.dtype != DType::I32 {
                return Err(TypeError::UnsupportedDType {
                    op: name,
                    dtype: index.dtype,
                });
            }
            if row.dtype != x.dtype {
                return Err(TypeError::DTypeMismatch {
                    op: name,
                    lhs: x.dtype,
                    rhs: row.dtype,
                });
            }
            let fits = x.shape.dims().split_first().is_some_and(|(&rows, rest)| {
                rows >= 1 && rest == row.shape.dims() && index.shape.rank() == 0
            });
            if !fits {
                return Err(TypeError::SetRow {
                    x: x.shape.clone(),
                    row: row.shape.clone(),
                    index: index.shape.clone(),
                });
            }
            Ok((*x).clone())
        }
        Op::Reduce {
            op: r,
            axes,
            keepdims,
        } => {
            let dtype = args[0].dtype;
            if !r.accepts(dtype) {
                return Err(TypeError::UnsupportedDType { op: name, dtype });
            }
            Ok(TensorType {
                dtype,
                shape: reduced_shape(&args[0].shape, axes, *keepdims)?,
            })
        }
        Op::Scan { op: s, axis, .. } => {
            let dtype = same_dtype(name, args)?;
            if let Some(other) = args.iter().find(|t| t.shape != args[0].shape) {
                return Err(TypeError::ShapeMismatch {
                    op: name,
                    lhs: args[0].shape.clone(),
                    rhs: other.shape.clone(),
                });
            }
            if !s.accepts(dtype) {
                return Err(TypeError::UnsupportedDType { op: name, dtype });
            }
            let rank = args[0].shape.rank();
            if *axis >= rank {
                return Err(TypeError::AxisOutOfRange { axis: *axis, rank });
            }
            Ok(args[0].clone())
        }
        Op::Loop(l) => loop_type(l, args),
        // The carry's type comes from the operand's loop, which only the kernel knows: the
        // verifier checks it against that loop.
        Op::LoopOutput { .. } => need_target(),
    }
}

/// Checks a loop against its operand types and gives the type of its value, final carry 0.
fn loop_type(l: &Loop, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let inputs = l.operand_types();
    if l.carries == 0 || l.carries > inputs.len() {
        return Err(TypeError::Loop {
            reason: format!("{} carries for a body of {} inputs", l.carries, inputs.len()),
        });
    }
    if let Some((i, (want, found))) = inputs.iter().zip(args).enumerate().find(|(_, (w, f))| w != f) {
        return Err(TypeError::Loop {
            reason: format!("operand {i} is {found}, the body's input {i} is {want}"),
        });
    }
    let outputs: Vec<&TensorType> = l
        .body
        .outputs()
        .iter()
        .filter_map(|o| l.body.value_type(o.value))
        .collect();
    if outputs.len() != l.carries || l.body.outputs().len() != l.carries {
        return Err(TypeError::Loop {
            reason: format!(
                "the body has {} outputs for {} carries",
                l.body.outputs().len(),
                l.carries
            ),
        });
    }
    if let Some((i, (out, carry))) = outputs.iter().zip(&inputs).enumerate().find(|(_, (o, c))| o != c) {
        return Err(TypeError::Loop {
            reason: format!("the body's output {i} is {out}, carry {i} is {carry}"),
        });
    }
    if let Some(cond) = &l.cond {
        let cond_inputs: Vec<&TensorType> = cond.inputs().map(|(_, _, ty)| ty).collect();
        let test = match cond.outputs() {
            [only] => cond.value_type(only.value),
            _ => None,
        };
        let scalar_bool = TensorType {
            dtype: DType::Bool,
            shape: Shape::scalar(),
        };
        if cond_inputs != inputs || test != Some(&scalar_bool) {
            return Err(TypeError::Loop {
                reason: "the test must take the body's inputs and give one bool scalar".to_string(),
            });
        }
    }
    Ok(inputs[0].clone())
}

/// `true` when a window of extents `window` placed at `at` lies inside `whole`: one rank for
/// all three, and `at[d] + window[d] <= whole[d]` along every axis.
pub fn window_fits(window: &[usize], at: &[usize], whole: &[usize]) -> bool {
    window.len() == whole.len()
        && at.len() == whole.len()
        && window
            .iter()
            .zip(at)
            .zip(whole)
            .all(|((&n, &a), &w)| a.checked_add(n).is_some_and(|end| end <= w))
}

/// `true` when `perm` lists each of `0..rank` exactly once.
pub fn is_permutation(perm: &[usize], rank: usize) -> bool {
    let mut seen = vec![false; rank];
    perm.len() == rank
        && perm
            .iter()
            .all(|&a| a < rank && !std::mem::replace(&mut seen[a], true))
}

/// The shape of reducing `shape` over `axes`: reduced axes removed, or kept as 1 with `keepdims`.
pub fn reduced_shape(shape: &Shape, axes: &[usize], keepdims: bool) -> Result<Shape, TypeError> {
    let rank = shape.rank();
    let mut seen = vec![false; rank];
    for &axis in axes {
        if axis >= rank {
            return Err(TypeError::AxisOutOfRange { axis, rank });
        }
        if std::mem::replace(&mut seen[axis], true) {
            return Err(TypeError::DuplicateAxis { axis });
        }
    }
    let dims = shape
        .dims()
        .iter()
        .zip(&seen)
        .filter_map(|(&d, &reduced)| match (reduced, keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect::<Vec<_>>();
    Ok(Shape::new(dims))
}

fn same_dtype(op: &'static str, args: &[&TensorType]) -> Result<DType, TypeError> {
    let first = args[0].dtype;
    match args.iter().find(|t| t.dtype != first) {
        Some(other) => Err(TypeError::DTypeMismatch {
            op,
            lhs: first,
            rhs: other.dtype,
        }),
        None => Ok(first),
    }
}

fn broadcast_all(op: &'static str, args: &[&TensorType]) -> Result<Shape, TypeError> {
    let mut shape = args[0].shape.clone();
    for arg in &args[1..] {
        shape = broadcast_shapes(&shape, &arg.shape).ok_or_else(|| TypeError::Broadcast {
            op,
            lhs: shape.clone(),
            rhs: arg.shape.clone(),
        })?;
    }
    Ok(shape)
}
