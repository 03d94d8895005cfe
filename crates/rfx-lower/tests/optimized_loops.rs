//! Kernels with loops optimised by rfx-opt, lowered and run by the LIR interpreter: the
//! results must be the HIR interpreter's bits, on rfx-opt's hand-written loop cases and on
//! random loop kernels. The memory plan is honoured by the LIR interpreter (buffers placed at
//! overlapping offsets share storage), so a carry or an invariant whose arena slot a loop
//! body's temporary reused would show here.

#[path = "../../rfx-opt/tests/loop_cases/mod.rs"]
mod loop_cases;

use rfx_ir::Array;
use rfx_ir::hir::Kernel;
use rfx_ir::interp::{Mode, run_hir, run_lir};
use rfx_ir::testgen::{LoopGenConfig, TestRng, random_inputs, random_loop_kernel, same_values};
use rfx_lower::{LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

/// Optimises (exact rules), lowers and runs `kernel` on `rounds` random input sets, asserting
/// the HIR interpreter's bits in `mode`.
fn assert_lowered_matches(kernel: &Kernel, mode: Mode, rng: &mut TestRng, rounds: usize) {
    let name = kernel.name();
    let (mir, _) = optimize(kernel, &OptConfig::exact()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (lir, _) = lower(&mir, &LowerConfig::default()).unwrap_or_else(|e| panic!("{name}: {e}\n{mir}"));
    assert_eq!(lir.loops().len(), mir.loops().len(), "{name}");
    for _ in 0..rounds {
        let inputs = random_inputs(rng, kernel, 0.1);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_hir(kernel, &views, mode).unwrap_or_else(|e| panic!("{name}: {e}"));
        let found = run_lir(&lir, &views, mode).unwrap_or_else(|e| panic!("{name}: {e}\n{lir}"));
        assert_eq!(expected.len(), found.len(), "{name}");
        for (i, (e, f)) in expected.iter().zip(&found).enumerate() {
            assert!(
                same_values(e, f),
                "{name} output {i}: HIR {e:?}, LIR {f:?}\n{mir}\n{lir}"
            );
        }
    }
}

#[test]
fn hand_written_loops_lowered_give_the_interpreters_bits() {
    let mut rng = TestRng::new(0x10e5_1005);
    for (_, kernel) in loop_cases::cases() {
        assert_lowered_matches(&kernel, Mode::Native, &mut rng, 3);
        assert_lowered_matches(&kernel, Mode::Oracle, &mut rng, 1);
    }
}

#[test]
fn random_loop_kernels_lowered_give_the_interpreters_bits() {
    let config = LoopGenConfig::default();
    let mut rng = TestRng::new(0x10e5_2005);
    for i in 0..200 {
        let kernel = random_loop_kernel(&mut rng, &config, &format!("lowered{i}"));
        assert_lowered_matches(&kernel, Mode::Native, &mut rng, 2);
    }
}
