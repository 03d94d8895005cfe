//! `cargo xtask test`: every test, Rust and Python.
//!
//! 1. `cargo test --workspace --features rfx/nalgebra` (skipped with `--python-only`): every
//!    crate's tests, the facade's optional nalgebra conversions included. Before it, the
//!    check that every file in a `tests/` folder is a test target or a module of one
//!    ([`crate::test_files`]).
//! 2. A virtual environment at `target/pyenv` (made with `$PYTHON`, default `python3`, when
//!    missing) with maturin, NumPy, pytest and `dask[distributed]` (installed by pip when
//!    missing).
//! 3. `maturin develop`: the `rfxjit` extension built into that environment in the workspace's
//!    `target/`, dev profile. The third-party crates (Cranelift, egg, wgpu, ...) have the same
//!    settings in the dev and test profiles, so cargo can reuse the ones `cargo test` built; the rfx
//!    crates are compiled once more, without the test-only features their dev-dependencies
//!    turn on. (`maturin develop --profile test` cannot be used: maturin then builds the test
//!    harness, an executable, instead of the extension.) The `alloc-count` feature is on: it
//!    counts the extension's Rust allocations, for the test that a bound call with `out=`
//!    allocates nothing.
//! 4. `pytest crates/rfx-python/tests` in that environment; arguments after `--` go to pytest.
//!
//! Each stage prints its wall time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The Python packages the tests need (`dask[distributed]` for the test that ships a bound
/// kernel to worker processes).
const PIP_PACKAGES: [&str; 4] = ["maturin", "numpy", "pytest", "dask[distributed]"];

/// Runs one stage, printing its command and wall time; fails when it exits non-zero.
fn stage(name: &str, command: &mut Command) -> Result<(), String> {
    println!("== xtask test: {name}");
    let start = Instant::now();
    let status = command
        .status()
        .map_err(|e| format!("{name}: cannot start: {e}"))?;
    println!("== xtask test: {name}: {:.1} s", start.elapsed().as_secs_f64());
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({status})"))
    }
}

/// The virtual environment's Python, made when missing.
pub(crate) fn venv_python(root: &Path) -> Result<PathBuf, String> {
    let venv = root.join("target").join("pyenv");
    let python = venv.join("bin").join("python");
    if !python.exists() {
        let base = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
        stage(
            "python3 -m venv target/pyenv",
            Command::new(&base).arg("-m").arg("venv").arg(&venv),
        )?;
    }
    let have_all = Command::new(&python)
        .args(["-c", "import maturin, numpy, pytest, dask.distributed"])
        .status()
        .is_ok_and(|s| s.success());
    if !have_all {
        stage(
            "pip install maturin numpy pytest dask[distributed]",
            Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
                .args(PIP_PACKAGES),
        )?;
    }
    Ok(python)
}

/// `cargo xtask test [--python-only] [-- PYTEST_ARGS]`.
pub(crate) fn test(root: &Path, args: &[String]) -> Result<(), String> {
    let (ours, pytest_args) = match args.iter().position(|a| a == "--") {
        Some(at) => (&args[..at], &args[at + 1..]),
        None => (args, &[][..]),
    };
    let mut python_only = false;
    for arg in ours {
        match arg.as_str() {
            "--python-only" => python_only = true,
            other => {
                return Err(format!(
                    "unknown argument `{other}` (test takes --python-only and -- PYTEST_ARGS)"
                ));
            }
        }
    }
    let start = Instant::now();
    if !python_only {
        crate::test_files::check(root)?;
        stage(
            "cargo test --workspace --features rfx/nalgebra",
            crate::cargo(root).args(["test", "--workspace", "--features", "rfx/nalgebra"]),
        )?;
    }
    let python = venv_python(root)?;
    let venv_bin = python
        .parent()
        .map(Path::to_path_buf)
        .ok_or("the virtual environment has no bin directory")?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![venv_bin.clone()];
    paths.extend(std::env::split_paths(&path));
    let path = std::env::join_paths(paths).map_err(|e| format!("PATH: {e}"))?;
    stage(
        "maturin develop (crates/rfx-python)",
        Command::new(venv_bin.join("maturin"))
            .args(["develop", "--manifest-path"])
            .arg(root.join("crates").join("rfx-python").join("Cargo.toml"))
            // `--features` replaces pyproject.toml's list, so the GPU backends are named again.
            .args(["--features", "cuda,metal,alloc-count"])
            .env(
                "VIRTUAL_ENV",
                python.parent().and_then(Path::parent).unwrap_or(root),
            )
            .env("PATH", &path)
            .env("CARGO_TARGET_DIR", root.join("target"))
            .current_dir(root),
    )?;
    stage(
        "pytest crates/rfx-python/tests",
        Command::new(&python)
            .args(["-m", "pytest", "-q", "crates/rfx-python/tests"])
            .args(pytest_args)
            .env("PATH", &path)
            .current_dir(root),
    )?;
    println!(
        "== xtask test: all passed in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
