//! Arrays printed on stdout: nested brackets on one line, each dtype in its own form, long
//! arrays summarised as NumPy's `repr` summarises them.
//!
//! - `int32` prints as integers (`[1, -2, 3]`), `bool` as `true` and `false`;
//! - `float32` prints the shortest digits that read back as the same `float32` (`2.9092975`,
//!   not the `float64` widening `2.909297466278076`), `float64` the shortest for a `float64`;
//!   both keep a `.0` on whole numbers, and print `NaN`, `inf` and `-inf`;
//! - an array of more than [`THRESHOLD`] elements shows only the first and last [`EDGE_ITEMS`]
//!   entries of each axis longer than twice that, with `...` for the rest (NumPy's
//!   `threshold=1000, edgeitems=3`);
//! - a 0-d array prints as its one element.
//!
//! The walk over the axes keeps an explicit stack, so an array of any rank prints without
//! recursion.

use std::io::{self, Write};

use rfx::{Array, ArrayData};

/// More elements than this and the array is summarised (NumPy's default `threshold`).
pub(crate) const THRESHOLD: usize = 1000;

/// The entries shown at each end of a summarised axis (NumPy's default `edgeitems`).
pub(crate) const EDGE_ITEMS: usize = 3;

/// Writes the elements of `array`, e.g. `[[1.0, 2.5], [3.0, 4.0]]`.
pub(crate) fn write_array(out: &mut dyn Write, array: &Array) -> io::Result<()> {
    let dims = array.shape().dims();
    match array.data() {
        ArrayData::F32(v) => write_nested(out, dims, |out, i| write!(out, "{:?}", v[i])),
        ArrayData::F64(v) => write_nested(out, dims, |out, i| write!(out, "{:?}", v[i])),
        ArrayData::I32(v) => write_nested(out, dims, |out, i| write!(out, "{}", v[i])),
        ArrayData::Bool(v) => write_nested(out, dims, |out, i| write!(out, "{}", v[i])),
    }
}

/// The indices of an axis of length `len` to show: all of them, or the edges with `None` for
/// the `...` between.
fn shown(len: usize, summarise: bool) -> Vec<Option<usize>> {
    if summarise && len > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS)
            .map(Some)
            .chain([None])
            .chain((len - EDGE_ITEMS..len).map(Some))
            .collect()
    } else {
        (0..len).map(Some).collect()
    }
}

