//! Conformance of the HIR reference interpreter with an independent oracle: NumPy.
//!
//! `tests/data/oracle.json` (NumPy 2.4.6, see `tests/data/README.md`) holds, for every float
//! elementwise op and reduction, inputs (special values first, then random ones), NumPy's result
//! in the case's dtype (`out`) and the float64 result from the same inputs (`ref`).
//!
//! [`Mode::Native`] is checked as follows:
//! - the exactly-rounded ops ([`EXACT_OPS`]) and the `max`/`min` reductions must match `out`
//!   bit for bit (any NaN matches any NaN);
//! - the other unary and binary ops must be within [`native_ulp_bound`] ULPs (counted in the
//!   case's dtype) of `ref`, and their special-value pattern (NaN, ±Inf, finite) must equal the
//!   pattern of `ref` rounded to the case's dtype;
//! - `sum` and `mean` use the forward error bound of sequential summation: with `n` reduced
//!   elements and unit roundoff `u` (2^-24 for f32, 2^-53 for f64),
//!   `|sum - ref| <= (n - 1) · u · Σ|x|` and `|mean - ref| <= n · u · mean(|x|)`; `prod` within
//!   `n` ULPs of `ref`.
//!
//! [`Mode::Oracle`] computes in f64 from the same inputs as `ref`, so it must match `ref` bit for
//! bit on the exactly-rounded ops, within [`oracle_ulp_bound`] f64 ULPs on the others (NumPy's
//! own f64 transcendentals differ from glibc's in the last bit), and within the same summation
//! bound with `u = 2^-53` on reductions (NumPy sums pairwise, the interpreter sequentially).
//!
//! Each test prints the largest error it observed per op and dtype (`cargo test -- --nocapture`).

// The helpers below unwrap fields of the checked-in JSON: a malformed file is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use rfx_ir::hir::{Builder, Kernel};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::{Array, ArrayData, BinaryOp, CmpOp, DType, ReduceOp, Scalar, Shape, TensorType, UnaryOp};
use serde_json::Value;

/// Ops whose result is exactly rounded (or exact): `out` must match bit for bit.
const EXACT_OPS: &[&str] = &[
    "add",
    "sub",
    "mul",
    "div",
    "sqrt",
    "lt",
    "le",
    "gt",
    "ge",
    "eq",
    "ne",
    "select",
    "clamp",
    "min",
    "max",
    "abs",
    "neg",
    "floor",
    "ceil",
    "round",
    "fmod",
    "sign",
    "recip",
    "reduce_max",
    "reduce_min",
];

/// The largest error, in ULPs of the case's dtype, allowed between a native result and `ref`
/// for the ops that are not exactly rounded (reductions have their own bounds).
///
/// Observed on x86-64 glibc (the numbers printed by these tests): f32 transcendentals are within
/// 0.86 ULP of the f64 reference except `tanh` (1.41); `rsqrt = 1/sqrt(x)` rounds twice (1.14);
/// `sigmoid = 1/(1+exp(-x))` rounds four times (see [`SUBNORMAL_SLACK_OPS`] for its underflow).
/// f64 results are within 1.0 ULP of NumPy's float64 (whose own libraries differ from glibc's).
fn native_ulp_bound(op: &str, dtype: DType) -> f64 {
    match (op, dtype) {
        ("tanh" | "sigmoid", DType::F32) => 2.5,
        ("rsqrt", DType::F32) => 1.5,
        (_, DType::F32) => 1.0,
        _ => 1.5,
    }
}

/// The largest error, in f64 ULPs, allowed between an oracle-mode result and `ref` for the ops
/// that are not exactly rounded: glibc's and NumPy's float64 libraries differ by up to 2 ULPs
/// (observed for `tanh` and `sigmoid`), 1 ULP for the rest.
fn oracle_ulp_bound(_op: &str) -> f64 {
    2.5
}

