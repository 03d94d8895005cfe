//! Group elements and tangents as arrays of their components (each a tensor of the batch
//! shape), and small matrices as arrays of rows: the Lie group code is written on these and
//! only the public functions split and stack tensors.

use std::ops::{Add, Mul, Sub};

use rfx_ir::Shape;

use crate::trace::{Tensor, concat};

/// A 3-vector's components.
pub(crate) type V3 = [Tensor; 3];
/// A 3×3 matrix's entries, row by row.
pub(crate) type M3 = [[Tensor; 3]; 3];
/// A quaternion's components `w, x, y, z`.
pub(crate) type Quat = [Tensor; 4];

/// The `N` components of `x` along its last axis, which must have `N` elements (else the
/// trace fails with [`rfx_ir::TypeError::AxisExtent`] naming `op`).
pub(crate) fn split<const N: usize>(op: &'static str, x: Tensor) -> [Tensor; N] {
    let x = x.expect_last_extent(op, N);
    let last = x.shape().rank().saturating_sub(1);
    std::array::from_fn(|i| x.index_axis(last, i))
}

/// `parts` (broadcast to one shape) stacked along a new last axis.
pub(crate) fn stack(parts: &[Tensor]) -> Tensor {
    let shape = parts
        .iter()
        .try_fold(Shape::scalar(), |acc, p| {
            rfx_ir::broadcast_shapes(&acc, &p.shape())
        })
        .unwrap_or_default();
    let mut column = shape.dims().to_vec();
    column.push(1);
    let columns: Vec<Tensor> = parts
        .iter()
        .map(|p| {
            let p = if p.shape() == shape {
                *p
            } else {
                p.broadcast_to(shape.clone())
            };
            p.reshape(column.clone())
        })
        .collect();
    concat(&columns, shape.rank())
}

/// The `R × C` matrix of `rows`, as a tensor `[.., R, C]`.
pub(crate) fn matrix<const R: usize, const C: usize>(rows: &[[Tensor; C]; R]) -> Tensor {
    let flat: Vec<Tensor> = rows.iter().flatten().copied().collect();
    let stacked = stack(&flat);
    let mut dims = stacked.shape().dims().to_vec();
    dims.pop();
    dims.extend([R, C]);
    stacked.reshape(dims)
}

/// A tensor of zeros shaped like `like`.
pub(crate) fn zero(like: Tensor) -> Tensor {
    like.full_like(0.0)
}

/// A tensor of ones shaped like `like`.
pub(crate) fn one(like: Tensor) -> Tensor {
    like.full_like(1.0)
}

/// `a × b`.
pub(crate) use cross_parts as cross;

/// The cross product `a × b` of 3-vectors given as components, of any type with `+`, `-` and
/// `*` (traced tensors of one batch shape, `f64`, a type that folds constants while tracing).
pub fn cross_parts<T>(a: [T; 3], b: [T; 3]) -> [T; 3]
where
    T: Copy + Add<Output = T> + Sub<Output = T> + Mul<Output = T>,
{
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// The Hamilton product `a ⊗ b` (apply `b`, then `a`) of quaternions given as components
/// `[w, x, y, z]`, of any type with `+`, `-` and `*`, as [`cross_parts`]; on unit quaternions
/// of `[.., 4]` tensors, [`so3_compose`](super::so3_compose).
pub fn quat_mul_parts<T>(a: [T; 4], b: [T; 4]) -> [T; 4]
where
    T: Copy + Add<Output = T> + Sub<Output = T> + Mul<Output = T>,
{
    let [aw, ax, ay, az] = a;
    let [bw, bx, by, bz] = b;
    [
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ]
}

/// `a · b`.
pub(crate) fn dot(a: V3, b: V3) -> Tensor {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// `[v]×`, the matrix of `u ↦ v × u`.
pub(crate) fn skew(v: V3) -> M3 {
    let z = zero(v[0]);
    [[z, -v[2], v[1]], [v[2], z, -v[0]], [-v[1], v[0], z]]
}

/// `a b`.
pub(crate) fn mat_mul(a: &M3, b: &M3) -> M3 {
    std::array::from_fn(|i| {
        std::array::from_fn(|j| a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j])
    })
}

/// `m v`.
pub(crate) fn mat_vec(m: &M3, v: V3) -> V3 {
    std::array::from_fn(|i| m[i][0] * v[0] + m[i][1] * v[1] + m[i][2] * v[2])
}

/// `mᵀ`.
pub(crate) fn transpose(m: &M3) -> M3 {
    std::array::from_fn(|i| std::array::from_fn(|j| m[j][i]))
}

/// `-m`.
pub(crate) fn mat_neg(m: &M3) -> M3 {
    std::array::from_fn(|i| std::array::from_fn(|j| -m[i][j]))
}

/// The identity shaped like `like`.
pub(crate) fn identity(like: Tensor) -> M3 {
    let (z, o) = (zero(like), one(like));
    [[o, z, z], [z, o, z], [z, z, o]]
}

/// The zero matrix shaped like `like`.
pub(crate) fn zeros(like: Tensor) -> M3 {
    let z = zero(like);
    [[z; 3]; 3]
}

/// The 6×6 matrix `[[a, b], [c, d]]` of 3×3 blocks.
pub(crate) fn blocks(a: &M3, b: &M3, c: &M3, d: &M3) -> [[Tensor; 6]; 6] {
    std::array::from_fn(|i| {
        std::array::from_fn(|j| match (i < 3, j < 3) {
            (true, true) => a[i][j],
            (true, false) => b[i][j - 3],
            (false, true) => c[i - 3][j],
            (false, false) => d[i - 3][j - 3],
        })
    })
}
