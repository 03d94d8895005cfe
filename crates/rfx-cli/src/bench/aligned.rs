//! Arrays whose elements start on a 64-byte boundary, for the timed calls: the peers' C driver
//! allocates with `posix_memalign(…, 64, …)`, and an allocator's 16-byte alignment would make
//! every other 32-byte vector access of a wide loop straddle two cache lines, so the two
//! would not be timed on the same footing.

use rfx_ir::{Array, ArrayData, ArrayView, ArrayViewMut, DataMut, DataRef, Scalar, Shape};

/// The alignment, in bytes, of every array's first element: a cache line.
pub(super) const ALIGN: usize = 64;

/// A copy of an array whose first element is `ALIGN`-aligned: its storage holds up to a cache
/// line of padding before the elements.
pub(super) struct Aligned {
    shape: Shape,
    storage: ArrayData,
    start: usize,
    len: usize,
}

impl Aligned {
    /// A copy of `array` starting on a cache line.
    pub(super) fn copy_of(array: &Array) -> anyhow::Result<Aligned> {
        let dtype = array.dtype();
        let len = array.data().len();
        let pad = ALIGN / dtype.size_bytes();
        let mut storage = ArrayData::filled(Scalar::zero(dtype), len + pad);
        let start = match storage.as_mut() {
            DataMut::Bool(v) => v.as_ptr().align_offset(ALIGN),
            DataMut::I32(v) => v.as_ptr().align_offset(ALIGN),
            DataMut::F32(v) => v.as_ptr().align_offset(ALIGN),
            DataMut::F64(v) => v.as_ptr().align_offset(ALIGN),
        }
        // `align_offset` may decline (`usize::MAX`) where it cannot compute the offset: the
        // copy then starts at the allocation, unaligned but correct.
        .min(pad);
        match (storage.as_mut(), array.data().as_ref()) {
            (DataMut::Bool(d), DataRef::Bool(s)) => d[start..start + len].copy_from_slice(s),
            (DataMut::I32(d), DataRef::I32(s)) => d[start..start + len].copy_from_slice(s),
            (DataMut::F32(d), DataRef::F32(s)) => d[start..start + len].copy_from_slice(s),
            (DataMut::F64(d), DataRef::F64(s)) => d[start..start + len].copy_from_slice(s),
            _ => anyhow::bail!("an aligned copy's storage differs from its array's dtype"),
        }
        Ok(Aligned {
            shape: array.shape().clone(),
            storage,
            start,
            len,
        })
    }

    /// The elements, as a view of the array's shape.
    pub(super) fn view(&self) -> anyhow::Result<ArrayView<'_>> {
        let range = self.start..self.start + self.len;
        let data = match self.storage.as_ref() {
            DataRef::Bool(v) => DataRef::Bool(&v[range]),
            DataRef::I32(v) => DataRef::I32(&v[range]),
            DataRef::F32(v) => DataRef::F32(&v[range]),
            DataRef::F64(v) => DataRef::F64(&v[range]),
        };
        Ok(ArrayView::from_data(&self.shape, data)?)
    }

    /// The elements, as a mutable view of the array's shape.
    pub(super) fn view_mut(&mut self) -> anyhow::Result<ArrayViewMut<'_>> {
        let range = self.start..self.start + self.len;
        let data = match self.storage.as_mut() {
            DataMut::Bool(v) => DataMut::Bool(&mut v[range]),
            DataMut::I32(v) => DataMut::I32(&mut v[range]),
            DataMut::F32(v) => DataMut::F32(&mut v[range]),
            DataMut::F64(v) => DataMut::F64(&mut v[range]),
        };
        Ok(ArrayViewMut::from_data(&self.shape, data)?)
    }

    /// Bytes of the elements.
    pub(super) fn bytes(&self) -> usize {
        self.len * self.storage.dtype().size_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_start_on_a_cache_line_and_keep_their_elements() -> anyhow::Result<()> {
        for n in [1usize, 3, 16, 1000] {
            let f32s = Array::from_vec([n], (0..n).map(|i| i as f32 * 0.5 - 3.0).collect::<Vec<f32>>())?;
            let f64s = Array::from_vec([n], (0..n).map(|i| i as f64 * 0.25 + 1.0).collect::<Vec<f64>>())?;
            let i32s = Array::from_vec([n], (0..n).map(|i| i as i32 - 7).collect::<Vec<i32>>())?;
            let bools = Array::from_vec([n], (0..n).map(|i| i % 3 == 0).collect::<Vec<bool>>())?;
            for array in [f32s, f64s, i32s, bools] {
                let mut copy = Aligned::copy_of(&array)?;
                let view = copy.view()?;
                let address = match view.data() {
                    DataRef::Bool(v) => v.as_ptr() as usize,
                    DataRef::I32(v) => v.as_ptr() as usize,
                    DataRef::F32(v) => v.as_ptr() as usize,
                    DataRef::F64(v) => v.as_ptr() as usize,
                };
                assert_eq!(address % ALIGN, 0, "{:?} of {n}", array.dtype());
                assert_eq!(view.to_owned(), array);
                assert_eq!(copy.bytes(), n * array.dtype().size_bytes());
                let written = copy.view_mut()?;
                assert_eq!(written.shape(), array.shape());
            }
        }
        Ok(())
    }
}
