//! The HIR reference interpreter against closed forms and hand-computed results.
//!
//! Float ops are checked on fresh random inputs (a seeded SplitMix64, so failures reproduce)
//! against closed forms evaluated in f64:
//! - exactly-rounded ops must give the closed form rounded to the dtype, bit for bit;
//! - f32 transcendentals must be within `|got - want| <= 2^-22 · |want| + 1e-15` of the f64
//!   closed form (2 to 4 ULPs; glibc is within 1.5);
//! - f64 transcendentals are compared with an *independent* identity (`sin x = 2 sin(x/2)
//!   cos(x/2)`, `exp x = 2^(x log2 e)`, …) whose own rounding costs a few ULPs, so the bound is
//!   `|got - want| <= 1e-13 · |want| + 1e-15`: loose for an accurate libm, tight enough to catch
//!   any wrong op, argument order or dtype.

// The helpers below unwrap interpreter results: an error there is a test failure.
#![allow(clippy::unwrap_used)]

use rfx_ir::hir::{Builder, Kernel, Node, Op, Output, ValueId};
use rfx_ir::interp::{InterpError, Mode, run_hir};
use rfx_ir::{Array, ArrayView, BinaryOp, CmpOp, DType, ReduceOp, Scalar, Shape, TensorType, UnaryOp};

// ---------------------------------------------------------------------------------------------
// Helpers

/// SplitMix64: a tiny seeded generator, so every run draws the same "random" inputs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * unit
    }
}

fn run(kernel: &Kernel, inputs: &[Array], mode: Mode) -> Vec<Array> {
    let views = inputs.iter().map(Array::view).collect::<Vec<_>>();
    run_hir(kernel, &views, mode).unwrap()
}

fn run_one(kernel: &Kernel, inputs: &[Array]) -> Array {
    run(kernel, inputs, Mode::Native).remove(0)
}

fn f32s(array: &Array) -> Vec<f32> {
    array.as_slice::<f32>().unwrap().to_vec()
}

fn f64s(array: &Array) -> Vec<f64> {
    array.as_slice::<f64>().unwrap().to_vec()
}

fn i32s(array: &Array) -> Vec<i32> {
    array.as_slice::<i32>().unwrap().to_vec()
}

fn bools(array: &Array) -> Vec<bool> {
    array.as_slice::<bool>().unwrap().to_vec()
}

fn array<T: rfx_ir::Element>(shape: impl Into<Shape>, values: Vec<T>) -> Array {
    Array::from_vec(shape, values).unwrap()
}

/// A kernel `out = op(a)` with `a: dtype[shape]`.
fn unary_kernel(op: UnaryOp, dtype: DType, shape: &Shape) -> Kernel {
    let mut builder = Builder::new("unary");
    let a = builder.input("a", TensorType::new(dtype, shape.clone())).unwrap();
    let out = builder.unary(op, a).unwrap();
    builder.output("out", out).unwrap();
    builder.finish().unwrap()
}

/// A kernel `out = op(a, b)` with broadcasting.
fn binary_kernel(op: BinaryOp, dtype: DType, shape_a: &Shape, shape_b: &Shape) -> Kernel {
    let mut builder = Builder::new("binary");
    let a = builder
        .input("a", TensorType::new(dtype, shape_a.clone()))
        .unwrap();
    let b = builder
        .input("b", TensorType::new(dtype, shape_b.clone()))
        .unwrap();
    let out = builder.binary(op, a, b).unwrap();
    builder.output("out", out).unwrap();
    builder.finish().unwrap()
}

fn compare_kernel(op: CmpOp, dtype: DType, shape: &Shape) -> Kernel {
    let mut builder = Builder::new("compare");
    let a = builder.input("a", TensorType::new(dtype, shape.clone())).unwrap();
    let b = builder.input("b", TensorType::new(dtype, shape.clone())).unwrap();
    let out = builder.compare(op, a, b).unwrap();
    builder.output("out", out).unwrap();
    builder.finish().unwrap()
}

fn cast_kernel(from: DType, to: DType, len: usize) -> Kernel {
    let mut builder = Builder::new("cast");
    let a = builder.input("a", TensorType::new(from, [len])).unwrap();
    let out = builder.cast(a, to).unwrap();
    builder.output("out", out).unwrap();
    builder.finish().unwrap()
}

fn reduce_kernel(op: ReduceOp, dtype: DType, shape: &Shape, axes: &[usize], keepdims: bool) -> Kernel {
    let mut builder = Builder::new("reduce");
    let a = builder.input("a", TensorType::new(dtype, shape.clone())).unwrap();
    let out = builder.reduce(op, a, axes, keepdims).unwrap();
    builder.output("out", out).unwrap();
    builder.finish().unwrap()
}

/// Bit equality, with any NaN equal to any NaN.
fn same_f32(a: f32, b: f32) -> bool {
    a.is_nan() && b.is_nan() || a.to_bits() == b.to_bits()
}

fn same_f64(a: f64, b: f64) -> bool {
    a.is_nan() && b.is_nan() || a.to_bits() == b.to_bits()
}

// ---------------------------------------------------------------------------------------------
// The rfxJIT example

#[test]
fn sin_of_x_times_two_plus_y_matches_the_rfxjit_example() {
    let mut builder = Builder::new("fused_chain");
    let x = builder.input("x", TensorType::new(DType::F32, [3])).unwrap();
    let y = builder.input("y", TensorType::new(DType::F32, [3])).unwrap();
    let two = builder.scalar(Scalar::F32(2.0));
    let x_times_two = builder.binary(BinaryOp::Mul, x, two).unwrap();
    let sine = builder.unary(UnaryOp::Sin, x_times_two).unwrap();
    let out = builder.binary(BinaryOp::Add, sine, y).unwrap();
    builder.output("out", out).unwrap();
    let kernel = builder.finish().unwrap();

    let inputs = [
        Array::from_slice(&[0.0f32, 1.0, 2.0]),
        Array::from_slice(&[1.0f32, 2.0, 3.0]),
    ];
    let result = run_one(&kernel, &inputs);
    assert_eq!(result.shape(), &Shape::new([3]));
    assert_eq!(f32s(&result), vec![1.0, 2.909_297_5, 2.243_197_5]);

    // Oracle mode computes the same kernel in f64: sin(2) + 2 and sin(4) + 3.
    let oracle = run(&kernel, &inputs, Mode::Oracle).remove(0);
    assert_eq!(oracle.dtype(), DType::F64);
    assert_eq!(f64s(&oracle), vec![1.0, 2.0f64.sin() + 2.0, 4.0f64.sin() + 3.0]);
}

// ---------------------------------------------------------------------------------------------
// Float ops against closed forms

/// An elementwise float op, its random input domain and its closed form in f64.
struct ClosedForm {
    name: &'static str,
    op: Op,
    domain: (f64, f64),
    closed_form: fn(&[f64]) -> f64,
    /// The closed form is the exact result (so f32 results must be it rounded, bit for bit, and
    /// f64 results must be it exactly).
    exact: bool,
}

/// Round half to even, written without `round_ties_even`.
fn round_half_even(x: f64) -> f64 {
    let nearest_away = x.round();
    if (x - x.trunc()).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        nearest_away
    }
}

/// `erf x = 2/√π e^(−x²) Σ 2ⁿ x^(2n+1) / (1·3·…·(2n+1))`: a series of positive terms (no
/// cancellation), summed until the terms vanish; accurate to a few `f64` ULP for `|x| <= 4`.
fn erf_series(x: &[f64]) -> f64 {
    let x = x[0];
    let (mut term, mut sum, mut n) = (x, x, 0.0);
    while term.abs() > sum.abs() * 1e-18 {
        n += 1.0;
        term *= 2.0 * x * x / (2.0 * n + 1.0);
        sum += term;
    }
    2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp() * sum
}

