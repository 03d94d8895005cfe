//! `rfx export --lang c`: the files it writes, that they compile (with the host C compiler,
//! when there is one) and compute the kernel, `--grad`, and that refused names and ops write
//! nothing.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{rfx, stderr_of, temp_dir};

/// Compiles `driver` (a C `main` including NAME.c from `dir`), runs it and checks that it
/// prints `want`; skips (with a note) when no C compiler is present.
fn check_driver(dir: &Path, driver: &str, want: &str) {
    let Some(cc) = ["gcc", "clang", "cc"].into_iter().find(|cc| {
        Command::new(cc)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        eprintln!("skipped the compile step: no C compiler found");
        return;
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
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), want);
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

#[test]
fn refused_names_and_ops_write_nothing() {
    let dir = temp_dir("export_c_refused");
    let out_dir = dir.join("gen");
    let path = out_dir.to_str().expect("utf-8 path");
    let bad_name = export("x + 1.0", "2fast", &["--in-shapes", "x=f32[2]", "--out", path]);
    assert_eq!(bad_name.status.code(), Some(1));
    assert!(stderr_of(&bad_name).contains("`2fast` is not a valid C function name"));
    let sin = export("sin(x)", "s", &["--in-shapes", "x=f32[2]", "--out", path]);
    assert_eq!(sin.status.code(), Some(1));
    assert!(
        stderr_of(&sin).contains("does not support `sin`"),
        "{}",
        stderr_of(&sin)
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
