//! Tracing: [`Tensor`], the traced value type, and the thread-local trace it records into.
//!
//! While a function is traced, every [`Tensor`] operation adds one node to the trace's HIR
//! [`Builder`]. A trace lives on the thread that runs the function; tensors are `Copy` handles
//! (the trace's id and a value index). An operation that breaks a typing rule (mismatched
//! shapes, a float op on bool, ...) does not panic: the first such error is kept and returned by
//! the `jit` call as a [`TraceError`], and the operation returns a poisoned tensor that every
//! later operation passes through.

use std::cell::RefCell;
use std::ops::{self, Bound, RangeBounds};
use std::sync::atomic::{AtomicU32, Ordering};

use rfx_ir::hir::{BuildError, Builder, Kernel, ValueId};
use rfx_ir::{Array, BinaryOp, CmpOp, DType, ReduceOp, Scalar, ScanOp, Shape, TensorType, UnaryOp};

/// Why tracing a function failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// An operation broke a typing rule; `op` is the method or operator that was called.
    #[error("{}", build_message(op, source))]
    Build {
        /// The operation (`mul`, `sin`, `sum`, ...).
        op: &'static str,
        /// The rule that was broken.
        #[source]
        source: BuildError,
    },
    /// A tensor from another trace (or one kept after its trace ended) was used.
    #[error("`{op}`: a tensor from another trace was used (tensors must not escape the traced function)")]
    ForeignTensor {
        /// The operation.
        op: &'static str,
    },
    /// A scalar literal that cannot take the tensor's dtype (`x * 2.5` on a bool tensor).
    #[error("`{op}`: the literal {literal} cannot be used with a {dtype} tensor")]
    Literal {
        /// The operation.
        op: &'static str,
        /// The literal, as written.
        literal: String,
        /// The tensor's dtype.
        dtype: DType,
    },
    /// The traced function returned no tensor.
    #[error("the traced function returned no outputs")]
    NoOutputs,
}

/// The message of a failed build: the typing rule when one was broken (it names the op).
fn build_message(op: &str, source: &BuildError) -> String {
    match source {
        BuildError::Type { source, .. } => source.to_string(),
        other => format!("`{op}`: {other}"),
    }
}

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
    trace: u32,
    value: u32,
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

const POISON: u32 = u32::MAX;

struct TraceState {
    id: u32,
    builder: Builder,
    error: Option<TraceError>,
}

thread_local! {
    static TRACES: RefCell<Vec<TraceState>> = const { RefCell::new(Vec::new()) };
}

static NEXT_TRACE: AtomicU32 = AtomicU32::new(1);

/// Runs `body` on the active trace (the innermost one on this thread). Returns `None` without
/// an active trace.
fn with_trace<R>(body: impl FnOnce(&mut TraceState) -> R) -> Option<R> {
    TRACES.with(|traces| traces.borrow_mut().last_mut().map(body))
}

fn record_error(state: &mut TraceState, error: TraceError) {
    if state.error.is_none() {
        state.error = Some(error);
    }
}

/// Resolves tensor handles to value ids of `state`: `None` when any is poisoned (the error is
/// already recorded) or foreign (recorded now).
fn resolve(state: &mut TraceState, op: &'static str, tensors: &[Tensor]) -> Option<Vec<ValueId>> {
    let mut ids = Vec::with_capacity(tensors.len());
    for t in tensors {
        if t.trace != state.id {
            record_error(state, TraceError::ForeignTensor { op });
            return None;
        }
        if t.value == POISON {
            return None;
        }
        ids.push(ValueId::new(t.value as usize));
    }
    Some(ids)
}

fn literal_scalar(op: &'static str, operand: Operand, dtype: DType) -> Result<Scalar, TraceError> {
    let bad = |literal: String| TraceError::Literal { op, literal, dtype };
    match (operand, dtype) {
        (Operand::Bool(b), DType::Bool) => Ok(Scalar::Bool(b)),
        (Operand::Bool(b), _) => Err(bad(b.to_string())),
        (Operand::Float(v), DType::F32 | DType::F64) => Ok(Scalar::from_f64(dtype, v)),
        (Operand::Float(v), _) => Err(bad(v.to_string())),
        (Operand::Int(v), DType::I32) => i32::try_from(v).map(Scalar::I32).map_err(|_| bad(v.to_string())),
        (Operand::Int(v), DType::F32 | DType::F64) => Ok(Scalar::from_f64(dtype, v as f64)),
        (Operand::Int(v), DType::Bool) => Err(bad(v.to_string())),
        (Operand::Tensor(_), _) => Err(bad("tensor".to_string())),
    }
}

impl Tensor {
    fn poisoned(trace: u32) -> Tensor {
        Tensor { trace, value: POISON }
    }

    /// The handle of an existing value of the innermost trace.
    fn from_value(trace: u32, value: ValueId) -> Tensor {
        Tensor {
            trace,
            value: u32::try_from(value.index()).unwrap_or(POISON),
        }
    }

