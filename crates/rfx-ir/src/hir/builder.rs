//! The checked way to make HIR kernels.

use super::{Kernel, Loop, Node, Op, Output, ValueId, result_type};
use crate::error::TypeError;
use crate::ops::{BinaryOp, CmpOp, ReduceOp, ScanOp, UnaryOp};
use crate::{Array, DType, Scalar, Shape, TensorType};

/// Why a [`Builder`] call was rejected. Nothing is added to the kernel when a call fails.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The node breaks its op's typing rule.
    #[error("{op}: {source}")]
    Type {
        /// The op's text name.
        op: &'static str,
        /// The rule that was broken.
        #[source]
        source: TypeError,
    },
    /// An operand id that this builder did not hand out.
    #[error("unknown value {0}")]
    UnknownValue(ValueId),
    /// Two inputs with one name.
    #[error("duplicate input name `{0}`")]
    DuplicateInput(String),
    /// Two outputs with one name.
    #[error("duplicate output name `{0}`")]
    DuplicateOutput(String),
    /// A name that is not an identifier (`[A-Za-z_][A-Za-z0-9_]*`).
    #[error("`{0}` is not a valid name (letters, digits and `_`, not starting with a digit)")]
    InvalidName(String),
    /// `finish` on a builder with no outputs.
    #[error("the kernel has no outputs")]
    NoOutputs,
}

/// Builds a HIR kernel node by node, type-checking each node as it is added.
///
/// Each call returns the id of a new value; values already built are never changed.
///
/// ```
/// use rfx_ir::hir::Builder;
/// use rfx_ir::{DType, TensorType, UnaryOp, BinaryOp};
///
/// let mut b = Builder::new("fused_chain");
/// let x = b.input("x", TensorType::new(DType::F32, [3]))?;
/// let y = b.input("y", TensorType::new(DType::F32, [3]))?;
/// let two = b.scalar(rfx_ir::Scalar::F32(2.0));
/// let x2 = b.binary(BinaryOp::Mul, x, two)?;
/// let s = b.unary(UnaryOp::Sin, x2)?;
/// let out = b.binary(BinaryOp::Add, s, y)?;
/// b.output("out", out)?;
/// let kernel = b.finish()?;
/// assert_eq!(kernel.op_count(), 4);
/// # Ok::<(), rfx_ir::hir::BuildError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    name: String,
    nodes: Vec<Node>,
    outputs: Vec<Output>,
}

