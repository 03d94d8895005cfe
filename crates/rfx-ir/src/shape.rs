//! Static shapes, NumPy broadcasting, and tensor types.

use std::fmt;

use crate::DType;

/// A static, row-major tensor shape. The empty shape `[]` is a scalar (one element).
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Shape(Vec<usize>);

impl Shape {
    /// A shape with the given dimensions, outermost first.
    pub fn new(dims: impl Into<Vec<usize>>) -> Shape {
        Shape(dims.into())
    }

    /// The scalar shape `[]`.
    pub fn scalar() -> Shape {
        Shape(Vec::new())
    }

    /// The dimensions, outermost first.
    #[inline]
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// The number of dimensions.
    #[inline]
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// The number of elements: the product of the dimensions (1 for a scalar, 0 if any dimension
    /// is 0). Saturates at `usize::MAX` instead of overflowing.
    #[inline]
    pub fn numel(&self) -> usize {
        self.0.iter().fold(1usize, |acc, &d| acc.saturating_mul(d))
    }

    /// `true` for the scalar shape `[]`.
    pub fn is_scalar(&self) -> bool {
        self.0.is_empty()
    }

    /// Row-major strides in elements (the last dimension has stride 1).
    pub fn strides(&self) -> Vec<usize> {
        let mut strides = vec![0; self.0.len()];
        let mut acc = 1usize;
        for (stride, &dim) in strides.iter_mut().zip(&self.0).rev() {
            *stride = acc;
            acc = acc.saturating_mul(dim);
        }
        strides
    }

    /// The strides (in elements of a row-major buffer of shape `self`) that read `self`
    /// broadcast to `target`, NumPy style: dimensions are aligned at the right, a missing or
    /// size-1 dimension gets stride 0. `None` when `self` does not broadcast to `target`.
    pub fn broadcast_strides(&self, target: &Shape) -> Option<Vec<usize>> {
        if !self.broadcasts_to(target) {
            return None;
        }
        let own = self.strides();
        let offset = target.rank() - self.rank();
        Some(
            (0..target.rank())
                .map(|axis| {
                    if axis < offset || self.0[axis - offset] == 1 {
                        0
                    } else {
                        own[axis - offset]
                    }
                })
                .collect(),
        )
    }

    /// `true` when `self` broadcasts to exactly `target` (NumPy's `broadcast_to` rule).
    pub fn broadcasts_to(&self, target: &Shape) -> bool {
        if self.rank() > target.rank() {
            return false;
        }
        let offset = target.rank() - self.rank();
        self.0
            .iter()
            .enumerate()
            .all(|(i, &d)| d == 1 || d == target.0[i + offset])
    }

    /// The multi-index of linear index `linear` in this shape (row-major).
    pub fn unravel(&self, mut linear: usize, out: &mut [usize]) {
        for (slot, &dim) in out.iter_mut().zip(&self.0).rev() {
            if dim == 0 {
                *slot = 0;
            } else {
                *slot = linear % dim;
                linear /= dim;
            }
        }
    }
}

/// The NumPy broadcast of two shapes: dimensions aligned at the right, each pair equal or one
/// of them 1. `None` when they are incompatible.
pub fn broadcast_shapes(a: &Shape, b: &Shape) -> Option<Shape> {
    let rank = a.rank().max(b.rank());
    let mut dims = vec![0; rank];
    for (axis, dim) in dims.iter_mut().enumerate() {
        let da = if axis + a.rank() >= rank {
            a.0[axis + a.rank() - rank]
        } else {
            1
        };
        let db = if axis + b.rank() >= rank {
            b.0[axis + b.rank() - rank]
        } else {
            1
        };
        *dim = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(Shape(dims))
}

impl From<Vec<usize>> for Shape {
    fn from(dims: Vec<usize>) -> Shape {
        Shape(dims)
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(dims: [usize; N]) -> Shape {
        Shape(dims.to_vec())
    }
}

impl From<&[usize]> for Shape {
    fn from(dims: &[usize]) -> Shape {
        Shape(dims.to_vec())
    }
}

/// Prints as `[2,3]`; the scalar shape prints as `[]`.
impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// The type of a tensor value: a dtype and a static shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct TensorType {
    /// The element type.
    pub dtype: DType,
    /// The static shape.
    pub shape: Shape,
}

impl TensorType {
    /// A tensor type of the given dtype and shape.
    pub fn new(dtype: DType, shape: impl Into<Shape>) -> TensorType {
        TensorType {
            dtype,
            shape: shape.into(),
        }
    }

    /// A scalar (shape `[]`) of the given dtype.
    pub fn scalar(dtype: DType) -> TensorType {
        TensorType {
            dtype,
            shape: Shape::scalar(),
        }
    }

    /// Total size in bytes of a dense row-major buffer of this type.
    pub fn size_bytes(&self) -> usize {
        self.shape.numel().saturating_mul(self.dtype.size_bytes())
    }
}

/// Prints as `f32[2,3]` (scalars as `f32[]`).
impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}

/// Whether a buffer of `ty` can exist: its element count and byte size fit in `isize::MAX`
/// (Rust's limit on one allocation). Element counts elsewhere saturate, so a type past this
/// would be miscounted by every later stage.
pub(crate) fn fits_in_memory(ty: &TensorType) -> bool {
    ty.shape
        .dims()
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .and_then(|n| n.checked_mul(ty.dtype.size_bytes()))
        .is_some_and(|bytes| bytes <= isize::MAX as usize)
}