fn closed_forms() -> Vec<ClosedForm> {
    use std::f64::consts::{LN_2, LOG2_E, PI};
    let unary = |name, op, domain, closed_form, exact| ClosedForm {
        name,
        op: Op::Unary(op),
        domain,
        closed_form,
        exact,
    };
    let binary = |name, op, domain, closed_form, exact| ClosedForm {
        name,
        op: Op::Binary(op),
        domain,
        closed_form,
        exact,
    };
    vec![
        unary(
            "neg",
            UnaryOp::Neg,
            (-10.0, 10.0),
            |x| f64::from_bits(x[0].to_bits() ^ (1 << 63)),
            true,
        ),
        unary(
            "abs",
            UnaryOp::Abs,
            (-10.0, 10.0),
            |x| if x[0] < 0.0 { -x[0] } else { x[0] },
            true,
        ),
        unary(
            "sign",
            UnaryOp::Sign,
            (-10.0, 10.0),
            |x| {
                if x[0] > 0.0 {
                    1.0
                } else if x[0] < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            },
            true,
        ),
        unary(
            "floor",
            UnaryOp::Floor,
            (-10.0, 10.0),
            |x| {
                if x[0].trunc() > x[0] {
                    x[0].trunc() - 1.0
                } else {
                    x[0].trunc()
                }
            },
            true,
        ),
        unary(
            "ceil",
            UnaryOp::Ceil,
            (-10.0, 10.0),
            |x| {
                if x[0].trunc() < x[0] {
                    x[0].trunc() + 1.0
                } else {
                    x[0].trunc()
                }
            },
            true,
        ),
        unary(
            "round",
            UnaryOp::Round,
            (-10.0, 10.0),
            |x| round_half_even(x[0]),
            true,
        ),
        unary("sqrt", UnaryOp::Sqrt, (0.0, 100.0), |x| x[0].powf(0.5), false),
        unary("rsqrt", UnaryOp::Rsqrt, (0.01, 100.0), |x| x[0].powf(-0.5), false),
        unary("recip", UnaryOp::Recip, (-10.0, 10.0), |x| 1.0 / x[0], true),
        unary(
            "exp",
            UnaryOp::Exp,
            (-80.0, 80.0),
            |x| (x[0] * LOG2_E).exp2(),
            false,
        ),
        unary(
            "exp2",
            UnaryOp::Exp2,
            (-120.0, 120.0),
            |x| (x[0] * LN_2).exp(),
            false,
        ),
        unary(
            "log",
            UnaryOp::Log,
            (0.01, 1000.0),
            |x| (x[0] - 1.0).ln_1p(),
            false,
        ),
        unary("log2", UnaryOp::Log2, (0.01, 1000.0), |x| x[0].ln() / LN_2, false),
        unary(
            "sin",
            UnaryOp::Sin,
            (-20.0, 20.0),
            |x| 2.0 * (x[0] / 2.0).sin() * (x[0] / 2.0).cos(),
            false,
        ),
        unary(
            "cos",
            UnaryOp::Cos,
            (-20.0, 20.0),
            |x| 1.0 - 2.0 * (x[0] / 2.0).sin().powi(2),
            false,
        ),
        unary(
            "tan",
            UnaryOp::Tan,
            (-1.5, 1.5),
            |x| x[0].sin() / x[0].cos(),
            false,
        ),
        unary(
            "tanh",
            UnaryOp::Tanh,
            (-10.0, 10.0),
            |x| (2.0 * x[0]).exp_m1() / ((2.0 * x[0]).exp_m1() + 2.0),
            false,
        ),
        unary(
            "atan",
            UnaryOp::Atan,
            (-100.0, 100.0),
            |x| 2.0 * (x[0] / (1.0 + (1.0 + x[0] * x[0]).sqrt())).atan(),
            false,
        ),
        unary(
            "asin",
            UnaryOp::Asin,
            (-0.99, 0.99),
            |x| (x[0] / ((1.0 - x[0]) * (1.0 + x[0])).sqrt()).atan(),
            false,
        ),
        unary(
            "acos",
            UnaryOp::Acos,
            (-0.99, 0.99),
            |x| 2.0 * ((1.0 - x[0]) / (1.0 + x[0])).sqrt().atan(),
            false,
        ),
        unary(
            "sigmoid",
            UnaryOp::Sigmoid,
            (-20.0, 20.0),
            |x| x[0].exp() / (1.0 + x[0].exp()),
            false,
        ),
        unary("erf", UnaryOp::Erf, (-4.0, 4.0), erf_series, false),
        binary("add", BinaryOp::Add, (-10.0, 10.0), |x| x[0] + x[1], true),
        binary("sub", BinaryOp::Sub, (-10.0, 10.0), |x| x[0] - x[1], true),
        binary("mul", BinaryOp::Mul, (-10.0, 10.0), |x| x[0] * x[1], true),
        binary("div", BinaryOp::Div, (-10.0, 10.0), |x| x[0] / x[1], true),
        binary(
            "pow",
            BinaryOp::Pow,
            (0.01, 5.0),
            |x| (x[1] * x[0].ln()).exp(),
            false,
        ),
        binary(
            "min",
            BinaryOp::Min,
            (-10.0, 10.0),
            |x| if x[0] < x[1] { x[0] } else { x[1] },
            true,
        ),
        binary(
            "max",
            BinaryOp::Max,
            (-10.0, 10.0),
            |x| if x[0] > x[1] { x[0] } else { x[1] },
            true,
        ),
        binary(
            "atan2",
            BinaryOp::Atan2,
            (-10.0, 10.0),
            |x| {
                let base = (x[0] / x[1]).atan();
                match (x[1] < 0.0, x[0] < 0.0) {
                    (false, _) => base,
                    (true, false) => base + PI,
                    (true, true) => base - PI,
                }
            },
            false,
        ),
        // Checked by its defining properties instead (see `check_fmod_properties`).
        binary(
            "fmod",
            BinaryOp::Fmod,
            (-10.0, 10.0),
            |x| x[0] - x[1] * (x[0] / x[1]).trunc(),
            false,
        ),
    ]
}

