//! The `"c"` backend (`CBackend`, the `backend` feature): the conformance suite
//! (`rfx_check::conformance`) and the saved corpus run through the exported C as compiled by gcc
//! and by clang into shared objects (many programs per object, `compile_many`), exact ops bit for
//! bit with the LIR interpreter and transcendentals within 4 ULP of its `f64` oracle; no case is
//! refused (the export emits every op). Then its errors: a missing compiler,
//! calls of the wrong shape or dtype, aliasing outputs (nothing written), and its scratch reuse.
//! Last, the fuzzer's saved regressions and a short fuzz run on the `c` path.

mod common;

use std::sync::Arc;

use common::{corpus_kernels, lower_kernel, program, uses_transcendental};
use rfx_check::conformance::{Case, cases, check, stated_bound_differences};
use rfx_check::{Backends, FuzzConfig, FuzzReport, replay_file};
use rfx_codegen_c::CBackend;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_inputs, same_values};
use rfx_ir::{Array, ArrayView, ArrayViewMut, DType, Shape};
use rfx_lower::{Backend, BackendError, CallError, CompileOptions, Compiled, Scratch};

/// The bound the backend documents for every transcendental it compiles.
const BOUND_ULPS: u64 = 4;

/// Programs per shared object: one compiler run each.
const CHUNK: usize = 160;

/// The backends of `gcc` and `clang` that can build shared objects here; each one missing is
/// reported on stderr.
fn backends() -> Vec<CBackend> {
    ["gcc", "clang"]
        .into_iter()
        .filter_map(|cc| {
            let backend = CBackend::with_compiler(cc);
            match backend.check_available() {
                Ok(()) => Some(backend),
                Err(e) => {
                    eprintln!("skipped {cc}: {e}");
                    None
                }
            }
        })
        .collect()
}

/// Runs every conformance case through `backend` (the export emits every op, so a refusal is
/// a failure); returns how many passed.
fn conformance_on(backend: &CBackend, all: &[Case], lirs: &[LirProgram]) -> usize {
    let mut passed = 0;
    let mut failures = Vec::new();
    for (case_chunk, lir_chunk) in all.chunks(CHUNK).zip(lirs.chunks(CHUNK)) {
        let compiled = backend.compile_many(lir_chunk, &CompileOptions::default());
        assert_eq!(compiled.len(), lir_chunk.len());
        for ((case, lir), result) in case_chunk.iter().zip(lir_chunk).zip(compiled) {
            match result {
                Ok(compiled) => {
                    // Two input seeds: the compile is the cost, a run is cheap.
                    let failure = (1..=2).find_map(|seed| {
                        check(case, lir, compiled.as_ref(), BOUND_ULPS, seed)
                            .failure
                            .map(|f| format!("{} (seed {seed}): {f}", case.name))
                    });
                    match failure {
                        None => passed += 1,
                        Some(f) => failures.push(f),
                    }
                }
                Err(e) => failures.push(format!("{}: {e}", case.name)),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} ({}): {} failures:\n{}",
        backend.compiler(),
        backend.name(),
        failures.len(),
        failures.join("\n")
    );
    passed
}

#[test]
fn the_conformance_suite_passes_with_gcc_and_clang() {
    let backends = backends();
    if backends.is_empty() {
        eprintln!("skipped: neither gcc nor clang builds shared objects here");
        return;
    }
    let all = cases();
    let lirs: Vec<LirProgram> = all
        .iter()
        .map(|case| lower_kernel(&case.kernel).expect("lowers"))
        .collect();
    // One thread per compiler: each compile is one compiler process, so they run side by side.
    std::thread::scope(|scope| {
        let runs: Vec<_> = backends
            .iter()
            .map(|backend| {
                let (all, lirs) = (&all, &lirs);
                scope.spawn(move || (backend, conformance_on(backend, all, lirs)))
            })
            .collect();
        for run in runs {
            let (backend, passed) = run.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            eprintln!("{}: {passed} of {} cases pass", backend.compiler(), all.len());
            assert_eq!(passed, all.len());
        }
    });
}

#[test]
fn the_corpus_matches_the_interpreter() {
    let Some(backend) = backends().into_iter().next() else {
        eprintln!("skipped: no C compiler builds shared objects here");
        return;
    };
    let mut rng = TestRng::new(11);
    let kernels = corpus_kernels();
    let lirs: Vec<LirProgram> = kernels
        .iter()
        .map(|(_, k)| lower_kernel(k).expect("lowers"))
        .collect();
    let compiled = backend.compile_many(&lirs, &CompileOptions::default());
    let mut exact = 0;
    let mut approximate = Vec::new();
    for (((name, kernel), lir), result) in kernels.iter().zip(&lirs).zip(compiled) {
        let compiled = match result {
            Ok(compiled) => compiled,
            Err(e) => panic!("{name}: {e}"),
        };
        let inputs = random_inputs(&mut rng, kernel, 0.1);
        let views: Vec<ArrayView<'_>> = inputs.iter().map(Array::view).collect();
        let got = compiled
            .run_to_new(&views)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = run_lir(lir, &views, Mode::Native).unwrap_or_else(|e| panic!("{name}: {e}"));
        if uses_transcendental(lir) {
            // A transcendental among other ops has no per-element bound: it ran; checked below.
            approximate.push(kernel);
            continue;
        }
        exact += 1;
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                same_values(g, w),
                "{name}: output {k}:\n  want {w:?}\n  got  {g:?}"
            );
        }
    }
    // Kernels with transcendentals among other ops: the fuzzer's bound-aware comparison (every
    // exact part bit for bit given the backend's transcendental values, each of which within
    // the bound at the backend's own operands).
    let config = FuzzConfig {
        backends: Backends {
            c: Ok(leaked(CBackend::with_compiler(&backend.compiler()))),
            ..Backends::none()
        },
        ..FuzzConfig::default()
    };
    let mut report = FuzzReport::default();
    for (seed, kernel) in approximate.iter().enumerate() {
        rfx_check::check_kernel(&config, kernel, seed as u64, &mut report);
    }
    eprintln!(
        "corpus: {exact} exact kernels bit for bit; {} with transcendentals, {} of them within bounds",
        approximate.len(),
        report.path("c").within_bounds
    );
    assert!(report.mismatches.is_empty(), "{report}");
    assert!(exact >= 30, "only {exact} exact corpus kernels compiled");
    assert!(report.path("c").within_bounds >= 5, "{report}");
}

