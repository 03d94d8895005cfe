//! What the `rfx` command's test files share: running the binary, scratch directories and
//! `.npy` inputs.

// Each test file is its own crate and uses part of this module.
#![allow(dead_code, reason = "each test file uses part of the shared module")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use npyz::WriterBuilder;

/// The `rfx` binary cargo built for these tests.
pub(crate) const RFX: &str = env!("CARGO_BIN_EXE_rfx");

/// Runs `rfx` with `args` and waits for it.
pub(crate) fn rfx(args: &[&str]) -> Output {
    Command::new(RFX).args(args).output().expect("run rfx")
}

/// An empty scratch directory named by `tag` and this process (test binaries run as separate
/// processes, so two files never share one).
pub(crate) fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rfx-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Writes `values` of `shape` to `path` as NumPy would.
pub(crate) fn write_npy<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], values: &[T]) {
    let file = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(file)
        .begin_nd()
        .expect("begin");
    writer.extend(values.iter().copied()).expect("extend");
    writer.finish().expect("finish");
}

/// The shape and elements of the `.npy` file at `path`.
pub(crate) fn read_npy<T: npyz::Deserialize>(path: &Path) -> (Vec<u64>, Vec<T>) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let npy = npyz::NpyFile::new(std::io::BufReader::new(file)).expect("npy");
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<T>().expect("data"))
}

/// A file committed under `tests/data`.
pub(crate) fn data_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// `rfx`'s stderr as text.
pub(crate) fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `rfx`'s stdout as text.
pub(crate) fn stdout_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
