//! `cargo xtask wrenfold-bench`: wrenfold's four robotics kernels (`QuatLocalCoords`,
//! `ImuIntegration`, `QuatInterpolation`, `RollingShutterCamera`, with their Jacobians),
//! rfx against hand-written Rust, timed in one run.
//!
//! ```text
//! cargo xtask wrenfold-bench [--rounds N] [--batch N] [--calls N] [--out DIR] [--markdown FILE]
//! ```
//!
//! Builds `benches/wrenfold` (`cargo build --release -p wrenfold-bench`) and runs its binary,
//! which times, per kernel and in alternating rounds, rfx's `vmap` over a batch (one bound call
//! on the CPU backend) against the hand-written function in a loop, and one evaluation through
//! the bound call against one hand-written call (see `benches/wrenfold/src/main.rs`). Prints
//! the table with the machine, date and commit, writes `DIR/wrenfold-bench.json` (default
//! `target/wrenfold-bench`) and, with `--markdown`, the same text to FILE.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary's flags this command passes on.
const PASSED: [&str; 3] = ["rounds", "batch", "calls"];

/// Runs the benchmark; prints the table.
pub(crate) fn wrenfold_bench(root: &Path, args: &[String]) -> Result<(), String> {
    let flags = crate::perf::flags(args)?;
    if let Some(unknown) = flags
        .keys()
        .find(|k| !PASSED.contains(&k.as_str()) && !["out", "markdown"].contains(&k.as_str()))
    {
        return Err(format!(
            "unknown flag `--{unknown}` (wrenfold-bench takes --rounds N, --batch N, --calls N, --out DIR, --markdown FILE)"
        ));
    }
    let out = flags
        .get("out")
        .map_or_else(|| root.join("target/wrenfold-bench"), PathBuf::from);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    eprintln!("wrenfold-bench: cargo build --release -p wrenfold-bench");
    let status = crate::cargo(root)
        .args(["build", "--release", "--quiet", "-p", "wrenfold-bench"])
        .status()
        .map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err(format!(
            "cargo build --release -p wrenfold-bench failed: {status}"
        ));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let json = out.join("wrenfold-bench.json");
    let mut bench = Command::new(target.join("release/wrenfold-bench"));
    for name in PASSED {
        if let Some(value) = flags.get(name) {
            bench.arg(format!("--{name}")).arg(value);
        }
    }
    bench.arg("--json").arg(&json);
    let table = output_of(&mut bench)?;
    let date = output_of(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"])).unwrap_or_default();
    let commit = output_of(
        Command::new("git")
            .current_dir(root)
            .args(["describe", "--always", "--dirty"]),
    )
    .unwrap_or_default();
    let rustc = output_of(Command::new("rustc").arg("--version")).unwrap_or_default();
    let report = format!("{date}, commit {commit}, {rustc}\n{table}\n");
    println!("\n{report}");
    eprintln!("wrenfold-bench: wrote {}", json.display());
    if let Some(path) = flags.get("markdown") {
        std::fs::write(path, &report).map_err(|e| format!("{path}: {e}"))?;
        eprintln!("wrenfold-bench: wrote {path}");
    }
    Ok(())
}

/// The standard output of `command`, which must succeed (its standard error passes through).
fn output_of(command: &mut Command) -> Result<String, String> {
    let out = command
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("{command:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{command:?} failed: {}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
