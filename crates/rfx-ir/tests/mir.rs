//! MIR: text round trip, verifier rules, reference interpreter.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use rfx_ir::interp::{InterpError, Mode, run_mir};
use rfx_ir::mir::{
    self, BufKind, Buffer, MirInst, MirKernel, MirOp, MirProgram, MirValue, Reduction, Store, parse,
};
use rfx_ir::{Array, BinaryOp, BufId, CmpOp, DType, ReduceOp, Scalar, Shape, TensorType, UnaryOp};

const FUSED_CHAIN: &str = "\
mir fused_chain {
  buf0: f32[3] = input x
  buf1: f32[3] = input y
  buf2: f32[3] = output out
  kernel k0 [3] {
    %0 = load buf0 [1] : f32
    %1 = const 2.0 : f32
    %2 = mul %0, %1 : f32
    %3 = sin %2 : f32
    %4 = load buf1 [1] : f32
    %5 = add %3, %4 : f32
    store buf2 = %5
  }
}
";

/// The hand-written corpus: `(name, text)`.
const CORPUS: &[(&str, &str)] = &[
    ("fused_chain", FUSED_CHAIN),
    (
        "broadcast_add",
        "mir broadcast_add {
  buf0: f32[2,3] = input x
  buf1: f32[3] = input b
  buf2: f32[2,3] = output out
  kernel k0 [2,3] {
    %0 = load buf0 [3,1] : f32
    %1 = load buf1 [0,1] : f32
    %2 = add %0, %1 : f32
    store buf2 = %2
  }
}",
    ),
    (
        "scalar_load",
        "mir scalar_load {
  buf0: f64[4] = input x
  buf1: f64[] = input s
  buf2: f64[4] = output out
  kernel k0 [4] {
    %0 = load buf0 [1] : f64
    %1 = load buf1 [0] : f64
    %2 = mul %0, %1 : f64
    %3 = sqrt %2 : f64
    store buf2 = %3
  }
}",
    ),
    (
        "reduce_inner",
        "mir reduce_inner {
  buf0: f32[2,3] = input x
  buf1: f32[2] = output row_sum
  kernel k0 [2,3] {
    %0 = load buf0 [3,1] : f32
    reduce sum buf1 = %0 axes [1]
  }
}",
    ),
    (
        "reduce_outer",
        "mir reduce_outer {
  buf0: f32[2,3] = input x
  buf1: f32[3] = output col_max
  kernel k0 [2,3] {
    %0 = load buf0 [3,1] : f32
    reduce max buf1 = %0 axes [0]
  }
}",
    ),
    (
        "reduce_middle_keepdims",
        "mir reduce_middle_keepdims {
  buf0: f64[2,3,4] = input x
  buf1: f64[2,1,4] = output m
  kernel k0 [2,3,4] {
    %0 = load buf0 [12,4,1] : f64
    %1 = abs %0 : f64
    reduce mean buf1 = %1 axes [1]
  }
}",
    ),
    (
        "store_and_reduce",
        "mir store_and_reduce {
  buf0: f32[2,3] = input x
  buf1: f32[2,3] = output e
  buf2: f32[2] = output total
  buf3: f32[] = output all
  kernel k0 [2,3] {
    %0 = load buf0 [3,1] : f32
    %1 = exp %0 : f32
    store buf1 = %1
    reduce sum buf2 = %1 axes [1]
    reduce prod buf3 = %0 axes [0,1]
  }
}",
    ),
    (
        "two_kernels_temp",
        "mir two_kernels_temp {
  buf0: f32[2,3] = input x
  buf1: f32[2] = temp
  buf2: f32[2,3] = output centered
  kernel k0 [2,3] {
    %0 = load buf0 [3,1] : f32
    reduce mean buf1 = %0 axes [1]
  }
  kernel k1 [2,3] {
    %0 = load buf0 [3,1] : f32
    %1 = load buf1 [1,0] : f32
    %2 = sub %0, %1 : f32
    store buf2 = %2
  }
}",
    ),
    (
        "int_bool",
        "mir int_bool {
  buf0: i32[4] = input a
  buf1: i32[4] = input b
  buf2: i32[4] = output q
  buf3: bool[4] = output flags
  buf4: f64[4] = output widened
  kernel k0 [4] {
    %0 = load buf0 [1] : i32
    %1 = load buf1 [1] : i32
    %2 = div %0, %1 : i32
    %3 = lt %0, %1 : bool
    %4 = not %3 : bool
    %5 = const -7 : i32
    %6 = select %4, %2, %5 : i32
    %7 = ne %0, %5 : bool
    %8 = and %7, %3 : bool
    %9 = cast %6 : f64
    store buf2 = %6
    store buf3 = %8
    store buf4 = %9
  }
}",
    ),
    (
        "special_constants",
        "mir special_constants {
  buf0: f32[2] = input x
  buf1: f32[2] = output y
  buf2: f64[2] = output z
  kernel k0 [2] {
    %0 = load buf0 [1] : f32
    %1 = const nan : f32
    %2 = const -inf : f32
    %3 = const -0.0 : f32
    %4 = const inf : f64
    %5 = const nan:0x7ff8000000000001 : f64
    %6 = const 1e-45 : f32
    %7 = max %0, %2 : f32
    %8 = min %7, %1 : f32
    %9 = add %8, %3 : f32
    %10 = mul %9, %6 : f32
    %11 = cast %10 : f64
    %12 = min %11, %4 : f64
    %13 = max %12, %5 : f64
    store buf1 = %10
    store buf2 = %13
  }
}",
    ),
    (
        "scalar_domain",
        "mir scalar_domain {
  buf0: i32[] = input n
  buf1: i32[] = output m
  kernel k0 [] {
    %0 = load buf0 [] : i32
    %1 = const 3 : i32
    %2 = fmod %0, %1 : i32
    store buf1 = %2
  }
}",
    ),
];