    /// Records a node built by `build` from `operands` (tensors, then literals converted to the
    /// dtype of the first tensor operand).
    fn record(
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

    fn unary_op(self, op: UnaryOp) -> Tensor {
        Tensor::record(op.name(), &[self.into()], |b, ids| b.unary(op, ids[0]))
    }

    fn binary_op(self, op: BinaryOp, rhs: impl Into<Operand>) -> Tensor {
        Tensor::record(op.name(), &[self.into(), rhs.into()], |b, ids| {
            b.binary(op, ids[0], ids[1])
        })
    }

    fn binary_op_rev(self, op: BinaryOp, lhs: impl Into<Operand>) -> Tensor {
        Tensor::record(op.name(), &[lhs.into(), self.into()], |b, ids| {
            b.binary(op, ids[0], ids[1])
        })
    }

    fn compare_op(self, op: CmpOp, rhs: impl Into<Operand>) -> Tensor {
        Tensor::record(op.name(), &[self.into(), rhs.into()], |b, ids| {
            b.compare(op, ids[0], ids[1])
        })
    }

    /// `true` for the result of a failed operation.
    pub(crate) fn is_poisoned(self) -> bool {
        self.value == POISON
    }

    /// The tensor's type, or `None` for a poisoned tensor (after a trace error) or outside its
    /// trace.
    pub fn ty(self) -> Option<TensorType> {
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

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $($(#[$doc])* pub fn $name(self) -> Tensor { self.unary_op(UnaryOp::$op) })*
        }
    };
}

unary_methods! {
    /// `|x|`.
    abs => Abs,
    /// `-1`, `0` or `1` by the sign (NumPy's `sign`).
    sign => Sign,
    /// Round toward −∞.
    floor => Floor,
    /// Round toward +∞.
    ceil => Ceil,
    /// Round half to even.
    round => Round,
    /// Square root.
    sqrt => Sqrt,
    /// `1 / sqrt(x)`.
    rsqrt => Rsqrt,
    /// `1 / x`.
    recip => Recip,
    /// `e^x`.
    exp => Exp,
    /// `2^x`.
    exp2 => Exp2,
    /// Natural logarithm.
    ln => Log,
    /// Natural logarithm (NumPy's name).
    log => Log,
    /// Base-2 logarithm.
    log2 => Log2,
    /// Sine.
    sin => Sin,
    /// Cosine.
    cos => Cos,
    /// Tangent.
    tan => Tan,
    /// Hyperbolic tangent.
    tanh => Tanh,
    /// Arc tangent.
    atan => Atan,
    /// Arc sine.
    asin => Asin,
    /// Arc cosine.
    acos => Acos,
    /// Logistic function.
    sigmoid => Sigmoid,
    /// Logical not (bool).
    logical_not => Not,
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $($(#[$doc])* pub fn $name(self, rhs: impl Into<Operand>) -> Tensor { self.binary_op(BinaryOp::$op, rhs) })*
        }
    };
}

binary_methods! {
    /// `self ^ rhs` (float).
    pow => Pow,
    /// `self ^ rhs` with a scalar or tensor exponent (float).
    powf => Pow,
    /// `atan2(self, rhs)`: the angle of the point `(rhs, self)`.
    atan2 => Atan2,
    /// Elementwise minimum, NaN-propagating (NumPy's `minimum`).
    min => Min,
    /// Elementwise maximum, NaN-propagating (NumPy's `maximum`).
    max => Max,
    /// Elementwise minimum (alias of [`Tensor::min`]).
    minimum => Min,
    /// Elementwise maximum (alias of [`Tensor::max`]).
    maximum => Max,
    /// Remainder with the dividend's sign (C `fmod`).
    fmod => Fmod,
    /// Logical and (bool).
    logical_and => And,
    /// Logical or (bool).
    logical_or => Or,
}

macro_rules! compare_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {
            $($(#[$doc])* pub fn $name(self, rhs: impl Into<Operand>) -> Tensor { self.compare_op(CmpOp::$op, rhs) })*
        }
    };
}

compare_methods! {
    /// `self < rhs` (bool).
    lt => Lt,
    /// `self <= rhs` (bool).
    le => Le,
    /// `self > rhs` (bool).
    gt => Gt,
    /// `self >= rhs` (bool).
    ge => Ge,
    /// `self == rhs` (bool).
    eq => Eq,
    /// `self != rhs` (bool).
    ne => Ne,
}

impl Tensor {
    /// `true` where an element is NaN (NumPy's `isnan`; `false` everywhere for `i32` and
    /// `bool`). Under fast math the optimiser may assume there are none.
    pub fn is_nan(self) -> Tensor {
        self.ne(self)
    }

    /// `true` where an element is `+inf` or `-inf` (NumPy's `isinf`; `false` everywhere for
    /// `i32` and `bool`).
    pub fn is_inf(self) -> Tensor {
        if self.dtype().is_float() {
            self.abs().eq(f64::INFINITY)
        } else {
            self.ne(self)
        }
    }

    /// `true` where an element is neither infinite nor NaN (NumPy's `isfinite`; `true`
    /// everywhere for `i32` and `bool`).
    pub fn is_finite(self) -> Tensor {
        if self.dtype().is_float() {
            self.abs().lt(f64::INFINITY)
        } else {
            self.eq(self)
        }
    }

    /// `clamp(self, lo, hi)` with NumPy's `clip` semantics.
    pub fn clamp(self, lo: impl Into<Operand>, hi: impl Into<Operand>) -> Tensor {
        Tensor::record("clamp", &[self.into(), lo.into(), hi.into()], |b, ids| {
            b.clamp(ids[0], ids[1], ids[2])
        })
    }

    /// `self ? a : b` elementwise; `self` is the bool condition.
    pub fn select(self, a: impl Into<Operand>, b: impl Into<Operand>) -> Tensor {
        Tensor::record("select", &[self.into(), a.into(), b.into()], |builder, ids| {
            builder.select(ids[0], ids[1], ids[2])
        })
    }

    /// Converts to `dtype`.
    pub fn cast(self, dtype: DType) -> Tensor {
        Tensor::record("cast", &[self.into()], |b, ids| b.cast(ids[0], dtype))
    }

    /// Reinterprets as `shape` (same element count).
    pub fn reshape(self, shape: impl Into<Shape>) -> Tensor {
        let shape = shape.into();
        Tensor::record("reshape", &[self.into()], |b, ids| b.reshape(ids[0], shape))
    }

    /// Permutes the axes: result axis `i` is axis `perm[i]` of `self` (NumPy's
    /// `transpose(x, perm)`). Fused as an index map: a transpose of an input copies nothing.
    pub fn transpose(self, perm: &[usize]) -> Tensor {
        let perm = perm.to_vec();
        Tensor::record("transpose", &[self.into()], |b, ids| b.transpose(ids[0], &perm))
    }

    /// The elements `range` along `axis`, every other axis whole (NumPy's `x[:, a:b]`,
    /// `ndarray`'s `slice_axis`): `q.slice_axis(0, 0..3)` is the first three joints. Fused as
    /// a read at an offset: a window of an input copies nothing. An end past the axis is a
    /// typed error ([`rfx_ir::TypeError::Slice`]); a range that ends before it starts is empty.
    pub fn slice_axis(self, axis: usize, range: impl RangeBounds<usize>) -> Tensor {
        let (lo, hi) = (range.start_bound().cloned(), range.end_bound().cloned());
        Tensor::record("slice", &[self.into()], move |b, ids| {
            let dims = b.value_type(ids[0])?.shape.dims().to_vec();
            let extent = axis_extent("slice", &dims, axis)?;
            let start = match lo {
                Bound::Included(s) => s,
                Bound::Excluded(s) => s.saturating_add(1),
                Bound::Unbounded => 0,
            };
            let end = match hi {
                Bound::Included(e) => e.saturating_add(1),
                Bound::Excluded(e) => e,
                Bound::Unbounded => extent,
            };
            let mut starts = vec![0; dims.len()];
            starts[axis] = start;
            let mut window = dims;
            window[axis] = end.saturating_sub(start);
            b.slice(ids[0], &starts, window)
        })
    }

    /// Element `i` along `axis`, that axis removed (NumPy's `x[i]` for axis 0, `ndarray`'s
    /// `index_axis`): `state.index_axis(0, 2)` is the third state component as a scalar.
    pub fn index_axis(self, axis: usize, i: usize) -> Tensor {
        Tensor::record("index", &[self.into()], move |b, ids| {
            let dims = b.value_type(ids[0])?.shape.dims().to_vec();
            axis_extent("index", &dims, axis)?;
            let mut starts = vec![0; dims.len()];
            starts[axis] = i;
            let mut window = dims.clone();
            window[axis] = 1;
            let one = b.slice(ids[0], &starts, window)?;
            let mut kept = dims;
            kept.remove(axis);
            b.reshape(one, kept)
        })
    }

    /// `self` read along `axis` at `index` (NumPy's `take_along_axis(self, index, axis,
    /// mode="clip")`): `index` has `self`'s rank and extents off `axis`, and the result its
    /// shape. An index is an `i32` or a float, truncated toward zero and clamped into the
    /// axis, so a lookup can never leave the table (NaN reads element 0). Gradients flow into
    /// the table (a scatter-add) and not into the index.
    pub fn take_along_axis(self, index: Tensor, axis: usize) -> Tensor {
        Tensor::record("gather", &[self.into(), index.into()], move |b, ids| {
            b.gather(ids[0], ids[1], axis)
        })
    }

    /// The entries of `self` at `index` along `axis` (NumPy's `take(self, index, axis,
    /// mode="clip")`): the result's shape is `self`'s with `axis` replaced by `index`'s shape,
    /// so `table.take(i, 0)` of a `[16]` table and an `[n]` index is `[n]`, and of a `[16, 3]`
    /// table of rows is `[n, 3]`. Indices as in [`Tensor::take_along_axis`], which this
    /// broadcasts to (nothing is copied).
    pub fn take(self, index: Tensor, axis: usize) -> Tensor {
        Tensor::record("take", &[self.into(), index.into()], move |b, ids| {
            let dims = b.value_type(ids[0])?.shape.dims().to_vec();
            let n = axis_extent("take", &dims, axis)?;
            let given = b.value_type(ids[1])?.shape.dims().to_vec();
            // A scalar index is one entry, its axis removed from the result at the end.
            let picks = if given.is_empty() { vec![1] } else { given.clone() };
            let (before, after) = (&dims[..axis], &dims[axis + 1..]);
            // The result's shape, and the index's extents laid into it.
            let out: Vec<usize> = [before, &picks, after].concat();
            let mut placed = vec![1; axis];
            placed.extend_from_slice(&picks);
            placed.resize(out.len(), 1);
            // The table's rows repeat along the index's axes after its first.
            let rest = &picks[1..];
            let mut table: Vec<usize> = before.to_vec();
            table.push(n);
            table.extend(std::iter::repeat_n(1, rest.len()));
            table.extend_from_slice(after);
            let mut spread: Vec<usize> = before.to_vec();
            spread.push(n);
            spread.extend_from_slice(rest);
            spread.extend_from_slice(after);
            // Reshapes and broadcasts only where they change a shape (a one-axis table by a
            // one-axis index needs none).
            let t = reshaped(b, ids[0], &table)?;
            let t = broadcast(b, t, &spread)?;
            let index = reshaped(b, ids[1], &placed)?;
            let index = broadcast(b, index, &out)?;
            let g = b.gather(t, index, axis)?;
            reshaped(b, g, &[before, &given, after].concat())
        })
    }

    /// `self` with `widths[d] = (before, after)` zeros around it along each axis `d` (NumPy's
    /// `pad` with zeros). The transpose of a window; a concatenation is made of pads
    /// ([`concat()`]).
    pub fn pad(self, widths: &[(usize, usize)]) -> Tensor {
        let widths = widths.to_vec();
        Tensor::record("pad", &[self.into()], move |b, ids| {
            let dims = b.value_type(ids[0])?.shape.dims().to_vec();
            let low: Vec<usize> = widths.iter().map(|w| w.0).collect();
            // A rank mismatch keeps the operand's dims, so the builder names it.
            let shape: Vec<usize> = if widths.len() == dims.len() {
                dims.iter()
                    .zip(&widths)
                    .map(|(&d, &(lo, hi))| lo + d + hi)
                    .collect()
            } else {
                dims
            };
            b.pad(ids[0], &low, shape)
        })
    }

    /// The axes reversed (NumPy's `x.T`): the transpose of a matrix.
    pub fn t(self) -> Tensor {
        Tensor::record("transpose", &[self.into()], |b, ids| {
            let rank = b.value_type(ids[0])?.shape.rank();
            b.transpose(ids[0], &(0..rank).rev().collect::<Vec<_>>())
        })
    }

    /// A tensor of this one's shape and (numeric) dtype holding each element's index along
    /// `axis` (NumPy's `indices(shape)[axis]`); `x.indices(0).eq(x.indices(1))` is the identity
    /// mask of a square `x`. Computed in the kernel: nothing is read.
    pub fn indices(self, axis: usize) -> Tensor {
        Tensor::record("iota", &[self.into()], |b, ids| {
            let ty = b.value_type(ids[0])?.clone();
            b.iota(ty.dtype, ty.shape, axis)
        })
    }

    /// Broadcasts to `shape` (NumPy's `broadcast_to`).
    pub fn broadcast_to(self, shape: impl Into<Shape>) -> Tensor {
        let shape = shape.into();
        Tensor::record("broadcast_to", &[self.into()], |b, ids| {
            b.broadcast_to(ids[0], shape)
        })
    }

    /// Reduces with `op` over `axes`, keeping them as size 1 when `keepdims`.
    pub fn reduce(self, op: ReduceOp, axes: impl Axes, keepdims: bool) -> Tensor {
        Tensor::record(op.name(), &[self.into()], |b, ids| {
            let rank = b.value_type(ids[0])?.shape.rank();
            b.reduce(op, ids[0], &axes.axes(rank), keepdims)
        })
    }

    /// Sum over `axes` ([`All`] for every axis).
    pub fn sum(self, axes: impl Axes) -> Tensor {
        self.reduce(ReduceOp::Sum, axes, false)
    }

    /// Product over `axes`.
    pub fn prod(self, axes: impl Axes) -> Tensor {
        self.reduce(ReduceOp::Prod, axes, false)
    }

    /// Mean over `axes` (float).
    pub fn mean(self, axes: impl Axes) -> Tensor {
        self.reduce(ReduceOp::Mean, axes, false)
    }

    /// Maximum over `axes` (the elementwise maximum is [`Tensor::max`]).
    pub fn max_over(self, axes: impl Axes) -> Tensor {
        self.reduce(ReduceOp::Max, axes, false)
    }

    /// Minimum over `axes` (the elementwise minimum is [`Tensor::min`]).
    pub fn min_over(self, axes: impl Axes) -> Tensor {
        self.reduce(ReduceOp::Min, axes, false)
    }

    /// The index of the smallest element along `axis`, that axis removed (NumPy's `argmin`):
    /// the first of equal minima (`-0.0` equals `0.0`), and the first NaN where there is one.
    /// The result is `i32`, ready for [`Tensor::take`]: `path.take(d.argmin(1), 0)` is the
    /// nearest waypoint of each row of distances. A `bool` operand counts `false` below
    /// `true`; an empty axis is a typed error ([`rfx_ir::TypeError::EmptyAxis`]). Computed as
    /// a reduction, a comparison with it and a reduction of the matching indices (two loop
    /// nests); no gradient flows through an index.
    pub fn argmin(self, axis: usize) -> Tensor {
        self.arg_extremum("argmin", ReduceOp::Min, axis)
    }

    /// The index of the largest element along `axis`, that axis removed (NumPy's `argmax`):
    /// the first of equal maxima and the first NaN where there is one, as [`Tensor::argmin`].
    pub fn argmax(self, axis: usize) -> Tensor {
        self.arg_extremum("argmax", ReduceOp::Max, axis)
    }

    fn arg_extremum(self, name: &'static str, op: ReduceOp, axis: usize) -> Tensor {
        Tensor::record(name, &[self.into()], move |b, ids| {
            let ty = b.value_type(ids[0])?.clone();
            let dims = ty.shape.dims();
            let n = axis_extent(name, dims, axis)?;
            if n == 0 {
                return Err(BuildError::Type {
                    op: name,
                    source: rfx_ir::TypeError::EmptyAxis {
                        shape: ty.shape.clone(),
                        axis,
                    },
                });
            }
            let x = if ty.dtype == DType::Bool {
                b.cast(ids[0], DType::I32)?
            } else {
                ids[0]
            };
            // The extremum as `min_over`/`max_over` give it (so one the caller also takes is
            // computed once), its axis put back as one.
            let best = b.reduce(op, x, &[axis], false)?;
            let mut kept = dims.to_vec();
            kept[axis] = 1;
            let best = b.reshape(best, kept)?;
            let best = b.broadcast_to(best, ty.shape.clone())?;
            // The extremum is one of the row's elements, so some element equals it, unless it
            // is NaN (min and max propagate NaN), and then the NaNs are the hits.
            let mut hit = b.compare(CmpOp::Eq, x, best)?;
            if ty.dtype.is_float() {
                let nan = b.compare(CmpOp::Ne, x, x)?;
                hit = b.binary(BinaryOp::Or, hit, nan)?;
            }
            // Positions are counted in the operand's float dtype where it can (one lane width
            // for the row loop); the index is made `i32` once per row.
            let count = position_dtype(ty.dtype, n);
            let at = b.iota(count, ty.shape.clone(), axis)?;
            // `n` is never taken: every row has a hit. It only keeps misses out of the minimum.
            let past = match count {
                DType::I32 => Scalar::I32(i32::try_from(n).unwrap_or(i32::MAX)),
                dtype => Scalar::from_f64(dtype, n as f64),
            };
            let past = b.constant(past, ty.shape.clone());
            let picked = b.select(hit, at, past)?;
            let index = b.reduce(ReduceOp::Min, picked, &[axis], false)?;
            if count == DType::I32 {
                Ok(index)
            } else {
                b.cast(index, DType::I32)
            }
        })
    }

    /// The matrix product (NumPy's `matmul`; `a @ b` in [`crate::expr`]): the last axis of
    /// `self` contracted with the next-to-last of `other`. A one-axis operand is a vector (a
    /// row on the left, a column on the right, its axis absent from the result), and the axes
    /// before the last two are a batch that broadcasts: `rot.matmul(v)` of a `[n, 3, 3]` stack
    /// of rotations and a `[3]` vector is `[n, 3]`, of `[3, 3]` and `[n, 3, 1]` is `[n, 3, 1]`.
    /// Computed as a broadcast product summed over the contracted axis, so it fuses with what
    /// produces and consumes it and differentiates both ways. Contracted extents that differ,
    /// or a scalar operand, are a typed error ([`rfx_ir::TypeError::Contraction`]); batches
    /// that do not broadcast, [`rfx_ir::TypeError::Broadcast`].
    pub fn matmul(self, other: Tensor) -> Tensor {
        Tensor::record("matmul", &[self.into(), other.into()], |b, ids| {
            let a = b.value_type(ids[0])?.shape.clone();
            let c = b.value_type(ids[1])?.shape.clone();
            let (ad, cd) = (a.dims(), c.dims());
            if ad.is_empty() || cd.is_empty() {
                return Err(contraction("matmul", &a, &c));
            }
            let a2 = if ad.len() == 1 {
                vec![1, ad[0]]
            } else {
                ad.to_vec()
            };
            let c2 = if cd.len() == 1 {
                vec![cd[0], 1]
            } else {
                cd.to_vec()
            };
            let (batch_a, mk) = a2.split_at(a2.len() - 2);
            let (batch_c, kn) = c2.split_at(c2.len() - 2);
            let (m, k, n) = (mk[0], mk[1], kn[1]);
            if kn[0] != k {
                return Err(contraction("matmul", &a, &c));
            }
            let batch =
                rfx_ir::broadcast_shapes(&Shape::new(batch_a.to_vec()), &Shape::new(batch_c.to_vec()))
                    .ok_or_else(|| broadcast_error("matmul", &a, &c))?;
            // [batch, m, k, 1] * [batch, 1, k, n], summed over k, without the axes of a
            // vector, so that the sum has the result's shape (a reshape after a reduction
            // would copy it).
            let (a_matrix, c_matrix) = (ad.len() > 1, cd.len() > 1);
            let mut x_dims = batch_a.to_vec();
            let mut y_dims = batch_c.to_vec();
            if a_matrix {
                x_dims.push(m);
                y_dims.push(1);
            }
            x_dims.push(k);
            y_dims.push(k);
            if c_matrix {
                x_dims.push(1);
                y_dims.push(n);
            }
            let x = reshaped(b, ids[0], &x_dims)?;
            let y = reshaped(b, ids[1], &y_dims)?;
            let product = b.binary(BinaryOp::Mul, x, y)?;
            let rank = batch.rank() + x_dims.len() - batch_a.len();
            let k_axis = if c_matrix { rank - 2 } else { rank - 1 };
            b.reduce(ReduceOp::Sum, product, &[k_axis], false)
        })
    }

    /// NumPy's `dot`: a product with a scalar; the sum of products over the last axis of
    /// `self` and the only axis of a vector `other`; otherwise the last axis of `self` against
    /// the next-to-last of `other`, every other axis of both kept (`[a.., k]` and `[b.., k,
    /// n]` give `[a.., b.., n]`: for two matrices, their product). Contracted extents that
    /// differ are a typed error ([`rfx_ir::TypeError::Contraction`]).
    pub fn dot(self, other: Tensor) -> Tensor {
        Tensor::record("dot", &[self.into(), other.into()], |b, ids| {
            let a = b.value_type(ids[0])?.shape.clone();
            let c = b.value_type(ids[1])?.shape.clone();
            let (ad, cd) = (a.dims(), c.dims());
            if ad.is_empty() || cd.is_empty() {
                return b.binary(BinaryOp::Mul, ids[0], ids[1]);
            }
            let k = ad[ad.len() - 1];
            let kc = if cd.len() == 1 { cd[0] } else { cd[cd.len() - 2] };
            if k != kc {
                return Err(contraction("dot", &a, &c));
            }
            if cd.len() == 1 {
                let product = b.binary(BinaryOp::Mul, ids[0], ids[1])?;
                return b.reduce(ReduceOp::Sum, product, &[ad.len() - 1], false);
            }
            // [a.., 1.., k, 1] * [1.., b.., k, n], summed over k.
            let (lead_a, lead_c) = (&ad[..ad.len() - 1], &cd[..cd.len() - 2]);
            let n = cd[cd.len() - 1];
            let ones = |count: usize| vec![1; count];
            let x = reshaped(b, ids[0], &[lead_a, &ones(lead_c.len()), &[k, 1]].concat())?;
            let y = reshaped(b, ids[1], &[&ones(lead_a.len()), lead_c, &[k, n]].concat())?;
            let product = b.binary(BinaryOp::Mul, x, y)?;
            b.reduce(ReduceOp::Sum, product, &[lead_a.len() + lead_c.len()], false)
        })
    }

    /// The cross product of three-component vectors along `axis` (NumPy's `cross` with
    /// `axis`): the operands broadcast against each other (NumPy's rules), `axis` counts in
    /// their common shape, and both have three components along it (else a typed error,
    /// [`rfx_ir::TypeError::AxisExtent`]). Each component is `a_j b_k - a_k b_j`, the three
    /// joined by position (as [`concat()`] joins parts): one loop nest computes the components
    /// of each vector once, a second places them.
    pub fn cross(self, other: Tensor, axis: usize) -> Tensor {
        Tensor::record("cross", &[self.into(), other.into()], move |b, ids| {
            let a = b.value_type(ids[0])?.shape.clone();
            let c = b.value_type(ids[1])?.shape.clone();
            // Three components first (NumPy's first check), then the other axes broadcast.
            let rank = a.rank().max(c.rank());
            if axis >= rank {
                return Err(BuildError::Type {
                    op: "cross",
                    source: rfx_ir::TypeError::AxisOutOfRange { axis, rank },
                });
            }
            let aligned = |shape: &Shape| {
                let mut dims = vec![1; rank - shape.rank()];
                dims.extend_from_slice(shape.dims());
                dims
            };
            for shape in [&a, &c] {
                if aligned(shape)[axis] != 3 {
                    return Err(BuildError::Type {
                        op: "cross",
                        source: rfx_ir::TypeError::AxisExtent {
                            op: "cross",
                            shape: Shape::new(aligned(shape)),
                            axis,
                            expected: 3,
                        },
                    });
                }
            }
            if rfx_ir::broadcast_shapes(&a, &c).is_none() {
                return Err(broadcast_error("cross", &a, &c));
            }
            let mut components = Vec::with_capacity(2);
            for (&id, shape) in ids.iter().zip([&a, &c]) {
                let aligned = aligned(shape);
                let v = reshaped(b, id, &aligned)?;
                let mut window = aligned;
                window[axis] = 1;
                let mut parts = [v; 3];
                for (i, part) in parts.iter_mut().enumerate() {
                    let mut starts = vec![0; rank];
                    starts[axis] = i;
                    *part = b.slice(v, &starts, window.clone())?;
                }
                components.push(parts);
            }
            let (u, v) = (components[0], components[1]);
            let mut out = [u[0]; 3];
            for (i, slot) in out.iter_mut().enumerate() {
                let (j, k) = ((i + 1) % 3, (i + 2) % 3);
                let p = b.binary(BinaryOp::Mul, u[j], v[k])?;
                let q = b.binary(BinaryOp::Mul, u[k], v[j])?;
                *slot = b.binary(BinaryOp::Sub, p, q)?;
            }
            concat_ids(b, &out, axis)
        })
    }

    /// The Euclidean norm over `axes` (NumPy's `linalg.norm` along an axis; over two axes the
    /// Frobenius norm): `sqrt(sum(x * x))`, unscaled as NumPy computes it (squares past the
    /// float range overflow). Its gradient `x / norm` is NaN at a zero vector, where the norm
    /// has none.
    pub fn norm(self, axes: impl Axes) -> Tensor {
        (self * self).sum(axes).sqrt()
    }

    /// Running sums along `axis` (NumPy's `cumsum`): element `i` is the sum of elements `0`
    /// to `i`, added one at a time in order, so the results are NumPy's bits (`-0.0` stays; a
    /// NaN or an infinity reaches only the sums from its position on). A `bool` operand is
    /// counted as `i32`. One loop nest (a HIR `cumsum`: the backends run the axis in order with
    /// a running total); it differentiates (the adjoint is the running sum from the end), maps
    /// over batches and fuses with elementwise work around it. [`Tensor::scan`] runs from the
    /// end.
    ///
    /// ```
    /// use rfx::{ScanOp, Tensor};
    ///
    /// // Positions from velocities: one loop nest computes the steps, the sums and the offset.
    /// let p = rfx::jit(|v: Tensor| (v * 0.5).cumsum(0) + 1.0);
    /// let out = p.call((&[1.0f64, 2.0, 3.0],))?;
    /// assert_eq!(out[0].as_slice::<f64>(), Some(&[1.5, 2.5, 4.0][..]));
    /// // The cost still to come from each step: the running sum from the end.
    /// let to_go = rfx::jit(|c: Tensor| c.scan(ScanOp::Sum, 0, true));
    /// let out = to_go.call((&[1.0f64, 2.0, 3.0],))?;
    /// assert_eq!(out[0].as_slice::<f64>(), Some(&[6.0, 5.0, 3.0][..]));
    /// # Ok::<(), rfx::JitError>(())
    /// ```
    pub fn cumsum(self, axis: usize) -> Tensor {
        self.scan(ScanOp::Sum, axis, false)
    }

    /// Running products along `axis` (NumPy's `cumprod`), multiplied in order; a `bool`
    /// operand is counted as `i32`. Its derivatives are exact at zeros (no division) and cost
    /// `O(n)` per line: linear recurrences ([`Tensor::linrec`]).
    pub fn cumprod(self, axis: usize) -> Tensor {
        self.scan(ScanOp::Prod, axis, false)
    }

    /// The running maximum along `axis` (NumPy's `maximum.accumulate`, JAX's `lax.cummax`):
    /// NaN-propagating, a tie going to the later element, whose derivative it takes. A `bool`
    /// operand gives `bool` (a running `or`).
    pub fn cummax(self, axis: usize) -> Tensor {
        self.scan(ScanOp::Max, axis, false)
    }

    /// The running minimum along `axis` (NumPy's `minimum.accumulate`, JAX's `lax.cummin`),
    /// as [`Tensor::cummax`]; a `bool` operand gives a running `and`.
    pub fn cummin(self, axis: usize) -> Tensor {
        self.scan(ScanOp::Min, axis, false)
    }

    /// The running fold `op` along `axis` ([`ScanOp`]: sum, product, maximum, minimum; the
    /// linear recurrence takes a coefficient, [`Tensor::linrec`], and is an arity error here), from
    /// the axis's last element toward its first when `reverse` (JAX's `reverse=True`: the
    /// cost-to-go of per-step costs is `costs.scan(ScanOp::Sum, 0, true)`). A `bool` operand
    /// is counted as `i32`, and the running maximum or minimum of one cast back to `bool`. An
    /// axis past the rank is a typed error ([`rfx_ir::TypeError::AxisOutOfRange`]).
    pub fn scan(self, op: ScanOp, axis: usize, reverse: bool) -> Tensor {
        Tensor::record(op.name(), &[self.into()], move |b, ids| {
            let ty = b.value_type(ids[0])?.clone();
            if ty.dtype != DType::Bool {
                return b.scan(op, ids[0], axis, reverse);
            }
            let counted = b.cast(ids[0], DType::I32)?;
            let folded = b.scan(op, counted, axis, reverse)?;
            match op {
                ScanOp::Max | ScanOp::Min => b.cast(folded, DType::Bool),
                ScanOp::Sum | ScanOp::Prod | ScanOp::Linear => Ok(folded),
            }
        })
    }

    /// The first-order linear recurrence `y[i] = coef[i] * y[i-1] + self[i]` along `axis`,
    /// from `y[-1] = 0` (from the axis's last element toward its first when `reverse`, then
    /// `y[i] = coef[i] * y[i+1] + self[i]`): a discrete low-pass filter run over a whole signal,
    /// a scalar linear rollout, a discounted cost-to-go. `coef` is a tensor or a number
    /// broadcast with `self` (NumPy's rules). Each step rounds the product and then the sum
    /// (the bits of the plain loop `y = coef[i] * y + x[i]`, never a fused multiply-add), and
    /// `y[0] = self[0]` exactly whenever `coef[0] >= 0`. One ordered loop nest (a HIR `linrec`,
    /// [`ScanOp::Linear`]) that fuses with the work around it, as [`Tensor::cumsum`] does; it
    /// differentiates in `O(n)` per line with respect to both operands (the adjoint is the
    /// same recurrence run backwards) and maps over batches. Numeric operands of one dtype;
    /// shapes that do not broadcast are a typed error.
    ///
    /// ```
    /// use rfx::Tensor;
    ///
    /// // An exponential low-pass filter of a whole signal: y[i] = 0.75 y[i-1] + 0.25 x[i].
    /// let lowpass = rfx::jit(|x: Tensor| (x * 0.25).linrec(0.75, 0, false));
    /// let out = lowpass.call((&[4.0f64, 4.0, 0.0],))?;
    /// assert_eq!(out[0].as_slice::<f64>(), Some(&[1.0, 1.75, 1.3125][..]));
    /// // A discounted cost-to-go: g[i] = c[i] + 0.5 g[i+1].
    /// let to_go = rfx::jit(|c: Tensor| c.linrec(0.5, 0, true));
    /// let out = to_go.call((&[1.0f64, 2.0, 4.0],))?;
    /// assert_eq!(out[0].as_slice::<f64>(), Some(&[3.0, 4.0, 4.0][..]));
    /// # Ok::<(), rfx::JitError>(())
    /// ```
    pub fn linrec(self, coef: impl Into<Operand>, axis: usize, reverse: bool) -> Tensor {
        Tensor::record("linrec", &[self.into(), coef.into()], move |b, ids| {
            let x = b.value_type(ids[0])?.shape.clone();
            let c = b.value_type(ids[1])?.shape.clone();
            let shape = rfx_ir::broadcast_shapes(&x, &c).ok_or_else(|| broadcast_error("linrec", &x, &c))?;
            let mut operands = [ids[0], ids[1]];
            for (id, own) in operands.iter_mut().zip([&x, &c]) {
                if *own != shape {
                    *id = b.broadcast_to(*id, shape.clone())?;
                }
            }
            b.linrec(operands[0], operands[1], axis, reverse)
        })
    }

    /// Differences of neighbours along `axis` (NumPy's `diff`): `x[i + 1] - x[i]`, the axis
    /// one shorter (empty when it has at most one element). Two windows of `self`: it fuses
    /// and reads an input in place.
    pub fn diff(self, axis: usize) -> Tensor {
        Tensor::record("diff", &[self.into()], move |b, ids| {
            let dims = b.value_type(ids[0])?.shape.dims().to_vec();
            let n = axis_extent("diff", &dims, axis)?;
            let mut window = dims.clone();
            window[axis] = n.saturating_sub(1);
            let mut starts = vec![0; dims.len()];
            let lower = b.slice(ids[0], &starts, window.clone())?;
            starts[axis] = n.min(1);
            let upper = b.slice(ids[0], &starts, window)?;
            b.binary(BinaryOp::Sub, upper, lower)
        })
    }

    /// The inverse of each square matrix in the last two axes (NumPy's `linalg.inv`; the
    /// axes before them are a batch): for 2×2 and 3×3 matrices the adjugate over the
    /// determinant (the cofactors' closed forms, as Eigen inverts fixed sizes up to 4),
    /// elementwise work that fuses into one or two loop nests; otherwise Gauss–Jordan
    /// elimination with partial pivoting (the first of the largest magnitudes of each column,
    /// as LAPACK's `getrf` chooses), unrolled at trace time. Either way a batch of small
    /// matrices (a Kalman gain's innovation covariance, a damped pseudo-inverse's `JᵀJ + λI`)
    /// inverts on every backend, and differentiates. NumPy raises an error for a singular
    /// matrix; a kernel cannot, so its inverse holds infinities or NaNs (a zero determinant or
    /// pivot divides). Float operands only; an operand that is not square in its last two axes
    /// is a typed error ([`rfx_ir::TypeError::NotSquare`]). Meant for the sizes control code
    /// inverts (up to about 8: the elimination is `n` steps over the whole matrix).
    pub fn inv(self) -> Tensor {
        let a = self.square_matrices("inv");
        if a.is_poisoned() {
            return a;
        }
        let dims = a.shape().dims().to_vec();
        let rank = dims.len();
        let n = dims[rank - 1];
        if let Some((adjugate, det)) = adjugate(a, n) {
            return adjugate / det;
        }
        let identity = a
            .indices(rank - 2)
            .eq(a.indices(rank - 1))
            .select(a.full_like(1.0), 0.0);
        let reduced = gauss_jordan(concat(&[a, identity], rank - 1), n, false).0;
        reduced.slice_axis(rank - 1, n..)
    }

    /// The determinant of each square matrix in the last two axes (NumPy's `linalg.det`):
    /// for 2×2 and 3×3 matrices the cofactor expansion along the first row; otherwise the
    /// product of the pivots of the elimination [`Tensor::inv`] performs, its sign flipped by
    /// each row exchange, exactly zero for a matrix whose column has no pivot. One for an
    /// empty matrix.
    pub fn det(self) -> Tensor {
        let a = self.square_matrices("det");
        if a.is_poisoned() {
            return a;
        }
        let dims = a.shape().dims().to_vec();
        let (rank, n) = (dims.len(), dims[dims.len() - 1]);
        match adjugate(a, n) {
            Some((_, det)) => det.reshape(dims[..rank - 2].to_vec()),
            None => gauss_jordan(a, n, true).1,
        }
    }

    /// The solution `x` of `self x = b` for each square matrix in the last two axes (NumPy's
    /// `linalg.solve`): `b` is one vector (`[n]`, the result `[.., n]`) or matrices of
    /// right-hand sides (`[.., n, k]`, the batches broadcasting), eliminated alongside the
    /// matrix as [`Tensor::inv`] eliminates (no inverse is formed). A singular matrix gives
    /// infinities or NaNs. A `b` whose rows do not match is a typed error
    /// ([`rfx_ir::TypeError::Contraction`]).
    pub fn solve(self, b: Tensor) -> Tensor {
        let a = self.square_matrices("solve");
        // `b`'s shape checked against `a`'s; the common batch is found here.
        let checked = Tensor::record("solve", &[a.into(), b.into()], |builder, ids| {
            let a_shape = builder.value_type(ids[0])?.shape.clone();
            let b_shape = builder.value_type(ids[1])?.shape.clone();
            let (ad, bd) = (a_shape.dims(), b_shape.dims());
            let n = ad[ad.len() - 1];
            let rows = match bd.len() {
                0 => None,
                1 => Some(bd[0]),
                r => Some(bd[r - 2]),
            };
            if rows != Some(n) {
                return Err(contraction("solve", &a_shape, &b_shape));
            }
            if bd.len() > 1 {
                let batch_a = Shape::new(ad[..ad.len() - 2].to_vec());
                let batch_b = Shape::new(bd[..bd.len() - 2].to_vec());
                if rfx_ir::broadcast_shapes(&batch_a, &batch_b).is_none() {
                    return Err(broadcast_error("solve", &a_shape, &b_shape));
                }
            }
            Ok(ids[0])
        });
        if checked.is_poisoned() {
            return checked;
        }
        let (ad, bd) = (a.shape().dims().to_vec(), b.shape().dims().to_vec());
        let n = ad[ad.len() - 1];
        let vector = bd.len() == 1;
        let (b, bd) = if vector {
            (b.reshape([n, 1]), vec![n, 1])
        } else {
            (b, bd)
        };
        let batch = rfx_ir::broadcast_shapes(
            &Shape::new(ad[..ad.len() - 2].to_vec()),
            &Shape::new(bd[..bd.len() - 2].to_vec()),
        )
        .unwrap_or_default();
        let k = bd[bd.len() - 1];
        if let Some((adjugate, det)) = adjugate(a, n) {
            // `adj(a) b / det(a)`, the product written out: `n` broadcast products of a column
            // and a row, elementwise work that fuses with the rest.
            let term =
                |j: usize| adjugate.slice_axis(ad.len() - 1, j..j + 1) * b.slice_axis(bd.len() - 2, j..j + 1);
            let x = (1..n).fold(term(0), |sum, j| sum + term(j)) / det;
            return if vector {
                x.reshape(batch.dims().iter().copied().chain([n]).collect::<Vec<_>>())
            } else {
                x
            };
        }
        let full = |cols: usize| -> Vec<usize> { batch.dims().iter().copied().chain([n, cols]).collect() };
        let rank = batch.rank() + 2;
        let augmented = concat(&[a.broadcast_to(full(n)), b.broadcast_to(full(k))], rank - 1);
        let x = gauss_jordan(augmented, n, false).0.slice_axis(rank - 1, n..);
        if vector {
            x.reshape(batch.dims().iter().copied().chain([n]).collect::<Vec<_>>())
        } else {
            x
        }
    }

    /// `self`, or a typed error unless it is a float tensor of square matrices.
    fn square_matrices(self, op: &'static str) -> Tensor {
        Tensor::record(op, &[self.into()], move |b, ids| {
            let ty = b.value_type(ids[0])?.clone();
            let dims = ty.shape.dims();
            if dims.len() < 2 || dims[dims.len() - 1] != dims[dims.len() - 2] {
                return Err(BuildError::Type {
                    op,
                    source: rfx_ir::TypeError::NotSquare {
                        op,
                        shape: ty.shape.clone(),
                    },
                });
            }
            if !ty.dtype.is_float() {
                return Err(BuildError::Type {
                    op,
                    source: rfx_ir::TypeError::UnsupportedDType { op, dtype: ty.dtype },
                });
            }
            Ok(ids[0])
        })
    }

    /// Sum of every element (a scalar).
    pub fn sum_all(self) -> Tensor {
        self.sum(All)
    }

    /// Mean of every element (a scalar).
    pub fn mean_all(self) -> Tensor {
        self.mean(All)
    }
}

/// A constant tensor holding `value` (its dtype, shape and elements), recorded into the active
/// trace: a small matrix (a Kalman transition, a DH table) that is part of the kernel rather
/// than an input. A compiled kernel keeps the values in read-only memory of its own (on a GPU,
/// a device buffer written once), and the optimiser turns a constant whose elements are all
/// equal into a splat. Outside a traced function the result is a tensor every trace rejects.
pub fn constant(value: &Array) -> Tensor {
    Tensor::record("literal", &[], |b, _| Ok(b.literal(value)))
}

/// `parts` joined along `axis` (NumPy's `concatenate`): every part has the same rank, dtype
/// and extents along the other axes. Each part is padded to the result's shape and the parts
/// are chosen by position (not added, so `-0.0` and NaN payloads stay as they are); the result
/// fuses into its consumers, and its derivative gives each part its window of the adjoint.
pub fn concat(parts: &[Tensor], axis: usize) -> Tensor {
    let operands: Vec<Operand> = parts.iter().map(|&t| t.into()).collect();
    Tensor::record("concat", &operands, move |b, ids| concat_ids(b, ids, axis))
}

/// [`concat()`] of values of the builder.
fn concat_ids(b: &mut Builder, ids: &[ValueId], axis: usize) -> Result<ValueId, BuildError> {
    let shapes = ids
        .iter()
        .map(|&id| Ok(b.value_type(id)?.shape.dims().to_vec()))
        .collect::<Result<Vec<_>, BuildError>>()?;
    let Some(first) = shapes.first() else {
        return Err(BuildError::Type {
            op: "concat",
            source: rfx_ir::TypeError::Arity {
                op: "concat",
                expected: 1,
                found: 0,
            },
        });
    };
    axis_extent("concat", first, axis)?;
    let total: usize = shapes.iter().map(|s| s.get(axis).copied().unwrap_or(0)).sum();
    let mut out = first.clone();
    out[axis] = total;
    let mut result = None;
    // The choice by position, made when the second part needs it.
    let mut place: Option<Placement<'_>> = None;
    let mut offset = 0;
    for (&id, shape) in ids.iter().zip(&shapes) {
        let mut low = vec![0; out.len()];
        if let Some(l) = low.get_mut(axis) {
            *l = offset;
        }
        let placed = b.pad(id, &low, out.clone())?;
        result = Some(match result {
            None => placed,
            Some(before) => {
                // Counted in `f64` for `f64` parts, as the pads' own masks count once fused
                // (so each test is made once, and an `f64` kernel needs no `i32` lanes); in
                // `i32` otherwise.
                let dtype = b.value_type(id)?.dtype;
                let count = if dtype == DType::F64 && total <= rfx_ir::semantics::max_exact_index(dtype) {
                    dtype
                } else {
                    DType::I32
                };
                place
                    .get_or_insert_with(|| Placement::new(count, &out, axis))
                    .from(b, offset, placed, before)?
            }
        });
        offset += shape.get(axis).copied().unwrap_or(0);
    }
    result.ok_or(BuildError::UnknownValue(ValueId::new(0)))
}

/// For `[.., n, n]` matrices with `n` of 2 or 3, their adjugates and their determinants
/// (`[.., 1, 1]`), by closed forms; `None` for other sizes. Element `(i, j)` of the adjugate
/// (the transposed cofactors) is, indices modulo 3, `m[j+1, i+1] m[j+2, i+2] - m[j+1, i+2]
/// m[j+2, i+1]` (the sign falls out of the cyclic order), and for 2×2 matrices
/// `±m[1-j, 1-i]`: each factor a lookup in the flattened matrix at a constant index, so the
/// adjugate is one elementwise computation over the matrix's points. The determinant is the
/// expansion along the first row, from windows of the matrix.
fn adjugate(m: Tensor, n: usize) -> Option<(Tensor, Tensor)> {
    if !(2..=3).contains(&n) {
        return None;
    }
    let dims = m.shape().dims().to_vec();
    let rank = dims.len();
    let (row, col) = (rank - 2, rank - 1);
    let dtype = m.dtype();
    let mut flat_dims = dims[..row].to_vec();
    flat_dims.push(n * n);
    let flat = m.reshape(flat_dims);
    // `m[j+a, i+b]` at each point `(i, j)`.
    let shifted = |a: usize, b: usize| {
        let index: Vec<f64> = (0..n * n)
            .map(|k| (((k % n + a) % n) * n + (k / n + b) % n) as f64)
            .collect();
        // In the matrix's dtype (exact: at most 8), so the kernel has one lane width.
        let index = match dtype {
            DType::F32 => Array::from_slice(&index.iter().map(|&v| v as f32).collect::<Vec<f32>>()),
            _ => Array::from_slice(&index),
        };
        flat.take(constant(&index).reshape([n, n]), row)
    };
    let at = |i: usize, j: usize| m.slice_axis(row, i..i + 1).slice_axis(col, j..j + 1);
    let (adjugate, det) = if n == 2 {
        let swapped = shifted(1, 1);
        (
            where_(m.indices(row).eq(m.indices(col)), swapped, -swapped),
            at(0, 0) * at(1, 1) - at(0, 1) * at(1, 0),
        )
    } else {
        let minor =
            |j: usize| at(1, (j + 1) % 3) * at(2, (j + 2) % 3) - at(1, (j + 2) % 3) * at(2, (j + 1) % 3);
        (
            shifted(1, 1) * shifted(2, 2) - shifted(1, 2) * shifted(2, 1),
            at(0, 0) * minor(0) + at(0, 1) * minor(1) + at(0, 2) * minor(2),
        )
    };
    Some((adjugate, det))
}

/// Gauss–Jordan elimination with partial pivoting of `[.., n, w]` matrices whose first `n`
/// columns are square: after `n` steps the first `n` columns are the identity and the rest are
/// the square part's inverse times what they held. Returns the reduced matrices and the
/// square part's determinant (the signed product of the pivots). With `keep_zero_pivots`, a
/// zero pivot (a column with nothing left to pivot on) divides by one instead, which leaves the
/// determinant's later pivots intact (the rows below hold zeros in that column) and makes it
/// exactly zero; the inverse then means nothing, so `inv` and `solve` divide by the zero.
fn gauss_jordan(m: Tensor, n: usize, keep_zero_pivots: bool) -> (Tensor, Tensor) {
    let dims = m.shape().dims().to_vec();
    let rank = dims.len();
    let (row_axis, col_axis) = (rank - 2, rank - 1);
    let batch = &dims[..row_axis];
    let rows = m.indices(row_axis);
    let mut m = m;
    let mut det: Option<Tensor> = None;
    for k in 0..n {
        // The pivot: the first of the largest magnitudes in column k at or below row k (as
        // LAPACK's `getrf` chooses; a NaN is never larger), found by comparing the rows in turn
        // (elementwise work that fuses, where a reduction and a lookup would each be a loop
        // nest), and its row carried along.
        let row_k = m.slice_axis(row_axis, k..k + 1);
        let entry = |row: Tensor| row.slice_axis(col_axis, k..k + 1).abs();
        let mut best = entry(row_k);
        let mut p_at = best.full_like(k as f64);
        let mut pivot_row = row_k;
        for i in k + 1..n {
            let row = m.slice_axis(row_axis, i..i + 1);
            let size = entry(row);
            let larger = size.gt(best);
            best = where_(larger, size, best);
            p_at = where_(larger, i as f64, p_at);
            pivot_row = where_(larger, row, pivot_row);
        }
        let is_k = rows.eq(k as f64);
        m = where_(is_k, pivot_row, where_(rows.eq(p_at), row_k, m));
        // Row k scaled to a unit pivot, subtracted from every other row.
        let pivot = m.slice_axis(row_axis, k..k + 1).slice_axis(col_axis, k..k + 1);
        let divisor = if keep_zero_pivots {
            where_(pivot.eq(0.0), 1.0, pivot)
        } else {
            pivot
        };
        let unit_row = m.slice_axis(row_axis, k..k + 1) / divisor;
        let factors = m.slice_axis(col_axis, k..k + 1);
        m = where_(is_k, unit_row, m - factors * unit_row);
        // An exchange of two rows flips the determinant's sign.
        let signed = where_(p_at.eq(k as f64), pivot, -pivot);
        det = Some(match det {
            None => signed,
            Some(d) => d * signed,
        });
    }
    let det = det.map_or_else(
        || m.sum(&[row_axis, col_axis][..]) + 1.0,
        |d| d.reshape(batch.to_vec()),
    );
    (m, det)
}

/// The dtype positions along an axis of `n` elements are counted in: the operand's float dtype
/// where it holds them exactly, so a loop over them has one lane width (on the CPU a loop that
/// mixes `i32` with `f64` runs one element at a time), else `i32`.
fn position_dtype(dtype: DType, n: usize) -> DType {
    if dtype.is_float() && n <= rfx_ir::semantics::max_exact_index(dtype) {
        dtype
    } else {
        DType::I32
    }
}

/// A choice between two values by position along `axis` of `dims`, the positions counted in
/// `count` by an `iota` built on first use (a `concat` chooses at several starts).
struct Placement<'a> {
    at: Option<ValueId>,
    count: DType,
    dims: &'a [usize],
    axis: usize,
}

impl<'a> Placement<'a> {
    fn new(count: DType, dims: &'a [usize], axis: usize) -> Placement<'a> {
        Placement {
            at: None,
            count,
            dims,
            axis,
        }
    }

    /// `later` where the position is `start` or past it, else `earlier`.
    fn from(
        &mut self,
        b: &mut Builder,
        start: usize,
        later: ValueId,
        earlier: ValueId,
    ) -> Result<ValueId, BuildError> {
        let at = match self.at {
            Some(at) => at,
            None => *self.at.insert(b.iota(self.count, self.dims.to_vec(), self.axis)?),
        };
        let start = rfx_ir::semantics::index_value(start, self.count)
            .unwrap_or(Scalar::I32(i32::try_from(start).unwrap_or(i32::MAX)));
        let start = b.scalar(start);
        let reached = b.compare(CmpOp::Ge, at, start)?;
        b.select(reached, later, earlier)
    }
}

/// `x` reshaped to `dims`, or `x` itself when it has them.
fn reshaped(b: &mut Builder, x: ValueId, dims: &[usize]) -> Result<ValueId, BuildError> {
    if b.value_type(x)?.shape.dims() == dims {
        return Ok(x);
    }
    b.reshape(x, dims.to_vec())
}

/// `x` broadcast to `dims`, or `x` itself when it has them.
fn broadcast(b: &mut Builder, x: ValueId, dims: &[usize]) -> Result<ValueId, BuildError> {
    if b.value_type(x)?.shape.dims() == dims {
        return Ok(x);
    }
    b.broadcast_to(x, dims.to_vec())
}

/// The typed error of a matrix product `op` of `lhs` and `rhs` whose extents do not contract.
fn contraction(op: &'static str, lhs: &Shape, rhs: &Shape) -> BuildError {
    BuildError::Type {
        op,
        source: rfx_ir::TypeError::Contraction {
            op,
            lhs: lhs.clone(),
            rhs: rhs.clone(),
        },
    }
}

/// The typed error of an op `op` whose operands `lhs` and `rhs` (or their batch axes) do not
/// broadcast.
fn broadcast_error(op: &'static str, lhs: &Shape, rhs: &Shape) -> BuildError {
    BuildError::Type {
        op,
        source: rfx_ir::TypeError::Broadcast {
            op,
            lhs: lhs.clone(),
            rhs: rhs.clone(),
        },
    }
}

/// The extent of `axis` of `dims`, or the typed error for an axis past the rank.
fn axis_extent(op: &'static str, dims: &[usize], axis: usize) -> Result<usize, BuildError> {
    dims.get(axis).copied().ok_or(BuildError::Type {
        op,
        source: rfx_ir::TypeError::AxisOutOfRange {
            axis,
            rank: dims.len(),
        },
    })
}

/// `where_(cond, a, b)`: `a` where `cond` is true, else `b` (NumPy's `where`).
pub fn where_(cond: Tensor, a: impl Into<Operand>, b: impl Into<Operand>) -> Tensor {
    cond.select(a, b)
}

macro_rules! operator {
    ($trait:ident, $method:ident, $op:ident) => {
        impl<R: Into<Operand>> ops::$trait<R> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: R) -> Tensor {
                self.binary_op(BinaryOp::$op, rhs)
            }
        }
        impl ops::$trait<Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                rhs.binary_op_rev(BinaryOp::$op, self)
            }
        }
        impl ops::$trait<Tensor> for i32 {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                rhs.binary_op_rev(BinaryOp::$op, self)
            }
        }
    };
}