/// `y = x * 2 + 1` on `f32[3]`.
const AXPB: &str = "kernel axpb {\n  %x = input x : f32[3]\n  %two = const 2.0 : f32[]\n  %one = const 1.0 : f32[]\n  %y = mul %x, %two : f32[3]\n  %z = add %y, %one : f32[3]\n  output y = %z\n}\n";

fn compiled_axpb() -> Option<Arc<dyn Compiled>> {
    let backend = backends().into_iter().next()?;
    Some(
        backend
            .compile(&program(AXPB), &CompileOptions::default())
            .expect("compiles"),
    )
}

#[test]
fn a_missing_compiler_is_unavailable() {
    let backend = CBackend::with_compiler("/nonexistent/cc");
    let err = backend.check_available().expect_err("no such compiler");
    assert!(
        matches!(&err, BackendError::Unavailable { backend: "c", reason } if reason.contains("/nonexistent/cc")),
        "{err}"
    );
    let err = backend
        .compile(&program(AXPB), &CompileOptions::default())
        .err()
        .expect("no such compiler");
    assert!(
        matches!(err, BackendError::Unavailable { backend: "c", .. }),
        "{err}"
    );
}

#[test]
fn wrong_shapes_and_dtypes_are_typed_errors_and_write_nothing() {
    let Some(compiled) = compiled_axpb() else {
        eprintln!("skipped: no C compiler builds shared objects here");
        return;
    };
    let x = Array::from_slice(&[1.0f32, -2.0, 0.5]);
    let mut y = [7.0f32; 3];
    let shape = Shape::new([3]);
    compiled
        .run(
            &[x.view()],
            &mut [ArrayViewMut::new(&shape, &mut y[..]).expect("view")],
            &mut Scratch::new(),
        )
        .expect("runs");
    assert_eq!(y, [3.0, -3.0, 2.0]);

    let mut y = [7.0f32; 3];
    let short = Array::from_slice(&[1.0f32, 2.0]);
    let err = compiled
        .run(
            &[short.view()],
            &mut [ArrayViewMut::new(&shape, &mut y[..]).expect("view")],
            &mut Scratch::new(),
        )
        .expect_err("x has two elements");
    assert!(
        matches!(&err, BackendError::Call(CallError::Shape { name, .. }) if name == "x"),
        "{err}"
    );
    let doubles = Array::from_slice(&[1.0f64, 2.0, 3.0]);
    let err = compiled
        .run(
            &[doubles.view()],
            &mut [ArrayViewMut::new(&shape, &mut y[..]).expect("view")],
            &mut Scratch::new(),
        )
        .expect_err("x is f64");
    assert!(
        matches!(
            &err,
            BackendError::Call(CallError::DType {
                expected: DType::F32,
                found: DType::F64,
                ..
            })
        ),
        "{err}"
    );
    let mut long = [7.0f32; 4];
    let long_shape = Shape::new([4]);
    let err = compiled
        .run(
            &[x.view()],
            &mut [ArrayViewMut::new(&long_shape, &mut long[..]).expect("view")],
            &mut Scratch::new(),
        )
        .expect_err("y has four elements");
    assert!(
        matches!(&err, BackendError::Call(CallError::Shape { name, .. }) if name == "y"),
        "{err}"
    );
    let err = compiled
        .run(&[], &mut [], &mut Scratch::new())
        .expect_err("no arguments");
    assert!(
        matches!(err, BackendError::Call(CallError::Arity { .. })),
        "{err}"
    );
    assert_eq!(y, [7.0; 3]);
    assert_eq!(long, [7.0; 4]);
}