fn errors_of(text: &str) -> Vec<String> {
    let program = parse(text).unwrap();
    match mir::verify(&program) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.errors().iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn corpus_verifies_and_round_trips() {
    for (name, text) in CORPUS {
        let program = parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        mir::verify(&program).unwrap_or_else(|e| panic!("{name}:\n{e}"));
        let printed = program.to_string();
        let reparsed = parse(&printed).unwrap();
        assert_eq!(reparsed, program, "{name}");
        assert_eq!(reparsed.to_string(), printed, "{name}");
        insta::assert_snapshot!(format!("mir_{name}"), printed);
    }
}

#[test]
fn parse_renames_labels_and_values_densely() {
    let text = "mir renamed {
  x: f32[3] = input x
  out: f32[3] = output out
  kernel k0 [3] {
    %a = load x [1] : f32
    %b = neg %a : f32
    store out = %b
  }
}";
    let program = parse(text).unwrap();
    assert_eq!(
        program.kernels()[0].stores[0],
        Store::whole(BufId::new(1), MirValue::new(1))
    );
    assert!(program.to_string().contains("%1 = neg %0 : f32"));
}

#[test]
fn parse_errors_point_at_the_token() {
    let cases: &[(&str, &str)] = &[
        (
            "mir p {\n  kernel k [1] {\n    %0 = load buf0 [1] : f32\n  }\n}",
            "3:15: expected a declared buffer, found `buf0`",
        ),
        (
            "mir p {\n  kernel k [1] {\n    %0 = neg %1 : f32\n  }\n}",
            "3:14: expected a defined value, found `%1`",
        ),
        (
            "mir p {\n  kernel k [1] {\n    %0 = frobnicate %1 : f32\n  }\n}",
            "3:10: expected an op name, found `frobnicate`",
        ),
        ("mir p {\n}\nextra", "3:1: expected end of input, found `extra`"),
        (
            "mir p {\n  b: f32[1] = input x\n  b: f32[1] = input y\n}",
            "3:3: buffer `b` is declared twice",
        ),
        (
            "mir p {\n  kernel k [] {\n    %0 = const 1.5 : i32\n  }\n}",
            "3:16: expected a i32 literal, found `1.5`",
        ),
        (
            "mir p {\n  kernel k [] {\n    %0 = const 1 : i32\n    %0 = const 2 : i32\n  }\n}",
            "4:5: value `%0` is defined twice",
        ),
        (
            "mir p {\n  b: f32[1] = weird\n}",
            "2:15: expected `input`, `output`, `temp` or `literal`, found `weird`",
        ),
        (
            "mir p {\n  b: i32[2] = literal [1, 2.5]\n}",
            "2:27: `2.5` is not a literal of dtype i32",
        ),
        (
            "mir p {\n  b: i32[2] = literal [1 2]\n}",
            "2:26: expected `,` or `]`, found `2`",
        ),
        (
            "mir p {\n  kernel k [] {\n    store\n  }\n}",
            "4:3: expected a declared buffer, found `}`",
        ),
        (
            "mir p {\n  b: f32[1] = output o\n  kernel k [1] {\n    %0 = load b [1] : f32\n    reduce avg b = %0 axes [0]\n  }\n}",
            "5:12: expected a reduction (`sum`, `prod`, `max`, `min` or `mean`), found `avg`",
        ),
        ("", "1:1: expected `mir`, found end of input"),
    ];
    for (text, expected) in cases {
        assert_eq!(parse(text).unwrap_err().to_string(), *expected, "{text}");
    }
}

