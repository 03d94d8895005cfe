//! `.npy` files: f32, f64, i32 and bool arrays, C order.

use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use npyz::{TypeChar, WriterBuilder};
use rfx::{Array, ArrayData, Shape};

use crate::CliError;

/// Reads `path` as an rfx array.
pub(crate) fn read(path: &Path) -> Result<Array, CliError> {
    let user = |message: String| CliError::User(format!("{}: {message}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| user(format!("cannot open: {e}")))?;
    let npy =
        npyz::NpyFile::new(BufReader::new(file)).map_err(|e| user(format!("not a valid .npy file: {e}")))?;
    if npy.order() == npyz::Order::Fortran {
        return Err(user(
            "Fortran-order arrays are not supported; save with np.ascontiguousarray".into(),
        ));
    }
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| user(format!("dimension {d} is too large"))))
        .collect::<Result<_, _>>()?;
    let npyz::DType::Plain(type_str) = npy.dtype() else {
        return Err(user("structured arrays are not supported".into()));
    };
    let read_err = |e: std::io::Error| user(format!("cannot read the data: {e}"));
    let data = match (type_str.type_char(), type_str.size_field()) {
        (TypeChar::Float, 4) => ArrayData::F32(npy.into_vec::<f32>().map_err(read_err)?),
        (TypeChar::Float, 8) => ArrayData::F64(npy.into_vec::<f64>().map_err(read_err)?),
        (TypeChar::Int, 4) => ArrayData::I32(npy.into_vec::<i32>().map_err(read_err)?),
        (TypeChar::Bool, 1) => ArrayData::Bool(npy.into_vec::<bool>().map_err(read_err)?),
        _ => {
            return Err(user(format!(
                "dtype `{type_str}` is not supported (use float32, float64, int32 or bool)"
            )));
        }
    };
    Array::new(Shape::new(shape), data).map_err(|e| user(format!("inconsistent header: {e}")))
}

fn write_data<T: npyz::AutoSerialize + Copy>(
    out: impl Write,
    shape: &[u64],
    values: &[T],
) -> std::io::Result<()> {
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(out)
        .begin_nd()?;
    writer.extend(values.iter().copied())?;
    writer.finish()
}

/// Writes `array` to `path` atomically (a temporary file renamed into place).
pub(crate) fn write(path: &Path, array: &Array) -> Result<(), CliError> {
    let shape: Vec<u64> = array.shape().dims().iter().map(|&d| d as u64).collect();
    let tmp = path.with_extension("npy.tmp");
    let result = (|| -> std::io::Result<()> {
        let mut out = BufWriter::new(std::fs::File::create(&tmp)?);
        match array.data() {
            ArrayData::F32(v) => write_data(&mut out, &shape, v)?,
            ArrayData::F64(v) => write_data(&mut out, &shape, v)?,
            ArrayData::I32(v) => write_data(&mut out, &shape, v)?,
            ArrayData::Bool(v) => write_data(&mut out, &shape, v)?,
        }
        out.flush()?;
        drop(out);
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::User(format!("cannot write {}: {e}", path.display()))
    })
}