#[test]
fn an_output_aliasing_an_input_is_rejected() {
    let Some(compiled) = compiled_axpb() else {
        eprintln!("skipped: no C compiler builds shared objects here");
        return;
    };
    let shape = Shape::new([3]);
    let mut shared = vec![1.0f32, 2.0, 3.0];
    let ptr = shared.as_mut_ptr();
    // SAFETY: the aliasing views are only inspected by validation, which rejects the call before
    // anything reads or writes through them (as an FFI caller could pass them).
    let (input, output) = unsafe {
        (
            std::slice::from_raw_parts(ptr, 3),
            std::slice::from_raw_parts_mut(ptr, 3),
        )
    };
    let inputs = [ArrayView::new(&shape, input).expect("view")];
    let mut outputs = [ArrayViewMut::new(&shape, output).expect("view")];
    let err = compiled
        .run(&inputs, &mut outputs, &mut Scratch::new())
        .expect_err("y overlaps x");
    assert!(
        matches!(err, BackendError::Call(CallError::Alias { .. })),
        "{err}"
    );
    assert_eq!(shared, vec![1.0, 2.0, 3.0]);
}

/// The exact corpus kernels whose programs keep temporaries in the work buffer, each run many
/// times with one `Scratch` per thread from several threads at once, always give the
/// interpreter's bits.
#[test]
fn the_work_buffer_comes_from_the_callers_scratch() {
    let Some(backend) = backends().into_iter().next() else {
        eprintln!("skipped: no C compiler builds shared objects here");
        return;
    };
    let with_work: Vec<(String, rfx_ir::hir::Kernel, LirProgram)> = corpus_kernels()
        .into_iter()
        .filter_map(|(name, kernel)| {
            let lir = lower_kernel(&kernel).expect("lowers");
            (lir.arena_bytes() > 0 && !uses_transcendental(&lir)).then_some((name, kernel, lir))
        })
        .collect();
    let lirs: Vec<LirProgram> = with_work.iter().map(|(_, _, lir)| lir.clone()).collect();
    let compiled: Vec<Arc<dyn Compiled>> = backend
        .compile_many(&lirs, &CompileOptions::default())
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    assert!(
        compiled.len() >= 3,
        "only {} corpus programs with temporaries compiled",
        compiled.len()
    );
    std::thread::scope(|scope| {
        for thread in 0..3u64 {
            let (compiled, with_work) = (&compiled, &with_work);
            scope.spawn(move || {
                let mut scratch = Scratch::new();
                let mut rng = TestRng::new(thread);
                for _ in 0..10 {
                    for ((name, kernel, lir), compiled) in with_work.iter().zip(compiled) {
                        let inputs = random_inputs(&mut rng, kernel, 0.1);
                        let views: Vec<ArrayView<'_>> = inputs.iter().map(Array::view).collect();
                        let mut outputs: Vec<Array> = lir
                            .outputs()
                            .map(|(_, _, ty)| Array::filled(rfx_ir::Scalar::zero(ty.dtype), ty.shape.clone()))
                            .collect();
                        let mut out_views: Vec<ArrayViewMut<'_>> =
                            outputs.iter_mut().map(Array::view_mut).collect();
                        compiled
                            .run(&views, &mut out_views, &mut scratch)
                            .unwrap_or_else(|e| panic!("{name}: {e}"));
                        let want = run_lir(lir, &views, Mode::Native).expect("interprets");
                        for (g, w) in outputs.iter().zip(&want) {
                            assert!(same_values(g, w), "{name}: want {w:?}\ngot  {g:?}");
                        }
                    }
                }
                assert!(
                    scratch.capacity_bytes() > 0,
                    "the temporaries live in the scratch"
                );
            });
        }
    });
}

