//! The Rust export compiled and run: the saved corpus (crates/rfx-opt/tests/corpus), the
//! conformance suite (`rfx_check::conformance`), long blocked reductions, the hand-written
//! programs with loops (`rfx_check::loop_programs`) and `rfx fuzz`'s
//! random kernels exported as modules of one `#![no_std]`,
//! `#![forbid(unsafe_code)]`, `#![deny(warnings, missing_docs)]` library crate (with the `libm`
//! crate), called by a std binary that prints the outputs' bits, and compared with the LIR
//! interpreter: exact ops bit for bit, a conformance case of one transcendental within 4 ULP of
//! the interpreter's `f64` oracle. The binary also calls a function with slices of the wrong
//! length and prints the `Err`. The library is built for `thumbv7em-none-eabihf` as well where
//! that target is installed.
//!
//! One cargo project is generated in a temporary directory and built with `cargo build
//! --offline` into `target/rust-export-check` under the workspace, so `libm` is built once.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{BLOCKED_REDUCTIONS, corpus_kernels, lower_kernel, uses_transcendental};
use rfx_check::conformance::{cases, inputs};
use rfx_check::generator::fuzz_kernel;
use rfx_check::loop_programs::loop_programs;
use rfx_codegen_c::{LIBM_VERSION, rust_source};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, ArrayData, DType};
use rfx_lower::ulps;

/// How a job's outputs are checked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Every output is the interpreter's bits (any NaN matching any NaN).
    Bits,
    /// Every float output within this many ULP of the interpreter's `f64` oracle.
    Ulps(u64),
    /// Compiled and run only: a corpus kernel with a transcendental among other ops has no
    /// per-element bound to check against (the conformance cases check each one alone).
    Runs,
}

struct Job {
    name: String,
    program: LirProgram,
    inputs: Vec<Array>,
    check: Check,
}

fn corpus_jobs() -> Vec<Job> {
    let mut rng = TestRng::new(7);
    corpus_kernels()
        .into_iter()
        .map(|(name, kernel)| {
            let program = lower_kernel(&kernel).expect("lowers");
            let check = if uses_transcendental(&program) {
                Check::Runs
            } else {
                Check::Bits
            };
            Job {
                name: format!("corpus/{name}"),
                inputs: random_inputs(&mut rng, &kernel, 0.1),
                program,
                check,
            }
        })
        .collect()
}

/// Every transcendental conformance case (within the CPU backend's documented bound of 4 ULP
/// of the `f64` oracle), every row store case (the export's own clamped row index) and every
/// [`CONFORMANCE_STRIDE`]th other case (bit for bit), so that the generated crate compiles in
/// seconds.
fn conformance_jobs() -> Vec<Job> {
    cases()
        .iter()
        .enumerate()
        .filter(|(i, case)| {
            case.transcendental.is_some()
                || case.name.starts_with("loop_row_history")
                || i % CONFORMANCE_STRIDE == 0
        })
        .map(|(_, case)| Job {
            name: format!("conformance/{}", case.name),
            program: lower_kernel(&case.kernel).expect("lowers"),
            inputs: inputs(case, 1),
            check: case.transcendental.map_or(Check::Bits, |_| Check::Ulps(4)),
        })
        .collect()
}

/// `rfx fuzz`'s kernels of seeds 1 to [`FUZZ_SEEDS`] with their inputs: bit for bit without a
/// transcendental, compiled and run only with one. A kernel the optimiser or lowering refuses
/// is left out (the fuzz tests cover those paths).
fn fuzz_jobs() -> Vec<Job> {
    (1..=FUZZ_SEEDS)
        .filter_map(|seed| {
            let kernel = fuzz_kernel(seed);
            let program = lower_kernel(&kernel).ok()?;
            let check = if uses_transcendental(&program) {
                Check::Runs
            } else {
                Check::Bits
            };
            Some(Job {
                name: format!("fuzz/seed {seed}"),
                inputs: random_inputs(&mut TestRng::new(seed), &kernel, 0.1),
                program,
                check,
            })
        })
        .collect()
}

const FUZZ_SEEDS: u64 = 120;