/// Ops allowed an absolute error of the dtype's smallest normal where the reference is below
/// it: `sigmoid(x) = 1/(1+exp(-x))` computed in f32 overflows `exp(-x)` for `x < -88.7` and
/// gives 0 where the true value is an f32 subnormal (down to `x ≈ -103.3`).
const SUBNORMAL_SLACK_OPS: &[&str] = &["sigmoid"];

/// One decoded oracle case.
struct Case {
    op: String,
    dtype: DType,
    attrs: Value,
    inputs: Vec<Array>,
    out_shape: Shape,
    /// NumPy's result in the case's dtype (bools for comparisons).
    out: Vec<Scalar>,
    /// The float64 result (bools for comparisons).
    reference: Vec<Scalar>,
}

fn load_cases() -> Vec<Case> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/oracle.json");
    let text = std::fs::read_to_string(path).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["cases"].as_array().unwrap().iter().map(decode_case).collect()
}

fn decode_case(case: &Value) -> Case {
    let op = case["op"].as_str().unwrap().to_string();
    let dtype = DType::from_name(case["dtype"].as_str().unwrap()).unwrap();
    let shape = decode_shape(&case["shape"]);
    let raw_inputs = case["inputs"].as_array().unwrap();
    let input_shapes = match case.get("input_shapes") {
        Some(shapes) => shapes.as_array().unwrap().iter().map(decode_shape).collect(),
        None => vec![shape.clone(); raw_inputs.len()],
    };
    let inputs = raw_inputs
        .iter()
        .zip(input_shapes)
        .map(|(values, input_shape)| {
            let scalars = decode_values(values, dtype);
            let input_dtype = scalars.first().map_or(dtype, |s| s.dtype());
            Array::new(
                input_shape,
                ArrayData::from_scalars(input_dtype, scalars).unwrap(),
            )
            .unwrap()
        })
        .collect();
    let out_shape = case.get("out_shape").map_or(shape, decode_shape);
    Case {
        attrs: case.get("attrs").cloned().unwrap_or(Value::Null),
        out: decode_values(&case["out"], dtype),
        reference: decode_values(&case["ref"], DType::F64),
        op,
        dtype,
        inputs,
        out_shape,
    }
}

fn decode_shape(value: &Value) -> Shape {
    Shape::new(
        value
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect::<Vec<_>>(),
    )
}

/// Decodes a list of hex bit patterns in `dtype`, or of JSON booleans.
fn decode_values(value: &Value, dtype: DType) -> Vec<Scalar> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|item| match item {
            Value::Bool(b) => Scalar::Bool(*b),
            Value::String(hex) => {
                let bits = u64::from_str_radix(hex, 16).unwrap();
                match dtype {
                    DType::F32 => Scalar::F32(f32::from_bits(u32::try_from(bits).unwrap())),
                    DType::F64 => Scalar::F64(f64::from_bits(bits)),
                    other => panic!("unexpected dtype {other} in the oracle"),
                }
            }
            other => panic!("unexpected JSON value {other}"),
        })
        .collect()
}

/// Builds the one-op kernel a case describes.
fn build_kernel(case: &Case) -> Kernel {
    let mut builder = Builder::new("oracle_case");
    let names = ["a", "b", "c"];
    let inputs = case
        .inputs
        .iter()
        .zip(names)
        .map(|(input, name)| {
            builder
                .input(
                    name,
                    TensorType {
                        dtype: input.dtype(),
                        shape: input.shape().clone(),
                    },
                )
                .unwrap()
        })
        .collect::<Vec<_>>();
    let op = case.op.as_str();
    let result = if let Some(reduce_name) = op.strip_prefix("reduce_") {
        let reduce = ReduceOp::from_name(reduce_name).unwrap();
        let (axes, keepdims) = reduce_attrs(case);
        builder.reduce(reduce, inputs[0], &axes, keepdims).unwrap()
    } else if op == "select" {
        builder.select(inputs[0], inputs[1], inputs[2]).unwrap()
    } else if op == "clamp" {
        let lo = builder.scalar(Scalar::from_f64(case.dtype, case.attrs["lo"].as_f64().unwrap()));
        let hi = builder.scalar(Scalar::from_f64(case.dtype, case.attrs["hi"].as_f64().unwrap()));
        builder.clamp(inputs[0], lo, hi).unwrap()
    } else if let Some(unary) = UnaryOp::from_name(op) {
        builder.unary(unary, inputs[0]).unwrap()
    } else if let Some(binary) = BinaryOp::from_name(op) {
        builder.binary(binary, inputs[0], inputs[1]).unwrap()
    } else if let Some(cmp) = CmpOp::from_name(op) {
        builder.compare(cmp, inputs[0], inputs[1]).unwrap()
    } else {
        panic!("unknown oracle op `{op}`")
    };
    builder.output("out", result).unwrap();
    builder.finish().unwrap()
}

