//! `cargo xtask miri`: Miri (Rust's UB detector) over the crates that contain no JIT code.
//!
//! ```text
//! cargo xtask miri [--crate rfx-ir] [--all-tests] [--cases N]
//! ```
//!
//! Runs `cargo +nightly miri test` on `rfx-ir`, `rfx-lower` and `rfx-opt` (or the `--crate`s
//! given), unit tests only unless `--all-tests`, with property tests cut to `--cases` cases
//! (default 4: Miri runs code about a thousand times slower than a release build) and host
//! isolation off so that tests can read their data files. Needs the nightly toolchain with the
//! `miri` and `rust-src` components (`rustup component add --toolchain nightly miri rust-src`).
//! Not part of CI: it takes minutes per crate on two cores (the run times are in the crates'
//! closing notes and `docs/errors.md`).

use std::path::Path;
use std::process::Command;

/// The crates Miri checks by default: everything below the code generators.
const DEFAULT_CRATES: [&str; 3] = ["rfx-ir", "rfx-lower", "rfx-opt"];

pub(crate) fn miri(root: &Path, args: &[String]) -> Result<bool, String> {
    let mut crates: Vec<String> = Vec::new();
    let mut all_tests = false;
    let mut cases = "4".to_string();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--crate" => crates.push(it.next().cloned().ok_or("--crate needs a name")?),
            "--all-tests" => all_tests = true,
            "--cases" => cases = it.next().cloned().ok_or("--cases needs a number")?,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if crates.is_empty() {
        crates = DEFAULT_CRATES.iter().map(ToString::to_string).collect();
    }
    let mut ok = true;
    for name in &crates {
        let start = std::time::Instant::now();
        let mut command = Command::new("cargo");
        command
            .current_dir(root)
            .args(["+nightly", "miri", "test", "-p", name])
            .env("MIRIFLAGS", "-Zmiri-disable-isolation")
            .env("PROPTEST_CASES", &cases)
            // insta finds the workspace through `cargo metadata` unless told; Miri cannot spawn.
            .env("INSTA_WORKSPACE_ROOT", root)
            .env("RFX_MIRI", "1");
        if !all_tests {
            command.arg("--lib");
        }
        let status = command
            .status()
            .map_err(|e| format!("running cargo +nightly miri (is the nightly toolchain installed?): {e}"))?;
        eprintln!(
            "miri: {name}: {} in {:.0} s",
            if status.success() { "clean" } else { "FAILED" },
            start.elapsed().as_secs_f64()
        );
        ok &= status.success();
    }
    Ok(ok)
}
