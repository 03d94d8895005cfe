//! Host arrays: owned [`Array`]s and borrowed views over slices, with a static shape.
//!
//! Views let a caller hand its own `&[T]` / `&mut [T]` to an executor without copying.

use crate::{DType, Scalar, Shape};

/// An element type host arrays can hold: `bool`, `i32`, `f32`, `f64`.
pub trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The dtype of this element type.
    const DTYPE: DType;
    /// Wraps an owned vector.
    fn into_data(values: Vec<Self>) -> ArrayData;
    /// Borrows the vector inside `data` when it holds this element type.
    fn slice_of(data: &ArrayData) -> Option<&[Self]>;
    /// Borrows the elements inside `data` mutably (never the vector: its length stays) when it
    /// holds this element type.
    fn slice_mut_of(data: &mut ArrayData) -> Option<&mut [Self]>;
    /// Wraps a borrowed slice.
    fn data_ref(values: &[Self]) -> DataRef<'_>;
    /// Wraps a mutable slice.
    fn data_mut(values: &mut [Self]) -> DataMut<'_>;
    /// The scalar literal holding `self`.
    fn to_scalar(self) -> Scalar;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for bool {}
    impl Sealed for i32 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

macro_rules! element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn into_data(values: Vec<Self>) -> ArrayData {
                ArrayData::$variant(values)
            }
            fn slice_of(data: &ArrayData) -> Option<&[Self]> {
                match data {
                    ArrayData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut_of(data: &mut ArrayData) -> Option<&mut [Self]> {
                match data {
                    ArrayData::$variant(v) => Some(v.as_mut_slice()),
                    _ => None,
                }
            }
            fn data_ref(values: &[Self]) -> DataRef<'_> {
                DataRef::$variant(values)
            }
            fn data_mut(values: &mut [Self]) -> DataMut<'_> {
                DataMut::$variant(values)
            }
            fn to_scalar(self) -> Scalar {
                Scalar::$variant(self)
            }
        }
    };
}

element!(bool, Bool);
element!(i32, I32);
element!(f32, F32);
element!(f64, F64);

/// The elements of an owned array, row-major.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ArrayData {
    /// Booleans.
    Bool(Vec<bool>),
    /// 32-bit integers.
    I32(Vec<i32>),
    /// binary32 floats.
    F32(Vec<f32>),
    /// binary64 floats.
    F64(Vec<f64>),
}

