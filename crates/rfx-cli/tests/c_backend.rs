//! The `c` backend (the exported C compiled by the system C compiler) from the command line:
//! `rfx run --backend c` against the CPU backend's values, a missing compiler as a user error,
//! `rfx fuzz --backend c` on a few kernels and `rfx bench --backend c` on one. Skipped, with a
//! note, where no C compiler is installed.

use std::process::Command;

use crate::common;
use common::{RFX, rfx, stderr_of, stdout_of};

/// Whether `cc` (or `$CC`) runs here.
fn have_compiler() -> bool {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let program = cc.split_whitespace().next().unwrap_or("cc").to_string();
    let found = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: no C compiler (`{cc}`)");
    }
    found
}

const KERNEL: &str = "kernel pid_like {\n  %e = input e : f32[4]\n  %d = input d : f64[4]\n  %k = const 1.5 : f32[]\n  %p = mul %e, %k : f32[4]\n  %lo = const -1.0 : f32[]\n  %hi = const 1.0 : f32[]\n  %c = clamp %p, %lo, %hi : f32[4]\n  %x = exp %d : f64[4]\n  %s = sum %d axes [0] : f64[]\n  output u = %c\n  output x = %x\n  output s = %s\n}\n";

#[test]
fn run_on_the_c_backend_gives_the_cpu_backends_values() {
    if !have_compiler() {
        return;
    }
    let dir = common::temp_dir("c-backend-run");
    let kernel = dir.join("pid_like.rfx");
    std::fs::write(&kernel, KERNEL).expect("write kernel");
    let (e, d) = (dir.join("e.npy"), dir.join("d.npy"));
    common::write_npy(&e, &[4], &[0.25f32, -3.0, 0.5, 1e-3]);
    common::write_npy(&d, &[4], &[0.0f64, 1.0, -2.5, 0.125]);
    let args = |backend: &'static str| {
        vec![
            "run".to_string(),
            kernel.display().to_string(),
            "--in".to_string(),
            format!("e={}", e.display()),
            "--in".to_string(),
            format!("d={}", d.display()),
            "--backend".to_string(),
            backend.to_string(),
        ]
    };
    let c_args = args("c");
    let c = rfx(&c_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(c.status.success(), "{}", stderr_of(&c));
    let text = stdout_of(&c);
    assert!(text.contains("u: f32[4] = [0.375, -1.0, 0.75, 0.0015]"), "{text}");
    assert!(text.contains("s: f64[] = -1.375"), "{text}");
    // exp: within the backend's bound of 4 ULP (here, a relative 1e-15) of the true values.
    let x_line = text
        .lines()
        .find_map(|l| l.strip_prefix("x: f64[4] = ["))
        .unwrap_or_else(|| panic!("{text}"));
    let xs: Vec<f64> = x_line
        .trim_end_matches(']')
        .split(", ")
        .map(|v| v.parse().expect("a float"))
        .collect();
    assert_eq!(xs.len(), 4, "{text}");
    for (got, d) in xs.iter().zip([0.0f64, 1.0, -2.5, 0.125]) {
        assert!(
            (got - d.exp()).abs() <= 1e-15 * d.exp(),
            "exp({d}) = {got}: {text}"
        );
    }
    // The CPU backend prints the same exact outputs.
    let cpu_args = args("cpu");
    let cpu = rfx(&cpu_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(cpu.status.success(), "{}", stderr_of(&cpu));
    let exact = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with("x:"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(exact(&text), exact(&stdout_of(&cpu)));

    // A compiler that does not exist: a user error naming it, nothing else printed.
    let missing = Command::new(RFX)
        .args(&c_args)
        .env("CC", "/nonexistent/rfx-cc")
        .output()
        .expect("run rfx");
    let err = stderr_of(&missing);
    assert_eq!(missing.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: backend `c` is unavailable") && err.contains("/nonexistent/rfx-cc"),
        "{err}"
    );
    assert!(stdout_of(&missing).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fuzz_and_bench_run_the_c_backend() {
    if !have_compiler() {
        return;
    }
    let fuzz = rfx(&["fuzz", "--backend", "c", "--kernels", "24", "--seed", "3"]);
    let report = stdout_of(&fuzz);
    assert!(fuzz.status.success(), "{report}\n{}", stderr_of(&fuzz));
    let compared = report
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("c ")?
                .trim()
                .strip_prefix("compared")?
                .trim()
                .parse::<u64>()
                .ok()
        })
        .unwrap_or_else(|| panic!("{report}"));
    assert!(compared >= 12, "{report}");
    assert!(report.contains("not selected (--backend)"), "{report}");

    let bench = rfx(&[
        "bench",
        "--backend",
        "c",
        "--size",
        "5",
        "--iterations",
        "5",
        "--no-baselines",
        "--filter",
        "pid",
    ]);
    let out = stdout_of(&bench);
    assert!(bench.status.success(), "{out}\n{}", stderr_of(&bench));
    assert!(out.contains("[c] pid_clip: "), "{out}");
}

#[test]
fn fuzz_refuses_an_unknown_backend() {
    let out = rfx(&["fuzz", "--backend", "cpu,fortran", "--kernels", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("unknown backend `fortran`") && err.contains("cpu, metal, cuda, c"),
        "{err}"
    );
}