/// The [`BLOCKED_REDUCTIONS`], checked bit for bit.
fn blocked_reduction_jobs() -> Vec<Job> {
    let mut rng = TestRng::new(11);
    BLOCKED_REDUCTIONS
        .iter()
        .map(|text| {
            let kernel = rfx_ir::hir::parse(text).expect("parse");
            let program = lower_kernel(&kernel).expect("lowers");
            let source = rust_source(&program, "probe").expect("export").source;
            assert!(
                source.contains("let mut cnt") && source.contains("let mut top"),
                "no leaf stack in {text}"
            );
            Job {
                name: format!("blocked/{}", kernel.name()),
                inputs: random_inputs(&mut rng, &kernel, 0.0),
                program,
                check: Check::Bits,
            }
        })
        .collect()
}

/// The hand-written programs with loops of `rfx_check::loop_programs` of at most 4 elements (the
/// larger ones walk the same code), checked bit for bit.
fn loop_program_jobs() -> Vec<Job> {
    loop_programs()
        .into_iter()
        .filter(|case| case.inputs.iter().all(|a| a.shape().numel() <= 4))
        .map(|case| Job {
            name: format!("loops/{}", case.name),
            program: case.program,
            inputs: case.inputs,
            check: Check::Bits,
        })
        .collect()
}

/// One exact conformance case in this many is exported (the suite has about 1,700; the C
/// export's tests run all of them through the same walk).
const CONFORMANCE_STRIDE: usize = 6;

/// The Rust element type, the type of its bits in the binary's tables, and the bits.
fn rust_words(data: &ArrayData) -> (&'static str, &'static str, Vec<String>) {
    match data {
        ArrayData::Bool(v) => ("bool", "bool", v.iter().map(ToString::to_string).collect()),
        ArrayData::I32(v) => ("i32", "i32", v.iter().map(ToString::to_string).collect()),
        ArrayData::F32(v) => (
            "f32",
            "u32",
            v.iter().map(|x| format!("0x{:08x}", x.to_bits())).collect(),
        ),
        ArrayData::F64(v) => (
            "f64",
            "u64",
            v.iter().map(|x| format!("0x{:016x}", x.to_bits())).collect(),
        ),
    }
}

/// The interpreter's outputs as the binary prints them.
fn expected_line(label: &str, outputs: &[Array]) -> String {
    let mut line = format!("{label} ok");
    for out in outputs {
        line.push_str(" |");
        let tokens: Vec<String> = match out.data() {
            ArrayData::Bool(v) => v.iter().map(|&b| u8::from(b).to_string()).collect(),
            ArrayData::I32(v) => v.iter().map(|&x| format!("{:08x}", x as u32)).collect(),
            ArrayData::F32(v) => v
                .iter()
                .map(|x| {
                    if x.is_nan() {
                        "nan".into()
                    } else {
                        format!("{:08x}", x.to_bits())
                    }
                })
                .collect(),
            ArrayData::F64(v) => v
                .iter()
                .map(|x| {
                    if x.is_nan() {
                        "nan".into()
                    } else {
                        format!("{:016x}", x.to_bits())
                    }
                })
                .collect(),
        };
        for t in tokens {
            line.push(' ');
            line.push_str(&t);
        }
    }
    line
}

/// The binary's block calling module `k{k}` on the job's inputs and printing its outputs.
fn harness_call(k: usize, job: &Job, outputs: &[Array]) -> String {
    let mut c = format!("fn call_k{k}() {{\n");
    let mut args = Vec::new();
    for (i, input) in job.inputs.iter().enumerate() {
        let (ty, word, words) = rust_words(input.data());
        let _ = writeln!(
            c,
            "        static IN{i}: [{word}; {}] = [{}];",
            words.len(),
            words.join(", ")
        );
        let convert = match ty {
            "f32" => "f32::from_bits(w)",
            "f64" => "f64::from_bits(w)",
            _ => "w",
        };
        let _ = writeln!(
            c,
            "        let in{i}: Vec<{ty}> = IN{i}.iter().map(|&w| {convert}).collect();"
        );
        args.push(format!("&in{i}"));
    }
    for (i, output) in outputs.iter().enumerate() {
        let (ty, _, _) = rust_words(output.data());
        let _ = writeln!(
            c,
            "        let mut out{i}: Vec<{ty}> = vec![Default::default(); {}];",
            output.shape().numel()
        );
        args.push(format!("&mut out{i}"));
    }
    let _ = writeln!(c, "        let mut work = Box::new(kernels::k{k}::Work::new());");
    args.push("&mut work".to_string());
    let _ = writeln!(c, "        let res = kernels::k{k}::k{k}({});", args.join(", "));
    let _ = writeln!(
        c,
        "        let mut line = format!(\"k{k} {{}}\", if res.is_ok() {{ \"ok\" }} else {{ \"err\" }});"
    );
    for i in 0..outputs.len() {
        let _ = writeln!(c, "        line.push_str(\" |\");");
        let _ = writeln!(
            c,
            "        for x in &out{i} {{ line.push(' '); line.push_str(&x.bits()); }}"
        );
    }
    c.push_str("        println!(\"{line}\");\n}\n\n");
    c
}

