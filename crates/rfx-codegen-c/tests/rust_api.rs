//! The Rust export's API without compiling its output: name validation, refused programs, the
//! function's signature and length checks in the text, and snapshots of the generated module
//! for a few corpus kernels. `rust_export.rs` compiles and runs the modules.

mod common;

use common::{corpus_program, program};
use rfx_codegen_c::{ExportError, RustExport, rust_source, validate_rust_name};
use rfx_ir::lir::{LirKernel, LirProgram, Schedule};
use rfx_ir::{BufId, DType};

#[test]
fn names_must_be_rust_identifiers_without_the_reserved_prefix() {
    // `main`, `int` and `float` are fine in Rust (they are C's problem only).
    for good in [
        "pid", "_x1", "Kernel_2", "a", "main", "int", "float", "rfx", "rfxjit",
    ] {
        assert_eq!(validate_rust_name(good), Ok(()), "{good}");
    }
    for bad in [
        "",
        "_",
        "1x",
        "a-b",
        "fn",
        "match",
        "Self",
        "async",
        "gen",
        "union",
        "é",
        "a b",
        "rfx_min_f32",
        "RFX_LIT_3",
        &"x".repeat(64),
    ] {
        assert_eq!(
            validate_rust_name(bad),
            Err(ExportError::InvalidRustName(bad.to_string())),
            "{bad}"
        );
    }
    let p = corpus_program("add");
    assert_eq!(
        rust_source(&p, "loop"),
        Err(ExportError::InvalidRustName("loop".to_string()))
    );
    let message = ExportError::InvalidRustName("loop".to_string()).to_string();
    assert!(message.contains("not a valid Rust function name"), "{message}");
}

#[test]
fn every_op_is_exported_transcendentals_through_libm() {
    let p = program(
        "kernel s {\n  %x = input x : f32[4]\n  %y = input y : f32[4]\n  %a = sin %x : f32[4]\n  %b = atan2 %a, %y : f32[4]\n  %c = fmod %b, %y : f32[4]\n  %d = round %c : f32[4]\n  output out = %d\n}\n",
    );
    let RustExport { source } = rust_source(&p, "s").expect("export");
    for call in [
        "libm::sinf(",
        "libm::atan2f(",
        "libm::fmodf(",
        "libm::roundevenf(",
    ] {
        assert!(source.contains(call), "no {call} in\n{source}");
    }
    assert!(
        source.contains("// Needs the `libm` crate (0.2.16 or later) for: atan2f, fmodf, roundevenf, sinf."),
        "{source}"
    );
    let add = rust_source(&corpus_program("add"), "add").expect("export").source;
    assert!(add.contains("// Needs no crate but `core`."), "{add}");
    assert!(!add.contains("libm"), "{add}");
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
        body: vec![rfx_ir::lir::Inst::Load {
            dst: rfx_ir::lir::SlotId::new(0),
            buf: BufId::new(7),
            strides: vec![0],
            offset: 0,
        }],
        row_store: None,
    };
    let p = LirProgram::from_parts("bad", Vec::new(), 0, 1, vec![kernel]);
    assert!(matches!(
        rust_source(&p, "bad"),
        Err(ExportError::InvalidProgram(_))
    ));
}

#[test]
fn the_function_takes_slices_checks_their_lengths_and_has_no_unsafe() {
    let source = rust_source(&corpus_program("mean_var"), "mean_var")
        .expect("export")
        .source;
    assert!(
        source.contains(
            "pub fn mean_var(in_0: &[f32], out_0: &mut [f32], out_1: &mut [f32], work: &mut Work) -> Result<(), Error> {"
        ),
        "{source}"
    );
    assert!(
        source.contains("return core::result::Result::Err(Error::InputLength { index: 0, expected: 256, actual: in_0.len() });")
    );
    assert!(!source.contains("unsafe {") && !source.contains("unsafe fn"));
}

#[test]
fn generated_rust_snapshots() {
    for name in [
        "add",
        "pid_step",
        "mean_var",
        "kalman_literal",
        "scan_directions",
        "gather_rows",
    ] {
        let export = rust_source(&corpus_program(name), name).unwrap_or_else(|e| panic!("{name}: {e}"));
        insta::assert_snapshot!(format!("rust_{name}"), export.source);
    }
}
