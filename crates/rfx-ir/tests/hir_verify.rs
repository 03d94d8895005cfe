//! The HIR verifier: one test per rule, with the exact error text.

use rfx_ir::hir::{self, Builder, Kernel, Node, Op, Output, ValueId, VerifyErrorKind, VerifyLocation};
use rfx_ir::{BinaryOp, DType, ReduceOp, Scalar, TensorType, TypeError};

fn f32s(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims)
}

fn input(name: &str, ty: TensorType) -> Node {
    Node {
        op: Op::Input {
            name: name.to_string(),
        },
        args: vec![],
        ty,
    }
}

fn out(name: &str, value: usize) -> Output {
    Output {
        name: name.to_string(),
        value: ValueId::new(value),
    }
}

fn errors_of(kernel: &Kernel) -> Vec<(VerifyLocation, VerifyErrorKind)> {
    hir::verify(kernel)
        .expect_err("the kernel is invalid")
        .errors()
        .iter()
        .map(|e| (e.location, e.kind.clone()))
        .collect()
}

#[test]
fn a_valid_kernel_verifies() {
    let mut b = Builder::new("ok");
    let x = b.input("x", f32s(&[2, 3])).unwrap();
    let s = b.reduce(ReduceOp::Sum, x, &[1, 0], true).unwrap();
    b.output("s", s).unwrap();
    let kernel = b.finish().unwrap();
    assert_eq!(kernel.nodes()[1].ty, f32s(&[1, 1]));
    assert!(matches!(&kernel.nodes()[1].op, Op::Reduce { axes, .. } if axes == &vec![0, 1]));
    hir::verify(&kernel).unwrap();
}

