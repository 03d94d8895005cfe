//! `sin`, `cos` and `tan` over their whole domain on the CPU backend: huge arguments (up to
//! `f32::MAX` / `f64::MAX`) and ±Inf mixed with ordinary ones, in every code shape a kernel can
//! take (scalar tails, vector bodies, tiles, reductions), within 4 ULP of the `f64` oracle.

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::{Array, Scalar, Shape};
use rfx_lower::ulps;
use rfx_lower::{Backend, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

const BOUND_ULPS: u64 = 4;

/// Arguments: every fourth element huge (spread over the exponent range, both signs), one
/// element ±Inf, the rest in [-10, 10].
fn arguments(n: usize, f64_range: bool) -> Vec<f64> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ n as u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n)
        .map(|i| {
            let r = next();
            let unit = (r >> 11) as f64 / (1u64 << 53) as f64;
            let sign = if r & 1 == 0 { 1.0 } else { -1.0 };
            if i % 17 == 5 {
                sign * f64::INFINITY
            } else if i % 4 == 1 {
                let max_exp = if f64_range { 1023.0 } else { 127.0 };
                sign * 2f64.powf(21.0 + unit * (max_exp - 21.0))
            } else {
                20.0 * unit - 10.0
            }
        })
        .collect()
}

fn check(op: &str, dtype: &str, n: usize, reduce: bool) {
    let body = if reduce {
        format!(" %y = {op} %x : {dtype}[{n}]\n %s = sum %y axes [0] : {dtype}[]\n output out = %s\n")
    } else {
        format!(" %y = {op} %x : {dtype}[{n}]\n output out = %y\n")
    };
    let text = format!("kernel k {{\n %x = input x : {dtype}[{n}]\n{body}}}");
    let kernel = rfx_ir::hir::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    let lir = lower(&mir, &LowerConfig::default()).expect("lower").0;
    let compiled = CpuBackend.compile(&lir, &Default::default()).expect("compile");
    let is_f64 = dtype == "f64";
    let mut values = arguments(n, is_f64);
    if reduce {
        // A sum of many terms cancels; keep the reduction's own rounding out of the bound by
        // making every term but one zero: sin/tan(0) = 0 and cos(π/2)... is not exact, so use
        // only sin and tan for reductions.
        for v in values.iter_mut().skip(1) {
            *v = 0.0;
        }
        values[0] = if is_f64 { 1.0e300 } else { 3.0e38 };
    }
    let input = if is_f64 {
        Array::from_vec(Shape::new([n]), values.clone()).expect("array")
    } else {
        Array::from_vec(
            Shape::new([n]),
            values.iter().map(|&v| v as f32).collect::<Vec<_>>(),
        )
        .expect("array")
    };
    let views = [input.view()];
    let oracle = run_hir(&kernel, &views, Mode::Oracle).expect("oracle");
    let out_ty = lir
        .outputs()
        .next()
        .map(|(_, _, t)| t.clone())
        .expect("an output");
    let mut out = Array::filled(Scalar::zero(out_ty.dtype), out_ty.shape.clone());
    {
        let mut outs = [out.view_mut()];
        compiled.run(&views, &mut outs, &mut Scratch::new()).expect("run");
    }
    for i in 0..out.data().len() {
        let want = oracle[0].get(i).map_or(f64::NAN, Scalar::to_f64);
        let got = out.get(i).map_or(f64::NAN, Scalar::to_f64);
        let d = ulps(got, want, out.dtype());
        assert!(
            d <= BOUND_ULPS,
            "{op} {dtype} n = {n}{}: element {i} (x = {:e}): oracle {want:e}, got {got:e} ({d} ULP)",
            if reduce { " (sum)" } else { "" },
            input.get(i).map_or(f64::NAN, Scalar::to_f64),
        );
    }
}

#[test]
fn trigonometric_functions_of_huge_arguments_meet_the_bound() {
    for op in ["sin", "cos", "tan"] {
        for dtype in ["f32", "f64"] {
            for n in [1, 3, 4, 7, 8, 9, 63, 100, 1000] {
                check(op, dtype, n, false);
            }
        }
    }
}

#[test]
fn reductions_of_trigonometric_functions_of_huge_arguments_meet_the_bound() {
    for op in ["sin", "tan"] {
        for dtype in ["f32", "f64"] {
            for n in [1, 5, 64, 1000] {
                check(op, dtype, n, true);
            }
        }
    }
}
