//! Offline validation without a GPU: every kernel of the conformance set (every op on every
//! dtype, broadcasts, reductions, multiple outputs, the optimiser corpus, 240 random kernels)
//! is compiled by NVRTC for `compute_80` and `sm_90`, and the PTX is assembled by `ptxas` for
//! `sm_80` and `sm_90`; the op cases and corpus kernels whose source `fast_math` changes are
//! also compiled with it for `sm_90`. The backend conformance suite every backend runs
//! (`rfx_check::conformance`) is compiled and assembled for `sm_90`. Any error fails the test. Without NVRTC or ptxas the test prints
//! `skipped: ...`, unless `RFX_REQUIRE_NVRTC=1` (CI), where it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use common::{Case, corpus_cases, missing, op_cases, ptxas, random_cases, suite_cases};
use rfx_codegen_cuda::{CudaOptions, cuda_source, ptx, ptx_with};
use rfx_ir::repeat::Step;
use rfx_lower::{BackendError, CompileOptions};

const RANDOM_KERNELS: u64 = 240;

/// NVRTC `arch` → the `ptxas -arch` that assembles its output.
const TARGETS: [(&str, &str); 2] = [("compute_80", "sm_80"), ("sm_90", "sm_90")];

fn assemble(ptxas: &Path, dir: &Path, name: &str, ptx_text: &str, sm: &str) -> Result<(), String> {
    let ptx_path = dir.join(format!("{name}_{sm}.ptx"));
    let cubin_path = dir.join(format!("{name}_{sm}.cubin"));
    std::fs::write(&ptx_path, ptx_text).map_err(|e| e.to_string())?;
    let output = Command::new(ptxas)
        .arg(format!("-arch={sm}"))
        .arg(&ptx_path)
        .arg("-o")
        .arg(&cubin_path)
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    if !output.status.success() {
        return Err(format!(
            "ptxas -arch={sm} failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let _ = std::fs::remove_file(&ptx_path);
    let _ = std::fs::remove_file(&cubin_path);
    Ok(())
}

/// Compiles and assembles one case for `targets` in exact mode, and with `fast_math` (the
/// intrinsics) for `sm_90` when `fast` is set.
fn check_case(
    ptxas: &Path,
    dir: &Path,
    case: &Case,
    targets: &[(&str, &str)],
    with_fast: bool,
) -> Result<usize, String> {
    let mut assembled = 0;
    let exact = CompileOptions::default();
    let fast = CompileOptions {
        fast_math: true,
        ..CompileOptions::default()
    };
    for &(arch, sm) in targets {
        let ptx_text = ptx(&case.lir, arch, &exact).map_err(|e| format!("NVRTC {arch}: {e}"))?;
        assemble(ptxas, dir, &case.name, &ptx_text, sm)?;
        assembled += 1;
    }
    // A program of small kernels compiles as one function; its kernels one by one (as a
    // caller may ask with `CudaOptions::one_launch = false`) must compile too.
    if cuda_source(&case.lir, &exact).is_ok_and(|source| source.contains("rfx_program_")) {
        let mut per_kernel = CudaOptions::default();
        per_kernel.one_launch = false;
        let ptx_text = ptx_with(&case.lir, "sm_90", &exact, &per_kernel)
            .map_err(|e| format!("NVRTC sm_90, one launch per kernel: {e}"))?;
        assemble(
            ptxas,
            dir,
            &format!("{}_per_kernel", case.name),
            &ptx_text,
            "sm_90",
        )?;
        assembled += 1;
    }
    if with_fast {
        let ptx_text = ptx(&case.lir, "sm_90", &fast).map_err(|e| format!("NVRTC sm_90 fast-math: {e}"))?;
        assemble(ptxas, dir, &format!("{}_fast", case.name), &ptx_text, "sm_90")?;
        assembled += 1;
    }
    Ok(assembled)
}

/// Whether `fast_math` changes the kernel bodies (not only the header comment).
fn fast_math_differs(case: &Case) -> bool {
    let body = |fast_math| {
        let options = CompileOptions {
            fast_math,
            ..CompileOptions::default()
        };
        let source = cuda_source(&case.lir, &options).expect("cuda source");
        source.lines().skip(1).collect::<Vec<_>>().join("\n")
    };
    body(true) != body(false)
}

#[test]
fn every_conformance_kernel_compiles_with_nvrtc_and_assembles_with_ptxas() {
    let mut cases = op_cases();
    let n_ops = cases.len();
    cases.extend(corpus_cases());
    let n_corpus = cases.len() - n_ops;
    cases.extend(random_cases(RANDOM_KERNELS));
    let n_before_suite = cases.len();
    cases.extend(suite_cases());
    let n_suite = cases.len() - n_before_suite;

    // Probe NVRTC with the first case: Unavailable means it is not installed.
    match ptx(&cases[0].lir, "sm_90", &CompileOptions::default()) {
        Err(BackendError::Unavailable { reason, .. }) => {
            return missing(&format!("NVRTC is not installed ({reason})"));
        }
        Err(e) => panic!("{}: {e}", cases[0].name),
        Ok(_) => {}
    }
    let Some(ptxas) = ptxas() else {
        return missing("ptxas was not found (pip install nvidia-cuda-nvcc-cu12, or set RFX_PTXAS)");
    };

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rfx-cuda-ptx");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let start = Instant::now();
    let next = AtomicUsize::new(0);
    let assembled = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut failures = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(case) = cases.get(i) else { break };
                        // Fast math changes only the spellings of some float ops, which the op cases
                        // and the corpus cover; the random kernels are checked in exact mode.
                        let with_fast = i < n_ops + n_corpus && fast_math_differs(case);
                        // The suite overlaps the op cases; one target keeps its cost down.
                        let targets = if i < n_before_suite {
                            &TARGETS[..]
                        } else {
                            &TARGETS[1..]
                        };
                        match check_case(&ptxas, &dir, case, targets, with_fast) {
                            Ok(n) => {
                                assembled.fetch_add(n, Ordering::Relaxed);
                            }
                            Err(e) => failures.push(format!("{}: {e}\n{}", case.name, case.lir)),
                        }
                    }
                    failures
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("worker panicked"))
            .collect()
    });
    println!(
        "{} kernels ({n_ops} op cases, {n_corpus} corpus, {RANDOM_KERNELS} random, {n_suite} of the shared suite): {} PTX modules compiled by NVRTC \
         and assembled by {} in {:.1} s on {threads} threads",
        cases.len(),
        assembled.load(Ordering::Relaxed),
        ptxas.display(),
        start.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {} kernels failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn nvrtc_rejects_a_bad_architecture_with_a_typed_error() {
    let case = &op_cases()[0];
    match ptx(&case.lir, "sm_90; rm -rf", &CompileOptions::default()) {
        Err(BackendError::Unavailable { reason, .. }) => {
            missing(&format!("NVRTC is not installed ({reason})"))
        }
        Err(BackendError::Compile { message, .. }) => assert!(message.contains("architecture"), "{message}"),
        other => panic!("expected a compile error, got {other:?}"),
    }
}

/// The `__syncthreads();` a one-launch function holds for `steps`: one before every kernel
/// but the function's first outside any loop (a kernel inside a loop reads what the previous
/// iteration's last kernel wrote), and one before each exit flag's read.
fn one_launch_barriers(steps: &[Step], in_loop: bool, first: &mut bool) -> usize {
    let mut barriers = 0;
    for step in steps {
        match step {
            Step::Kernel(_) => {
                barriers += usize::from(!*first || in_loop);
                *first = false;
            }
            Step::Loop { spec, body } => {
                barriers += one_launch_barriers(body, true, first) + usize::from(spec.exit.is_some());
                *first = false;
            }
        }
    }
    barriers
}

/// A program in one launch is correct only if every thread reaches every barrier and the
/// kernels keep their order: in each such program of the corpus, the shared suite (loops
/// included) and random kernels, the one function holds every kernel in order, a
/// `__syncthreads()` between each two (and before every kernel in a loop and each exit flag's
/// read), and no `return` (tree kernels, which return early, are never fused). Needs no NVRTC.
#[test]
fn one_launch_programs_keep_their_kernels_in_order_between_barriers() {
    let mut cases = corpus_cases();
    cases.extend(suite_cases());
    cases.extend(random_cases(RANDOM_KERNELS));
    let mut fused = 0;
    for case in &cases {
        let source = cuda_source(&case.lir, &CompileOptions::default()).expect("cuda source");
        let Some(start) = source.find("__global__ void rfx_program_") else {
            assert!(
                case.lir.kernels().len() < 2
                    || source.matches("__global__").count() == case.lir.kernels().len(),
                "{}: {source}",
                case.name
            );
            continue;
        };
        fused += 1;
        let function = &source[start..];
        let kernels = case.lir.kernels();
        assert_eq!(source.matches("__global__").count(), 1, "{}: {source}", case.name);
        let steps = rfx_ir::repeat::steps(kernels.len(), case.lir.loops()).expect("loops that nest");
        assert_eq!(
            function.matches("__syncthreads();").count(),
            one_launch_barriers(&steps, false, &mut true),
            "{}: {source}",
            case.name
        );
        assert_eq!(
            function.matches("__syncthreads_or(").count(),
            case.lir.loops().iter().filter(|l| l.exit.is_some()).count(),
            "{}: {source}",
            case.name
        );
        assert!(!function.contains("return"), "{}: {source}", case.name);
        let mut at = 0;
        for kernel in kernels {
            let marker = format!("// kernel `{}`:", kernel.name);
            let found = function[at..]
                .find(&marker)
                .unwrap_or_else(|| panic!("{}: {marker} missing or out of order\n{source}", case.name));
            at += found + marker.len();
        }
    }
    assert!(fused >= 10, "only {fused} programs ran in one launch");
    println!("{fused} of {} programs run in one launch", cases.len());
}
