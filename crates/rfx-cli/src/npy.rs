//! `.npy` files and `.npz` archives of them: reading (every dtype and order
//! [`rfx_cli::npy_read`] accepts) and writing (f32, f64, i32 and bool, C order).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use npyz::WriterBuilder;
use rfx::{Array, ArrayData};

use crate::CliError;

/// The first bytes of a zip archive (`np.savez` writes one).
const ZIP_MAGIC: &[u8; 4] = b"PK\x03\x04";

/// Reads `path` as an rfx array: a regular file only (not a device, FIFO or directory), read
/// no further than its header declares, then [`rfx_cli::npy_read::read_bytes`].
///
/// A `.npz` archive (recognised by its contents, whatever its name) gives its array `member`
/// (`x` or `x.npy`); without `member`, the one named `input` (the input's name, as
/// `np.savez(f, x=…)` stores `x`), else its only array.
pub(crate) fn read(path: &Path, member: Option<&str>, input: &str) -> Result<Array, CliError> {
    let user = |message: String| CliError::User(format!("{}: {message}", path.display()));
    let (mut file, file_len) = open_regular(path).map_err(|e| match e {
        NotOpened::Io(e) => user(format!("cannot open: {e}")),
        not_regular => user(not_regular.to_string()),
    })?;
    let mut magic = Vec::with_capacity(4);
    (&file)
        .take(4)
        .read_to_end(&mut magic)
        .and_then(|_| file.seek(SeekFrom::Start(0)))
        .map_err(|e| user(format!("cannot read: {e}")))?;
    if magic == ZIP_MAGIC {
        let (name, bytes) = read_npz_member(file, member, input).map_err(user)?;
        return rfx_cli::npy_read::read_bytes(&bytes)
            .map_err(|e| CliError::User(format!("{}:{name}: {e}", path.display())));
    }
    if let Some(member) = member {
        return Err(user(format!(
            "not a .npz archive, so it has no array `{member}` (a .npy file is given as NAME=FILE.npy)"
        )));
    }
    let bytes = read_declared(&file, file_len).map_err(user)?;
    rfx_cli::npy_read::read_bytes(&bytes).map_err(user)
}

/// The name and bytes (no further than its header declares) of one array of a `.npz` archive:
/// see [`read`].
fn read_npz_member(file: File, member: Option<&str>, input: &str) -> Result<(String, Vec<u8>), String> {
    let mut archive = zip::ZipArchive::new(file).map_err(|e| format!("not a valid .npz archive: {e}"))?;
    let names: Vec<String> = archive
        .file_names()
        .map(|name| name.map(|n| n.into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("not a valid .npz archive: {e}"))?;
    let find = |wanted: &str| {
        names
            .iter()
            .find(|n| *n == wanted || n.strip_suffix(".npy") == Some(wanted))
            .cloned()
    };
    let listed = || {
        let arrays: Vec<&str> = names
            .iter()
            .map(|n| n.strip_suffix(".npy").unwrap_or(n))
            .collect();
        if arrays.is_empty() {
            "it holds no arrays".to_string()
        } else {
            format!("it holds {}", arrays.join(", "))
        }
    };
    let name = match member {
        Some(member) => {
            find(member).ok_or_else(|| format!("no array `{member}` in the archive ({})", listed()))?
        }
        None => match (find(input), names.as_slice()) {
            (Some(name), _) => name,
            (None, [only]) => only.clone(),
            (None, _) => {
                return Err(format!(
                    "no array `{input}` in the archive ({}); name one: --in {input}=FILE.npz:ARRAY",
                    listed()
                ));
            }
        },
    };
    let entry = archive
        .by_name(&name)
        .map_err(|e| format!("cannot read `{name}` in the archive: {e}"))?;
    let size = entry.size();
    let bytes = read_declared(entry, size).map_err(|e| format!("{name}: {e}"))?;
    Ok((name.strip_suffix(".npy").unwrap_or(&name).to_string(), bytes))
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

/// The bytes of a `.npy` file of `file_len` bytes read from `file`, up to the end of the data
/// its header declares (fewer if the file is shorter, which
/// [`rfx_cli::npy_read::read_bytes`] then reports).
fn read_declared(mut file: impl Read, file_len: u64) -> Result<Vec<u8>, String> {
    let read_err = |e: std::io::Error| format!("cannot read: {e}");
    let mut bytes = Vec::new();
    (&mut file).take(12).read_to_end(&mut bytes).map_err(read_err)?;
    let header_end = rfx_cli::npy_read::header_end(&bytes, file_len)?;
    read_to(&mut file, &mut bytes, header_end)?;
    let declared = rfx_cli::npy_read::declared_len(&bytes)?;
    let want = declared.min(usize::try_from(file_len).unwrap_or(usize::MAX));
    bytes
        .try_reserve_exact(want.saturating_sub(bytes.len()))
        .map_err(|_| format!("its {want} bytes do not fit in memory"))?;
    read_to(&mut file, &mut bytes, want)?;
    Ok(bytes)
}

/// Reads from `file` until `bytes` holds `len` bytes or the file ends.
fn read_to(file: &mut impl Read, bytes: &mut Vec<u8>, len: usize) -> Result<(), String> {
    let more = len.saturating_sub(bytes.len()) as u64;
    file.by_ref()
        .take(more)
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
