//! Reading `.npy` data from bytes, with every header field checked before anything is
//! allocated: a header that claims more elements than the bytes hold is an error, not a huge
//! allocation.
//!
//! rfx computes in `float32`, `float64`, `int32` and `bool`. Other integer dtypes (NumPy's
//! default `int64`, as `np.arange` makes, and `int8`, `int16`, `uint8`, `uint16`, `uint32`)
//! are converted to `int32` after a range check, as the Python package converts them: a value
//! outside `int32` is an error naming the range found. `uint64` is refused, as there. An array
//! saved in Fortran order is transposed on reading into rfx's row-major (C) order.
//!
//! Self-contained (npyz, rfx-ir and std only) so that the cargo-fuzz target in `fuzz/` can
//! include this file directly.

use npyz::TypeChar;
use rfx_ir::{Array, ArrayData, Shape};

/// Parses a whole `.npy` file held in memory. The error is one line for the user.
///
/// npyz multiplies the header's dimensions without checking for overflow (a panic with
/// overflow checks on), so the parse runs under `catch_unwind` and such a header is an error
/// like any other malformed one; this function never panics.
pub fn read_bytes(bytes: &[u8]) -> Result<Array, String> {
    std::panic::catch_unwind(|| read_checked(bytes))
        .unwrap_or_else(|_| Err("not a valid .npy file: its header's shape overflows".to_string()))
}

fn read_checked(bytes: &[u8]) -> Result<Array, String> {
    check_header_length(bytes)?;
    let npy = npyz::NpyFile::new(bytes).map_err(|e| format!("not a valid .npy file: {e}"))?;
    let (shape, type_str, needed) = layout(&npy)?;
    // The data follows the header inside `bytes`, so it can hold at most `bytes.len()` bytes:
    // a shape that needs more is a lie, and must not become an allocation of that size.
    if needed > bytes.len() {
        return Err(format!(
            "the header's shape {shape:?} needs {needed} bytes of data, the file has {} in all",
            bytes.len()
        ));
    }
    let fortran = npy.order() == npyz::Order::Fortran;
    let read_err = |e: std::io::Error| format!("cannot read the data: {e}");
    let data = match (type_str.type_char(), type_str.size_field()) {
        (TypeChar::Float, 4) => ArrayData::F32(npy.into_vec::<f32>().map_err(read_err)?),
        (TypeChar::Float, 8) => ArrayData::F64(npy.into_vec::<f64>().map_err(read_err)?),
        (TypeChar::Int, 4) => ArrayData::I32(npy.into_vec::<i32>().map_err(read_err)?),
        (TypeChar::Int, 1) => ArrayData::I32(to_i32(&npy.into_vec::<i8>().map_err(read_err)?, &type_str)?),
        (TypeChar::Int, 2) => ArrayData::I32(to_i32(&npy.into_vec::<i16>().map_err(read_err)?, &type_str)?),
        (TypeChar::Int, 8) => ArrayData::I32(to_i32(&npy.into_vec::<i64>().map_err(read_err)?, &type_str)?),
        (TypeChar::Uint, 1) => ArrayData::I32(to_i32(&npy.into_vec::<u8>().map_err(read_err)?, &type_str)?),
        (TypeChar::Uint, 2) => ArrayData::I32(to_i32(&npy.into_vec::<u16>().map_err(read_err)?, &type_str)?),
        (TypeChar::Uint, 4) => ArrayData::I32(to_i32(&npy.into_vec::<u32>().map_err(read_err)?, &type_str)?),
        _ => ArrayData::Bool(npy.into_vec::<bool>().map_err(read_err)?),
    };
    let data = if fortran { fortran_to_c(data, &shape) } else { data };
    Array::new(Shape::new(shape), data).map_err(|e| format!("inconsistent header: {e}"))
}

/// Integers of another dtype as `int32`, or an error naming the range found when one does not
/// fit (the Python package's rule and wording).
fn to_i32<T: Copy + Into<i64>>(values: &[T], type_str: &npyz::TypeStr) -> Result<Vec<i32>, String> {
    let mut out = Vec::new();
    out.try_reserve_exact(values.len())
        .map_err(|_| format!("its {} elements do not fit in memory", values.len()))?;
    for &v in values {
        match i32::try_from(v.into()) {
            Ok(v) => out.push(v),
            Err(_) => {
                let wide = || values.iter().map(|&v| v.into());
                let (lo, hi) = (wide().min().unwrap_or(0), wide().max().unwrap_or(0));
                return Err(format!(
                    "integer values from {lo} to {hi} (dtype `{type_str}`) do not fit int32, the \
                     integer dtype of rfx (convert to float64 first)"
                ));
            }
        }
    }
    Ok(out)
}