// ---------------------------------------------------------------------------------------------
// Verifier rules.

#[test]
fn verifier_prints_program_with_errors_attached() {
    let text = "mir bad {
  buf0: f32[3] = input x
  buf1: i32[3] = output y
  kernel k0 [3] {
    %0 = load buf0 [2] : f32
    %1 = sin %0 : f32
    store buf1 = %1
  }
}";
    let errors = mir::verify(&parse(text).unwrap()).unwrap_err();
    assert_eq!(
        errors.to_string(),
        "mir bad {
  buf0: f32[3] = input x
  buf1: i32[3] = output y
  kernel k0 [3] {
    %0 = load buf0 [2] : f32
    # error: load reaches element 4 of buf0, which has 3 element(s)
    %1 = sin %0 : f32
    store buf1 = %1
    # error: buf1 has dtype i32 but a f32 value is written
  }
}
"
    );
    assert_eq!(errors.errors().len(), 2);
    let interp = run_mir(errors.program(), &[], Mode::Native).unwrap_err();
    assert!(matches!(interp, InterpError::InvalidMir(_)));
}

fn one_kernel(buffers: &str, body: &str) -> String {
    format!("mir p {{\n{buffers}\n  kernel k0 [2,3] {{\n{body}\n  }}\n}}")
}

const XY: &str = "  buf0: f32[2,3] = input x\n  buf1: f32[2,3] = output y";

#[test]
fn verifier_operand_rules() {
    let with = |body: &str| errors_of(&one_kernel(XY, &format!("{body}\n    store buf1 = %0")));
    // Arity, accepted dtypes, operand dtypes, result dtype.
    assert_eq!(
        with("    %0 = load buf0 [3,1] : f32\n    %1 = add %0 : f32"),
        ["kernel #0, %1: `add` takes 2 operand(s), got 1"]
    );
    assert_eq!(
        with("    %0 = load buf0 [3,1] : f32\n    %1 = not %0 : f32"),
        ["kernel #0, %1: `not` does not accept f32 operands"]
    );
    assert_eq!(
        with("    %0 = load buf0 [3,1] : f32\n    %1 = const 1 : i32\n    %2 = add %0, %1 : f32"),
        ["kernel #0, %2: `add` needs operands of one dtype, got f32 and i32"]
    );
    assert_eq!(
        with("    %0 = load buf0 [3,1] : f32\n    %1 = lt %0, %0 : f32"),
        ["kernel #0, %1: declared type f32 but the operands give bool"]
    );
    assert_eq!(
        with("    %0 = load buf0 [3,1] : f32\n    %1 = select %0, %0, %0 : f32"),
        ["kernel #0, %1: `select` needs a bool condition, got f32"]
    );
    assert_eq!(
        with(
            "    %0 = load buf0 [3,1] : f32\n    %1 = lt %0, %0 : bool\n    %2 = cast %1 : i32\n    %3 = cast %2 : f32"
        ),
        Vec::<String>::new()
    );
    // Use before definition can only come from `from_parts`: the parser rejects it.
    let program = MirProgram::from_parts(
        "p",
        vec![Buffer {
            ty: TensorType::new(DType::F32, [3]),
            kind: BufKind::Output { name: "y".into() },
        }],
        vec![MirKernel {
            name: "k0".into(),
            domain: Shape::new([3]),
            body: vec![MirInst {
                op: MirOp::Unary(UnaryOp::Neg),
                args: vec![MirValue::new(0)],
                dtype: DType::F32,
            }],
            stores: vec![Store::whole(BufId::new(0), MirValue::new(0))],
            reductions: vec![],
        }],
    );
    let errors = mir::verify(&program).unwrap_err();
    let messages: Vec<String> = errors.errors().iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        ["kernel #0, %0: operand %0 is not defined before its use"]
    );
}

