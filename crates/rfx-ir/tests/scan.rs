//! Scans (`cumsum`, `cumprod`, `cummax`, `cummin`, and the linear recurrence `linrec`) at the
//! three IR levels: the HIR interpreter against NumPy bit for bit, the MIR and LIR interpreters
//! against the HIR one, their text formats, and the typing rules.
//!
//! `tests/data/linrec_oracle.json` (made by the same script) holds the recurrence
//! `y[i] = a[i] * y[i-1] + x[i]` from `y[-1] = -0`, computed by NumPy one step at a time in the
//! arrays' dtype, along every axis of the same shapes and a line of 40, both ways, with special
//! values among the float operands and coefficients.
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

/// One case of an oracle file: its op's name, dtype, shape, axis and direction.
struct OracleCase<'a> {
    case: &'a Value,
    op: &'a str,
    dtype: DType,
    dims: Vec<usize>,
    axis: usize,
    reverse: bool,
}

impl<'a> OracleCase<'a> {
    /// The `count` cases of `tests/data/<file>`.
    fn load(file: &str, count: usize) -> Vec<Value> {
        let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let cases = doc["cases"].as_array().unwrap().clone();
        assert_eq!(cases.len(), count, "{file}");
        cases
    }

    fn parse(case: &'a Value) -> Self {
        OracleCase {
            case,
            op: case["op"].as_str().unwrap(),
            dtype: DType::from_name(case["dtype"].as_str().unwrap()).unwrap(),
            dims: case["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect(),
            axis: case["axis"].as_u64().unwrap() as usize,
            reverse: case["reverse"].as_bool().unwrap(),
        }
    }

    fn ty(&self) -> TensorType {
        TensorType::new(self.dtype, self.dims.clone())
    }

    /// The values under `key`.
    fn values(&self, key: &str) -> Vec<Scalar> {
        decode(&self.case[key], self.dtype)
    }

    /// The array under `key`, of the case's shape.
    fn array(&self, key: &str) -> Array {
        let data = ArrayData::from_scalars(self.dtype, self.values(key)).unwrap();
        Array::new(Shape::new(self.dims.clone()), data).unwrap()
    }

    /// Asserts that `got` is the case's `out`, bit for bit (any NaN matching any NaN).
    fn assert_out(&self, got: &[Scalar], kernel: &Kernel) {
        let expected = self.values("out");
        assert_eq!(got.len(), expected.len());
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert!(
                same_bits(*g, *e),
                "{} axis {} reverse {} {}: element {i} is {g:?}, NumPy gives {e:?}\n{kernel}",
                self.op,
                self.axis,
                self.reverse,
                self.dtype
            );
        }
    }
}

