//! The conformance suite (`rfx_check::conformance`) and the saved corpus
//! (crates/rfx-opt/tests/corpus) exported as C, compiled with every C compiler present (gcc,
//! clang) at `-O2 -Wall -Wextra -Werror -ffp-contract=off`, and run: exact ops must give the LIR
//! interpreter's bits, transcendentals lie within 4 ULP of its `f64` oracle. Only cases using
//! an op of `REFUSED` may be refused (`ExportError::Unsupported`).

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

/// The ops the export still refuses (`ExportError::Unsupported`); a case using any other op
/// must export.
const REFUSED: &[&str] = &[];

/// Keeps the exportable jobs; returns the ops of the refused ones, each of [`REFUSED`].
fn exportable(all: Vec<Job>) -> (Vec<Job>, Vec<String>) {
    let mut jobs = Vec::new();
    let mut refused = Vec::new();
    for job in all {
        match c_source(&job.program, "probe") {
            Ok(_) => jobs.push(job),
            Err(ExportError::Unsupported(op)) if REFUSED.contains(&op.as_str()) => refused.push(op),
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
        "conformance: {} of {total} exportable, {} refused ({})",
        jobs.len(),
        refused.len(),
        REFUSED.join(", ")
    );
    // The list is tight: each op in it is refused (an op that became exportable leaves it).
    let mut refused_ops: Vec<&str> = refused.iter().map(String::as_str).collect();
    refused_ops.sort_unstable();
    refused_ops.dedup();
    let mut listed = REFUSED.to_vec();
    listed.sort_unstable();
    assert_eq!(refused_ops, listed);
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
        "corpus: {} of {total} exportable and exact, {} refused, {} with transcendentals left out",
        jobs.len(),
        refused.len(),
        approximate.len()
    );
    assert!(jobs.len() >= 30, "only {} corpus kernels exportable", jobs.len());
    run_all("corpus", &jobs);
}
