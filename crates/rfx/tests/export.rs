//! `rfx::export`: what it exports (the program behind the files computes the kernel, its
//! gradient or its Jacobian), the files of each language, exporting what a `Jit` traced, and
//! every `KernelExportError` variant with its classification.

use rfx::export::{Derivative, ExportOptions, KernelExportError, Lang};
use rfx::{Array, DType, Kernel, Tensor, TensorType};
use rfx_ir::interp::{Mode, run_hir, run_lir};

fn f64_of(arrays: &[Array]) -> Vec<Vec<f64>> {
    arrays
        .iter()
        .map(|a| a.as_slice::<f64>().expect("f64 output").to_vec())
        .collect()
}

/// `tanh(a @ x) + Σ x²` for `a: f64[3, 2]`, `x: f64[2]`.
fn dense_map() -> Kernel {
    let signature = rfx::expr::Signature::new()
        .input("a", TensorType::new(DType::F64, [3, 2]))
        .input("x", TensorType::new(DType::F64, [2]));
    rfx::expr::compile("tanh(a @ x) + sum(x * x)", &signature).expect("compiles")
}

fn dense_map_inputs() -> [Array; 2] {
    [
        Array::from_vec([3, 2], vec![0.5f64, -1.25, 2.0, 0.75, -0.3, 1.5]).expect("a"),
        Array::from_vec([2], vec![0.4f64, -0.7]).expect("x"),
    ]
}

#[test]
fn the_exported_program_computes_the_value_and_jacobian() {
    let kernel = dense_map();
    let options = ExportOptions {
        derivative: Derivative::Jacobian("x".to_string()),
        ..ExportOptions::default()
    };
    let inputs = dense_map_inputs();
    let views = [inputs[0].view(), inputs[1].view()];
    let program = rfx::export::program(&kernel, &options).expect("exports");
    let got = f64_of(&run_lir(&program, &views, Mode::Native).expect("runs"));
    let jacobian = rfx_autodiff::jacobian(&kernel, &["x"]).expect("jacobian");
    let want = f64_of(&run_hir(&jacobian, &views, Mode::Oracle).expect("runs"));
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].len(), 6, "a 3 x 2 Jacobian");
    for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
        assert!((g - w).abs() <= 1e-14 * w.abs().max(1.0), "{got:?} vs {want:?}");
    }
    // Closed form of the first row: sech²(a₀·x) a₀ + 2x.
    let (a, x) = ([0.5f64, -1.25], [0.4f64, -0.7]);
    let t = (a[0] * x[0] + a[1] * x[1]).tanh();
    for j in 0..2 {
        let closed = (1.0 - t * t) * a[j] + 2.0 * x[j];
        assert!((got[1][j] - closed).abs() < 1e-14, "{} vs {closed}", got[1][j]);
    }

    let c = rfx::export::c(&kernel, "dense", &options).expect("exports");
    assert!(
        c.header.contains(
            "int dense(const double *in_0, const double *in_1, double *out_0, double *out_1, void *work);"
        ),
        "{}",
        c.header
    );
    assert!(
        c.header.contains("out_1: output `jac_out_x`, f64[3, 2]"),
        "{}",
        c.header
    );
    let files = rfx::export::files(&kernel, "dense", Lang::C, &options).expect("exports");
    let names: Vec<&str> = files.iter().map(|f| f.file_name.as_str()).collect();
    assert_eq!(names, ["dense.h", "dense.c"]);
    assert_eq!(files[0].text, c.header);
    assert_eq!(files[1].text, c.source);
}

#[test]
fn a_jit_exports_what_it_traces_with_gradients() {
    // The closure's inputs are named `x` and `y`.
    let energy = rfx::jit(|x: Tensor, k: Tensor| (x * x).sum_all() * k);
    let types = [TensorType::new(DType::F32, [3]), TensorType::new(DType::F32, [])];
    let options = ExportOptions {
        derivative: Derivative::Grad(vec!["x".to_string(), "y".to_string()]),
        ..ExportOptions::default()
    };
    let c = energy.export_c(&types, "energy", &options).expect("exports");
    assert!(
        c.header.contains(
            "int energy(const float *in_0, const float *in_1, float *out_0, float *out_1, float *out_2, void *work);"
        ),
        "{}",
        c.header
    );
    let traced = energy.trace(&types).expect("traces");
    assert_eq!(c, rfx::export::c(&traced, "energy", &options).expect("exports"));

    // The program behind the files: value 0.5·(1 + 4 + 9) = 7, d/dx = 2kx, d/dk = Σx².
    let x = Array::from_vec([3], vec![1.0f32, 2.0, 3.0]).expect("x");
    let k = Array::from_vec([], vec![0.5f32]).expect("k");
    let program = rfx::export::program(&traced, &options).expect("exports");
    let out = run_lir(&program, &[x.view(), k.view()], Mode::Native).expect("runs");
    let out: Vec<&[f32]> = out.iter().map(|a| a.as_slice::<f32>().expect("f32")).collect();
    assert_eq!(out, [&[7.0f32][..], &[1.0, 2.0, 3.0], &[14.0]]);

    let files = energy
        .export_files(&types, "energy", Lang::C, &options)
        .expect("exports");
    assert_eq!(files[1].text, c.source);
}

