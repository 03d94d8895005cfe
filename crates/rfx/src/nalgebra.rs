//! Conversions between [nalgebra](https://nalgebra.rs)'s fixed-size types and rfx arrays (the
//! `nalgebra` feature).
//!
//! rfx arrays are **row-major**: a `[R, C]` array holds row 0, then row 1, and so on. nalgebra
//! stores its matrices **column-major**, so `m.as_slice()` of a nalgebra matrix handed to a
//! kernel as a `[R, C]` array is the transpose (a silent bug for any non-symmetric matrix).
//! Every function here goes through the matrix's `(row, column)` indices, never its storage:
//!
//! | nalgebra | rfx array | functions |
//! |---|---|---|
//! | `SVector<T, N>` | `[N]` | [`from_vector`], [`to_vector`] |
//! | `SMatrix<T, R, C>` | `[R, C]`, row-major | [`from_matrix`], [`to_matrix`], [`write_row_major`], [`read_row_major`] |
//! | `[SVector<T, N>]` | `[B, N]`, one vector per row | [`from_vectors`], [`to_vectors`] |
//! | `[SMatrix<T, R, C>]` | `[B, R, C]`, each row-major | [`from_matrices`], [`to_matrices`] |
//! | `UnitQuaternion<T>` | `[4]` = `[w, x, y, z]` (nalgebra stores `[x, y, z, w]`) | [`from_unit_quaternion`], [`to_unit_quaternion`] |
//! | `Isometry3<T>` | `[7]` = `[w, x, y, z, tx, ty, tz]`, [`crate::lie`]'s SE(3) | [`from_isometry3`], [`to_isometry3`] |
//! | `Isometry3<T>` | `[4, 4]`, the homogeneous matrix | [`from_isometry3_matrix`] |
//!
//! `T` is `f32` or `f64` (and, for vectors and matrices, `i32` or `bool`). The `from_*`
//! functions allocate an [`Array`]; [`write_row_major`] and [`read_row_major`] copy to and from
//! plain slices, for the buffers of a [`crate::BoundKernel`] in a loop that must not allocate.
//!
//! ```
//! use nalgebra::{Matrix2x3, Vector3};
//! use rfx::Tensor;
//!
//! // y = A x with A 2×3: the array of A is [2, 3], row-major.
//! let a = Matrix2x3::new(1.0, 2.0, 3.0, 4.0, 5.0, 6.0);
//! let x = Vector3::new(1.0, 0.0, -1.0);
//! let f = rfx::jit(|a: Tensor, x: Tensor| a.matmul(x.reshape(vec![3, 1])).reshape(vec![2]));
//! let out = f.call((&rfx::nalgebra::from_matrix(&a), &rfx::nalgebra::from_vector(&x)))?;
//! let y = rfx::nalgebra::to_vector::<f64, 2>(&out[0])?;
//! assert_eq!(y, a * x);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use ::nalgebra::{Isometry3, Quaternion, RealField, SMatrix, SVector, Scalar, Translation3, UnitQuaternion};
use rfx_ir::{Array, DType, Element};

/// A conversion from an rfx array (or slice) to a nalgebra type was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NalgebraError {
    /// The array's shape is not the one the nalgebra type needs.
    #[error("expected an array of shape {expected:?} for this nalgebra type, got {found:?}")]
    Shape {
        /// The shape the type needs (`[N]`, `[R, C]`, `[4]`, `[7]`).
        expected: Vec<usize>,
        /// The array's shape.
        found: Vec<usize>,
    },
    /// The array's dtype is not the nalgebra type's scalar.
    #[error("expected an array of {expected}, got {found}")]
    DType {
        /// The dtype of the scalar type asked for.
        expected: DType,
        /// The array's dtype.
        found: DType,
    },
    /// A slice does not have the matrix's number of elements.
    #[error("expected a slice of {expected} elements, got {found}")]
    Length {
        /// `R · C`.
        expected: usize,
        /// The slice's length.
        found: usize,
    },
    /// The quaternion `[w, x, y, z]` has a zero or non-finite norm: it is no rotation.
    #[error("the quaternion [w, x, y, z] = {0:?} has a zero or non-finite norm")]
    Quaternion([f64; 4]),
}

fn shape_error(array: &Array, expected: &[usize]) -> NalgebraError {
    NalgebraError::Shape {
        expected: expected.to_vec(),
        found: array.shape().dims().to_vec(),
    }
}

