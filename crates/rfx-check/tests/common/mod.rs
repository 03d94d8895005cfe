//! Shared by the random-kernel tests.

use rfx_ir::Array;

/// The same shape, dtype and value bits (`Scalar` compares bits), any NaN matching any NaN.
pub(crate) fn same_values(a: &Array, b: &Array) -> bool {
    a.shape() == b.shape()
        && a.dtype() == b.dtype()
        && (0..a.data().len()).all(|i| {
            let (x, y) = (a.get(i), b.get(i));
            x == y
                || x.zip(y)
                    .is_some_and(|(x, y)| x.to_f64().is_nan() && y.to_f64().is_nan())
        })
}