/// Borrowed elements, row-major.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DataRef<'a> {
    /// Booleans.
    Bool(&'a [bool]),
    /// 32-bit integers.
    I32(&'a [i32]),
    /// binary32 floats.
    F32(&'a [f32]),
    /// binary64 floats.
    F64(&'a [f64]),
}

/// Mutably borrowed elements, row-major.
#[derive(Debug, PartialEq)]
pub enum DataMut<'a> {
    /// Booleans.
    Bool(&'a mut [bool]),
    /// 32-bit integers.
    I32(&'a mut [i32]),
    /// binary32 floats.
    F32(&'a mut [f32]),
    /// binary64 floats.
    F64(&'a mut [f64]),
}

macro_rules! data_common {
    ($ty:ident) => {
        impl $ty<'_> {
            /// The dtype of the elements.
            #[inline]
            pub fn dtype(&self) -> DType {
                match self {
                    $ty::Bool(_) => DType::Bool,
                    $ty::I32(_) => DType::I32,
                    $ty::F32(_) => DType::F32,
                    $ty::F64(_) => DType::F64,
                }
            }

            /// The number of elements.
            #[inline]
            pub fn len(&self) -> usize {
                match self {
                    $ty::Bool(v) => v.len(),
                    $ty::I32(v) => v.len(),
                    $ty::F32(v) => v.len(),
                    $ty::F64(v) => v.len(),
                }
            }

            /// `true` when there are no elements.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// Element `index` as a scalar, if in range.
            pub fn get(&self, index: usize) -> Option<Scalar> {
                match self {
                    $ty::Bool(v) => v.get(index).map(|&x| Scalar::Bool(x)),
                    $ty::I32(v) => v.get(index).map(|&x| Scalar::I32(x)),
                    $ty::F32(v) => v.get(index).map(|&x| Scalar::F32(x)),
                    $ty::F64(v) => v.get(index).map(|&x| Scalar::F64(x)),
                }
            }
        }
    };
}

data_common!(DataRef);
data_common!(DataMut);

impl ArrayData {
    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        self.as_ref().dtype()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.as_ref().len()
    }

    /// `true` when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Borrows the elements.
    pub fn as_ref(&self) -> DataRef<'_> {
        match self {
            ArrayData::Bool(v) => DataRef::Bool(v),
            ArrayData::I32(v) => DataRef::I32(v),
            ArrayData::F32(v) => DataRef::F32(v),
            ArrayData::F64(v) => DataRef::F64(v),
        }
    }

    /// Borrows the elements mutably.
    pub fn as_mut(&mut self) -> DataMut<'_> {
        match self {
            ArrayData::Bool(v) => DataMut::Bool(v),
            ArrayData::I32(v) => DataMut::I32(v),
            ArrayData::F32(v) => DataMut::F32(v),
            ArrayData::F64(v) => DataMut::F64(v),
        }
    }

    /// `n` copies of `value`.
    pub fn filled(value: Scalar, n: usize) -> ArrayData {
        match value {
            Scalar::Bool(x) => ArrayData::Bool(vec![x; n]),
            Scalar::I32(x) => ArrayData::I32(vec![x; n]),
            Scalar::F32(x) => ArrayData::F32(vec![x; n]),
            Scalar::F64(x) => ArrayData::F64(vec![x; n]),
        }
    }

    /// Collects scalars of one dtype; `None` if any scalar has another dtype.
    pub fn from_scalars(dtype: DType, values: impl IntoIterator<Item = Scalar>) -> Option<ArrayData> {
        let iter = values.into_iter();
        Some(match dtype {
            DType::Bool => ArrayData::Bool(
                iter.map(|s| if let Scalar::Bool(x) = s { Some(x) } else { None })
                    .collect::<Option<_>>()?,
            ),
            DType::I32 => ArrayData::I32(
                iter.map(|s| if let Scalar::I32(x) = s { Some(x) } else { None })
                    .collect::<Option<_>>()?,
            ),
            DType::F32 => ArrayData::F32(
                iter.map(|s| if let Scalar::F32(x) = s { Some(x) } else { None })
                    .collect::<Option<_>>()?,
            ),
            DType::F64 => ArrayData::F64(
                iter.map(|s| if let Scalar::F64(x) = s { Some(x) } else { None })
                    .collect::<Option<_>>()?,
            ),
        })
    }
}

/// A shape or length disagreement when making an array or view.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("shape {shape} needs {expected} elements, got {found}")]
pub struct ArrayLengthError {
    /// The shape asked for.
    pub shape: Shape,
    /// Its element count.
    pub expected: usize,
    /// The elements supplied.
    pub found: usize,
}

#[inline]
fn check_len(shape: &Shape, found: usize) -> Result<(), ArrayLengthError> {
    let expected = shape.numel();
    if expected == found {
        Ok(())
    } else {
        Err(length_error(shape, expected, found))
    }
}

#[cold]
#[inline(never)]
fn length_error(shape: &Shape, expected: usize, found: usize) -> ArrayLengthError {
    ArrayLengthError {
        shape: shape.clone(),
        expected,
        found,
    }
}

/// An owned host array: a shape and row-major elements of one dtype.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Array {
    shape: Shape,
    data: ArrayData,
}

impl Array {
    /// An array of `shape` holding `data`; fails when the lengths disagree.
    pub fn new(shape: impl Into<Shape>, data: ArrayData) -> Result<Array, ArrayLengthError> {
        let shape = shape.into();
        check_len(&shape, data.len())?;
        Ok(Array { shape, data })
    }

    /// An array of `shape` holding `values`; fails when the lengths disagree.
    pub fn from_vec<T: Element>(shape: impl Into<Shape>, values: Vec<T>) -> Result<Array, ArrayLengthError> {
        Array::new(shape, T::into_data(values))
    }

    /// A one-dimensional array holding `values`.
    pub fn from_slice<T: Element>(values: &[T]) -> Array {
        Array {
            shape: Shape::new([values.len()]),
            data: T::into_data(values.to_vec()),
        }
    }

    /// A scalar (shape `[]`) array.
    pub fn scalar(value: Scalar) -> Array {
        Array {
            shape: Shape::scalar(),
            data: ArrayData::filled(value, 1),
        }
    }

    /// An array of `shape` with every element `value`.
    pub fn filled(value: Scalar, shape: impl Into<Shape>) -> Array {
        let shape = shape.into();
        let data = ArrayData::filled(value, shape.numel());
        Array { shape, data }
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The elements.
    pub fn data(&self) -> &ArrayData {
        &self.data
    }

    /// The elements, mutably (the length cannot change).
    pub fn data_mut(&mut self) -> DataMut<'_> {
        self.data.as_mut()
    }

    /// Consumes the array, returning its elements.
    pub fn into_data(self) -> ArrayData {
        self.data
    }

    /// The elements as a slice of `T`, or `None` when the dtype is not `T`'s.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        T::slice_of(&self.data)
    }

    /// The elements as a mutable slice of `T` (the length cannot change), or `None` when the
    /// dtype is not `T`'s.
    pub fn as_slice_mut<T: Element>(&mut self) -> Option<&mut [T]> {
        T::slice_mut_of(&mut self.data)
    }

    /// Element `index` (row-major) as a scalar.
    pub fn get(&self, index: usize) -> Option<Scalar> {
        self.data.as_ref().get(index)
    }

    /// The elements widened to `f64` (bools as 0/1).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.data.len())
            .filter_map(|i| self.get(i))
            .map(Scalar::to_f64)
            .collect()
    }

    /// A borrowed view of the whole array.
    pub fn view(&self) -> ArrayView<'_> {
        ArrayView {
            shape: &self.shape,
            data: self.data.as_ref(),
        }
    }

    /// A mutable view of the whole array.
    pub fn view_mut(&mut self) -> ArrayViewMut<'_> {
        ArrayViewMut {
            shape: &self.shape,
            data: self.data.as_mut(),
        }
    }
}

