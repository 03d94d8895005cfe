//! Compiles exported programs in batches (many programs per translation unit, one generated
//! `main` that calls each on embedded inputs and prints the outputs' bit patterns) and compares
//! the outputs with the LIR interpreter bit for bit (any NaN matching any NaN). The host C
//! compilers run what they build directly; a [`Toolchain`] names a cross compiler and the
//! emulator that runs its executables (`aarch64-linux-gnu-gcc` and `qemu-aarch64`).
#![allow(
    dead_code,
    reason = "each test binary uses a different part of the shared module"
)]

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use rfx_codegen_c::{CExport, c_source};
use rfx_ir::hir::Kernel;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::{Inst, LirProgram};
use rfx_ir::testgen::read_corpus;
use rfx_ir::{Array, ArrayData, BinaryOp, DType};
use rfx_lower::{LowerConfig, lower, ulps};
use rfx_opt::{OptConfig, optimize};

pub(crate) mod probe;

/// `kernel` optimised and lowered with the default configurations.
pub(crate) fn lower_kernel(kernel: &Kernel) -> Result<LirProgram, String> {
    let (mir, _) = optimize(kernel, &OptConfig::default()).map_err(|e| format!("optimize: {e}"))?;
    lower(&mir, &LowerConfig::default())
        .map(|(lir, _)| lir)
        .map_err(|e| format!("lower: {e}"))
}

/// The kernel of HIR `text`, optimised and lowered; panics (naming the text) where it does not
/// parse or lower.
pub(crate) fn program(text: &str) -> LirProgram {
    let kernel = rfx_ir::hir::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    lower_kernel(&kernel).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The saved corpus's kernel `name` (crates/rfx-opt/tests/corpus/NAME.rfx), as [`program`].
pub(crate) fn corpus_program(name: &str) -> LirProgram {
    let path = corpus_dir().join(format!("{name}.rfx"));
    program(&std::fs::read_to_string(path).expect("corpus file"))
}

fn corpus_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../rfx-opt/tests/corpus")
}

/// The saved corpus (crates/rfx-opt/tests/corpus), parsed: each kernel with its name.
pub(crate) fn corpus_kernels() -> Vec<(String, Kernel)> {
    let dir = corpus_dir();
    read_corpus(&dir)
        .expect("read the corpus")
        .into_iter()
        .map(|(name, text)| {
            let kernel = rfx_ir::hir::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, kernel)
        })
        .collect()
}

/// Whether `program` computes a transcendental op (its results are within a bound of the
/// interpreter's, not its bits).
pub(crate) fn uses_transcendental(program: &LirProgram) -> bool {
    program
        .kernels()
        .iter()
        .flat_map(|k| k.preamble.iter().chain(&k.body))
        .any(|inst| match inst {
            Inst::Unary { op, .. } => op.is_transcendental(),
            Inst::Binary { op, .. } => matches!(op, BinaryOp::Pow | BinaryOp::Atan2),
            _ => false,
        })
}

/// Long float reductions, whose leaves the binary counter of `ReduceLeaves` combines (the
/// `leaf_stack` code of the walk): pieces of one long row (`long_row`), groups of short rows
/// (`row_groups`), `mean` in f64 and `prod`.
pub(crate) const BLOCKED_REDUCTIONS: [&str; 4] = [
    "kernel long_row {\n  %x = input x : f32[3,5000]\n  %s = sum %x axes [1] : f32[3]\n  output out = %s\n}\n",
    "kernel row_groups {\n  %x = input x : f32[700,9]\n  %s = sum %x axes [0, 1] : f32[]\n  output out = %s\n}\n",
    "kernel mean64 {\n  %x = input x : f64[2,4100]\n  %s = mean %x axes [1] : f64[2]\n  output out = %s\n}\n",
    "kernel prod32 {\n  %x = input x : f32[6000]\n  %s = prod %x axes [0] : f32[]\n  output out = %s\n}\n",
];

/// The C flags of the Cortex-M4F firmware example's Makefile: C99, the Cortex-M4F's target
/// flags, every warning an error, and the two the export's documentation asks for
/// (`-std=c99` already implies the first).
pub(crate) const CORTEX_M4F_CFLAGS: &[&str] = &[
    "-std=c99",
    "-O2",
    "-mcpu=cortex-m4",
    "-mthumb",
    "-mfloat-abi=hard",
    "-mfpu=fpv4-sp-d16",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-ffp-contract=off",
    "-fno-math-errno",
];

