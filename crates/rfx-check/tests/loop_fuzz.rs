//! `rfx fuzz` on kernels with bounded loops: one seed in `LOOP_SEEDS` is a random loop kernel
//! (fori and while loops, counters, invariants, nested and chained loops) with exact ops only,
//! run through the interpreters and the CPU backend, which must agree bit for bit.

use rfx_check::generator::{LOOP_SEEDS, fuzz_kernel};
use rfx_check::{Backends, FuzzConfig, FuzzReport, check_kernel, run};
use rfx_codegen_cpu::CpuBackend;
use rfx_ir::hir::{Kernel, Op};

fn has_loop(kernel: &Kernel) -> bool {
    kernel.nodes().iter().any(|n| matches!(n.op, Op::Loop(_)))
}

#[test]
fn loop_kernels_are_one_seed_in_eight_and_exact() {
    let loops: Vec<Kernel> = (1..=400).map(fuzz_kernel).filter(has_loop).collect();
    let expected = 400 / LOOP_SEEDS as usize;
    assert!(
        loops.len() > expected / 2 && loops.len() < expected * 2,
        "{} loop kernels in 400 seeds",
        loops.len()
    );
    let text: String = loops.iter().map(ToString::to_string).collect();
    for name in ["sin", "cos", "tanh", "atan", "exp", "log", "pow"] {
        assert!(
            !text.contains(&format!(" {name} ")),
            "a transcendental `{name}` is left"
        );
    }
    assert!(
        text.contains("while_loop"),
        "no while loop among the fuzz loop kernels"
    );
}

#[test]
fn the_fuzzer_finds_no_mismatch_on_loop_kernels() {
    static CPU: CpuBackend = CpuBackend;
    let config = FuzzConfig {
        kernels: Some(240),
        first_seed: 1,
        metal_every: 0,
        backends: Backends {
            cpu: Ok(&CPU),
            ..Backends::none()
        },
        ..FuzzConfig::default()
    };
    let report = run(&config).expect("fuzz run");
    assert!(report.mismatches.is_empty(), "{report}");
    assert!(report.path("cpu").compared >= 200, "{report}");
    // The loop kernels alone: each compared on the CPU bit for bit.
    let mut loops = FuzzReport::default();
    let seeds: Vec<u64> = (1..=400).filter(|&s| has_loop(&fuzz_kernel(s))).collect();
    for &seed in &seeds {
        check_kernel(&config, &fuzz_kernel(seed), seed, &mut loops);
    }
    assert!(loops.mismatches.is_empty(), "{loops}");
    assert_eq!(loops.path("cpu").compared, seeds.len() as u64, "{loops}");
}

#[test]
fn a_transcendental_inside_a_loop_is_run_twice_not_compared_with_the_interpreter() {
    // The interpreters' `sin` and the CPU's differ by a few ULP: comparing the outputs bit for
    // bit would report a false mismatch, and the loop body's values cannot be probed.
    static CPU: CpuBackend = CpuBackend;
    let config = FuzzConfig {
        backends: Backends {
            cpu: Ok(&CPU),
            ..Backends::none()
        },
        ..FuzzConfig::default()
    };
    let case = rfx_check::conformance::cases()
        .into_iter()
        .find(|c| c.name == "loop_sin_f32_n17")
        .expect("the case");
    let mut report = FuzzReport::default();
    for seed in 1..=5 {
        check_kernel(&config, &case.kernel, seed, &mut report);
    }
    assert!(report.mismatches.is_empty(), "{report}");
    let skipped = &report.path("cpu").skipped;
    assert_eq!(
        skipped.get("transcendental: ran twice, same bits"),
        Some(&5),
        "{report}"
    );
}
