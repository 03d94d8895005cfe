//! The hand-written loop programs' expected outputs (recurrences computed in plain Rust) are what
//! the LIR interpreter gives for them: the two definitions of a program loop agree.

use rfx_check::loop_programs::{compare, loop_programs};
use rfx_ir::Array;
use rfx_ir::interp::{Mode, run_lir};

#[test]
fn the_lir_interpreter_gives_every_loop_programs_expected_outputs() {
    let all = loop_programs();
    assert!(all.len() >= 30, "only {} loop programs", all.len());
    let mut failures = Vec::new();
    for case in &all {
        let views: Vec<_> = case.inputs.iter().map(Array::view).collect();
        let outputs = run_lir(&case.program, &views, Mode::Native).expect("the interpreter runs it");
        if let Err(e) = compare(case, &outputs) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_wrong_value_is_reported() {
    let case = &loop_programs()[1];
    let mut outputs = case.expected.clone();
    let first = outputs[0].to_f64_vec()[0];
    let mut changed = outputs[0].as_slice::<f64>().expect("f64").to_vec();
    changed[0] = first + 1.0;
    outputs[0] = Array::from_slice(&changed);
    let err = compare(case, &outputs).expect_err("a changed element");
    assert!(err.contains("element 0"), "{err}");
}

/// The conformance suite's loop cases all build (a case whose kernel fails to build would drop
/// out of the suite unseen), compile to programs with loops, and their lowered programs give
/// the HIR interpreter's bits where no float reduction's order is involved.
#[test]
fn the_conformance_loop_cases_lower_to_programs_with_loops_that_match_the_hir_interpreter() {
    use rfx_check::conformance::{cases, inputs};
    use rfx_ir::interp::run_hir;
    use rfx_ir::testgen::same_values;
    use rfx_lower::{LowerConfig, lower};
    use rfx_opt::{OptConfig, optimize};

    let loops: Vec<_> = cases()
        .into_iter()
        .filter(|c| c.name.starts_with("loop_"))
        .collect();
    assert_eq!(
        loops.len(),
        41,
        "loop cases: {:?}",
        loops.iter().map(|c| &c.name).collect::<Vec<_>>()
    );
    let mut with_loops = 0;
    for case in &loops {
        let (mir, _) =
            optimize(&case.kernel, &OptConfig::default()).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let (lir, _) = lower(&mir, &LowerConfig::default()).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        // A loop of no trips or of one may be dropped or inlined; every other one stays a loop.
        let short = case.name.ends_with("_t0") || case.name.ends_with("_t1");
        assert!(
            short || !lir.loops().is_empty(),
            "{} lost its loop:\n{lir}",
            case.name
        );
        with_loops += usize::from(!lir.loops().is_empty());
        // A batch's history whose body reads the row it replaces is still stored by rows.
        if case.name.starts_with("loop_row_history_lanes") {
            let rows = mir.kernels().iter().flat_map(|k| &k.stores);
            assert_eq!(rows.filter(|s| s.row().is_some()).count(), 1, "{}", case.name);
        }
        let float_reduction = case.name.contains("mean_carry_f") || case.name.contains("while_vector");
        if case.transcendental.is_some() || float_reduction {
            continue;
        }
        for seed in 1..=3 {
            let inputs = inputs(case, seed);
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let want = run_hir(&case.kernel, &views, Mode::Native).expect("hir");
            let got = run_lir(&lir, &views, Mode::Native).expect("lir");
            for (k, (w, g)) in want.iter().zip(&got).enumerate() {
                assert!(
                    same_values(w, g),
                    "{} seed {seed} output {k}:\n{w:?}\n{g:?}",
                    case.name
                );
            }
        }
    }
    assert!(
        with_loops >= 26,
        "{with_loops} of {} cases kept a loop",
        loops.len()
    );
}

/// The `interp` backend (`rfx_lower::InterpBackend`) runs every loop program and the
/// conformance suite's loop cases like the others.
#[test]
fn the_interp_backend_runs_every_loop_program_and_loop_case() {
    use rfx_check::conformance::{cases, check};
    use rfx_lower::{Backend, CompileOptions, InterpBackend, LowerConfig, lower};
    use rfx_opt::{OptConfig, optimize};

    let options = CompileOptions::default();
    for case in loop_programs()
        .iter()
        .filter(|c| c.inputs[0].shape().numel() <= 1500)
    {
        let compiled = InterpBackend.compile(&case.program, &options).expect("compile");
        let views: Vec<_> = case.inputs.iter().map(Array::view).collect();
        let outputs = compiled.run_to_new(&views).expect("run");
        compare(case, &outputs).unwrap_or_else(|e| panic!("{e}"));
    }
    for case in cases().iter().filter(|c| c.name.starts_with("loop_")) {
        let (mir, _) = optimize(&case.kernel, &OptConfig::default()).expect("optimize");
        let (lir, _) = lower(&mir, &LowerConfig::default()).expect("lower");
        let compiled = InterpBackend.compile(&lir, &options).expect("compile");
        // `sin` in a loop body within 1 ULP of the oracle (the interpreter documents no bound;
        // it evaluates `rfx_ir::semantics`, which the oracle mode computes in f64).
        let result = check(case, &lir, compiled.as_ref(), 1, 1);
        assert!(result.failure.is_none(), "{}: {:?}", case.name, result.failure);
    }
}
