//! Kernels with loops through `optimize`: the MIR program (stages, bodies and copies linked,
//! loops as kernel ranges) must give the HIR interpreter's bits, on hand-written cases for each
//! edge case of splitting and linking and on random loop kernels.

use crate::loop_cases;

use rfx_ir::hir::Kernel;
use rfx_ir::interp::{Mode, run_hir, run_mir};
use rfx_ir::mir::MirProgram;
use rfx_ir::repeat::KernelLoop;
use rfx_ir::testgen::{LoopGenConfig, TestRng, random_inputs, random_loop_kernel, same_values};
use rfx_opt::{OptConfig, OptError, constant_fold, fuse_chains, optimize, simplify};

fn compile(kernel: &Kernel, config: &OptConfig) -> MirProgram {
    optimize(kernel, config)
        .unwrap_or_else(|e| panic!("{}: {e}\n{kernel}", kernel.name()))
        .0
}

/// Runs `kernel` and `program` on `rounds` random input sets (with special values) in `mode`
/// and asserts every output has the same bits.
fn assert_same_results(kernel: &Kernel, program: &MirProgram, mode: Mode, rng: &mut TestRng, rounds: usize) {
    for _ in 0..rounds {
        let inputs = random_inputs(rng, kernel, 0.1);
        let views: Vec<_> = inputs.iter().map(rfx_ir::Array::view).collect();
        let expected = run_hir(kernel, &views, mode).unwrap_or_else(|e| panic!("{}: {e}", kernel.name()));
        let found =
            run_mir(program, &views, mode).unwrap_or_else(|e| panic!("{}: {e}\n{program}", kernel.name()));
        assert_eq!(expected.len(), found.len(), "{}", kernel.name());
        for (i, (e, f)) in expected.iter().zip(&found).enumerate() {
            assert!(
                same_values(e, f),
                "{} output {i}: HIR {e:?}, MIR {f:?}\n{kernel}\n{program}",
                kernel.name()
            );
        }
    }
}

fn loops_of(name: &str) -> Vec<KernelLoop> {
    let (_, kernel) = loop_cases::cases()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no case {name}"));
    compile(&kernel, &OptConfig::exact()).loops().to_vec()
}

#[test]
fn hand_written_loops_give_the_interpreters_bits() {
    let no_saturation = OptConfig {
        saturate: false,
        ..OptConfig::exact()
    };
    let mut rng = TestRng::new(0x100b_5eed);
    for (_, kernel) in loop_cases::cases() {
        // No case has a `pow`, which the default configuration's refining rules rewrite.
        for config in [OptConfig::exact(), OptConfig::default(), no_saturation.clone()] {
            let program = compile(&kernel, &config);
            assert_same_results(&kernel, &program, Mode::Native, &mut rng, 4);
            assert_same_results(&kernel, &program, Mode::Oracle, &mut rng, 2);
        }
    }
}

/// `fuse_chains` (no saturation) splits a kernel at its loops too.
#[test]
fn fusion_alone_compiles_loops() {
    let mut rng = TestRng::new(0xf05e);
    for (name, kernel) in loop_cases::cases() {
        let program = fuse_chains(&kernel).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_same_results(&kernel, &program, Mode::Native, &mut rng, 2);
    }
}

#[test]
fn loops_whose_results_nothing_reads_or_that_change_nothing_are_dropped() {
    for name in [
        "unused_loop",
        "zero_trips",
        "one_trip",
        "while_zero_trips",
        "while_one_trip",
    ] {
        assert_eq!(loops_of(name), [], "{name}");
    }
    // Only carry 1 is read: the loop stays.
    assert_eq!(loops_of("only_second_carry_used").len(), 1);
}

/// The `i32` temporaries of a program: the counter carry's buffers, where a loop has one.
fn i32_temps(name: &str) -> usize {
    let (_, kernel) = loop_cases::cases()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no case {name}"));
    let program = compile(&kernel, &OptConfig::exact());
    program
        .buffers()
        .iter()
        .filter(|b| b.kind == rfx_ir::mir::BufKind::Temp && b.ty.dtype == rfx_ir::DType::I32)
        .count()
}

