//! Deep and long inputs through the `rfx` command: expressions nested 20,000 levels, sums of
//! 60,000 terms (near the longest single argument Linux passes, 128 KiB), nesting past
//! `rfx::expr::MAX_NESTING`, and HIR files of 20,000- and 100,000-op chains. Each gives the
//! closed-form result, or exit 1 with the documented limit named, in bounded time, and never
//! overflows a stack.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common;
use common::{RFX, temp_dir, write_npy};

const DEPTH: usize = 20_000;

/// `x = [0.5, 1, 2]` in `f64`, written to `dir/x.npy`.
fn write_x(dir: &Path) -> String {
    let path = dir.join("x.npy");
    write_npy(&path, &[3], &[0.5f64, 1.0, 2.0]);
    format!("x={}", path.display())
}

/// Runs `rfx` with `args`, within `limit`.
fn rfx(args: &[&str], limit: Duration) -> Output {
    let start = Instant::now();
    let out = Command::new(RFX).args(args).output().expect("run rfx");
    assert!(
        start.elapsed() < limit,
        "{:?} took {:?}",
        &args[..1],
        start.elapsed()
    );
    out
}

/// The values printed for output `name` (`name: f64[3] = [a, b, c]`).
fn printed(out: &Output, name: &str) -> Vec<f64> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status.code());
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no `{name}` in {stdout}"));
    let list = line
        .split_once('[')
        .and_then(|(_, r)| r.split_once(" = ["))
        .map(|(_, v)| v);
    list.and_then(|v| v.strip_suffix(']'))
        .unwrap_or_else(|| panic!("unexpected line {line}"))
        .split(',')
        .map(|v| v.trim().parse::<f64>().expect("a number"))
        .collect()
}

fn iterate_sin(x: f64, n: usize) -> f64 {
    (0..n).fold(x, |v, _| v.sin())
}

#[test]
fn deeply_nested_expressions_evaluate() {
    let dir = temp_dir("nested");
    let x = write_x(&dir);
    let limit = Duration::from_secs(60);
    let parens = format!("{}x * 2{}", "(".repeat(DEPTH), ")".repeat(DEPTH));
    for backend in ["interp", "cpu"] {
        let out = rfx(&["eval", "--backend", backend, "--in", &x, "--", &parens], limit);
        assert_eq!(printed(&out, "out"), [1.0, 2.0, 4.0], "{backend}");
    }
    let negations = format!("{}x{}", "-(".repeat(DEPTH), ")".repeat(DEPTH));
    let out = rfx(
        &["eval", "--backend", "interp", "--in", &x, "--", &negations],
        limit,
    );
    assert_eq!(printed(&out, "out"), [0.5, 1.0, 2.0]);
    let sines = format!("{}x{}", "sin(".repeat(DEPTH), ")".repeat(DEPTH));
    let out = rfx(&["eval", "--backend", "interp", "--in", &x, &sines], limit);
    let want: Vec<f64> = [0.5, 1.0, 2.0].iter().map(|&v| iterate_sin(v, DEPTH)).collect();
    assert_eq!(printed(&out, "out"), want);
    // The optimiser's dump of a deep expression (fusion walks it without recursion).
    let out = rfx(
        &["dump", "--stage", "mir", "--in-shapes", "x=f64[3]", &sines],
        limit,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn long_flat_sums_evaluate() {
    let dir = temp_dir("sums");
    let x = write_x(&dir);
    let terms = 60_000;
    let sum = vec!["x"; terms].join("+");
    let n = terms as f64;
    for backend in ["interp", "cpu"] {
        let out = rfx(
            &["eval", "--backend", backend, "--in", &x, &sum],
            Duration::from_secs(60),
        );
        assert_eq!(printed(&out, "out"), [0.5 * n, n, 2.0 * n], "{backend}");
    }
    let out = rfx(
        &["dump", "--stage", "mir", "--in-shapes", "x=f64[3]", &sum],
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Past the optimiser's node limit saturation stops at once, and says so.
    assert!(stdout.contains("stopped: node limit"), "{stdout:.2000}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nesting_past_the_limit_is_a_user_error_naming_it() {
    let dir = temp_dir("limit");
    let x = write_x(&dir);
    // MAX_NESTING is 100,000: `-(` is two characters a level, so this stays under 128 KiB.
    let deep = format!("{}x", "-".repeat(100_001));
    let out = rfx(
        &["eval", "--backend", "interp", "--in", &x, "--", &deep],
        Duration::from_secs(20),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("rfx::expr::MAX_NESTING"), "{stderr:.500}");
    assert!(stderr.contains("100000"), "{stderr:.500}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A HIR file: `n` links of `sin` then `add x`, on `f32[3]`.
fn chain_file(dir: &Path, n: usize) -> PathBuf {
    let mut text = String::from("kernel chain {\n  %x = input x : f64[3]\n");
    let mut prev = "%x".to_string();
    for i in 0..n {
        let op = if i % 2 == 0 {
            format!("sin {prev}")
        } else {
            format!("add {prev}, %x")
        };
        text.push_str(&format!("  %v{i} = {op} : f64[3]\n"));
        prev = format!("%v{i}");
    }
    text.push_str(&format!("  output out = {prev}\n}}\n"));
    let path = dir.join(format!("chain{n}.rfx"));
    std::fs::write(&path, text).expect("write kernel");
    path
}

fn chain_value(x: f64, n: usize) -> f64 {
    (0..n).fold(x, |v, i| if i % 2 == 0 { v.sin() } else { v + x })
}

#[test]
fn long_hir_chains_run() {
    let dir = temp_dir("hir");
    let x = write_x(&dir);
    for (n, backends) in [(20_000, &["interp", "cpu"][..]), (100_000, &["interp"][..])] {
        let file = chain_file(&dir, n);
        let file = file.to_str().expect("utf-8 path");
        let want: Vec<f64> = [0.5, 1.0, 2.0].iter().map(|&v| chain_value(v, n)).collect();
        for backend in backends {
            let out = rfx(
                &["run", "--backend", backend, "--in", &x, file],
                Duration::from_secs(120),
            );
            let got = printed(&out, "out");
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-12 * w.abs(),
                    "{n} ops on {backend}: {g} vs {w}"
                );
            }
        }
        // Every printing stage once, at 20,000 ops (each is linear; 100,000 only adds time).
        if n > 20_000 {
            continue;
        }
        for stage in ["hir", "mir", "lir"] {
            let out = rfx(&["dump", "--stage", stage, file], Duration::from_secs(120));
            assert!(
                out.status.success(),
                "{stage}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = rfx(&["dot", file], Duration::from_secs(120));
        assert!(
            out.status.success(),
            "dot: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
