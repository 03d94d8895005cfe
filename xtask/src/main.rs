//! `cargo xtask`: repository chores for rfx.
//!
//! Commands:
//! - `cargo xtask deps`: checks every crate's `Cargo.toml` against the layering rules of
//!   `ARCHITECTURE.md` (which workspace crates and which heavy third-party crates each crate may
//!   depend on) and exits non-zero on a violation.
//!
//! xtask depends on no rfx crate, so it builds even when the compiler crates do not.

mod deps;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("deps") => match deps::check_workspace(&workspace_root()) {
            Ok(report) => {
                println!("{report}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("usage: cargo xtask <command>\n\ncommands:\n  deps    check the crate layering rules");
            ExitCode::from(2)
        }
    }
}

/// The workspace root: the parent of this crate's manifest directory.
fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}
