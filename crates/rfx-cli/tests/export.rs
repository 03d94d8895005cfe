//! `rfx export --lang c`: the files it writes, that they compile (with the host C compiler,
//! when there is one) and compute the kernel, `--grad` and `--jacobian` (against the
//! interpreter and finite differences), and that refused names, ops, derivatives and flags
//! write nothing and leave earlier files as they were.

use crate::common;
use crate::fixtures;

use std::path::Path;
use std::process::{Command, Output};

use common::{rfx, stderr_of, temp_dir};
use fixtures::entries;

/// Compiles `driver` (a C `main` including NAME.c from `dir`), runs it and checks that it
/// prints `want`; skips (with a note) when no C compiler is present.
fn check_driver(dir: &Path, driver: &str, want: &str) {
    if let Some(printed) = driver_output(dir, driver) {
        assert_eq!(printed.trim(), want);
    }
}

/// Compiles `driver` (a C `main` including NAME.c from `dir`) with the tested flags, runs it
/// and returns what it printed; `None` (with a note) when no C compiler is present.
fn driver_output(dir: &Path, driver: &str) -> Option<String> {
    let Some(cc) = ["gcc", "clang", "cc"].into_iter().find(|cc| {
        Command::new(cc)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        eprintln!("skipped the compile step: no C compiler found");
        return None;
    };
    std::fs::write(dir.join("driver.c"), driver).expect("write driver");
    let exe = dir.join("driver");
    let out = Command::new(cc)
        .args(rfx_codegen_c::TESTED_FLAGS)
        .arg(dir.join("driver.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run the C compiler");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().expect("run the driver");
    assert!(run.status.success());
    Some(String::from_utf8_lossy(&run.stdout).into_owned())
}

/// Runs `rfx export SOURCE --lang c --name NAME` followed by `options`.
fn export(source: &str, name: &str, options: &[&str]) -> Output {
    let mut args = vec!["export", source, "--lang", "c", "--name", name];
    args.extend_from_slice(options);
    rfx(&args)
}

/// Exports `expr` as C function `name` (inputs `in_shapes`, then `extra` arguments) into a
/// fresh directory; returns that directory and the header's text.
fn export_c(expr: &str, name: &str, in_shapes: &str, extra: &[&str]) -> (std::path::PathBuf, String) {
    let out_dir = temp_dir(&format!("export_c_{name}")).join("gen");
    let path = out_dir.to_str().expect("utf-8 path");
    let mut options = vec!["--in-shapes", in_shapes];
    options.extend_from_slice(extra);
    options.extend_from_slice(&["--out", path]);
    let out = export(expr, name, &options);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let header = std::fs::read_to_string(out_dir.join(format!("{name}.h"))).expect("header");
    (out_dir, header)
}

#[test]
fn export_writes_a_header_and_source_that_compute_the_expression() {
    let (out_dir, header) = export_c("x * 2.0 + y", "axpy", "x=f32[3],y=f32[3]", &[]);
    assert!(
        header.contains("int axpy(const float *in_0, const float *in_1, float *out_0, void *work);"),
        "{header}"
    );
    assert!(header.contains("#define AXPY_WORK_BYTES 0u"), "{header}");
    let driver = r#"#include <stdio.h>
#include "axpy.c"
int main(void) {
  float x[3] = {1.0f, -2.5f, 0.125f}, y[3] = {0.5f, 1.0f, -4.0f}, out[3];
  int rc = axpy(x, y, out, 0);
  printf("%d %.9g %.9g %.9g\n", rc, (double)out[0], (double)out[1], (double)out[2]);
  return 0;
}
"#;
    check_driver(&out_dir, driver, "0 2.5 -4 -3.75");
}

#[test]
fn export_with_grad_writes_the_value_then_the_gradients() {
    let (out_dir, header) = export_c(
        "sum(x * x * y)",
        "energy",
        "x=f64[2],y=f64[2]",
        &["--grad", "x,y"],
    );
    assert!(header.contains("out_0: output `out`, f64[]"), "{header}");
    assert!(header.contains("out_1: output `grad_x`, f64[2]"), "{header}");
    assert!(header.contains("out_2: output `grad_y`, f64[2]"), "{header}");
    let driver = r#"#include <stdio.h>
#include "energy.c"
static double work[ENERGY_WORK_BYTES / 8 + 8];
int main(void) {
  double x[2] = {3.0, -1.5}, y[2] = {2.0, 4.0}, v[1], gx[2], gy[2];
  int rc = energy(x, y, v, gx, gy, work);
  printf("%d %g %g %g %g %g\n", rc, v[0], gx[0], gx[1], gy[0], gy[1]);
  return 0;
}
"#;
    // value = 9*2 + 2.25*4 = 27; d/dx = 2 x y = (12, -12); d/dy = x^2 = (9, 2.25).
    check_driver(&out_dir, driver, "0 27 12 -12 9 2.25");
}

/// A kernel file in `dir` that the optimiser refuses after parsing: a `pad` whose element
/// indices pass `i32`.
fn pad_past_i32(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("pad.rfx");
    std::fs::write(
        &path,
        "kernel k {\n  %x = input x : f32[3]\n  %p = pad %x low [0] : f32[3000000000]\n  %s = sum %p axes [0] : f32[]\n  output s = %s\n}\n",
    )
    .expect("write the kernel");
    path
}

#[test]
fn refused_names_and_kernels_write_nothing() {
    let dir = temp_dir("export_c_refused");
    let out_dir = dir.join("gen");
    let path = out_dir.to_str().expect("utf-8 path");
    let bad_name = export("x + 1.0", "2fast", &["--in-shapes", "x=f32[2]", "--out", path]);
    assert_eq!(bad_name.status.code(), Some(1));
    assert!(stderr_of(&bad_name).contains("`2fast` is not a valid C function name"));
    let pad = pad_past_i32(&dir);
    let too_long = export(pad.to_str().expect("utf-8 path"), "p", &["--out", path]);
    assert_eq!(too_long.status.code(), Some(1));
    assert!(
        stderr_of(&too_long).contains("that `i32` does not hold"),
        "{}",
        stderr_of(&too_long)
    );
    assert!(
        !out_dir.exists(),
        "a refused export created {}",
        out_dir.display()
    );
}

#[test]
fn export_reads_a_kernel_file_and_replaces_earlier_files() {
    let dir = temp_dir("export_c_file");
    let out_dir = dir.join("gen");
    std::fs::create_dir_all(&out_dir).expect("dir");
    std::fs::write(out_dir.join("mv.c"), "stale").expect("write");
    let kernel = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rfx-opt/tests/corpus/mean_var.rfx");
    let kernel = kernel.to_str().expect("utf-8 path");
    let out_path = out_dir.to_str().expect("utf-8 path");
    let out = export(kernel, "mv", &["--out", out_path]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let header = std::fs::read_to_string(out_dir.join("mv.h")).expect("header");
    assert!(
        header.contains("int mv(const float *in_0, float *out_0, float *out_1, void *work);"),
        "{header}"
    );
    let source = std::fs::read_to_string(out_dir.join("mv.c")).expect("source");
    assert!(source.starts_with("/* mv.c: rfx program `mean_var`"), "{source}");
    // --in-shapes is refused with a kernel file, as for `rfx dump`.
    let both = export(kernel, "mv", &["--in-shapes", "x=f32[256]", "--out", out_path]);
    assert_eq!(both.status.code(), Some(1), "{}", stderr_of(&both));
}

/// The expression of the Jacobian tests and its input types: a map from R² to R³ whose
/// Jacobian with respect to `x` is dense, `sech²(a x) a + 2 x`.
const JAC_EXPR: &str = "tanh(a @ x) + sum(x * x)";
const JAC_A: [f64; 6] = [0.5, -1.25, 2.0, 0.75, -0.3, 1.5];
const JAC_X: [f64; 2] = [0.4, -0.7];

fn jac_kernel() -> rfx::Kernel {
    use rfx::{DType, TensorType};
    let signature = rfx::expr::Signature::new()
        .input("a", TensorType::new(DType::F64, [3, 2]))
        .input("x", TensorType::new(DType::F64, [2]));
    rfx::expr::compile(JAC_EXPR, &signature).expect("the expression compiles")
}

/// The outputs of the interpreter (in f64) on `kernel` at `a`, `x`.
fn interpret(kernel: &rfx::Kernel, a: &[f64], x: &[f64]) -> Vec<Vec<f64>> {
    use rfx::{ArrayView, Shape};
    let (a_shape, x_shape) = (Shape::new([3, 2]), Shape::new([2]));
    let a = ArrayView::new(&a_shape, a).expect("a");
    let x = ArrayView::new(&x_shape, x).expect("x");
    rfx_ir::interp::run_hir(kernel, &[a, x], rfx_ir::interp::Mode::Oracle)
        .expect("the interpreter runs the kernel")
        .iter()
        .map(|out| out.as_slice::<f64>().expect("f64 output").to_vec())
        .collect()
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{i}]: {g} vs {w} (all: {got:?} vs {want:?})"
        );
    }
}

