//! Scans (`cumsum`, `cumprod`, `cummax`, `cummin`) at the three IR levels: the HIR interpreter
//! against NumPy bit for bit, the MIR and LIR interpreters against the HIR one, their text
//! formats, and the typing rules.
//!
//! `tests/data/scan_oracle.json` (NumPy 2.4.6, made by `tests/data/make_scan_oracle.py`) holds
//! NumPy's `cumsum`, `cumprod`, `maximum.accumulate` and `minimum.accumulate` (reversed: of the
//! flipped array, flipped back) along every axis of a few shapes, in `f32`, `f64` and `i32`,
//! with special values among the float inputs. NumPy folds each line sequentially in the
//! array's dtype, as rfx's scans do, so every result must match bit for bit (any NaN matches
//! any NaN).

// The helpers below unwrap fields of the checked-in JSON: a malformed file is a test failure.
#![allow(clippy::unwrap_used)]

use rfx_ir::hir::{self, Builder, Kernel};
use rfx_ir::interp::{InterpError, Mode, run_hir, run_lir, run_mir};
use rfx_ir::{Array, ArrayData, DType, Scalar, ScanOp, Shape, TensorType, TypeError, lir, mir};
use serde_json::Value;

fn same_bits(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        (Scalar::F64(x), Scalar::F64(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        (x, y) => x == y,
    }
}

fn values(array: &Array) -> Vec<Scalar> {
    (0..array.shape().numel())
        .map(|i| array.get(i).unwrap())
        .collect()
}

fn decode(values: &Value, dtype: DType) -> Vec<Scalar> {
    values
        .as_array()
        .unwrap()
        .iter()
        .map(|v| match (dtype, v) {
            (DType::I32, Value::Number(n)) => Scalar::I32(i32::try_from(n.as_i64().unwrap()).unwrap()),
            (DType::F32, Value::String(hex)) => {
                Scalar::F32(f32::from_bits(u32::from_str_radix(hex, 16).unwrap()))
            }
            (DType::F64, Value::String(hex)) => {
                Scalar::F64(f64::from_bits(u64::from_str_radix(hex, 16).unwrap()))
            }
            other => panic!("unexpected oracle value {other:?}"),
        })
        .collect()
}

/// The kernel `out = op(x, axis, reverse)` for an input of type `ty`.
fn scan_kernel(op: ScanOp, ty: TensorType, axis: usize, reverse: bool) -> Kernel {
    let mut b = Builder::new("scan");
    let x = b.input("x", ty).unwrap();
    let out = b.scan(op, x, axis, reverse).unwrap();
    b.output("out", out).unwrap();
    b.finish().unwrap()
}

#[test]
fn hir_scans_match_numpy_bit_for_bit() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/scan_oracle.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 400);
    let mut checked = [0usize; 4];
    for case in cases {
        let op = ScanOp::from_name(case["op"].as_str().unwrap()).unwrap();
        let dtype = DType::from_name(case["dtype"].as_str().unwrap()).unwrap();
        let dims: Vec<usize> = case["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let axis = case["axis"].as_u64().unwrap() as usize;
        let reverse = case["reverse"].as_bool().unwrap();
        let ty = TensorType::new(dtype, dims.clone());
        let input = Array::new(
            Shape::new(dims),
            ArrayData::from_scalars(dtype, decode(&case["input"], dtype)).unwrap(),
        )
        .unwrap();
        let expected = decode(&case["out"], dtype);
        let kernel = scan_kernel(op, ty, axis, reverse);
        let got = run_hir(&kernel, &[input.view()], Mode::Native).unwrap();
        let got = values(&got[0]);
        assert_eq!(got.len(), expected.len());
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert!(
                same_bits(*g, *e),
                "{op} axis {axis} reverse {reverse} {dtype}: element {i} is {g:?}, NumPy gives {e:?}\n{kernel}"
            );
        }
        checked[ScanOp::ALL.iter().position(|&o| o == op).unwrap()] += 1;
    }
    assert!(checked.iter().all(|&n| n == 100), "{checked:?}");
}

