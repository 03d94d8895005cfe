//! Raises `rfx-ir` error variants through the public API, one bad input each: typing rules,
//! `Builder` rejections, and the MIR/LIR `Type` and `InvalidName` kinds. `InterpError::Inconsistent`,
//! which no input reaches, is pinned by its message.

use rfx_ir::hir::{self, BuildError, Builder, ValueId};
use rfx_ir::interp::InterpError;
use rfx_ir::lir::{self, LirProgram};
use rfx_ir::mir::{self, MirProgram};
use rfx_ir::{BinaryOp, CmpOp, DType, ReduceOp, Shape, TensorType, TypeError, UnaryOp};

/// `add` of an f32 and an i32 operand: a dtype mismatch the verifier rejects (one file, read
/// by the error-variant tests of rfx-ir, rfx-opt and rfx-runtime).
const DTYPE_MISMATCH: &str = include_str!("data/dtype_mismatch.rfx");

fn f32s(shape: impl Into<Shape>) -> TensorType {
    TensorType::new(DType::F32, shape)
}

/// The `TypeError` inside a `BuildError::Type`, or a panic naming what came back instead.
fn type_error(result: Result<ValueId, BuildError>) -> TypeError {
    match result {
        Err(BuildError::Type { source, .. }) => source,
        other => panic!("expected BuildError::Type, got {other:?}"),
    }
}

/// The kinds `hir::verify` reports for `text` (parsed without verification).
fn hir_errors(text: &str) -> Vec<hir::VerifyErrorKind> {
    let kernel = hir::parse_unverified(text).expect("the kernel parses");
    let errors = hir::verify(&kernel).expect_err("the kernel must not verify");
    errors.errors().iter().map(|e| e.kind.clone()).collect()
}

#[test]
fn builder_rejects_an_op_on_a_dtype_it_does_not_accept() {
    let mut b = Builder::new("k");
    let n = b.input("n", TensorType::new(DType::I32, [3])).expect("input");
    let err = type_error(b.unary(UnaryOp::Sin, n));
    assert!(
        matches!(
            err,
            TypeError::UnsupportedDType {
                op: "sin",
                dtype: DType::I32
            }
        ),
        "{err:?}"
    );
}

#[test]
fn builder_rejects_operands_of_two_dtypes() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([3])).expect("input");
    let n = b.input("n", TensorType::new(DType::I32, [3])).expect("input");
    let err = type_error(b.binary(BinaryOp::Add, x, n));
    assert!(
        matches!(
            err,
            TypeError::DTypeMismatch {
                op: "add",
                lhs: DType::F32,
                rhs: DType::I32
            }
        ),
        "{err:?}"
    );
}

#[test]
fn hir_verifier_reports_a_dtype_mismatch_as_a_type_error() {
    let errors = hir_errors(DTYPE_MISMATCH);
    assert!(
        errors.iter().any(|kind| matches!(
            kind,
            hir::VerifyErrorKind::Type(TypeError::DTypeMismatch { op: "add", .. })
        )),
        "{errors:?}"
    );
}

#[test]
fn builder_rejects_a_select_whose_condition_is_not_bool() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([3])).expect("input");
    let err = type_error(b.select(x, x, x));
    assert!(
        matches!(err, TypeError::ConditionNotBool { found: DType::F32 }),
        "{err:?}"
    );
}

#[test]
fn builder_rejects_operand_shapes_that_do_not_broadcast() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([3])).expect("input");
    let y = b.input("y", f32s([4])).expect("input");
    let err = type_error(b.compare(CmpOp::Lt, x, y));
    assert!(
        matches!(&err, TypeError::Broadcast { op: "lt", lhs, rhs }
            if *lhs == Shape::new([3]) && *rhs == Shape::new([4])),
        "{err:?}"
    );
}

#[test]
fn builder_rejects_a_linear_recurrence_whose_coefficient_has_another_shape() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([2, 3])).expect("input");
    let a = b.input("a", f32s([3])).expect("input");
    let err = type_error(b.linrec(x, a, 1, false));
    assert!(
        matches!(&err, TypeError::ShapeMismatch { op: "linrec", lhs, rhs }
            if *lhs == Shape::new([2, 3]) && *rhs == Shape::new([3])),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "`linrec` needs operands of one shape, got [2,3] and [3]"
    );
}

