//! Fast math on the CPU backend: float `a * b ± c` is contracted into one fused multiply-add
//! where the CPU has FMA, and only then.
//!
//! - Without fast math the code has no `fma` and gives the LIR interpreter's bits (the
//!   conformance and differential suites check that at length; here, once more, side by side).
//! - With fast math the CLIF has `fma`, and each contracted `a * b ± c` is the correctly rounded
//!   value of the exact expression: for f32 within one ULP of the f64 oracle (the oracle rounds
//!   twice, f64 then f32); for f64 within the oracle's own product rounding plus one ULP. On random inputs some results differ from the two-step ones, which
//!   shows the contraction took effect.

use rfx_codegen_cpu::{compile, dump_with};
use rfx_ir::hir::{self, Kernel};
use rfx_ir::interp::{Mode, run_hir, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, Scalar};
use rfx_lower::{CompileOptions, Compiled, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

fn has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("fma")
    }
    #[cfg(target_arch = "aarch64")]
    {
        true
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

fn lir_of(kernel: &Kernel) -> LirProgram {
    let (mir, _) = optimize(kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

fn run(lir: &LirProgram, inputs: &[Array], fast_math: bool) -> Array {
    let options = CompileOptions {
        fast_math,
        ..CompileOptions::default()
    };
    let compiled = compile(lir, &options).expect("compile");
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let (_, _, ty) = lir.outputs().next().expect("one output");
    let mut out = Array::filled(Scalar::zero(ty.dtype), ty.shape.clone());
    compiled
        .run(&views, &mut [out.view_mut()], &mut Scratch::new())
        .expect("run");
    out
}

fn clif(lir: &LirProgram, fast_math: bool) -> String {
    let options = CompileOptions {
        fast_math,
        ..CompileOptions::default()
    };
    dump_with(lir, &options)
        .expect("dump")
        .into_iter()
        .map(|(_, clif, _)| clif)
        .collect()
}

fn ulp_f32(x: f64) -> f64 {
    let a = (x as f32).abs();
    f64::from(f32::from_bits(a.to_bits() + 1)) - f64::from(a)
}

fn ulp_f64(x: f64) -> f64 {
    f64::from_bits(x.abs().to_bits() + 1) - x.abs()
}

#[test]
fn multiply_adds_contract_to_fma_only_under_fast_math() {
    let n = 1027;
    let mut contracted_somewhere = false;
    for dtype in ["f32", "f64"] {
        for (name, expr) in [
            ("mul_add", "%p = mul %x, %y : T %o = add %p, %z : T"),
            ("add_mul", "%p = mul %x, %y : T %o = add %z, %p : T"),
            ("mul_sub", "%p = mul %x, %y : T %o = sub %p, %z : T"),
            ("sub_mul", "%p = mul %x, %y : T %o = sub %z, %p : T"),
        ] {
            let ty = format!("{dtype}[{n}]");
            let text = format!(
                "kernel {name} {{ %x = input x : {ty} %y = input y : {ty} %z = input z : {ty} {} output o = %o }}",
                expr.replace('T', &ty)
            );
            let kernel = hir::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let lir = lir_of(&kernel);
            let mut rng = TestRng::new(0xf3a + n as u64);
            let make = |rng: &mut TestRng| {
                let v: Vec<f64> = (0..n).map(|_| rng.uniform(-3.0, 3.0)).collect();
                if dtype == "f32" {
                    Array::from_vec(vec![n], v.iter().map(|&x| x as f32).collect()).expect("array")
                } else {
                    Array::from_vec(vec![n], v).expect("array")
                }
            };
            let inputs = [make(&mut rng), make(&mut rng), make(&mut rng)];
            let views: Vec<_> = inputs.iter().map(Array::view).collect();

            // Exact mode: no fma, the interpreter's bits.
            assert!(
                !clif(&lir, false).contains(" fma"),
                "{name} {dtype}: fma without fast math"
            );
            let exact_mode = run(&lir, &inputs, false);
            let interp = run_lir(&lir, &views, Mode::Native).expect("interp");
            assert_eq!(exact_mode.data(), interp[0].data(), "{name} {dtype}");

            if !has_fma() {
                println!("skipped the fast-math half of {name} {dtype}: this CPU has no FMA");
                continue;
            }
            assert!(
                clif(&lir, true).contains(" fma"),
                "{name} {dtype}: no fma under fast math\n{}",
                clif(&lir, true)
            );
            let fast = run(&lir, &inputs, true).to_f64_vec();
            let oracle = run_hir(&kernel, &views, Mode::Oracle).expect("oracle")[0].to_f64_vec();
            let two_step = exact_mode.to_f64_vec();
            let (xs, ys) = (inputs[0].to_f64_vec(), inputs[1].to_f64_vec());
            for i in 0..n {
                // For f32 the oracle's f64 product is exact; for f64 the oracle rounds the
                // product itself (half an ULP of x·y), and the fused result is the better one.
                let bound = if dtype == "f32" {
                    ulp_f32(oracle[i])
                } else {
                    ulp_f64(xs[i] * ys[i]) + ulp_f64(oracle[i])
                };
                assert!(
                    (fast[i] - oracle[i]).abs() <= bound,
                    "{name} {dtype} element {i}: fused {}, oracle {}",
                    fast[i],
                    oracle[i]
                );
                contracted_somewhere |= fast[i] != two_step[i];
            }
        }
    }
    if has_fma() {
        assert!(
            contracted_somewhere,
            "no result changed: the contraction never happened"
        );
    }
}

#[test]
fn the_fast_math_chain10_stays_close_to_the_oracle() {
    let text = "kernel chain10 { %x = input x : f32[4099] %y = input y : f32[4099] %c15 = const 1.5 : f32[] \
                %c05 = const 0.5 : f32[] %a = mul %x, %c15 : f32[4099] %b = add %a, %y : f32[4099] \
                %c = mul %b, %c05 : f32[4099] %d = sin %x : f32[4099] %e = sub %c, %d : f32[4099] \
                %f = cos %y : f32[4099] %g = mul %e, %f : f32[4099] %h = mul %x, %x : f32[4099] \
                %i = neg %h : f32[4099] %j = exp %i : f32[4099] %k = add %g, %j : f32[4099] output out = %k }";
    let kernel = hir::parse(text).expect("parse");
    let lir = lir_of(&kernel);
    let mut rng = TestRng::new(0xc10);
    let make = |rng: &mut TestRng| {
        Array::from_vec(
            vec![4099],
            (0..4099).map(|_| rng.uniform(-4.0, 4.0) as f32).collect(),
        )
        .expect("array")
    };
    let inputs = [make(&mut rng), make(&mut rng)];
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let oracle = run_hir(&kernel, &views, Mode::Oracle).expect("oracle")[0].to_f64_vec();
    let fast = run(&lir, &inputs, true).to_f64_vec();
    // Inputs in [-4, 4] keep every intermediate below 10: an absolute bound of a few f32 ULPs
    // at 10 covers the transcendentals' 4 ULP and the roundings of the arithmetic.
    for (i, (f, o)) in fast.iter().zip(&oracle).enumerate() {
        assert!((f - o).abs() <= 1e-5, "element {i}: fast {f}, oracle {o}");
    }
}