impl Builder {
    /// A builder for a kernel called `name`.
    pub fn new(name: impl Into<String>) -> Builder {
        Builder {
            name: name.into(),
            nodes: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// The type of a value built so far.
    pub fn value_type(&self, value: ValueId) -> Result<&TensorType, BuildError> {
        self.nodes
            .get(value.index())
            .map(|n| &n.ty)
            .ok_or(BuildError::UnknownValue(value))
    }

    /// Adds a named input of type `ty`.
    pub fn input(&mut self, name: impl Into<String>, ty: TensorType) -> Result<ValueId, BuildError> {
        let name = name.into();
        check_name(&name)?;
        if self
            .nodes
            .iter()
            .any(|n| matches!(&n.op, Op::Input { name: other } if *other == name))
        {
            return Err(BuildError::DuplicateInput(name));
        }
        if !crate::shape::fits_in_memory(&ty) {
            return Err(BuildError::Type {
                op: "input",
                source: TypeError::TooLarge { ty: ty.to_string() },
            });
        }
        Ok(self.push(Op::Input { name }, Vec::new(), ty))
    }

    /// A constant of shape `[]`.
    pub fn scalar(&mut self, value: Scalar) -> ValueId {
        self.push(Op::Const(value), Vec::new(), TensorType::scalar(value.dtype()))
    }

    /// A constant splatted to `shape`.
    pub fn constant(&mut self, value: Scalar, shape: impl Into<Shape>) -> ValueId {
        self.push(
            Op::Const(value),
            Vec::new(),
            TensorType::new(value.dtype(), shape),
        )
    }

    /// A constant tensor holding `value`'s elements (its dtype and shape).
    pub fn literal(&mut self, value: &Array) -> ValueId {
        let values = (0..value.shape().numel()).filter_map(|i| value.get(i)).collect();
        self.push(
            Op::Literal(values),
            Vec::new(),
            TensorType::new(value.dtype(), value.shape().clone()),
        )
    }

    /// A constant tensor of type `ty` holding `values` in row-major order (one per element, each
    /// of `ty`'s dtype).
    pub fn literal_values(&mut self, ty: TensorType, values: Vec<Scalar>) -> Result<ValueId, BuildError> {
        self.op_with_target(Op::Literal(values), &[], Some(ty))
    }

    /// Adds `op(args)` declared with type `ty`, as when copying a node of another kernel: `ty`
    /// supplies what the operands cannot determine (the target of `cast`, `broadcast_to`,
    /// `reshape`, the type of a constant, `literal` or `iota`), and the typing rule must give
    /// exactly `ty`. An `input` is added with [`Builder::input`].
    pub fn copy(&mut self, op: &Op, args: &[ValueId], ty: &TensorType) -> Result<ValueId, BuildError> {
        if let Op::Input { name } = op {
            return self.input(name.clone(), ty.clone());
        }
        if let (Op::LoopOutput { index }, [of]) = (op, args) {
            let carry = self.loop_output(*of, *index)?;
            let found = self.value_type(carry)?;
            if found != ty {
                let inferred = found.to_string();
                self.nodes.pop();
                return Err(BuildError::Type {
                    op: op.name(),
                    source: TypeError::ResultType {
                        declared: ty.to_string(),
                        inferred,
                    },
                });
            }
            return Ok(carry);
        }
        let arg_types = args
            .iter()
            .map(|&a| self.value_type(a))
            .collect::<Result<Vec<_>, _>>()?;
        let type_error = |source| BuildError::Type {
            op: op.name(),
            source,
        };
        let inferred = result_type(op, &arg_types, Some(ty)).map_err(type_error)?;
        if &inferred != ty {
            return Err(type_error(TypeError::ResultType {
                declared: ty.to_string(),
                inferred: inferred.to_string(),
            }));
        }
        Ok(self.push(op.clone(), args.to_vec(), inferred))
    }

    /// Adds a bounded loop (see [`Loop`]) over `operands`, the initial carries then the
    /// invariants, and returns the final carries in order: carry 0 is the loop node itself,
    /// each other one a `loop_output` node. The body and test must already verify, the trip
    /// count fit an `i32` and the loops nest at most [`super::MAX_LOOP_DEPTH`] deep.
    pub fn loop_(&mut self, spec: Loop, operands: &[ValueId]) -> Result<Vec<ValueId>, BuildError> {
        if let Some(limit) = super::verify::loop_limit_error(&spec) {
            return Err(BuildError::Type {
                op: "loop",
                source: TypeError::Loop {
                    reason: limit.to_string(),
                },
            });
        }
        for kernel in std::iter::once(&spec.body).chain(&spec.cond) {
            if let Err(errors) = super::verify(kernel) {
                return Err(BuildError::Type {
                    op: "loop",
                    source: TypeError::Loop {
                        reason: format!("its kernel `{}` does not verify: {errors}", kernel.name()),
                    },
                });
            }
        }
        let carries = spec.carries;
        let first = self.op(Op::Loop(Box::new(spec)), operands)?;
        let mut finals = vec![first];
        for index in 1..carries {
            finals.push(self.loop_output(first, index)?);
        }
        Ok(finals)
    }

    /// Copies the nodes of `kernel` into this builder with its inputs bound to `args` (one per
    /// input, in order, of the input's type) and returns the values of its outputs in order. The
    /// kernel's input names are not added; its nodes are type-checked again as they are copied.
    pub fn inline(&mut self, kernel: &Kernel, args: &[ValueId]) -> Result<Vec<ValueId>, BuildError> {
        let inputs: Vec<&TensorType> = kernel.inputs().map(|(_, _, ty)| ty).collect();
        if inputs.len() != args.len() {
            return Err(BuildError::Type {
                op: "inline",
                source: TypeError::Arity {
                    op: "inline",
                    expected: inputs.len(),
                    found: args.len(),
                },
            });
        }
        for (&arg, want) in args.iter().zip(&inputs) {
            let found = self.value_type(arg)?;
            if found != *want {
                return Err(BuildError::Type {
                    op: "inline",
                    source: TypeError::ResultType {
                        declared: want.to_string(),
                        inferred: found.to_string(),
                    },
                });
            }
        }
        let start = self.nodes.len();
        let mut map: Vec<ValueId> = Vec::with_capacity(kernel.nodes().len());
        let mut next_input = args.iter();
        for node in kernel.nodes() {
            let value = match &node.op {
                Op::Input { .. } => next_input
                    .next()
                    .copied()
                    .ok_or(BuildError::UnknownValue(ValueId::new(map.len()))),
                op => node
                    .args
                    .iter()
                    .map(|a| map.get(a.index()).copied().ok_or(BuildError::UnknownValue(*a)))
                    .collect::<Result<Vec<_>, _>>()
                    .and_then(|operands| self.copy(op, &operands, &node.ty)),
            };
            match value {
                Ok(value) => map.push(value),
                Err(e) => {
                    // Nothing is added when a call fails.
                    self.nodes.truncate(start);
                    return Err(e);
                }
            }
        }
        kernel
            .outputs()
            .iter()
            .map(|o| {
                map.get(o.value.index())
                    .copied()
                    .ok_or(BuildError::UnknownValue(o.value))
            })
            .collect()
    }

    /// Adds a node reading final carry `index` of the loop node `of`.
    pub fn loop_output(&mut self, of: ValueId, index: usize) -> Result<ValueId, BuildError> {
        let node = self.nodes.get(of.index()).ok_or(BuildError::UnknownValue(of))?;
        let ty = match &node.op {
            Op::Loop(spec) => spec.carry_type(index).cloned().ok_or_else(|| BuildError::Type {
                op: "loop_output",
                source: TypeError::Loop {
                    reason: format!("{of} has {} carries, not {}", spec.carries, index + 1),
                },
            })?,
            _ => {
                return Err(BuildError::Type {
                    op: "loop_output",
                    source: TypeError::Loop {
                        reason: format!("{of} is not a loop"),
                    },
                });
            }
        };
        Ok(self.push(Op::LoopOutput { index }, vec![of], ty))
    }

    /// Adds any node whose type follows from its operands (elementwise ops, `transpose` and
    /// reductions); `cast`, `broadcast_to`, `reshape`, `slice`, `pad` and `iota` have their own
    /// methods, which name the target.
    pub fn op(&mut self, op: Op, args: &[ValueId]) -> Result<ValueId, BuildError> {
        self.op_with_target(op, args, None)
    }

    /// An elementwise one-operand op.
    pub fn unary(&mut self, op: UnaryOp, x: ValueId) -> Result<ValueId, BuildError> {
        self.op(Op::Unary(op), &[x])
    }

    /// An elementwise two-operand op with broadcasting.
    pub fn binary(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.op(Op::Binary(op), &[a, b])
    }

    /// A comparison with broadcasting, giving bool.
    pub fn compare(&mut self, op: CmpOp, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.op(Op::Compare(op), &[a, b])
    }

    /// `select(cond, a, b)`.
    pub fn select(&mut self, cond: ValueId, a: ValueId, b: ValueId) -> Result<ValueId, BuildError> {
        self.op(Op::Select, &[cond, a, b])
    }

    /// `clamp(x, lo, hi)`.
    pub fn clamp(&mut self, x: ValueId, lo: ValueId, hi: ValueId) -> Result<ValueId, BuildError> {
        self.op(Op::Clamp, &[x, lo, hi])
    }

    /// Converts `x` to `dtype`.
    pub fn cast(&mut self, x: ValueId, dtype: DType) -> Result<ValueId, BuildError> {
        let shape = self.value_type(x)?.shape.clone();
        self.op_with_target(Op::Cast, &[x], Some(TensorType { dtype, shape }))
    }

    /// Broadcasts `x` to `shape`.
    pub fn broadcast_to(&mut self, x: ValueId, shape: impl Into<Shape>) -> Result<ValueId, BuildError> {
        let dtype = self.value_type(x)?.dtype;
        self.op_with_target(Op::BroadcastTo, &[x], Some(TensorType::new(dtype, shape)))
    }

    /// Reshapes `x` to `shape` (same element count).
    pub fn reshape(&mut self, x: ValueId, shape: impl Into<Shape>) -> Result<ValueId, BuildError> {
        let dtype = self.value_type(x)?.dtype;
        self.op_with_target(Op::Reshape, &[x], Some(TensorType::new(dtype, shape)))
    }

    /// The index along `axis` of every element of a `dtype` tensor of `shape` (NumPy's
    /// `indices(shape)[axis]`).
    pub fn iota(
        &mut self,
        dtype: DType,
        shape: impl Into<Shape>,
        axis: usize,
    ) -> Result<ValueId, BuildError> {
        self.op_with_target(Op::Iota { axis }, &[], Some(TensorType::new(dtype, shape)))
    }

    /// Permutes the axes of `x`: result axis `i` is axis `perm[i]` of `x`.
    pub fn transpose(&mut self, x: ValueId, perm: &[usize]) -> Result<ValueId, BuildError> {
        self.op(Op::Transpose { perm: perm.to_vec() }, &[x])
    }

    /// The window of `x` of extents `shape` whose first element is `x[starts]` (NumPy's
    /// `x[s0:s0+n0, ...]`).
    pub fn slice(
        &mut self,
        x: ValueId,
        starts: &[usize],
        shape: impl Into<Shape>,
    ) -> Result<ValueId, BuildError> {
        let dtype = self.value_type(x)?.dtype;
        self.op_with_target(
            Op::Slice {
                starts: starts.to_vec(),
            },
            &[x],
            Some(TensorType::new(dtype, shape)),
        )
    }

    /// `x` placed at `low` inside a zero tensor of `shape`.
    pub fn pad(&mut self, x: ValueId, low: &[usize], shape: impl Into<Shape>) -> Result<ValueId, BuildError> {
        let dtype = self.value_type(x)?.dtype;
        self.op_with_target(
            Op::Pad { low: low.to_vec() },
            &[x],
            Some(TensorType::new(dtype, shape)),
        )
    }

    /// `table` read along `axis` at `index` (NumPy's `take_along_axis(table, index, axis,
    /// mode="clip")`): `index` has `table`'s rank and extents off `axis`, and an `i32` or float
    /// dtype; the result has its shape and `table`'s dtype (see [`Op::Gather`]).
    pub fn gather(&mut self, table: ValueId, index: ValueId, axis: usize) -> Result<ValueId, BuildError> {
        self.op(Op::Gather { axis }, &[table, index])
    }

    /// `x` with row `index` along axis 0 replaced by `row` (JAX's `x.at[index].set(row)`):
    /// `row` has `x`'s dtype and the shape of one row, `index` is an `i32` scalar, clamped into
    /// the rows (see [`Op::SetRow`]).
    pub fn set_row(&mut self, x: ValueId, row: ValueId, index: ValueId) -> Result<ValueId, BuildError> {
        self.op(Op::SetRow, &[x, row, index])
    }

    /// Reduces `x` over `axes` (any order; stored sorted).
    pub fn reduce(
        &mut self,
        op: ReduceOp,
        x: ValueId,
        axes: &[usize],
        keepdims: bool,
    ) -> Result<ValueId, BuildError> {
        let mut axes = axes.to_vec();
        axes.sort_unstable();
        self.op(Op::Reduce { op, axes, keepdims }, &[x])
    }

    /// Reduces `x` over all its axes to a scalar.
    pub fn reduce_all(&mut self, op: ReduceOp, x: ValueId) -> Result<ValueId, BuildError> {
        let rank = self.value_type(x)?.shape.rank();
        self.reduce(op, x, &(0..rank).collect::<Vec<_>>(), false)
    }

    /// The running fold of `x` along `axis`, from the axis's last element with `reverse` (see
    /// [`Op::Scan`]). [`ScanOp::Linear`] takes two operands: use [`Builder::linrec`].
    pub fn scan(
        &mut self,
        op: ScanOp,
        x: ValueId,
        axis: usize,
        reverse: bool,
    ) -> Result<ValueId, BuildError> {
        self.op(Op::Scan { op, axis, reverse }, &[x])
    }

    /// The linear recurrence `y[i] = coef[i] * y[i-1] + x[i]` along `axis` (from the axis's
    /// last element with `reverse`; [`ScanOp::Linear`]); `coef` has `x`'s type.
    pub fn linrec(
        &mut self,
        x: ValueId,
        coef: ValueId,
        axis: usize,
        reverse: bool,
    ) -> Result<ValueId, BuildError> {
        let op = Op::Scan {
            op: ScanOp::Linear,
            axis,
            reverse,
        };
        self.op(op, &[x, coef])
    }

    /// Marks `value` as the output called `name`. A value may be returned under several names.
    pub fn output(&mut self, name: impl Into<String>, value: ValueId) -> Result<(), BuildError> {
        let name = name.into();
        check_name(&name)?;
        self.value_type(value)?;
        if self.outputs.iter().any(|o| o.name == name) {
            return Err(BuildError::DuplicateOutput(name));
        }
        self.outputs.push(Output { name, value });
        Ok(())
    }

    /// Finishes the kernel. Fails only when no output was declared: every node was checked
    /// when it was added.
    pub fn finish(self) -> Result<Kernel, BuildError> {
        if self.outputs.is_empty() {
            return Err(BuildError::NoOutputs);
        }
        Ok(Kernel::from_parts(self.name, self.nodes, self.outputs))
    }

    fn op_with_target(
        &mut self,
        op: Op,
        args: &[ValueId],
        target: Option<TensorType>,
    ) -> Result<ValueId, BuildError> {
        let arg_types = args
            .iter()
            .map(|&a| self.value_type(a))
            .collect::<Result<Vec<_>, _>>()?;
        let ty = result_type(&op, &arg_types, target.as_ref()).map_err(|source| BuildError::Type {
            op: op.name(),
            source,
        })?;
        Ok(self.push(op, args.to_vec(), ty))
    }

    fn push(&mut self, op: Op, args: Vec<ValueId>, ty: TensorType) -> ValueId {
        self.nodes.push(Node { op, args, ty });
        ValueId::new(self.nodes.len() - 1)
    }
}

/// `true` for names of the text formats: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_name(name: &str) -> Result<(), BuildError> {
    if is_identifier(name) {
        Ok(())
    } else {
        Err(BuildError::InvalidName(name.to_string()))
    }
}
