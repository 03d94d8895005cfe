//! The e-graph language: HIR ops as e-nodes, and the analysis that types every e-class and
//! folds constants in the value's own dtype.

use std::cmp::Ordering;
use std::fmt;

use egg::{Analysis, DidMerge, EGraph, Id, Language};
use rfx_ir::hir::{Op, result_type};
use rfx_ir::{BinaryOp, CmpOp, DType, ReduceOp, Scalar, ScanOp, Shape, TensorType, UnaryOp, semantics};

/// A scalar ordered by dtype, then bits (egg needs `Ord` on e-nodes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct OrdScalar(pub(crate) Scalar);

impl PartialOrd for OrdScalar {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrdScalar {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.0.dtype(), self.0.to_bits()).cmp(&(other.0.dtype(), other.0.to_bits()))
    }
}

/// What an e-node computes, without its operands.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Head {
    /// Kernel input number `i` (inputs keep their order).
    Input(u32),
    /// A splat constant of the given shape.
    Const(OrdScalar, Shape),
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CmpOp),
    Select,
    Clamp,
    Cast(DType),
    BroadcastTo(Shape),
    Reshape(Shape),
    /// A constant tensor: its values (row-major), dtype and shape.
    Literal(Vec<OrdScalar>, DType, Shape),
    /// The index along an axis of a tensor of the given dtype and shape.
    Iota(usize, DType, Shape),
    Transpose(Vec<usize>),
    /// A window at the given starts, of the given shape.
    Slice(Vec<usize>, Shape),
    /// The operand placed at the given offsets in zeros of the given shape.
    Pad(Vec<usize>, Shape),
    /// A table lookup along the given axis (operands: table, index).
    Gather(usize),
    /// One row along axis 0 replaced (operands: x, row, index).
    SetRow,
    Reduce(ReduceOp, Vec<usize>, bool),
    /// A running fold along an axis, from its end when the flag is set.
    Scan(ScanOp, usize, bool),
}

impl Head {
    fn name(&self) -> &'static str {
        match self {
            Head::Input(_) => "input",
            Head::Const(..) => "const",
            Head::Unary(op) => op.name(),
            Head::Binary(op) => op.name(),
            Head::Compare(op) => op.name(),
            Head::Select => "select",
            Head::Clamp => "clamp",
            Head::Cast(_) => "cast",
            Head::BroadcastTo(_) => "broadcast_to",
            Head::Reshape(_) => "reshape",
            Head::Iota(..) => "iota",
            Head::Literal(..) => "literal",
            Head::Transpose(_) => "transpose",
            Head::Slice(..) => "slice",
            Head::Pad(..) => "pad",
            Head::Gather(_) => "gather",
            Head::SetRow => "set_row",
            Head::Reduce(op, ..) => op.name(),
            Head::Scan(op, ..) => op.name(),
        }
    }
}

/// An e-node: a head and its operand e-classes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Node {
    pub(crate) head: Head,
    pub(crate) children: Vec<Id>,
}

impl Node {
    pub(crate) fn new(head: Head, children: Vec<Id>) -> Node {
        Node { head, children }
    }

    /// The HIR op for this node; `target` is the e-class type (for the ops whose target is the
    /// node type).
    pub(crate) fn to_op(&self) -> Op {
        match &self.head {
            // Input names are restored by the caller, which knows them.
            Head::Input(_) => Op::Input { name: String::new() },
            Head::Const(value, _) => Op::Const(value.0),
            Head::Unary(op) => Op::Unary(*op),
            Head::Binary(op) => Op::Binary(*op),
            Head::Compare(op) => Op::Compare(*op),
            Head::Select => Op::Select,
            Head::Clamp => Op::Clamp,
            Head::Cast(_) => Op::Cast,
            Head::BroadcastTo(_) => Op::BroadcastTo,
            Head::Reshape(_) => Op::Reshape,
            Head::Iota(axis, ..) => Op::Iota { axis: *axis },
            Head::Literal(values, ..) => Op::Literal(values.iter().map(|v| v.0).collect()),
            Head::Transpose(perm) => Op::Transpose { perm: perm.clone() },
            Head::Slice(starts, _) => Op::Slice {
                starts: starts.clone(),
            },
            Head::Pad(low, _) => Op::Pad { low: low.clone() },
            Head::Gather(axis) => Op::Gather { axis: *axis },
            Head::SetRow => Op::SetRow,
            Head::Reduce(op, axes, keepdims) => Op::Reduce {
                op: *op,
                axes: axes.clone(),
                keepdims: *keepdims,
            },
            Head::Scan(op, axis, reverse) => Op::Scan {
                op: *op,
                axis: *axis,
                reverse: *reverse,
            },
        }
    }
}

