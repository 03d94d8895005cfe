//! Linear algebra on traced tensors, recorded as ordinary HIR ops at trace time: matrix
//! products, cross products and norms, and inverses, determinants and solves of small square
//! matrices (closed-form adjugates for 2×2 and 3×3, Gauss–Jordan elimination otherwise).

use rfx_ir::hir::BuildError;
use rfx_ir::{Array, BinaryOp, DType, ReduceOp, Shape};

use super::ops::{broadcast_error, concat, concat_ids, constant, contraction, reshaped, where_};
use super::tensor::{Axes, Tensor};

impl Tensor {
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
