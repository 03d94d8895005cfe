//! Programs with loops over ranges of their kernels (`rfx_ir::repeat`): the runner dispatches
//! each kernel of a loop once per trip, so results equal the LIR interpreter's (on the program
//! unrolled) and the same arithmetic in Rust, bit for bit, for a counted loop, a while loop
//! (stopping early and running out of trips), two nested loops, zero trips and a loop of more
//! dispatches than one submission holds; host and device-resident calls alike. The generated
//! WGSL and MSL do not depend on the trip count. Without a wgpu adapter the run tests print
//! why they are skipped. Random HIR kernels with loops (`rfx_ir::testgen::random_loop_kernel`),
//! optimised and lowered, run within rounding of the interpreter (their bodies call
//! transcendentals, which are within a few ULP here). The shared loop programs of
//! `rfx_check::loop_programs` (small and middle sizes) give their expected bits; those in
//! `f64` are `Unsupported`, and those whose while loops are not masked (running every trip
//! changes their result, which `rfx_ir::repeat` rules out) are skipped and named.

mod common;

#[path = "../../rfx-codegen-cuda/tests/loop_programs/mod.rs"]
mod loop_programs;

use common::{adapter_or_skip, run_metal};
use loop_programs::{
    f32s, fori, fori_expected, fori_inputs, nested, nested_expected, same_bits, unrolled, while_expected,
    while_inputs, while_program,
};
use rfx_codegen_metal::{MetalBackend, msl, wgsl};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::repeat::KernelLoop;
use rfx_ir::testgen::{LoopGenConfig, TestRng, random_inputs, random_loop_kernel};
use rfx_ir::{Array, ArrayData, DType, Shape, TensorType};
use rfx_lower::{Backend, BackendError, LowerConfig, Unsupported, lower};
use rfx_opt::{OptConfig, optimize};

/// The interpreter's outputs for `program`, checked equal to those of its loop-free form
/// (every trip run: a while loop's masked body makes that equal to stopping early).
fn interpreted(program: &LirProgram, inputs: &[Array]) -> Vec<Array> {
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let looped = run_lir(program, &views, Mode::Native).unwrap_or_else(|e| panic!("run_lir: {e}\n{program}"));
    let flat = run_lir(&unrolled(program), &views, Mode::Native)
        .unwrap_or_else(|e| panic!("run_lir: {e}\n{program}"));
    assert_eq!(
        looped, flat,
        "the loops and their unrolled form differ\n{program}"
    );
    looped
}

/// Runs `program` on the device and checks its first output against the interpreter's and
/// `want`, bit for bit; returns the device's outputs.
fn check(program: &LirProgram, inputs: &[Array], want: &[f32], what: &str) -> Vec<Array> {
    let got = run_metal(program, inputs);
    let reference = interpreted(program, inputs);
    assert!(
        same_bits(&f32s(&reference[0]), want),
        "{what}: the interpreter gives {:?}, Rust {want:?}",
        f32s(&reference[0])
    );
    assert!(
        same_bits(&f32s(&got[0]), want),
        "{what}: metal gives {:?}, expected {want:?}",
        f32s(&got[0])
    );
    for (g, r) in got.iter().zip(&reference).skip(1) {
        assert_eq!(g, r, "{what}: a later output differs from the interpreter's");
    }
    got
}

#[test]
fn a_counted_loop_runs_every_trip() {
    if !adapter_or_skip() {
        return;
    }
    let inputs = fori_inputs();
    for trips in [0, 1, 2, 37] {
        check(
            &fori(trips),
            &inputs,
            &fori_expected(trips, &inputs),
            &format!("fori, {trips} trips"),
        );
    }
}

#[test]
fn a_while_loop_gives_the_result_of_stopping_when_its_condition_fails() {
    if !adapter_or_skip() {
        return;
    }
    // Sums of the carry: 4.75, 14.5, 34, 73, 151, ... With a limit of 60 the condition fails
    // on the fourth iteration (3 bodies ran); with 1e9 the 12 trips run out first; with -1 no
    // body runs.
    for (limit, trips, ran) in [(60.0, 50, 3), (1e9, 12, 12), (-1.0, 5, 0)] {
        let inputs = while_inputs(limit);
        let (want, count) = while_expected(trips, &inputs);
        assert_eq!(count, ran, "the Rust reference");
        let got = check(
            &while_program(trips),
            &inputs,
            &want,
            &format!("while, limit {limit}, {trips} trips"),
        );
        assert_eq!(got[1].data(), &ArrayData::I32(vec![ran]), "limit {limit}");
    }
}

#[test]
fn nested_loops_run_the_inner_loop_on_every_outer_trip() {
    if !adapter_or_skip() {
        return;
    }
    let inputs = fori_inputs();
    for (outer, inner) in [(3, 4), (1, 0), (0, 3), (5, 1)] {
        check(
            &nested(outer, inner),
            &inputs,
            &nested_expected(outer, inner, &inputs),
            &format!("nested, {outer} x {inner} trips"),
        );
    }
}

