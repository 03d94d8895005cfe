//! The conformance suite (`rfx_check::conformance`) and the saved corpus
//! (crates/rfx-opt/tests/corpus) exported as C, compiled with every C compiler present (gcc,
//! clang) at `-O2 -Wall -Wextra -Werror -ffp-contract=off`, and run: every exported op is exact,
//! so every output must be the LIR interpreter's bits. Cases using ops the export refuses
//! (`ExportError::Unsupported`) are counted and must be refused for that reason only.

mod common;

use common::{Job, check_with_every_compiler};
use rfx_check::conformance::{cases, inputs};
use rfx_codegen_c::{ExportError, c_source};
use rfx_ir::testgen::{TestRng, random_inputs, read_corpus};
use rfx_lower::{LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

fn uses_transcendental(program: &rfx_ir::lir::LirProgram) -> bool {
    program
        .kernels()
        .iter()
        .flat_map(|k| k.preamble.iter().chain(&k.body))
        .any(|inst| match inst {
            rfx_ir::lir::Inst::Unary { op, .. } => op.is_transcendental(),
            rfx_ir::lir::Inst::Binary { op, .. } => {
                matches!(op, rfx_ir::BinaryOp::Pow | rfx_ir::BinaryOp::Atan2)
            }
            _ => false,
        })
}

fn lower_kernel(kernel: &rfx_ir::hir::Kernel) -> rfx_ir::lir::LirProgram {
    let (mir, _) = optimize(kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

/// Keeps the exportable jobs; returns how many were refused as unsupported.
fn exportable(all: Vec<Job>) -> (Vec<Job>, usize) {
    let mut jobs = Vec::new();
    let mut refused = 0;
    for job in all {
        match c_source(&job.program, "probe") {
            Ok(_) => jobs.push(job),
            Err(ExportError::Unsupported(_)) => refused += 1,
            Err(e) => panic!("{}: {e}", job.name),
        }
    }
    (jobs, refused)
}

fn run_all(label: &str, jobs: &[Job]) {
    eprintln!("{label}: {} programs", jobs.len());
    check_with_every_compiler(jobs, &[&[]]);
}

#[test]
fn every_exportable_conformance_case_matches_the_interpreter() {
    let all: Vec<Job> = cases()
        .iter()
        .map(|case| Job {
            name: case.name.clone(),
            program: lower_kernel(&case.kernel),
            inputs: inputs(case, 1),
            // The CPU backend's documented bound, which the exported approximations share.
            ulp_bound: case.transcendental.map(|_| 4),
        })
        .collect();
    let total = all.len();
    let (jobs, refused) = exportable(all);
    eprintln!(
        "conformance: {} exportable, {refused} refused (transcendentals but exp, exp2, log, tanh, sigmoid; pow, atan2, float fmod)",
        jobs.len()
    );
    assert!(
        jobs.len() > 400,
        "only {} of {total} cases exportable",
        jobs.len()
    );
    run_all("conformance", &jobs);
}

#[test]
fn every_exportable_corpus_kernel_matches_the_interpreter() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rfx-opt/tests/corpus");
    let mut rng = TestRng::new(7);
    let all: Vec<Job> = read_corpus(&dir)
        .expect("read the corpus")
        .into_iter()
        .map(|(name, text)| {
            let kernel = rfx_ir::hir::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            Job {
                name,
                program: lower_kernel(&kernel),
                inputs: random_inputs(&mut rng, &kernel, 0.1),
                ulp_bound: None,
            }
        })
        .collect();
    let total = all.len();
    // Kernels with a transcendental among other ops have no per-element bound to check
    // against; the conformance test checks each exported transcendental alone.
    let (all, approximate): (Vec<Job>, Vec<Job>) = all
        .into_iter()
        .partition(|job| !uses_transcendental(&job.program));
    let (jobs, refused) = exportable(all);
    eprintln!(
        "corpus: {} of {total} exportable and exact, {refused} refused, {} with transcendentals left out",
        jobs.len(),
        approximate.len()
    );
    assert!(jobs.len() >= 30, "only {} corpus kernels exportable", jobs.len());
    run_all("corpus", &jobs);
}
