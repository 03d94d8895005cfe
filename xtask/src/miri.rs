//! `cargo xtask miri`: Miri (Rust's UB detector) over the crates that contain no JIT code.
//!
//! ```text
//! cargo xtask miri [--crate rfx-ir] [--all-tests] [--cases N]
//! ```
//!
//! Runs `cargo +nightly miri test` on `rfx-ir` (unit and integration tests) and `rfx-lower`
//! (unit tests), or on the `--crate`s given (unit tests only unless `--all-tests`), with
//! property tests cut to `--cases` cases (default 4: Miri runs code about a thousand times
//! slower than a release build; the long random loops take a sample under `cfg(miri)`) and host
//! isolation off so that tests can read their data files. Needs the nightly toolchain with the
//! `miri` and `rust-src` components (`rustup component add --toolchain nightly miri rust-src`).
//!
//! `rfx-opt` is not in the default set, and neither are `rfx-lower`'s integration tests: every
//! e-graph run goes through egg's timer (the `quanta` crate), which executes `cpuid` through
//! inline assembly, and Miri cannot execute inline assembly. Not part of CI: it takes minutes
//! per crate on two cores (`docs/errors.md` has the measured times).

use std::path::Path;
use std::process::Command;

/// The crates Miri checks by default, and whether with their integration tests: everything
/// below the code generators that does not run egg (see the module docs).
const DEFAULT_CRATES: [(&str, bool); 2] = [("rfx-ir", true), ("rfx-lower", false)];

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
    let runs: Vec<(String, bool)> = if crates.is_empty() {
        DEFAULT_CRATES
            .iter()
            .map(|&(name, all)| (name.to_string(), all))
            .collect()
    } else {
        crates.into_iter().map(|name| (name, all_tests)).collect()
    };
    let mut ok = true;
    for (name, all_tests) in &runs {
        let start = std::time::Instant::now();
        let mut command = Command::new("cargo");
        command
            .current_dir(root)
            .args(["+nightly", "miri", "test", "-p", name.as_str()])
            .env("MIRIFLAGS", "-Zmiri-disable-isolation")
            .env("PROPTEST_CASES", &cases)
            // insta finds the workspace through `cargo metadata` unless told; Miri cannot spawn.
            .env("INSTA_WORKSPACE_ROOT", root)
            .env("RFX_MIRI", "1");
        if !*all_tests {
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
