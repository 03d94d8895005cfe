//! The `rfx` binary end to end: `.npy` files in and out, every subcommand, and the error (one
//! line, or with the source line and a caret for an expression or kernel file) with exit code
//! 1 (and nothing written) for every bad input.

use std::path::Path;
use std::process::{Command, Output};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common;
use common::{rfx, temp_dir, write_npy};

fn read_npy<T: npyz::Deserialize>(path: &Path) -> (Vec<u64>, Vec<T>) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let npy = npyz::NpyFile::new(std::io::BufReader::new(file)).expect("npy");
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<T>().expect("data"))
}

fn arg(name: &str, path: &Path) -> String {
    format!("{name}={}", path.display())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn eval_writes_the_rfxjit_example() {
    let dir = temp_dir("eval");
    let (x, y, o) = (dir.join("x.npy"), dir.join("y.npy"), dir.join("o"));
    write_npy(&x, &[3], &[0.0f32, 1.0, 2.0]);
    write_npy(&y, &[3], &[1.0f32, 2.0, 3.0]);
    let out = rfx(&[
        "eval",
        "sin(x*2.0)+y",
        "--in",
        &arg("x", &x),
        "--in",
        &arg("y", &y),
        "--out",
        o.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (shape, values) = read_npy::<f32>(&o.join("out.npy"));
    assert_eq!(shape, [3]);
    assert_eq!(values, [1.0f32, 2.909_297_5, 2.243_197_5]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn eval_random_inputs_named_outputs_and_backends() {
    let dir = temp_dir("eval-random");
    let mut rng = StdRng::seed_from_u64(8);
    let xs: Vec<f64> = (0..12).map(|_| rng.random_range(-2.0..2.0)).collect();
    let ys: Vec<f64> = (0..4).map(|_| rng.random_range(0.5..2.0)).collect();
    let (x, y) = (dir.join("x.npy"), dir.join("y.npy"));
    write_npy(&x, &[3, 4], &xs);
    write_npy(&y, &[4], &ys);
    for backend in ["cpu", "interp"] {
        let o = dir.join(format!("o-{backend}"));
        let out = rfx(&[
            "eval",
            "a = x * y\nb = sum(a, 1); c = maximum(x, 0.0) ** 2",
            "--outputs",
            "b,c",
            "--in",
            &arg("x", &x),
            "--in",
            &arg("y", &y),
            "--backend",
            backend,
            "--out",
            o.to_str().expect("utf-8"),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let (shape, b) = read_npy::<f64>(&o.join("b.npy"));
        assert_eq!(shape, [3]);
        for r in 0..3 {
            let want: f64 = (0..4).map(|c| xs[r * 4 + c] * ys[c]).sum();
            assert!((b[r] - want).abs() < 1e-12, "{backend}: {} vs {want}", b[r]);
        }
        let (shape, c) = read_npy::<f64>(&o.join("c.npy"));
        assert_eq!(shape, [3, 4]);
        for (got, v) in c.iter().zip(&xs) {
            assert!((got - v.max(0.0).powi(2)).abs() < 1e-12);
        }
    }
    // Bool and i32 round trips.
    let (a, m) = (dir.join("a.npy"), dir.join("m.npy"));
    write_npy(&a, &[3], &[4i32, -7, 9]);
    write_npy(&m, &[3], &[true, false, true]);
    let o = dir.join("o-int");
    let out = rfx(&[
        "eval",
        "k = where(m, a * 2, a); f = m & (a > 0)",
        "--outputs",
        "k,f",
        "--in",
        &arg("a", &a),
        "--in",
        &arg("m", &m),
        "--out",
        o.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_npy::<i32>(&o.join("k.npy")).1, [8, -7, 18]);
    assert_eq!(read_npy::<bool>(&o.join("f.npy")).1, [true, false, true]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_inputs_give_one_error_and_exit_1_and_write_nothing() {
    let dir = temp_dir("errors");
    let (x, y2, xi, x64) = (
        dir.join("x.npy"),
        dir.join("y2.npy"),
        dir.join("xi.npy"),
        dir.join("x64.npy"),
    );
    write_npy(&x, &[3], &[0.5f32, 1.0, 2.0]);
    write_npy(&y2, &[2], &[1.0f32, 2.0]);
    write_npy(&xi, &[3], &[1i32, 2, 3]);
    write_npy(&x64, &[3], &[1u64, 2, 3]);
    let missing = dir.join("nope.npy");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["sin(x)".into(), "--in".into(), arg("x", &missing)],
            "cannot open",
        ),
        (
            vec!["sin(x)".into(), "--in".into(), arg("x", &xi)],
            "does not accept i32",
        ),
        (
            vec!["sin(x)".into(), "--in".into(), arg("x", &x64)],
            "not supported",
        ),
        (
            vec![
                "x + y".into(),
                "--in".into(),
                arg("x", &x),
                "--in".into(),
                arg("y", &y2),
            ],
            "do not broadcast",
        ),
        (
            vec!["sinn(x)".into(), "--in".into(), arg("x", &x)],
            "unknown function `sinn`",
        ),
        (
            vec!["sin(x * ".into(), "--in".into(), arg("x", &x)],
            "expected an operand",
        ),
        (vec!["x +* 2".into(), "--in".into(), arg("x", &x)], "1:4"),
        (
            vec!["z * 2".into(), "--in".into(), arg("x", &x)],
            "unknown name `z`",
        ),
    ];
    for (i, (args, needle)) in cases.into_iter().enumerate() {
        let o = dir.join(format!("o{i}"));
        let mut full: Vec<String> = vec!["eval".into()];
        full.extend(args);
        full.push("--out".into());
        full.push(o.to_str().expect("utf-8").into());
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let out = rfx(&refs);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{full:?}: {err}");
        // An error in the expression shows its line and a caret under the place; any other
        // is one line.
        let lines = if err.contains("in expression: ") { 3 } else { 1 };
        assert_eq!(err.lines().count(), lines, "{full:?}:\n{err}");
        assert!(err.starts_with("error: "), "{err}");
        assert!(err.contains(needle), "{full:?}: {err}");
        assert!(!o.exists(), "{full:?}: output directory was created");
    }
    // `run` with a missing kernel file, a missing input, an unknown input, a bad kernel.
    let kernel = dir.join("k.rfx");
    std::fs::write(
        &kernel,
        "kernel k { %x = input x : f32[3] %y = input y : f32[3] %s = add %x, %y : f32[3] output s = %s }",
    )
    .expect("write");
    let bad_kernel = dir.join("bad.rfx");
    std::fs::write(
        &bad_kernel,
        "kernel k { %x = input x : f32[3] %s = sinn %x : f32[3] output s = %s }",
    )
    .expect("write");
    let o = dir.join("run-out");
    let o_str = o.to_str().expect("utf-8").to_string();
    let runs: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["run".into(), dir.join("none.rfx").display().to_string()],
            "cannot read",
        ),
        (
            vec![
                "run".into(),
                kernel.display().to_string(),
                "--in".into(),
                arg("x", &x),
            ],
            "missing input `y`",
        ),
        (
            vec![
                "run".into(),
                kernel.display().to_string(),
                "--in".into(),
                arg("x", &x),
                "--in".into(),
                arg("q", &x),
            ],
            "unknown input `q`",
        ),
        (
            vec![
                "run".into(),
                kernel.display().to_string(),
                "--in".into(),
                arg("x", &x),
                "--in".into(),
                arg("y", &y2),
            ],
            "expected shape [3], got [2]",
        ),
        (
            vec![
                "run".into(),
                bad_kernel.display().to_string(),
                "--in".into(),
                arg("x", &x),
            ],
            "1:",
        ),
        (
            vec![
                "run".into(),
                kernel.display().to_string(),
                "--in".into(),
                arg("x", &x),
                "--in".into(),
                arg("y", &x),
                "--backend".into(),
                "tpu".into(),
            ],
            "unknown backend",
        ),
    ];
    for (mut args, needle) in runs {
        args.push("--out".into());
        args.push(o_str.clone());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = rfx(&refs);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        // A parse error in the kernel file shows its line and a caret; any other is one line.
        let lines = if args[1].ends_with("bad.rfx") { 3 } else { 1 };
        assert_eq!(err.lines().count(), lines, "{args:?}:\n{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!o.exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_grad_dump_and_dot() {
    let dir = temp_dir("cmds");
    let x = dir.join("x.npy");
    write_npy(&x, &[3], &[1.0f64, 2.0, 3.0]);
    let kernel = dir.join("k.rfx");
    std::fs::write(
        &kernel,
        "kernel sumsq { %x = input x : f64[3] %sq = mul %x, %x : f64[3] %s = sum %sq axes [0] : f64[] output loss = %s }",
    )
    .expect("write");

    let o = dir.join("run");
    let out = rfx(&[
        "run",
        kernel.to_str().expect("utf-8"),
        "--in",
        &arg("x", &x),
        "--out",
        o.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_npy::<f64>(&o.join("loss.npy")), (vec![], vec![14.0]));

    for source in [kernel.to_str().expect("utf-8"), "sum(x ** 2)"] {
        let g = dir.join(format!("grad-{}", source.len()));
        let out = rfx(&[
            "grad",
            source,
            "--wrt",
            "x",
            "--in",
            &arg("x", &x),
            "--out",
            g.to_str().expect("utf-8"),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(read_npy::<f64>(&g.join("value.npy")).1, [14.0]);
        assert_eq!(read_npy::<f64>(&g.join("grad_x.npy")).1, [2.0, 4.0, 6.0]);
    }
    let out = rfx(&["grad", "sum(x ** 2)", "--wrt", "w", "--in", &arg("x", &x)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no input named `w`"), "{}", stderr(&out));

    let stages = [
        ("hir", "input x"),
        ("mir", "kernel k0"),
        ("lir", "slots"),
        ("clif", "function"),
        ("asm", "kernel"),
    ];
    for (stage, needle) in stages {
        let out = rfx(&[
            "dump",
            "sin(x*2.0)+y",
            "--stage",
            stage,
            "--in-shapes",
            "x=f32[3],y=f32[3]",
        ]);
        assert!(out.status.success(), "{stage}: {}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(needle), "{stage}: {text}");
    }
    let out = rfx(&["dump", kernel.to_str().expect("utf-8"), "--stage", "hir"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("kernel sumsq"));
    for stage in ["cuda", "ptx", "msl", "wgsl"] {
        let out = rfx(&["dump", "x * 2.0", "--stage", stage, "--in-shapes", "x=f32[3]"]);
        let (cuda_built, metal_built) = (cfg!(feature = "cuda"), cfg!(feature = "metal"));
        let built = (matches!(stage, "cuda" | "ptx") && cuda_built)
            || (matches!(stage, "msl" | "wgsl") && metal_built);
        if !built {
            assert_eq!(out.status.code(), Some(1), "{stage}");
            assert!(
                stderr(&out).contains("not built into this rfx"),
                "{}",
                stderr(&out)
            );
        } else if stage == "cuda" {
            assert!(out.status.success(), "{}", stderr(&out));
            assert!(String::from_utf8_lossy(&out.stdout).contains("__global__"));
        } else if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains(".target") || text.contains("kernel") || text.contains("@compute"),
                "{stage}: {text}"
            );
        } else {
            // PTX needs NVRTC; without it the error is one clear line.
            assert_eq!(out.status.code(), Some(1), "{stage}");
            assert!(
                stderr(&out).contains("NVRTC") || stderr(&out).contains("nvrtc"),
                "{}",
                stderr(&out)
            );
        }
    }
    let out = rfx(&["dump", "x * 2", "--stage", "hir"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("needs input types"));

    let dot = dir.join("g.dot");
    for stage in ["hir", "mir"] {
        let out = rfx(&[
            "dot",
            "sin(x)+1",
            "--stage",
            stage,
            "--in-shapes",
            "x=f32[4]",
            "-o",
            dot.to_str().expect("utf-8"),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(std::fs::read_to_string(&dot).expect("dot").contains("digraph"));
    }
    let svg = dir.join("g.svg");
    let out = rfx(&[
        "dot",
        "sin(x)+1",
        "--in-shapes",
        "x=f32[4]",
        "-o",
        svg.to_str().expect("utf-8"),
    ]);
    if out.status.success() {
        assert!(std::fs::read_to_string(&svg).expect("svg").contains("<svg"));
    } else {
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains("Graphviz `dot` is not installed"),
            "{}",
            stderr(&out)
        );
    }

    // RFX_LOG=cache explains every compile on stderr; RFX_DUMP writes every stage.
    let dump_dir = dir.join("dump");
    let out = Command::new(env!("CARGO_BIN_EXE_rfx"))
        .args(["eval", "x * 3", "--in", &arg("x", &x)])
        .env("RFX_LOG", "cache")
        .env("RFX_DUMP", &dump_dir)
        .output()
        .expect("run rfx");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("rfx: cache miss for `expr`: first call"),
        "{}",
        stderr(&out)
    );
    let dumped = std::fs::read_dir(&dump_dir).expect("dump dir").count();
    assert_eq!(dumped, 5, "hir, opt, mir, lir, clif");

    let _ = std::fs::remove_dir_all(&dir);
}