#[test]
fn hir_scans_match_numpy_bit_for_bit() {
    let mut checked = [0usize; 4];
    for case in &OracleCase::load("scan_oracle.json", 400) {
        let case = OracleCase::parse(case);
        let op = ScanOp::from_name(case.op).unwrap();
        let kernel = scan_kernel(op, case.ty(), case.axis, case.reverse);
        let got = run_hir(&kernel, &[case.array("input").view()], Mode::Native).unwrap();
        case.assert_out(&values(&got[0]), &kernel);
        checked[ScanOp::FOLDS.iter().position(|&o| o == op).unwrap()] += 1;
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

/// One program as HIR, MIR and LIR text, parsed and verified; each text prints back as it
/// parsed.
fn parse_levels(
    hir_text: &str,
    mir_text: &str,
    lir_text: &str,
) -> (hir::Kernel, mir::MirProgram, lir::LirProgram) {
    let kernel = hir::parse(hir_text).unwrap();
    let program = mir::parse(mir_text).unwrap();
    mir::verify(&program).unwrap();
    let lowered = lir::parse(lir_text).unwrap();
    lir::verify(&lowered).unwrap();
    assert_eq!(hir::parse(&kernel.to_string()).unwrap(), kernel);
    assert_eq!(mir::parse(&program.to_string()).unwrap(), program);
    assert_eq!(lir::parse(&lowered.to_string()).unwrap(), lowered);
    (kernel, program, lowered)
}

/// The MIR and LIR interpreters give the HIR interpreter's bits for one program at the three
/// levels, in native and oracle mode.
fn assert_levels_agree(
    kernel: &hir::Kernel,
    program: &mir::MirProgram,
    lowered: &lir::LirProgram,
    inputs: &[Array],
    seed: u64,
) {
    let inputs: Vec<_> = inputs.iter().map(Array::view).collect();
    for mode in [Mode::Native, Mode::Oracle] {
        let want = run_hir(kernel, &inputs, mode).unwrap();
        for (level, got) in [
            ("MIR", run_mir(program, &inputs, mode).unwrap()),
            ("LIR", run_lir(lowered, &inputs, mode).unwrap()),
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

#[test]
fn mir_and_lir_interpreters_agree_with_hir() {
    let (kernel, program, lowered) = parse_levels(HIR_TEXT, MIR_TEXT, LIR_TEXT);
    assert!(lowered.to_string().contains("lanes 1 scan reverse {"));
    for seed in 0..20 {
        let (x, y) = random_inputs(seed);
        assert_levels_agree(&kernel, &program, &lowered, &[x, y], seed);
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

/// The kernel `out = linrec(x, a, axis, reverse)` for operands of type `ty`.
fn linrec_kernel(ty: TensorType, axis: usize, reverse: bool) -> Kernel {
    let mut b = Builder::new("linrec");
    let x = b.input("x", ty.clone()).unwrap();
    let a = b.input("a", ty).unwrap();
    let out = b.linrec(x, a, axis, reverse).unwrap();
    b.output("out", out).unwrap();
    b.finish().unwrap()
}

#[test]
fn hir_linear_recurrences_match_numpy_bit_for_bit() {
    let mut special_outputs = 0;
    for case in &OracleCase::load("linrec_oracle.json", 110) {
        let case = OracleCase::parse(case);
        assert_eq!(case.op, "linrec");
        let (x, a) = (case.array("input"), case.array("coef"));
        let kernel = linrec_kernel(case.ty(), case.axis, case.reverse);
        let got = values(&run_hir(&kernel, &[x.view(), a.view()], Mode::Native).unwrap()[0]);
        case.assert_out(&got, &kernel);
        special_outputs += got
            .iter()
            .filter(|g| g.to_f64().is_nan() || g.to_f64().is_infinite())
            .count();
    }
    // The special values reach some outputs, and most outputs are ordinary numbers.
    assert!(special_outputs > 20, "{special_outputs}");
}

#[test]
fn linear_recurrence_closed_forms() {
    let n = 60usize;
    let ty = TensorType::new(DType::F64, [n]);
    let run = |x: Vec<f64>, a: Vec<f64>, reverse: bool| {
        let x = Array::new(Shape::new(vec![n]), ArrayData::F64(x)).unwrap();
        let a = Array::new(Shape::new(vec![n]), ArrayData::F64(a)).unwrap();
        let kernel = linrec_kernel(ty.clone(), 0, reverse);
        values(&run_hir(&kernel, &[x.view(), a.view()], Mode::Native).unwrap()[0])
    };
    // An impulse through `y = 0.5 y + x`: exact powers of a half.
    let mut impulse = vec![0.0; n];
    impulse[0] = 1.0;
    for (i, v) in run(impulse.clone(), vec![0.5; n], false).into_iter().enumerate() {
        assert_eq!(v, Scalar::F64(0.5f64.powi(i as i32)));
    }
    // Reversed, the impulse at the end spreads toward the start.
    let mut last = vec![0.0; n];
    last[n - 1] = 1.0;
    for (i, v) in run(last, vec![0.5; n], true).into_iter().enumerate() {
        assert_eq!(v, Scalar::F64(0.5f64.powi((n - 1 - i) as i32)));
    }
    // With every coefficient 1 it is the running sum, bit for bit.
    let x: Vec<f64> = (0..n).map(|i| ((i * 37 % 11) as f64 - 5.3) / 3.0).collect();
    let sums = values(
        &run_hir(
            &scan_kernel(ScanOp::Sum, ty.clone(), 0, false),
            &[Array::new(Shape::new(vec![n]), ArrayData::F64(x.clone()))
                .unwrap()
                .view()],
            Mode::Native,
        )
        .unwrap()[0],
    );
    assert!(
        run(x.clone(), vec![1.0; n], false)
            .iter()
            .zip(&sums)
            .all(|(a, b)| same_bits(*a, *b))
    );
    // A step through a low-pass filter `y = (1 - k) y + k` approaches 1 as `1 - (1 - k)^(i+1)`.
    let k = 0.125;
    for (i, v) in run(vec![k; n], vec![1.0 - k; n], false).into_iter().enumerate() {
        let want = 1.0 - (1.0 - k).powi(i as i32 + 1);
        assert!((v.to_f64() - want).abs() < 1e-14, "{i}: {v:?} against {want}");
    }
    // `y[0] = x[0]` bit for bit, `-0` included, whenever `a[0] >= 0`; a NaN coefficient
    // poisons everything from its step on, and a zero one restarts the line.
    let got = run(
        vec![-0.0, 2.0, 3.0, 4.0]
            .into_iter()
            .chain(vec![1.0; n - 4])
            .collect(),
        vec![0.0, 1.0, f64::NAN, 0.0]
            .into_iter()
            .chain(vec![1.0; n - 4])
            .collect(),
        false,
    );
    assert!(
        matches!(got[0], Scalar::F64(z) if z == 0.0 && z.is_sign_negative()),
        "{got:?}"
    );
    assert_eq!(got[1], Scalar::F64(2.0));
    assert!(got[2].to_f64().is_nan());
    assert!(got[3].to_f64().is_nan(), "0 * NaN is NaN");
    // i32 wraps: powers of 3 driven by ones, `y = 3 y + 1`.
    let ones = Array::new(Shape::new(vec![30]), ArrayData::I32(vec![1; 30])).unwrap();
    let threes = Array::new(Shape::new(vec![30]), ArrayData::I32(vec![3; 30])).unwrap();
    let kernel = linrec_kernel(TensorType::new(DType::I32, [30]), 0, false);
    let got = values(&run_hir(&kernel, &[ones.view(), threes.view()], Mode::Native).unwrap()[0]);
    let mut want = 0i32;
    for v in got {
        want = want.wrapping_mul(3).wrapping_add(1);
        assert_eq!(v, Scalar::I32(want));
    }
}

/// A low-pass filter along axis 1 and a discounted sum from the end along axis 0, as HIR, MIR
/// and LIR.
const LINREC_HIR: &str = "
kernel filters {
  %x = input x : f32[3,4]
  %a = input a : f32[3,4]
  %k = const 0.25 : f32[]
  %d = mul %x, %k : f32[3,4]
  %y = linrec %d, %a axis 1 : f32[3,4]
  %g = linrec %x, %a axis 0 reverse : f32[3,4]
  output y = %y
  output g = %g
}
";

const LINREC_MIR: &str = "
mir filters {
  buf0: f32[3,4] = input x
  buf1: f32[3,4] = input a
  buf2: f32[3,4] = output y
  buf3: f32[3,4] = output g
  kernel k0 [3,4] {
    %0 = load buf0 [4,1] : f32
    %1 = const 0.25 : f32
    %2 = mul %0, %1 : f32
    %3 = load buf1 [4,1] : f32
    %4 = linrec %2, %3 axis 1 : f32
    store buf2 = %4
  }
  kernel k1 [3,4] {
    %0 = load buf0 [4,1] : f32
    %1 = load buf1 [4,1] : f32
    %2 = linrec %0, %1 axis 0 reverse : f32
    store buf3 = %2
  }
}
";

const LINREC_LIR: &str = "
lir filters arena 0 align 64 {
  buf0: f32[3,4] = input x
  buf1: f32[3,4] = input a
  buf2: f32[3,4] = output y
  buf3: f32[3,4] = output g
  kernel k0 dims [3,4] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 scan forward {
    slots [f32, f32, f32, f32]
    preamble {
      s1 = const 0.25
    }
    body {
      s0 = load buf0 [4,1]
      s0 = mul s0, s1
      s2 = load buf1 [4,1]
      s3 = linrec s0, s2
      store buf2 [4,1] = s3
    }
  }
  kernel k1 dims [4,3] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 scan reverse {
    slots [f32, f32, f32]
    preamble {}
    body {
      s0 = load buf0 [1,4]
      s1 = load buf1 [1,4]
      s2 = linrec s0, s1
      store buf3 [1,4] = s2
    }
  }
}
";

#[test]
fn linear_recurrences_agree_across_the_three_levels() {
    let (kernel, program, lowered) = parse_levels(LINREC_HIR, LINREC_MIR, LINREC_LIR);
    assert!(lowered.to_string().contains("s3 = linrec s0, s2"));
    for seed in 0..20 {
        let (x, _) = random_inputs(seed);
        let (a, _) = random_inputs(seed + 100);
        assert_levels_agree(&kernel, &program, &lowered, &[x, a], seed);
    }
}

#[test]
fn linear_recurrence_typing_rules() {
    let mut b = Builder::new("bad");
    let x = b.input("x", TensorType::new(DType::F32, [2, 3])).unwrap();
    let row = b.input("row", TensorType::new(DType::F32, [3])).unwrap();
    let ints = b.input("ints", TensorType::new(DType::I32, [2, 3])).unwrap();
    let flags = b.input("flags", TensorType::new(DType::Bool, [2, 3])).unwrap();
    // The coefficient has the operand's shape exactly: no implicit broadcasting.
    assert!(matches!(
        b.linrec(x, row, 1, false),
        Err(hir::BuildError::Type {
            op: "linrec",
            source: TypeError::ShapeMismatch { op: "linrec", .. }
        })
    ));
    assert!(matches!(
        b.linrec(x, ints, 1, false),
        Err(hir::BuildError::Type {
            source: TypeError::DTypeMismatch { op: "linrec", .. },
            ..
        })
    ));
    assert!(matches!(
        b.linrec(flags, flags, 0, false),
        Err(hir::BuildError::Type {
            source: TypeError::UnsupportedDType {
                op: "linrec",
                dtype: DType::Bool
            },
            ..
        })
    ));
    assert!(matches!(
        b.linrec(x, x, 2, false),
        Err(hir::BuildError::Type {
            source: TypeError::AxisOutOfRange { axis: 2, rank: 2 },
            ..
        })
    ));
    // As a one-operand scan it lacks its coefficient.
    assert!(matches!(
        b.scan(ScanOp::Linear, x, 0, false),
        Err(hir::BuildError::Type {
            source: TypeError::Arity {
                op: "linrec",
                expected: 2,
                found: 1
            },
            ..
        })
    ));
    // In text, the coefficient follows a comma; its absence is reported where the axis stands.
    let err = hir::parse(
        "kernel k {\n  %x = input x : f32[3]\n  %s = linrec %x axis 0 : f32[3]\n  output s = %s\n}",
    )
    .unwrap_err();
    assert_eq!((err.line, err.col), (3, 18), "{err}");
    // MIR and LIR check the coefficient's dtype too.
    let program = mir::parse(
        "mir p {\n  buf0: f32[3] = input x\n  buf1: i32[3] = input a\n  buf2: f32[3] = output s\n  kernel k0 [3] {\n    %0 = load buf0 [1] : f32\n    %1 = load buf1 [1] : i32\n    %2 = linrec %0, %1 axis 0 : f32\n    store buf2 = %2\n  }\n}",
    )
    .unwrap();
    assert!(mir::verify(&program).is_err());
    let lowered =
        lir::parse(&LINREC_LIR.replace("slots [f32, f32, f32, f32]", "slots [f32, f32, i32, f32]")).unwrap();
    assert!(lir::verify(&lowered).is_err());
}
