//! LIR: text round trip, verifier rules, reference interpreter (slot reuse, memory plans).

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use rfx_ir::interp::{InterpError, Mode, run_lir};
use rfx_ir::lir::{
    self, Inst, LirBuffer, LirKernel, LirProgram, ScanOrder, Schedule, SlotId, Storage, parse,
};
use rfx_ir::{Array, ArrayData, BinaryOp, BufId, CmpOp, DType, ReduceOp, Scalar, Shape, TensorType, UnaryOp};

const FUSED_CHAIN: &str = "\
lir fused_chain arena 0 align 64 {
  buf0: f32[3] = input x
  buf1: f32[3] = input y
  buf2: f32[3] = output out
  kernel k0 dims [3] reduce 0 vector 4 thread_min 16384 tile 1024 lanes 1 {
    slots [f32, f32, f32]
    preamble {
      s1 = const 2.0
    }
    body {
      s0 = load buf0 [1]
      s2 = mul s0, s1
      s0 = sin s2
      s2 = load buf1 [1]
      s0 = add s0, s2
      store buf2 [1] = s0
    }
  }
}
";

/// Temps with disjoint lifetimes share arena bytes: t1 (k0..k1) and t3 (k2..k3) at offset 0,
/// t2 (k1..k3) at offset 16. `OVERLAPPING_PLAN` puts t3 on top of t2, which is still live.
const SHARED_PLAN: &str = "\
lir shared_plan arena 32 align 16 {
  buf0: f32[4] = input x
  buf1: f32[4] = arena 0
  buf2: f32[4] = arena 16
  buf3: f32[4] = arena 0
  buf4: f32[4] = output out
  kernel k0 dims [4] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32, f32]
    preamble {
      s1 = const 2.0
    }
    body {
      s0 = load buf0 [1]
      s0 = mul s0, s1
      store buf1 [1] = s0
    }
  }
  kernel k1 dims [4] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32, f32]
    preamble {
      s1 = const 1.0
    }
    body {
      s0 = load buf1 [1]
      s0 = add s0, s1
      store buf2 [1] = s0
    }
  }
  kernel k2 dims [4] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32]
    preamble {}
    body {
      s0 = load buf2 [1]
      s0 = mul s0, s0
      store buf3 [1] = s0
    }
  }
  kernel k3 dims [4] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32, f32]
    preamble {}
    body {
      s0 = load buf3 [1]
      s1 = load buf2 [1]
      s0 = sub s0, s1
      store buf4 [1] = s0
    }
  }
}
";

const CORPUS: &[(&str, &str)] = &[
    ("fused_chain", FUSED_CHAIN),
    ("shared_plan", SHARED_PLAN),
    (
        "broadcast_add",
        "lir broadcast_add arena 0 align 64 {
  buf0: f32[2,3] = input x
  buf1: f32[3] = input b
  buf2: f32[2,3] = output out
  kernel k0 dims [2,3] reduce 0 vector 8 thread_min 4096 tile 256 lanes 1 {
    slots [f32, f32]
    preamble {}
    body {
      s0 = load buf0 [3,1]
      s1 = load buf1 [0,1]
      s0 = add s0, s1
      store buf2 [3,1] = s0
    }
  }
}",
    ),
    (
        "scalar_preamble",
        "lir scalar_preamble arena 0 align 64 {
  buf0: f64[4] = input x
  buf1: f64[] = input s
  buf2: f64[4] = output out
  kernel k0 dims [4] reduce 0 vector 2 thread_min 16384 tile 1024 lanes 1 {
    slots [f64, f64, f64]
    preamble {
      s1 = load buf1 [0]
      s2 = sqrt s1
    }
    body {
      s0 = load buf0 [1]
      s0 = mul s0, s2
      store buf2 [1] = s0
    }
  }
}",
    ),
    (
        "row_sum",
        "lir row_sum arena 0 align 64 {
  buf0: f32[2,3] = input x
  buf1: f32[2] = output s
  kernel k0 dims [2,3] reduce 1 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32]
    preamble {}
    body {
      s0 = load buf0 [3,1]
      reduce sum buf1 = s0
    }
  }
}",
    ),
    (
        "col_max_outer_axis",
        "lir col_max_outer_axis arena 0 align 64 {
  buf0: f32[2,3] = input x
  buf1: f32[3] = output m
  kernel k0 dims [3,2] reduce 1 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32]
    preamble {}
    body {
      s0 = load buf0 [1,3]
      reduce max buf1 = s0
    }
  }
}",
    ),
    (
        "middle_mean",
        "lir middle_mean arena 0 align 64 {
  buf0: f64[2,3,4] = input x
  buf1: f64[2,1,4] = output m
  kernel k0 dims [2,4,3] reduce 1 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f64]
    preamble {}
    body {
      s0 = load buf0 [12,1,4]
      s0 = abs s0
      reduce mean buf1 = s0
    }
  }
}",
    ),
    (
        "store_and_reduce",
        "lir store_and_reduce arena 0 align 64 {
  buf0: f32[2,3] = input x
  buf1: f32[2,3] = output e
  buf2: f32[2] = output total
  kernel k0 dims [2,3] reduce 1 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32]
    preamble {}
    body {
      s0 = load buf0 [3,1]
      s0 = exp s0
      store buf1 [3,1] = s0
      reduce sum buf2 = s0
    }
  }
}",
    ),
    (
        "two_kernels_arena",
        "lir two_kernels_arena arena 8 align 8 {
  buf0: f32[2,3] = input x
  buf1: f32[2] = arena 0
  buf2: f32[2,3] = output centered
  kernel k0 dims [2,3] reduce 1 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32]
    preamble {}
    body {
      s0 = load buf0 [3,1]
      reduce mean buf1 = s0
    }
  }
  kernel k1 dims [2,3] reduce 0 vector 4 thread_min 16384 tile 1024 lanes 1 {
    slots [f32, f32]
    preamble {}
    body {
      s0 = load buf0 [3,1]
      s1 = load buf1 [1,0]
      s0 = sub s0, s1
      store buf2 [3,1] = s0
    }
  }
}",
    ),
    (
        "int_bool",
        "lir int_bool arena 0 align 64 {
  buf0: i32[4] = input a
  buf1: i32[4] = input b
  buf2: i32[4] = output q
  buf3: bool[4] = output flags
  buf4: f64[4] = output widened
  kernel k0 dims [4] reduce 0 vector 4 thread_min 16384 tile 1024 lanes 1 {
    slots [i32, i32, bool, bool, i32, f64]
    preamble {
      s4 = const -7
    }
    body {
      s0 = load buf0 [1]
      s1 = load buf1 [1]
      s2 = lt s0, s1
      s1 = div s0, s1
      s3 = not s2
      s1 = select s3, s1, s4
      s3 = ne s0, s4
      s3 = and s3, s2
      s5 = cast s1
      store buf2 [1] = s1
      store buf3 [1] = s3
      store buf4 [1] = s5
    }
  }
}",
    ),
    (
        "special_constants",
        "lir special_constants arena 0 align 64 {
  buf0: f32[2] = input x
  buf1: f32[2] = output y
  kernel k0 dims [2] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32, f32, f32, f32, f64]
    preamble {
      s1 = const nan
      s2 = const -inf
      s3 = const -0.0
      s4 = const nan:0x7ff8000000000001
    }
    body {
      s0 = load buf0 [1]
      s0 = max s0, s2
      s0 = min s0, s1
      s0 = add s0, s3
      store buf1 [1] = s0
    }
  }
}",
    ),
];