#[test]
fn fast_math_changes_the_program_not_the_abi() {
    // `x + 0.0` is not `x` for x = -0.0, so exact mode keeps the add; fast math drops it.
    let signature = rfx::expr::Signature::new().input("x", TensorType::new(DType::F32, [4]));
    let kernel = rfx::expr::compile("x * 2.0 + 0.0", &signature).expect("compiles");
    let fast_options = ExportOptions {
        fast_math: true,
        ..ExportOptions::default()
    };
    let adds = |program: &rfx_ir::lir::LirProgram| program.to_string().matches(" = add ").count();
    let exact_program = rfx::export::program(&kernel, &ExportOptions::default()).expect("exports");
    let fast_program = rfx::export::program(&kernel, &fast_options).expect("exports");
    assert_eq!(adds(&exact_program), 2, "{exact_program}");
    assert_eq!(adds(&fast_program), 1, "{fast_program}");
    let exact = rfx::export::c(&kernel, "m", &ExportOptions::default()).expect("exports");
    let fast = rfx::export::c(&kernel, "m", &fast_options).expect("exports");
    assert_eq!(exact.header, fast.header);
    assert_ne!(exact.source, fast.source);
}

#[test]
fn each_error_variant_names_its_cause() {
    let kernel = dense_map();
    let plain = ExportOptions::default();

    let err = rfx::export::c(&kernel, "2fast", &plain).expect_err("bad name");
    assert!(matches!(
        &err,
        KernelExportError::Codegen(rfx_codegen_c::ExportError::InvalidName(n)) if n == "2fast"
    ));
    assert!(err.is_user_error());

    let unknown = ExportOptions {
        derivative: Derivative::Jacobian("y".to_string()),
        ..ExportOptions::default()
    };
    let err = rfx::export::c(&kernel, "j", &unknown).expect_err("no input y");
    assert!(matches!(&err, KernelExportError::Autodiff(_)), "{err:?}");
    assert!(err.is_user_error());
    assert!(err.to_string().contains("no input named `y`"), "{err}");
    let signature = rfx::expr::Signature::new().input("x", TensorType::new(DType::F32, [2]));
    let positive = rfx::expr::compile("x > 0.0", &signature).expect("compiles");
    let jacobian_x = ExportOptions {
        derivative: Derivative::Jacobian("x".to_string()),
        ..ExportOptions::default()
    };
    let err = rfx::export::c(&positive, "p", &jacobian_x).expect_err("a bool output");
    assert!(
        matches!(&err, KernelExportError::NoFloatOutput { wrt } if wrt == "x"),
        "{err:?}"
    );
    assert!(err.is_user_error());
    // `grad` needs one single-element output; the dense map has three elements.
    let grad = ExportOptions {
        derivative: Derivative::Grad(vec!["x".to_string()]),
        ..ExportOptions::default()
    };
    let err = rfx::export::c(&kernel, "g", &grad).expect_err("vector output");
    assert!(matches!(&err, KernelExportError::Autodiff(_)), "{err:?}");

    let too_long = rfx_ir::hir::parse(
        "kernel k {\n  %x = input x : f32[3]\n  %p = pad %x low [0] : f32[3000000000]\n  %s = sum %p axes [0] : f32[]\n  output s = %s\n}\n",
    )
    .expect("the kernel verifies");
    let err = rfx::export::c(&too_long, "p", &plain).expect_err("pad past i32 indices");
    assert!(
        matches!(
            &err,
            KernelExportError::Compile(rfx_runtime::RuntimeError::Opt(rfx_opt::OptError::IndexRange(_)))
        ),
        "{err:?}"
    );
    assert!(err.is_user_error());

    let f = rfx::jit(|x: Tensor, y: Tensor| x + y);
    let err = f
        .export_c(
            &[TensorType::new(DType::F32, [2]), TensorType::new(DType::F32, [3])],
            "f",
            &plain,
        )
        .expect_err("shapes [2] and [3] do not broadcast");
    assert!(matches!(&err, KernelExportError::Trace(_)), "{err:?}");
    assert!(err.is_user_error());
    // The name is checked before tracing.
    let err = f
        .export_files(&[], "int", Lang::C, &plain)
        .expect_err("a keyword");
    assert!(matches!(&err, KernelExportError::Codegen(_)), "{err:?}");
}

#[test]
fn rust_exports_one_module_and_checks_rust_names() {
    let kernel = dense_map();
    let options = ExportOptions {
        derivative: Derivative::Jacobian("x".to_string()),
        ..ExportOptions::default()
    };
    let module = rfx::export::rust(&kernel, "dense", &options).expect("exports");
    assert!(module.source.contains("pub fn dense("), "{}", module.source);
    assert!(
        module.source.contains("output `jac_out_x`, f64[3, 2]"),
        "{}",
        module.source
    );
    let files = rfx::export::files(&kernel, "dense", Lang::Rust, &options).expect("exports");
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].file_name, "dense.rs");
    assert_eq!(files[0].text, module.source);

    // `main` is a C name the export refuses and a fine Rust one; `rfx_` is the module's prefix.
    let f = rfx::jit(|x: Tensor| x * 2.0);
    let types = [TensorType::new(DType::F32, [2])];
    let plain = ExportOptions::default();
    assert!(f.export_files(&types, "main", Lang::Rust, &plain).is_ok());
    let err = f
        .export_files(&types, "main", Lang::C, &plain)
        .expect_err("C's main");
    assert!(matches!(
        &err,
        KernelExportError::Codegen(rfx_codegen_c::ExportError::InvalidName(_))
    ));
    let err = rfx::export::rust(&kernel, "rfx_dense", &plain).expect_err("reserved prefix");
    assert!(matches!(
        &err,
        KernelExportError::Codegen(rfx_codegen_c::ExportError::InvalidRustName(_))
    ));
    assert!(err.is_user_error());
}