operator!(Add, add, Add);
operator!(Sub, sub, Sub);
operator!(Mul, mul, Mul);
operator!(Div, div, Div);
operator!(Rem, rem, Fmod);

impl<R: Into<Operand>> ops::BitAnd<R> for Tensor {
    type Output = Tensor;
    fn bitand(self, rhs: R) -> Tensor {
        self.binary_op(BinaryOp::And, rhs)
    }
}

impl<R: Into<Operand>> ops::BitOr<R> for Tensor {
    type Output = Tensor;
    fn bitor(self, rhs: R) -> Tensor {
        self.binary_op(BinaryOp::Or, rhs)
    }
}

impl ops::Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        self.unary_op(UnaryOp::Neg)
    }
}

impl ops::Not for Tensor {
    type Output = Tensor;
    fn not(self) -> Tensor {
        self.unary_op(UnaryOp::Not)
    }
}

/// Copies the nodes of `kernel` into the innermost trace, its inputs bound to `args` (already
/// checked against the kernel's input types), and returns its outputs in order. A node that
/// does not fit records the error and poisons the outputs.
pub(crate) fn inline_kernel(kernel: &Kernel, args: &[Tensor]) -> Vec<Tensor> {
    let n_out = kernel.outputs().len();
    let trace_of = args.first().map_or(0, |t| t.trace);
    with_trace(|state| {
        let Some(ids) = resolve(state, "inline", args) else {
            return vec![Tensor::poisoned(state.id); n_out];
        };
        let mut map: Vec<ValueId> = Vec::with_capacity(kernel.nodes().len());
        let mut next_input = ids.iter();
        for node in kernel.nodes() {
            let value = if matches!(node.op, rfx_ir::hir::Op::Input { .. }) {
                next_input.next().copied()
            } else {
                let operands: Vec<ValueId> = node.args.iter().map(|a| map[a.index()]).collect();
                match state.builder.copy(&node.op, &operands, &node.ty) {
                    Ok(value) => Some(value),
                    Err(source) => {
                        record_error(state, TraceError::Build { op: "inline", source });
                        None
                    }
                }
            };
            let Some(value) = value else {
                return vec![Tensor::poisoned(state.id); n_out];
            };
            map.push(value);
        }
        kernel
            .outputs()
            .iter()
            .map(|o| Tensor::from_value(state.id, map[o.value.index()]))
            .collect()
    })
    .unwrap_or_else(|| vec![Tensor::poisoned(trace_of); n_out])
}

