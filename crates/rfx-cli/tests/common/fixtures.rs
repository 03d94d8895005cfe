//! File fixtures shared by the library's unit tests (`src/lib.rs` includes this file) and the
//! integration tests: a directory's listing and hand-made `.npy` bytes.

use std::path::Path;

/// The names in `dir`, sorted.
pub(crate) fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A version-1 `.npy` file of `descr` and `shape` (Python tuple syntax) followed by `data`:
/// magic, header padded to a multiple of 64 bytes, then `data`, whatever they claim.
pub(crate) fn raw_npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&u16::try_from(header.len()).expect("short header").to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}