fn check_closed_form_f32(case: &ClosedForm, rng: &mut SplitMix64) {
    const N: usize = 256;
    let shape = Shape::new([N]);
    let n_inputs = case.op.arity();
    let inputs = (0..n_inputs)
        .map(|_| {
            (0..N)
                .map(|_| rng.uniform(case.domain.0, case.domain.1) as f32)
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>();
    let kernel = match case.op {
        Op::Unary(op) => unary_kernel(op, DType::F32, &shape),
        Op::Binary(op) => binary_kernel(op, DType::F32, &shape, &shape),
        _ => unreachable!(),
    };
    let arrays = inputs
        .iter()
        .map(|values| array([N], values.clone()))
        .collect::<Vec<_>>();
    let got = f32s(&run_one(&kernel, &arrays));
    for index in 0..N {
        let operands = inputs
            .iter()
            .map(|values| f64::from(values[index]))
            .collect::<Vec<_>>();
        // fmod of f32 values is exact in f64's own `%`.
        let want = if case.name == "fmod" {
            operands[0] % operands[1]
        } else {
            (case.closed_form)(&operands)
        };
        let ok = if case.exact || case.name == "fmod" {
            same_f32(got[index], want as f32)
        } else {
            (f64::from(got[index]) - want).abs() <= want.abs() * 2f64.powi(-22) + 1e-15
        };
        assert!(
            ok,
            "f32 {} {operands:?}: got {}, closed form {want}",
            case.name, got[index]
        );
    }
}

fn check_closed_form_f64(case: &ClosedForm, rng: &mut SplitMix64) {
    const N: usize = 256;
    let shape = Shape::new([N]);
    let inputs = (0..case.op.arity())
        .map(|_| {
            (0..N)
                .map(|_| rng.uniform(case.domain.0, case.domain.1))
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>();
    let kernel = match case.op {
        Op::Unary(op) => unary_kernel(op, DType::F64, &shape),
        Op::Binary(op) => binary_kernel(op, DType::F64, &shape, &shape),
        _ => unreachable!(),
    };
    let arrays = inputs
        .iter()
        .map(|values| array([N], values.clone()))
        .collect::<Vec<_>>();
    let got = f64s(&run_one(&kernel, &arrays));
    for index in 0..N {
        let operands = inputs.iter().map(|values| values[index]).collect::<Vec<_>>();
        let want = (case.closed_form)(&operands);
        if case.name == "fmod" {
            check_fmod_properties(operands[0], operands[1], got[index]);
            continue;
        }
        let ok = if case.exact {
            same_f64(got[index], want)
        } else {
            (got[index] - want).abs() <= want.abs() * 1e-13 + 1e-15
        };
        assert!(
            ok,
            "f64 {} {operands:?}: got {}, closed form {want}",
            case.name, got[index]
        );
    }
}

/// `r = fmod(a, b)` is the exact remainder of a truncated division: `|r| < |b|`, `r` has the
/// sign of `a` (or is zero), and `(a - r) / b` is an integer (up to the rounding of the check).
fn check_fmod_properties(a: f64, b: f64, r: f64) {
    assert!(
        r.abs() < b.abs(),
        "fmod({a}, {b}) = {r}: not smaller than the divisor"
    );
    assert!(
        r == 0.0 || (r < 0.0) == (a < 0.0),
        "fmod({a}, {b}) = {r}: wrong sign"
    );
    let quotient = (a - r) / b;
    assert!(
        (quotient - quotient.round()).abs() < 1e-9,
        "fmod({a}, {b}) = {r}: quotient {quotient}"
    );
    assert!(
        quotient.round().abs() <= (a / b).abs().ceil(),
        "fmod({a}, {b}) = {r}: not truncated"
    );
}

#[test]
fn every_float_op_matches_its_closed_form_in_f32_and_f64() {
    let mut rng = SplitMix64(0x5eed_f10a_7001);
    let cases = closed_forms();
    // Every float-accepting unary and binary op is covered.
    for op in UnaryOp::ALL.iter().filter(|op| op.accepts(DType::F32)) {
        assert!(
            cases.iter().any(|c| c.op == Op::Unary(*op)),
            "no closed form for {op}"
        );
    }
    for op in BinaryOp::ALL.iter().filter(|op| op.accepts(DType::F32)) {
        assert!(
            cases.iter().any(|c| c.op == Op::Binary(*op)),
            "no closed form for {op}"
        );
    }
    for case in &cases {
        check_closed_form_f32(case, &mut rng);
        check_closed_form_f64(case, &mut rng);
    }
}

#[test]
fn float_comparisons_follow_ieee_with_nan_and_signed_zero() {
    let a = [1.0f32, 2.0, 2.0, f32::NAN, 0.0, -0.0, f32::NEG_INFINITY, f32::NAN];
    let b = [2.0f32, 2.0, 1.0, 1.0, -0.0, 0.0, f32::INFINITY, f32::NAN];
    let shape = Shape::new([a.len()]);
    let inputs = [Array::from_slice(&a), Array::from_slice(&b)];
    let expect = |op: CmpOp| -> Vec<bool> {
        a.iter()
            .zip(&b)
            .map(|(x, y)| match op {
                CmpOp::Lt => x < y,
                CmpOp::Le => x <= y,
                CmpOp::Gt => x > y,
                CmpOp::Ge => x >= y,
                CmpOp::Eq => x == y,
                CmpOp::Ne => x != y,
            })
            .collect()
    };
    for &op in CmpOp::ALL {
        let got = bools(&run_one(&compare_kernel(op, DType::F32, &shape), &inputs));
        assert_eq!(got, expect(op), "{op}");
    }
    // Spelled out: NaN compares false except `ne`, and -0 == 0.
    let eq = bools(&run_one(&compare_kernel(CmpOp::Eq, DType::F32, &shape), &inputs));
    assert_eq!(eq, vec![false, true, false, false, true, true, false, false]);
    let ne = bools(&run_one(&compare_kernel(CmpOp::Ne, DType::F32, &shape), &inputs));
    assert_eq!(ne, vec![true, false, true, true, false, false, true, true]);
}

#[test]
fn min_and_max_follow_numpy_on_signed_zeros_and_nan() {
    let a = [0.0f64, -0.0, f64::NAN, 1.0, f64::NAN];
    let b = [-0.0f64, 0.0, 1.0, f64::NAN, f64::NAN];
    let shape = Shape::new([a.len()]);
    let inputs = [Array::from_slice(&a), Array::from_slice(&b)];
    let min = f64s(&run_one(
        &binary_kernel(BinaryOp::Min, DType::F64, &shape, &shape),
        &inputs,
    ));
    let max = f64s(&run_one(
        &binary_kernel(BinaryOp::Max, DType::F64, &shape, &shape),
        &inputs,
    ));
    // min(0, -0) = -0 and min(-0, 0) = 0: the second operand wins ties.
    assert_eq!(min[0].to_bits(), (-0.0f64).to_bits());
    assert_eq!(min[1].to_bits(), 0.0f64.to_bits());
    assert_eq!(max[0].to_bits(), (-0.0f64).to_bits());
    assert_eq!(max[1].to_bits(), 0.0f64.to_bits());
    for index in 2..5 {
        assert!(
            min[index].is_nan() && max[index].is_nan(),
            "NaN must propagate at {index}"
        );
    }
}

#[test]
fn float_special_values_follow_the_op_documentation() {
    let x = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -0.5,
        0.5,
        1.5,
        2.5,
        -2.5,
    ];
    let shape = Shape::new([x.len()]);
    let input = [Array::from_slice(&x)];
    let eval = |op| f32s(&run_one(&unary_kernel(op, DType::F32, &shape), &input));
    let bits = |values: Vec<f32>| {
        values
            .iter()
            .map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
            .collect::<Vec<_>>()
    };
    let nan = f32::NAN;
    let expect = |values: &[f32]| bits(values.to_vec());
    assert_eq!(
        bits(eval(UnaryOp::Round)),
        expect(&[
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            nan,
            -0.0,
            0.0,
            2.0,
            2.0,
            -2.0
        ])
    );
    assert_eq!(
        bits(eval(UnaryOp::Ceil)),
        expect(&[
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            nan,
            -0.0,
            1.0,
            2.0,
            3.0,
            -2.0
        ])
    );
    assert_eq!(
        bits(eval(UnaryOp::Floor)),
        expect(&[
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            nan,
            -1.0,
            0.0,
            1.0,
            2.0,
            -3.0
        ])
    );
    assert_eq!(
        bits(eval(UnaryOp::Sign)),
        expect(&[0.0, 0.0, 1.0, -1.0, nan, -1.0, 1.0, 1.0, 1.0, -1.0])
    );
    assert_eq!(
        bits(eval(UnaryOp::Neg)),
        expect(&[
            -0.0,
            0.0,
            f32::NEG_INFINITY,
            f32::INFINITY,
            nan,
            0.5,
            -0.5,
            -1.5,
            -2.5,
            2.5
        ])
    );
    let rsqrt = eval(UnaryOp::Rsqrt);
    assert_eq!(
        &bits(rsqrt[..4].to_vec()),
        &expect(&[f32::INFINITY, f32::NEG_INFINITY, 0.0, nan])
    );
    let recip = eval(UnaryOp::Recip);
    assert_eq!(
        &bits(recip[..4].to_vec()),
        &expect(&[f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0])
    );
    let sigmoid = eval(UnaryOp::Sigmoid);
    assert_eq!(&bits(sigmoid[2..5].to_vec()), &expect(&[1.0, 0.0, nan]));
    let sqrt = eval(UnaryOp::Sqrt);
    assert_eq!(
        &bits(sqrt[..5].to_vec()),
        &expect(&[0.0, -0.0, f32::INFINITY, nan, nan])
    );
    let log = eval(UnaryOp::Log);
    assert_eq!(
        &bits(log[..5].to_vec()),
        &expect(&[f32::NEG_INFINITY, f32::NEG_INFINITY, f32::INFINITY, nan, nan])
    );
    let exp = eval(UnaryOp::Exp);
    assert_eq!(&bits(exp[2..5].to_vec()), &expect(&[f32::INFINITY, 0.0, nan]));
    let sin = eval(UnaryOp::Sin);
    assert_eq!(&bits(sin[..5].to_vec()), &expect(&[0.0, -0.0, nan, nan, nan]));
    let atan = eval(UnaryOp::Atan);
    assert_eq!(
        &atan[2..4],
        &[std::f32::consts::FRAC_PI_2, -std::f32::consts::FRAC_PI_2]
    );

    // Binary special values: 0 * Inf, Inf - Inf, fmod by zero, pow(NaN, 0), pow(1, NaN).
    let a = [0.0f64, f64::INFINITY, 5.0, f64::NAN, 1.0, -7.5, -0.0];
    let b = [f64::INFINITY, f64::INFINITY, 0.0, 0.0, f64::NAN, 2.0, -0.0];
    let shape = Shape::new([a.len()]);
    let inputs = [Array::from_slice(&a), Array::from_slice(&b)];
    let eval2 = |op| f64s(&run_one(&binary_kernel(op, DType::F64, &shape, &shape), &inputs));
    assert!(eval2(BinaryOp::Mul)[0].is_nan());
    assert!(eval2(BinaryOp::Sub)[1].is_nan());
    let fmod = eval2(BinaryOp::Fmod);
    assert!(fmod[2].is_nan());
    assert_eq!(fmod[5], -1.5);
    let pow = eval2(BinaryOp::Pow);
    assert_eq!(pow[3], 1.0);
    assert_eq!(pow[4], 1.0);
    let add = eval2(BinaryOp::Add);
    assert_eq!(add[6].to_bits(), (-0.0f64).to_bits(), "-0 + -0 = -0");
}

// ---------------------------------------------------------------------------------------------
// i32 and bool

#[test]
fn i32_division_is_floor_division_and_division_by_zero_gives_zero() {
    let a = [7, -7, 7, -7, 6, -6, 5, -5, 0, i32::MIN, i32::MIN, i32::MAX, 1];
    let b = [2, 2, -2, -2, 3, -3, 0, 0, 3, -1, 1, -1, -3];
    let shape = Shape::new([a.len()]);
    let inputs = [Array::from_slice(&a), Array::from_slice(&b)];
    let div = i32s(&run_one(
        &binary_kernel(BinaryOp::Div, DType::I32, &shape, &shape),
        &inputs,
    ));
    assert_eq!(
        div,
        vec![3, -4, -4, 3, 2, 2, 0, 0, 0, i32::MIN, i32::MIN, -i32::MAX, -1]
    );
    let fmod = i32s(&run_one(
        &binary_kernel(BinaryOp::Fmod, DType::I32, &shape, &shape),
        &inputs,
    ));
    // Truncated remainder: the sign of the dividend; x fmod 0 = 0; MIN fmod -1 = 0.
    assert_eq!(fmod, vec![1, -1, 1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    // Floor division and the truncated remainder do not pair up for mixed signs, but
    // a == b * (a / b) + (a - b * (a / b)) by construction; check NumPy's floor-mod identity instead.
    for index in 0..a.len() {
        if b[index] != 0 && !(a[index] == i32::MIN && b[index] == -1) {
            let floor_mod = a[index] - b[index] * div[index];
            assert!(
                floor_mod == 0 || (floor_mod < 0) == (b[index] < 0),
                "floor mod sign at {index}"
            );
            assert!(floor_mod.abs() < b[index].abs());
        }
    }
}

#[test]
fn i32_arithmetic_wraps() {
    let a = [i32::MAX, i32::MIN, 1 << 16, -3, 4];
    let b = [1, 1, 1 << 16, 5, -9];
    let shape = Shape::new([a.len()]);
    let inputs = [Array::from_slice(&a), Array::from_slice(&b)];
    let eval = |op| i32s(&run_one(&binary_kernel(op, DType::I32, &shape, &shape), &inputs));
    assert_eq!(eval(BinaryOp::Add), vec![i32::MIN, i32::MIN + 1, 1 << 17, 2, -5]);
    assert_eq!(eval(BinaryOp::Sub), vec![i32::MAX - 1, i32::MAX, 0, -8, 13]);
    assert_eq!(eval(BinaryOp::Mul), vec![i32::MAX, i32::MIN, 0, -15, -36]);
    assert_eq!(eval(BinaryOp::Min), vec![1, i32::MIN, 1 << 16, -3, -9]);
    assert_eq!(eval(BinaryOp::Max), vec![i32::MAX, 1, 1 << 16, 5, 4]);

    let x = [i32::MIN, -5, 0, 7, i32::MAX];
    let shape = Shape::new([x.len()]);
    let input = [Array::from_slice(&x)];
    let eval1 = |op| i32s(&run_one(&unary_kernel(op, DType::I32, &shape), &input));
    assert_eq!(eval1(UnaryOp::Neg), vec![i32::MIN, 5, 0, -7, -i32::MAX]);
    assert_eq!(eval1(UnaryOp::Abs), vec![i32::MIN, 5, 0, 7, i32::MAX]);
    assert_eq!(eval1(UnaryOp::Sign), vec![-1, -1, 0, 1, 1]);

    let cmp_a = [1, 2, 3, i32::MIN];
    let cmp_b = [2, 2, 2, i32::MAX];
    let shape = Shape::new([4]);
    let inputs = [Array::from_slice(&cmp_a), Array::from_slice(&cmp_b)];
    let lt = bools(&run_one(&compare_kernel(CmpOp::Lt, DType::I32, &shape), &inputs));
    assert_eq!(lt, vec![true, false, false, true]);
    let ge = bools(&run_one(&compare_kernel(CmpOp::Ge, DType::I32, &shape), &inputs));
    assert_eq!(ge, vec![false, true, true, false]);
}

#[test]
fn bool_logic_and_equality_follow_the_truth_tables() {
    let a = [false, false, true, true];
    let b = [false, true, false, true];
    let shape = Shape::new([4]);
    let inputs = [Array::from_slice(&a), Array::from_slice(&b)];
    let and = bools(&run_one(
        &binary_kernel(BinaryOp::And, DType::Bool, &shape, &shape),
        &inputs,
    ));
    let or = bools(&run_one(
        &binary_kernel(BinaryOp::Or, DType::Bool, &shape, &shape),
        &inputs,
    ));
    let eq = bools(&run_one(&compare_kernel(CmpOp::Eq, DType::Bool, &shape), &inputs));
    let ne = bools(&run_one(&compare_kernel(CmpOp::Ne, DType::Bool, &shape), &inputs));
    let not = bools(&run_one(
        &unary_kernel(UnaryOp::Not, DType::Bool, &shape),
        &inputs[..1],
    ));
    assert_eq!(and, vec![false, false, false, true]);
    assert_eq!(or, vec![false, true, true, true]);
    assert_eq!(eq, vec![true, false, false, true]);
    assert_eq!(ne, vec![false, true, true, false]);
    assert_eq!(not, vec![true, true, false, false]);
}

// ---------------------------------------------------------------------------------------------
// Casts

#[test]
fn float_to_i32_casts_truncate_saturate_and_map_nan_to_zero() {
    let x = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        3e9,
        -3e9,
        -0.5,
        0.5,
        -1.9,
        2.9,
        -0.0,
    ];
    let got = i32s(&run_one(
        &cast_kernel(DType::F32, DType::I32, x.len()),
        &[Array::from_slice(&x)],
    ));
    assert_eq!(
        got,
        vec![0, i32::MAX, i32::MIN, i32::MAX, i32::MIN, 0, 0, -1, 2, 0]
    );
    let y = [f64::NAN, 2147483647.9, 2147483648.0, -2147483648.9, -2147483649.0];
    let got = i32s(&run_one(
        &cast_kernel(DType::F64, DType::I32, y.len()),
        &[Array::from_slice(&y)],
    ));
    assert_eq!(got, vec![0, i32::MAX, i32::MAX, i32::MIN, i32::MIN]);
}

#[test]
fn narrowing_casts_round_to_nearest_even() {
    let tie = 1.0 + 2f64.powi(-24);
    let above_tie = 1.0 + 2f64.powi(-24) + 2f64.powi(-50);
    let x = [tie, above_tie, 1e300, -1e300, 1e-50, 0.1, f64::NAN];
    let got = f32s(&run_one(
        &cast_kernel(DType::F64, DType::F32, x.len()),
        &[Array::from_slice(&x)],
    ));
    assert_eq!(got[0], 1.0);
    assert_eq!(got[1], 1.0 + f32::EPSILON);
    assert_eq!(got[2], f32::INFINITY);
    assert_eq!(got[3], f32::NEG_INFINITY);
    assert_eq!(got[4], 0.0);
    assert_eq!(got[5], 0.1f32);
    assert!(got[6].is_nan());

    let ints = [16_777_217, 16_777_219, -16_777_217, i32::MAX];
    let got = f32s(&run_one(
        &cast_kernel(DType::I32, DType::F32, ints.len()),
        &[Array::from_slice(&ints)],
    ));
    assert_eq!(
        got,
        vec![16_777_216.0, 16_777_220.0, -16_777_216.0, 2_147_483_648.0]
    );
}

#[test]
fn bool_casts_are_zero_one_and_nonzero_tests() {
    let flags = [false, true];
    let input = [Array::from_slice(&flags)];
    assert_eq!(
        i32s(&run_one(&cast_kernel(DType::Bool, DType::I32, 2), &input)),
        vec![0, 1]
    );
    assert_eq!(
        f32s(&run_one(&cast_kernel(DType::Bool, DType::F32, 2), &input)),
        vec![0.0, 1.0]
    );
    assert_eq!(
        f64s(&run_one(&cast_kernel(DType::Bool, DType::F64, 2), &input)),
        vec![0.0, 1.0]
    );

    let floats = [0.0f32, -0.0, f32::NAN, 1e-45, -2.0];
    let got = bools(&run_one(
        &cast_kernel(DType::F32, DType::Bool, 5),
        &[Array::from_slice(&floats)],
    ));
    assert_eq!(got, vec![false, false, true, true, true]);
    let ints = [0, 1, -1, i32::MIN];
    let got = bools(&run_one(
        &cast_kernel(DType::I32, DType::Bool, 4),
        &[Array::from_slice(&ints)],
    ));
    assert_eq!(got, vec![false, true, true, true]);
}

// ---------------------------------------------------------------------------------------------
// Broadcasting, select, clamp, broadcast_to, reshape

/// The values `0.5·i - 3` for `i` in `0..n`: distinct, mixed signs, exact in f32.
fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| 0.5 * i as f32 - 3.0).collect()
}

#[test]
fn binary_ops_broadcast_like_numpy() {
    // [3,1,5] + [4,1] -> [3,4,5]
    let a = ramp(15);
    let b = vec![10.0f32, 20.0, 30.0, 40.0];
    let kernel = binary_kernel(
        BinaryOp::Add,
        DType::F32,
        &Shape::new([3, 1, 5]),
        &Shape::new([4, 1]),
    );
    let result = run_one(&kernel, &[array([3, 1, 5], a.clone()), array([4, 1], b.clone())]);
    assert_eq!(result.shape(), &Shape::new([3, 4, 5]));
    let got = f32s(&result);
    for i in 0..3 {
        for j in 0..4 {
            for k in 0..5 {
                assert_eq!(got[(i * 4 + j) * 5 + k], a[i * 5 + k] + b[j], "at [{i},{j},{k}]");
            }
        }
    }

    // scalar - [2,3] -> [2,3]
    let kernel = binary_kernel(BinaryOp::Sub, DType::F32, &Shape::scalar(), &Shape::new([2, 3]));
    let result = run_one(
        &kernel,
        &[Array::scalar(Scalar::F32(1.0)), array([2, 3], ramp(6))],
    );
    assert_eq!(result.shape(), &Shape::new([2, 3]));
    assert_eq!(f32s(&result), ramp(6).iter().map(|v| 1.0 - v).collect::<Vec<_>>());

    // [2,1] * [1,3] -> [2,3] (an outer product)
    let kernel = binary_kernel(
        BinaryOp::Mul,
        DType::I32,
        &Shape::new([2, 1]),
        &Shape::new([1, 3]),
    );
    let result = run_one(
        &kernel,
        &[array([2, 1], vec![2, -3]), array([1, 3], vec![5, 7, 11])],
    );
    assert_eq!(result.shape(), &Shape::new([2, 3]));
    assert_eq!(i32s(&result), vec![10, 14, 22, -15, -21, -33]);

    // Zero-size broadcasting: [0,3] + [3] -> [0,3].
    let kernel = binary_kernel(BinaryOp::Add, DType::F64, &Shape::new([0, 3]), &Shape::new([3]));
    let result = run_one(
        &kernel,
        &[array([0, 3], Vec::<f64>::new()), array([3], vec![1.0, 2.0, 3.0])],
    );
    assert_eq!(result.shape(), &Shape::new([0, 3]));
    assert!(f64s(&result).is_empty());
}

#[test]
fn select_and_clamp_broadcast_and_never_read_the_unselected_nan() {
    let mut builder = Builder::new("select_clamp");
    let cond = builder
        .input("cond", TensorType::new(DType::Bool, [2, 1]))
        .unwrap();
    let a = builder.input("a", TensorType::new(DType::F32, [3])).unwrap();
    let b = builder.input("b", TensorType::new(DType::F32, [])).unwrap();
    let selected = builder.select(cond, a, b).unwrap();
    let lo = builder.input("lo", TensorType::new(DType::F32, [3])).unwrap();
    let hi = builder.scalar(Scalar::F32(1.0));
    let clamped = builder.clamp(selected, lo, hi).unwrap();
    builder.output("selected", selected).unwrap();
    builder.output("clamped", clamped).unwrap();
    let kernel = builder.finish().unwrap();

    let inputs = [
        array([2, 1], vec![true, false]),
        array([3], vec![-5.0f32, 0.5, 7.0]),
        Array::scalar(Scalar::F32(f32::NAN)),
        array([3], vec![-1.0f32, 2.0, f32::NAN]),
    ];
    let outputs = run(&kernel, &inputs, Mode::Native);
    let selected = f32s(&outputs[0]);
    assert_eq!(outputs[0].shape(), &Shape::new([2, 3]));
    assert_eq!(&selected[..3], &[-5.0, 0.5, 7.0]);
    assert!(selected[3..].iter().all(|v| v.is_nan()));
    // clamp(x, lo, hi) = min(max(x, lo), hi): lo > hi gives hi; NaN anywhere propagates.
    let clamped = f32s(&outputs[1]);
    assert_eq!(&clamped[..2], &[-1.0, 1.0]);
    assert!(clamped[2].is_nan());
    assert!(clamped[3..].iter().all(|v| v.is_nan()));
}

#[test]
fn broadcast_to_and_reshape_move_elements_row_major() {
    let mut builder = Builder::new("shapes");
    let x = builder.input("x", TensorType::new(DType::I32, [2, 1])).unwrap();
    let wide = builder.broadcast_to(x, [3, 2, 4]).unwrap();
    let flat = builder.reshape(wide, [24]).unwrap();
    let y = builder.input("y", TensorType::new(DType::I32, [2, 3])).unwrap();
    let y_reshaped = builder.reshape(y, [3, 1, 2]).unwrap();
    let s = builder.scalar(Scalar::I32(9));
    let s_wide = builder.broadcast_to(s, [2, 2]).unwrap();
    builder.output("flat", flat).unwrap();
    builder.output("y_reshaped", y_reshaped).unwrap();
    builder.output("s_wide", s_wide).unwrap();
    let kernel = builder.finish().unwrap();

    let outputs = run(
        &kernel,
        &[array([2, 1], vec![1, 2]), array([2, 3], vec![1, 2, 3, 4, 5, 6])],
        Mode::Native,
    );
    let expected_flat = (0..3).flat_map(|_| [1, 1, 1, 1, 2, 2, 2, 2]).collect::<Vec<_>>();
    assert_eq!(outputs[0].shape(), &Shape::new([24]));
    assert_eq!(i32s(&outputs[0]), expected_flat);
    assert_eq!(outputs[1].shape(), &Shape::new([3, 1, 2]));
    assert_eq!(i32s(&outputs[1]), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(outputs[2].shape(), &Shape::new([2, 2]));
    assert_eq!(i32s(&outputs[2]), vec![9; 4]);
}

#[test]
fn constants_splat_to_their_shape() {
    let mut builder = Builder::new("constants");
    let c = builder.constant(Scalar::F32(-0.0), [2, 3]);
    let flag = builder.constant(Scalar::Bool(true), [0]);
    builder.output("c", c).unwrap();
    builder.output("flag", flag).unwrap();
    let kernel = builder.finish().unwrap();
    let outputs = run(&kernel, &[], Mode::Native);
    assert_eq!(outputs[0].shape(), &Shape::new([2, 3]));
    assert!(
        f32s(&outputs[0])
            .iter()
            .all(|v| v.to_bits() == (-0.0f32).to_bits())
    );
    assert_eq!(outputs[1].shape(), &Shape::new([0]));
    assert!(bools(&outputs[1]).is_empty());
}

proptest::proptest! {
    /// Broadcasting a random pair of compatible shapes matches explicit index arithmetic.
    #[test]
    fn broadcasting_matches_explicit_index_arithmetic(
        target in proptest::collection::vec(1usize..4, 0..4),
        ones_a in proptest::collection::vec(proptest::bool::ANY, 4),
        ones_b in proptest::collection::vec(proptest::bool::ANY, 4),
        drop_a in 0usize..4,
        drop_b in 0usize..4,
    ) {
        let rank = target.len();
        let operand_dims = |ones: &[bool], drop: usize| -> Vec<usize> {
            target.iter().enumerate().skip(drop.min(rank)).map(|(axis, &d)| if ones[axis] { 1 } else { d }).collect()
        };
        let dims_a = operand_dims(&ones_a, drop_a);
        let dims_b = operand_dims(&ones_b, drop_b);
        let (shape_a, shape_b) = (Shape::new(dims_a.clone()), Shape::new(dims_b.clone()));
        let values_a = (0..shape_a.numel()).map(|i| i as f64).collect::<Vec<_>>();
        let values_b = (0..shape_b.numel()).map(|i| 1000.0 * i as f64).collect::<Vec<_>>();
        let kernel = binary_kernel(BinaryOp::Add, DType::F64, &shape_a, &shape_b);
        let result = run_one(&kernel, &[array(shape_a.clone(), values_a.clone()), array(shape_b.clone(), values_b.clone())]);
        let out_dims = result.shape().dims().to_vec();
        // The broadcast shape by hand: right-aligned, the larger of each pair (missing dims are 1).
        let out_rank = dims_a.len().max(dims_b.len());
        let dim_at = |dims: &[usize], axis: usize| {
            (axis + dims.len()).checked_sub(out_rank).map_or(1, |i| dims[i])
        };
        let want_dims = (0..out_rank).map(|axis| dim_at(&dims_a, axis).max(dim_at(&dims_b, axis))).collect::<Vec<_>>();
        proptest::prop_assert_eq!(&out_dims, &want_dims);
        let got = f64s(&result);
        // Reference: walk every output multi-index and read each operand with right-aligned,
        // size-1-clamped indices.
        let read = |dims: &[usize], values: &[f64], index: &[usize]| -> f64 {
            let offset = index.len() - dims.len();
            let mut linear = 0;
            for (axis, &d) in dims.iter().enumerate() {
                let i = if d == 1 { 0 } else { index[axis + offset] };
                linear = linear * d + i;
            }
            values[linear]
        };
        let n_out: usize = out_dims.iter().product();
        proptest::prop_assert_eq!(got.len(), n_out);
        let mut index = vec![0usize; out_dims.len()];
        for (linear, value) in got.iter().enumerate() {
            let mut rest = linear;
            for axis in (0..out_dims.len()).rev() {
                index[axis] = rest % out_dims[axis];
                rest /= out_dims[axis];
            }
            let want = read(&dims_a, &values_a, &index) + read(&dims_b, &values_b, &index);
            proptest::prop_assert_eq!(*value, want);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reductions

/// Reduces a [2,3,4] f64 array over `axes` by explicit loops, in row-major order of the
/// reduced elements; returns the values in row-major order of the kept axes.
fn reduce_by_hand(values: &[f64], axes: &[usize], fold: fn(f64, f64) -> f64, init: f64) -> Vec<f64> {
    let dims = [2usize, 3, 4];
    let kept = (0..3).filter(|a| !axes.contains(a)).collect::<Vec<_>>();
    let n_kept: usize = kept.iter().map(|&a| dims[a]).product();
    let mut out = vec![init; n_kept];
    for i in 0..2 {
        for j in 0..3 {
            for k in 0..4 {
                let index = [i, j, k];
                let out_linear = kept.iter().fold(0, |acc, &a| acc * dims[a] + index[a]);
                out[out_linear] = fold(out[out_linear], values[(i * 3 + j) * 4 + k]);
            }
        }
    }
    out
}

#[test]
fn reductions_over_every_axis_set_match_explicit_loops() {
    // Small integers and halves: sums and products of these are exact, so the order is moot.
    let values = (0..24)
        .map(|i| ((i * 7) % 11) as f64 * 0.5 - 2.0)
        .collect::<Vec<_>>();
    let input = [array([2, 3, 4], values.clone())];
    let shape = Shape::new([2, 3, 4]);
    let axis_sets: [&[usize]; 7] = [&[0], &[1], &[2], &[0, 2], &[1, 2], &[0, 1], &[0, 1, 2]];
    for axes in axis_sets {
        let count: usize = axes.iter().map(|&a| shape.dims()[a]).product();
        let sums = reduce_by_hand(&values, axes, |acc, x| acc + x, 0.0);
        let cases: [(ReduceOp, Vec<f64>); 5] = [
            (ReduceOp::Sum, sums.clone()),
            (
                ReduceOp::Prod,
                reduce_by_hand(&values, axes, |acc, x| acc * x, 1.0),
            ),
            (
                ReduceOp::Max,
                reduce_by_hand(&values, axes, f64::max, f64::NEG_INFINITY),
            ),
            (
                ReduceOp::Min,
                reduce_by_hand(&values, axes, f64::min, f64::INFINITY),
            ),
            (ReduceOp::Mean, sums.iter().map(|s| s / count as f64).collect()),
        ];
        for (op, want) in cases {
            for keepdims in [false, true] {
                let kernel = reduce_kernel(op, DType::F64, &shape, axes, keepdims);
                let result = run_one(&kernel, &input);
                let want_dims = (0..3)
                    .filter_map(|a| match (axes.contains(&a), keepdims) {
                        (false, _) => Some(shape.dims()[a]),
                        (true, true) => Some(1),
                        (true, false) => None,
                    })
                    .collect::<Vec<_>>();
                assert_eq!(
                    result.shape(),
                    &Shape::new(want_dims),
                    "{op} {axes:?} keepdims={keepdims}"
                );
                assert_eq!(f64s(&result), want, "{op} {axes:?} keepdims={keepdims}");
            }
        }
    }
}

#[test]
fn float_sums_accumulate_sequentially_in_row_major_order() {
    // In f32, 2^24 + 1 + 1 + ... loses every 1 when added one at a time, while a pairwise or
    // reordered sum would keep them: this pins the documented sequential order.
    let values = [16_777_216.0f32, 1.0, 1.0, 1.0, 1.0];
    let kernel = reduce_kernel(ReduceOp::Sum, DType::F32, &Shape::new([5]), &[0], false);
    let got = f32s(&run_one(&kernel, &[Array::from_slice(&values)]));
    assert_eq!(got, vec![16_777_216.0]);
    // Reduced elements are visited in row-major order of the reduced axes: reducing [2,2] over
    // both axes visits [0,0], [0,1], [1,0], [1,1].
    let values = [1.0f32, 16_777_216.0, 1.0, -16_777_216.0];
    let kernel = reduce_kernel(ReduceOp::Sum, DType::F32, &Shape::new([2, 2]), &[0, 1], false);
    let got = f32s(&run_one(&kernel, &[array([2, 2], values.to_vec())]));
    // ((1 + 2^24) + 1) - 2^24 = 0 in f32 (1 + 2^24 rounds to 2^24, and so does 2^24 + 1).
    assert_eq!(got, vec![0.0]);
}

#[test]
fn max_and_min_reductions_propagate_nan() {
    let values = vec![1.0f32, f32::NAN, 3.0, 4.0, 5.0, 6.0];
    let shape = Shape::new([2, 3]);
    for op in [ReduceOp::Max, ReduceOp::Min, ReduceOp::Sum] {
        let kernel = reduce_kernel(op, DType::F32, &shape, &[1], false);
        let got = f32s(&run_one(&kernel, &[array([2, 3], values.clone())]));
        assert!(got[0].is_nan(), "{op} of a row holding NaN");
        assert!(!got[1].is_nan(), "{op} of a row without NaN");
    }
    // NaN in the first position propagates too.
    let kernel = reduce_kernel(ReduceOp::Max, DType::F64, &Shape::new([3]), &[0], false);
    let got = f64s(&run_one(&kernel, &[Array::from_slice(&[f64::NAN, 1.0, 2.0])]));
    assert!(got[0].is_nan());
}

#[test]
fn empty_reductions_give_the_identity_and_the_mean_is_nan() {
    let shape = Shape::new([2, 0, 3]);
    let input = [array([2, 0, 3], Vec::<f32>::new())];
    let reduce = |op, axes: &[usize], keepdims| {
        run_one(&reduce_kernel(op, DType::F32, &shape, axes, keepdims), &input)
    };
    let sum = reduce(ReduceOp::Sum, &[1], false);
    assert_eq!(sum.shape(), &Shape::new([2, 3]));
    assert!(
        f32s(&sum).iter().all(|v| v.to_bits() == 0.0f32.to_bits()),
        "empty sum is +0"
    );
    assert_eq!(f32s(&reduce(ReduceOp::Prod, &[1], true)), vec![1.0; 6]);
    assert_eq!(reduce(ReduceOp::Prod, &[1], true).shape(), &Shape::new([2, 1, 3]));
    assert_eq!(
        f32s(&reduce(ReduceOp::Max, &[1], false)),
        vec![f32::NEG_INFINITY; 6]
    );
    assert_eq!(
        f32s(&reduce(ReduceOp::Min, &[0, 1], false)),
        vec![f32::INFINITY; 3]
    );
    assert!(
        f32s(&reduce(ReduceOp::Mean, &[1], false))
            .iter()
            .all(|v| v.is_nan())
    );
    // Reducing a non-empty axis of an empty array gives an empty result.
    let kept_empty = reduce(ReduceOp::Sum, &[0], false);
    assert_eq!(kept_empty.shape(), &Shape::new([0, 3]));
    assert!(f32s(&kept_empty).is_empty());
    // The whole empty array reduces to one scalar.
    let all = reduce(ReduceOp::Sum, &[0, 1, 2], false);
    assert_eq!(all.shape(), &Shape::scalar());
    assert_eq!(f32s(&all), vec![0.0]);

    let int_input = [array([0], Vec::<i32>::new())];
    let int_shape = Shape::new([0]);
    let int_reduce = |op| {
        i32s(&run_one(
            &reduce_kernel(op, DType::I32, &int_shape, &[0], false),
            &int_input,
        ))
    };
    assert_eq!(int_reduce(ReduceOp::Sum), vec![0]);
    assert_eq!(int_reduce(ReduceOp::Prod), vec![1]);
    assert_eq!(int_reduce(ReduceOp::Max), vec![i32::MIN]);
    assert_eq!(int_reduce(ReduceOp::Min), vec![i32::MAX]);
}

#[test]
fn sums_of_negative_zeros_keep_the_sign_and_i32_sums_wrap() {
    let kernel = reduce_kernel(ReduceOp::Sum, DType::F64, &Shape::new([2]), &[0], false);
    let got = f64s(&run_one(&kernel, &[Array::from_slice(&[-0.0f64, -0.0])]));
    assert_eq!(got[0].to_bits(), (-0.0f64).to_bits());
    let kernel = reduce_kernel(ReduceOp::Sum, DType::I32, &Shape::new([3]), &[0], false);
    let got = i32s(&run_one(&kernel, &[Array::from_slice(&[i32::MAX, 1, 1])]));
    assert_eq!(got, vec![i32::MIN + 1]);
}

// ---------------------------------------------------------------------------------------------
// Outputs and modes

#[test]
fn multiple_outputs_come_back_in_declaration_order() {
    let mut builder = Builder::new("two_outputs");
    let x = builder.input("x", TensorType::new(DType::F64, [3])).unwrap();
    let total = builder.reduce_all(ReduceOp::Sum, x).unwrap();
    let doubled = builder.binary(BinaryOp::Add, x, x).unwrap();
    builder.output("doubled", doubled).unwrap();
    builder.output("total", total).unwrap();
    builder.output("x_again", x).unwrap();
    let kernel = builder.finish().unwrap();
    let outputs = run(&kernel, &[Array::from_slice(&[1.0f64, 2.0, 4.0])], Mode::Native);
    assert_eq!(outputs.len(), 3);
    assert_eq!(f64s(&outputs[0]), vec![2.0, 4.0, 8.0]);
    assert_eq!(outputs[1].shape(), &Shape::scalar());
    assert_eq!(f64s(&outputs[1]), vec![7.0]);
    assert_eq!(f64s(&outputs[2]), vec![1.0, 2.0, 4.0]);
}

#[test]
fn oracle_mode_computes_f32_kernels_in_f64_without_rounding() {
    let mut builder = Builder::new("oracle");
    let x = builder.input("x", TensorType::new(DType::F32, [3])).unwrap();
    let tiny = builder.scalar(Scalar::F32(2f32.powi(-30)));
    let sum = builder.binary(BinaryOp::Add, x, tiny).unwrap();
    let third = builder.input("third", TensorType::new(DType::F64, [])).unwrap();
    let narrowed = builder.cast(third, DType::F32).unwrap();
    let count = builder.input("count", TensorType::new(DType::I32, [3])).unwrap();
    let positive = builder.compare(CmpOp::Gt, sum, tiny).unwrap();
    builder.output("sum", sum).unwrap();
    builder.output("narrowed", narrowed).unwrap();
    builder.output("count", count).unwrap();
    builder.output("positive", positive).unwrap();
    let kernel = builder.finish().unwrap();

    let inputs = [
        Array::from_slice(&[1.0f32, 0.1, -1.0]),
        Array::scalar(Scalar::F64(1.0 / 3.0)),
        Array::from_slice(&[1, 2, 3]),
    ];
    let native = run(&kernel, &inputs, Mode::Native);
    let oracle = run(&kernel, &inputs, Mode::Oracle);

    // Native: f32 throughout; 1 + 2^-30 rounds to 1.
    assert_eq!(native[0].dtype(), DType::F32);
    assert_eq!(
        f32s(&native[0]),
        vec![1.0, 0.1f32 + 2f32.powi(-30), -1.0 + 2f32.powi(-30)]
    );
    assert_eq!(f32s(&native[1]), vec![(1.0f64 / 3.0) as f32]);
    // Oracle: every f32 value held as f64, inputs widened exactly, no rounding to f32.
    assert_eq!(oracle[0].dtype(), DType::F64);
    assert_eq!(
        f64s(&oracle[0]),
        vec![
            1.0 + 2f64.powi(-30),
            f64::from(0.1f32) + 2f64.powi(-30),
            -1.0 + 2f64.powi(-30)
        ]
    );
    assert_ne!(f64s(&oracle[0])[0], f64::from(f32s(&native[0])[0]));
    assert_eq!(f64s(&oracle[1]), vec![1.0 / 3.0]);
    // i32 and bool values are the same in both modes.
    assert_eq!(oracle[2], native[2]);
    assert_eq!(oracle[3], native[3]);
    assert_eq!(bools(&oracle[3]), vec![true, true, false]);
}

#[test]
fn oracle_mode_widens_reductions_and_casts_to_integers() {
    let mut builder = Builder::new("oracle_reduce");
    let x = builder.input("x", TensorType::new(DType::F32, [5])).unwrap();
    let total = builder.reduce_all(ReduceOp::Sum, x).unwrap();
    let mean = builder.reduce_all(ReduceOp::Mean, x).unwrap();
    let as_int = builder.cast(total, DType::I32).unwrap();
    builder.output("total", total).unwrap();
    builder.output("mean", mean).unwrap();
    builder.output("as_int", as_int).unwrap();
    let kernel = builder.finish().unwrap();
    let inputs = [Array::from_slice(&[16_777_216.0f32, 1.0, 1.0, 1.0, 1.0])];
    let native = run(&kernel, &inputs, Mode::Native);
    let oracle = run(&kernel, &inputs, Mode::Oracle);
    assert_eq!(f32s(&native[0]), vec![16_777_216.0]);
    assert_eq!(f64s(&oracle[0]), vec![16_777_220.0]);
    assert_eq!(f64s(&oracle[1]), vec![16_777_220.0 / 5.0]);
    assert_eq!(i32s(&native[2]), vec![16_777_216]);
    assert_eq!(i32s(&oracle[2]), vec![16_777_220]);
}

// ---------------------------------------------------------------------------------------------
// Input validation

fn two_input_kernel() -> Kernel {
    binary_kernel(BinaryOp::Add, DType::F32, &Shape::new([2]), &Shape::new([2]))
}

#[test]
fn wrong_number_of_inputs_is_an_arity_error() {
    let kernel = two_input_kernel();
    let one = Array::from_slice(&[1.0f32, 2.0]);
    let err = run_hir(&kernel, &[one.view()], Mode::Native).unwrap_err();
    assert!(
        matches!(
            err,
            InterpError::Arity {
                expected: 2,
                found: 1
            }
        ),
        "{err:?}"
    );
    let err = run_hir(&kernel, &[one.view(), one.view(), one.view()], Mode::Native).unwrap_err();
    assert!(
        matches!(
            err,
            InterpError::Arity {
                expected: 2,
                found: 3
            }
        ),
        "{err:?}"
    );
}

#[test]
fn wrong_input_dtype_is_an_input_dtype_error() {
    let kernel = two_input_kernel();
    let good = Array::from_slice(&[1.0f32, 2.0]);
    let wrong = Array::from_slice(&[1.0f64, 2.0]);
    let err = run_hir(&kernel, &[good.view(), wrong.view()], Mode::Oracle).unwrap_err();
    match err {
        InterpError::InputDType {
            name,
            expected,
            found,
        } => {
            assert_eq!((name.as_str(), expected, found), ("b", DType::F32, DType::F64));
        }
        other => panic!("expected InputDType, got {other:?}"),
    }
}

#[test]
fn wrong_input_shape_is_an_input_shape_error() {
    let kernel = two_input_kernel();
    let good = Array::from_slice(&[1.0f32, 2.0]);
    let values = [1.0f32, 2.0];
    let wrong_shape = Shape::new([1, 2]);
    let wrong = ArrayView::new(&wrong_shape, &values).unwrap();
    let err = run_hir(&kernel, &[wrong, good.view()], Mode::Native).unwrap_err();
    match err {
        InterpError::InputShape {
            name,
            expected,
            found,
        } => {
            assert_eq!(name, "a");
            assert_eq!(expected, Shape::new([2]));
            assert_eq!(found, wrong_shape);
        }
        other => panic!("expected InputShape, got {other:?}"),
    }
}

#[test]
fn a_malformed_kernel_is_an_error_not_a_panic() {
    // Operand %5 does not exist; the node claims to be an f32 sin of it.
    let ty = TensorType::new(DType::F32, [2]);
    let nodes = vec![
        Node {
            op: Op::Input { name: "x".into() },
            args: vec![],
            ty: ty.clone(),
        },
        Node {
            op: Op::Unary(UnaryOp::Sin),
            args: vec![ValueId::new(5)],
            ty: ty.clone(),
        },
    ];
    let kernel = Kernel::from_parts(
        "broken",
        nodes,
        vec![Output {
            name: "out".into(),
            value: ValueId::new(1),
        }],
    );
    let x = Array::from_slice(&[1.0f32, 2.0]);
    let err = run_hir(&kernel, &[x.view()], Mode::Native).unwrap_err();
    assert!(matches!(err, InterpError::InvalidHir(_)), "{err:?}");

    // A node typed i32 whose operand is f32, and an output naming a value that does not exist.
    let nodes = vec![
        Node {
            op: Op::Input { name: "x".into() },
            args: vec![],
            ty: ty.clone(),
        },
        Node {
            op: Op::Binary(BinaryOp::Add),
            args: vec![ValueId::new(0), ValueId::new(0)],
            ty: TensorType::new(DType::I32, [2]),
        },
    ];
    let kernel = Kernel::from_parts(
        "mistyped",
        nodes.clone(),
        vec![Output {
            name: "out".into(),
            value: ValueId::new(1),
        }],
    );
    assert!(matches!(
        run_hir(&kernel, &[x.view()], Mode::Native),
        Err(InterpError::InvalidHir(_))
    ));
    let kernel = Kernel::from_parts(
        "dangling",
        nodes,
        vec![Output {
            name: "out".into(),
            value: ValueId::new(9),
        }],
    );
    assert!(run_hir(&kernel, &[x.view()], Mode::Native).is_err());

    // Elements that the declared shape does not hold: a reduce whose result shape is wrong.
    let nodes = vec![
        Node {
            op: Op::Input { name: "x".into() },
            args: vec![],
            ty: ty.clone(),
        },
        Node {
            op: Op::Reduce {
                op: ReduceOp::Sum,
                axes: vec![3],
                keepdims: false,
            },
            args: vec![ValueId::new(0)],
            ty: TensorType::new(DType::F32, [7]),
        },
    ];
    let kernel = Kernel::from_parts(
        "bad_reduce",
        nodes,
        vec![Output {
            name: "out".into(),
            value: ValueId::new(1),
        }],
    );
    assert!(run_hir(&kernel, &[x.view()], Mode::Native).is_err());
}

#[test]
fn iota_counts_along_its_axis_in_every_numeric_dtype() {
    for dtype in [DType::F32, DType::F64, DType::I32] {
        let mut b = Builder::new("k");
        let rows = b.iota(dtype, [2, 3], 0).unwrap();
        let cols = b.iota(dtype, [2, 3], 1).unwrap();
        b.output("rows", rows).unwrap();
        b.output("cols", cols).unwrap();
        let kernel = b.finish().unwrap();
        let out = run(&kernel, &[], Mode::Native);
        let as_f64 = |a: &Array| (0..6).map(|i| a.get(i).unwrap().to_f64()).collect::<Vec<_>>();
        assert_eq!(as_f64(&out[0]), [0.0, 0.0, 0.0, 1.0, 1.0, 1.0], "{dtype}");
        assert_eq!(as_f64(&out[1]), [0.0, 1.0, 2.0, 0.0, 1.0, 2.0], "{dtype}");
        assert_eq!(out[0].dtype(), dtype);
    }
}

#[test]
fn transpose_moves_every_element_to_its_permuted_index() {
    // x[i, j, k] = 100 i + 10 j + k, so every value names its own index.
    let shape = [2, 3, 4];
    let values: Vec<f32> = (0..24)
        .map(|n| (100 * (n / 12) + 10 * (n / 4 % 3) + n % 4) as f32)
        .collect();
    let x = Array::from_vec(shape, values).unwrap();
    for perm in [[0, 1, 2], [2, 0, 1], [1, 2, 0], [2, 1, 0], [0, 2, 1]] {
        let mut b = Builder::new("k");
        let input = b.input("x", TensorType::new(DType::F32, shape)).unwrap();
        let t = b.transpose(input, &perm).unwrap();
        b.output("t", t).unwrap();
        let kernel = b.finish().unwrap();
        let out = run_one(&kernel, std::slice::from_ref(&x));
        let dims: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        assert_eq!(out.shape().dims(), &dims[..]);
        let got = f32s(&out);
        let mut n = 0;
        for a in 0..dims[0] {
            for c in 0..dims[1] {
                for d in 0..dims[2] {
                    // Result index (a, c, d) reads x at j with j[perm[i]] = idx[i].
                    let mut j = [0; 3];
                    for (i, &v) in [a, c, d].iter().enumerate() {
                        j[perm[i]] = v;
                    }
                    let want = (100 * j[0] + 10 * j[1] + j[2]) as f32;
                    assert_eq!(got[n], want, "perm {perm:?} at {a},{c},{d}");
                    n += 1;
                }
            }
        }
    }
}

/// A literal matrix times an input vector (a broadcast product summed over the columns) and
/// the literal transposed, against values worked out by hand.
#[test]
fn literals_hold_their_values_in_every_mode() {
    let mut b = Builder::new("k");
    let x = b.input("x", TensorType::new(DType::F32, [3])).unwrap();
    let m = b.literal(&array([2, 3], vec![1.0f32, 2.0, 3.0, -1.0, 0.5, 0.25]));
    let prod = b.binary(BinaryOp::Mul, m, x).unwrap();
    let y = b.reduce(ReduceOp::Sum, prod, &[1], false).unwrap();
    let t = b.transpose(m, &[1, 0]).unwrap();
    let n = b.literal(&array([2], vec![3i32, -4]));
    b.output("y", y).unwrap();
    b.output("t", t).unwrap();
    b.output("n", n).unwrap();
    let kernel = b.finish().unwrap();
    let x = array([3], vec![2.0f32, -1.0, 4.0]);
    for mode in [Mode::Native, Mode::Oracle] {
        let out = run(&kernel, std::slice::from_ref(&x), mode);
        // [1*2 + 2*-1 + 3*4, -1*2 + 0.5*-1 + 0.25*4]
        assert_eq!(out[0].to_f64_vec(), vec![12.0, -1.5], "{mode:?}");
        assert_eq!(
            out[1].to_f64_vec(),
            vec![1.0, -1.0, 2.0, 0.5, 3.0, 0.25],
            "{mode:?}"
        );
        assert_eq!(out[2].to_f64_vec(), vec![3.0, -4.0], "{mode:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Windows and paddings

#[test]
fn slice_reads_a_window_and_pad_places_its_operand_in_zeros() {
    // x = [[0, 1, 2, 3], [10, 11, 12, 13], [20, 21, 22, 23]] (i32 and f64).
    let values: Vec<i32> = (0..3).flat_map(|r| (0..4).map(move |c| 10 * r + c)).collect();
    for dtype in [DType::I32, DType::F64] {
        let mut b = Builder::new("windows");
        let x = b.input("x", TensorType::new(dtype, [3, 4])).unwrap();
        let s = b.slice(x, &[1, 2], [2, 2]).unwrap();
        let p = b.pad(s, &[1, 0], [4, 3]).unwrap();
        let row = b.slice(x, &[2, 0], [1, 4]).unwrap();
        b.output("s", s).unwrap();
        b.output("p", p).unwrap();
        b.output("row", row).unwrap();
        let kernel = b.finish().unwrap();
        let x = match dtype {
            DType::I32 => array([3, 4], values.clone()),
            _ => array([3, 4], values.iter().map(|&v| f64::from(v)).collect::<Vec<f64>>()),
        };
        let out = run(&kernel, &[x], Mode::Native);
        let as_f64 =
            |a: &Array| -> Vec<f64> { (0..a.data().len()).map(|i| a.get(i).unwrap().to_f64()).collect() };
        assert_eq!(as_f64(&out[0]), [12.0, 13.0, 22.0, 23.0], "{dtype}");
        assert_eq!(
            as_f64(&out[1]),
            [0.0, 0.0, 0.0, 12.0, 13.0, 0.0, 22.0, 23.0, 0.0, 0.0, 0.0, 0.0],
            "{dtype}"
        );
        assert_eq!(as_f64(&out[2]), [20.0, 21.0, 22.0, 23.0], "{dtype}");
        // The zeros are positive zeros.
        if dtype == DType::F64 {
            assert!(f64s(&out[1]).iter().all(|v| v.to_bits() != (-0.0f64).to_bits()));
        }
    }
    // A bool pad fills with `false`; an empty window is empty.
    let mut b = Builder::new("bools");
    let x = b.input("x", TensorType::new(DType::Bool, [2])).unwrap();
    let p = b.pad(x, &[2], [5]).unwrap();
    let e = b.slice(x, &[2], [0]).unwrap();
    b.output("p", p).unwrap();
    b.output("e", e).unwrap();
    let out = run(
        &b.finish().unwrap(),
        &[array([2], vec![true, true])],
        Mode::Native,
    );
    assert_eq!(bools(&out[0]), [false, false, true, true, false]);
    assert_eq!(out[1].data().len(), 0);
}

#[test]
fn gather_reads_the_table_at_the_clamped_truncated_index() {
    // table = [[1, 2, 3], [4, 5, 6]] (f32); along axis 1, row r reads its own row.
    let mut b = Builder::new("lookup");
    let table = b.input("table", TensorType::new(DType::F32, [2, 3])).unwrap();
    let index = b.input("index", TensorType::new(DType::I32, [2, 4])).unwrap();
    let out = b.gather(table, index, 1).unwrap();
    b.output("out", out).unwrap();
    let kernel = b.finish().unwrap();
    let table_values = array([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let index_values = array([2, 4], vec![2, -1, 7, 0, 1, i32::MIN, i32::MAX, 2]);
    let out = run_one(&kernel, &[table_values.clone(), index_values]);
    assert_eq!(out.shape(), &Shape::new([2, 4]));
    assert_eq!(f32s(&out), [3.0, 1.0, 3.0, 1.0, 5.0, 4.0, 6.0, 6.0]);

    // Along axis 0 by an f64 index: truncated toward zero, NaN and the negatives read row 0,
    // infinities and large values the last row.
    let mut b = Builder::new("rows");
    let table = b.input("table", TensorType::new(DType::F32, [2, 3])).unwrap();
    let index = b.input("index", TensorType::new(DType::F64, [4, 3])).unwrap();
    let out = b.gather(table, index, 0).unwrap();
    b.output("out", out).unwrap();
    let kernel = b.finish().unwrap();
    let index_values = array(
        [4, 3],
        vec![
            0.99,
            1.0,
            -0.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e300,
            -1e300,
            -0.0,
            1.5,
            0.5,
            2.0,
        ],
    );
    let out = run_one(&kernel, &[table_values, index_values]);
    assert_eq!(
        f32s(&out),
        [1.0, 5.0, 3.0, 1.0, 5.0, 3.0, 4.0, 2.0, 3.0, 4.0, 2.0, 6.0]
    );

    // A bool table by an f32 index.
    let mut b = Builder::new("flags");
    let table = b.input("table", TensorType::new(DType::Bool, [3])).unwrap();
    let index = b.input("index", TensorType::new(DType::F32, [4])).unwrap();
    let out = b.gather(table, index, 0).unwrap();
    b.output("out", out).unwrap();
    let kernel = b.finish().unwrap();
    let out = run_one(
        &kernel,
        &[
            array([3], vec![false, true, false]),
            array([4], vec![1.7f32, 2.2, f32::NAN, 1.0]),
        ],
    );
    assert_eq!(bools(&out), [true, false, false, true]);
}