#[test]
fn carries_nothing_reads_are_dropped_and_carries_the_test_reads_are_kept() {
    assert_eq!(i32_temps("dead_carries"), 0);
    assert_eq!(loops_of("dead_carries").len(), 1);
    // The counter's `C_k` and `N_k`.
    assert_eq!(i32_temps("while_counter_read_only_by_its_test"), 2);
}

#[test]
fn loops_keep_their_order_nesting_and_exit_flags() {
    let sequence = loops_of("two_loops_in_sequence");
    assert_eq!(sequence.len(), 2);
    assert!(sequence[0].end <= sequence[1].first, "{sequence:?}");
    assert_eq!((sequence[0].trips, sequence[1].trips), (6, 9));

    let nested = loops_of("nested_loops");
    assert_eq!(nested.len(), 2);
    let (outer, inner) = (nested[0], nested[1]);
    assert!(outer.first <= inner.first && inner.end < outer.end, "{nested:?}");
    assert_eq!((outer.trips, inner.trips), (3, 4));

    let mixed = loops_of("while_in_fori");
    assert_eq!(mixed.len(), 2);
    assert!(mixed[0].exit.is_none() && mixed[1].exit.is_some(), "{mixed:?}");
    assert_eq!((mixed[0].trips, mixed[1].trips), (5, 6));
}

/// The outer body of `nested_loops` computes its next `x` after the inner loop, from the inner
/// carry: nothing reads the outer carry then, so the kernel writes it in place and only the
/// counter (read by the kernel that increments it) is copied back.
#[test]
fn a_carry_no_later_kernel_reads_is_written_in_place() {
    let (_, kernel) = loop_cases::cases()
        .into_iter()
        .find(|(n, _)| *n == "nested_loops")
        .expect("case");
    let program = compile(&kernel, &OptConfig::exact());
    let copies_back: Vec<_> = program
        .kernels()
        .iter()
        .filter(|k| k.name == "l0_next")
        .map(|k| k.domain.dims().to_vec())
        .collect();
    assert_eq!(copies_back, [Vec::<usize>::new()], "{program}");
}

/// What a body and a test compute from the invariants alone is computed once, before the loop.
#[test]
fn invariant_work_moves_out_of_the_loop() {
    let (_, kernel) = loop_cases::cases()
        .into_iter()
        .find(|(n, _)| *n == "invariant_work_in_body")
        .expect("case");
    let program = compile(&kernel, &OptConfig::exact());
    let [spec] = program.loops() else {
        panic!("one loop expected\n{program}");
    };
    let in_range = &program.kernels()[spec.first..spec.end];
    let transcendental = |k: &rfx_ir::mir::MirKernel| {
        k.body
            .iter()
            .filter(|i| matches!(i.op, rfx_ir::mir::MirOp::Unary(_)))
            .count()
    };
    assert_eq!(in_range.iter().map(transcendental).sum::<usize>(), 0, "{program}");
    assert_eq!(
        program.kernels().iter().map(transcendental).sum::<usize>(),
        3,
        "{program}"
    );
}

/// Inner loops that read only the outer loop's invariants run once, before it; there the
/// one of no trips and the one of one trip disappear and the one of five loses its counter.
#[test]
fn invariant_inner_loops_move_out_and_are_rewritten_there() {
    let loops = loops_of("invariant_inner_loops");
    assert_eq!(loops.len(), 2, "{loops:?}");
    assert!(loops[0].end <= loops[1].first, "{loops:?}");
    assert_eq!((loops[0].trips, loops[1].trips), (5, 4));
    assert_eq!(i32_temps("invariant_inner_loops"), 0);
}

/// A loop's kernels are written once whatever its trip count.
#[test]
fn the_program_does_not_grow_with_the_trip_count() {
    let with_trips = |trips: u64| {
        let kernel = loop_cases::reduction_in_body_trips(trips).expect("case");
        compile(&kernel, &OptConfig::exact())
    };
    let (short, long) = (with_trips(100), with_trips(10_000));
    assert_eq!(short.kernels(), long.kernels());
    assert_eq!(short.buffers(), long.buffers());
    assert_eq!(short.loops().len(), 1);
    assert_eq!((short.loops()[0].trips, long.loops()[0].trips), (100, 10_000));
}