/// The elements of `array` as `T`, after checking its shape is `expected`.
fn elements<'a, T: Element>(array: &'a Array, expected: &[usize]) -> Result<&'a [T], NalgebraError> {
    if array.shape().dims() != expected {
        return Err(shape_error(array, expected));
    }
    array.as_slice::<T>().ok_or(NalgebraError::DType {
        expected: T::DTYPE,
        found: array.dtype(),
    })
}

/// A `[R, C]` array from `m`, row-major (`array[i, j] = m[(i, j)]`).
pub fn from_matrix<T: Element + Scalar, const R: usize, const C: usize>(m: &SMatrix<T, R, C>) -> Array {
    let mut values = Vec::with_capacity(R * C);
    for i in 0..R {
        for j in 0..C {
            values.push(m[(i, j)]);
        }
    }
    // `values` has the R·C elements of `[R, C]`, so the length check cannot fail.
    Array::from_vec([R, C], values).unwrap_or_else(|_| Array::from_slice::<T>(&[]))
}

/// The matrix of a `[R, C]` row-major array of `T`s (the inverse of [`from_matrix`]).
pub fn to_matrix<T: Element + Scalar, const R: usize, const C: usize>(
    array: &Array,
) -> Result<SMatrix<T, R, C>, NalgebraError> {
    let values = elements::<T>(array, &[R, C])?;
    Ok(SMatrix::from_fn(|i, j| values[i * C + j]))
}

/// Writes `m` into `out` row-major (`out[i·C + j] = m[(i, j)]`): the input buffer of a bound
/// kernel's `[R, C]` input, without allocating. A typed error when `out` is not `R·C` long.
pub fn write_row_major<T: Element + Scalar, const R: usize, const C: usize>(
    m: &SMatrix<T, R, C>,
    out: &mut [T],
) -> Result<(), NalgebraError> {
    if out.len() != R * C {
        return Err(NalgebraError::Length {
            expected: R * C,
            found: out.len(),
        });
    }
    for i in 0..R {
        for j in 0..C {
            out[i * C + j] = m[(i, j)];
        }
    }
    Ok(())
}

/// The matrix held row-major in `values` (a bound kernel's `[R, C]` output buffer), without
/// allocating. A typed error when `values` is not `R·C` long.
pub fn read_row_major<T: Element + Scalar, const R: usize, const C: usize>(
    values: &[T],
) -> Result<SMatrix<T, R, C>, NalgebraError> {
    if values.len() != R * C {
        return Err(NalgebraError::Length {
            expected: R * C,
            found: values.len(),
        });
    }
    Ok(SMatrix::from_fn(|i, j| values[i * C + j]))
}

/// A `[N]` array from `v`.
pub fn from_vector<T: Element + Scalar, const N: usize>(v: &SVector<T, N>) -> Array {
    Array::from_slice(v.as_slice())
}

/// The vector of a `[N]` array of `T`s.
pub fn to_vector<T: Element + Scalar, const N: usize>(array: &Array) -> Result<SVector<T, N>, NalgebraError> {
    let values = elements::<T>(array, &[N])?;
    Ok(SVector::from_fn(|i, _| values[i]))
}

/// The `[4]` array `[w, x, y, z]` of `q` (rfx's order, scalar first; nalgebra stores
/// `[x, y, z, w]`).
pub fn from_unit_quaternion<T: Element + RealField + Copy>(q: &UnitQuaternion<T>) -> Array {
    Array::from_slice(&[q.w, q.i, q.j, q.k])
}

/// The unit quaternion of a `[4]` array `[w, x, y, z]`, normalised (kernels in `f32` return
/// quaternions a few ulps off unit length); a typed error for a zero or non-finite norm.
pub fn to_unit_quaternion<T: Element + RealField + Copy>(
    array: &Array,
) -> Result<UnitQuaternion<T>, NalgebraError> {
    match *elements::<T>(array, &[4])? {
        [w, x, y, z] => unit_quaternion(w, x, y, z),
        // `elements` checked the shape `[4]`.
        _ => Err(shape_error(array, &[4])),
    }
}