impl Language for Node {
    type Discriminant = Head;

    fn discriminant(&self) -> Head {
        self.head.clone()
    }

    fn matches(&self, other: &Self) -> bool {
        self.head == other.head && self.children.len() == other.children.len()
    }

    fn children(&self) -> &[Id] {
        &self.children
    }

    fn children_mut(&mut self) -> &mut [Id] {
        &mut self.children
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.head.name())
    }
}

/// Parses the payload-free heads, so rules can be written as egg patterns (`(neg (neg ?x))`).
impl egg::FromOp for Node {
    type Error = String;

    fn from_op(op: &str, children: Vec<Id>) -> Result<Self, Self::Error> {
        let head = if let Some(u) = UnaryOp::from_name(op) {
            Head::Unary(u)
        } else if let Some(b) = BinaryOp::from_name(op) {
            Head::Binary(b)
        } else if let Some(c) = CmpOp::from_name(op) {
            Head::Compare(c)
        } else {
            match op {
                "select" => Head::Select,
                "clamp" => Head::Clamp,
                _ => return Err(format!("`{op}` cannot appear in a rule pattern")),
            }
        };
        Ok(Node { head, children })
    }
}

/// Per-e-class facts: the type every member computes, and the splat constant it equals, when
/// known.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ClassData {
    /// `None` only for an ill-typed node, which the optimiser never adds.
    pub(crate) ty: Option<TensorType>,
    pub(crate) constant: Option<Scalar>,
}

/// The e-graph analysis: types from [`result_type`] and constant folding with
/// [`rfx_ir::semantics`], so a folded `f32` constant has exactly the bits the `f32` interpreter
/// computes.
#[derive(Debug, Default)]
pub(crate) struct RfxAnalysis {
    pub(crate) input_types: Vec<TensorType>,
    /// Largest reduction folded at compile time (elements), to bound folding cost.
    pub(crate) max_fold_elems: usize,
}

pub(crate) type RfxGraph = EGraph<Node, RfxAnalysis>;

impl Analysis<Node> for RfxAnalysis {
    type Data = ClassData;

    fn make(egraph: &mut RfxGraph, enode: &Node, _id: Id) -> ClassData {
        let child_data: Vec<&ClassData> = enode.children.iter().map(|&c| &egraph[c].data).collect();
        let child_types: Option<Vec<&TensorType>> = child_data.iter().map(|d| d.ty.as_ref()).collect();
        let ty = child_types.and_then(|arg_types| {
            let target = match &enode.head {
                Head::Input(i) => egraph.analysis.input_types.get(*i as usize).cloned(),
                Head::Const(value, shape) => Some(TensorType::new(value.0.dtype(), shape.clone())),
                Head::Iota(_, dtype, shape) | Head::Literal(_, dtype, shape) => {
                    Some(TensorType::new(*dtype, shape.clone()))
                }
                Head::Cast(dtype) => arg_types.first().map(|t| TensorType {
                    dtype: *dtype,
                    shape: t.shape.clone(),
                }),
                Head::BroadcastTo(shape)
                | Head::Reshape(shape)
                | Head::Slice(_, shape)
                | Head::Pad(_, shape) => arg_types.first().map(|t| TensorType {
                    dtype: t.dtype,
                    shape: shape.clone(),
                }),
                _ => None,
            };
            result_type(&enode.to_op(), &arg_types, target.as_ref()).ok()
        });
        let constants: Option<Vec<Scalar>> = child_data.iter().map(|d| d.constant).collect();
        let constant = match (&ty, constants) {
            (Some(ty), Some(args)) => fold(
                &enode.head,
                &args,
                ty,
                &child_data,
                egraph.analysis.max_fold_elems,
            ),
            _ => None,
        };
        ClassData { ty, constant }
    }

    fn merge(&mut self, a: &mut ClassData, b: ClassData) -> DidMerge {
        let mut changed_a = false;
        if a.ty.is_none() && b.ty.is_some() {
            a.ty = b.ty.clone();
            changed_a = true;
        }
        if a.constant.is_none() && b.constant.is_some() {
            a.constant = b.constant;
            changed_a = true;
        }
        let b_differs = a.constant != b.constant || a.ty != b.ty;
        DidMerge(changed_a, b_differs)
    }

    fn modify(egraph: &mut RfxGraph, id: Id) {
        let data = &egraph[id].data;
        if let (Some(value), Some(ty)) = (data.constant, data.ty.clone()) {
            let folded = egraph.add(Node::new(Head::Const(OrdScalar(value), ty.shape), Vec::new()));
            egraph.union(id, folded);
        }
    }
}