#[test]
fn verifier_load_rules() {
    let with = |body: &str| errors_of(&one_kernel(XY, &format!("{body}\n    store buf1 = %0")));
    assert_eq!(
        with("    %0 = load buf0 [1] : f32"),
        ["kernel #0, %0: load has 1 stride(s) but the domain has rank 2"]
    );
    assert_eq!(
        with("    %0 = load buf0 [3,2] : f32"),
        ["kernel #0, %0: load reaches element 7 of buf0, which has 6 element(s)"]
    );
    assert_eq!(
        with("    %0 = load buf0 [3,1] : f64"),
        [
            "kernel #0, %0: load of buf0 (dtype f32) declared as f64",
            "kernel #0, store #0: buf1 has dtype f32 but a f64 value is written"
        ]
    );
    // Reading the output being written, and a temp nobody wrote.
    let text = "mir p {
  buf0: f32[3] = temp
  buf1: f32[3] = output y
  kernel k0 [3] {
    %0 = load buf0 [1] : f32
    %1 = load buf1 [1] : f32
    store buf1 = %0
  }
}";
    assert_eq!(
        errors_of(text),
        [
            "kernel #0, %0: buf0 is read before an earlier kernel writes it",
            "kernel #0, %1: buf1 is read by the kernel that writes it"
        ]
    );
    // An unknown buffer.
    let mut program = parse(FUSED_CHAIN).unwrap();
    let mut kernels = program.kernels().to_vec();
    kernels[0].body[0].op = MirOp::Load {
        buf: BufId::new(9),
        strides: vec![1],
        offset: 0,
    };
    program = MirProgram::from_parts("p", program.buffers().to_vec(), kernels);
    let errors = mir::verify(&program).unwrap_err();
    assert_eq!(
        errors.errors()[0].to_string(),
        "kernel #0, %0: unknown buffer buf9"
    );
}

#[test]
fn verifier_write_rules() {
    let text = "mir p {
  buf0: f32[2,3] = input x
  buf1: f32[3] = output y
  buf2: f32[2,3] = output z
  buf3: f32[2,3] = output never
  buf4: f32[2,3] = temp
  kernel k0 [2,3] {
    %0 = load buf0 [3,1] : f32
    store buf0 = %0
    store buf1 = %0
    store buf2 = %0
    store buf4 = %0
  }
  kernel k1 [2,3] {
    %0 = load buf0 [3,1] : f32
    store buf2 = %0
    store buf4 = %0
  }
}";
    assert_eq!(
        errors_of(text),
        [
            "kernel #0, store #0: input buffer buf0 is written",
            "kernel #0, store #1: buf1 has 3 element(s) but 6 are written",
            "buf2: buf2 is written 2 times (each buffer at most once)",
            "buf3: output buffer buf3 is never written",
            "buf4: buf4 is written 2 times (each buffer at most once)",
        ]
    );
}

#[test]
fn verifier_reduction_rules() {
    let with = |reduce: &str| {
        errors_of(&one_kernel(
            "  buf0: f32[2,3] = input x\n  buf1: f32[2] = output y\n  buf2: bool[2] = output b",
            &format!(
                "    %0 = load buf0 [3,1] : f32\n    %1 = lt %0, %0 : bool\n    reduce max buf2 = %1 axes [1]\n{reduce}"
            ),
        ))
    };
    let bool_error = "kernel #0, reduction #0: `max` does not reduce bool values";
    assert_eq!(with("    reduce sum buf1 = %0 axes [1]"), [bool_error]);
    assert_eq!(
        with("    reduce sum buf1 = %0 axes [2]"),
        [
            bool_error,
            "kernel #0, reduction #1: axis 2 is out of range for a rank-2 domain"
        ]
    );
    assert_eq!(
        with("    reduce sum buf1 = %0 axes [1,1]"),
        [
            bool_error,
            "kernel #0, reduction #1: reduction axes [1, 1] are not sorted and unique"
        ]
    );
    assert_eq!(
        with("    reduce sum buf1 = %0 axes [0]"),
        [
            bool_error,
            "kernel #0, reduction #1: buf1 has 2 element(s) but 3 are written"
        ]
    );
}

#[test]
fn verifier_name_rules() {
    let text = "mir p {
  buf0: f32[3] = input x
  buf1: f32[3] = input x
  buf2: f32[3] = output y
  buf3: f32[3] = output y
  kernel k0 [3] {
    %0 = load buf0 [1] : f32
    store buf2 = %0
    store buf3 = %0
  }
}";
    assert_eq!(
        errors_of(text),
        [
            "buf1: duplicate input name `x`",
            "buf3: duplicate output name `y`"
        ]
    );
    let program = MirProgram::from_parts("bad name", vec![], vec![]);
    let errors = mir::verify(&program).unwrap_err();
    assert_eq!(
        errors.to_string(),
        "mir bad name {\n  # error: `bad name` is not a valid name (letters, digits and `_`, not starting with a digit)\n}\n"
    );
}

// ---------------------------------------------------------------------------------------------
// Interpreter.