/// Ends the trace when dropped, also when the traced function panics.
pub(crate) struct TraceGuard {
    id: u32,
    finished: bool,
}

impl TraceGuard {
    /// Starts a trace of a kernel called `name` on this thread.
    pub(crate) fn begin(name: &str) -> TraceGuard {
        let id = NEXT_TRACE.fetch_add(1, Ordering::Relaxed);
        TRACES.with(|traces| {
            traces.borrow_mut().push(TraceState {
                id,
                builder: Builder::new(name),
                error: None,
            });
        });
        TraceGuard { id, finished: false }
    }

    /// Adds an input and returns its tensor.
    pub(crate) fn input(&self, name: &str, ty: TensorType) -> Tensor {
        with_trace(|state| match state.builder.input(name, ty) {
            Ok(value) => Tensor::from_value(state.id, value),
            Err(source) => {
                record_error(state, TraceError::Build { op: "input", source });
                Tensor::poisoned(state.id)
            }
        })
        .unwrap_or_else(|| Tensor::poisoned(self.id))
    }

    /// A scalar constant.
    pub(crate) fn constant(&self, value: Scalar) -> Tensor {
        with_trace(|state| Tensor::from_value(state.id, state.builder.scalar(value)))
            .unwrap_or_else(|| Tensor::poisoned(self.id))
    }