/// A program to check: its name in reports, the program and its inputs.
pub(crate) struct Job {
    pub(crate) name: String,
    pub(crate) program: LirProgram,
    pub(crate) inputs: Vec<Array>,
    /// `None`: every output must be the interpreter's bits. `Some(bound)`: every float output
    /// within `bound` ULP of the interpreter's `f64` oracle (a program of one transcendental).
    pub(crate) ulp_bound: Option<u64>,
}

/// The C compilers present on this machine among `gcc`, `clang` and `cc`.
pub(crate) fn compilers() -> Vec<&'static str> {
    ["gcc", "clang"]
        .into_iter()
        .filter(|cc| {
            Command::new(cc)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect()
}

/// The flags every generated file must compile cleanly with.
pub(crate) const FLAGS: &[&str] = rfx_codegen_c::TESTED_FLAGS;

/// A C compiler and how to run the executables it builds.
pub(crate) struct Toolchain {
    /// The compiler's command: `gcc`, `clang`, `aarch64-linux-gnu-gcc`.
    pub(crate) cc: &'static str,
    /// Arguments after [`FLAGS`] and before a check's own: target flags, `-static` for a cross
    /// compiler whose executables run without the target's shared libraries, a linker script
    /// and startup objects for bare metal.
    pub(crate) flags: Vec<String>,
    /// The command that runs an executable, given as its last argument (an emulator:
    /// `qemu-aarch64`, or `qemu-system-arm` with its machine options); empty to run it directly.
    pub(crate) runner: Vec<String>,
}

impl Toolchain {
    /// The host compiler `cc`, running what it builds directly.
    pub(crate) fn host(cc: &'static str) -> Toolchain {
        Toolchain {
            cc,
            flags: Vec::new(),
            runner: Vec::new(),
        }
    }
}

fn bits(data: &ArrayData) -> Vec<String> {
    match data {
        ArrayData::Bool(v) => v.iter().map(|&b| format!("{:x}", u8::from(b))).collect(),
        ArrayData::I32(v) => v.iter().map(|&x| format!("{:08x}", x as u32)).collect(),
        ArrayData::F32(v) => v
            .iter()
            .map(|&x| nan_or(x.is_nan(), || format!("{:08x}", x.to_bits())))
            .collect(),
        ArrayData::F64(v) => v
            .iter()
            .map(|&x| nan_or(x.is_nan(), || format!("{:016x}", x.to_bits())))
            .collect(),
    }
}

/// `nan` for any NaN (its payload and sign are not compared), else the value's `hex` bits.
fn nan_or(nan: bool, hex: impl FnOnce() -> String) -> String {
    if nan { "nan".to_string() } else { hex() }
}

fn c_elem(data: &ArrayData) -> (&'static str, &'static str, usize) {
    match data {
        ArrayData::Bool(_) => ("uint8_t", "uint8_t", 1),
        ArrayData::I32(_) => ("int32_t", "uint32_t", 4),
        ArrayData::F32(_) => ("float", "uint32_t", 4),
        ArrayData::F64(_) => ("double", "uint64_t", 8),
    }
}

fn words(data: &ArrayData) -> Vec<String> {
    match data {
        ArrayData::Bool(v) => v.iter().map(|&b| u8::from(b).to_string()).collect(),
        ArrayData::I32(v) => v.iter().map(|&x| format!("0x{:08x}u", x as u32)).collect(),
        ArrayData::F32(v) => v.iter().map(|&x| format!("0x{:08x}u", x.to_bits())).collect(),
        ArrayData::F64(v) => v
            .iter()
            .map(|&x| format!("UINT64_C(0x{:016x})", x.to_bits()))
            .collect(),
    }
}

/// One call of program `k` in the driver's `main`.
fn driver_call(k: usize, job: &Job, outputs: &[Array]) -> String {
    let mut c = String::new();
    let name = format!("k{k}");
    let _ = writeln!(c, "  {{");
    let mut args = Vec::new();
    for (i, input) in job.inputs.iter().enumerate() {
        let (ty, word, size) = c_elem(input.data());
        let w = words(input.data());
        let n = w.len().max(1);
        let init = if w.is_empty() {
            "0".to_string()
        } else {
            w.join(",")
        };
        let _ = writeln!(c, "    static const {word} raw{i}[{n}] = {{{init}}};");
        let _ = writeln!(c, "    static {ty} in{i}[{n}];");
        let _ = writeln!(c, "    memcpy(in{i}, raw{i}, {}u);", n * size);
        args.push(format!("in{i}"));
    }
    for (i, output) in outputs.iter().enumerate() {
        let (ty, _, _) = c_elem(output.data());
        let n = output.shape().numel().max(1);
        let _ = writeln!(c, "    static {ty} out{i}[{n}];");
        args.push(format!("out{i}"));
    }
    let upper = name.to_ascii_uppercase();
    let _ = writeln!(
        c,
        "    unsigned char *w = (unsigned char *)malloc({upper}_WORK_BYTES + {upper}_WORK_ALIGN);"
    );
    let _ = writeln!(
        c,
        "    void *aligned = (void *)(((uintptr_t)w + {upper}_WORK_ALIGN - 1u) & ~(uintptr_t)({upper}_WORK_ALIGN - 1u));"
    );
    args.push("aligned".to_string());
    let _ = writeln!(c, "    int rc = {name}({});", args.join(", "));
    let _ = writeln!(c, "    printf(\"{name} %d\", rc);");
    for (i, output) in outputs.iter().enumerate() {
        let n = output.shape().numel();
        let _ = writeln!(c, "    printf(\" |\");");
        let fmt = match output.data() {
            ArrayData::Bool(_) => format!("printf(\" %x\", (unsigned)out{i}[j]);"),
            ArrayData::I32(_) => format!("printf(\" %08x\", (unsigned)(uint32_t)out{i}[j]);"),
            ArrayData::F32(_) => format!(
                "{{ uint32_t b; memcpy(&b, &out{i}[j], 4); if (out{i}[j] != out{i}[j]) printf(\" nan\"); else printf(\" %08x\", (unsigned)b); }}"
            ),
            ArrayData::F64(_) => format!(
                "{{ uint64_t b; memcpy(&b, &out{i}[j], 8); if (out{i}[j] != out{i}[j]) printf(\" nan\"); else printf(\" %016llx\", (unsigned long long)b); }}"
            ),
        };
        if n > 0 {
            let _ = writeln!(c, "    {{ unsigned j; for (j = 0; j < {n}u; ++j) {fmt} }}");
        }
    }
    let _ = writeln!(c, "    printf(\"\\n\");\n    free(w);\n  }}");
    c
}

/// How many programs one translation unit holds.
const BATCH: usize = 120;

/// Checks `jobs` with every C compiler present, once per flag set of `flag_sets` (each after
/// [`FLAGS`]), in translation units of at most [`BATCH`] programs, and fails with every
/// mismatch; skips (with a note) where no C compiler is found.
pub(crate) fn check_with_every_compiler(jobs: &[Job], flag_sets: &[&[&str]]) {
    let ccs = compilers();
    if ccs.is_empty() {
        eprintln!("skipped: no C compiler (gcc or clang) found");
        return;
    }
    for cc in ccs {
        check_on(&Toolchain::host(cc), jobs, flag_sets);
    }
}

/// Checks `jobs` built by `toolchain`, once per flag set of `flag_sets`, in translation units
/// of at most [`BATCH`] programs, and fails with every mismatch.
pub(crate) fn check_on(toolchain: &Toolchain, jobs: &[Job], flag_sets: &[&[&str]]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut failures = Vec::new();
    for (set, extra) in flag_sets.iter().enumerate() {
        let set_dir = dir.path().join(format!("flags{set}"));
        let per_batch = for_each_batch(jobs, &set_dir, |batch, batch_dir, chunk| {
            check_batch_with(toolchain, extra, batch_dir, batch, chunk)
        });
        failures.extend(per_batch.into_iter().flatten());
    }
    assert!(
        failures.is_empty(),
        "{} failures (the first {SHOWN}):\n{}",
        failures.len(),
        failures[..failures.len().min(SHOWN)].join("\n")
    );
}

/// How many failures a failing check prints.
pub(crate) const SHOWN: usize = 20;

/// Runs `each` on every translation unit's worth of `jobs` (at most [`BATCH`]), given the
/// batch's index and a directory of its own under `dir`, on up to four threads (compiling is
/// most of a check's time), and returns the results in batch order.
pub(crate) fn for_each_batch<T: Send>(
    jobs: &[Job],
    dir: &Path,
    each: impl Fn(usize, &Path, &[Job]) -> T + Sync,
) -> Vec<T> {
    let chunks: Vec<&[Job]> = jobs.chunks(BATCH).collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, 4)
        .min(chunks.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..chunks.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let batch = next.fetch_add(1, Ordering::Relaxed);
                    let Some(chunk) = chunks.get(batch) else {
                        break;
                    };
                    let batch_dir = dir.join(format!("batch{batch}"));
                    std::fs::create_dir_all(&batch_dir).expect("make the batch directory");
                    let result = each(batch, &batch_dir, chunk);
                    results.lock().expect("a batch panicked")[batch] = Some(result);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("a batch panicked")
        .into_iter()
        .map(|r| r.expect("every batch ran"))
        .collect()
}

/// Writes `driver` (a C file with a `main`) to `dir` as NAME.c, compiles it with `cc`,
/// [`FLAGS`] and then `extra` (the headers of `dir` on the include path), runs it and returns
/// its stdout; fails the test where it does not compile or does not exit 0.
pub(crate) fn compile_and_run(
    cc: &'static str,
    extra: &[&str],
    dir: &Path,
    name: &str,
    driver: &str,
) -> String {
    compile_and_run_on(&Toolchain::host(cc), extra, dir, name, driver)
}

/// [`compile_and_run`] with `toolchain`: its compiler, [`FLAGS`], its flags, then `extra`;
/// the executable run by its runner.
pub(crate) fn compile_and_run_on(
    toolchain: &Toolchain,
    extra: &[&str],
    dir: &Path,
    name: &str,
    driver: &str,
) -> String {
    let cc = toolchain.cc;
    let driver_path = dir.join(format!("{name}.c"));
    std::fs::write(&driver_path, driver).expect("write driver");
    let exe = dir.join(name);
    let out = Command::new(cc)
        .args(FLAGS)
        .args(&toolchain.flags)
        .args(extra)
        .arg("-I")
        .arg(dir)
        .arg(&driver_path)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "{cc} failed on {name}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = match toolchain.runner.split_first() {
        Some((runner, args)) => Command::new(runner).args(args).arg(&exe).output(),
        None => Command::new(&exe).output(),
    }
    .expect("run the driver");
    assert!(
        run.status.success(),
        "{name} failed: {:?}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8_lossy(&run.stdout).into_owned()
}

/// One driver's output: per job, the line the LIR interpreter's outputs make and the line the
/// driver printed (`kK RC | bits ... | bits ...`, one `|` part per output).
pub(crate) struct BatchLines {
    pub(crate) want: Vec<String>,
    pub(crate) got: Vec<String>,
}

/// Exports `jobs` into `dir`, compiles them in one translation unit with `toolchain` (then
/// `extra`), runs the driver and returns its lines beside the interpreter's.
pub(crate) fn run_batch(
    toolchain: &Toolchain,
    extra: &[&str],
    dir: &Path,
    batch: usize,
    jobs: &[Job],
) -> BatchLines {
    let mut driver =
        String::from("#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n");
    let mut want = Vec::new();
    let mut main = String::from("int main(void) {\n");
    for (k, job) in jobs.iter().enumerate() {
        let name = format!("k{k}");
        let CExport { header, source } =
            c_source(&job.program, &name).unwrap_or_else(|e| panic!("{}: {e}", job.name));
        std::fs::write(dir.join(format!("{name}.h")), header).expect("write header");
        std::fs::write(dir.join(format!("{name}.c")), source).expect("write source");
        let _ = writeln!(driver, "#include \"{name}.c\"");
        let views: Vec<_> = job.inputs.iter().map(Array::view).collect();
        let outputs =
            run_lir(&job.program, &views, Mode::Native).unwrap_or_else(|e| panic!("{}: {e}", job.name));
        main.push_str(&driver_call(k, job, &outputs));
        let mut line = format!("{name} 0");
        for out in &outputs {
            line.push_str(" |");
            for b in bits(out.data()) {
                line.push(' ');
                line.push_str(&b);
            }
        }
        want.push(line);
    }
    main.push_str("  return 0;\n}\n");
    driver.push_str(&main);
    let stdout = compile_and_run_on(toolchain, extra, dir, &format!("driver{batch}"), &driver);
    let got: Vec<String> = stdout.lines().map(|l| l.trim_end().to_string()).collect();
    assert_eq!(
        got.len(),
        jobs.len(),
        "driver {batch} printed {} lines",
        got.len()
    );
    BatchLines { want, got }
}

/// Exports, compiles (with `toolchain`, then `extra`) and runs `jobs` in one translation unit,
/// and returns one message per mismatch.
fn check_batch_with(
    toolchain: &Toolchain,
    extra: &[&str],
    dir: &Path,
    batch: usize,
    jobs: &[Job],
) -> Vec<String> {
    let cc = toolchain.cc;
    let lines = run_batch(toolchain, extra, dir, batch, jobs);
    let mut failures = Vec::new();
    for ((job, want), got) in jobs.iter().zip(&lines.want).zip(&lines.got) {
        if let Some(bound) = job.ulp_bound {
            if let Err(message) = within_bound(job, got, bound) {
                failures.push(format!("{} ({cc}): {message}", job.name));
            }
        } else if want.trim_end() != got {
            failures.push(format!("{} ({cc}):\n  want {want}\n  got  {got}", job.name));
        }
    }
    failures
}

/// The outputs of `program` a driver printed in `line` (return code 0 required), in the
/// program's output order.
pub(crate) fn parse_line(program: &LirProgram, line: &str) -> Result<Vec<Array>, String> {
    let mut parts = line.split(" |");
    let head: Vec<&str> = parts.next().unwrap_or_default().split_whitespace().collect();
    if head.get(1) != Some(&"0") {
        return Err(format!("return code not 0: {line}"));
    }
    let mut outputs = Vec::new();
    for ((_, name, ty), part) in program.outputs().zip(parts.by_ref()) {
        let tokens: Vec<&str> = part.split_whitespace().collect();
        if tokens.len() != ty.shape.numel() {
            return Err(format!(
                "output `{name}`: {} values, want {}",
                tokens.len(),
                ty.shape.numel()
            ));
        }
        let hex = |t: &str| u64::from_str_radix(t, 16).map_err(|e| format!("output `{name}`: `{t}`: {e}"));
        let float = |t: &str| if t == "nan" { Ok(None) } else { hex(t).map(Some) };
        let data = match ty.dtype {
            DType::Bool => ArrayData::Bool(
                tokens
                    .iter()
                    .map(|t| hex(t).map(|b| b != 0))
                    .collect::<Result<_, _>>()?,
            ),
            DType::I32 => ArrayData::I32(
                tokens
                    .iter()
                    .map(|t| hex(t).map(|b| b as u32 as i32))
                    .collect::<Result<_, _>>()?,
            ),
            DType::F32 => ArrayData::F32(
                tokens
                    .iter()
                    .map(|t| float(t).map(|b| b.map_or(f32::NAN, |b| f32::from_bits(b as u32))))
                    .collect::<Result<_, _>>()?,
            ),
            DType::F64 => ArrayData::F64(
                tokens
                    .iter()
                    .map(|t| float(t).map(|b| b.map_or(f64::NAN, f64::from_bits)))
                    .collect::<Result<_, _>>()?,
            ),
        };
        outputs.push(Array::new(ty.shape.clone(), data).map_err(|e| format!("output `{name}`: {e}"))?);
    }
    if outputs.len() != program.outputs().count() || parts.next().is_some() {
        return Err(format!("not {} outputs: {line}", program.outputs().count()));
    }
    Ok(outputs)
}

/// Checks the driver's line `got` for `job` against the interpreter's `f64` oracle.
fn within_bound(job: &Job, got: &str, bound: u64) -> Result<(), String> {
    let views: Vec<_> = job.inputs.iter().map(Array::view).collect();
    let oracle = run_lir(&job.program, &views, Mode::Oracle).map_err(|e| e.to_string())?;
    let outputs = parse_line(&job.program, got)?;
    for (got, want) in outputs.iter().zip(&oracle) {
        let ArrayData::F64(want) = want.data() else {
            return Err("oracle output is not f64".to_string());
        };
        for (i, &w) in want.iter().enumerate() {
            let value = got.get(i).map_or(f64::NAN, |v| v.to_f64());
            let d = ulps(value, w, got.dtype());
            if d > bound {
                let input: Vec<_> = job.inputs.iter().map(|a| a.get(i)).collect();
                return Err(format!(
                    "element {i}: oracle {w:e}, got {value:e} ({d} ULP > {bound}), inputs {input:?}"
                ));
            }
        }
    }
    Ok(())
}

/// GCC's `-O3 -march=x86-64-v3` (AVX2) vectoriser report on `export` written as `name`.c.
pub(crate) fn gcc_vectorizer_report(export: &CExport, name: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join(format!("{name}.h")), &export.header).expect("write");
    let source = dir.path().join(format!("{name}.c"));
    std::fs::write(&source, &export.source).expect("write");
    let out = std::process::Command::new("gcc")
        .args([
            "-std=c99",
            "-O3",
            "-march=x86-64-v3",
            "-ffp-contract=off",
            "-fno-math-errno",
        ])
        .arg("-fopt-info-vec-optimized")
        .arg("-c")
        .arg(&source)
        .arg("-o")
        .arg(dir.path().join(format!("{name}.o")))
        .output()
        .expect("run gcc");
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{report}");
    report
}