/// Folds a node whose operands are all splat constants. `None` when the op does not fold (an
/// input, an unsupported dtype, or a reduction too large to fold cheaply).
fn fold(
    head: &Head,
    args: &[Scalar],
    ty: &TensorType,
    child_data: &[&ClassData],
    max_elems: usize,
) -> Option<Scalar> {
    match head {
        Head::Input(_) => None,
        Head::Const(value, _) => Some(value.0),
        // An iota along an axis of extent 1 is 0 everywhere.
        Head::Iota(axis, dtype, shape) => match shape.dims().get(*axis) {
            Some(1) => semantics::index_value(0, *dtype),
            _ => None,
        },
        // A literal whose values all have the same bits is that splat.
        Head::Literal(values, ..) => match values.split_first() {
            Some((first, rest)) if rest.iter().all(|v| v == first) => Some(first.0),
            _ => None,
        },
        // Permuting a splat, taking a window of it, or looking up anything in it, gives the
        // same splat.
        Head::Transpose(_) | Head::Slice(..) | Head::Gather(_) => args.first().copied(),
        // A row of a splat's bits put into that splat leaves it.
        Head::SetRow => {
            let (x, row) = (*args.first()?, *args.get(1)?);
            (x.to_bits() == row.to_bits()).then_some(x)
        }
        // Zeros around a splat of (positive) zero, or no zeros at all, give the same splat.
        Head::Pad(_, shape) => {
            let x = *args.first()?;
            let same = child_data.first()?.ty.as_ref()?.shape == *shape;
            (same || x.to_bits() == Scalar::zero(ty.dtype).to_bits()).then_some(x)
        }
        Head::Unary(op) => semantics::unary(*op, *args.first()?),
        Head::Binary(op) => semantics::binary(*op, *args.first()?, *args.get(1)?),
        Head::Compare(op) => semantics::compare(*op, *args.first()?, *args.get(1)?).map(Scalar::Bool),
        Head::Select => match args.first()? {
            Scalar::Bool(c) => Some(semantics::select(*c, *args.get(1)?, *args.get(2)?)),
            _ => None,
        },
        Head::Clamp => semantics::clamp(*args.first()?, *args.get(1)?, *args.get(2)?),
        Head::Cast(dtype) => Some(semantics::cast(*args.first()?, *dtype)),
        Head::BroadcastTo(_) | Head::Reshape(_) => args.first().copied(),
        Head::Reduce(op, axes, _) => {
            let in_shape = &child_data.first()?.ty.as_ref()?.shape;
            // Saturating: a shape's element count may exceed `usize` (the fold then declines).
            let count = axes
                .iter()
                .filter_map(|&a| in_shape.dims().get(a))
                .fold(1usize, |n, &d| n.saturating_mul(d));
            if count > max_elems {
                return None;
            }
            // The interpreter reduces sequentially; folding does the same, so the bits agree.
            let x = *args.first()?;
            let mut acc = semantics::reduce_identity(*op, ty.dtype)?;
            for _ in 0..count {
                acc = semantics::reduce_combine(*op, acc, x)?;
            }
            semantics::reduce_finish(*op, acc, count)
        }
        // A running fold of a splat is that splat when every step leaves the value alone:
        // along an axis of one element (the identity's first step is exact), for a running
        // maximum or minimum (`max(c, c)` is `c`, bit for bit), a running sum of zeros (`-0 +
        // z` and `z + z` are `z` for a zero `z` of either sign) and a running product of ones.
        // A linear recurrence of splats along an axis of one element is its first step.
        Head::Scan(ScanOp::Linear, axis, _) => {
            let (&x, &coef) = (args.first()?, args.get(1)?);
            let extent = ty.shape.dims().get(*axis).copied()?;
            let identity = semantics::reduce_identity(ReduceOp::Sum, x.dtype())?;
            (extent <= 1).then(|| semantics::scan_step(ScanOp::Linear, identity, x, Some(coef)))?
        }
        Head::Scan(op, axis, _) => {
            let x = *args.first()?;
            let extent = ty.shape.dims().get(*axis).copied()?;
            let zero = matches!(x, Scalar::F32(v) if v == 0.0)
                || matches!(x, Scalar::F64(v) if v == 0.0)
                || x == Scalar::I32(0);
            let one = x == Scalar::from_f64(x.dtype(), 1.0);
            let steady = match op {
                ScanOp::Max | ScanOp::Min => true,
                ScanOp::Sum => zero,
                ScanOp::Prod => one,
                ScanOp::Linear => false,
            };
            (extent <= 1 || steady).then_some(x)
        }
    }
}
