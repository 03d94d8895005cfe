//! The elementwise, shape, indexing and reduction methods of [`Tensor`], the free functions
//! ([`constant`], [`concat`], [`where_`]) and the arithmetic operators.

use std::ops::{self, Bound, RangeBounds};

use rfx_ir::hir::{BuildError, Builder, ValueId};
use rfx_ir::{Array, BinaryOp, CmpOp, DType, ReduceOp, Scalar, Shape, UnaryOp};

use super::tensor::{All, Axes, Operand, Tensor};

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
    /// The error function (`scipy.special.erf`); the Gaussian CDF is `(1 + erf(x/√2))/2`.
    erf => Erf,
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
pub(super) fn concat_ids(b: &mut Builder, ids: &[ValueId], axis: usize) -> Result<ValueId, BuildError> {
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

/// The dtype positions along an axis of `n` elements are counted in: the operand's float dtype
/// where it holds them exactly, so a loop over them has one lane width (on the CPU a loop that
/// mixes `i32` with `f64` runs one element at a time), else `i32`.
pub(super) fn position_dtype(dtype: DType, n: usize) -> DType {
    if dtype.is_float() && n <= rfx_ir::semantics::max_exact_index(dtype) {
        dtype
    } else {
        DType::I32
    }
}

/// A choice between two values by position along `axis` of `dims`, the positions counted in
/// `count` by an `iota` built on first use (a `concat` chooses at several starts).
pub(super) struct Placement<'a> {
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
pub(super) fn reshaped(b: &mut Builder, x: ValueId, dims: &[usize]) -> Result<ValueId, BuildError> {
    if b.value_type(x)?.shape.dims() == dims {
        return Ok(x);
    }
    b.reshape(x, dims.to_vec())
}

/// `x` broadcast to `dims`, or `x` itself when it has them.
pub(super) fn broadcast(b: &mut Builder, x: ValueId, dims: &[usize]) -> Result<ValueId, BuildError> {
    if b.value_type(x)?.shape.dims() == dims {
        return Ok(x);
    }
    b.broadcast_to(x, dims.to_vec())
}

/// The typed error of a matrix product `op` of `lhs` and `rhs` whose extents do not contract.
pub(super) fn contraction(op: &'static str, lhs: &Shape, rhs: &Shape) -> BuildError {
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
pub(super) fn broadcast_error(op: &'static str, lhs: &Shape, rhs: &Shape) -> BuildError {
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
pub(super) fn axis_extent(op: &'static str, dims: &[usize], axis: usize) -> Result<usize, BuildError> {
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
