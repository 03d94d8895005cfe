//! Sweeps of the exported transcendentals: each function on a few thousand points of its
//! domain (random magnitudes over every exponent, points near multiples of π/2 and near 0,
//! the domain's edges, huge arguments), all functions in one translation unit per compiler,
//! every result within 4 ULP of the interpreter's `f64` oracle (the CPU backend's documented
//! bound); float `fmod` bit for bit with the interpreter.

mod common;

use common::{Job, check_with_every_compiler, program};
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayData, Shape};

/// Points per function and dtype.
const POINTS: usize = 3000;

fn array(dtype: &str, values: &[f64]) -> Array {
    let data = if dtype == "f32" {
        ArrayData::F32(values.iter().map(|&x| x as f32).collect())
    } else {
        ArrayData::F64(values.to_vec())
    };
    Array::new(Shape::new([values.len()]), data).expect("array")
}

/// A random finite value of magnitude `2^e` with `e` uniform in `[lo, hi)`, either sign.
fn magnitude(rng: &mut TestRng, lo: f64, hi: f64) -> f64 {
    let x = rng.uniform(lo, hi).exp2() * rng.uniform(1.0, 2.0);
    if rng.chance(0.5) { -x } else { x }
}

/// Arguments of sin, cos and tan: every magnitude up to the largest finite value of the dtype,
/// with a third of the points within a few ULP of a multiple of π/2 (exact multiples of a
/// double's π/2 rounded to the dtype, then nudged by a few ULP).
fn trig_points(rng: &mut TestRng, dtype: &str) -> Vec<f64> {
    let max_exp = if dtype == "f32" { 127.0 } else { 1023.0 };
    (0..POINTS)
        .map(|i| match i % 3 {
            0 => magnitude(rng, -30.0, max_exp),
            1 => magnitude(rng, -3.0, 24.0),
            _ => {
                let k = rng.below(1 << 20) as f64;
                let x = k * std::f64::consts::FRAC_PI_2;
                let nudge = rng.below(9) as i64 - 4;
                if dtype == "f32" {
                    f64::from(f32::from_bits(((x as f32).to_bits() as i64 + nudge) as u32))
                } else {
                    f64::from_bits((x.to_bits() as i64 + nudge) as u64)
                }
            }
        })
        .collect()
}

/// `op` of `dtype` on `points`, checked against the oracle within 4 ULP.
fn unary_sweep(op: &str, dtype: &str, points: &[f64]) -> Job {
    let n = points.len();
    let text = format!(
        "kernel {op}_{dtype} {{\n  %x = input x : {dtype}[{n}]\n  %y = {op} %x : {dtype}[{n}]\n  output out = %y\n}}\n"
    );
    Job {
        name: format!("{op} {dtype}"),
        program: program(&text),
        inputs: vec![array(dtype, points)],
        ulp_bound: Some(4),
    }
}

/// `op` of `dtype` on the pairs `(a[i], b[i])`; `ulp_bound` as in [`Job`].
fn binary_sweep(op: &str, dtype: &str, a: &[f64], b: &[f64], ulp_bound: Option<u64>) -> Job {
    let n = a.len();
    let text = format!(
        "kernel {op}_{dtype} {{\n  %a = input a : {dtype}[{n}]\n  %b = input b : {dtype}[{n}]\n  %y = {op} %a, %b : {dtype}[{n}]\n  output out = %y\n}}\n"
    );
    Job {
        name: format!("{op} {dtype}"),
        program: program(&text),
        inputs: vec![array(dtype, a), array(dtype, b)],
        ulp_bound,
    }
}

/// Pairs for `fmod`: dividends over every magnitude, divisors from far smaller (long
/// divisions) to larger than the dividend, and quotients near integers.
fn fmod_points(rng: &mut TestRng, dtype: &str) -> (Vec<f64>, Vec<f64>) {
    let max_exp = if dtype == "f32" { 127.0 } else { 1023.0 };
    let min_exp = if dtype == "f32" { -149.0 } else { -1074.0 };
    (0..POINTS)
        .map(|i| {
            let a = magnitude(rng, min_exp, max_exp);
            let b = match i % 3 {
                0 => magnitude(rng, min_exp, max_exp),
                1 => magnitude(rng, -4.0, 4.0),
                _ => a / (rng.below(1000) as f64 + 1.0),
            };
            (a, b)
        })
        .unzip()
}

/// Arguments of `log2`: every positive magnitude (subnormals included), points just around
/// 1, and a few negative ones (NaN).
fn log2_points(rng: &mut TestRng, dtype: &str) -> Vec<f64> {
    let min_exp = if dtype == "f32" { -149.0 } else { -1074.0 };
    let max_exp = if dtype == "f32" { 127.0 } else { 1023.0 };
    (0..POINTS)
        .map(|i| match i % 4 {
            0 | 1 => magnitude(rng, min_exp, max_exp).abs(),
            2 => 1.0 + rng.uniform(-1e-3, 1e-3) * rng.uniform(0.0, 1.0).powi(8),
            _ => magnitude(rng, -10.0, 10.0),
        })
        .collect()
}