fn errors_of(text: &str) -> Vec<String> {
    let program = parse(text).unwrap();
    match lir::verify(&program) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.errors().iter().map(ToString::to_string).collect(),
    }
}

fn program(name: &str) -> LirProgram {
    parse(CORPUS.iter().find(|(n, _)| *n == name).unwrap().1).unwrap()
}

#[test]
fn corpus_verifies_and_round_trips() {
    for (name, text) in CORPUS {
        let program = parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        lir::verify(&program).unwrap_or_else(|e| panic!("{name}:\n{e}"));
        let printed = program.to_string();
        let reparsed = parse(&printed).unwrap();
        assert_eq!(reparsed, program, "{name}");
        assert_eq!(reparsed.to_string(), printed, "{name}");
        insta::assert_snapshot!(format!("lir_{name}"), printed);
    }
}

#[test]
fn parse_errors_point_at_the_token() {
    let header = "lir p arena 0 align 8 {\n  kernel k dims [1] reduce 0 vector 1 thread_min 1 tile 1 lanes 1 {\n    slots [f32]\n";
    let cases: &[(&str, &str)] = &[
        (
            "    preamble {}\n    body {\n      s0 = load buf0 [1]\n    }\n  }\n}",
            "6:17: expected a declared buffer, found `buf0`",
        ),
        (
            "    preamble {}\n    body {\n      s1 = const 1.0\n    }\n  }\n}",
            "6:7: expected a declared slot `sN` (N < 1), found `s1`",
        ),
        (
            "    preamble {}\n    body {\n      s0 = const 1\n      s0 = frob s0\n    }\n  }\n}",
            "7:12: expected an op name, found `frob`",
        ),
        (
            "    preamble {}\n    body {\n      s0 = const true\n    }\n  }\n}",
            "6:18: expected a f32 literal, found `true`",
        ),
        (
            "    preamble {}\n    body {\n      x = const 1\n    }\n  }\n}",
            "6:7: expected an instruction (`sN = ...`, `store`, `reduce`) or `}`, found `x`",
        ),
        (
            "    preamble {}\n    body {}\n  }\n}\n}",
            "8:1: expected end of input, found `}`",
        ),
        ("    body {}\n  }\n}", "4:5: expected `preamble`, found `body`"),
    ];
    for (rest, expected) in cases {
        let text = format!("{header}{rest}");
        assert_eq!(parse(&text).unwrap_err().to_string(), *expected, "{text}");
    }
    assert_eq!(
        parse("lir p arena x").unwrap_err().to_string(),
        "1:13: expected an arena size in bytes, found `x`"
    );
}

// ---------------------------------------------------------------------------------------------
// Verifier rules.

fn kernel_text(buffers: &str, header: &str, slots: &str, preamble: &str, body: &str) -> String {
    format!(
        "lir p arena 64 align 8 {{\n{buffers}\n  kernel k0 {header} {{\n    slots [{slots}]\n    preamble {{\n{preamble}\n    }}\n    body {{\n{body}\n    }}\n  }}\n}}"
    )
}

const XY: &str = "  buf0: f32[2,3] = input x\n  buf1: f32[2,3] = output y";
const PLAIN: &str = "dims [2,3] reduce 0 vector 1 thread_min 1 tile 1 lanes 1";

