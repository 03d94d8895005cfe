//! The C export's API: name validation, refused ops and programs, the header's ABI text, the
//! null-pointer and work-buffer checks of the generated function (compiled and run), blocked
//! reductions (more than one leaf, so the leaf tree of `ReduceLeaves`) against the
//! interpreter, and snapshots of the generated C of a few corpus kernels.

mod common;

use common::{Job, check_with_every_compiler, compile_and_run, compilers, corpus_program as corpus, program};
use rfx_codegen_c::{ExportError, c_source, validate_name};
use rfx_ir::lir::{Inst, LirKernel, LirProgram, Schedule, SlotId};
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{BufId, DType};

#[test]
fn names_must_be_c_identifiers() {
    for good in ["pid", "_x1", "Kernel_2", "a"] {
        assert_eq!(validate_name(good), Ok(()), "{good}");
    }
    for bad in [
        "",
        "1x",
        "a-b",
        "int",
        "return",
        "main",
        "é",
        "a b",
        &"x".repeat(64),
    ] {
        assert_eq!(
            validate_name(bad),
            Err(ExportError::InvalidName(bad.to_string())),
            "{bad}"
        );
    }
    let p = corpus("add");
    assert!(matches!(c_source(&p, "float"), Err(ExportError::InvalidName(_))));
}

#[test]
fn transcendentals_and_float_fmod_are_exported_as_helpers() {
    let p = program("kernel s {\n  %x = input x : f32[4]\n  %y = sin %x : f32[4]\n  output out = %y\n}\n");
    let source = c_source(&p, "s").expect("sin exports").source;
    assert!(
        source.contains("static inline float s_sin_f32(float x)"),
        "{source}"
    );
    // f32 code declares and casts to no double (soft-float helpers on a single-precision
    // FPU); only the FLT_EVAL_METHOD check's message names the type.
    assert!(
        source.lines().all(
            |line| line.starts_with("#error") || !(line.contains("double ") || line.contains("(double)"))
        ),
        "{source}"
    );
    let p = program(
        "kernel f {\n  %x = input x : f64[4]\n  %y = input y : f64[4]\n  %z = fmod %x, %y : f64[4]\n  output out = %z\n}\n",
    );
    let source = c_source(&p, "f").expect("fmod exports").source;
    assert!(
        source.contains("static inline double f_fmod_f64(double x, double y)"),
        "{source}"
    );
}

#[test]
fn programs_that_do_not_verify_are_refused() {
    let kernel = LirKernel {
        name: "k".to_string(),
        dims: vec![1],
        reduce_dims: 0,
        scan: None,
        schedule: Schedule::default(),
        slots: vec![DType::F32],
        preamble: Vec::new(),
        body: vec![Inst::Load {
            dst: SlotId::new(0),
            buf: BufId::new(5),
            strides: vec![0],
            offset: 0,
        }],
        row_store: None,
    };
    let p = LirProgram::from_parts("bad", Vec::new(), 0, 1, vec![kernel]);
    assert!(matches!(c_source(&p, "bad"), Err(ExportError::InvalidProgram(_))));
}

#[test]
fn the_header_states_the_abi() {
    let p = corpus("mean_var");
    let export = c_source(&p, "mean_var").expect("export");
    let h = &export.header;
    assert!(
        h.contains("int mean_var(const float *in_0, float *out_0, float *out_1, void *work);"),
        "{h}"
    );
    assert!(h.contains("#define MEAN_VAR_WORK_BYTES "), "{h}");
    assert!(h.contains("in_0:  input `x`, f32[256] (256 elements)"), "{h}");
    assert!(h.contains("out_0: output `mean`, f32[1] (1 elements)"), "{h}");
    assert!(h.contains("out_1: output `var`, f32[] (1 elements)"), "{h}");
    assert!(h.contains("#include <stdint.h>"));
    // The source needs no header but stdint.h and its own.
    let includes: Vec<&str> = export
        .source
        .lines()
        .filter(|l| l.starts_with("#include"))
        .collect();
    assert_eq!(includes, ["#include <stdint.h>", "#include \"mean_var.h\""]);
}

/// A program with temporaries in the work buffer (several kernels).
fn with_work() -> LirProgram {
    let p = corpus("kalman_literal");
    assert!(
        p.kernels().len() > 1 && p.arena_bytes() > 0,
        "kalman_literal has no temporaries"
    );
    p
}

#[test]
fn null_pointers_and_misaligned_work_return_codes_and_write_nothing() {
    let Some(cc) = compilers().first().copied() else {
        eprintln!("skipped: no C compiler (gcc or clang) found");
        return;
    };
    let p = with_work();
    let export = c_source(&p, "kf").expect("export");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("kf.h"), &export.header).expect("write");
    std::fs::write(dir.path().join("kf.c"), &export.source).expect("write");
    let driver = r#"#include <stdio.h>