#[test]
fn builder_rejects_broadcast_to_an_incompatible_shape() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([3])).expect("input");
    let err = type_error(b.broadcast_to(x, [2, 4]));
    assert!(
        matches!(&err, TypeError::BroadcastTo { from, to }
            if *from == Shape::new([3]) && *to == Shape::new([2, 4])),
        "{err:?}"
    );
}

#[test]
fn builder_rejects_a_reshape_that_changes_the_element_count() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([2, 3])).expect("input");
    let err = type_error(b.reshape(x, [4]));
    assert!(
        matches!(
            err,
            TypeError::Reshape {
                from_numel: 6,
                to_numel: 4,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn builder_rejects_a_reduction_axis_past_the_rank() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([2, 3])).expect("input");
    let err = type_error(b.reduce(ReduceOp::Sum, x, &[2], false));
    assert!(
        matches!(err, TypeError::AxisOutOfRange { axis: 2, rank: 2 }),
        "{err:?}"
    );
}

#[test]
fn hir_verifier_reports_a_declared_type_the_rule_does_not_give() {
    // `sin` keeps its operand's shape, so `f32[2]` for an `f32[3]` operand is wrong.
    let errors =
        hir_errors("kernel k {\n  %x = input x : f32[3]\n  %y = sin %x : f32[2]\n  output out = %y\n}\n");
    assert!(
        errors.iter().any(|kind| matches!(
            kind,
            hir::VerifyErrorKind::Type(TypeError::ResultType { declared, inferred })
                if declared == "f32[2]" && inferred == "f32[3]"
        )),
        "{errors:?}"
    );
}

#[test]
fn builder_wraps_a_broken_typing_rule_in_build_error_type() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([3])).expect("input");
    let err = b.unary(UnaryOp::Not, x).expect_err("`not` takes bool only");
    assert!(
        matches!(
            err,
            BuildError::Type {
                op: "not",
                source: TypeError::UnsupportedDType { .. }
            }
        ),
        "{err:?}"
    );
    // Nothing was added: the next value is still number 1.
    assert_eq!(b.unary(UnaryOp::Neg, x).expect("neg"), ValueId::new(1));
}

#[test]
fn builder_rejects_an_operand_it_did_not_hand_out() {
    let mut b = Builder::new("k");
    b.input("x", f32s([3])).expect("input");
    let err = b
        .unary(UnaryOp::Sin, ValueId::new(7))
        .expect_err("%7 does not exist");
    assert!(
        matches!(err, BuildError::UnknownValue(v) if v == ValueId::new(7)),
        "{err:?}"
    );
    let err = b.output("out", ValueId::new(7)).expect_err("%7 does not exist");
    assert!(matches!(err, BuildError::UnknownValue(_)), "{err:?}");
}

#[test]
fn builder_rejects_a_second_input_with_the_same_name() {
    let mut b = Builder::new("k");
    b.input("x", f32s([3])).expect("input");
    let err = b.input("x", f32s([4])).expect_err("`x` is taken");
    assert!(
        matches!(&err, BuildError::DuplicateInput(name) if name == "x"),
        "{err:?}"
    );
}

#[test]
fn builder_rejects_a_second_output_with_the_same_name() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([3])).expect("input");
    b.output("y", x).expect("first output");
    let err = b.output("y", x).expect_err("`y` is taken");
    assert!(
        matches!(&err, BuildError::DuplicateOutput(name) if name == "y"),
        "{err:?}"
    );
}

#[test]
fn builder_rejects_names_that_are_not_identifiers() {
    let mut b = Builder::new("k");
    let err = b.input("1x", f32s([3])).expect_err("starts with a digit");
    assert!(
        matches!(&err, BuildError::InvalidName(name) if name == "1x"),
        "{err:?}"
    );
    let x = b.input("x", f32s([3])).expect("input");
    let err = b.output("out put", x).expect_err("contains a space");
    assert!(
        matches!(&err, BuildError::InvalidName(name) if name == "out put"),
        "{err:?}"
    );
}

