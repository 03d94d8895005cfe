//! The checking crate's one error type.

use std::path::PathBuf;

/// Why a fuzzing run or a replay could not be carried out (a mismatch is not an error: it is
/// in the [`FuzzReport`](crate::FuzzReport)).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A file could not be read or written (a saved kernel, its directory).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A saved kernel is not valid HIR text.
    #[error("{}:{line}:{col}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        col: usize,
        /// What the parser expected.
        message: String,
    },
}
