//! Data-driven optimiser tests: every kernel in `tests/corpus` is optimised; the MIR text and a
//! deterministic summary of the report are snapshot-tested, and the optimised program must agree
//! with the HIR interpreter on fresh random inputs.

mod common;

use common::corpus;
use std::fmt::Write as _;
use std::time::Duration;

use rfx_ir::Array;
use rfx_ir::hir::Kernel;
use rfx_ir::interp::{Mode, run_hir, run_mir};
use rfx_ir::testgen::{TestRng, random_inputs, same_values};
use rfx_opt::{OptConfig, OptReport, optimize};

/// A configuration whose limits do not depend on the machine's speed, so snapshots are stable.
fn deterministic() -> OptConfig {
    OptConfig {
        time_limit: Duration::from_secs(60),
        ..OptConfig::default()
    }
}

fn summary(report: &OptReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "ops: {} -> {}", report.ops_before, report.ops_after);
    let _ = writeln!(s, "kernels: {}", report.kernels);
    let stop = report
        .stop_reason
        .map_or_else(|| "-".to_string(), |r| r.to_string());
    let _ = writeln!(s, "stop: {stop}");
    for (rule, count) in &report.rules_fired {
        let _ = writeln!(s, "rule {rule}: {count}");
    }
    for (value, reason) in &report.missed_fusions {
        let _ = writeln!(s, "not fused {value}: {reason}");
    }
    s
}

#[test]
fn corpus_has_at_least_40_kernels() {
    assert!(corpus().len() >= 40);
}

#[test]
fn corpus_snapshots_and_agreement_with_the_interpreter() {
    for (name, kernel) in corpus() {
        let (program, report) = optimize(&kernel, &deterministic()).unwrap_or_else(|e| panic!("{name}: {e}"));
        insta::assert_snapshot!(format!("opt_{name}"), format!("{program}\n{}", summary(&report)));
        let refining_fired = report.rules_fired.keys().any(|r| r.starts_with("pow-"));
        for seed in 0..4 {
            let inputs = random_inputs(&mut TestRng::new(seed), &kernel, 0.1);
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let expected = run_hir(&kernel, &views, Mode::Native).unwrap();
            let got = run_mir(&program, &views, Mode::Native).unwrap();
            for (e, g) in expected.iter().zip(&got) {
                if refining_fired {
                    assert_eq!(e.shape(), g.shape(), "{name}");
                } else {
                    assert!(
                        same_values(e, g),
                        "{name} seed {seed}:\nexpected {e:?}\ngot {g:?}\n{program}"
                    );
                }
            }
        }
    }
}

fn kernel_named(name: &str) -> Kernel {
    corpus()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, k)| k)
        .expect("corpus kernel")
}

#[test]
fn the_fused_chain_and_the_ten_op_chain_are_single_kernels() {
    for name in [
        "fused_chain",
        "chain10",
        "pid_clip",
        "complementary_filter",
        "quat_mul",
        "affine_relu",
    ] {
        let (program, report) = optimize(&kernel_named(name), &deterministic()).unwrap();
        assert_eq!(program.kernels().len(), 1, "{name}:\n{program}");
        assert_eq!(report.kernels, 1);
    }
}

#[test]
fn sum_of_squares_is_one_kernel_with_a_reduction_epilogue() {
    let (program, _) = optimize(&kernel_named("sum_x_times_x"), &deterministic()).unwrap();
    assert_eq!(program.kernels().len(), 1, "{program}");
    let k = &program.kernels()[0];
    assert_eq!(k.reductions.len(), 1);
    assert!(k.stores.is_empty());
}

#[test]
fn affine_relu_goes_from_nine_ops_to_five() {
    let (_, report) = optimize(&kernel_named("affine_relu"), &deterministic()).unwrap();
    assert_eq!((report.ops_before, report.ops_after), (9, 5), "{report}");
    let text = report.to_string();
    assert!(
        text.starts_with("Reduced from 9 to 5 ops (44% reduction)\nFused kernels: 1\n"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["ops_before"], 9);
    assert_eq!(json["kernels"], 1);
}

#[test]
fn exact_mode_keeps_the_ieee_traps() {
    let (program, report) = optimize(&kernel_named("ieee_traps"), &deterministic()).unwrap();
    assert_eq!(report.ops_after, report.ops_before, "{program}");
    let (_, fast) = optimize(&kernel_named("ieee_traps"), &OptConfig::fast_math()).unwrap();
    assert!(fast.ops_after < fast.ops_before);
}

#[test]
fn fan_out_is_materialised_once_with_a_reason() {
    let (program, report) = optimize(&kernel_named("fan_out_reduction"), &deterministic()).unwrap();
    assert_eq!(program.kernels().len(), 2, "{program}");
    assert!(
        report
            .missed_fusions
            .iter()
            .any(|(_, r)| *r == rfx_opt::MissReason::Reduction),
        "{report}"
    );
}

#[test]
fn a_gradient_kernel_from_rfx_autodiff_is_one_fused_kernel() {
    let kernel = kernel_named("sum_squares");
    let vg = rfx_autodiff::value_and_grad(&kernel, &["x"]).expect("value_and_grad");
    let (program, report) = optimize(&vg, &deterministic()).expect("optimize");
    assert_eq!(program.kernels().len(), 1, "{program}");
    insta::assert_snapshot!(
        "opt_value_and_grad_sum_squares",
        format!("{vg}\n{program}\n{}", summary(&report))
    );
    let x = Array::from_slice(&[1.0f32, 2.0, 3.0]);
    let out = run_mir(&program, &[x.view()], Mode::Native).unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[14.0]);
    assert_eq!(out[1].as_slice::<f32>().unwrap(), &[2.0, 4.0, 6.0]);
}