    /// The first error recorded so far.
    pub(crate) fn error(&self) -> Option<TraceError> {
        with_trace(|state| state.error.clone()).flatten()
    }

    /// Ends the trace with `outputs` (named) and returns the kernel or the first error.
    pub(crate) fn finish(mut self, outputs: &[(String, Tensor)]) -> Result<Kernel, TraceError> {
        self.finished = true;
        let state = TRACES
            .with(|traces| traces.borrow_mut().pop())
            .filter(|state| state.id == self.id);
        let Some(mut state) = state else {
            return Err(TraceError::ForeignTensor { op: "output" });
        };
        for (name, tensor) in outputs {
            let Some(ids) = resolve(&mut state, "output", &[*tensor]) else {
                continue;
            };
            if let Err(source) = state.builder.output(name.clone(), ids[0]) {
                record_error(&mut state, TraceError::Build { op: "output", source });
            }
        }
        if let Some(error) = state.error {
            return Err(error);
        }
        if outputs.is_empty() {
            return Err(TraceError::NoOutputs);
        }
        state
            .builder
            .finish()
            .map_err(|source| TraceError::Build { op: "output", source })
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        if !self.finished {
            TRACES.with(|traces| {
                let mut traces = traces.borrow_mut();
                if traces.last().is_some_and(|s| s.id == self.id) {
                    traces.pop();
                }
            });
        }
    }
}