#[test]
fn export_with_jacobian_matches_the_interpreter_and_finite_differences() {
    let (out_dir, header) = export_c(JAC_EXPR, "jac", "a=f64[3,2],x=f64[2]", &["--jacobian", "x"]);
    assert!(
        header.contains(
            "int jac(const double *in_0, const double *in_1, double *out_0, double *out_1, void *work);"
        ),
        "{header}"
    );
    assert!(header.contains("out_0: output `out`, f64[3]"), "{header}");
    assert!(
        header.contains("out_1: output `jac_out_x`, f64[3, 2]"),
        "{header}"
    );
    let driver = r#"#include <stdio.h>
#include "jac.c"
static double work[JAC_WORK_BYTES / 8 + 1] __attribute__((aligned(64)));
int main(void) {
  const double a[6] = {0.5, -1.25, 2.0, 0.75, -0.3, 1.5}, x[2] = {0.4, -0.7};
  double v[3], j[6];
  int rc = jac(a, x, v, j, work), i;
  printf("%d", rc);
  for (i = 0; i < 3; i++) printf(" %.17g", v[i]);
  for (i = 0; i < 6; i++) printf(" %.17g", j[i]);
  printf("\n");
  return 0;
}
"#;
    let Some(printed) = driver_output(&out_dir, driver) else {
        return;
    };
    let numbers: Vec<f64> = printed
        .split_whitespace()
        .map(|n| n.parse().expect("a number"))
        .collect();
    assert_eq!(numbers.first(), Some(&0.0), "return code: {printed}");
    let (value, jacobian) = (&numbers[1..4], &numbers[4..]);

    let kernel = jac_kernel();
    let want_value = interpret(&kernel, &JAC_A, &JAC_X);
    // The export's tanh is within 4 ULP of the f64 oracle.
    assert_close("value", value, &want_value[0], 1e-14);
    let derivative = rfx_autodiff::jacobian(&kernel, &["x"]).expect("the Jacobian kernel");
    let want = interpret(&derivative, &JAC_A, &JAC_X);
    assert_close("jacobian vs the interpreter", jacobian, &want[1], 1e-13);

    // Central differences: column k is (f(x + h e_k) - f(x - h e_k)) / 2h, row-major [3, 2].
    let h = 1e-6;
    let mut by_differences = vec![0.0; 6];
    for k in 0..2 {
        let (mut up, mut down) = (JAC_X, JAC_X);
        up[k] += h;
        down[k] -= h;
        let (f_up, f_down) = (interpret(&kernel, &JAC_A, &up), interpret(&kernel, &JAC_A, &down));
        for row in 0..3 {
            by_differences[row * 2 + k] = (f_up[0][row] - f_down[0][row]) / (2.0 * h);
        }
    }
    assert_close("jacobian vs finite differences", jacobian, &by_differences, 1e-7);
}