fn with_body(slots: &str, preamble: &str, body: &str) -> Vec<String> {
    errors_of(&kernel_text(XY, PLAIN, slots, preamble, body))
}

#[test]
fn verifier_prints_program_with_errors_attached() {
    let text = kernel_text(
        XY,
        PLAIN,
        "f32, f32, f32",
        "      s1 = const 2.0",
        "      s0 = load buf0 [3,1]\n      s2 = mul s0, s1\n      s1 = sin s2\n      store buf1 [3,1] = s1",
    );
    let errors = lir::verify(&parse(&text).unwrap()).unwrap_err();
    assert_eq!(
        errors.to_string(),
        "lir p arena 64 align 8 {
  buf0: f32[2,3] = input x
  buf1: f32[2,3] = output y
  kernel k0 dims [2,3] reduce 0 vector 1 thread_min 1 tile 1 lanes 1 {
    slots [f32, f32, f32]
    preamble {
      s1 = const 2.0
    }
    body {
      s0 = load buf0 [3,1]
      s2 = mul s0, s1
      # error: s1 is read as a preamble value but the body overwrites it
      s1 = sin s2
      store buf1 [3,1] = s1
    }
  }
}
"
    );
    let interp = run_lir(errors.program(), &[], Mode::Native).unwrap_err();
    assert!(matches!(interp, InterpError::InvalidLir(_)));
}

#[test]
fn verifier_slot_rules() {
    assert_eq!(
        with_body("f32, f32", "", "      s1 = neg s0\n      store buf1 [3,1] = s1"),
        ["kernel #0, body #0: s0 is read before it is written"]
    );
    assert_eq!(
        with_body("f32, f32", "      s0 = neg s1", "      store buf1 [3,1] = s0"),
        ["kernel #0, preamble #0: s1 is read before it is written"]
    );
    let mut program = parse(&kernel_text(
        XY,
        PLAIN,
        "f32",
        "",
        "      s0 = load buf0 [3,1]\n      store buf1 [3,1] = s0",
    ))
    .unwrap();
    let mut kernels = program.kernels().to_vec();
    kernels[0].body.push(Inst::Unary {
        dst: SlotId::new(5),
        op: UnaryOp::Neg,
        src: SlotId::new(7),
    });
    program = LirProgram::from_parts("p", program.buffers().to_vec(), 64, 8, kernels);
    let messages: Vec<String> = lir::verify(&program)
        .unwrap_err()
        .errors()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        [
            "kernel #0, body #2: unknown slot s7",
            "kernel #0, body #2: unknown slot s5"
        ]
    );
}

#[test]
fn verifier_dtype_rules() {
    let load = "      s0 = load buf0 [3,1]\n";
    let store = "\n      store buf1 [3,1] = s0";
    let check = |slots: &str, insts: &str| with_body(slots, "", &format!("{load}{insts}{store}"));
    assert_eq!(
        check("f32, i32", "      s1 = const 1\n      s0 = add s0, s1"),
        ["kernel #0, body #2: `add` needs operands of one dtype, got f32 and i32"]
    );
    assert_eq!(
        check("f32, f32", "      s1 = lt s0, s0"),
        ["kernel #0, body #1: declared type f32 but the operands give bool"]
    );
    assert_eq!(
        check("f32, bool", "      s1 = not s0"),
        ["kernel #0, body #1: `not` does not accept f32 operands"]
    );
    assert_eq!(
        check("f32, f32", "      s0 = select s0, s0, s0"),
        ["kernel #0, body #1: `select` needs a bool condition, got f32"]
    );
    assert_eq!(
        with_body(
            "i32",
            "",
            "      s0 = load buf0 [3,1]\n      store buf1 [3,1] = s0"
        ),
        [
            "kernel #0, body #0: load of buf0 (dtype f32) into a i32 slot",
            "kernel #0, body #1: buf1 has dtype f32 but a i32 slot is written"
        ]
    );
    let reduce = kernel_text(
        "  buf0: f32[2,3] = input x\n  buf1: bool[2] = output y",
        "dims [2,3] reduce 1 vector 1 thread_min 1 tile 1 lanes 1",
        "f32, bool",
        "",
        "      s0 = load buf0 [3,1]\n      s1 = lt s0, s0\n      reduce sum buf1 = s1",
    );
    assert_eq!(
        errors_of(&reduce),
        ["kernel #0, body #2: `sum` does not reduce bool values"]
    );
}