fn run_kernel(kernel: &Kernel, inputs: &[Array], mode: Mode) -> Array {
    let views = inputs.iter().map(Array::view).collect::<Vec<_>>();
    let mut outputs = run_hir(kernel, &views, mode).unwrap();
    assert_eq!(outputs.len(), 1);
    outputs.remove(0)
}

/// For `sum` and `mean`: `Σ|x|` (or `mean(|x|)`) per output element, computed in oracle mode; the
/// scale of the summation error bound.
fn abs_scale(case: &Case) -> Vec<f64> {
    let reduce_name = case.op.strip_prefix("reduce_").unwrap();
    let mut builder = Builder::new("abs_scale");
    let x = builder
        .input(
            "a",
            TensorType {
                dtype: case.dtype,
                shape: case.inputs[0].shape().clone(),
            },
        )
        .unwrap();
    let abs = builder.unary(UnaryOp::Abs, x).unwrap();
    let (axes, keepdims) = reduce_attrs(case);
    let reduce = ReduceOp::from_name(reduce_name).unwrap();
    let scale = builder.reduce(reduce, abs, &axes, keepdims).unwrap();
    builder.output("scale", scale).unwrap();
    let kernel = builder.finish().unwrap();
    run_kernel(&kernel, &case.inputs, Mode::Oracle).to_f64_vec()
}

/// A reduction case's reduced axes and whether it keeps them.
fn reduce_attrs(case: &Case) -> (Vec<usize>, bool) {
    let axes = case.attrs["axes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_u64().unwrap() as usize)
        .collect();
    (axes, case.attrs["keepdims"].as_bool().unwrap())
}

/// The number of reduced elements per output of a reduction case.
fn reduced_count(case: &Case) -> usize {
    case.inputs[0].shape().numel() / case.out_shape.numel().max(1)
}

/// `|a - b|` in ULPs of `dtype` at the magnitude of `b` (the reference), as a fraction: 0.5 is
/// the error of a correctly rounded result at worst. Two NaNs are 0 apart; equal values
/// (infinities included, and `0 == -0`) are 0 apart; a NaN or infinity against anything else is
/// infinitely far.
fn ulp_diff(a: f64, b: f64, dtype: DType) -> f64 {
    if a.is_nan() && b.is_nan() || a == b {
        return 0.0;
    }
    if !a.is_finite() || !b.is_finite() {
        return f64::INFINITY;
    }
    let (mantissa_bits, min_exponent, max_exponent) = match dtype {
        DType::F32 => (23, -126, 127),
        _ => (52, -1022, 1023),
    };
    // The binary exponent of |b| (f64 subnormals are far below every dtype's range we care about).
    let exponent = (((b.to_bits() >> 52) & 0x7ff) as i32 - 1023).clamp(min_exponent, max_exponent);
    let ulp = 2f64.powi(exponent - mantissa_bits);
    (a - b).abs() / ulp
}

/// The classification that must match exactly: NaN, +Inf, -Inf or finite.
fn special_class(value: f64) -> &'static str {
    if value.is_nan() {
        "nan"
    } else if value == f64::INFINITY {
        "+inf"
    } else if value == f64::NEG_INFINITY {
        "-inf"
    } else {
        "finite"
    }
}