const HARNESS_HEAD: &str = r#"//! Calls every exported module on embedded inputs and prints the outputs' bits.

trait Bits {
    fn bits(&self) -> String;
}
impl Bits for bool {
    fn bits(&self) -> String { u8::from(*self).to_string() }
}
impl Bits for i32 {
    fn bits(&self) -> String { format!("{:08x}", *self as u32) }
}
impl Bits for f32 {
    fn bits(&self) -> String { if self.is_nan() { "nan".into() } else { format!("{:08x}", self.to_bits()) } }
}
impl Bits for f64 {
    fn bits(&self) -> String { if self.is_nan() { "nan".into() } else { format!("{:016x}", self.to_bits()) } }
}
"#;

/// The binary's block calling module `lengths` (f32[4] + f32[4] -> f32[4]) with a short input
/// and a long output, each with the other arguments right, and printing the `Err`s and
/// whether the output was left untouched.
const LENGTH_CHECKS: &str = r#"fn call_lengths() {
        let a = [1.0f32; 4];
        let short = [1.0f32; 3];
        let mut out = [7.0f32; 4];
        let mut long = [7.0f32; 5];
        let mut work = kernels::lengths::Work::new();
        let e1 = kernels::lengths::lengths(&a, &short, &mut out, &mut work);
        let e2 = kernels::lengths::lengths(&a, &a, &mut long, &mut work);
        println!("lengths {:?} {} untouched={}", e1, e1.unwrap_err(), out == [7.0f32; 4]);
        println!("lengths {:?} {} untouched={}", e2, e2.unwrap_err(), long == [7.0f32; 5]);
        let ok = kernels::lengths::lengths(&a, &a, &mut out, &mut work);
        println!("lengths {:?} {:?}", ok, out);
}
"#;

/// Names valid for the Rust export that the module itself also uses.
const EDGE_NAMES: &[&str] = &[
    "Ok", "Err", "Error", "Work", "Result", "Default", "f32", "u8", "core", "libm", "work", "in_0", "out_0",
    "main", "t", "l", "s0",
];

const LENGTHS_KERNEL: &str = "kernel lengths {\n  %x = input x : f32[4]\n  %y = input y : f32[4]\n  %z = add %x, %y : f32[4]\n  output out = %z\n}\n";

fn expected_length_lines() -> Vec<String> {
    vec![
        "lengths Err(InputLength { index: 1, expected: 4, actual: 3 }) input 1 has 3 elements, expected 4 untouched=true".to_string(),
        "lengths Err(OutputLength { index: 0, expected: 4, actual: 5 }) output 0 has 5 elements, expected 4 untouched=true".to_string(),
        "lengths Ok(()) [2.0, 2.0, 2.0, 2.0]".to_string(),
    ]
}