#[test]
fn builder_refuses_to_finish_a_kernel_without_outputs() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([3])).expect("input");
    b.unary(UnaryOp::Sin, x).expect("sin");
    let err = b.finish().expect_err("no output was declared");
    assert!(matches!(err, BuildError::NoOutputs), "{err:?}");
}

/// A valid MIR program: `y = -x` over three elements.
const MIR_NEG: &str = "\
mir m {
  buf0: i32[3] = input x
  buf1: i32[3] = output y
  kernel k0 [3] {
    %0 = load buf0 [1] : i32
    %1 = neg %0 : i32
    store buf1 = %1
  }
}
";

fn mir_errors(program: &MirProgram) -> Vec<mir::VerifyErrorKind> {
    let errors = mir::verify(program).expect_err("the program must not verify");
    errors.errors().iter().map(|e| e.kind.clone()).collect()
}

#[test]
fn mir_verifier_reports_an_instruction_that_breaks_its_typing_rule() {
    let valid = mir::parse(MIR_NEG).expect("the base program parses");
    mir::verify(&valid).expect("the base program verifies");
    // `sin` takes floats only.
    let program = mir::parse(&MIR_NEG.replace("neg %0 : i32", "sin %0 : i32")).expect("parses");
    let errors = mir_errors(&program);
    assert!(
        errors.iter().any(|kind| matches!(
            kind,
            mir::VerifyErrorKind::Type(TypeError::UnsupportedDType {
                op: "sin",
                dtype: DType::I32
            })
        )),
        "{errors:?}"
    );
}

#[test]
fn mir_verifier_reports_a_name_that_is_not_an_identifier() {
    let valid = mir::parse(MIR_NEG).expect("the base program parses");
    // The text format only reads identifiers, so the bad name goes in through `from_parts`.
    let program = MirProgram::from_parts("not a name", valid.buffers().to_vec(), valid.kernels().to_vec());
    let errors = mir_errors(&program);
    assert!(
        errors.iter().any(|kind| matches!(
            kind,
            mir::VerifyErrorKind::InvalidName(name) if name == "not a name"
        )),
        "{errors:?}"
    );
}

/// A valid LIR program: `y = -x` over three elements.
const LIR_NEG: &str = "\
lir l arena 0 align 64 {
  buf0: i32[3] = input x
  buf1: i32[3] = output y
  kernel k0 dims [3] reduce 0 vector 4 thread_min 32768 tile 1024 lanes 1 {
    slots [i32, i32]
    preamble {}
    body {
      s0 = load buf0 [1]
      s1 = neg s0
      store buf1 [1] = s1
    }
  }
}
";

fn lir_errors(program: &LirProgram) -> Vec<lir::VerifyErrorKind> {
    let errors = lir::verify(program).expect_err("the program must not verify");
    errors.errors().iter().map(|e| e.kind.clone()).collect()
}

#[test]
fn lir_verifier_reports_an_instruction_that_breaks_its_dtype_rule() {
    let valid = lir::parse(LIR_NEG).expect("the base program parses");
    lir::verify(&valid).expect("the base program verifies");
    let program = lir::parse(&LIR_NEG.replace("s1 = neg s0", "s1 = sin s0")).expect("parses");
    let errors = lir_errors(&program);
    assert!(
        errors.iter().any(|kind| matches!(
            kind,
            lir::VerifyErrorKind::Type(TypeError::UnsupportedDType {
                op: "sin",
                dtype: DType::I32
            })
        )),
        "{errors:?}"
    );
}

#[test]
fn lir_verifier_reports_a_name_that_is_not_an_identifier() {
    let valid = lir::parse(LIR_NEG).expect("the base program parses");
    let program = LirProgram::from_parts(
        "not a name",
        valid.buffers().to_vec(),
        valid.arena_bytes(),
        valid.arena_align(),
        valid.kernels().to_vec(),
    );
    let errors = lir_errors(&program);
    assert!(
        errors.iter().any(|kind| matches!(
            kind,
            lir::VerifyErrorKind::InvalidName(name) if name == "not a name"
        )),
        "{errors:?}"
    );
}