#[test]
fn closed_forms() {
    // The running sum of 1..=n is the triangular numbers, exact in f32 below 2^24.
    let n = 1000usize;
    let ones = Array::new(Shape::new(vec![n]), ArrayData::F32(vec![1.0; n])).unwrap();
    let kernel = scan_kernel(ScanOp::Sum, TensorType::new(DType::F32, [n]), 0, false);
    let sums = run_hir(&kernel, &[ones.view()], Mode::Native).unwrap();
    for (i, v) in values(&sums[0]).into_iter().enumerate() {
        assert_eq!(v, Scalar::F32((i + 1) as f32));
    }
    // Reversed: n - i.
    let kernel = scan_kernel(ScanOp::Sum, TensorType::new(DType::F32, [n]), 0, true);
    let sums = run_hir(&kernel, &[ones.view()], Mode::Native).unwrap();
    for (i, v) in values(&sums[0]).into_iter().enumerate() {
        assert_eq!(v, Scalar::F32((n - i) as f32));
    }
    // Powers of three wrap in i32 as NumPy's int32 `cumprod` does.
    let threes = Array::new(Shape::new(vec![25]), ArrayData::I32(vec![3; 25])).unwrap();
    let kernel = scan_kernel(ScanOp::Prod, TensorType::new(DType::I32, [25]), 0, false);
    let powers = run_hir(&kernel, &[threes.view()], Mode::Native).unwrap();
    for (i, v) in values(&powers[0]).into_iter().enumerate() {
        assert_eq!(v, Scalar::I32(3i32.wrapping_pow(i as u32 + 1)));
    }
    // A running maximum keeps the first NaN's payload: it propagates as `acc`.
    let nan = f64::from_bits(0x7ff8_0000_0000_0123);
    let x = Array::new(
        Shape::new(vec![5]),
        ArrayData::F64(vec![1.0, 3.0, nan, 7.0, -1.0]),
    )
    .unwrap();
    let kernel = scan_kernel(ScanOp::Max, TensorType::new(DType::F64, [5]), 0, false);
    let got = values(&run_hir(&kernel, &[x.view()], Mode::Native).unwrap()[0]);
    assert_eq!(got[..2], [Scalar::F64(1.0), Scalar::F64(3.0)]);
    for v in &got[2..] {
        assert!(
            matches!(v, Scalar::F64(v) if v.to_bits() == nan.to_bits()),
            "{got:?}"
        );
    }
    // On a tie between zeros the later element wins (`max(acc, x)` returns `x`).
    let zeros = Array::new(Shape::new(vec![3]), ArrayData::F32(vec![0.0, -0.0, 0.0])).unwrap();
    let kernel = scan_kernel(ScanOp::Max, TensorType::new(DType::F32, [3]), 0, false);
    let got = values(&run_hir(&kernel, &[zeros.view()], Mode::Native).unwrap()[0]);
    let signs: Vec<bool> = got
        .iter()
        .map(|v| matches!(v, Scalar::F32(z) if z.is_sign_negative()))
        .collect();
    assert_eq!(signs, [false, true, false]);
}

#[test]
fn oracle_mode_scans_in_f64() {
    // 0.1 summed in f32 drifts; oracle mode sums the same f32 inputs in f64.
    let x = Array::new(Shape::new(vec![100]), ArrayData::F32(vec![0.1; 100])).unwrap();
    let kernel = scan_kernel(ScanOp::Sum, TensorType::new(DType::F32, [100]), 0, false);
    let got = values(&run_hir(&kernel, &[x.view()], Mode::Oracle).unwrap()[0]);
    let mut acc = -0.0f64;
    for v in got {
        acc += f64::from(0.1f32);
        assert_eq!(v, Scalar::F64(acc));
    }
}

/// A kernel of `[3, 4]` values: a forward running sum of `x * 2` along axis 1 plus `y`, and a
/// reverse running minimum of `x` along axis 0, as HIR, MIR and LIR.
const HIR_TEXT: &str = "
kernel scans {
  %x = input x : f32[3,4]
  %y = input y : f32[4]
  %two = const 2.0 : f32[]
  %x2 = mul %x, %two : f32[3,4]
  %s = cumsum %x2 axis 1 : f32[3,4]
  %t = add %s, %y : f32[3,4]
  %m = cummin %x axis 0 reverse : f32[3,4]
  output t = %t
  output m = %m
}
";

const MIR_TEXT: &str = "
mir scans {
  buf0: f32[3,4] = input x
  buf1: f32[4] = input y
  buf2: f32[3,4] = output t
  buf3: f32[3,4] = output m
  kernel k0 [3,4] {
    %0 = load buf0 [4,1] : f32
    %1 = const 2.0 : f32
    %2 = mul %0, %1 : f32
    %3 = cumsum %2 axis 1 : f32
    %4 = load buf1 [0,1] : f32
    %5 = add %3, %4 : f32
    store buf2 = %5
  }
  kernel k1 [3,4] {
    %0 = load buf0 [4,1] : f32
    %1 = cummin %0 axis 0 reverse : f32
    store buf3 = %1
  }
}
";