#[test]
fn every_error_is_collected_with_its_location() {
    let kernel = Kernel::from_parts(
        "k",
        vec![
            input("x", f32s(&[3])),
            input("x", f32s(&[3])),
            Node {
                op: Op::Const(Scalar::I32(1)),
                args: vec![],
                ty: f32s(&[]),
            },
            Node {
                op: Op::Binary(BinaryOp::Add),
                args: vec![ValueId::new(0), ValueId::new(7)],
                ty: f32s(&[3]),
            },
            Node {
                op: Op::Binary(BinaryOp::Add),
                args: vec![ValueId::new(0)],
                ty: f32s(&[3]),
            },
            Node {
                op: Op::Reduce {
                    op: ReduceOp::Sum,
                    axes: vec![0, 0],
                    keepdims: false,
                },
                args: vec![ValueId::new(0)],
                ty: f32s(&[]),
            },
            Node {
                op: Op::Reduce {
                    op: ReduceOp::Mean,
                    axes: vec![0],
                    keepdims: false,
                },
                args: vec![ValueId::new(6)],
                ty: f32s(&[]),
            },
        ],
        vec![out("bad name", 0), out("o", 9), out("o", 0)],
    );
    assert_eq!(
        errors_of(&kernel),
        vec![
            (
                VerifyLocation::Value(ValueId::new(1)),
                VerifyErrorKind::DuplicateInput("x".into())
            ),
            (
                VerifyLocation::Value(ValueId::new(2)),
                VerifyErrorKind::Type(TypeError::ConstantDType {
                    literal: DType::I32,
                    declared: DType::F32
                })
            ),
            (
                VerifyLocation::Value(ValueId::new(3)),
                VerifyErrorKind::UndefinedValue(ValueId::new(7))
            ),
            (
                VerifyLocation::Value(ValueId::new(4)),
                VerifyErrorKind::Type(TypeError::Arity {
                    op: "add",
                    expected: 2,
                    found: 1
                })
            ),
            (
                VerifyLocation::Value(ValueId::new(5)),
                VerifyErrorKind::Type(TypeError::DuplicateAxis { axis: 0 })
            ),
            (
                VerifyLocation::Value(ValueId::new(6)),
                VerifyErrorKind::UseBeforeDefinition(ValueId::new(6))
            ),
            (
                VerifyLocation::Output(0),
                VerifyErrorKind::InvalidName("bad name".into())
            ),
            (
                VerifyLocation::Output(1),
                VerifyErrorKind::OutputUndefined(ValueId::new(9))
            ),
            (
                VerifyLocation::Output(2),
                VerifyErrorKind::DuplicateOutput("o".into())
            ),
        ]
    );
    insta::assert_snapshot!(hir::verify(&kernel).unwrap_err().to_string(), @r"
    kernel k {
      %0 = input x : f32[3]
      %1 = input x : f32[3]
      # error: duplicate input name `x`
      %2 = const 1 : f32[]
      # error: constant of dtype i32 declared as f32
      %3 = add %0, %7 : f32[3]
      # error: operand %7 is not defined in this kernel
      %4 = add %0 : f32[3]
      # error: `add` takes 2 operand(s), got 1
      %5 = sum %0 axes [0,0] : f32[]
      # error: axis 0 is listed twice
      %6 = mean %6 axes [0] : f32[]
      # error: operand %6 is used before its definition
      output bad name = %0
      # error: `bad name` is not a valid name
      output o = %9
      # error: output refers to undefined value %9
      output o = %0
      # error: duplicate output name `o`
    }
    ");
}

#[test]
fn kernel_level_errors() {
    let kernel = Kernel::from_parts("9lives", vec![input("x", f32s(&[]))], vec![]);
    assert_eq!(
        errors_of(&kernel),
        vec![
            (
                VerifyLocation::Kernel,
                VerifyErrorKind::InvalidName("9lives".into())
            ),
            (VerifyLocation::Kernel, VerifyErrorKind::NoOutputs),
        ]
    );
}

#[test]
fn typing_rules_are_enforced() {
    let cases: Vec<(&str, &str)> = vec![
        ("%1 = sin %0 : i32[2]", "`sin` does not accept i32 operands"),
        ("%1 = and %0, %0 : i32[2]", "`and` does not accept i32 operands"),
        (
            "%1 = lt %0, %0 : i32[2]",
            "declared type i32[2] but the operands give bool[2]",
        ),
        (
            "%1 = select %0, %0, %0 : i32[2]",
            "`select` needs a bool condition, got i32",
        ),
        (
            "%1 = clamp %b, %b, %b : bool[2]",
            "`clamp` does not accept bool operands",
        ),
        (
            "%1 = clamp %0, %b, %0 : i32[2]",
            "`clamp` needs operands of one dtype, got i32 and bool",
        ),
        ("%1 = broadcast_to %0 : i32[3]", "cannot broadcast [2] to [3]"),
        (
            "%1 = reshape %0 : i32[3]",
            "cannot reshape [2] (2 elements) to [3] (3 elements)",
        ),
        (
            "%1 = mean %0 axes [0] : i32[]",
            "`mean` does not accept i32 operands",
        ),
        ("%1 = pow %0, %0 : i32[2]", "`pow` does not accept i32 operands"),
        (
            "%1 = sum %0 axes [1,0] : i32[]",
            "reduction axes must be listed in ascending order",
        ),
    ];
    for (statement, expected) in cases {
        let text = format!(
            "kernel k {{\n  %0 = input x : i32[2]\n  %b = input b : bool[2]\n  {statement}\n  output o = %1\n}}"
        );
        let kernel = hir::parse_unverified(&text).unwrap();
        let errors = hir::verify(&kernel).unwrap_err();
        let messages: Vec<String> = errors.errors().iter().map(|e| e.kind.to_string()).collect();
        assert_eq!(messages, vec![expected.to_string()], "{statement}");
    }
}

#[test]
fn the_builder_rejects_what_the_verifier_rejects_and_adds_nothing() {
    let mut b = Builder::new("k");
    let x = b.input("x", f32s(&[2])).unwrap();
    let n = b.input("n", TensorType::new(DType::I32, [2])).unwrap();
    let err = b.binary(BinaryOp::Add, x, n).unwrap_err();
    assert_eq!(
        err.to_string(),
        "add: `add` needs operands of one dtype, got f32 and i32"
    );
    assert!(b.input("x", f32s(&[1])).is_err());
    assert!(b.input("not valid", f32s(&[1])).is_err());
    assert!(b.binary(BinaryOp::Add, x, ValueId::new(99)).is_err());
    b.output("o", x).unwrap();
    assert!(b.output("o", n).is_err());
    let kernel = b.finish().unwrap();
    assert_eq!(kernel.nodes().len(), 2, "failed calls add nothing");
    assert!(Builder::new("empty").finish().is_err());
}

#[test]
fn annotated_errors_are_comments_so_the_text_still_parses() {
    let text = "kernel k {\n  %0 = input x : f32[3]\n  %1 = sin %0 : f64[3]\n  output o = %1\n}";
    let kernel = hir::parse_unverified(text).unwrap();
    let annotated = hir::verify(&kernel).unwrap_err().to_string();
    assert!(
        annotated.contains("# error: declared type f64[3] but the operands give f32[3]"),
        "{annotated}"
    );
    assert_eq!(hir::parse_unverified(&annotated).unwrap(), kernel);
}