/// Arguments of `asin` and `acos`: `[-1, 1]` uniformly, near ±1, ±1/2 and 0, a few outside.
fn asin_points(rng: &mut TestRng) -> Vec<f64> {
    (0..POINTS)
        .map(|i| {
            let sign = if rng.chance(0.5) { -1.0 } else { 1.0 };
            match i % 5 {
                0 | 1 => rng.uniform(-1.0, 1.0),
                2 => sign * (1.0 - rng.uniform(0.0, 1.0).powi(12)),
                3 => sign * (0.5 + rng.uniform(-1e-3, 1e-3)),
                _ => magnitude(rng, -40.0, 1.0),
            }
        })
        .collect()
}

/// Arguments of `erf`: every magnitude below 8 and each interval's edges (0.84375, 1.25,
/// 1/0.35, 6).
fn erf_points(rng: &mut TestRng) -> Vec<f64> {
    (0..POINTS)
        .map(|i| match i % 3 {
            0 => magnitude(rng, -40.0, 3.0),
            1 => rng.uniform(-7.0, 7.0),
            _ => {
                let edge = *rng.pick(&[0.84375, 1.25, 1.0 / 0.35, 6.0]).unwrap_or(&1.0);
                let x = edge + rng.uniform(-1e-6, 1e-6);
                if rng.chance(0.5) { -x } else { x }
            }
        })
        .collect()
}

/// Pairs for `atan2`: magnitudes of both operands over a wide range, with zeros, infinities
/// and ratios near 1 mixed in.
fn atan2_points(rng: &mut TestRng) -> (Vec<f64>, Vec<f64>) {
    let specials = [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, 1.0, -1.0];
    (0..POINTS)
        .map(|i| {
            let y = magnitude(rng, -60.0, 60.0);
            match i % 4 {
                0 => (y, magnitude(rng, -60.0, 60.0)),
                1 => (y, y * rng.uniform(-1.01, 1.01)),
                2 => (y, *rng.pick(&specials).unwrap_or(&0.0)),
                _ => (*rng.pick(&specials).unwrap_or(&0.0), y),
            }
        })
        .unzip()
}

/// Pairs for `pow`: bases over every magnitude with exponents that keep the result near the
/// dtype's range (large and small results, subnormal ones included), bases near 1 with large
/// exponents, negative bases with integer exponents, and small integer exponents.
fn pow_points(rng: &mut TestRng, dtype: &str) -> (Vec<f64>, Vec<f64>) {
    let max_log2 = if dtype == "f32" { 128.0 } else { 1024.0 };
    (0..POINTS)
        .map(|i| {
            let x = magnitude(rng, -60.0, 60.0).abs();
            match i % 5 {
                0 => {
                    // A target result 2^t with t over the whole range, subnormals included.
                    let t = rng.uniform(-max_log2 - 20.0, max_log2 + 2.0);
                    (x, t / x.log2())
                }
                1 => (1.0 + rng.uniform(-1e-4, 1e-4), rng.uniform(-1e5, 1e5)),
                2 => (-x, (rng.below(41) as f64) - 20.0),
                3 => (x, rng.uniform(-8.0, 8.0)),
                _ => (rng.uniform(0.0, 4.0), rng.uniform(-30.0, 30.0)),
            }
        })
        .unzip()
}

fn jobs() -> Vec<Job> {
    let mut rng = TestRng::new(47);
    let mut jobs = Vec::new();
    for dtype in ["f32", "f64"] {
        let trig = trig_points(&mut rng, dtype);
        for op in ["sin", "cos", "tan"] {
            jobs.push(unary_sweep(op, dtype, &trig));
        }
        let (a, b) = fmod_points(&mut rng, dtype);
        jobs.push(binary_sweep("fmod", dtype, &a, &b, None));
        jobs.push(unary_sweep("log2", dtype, &log2_points(&mut rng, dtype)));
        let wide: Vec<f64> = (0..POINTS).map(|_| magnitude(&mut rng, -40.0, 40.0)).collect();
        jobs.push(unary_sweep("atan", dtype, &wide));
        let unit = asin_points(&mut rng);
        jobs.push(unary_sweep("asin", dtype, &unit));
        jobs.push(unary_sweep("acos", dtype, &unit));
        jobs.push(unary_sweep("erf", dtype, &erf_points(&mut rng)));
        let (y, x) = atan2_points(&mut rng);
        jobs.push(binary_sweep("atan2", dtype, &y, &x, Some(4)));
        let (x, y) = pow_points(&mut rng, dtype);
        jobs.push(binary_sweep("pow", dtype, &x, &y, Some(4)));
    }
    jobs
}

#[test]
fn exported_transcendentals_are_within_their_bound_on_sweeps() {
    check_with_every_compiler(&jobs(), &[&[]]);
}

