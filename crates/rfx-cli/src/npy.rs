//! `.npy` files: f32, f64, i32 and bool arrays, C order.

use std::io::{BufWriter, Write};
use std::path::Path;

use npyz::WriterBuilder;
use rfx::{Array, ArrayData};

use crate::CliError;

/// Reads `path` as an rfx array (the whole file, then [`rfx_cli::npy_read::read_bytes`]).
pub(crate) fn read(path: &Path) -> Result<Array, CliError> {
    let user = |message: String| CliError::User(format!("{}: {message}", path.display()));
    let bytes = std::fs::read(path).map_err(|e| user(format!("cannot open: {e}")))?;
    rfx_cli::npy_read::read_bytes(&bytes).map_err(user)
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
