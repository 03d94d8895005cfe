//! The conformance suite (`rfx_check::conformance`), the saved corpus
//! (crates/rfx-opt/tests/corpus) and 1,000 random kernels (`rfx fuzz`'s
//! kernels of seeds 1 to 1,000, `rfx_check::generator::fuzz_kernel`, with its inputs) exported
//! as C, cross-compiled for aarch64 Linux (`aarch64-linux-gnu-gcc -std=c99 -O2 -static` and the
//! export's tested flags, many kernels per translation unit) and run under `qemu-aarch64`.
//!
//! Kernels of exact ops must give the LIR interpreter's bits. Kernels with transcendental ops
//! are checked one op at a time ([`common::probe`]): each transcendental value within 4 ULP
//! of the `f64` oracle at the exported code's own operands, everything around them bit for
//! bit (after a float reduction, in the exported program's reduction lanes). Kernels the export refuses (`ExportError::Unsupported`), kernels of more than
//! [`MAX_ELEMENTS`] input and output elements (their data would be embedded in the driver) and
//! kernels that do not lower are counted and skipped.
//!
//! Skipped, with a message, where `aarch64-linux-gnu-gcc` or `qemu-aarch64` is missing (Debian:
//! `gcc-aarch64-linux-gnu`, `libc6-dev-arm64-cross`, `qemu-user`), unless `RFX_REQUIRE_CROSS=1`
//! is set, as CI sets it: then that is a failure.

mod common;

use std::process::Command;

use common::probe::{Probed, ProbedCount, check_probed, has_transcendental, probe};
use common::{
    Job, SHOWN, Toolchain, check_on, corpus_kernels, for_each_batch, lower_kernel, parse_line, run_batch,
};
use rfx_check::conformance::{cases, inputs};
use rfx_check::generator::fuzz_kernel;
use rfx_check::oracle::SPECIAL_RATE;
use rfx_codegen_c::{ExportError, c_source};
use rfx_ir::hir::Kernel;
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, ArrayView};
use rfx_lower::order_inputs;

const AARCH64_CC: &str = "aarch64-linux-gnu-gcc";

/// The cross compiler and qemu-user (the tested flags, `-Werror` included, and `-static`).
fn aarch64() -> Toolchain {
    Toolchain {
        cc: AARCH64_CC,
        flags: vec!["-static".to_string()],
        runner: vec!["qemu-aarch64".to_string()],
    }
}

/// The random kernels: seeds 1 to this.
const SEEDS: u64 = 1000;

/// The most input and output elements of one kernel (inputs are embedded in the driver).
const MAX_ELEMENTS: usize = 4096;

/// The bound of every exported transcendental (the CPU backend's documented one).
const ULP_BOUND: u64 = 4;

