//! The HIR text format: corpus snapshots, round trips, malformed text and parser fuzzing (the
//! round trip of random kernels is in `rfx-check`'s tests, beside the generator).

use std::path::PathBuf;

use proptest::prelude::*;
use rfx_ir::hir::{self, Kernel};
use rfx_ir::testgen::read_corpus;

fn corpus() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/hir");
    read_corpus(&dir).expect("corpus directory")
}

#[test]
fn corpus_has_at_least_30_kernels_covering_every_op() {
    let corpus = corpus();
    assert!(corpus.len() >= 30, "only {} kernels", corpus.len());
    let mut seen = std::collections::BTreeSet::new();
    for (name, text) in &corpus {
        let kernel = hir::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        for node in kernel.nodes() {
            seen.insert(match &node.op {
                hir::Op::Reduce { op, .. } => format!("reduce_{op}"),
                op => op.name().to_string(),
            });
        }
    }
    let mut expected: Vec<String> = [
        "input",
        "const",
        "select",
        "clamp",
        "cast",
        "broadcast_to",
        "reshape",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    expected.extend(rfx_ir::UnaryOp::ALL.iter().map(|op| op.name().to_string()));
    expected.extend(rfx_ir::BinaryOp::ALL.iter().map(|op| op.name().to_string()));
    expected.extend(rfx_ir::CmpOp::ALL.iter().map(|op| op.name().to_string()));
    expected.extend(rfx_ir::ReduceOp::ALL.iter().map(|op| format!("reduce_{op}")));
    let missing: Vec<_> = expected.iter().filter(|op| !seen.contains(*op)).collect();
    assert!(missing.is_empty(), "ops missing from the corpus: {missing:?}");
}

#[test]
fn corpus_prints_parses_and_prints_identically() {
    for (name, text) in corpus() {
        let kernel = hir::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let printed = kernel.to_string();
        let reparsed = hir::parse(&printed).unwrap_or_else(|e| panic!("{name} reprinted: {e}\n{printed}"));
        assert_eq!(reparsed, kernel, "{name}");
        assert_eq!(reparsed.to_string(), printed, "{name}");
        insta::assert_snapshot!(format!("hir_{name}"), printed);
    }
}

fn parse_err(text: &str) -> String {
    match hir::parse(text) {
        Ok(k) => panic!("parsed:\n{k}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_text_gives_line_and_column() {
    let cases: &[(&str, &str)] = &[
        // Truncated in the middle of a statement.
        (
            "kernel k {\n  %0 = input x : f32[3]\n  %1 = add %0,",
            "3:15: expected a value `%name`, found end of input",
        ),
        // Truncated before the closing brace.
        (
            "kernel k {\n  %0 = input x : f32[3]\n  output o = %0\n",
            "4:1: expected a statement (`%name = ...`, `output name = %value`) or `}`, found end of input",
        ),
        (
            "kernel k {\n  %0 = input x : f32[3]\n  %1 = frobnicate %0 : f32[3]\n}",
            "3:8: unknown op `frobnicate`",
        ),
        (
            "kernel k {\n  %0 = input x : f32[3]\n  %1 = input y : i32[3]\n  %2 = add %0, %1 : f32[3]\n  output o = %2\n}",
            "4:3: %2: `add` needs operands of one dtype, got f32 and i32",
        ),
        (
            "kernel k {\n  %0 = input x : f32[3]\n  %0 = neg %0 : f32[3]\n}",
            "3:3: value `%0` is defined twice",
        ),
        (
            "kernel k {\n  %0 = input x : f32[3]\n  %1 = input x : f32[3]\n  output o = %0\n}",
            "3:3: %1: duplicate input name `x`",
        ),
        (
            "kernel k {\n  %0 = input x : f32[3]\n  output o = %0\n  output o = %0\n}",
            "4:3: output 1: duplicate output name `o`",
        ),
        (
            "kernel k {\n  %0 = input x : f32[3]\n  %1 = neg %9 : f32[3]\n  output o = %1\n}",
            "3:12: undefined value `%9`",
        ),
        (
            "kernel k {\n  %0 = input x : f32[3]\n  %1 = neg %2 : f32[3]\n  %2 = neg %0 : f32[3]\n  output o = %1\n}",
            "3:3: %1: operand %2 is used before its definition",
        ),
        (
            "kernel k {\n  %0 = input x : f33[3]\n}",
            "2:18: expected a dtype (`bool`, `i32`, `f32` or `f64`), found `f33`",
        ),
        (
            "kernel k {\n  %0 = const 1.5 : i32[]\n  output o = %0\n}",
            "2:14: `1.5` is not a literal of dtype i32",
        ),
        (
            "kernel k {\n  %0 = input x : f32[2,3]\n  %1 = sum %0 : f32[]\n  output o = %1\n}",
            "3:15: expected `axes` after the operand of a reduction, found `:`",
        ),
        (
            "kernel k {\n  %0 = input x : f32[2,3]\n  %1 = sum %0 axes [2] : f32[2]\n  output o = %1\n}",
            "3:3: %1: axis 2 is out of range for rank 2",
        ),
        (
            "kernel k {\n  %0 = input x : f32[2,3]\n  %1 = neg %0 : f32[3,2]\n  output o = %1\n}",
            "3:3: %1: declared type f32[3,2] but the operands give f32[2,3]",
        ),
        (
            "kernel k {\n  %0 = input x : f32[2]\n  %1 = input y : f32[3]\n  %2 = mul %0, %1 : f32[3]\n  output o = %2\n}",
            "4:3: %2: `mul`: shapes [2] and [3] do not broadcast",
        ),
        (
            "kernel k {\n  %0 = input x : f32[2]\n}",
            "1:1: kernel: the kernel has no outputs",
        ),
        (
            "kernel k {\n  %0 = input x : f32[2] $\n}",
            "2:25: unexpected character `$`",
        ),
        (
            "kernel k {\n  %0 = input x : f32[2]\n  output o = %0\n} trailing",
            "4:3: expected end of input, found `trailing`",
        ),
        (
            "kernel k {\n  %0 = input x : f32[99999999999999999999999]\n}",
            "2:22: a dimension `99999999999999999999999` is too large",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_err(text), *expected, "for:\n{text}");
    }
}

#[test]
fn parse_errors_are_typed_with_positions() {
    let err = hir::parse("kernel k {\n  %0 = nope\n}").unwrap_err();
    assert_eq!((err.line, err.col), (3, 1));
    assert!(err.message.contains("expected a value"), "{}", err.message);
}

fn check_no_panic(text: &str) {
    if let Err(e) = hir::parse(text) {
        assert!(e.line >= 1 && e.col >= 1, "bad position in {e:?}");
    }
    let _ = hir::parse_unverified(text);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        check_no_panic(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn mutated_corpus_text_never_panics(
        pick in 0usize..1000,
        edits in proptest::collection::vec((0usize..10_000, 0u8..4, any::<char>()), 1..6),
    ) {
        let corpus = corpus();
        let mut chars: Vec<char> = corpus[pick % corpus.len()].1.chars().collect();
        for (pos, kind, c) in edits {
            if chars.is_empty() { break; }
            let pos = pos % chars.len();
            match kind {
                0 => { chars.remove(pos); }
                1 => chars.insert(pos, c),
                2 => chars[pos] = c,
                _ => chars.truncate(pos),
            }
        }
        check_no_panic(&chars.into_iter().collect::<String>());
    }

    #[test]
    fn tokens_soup_never_panics(tokens in proptest::collection::vec(
        prop_oneof![
            Just("kernel"), Just("k"), Just("{"), Just("}"), Just("%0"), Just("%1"), Just("="), Just(":"),
            Just(","), Just("["), Just("]"), Just("f32"), Just("bool"), Just("input"), Just("const"),
            Just("add"), Just("sum"), Just("axes"), Just("keepdims"), Just("output"), Just("nan:0x7fc00001"),
            Just("-inf"), Just("1e400"), Just("3"), Just("\n"), Just("loop"), Just("while_loop"),
            Just("cond"), Just("carries"), Just("trips"), Just("loop_output"), Just("index"),
        ], 0..60)) {
        check_no_panic(&tokens.join(" "));
    }
}

#[test]
fn unverified_parse_keeps_invalid_kernels_for_the_verifier() {
    let text = "kernel k {\n  %0 = input x : f32[3]\n  %1 = input n : i32[3]\n  %2 = sin %1 : i32[3]\n  %3 = add %2, %0 : f32[3]\n  output o = %3\n}";
    let kernel: Kernel = hir::parse_unverified(text).expect("syntax is fine");
    let errors = hir::verify(&kernel).unwrap_err();
    // The bad `sin` is reported once; its user is flagged as having an invalid operand.
    assert_eq!(
        errors.to_string(),
        "kernel k {\n  %0 = input x : f32[3]\n  %1 = input n : i32[3]\n  %2 = sin %1 : i32[3]\n  # error: `sin` does not accept i32 operands\n  %3 = add %2, %0 : f32[3]\n  # error: operand %2 is invalid\n  output o = %3\n}\n"
    );
    assert_eq!(errors.errors().len(), 2);
}

#[test]
fn iota_and_transpose_print_and_parse_back() {
    let text = "\
kernel k {
  %0 = input x : f32[2,3]
  %1 = iota axis 1 : f32[3,2]
  %2 = transpose %0 perm [1,0] : f32[3,2]
  %3 = add %1, %2 : f32[3,2]
  output out = %3
}
";
    let kernel = rfx_ir::hir::parse(text).expect("parses");
    assert_eq!(kernel.to_string(), text);
    assert!(matches!(kernel.nodes()[1].op, rfx_ir::hir::Op::Iota { axis: 1 }));
    let err = rfx_ir::hir::parse(&text.replace("perm [1,0]", "perm [1,1]")).expect_err("bad perm");
    assert_eq!((err.line, err.col), (4, 3), "{err}");
    assert!(err.message.contains("exactly once"), "{err}");
    let err = rfx_ir::hir::parse(&text.replace("iota axis 1", "iota 1")).expect_err("no `axis`");
    assert_eq!(err.line, 3, "{err}");
}

/// Literal values print in a form that parses back bit for bit: signed zeros, infinities, NaN
/// payloads and subnormals included, in every dtype.
#[test]
fn literals_print_and_parse_back_bit_for_bit() {
    use rfx_ir::hir::{Builder, Op};
    use rfx_ir::{Array, Scalar};
    let floats = [
        0.0f32,
        -0.0,
        1.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(0x7fc0_0123),
        1e-40,
        -3.25,
    ];
    let mut b = Builder::new("k");
    let x = b
        .input("x", rfx_ir::TensorType::new(rfx_ir::DType::F32, [2, 4]))
        .unwrap();
    let c = b.literal(&Array::from_vec([2, 4], floats.to_vec()).unwrap());
    let d = b.literal(
        &Array::from_vec([3], vec![1e-310f64, -0.0, f64::from_bits(0xfff8_0000_0000_0042)]).unwrap(),
    );
    let i = b.literal(&Array::from_vec([2], vec![i32::MIN, 7]).unwrap());
    let t = b.literal(&Array::from_vec([2], vec![true, false]).unwrap());
    let e = b.literal(&Array::from_vec::<f32>([0, 3], Vec::new()).unwrap());
    let y = b.op(Op::Binary(rfx_ir::BinaryOp::Add), &[x, c]).unwrap();
    for (name, v) in [("y", y), ("d", d), ("i", i), ("t", t), ("e", e)] {
        b.output(name, v).unwrap();
    }
    let kernel = b.finish().unwrap();
    let text = kernel.to_string();
    assert!(text.contains("literal [] : f32[0,3]"), "{text}");
    let back = hir::parse(&text).expect("parses back");
    assert_eq!(back, kernel, "{text}");
    let Op::Literal(values) = &back.nodes()[1].op else {
        panic!("node 1 is the literal: {text}")
    };
    let bits: Vec<u32> = values
        .iter()
        .map(|v| match v {
            Scalar::F32(f) => f.to_bits(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(bits, floats.map(f32::to_bits));
}

#[test]
fn literal_errors_name_the_token() {
    let text = "kernel k {\n  %0 = literal [1, 2, 3] : i32[3]\n  output out = %0\n}\n";
    assert!(hir::parse(text).is_ok());
    let err = hir::parse(&text.replace("2, 3]", "2.5, 3]")).expect_err("not an i32");
    assert_eq!(
        (err.line, err.col, err.message.as_str()),
        (2, 20, "`2.5` is not a literal of dtype i32")
    );
    let err = hir::parse(&text.replace("[1, 2, 3]", "[1, 2]")).expect_err("too few values");
    assert_eq!((err.line, err.col), (2, 3), "{err}");
    assert!(
        err.message.contains("2 value(s) but its type has 3 element(s)"),
        "{err}"
    );
    let err = hir::parse(&text.replace("[1, 2, 3]", "[1, 2, 3")).expect_err("unclosed");
    assert_eq!(
        (err.line, err.col, err.message.as_str()),
        (2, 25, "expected `,` or `]`, found `:`")
    );
    let err = hir::parse(&text.replace("[1, 2, 3]", "[1, %0, 3]")).expect_err("not a literal");
    assert_eq!((err.line, err.col), (2, 20), "{err}");
}