fn f32s(array: &Array) -> Vec<f32> {
    array.as_slice::<f32>().unwrap().to_vec()
}

fn assert_close(found: &[f32], expected: &[f32]) {
    assert_eq!(found.len(), expected.len());
    for (f, e) in found.iter().zip(expected) {
        assert!(
            (f - e).abs() <= 1e-6 * e.abs().max(1.0),
            "{found:?} vs {expected:?}"
        );
    }
}

fn program(name: &str) -> MirProgram {
    let text = CORPUS.iter().find(|(n, _)| *n == name).unwrap().1;
    parse(text).unwrap()
}

#[test]
fn interp_fused_chain() {
    let (x, y) = (
        Array::from_slice(&[0.0f32, 1.0, 2.0]),
        Array::from_slice(&[1.0f32, 2.0, 3.0]),
    );
    let out = run_mir(&program("fused_chain"), &[x.view(), y.view()], Mode::Native).unwrap();
    assert_close(&f32s(&out[0]), &[1.0, 2.9092975, 2.2431975]);
    let oracle = run_mir(&program("fused_chain"), &[x.view(), y.view()], Mode::Oracle).unwrap();
    assert_eq!(oracle[0].dtype(), DType::F64);
    let expected = [1.0, 2.0f64.sin() + 2.0, 4.0f64.sin() + 3.0];
    assert_eq!(oracle[0].as_slice::<f64>().unwrap(), expected);
}