/// Writes the cargo project for `jobs` into `dir`; returns the expected output lines (`None`
/// where a job's line is checked against the oracle or not at all).
fn write_project(dir: &Path, jobs: &[Job]) -> Vec<Option<String>> {
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("kernels")).expect("create src/kernels");
    let manifest = format!(
        "[package]\nname = \"rfx-rust-export-check\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\nlibm = \"{LIBM_VERSION}\"\n\n[[bin]]\nname = \"harness\"\npath = \"src/main.rs\"\n\n\
         [profile.dev]\ndebug = false\n\n[workspace]\n"
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).expect("write Cargo.toml");
    let mut lib = String::from(
        "//! Exported rfx kernels.\n#![no_std]\n#![forbid(unsafe_code)]\n#![deny(warnings, missing_docs)]\n\n/// The kernels.\npub mod kernels {\n",
    );
    let mut main = String::from(HARNESS_HEAD);
    main.push_str("use rfx_rust_export_check::kernels;\n\n");
    let mut calls = String::from("fn main() {\n");
    let mut expected = Vec::new();
    for (k, job) in jobs.iter().enumerate() {
        let name = format!("k{k}");
        let module = rust_source(&job.program, &name).unwrap_or_else(|e| panic!("{}: {e}", job.name));
        std::fs::write(src.join("kernels").join(format!("{name}.rs")), module.source).expect("write module");
        let _ = writeln!(lib, "    /// {}\n    pub mod {name};", job.name);
        let views: Vec<_> = job.inputs.iter().map(Array::view).collect();
        let outputs =
            run_lir(&job.program, &views, Mode::Native).unwrap_or_else(|e| panic!("{}: {e}", job.name));
        main.push_str(&harness_call(k, job, &outputs));
        let _ = writeln!(calls, "    call_k{k}();");
        expected.push((job.check == Check::Bits).then(|| expected_line(&name, &outputs)));
    }
    let lengths = rust_source(
        &lower_kernel(&rfx_ir::hir::parse(LENGTHS_KERNEL).expect("parse")).expect("lowers"),
        "lengths",
    )
    .expect("export lengths");
    std::fs::write(src.join("kernels/lengths.rs"), lengths.source).expect("write module");
    lib.push_str("    /// f32[4] + f32[4].\n    pub mod lengths;\n");
    // Function names that are also names the module uses (its items, the prelude's, primitive
    // types, its parameters): each module must still compile without a warning.
    for (n, name) in EDGE_NAMES.iter().enumerate() {
        let module = rust_source(
            &lower_kernel(&rfx_ir::hir::parse(LENGTHS_KERNEL).expect("parse")).expect("lowers"),
            name,
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        std::fs::write(src.join(format!("kernels/edge{n}.rs")), module.source).expect("write module");
        let _ = writeln!(lib, "    /// A function named `{name}`.\n    pub mod edge{n};");
    }
    lib.push_str("}\n");
    main.push_str(LENGTH_CHECKS);
    main.push_str(&calls);
    main.push_str("    call_lengths();\n}\n");
    std::fs::write(src.join("lib.rs"), lib).expect("write lib.rs");
    std::fs::write(src.join("main.rs"), main).expect("write main.rs");
    expected.extend(expected_length_lines().into_iter().map(Some));
    expected
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/rust-export-check")
}

