//! Programs with loops over ranges of their kernels in the C export, the Rust export and the `c`
//! backend: a loop is a `for` over its kernels' blocks whose trip count appears once, as a
//! literal, so the source for 10,000 trips is the one for 100 with that literal changed; a loop
//! with an exit flag breaks after an iteration that leaves it false. The hand-written cases of
//! `rfx_check::loop_programs` build warning-free under the tested flags and give their
//! recurrences' bits with gcc and clang, the small ones through the export's test harness and
//! all of them through the `c` backend (with the `backend` feature).

mod common;

use common::{Job, check_with_every_compiler};
use rfx_check::loop_programs::{LoopProgram, loop_programs};
use rfx_codegen_c::{c_source, rust_source};
use rfx_ir::lir::LirProgram;
use rfx_ir::repeat::KernelLoop;

fn case(name: &str) -> LoopProgram {
    loop_programs()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no loop program {name}"))
}

/// `program` with each loop's trip count set to `trips`.
fn with_trips(program: &LirProgram, trips: u64) -> LirProgram {
    let loops: Vec<KernelLoop> = program
        .loops()
        .iter()
        .map(|l| KernelLoop { trips, ..*l })
        .collect();
    program.clone().with_loops(loops)
}

/// The lines of `a` and `b` that differ (both must have as many lines).
fn differing_lines<'s>(a: &'s str, b: &'s str) -> Vec<(&'s str, &'s str)> {
    let (a, b): (Vec<_>, Vec<_>) = (a.lines().collect(), b.lines().collect());
    assert_eq!(a.len(), b.len(), "the sources have different line counts");
    a.into_iter().zip(b).filter(|(x, y)| x != y).collect()
}

#[test]
fn the_source_for_ten_thousand_trips_is_the_one_for_a_hundred_with_the_count_changed() {
    for name in [
        "halving_f64_n4_t7",
        "while_i32_n4_t2_below20",
        "nested_i32_n4_3x4",
    ] {
        let program = case(name).program;
        let (few, many) = (with_trips(&program, 100), with_trips(&program, 10_000));
        let loops = program.loops().len();
        let c = (
            c_source(&few, "looped").expect("export").source,
            c_source(&many, "looped").expect("export").source,
        );
        let rust = (
            rust_source(&few, "looped").expect("export").source,
            rust_source(&many, "looped").expect("export").source,
        );
        for (language, (few, many)) in [("C", &c), ("Rust", &rust)] {
            let lines = differing_lines(few, many);
            assert_eq!(lines.len(), loops, "{name} in {language}: {lines:#?}");
            for (a, b) in lines {
                assert!(a.contains("100u") && !a.contains("10000"), "{name}: {a}");
                assert_eq!(a.replace("100u", "10000u"), b, "{name} in {language}");
            }
        }
        let breaks = c.0.matches("break;").count();
        let exits = program.loops().iter().filter(|l| l.exit.is_some()).count();
        assert_eq!(breaks, exits, "{name}: {}", c.0);
        assert_eq!(rust.0.matches("break;").count(), exits, "{name}: {}", rust.0);
    }
}

#[test]
fn a_while_loop_is_a_for_that_breaks_on_its_flag() {
    let program = case("while_i32_n4_t2_below20").program;
    let source = c_source(&program, "looped").expect("export").source;
    let expected = "  /* kernels 2..=4 repeat while buf4 holds */\n  for (uint64_t t0 = 0; t0 < 2u; ++t0) {\n    /* kernel 2: step over [4] */";
    assert!(source.contains(expected), "{source}");
    assert!(
        source.contains("    if (!(buf4[0] != 0)) break;\n  }\n  /* kernel 5: leave"),
        "{source}"
    );
    let rust = rust_source(&program, "looped").expect("export").source;
    assert!(
        rust.contains("    for _ in 0..2u64 {\n        // kernel 2: step over [4]"),
        "{rust}"
    );
}

#[test]
fn a_loop_of_no_trips_is_a_comment() {
    let program = case("halving_f64_n4_t0").program;
    let source = c_source(&program, "never").expect("export").source;
    assert!(source.contains("repeat no times"), "{source}");
    assert!(!source.contains("for (uint64_t"), "{source}");
    assert!(!source.contains("kernel 1: step"), "{source}");
}

