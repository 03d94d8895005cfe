//! HIR bounded loops: the interpreter against closed forms, the builder's and the verifier's
//! errors, the text format's round trip and the random loop-kernel generator.

// The helpers below unwrap interpreter and builder results: an error there is a test failure.
#![allow(clippy::unwrap_used)]

use rfx_ir::hir::{self, Kernel};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::testgen::{LoopGenConfig, TestRng, random_inputs, random_loop_kernel, same_values};
use rfx_ir::{Array, DType};

fn run(kernel: &Kernel, inputs: &[Array], mode: Mode) -> Vec<Array> {
    let views = inputs.iter().map(Array::view).collect::<Vec<_>>();
    run_hir(kernel, &views, mode).unwrap()
}

// ---------------------------------------------------------------------------------------------
// The random loop-kernel generator

/// `true` when `got` (native) is within `tol · max(1, |want|)` of `want` (oracle) everywhere,
/// non-finite values matching exactly (any NaN matching any NaN).
fn close(got: &Array, want: &Array, tol: f64) -> bool {
    let (got, want) = (got.to_f64_vec(), want.to_f64_vec());
    got.len() == want.len()
        && got.iter().zip(&want).all(|(&g, &w)| {
            if g.is_nan() || w.is_nan() {
                g.is_nan() && w.is_nan()
            } else if !w.is_finite() || !g.is_finite() {
                g == w || (g - w).abs() <= tol * w.abs().max(1.0)
            } else {
                (g - w).abs() <= tol * w.abs().max(1.0)
            }
        })
}

#[test]
fn generated_loop_kernels_verify_and_run() {
    let config = LoopGenConfig::default();
    let (mut whiles, mut nested, mut counters, mut chained) = (0, 0, 0, 0);
    for seed in 0..200u64 {
        let mut rng = TestRng::new(seed);
        let name = format!("loops{seed}");
        let kernel = random_loop_kernel(&mut rng, &config, &name);
        assert_eq!(kernel.name(), name, "seed {seed}: the generator fell back");
        hir::verify(&kernel).unwrap_or_else(|e| panic!("seed {seed}:\n{e}"));
        let loops: Vec<&hir::Loop> = kernel
            .nodes()
            .iter()
            .filter_map(|n| match &n.op {
                hir::Op::Loop(l) => Some(&**l),
                _ => None,
            })
            .collect();
        assert!(!loops.is_empty(), "seed {seed}: no loop");
        whiles += usize::from(loops.iter().any(|l| l.cond.is_some()));
        chained += usize::from(loops.len() > 1);
        counters += usize::from(kernel.outputs().iter().any(|o| o.name == "count"));
        nested += usize::from(
            loops
                .iter()
                .any(|l| l.body.nodes().iter().any(|n| matches!(n.op, hir::Op::Loop(_)))),
        );
        let inputs = random_inputs(&mut TestRng::new(seed ^ 0x5eed), &kernel, 0.1);
        let native = run(&kernel, &inputs, Mode::Native);
        let oracle = run(&kernel, &inputs, Mode::Oracle);
        assert_eq!(native.len(), kernel.outputs().len());
        assert_eq!(oracle.len(), kernel.outputs().len());
        for (output, value) in kernel.outputs().iter().zip(&native) {
            let ty = kernel.value_type(output.value).unwrap();
            assert_eq!(value.dtype(), ty.dtype, "seed {seed}");
            assert_eq!(value.shape(), &ty.shape, "seed {seed}");
        }
        // Running twice gives the same bits: the generated kernel is deterministic.
        let again = run(&kernel, &inputs, Mode::Native);
        assert!(native.iter().zip(&again).all(|(a, b)| same_values(a, b)));
    }
    // Each feature appears in a fair share of 200 kernels.
    for (feature, count) in [
        ("while", whiles),
        ("nested", nested),
        ("counter", counters),
        ("chained", chained),
    ] {
        assert!(count >= 20, "only {count} of 200 kernels have a {feature} loop");
    }
}

/// Without tests on float carries the loops run the same iterations in every precision, and
/// the bounded, about 1-Lipschitz bodies keep `f32` within a small distance of the `f64` oracle
/// after up to 20 iterations.
#[test]
fn generated_fori_loops_stay_close_to_the_oracle() {
    let config = LoopGenConfig {
        float_tests: false,
        ..LoopGenConfig::default()
    };
    for seed in 0..100u64 {
        let kernel = random_loop_kernel(&mut TestRng::new(seed), &config, "close");
        let inputs = random_inputs(&mut TestRng::new(seed + 1000), &kernel, 0.05);
        let native = run(&kernel, &inputs, Mode::Native);
        let oracle = run(&kernel, &inputs, Mode::Oracle);
        for ((output, got), want) in kernel.outputs().iter().zip(&native).zip(&oracle) {
            let tol = if got.dtype() == DType::F32 { 1e-4 } else { 1e-12 };
            assert!(
                close(got, want, tol),
                "seed {seed}, output {}: {:?} vs {:?}\n{kernel}",
                output.name,
                got.to_f64_vec(),
                want.to_f64_vec()
            );
        }
    }
}
