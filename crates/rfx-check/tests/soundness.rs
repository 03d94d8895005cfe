//! Rewrite and fusion soundness on random kernels: `interp(optimize(k))` must equal
//! `interp(k)` bit for bit (any NaN matching any NaN) in exact mode, over random kernels with
//! every op, broadcasting, reductions, several outputs, and NaN/±Inf/−0/subnormals among the
//! inputs. 10,000 kernels per run.

use rfx_check::generator::{KernelGenConfig, random_kernel};
use rfx_ir::Array;
use rfx_ir::hir::{Kernel, Op};
use rfx_ir::interp::{Mode, run_hir, run_mir};
use rfx_ir::testgen::{TestRng, random_inputs, same_values};
use rfx_opt::{OptConfig, fuse_chains, optimize, sink_transposes};

fn check(seed: u64, config: &OptConfig, kernel_gen: &KernelGenConfig) -> bool {
    let mut rng = TestRng::new(seed);
    let kernel = random_kernel(&mut rng, kernel_gen, "random");
    let (program, report) =
        optimize(&kernel, config).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{kernel}"));
    let refined = report.rules_fired.keys().any(|r| r.starts_with("pow-"));
    for round in 0..2 {
        let inputs = random_inputs(&mut rng, &kernel, if round == 0 { 0.0 } else { 0.3 });
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_hir(&kernel, &views, Mode::Native).expect("valid kernel");
        let got =
            run_mir(&program, &views, Mode::Native).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{program}"));
        assert_eq!(expected.len(), got.len());
        for (e, g) in expected.iter().zip(&got) {
            if refined {
                assert_eq!(e.shape(), g.shape(), "seed {seed}");
            } else {
                assert!(
                    same_values(e, g),
                    "seed {seed}: optimised program disagrees\n{kernel}\n{program}\nexpected {e:?}\ngot {g:?}"
                );
            }
        }
    }
    refined
}

#[test]
fn exact_mode_is_bit_identical_on_10000_random_kernels() {
    let kernel_gen = KernelGenConfig::with_max_ops(14);
    let mut fused_multi = 0;
    for seed in 0..10_000u64 {
        check(seed, &OptConfig::exact(), &kernel_gen);
        if seed % 100 == 0 {
            let kernel = random_kernel(&mut TestRng::new(seed), &kernel_gen, "random");
            let (program, _) = optimize(&kernel, &OptConfig::exact()).unwrap();
            fused_multi += usize::from(program.kernels().len() > 1);
        }
    }
    // The generator must reach the interesting cases: several kernels per program.
    assert!(fused_multi > 0);
}

#[test]
fn default_mode_is_bit_identical_unless_a_refining_rule_fired() {
    let kernel_gen = KernelGenConfig::default();
    let refined = (0..2_000u64)
        .filter(|&seed| check(seed + 1_000_000, &OptConfig::default(), &kernel_gen))
        .count();
    assert!(refined < 2_000);
}

/// Transposes whose operand is computed by an elementwise op.
fn transposes_of_elementwise(kernel: &Kernel) -> usize {
    kernel
        .nodes()
        .iter()
        .filter(|n| matches!(n.op, Op::Transpose { .. }))
        .filter(|n| {
            n.args.first().and_then(|&a| kernel.node(a)).is_some_and(|a| {
                matches!(
                    a.op,
                    Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::Cast
                )
            })
        })
        .count()
}

#[test]
fn sinking_transposes_keeps_the_bits_and_moves_them() {
    // The pass alone (interpreted before and after) and unoptimised fusion of its result
    // against the original kernel, with special values among the inputs.
    let kernel_gen = KernelGenConfig::with_max_ops(14);
    let mut moved = 0;
    for seed in 0..3_000u64 {
        let mut rng = TestRng::new(seed + 7_000_000);
        let kernel = random_kernel(&mut rng, &kernel_gen, "random");
        let sunk = sink_transposes(&kernel).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{kernel}"));
        moved += usize::from(transposes_of_elementwise(&sunk) < transposes_of_elementwise(&kernel));
        let program = fuse_chains(&kernel).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{kernel}"));
        let inputs = random_inputs(&mut rng, &kernel, 0.3);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_hir(&kernel, &views, Mode::Native).expect("valid kernel");
        let after = run_hir(&sunk, &views, Mode::Native).expect("valid sunk kernel");
        let fused = run_mir(&program, &views, Mode::Native).expect("valid program");
        for ((e, a), f) in expected.iter().zip(&after).zip(&fused) {
            assert!(same_values(e, a), "seed {seed}: sunk\n{kernel}\n{sunk}");
            assert!(same_values(e, f), "seed {seed}: fused\n{kernel}\n{program}");
        }
    }
    assert!(
        moved >= 400,
        "the generator moved transposes in only {moved} kernels"
    );
}