/// Rounds a f64 reference to `dtype` (the value an exact computation in `dtype` would give).
fn round_to(value: f64, dtype: DType) -> f64 {
    match dtype {
        DType::F32 => f64::from(value as f32),
        _ => value,
    }
}

/// Bit equality with any NaN matching any NaN.
fn same_bits(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) => x.is_nan() && y.is_nan() || x.to_bits() == y.to_bits(),
        (Scalar::F64(x), Scalar::F64(y)) => x.is_nan() && y.is_nan() || x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// The largest errors seen for one op and dtype.
#[derive(Default)]
struct ErrorSummary {
    cases: usize,
    elements: usize,
    max_ulp: f64,
    /// For `sum`/`mean`: the largest `|err| / (u · Σ|x|)` (or `/ (u · mean|x|)`).
    max_summation_units: f64,
    /// Elements accepted by the [`SUBNORMAL_SLACK_OPS`] rule instead of the ULP bound.
    subnormal_slack_used: usize,
}

fn print_summary(title: &str, summary: &BTreeMap<(String, DType), ErrorSummary>) {
    eprintln!("{title}: max error per op (ULPs of the case dtype; sum/mean also in units of u·Σ|x|)");
    for ((op, dtype), stats) in summary {
        let units = if stats.max_summation_units > 0.0 || op == "reduce_sum" || op == "reduce_mean" {
            format!("  summation units {:.3}", stats.max_summation_units)
        } else {
            String::new()
        };
        let slack = if stats.subnormal_slack_used > 0 {
            format!(
                "  ({} subnormal result(s) within one smallest normal)",
                stats.subnormal_slack_used
            )
        } else {
            String::new()
        };
        eprintln!(
            "  {op:<14} {dtype}  cases {:>2}  elements {:>4}  max ulp {:.3}{units}{slack}",
            stats.cases, stats.elements, stats.max_ulp
        );
    }
}