#[test]
fn verifier_buffer_rules() {
    assert_eq!(
        with_body("f32", "", "      s0 = load buf0 [3]\n      store buf1 [3,2] = s0"),
        [
            "kernel #0, body #0: 1 stride(s) for a 2-dimensional loop nest",
            "kernel #0, body #1: reaches element 7 of buf1, which has 6 element(s)"
        ]
    );
    assert_eq!(
        with_body(
            "f32",
            "",
            "      s0 = load buf0 [3,1]\n      store buf0 [3,1] = s0\n      store buf1 [3,1] = s0"
        ),
        ["kernel #0, body #1: input buffer buf0 is written"]
    );
    let reduce = |header: &str, out: &str| {
        errors_of(&kernel_text(
            &format!("  buf0: f32[2,3] = input x\n  buf1: {out} = output y"),
            header,
            "f32",
            "",
            "      s0 = load buf0 [3,1]\n      reduce sum buf1 = s0",
        ))
    };
    assert_eq!(
        reduce(
            "dims [2,3] reduce 1 vector 1 thread_min 1 tile 1 lanes 1",
            "f32[3]"
        ),
        ["kernel #0, body #1: buf1 has 3 element(s) but the leading dims have 2 point(s)"]
    );
    assert_eq!(
        reduce(
            "dims [2,3] reduce 3 vector 3 thread_min 1 tile 1 lanes 1",
            "f32[]"
        ),
        [
            "kernel #0: 3 reduced dims in a 2-dimensional loop nest",
            "kernel #0: vector width 3 is not a power of two"
        ]
    );
    let text = "lir p arena 0 align 8 {
  buf0: f32[3] = arena 0
  buf1: f32[3] = output y
  buf2: f32[3] = output never
  kernel k0 dims [3] reduce 0 vector 1 thread_min 1 tile 1 lanes 1 {
    slots [f32]
    preamble {}
    body {
      s0 = load buf0 [1]
      store buf1 [1] = s0
    }
  }
}";
    assert_eq!(
        errors_of(text),
        [
            "buf0: arena buffer buf0 spans bytes 0..12 but the arena has 0",
            "kernel #0, body #0: buf0 is read before an earlier kernel writes it",
            "buf2: output buffer buf2 is never written"
        ]
    );
}

#[test]
fn verifier_arena_and_preamble_rules() {
    let text = "lir p arena 64 align 24 {
  buf0: f32[2] = input x
  buf1: f32[2] = input x
  buf2: f64[2] = arena 4
  buf3: f32[2] = output y
  kernel k0 dims [2] reduce 0 vector 1 thread_min 1 tile 1 lanes 1 {
    slots [f32, f32]
    preamble {
      s0 = load buf0 [1]
      s1 = load buf1 [0]
      store buf3 [1] = s1
      reduce sum buf3 = s1
    }
    body {
      store buf3 [1] = s0
    }
  }
}";
    assert_eq!(
        errors_of(text),
        [
            "program: arena alignment 24 is not a power of two",
            "buf1: duplicate input name `x`",
            "buf2: arena offset 4 of buf2 is not a multiple of 8 bytes",
            "kernel #0, preamble #0: preamble load or index with nonzero strides [1]",
            "kernel #0, preamble #2: `store` is not allowed in the preamble",
            "kernel #0, preamble #3: `reduce` is not allowed in the preamble",
        ]
    );
    // Unknown buffers only come from `from_parts`.
    let mut kernels = program("fused_chain").kernels().to_vec();
    kernels[0].body[0] = Inst::Load {
        dst: SlotId::new(0),
        buf: BufId::new(9),
        strides: vec![1],
        offset: 0,
    };
    let bad = LirProgram::from_parts("p", program("fused_chain").buffers().to_vec(), 0, 64, kernels);
    assert_eq!(
        lir::verify(&bad).unwrap_err().errors()[0].to_string(),
        "kernel #0, body #0: unknown buffer buf9"
    );
}

// ---------------------------------------------------------------------------------------------
// Interpreter.

fn f32s(array: &Array) -> Vec<f32> {
    array.as_slice::<f32>().unwrap().to_vec()
}

#[test]
fn interp_fused_chain_with_slot_reuse() {
    let (x, y) = (
        Array::from_slice(&[0.0f32, 1.0, 2.0]),
        Array::from_slice(&[1.0f32, 2.0, 3.0]),
    );
    let out = run_lir(&program("fused_chain"), &[x.view(), y.view()], Mode::Native).unwrap();
    let expected = [1.0f32, 2.9092975, 2.2431975];
    for (f, e) in f32s(&out[0]).iter().zip(expected) {
        assert!((f - e).abs() <= 1e-6 * e.abs(), "{f} vs {e}");
    }
    let oracle = run_lir(&program("fused_chain"), &[x.view(), y.view()], Mode::Oracle).unwrap();
    assert_eq!(
        oracle[0].as_slice::<f64>().unwrap(),
        [1.0, 2.0f64.sin() + 2.0, 4.0f64.sin() + 3.0]
    );
}