/// What a traced function returns: one tensor, a tuple of up to six, an array or a `Vec`.
/// One output is called `out`; several are `out0`, `out1`, ...
pub trait TraceOutput {
    /// The output tensors, in order.
    fn into_tensors(self) -> Vec<Tensor>;
}

impl TraceOutput for Tensor {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self]
    }
}

impl TraceOutput for Vec<Tensor> {
    fn into_tensors(self) -> Vec<Tensor> {
        self
    }
}

impl<const N: usize> TraceOutput for [Tensor; N] {
    fn into_tensors(self) -> Vec<Tensor> {
        self.to_vec()
    }
}

macro_rules! tensor_ty {
    ($t:ident) => {
        Tensor
    };
}

macro_rules! tuple_output {
    ($($t:ident),+) => {
        impl TraceOutput for ($(tensor_ty!($t),)+) {
            fn into_tensors(self) -> Vec<Tensor> {
                let ($($t,)+) = self;
                vec![$($t),+]
            }
        }
    };
}

tuple_output!(a);
tuple_output!(a, b);
tuple_output!(a, b, c);
tuple_output!(a, b, c, d);
tuple_output!(a, b, c, d, e);
tuple_output!(a, b, c, d, e, f);

/// The default output names for `n` outputs: `out` for one, `out0, out1, ...` otherwise.
pub(crate) fn output_names(n: usize) -> Vec<String> {
    if n == 1 {
        vec!["out".to_string()]
    } else {
        (0..n).map(|i| format!("out{i}")).collect()
    }
}