/// Checks one result against the case, recording errors and pushing failure messages.
fn check_case(case: &Case, mode: Mode, result: &Array, stats: &mut ErrorSummary, failures: &mut Vec<String>) {
    let label = format!("{} {} {:?} attrs={}", case.op, case.dtype, mode, case.attrs);
    let expected_dtype = match (mode, case.out.first().map(|s| s.dtype())) {
        (_, Some(DType::Bool)) => DType::Bool,
        (Mode::Oracle, _) => DType::F64,
        (Mode::Native, _) => case.dtype,
    };
    if result.dtype() != expected_dtype || result.shape() != &case.out_shape {
        failures.push(format!("{label}: got {}{}", result.dtype(), result.shape()));
        return;
    }
    // In oracle mode every value is an f64 computed from the same inputs as `ref`.
    let (expected, error_dtype) = match mode {
        Mode::Native => (&case.out, case.dtype),
        Mode::Oracle => (&case.reference, DType::F64),
    };
    let is_exact = EXACT_OPS.contains(&case.op.as_str());
    let is_summation = matches!(case.op.as_str(), "reduce_sum" | "reduce_mean");
    let scale = if is_summation { abs_scale(case) } else { Vec::new() };
    let count = if case.op.starts_with("reduce_") {
        reduced_count(case)
    } else {
        1
    };
    let unit_roundoff = match error_dtype {
        DType::F32 => f64::from(f32::EPSILON) / 2.0,
        _ => f64::EPSILON / 2.0,
    };
    stats.cases += 1;
    stats.elements += case.out.len();
    let mut case_failures = 0;
    for index in 0..case.out.len() {
        let got = result.get(index).unwrap();
        let mut fail = |message: String| {
            case_failures += 1;
            if case_failures <= 5 {
                failures.push(format!("{label} element {index}: {message}"));
            }
        };
        if is_exact || got.dtype() == DType::Bool {
            if !same_bits(got, expected[index]) {
                fail(format!("got {got}, expected {} exactly", expected[index]));
            }
            continue;
        }
        let reference = case.reference[index].to_f64();
        let got_f64 = got.to_f64();
        let ulp = ulp_diff(got_f64, reference, error_dtype);
        if special_class(got_f64) != special_class(round_to(reference, error_dtype)) {
            fail(format!("got {got}, reference {reference}: special values differ"));
            continue;
        }
        if !round_to(reference, error_dtype).is_finite() {
            // Same NaN or infinity as the reference rounded to the dtype (an overflow to ±Inf).
            continue;
        }
        let smallest_normal = match error_dtype {
            DType::F32 => f64::from(f32::MIN_POSITIVE),
            _ => f64::MIN_POSITIVE,
        };
        if ulp > 0.0
            && SUBNORMAL_SLACK_OPS.contains(&case.op.as_str())
            && reference.abs() < smallest_normal
            && (got_f64 - reference).abs() <= smallest_normal
        {
            stats.subnormal_slack_used += 1;
            continue;
        }
        stats.max_ulp = stats.max_ulp.max(ulp);
        let within = if is_summation {
            let is_mean = case.op == "reduce_mean";
            let units = (got_f64 - reference).abs() / (unit_roundoff * scale[index]);
            let units = if units.is_nan() { 0.0 } else { units };
            stats.max_summation_units = stats.max_summation_units.max(units);
            let bound = if is_mean {
                count as f64
            } else {
                count.saturating_sub(1) as f64
            };
            units <= bound
        } else if case.op == "reduce_prod" {
            ulp <= count as f64
        } else {
            let bound = match mode {
                Mode::Native => native_ulp_bound(&case.op, case.dtype),
                Mode::Oracle => oracle_ulp_bound(&case.op),
            };
            ulp <= bound
        };
        if !within {
            fail(format!(
                "got {got}, reference {reference}: {ulp:.3} ulp is out of bounds"
            ));
        }
    }
}

fn check_all_cases(mode: Mode) {
    let cases = load_cases();
    assert_eq!(cases.len(), 178, "the oracle file changed");
    let mut summary: BTreeMap<(String, DType), ErrorSummary> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &cases {
        let kernel = build_kernel(case);
        let result = run_kernel(&kernel, &case.inputs, mode);
        let stats = summary.entry((case.op.clone(), case.dtype)).or_default();
        check_case(case, mode, &result, stats, &mut failures);
    }
    print_summary(&format!("oracle conformance, {mode:?} mode"), &summary);
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn native_mode_matches_numpy_on_every_oracle_case() {
    check_all_cases(Mode::Native);
}

#[test]
fn oracle_mode_matches_numpy_float64_reference_on_every_oracle_case() {
    check_all_cases(Mode::Oracle);
}

#[test]
fn ulp_diff_counts_units_in_the_last_place_of_the_dtype() {
    assert_eq!(ulp_diff(1.0, 1.0, DType::F32), 0.0);
    assert_eq!(ulp_diff(f64::NAN, -f64::NAN, DType::F32), 0.0);
    assert_eq!(ulp_diff(0.0, -0.0, DType::F64), 0.0);
    assert_eq!(ulp_diff(f64::INFINITY, f64::MAX, DType::F64), f64::INFINITY);
    let next_f32 = f64::from(f32::from_bits(1.0f32.to_bits() + 1));
    assert_eq!(ulp_diff(next_f32, 1.0, DType::F32), 1.0);
    assert_eq!(ulp_diff(1.0 + f64::EPSILON, 1.0, DType::F64), 1.0);
    // Subnormal spacing is the smallest subnormal.
    let two_subnormals = f64::from(f32::from_bits(2));
    assert_eq!(ulp_diff(two_subnormals, 0.0, DType::F32), 2.0);
}
