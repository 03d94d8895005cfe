//! The CPU backend against the LIR interpreter on random kernels: bit-identical for every
//! exactly-rounded op (the LIR fixes the reduction order, and the backend follows it).

use rfx_check::generator::{KernelGenConfig, random_kernel};
use rfx_codegen_cpu::CpuBackend;
use rfx_ir::Array;
use rfx_ir::hir::{Kernel, Op};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_inputs, same_values};
use rfx_lower::{Backend, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

fn transcendental(kernel: &Kernel) -> bool {
    kernel.nodes().iter().any(|n| match &n.op {
        Op::Unary(u) => u.is_transcendental(),
        Op::Binary(b) => matches!(b, rfx_ir::BinaryOp::Pow | rfx_ir::BinaryOp::Atan2),
        _ => false,
    })
}

fn lower_kernel(kernel: &Kernel) -> LirProgram {
    let (mir, _) = optimize(kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

/// Runs `lir` on the CPU backend and on the interpreter and compares.
fn check(seed: u64, kernel: &Kernel, lir: &LirProgram, inputs: &[Array]) {
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let expected = run_lir(lir, &views, Mode::Native).expect("interp");
    let compiled = CpuBackend
        .compile(lir, &Default::default())
        .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{lir}"));
    let outputs = compiled.run_to_new(&views).expect("run");
    for (e, g) in expected.iter().zip(&outputs) {
        assert!(
            same_values(e, g),
            "seed {seed}:\n{kernel}\n{lir}\nexpected {e:?}\ngot {g:?}"
        );
    }
}

#[test]
fn random_exact_kernels_match_the_interpreter_bit_for_bit() {
    let config = KernelGenConfig {
        max_ops: 12,
        max_dim: 9,
        ..KernelGenConfig::default()
    };
    let mut tried = 0;
    let mut seed = 0u64;
    while tried < 10_000 {
        seed += 1;
        let mut rng = TestRng::new(seed);
        let kernel = random_kernel(&mut rng, &config, "random");
        if transcendental(&kernel) {
            continue;
        }
        tried += 1;
        let lir = lower_kernel(&kernel);
        let inputs = random_inputs(&mut rng, &kernel, 0.2);
        check(seed, &kernel, &lir, &inputs);
    }
}