/// `backend` for the checking crate, which takes backends by `'static` reference.
fn leaked(backend: CBackend) -> &'static dyn Backend {
    Box::leak(Box::new(backend))
}

/// The fuzzer's saved regressions (crates/rfx-cli/tests/regressions) and 120 random kernels
/// through the fuzzer's `c` path: exact outputs bit for bit with the LIR interpreter,
/// transcendental values within the backend's bound, and the same bits on a second call.
#[test]
fn the_fuzzer_finds_no_mismatch_on_the_c_path() {
    let Some(backend) = backends().into_iter().next() else {
        eprintln!("skipped: no C compiler builds shared objects here");
        return;
    };
    let config = FuzzConfig {
        kernels: Some(120),
        first_seed: 1,
        metal_every: 0,
        backends: Backends {
            c: Ok(leaked(backend)),
            ..Backends::none()
        },
        ..FuzzConfig::default()
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rfx-cli/tests/regressions");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the saved regressions")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rfx"))
        .collect();
    files.sort();
    let mut replayed = FuzzReport::default();
    for file in &files {
        replay_file(&config, file, &mut replayed).expect("a saved regression parses");
    }
    eprint!("{} regressions:\n{replayed}", files.len());
    assert!(replayed.mismatches.is_empty(), "{replayed}");
    assert!(replayed.path("c").compared >= 5, "{replayed}");

    let report = rfx_check::run(&config).expect("fuzz run");
    eprint!("{report}");
    assert!(report.mismatches.is_empty(), "{report}");
    let c = report.path("c");
    assert!(c.compared >= 80, "{report}");
    assert!(c.within_bounds > 0, "{report}");
    assert!(
        c.skipped
            .keys()
            .all(|reason| reason.starts_with("unsupported: op")),
        "{report}"
    );
}