fn unit_quaternion<T: Element + RealField + Copy>(
    w: T,
    x: T,
    y: T,
    z: T,
) -> Result<UnitQuaternion<T>, NalgebraError> {
    let q = Quaternion::new(w, x, y, z);
    let norm = q.norm();
    if norm.is_finite() && norm > T::zero() {
        Ok(UnitQuaternion::new_unchecked(q / norm))
    } else {
        let f = |v: T| v.to_scalar().to_f64();
        Err(NalgebraError::Quaternion([f(w), f(x), f(y), f(z)]))
    }
}

/// A `[B, N]` array of `B` vectors, one per row (a batch for a kernel mapped over axis 0).
pub fn from_vectors<T: Element + Scalar, const N: usize>(vectors: &[SVector<T, N>]) -> Array {
    let values: Vec<T> = vectors.iter().flat_map(|v| v.iter().cloned()).collect();
    // `values` has the B·N elements of `[B, N]`, so the length check cannot fail.
    Array::from_vec([vectors.len(), N], values).unwrap_or_else(|_| Array::from_slice::<T>(&[]))
}

/// The rows of a `[B, N]` array as `B` vectors (the inverse of [`from_vectors`]).
pub fn to_vectors<T: Element + Scalar, const N: usize>(
    array: &Array,
) -> Result<Vec<SVector<T, N>>, NalgebraError> {
    let batch = match array.shape().dims() {
        &[b, n] if n == N => b,
        _ => {
            return Err(shape_error(
                array,
                &[array.shape().dims().first().copied().unwrap_or(0), N],
            ));
        }
    };
    let values = elements::<T>(array, &[batch, N])?;
    Ok(values.chunks_exact(N).map(SVector::from_column_slice).collect())
}

/// A `[B, R, C]` array of `B` matrices, each row-major (`array[b, i, j] = matrices[b][(i, j)]`).
pub fn from_matrices<T: Element + Scalar, const R: usize, const C: usize>(
    matrices: &[SMatrix<T, R, C>],
) -> Array {
    let mut values = Vec::with_capacity(matrices.len() * R * C);
    for m in matrices {
        for i in 0..R {
            for j in 0..C {
                values.push(m[(i, j)]);
            }
        }
    }
    // `values` has the B·R·C elements of `[B, R, C]`, so the length check cannot fail.
    Array::from_vec([matrices.len(), R, C], values).unwrap_or_else(|_| Array::from_slice::<T>(&[]))
}

/// The `B` matrices of a `[B, R, C]` array of row-major matrices (the inverse of
/// [`from_matrices`]).
pub fn to_matrices<T: Element + Scalar, const R: usize, const C: usize>(
    array: &Array,
) -> Result<Vec<SMatrix<T, R, C>>, NalgebraError> {
    let batch = match array.shape().dims() {
        &[b, r, c] if (r, c) == (R, C) => b,
        _ => {
            return Err(shape_error(
                array,
                &[array.shape().dims().first().copied().unwrap_or(0), R, C],
            ));
        }
    };
    let values = elements::<T>(array, &[batch, R, C])?;
    Ok(values
        .chunks_exact(R * C)
        .map(|m| SMatrix::from_fn(|i, j| m[i * C + j]))
        .collect())
}

/// The `[7]` array `[w, x, y, z, tx, ty, tz]` of `pose` (the rotation, then the translation:
/// [`crate::lie`]'s SE(3) element).
pub fn from_isometry3<T: Element + RealField + Copy>(pose: &Isometry3<T>) -> Array {
    let (q, t) = (&pose.rotation, &pose.translation.vector);
    Array::from_slice(&[q.w, q.i, q.j, q.k, t[0], t[1], t[2]])
}

/// The isometry of a `[7]` array `[w, x, y, z, tx, ty, tz]`, its quaternion normalised as in
/// [`to_unit_quaternion`].
pub fn to_isometry3<T: Element + RealField + Copy>(array: &Array) -> Result<Isometry3<T>, NalgebraError> {
    match *elements::<T>(array, &[7])? {
        [w, x, y, z, tx, ty, tz] => {
            let rotation = unit_quaternion(w, x, y, z)?;
            Ok(Isometry3::from_parts(Translation3::new(tx, ty, tz), rotation))
        }
        // `elements` checked the shape `[7]`.
        _ => Err(shape_error(array, &[7])),
    }
}

/// The `[4, 4]` homogeneous matrix of `pose`, row-major (`[[R, t], [0, 0, 0, 1]]`).
pub fn from_isometry3_matrix<T: Element + RealField + Copy>(pose: &Isometry3<T>) -> Array {
    from_matrix(&pose.to_homogeneous())
}
