//! Programs with loops over ranges of their kernels (`rfx_ir::repeat`), the hand-written cases of
//! `rfx_check::loop_programs`: counted loops, loops left early on their exit flag, nested loops,
//! zero trips and a reduction read back each iteration, at sizes that run as one function, as
//! one function per kernel and split across threads, through the checked call and the
//! pre-checked `run_args`, bit for bit with the recurrences they compute.

use rfx_check::loop_programs::{LoopProgram, compare, loop_programs};
use rfx_codegen_cpu::compile;
use rfx_ir::repeat::KernelLoop;
use rfx_ir::{Array, ArrayViewMut, BufId};
use rfx_lower::{CallArgs, CompileOptions, Compiled, CpuTarget, Scratch};

/// Runs `compiled` on `inputs` through the checked call and through `run_args`; both must agree.
fn run(compiled: &dyn Compiled, inputs: &[Array]) -> Vec<Array> {
    let mut outputs: Vec<Array> = compiled
        .program()
        .outputs()
        .map(|(_, _, ty)| Array::filled(rfx_ir::Scalar::zero(ty.dtype), ty.shape.clone()))
        .collect();
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let mut outs: Vec<ArrayViewMut<'_>> = outputs.iter_mut().map(Array::view_mut).collect();
    let mut scratch = Scratch::new();
    compiled.run(&views, &mut outs, &mut scratch).expect("run");
    drop(outs);
    let mut args = CallArgs::new(compiled);
    for (k, input) in inputs.iter().enumerate() {
        args.set_input(k, input.view()).expect("set_input");
    }
    compiled.run_args(&mut args, &mut scratch).expect("run_args");
    let pre_bound: Vec<Array> = args.outputs().map(|v| v.to_owned()).collect();
    assert_eq!(pre_bound, outputs, "run_args and run differ");
    outputs
}

fn case(name: &str) -> LoopProgram {
    loop_programs()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no loop program {name}"))
}

#[test]
fn every_loop_program_gives_its_recurrences_bits() {
    let mut failures = Vec::new();
    let all = loop_programs();
    // The host's code, and the baseline target's (no FMA, no AVX2 routines).
    for target in [CpuTarget::Host, CpuTarget::Baseline] {
        let options = CompileOptions {
            cpu_target: target,
            ..CompileOptions::default()
        };
        for case in &all {
            let compiled = compile(&case.program, &options).expect("compile");
            let outputs = run(&compiled, &case.inputs);
            if let Err(e) = compare(case, &outputs) {
                failures.push(format!("{target:?}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn small_programs_with_loops_stay_one_function_and_large_ones_one_per_kernel() {
    let options = CompileOptions::default();
    let small = compile(&case("halving_f64_n4_t7").program, &options).expect("compile");
    assert_eq!(small.function_count(), 1);
    let large = compile(&case("halving_f64_n1500_t7").program, &options).expect("compile");
    assert_eq!(large.function_count(), 4);
    // A CLIF dump compiles one function per kernel: the loop is the runner's, not the code's.
    assert_eq!(small.clif().len(), 4);
}

#[test]
fn ten_thousand_trips_run_in_one_function() {
    let base = case("halving_f64_n4_t1");
    let program = base.program.clone().with_loops(vec![KernelLoop {
        first: 1,
        end: 3,
        trips: 10_000,
        exit: None,
    }]);
    let compiled = compile(&program, &CompileOptions::default()).expect("compile");
    assert_eq!(compiled.function_count(), 1);
    let out = run(&compiled, &base.inputs);
    let x = base.inputs[0].as_slice::<f64>().expect("f64");
    let want: Vec<f64> = x
        .iter()
        .map(|&x| (0..10_000).fold(x, |c, _| c * 0.5 + 1.0))
        .collect();
    assert_eq!(out[0].as_slice::<f64>().expect("f64"), want.as_slice());
}

#[test]
fn an_exit_flag_that_is_not_a_bool_scalar_is_refused() {
    // The loop's exit names the f64 carry: an error, not a read of the wrong bytes.
    let bad = case("halving_f64_n4_t7").program.with_loops(vec![KernelLoop {
        first: 1,
        end: 3,
        trips: 3,
        exit: Some(BufId::new(2)),
    }]);
    let err = compile(&bad, &CompileOptions::default()).expect_err("an f64 exit flag");
    assert!(err.to_string().contains("buf2"), "{err}");
}

/// The conformance suite's loop kernels (`Op::Loop`) through the optimiser, lowering and the
/// CPU backend give the HIR interpreter's bits, where no transcendental or float reduction
/// (whose lanes change the order) is involved.
#[test]
fn hir_loop_kernels_give_the_hir_interpreters_bits_end_to_end() {
    use rfx_check::conformance::{cases, inputs};
    use rfx_ir::interp::{Mode, run_hir};
    use rfx_ir::testgen::same_values;
    use rfx_lower::{LowerConfig, lower};
    use rfx_opt::{OptConfig, optimize};

    let exact: Vec<_> = cases()
        .into_iter()
        .filter(|c| c.name.starts_with("loop_") && c.transcendental.is_none())
        .filter(|c| !c.name.contains("mean_carry_f") && !c.name.contains("while_vector"))
        .collect();
    assert!(exact.len() >= 15, "{} cases", exact.len());
    for case in &exact {
        let (mir, _) = optimize(&case.kernel, &OptConfig::default()).expect("optimize");
        let (lir, _) = lower(&mir, &LowerConfig::default()).expect("lower");
        let compiled = compile(&lir, &CompileOptions::default()).expect("compile");
        for seed in 1..=3 {
            let inputs = inputs(case, seed);
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let want = run_hir(&case.kernel, &views, Mode::Native).expect("interpreter");
            let got = run(&compiled, &inputs);
            for (k, (w, g)) in want.iter().zip(&got).enumerate() {
                assert!(
                    same_values(w, g),
                    "{} seed {seed} output {k}:\n{w:?}\n{g:?}",
                    case.name
                );
            }
        }
    }
}