/// A borrowed, read-only array: a shape and a slice, no copy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArrayView<'a> {
    shape: &'a Shape,
    data: DataRef<'a>,
}

impl<'a> ArrayView<'a> {
    /// A view of `values` as `shape`; fails when the lengths disagree.
    #[inline]
    pub fn new<T: Element>(shape: &'a Shape, values: &'a [T]) -> Result<ArrayView<'a>, ArrayLengthError> {
        ArrayView::from_data(shape, T::data_ref(values))
    }

    /// A view of untyped borrowed data as `shape`; fails when the lengths disagree.
    #[inline]
    pub fn from_data(shape: &'a Shape, data: DataRef<'a>) -> Result<ArrayView<'a>, ArrayLengthError> {
        check_len(shape, data.len())?;
        Ok(ArrayView { shape, data })
    }

    /// The shape.
    #[inline]
    pub fn shape(&self) -> &'a Shape {
        self.shape
    }

    /// The dtype.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The elements.
    #[inline]
    pub fn data(&self) -> DataRef<'a> {
        self.data
    }

    /// Copies the view into an owned array.
    pub fn to_owned(&self) -> Array {
        let data = match self.data {
            DataRef::Bool(v) => ArrayData::Bool(v.to_vec()),
            DataRef::I32(v) => ArrayData::I32(v.to_vec()),
            DataRef::F32(v) => ArrayData::F32(v.to_vec()),
            DataRef::F64(v) => ArrayData::F64(v.to_vec()),
        };
        Array {
            shape: self.shape.clone(),
            data,
        }
    }
}

/// A borrowed, writable array: a shape and a mutable slice, no copy.
#[derive(Debug, PartialEq)]
pub struct ArrayViewMut<'a> {
    shape: &'a Shape,
    data: DataMut<'a>,
}

impl<'a> ArrayViewMut<'a> {
    /// A mutable view of `values` as `shape`; fails when the lengths disagree.
    #[inline]
    pub fn new<T: Element>(
        shape: &'a Shape,
        values: &'a mut [T],
    ) -> Result<ArrayViewMut<'a>, ArrayLengthError> {
        ArrayViewMut::from_data(shape, T::data_mut(values))
    }

    /// A mutable view of untyped borrowed data as `shape`; fails when the lengths disagree.
    #[inline]
    pub fn from_data(shape: &'a Shape, data: DataMut<'a>) -> Result<ArrayViewMut<'a>, ArrayLengthError> {
        check_len(shape, data.len())?;
        Ok(ArrayViewMut { shape, data })
    }

    /// The shape.
    #[inline]
    pub fn shape(&self) -> &Shape {
        self.shape
    }

    /// The dtype.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The elements, mutably.
    #[inline]
    pub fn data_mut(&mut self) -> &mut DataMut<'a> {
        &mut self.data
    }

    /// The elements.
    #[inline]
    pub fn data(&self) -> &DataMut<'a> {
        &self.data
    }
}