/// Writes a row-major array of shape `dims` whose element at flat index `i` `element` writes.
fn write_nested(
    out: &mut dyn Write,
    dims: &[usize],
    mut element: impl FnMut(&mut dyn Write, usize) -> io::Result<()>,
) -> io::Result<()> {
    let rank = dims.len();
    if rank == 0 {
        return element(out, 0);
    }
    let numel = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let summarise = numel.is_none_or(|n| n > THRESHOLD);
    let axes: Vec<Vec<Option<usize>>> = dims.iter().map(|&d| shown(d, summarise)).collect();
    // Row-major strides (an element's flat index is below `numel`, so they do not overflow for
    // any axis whose entries are printed).
    let mut strides = vec![1usize; rank];
    for axis in (0..rank - 1).rev() {
        strides[axis] = strides[axis + 1].saturating_mul(dims[axis + 1]);
    }
    // `stack[a]` is the position in `axes[a]` of the entry being printed at axis `a`; the
    // stack holds the axes whose `[` is open.
    let mut stack: Vec<usize> = vec![0];
    out.write_all(b"[")?;
    while let Some(&position) = stack.last() {
        let axis = stack.len() - 1;
        let Some(&entry) = axes[axis].get(position) else {
            out.write_all(b"]")?;
            stack.pop();
            if let Some(parent) = stack.last_mut() {
                *parent += 1;
            }
            continue;
        };
        if position > 0 {
            out.write_all(b", ")?;
        }
        match entry {
            None => {
                out.write_all(b"...")?;
                stack[axis] += 1;
            }
            Some(_) if axis + 1 < rank => {
                out.write_all(b"[")?;
                stack.push(0);
            }
            Some(_) => {
                let flat = stack
                    .iter()
                    .zip(&axes)
                    .zip(&strides)
                    .map(|((&p, shown), &stride)| shown[p].unwrap_or(0) * stride)
                    .sum();
                element(out, flat)?;
                stack[axis] += 1;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(array: &Array) -> String {
        let mut out = Vec::new();
        write_array(&mut out, array).expect("write to a Vec");
        String::from_utf8(out).expect("utf-8")
    }

    fn array(dims: &[usize], data: ArrayData) -> Array {
        Array::new(rfx::Shape::new(dims.to_vec()), data).expect("consistent")
    }

    #[test]
    fn each_dtype_prints_in_its_own_form() {
        let f32s = array(
            &[4],
            ArrayData::F32(vec![1.0, 2.909_297_5, f32::NAN, f32::NEG_INFINITY]),
        );
        assert_eq!(printed(&f32s), "[1.0, 2.9092975, NaN, -inf]");
        let f64s = array(&[2], ArrayData::F64(vec![0.1, 2.909_297_466_278_076]));
        assert_eq!(printed(&f64s), "[0.1, 2.909297466278076]");
        assert_eq!(
            printed(&array(&[3], ArrayData::I32(vec![1, -2, 3]))),
            "[1, -2, 3]"
        );
        assert_eq!(
            printed(&array(&[2], ArrayData::Bool(vec![true, false]))),
            "[true, false]"
        );
        assert_eq!(printed(&array(&[], ArrayData::I32(vec![7]))), "7");
    }

    #[test]
    fn nested_and_empty_shapes() {
        let m = array(&[2, 3], ArrayData::I32((0..6).collect()));
        assert_eq!(printed(&m), "[[0, 1, 2], [3, 4, 5]]");
        assert_eq!(printed(&array(&[2, 0], ArrayData::I32(vec![]))), "[[], []]");
        assert_eq!(printed(&array(&[0], ArrayData::F32(vec![]))), "[]");
    }

    #[test]
    fn long_arrays_are_summarised_as_numpy_s_repr() {
        // np.arange(1000) is printed whole; np.arange(1001) as [0, 1, 2, ..., 998, 999, 1000].
        let whole = printed(&array(&[1000], ArrayData::I32((0..1000).collect())));
        assert_eq!(whole.matches(", ").count(), 999);
        let long = printed(&array(&[1001], ArrayData::I32((0..1001).collect())));
        assert_eq!(long, "[0, 1, 2, ..., 998, 999, 1000]");
        // np.arange(2000).reshape(40, 50): rows and columns both cut.
        let m = printed(&array(&[40, 50], ArrayData::I32((0..2000).collect())));
        assert_eq!(
            m,
            "[[0, 1, 2, ..., 47, 48, 49], [50, 51, 52, ..., 97, 98, 99], \
             [100, 101, 102, ..., 147, 148, 149], ..., [1850, 1851, 1852, ..., 1897, 1898, 1899], \
             [1900, 1901, 1902, ..., 1947, 1948, 1949], [1950, 1951, 1952, ..., 1997, 1998, 1999]]"
        );
        // A short axis in a long array is shown whole: np.arange(2000).reshape(2, 1000).
        let wide = printed(&array(&[2, 1000], ArrayData::I32((0..2000).collect())));
        assert_eq!(
            wide,
            "[[0, 1, 2, ..., 997, 998, 999], [1000, 1001, 1002, ..., 1997, 1998, 1999]]"
        );
    }

    #[test]
    fn a_high_rank_array_prints_without_recursion() {
        let dims = vec![1usize; 50_000];
        let text = printed(&array(&dims, ArrayData::F64(vec![0.5])));
        assert_eq!(text, format!("{}0.5{}", "[".repeat(50_000), "]".repeat(50_000)));
    }
}