/// A clamp decomposes into `max` and `min`: the report says the count grew, not a "-33%
/// reduction".
#[test]
fn a_clamp_reports_growth_not_a_negative_reduction() {
    let k = rfx_ir::hir::parse(
        "kernel c {\n %x = input x : f32[8]\n %lo = const -1.0 : f32[]\n %hi = const 1.0 : f32[]\n %u = clamp %x, %lo, %hi : f32[8]\n output u = %u\n}",
    )
    .unwrap();
    let (_, report) = optimize(&k, &deterministic()).unwrap();
    assert_eq!((report.ops_before, report.ops_after), (3, 4), "{report}");
    assert!(
        report
            .to_string()
            .starts_with("From 3 to 4 ops (decomposed ops count one each)\n"),
        "{report}"
    );
}

/// One element computed from inputs (a PID's `tf + dt` from its parameter array) is computed in
/// each kernel that reads it, where lowering hoists it into the kernel's preamble, rather than by
/// a kernel of its own: one kernel where it has one reader, one per reader where it has several.
/// A dear one (two `f64` sines, more than three transcendentals' cost) still gets its own.
#[test]
fn a_cheap_scalar_is_computed_in_its_readers_and_a_dear_one_stored() {
    let kernel = |scalar: &str, second_reader: bool| {
        let mut text = format!(
            "kernel s {{\n %p = input p : f64[4]\n %x = input x : f64[64]\n %y = input y : f64[16, 3]\n \
             %pa = slice %p starts [0] : f64[1]\n %a = reshape %pa : f64[]\n \
             %pb = slice %p starts [1] : f64[1]\n %b = reshape %pb : f64[]\n {scalar}\n \
             %o = div %x, %s : f64[64]\n output o = %o\n"
        );
        if second_reader {
            text += " %q = mul %y, %s : f64[16, 3]\n output q = %q\n";
        }
        text += "}";
        rfx_ir::hir::parse(&text).unwrap()
    };
    let cheap = " %s = add %a, %b : f64[]";
    let dear = " %sa = sin %a : f64[]\n %sb = sin %sa : f64[]\n %s = add %sb, %b : f64[]";
    for (scalar, second_reader, kernels) in [
        (cheap, false, 1),
        (cheap, true, 2),
        (dear, false, 2),
        (dear, true, 3),
    ] {
        let hir = kernel(scalar, second_reader);
        let (program, report) = optimize(&hir, &deterministic()).unwrap();
        assert_eq!(
            program.kernels().len(),
            kernels,
            "{scalar}, two readers: {second_reader}\n{program}"
        );
        let stored = report
            .missed_fusions
            .iter()
            .any(|(_, r)| matches!(r, rfx_opt::MissReason::Shape | rfx_opt::MissReason::FanOut));
        assert_eq!(stored, scalar == dear, "{report}");
        for seed in 0..4 {
            let inputs = random_inputs(&mut TestRng::new(seed), &hir, 0.1);
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let expected = run_hir(&hir, &views, Mode::Native).unwrap();
            let got = run_mir(&program, &views, Mode::Native).unwrap();
            for (e, g) in expected.iter().zip(&got) {
                assert!(
                    same_values(e, g),
                    "seed {seed}:\nexpected {e:?}\ngot {g:?}\n{program}"
                );
            }
        }
    }
}

/// A chain of cheap ops on a small shape, broadcast into a kernel four or more times larger, is
/// computed once in its own kernel when the chain costs as much as one dear op (a Hessian's
/// diagonal placed into its `n × n` matrix); a shorter chain is recomputed at every point.
#[test]
fn a_costly_small_chain_is_stored_before_it_is_broadcast() {
    let chain = |ops: usize| {
        let mut text = String::from(
            "kernel c {\n %x = input x : f64[8]\n %k = const 0.5 : f64[]\n %v0 = mul %x, %x : f64[8]\n",
        );
        for i in 1..ops {
            text += &format!(" %v{i} = add %v{}, %k : f64[8]\n", i - 1);
        }
        text += &format!(
            " %y = input y : f64[8, 8]\n %o = mul %y, %v{} : f64[8, 8]\n output o = %o\n}}",
            ops - 1
        );
        rfx_ir::hir::parse(&text).unwrap()
    };
    let (long, report) = optimize(&chain(5), &deterministic()).unwrap();
    assert_eq!(long.kernels().len(), 2, "{long}");
    assert!(
        report
            .missed_fusions
            .iter()
            .any(|(_, r)| *r == rfx_opt::MissReason::Shape),
        "{report}"
    );
    let (short, _) = optimize(&chain(2), &deterministic()).unwrap();
    assert_eq!(short.kernels().len(), 1, "{short}");
    // Both compute the same values as the unfused kernel.
    let mut rng = rfx_ir::testgen::TestRng::new(0x5eed);
    let x: Vec<f64> = (0..8).map(|_| rng.uniform(-2.0, 2.0)).collect();
    let y: Vec<f64> = (0..64).map(|_| rng.uniform(-2.0, 2.0)).collect();
    let xa = Array::from_slice(&x);
    let ya = Array::from_vec([8usize, 8], y.clone()).unwrap();
    let out = run_mir(&long, &[xa.view(), ya.view()], Mode::Native).unwrap();
    for (i, &got) in out[0].as_slice::<f64>().unwrap().iter().enumerate() {
        let v = x[i % 8] * x[i % 8] + 0.5 + 0.5 + 0.5 + 0.5;
        assert_eq!(got.to_bits(), (y[i] * v).to_bits(), "element {i}");
    }
}
