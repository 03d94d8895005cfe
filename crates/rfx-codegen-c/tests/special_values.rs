//! The libm-free exact ops of the C export (floor, ceil, round, sign, abs, sqrt, rsqrt, recip,
//! min, max, float → i32 casts) on the values where such code goes wrong: ties to even, ±0,
//! ±0.5, the edges of the integer range and of exactly representable integers, subnormals,
//! ±Inf and NaN. Compiled with every C compiler present and compared with the LIR
//! interpreter bit for bit.

mod common;

use common::{Job, check_with_every_compiler, program};
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayData, Shape};

fn f64_specials() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        3.5,
        -3.5,
        0.49999999999999994,
        -0.49999999999999994,
        1.0,
        -1.0,
        2.0,
        0.25,
        0.75,
        -0.75,
        1e-300,
        -1e-300,
        5e-324,
        -5e-324,
        2147483647.5,
        -2147483648.5,
        2147483648.0,
        -2147483649.0,
        4503599627370495.5,
        -4503599627370495.5,
        4503599627370496.0,
        9007199254740993.0,
        8388607.5,
        -8388607.5,
        8388608.0,
        8388609.0,
        16777215.0,
        1e30,
        -1e30,
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        123.456,
        -123.456,
        7.0,
        -7.0,
    ];
    for k in 0..20 {
        v.push(f64::from(k) - 9.5);
    }
    v
}

fn f32_specials() -> Vec<f32> {
    let mut v: Vec<f32> = f64_specials().iter().map(|&x| x as f32).collect();
    v.extend([
        8388607.5f32,
        -8388607.5,
        4194303.5,
        -4194304.5,
        1e-45,
        -1e-45,
        1.1754942e-38,
        f32::MAX,
        f32::MIN,
        0.49999997,
        -0.49999997,
    ]);
    v
}

/// A job of `text`'s kernel on `inputs`, checked bit for bit.
fn job(name: String, text: &str, inputs: Vec<Array>) -> Job {
    Job {
        name,
        program: program(text),
        inputs,
        ulp_bound: None,
    }
}

/// `op` applied to `x`, a vector of `dtype`.
fn unary_job(op: &str, dtype: &str, x: &Array) -> Job {
    let n = x.data().len();
    let text = format!(
        "kernel {op}_{dtype} {{\n  %x = input x : {dtype}[{n}]\n  %y = {op} %x : {dtype}[{n}]\n  output out = %y\n}}\n"
    );
    job(format!("{op} {dtype}"), &text, vec![x.clone()])
}

fn jobs() -> Vec<Job> {
    let mut jobs = Vec::new();
    for dtype in ["f32", "f64"] {
        let data = if dtype == "f32" {
            ArrayData::F32(f32_specials())
        } else {
            ArrayData::F64(f64_specials())
        };
        let n = data.len();
        let x = Array::new(Shape::new([n]), data).expect("array");
        for op in [
            "floor", "ceil", "round", "sign", "abs", "neg", "sqrt", "rsqrt", "recip",
        ] {
            jobs.push(unary_job(op, dtype, &x));
        }
        let text = format!(
            "kernel cast_{dtype} {{\n  %x = input x : {dtype}[{n}]\n  %i = cast %x : i32[{n}]\n  %b = cast %x : bool[{n}]\n  output i = %i\n  output b = %b\n}}\n"
        );
        jobs.push(job(format!("cast {dtype}"), &text, vec![x.clone()]));
        // Every pair of specials through min and max (NaN in either place).
        let values = match x.data() {
            ArrayData::F32(v) => v.iter().map(|&a| f64::from(a)).collect::<Vec<_>>(),
            ArrayData::F64(v) => v.clone(),
            _ => Vec::new(),
        };
        let (a, b): (Vec<f64>, Vec<f64>) = values
            .iter()
            .flat_map(|&a| values.iter().map(move |&b| (a, b)))
            .unzip();
        let m = a.len();
        let wrap = |v: Vec<f64>| {
            let data = if dtype == "f32" {
                ArrayData::F32(v.iter().map(|&x| x as f32).collect())
            } else {
                ArrayData::F64(v)
            };
            Array::new(Shape::new([m]), data).expect("array")
        };
        for op in ["min", "max"] {
            let text = format!(
                "kernel {op}_{dtype} {{\n  %a = input a : {dtype}[{m}]\n  %b = input b : {dtype}[{m}]\n  %y = {op} %a, %b : {dtype}[{m}]\n  output out = %y\n}}\n"
            );
            jobs.push(job(
                format!("{op} {dtype}"),
                &text,
                vec![wrap(a.clone()), wrap(b.clone())],
            ));
        }
    }
    jobs
}

#[test]
fn exact_helpers_match_the_interpreter_on_special_values() {
    let jobs = jobs();
    assert_eq!(jobs.len(), 24);
    check_with_every_compiler(&jobs, &[&[]]);
}

