//! `maximum`, `minimum` and the `max`/`min` reductions give NumPy's answers on every backend
//! this machine has, at the cases where IEEE leaves a choice: ties between `+0` and `-0` (the
//! second operand, or the later element, wins) and NaN (propagated from either side).
//!
//! The expected values are NumPy 2.4.6's (`np.maximum`, `np.minimum`, `np.max`, `np.min` on
//! `float32`), the version `crates/rfx-ir/tests/data/oracle.json` was made with, which the
//! interpreter matches bit for bit (`crates/rfx-ir/tests/oracle.rs`): `np.maximum(0.0, -0.0)`
//! is `-0.0` and `np.maximum(-0.0, 0.0)` is `0.0`. A backend that is not available here (no
//! GPU, no driver) prints `skipped: …`, unless `RFX_REQUIRE_GPU_ADAPTER=1` names metal as
//! required.

use std::path::PathBuf;
use std::process::Command;

use crate::common;
use common::{RFX, temp_dir, write_npy};

fn inputs() -> (PathBuf, Vec<(&'static str, PathBuf)>) {
    let dir = temp_dir("min-max");
    let nan = f32::NAN;
    let files = [
        (
            "x",
            vec![0.0f32, -0.0, 0.0, -0.0, nan, 1.0, nan, f32::NEG_INFINITY],
        ),
        (
            "y",
            vec![-0.0f32, 0.0, 0.0, -0.0, 1.0, nan, nan, f32::NEG_INFINITY],
        ),
        ("p", vec![0.0f32, -0.0]),
        ("q", vec![-0.0f32, 0.0]),
        ("r", vec![1.0f32, nan, 2.0]),
    ];
    let mut paths = Vec::new();
    for (name, values) in files {
        let path = dir.join(format!("{name}.npy"));
        write_npy(&path, &[values.len() as u64], &values);
        paths.push((name, path));
    }
    (dir, paths)
}

#[test]
fn min_and_max_match_numpy_on_every_backend() {
    let (_dir, files) = inputs();
    let path = |name: &str| {
        files
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| format!("{name}={}", p.display()))
            .expect("input")
    };
    // (expression, its inputs, NumPy's printed result)
    let cases = [
        (
            "maximum(x, y)",
            vec!["x", "y"],
            "[-0.0, 0.0, 0.0, -0.0, NaN, NaN, NaN, -inf]",
        ),
        (
            "minimum(x, y)",
            vec!["x", "y"],
            "[-0.0, 0.0, 0.0, -0.0, NaN, NaN, NaN, -inf]",
        ),
        (
            "maximum(y, x)",
            vec!["x", "y"],
            "[0.0, -0.0, 0.0, -0.0, NaN, NaN, NaN, -inf]",
        ),
        (
            "minimum(y, x)",
            vec!["x", "y"],
            "[0.0, -0.0, 0.0, -0.0, NaN, NaN, NaN, -inf]",
        ),
        ("max(p)", vec!["p"], "-0.0"),
        ("min(p)", vec!["p"], "-0.0"),
        ("max(q)", vec!["q"], "0.0"),
        ("min(q)", vec!["q"], "0.0"),
        ("max(r)", vec!["r"], "NaN"),
        ("min(r)", vec!["r"], "NaN"),
    ];
    let required = std::env::var("RFX_REQUIRE_GPU_ADAPTER").is_ok_and(|v| v == "1");
    for backend in ["interp", "cpu", "metal", "cuda"] {
        for (expr, names, want) in &cases {
            let mut command = Command::new(RFX);
            command.args(["eval", expr, "--backend", backend]);
            for name in names {
                command.arg("--in").arg(path(name));
            }
            let out = command.output().expect("run rfx");
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !out.status.success()
                && stderr.contains("unavailable")
                && (backend == "cuda" || (backend == "metal" && !required))
            {
                eprintln!("skipped: {backend} ({})", stderr.trim());
                break;
            }
            assert!(out.status.success(), "{backend}: {expr}: {stderr}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let got = stdout.trim().rsplit_once(" = ").map(|(_, v)| v);
            assert_eq!(got, Some(*want), "{backend}: {expr}");
        }
    }
}