/// Data in Fortran (column-major) order of `shape` rearranged into C (row-major) order.
fn fortran_to_c(data: ArrayData, shape: &[usize]) -> ArrayData {
    fn reorder<T: Copy>(values: Vec<T>, shape: &[usize]) -> Vec<T> {
        if shape.len() < 2 || values.is_empty() {
            return values;
        }
        // Fortran strides: the first axis varies fastest.
        let mut strides = Vec::with_capacity(shape.len());
        let mut stride = 1usize;
        for &d in shape {
            strides.push(stride);
            stride = stride.saturating_mul(d);
        }
        let mut index = vec![0usize; shape.len()];
        let mut out = Vec::with_capacity(values.len());
        let mut offset = 0usize;
        for _ in 0..values.len() {
            out.push(values[offset]);
            // Step the C-order odometer (last axis fastest), moving the Fortran offset along.
            for axis in (0..shape.len()).rev() {
                index[axis] += 1;
                offset += strides[axis];
                if index[axis] < shape[axis] {
                    break;
                }
                offset -= strides[axis] * shape[axis];
                index[axis] = 0;
            }
        }
        out
    }
    match data {
        ArrayData::F32(v) => ArrayData::F32(reorder(v, shape)),
        ArrayData::F64(v) => ArrayData::F64(reorder(v, shape)),
        ArrayData::I32(v) => ArrayData::I32(reorder(v, shape)),
        ArrayData::Bool(v) => ArrayData::Bool(reorder(v, shape)),
    }
}

/// The shape, the element type and the bytes of data a parsed header declares, every field
/// checked. A shape with a zero dimension is empty whatever its other dimensions are.
fn layout<R: std::io::Read>(npy: &npyz::NpyFile<R>) -> Result<(Vec<usize>, npyz::TypeStr, usize), String> {
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("dimension {d} is too large")))
        .collect::<Result<_, _>>()?;
    let npyz::DType::Plain(type_str) = npy.dtype() else {
        return Err("structured arrays are not supported".into());
    };
    let item: usize = match (type_str.type_char(), type_str.size_field()) {
        (TypeChar::Float, 4) | (TypeChar::Int, 4) | (TypeChar::Uint, 4) => 4,
        (TypeChar::Float, 8) | (TypeChar::Int, 8) => 8,
        (TypeChar::Int, 2) | (TypeChar::Uint, 2) => 2,
        (TypeChar::Int, 1) | (TypeChar::Uint, 1) | (TypeChar::Bool, 1) => 1,
        _ => {
            return Err(format!(
                "dtype `{type_str}` is not supported (use float32, float64, bool or an integer \
                 dtype that fits int32)"
            ));
        }
    };
    let needed = if shape.contains(&0) {
        0
    } else {
        shape
            .iter()
            .try_fold(item, |acc: usize, &d| acc.checked_mul(d))
            .ok_or("the header's shape overflows")?
    };
    Ok((shape, type_str, needed))
}

/// Where the header text of a `.npy` file ends, from its first bytes (at least 12 of them, or
/// the whole file if shorter): the offset its header-length field gives, checked against
/// `file_len`. Reading a file this far and then to [`declared_len`] reads no more than the
/// header declares.
pub fn header_end(prefix: &[u8], file_len: u64) -> Result<usize, String> {
    if prefix.len() < 10 || !prefix.starts_with(b"\x93NUMPY") {
        return Err("not a valid .npy file: it does not start with the .npy magic bytes".into());
    }
    let (declared, start) = match prefix[6] {
        1 => (usize::from(u16::from_le_bytes([prefix[8], prefix[9]])), 10),
        2 | 3 => match prefix.get(8..12) {
            Some(&[a, b, c, d]) => (u32::from_le_bytes([a, b, c, d]) as usize, 12),
            _ => return Err("not a valid .npy file: truncated header".into()),
        },
        version => return Err(format!("not a valid .npy file: unknown format version {version}")),
    };
    let end = start + declared;
    if end as u64 > file_len {
        return Err(format!(
            "not a valid .npy file: the header claims {declared} bytes, the file has {file_len} in all"
        ));
    }
    Ok(end)
}

