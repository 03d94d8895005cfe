//! `cargo xtask`: repository chores for rfx.
//!
//! Commands:
//! - `cargo xtask deps`: checks every crate's `Cargo.toml` against the layering rules of
//!   `ARCHITECTURE.md` (which workspace crates and which heavy third-party crates each crate may
//!   depend on) and exits non-zero on a violation.
//!
//! - `cargo xtask perf-check --baseline baselines/NAME.json --threshold-pct 10`: runs `rfx bench`
//!   and compares every kernel's time, normalised by a reference loop measured in the same run,
//!   with the baseline (best of `--repeat 3` runs; a kernel that looks slower is run again alone,
//!   `--confirm 2` more times); exits 1 when one is slower by more than the threshold.
//! - `cargo xtask bench-baseline --output baselines/NAME.json`: writes a new baseline.
//! - `cargo xtask icount [--bless]`: the instruction-count gate (CI runs it): the measured
//!   paths of `rfx-cli`'s example `icount` under callgrind, instructions per call against
//!   `baselines/icount-x86_64.json`; exits 1 when one executes more than 10% more (see
//!   `icount.rs`); `--bless` re-records the baseline.
//! - `cargo xtask peers [--markdown FILE]`: `rfx bench` and `../shared/peers/peers.py` at sizes
//!   1 to 1M, and rfx's speed ratio to NumPy, numexpr, JAX, numba, CasADi, tinygrad and gcc C.
//! - `cargo xtask export-bench [--rounds N] [--markdown FILE]`: rfx's exported C against CasADi's
//!   generated C and hand-written gcc C, timed from one C process (see `export_bench.rs`).
//! - `cargo xtask wrenfold-bench [--rounds N] [--markdown FILE]`: wrenfold's four robotics
//!   kernels with their Jacobians, rfx (`vmap` batches and one bound call) against hand-written
//!   Rust, timed in one run (see `wrenfold_bench.rs` and `benches/wrenfold`).
//! - `cargo xtask miri [--crate NAME] [--all-tests]`: Miri over rfx-ir, rfx-lower and rfx-opt
//!   (nightly; not in CI).
//! - `cargo xtask fuzz --minutes N`: the long mode of the differential fuzzer, `rfx fuzz` (release
//!   build) for N minutes, saving shrunk mismatches to `crates/rfx-cli/tests/regressions/`
//!   (which the CI quick mode replays); exits 1 on a mismatch.
//! - `cargo xtask gpu-bundle [--out DIR] [--fuzz-minutes M] [--fuzz-seed S]`: the binaries,
//!   NVRTC and a script that run the CUDA backend's GPU checks on a machine with a GPU but no
//!   Rust toolchain (see `gpu.rs`).
//! - `cargo xtask long-sums [--profile release] [--backend cpu]`: `sum`/`mean` of 10⁸ values and
//!   a broadcast sum of 10¹⁰ ones through `rfx eval`, each within the documented bound of the
//!   blocked pairwise reduction order of its closed form (see `sums.rs`).
//!
//! - `cargo xtask test [--python-only] [-- PYTEST_ARGS]`: every test, Rust and Python: `cargo
//!   test --workspace`, then the `rfxjit` extension built into `target/pyenv` with maturin and
//!   its pytest suite (see `pytest.rs`).
//!
//! xtask depends on no rfx crate, so it builds even when the compiler crates do not.

mod deps;
mod export_bench;
mod gpu;
mod icount;
mod miri;
mod peers;
mod perf;
mod pytest;
mod sums;
mod test_files;
mod wrenfold_bench;

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
        Some("perf-check") => match perf::perf_check(&workspace_root(), &args[1..]) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Some("bench-baseline") => match perf::bench_baseline(&workspace_root(), &args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Some("icount") => match icount::icount(&workspace_root(), &args[1..]) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Some("fuzz") => match fuzz(&workspace_root(), &args[1..]) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Some("miri") => match miri::miri(&workspace_root(), &args[1..]) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Some("gpu-bundle") => match gpu::gpu_bundle(&workspace_root(), &args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Some("long-sums") => match sums::long_sums(&workspace_root(), &args[1..]) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Some("peers") => match peers::peers(&workspace_root(), &args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Some("export-bench") => match export_bench::export_bench(&workspace_root(), &args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Some("wrenfold-bench") => match wrenfold_bench::wrenfold_bench(&workspace_root(), &args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Some("test") => match pytest::test(&workspace_root(), &args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!(
                "usage: cargo xtask <command>\n\ncommands:\n  deps             check the crate layering rules\n  perf-check       compare an rfx bench run with a baseline (--baseline FILE --threshold-pct 10 [--repeat 3] [--confirm 2])\n  bench-baseline   write a new baseline (--output FILE)\n  icount           the instruction-count gate under callgrind (--bless re-records baselines/icount-x86_64.json)\n  peers            rfx bench and the peers script side by side (--markdown FILE)\n  export-bench     rfx's exported C against CasADi's C and gcc C, timed from C (--rounds N, --markdown FILE, --rfx PATH)\n  wrenfold-bench   wrenfold's robotics kernels, rfx against hand-written Rust (--rounds N, --batch N, --calls N, --out DIR, --markdown FILE)\n  fuzz             the differential fuzzer for a while (--minutes N, default 10; --large true: kernels of 1,000 to 20,000 ops)\n  miri             Miri over rfx-ir, rfx-lower and rfx-opt (nightly; --crate NAME, --all-tests)\n  gpu-bundle       binaries, NVRTC and a script for the GPU checks on a machine without Rust (--out DIR, --fuzz-minutes M, --fuzz-seed S)\n  long-sums        long float sums (1e8 values, 1e10 broadcast ones) against their closed forms (--profile release, --backend cpu)\n  test             every test: cargo test --workspace, then the rfxjit Python tests (--python-only, -- PYTEST_ARGS)"
            );
            ExitCode::from(2)
        }
    }
}

/// `cargo xtask fuzz [--minutes N] [--large true]`: `rfx fuzz` in a release build (with
/// `--large true`, its large-kernel mode: 1,000 to 20,000 ops per kernel), shrunk mismatches
/// saved to the regression directory; passes `rfx fuzz`'s exit code on (1: a mismatch).
fn fuzz(root: &std::path::Path, args: &[String]) -> Result<ExitCode, String> {
    let flags = perf::flags(args)?;
    if let Some(unknown) = flags.keys().find(|k| !["minutes", "large"].contains(&k.as_str())) {
        return Err(format!(
            "unknown flag `--{unknown}` (fuzz takes --minutes N, --large true)"
        ));
    }
    let minutes = flags.get("minutes").map_or("10", String::as_str);
    if !minutes.parse::<f64>().is_ok_and(|m| m > 0.0) {
        return Err(format!("--minutes needs a positive number, got `{minutes}`"));
    }
    let large = match flags.get("large").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(format!("--large takes true or false, got `{other}`")),
    };
    let status = cargo(root)
        .args(["run", "--release", "--quiet", "-p", "rfx-cli", "--", "fuzz"])
        .args(["--minutes", minutes])
        .args(large.then_some("--large"))
        .args(["--save-dir", "crates/rfx-cli/tests/regressions"])
        .status()
        .map_err(|e| format!("running rfx fuzz: {e}"))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(2)),
        None => ExitCode::from(2),
    })
}

/// `cargo` (the one running xtask, else the one on the path) in `root`.
pub(crate) fn cargo(root: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(root);
    command
}

/// The workspace root: the parent of this crate's manifest directory.
fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}
