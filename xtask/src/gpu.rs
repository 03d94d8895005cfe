//! `cargo xtask gpu-bundle [--out DIR] [--fuzz-minutes M] [--fuzz-seed S]`: everything a GPU
//! check needs on a machine with an NVIDIA GPU but no Rust toolchain and no network, in one
//! folder (default `target/gpu-bundle`, ignored by git):
//!
//! - `bundle.tar.xz`: the release `rfx` and `gpu_bench`, the test binaries that run kernels on
//!   the GPU (`rfx-codegen-cuda`'s `execute`, `tree`, `loops` and `error_variants`, `rfx-cli`'s `fuzz`,
//!   which replays the saved regressions), all stripped, and `libnvrtc.so.12` with its
//!   builtins from the wheel `.ci/run` installs under `target/cuda-wheels`;
//! - the `rfxjit` wheel (`maturin build --release --strip`, CUDA built in; `abi3`, so any CPython from
//!   3.9 on the GPU machine installs it);
//! - `run.sh`: unpacks the bundle, points `RFX_NVRTC_LIB` at the library, links this checkout's
//!   path to the repository it runs in (the test binaries read files under the path they were
//!   built at), then runs `gpu_bench` alone and the tests, the regressions, `rfx fuzz` and
//!   `rfx fuzz --large` side by side, each under a time limit, logging to `$OUT/all.log` (or
//!   `target/gpu-logs/` without `OUT`). The wheel is installed into a folder of its own (the
//!   machine's `python3` needs NumPy and pytest): `examples/batched_fk.py` runs alone after
//!   `gpu_bench`, and the Python tests whose kernels run on every backend (`jit_backends`)
//!   run side by side with the rest, with `RFXJIT_TEST_REQUIRE_CUDA=1` so that a CUDA backend
//!   that cannot run fails them rather than leaving it out.
//!
//! Run `bash target/gpu-bundle/run.sh` from the repository root on the GPU machine, carrying
//! `target/gpu-bundle` there. The bundle is about 40 MB, most of it NVRTC.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The GPU test binaries: (package, test target).
const TESTS: [(&str, &str); 5] = [
    ("rfx-codegen-cuda", "execute"),
    ("rfx-codegen-cuda", "tree"),
    ("rfx-codegen-cuda", "loops"),
    ("rfx-codegen-cuda", "error_variants"),
    ("rfx-cli", "fuzz"),
];

fn run(command: &mut Command, what: &str) -> Result<Vec<u8>, String> {
    let output = command.output().map_err(|e| format!("{what}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{what} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(output.stdout)
}

/// The test executables cargo reports for `TESTS`, by target name.
fn test_executables(root: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let stdout = run(
        crate::cargo(root).args([
            "test",
            "--no-run",
            "--message-format=json",
            "-p",
            "rfx-codegen-cuda",
            "-p",
            "rfx-cli",
        ]),
        "cargo test --no-run",
    )?;
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(name), Some(executable), Some(manifest)) = (
            message.pointer("/target/name").and_then(|v| v.as_str()),
            message.get("executable").and_then(|v| v.as_str()),
            message.get("manifest_path").and_then(|v| v.as_str()),
        ) else {
            continue;
        };
        let is_test = message
            .pointer("/target/kind")
            .and_then(|v| v.as_array())
            .is_some_and(|kinds| kinds.iter().any(|k| k == "test"));
        let wanted = TESTS
            .iter()
            .any(|(package, test)| *test == name && manifest.ends_with(&format!("/{package}/Cargo.toml")));
        if is_test && wanted {
            found.push((name.to_string(), PathBuf::from(executable)));
        }
    }
    for (_, test) in TESTS {
        if !found.iter().any(|(name, _)| name == test) {
            return Err(format!("cargo reported no executable for the test `{test}`"));
        }
    }
    Ok(found)
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
}