/// Whether the cross toolchain is present; when it is not, fails under `RFX_REQUIRE_CROSS=1`
/// and otherwise prints why the test is skipped.
fn cross_tools_present() -> bool {
    let missing: Vec<&str> = [AARCH64_CC, "qemu-aarch64"]
        .into_iter()
        .filter(|tool| {
            !Command::new(tool)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    let what = format!(
        "{} not found (Debian packages gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user)",
        missing.join(" and ")
    );
    assert!(
        std::env::var("RFX_REQUIRE_CROSS").as_deref() != Ok("1"),
        "RFX_REQUIRE_CROSS=1 but {what}"
    );
    eprintln!("skipped: {what}");
    false
}

/// A kernel with its inputs (in the kernel's input order).
struct Case {
    name: String,
    kernel: Kernel,
    inputs: Vec<Array>,
}

/// What became of the cases.
#[derive(Debug, Default)]
struct Tally {
    exact: usize,
    probed: usize,
    refused: usize,
    too_large: usize,
    not_lowered: usize,
    not_probed: usize,
}

/// What checking a kernel with transcendental ops needs beside its instrumented program's
/// job: its probe and the kernel's inputs by name.
struct ProbeOf {
    probed: Probed,
    named_inputs: Vec<(String, Array)>,
}

/// The jobs of the cases: exact programs, and instrumented programs with their probes.
#[derive(Default)]
struct Jobs {
    exact: Vec<Job>,
    probed: Vec<Job>,
    probes: Vec<ProbeOf>,
}

/// `program`'s job on `case`'s inputs, bound by name; `None` (counted) when it is too large
/// or refused.
fn job_of(case: &Case, program: LirProgram, tally: &mut Tally) -> Option<Job> {
    let elements: usize = program
        .inputs()
        .chain(program.outputs())
        .map(|(_, _, ty)| ty.shape.numel())
        .sum();
    if elements > MAX_ELEMENTS {
        tally.too_large += 1;
        return None;
    }
    match c_source(&program, "probe") {
        Ok(_) => {}
        Err(ExportError::Unsupported(_)) => {
            tally.refused += 1;
            return None;
        }
        Err(e) => panic!("{}: {e}", case.name),
    }
    let named: Vec<(&str, ArrayView<'_>)> = case
        .kernel
        .inputs()
        .map(|(_, name, _)| name)
        .zip(case.inputs.iter().map(Array::view))
        .collect();
    let ordered = order_inputs(&program, &named).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let inputs = ordered.iter().map(ArrayView::to_owned).collect();
    Some(Job {
        name: case.name.clone(),
        program,
        inputs,
        ulp_bound: None,
    })
}

/// Sorts `cases` into exact jobs and probed ones (added to `jobs`), counting the rest.
fn prepare(cases: Vec<Case>, jobs: &mut Jobs, tally: &mut Tally) {
    for case in cases {
        if !has_transcendental(&case.kernel) {
            match lower_kernel(&case.kernel) {
                Ok(program) => jobs.exact.extend(job_of(&case, program, tally)),
                Err(_) => tally.not_lowered += 1,
            }
            continue;
        }
        let Some(probed) = probe(&case.kernel) else {
            tally.not_probed += 1;
            continue;
        };
        let Ok(program) = lower_kernel(&probed.instrumented) else {
            tally.not_lowered += 1;
            continue;
        };
        if let Some(job) = job_of(&case, program, tally) {
            let named_inputs = case
                .kernel
                .inputs()
                .map(|(_, name, _)| name.to_string())
                .zip(case.inputs)
                .collect();
            jobs.probed.push(job);
            jobs.probes.push(ProbeOf { probed, named_inputs });
        }
    }
}

/// Runs the instrumented programs on aarch64 and checks each against its probe; returns the
/// counts, failing with every mismatch.
fn check_probed_jobs(jobs: &[Job], probes: &[ProbeOf]) -> ProbedCount {
    let dir = tempfile::tempdir().expect("temp dir");
    let lines = for_each_batch(jobs, dir.path(), |batch, batch_dir, chunk| {
        run_batch(&aarch64(), &[], batch_dir, batch, chunk).got
    });
    let mut total = ProbedCount::default();
    let mut failures = Vec::new();
    for ((job, probe_of), line) in jobs.iter().zip(probes).zip(lines.iter().flatten()) {
        let result = parse_line(&job.program, line).and_then(|outputs| {
            let got: Vec<(&str, &Array)> = job
                .program
                .outputs()
                .map(|(_, name, _)| name)
                .zip(&outputs)
                .collect();
            let inputs: Vec<(&str, &Array)> = probe_of
                .named_inputs
                .iter()
                .map(|(n, a)| (n.as_str(), a))
                .collect();
            check_probed(&probe_of.probed, &job.program, &inputs, &got, ULP_BOUND)
        });
        match result {
            Ok(count) => {
                total.values += count.values;
                total.exact += count.exact;
                total.after_reduction += count.after_reduction;
                total.left_out += count.left_out;
            }
            Err(message) => failures.push(format!("{}: {message}", job.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures (the first {SHOWN}):\n{}",
        failures.len(),
        failures[..failures.len().min(SHOWN)].join("\n")
    );
    total
}

fn corpus_cases() -> Vec<Case> {
    let mut rng = TestRng::new(7);
    corpus_kernels()
        .into_iter()
        .map(|(name, kernel)| {
            let inputs = random_inputs(&mut rng, &kernel, SPECIAL_RATE);
            Case { name, kernel, inputs }
        })
        .collect()
}

/// `rfx fuzz`'s kernels and inputs of seeds 1 to [`SEEDS`].
fn random_cases() -> Vec<Case> {
    (1..=SEEDS)
        .map(|seed| {
            let kernel = fuzz_kernel(seed);
            let inputs = random_inputs(&mut TestRng::new(seed), &kernel, SPECIAL_RATE);
            Case {
                name: format!("seed {seed}"),
                kernel,
                inputs,
            }
        })
        .collect()
}

#[test]
fn corpus_and_random_kernels_match_the_interpreter_on_aarch64() {
    if !cross_tools_present() {
        return;
    }
    let start = std::time::Instant::now();
    let mut tally = Tally::default();
    let mut jobs = Jobs::default();
    prepare(corpus_cases(), &mut jobs, &mut tally);
    let corpus_exported = jobs.exact.len() + jobs.probed.len();
    prepare(random_cases(), &mut jobs, &mut tally);
    let random_exported = jobs.exact.len() + jobs.probed.len() - corpus_exported;
    tally.exact = jobs.exact.len();
    tally.probed = jobs.probed.len();
    eprintln!("aarch64: {corpus_exported} corpus and {random_exported} random kernels exported; {tally:?}");
    assert!(
        corpus_exported >= 40,
        "only {corpus_exported} corpus kernels exported"
    );
    assert!(
        random_exported >= 500,
        "only {random_exported} random kernels exported"
    );
    check_on(&aarch64(), &jobs.exact, &[&[]]);
    let count = check_probed_jobs(&jobs.probed, &jobs.probes);
    eprintln!(
        "aarch64: {} exact programs matched; {} with transcendentals: {} transcendental values within \
         {ULP_BOUND} ULP, {} outputs and operands bit for bit ({} after float reductions), {} left out \
         ({:.1} s)",
        jobs.exact.len(),
        jobs.probed.len(),
        count.values,
        count.exact,
        count.after_reduction,
        count.left_out,
        start.elapsed().as_secs_f64()
    );
}

/// Every exportable conformance case on aarch64: exact ops bit for bit, each transcendental
/// case within the bound of the interpreter's `f64` oracle.
#[test]
fn every_exportable_conformance_case_matches_the_interpreter_on_aarch64() {
    if !cross_tools_present() {
        return;
    }
    let mut refused = 0;
    let mut jobs = Vec::new();
    for case in cases() {
        let program = lower_kernel(&case.kernel).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        match c_source(&program, "probe") {
            Ok(_) => jobs.push(Job {
                name: case.name.clone(),
                program,
                inputs: inputs(&case, 1),
                ulp_bound: case.transcendental.map(|_| ULP_BOUND),
            }),
            Err(ExportError::Unsupported(_)) => refused += 1,
            Err(e) => panic!("{}: {e}", case.name),
        }
    }
    eprintln!(
        "aarch64: {} conformance cases exported, {refused} refused",
        jobs.len()
    );
    assert!(jobs.len() > 400, "only {} conformance cases exported", jobs.len());
    check_on(&aarch64(), &jobs, &[&[]]);
}
