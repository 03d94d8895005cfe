//! Programs with loops over ranges of their kernels (`rfx_ir::repeat`) on the CUDA backend.
//!
//! Without a GPU: the generated CUDA C does not depend on the trip count (one launch: the
//! loops are `for` loops of the function; one launch per kernel: the host repeats the
//! launches), and NVRTC compiles and `ptxas` assembles both forms for `sm_90` (skipped without
//! them, unless `RFX_REQUIRE_NVRTC=1`). With a GPU (`cargo xtask gpu-bundle` runs this file):
//! both forms give the bits of the LIR interpreter (on the program unrolled) and of the same
//! arithmetic in Rust for a counted loop, a while loop (stopping early through its exit flag,
//! running out of trips, running no body), nested loops and zero trips, through host arrays
//! and device-resident arrays, and random HIR kernels with loops
//! (`rfx_ir::testgen::random_loop_kernel`), optimised and lowered, run within rounding of the
//! interpreter in both forms (their bodies call transcendentals); without a GPU each of those
//! tests prints why it is skipped, and the random kernels are only compiled to PTX. The
//! shared loop programs of `rfx_check::loop_programs` (small and middle sizes) compile to PTX
//! and, with a GPU, give their expected bits in both forms; a program whose while loop is not
//! masked (running every trip changes its result, which `rfx_ir::repeat` rules out) only in
//! one launch, the one form that reads the exit flag.

mod common;
mod loop_programs;

use std::path::Path;
use std::process::Command;