/// Every comparison of a value with itself, in every dtype: an integer or boolean one has a
/// known result (printed as `x >= x` it would fail GCC's `-Werror=tautological-compare`), a float
/// one stays a comparison (false for NaN).
#[test]
fn comparisons_of_a_value_with_itself_compile_and_match_the_interpreter() {
    let inputs = [
        ("i32", ArrayData::I32(vec![i32::MIN, -1, 0, 7, i32::MAX])),
        ("bool", ArrayData::Bool(vec![false, true, true, false, true])),
        (
            "f32",
            ArrayData::F32(vec![f32::NAN, -0.0, 1.5, f32::INFINITY, f32::MIN_POSITIVE]),
        ),
        (
            "f64",
            ArrayData::F64(vec![f64::NAN, 0.0, -2.5, f64::NEG_INFINITY, f64::MAX]),
        ),
    ];
    let mut jobs = Vec::new();
    for (dtype, data) in inputs {
        let x = Array::new(Shape::new([5]), data).expect("array");
        // Booleans are compared for equality only.
        let ops: &[&str] = if dtype == "bool" {
            &["eq", "ne"]
        } else {
            &["lt", "le", "gt", "ge", "eq", "ne"]
        };
        let mut text = format!("kernel selfcmp_{dtype} {{\n  %x = input x : {dtype}[5]\n");
        for op in ops {
            text.push_str(&format!("  %{op} = {op} %x, %x : bool[5]\n"));
        }
        for op in ops {
            text.push_str(&format!("  output {op} = %{op}\n"));
        }
        text.push_str("}\n");
        jobs.push(job(format!("self-compare {dtype}"), &text, vec![x]));
    }
    check_with_every_compiler(&jobs, &[&[]]);
}

/// Random bit patterns over the whole positive range (subnormals, every exponent) and the
/// specials: `sqrt` and `rsqrt` of f64 and f32.
fn sqrt_jobs() -> Vec<Job> {
    let mut rng = TestRng::new(5);
    let mut f64s = f64_specials();
    let mut f32s = f32_specials();
    for _ in 0..4000 {
        let bits = rng.next_u64();
        f64s.push(f64::from_bits(bits >> 1));
        f32s.push(f32::from_bits((bits >> 33) as u32));
    }
    let mut jobs = Vec::new();
    for (dtype, data) in [("f64", ArrayData::F64(f64s)), ("f32", ArrayData::F32(f32s))] {
        let x = Array::new(Shape::new([data.len()]), data).expect("array");
        for op in ["sqrt", "rsqrt"] {
            jobs.push(unary_job(op, dtype, &x));
        }
    }
    jobs
}

#[test]
fn the_software_square_root_is_correctly_rounded() {
    // The hardware path and the digit-by-digit path (forced), each against the interpreter.
    check_with_every_compiler(&sqrt_jobs(), &[&[], &["-DRFX_SOFT_SQRT"]]);
}

/// The unary transcendentals with a C helper, by IR name.
const UNARY_TRANSCENDENTALS: &[&str] = &["sin", "cos", "tan", "log2", "atan", "asin", "acos", "erf"];

/// Multiples of π/2 (as rounded to the dtype) and their neighbours: the reductions' hard
/// cases among small arguments.
fn near_pio2(dtype: &str) -> Vec<f64> {
    let mut v = Vec::new();
    for k in [
        1.0,
        2.0,
        3.0,
        4.0,
        5.0,
        100.0,
        1000.0,
        65536.0,
        1e6,
        1647099.0 / std::f64::consts::FRAC_PI_2,
    ] {
        let x = k * std::f64::consts::FRAC_PI_2;
        for nudge in -2i64..=2 {
            v.push(if dtype == "f32" {
                f64::from(f32::from_bits(((x as f32).to_bits() as i64 + nudge) as u32))
            } else {
                f64::from_bits((x.to_bits() as i64 + nudge) as u64)
            });
        }
    }
    v
}

/// Each unary transcendental on the specials (±0 keep their sign, ±Inf and NaN, subnormals,
/// the largest finite values, ±1 and ±1/2 at the edges of `asin`'s ranges), within 4 ULP of
/// the interpreter's `f64` oracle; `atan2` and `pow` on every pair of specials within 4 ULP, float
/// `fmod` on every pair bit for bit.
fn transcendental_jobs() -> Vec<Job> {
    let mut jobs = Vec::new();
    for dtype in ["f32", "f64"] {
        let mut values: Vec<f64> = if dtype == "f32" {
            f32_specials().iter().map(|&x| f64::from(x)).collect()
        } else {
            f64_specials()
        };
        values.extend(near_pio2(dtype));
        let wrap = |v: &[f64]| {
            let data = if dtype == "f32" {
                ArrayData::F32(v.iter().map(|&x| x as f32).collect())
            } else {
                ArrayData::F64(v.to_vec())
            };
            Array::new(Shape::new([v.len()]), data).expect("array")
        };
        let x = wrap(&values);
        for op in UNARY_TRANSCENDENTALS {
            let mut job = unary_job(op, dtype, &x);
            job.ulp_bound = Some(4);
            jobs.push(job);
        }
        let (a, b): (Vec<f64>, Vec<f64>) = values
            .iter()
            .flat_map(|&a| values.iter().map(move |&b| (a, b)))
            .unzip();
        let m = a.len();
        let text = format!(
            "kernel fmod_{dtype} {{\n  %a = input a : {dtype}[{m}]\n  %b = input b : {dtype}[{m}]\n  %y = fmod %a, %b : {dtype}[{m}]\n  output out = %y\n}}\n"
        );
        jobs.push(job(format!("fmod {dtype}"), &text, vec![wrap(&a), wrap(&b)]));
        for op in ["atan2", "pow"] {
            let text = format!(
                "kernel {op}_{dtype} {{\n  %a = input a : {dtype}[{m}]\n  %b = input b : {dtype}[{m}]\n  %y = {op} %a, %b : {dtype}[{m}]\n  output out = %y\n}}\n"
            );
            let mut pair = job(format!("{op} {dtype}"), &text, vec![wrap(&a), wrap(&b)]);
            pair.ulp_bound = Some(4);
            jobs.push(pair);
        }
    }
    jobs
}

#[test]
fn transcendentals_match_the_oracle_on_special_values() {
    check_with_every_compiler(&transcendental_jobs(), &[&[]]);
}