#[test]
fn interp_broadcast_and_scalar_preamble() {
    let x = Array::from_vec([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let b = Array::from_slice(&[10.0f32, 20.0, 30.0]);
    let out = run_lir(&program("broadcast_add"), &[x.view(), b.view()], Mode::Native).unwrap();
    assert_eq!(f32s(&out[0]), [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    let x = Array::from_slice(&[1.0f64, 2.0, 3.0, 4.0]);
    let s = Array::scalar(Scalar::F64(9.0));
    let out = run_lir(&program("scalar_preamble"), &[x.view(), s.view()], Mode::Native).unwrap();
    assert_eq!(out[0].as_slice::<f64>().unwrap(), [3.0, 6.0, 9.0, 12.0]);
}

#[test]
fn interp_reductions() {
    let x = Array::from_vec([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    assert_eq!(
        f32s(&run_lir(&program("row_sum"), &[x.view()], Mode::Native).unwrap()[0]),
        [6.0, 15.0]
    );
    assert_eq!(
        f32s(&run_lir(&program("col_max_outer_axis"), &[x.view()], Mode::Native).unwrap()[0]),
        [4.0, 5.0, 6.0]
    );
    let out = run_lir(&program("store_and_reduce"), &[x.view()], Mode::Native).unwrap();
    let e: Vec<f32> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]
        .iter()
        .map(|v| v.exp())
        .collect();
    assert_eq!(f32s(&out[0]), e);
    assert_eq!(f32s(&out[1]), [e[0] + e[1] + e[2], e[3] + e[4] + e[5]]);
    let values: Vec<f64> = (0..24).map(|i| -f64::from(i)).collect();
    let x3 = Array::from_vec([2, 3, 4], values).unwrap();
    let mean = run_lir(&program("middle_mean"), &[x3.view()], Mode::Native).unwrap();
    assert_eq!(mean[0].shape(), &Shape::new([2, 1, 4]));
    assert_eq!(
        mean[0].as_slice::<f64>().unwrap(),
        [4.0, 5.0, 6.0, 7.0, 16.0, 17.0, 18.0, 19.0]
    );
}

#[test]
fn interp_two_kernels_through_arena() {
    let x = Array::from_vec([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 6.0, 8.0]).unwrap();
    for mode in [Mode::Native, Mode::Oracle] {
        let out = run_lir(&program("two_kernels_arena"), &[x.view()], mode).unwrap();
        assert_eq!(out[0].to_f64_vec(), [-1.0, 0.0, 1.0, -2.0, 0.0, 2.0]);
    }
}

#[test]
fn interp_int_bool() {
    let a = Array::from_slice(&[7i32, -7, 3, 9]);
    // -7 < 2 and 3 < 5 select -7; 7 // -2 floors to -4; 9 / 0 = 0.
    let b = Array::from_slice(&[-2i32, 2, 5, 0]);
    let out = run_lir(&program("int_bool"), &[a.view(), b.view()], Mode::Native).unwrap();
    assert_eq!(out[0].as_slice::<i32>().unwrap(), [-4, -7, -7, 0]);
    assert_eq!(out[1].as_slice::<bool>().unwrap(), [false, false, true, false]);
    assert_eq!(out[2].as_slice::<f64>().unwrap(), [-4.0, -7.0, -7.0, 0.0]);
}

#[test]
fn interp_memory_plan_sharing_and_overlap() {
    let x = Array::from_slice(&[0.0f32, 1.0, 2.0, 3.0]);
    // t1 = 2x, t2 = t1 + 1, t3 = t2², out = t3 - t2.
    let expected = [0.0f32, 6.0, 20.0, 42.0];
    for mode in [Mode::Native, Mode::Oracle] {
        let out = run_lir(&program("shared_plan"), &[x.view()], mode).unwrap();
        assert_eq!(out[0].to_f64_vec(), expected.map(f64::from), "{mode:?}");
    }
    // Putting t3 on t2's bytes while t2 is still live overwrites t2: the verifier accepts the
    // plan (overlap is the planner's business) and the interpreter shows the damage.
    let overlapping = SHARED_PLAN.replace("buf3: f32[4] = arena 0", "buf3: f32[4] = arena 16");
    let program = parse(&overlapping).unwrap();
    lir::verify(&program).unwrap();
    for mode in [Mode::Native, Mode::Oracle] {
        let out = run_lir(&program, &[x.view()], mode).unwrap();
        assert_eq!(out[0].to_f64_vec(), [0.0; 4], "{mode:?}");
    }
    // A partial overlap (t3 shifted by one element into t2) is also visible.
    let shifted = SHARED_PLAN.replace("buf3: f32[4] = arena 0", "buf3: f32[4] = arena 12");
    let out = run_lir(&parse(&shifted).unwrap(), &[x.view()], Mode::Native).unwrap();
    assert_ne!(f32s(&out[0]), expected);
}

#[test]
fn interp_input_validation() {
    let p = program("fused_chain");
    let x = Array::from_slice(&[0.0f32, 1.0, 2.0]);
    assert_eq!(
        run_lir(&p, &[], Mode::Native).unwrap_err().to_string(),
        "expected 2 input(s), got 0"
    );
    let ints = Array::from_slice(&[0i32, 1, 2]);
    assert_eq!(
        run_lir(&p, &[ints.view(), x.view()], Mode::Native)
            .unwrap_err()
            .to_string(),
        "input `x`: expected dtype f32, got i32"
    );
    let long = Array::from_vec([1, 3], vec![0.0f32, 1.0, 2.0]).unwrap();
    assert_eq!(
        run_lir(&p, &[x.view(), long.view()], Mode::Native)
            .unwrap_err()
            .to_string(),
        "input `y`: expected shape [3], got [1,3]"
    );
}

// ---------------------------------------------------------------------------------------------
// Property tests.

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

/// Kernel-building state: slots, and which ones may be read where.
struct KernelGen {
    slots: Vec<DType>,
    /// Slots written by the preamble (never written by the body).
    preamble_slots: Vec<SlotId>,
    /// Slots written so far in the body.
    body_slots: Vec<SlotId>,
}

impl KernelGen {
    fn new_slot(&mut self, dtype: DType) -> SlotId {
        self.slots.push(dtype);
        SlotId::new(self.slots.len() - 1)
    }

    fn readable(&self, in_body: bool, want: Option<DType>) -> Vec<SlotId> {
        let body: &[SlotId] = if in_body { &self.body_slots } else { &[] };
        self.preamble_slots
            .iter()
            .chain(body)
            .copied()
            .filter(|s| want.is_none_or(|d| self.slots[s.index()] == d))
            .collect()
    }

    /// A destination of `dtype`: a fresh slot, or (in the body) a reused body slot.
    fn dst(&mut self, rng: &mut Rng, in_body: bool, dtype: DType) -> SlotId {
        let reusable: Vec<SlotId> = self
            .body_slots
            .iter()
            .copied()
            .filter(|s| self.slots[s.index()] == dtype)
            .collect();
        let slot = if in_body && !reusable.is_empty() && rng.chance(40) {
            rng.pick(&reusable)
        } else {
            self.new_slot(dtype)
        };
        if in_body {
            self.body_slots.push(slot);
        } else {
            self.preamble_slots.push(slot);
        }
        slot
    }

    fn random_inst(&mut self, rng: &mut Rng, in_body: bool) -> Option<Inst> {
        let pick = |rng: &mut Rng, this: &KernelGen, want: Option<DType>| {
            let candidates = this.readable(in_body, want);
            (!candidates.is_empty()).then(|| rng.pick(&candidates))
        };
        Some(match rng.below(6) {
            0 => {
                let dtype = rng_dtype(rng);
                let value = random_scalar(rng, dtype);
                Inst::Const {
                    dst: self.dst(rng, in_body, value.dtype()),
                    value,
                }
            }
            1 => {
                let src = pick(rng, self, None)?;
                let dtype = rng_dtype(rng);
                Inst::Cast {
                    dst: self.dst(rng, in_body, dtype),
                    src,
                }
            }
            2 => {
                let src = pick(rng, self, None)?;
                let dtype = self.slots[src.index()];
                let ops: Vec<UnaryOp> = UnaryOp::ALL
                    .iter()
                    .copied()
                    .filter(|op| op.accepts(dtype))
                    .collect();
                let op = *ops.first().map(|_| &ops[rng.below(ops.len())])?;
                Inst::Unary {
                    dst: self.dst(rng, in_body, dtype),
                    op,
                    src,
                }
            }
            3 => {
                let lhs = pick(rng, self, None)?;
                let dtype = self.slots[lhs.index()];
                let rhs = pick(rng, self, Some(dtype)).unwrap_or(lhs);
                let ops: Vec<BinaryOp> = BinaryOp::ALL
                    .iter()
                    .copied()
                    .filter(|op| op.accepts(dtype))
                    .collect();
                let op = *ops.first().map(|_| &ops[rng.below(ops.len())])?;
                Inst::Binary {
                    dst: self.dst(rng, in_body, dtype),
                    op,
                    lhs,
                    rhs,
                }
            }
            4 => {
                let lhs = pick(rng, self, None)?;
                let dtype = self.slots[lhs.index()];
                let rhs = pick(rng, self, Some(dtype)).unwrap_or(lhs);
                let ops: Vec<CmpOp> = CmpOp::ALL
                    .iter()
                    .copied()
                    .filter(|op| op.accepts(dtype))
                    .collect();
                let op = rng.pick(&ops);
                Inst::Compare {
                    dst: self.dst(rng, in_body, DType::Bool),
                    op,
                    lhs,
                    rhs,
                }
            }
            _ => {
                let cond = pick(rng, self, Some(DType::Bool))?;
                let on_true = pick(rng, self, None)?;
                let dtype = self.slots[on_true.index()];
                let on_false = pick(rng, self, Some(dtype)).unwrap_or(on_true);
                Inst::Select {
                    dst: self.dst(rng, in_body, dtype),
                    cond,
                    on_true,
                    on_false,
                }
            }
        })
    }
}

fn rng_dtype(rng: &mut Rng) -> DType {
    rng.pick(&DType::ALL)
}

fn random_schedule(rng: &mut Rng) -> Schedule {
    Schedule {
        vector_width: rng.pick(&[1, 2, 4, 8, 16]),
        min_elems_per_thread: rng.pick(&[1, 1024, 16384]),
        tile: rng.pick(&[1, 64, 1024]),
        reduce_lanes: rng.pick(&[1, 2, 4, 8]),
        gpu_tree: rng.pick(&[false, true]),
    }
}

/// A random verified LIR program: a kernel with preamble, slot reuse, stores and maybe a
/// reduce, and maybe a second kernel reading an arena temp.
fn random_program(seed: u64) -> LirProgram {
    let mut rng = Rng(seed);
    let rank = rng.below(4);
    let dims: Vec<usize> = (0..rank)
        .map(|_| if rng.chance(5) { 0 } else { 1 + rng.below(3) })
        .collect();
    let reduce_dims = rng.below(rank + 1);
    let domain = Shape::new(dims.clone());
    let leading = Shape::new(dims[..rank - reduce_dims].to_vec());
    let mut buffers = Vec::new();
    let mut kgen = KernelGen {
        slots: vec![],
        preamble_slots: vec![],
        body_slots: vec![],
    };
    let (mut preamble, mut body) = (Vec::new(), Vec::new());
    for i in 0..1 + rng.below(3) {
        let dtype = rng_dtype(&mut rng);
        let scalar = rng.chance(30);
        let shape = if scalar { Shape::scalar() } else { domain.clone() };
        let strides = shape.broadcast_strides(&domain).unwrap();
        buffers.push(LirBuffer {
            ty: TensorType::new(dtype, shape),
            storage: Storage::Input {
                name: format!("in{i}"),
            },
        });
        let buf = BufId::new(i);
        if scalar {
            preamble.push(Inst::Load {
                dst: kgen.dst(&mut rng, false, dtype),
                buf,
                strides,
                offset: 0,
            });
        } else {
            body.push(Inst::Load {
                dst: kgen.dst(&mut rng, true, dtype),
                buf,
                strides,
                offset: 0,
            });
        }
    }
    for _ in 0..rng.below(4) {
        if let Some(inst) = kgen.random_inst(&mut rng, false) {
            preamble.push(inst);
        }
    }
    for _ in 0..rng.below(10) {
        if let Some(inst) = kgen.random_inst(&mut rng, true) {
            body.push(inst);
        }
    }
    let mut outputs = 0;
    let mut add_buffer = |buffers: &mut Vec<LirBuffer>, ty: TensorType, storage: Option<Storage>| {
        let storage = storage.unwrap_or_else(|| {
            outputs += 1;
            Storage::Output {
                name: format!("out{outputs}"),
            }
        });
        buffers.push(LirBuffer { ty, storage });
        BufId::new(buffers.len() - 1)
    };
    let readable = kgen.readable(true, None);
    let src = rng.pick(&readable);
    let buf = add_buffer(
        &mut buffers,
        TensorType::new(kgen.slots[src.index()], domain.clone()),
        None,
    );
    body.push(Inst::Store {
        buf,
        strides: domain.strides(),
        offset: 0,
        src,
    });
    let numeric: Vec<SlotId> = readable
        .iter()
        .copied()
        .filter(|s| kgen.slots[s.index()].is_numeric())
        .collect();
    if !numeric.is_empty() && rng.chance(60) {
        let src = rng.pick(&numeric);
        let dtype = kgen.slots[src.index()];
        let ops: Vec<ReduceOp> = ReduceOp::ALL
            .iter()
            .copied()
            .filter(|op| op.accepts(dtype))
            .collect();
        let buf = add_buffer(&mut buffers, TensorType::new(dtype, leading.clone()), None);
        body.push(Inst::Reduce {
            op: rng.pick(&ops),
            buf,
            src,
        });
    }
    let mut arena_bytes = 0;
    let mut kernels = Vec::new();
    let second = rng.chance(50).then(|| {
        let src = rng.pick(&readable);
        let dtype = kgen.slots[src.index()];
        let offset = dtype.size_bytes() * rng.below(8);
        arena_bytes = offset + dtype.size_bytes() * domain.numel() + rng.below(16);
        let temp = add_buffer(
            &mut buffers,
            TensorType::new(dtype, domain.clone()),
            Some(Storage::Arena { offset }),
        );
        body.push(Inst::Store {
            buf: temp,
            strides: domain.strides(),
            offset: 0,
            src,
        });
        (temp, dtype)
    });
    kernels.push(LirKernel {
        name: "k0".into(),
        dims: dims.clone(),
        reduce_dims,
        scan: None,
        schedule: random_schedule(&mut rng),
        slots: kgen.slots,
        preamble,
        body,
        row_store: None,
    });
    if let Some((temp, dtype)) = second {
        let mut kgen = KernelGen {
            slots: vec![],
            preamble_slots: vec![],
            body_slots: vec![],
        };
        let mut body = vec![Inst::Load {
            dst: kgen.dst(&mut rng, true, dtype),
            buf: temp,
            strides: domain.strides(),
            offset: 0,
        }];
        for _ in 0..rng.below(5) {
            if let Some(inst) = kgen.random_inst(&mut rng, true) {
                body.push(inst);
            }
        }
        // Sometimes a running fold of a numeric value along the innermost dim, either way.
        let numeric: Vec<SlotId> = kgen
            .readable(true, None)
            .into_iter()
            .filter(|s| kgen.slots[s.index()].is_numeric())
            .collect();
        let scan = if !dims.is_empty() && !numeric.is_empty() && rng.chance(40) {
            let src = rng.pick(&numeric);
            let dtype = kgen.slots[src.index()];
            let op = rfx_ir::ScanOp::ALL[rng.below(rfx_ir::ScanOp::ALL.len())];
            // A linear recurrence's coefficient: a numeric slot of the operand's dtype.
            let coef = (op == rfx_ir::ScanOp::Linear).then(|| {
                let same: Vec<SlotId> = numeric
                    .iter()
                    .copied()
                    .filter(|s| kgen.slots[s.index()] == dtype)
                    .collect();
                rng.pick(&same)
            });
            body.push(Inst::Scan {
                dst: kgen.dst(&mut rng, true, dtype),
                op,
                src,
                coef,
            });
            Some(if rng.chance(50) {
                ScanOrder::Forward
            } else {
                ScanOrder::Reverse
            })
        } else {
            None
        };
        let src = rng.pick(&kgen.readable(true, None));
        let buf = add_buffer(
            &mut buffers,
            TensorType::new(kgen.slots[src.index()], domain.clone()),
            None,
        );
        body.push(Inst::Store {
            buf,
            strides: domain.strides(),
            offset: 0,
            src,
        });
        kernels.push(LirKernel {
            name: "k1".into(),
            dims,
            reduce_dims: 0,
            scan,
            schedule: random_schedule(&mut rng),
            slots: kgen.slots,
            preamble: vec![],
            body,
            row_store: None,
        });
    }
    LirProgram::from_parts("random", buffers, arena_bytes, rng.pick(&[1, 8, 16, 64]), kernels)
}

fn random_inputs(rng: &mut Rng, program: &LirProgram) -> Vec<Array> {
    program
        .inputs()
        .map(|(_, _, ty)| {
            let values = (0..ty.shape.numel()).map(|_| random_scalar(rng, ty.dtype));
            Array::new(
                ty.shape.clone(),
                ArrayData::from_scalars(ty.dtype, values).unwrap(),
            )
            .unwrap()
        })
        .collect()
}

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
                    "s", "s99", "buf", "[", "]", "{", "}", "=", ",", "nan", "-", "9", "\n", "é", "const",
                ]);
                chars.splice(at..at, junk.chars());
            }
            _ => {
                if at < chars.len() {
                    chars[at] = rng.pick(&['0', 's', 'x', ' ', '}', '[', '.', '-']);
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
        lir::verify(&program).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let printed = program.to_string();
        let reparsed = parse(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
        prop_assert_eq!(&reparsed, &program);
        prop_assert_eq!(reparsed.to_string(), printed);
        let inputs = random_inputs(&mut Rng(seed ^ 1), &program);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let native = run_lir(&program, &views, Mode::Native).unwrap();
        let oracle = run_lir(&program, &views, Mode::Oracle).unwrap();
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
            Ok(program) => {
                // Whatever parses verifies or reports errors without panicking, and round trips.
                if lir::verify(&program).is_ok() {
                    let inputs = random_inputs(&mut Rng(seed), &program);
                    let views: Vec<_> = inputs.iter().map(Array::view).collect();
                    let _ = run_lir(&program, &views, Mode::Native);
                }
                prop_assert_eq!(parse(&program.to_string()).unwrap(), program);
            }
        }
    }
}

/// `reduce_lanes` fixes the combination order: element `j` of each row goes to partial
/// `j % lanes`, and the partials combine by a pairwise tree, the upper half onto the lower
/// (`p[i] ∘ p[i + m]` for `i < n / 2`, `m = n - n / 2`, until one is left). Checked against
/// that formula written out, and the trees of 4 and 8 lanes spelt out.
#[test]
fn reduction_lanes_follow_the_documented_order() {
    let values: Vec<f32> = (0..22)
        .map(|i| 1.0 / (i as f32 + 0.37) * if i % 3 == 0 { -1e4 } else { 1.0 })
        .collect();
    for lanes in [1usize, 2, 3, 4, 6, 8, 16] {
        let out = run_row_sums(&values, 11, lanes);
        for row in 0..2 {
            let mut partials = vec![-0.0f32; lanes];
            for j in 0..11 {
                partials[j % lanes] += values[row * 11 + j];
            }
            let spelt = match lanes {
                4 => Some((partials[0] + partials[2]) + (partials[1] + partials[3])),
                8 => Some(
                    ((partials[0] + partials[4]) + (partials[2] + partials[6]))
                        + ((partials[1] + partials[5]) + (partials[3] + partials[7])),
                ),
                _ => None,
            };
            while partials.len() > 1 {
                let n = partials.len();
                let (half, offset) = (n / 2, n - n / 2);
                for i in 0..half {
                    partials[i] += partials[i + offset];
                }
                partials.truncate(offset);
            }
            let total = partials[0];
            if let Some(spelt) = spelt {
                assert_eq!(spelt.to_bits(), total.to_bits(), "lanes {lanes} row {row}");
            }
            assert_eq!(out[row].to_bits(), total.to_bits(), "lanes {lanes} row {row}");
        }
    }
    assert_eq!(rfx_ir::lir::reduce_lane_levels(8), vec![(4, 4), (2, 2), (1, 1)]);
    assert_eq!(rfx_ir::lir::reduce_lane_levels(3), vec![(1, 2), (1, 1)]);
    assert!(rfx_ir::lir::reduce_lane_levels(1).is_empty());
}

/// The tree, not the lane order: with 4 lanes, `[1e8, 1, -1e8, 1]` sums to
/// `(1e8 + -1e8) + (1 + 1) = 2`, where `((1e8 + 1) + -1e8) + 1` would round to 1.
#[test]
fn reduction_lanes_combine_as_a_tree() {
    let out = run_row_sums(&[1e8, 1.0, -1e8, 1.0, 0.0, 0.0, 0.0, 0.0], 4, 4);
    assert_eq!(out, vec![2.0, 0.0]);
}

/// Sums of the 2 rows of `row`-element `values` (row-major) with `lanes` partials.
fn run_row_sums(values: &[f32], row: usize, lanes: usize) -> Vec<f32> {
    let text = format!(
        "lir lanes arena 0 align 64 {{
  buf0: f32[2,{row}] = input x
  buf1: f32[2] = output s
  kernel k0 dims [2,{row}] reduce 1 vector 4 thread_min 16384 tile 1024 lanes {lanes} {{
    slots [f32]
    preamble {{}}
    body {{
      s0 = load buf0 [{row},1]
      reduce sum buf1 = s0
    }}
  }}
}}"
    );
    let program = parse(&text).unwrap();
    let shape = rfx_ir::Shape::new([2, row]);
    let x = rfx_ir::ArrayView::new(&shape, values).unwrap();
    let out = rfx_ir::interp::run_lir(&program, &[x], rfx_ir::interp::Mode::Native).unwrap();
    out[0].as_slice::<f32>().unwrap().to_vec()
}