/// The same program lowered by hand: `k1` runs axis 0 innermost (its loads and stores
/// transposed) and in reverse.
const LIR_TEXT: &str = "
lir scans arena 0 align 64 {
  buf0: f32[3,4] = input x
  buf1: f32[4] = input y
  buf2: f32[3,4] = output t
  buf3: f32[3,4] = output m
  kernel k0 dims [3,4] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 scan forward {
    slots [f32, f32, f32]
    preamble {
      s1 = const 2.0
    }
    body {
      s0 = load buf0 [4,1]
      s0 = mul s0, s1
      s2 = cumsum s0
      s0 = load buf1 [0,1]
      s0 = add s2, s0
      store buf2 [4,1] = s0
    }
  }
  kernel k1 dims [4,3] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 scan reverse {
    slots [f32, f32]
    preamble {}
    body {
      s0 = load buf0 [1,4]
      s1 = cummin s0
      store buf3 [1,4] = s1
    }
  }
}
";

fn random_inputs(seed: u64) -> (Array, Array) {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as f64 / (1u64 << 31) as f64 * 8.0 - 4.0) as f32
    };
    let mut x: Vec<f32> = (0..12).map(|_| next()).collect();
    x[5] = f32::NAN;
    x[6] = -0.0;
    let y: Vec<f32> = (0..4).map(|_| next()).collect();
    (
        Array::new(Shape::new(vec![3, 4]), ArrayData::F32(x)).unwrap(),
        Array::new(Shape::new(vec![4]), ArrayData::F32(y)).unwrap(),
    )
}

#[test]
fn mir_and_lir_interpreters_agree_with_hir() {
    let kernel = hir::parse(HIR_TEXT).unwrap();
    let program = mir::parse(MIR_TEXT).unwrap();
    mir::verify(&program).unwrap();
    let lowered = lir::parse(LIR_TEXT).unwrap();
    lir::verify(&lowered).unwrap();
    // Each text prints back as it parsed.
    assert_eq!(hir::parse(&kernel.to_string()).unwrap(), kernel);
    assert_eq!(mir::parse(&program.to_string()).unwrap(), program);
    assert_eq!(lir::parse(&lowered.to_string()).unwrap(), lowered);
    assert!(lowered.to_string().contains("lanes 1 scan reverse {"));
    for seed in 0..20 {
        let (x, y) = random_inputs(seed);
        let inputs = [x.view(), y.view()];
        for mode in [Mode::Native, Mode::Oracle] {
            let want = run_hir(&kernel, &inputs, mode).unwrap();
            for (level, got) in [
                ("MIR", run_mir(&program, &inputs, mode).unwrap()),
                ("LIR", run_lir(&lowered, &inputs, mode).unwrap()),
            ] {
                for (w, g) in want.iter().zip(&got) {
                    let (w, g) = (values(w), values(g));
                    assert!(
                        w.iter().zip(&g).all(|(a, b)| same_bits(*a, *b)),
                        "{level} seed {seed} {mode:?}: {g:?} against HIR's {w:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn typing_rules_and_text_errors() {
    let mut b = Builder::new("bad");
    let flags = b.input("flags", TensorType::new(DType::Bool, [3])).unwrap();
    let x = b.input("x", TensorType::new(DType::F32, [2, 3])).unwrap();
    assert!(matches!(
        b.scan(ScanOp::Sum, flags, 0, false),
        Err(hir::BuildError::Type {
            op: "cumsum",
            source: TypeError::UnsupportedDType {
                op: "cumsum",
                dtype: DType::Bool
            }
        })
    ));
    assert!(matches!(
        b.scan(ScanOp::Max, x, 2, true),
        Err(hir::BuildError::Type {
            op: "cummax",
            source: TypeError::AxisOutOfRange { axis: 2, rank: 2 }
        })
    ));
    // A scan needs its axis; the error points at what stands there instead.
    let err =
        hir::parse("kernel k {\n  %x = input x : f32[3]\n  %s = cumsum %x : f32[3]\n  output s = %s\n}")
            .unwrap_err();
    assert_eq!((err.line, err.col), (3, 18), "{err}");
    // The statement's type must be the operand's.
    let err = hir::parse(
        "kernel k {\n  %x = input x : f32[3]\n  %s = cummin %x axis 0 : f32[1]\n  output s = %s\n}",
    )
    .unwrap_err();
    assert_eq!((err.line, err.col), (3, 3), "{err}");
    // A reduction in a kernel that scans fails to interpret as an invalid program.
    let program = mir::parse(
        "mir p {\n  buf0: f32[3] = input x\n  buf1: f32[] = output s\n  kernel k0 [3] {\n    %0 = load buf0 [1] : f32\n    %1 = cumsum %0 axis 0 : f32\n    reduce sum buf1 = %1 axes [0]\n  }\n}",
    )
    .unwrap();
    let x = Array::new(Shape::new(vec![3]), ArrayData::F32(vec![1.0, 2.0, 3.0])).unwrap();
    assert!(matches!(
        run_mir(&program, &[x.view()], Mode::Native),
        Err(InterpError::InvalidMir(_))
    ));
}
