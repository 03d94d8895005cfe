//! [`Tensor`], the handle every traced operation takes and returns, the right-hand [`Operand`]
//! of binary operations, and the core that records one HIR node into the active trace.

use rfx_ir::hir::{BuildError, Builder, ValueId};
use rfx_ir::{BinaryOp, CmpOp, DType, Shape, TensorType, UnaryOp};

use super::TraceError;
use super::state::{POISON, literal_scalar, record_error, resolve, type_of, with_trace};

/// A traced tensor: a cheap `Copy` handle to a value of the trace being recorded.
///
/// Arithmetic operators (`+ - * /`, unary `-`, `&`, `|`, `!` on bool tensors) and the methods
/// below record HIR ops. Rust scalars combine with tensors on either side (`x * 2.0`, `2.0 * x`,
/// `x.max(0.0)`) and take the tensor's dtype (a *weak* literal, like JAX's); shapes broadcast as
/// in NumPy. (A scalar on the left is `f64` or `i32`, so that `2.0 * x` needs no annotation;
/// on the right `f32` works too.)
///
/// A tensor is valid only inside the trace that made it: don't keep it after the traced function
/// returns.
#[derive(Clone, Copy, Debug)]
pub struct Tensor {
    pub(super) trace: u32,
    pub(super) value: u32,
}

/// A tensor or a Rust scalar: the right-hand side of a binary operation.
#[derive(Clone, Copy, Debug)]
pub enum Operand {
    /// A traced tensor.
    Tensor(Tensor),
    /// A float literal; takes the other operand's dtype.
    Float(f64),
    /// An integer literal; takes the other operand's dtype.
    Int(i64),
    /// A boolean literal.
    Bool(bool),
}

impl From<Tensor> for Operand {
    fn from(t: Tensor) -> Operand {
        Operand::Tensor(t)
    }
}
impl From<f64> for Operand {
    fn from(v: f64) -> Operand {
        Operand::Float(v)
    }
}
impl From<f32> for Operand {
    fn from(v: f32) -> Operand {
        Operand::Float(f64::from(v))
    }
}
impl From<i32> for Operand {
    fn from(v: i32) -> Operand {
        Operand::Int(i64::from(v))
    }
}
impl From<bool> for Operand {
    fn from(v: bool) -> Operand {
        Operand::Bool(v)
    }
}

/// The axes a reduction runs over: `usize`, `[usize; N]`, `&[usize]`, `Vec<usize>`, or
/// [`All`] for every axis.
pub trait Axes {
    /// The axes, given the operand's rank.
    fn axes(&self, rank: usize) -> Vec<usize>;
}

/// Every axis (a reduction to a scalar).
#[derive(Clone, Copy, Debug, Default)]
pub struct All;

impl Axes for All {
    fn axes(&self, rank: usize) -> Vec<usize> {
        (0..rank).collect()
    }
}
impl Axes for usize {
    fn axes(&self, _rank: usize) -> Vec<usize> {
        vec![*self]
    }
}
impl<const N: usize> Axes for [usize; N] {
    fn axes(&self, _rank: usize) -> Vec<usize> {
        self.to_vec()
    }
}
impl Axes for &[usize] {
    fn axes(&self, _rank: usize) -> Vec<usize> {
        self.to_vec()
    }
}
impl Axes for Vec<usize> {
    fn axes(&self, _rank: usize) -> Vec<usize> {
        self.clone()
    }
}

impl Tensor {
    pub(super) fn poisoned(trace: u32) -> Tensor {
        Tensor { trace, value: POISON }
    }

    /// The handle of an existing value of the innermost trace.
    pub(super) fn from_value(trace: u32, value: ValueId) -> Tensor {
        Tensor {
            trace,
            value: u32::try_from(value.index()).unwrap_or(POISON),
        }
    }