/// A directory holding an earlier export's `keep.c` and `keep.h`.
fn earlier_export(tag: &str) -> std::path::PathBuf {
    let dir = temp_dir(tag).join("gen");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("keep.c"), "/* earlier source */\n").expect("write");
    std::fs::write(dir.join("keep.h"), "/* earlier header */\n").expect("write");
    dir
}

#[test]
fn a_failing_export_leaves_the_earlier_files_untouched() {
    let dir = earlier_export("export_c_keep");
    let path = dir.to_str().expect("utf-8 path");
    let pad = pad_past_i32(dir.parent().expect("parent"));
    let pad = pad.to_str().expect("utf-8 path");
    let shapes = ["--in-shapes", "x=f64[2],k=i32[2]"];
    // (kernel, function name, flags, what stderr says)
    let cases: [(&str, &str, &[&str], &str); 6] = [
        ("x * 2.0", "keep", &["--jacobian", "y"], "no input named `y`"),
        (
            "x > 0.0",
            "keep",
            &["--jacobian", "x"],
            "has no f32 or f64 output",
        ),
        (
            "x * cast(k, f64)",
            "keep",
            &["--jacobian", "k"],
            "input `k` has dtype i32",
        ),
        (
            "x * 2.0",
            "keep",
            &["--grad", "x"],
            "needs a single-element output",
        ),
        ("x * 2.0", "do", &["--fast-math"], "not a valid C function name"),
        // Refused by the optimiser, after the derivative was built.
        (pad, "keep", &["--grad", "x"], "that `i32` does not hold"),
    ];
    for (kernel, name, flags, needle) in cases {
        let mut options = flags.to_vec();
        if kernel != pad {
            options.extend_from_slice(&shapes);
        }
        options.extend_from_slice(&["--out", path]);
        let out = export(kernel, name, &options);
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{kernel} {flags:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(needle),
            "{kernel} {flags:?}: {stderr}"
        );
        assert_eq!(entries(&dir), ["keep.c", "keep.h"], "{kernel} {flags:?}");
        assert_eq!(
            std::fs::read_to_string(dir.join("keep.c")).expect("source"),
            "/* earlier source */\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("keep.h")).expect("header"),
            "/* earlier header */\n"
        );
    }
}