/// `x = 6381956970095103 * 2^797` is the double nearest a multiple of π/2 (Muller's worst
/// case for argument reduction: `x - qπ/2 ≈ 2^-60.9`). With π to 2,400 bits, `q ≡ 1 (mod 4)`
/// and `x - qπ/2 = 0x1.14ae72e6ba22fp-61` rounded, so `cos x = -sin r` rounds to its negation
/// and `sin x = cos r` to 1. (The platform libm's f64 `cos`, the interpreter's oracle, is 8 ULP
/// off here, so this point is checked against the exact value.)
#[test]
fn the_hardest_f64_reduction_gives_the_correctly_rounded_result() {
    let ccs = common::compilers();
    if ccs.is_empty() {
        eprintln!("skipped: no C compiler (gcc or clang) found");
        return;
    }
    let x = 6381956970095103.0 * 2f64.powi(797);
    let text = "kernel sincos {\n  %x = input x : f64[1]\n  %s = sin %x : f64[1]\n  %c = cos %x : f64[1]\n  output s = %s\n  output c = %c\n}\n";
    let export = rfx_codegen_c::c_source(&program(text), "sincos").expect("export");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("sincos.h"), export.header).expect("write");
    std::fs::write(dir.path().join("sincos.c"), export.source).expect("write");
    let driver = format!(
        "#include <stdio.h>\n#include <string.h>\n#include \"sincos.c\"\nint main(void) {{\n  uint64_t b = UINT64_C(0x{:016x}), sb, cb;\n  double x, s, c;\n  memcpy(&x, &b, 8);\n  if (sincos(&x, &s, &c, 0) != 0) return 1;\n  memcpy(&sb, &s, 8);\n  memcpy(&cb, &c, 8);\n  printf(\"%016llx %016llx\\n\", (unsigned long long)sb, (unsigned long long)cb);\n  return 0;\n}}\n",
        x.to_bits()
    );
    let want = format!(
        "{:016x} {:016x}",
        1f64.to_bits(),
        (-f64::from_bits(0x3c214ae72e6ba22f)).to_bits()
    );
    for cc in ccs {
        let got = common::compile_and_run(cc, &[], dir.path(), "driver", &driver);
        assert_eq!(got.trim(), want, "{cc}");
    }
}

/// GCC's vectoriser report (`-fopt-info-vec-optimized`) for `text` exported and compiled
/// with `-O3` for x86-64-v3 (AVX2), or `None` where gcc is missing or the host is not x86-64.
fn gcc_vectorizer_report(text: &str, name: &str) -> Option<String> {
    if !cfg!(target_arch = "x86_64") || !common::compilers().contains(&"gcc") {
        return None;
    }
    let export = rfx_codegen_c::c_source(&program(text), name).expect("export");
    Some(common::gcc_vectorizer_report(&export, name))
}

/// The export benchmark's `sin(x*2)+y` at 65,536 elements: GCC vectorises its loop for AVX2 in
/// f32 and f64 (the helpers are straight-line code with bit-pattern selects), and the loops of
/// the other transcendentals but `log`, `tanh` (early returns) and `fmod` (a loop per element).
#[test]
fn gcc_vectorises_elementwise_loops_of_the_straight_line_helpers() {
    let n = 65536;
    for dtype in ["f32", "f64"] {
        let mut kernels = vec![(
            "sin2".to_string(),
            format!(
                "kernel sin2 {{\n  %x = input x : {dtype}[{n}]\n  %y = input y : {dtype}[{n}]\n  %t = const 2.0 : {dtype}[]\n  %a = mul %x, %t : {dtype}[{n}]\n  %s = sin %a : {dtype}[{n}]\n  %r = add %s, %y : {dtype}[{n}]\n  output out = %r\n}}\n"
            ),
        )];
        for op in [
            "exp", "exp2", "sigmoid", "cos", "tan", "log2", "atan", "asin", "acos", "erf",
        ] {
            kernels.push((
                op.to_string(),
                format!(
                    "kernel {op} {{\n  %x = input x : {dtype}[{n}]\n  %y = {op} %x : {dtype}[{n}]\n  output out = %y\n}}\n"
                ),
            ));
        }
        for op in ["atan2", "pow"] {
            kernels.push((
                op.to_string(),
                format!(
                    "kernel {op} {{\n  %a = input a : {dtype}[{n}]\n  %b = input b : {dtype}[{n}]\n  %y = {op} %a, %b : {dtype}[{n}]\n  output out = %y\n}}\n"
                ),
            ));
        }
        for (op, text) in kernels {
            let Some(report) = gcc_vectorizer_report(&text, &format!("{op}_{dtype}")) else {
                eprintln!("skipped: needs gcc on x86-64");
                return;
            };
            assert!(report.contains("loop vectorized"), "{op} {dtype}:\n{report}");
        }
    }
}