/// `cargo ARGS` on the project in `dir`, building under `target` (the Cortex-M4F build has a
/// folder of its own, so that it runs beside the host build rather than waiting for its lock).
fn cargo(dir: &Path, target: &Path, args: &[&str]) -> std::process::Output {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    Command::new(cargo)
        .args(args)
        .args(["--offline", "--quiet", "-j", "2", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("run cargo")
}

/// Checks the binary's line `got` for `job` against the interpreter's `f64` oracle; returns the
/// largest error in ULP.
fn within_bound(job: &Job, got: &str, bound: u64) -> Result<u64, String> {
    let views: Vec<_> = job.inputs.iter().map(Array::view).collect();
    let oracle = run_lir(&job.program, &views, Mode::Oracle).map_err(|e| e.to_string())?;
    let dtypes: Vec<DType> = job.program.outputs().map(|(_, _, ty)| ty.dtype).collect();
    let mut worst = 0;
    let mut parts = got.split(" |");
    if !parts.next().is_some_and(|head| head.ends_with(" ok")) {
        return Err(format!("bad line {got}"));
    }
    for ((part, want), dtype) in parts.zip(&oracle).zip(dtypes) {
        let ArrayData::F64(want) = want.data() else {
            return Err("oracle output is not f64".to_string());
        };
        let tokens: Vec<&str> = part.split_whitespace().collect();
        if tokens.len() != want.len() {
            return Err(format!("{} values, want {}", tokens.len(), want.len()));
        }
        for (i, (token, &w)) in tokens.iter().zip(want).enumerate() {
            let value = if *token == "nan" {
                f64::NAN
            } else {
                let bits = u64::from_str_radix(token, 16).map_err(|e| e.to_string())?;
                match dtype {
                    DType::F32 => f64::from(f32::from_bits(bits as u32)),
                    _ => f64::from_bits(bits),
                }
            };
            let d = ulps(value, w, dtype);
            worst = worst.max(d);
            if d > bound {
                let input: Vec<_> = job.inputs.iter().map(|a| a.get(i)).collect();
                return Err(format!(
                    "element {i}: oracle {w:e}, got {value:e} ({d} ULP > {bound}), inputs {input:?}"
                ));
            }
        }
    }
    Ok(worst)
}

#[test]
fn corpus_and_conformance_modules_build_no_std_and_match_the_interpreter() {
    let mut jobs = corpus_jobs();
    let corpus = jobs.len();
    jobs.extend(conformance_jobs());
    jobs.extend(blocked_reduction_jobs());
    jobs.extend(loop_program_jobs());
    let fuzz = fuzz_jobs();
    let fuzz_count = fuzz.len();
    jobs.extend(fuzz);
    let count = |check: fn(&Check) -> bool| jobs.iter().filter(|j| check(&j.check)).count();
    eprintln!(
        "{} programs ({corpus} corpus, {fuzz_count} fuzz): {} bit for bit, {} within 4 ULP, {} compiled and run only",
        jobs.len(),
        count(|c| *c == Check::Bits),
        count(|c| matches!(c, Check::Ulps(_))),
        count(|c| *c == Check::Runs),
    );
    assert!(
        corpus >= 60 && fuzz_count >= 100 && jobs.len() > 500,
        "{} programs",
        jobs.len()
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let expected = write_project(dir.path(), &jobs);
    std::thread::scope(|scope| {
        let thumb = scope.spawn(|| thumbv7em(dir.path()));
        host(dir.path(), &jobs, &expected);
        thumb.join().expect("the Cortex-M4F build");
    });
}

/// Builds the harness for this machine, runs it, and checks every line it prints.
fn host(dir: &Path, jobs: &[Job], expected: &[Option<String>]) {
    let started = std::time::Instant::now();
    let build = cargo(dir, &target_dir(), &["build"]);
    assert!(
        build.status.success(),
        "the exported modules do not build:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    eprintln!("cargo build: {:.1} s", started.elapsed().as_secs_f64());
    let run = Command::new(target_dir().join("debug/harness"))
        .output()
        .expect("run the harness");
    assert!(
        run.status.success(),
        "the harness failed: {:?}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let got: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        got.len(),
        expected.len(),
        "the harness printed {} lines",
        got.len()
    );
    let mut failures = Vec::new();
    let mut worst_ulps = 0;
    for (k, (want, got)) in expected.iter().zip(&got).enumerate() {
        let job = jobs.get(k);
        match (want, job.map(|j| j.check)) {
            (Some(want), _) if want != got => {
                let name = job.map_or("lengths", |j| &j.name);
                failures.push(format!("{name}:\n  want {want}\n  got  {got}"));
            }
            (None, Some(Check::Ulps(bound))) => {
                if let Some(job) = job {
                    match within_bound(job, got, bound) {
                        Ok(worst) => worst_ulps = worst_ulps.max(worst),
                        Err(message) => failures.push(format!("{}: {message}", job.name)),
                    }
                }
            }
            (None, _) if !got.starts_with(&format!("k{k} ok")) => {
                failures.push(format!("{}: {got}", job.map_or("?", |j| &j.name)));
            }
            _ => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("transcendentals: at most {worst_ulps} ULP from the f64 oracle");
}

/// Builds the library for a Cortex-M4F where the target is installed.
fn thumbv7em(dir: &Path) {
    const TARGET: &str = "thumbv7em-none-eabihf";
    let installed = Command::new("rustc")
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|libdir| libdir.join("libcore.rlib").exists() || has_core(&libdir));
    if !installed {
        eprintln!("skipped the {TARGET} build: the target is not installed (rustup target add {TARGET})");
        return;
    }
    let build = cargo(
        dir,
        &target_dir().join("thumb"),
        &["build", "--lib", "--target", TARGET],
    );
    assert!(
        build.status.success(),
        "the exported modules do not build for {TARGET}:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    eprintln!("built for {TARGET}");
}

fn has_core(libdir: &Path) -> bool {
    std::fs::read_dir(libdir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("libcore-"))
    })
}