/// The cases small enough to print (the harness embeds every input and output).
fn small_cases() -> Vec<LoopProgram> {
    loop_programs()
        .into_iter()
        .filter(|c| c.inputs.iter().all(|a| a.shape().numel() <= 1500))
        .collect()
}

#[test]
fn the_small_loop_programs_build_without_warnings_and_match_the_interpreter() {
    let cases = small_cases();
    assert!(cases.len() >= 20, "{} small cases", cases.len());
    let jobs: Vec<Job> = cases
        .into_iter()
        .map(|case| Job {
            name: case.name,
            program: case.program,
            inputs: case.inputs,
            ulp_bound: None,
        })
        .collect();
    check_with_every_compiler(&jobs, &[&[]]);
}

#[cfg(feature = "backend")]
#[test]
fn the_c_backend_runs_every_loop_program_with_gcc_and_clang() {
    use rfx_check::loop_programs::compare;
    use rfx_codegen_c::CBackend;
    use rfx_ir::Array;
    use rfx_lower::{Backend, CompileOptions};

    let all = loop_programs();
    let programs: Vec<LirProgram> = all.iter().map(|c| c.program.clone()).collect();
    for cc in ["gcc", "clang"] {
        let backend = CBackend::with_compiler(cc);
        if let Err(e) = backend.check_available() {
            eprintln!("skipped {cc}: {e}");
            continue;
        }
        let compiled = backend.compile_many(&programs, &CompileOptions::default());
        let mut failures = Vec::new();
        for (case, result) in all.iter().zip(compiled) {
            let compiled = result.unwrap_or_else(|e| panic!("{cc}: {}: {e}", case.name));
            let views: Vec<_> = case.inputs.iter().map(Array::view).collect();
            let outputs = compiled.run_to_new(&views).expect("run");
            if let Err(e) = compare(case, &outputs) {
                failures.push(format!("{cc}: {e}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

/// The conformance suite's exact loop kernels (`Op::Loop`, no float reduction) through the
/// optimiser, lowering and the `c` backend give the HIR interpreter's bits.
#[cfg(feature = "backend")]
#[test]
fn hir_loop_kernels_give_the_hir_interpreters_bits_through_the_c_backend() {
    use common::lower_kernel;
    use rfx_check::conformance::{cases, inputs};
    use rfx_codegen_c::CBackend;
    use rfx_ir::Array;
    use rfx_ir::interp::{Mode, run_hir};
    use rfx_ir::testgen::same_values;
    use rfx_lower::{Backend, CompileOptions};

    let backend = CBackend::with_compiler("gcc");
    if let Err(e) = backend.check_available() {
        eprintln!("skipped: {e}");
        return;
    }
    let exact: Vec<_> = cases()
        .into_iter()
        .filter(|c| c.name.starts_with("loop_") && c.transcendental.is_none())
        .filter(|c| !c.name.contains("mean_carry_f") && !c.name.contains("while_vector"))
        .collect();
    assert!(exact.len() >= 15, "{} cases", exact.len());
    let programs: Vec<LirProgram> = exact
        .iter()
        .map(|c| lower_kernel(&c.kernel).expect("lowers"))
        .collect();
    let compiled = backend.compile_many(&programs, &CompileOptions::default());
    for (case, result) in exact.iter().zip(compiled) {
        let compiled = result.unwrap_or_else(|e| panic!("{}: {e}", case.name));
        for seed in 1..=3 {
            let inputs = inputs(case, seed);
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let want = run_hir(&case.kernel, &views, Mode::Native).expect("interpreter");
            let got = compiled.run_to_new(&views).expect("run");
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

#[test]
fn loop_programs_export_as_these_sources() {
    for name in ["while_i32_n4_t2_below20", "nested_i32_n4_3x4"] {
        let program = case(name).program;
        let c = c_source(&program, "looped").expect("export").source;
        insta::assert_snapshot!(format!("loops_{name}_c"), c);
        let rust = rust_source(&program, "looped").expect("export").source;
        insta::assert_snapshot!(format!("loops_{name}_rust"), rust);
    }
}