#include <stdint.h>
#include "kf.c"
static unsigned char raw[KF_WORK_BYTES + KF_WORK_ALIGN + 8];
int main(void) {
  static double x[4] = {1.0, 2.0, 3.0, 4.0}, p[16], xn[4], pn[16];
  unsigned char *work = (unsigned char *)(((uintptr_t)raw + KF_WORK_ALIGN - 1u) & ~(uintptr_t)(KF_WORK_ALIGN - 1u));
  int i, a, b, c, d, e;
  for (i = 0; i < 16; ++i) { p[i] = (i % 5 == 0) ? 1.0 : 0.0; pn[i] = -7.0; }
  for (i = 0; i < 4; ++i) xn[i] = -7.0;
  a = kf(0, p, xn, pn, work);
  b = kf(x, p, xn, 0, work);
  c = kf(x, p, xn, pn, 0);
  d = kf(x, p, xn, pn, work + 8);
  printf("%d %d %d %d %g %g\n", a, b, c, d, xn[0], pn[15]);
  e = kf(x, p, xn, pn, work);
  printf("%d %g %g %g %g %g %g\n", e, xn[0], xn[1], xn[2], xn[3], pn[0], pn[15]);
  return 0;
}
"#;
    let text = compile_and_run(cc, &[], dir.path(), "driver", driver);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "1 1 1 2 -7 -7", "{text}");
    // x' = F x with dt = 0.01; P' = F I F^T + Q: P'[0][0] = 1 + dt^2 + 1e-4, P'[3][3] = 1 + 0.01.
    assert_eq!(lines[1], "0 1.03 2.04 3 4 1.0002 1.01", "{text}");
}

#[test]
fn blocked_reductions_follow_the_leaf_tree() {
    let mut rng = TestRng::new(11);
    let mut jobs = Vec::new();
    // Long rows (leaves are pieces of a row), short rows (leaves are groups of rows), a mean in
    // f64 and a product.
    for text in common::BLOCKED_REDUCTIONS {
        let kernel = rfx_ir::hir::parse(text).expect("parse");
        let p = common::lower_kernel(&kernel).expect("lowers");
        let source = c_source(&p, "probe").expect("export").source;
        assert!(
            source.contains("cnt") && source.contains("top"),
            "no leaf stack in {text}"
        );
        jobs.push(Job {
            name: text.lines().next().unwrap_or_default().to_string(),
            program: p,
            inputs: random_inputs(&mut rng, &kernel, 0.0),
            ulp_bound: None,
        });
    }
    assert!(
        jobs.iter()
            .all(|j| j.program.kernels().iter().any(|k| k.schedule.reduce_lanes > 1)),
        "lowering gave single-lane reductions: the leaf tree is not exercised"
    );
    check_with_every_compiler(&jobs, &[&[]]);
}

#[test]
fn generated_c_snapshots() {
    for name in ["add", "mean_var", "casts", "kalman_literal", "pid_step"] {
        let p = corpus(name);
        match c_source(&p, name) {
            Ok(export) => {
                insta::assert_snapshot!(format!("{name}_h"), export.header);
                insta::assert_snapshot!(format!("{name}_c"), export.source);
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

/// Two temporaries of different dtypes at the same arena bytes (one dead before the other is
/// written): the export gives them bytes of their own, since C may reorder a `float` and an
/// `int32_t` access to the same memory, and still computes the interpreter's bits.
#[test]
fn arena_bytes_shared_across_dtypes_get_their_own_work_bytes() {
    // Each kernel loads `src`, applies `op` to `s0` and stores `s1` to `dst`.
    let kernel = |name: &str, slots: &str, src: &str, op: &str, dst: &str| {
        format!(
            "  kernel {name} dims [4] reduce 0 vector 1 thread_min 32768 tile 1024 lanes 1 {{\n    \
             slots [{slots}]\n    preamble {{}}\n    body {{\n      s0 = load {src} [1]\n      \
             s1 = {op}\n      store {dst} [1] = s1\n    }}\n  }}\n"
        )
    };
    let text = [
        "lir shared arena 16 align 64 {\n  buf0: f32[4] = input x\n  buf1: f32[4] = output y\n  \
         buf2: i32[4] = output z\n  buf3: f32[4] = arena 0\n  buf4: i32[4] = arena 0\n"
            .to_string(),
        kernel("k0", "f32, f32", "buf0", "add s0, s0", "buf3"),
        kernel("k1", "f32, f32", "buf3", "mul s0, s0", "buf1"),
        kernel("k2", "f32, i32", "buf0", "cast s0", "buf4"),
        kernel("k3", "i32, i32", "buf4", "add s0, s0", "buf2"),
        "}\n".to_string(),
    ]
    .concat();
    let p = rfx_ir::lir::parse(&text).expect("parse");
    let export = c_source(&p, "shared").expect("export");
    assert!(
        export.header.contains("#define SHARED_WORK_BYTES 32u"),
        "{}",
        export.header
    );
    assert!(
        export
            .source
            .contains("float *buf3 = (float *)((unsigned char *)work + 0u);")
    );
    assert!(
        export
            .source
            .contains("int32_t *buf4 = (int32_t *)((unsigned char *)work + 16u);")
    );
    let x = rfx_ir::Array::new(
        rfx_ir::Shape::new([4]),
        rfx_ir::ArrayData::F32(vec![1.5, -2.25, 1e9, f32::NAN]),
    )
    .expect("array");
    let jobs = vec![Job {
        name: "shared".to_string(),
        program: p,
        inputs: vec![x],
        ulp_bound: None,
    }];
    check_with_every_compiler(&jobs, &[&[]]);
}