#[test]
fn the_report_sums_the_stages() {
    let (_, kernel) = loop_cases::cases()
        .into_iter()
        .find(|(n, _)| *n == "nested_loops")
        .expect("case");
    let (program, report) = optimize(&kernel, &OptConfig::exact()).expect("optimises");
    assert_eq!(report.kernels, program.kernels().len());
    // The outer body: its loop, `x * 1 + 0.125` (constants count) and `i + 1`; the inner
    // body: `sin((x + inv) * 0.5 + 0)`.
    assert_eq!(report.ops_before, kernel.op_count() + 7 + 6);
    assert!(report.ops_after > 0 && report.stop_reason.is_some(), "{report}");
}

#[test]
fn random_loop_kernels_give_the_interpreters_bits() {
    let config = LoopGenConfig::default();
    let mut rng = TestRng::new(0x1005_0001);
    // Programs with a loop, with nested loops, with a `while` loop's exit flag.
    let (mut looping, mut nested, mut exits) = (0, 0, 0);
    for i in 0..300 {
        let kernel = random_loop_kernel(&mut rng, &config, &format!("loops{i}"));
        let program = compile(&kernel, &OptConfig::exact());
        assert_same_results(&kernel, &program, Mode::Native, &mut rng, 2);
        let loops = program.loops();
        looping += usize::from(!loops.is_empty());
        nested += usize::from(loops.iter().enumerate().any(|(i, outer)| {
            loops[i + 1..]
                .iter()
                .any(|inner| outer.first <= inner.first && inner.end <= outer.end)
        }));
        exits += usize::from(loops.iter().any(|l| l.exit.is_some()));
    }
    // The generator draws `trips` from 0..=20, nesting and `while` tests at random: the cases
    // that matter come up often.
    eprintln!("{looping} with loops, {nested} nested, {exits} with exit flags");
    assert!(
        looping >= 250 && nested >= 40 && exits >= 100,
        "{looping} {nested} {exits}"
    );
}

/// The loops autodiff and batching write (stored carries and a reverse `while_loop` for `vjp`,
/// tangent carries for `jvp`, batched carries and tests for `vmap`) compile too.
#[test]
fn derivatives_and_batches_of_random_loop_kernels_give_the_interpreters_bits() {
    let mut rng = TestRng::new(0x1005_ad00);
    for i in 0..100 {
        let kernel = random_loop_kernel(&mut rng, &LoopGenConfig::default(), &format!("derived{i}"));
        let floats: Vec<String> = kernel
            .inputs()
            .filter(|(_, _, ty)| ty.dtype.is_float())
            .map(|(_, name, _)| name.to_string())
            .collect();
        let floats: Vec<&str> = floats.iter().map(String::as_str).collect();
        let in_axes = vec![Some(0); kernel.inputs().count()];
        let derived = [
            rfx_autodiff::vjp(&kernel, &floats),
            rfx_autodiff::jvp(&kernel, &floats),
            rfx_autodiff::vmap(&kernel, &in_axes, 2),
        ];
        for derived in derived {
            let derived = derived.unwrap_or_else(|e| panic!("{e}\n{kernel}"));
            let program = compile(&derived, &OptConfig::exact());
            assert_same_results(&derived, &program, Mode::Native, &mut rng, 1);
        }
    }
}

/// The passes that rewrite a loop-free kernel's e-graph say that a loop is not theirs to take.
#[test]
fn simplify_and_constant_fold_refuse_loops_by_name() {
    let (_, kernel) = loop_cases::cases()
        .into_iter()
        .find(|(n, _)| *n == "newton_sqrt")
        .expect("case");
    let is_loop = |e: &OptError| matches!(e, OptError::Loop(v) if kernel.node(*v).is_some_and(|n| n.op.name() == "loop"));
    let err = simplify(&kernel, &OptConfig::exact()).expect_err("a loop");
    assert!(is_loop(&err), "{err}");
    let err = constant_fold(&kernel).expect_err("a loop");
    assert!(is_loop(&err), "{err}");
    assert!(err.to_string().contains("is a loop"), "{err}");
}