#[test]
fn a_loop_of_more_dispatches_than_one_submission_runs_every_trip() {
    if !adapter_or_skip() {
        return;
    }
    // Two dispatches per trip: 4,600 in all, past the 4,096 recorded per command buffer.
    let trips = 2_300;
    let inputs = fori_inputs();
    let got = run_metal(&fori(trips), &inputs);
    let want = fori_expected(trips, &inputs);
    assert!(
        same_bits(&f32s(&got[0]), &want),
        "{:?} != {want:?}",
        f32s(&got[0])
    );
}

#[test]
fn a_host_call_stops_a_while_loop_soon_after_its_flag_clears() {
    if !adapter_or_skip() {
        return;
    }
    // Three bodies run, then the test fails; every trip would be 6 million dispatches (about
    // 80 s on lavapipe on 2 cores), while the flag is read back after trip 4.
    let trips = 1_000_000;
    let inputs = while_inputs(60.0);
    let (want, count) = while_expected(trips, &inputs);
    let start = std::time::Instant::now();
    let got = run_metal(&while_program(trips), &inputs);
    let elapsed = start.elapsed();
    assert!(
        same_bits(&f32s(&got[0]), &want),
        "{:?} != {want:?}",
        f32s(&got[0])
    );
    assert_eq!(got[1].data(), &ArrayData::I32(vec![count]));
    assert!(
        elapsed.as_secs_f64() < 10.0,
        "{elapsed:?}: the loop did not stop early"
    );
}

#[test]
fn device_resident_calls_run_the_loops() {
    if !adapter_or_skip() {
        return;
    }
    let inputs = fori_inputs();
    let (outer, inner) = (4, 3);
    let program = MetalBackend
        .compile_program(&nested(outer, inner), &Default::default())
        .expect("compile");
    let x = MetalBackend.to_device(inputs[0].view()).expect("to_device");
    let a = MetalBackend.to_device(inputs[1].view()).expect("to_device");
    let mut y = MetalBackend
        .zeros(&TensorType::new(DType::F32, Shape::new(vec![loop_programs::N])))
        .expect("zeros");
    // Twice: the second call starts again from `x` (the carries are the program's own).
    for call in 0..2 {
        program
            .run_resident(&[&x, &a], &mut [&mut y])
            .expect("run_resident");
        let got = MetalBackend.from_device(&y).expect("from_device");
        let want = nested_expected(outer, inner, &inputs);
        assert!(
            same_bits(&f32s(&got), &want),
            "call {call}: {:?} != {want:?}",
            f32s(&got)
        );
    }
    // A resident launch does not wait, so it runs every trip of a while loop: the masked body
    // keeps the result.
    let trips = 40;
    let inputs = while_inputs(60.0);
    let (want, count) = while_expected(trips, &inputs);
    let program = MetalBackend
        .compile_program(&while_program(trips), &Default::default())
        .expect("compile");
    let x = MetalBackend.to_device(inputs[0].view()).expect("to_device");
    let limit = MetalBackend.to_device(inputs[1].view()).expect("to_device");
    let mut count_out = MetalBackend
        .zeros(&TensorType::new(DType::I32, Shape::new(vec![])))
        .expect("zeros");
    program
        .run_resident(&[&x, &limit], &mut [&mut y, &mut count_out])
        .expect("run_resident");
    let got = MetalBackend.from_device(&y).expect("from_device");
    assert!(
        same_bits(&f32s(&got), &want),
        "while: {:?} != {want:?}",
        f32s(&got)
    );
    let got_count = MetalBackend.from_device(&count_out).expect("from_device");
    assert_eq!(got_count.data(), &ArrayData::I32(vec![count]));
}

#[test]
fn the_shader_text_does_not_grow_with_the_trip_count() {
    for (few, many) in [
        (fori(100), fori(10_000)),
        (while_program(100), while_program(10_000)),
        (nested(10, 10), nested(100, 1_000)),
    ] {
        let (wgsl_few, wgsl_many) = (wgsl(&few).expect("wgsl"), wgsl(&many).expect("wgsl"));
        assert_eq!(wgsl_few, wgsl_many, "{}", few.name());
        let (msl_few, msl_many) = (msl(&few).expect("msl"), msl(&many).expect("msl"));
        assert_eq!(msl_few, msl_many, "{}", few.name());
    }
}