#[test]
fn interp_inconsistent_names_the_location_that_could_not_be_evaluated() {
    // Internal invariant: unreachable from the public API because `run_hir`, `run_mir` and
    // `run_lir` verify the program and check every input's dtype and shape before computing,
    // and every `None` their evaluators can return (an operand dtype an op rejects, an index
    // past a buffer, a missing slot) breaks a rule those verifiers check.
    let err = InterpError::Inconsistent {
        location: "kernel k0".to_string(),
    };
    assert_eq!(
        err.to_string(),
        "internal error: kernel k0 could not be evaluated although the program verified"
    );
}

#[test]
fn types_too_large_for_memory_are_rejected() {
    // 2^62 f32 elements: the element count fits in `usize`, the byte size does not fit in
    // `isize::MAX`.
    let huge = f32s([1usize << 31, 1usize << 31]);
    let mut b = Builder::new("huge");
    let err = b.input("x", huge).expect_err("no buffer holds that");
    assert!(
        matches!(
            err,
            BuildError::Type {
                op: "input",
                source: TypeError::TooLarge { .. }
            }
        ),
        "{err:?}"
    );
    // A declared constant of that size is caught by the verifier.
    let errors = hir_errors(
        "kernel k {\n %c = const 1.0 : f32[2147483648, 2147483648]\n %x = input x : f32[2]\n \
         output out = %x\n}",
    );
    assert!(
        errors
            .iter()
            .any(|e| matches!(e, hir::VerifyErrorKind::Type(TypeError::TooLarge { .. }))),
        "{errors:?}"
    );
}

#[test]
fn builder_rejects_a_transpose_that_is_not_a_permutation() {
    for perm in [vec![0, 0], vec![0], vec![1, 2], vec![0, 1, 2]] {
        let mut b = Builder::new("k");
        let x = b.input("x", f32s([2, 3])).expect("input");
        assert_eq!(
            type_error(b.transpose(x, &perm)),
            TypeError::Permutation {
                perm: perm.clone(),
                rank: 2
            }
        );
    }
}

#[test]
fn builder_rejects_a_window_outside_its_operand_and_a_pad_outside_its_result() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([4, 6])).expect("input");
    for (starts, window) in [
        (vec![1, 3], vec![3, 4]),
        (vec![0], vec![4]),
        (vec![5, 0], vec![0, 6]),
    ] {
        assert_eq!(
            type_error(b.slice(x, &starts, window.clone())),
            TypeError::Slice {
                from: Shape::new([4, 6]),
                starts: starts.clone(),
                to: Shape::new(window),
            }
        );
    }
    for (low, shape) in [
        (vec![1, 0], vec![4, 8]),
        (vec![0, 0], vec![4, 5]),
        (vec![0], vec![9]),
    ] {
        assert_eq!(
            type_error(b.pad(x, &low, shape.clone())),
            TypeError::Pad {
                from: Shape::new([4, 6]),
                low: low.clone(),
                to: Shape::new(shape),
            }
        );
    }
    // The text format reports the same error at the statement.
    let err = hir::parse(
        "kernel k {\n  %x = input x : f32[4]\n  %s = slice %x starts [2] : f32[3]\n  output out = %s\n}\n",
    )
    .expect_err("the window ends past the operand");
    assert_eq!((err.line, err.col), (3, 3), "{err}");
    assert!(err.to_string().contains("does not lie inside"), "{err}");
}