/// The length of the whole file that a complete header (the file's first [`header_end`]
/// bytes) declares: the header and its data.
pub fn declared_len(header: &[u8]) -> Result<usize, String> {
    std::panic::catch_unwind(|| {
        check_header_length(header)?;
        let npy = npyz::NpyFile::new(header).map_err(|e| format!("not a valid .npy file: {e}"))?;
        let (_, _, needed) = layout(&npy)?;
        header
            .len()
            .checked_add(needed)
            .ok_or_else(|| "the header's shape overflows".to_string())
    })
    .unwrap_or_else(|_| Err("not a valid .npy file: its header's shape overflows".to_string()))
}

/// npyz allocates the header length a file declares before reading it (up to 4 GiB in
/// format versions 2 and 3), so a header longer than the file is rejected first. Anything else
/// malformed is left to npyz, which reports it.
fn check_header_length(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 10 || !bytes.starts_with(b"\x93NUMPY") {
        return Ok(());
    }
    let (declared, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 => match bytes.get(8..12) {
            Some(&[a, b, c, d]) => (u32::from_le_bytes([a, b, c, d]) as usize, 12),
            _ => return Err("not a valid .npy file: truncated header".into()),
        },
        _ => return Ok(()),
    };
    if declared > bytes.len().saturating_sub(start) {
        return Err(format!(
            "not a valid .npy file: the header claims {declared} bytes, the file has {} in all",
            bytes.len()
        ));
    }
    // A header is a dict holding a shape tuple: nesting deeper than that is not a .npy file,
    // and npyz's parser takes exponential time on deeply nested brackets.
    let header = &bytes[start..start + declared];
    let mut depth = 0usize;
    for &b in header {
        match b {
            b'{' | b'[' | b'(' => {
                depth += 1;
                if depth > MAX_HEADER_NESTING {
                    return Err("not a valid .npy file: its header nests brackets too deeply".into());
                }
            }
            b'}' | b']' | b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// The deepest bracket nesting a header may have (a real one has 2: the dict and the shape).
const MAX_HEADER_NESTING: usize = 3;

#[cfg(test)]
mod tests {
    use super::read_bytes;
    use crate::fixtures::raw_npy;

    #[test]
    fn a_well_formed_file_reads_back() {
        let data: Vec<u8> = [1.5f32, -2.0, 0.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let array = read_bytes(&raw_npy("<f4", "(3,)", &data)).expect("valid");
        assert_eq!(array.to_f64_vec(), vec![1.5, -2.0, 0.25]);
    }

    #[test]
    fn a_header_claiming_more_data_than_the_file_holds_is_an_error_not_an_allocation() {
        // 2^40 f32 elements would be 4 TiB.
        let err = read_bytes(&raw_npy("<f4", "(1099511627776,)", &[0; 8])).expect_err("lying header");
        assert!(err.contains("needs 4398046511104 bytes"), "{err}");
        let err =
            read_bytes(&raw_npy("<f8", "(4294967296, 4294967296, 4294967296)", &[])).expect_err("overflow");
        assert!(err.contains("overflows"), "{err}");
        assert!(
            read_bytes(&raw_npy("<f4", "(4,)", &[0; 8])).is_err(),
            "truncated data"
        );
        assert!(read_bytes(b"not an npy file").is_err());
    }

    #[test]
    fn a_zero_dimension_makes_an_empty_array_whatever_the_others_are() {
        for shape in ["(4611686018427387904, 0)", "(0, 4611686018427387904)"] {
            let bytes = raw_npy("<f4", shape, &[]);
            let array = read_bytes(&bytes).unwrap_or_else(|e| panic!("{shape}: {e}"));
            assert_eq!(array.data().len(), 0, "{shape}");
            assert_eq!(array.shape().numel(), 0, "{shape}");
            let end = super::header_end(&bytes, bytes.len() as u64).expect("header");
            assert_eq!(end, bytes.len());
            assert_eq!(super::declared_len(&bytes[..end]), Ok(bytes.len()), "{shape}");
        }
    }

    #[test]
    fn the_declared_length_stops_at_the_header_s_data() {
        let data: Vec<u8> = [1.0f64, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut bytes = raw_npy("<f8", "(2,)", &data);
        let end = super::header_end(&bytes, bytes.len() as u64).expect("header");
        assert_eq!(end, bytes.len() - 16);
        assert_eq!(end % 64, 0, "the header is padded to 64 bytes");
        assert_eq!(super::declared_len(&bytes[..end]), Ok(end + 16));
        bytes.extend_from_slice(&[0xAA; 100]);
        assert_eq!(
            read_bytes(&bytes).expect("trailing bytes ignored").to_f64_vec(),
            [1.0, 2.0]
        );
        let err = super::header_end(&bytes[..40], 40).expect_err("header past the end");
        assert!(
            err.contains(&format!("the header claims {} bytes", end - 10)),
            "{err}"
        );
        assert!(super::header_end(b"PK\x03\x04 a zip file", 20).is_err());
    }

    #[test]
    fn a_header_length_beyond_the_file_is_an_error_not_an_allocation() {
        // Found by the cargo-fuzz target: version 2.0 declaring a 4 GiB header in 31 bytes.
        let bytes = [
            0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x02, 0x00, 0x76, 0x73, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0x20, 0x00, 0x20, 0x20, 0x20, 0xd8, 0xa6, 0x59, 0x59, 0x40, 0x59, 0x59, 0x60,
        ];
        let err = read_bytes(&bytes).expect_err("lying header length");
        assert!(err.contains("the header claims 4294931318 bytes"), "{err}");
    }

    #[test]
    fn a_deeply_nested_header_is_rejected_at_once() {
        // Found by the cargo-fuzz target: 16 nested braces took npyz's parser over 13 s.
        let bytes: &[u8] = b"\x93NUMPY\x01\x00v\x00{'descr': '|b1', 'fortran_!rdur': False, {{{{{{{{{{{{{{{{'cr': '|b1', 'fortran_order': False, 'sh\x00\x00\x00\x00\x00\x00\x00\x08,), }         shape': (4,), }           der";
        let err = read_bytes(bytes).expect_err("nested header");
        assert!(err.contains("nests brackets too deeply"), "{err}");
    }

    #[test]
    fn fortran_order_is_read_in_c_order() {
        // A 2x3x4 array whose element (i, j, k) is 100i + 10j + k, written column-major: the
        // file's n-th value is the element at i = n % 2, j = n / 2 % 3, k = n / 6.
        let values: Vec<i32> = (0..24)
            .map(|n| 100 * (n % 2) + 10 * (n / 2 % 3) + n / 6)
            .collect();
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut bytes = raw_npy("<i4", "(2, 3, 4)", &data);
        let at = bytes.windows(5).position(|w| w == b"False").expect("flag");
        bytes.splice(at..at + 5, *b"True ");
        let array = read_bytes(&bytes).expect("fortran");
        let want: Vec<f64> = (0..2)
            .flat_map(|i| (0..3).flat_map(move |j| (0..4).map(move |k| f64::from(100 * i + 10 * j + k))))
            .collect();
        assert_eq!(array.shape().dims(), [2, 3, 4]);
        assert_eq!(array.to_f64_vec(), want);
    }

    #[test]
    fn other_integer_dtypes_become_int32_within_its_range() {
        let big_endian: Vec<u8> = [-7i64, 2_147_483_647]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let array = read_bytes(&raw_npy(">i8", "(2,)", &big_endian)).expect("int64");
        assert_eq!(array.data(), &rfx_ir::ArrayData::I32(vec![-7, 2_147_483_647]));
        let array = read_bytes(&raw_npy("<u2", "(2,)", &[0xff, 0xff, 1, 0])).expect("uint16");
        assert_eq!(array.data(), &rfx_ir::ArrayData::I32(vec![65_535, 1]));
        let too_small: Vec<u8> = [0i64, -2_147_483_649]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let err = read_bytes(&raw_npy("<i8", "(2,)", &too_small)).expect_err("below int32");
        assert!(err.contains("from -2147483649 to 0"), "{err}");
        let err = read_bytes(&raw_npy("<u8", "(1,)", &[0; 8])).expect_err("uint64");
        assert!(err.contains("not supported"), "{err}");
    }
}