#[test]
fn loops_that_do_not_nest_are_an_error_not_a_panic() {
    if !adapter_or_skip() {
        return;
    }
    let range = |first, end| KernelLoop {
        first,
        end,
        trips: 3,
        exit: None,
    };
    for loops in [
        vec![range(1, 9)],
        vec![range(0, 3), range(1, 4)],
        vec![range(2, 2)],
    ] {
        let program = fori(1).with_loops(loops.clone());
        match MetalBackend.compile(&program, &Default::default()) {
            Err(BackendError::Compile {
                backend: "metal",
                message,
            }) => {
                assert!(message.contains("loop"), "{loops:?}: {message}");
            }
            // A verifier that checks the loops reports them as invalid LIR.
            Err(BackendError::Lower(_)) => {}
            Err(other) => panic!("{loops:?}: unexpected error {other}"),
            Ok(_) => panic!("{loops:?}: compiled"),
        }
    }
}

#[test]
fn random_loop_kernels_run_within_rounding_of_the_interpreter() {
    if !adapter_or_skip() {
        return;
    }
    // `while` tests only on the exact counter: a test on a float carry may stop an iteration
    // apart when the transcendentals round differently.
    let config = LoopGenConfig {
        max_trips: 12,
        float_tests: false,
        ..LoopGenConfig::default()
    };
    let mut rng = TestRng::new(0x6d65_7461);
    let (mut ran, mut looped, mut worst) = (0, 0, 0.0f64);
    for i in 0..40 {
        let kernel = random_loop_kernel(&mut rng, &config, &format!("loops{i}"));
        let inputs = random_inputs(&mut rng, &kernel, 0.0);
        let (mir, _) = optimize(&kernel, &OptConfig::default()).unwrap_or_else(|e| panic!("{e}\n{kernel}"));
        let (lir, _) = lower(&mir, &LowerConfig::default()).unwrap_or_else(|e| panic!("{e}\n{mir}"));
        let compiled = match MetalBackend.compile(&lir, &Default::default()) {
            Ok(compiled) => compiled,
            // WGSL has no f64: the generator draws f64 kernels too.
            Err(BackendError::Unsupported {
                what: Unsupported::DType(DType::F64),
                ..
            }) => continue,
            Err(e) => panic!("compile: {e}\n{lir}"),
        };
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let got = compiled
            .run_to_new(&views)
            .unwrap_or_else(|e| panic!("run: {e}\n{lir}"));
        let want = run_lir(&lir, &views, Mode::Native).unwrap_or_else(|e| panic!("run_lir: {e}\n{lir}"));
        for (g, w) in got.iter().zip(&want) {
            assert_eq!((g.dtype(), g.shape()), (w.dtype(), w.shape()), "{kernel}");
            for k in 0..w.data().len() {
                let (gv, wv) = (g.get(k).expect("element"), w.get(k).expect("element"));
                // Carries stay in [-2, 2] and the bodies are about 1-Lipschitz: a few ULP per
                // transcendental per trip stays far below this.
                let diff = if gv == wv {
                    0.0
                } else {
                    (gv.to_f64() - wv.to_f64()).abs()
                };
                worst = worst.max(diff);
                let close = diff <= 1e-4;
                assert!(
                    close,
                    "element {k}: metal {gv:?}, interpreter {wv:?}\n{kernel}\n{lir}"
                );
            }
        }
        ran += 1;
        looped += usize::from(!lir.loops().is_empty());
    }
    eprintln!("{ran} f32 kernels ran, {looped} with loops; largest difference {worst:e}");
    assert!(
        ran >= 10 && looped >= 8,
        "only {ran} f32 kernels ran, {looped} with loops"
    );
}

#[test]
fn the_shared_loop_programs_give_their_expected_bits() {
    if !adapter_or_skip() {
        return;
    }
    let (mut compared, mut f64_cases) = (0, 0);
    let mut unmasked = Vec::new();
    for case in loop_programs::shared_loop_programs() {
        // This backend runs every trip of a while loop (it does not read the exit flag back).
        if !loop_programs::masked(&case.program, &case.inputs) {
            unmasked.push(case.name);
            continue;
        }
        let compiled = match MetalBackend.compile(&case.program, &Default::default()) {
            Ok(compiled) => compiled,
            Err(BackendError::Unsupported {
                what: Unsupported::DType(DType::F64),
                ..
            }) => {
                f64_cases += 1;
                continue;
            }
            Err(e) => panic!("{}: compile: {e}", case.name),
        };
        let views: Vec<_> = case.inputs.iter().map(Array::view).collect();
        let got = compiled
            .run_to_new(&views)
            .unwrap_or_else(|e| panic!("{}: run: {e}", case.name));
        rfx_check::loop_programs::compare(&case, &got).unwrap_or_else(|e| panic!("{e}"));
        compared += 1;
    }
    eprintln!(
        "{compared} loop programs compared bit for bit, {f64_cases} in f64 (unsupported), \
         skipped with while loops that are not masked: {unmasked:?}"
    );
    assert!(compared >= 10, "only {compared} loop programs compared");
}