/// A compiler that builds the availability probe but fails on the backend's units: a batch
/// of a refused program (while the export refuses some op) and a good one gives one result
/// each, the refusal as `Unsupported` and the failure as `BackendError::Compile` carrying the
/// compiler's stderr.
#[cfg(unix)]
#[test]
fn a_failed_compile_is_a_typed_error_with_the_compilers_message() {
    let Some(real) = backends().into_iter().next() else {
        eprintln!("skipped: no C compiler builds shared objects here");
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("failing-cc.sh");
    let text = format!(
        "for a in \"$@\"; do case \"$a\" in *rfx_jit.c) echo 'rfx-test: refusing the unit' >&2; exit 3;; esac; done\nexec {} \"$@\"\n",
        real.compiler()
    );
    std::fs::write(&script, text).expect("write the script");
    let backend = CBackend::with_compiler(&format!("sh {}", script.display()));
    backend.check_available().expect("the probe compiles");
    // A program the export refuses, if any op is still refused; the batch is then two programs.
    let refused = cases()
        .iter()
        .map(|case| lower_kernel(&case.kernel).expect("lowers"))
        .find(|lir| {
            matches!(
                rfx_codegen_c::c_source(lir, "probe"),
                Err(rfx_codegen_c::ExportError::Unsupported(_))
            )
        });
    let mut batch: Vec<LirProgram> = refused.into_iter().collect();
    batch.push(program(AXPB));
    let results = backend.compile_many(&batch, &CompileOptions::default());
    assert_eq!(results.len(), batch.len());
    if batch.len() == 2 {
        assert!(
            matches!(&results[0], Err(BackendError::Unsupported { backend: "c", .. })),
            "{:?}",
            results[0].as_ref().err()
        );
    }
    match &results[batch.len() - 1] {
        Err(BackendError::Compile {
            backend: "c",
            message,
        }) => {
            assert!(message.contains("rfx-test: refusing the unit"), "{message}");
        }
        other => panic!("{:?}", other.as_ref().err()),
    }
}

/// The real-time paths: `CallArgs` made for the program run without a check, on their own
/// arrays; made for another program they are checked like any call; `run_addresses` checks the
/// count only. All give the values of `run`.
#[test]
fn call_args_and_addresses_run_the_same_code() {
    let Some(backend) = backends().into_iter().next() else {
        eprintln!("skipped: no C compiler builds shared objects here");
        return;
    };
    let compiled = backend
        .compile(&program(AXPB), &CompileOptions::default())
        .expect("compiles");
    let mut scratch = Scratch::new();
    let mut args = rfx_lower::CallArgs::new(compiled.as_ref());
    assert_eq!(Some(args.id()), compiled.args_id());
    for step in 0..3 {
        let x = [step as f32, -0.5, 1e30];
        args.input_mut::<f32>(0).expect("x is f32").copy_from_slice(&x);
        compiled.run_args(&mut args, &mut scratch).expect("runs");
        assert_eq!(
            args.output::<f32>(0),
            Some(&[2.0 * step as f32 + 1.0, 0.0, 2e30][..])
        );
    }
    // Arguments made for another program of the same signature take the checked path.
    let other = backend
        .compile(&program(AXPB), &CompileOptions::default())
        .expect("compiles");
    let mut foreign = rfx_lower::CallArgs::new(other.as_ref());
    foreign
        .input_mut::<f32>(0)
        .expect("x is f32")
        .copy_from_slice(&[4.0, 5.0, 6.0]);
    compiled.run_args(&mut foreign, &mut scratch).expect("runs");
    assert_eq!(foreign.output::<f32>(0), Some(&[9.0f32, 11.0, 13.0][..]));

    let x = [0.25f32, 8.0, -3.0];
    let mut y = [0.0f32; 3];
    let addresses = [x.as_ptr() as usize, y.as_mut_ptr() as usize];
    // SAFETY: one address per argument in call order, each of exactly three f32, the output
    // distinct from the input and written by nothing else during the call.
    unsafe { compiled.run_addresses(&addresses, &mut scratch) }.expect("runs");
    assert_eq!(y, [1.5, 17.0, -5.0]);
    // SAFETY: the count is wrong, which the backend checks before using any address.
    let err = unsafe { compiled.run_addresses(&addresses[..1], &mut scratch) }.expect_err("one address");
    assert!(
        matches!(
            err,
            BackendError::Call(CallError::Arity {
                expected: 2,
                found: 1,
                ..
            })
        ),
        "{err}"
    );
}

#[test]
fn the_backend_states_the_bound_the_suite_asserts() {
    let differences = stated_bound_differences(&CBackend::with_compiler("cc"), BOUND_ULPS);
    assert!(differences.is_empty(), "{differences:#?}");
}

/// The pairwise tree over a reduction's lanes (`rfx_ir::lir::reduce_lane_levels`) at lane counts
/// whose levels are loops, single combinations or odd (3, 5, 6, 12), in `f32` and `f64`: the
/// compiled C gives the LIR interpreter's bits for a sum, a mean and a max of a ragged row.
#[test]
fn every_lane_count_combines_as_the_interpreter_does() {
    let Some(backend) = backends().into_iter().next() else {
        return;
    };
    for dtype in ["f32", "f64"] {
        for lanes in [3u32, 5, 6, 12] {
            let n = 203;
            let text = format!(
                "kernel k {{\n %x = input x : {dtype}[{n}]\n %s = sum %x axes [0] : {dtype}[]\n \
                 %m = mean %x axes [0] : {dtype}[]\n %mx = max %x axes [0] : {dtype}[]\n \
                 output s = %s\n output m = %m\n output mx = %mx\n}}"
            );
            let kernel = rfx_ir::hir::parse(&text).expect("parses");
            let (mir, _) = rfx_opt::optimize(&kernel, &rfx_opt::OptConfig::default()).expect("optimize");
            let config = rfx_lower::LowerConfig {
                reduce_lanes: Some(lanes),
                ..rfx_lower::LowerConfig::default()
            };
            let (lir, _) = rfx_lower::lower(&mir, &config).expect("lower");
            assert!(
                lir.kernels().iter().any(|k| k.schedule.reduce_lanes == lanes),
                "{lir}"
            );
            let mut rng = TestRng::new(u64::from(lanes) * 31 + n as u64);
            let inputs = random_inputs(&mut rng, &kernel, 0.0);
            let views: Vec<ArrayView<'_>> = inputs.iter().map(Array::view).collect();
            let want = run_lir(&lir, &views, Mode::Native).expect("interpreter");
            let got = backend
                .compile(&lir, &CompileOptions::default())
                .expect("compiles")
                .run_to_new(&views)
                .expect("runs");
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert!(same_values(g, w), "lanes {lanes} {dtype}: {g:?} != {w:?}");
            }
        }
    }
}