pub(crate) fn gpu_bundle(root: &Path, args: &[String]) -> Result<(), String> {
    let flags = crate::perf::flags(args)?;
    if let Some(unknown) = flags
        .keys()
        .find(|k| !["out", "fuzz-minutes", "fuzz-seed"].contains(&k.as_str()))
    {
        return Err(format!(
            "unknown flag `--{unknown}` (gpu-bundle takes --out DIR, --fuzz-minutes M, --fuzz-seed S)"
        ));
    }
    let out = flags
        .get("out")
        .map_or_else(|| root.join("target/gpu-bundle"), PathBuf::from);
    let minutes = flags.get("fuzz-minutes").map_or("3", String::as_str);
    if !minutes.parse::<f64>().is_ok_and(|m| m > 0.0) {
        return Err(format!("--fuzz-minutes needs a positive number, got `{minutes}`"));
    }
    let seed = flags.get("fuzz-seed").map_or("1", String::as_str);
    if seed.parse::<u64>().is_err() {
        return Err(format!("--fuzz-seed needs a whole number, got `{seed}`"));
    }
    let nvrtc = root.join("target/cuda-wheels/nvidia/cuda_nvrtc/lib");
    let library = nvrtc.join("libnvrtc.so.12");
    if !library.is_file() {
        return Err(format!(
            "{} is missing: run .ci/run once (it installs the CUDA wheels under target/cuda-wheels)",
            library.display()
        ));
    }

    eprintln!("gpu-bundle: building rfx and gpu_bench (release) and the GPU tests");
    run(
        crate::cargo(root).args([
            "build",
            "--release",
            "-p",
            "rfx-cli",
            "--bin",
            "rfx",
            "-p",
            "rfx-codegen-cuda",
            "--example",
            "gpu_bench",
        ]),
        "cargo build --release",
    )?;
    let tests = test_executables(root)?;

    let staging = out.join("staging");
    let _ = std::fs::remove_dir_all(&out);
    for dir in [staging.join("bin"), staging.join("nvrtc"), staging.join("wheel")] {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let release = root.join("target/release");
    copy(&release.join("rfx"), &staging.join("bin/rfx"))?;
    copy(
        &release.join("examples/gpu_bench"),
        &staging.join("bin/gpu_bench"),
    )?;
    for (name, path) in &tests {
        copy(path, &staging.join("bin").join(name))?;
    }
    // Debug information is most of each binary's size; without `strip` they travel whole.
    let binaries: Vec<PathBuf> = std::fs::read_dir(staging.join("bin"))
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    if Command::new("strip").args(&binaries).status().is_err() {
        eprintln!("gpu-bundle: `strip` is not installed; the binaries keep their debug information");
    }
    for entry in std::fs::read_dir(&nvrtc).map_err(|e| format!("{}: {e}", nvrtc.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name == "libnvrtc.so.12" || (name.starts_with("libnvrtc-builtins.so.") && !name.contains("alt")) {
            copy(&path, &staging.join("nvrtc").join(name))?;
        }
    }
    eprintln!("gpu-bundle: building the rfxjit wheel (maturin, release, CUDA built in)");
    let python = crate::pytest::venv_python(root)?;
    run(
        Command::new(&python)
            .args(["-m", "maturin", "build", "--release", "--strip", "--quiet", "-m"])
            .arg(root.join("crates/rfx-python/Cargo.toml"))
            .arg("-o")
            .arg(staging.join("wheel")),
        "maturin build --release (crates/rfx-python)",
    )?;
    eprintln!("gpu-bundle: packing (xz, about a minute)");
    run(
        Command::new("tar")
            .arg("-cJf")
            .arg(out.join("bundle.tar.xz"))
            .arg("-C")
            .arg(&staging)
            .args(["bin", "nvrtc", "wheel"]),
        "tar",
    )?;
    std::fs::remove_dir_all(&staging).map_err(|e| e.to_string())?;
    let script = run_script(root, minutes, seed);
    let script_path = out.join("run.sh");
    std::fs::write(&script_path, script).map_err(|e| format!("{}: {e}", script_path.display()))?;
    let size = std::fs::metadata(out.join("bundle.tar.xz")).map_or(0, |m| m.len());
    println!(
        "gpu-bundle: {} ({:.1} MB) and {}; on the GPU machine, from the repository root: bash {}",
        out.join("bundle.tar.xz").display(),
        size as f64 / 1e6,
        script_path.display(),
        script_path.strip_prefix(root).unwrap_or(&script_path).display()
    );
    Ok(())
}

/// The device script: `root` is the path the test binaries were built at.
fn run_script(root: &Path, minutes: &str, seed: &str) -> String {
    let root = root.display();
    format!(
        r#"#!/bin/bash
# Written by `cargo xtask gpu-bundle`: the GPU checks of rfx, run from the repository root of a
# machine with an NVIDIA GPU. Logs go to $OUT/all.log (or target/gpu-logs/all.log).
set -u
repo=$PWD
bundle=$(cd "$(dirname "$0")" && pwd)
logs=${{OUT:-$repo/target/gpu-logs}}
mkdir -p "$logs" /tmp/rfx-gpu
log=$logs/all.log
# The test binaries read files (regressions, test data) under the path they were built at.
if [ ! -e "{root}" ]; then mkdir -p "$(dirname "{root}")" && ln -s "$repo" "{root}"; fi
tar -xJf "$bundle/bundle.tar.xz" -C /tmp/rfx-gpu || {{ echo "unpacking failed"; exit 3; }}
export RFX_NVRTC_LIB=/tmp/rfx-gpu/nvrtc/libnvrtc.so.12 RFX_REQUIRE_NVRTC=1 RFX_CACHE_DIR=off
bin=/tmp/rfx-gpu/bin
{{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; date -u; }} 2>&1 | tee -a "$log"
step() {{ n=$1; t=$2; shift 2; s=$(date +%s); timeout "$t" "$@" > "$logs/$n.log" 2>&1; rc=$?; echo "=== $n rc=$rc $(( $(date +%s) - s ))s" | tee -a "$log"; }}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/rfx-gpu/site /tmp/rfx-gpu/wheel/*.whl 2>&1 | tee -a "$log"
# Alone, for clean timings.
step gpu_bench 120 "$bin/gpu_bench" --json "$logs/gpu_bench.json"
step batched_fk 120 env PYTHONPATH=/tmp/rfx-gpu/site python3 crates/rfx-python/examples/batched_fk.py
# The rest side by side.
step execute 330 "$bin/execute" --nocapture &
step tree 200 "$bin/tree" --nocapture &
step loops 120 "$bin/loops" --nocapture &
step error_variants 60 "$bin/error_variants" --nocapture &
step regressions 120 "$bin/fuzz" saved_regressions_replay_clean --nocapture &
step pytest 300 env PYTHONPATH=/tmp/rfx-gpu/site RFXJIT_TEST_REQUIRE_CUDA=1 python3 -m pytest -q -p no:cacheprovider \
  crates/rfx-python/tests/test_chain.py crates/rfx-python/tests/test_lax.py crates/rfx-python/tests/test_lie.py \
  crates/rfx-python/tests/test_cache_errors.py crates/rfx-python/tests/test_rfxjit_compat.py &
step fuzz {fuzz_limit} "$bin/rfx" fuzz --minutes {minutes} --seed {seed} --metal-every 0 --save-dir "$logs/saved" &
# Kernels of 1,000-20,000 ops: CUDA runs them within its size limit or refuses them, never crashes.
step large_fuzz {fuzz_limit} "$bin/rfx" fuzz --large --minutes {minutes} --seed {seed} --metal-every 0 --save-dir "$logs/saved-large" &
wait
for n in gpu_bench batched_fk execute tree loops error_variants regressions pytest fuzz large_fuzz; do
  echo "===== log of $n" >> "$log"; cat "$logs/$n.log" >> "$log"; rm -f "$logs/$n.log"
done
grep -E "^=== |skipped|test result|kernels ran|FAILED|panicked|fuzz:|passed|failed" "$log"
"#,
        fuzz_limit = (minutes.parse::<f64>().unwrap_or(3.0) * 60.0) as u64 + 60,
    )
}

#[cfg(test)]
mod tests {
    use super::run_script;

    #[test]
    fn the_run_script_links_the_build_path_and_passes_the_fuzz_options() {
        let script = run_script(std::path::Path::new("/build/rfx"), "2.5", "15432");
        assert!(script.contains(r#"ln -s "$repo" "/build/rfx""#), "{script}");
        assert!(script.contains("fuzz --minutes 2.5 --seed 15432"), "{script}");
        // The fuzz step's limit leaves a minute for shrinking.
        assert!(script.contains("step fuzz 210 "), "{script}");
        assert!(
            script.contains("step large_fuzz 210 \"$bin/rfx\" fuzz --large --minutes 2.5 --seed 15432"),
            "{script}"
        );
        let path = std::env::temp_dir().join(format!("rfx-gpu-run-{}.sh", std::process::id()));
        std::fs::write(&path, &script).expect("write");
        let checked = std::process::Command::new("bash").arg("-n").arg(&path).status();
        let _ = std::fs::remove_file(&path);
        if let Ok(status) = checked {
            assert!(status.success(), "bash -n rejects the script:\n{script}");
        }
    }
}