#[test]
fn builder_rejects_a_gather_whose_index_does_not_fit_its_table() {
    let mut b = Builder::new("k");
    let table = b.input("table", f32s([4, 3])).expect("input");
    let rows = b
        .input("rows", TensorType::new(DType::I32, [2, 3]))
        .expect("input");
    let flat = b.input("flat", TensorType::new(DType::I32, [6])).expect("input");
    let flags = b
        .input("flags", TensorType::new(DType::Bool, [2, 3]))
        .expect("input");
    let empty = b.input("empty", f32s([0, 3])).expect("input");
    assert!(b.gather(table, rows, 0).is_ok());
    // Along axis 1 the extents off the axis (4 against 2) differ.
    assert_eq!(
        type_error(b.gather(table, rows, 1)),
        TypeError::Gather {
            table: Shape::new([4, 3]),
            index: Shape::new([2, 3]),
            axis: 1,
        }
    );
    assert_eq!(
        type_error(b.gather(table, flat, 0)),
        TypeError::Gather {
            table: Shape::new([4, 3]),
            index: Shape::new([6]),
            axis: 0,
        }
    );
    assert_eq!(
        type_error(b.gather(empty, rows, 0)),
        TypeError::Gather {
            table: Shape::new([0, 3]),
            index: Shape::new([2, 3]),
            axis: 0,
        }
    );
    assert_eq!(
        type_error(b.gather(table, rows, 2)),
        TypeError::AxisOutOfRange { axis: 2, rank: 2 }
    );
    assert_eq!(
        type_error(b.gather(table, flags, 0)),
        TypeError::UnsupportedDType {
            op: "gather",
            dtype: DType::Bool
        }
    );
    // The text format reports the same error at the statement, and a missing `axis` at the
    // token where it should be.
    let err = hir::parse(
        "kernel k {\n  %t = input t : f32[4]\n  %i = input i : i32[2, 2]\n  %g = gather %t, %i axis 0 : f32[2, 2]\n  output out = %g\n}\n",
    )
    .expect_err("ranks differ");
    assert_eq!((err.line, err.col), (4, 3), "{err}");
    assert!(err.to_string().contains("must match the table"), "{err}");
    let err = hir::parse(
        "kernel k {\n  %t = input t : f32[4]\n  %i = input i : i32[2]\n  %g = gather %t, %i : f32[2]\n  output out = %g\n}\n",
    )
    .expect_err("no axis");
    assert_eq!((err.line, err.col), (4, 22), "{err}");
}

#[test]
fn builder_rejects_an_iota_it_cannot_count_exactly() {
    let mut b = Builder::new("k");
    assert_eq!(
        type_error(b.iota(DType::F32, [2, 3], 2)),
        TypeError::AxisOutOfRange { axis: 2, rank: 2 }
    );
    assert_eq!(
        type_error(b.iota(DType::Bool, [3], 0)),
        TypeError::UnsupportedDType {
            op: "iota",
            dtype: DType::Bool
        }
    );
    // Indices up to 2^24 are exact in f32; one more element is not.
    assert!(b.iota(DType::F32, [(1 << 24) + 1], 0).is_ok());
    assert_eq!(
        type_error(b.iota(DType::F32, [(1 << 24) + 2], 0)),
        TypeError::IotaExtent {
            dtype: DType::F32,
            extent: (1 << 24) + 2
        }
    );
    assert!(b.iota(DType::F64, [(1 << 24) + 2], 0).is_ok());
}

#[test]
fn builder_rejects_a_literal_that_does_not_fill_its_type() {
    use rfx_ir::Scalar;
    let mut b = Builder::new("k");
    let ty = TensorType::new(DType::F32, [2, 2]);
    assert_eq!(
        type_error(b.literal_values(ty.clone(), vec![Scalar::F32(1.0); 3])),
        TypeError::LiteralLength {
            expected: 4,
            found: 3
        }
    );
    assert_eq!(
        type_error(b.literal_values(
            ty.clone(),
            vec![
                Scalar::F32(1.0),
                Scalar::F64(2.0),
                Scalar::F32(0.0),
                Scalar::F32(0.0)
            ]
        )),
        TypeError::ConstantDType {
            literal: DType::F64,
            declared: DType::F32
        }
    );
    assert!(b.literal_values(ty, vec![Scalar::F32(1.0); 4]).is_ok());
}

#[test]
fn builder_rejects_a_row_of_the_wrong_shape() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s([3, 2])).expect("input");
    let row = b.input("row", f32s([3])).expect("input");
    let i = b.input("i", TensorType::scalar(DType::I32)).expect("input");
    let err = type_error(b.set_row(x, row, i));
    assert!(matches!(err, TypeError::SetRow { .. }), "{err:?}");
}