use common::{missing, ptxas};
use loop_programs::{
    f32s, fori, fori_expected, fori_inputs, nested, nested_expected, same_bits, unrolled, while_expected,
    while_inputs, while_program,
};
use rfx_codegen_cuda::{CudaBackend, CudaOptions, cuda_source_with, ptx_with};
use rfx_ir::hir::Kernel;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{LoopGenConfig, TestRng, random_inputs, random_loop_kernel};
use rfx_ir::{Array, ArrayData, DType, Shape, TensorType};
use rfx_lower::{Backend, BackendError, CompileOptions, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

fn options(one_launch: bool) -> CudaOptions {
    let mut options = CudaOptions::default();
    options.one_launch = one_launch;
    options
}

/// `source` with the trip counts `trips` (as the one-launch form writes them) replaced by a
/// placeholder.
fn without_trips(source: &str, trips: &[u64]) -> String {
    let mut out = source.to_string();
    for (k, t) in trips.iter().enumerate() {
        out = out
            .replace(&format!("< {t}ull;"), &format!("< TRIPS{k}ull;"))
            .replace(
                &format!("at most {t} trip(s)"),
                &format!("at most TRIPS{k} trip(s)"),
            );
    }
    out
}

/// A program and the trip counts of its loops.
type Looped = (LirProgram, Vec<u64>);

/// Each fixture with a few and many trips.
fn few_and_many() -> Vec<(Looped, Looped)> {
    vec![
        ((fori(100), vec![100]), (fori(10_000), vec![10_000])),
        (
            (while_program(100), vec![100]),
            (while_program(10_000), vec![10_000]),
        ),
        (
            (nested(10, 20), vec![10, 20]),
            (nested(1_000, 100_000), vec![1_000, 100_000]),
        ),
    ]
}

#[test]
fn the_cuda_source_does_not_grow_with_the_trip_count() {
    let exact = CompileOptions::default();
    for ((few, few_trips), (many, many_trips)) in few_and_many() {
        let name = few.name().to_string();
        // One launch: the loops are loops of the one function, the trip count a literal.
        let one_few = cuda_source_with(&few, &exact, &options(true)).expect("source");
        let one_many = cuda_source_with(&many, &exact, &options(true)).expect("source");
        assert_eq!(one_few.matches("__global__").count(), 1, "{name}:\n{one_few}");
        assert_eq!(
            one_few.matches("for (unsigned long long rfx_trip").count(),
            few.loops().len(),
            "{name}:\n{one_few}"
        );
        assert_eq!(
            one_few.contains("__syncthreads_or"),
            few.loops().iter().any(|l| l.exit.is_some()),
            "{name}: the exit flag is read exactly when there is one:\n{one_few}"
        );
        assert_eq!(
            without_trips(&one_few, &few_trips),
            without_trips(&one_many, &many_trips),
            "{name}"
        );
        // One launch per kernel: the host repeats the launches; the source has no trip count.
        let per_few = cuda_source_with(&few, &exact, &options(false)).expect("source");
        let per_many = cuda_source_with(&many, &exact, &options(false)).expect("source");
        assert_eq!(
            per_few.matches("__global__").count(),
            few.kernels().len(),
            "{name}:\n{per_few}"
        );
        assert_eq!(per_few, per_many, "{name}");
    }
}

fn assemble(ptxas: &Path, name: &str, ptx_text: &str) -> Result<(), String> {
    // A folder per program: the tests run in parallel.
    let dir = std::env::temp_dir().join(format!("rfx-cuda-loops-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (ptx_path, cubin_path) = (dir.join(format!("{name}.ptx")), dir.join(format!("{name}.cubin")));
    std::fs::write(&ptx_path, ptx_text).map_err(|e| e.to_string())?;
    let output = Command::new(ptxas)
        .arg("-arch=sm_90")
        .arg(&ptx_path)
        .arg("-o")
        .arg(&cubin_path)
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ptxas -arch=sm_90 failed on {name}:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

#[test]
fn looped_programs_compile_to_ptx_in_both_forms() {
    let Some(ptxas) = ptxas() else {
        missing("ptxas (pip install nvidia-cuda-nvcc-cu12, or set RFX_PTXAS)");
        return;
    };
    let exact = CompileOptions::default();
    for program in [fori(37), while_program(50), nested(3, 4)] {
        for one_launch in [true, false] {
            let ptx_text = match ptx_with(&program, "sm_90", &exact, &options(one_launch)) {
                Ok(text) => text,
                Err(BackendError::Unavailable { reason, .. }) => {
                    missing(&format!("NVRTC ({reason})"));
                    return;
                }
                Err(e) => panic!("{} (one launch {one_launch}): {e}", program.name()),
            };
            let name = format!("{}_{one_launch}", program.name());
            assemble(&ptxas, &name, &ptx_text).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// `Some(reason)` when there is no GPU to run on (the skip printed).
fn no_gpu(test: &str) -> bool {
    match CudaBackend.check_available() {
        Ok(()) => false,
        Err(e) => {
            println!("skipped {test}: no CUDA driver/GPU ({e})");
            eprintln!("skipped {test}: no CUDA driver/GPU ({e})");
            true
        }
    }
}

/// Runs `program` in both forms through host arrays and checks its outputs against the
/// interpreter's and its first output against `want`, bit for bit.
fn check(program: &LirProgram, inputs: &[Array], want: &[f32], what: &str) {
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let reference = run_lir(program, &views, Mode::Native).unwrap_or_else(|e| panic!("{what}: run_lir: {e}"));
    // Every trip run (a while loop's masked body makes that equal to stopping early).
    let flat = run_lir(&unrolled(program), &views, Mode::Native)
        .unwrap_or_else(|e| panic!("{what}: run_lir, unrolled: {e}"));
    assert_eq!(
        reference, flat,
        "{what}: the loops and their unrolled form differ"
    );
    assert!(
        same_bits(&f32s(&reference[0]), want),
        "{what}: the interpreter gives {:?}, Rust {want:?}",
        f32s(&reference[0])
    );
    for one_launch in [true, false] {
        let compiled = CudaBackend
            .compile_program_with(program, &CompileOptions::default(), &options(one_launch))
            .unwrap_or_else(|e| panic!("{what}: compile: {e}"));
        if one_launch {
            assert_eq!(compiled.launches(), 1, "{what}: one launch");
        }
        // Twice: a second call starts again from the inputs.
        for call in 0..2 {
            let got = compiled
                .compiled()
                .run_to_new(&views)
                .unwrap_or_else(|e| panic!("{what}: run: {e}"));
            assert!(
                same_bits(&f32s(&got[0]), want),
                "{what} (one launch {one_launch}, call {call}): {:?}, expected {want:?}",
                f32s(&got[0])
            );
            for (g, r) in got.iter().zip(&reference).skip(1) {
                assert_eq!(g, r, "{what} (one launch {one_launch}): a later output");
            }
        }
    }
}

#[test]
fn counted_loops_run_every_trip_on_the_gpu() {
    if no_gpu("counted_loops_run_every_trip_on_the_gpu") {
        return;
    }
    let inputs = fori_inputs();
    for trips in [0, 1, 2, 37, 5_000] {
        check(
            &fori(trips),
            &inputs,
            &fori_expected(trips, &inputs),
            &format!("fori, {trips} trips"),
        );
    }
    let per_kernel = CudaBackend
        .compile_program_with(&fori(37), &CompileOptions::default(), &options(false))
        .expect("compile");
    // init, 37 x (body, carry), out.
    assert_eq!(per_kernel.launches(), 2 + 2 * 37);
}

#[test]
fn while_loops_stop_when_their_condition_fails_on_the_gpu() {
    if no_gpu("while_loops_stop_when_their_condition_fails_on_the_gpu") {
        return;
    }
    for (limit, trips, ran) in [(60.0, 50, 3), (1e9, 12, 12), (-1.0, 5, 0)] {
        let inputs = while_inputs(limit);
        let (want, count) = while_expected(trips, &inputs);
        assert_eq!(count, ran, "the Rust reference");
        let what = format!("while, limit {limit}, {trips} trips");
        check(&while_program(trips), &inputs, &want, &what);
        let got = CudaBackend
            .compile(&while_program(trips), &Default::default())
            .and_then(|c| c.run_to_new(&inputs.iter().map(Array::view).collect::<Vec<_>>()))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got[1].data(), &ArrayData::I32(vec![ran]), "{what}");
    }
}

#[test]
fn host_calls_stop_a_while_loop_soon_after_its_flag_clears_on_the_gpu() {
    if no_gpu("host_calls_stop_a_while_loop_soon_after_its_flag_clears_on_the_gpu") {
        return;
    }
    // Three bodies run, then the test fails. One launch leaves the loop in the function; one
    // launch per kernel reads the flag back after trip 4. Every trip would be 18 million
    // launches (about a minute).
    let trips = 3_000_000;
    let inputs = while_inputs(60.0);
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let (want, count) = while_expected(trips, &inputs);
    for one_launch in [true, false] {
        let program = CudaBackend
            .compile_program_with(
                &while_program(trips),
                &CompileOptions::default(),
                &options(one_launch),
            )
            .expect("compile");
        let start = std::time::Instant::now();
        let got = program.compiled().run_to_new(&views).expect("run");
        let elapsed = start.elapsed();
        assert!(
            same_bits(&f32s(&got[0]), &want),
            "{:?} != {want:?}",
            f32s(&got[0])
        );
        assert_eq!(got[1].data(), &ArrayData::I32(vec![count]));
        assert!(
            elapsed.as_secs_f64() < 10.0,
            "one launch {one_launch}: {elapsed:?}, the loop did not stop early"
        );
    }
}

#[test]
fn nested_loops_run_on_the_gpu_with_resident_arrays_too() {
    if no_gpu("nested_loops_run_on_the_gpu_with_resident_arrays_too") {
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
    let (outer, inner) = (4, 3);
    let want = nested_expected(outer, inner, &inputs);
    for one_launch in [true, false] {
        let program = CudaBackend
            .compile_program_with(
                &nested(outer, inner),
                &CompileOptions::default(),
                &options(one_launch),
            )
            .expect("compile");
        let x = CudaBackend.to_device(inputs[0].view()).expect("to_device");
        let a = CudaBackend.to_device(inputs[1].view()).expect("to_device");
        let mut y = CudaBackend
            .zeros(&TensorType::new(DType::F32, Shape::new(vec![loop_programs::N])))
            .expect("zeros");
        program
            .run_resident(&[&x, &a], &mut [&mut y])
            .expect("run_resident");
        let got = CudaBackend.from_device(&y).expect("from_device");
        assert!(
            same_bits(&f32s(&got), &want),
            "resident, one launch {one_launch}: {:?} != {want:?}",
            f32s(&got)
        );
    }
}

/// `count` random HIR kernels with loops, optimised and lowered, with inputs: `while` tests
/// only on the exact counter (a test on a float carry may stop an iteration apart when the
/// transcendentals round differently).
fn random_looped(count: usize) -> Vec<(Kernel, LirProgram, Vec<Array>)> {
    let config = LoopGenConfig {
        max_trips: 12,
        float_tests: false,
        ..LoopGenConfig::default()
    };
    let mut rng = TestRng::new(0x6375_6461);
    (0..count)
        .map(|i| {
            let kernel = random_loop_kernel(&mut rng, &config, &format!("loops{i}"));
            let inputs = random_inputs(&mut rng, &kernel, 0.0);
            let (mir, _) =
                optimize(&kernel, &OptConfig::default()).unwrap_or_else(|e| panic!("{e}\n{kernel}"));
            let (lir, _) = lower(&mir, &LowerConfig::default()).unwrap_or_else(|e| panic!("{e}\n{mir}"));
            (kernel, lir, inputs)
        })
        .collect()
}

#[test]
fn random_loop_kernels_compile_to_ptx_in_both_forms() {
    let Some(ptxas) = ptxas() else {
        missing("ptxas (pip install nvidia-cuda-nvcc-cu12, or set RFX_PTXAS)");
        return;
    };
    let exact = CompileOptions::default();
    let cases = random_looped(16);
    assert!(cases.iter().filter(|(_, lir, _)| !lir.loops().is_empty()).count() >= 12);
    let mut exits_read = 0;
    for (kernel, lir, _) in &cases {
        // A program in one launch reads each exit flag in the function.
        let source = cuda_source_with(lir, &exact, &options(true)).expect("source");
        if source.contains("rfx_program_") && lir.loops().iter().any(|l| l.exit.is_some()) {
            assert!(source.contains("__syncthreads_or"), "{lir}\n{source}");
            exits_read += 1;
        }
        for one_launch in [true, false] {
            let ptx_text = match ptx_with(lir, "sm_90", &exact, &options(one_launch)) {
                Ok(text) => text,
                Err(BackendError::Unavailable { reason, .. }) => {
                    missing(&format!("NVRTC ({reason})"));
                    return;
                }
                Err(e) => panic!("one launch {one_launch}: {e}\n{kernel}\n{lir}"),
            };
            let name = format!("{}_{one_launch}", lir.name());
            assemble(&ptxas, &name, &ptx_text).unwrap_or_else(|e| panic!("{e}\n{kernel}"));
        }
    }
    assert!(
        exits_read >= 1,
        "no while loop in one launch among the random kernels"
    );
}

#[test]
fn random_loop_kernels_run_on_the_gpu_within_rounding_of_the_interpreter() {
    if no_gpu("random_loop_kernels_run_on_the_gpu_within_rounding_of_the_interpreter") {
        return;
    }
    let mut worst = 0.0f64;
    for (kernel, lir, inputs) in random_looped(40) {
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let want = run_lir(&lir, &views, Mode::Native).unwrap_or_else(|e| panic!("run_lir: {e}\n{lir}"));
        for one_launch in [true, false] {
            let got = CudaBackend
                .compile_program_with(&lir, &CompileOptions::default(), &options(one_launch))
                .and_then(|program| program.compiled().run_to_new(&views))
                .unwrap_or_else(|e| panic!("one launch {one_launch}: {e}\n{kernel}\n{lir}"));
            for (g, w) in got.iter().zip(&want) {
                assert_eq!((g.dtype(), g.shape()), (w.dtype(), w.shape()), "{kernel}");
                // Carries stay in [-2, 2] and the bodies are about 1-Lipschitz: a few ULP per
                // transcendental per trip stays far below these.
                let limit = if w.dtype() == DType::F64 { 1e-9 } else { 1e-4 };
                for k in 0..w.data().len() {
                    let (gv, wv) = (g.get(k).expect("element"), w.get(k).expect("element"));
                    let diff = if gv == wv {
                        0.0
                    } else {
                        (gv.to_f64() - wv.to_f64()).abs()
                    };
                    worst = worst.max(diff);
                    assert!(
                        diff <= limit,
                        "one launch {one_launch}, element {k}: GPU {gv:?}, interpreter {wv:?}\n{kernel}\n{lir}"
                    );
                }
            }
        }
    }
    println!("random loop kernels: largest difference {worst:e}");
}

#[test]
fn the_shared_loop_programs_compile_to_ptx() {
    let Some(ptxas) = ptxas() else {
        missing("ptxas (pip install nvidia-cuda-nvcc-cu12, or set RFX_PTXAS)");
        return;
    };
    let exact = CompileOptions::default();
    let cases = loop_programs::shared_loop_programs();
    assert!(cases.len() >= 20, "{} programs", cases.len());
    for case in &cases {
        for one_launch in [true, false] {
            let ptx_text = match ptx_with(&case.program, "sm_90", &exact, &options(one_launch)) {
                Ok(text) => text,
                Err(BackendError::Unavailable { reason, .. }) => {
                    missing(&format!("NVRTC ({reason})"));
                    return;
                }
                Err(e) => panic!("{} (one launch {one_launch}): {e}", case.name),
            };
            let name = format!("{}_{one_launch}", case.name);
            assemble(&ptxas, &name, &ptx_text).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

#[test]
fn the_shared_loop_programs_give_their_expected_bits_on_the_gpu() {
    if no_gpu("the_shared_loop_programs_give_their_expected_bits_on_the_gpu") {
        return;
    }
    for case in loop_programs::shared_loop_programs() {
        let views: Vec<_> = case.inputs.iter().map(Array::view).collect();
        let masked = loop_programs::masked(&case.program, &case.inputs);
        for one_launch in [true, false] {
            let program = CudaBackend
                .compile_program_with(&case.program, &CompileOptions::default(), &options(one_launch))
                .unwrap_or_else(|e| panic!("{} (one launch {one_launch}): {e}", case.name));
            // Launches repeated by the host run every trip: right only for a masked body.
            if !masked && program.launches() != 1 {
                println!(
                    "{}: not masked, not run in {} launches",
                    case.name,
                    program.launches()
                );
                continue;
            }
            let got = program
                .compiled()
                .run_to_new(&views)
                .unwrap_or_else(|e| panic!("{} (one launch {one_launch}): {e}", case.name));
            rfx_check::loop_programs::compare(&case, &got)
                .unwrap_or_else(|e| panic!("one launch {one_launch}: {e}"));
        }
    }
}
