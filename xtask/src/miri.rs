//! `cargo xtask miri`: Miri (Rust's UB detector) over the crates that contain no JIT code.
//!
//! ```text
//! cargo xtask miri [--crate rfx-ir] [--all-tests] [--cases N]
//! ```
//!
//! Runs `cargo +nightly miri test` on `rfx-ir` (unit and integration tests), `rfx-lower` (unit
//! tests), `rfx-opt` (unit tests: the rewrite rules against the interpreter, with Miri's float
//! noise off), `rfx-check`'s `generator` and `lowering` tests (random kernels through the HIR text
//! format and the interpreters) and the CPU backend's worker pool (`rfx-codegen-cpu`'s `pool` unit tests, with a Rust
//! kernel instead of JIT code, two CPUs and the pool's threads left running at exit allowed; a
//! pool that keeps its completion latch on the caller's stack fails it with a data race against
//! a deallocation), or on the `--crate`s
//! given (unit tests only unless `--all-tests`), with
//! property tests cut to `--cases` cases (default 4: Miri runs code about a thousand times
//! slower than a release build; the long random loops take a sample under `cfg(miri)`) and host
//! isolation off so that tests can read their data files. Needs the nightly toolchain with the
//! `miri` and `rust-src` components (`rustup component add --toolchain nightly miri rust-src`).
//!
//! egg's timer (the `quanta` crate) executes `cpuid` through inline assembly, which Miri cannot
//! execute; under `cfg(miri)` `rfx-opt` hands egg a mock clock instead
//! (`saturate::with_egg_clock`), so every crate that optimises can run under Miri. Miri adds
//! random noise of a few ULP to libm results by default (`pow(x, 1)` is then not `x`), which
//! the rule tests compare bit for bit, so the `rfx-opt` run sets `-Zmiri-deterministic-floats`.
//! Not part of CI: it takes minutes per crate on two cores (`docs/errors.md` has the measured
//! times).

use std::path::Path;
use std::process::Command;

/// Which test targets of a crate a run takes.
#[derive(Clone, Copy)]
enum Targets {
    /// The unit tests (`--lib`).
    Lib,
    /// Unit and integration tests.
    All,
    /// These integration test files only (`--test NAME` each).
    Tests(&'static [&'static str]),
}

/// One default Miri run: a crate, its test targets, a test-name filter and extra `MIRIFLAGS`.
struct Run {
    name: &'static str,
    targets: Targets,
    filter: Option<&'static str>,
    flags: &'static str,
}

/// The runs Miri makes by default: the unit tests below the code generators (and `rfx-ir`'s
/// integration tests), the checking crate's random-kernel tests that run only interpreters
/// (the HIR text round trip, lowering against the HIR interpreter), and the CPU backend's pool.
const DEFAULT_RUNS: [Run; 5] = [
    Run {
        name: "rfx-ir",
        targets: Targets::All,
        filter: None,
        flags: "",
    },
    Run {
        name: "rfx-lower",
        targets: Targets::Lib,
        filter: None,
        flags: "",
    },
    Run {
        name: "rfx-opt",
        targets: Targets::Lib,
        filter: None,
        flags: " -Zmiri-deterministic-floats",
    },
    Run {
        name: "rfx-check",
        targets: Targets::Tests(&["generator", "lowering"]),
        filter: None,
        flags: "",
    },
    Run {
        name: "rfx-codegen-cpu",
        targets: Targets::Lib,
        filter: Some("pool::"),
        // Miri reports one CPU unless told (the pool would have no workers); the workers are
        // daemon threads; the job's table pointer is stored as an integer to be `Send`.
        flags: " -Zmiri-num-cpus=2 -Zmiri-ignore-leaks -Zmiri-permissive-provenance",
    },
];

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
    let targets = if all_tests { Targets::All } else { Targets::Lib };
    let runs: Vec<(String, Targets, Option<&str>, &str)> = if crates.is_empty() {
        DEFAULT_RUNS
            .iter()
            .map(|r| (r.name.to_string(), r.targets, r.filter, r.flags))
            .collect()
    } else {
        crates.into_iter().map(|name| (name, targets, None, "")).collect()
    };
    let mut ok = true;
    for (name, targets, filter, flags) in &runs {
        let start = std::time::Instant::now();
        let mut command = Command::new("cargo");
        command
            .current_dir(root)
            .args(["+nightly", "miri", "test", "-p", name.as_str()])
            .env("MIRIFLAGS", format!("-Zmiri-disable-isolation{flags}"))
            .env("PROPTEST_CASES", &cases)
            // insta finds the workspace through `cargo metadata` unless told; Miri cannot spawn.
            .env("INSTA_WORKSPACE_ROOT", root)
            .env("RFX_MIRI", "1");
        match targets {
            Targets::Lib => {
                command.arg("--lib");
            }
            Targets::All => {}
            Targets::Tests(files) => {
                for file in *files {
                    command.args(["--test", file]);
                }
            }
        }
        if let Some(filter) = filter {
            command.arg(filter);
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