    /// Records a node built by `build` from `operands` (tensors, then literals converted to the
    /// dtype of the first tensor operand).
    pub(super) fn record(
        op: &'static str,
        operands: &[Operand],
        build: impl FnOnce(&mut Builder, &[ValueId]) -> Result<ValueId, BuildError>,
    ) -> Tensor {
        let trace_of = operands.iter().find_map(|o| match o {
            Operand::Tensor(t) => Some(t.trace),
            _ => None,
        });
        with_trace(|state| {
            let tensors: Vec<Tensor> = operands
                .iter()
                .filter_map(|o| match o {
                    Operand::Tensor(t) => Some(*t),
                    _ => None,
                })
                .collect();
            let Some(tensor_ids) = resolve(state, op, &tensors) else {
                return Tensor::poisoned(state.id);
            };
            // Literals take the dtype of the first tensor operand (of the data operands for
            // `select`, whose condition is bool).
            let is_select = op == "select";
            let mut tensor_id = vec![None; operands.len()];
            let mut next_tensor = tensor_ids.iter();
            for (slot, operand) in tensor_id.iter_mut().zip(operands) {
                if matches!(operand, Operand::Tensor(_)) {
                    *slot = next_tensor.next().copied();
                }
            }
            let dtype = tensor_id
                .iter()
                .enumerate()
                .filter(|(position, _)| !(is_select && *position == 0))
                .find_map(|(_, id)| id.and_then(|id| state.builder.value_type(id).ok().map(|t| t.dtype)));
            let mut ids = Vec::with_capacity(operands.len());
            for (position, (operand, id)) in operands.iter().zip(&tensor_id).enumerate() {
                if let Some(id) = id {
                    ids.push(*id);
                    continue;
                }
                let target = if is_select && position == 0 {
                    DType::Bool
                } else {
                    dtype.unwrap_or(match operand {
                        Operand::Bool(_) => DType::Bool,
                        Operand::Int(_) => DType::I32,
                        _ => DType::F64,
                    })
                };
                match literal_scalar(op, *operand, target) {
                    Ok(scalar) => ids.push(state.builder.scalar(scalar)),
                    Err(error) => {
                        record_error(state, error);
                        return Tensor::poisoned(state.id);
                    }
                }
            }
            match build(&mut state.builder, &ids) {
                Ok(value) => Tensor::from_value(state.id, value),
                Err(source) => {
                    record_error(state, TraceError::Build { op, source });
                    Tensor::poisoned(state.id)
                }
            }
        })
        .unwrap_or_else(|| Tensor::poisoned(trace_of.unwrap_or(0)))
    }

    /// Applies the elementwise `op`.
    pub(crate) fn unary_by_op(self, op: UnaryOp) -> Tensor {
        self.unary_op(op)
    }

    pub(super) fn unary_op(self, op: UnaryOp) -> Tensor {
        Tensor::record(op.name(), &[self.into()], |b, ids| b.unary(op, ids[0]))
    }

    pub(super) fn binary_op(self, op: BinaryOp, rhs: impl Into<Operand>) -> Tensor {
        Tensor::record(op.name(), &[self.into(), rhs.into()], |b, ids| {
            b.binary(op, ids[0], ids[1])
        })
    }

    pub(super) fn binary_op_rev(self, op: BinaryOp, lhs: impl Into<Operand>) -> Tensor {
        Tensor::record(op.name(), &[lhs.into(), self.into()], |b, ids| {
            b.binary(op, ids[0], ids[1])
        })
    }

    pub(super) fn compare_op(self, op: CmpOp, rhs: impl Into<Operand>) -> Tensor {
        Tensor::record(op.name(), &[self.into(), rhs.into()], |b, ids| {
            b.compare(op, ids[0], ids[1])
        })
    }

    /// `self` unchanged when its last axis has `expected` elements; otherwise the trace fails
    /// with [`rfx_ir::TypeError::AxisExtent`] naming `op` (a Lie group element or tangent of
    /// the wrong size).
    pub(crate) fn expect_last_extent(self, op: &'static str, expected: usize) -> Tensor {
        Tensor::record(op, &[self.into()], move |b, ids| {
            let shape = b.value_type(ids[0])?.shape.clone();
            let axis = shape.rank().saturating_sub(1);
            if shape.dims().last() == Some(&expected) {
                return Ok(ids[0]);
            }
            Err(BuildError::Type {
                op,
                source: rfx_ir::TypeError::AxisExtent {
                    op,
                    shape,
                    axis,
                    expected,
                },
            })
        })
    }

    /// `true` for the result of a failed operation.
    pub(crate) fn is_poisoned(self) -> bool {
        self.value == POISON
    }

    /// The tensor's type, or `None` for a poisoned tensor (after a trace error) or outside its
    /// trace.
    pub fn ty(self) -> Option<TensorType> {
        if let Some(ty) = type_of(self) {
            return Some(ty);
        }
        with_trace(|state| {
            let ids = resolve(state, "ty", &[self])?;
            state.builder.value_type(ids[0]).ok().cloned()
        })
        .flatten()
    }

    /// The tensor's shape (`[]` when unknown, see [`Tensor::ty`]).
    pub fn shape(self) -> Shape {
        self.ty().map(|t| t.shape).unwrap_or_default()
    }

    /// The tensor's dtype (`f32` when unknown, see [`Tensor::ty`]).
    pub fn dtype(self) -> DType {
        self.ty().map_or(DType::F32, |t| t.dtype)
    }

    /// A tensor of this one's shape and dtype, every element `value`.
    pub fn full_like(self, value: impl Into<Operand>) -> Tensor {
        let value = value.into();
        Tensor::record("full_like", &[self.into(), value], |b, ids| {
            let shape = b.value_type(ids[0])?.shape.clone();
            b.broadcast_to(ids[1], shape)
        })
    }
}