#[test]
fn a_file_that_cannot_be_replaced_leaves_the_other_untouched() {
    // `keep.c` is a directory: the header is staged first, then the source is refused, and
    // the earlier header stays as it was with no temporary file left beside it.
    let dir = earlier_export("export_c_half");
    std::fs::remove_file(dir.join("keep.c")).expect("remove");
    std::fs::create_dir(dir.join("keep.c")).expect("a directory in the way");
    let path = dir.to_str().expect("utf-8 path");
    let out = export(
        "x * 2.0",
        "keep",
        &["--in-shapes", "x=f32[2]", "--jacobian", "x", "--out", path],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("keep.c"), "{}", stderr_of(&out));
    assert_eq!(entries(&dir), ["keep.c", "keep.h"]);
    assert!(dir.join("keep.c").is_dir());
    assert_eq!(
        std::fs::read_to_string(dir.join("keep.h")).expect("header"),
        "/* earlier header */\n"
    );
}

#[test]
fn grad_and_jacobian_together_are_a_usage_error() {
    let dir = earlier_export("export_c_conflict");
    let path = dir.to_str().expect("utf-8 path");
    let out = export(
        "sum(x * x)",
        "keep",
        &[
            "--in-shapes",
            "x=f64[2]",
            "--grad",
            "x",
            "--jacobian",
            "x",
            "--out",
            path,
        ],
    );
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--jacobian") && stderr.contains("--grad") && stderr.contains("cannot be used with"),
        "{stderr}"
    );
    assert_eq!(entries(&dir), ["keep.c", "keep.h"]);
}

#[test]
fn export_as_rust_writes_a_module_whose_jacobian_matches_the_closed_form() {
    // f(x) = a (x ∘ x) + Σ x, so ∂f_i/∂x_j = 2 a_ij x_j + 1; no function of `libm` is needed.
    let dir = temp_dir("export_rust");
    let out_dir = dir.join("gen");
    let path = out_dir.to_str().expect("utf-8 path");
    let out = rfx(&[
        "export",
        "a @ (x * x) + sum(x)",
        "--lang",
        "rust",
        "--name",
        "poly",
        "--in-shapes",
        "a=f64[3,2],x=f64[2]",
        "--jacobian",
        "x",
        "--out",
        path,
    ]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(entries(&out_dir), ["poly.rs"]);
    let module = std::fs::read_to_string(out_dir.join("poly.rs")).expect("module");
    assert!(module.contains("pub fn poly("), "{module}");
    let main = r#"#[path = "gen/poly.rs"]
mod poly;
fn main() {
    let a = [0.5f64, -1.25, 2.0, 0.75, -0.3, 1.5];
    let x = [0.4f64, -0.7];
    let (mut v, mut j) = ([0.0f64; 3], [0.0f64; 6]);
    poly::poly(&a, &x, &mut v, &mut j, &mut poly::Work::new()).expect("lengths match");
    let short = poly::poly(&a, &x[..1], &mut v, &mut j, &mut poly::Work::new());
    println!("{v:?} {j:?} {}", short.is_err());
}
"#;
    std::fs::write(dir.join("main.rs"), main).expect("write main");
    let exe = dir.join("poly_main");
    let built = Command::new("rustc")
        .args(["--edition", "2024", "-O"])
        .arg(dir.join("main.rs"))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run rustc");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe).output().expect("run");
    assert!(run.status.success());
    let (a, x) = ([0.5f64, -1.25, 2.0, 0.75, -0.3, 1.5], [0.4f64, -0.7]);
    let value: Vec<f64> = (0..3)
        .map(|i| a[2 * i] * x[0] * x[0] + a[2 * i + 1] * x[1] * x[1] + (x[0] + x[1]))
        .collect();
    let jacobian: Vec<f64> = (0..6).map(|k| 2.0 * a[k] * x[k % 2] + 1.0).collect();
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        format!("{value:?} {jacobian:?} true")
    );

    let keyword = rfx(&[
        "export",
        "x",
        "--lang",
        "rust",
        "--name",
        "fn",
        "--in-shapes",
        "x=f64[2]",
        "--out",
        path,
    ]);
    assert_eq!(keyword.status.code(), Some(1));
    assert!(
        stderr_of(&keyword).contains("`fn` is not a valid Rust function name"),
        "{}",
        stderr_of(&keyword)
    );
    assert_eq!(entries(&out_dir), ["poly.rs"]);
}
