//! `.npy` files: f32, f64, i32 and bool arrays, C order.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use npyz::WriterBuilder;
use rfx::{Array, ArrayData};

use crate::CliError;

/// Reads `path` as an rfx array: a regular file only (not a device, FIFO or directory), read
/// no further than its header declares, then [`rfx_cli::npy_read::read_bytes`].
pub(crate) fn read(path: &Path) -> Result<Array, CliError> {
    let user = |message: String| CliError::User(format!("{}: {message}", path.display()));
    let (file, file_len) = open_regular(path).map_err(|e| match e {
        NotOpened::Io(e) => user(format!("cannot open: {e}")),
        not_regular => user(not_regular.to_string()),
    })?;
    let bytes = read_declared(&file, file_len).map_err(user)?;
    rfx_cli::npy_read::read_bytes(&bytes).map_err(user)
}

/// Reads a kernel file: a regular file only, as for `.npy` inputs (a FIFO or device must not
/// hang the command or fill its memory), as UTF-8 text.
pub(crate) fn read_text(path: &Path) -> Result<String, CliError> {
    let user = |message: String| CliError::User(format!("cannot read {}: {message}", path.display()));
    let (file, file_len) = open_regular(path).map_err(|e| user(e.to_string()))?;
    let mut text = String::new();
    let len = usize::try_from(file_len).unwrap_or(usize::MAX);
    text.try_reserve_exact(len)
        .map_err(|_| user(format!("its {file_len} bytes do not fit in memory")))?;
    (&file)
        .take(file_len)
        .read_to_string(&mut text)
        .map_err(|e| user(e.to_string()))?;
    Ok(text)
}

/// Why [`open_regular`] refused a path.
enum NotOpened {
    Io(std::io::Error),
    NotRegular,
}

impl std::fmt::Display for NotOpened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotOpened::Io(e) => write!(f, "{e}"),
            NotOpened::NotRegular => f.write_str("not a regular file (a directory, device or FIFO)"),
        }
    }
}

/// Opens `path` without blocking (a FIFO with no writer would block a plain open) and checks
/// that it is a regular file; returns it and its length.
fn open_regular(path: &Path) -> Result<(File, u64), NotOpened> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(NotOpened::Io)?;
    let meta = file.metadata().map_err(NotOpened::Io)?;
    if !meta.is_file() {
        return Err(NotOpened::NotRegular);
    }
    Ok((file, meta.len()))
}

/// The file's bytes up to the end of the data its header declares (fewer if the file is
/// shorter, which [`rfx_cli::npy_read::read_bytes`] then reports).
fn read_declared(file: &File, file_len: u64) -> Result<Vec<u8>, String> {
    let read_err = |e: std::io::Error| format!("cannot read: {e}");
    let mut bytes = Vec::new();
    file.take(12).read_to_end(&mut bytes).map_err(read_err)?;
    let header_end = rfx_cli::npy_read::header_end(&bytes, file_len)?;
    read_to(file, &mut bytes, header_end)?;
    let declared = rfx_cli::npy_read::declared_len(&bytes)?;
    let want = declared.min(usize::try_from(file_len).unwrap_or(usize::MAX));
    bytes
        .try_reserve_exact(want.saturating_sub(bytes.len()))
        .map_err(|_| format!("its {want} bytes do not fit in memory"))?;
    read_to(file, &mut bytes, want)?;
    Ok(bytes)
}

/// Reads from `file` until `bytes` holds `len` bytes or the file ends.
fn read_to(file: &File, bytes: &mut Vec<u8>, len: usize) -> Result<(), String> {
    let more = len.saturating_sub(bytes.len()) as u64;
    file.take(more)
        .read_to_end(bytes)
        .map(|_| ())
        .map_err(|e| format!("cannot read: {e}"))
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

/// Writes `array` as a `.npy` file to `out`.
pub(crate) fn write(out: &mut dyn Write, array: &Array) -> std::io::Result<()> {
    let shape: Vec<u64> = array.shape().dims().iter().map(|&d| d as u64).collect();
    match array.data() {
        ArrayData::F32(v) => write_data(out, &shape, v),
        ArrayData::F64(v) => write_data(out, &shape, v),
        ArrayData::I32(v) => write_data(out, &shape, v),
        ArrayData::Bool(v) => write_data(out, &shape, v),
    }
}