#[test]
fn interp_broadcast_add() {
    let x = Array::from_vec([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let b = Array::from_slice(&[10.0f32, 20.0, 30.0]);
    let out = run_mir(&program("broadcast_add"), &[x.view(), b.view()], Mode::Native).unwrap();
    assert_eq!(out[0].shape(), &Shape::new([2, 3]));
    assert_eq!(f32s(&out[0]), [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
}

#[test]
fn interp_scalar_load() {
    let x = Array::from_slice(&[1.0f64, 4.0, 9.0, 16.0]);
    let s = Array::scalar(Scalar::F64(4.0));
    let out = run_mir(&program("scalar_load"), &[x.view(), s.view()], Mode::Native).unwrap();
    assert_eq!(out[0].as_slice::<f64>().unwrap(), [2.0, 4.0, 6.0, 8.0]);
}

#[test]
fn interp_row_and_column_sums_with_store() {
    let text = "mir sums {
  buf0: f32[2,3] = input x
  buf1: f32[2,3] = output doubled
  buf2: f32[2] = output row_sum
  buf3: f32[1,3] = output col_sum
  kernel k0 [2,3] {
    %0 = load buf0 [3,1] : f32
    %1 = add %0, %0 : f32
    store buf1 = %1
    reduce sum buf2 = %0 axes [1]
    reduce sum buf3 = %0 axes [0]
  }
}";
    let x = Array::from_vec([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let out = run_mir(&parse(text).unwrap(), &[x.view()], Mode::Native).unwrap();
    assert_eq!(f32s(&out[0]), [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
    assert_eq!(f32s(&out[1]), [6.0, 15.0]);
    assert_eq!(out[2].shape(), &Shape::new([1, 3]));
    assert_eq!(f32s(&out[2]), [5.0, 7.0, 9.0]);
}

#[test]
fn interp_reductions_mean_max_middle_axis() {
    let x = Array::from_vec([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let max = run_mir(&program("reduce_outer"), &[x.view()], Mode::Native).unwrap();
    assert_eq!(f32s(&max[0]), [4.0, 5.0, 6.0]);
    let values: Vec<f64> = (0..24).map(|i| -f64::from(i)).collect();
    let x3 = Array::from_vec([2, 3, 4], values).unwrap();
    let mean = run_mir(&program("reduce_middle_keepdims"), &[x3.view()], Mode::Native).unwrap();
    // |x| over axis 1: mean of i, i+4, i+8 = i+4 for i in 0..4, then 12..16 +4.
    assert_eq!(
        mean[0].as_slice::<f64>().unwrap(),
        [4.0, 5.0, 6.0, 7.0, 16.0, 17.0, 18.0, 19.0]
    );
}

#[test]
fn interp_two_kernels_through_temp() {
    let x = Array::from_vec([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 6.0, 8.0]).unwrap();
    let out = run_mir(&program("two_kernels_temp"), &[x.view()], Mode::Native).unwrap();
    assert_eq!(f32s(&out[0]), [-1.0, 0.0, 1.0, -2.0, 0.0, 2.0]);
}

#[test]
fn interp_int_bool() {
    let a = Array::from_slice(&[7i32, -7, 3, 9]);
    let b = Array::from_slice(&[2i32, 2, 5, 0]);
    let out = run_mir(&program("int_bool"), &[a.view(), b.view()], Mode::Native).unwrap();
    // a < b for -7 < 2 and 3 < 5, where select picks -7; floor division; x / 0 = 0.
    assert_eq!(out[0].as_slice::<i32>().unwrap(), [3, -7, -7, 0]);
    assert_eq!(out[1].as_slice::<bool>().unwrap(), [false, false, true, false]);
    assert_eq!(out[2].as_slice::<f64>().unwrap(), [3.0, -7.0, -7.0, 0.0]);
    // 7 // -2 floors to -4.
    let b = Array::from_slice(&[-2i32, 2, 5, 0]);
    let out = run_mir(&program("int_bool"), &[a.view(), b.view()], Mode::Native).unwrap();
    assert_eq!(out[0].as_slice::<i32>().unwrap(), [-4, -7, -7, 0]);
}

#[test]
fn interp_empty_reduction_gives_identity() {
    let text = "mir empty {
  buf0: f32[2,0] = input x
  buf1: f32[2] = output s
  buf2: f32[2] = output m
  kernel k0 [2,0] {
    %0 = load buf0 [0,1] : f32
    reduce sum buf1 = %0 axes [1]
    reduce mean buf2 = %0 axes [1]
  }
}";
    let x = Array::from_vec([2, 0], Vec::<f32>::new()).unwrap();
    let out = run_mir(&parse(text).unwrap(), &[x.view()], Mode::Native).unwrap();
    assert_eq!(f32s(&out[0]), [0.0, 0.0]);
    assert!(f32s(&out[1]).iter().all(|v| v.is_nan()));
}

#[test]
fn interp_input_validation() {
    let p = program("fused_chain");
    let x = Array::from_slice(&[0.0f32, 1.0, 2.0]);
    let err = run_mir(&p, &[x.view()], Mode::Native).unwrap_err();
    assert_eq!(err.to_string(), "expected 2 input(s), got 1");
    let wrong_dtype = Array::from_slice(&[0.0f64, 1.0, 2.0]);
    let err = run_mir(&p, &[x.view(), wrong_dtype.view()], Mode::Native).unwrap_err();
    assert_eq!(err.to_string(), "input `y`: expected dtype f32, got f64");
    let wrong_shape = Array::from_slice(&[0.0f32, 1.0]);
    let err = run_mir(&p, &[wrong_shape.view(), x.view()], Mode::Native).unwrap_err();
    assert_eq!(err.to_string(), "input `x`: expected shape [3], got [2]");
}

// ---------------------------------------------------------------------------------------------
// Property tests.

/// A small deterministic generator (SplitMix64) driven by a proptest seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

fn random_scalar(rng: &mut Rng, dtype: DType) -> Scalar {
    let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.1, 1e300, -2.5];
    match dtype {
        DType::Bool => Scalar::Bool(rng.chance(50)),
        DType::I32 => Scalar::I32(rng.next() as i32),
        DType::F32 if rng.chance(30) => Scalar::from_f64(DType::F32, rng.pick(&specials)),
        DType::F32 => Scalar::F32(f32::from_bits(rng.next() as u32)),
        DType::F64 if rng.chance(30) => Scalar::F64(rng.pick(&specials)),
        DType::F64 => Scalar::F64(f64::from_bits(rng.next())),
    }
}

/// Builds a random body of well-typed instructions over `loads` (already pushed).
fn random_body(rng: &mut Rng, body: &mut Vec<MirInst>, n_insts: usize) {
    for _ in 0..n_insts {
        let pick_value = |rng: &mut Rng, body: &[MirInst], want: Option<DType>| -> Option<MirValue> {
            let candidates: Vec<usize> = (0..body.len())
                .filter(|&i| want.is_none_or(|d| body[i].dtype == d))
                .collect();
            (!candidates.is_empty()).then(|| MirValue::new(rng.pick(&candidates)))
        };
        let inst = match rng.below(6) {
            0 => {
                let dtype = rng.pick(&DType::ALL);
                MirInst {
                    op: MirOp::Const(random_scalar(rng, dtype)),
                    args: vec![],
                    dtype,
                }
            }
            1 => {
                let Some(v) = pick_value(rng, body, None) else {
                    continue;
                };
                MirInst {
                    op: MirOp::Cast,
                    args: vec![v],
                    dtype: rng.pick(&DType::ALL),
                }
            }
            2 => {
                let Some(v) = pick_value(rng, body, None) else {
                    continue;
                };
                let dtype = body[v.index()].dtype;
                let ops: Vec<UnaryOp> = UnaryOp::ALL
                    .iter()
                    .copied()
                    .filter(|op| op.accepts(dtype))
                    .collect();
                if ops.is_empty() {
                    continue;
                }
                MirInst {
                    op: MirOp::Unary(rng.pick(&ops)),
                    args: vec![v],
                    dtype,
                }
            }
            3 => {
                let Some(a) = pick_value(rng, body, None) else {
                    continue;
                };
                let dtype = body[a.index()].dtype;
                let b = pick_value(rng, body, Some(dtype)).unwrap_or(a);
                let ops: Vec<BinaryOp> = BinaryOp::ALL
                    .iter()
                    .copied()
                    .filter(|op| op.accepts(dtype))
                    .collect();
                if ops.is_empty() {
                    continue;
                }
                MirInst {
                    op: MirOp::Binary(rng.pick(&ops)),
                    args: vec![a, b],
                    dtype,
                }
            }
            4 => {
                let Some(a) = pick_value(rng, body, None) else {
                    continue;
                };
                let dtype = body[a.index()].dtype;
                let b = pick_value(rng, body, Some(dtype)).unwrap_or(a);
                let ops: Vec<CmpOp> = CmpOp::ALL
                    .iter()
                    .copied()
                    .filter(|op| op.accepts(dtype))
                    .collect();
                MirInst {
                    op: MirOp::Compare(rng.pick(&ops)),
                    args: vec![a, b],
                    dtype: DType::Bool,
                }
            }
            _ => {
                let Some(cond) = pick_value(rng, body, Some(DType::Bool)) else {
                    continue;
                };
                let Some(a) = pick_value(rng, body, None) else {
                    continue;
                };
                let dtype = body[a.index()].dtype;
                let b = pick_value(rng, body, Some(dtype)).unwrap_or(a);
                MirInst {
                    op: MirOp::Select,
                    args: vec![cond, a, b],
                    dtype,
                }
            }
        };
        body.push(inst);
    }
}

/// A random verified MIR program: one or two kernels over one domain, with broadcast and scalar
/// loads, stores, reductions and possibly a temp between the kernels.
fn random_program(seed: u64) -> MirProgram {
    let mut rng = Rng(seed);
    let rank = rng.below(4);
    let dims: Vec<usize> = (0..rank)
        .map(|_| if rng.chance(5) { 0 } else { 1 + rng.below(3) })
        .collect();
    let domain = Shape::new(dims.clone());
    let mut buffers = Vec::new();
    let mut body = Vec::new();
    for i in 0..1 + rng.below(3) {
        let dtype = rng.pick(&DType::ALL);
        // Full, broadcast (some dims 1, maybe fewer dims) or scalar.
        let shape = match rng.below(3) {
            0 => domain.clone(),
            1 => {
                let keep = rng.below(rank + 1);
                Shape::new(
                    dims[rank - keep..]
                        .iter()
                        .map(|&d| if rng.chance(50) { 1 } else { d })
                        .collect::<Vec<_>>(),
                )
            }
            _ => Shape::scalar(),
        };
        let strides = shape.broadcast_strides(&domain).unwrap();
        buffers.push(Buffer {
            ty: TensorType::new(dtype, shape),
            kind: BufKind::Input {
                name: format!("in{i}"),
            },
        });
        body.push(MirInst {
            op: MirOp::Load {
                buf: BufId::new(i),
                strides,
                offset: 0,
            },
            args: vec![],
            dtype,
        });
    }
    let n_insts = rng.below(12);
    random_body(&mut rng, &mut body, n_insts);
    let mut kernel = MirKernel {
        name: "k0".into(),
        domain: domain.clone(),
        body,
        stores: vec![],
        reductions: vec![],
    };
    let mut kernels = Vec::new();
    let mut outputs = 0;
    let mut add_output = |buffers: &mut Vec<Buffer>, ty: TensorType| {
        buffers.push(Buffer {
            ty,
            kind: BufKind::Output {
                name: format!("out{outputs}"),
            },
        });
        outputs += 1;
        BufId::new(buffers.len() - 1)
    };
    for _ in 0..1 + rng.below(2) {
        let value = MirValue::new(rng.below(kernel.body.len()));
        let dtype = kernel.body[value.index()].dtype;
        let buf = add_output(&mut buffers, TensorType::new(dtype, domain.clone()));
        kernel.stores.push(Store::whole(buf, value));
    }
    if rng.chance(60) {
        let value = MirValue::new(rng.below(kernel.body.len()));
        let dtype = kernel.body[value.index()].dtype;
        let ops: Vec<ReduceOp> = ReduceOp::ALL
            .iter()
            .copied()
            .filter(|op| op.accepts(dtype))
            .collect();
        if !ops.is_empty() {
            let axes: Vec<usize> = (0..rank).filter(|_| rng.chance(50)).collect();
            let kept: Vec<usize> = (0..rank)
                .map(|a| if axes.contains(&a) { 1 } else { dims[a] })
                .collect();
            let buf = add_output(&mut buffers, TensorType::new(dtype, kept));
            kernel.reductions.push(Reduction {
                op: rng.pick(&ops),
                value,
                axes,
                buf,
            });
        }
    }
    if rng.chance(50) {
        // A second kernel reading a temp the first one stores.
        let value = MirValue::new(rng.below(kernel.body.len()));
        let dtype = kernel.body[value.index()].dtype;
        buffers.push(Buffer {
            ty: TensorType::new(dtype, domain.clone()),
            kind: BufKind::Temp,
        });
        let temp = BufId::new(buffers.len() - 1);
        kernel.stores.push(Store::whole(temp, value));
        kernels.push(kernel);
        let mut body = vec![MirInst {
            op: MirOp::Load {
                buf: temp,
                strides: domain.strides(),
                offset: 0,
            },
            args: vec![],
            dtype,
        }];
        let n_insts = rng.below(6);
        random_body(&mut rng, &mut body, n_insts);
        let value = MirValue::new(body.len() - 1);
        let dtype = body[value.index()].dtype;
        let buf = add_output(&mut buffers, TensorType::new(dtype, domain.clone()));
        kernels.push(MirKernel {
            name: "k1".into(),
            domain,
            body,
            stores: vec![Store::whole(buf, value)],
            reductions: vec![],
        });
    } else {
        kernels.push(kernel);
    }
    MirProgram::from_parts("random", buffers, kernels)
}

fn random_inputs(rng: &mut Rng, program: &MirProgram) -> Vec<Array> {
    program
        .inputs()
        .map(|(_, _, ty)| {
            let values = (0..ty.shape.numel()).map(|_| random_scalar(rng, ty.dtype));
            Array::new(
                ty.shape.clone(),
                rfx_ir::ArrayData::from_scalars(ty.dtype, values).unwrap(),
            )
            .unwrap()
        })
        .collect()
}

/// Printable mutations of valid text: delete, duplicate or replace a span.
fn mutate(text: &str, seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(chars.len() + 1);
        let len = rng.below(6).min(chars.len() - at.min(chars.len()));
        match rng.below(4) {
            0 => {
                chars.drain(at..at + len);
            }
            1 => {
                let span: Vec<char> = chars[at..at + len].to_vec();
                chars.splice(at..at, span);
            }
            2 => {
                let junk = rng.pick(&[
                    "%", "buf", "[", "]", "{", "}", ":", "=", ",", "nan", "-", "9", "\n", "é", "load",
                ]);
                chars.splice(at..at, junk.chars());
            }
            _ => {
                if at < chars.len() {
                    chars[at] = rng.pick(&['0', '%', 'x', ' ', '}', '[', '.', '-']);
                }
            }
        }
    }
    chars.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_round_trip_and_run(seed in any::<u64>()) {
        let program = random_program(seed);
        mir::verify(&program).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let printed = program.to_string();
        let reparsed = parse(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
        prop_assert_eq!(&reparsed, &program);
        prop_assert_eq!(reparsed.to_string(), printed);
        let inputs = random_inputs(&mut Rng(seed ^ 1), &program);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let native = run_mir(&program, &views, Mode::Native).unwrap();
        let oracle = run_mir(&program, &views, Mode::Oracle).unwrap();
        prop_assert_eq!(native.len(), program.outputs().count());
        prop_assert_eq!(oracle.len(), native.len());
    }

    #[test]
    fn parser_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = parse(&text) {
            prop_assert!(e.line >= 1 && e.col >= 1);
        }
    }

    #[test]
    fn parser_never_panics_on_mutations(index in 0..CORPUS.len(), seed in any::<u64>()) {
        let text = mutate(CORPUS[index].1, seed);
        match parse(&text) {
            Err(e) => prop_assert!(e.line >= 1 && e.col >= 1),
            // Whatever parses must print and parse back to itself, and verify without panicking.
            Ok(program) => {
                let _ = mir::verify(&program).map_err(|e| e.to_string());
                prop_assert_eq!(parse(&program.to_string()).unwrap(), program);
            }
        }
    }
}
