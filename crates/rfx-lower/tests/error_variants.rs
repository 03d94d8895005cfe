//! Raises the `LowerError` variants and `BackendError::Lower` through `lower` and the
//! `"interp"` backend with bad programs and settings, and pins the message of the one variant
//! only a lowering bug could produce.

use rfx_ir::lir::{self, LirProgram};
use rfx_ir::mir::{self, MirProgram};
use rfx_ir::{Array, TypeError};
use rfx_lower::{
    Backend, BackendError, CompileOptions, InterpBackend, LowerConfig, LowerError, execute_lowered, lower,
};

/// A valid MIR program: `y = -x` over three elements.
const MIR_NEG: &str = "\
mir m {
  buf0: f32[3] = input x
  buf1: f32[3] = output y
  kernel k0 [3] {
    %0 = load buf0 [1] : f32
    %1 = neg %0 : f32
    store buf1 = %1
  }
}
";

fn valid_mir() -> MirProgram {
    let program = mir::parse(MIR_NEG).expect("the program parses");
    mir::verify(&program).expect("the program verifies");
    program
}

/// The kinds in the LIR verifier's report inside `err`, or a panic naming what came back.
fn lir_kinds(err: &LowerError) -> Vec<lir::VerifyErrorKind> {
    match err {
        LowerError::InvalidLir(errors) => errors.errors().iter().map(|e| e.kind.clone()).collect(),
        other => panic!("expected LowerError::InvalidLir, got {other:?}"),
    }
}

#[test]
fn lower_rejects_a_mir_program_that_does_not_verify() {
    // `sin` of an i32 load into an f32 output: the op rejects the dtype.
    let text = MIR_NEG
        .replace("buf0: f32[3]", "buf0: i32[3]")
        .replace("load buf0 [1] : f32", "load buf0 [1] : i32")
        .replace("neg %0 : f32", "sin %0 : i32");
    let program = mir::parse(&text).expect("the program parses");
    let err = lower(&program, &LowerConfig::default()).expect_err("the program is invalid");
    let LowerError::InvalidMir(errors) = &err else {
        panic!("expected LowerError::InvalidMir, got {err:?}");
    };
    assert!(
        errors.errors().iter().any(|e| matches!(
            e.kind,
            mir::VerifyErrorKind::Type(TypeError::UnsupportedDType { .. })
        )),
        "{err}"
    );
}

#[test]
fn lower_rejects_an_arena_alignment_that_is_not_a_power_of_two() {
    let config = LowerConfig {
        arena_align: 3,
        ..LowerConfig::default()
    };
    let err = lower(&valid_mir(), &config).expect_err("alignment 3 is not a power of two");
    let kinds = lir_kinds(&err);
    assert!(
        kinds
            .iter()
            .any(|kind| matches!(kind, lir::VerifyErrorKind::ArenaAlign(3))),
        "{kinds:?}"
    );
}

#[test]
fn lower_rejects_a_vector_size_that_gives_a_width_not_a_power_of_two() {
    // 12 bytes of 4-byte elements: a vector width of 3.
    let config = LowerConfig {
        vector_bytes: 12,
        ..LowerConfig::default()
    };
    let err = lower(&valid_mir(), &config).expect_err("a vector width of 3");
    let kinds = lir_kinds(&err);
    assert!(
        kinds
            .iter()
            .any(|kind| matches!(kind, lir::VerifyErrorKind::VectorWidth(3))),
        "{kinds:?}"
    );
}

/// A valid LIR program, `y = -x` over three elements, with `store` edited to write the input.
fn lir_writing_its_input() -> LirProgram {
    let text = "\
lir l arena 0 align 64 {
  buf0: f32[3] = input x
  buf1: f32[3] = output y
  kernel k0 dims [3] reduce 0 vector 4 thread_min 32768 tile 1024 lanes 1 {
    slots [f32, f32]
    preamble {}
    body {
      s0 = load buf0 [1]
      s1 = neg s0
      store buf1 [1] = s1
    }
  }
}
";
    lir::verify(&lir::parse(text).expect("parses")).expect("the base program verifies");
    lir::parse(&text.replace("store buf1 [1]", "store buf0 [1]")).expect("the edited program parses")
}

#[test]
fn a_backend_given_lir_that_does_not_verify_reports_a_lowering_error() {
    let program = lir_writing_its_input();
    let err = InterpBackend
        .compile(&program, &CompileOptions::default())
        .map(|_| ())
        .expect_err("the program writes its input and never its output");
    assert!(
        matches!(&err, BackendError::Lower(LowerError::InvalidLir(errors))
            if errors.errors().iter().any(|e| matches!(e.kind, lir::VerifyErrorKind::WriteToInput(_)))),
        "{err:?}"
    );

    let x = Array::from_slice(&[1.0f32, 2.0, 3.0]);
    let err = execute_lowered(&program, &[("x", x.view())], &InterpBackend).expect_err("invalid program");
    assert!(
        matches!(err, BackendError::Lower(LowerError::InvalidLir(_))),
        "{err:?}"
    );
}

#[test]
fn malformed_names_the_kernel_and_value_that_could_not_be_lowered() {
    // Internal invariant: unreachable from the public API because `lower` verifies the MIR
    // first, and in a verified kernel every operand, store and reduction refers to an earlier
    // value, which is marked needed and given a slot (or a pooled constant) before it is read.
    let err = LowerError::Malformed {
        kernel: "k0".to_string(),
        value: 2,
    };
    assert_eq!(
        err.to_string(),
        "internal error: kernel `k0` value %2 could not be lowered"
    );
}
