//! Compiles exported programs with the host C compiler in batches (many programs per
//! translation unit, one generated `main` that calls each on embedded inputs and prints the
//! outputs' bit patterns) and compares the outputs with the LIR interpreter bit for bit (any
//! NaN matching any NaN).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use rfx_codegen_c::{CExport, c_source};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::{Array, ArrayData, DType};
use rfx_lower::ulps;

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
    let dir = tempfile::tempdir().expect("temp dir");
    for cc in ccs {
        let mut failures = Vec::new();
        let mut batch = 0;
        for extra in flag_sets {
            for chunk in jobs.chunks(BATCH) {
                failures.extend(check_batch_with(cc, extra, dir.path(), batch, chunk));
                batch += 1;
            }
        }
        assert!(
            failures.is_empty(),
            "{} failures:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// Writes `driver` (a C file with a `main`) to `dir` as NAME.c, compiles it with `cc`,
/// [`FLAGS`] and then `extra` (the headers of `dir` on the include path), runs it and returns
/// its stdout; fails the test where it does not compile or does not exit 0.
pub(crate) fn compile_and_run(cc: &str, extra: &[&str], dir: &Path, name: &str, driver: &str) -> String {
    let driver_path = dir.join(format!("{name}.c"));
    std::fs::write(&driver_path, driver).expect("write driver");
    let exe = dir.join(name);
    let out = Command::new(cc)
        .args(FLAGS)
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
    let run = Command::new(&exe).output().expect("run the driver");
    assert!(run.status.success(), "{name} failed: {:?}", run.status);
    String::from_utf8_lossy(&run.stdout).into_owned()
}

/// Exports, compiles (with `cc`, [`FLAGS`] and then `extra`) and runs `jobs` in one
/// translation unit, and returns one message per mismatch.
fn check_batch_with(cc: &str, extra: &[&str], dir: &Path, batch: usize, jobs: &[Job]) -> Vec<String> {
    let mut driver =
        String::from("#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n");
    let mut expected = Vec::new();
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
        expected.push(line);
    }
    main.push_str("  return 0;\n}\n");
    driver.push_str(&main);
    let stdout = compile_and_run(cc, extra, dir, &format!("driver{batch}"), &driver);
    let got: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        got.len(),
        jobs.len(),
        "driver {batch} printed {} lines",
        got.len()
    );
    let mut failures = Vec::new();
    for ((job, want), got) in jobs.iter().zip(&expected).zip(got) {
        if let Some(bound) = job.ulp_bound {
            if let Err(message) = within_bound(job, got, bound) {
                failures.push(format!("{} ({cc}): {message}", job.name));
            }
        } else if want.trim_end() != got.trim_end() {
            failures.push(format!("{} ({cc}):\n  want {want}\n  got  {got}", job.name));
        }
    }
    failures
}

/// Checks the driver's line `got` for `job` against the interpreter's `f64` oracle.
fn within_bound(job: &Job, got: &str, bound: u64) -> Result<(), String> {
    let views: Vec<_> = job.inputs.iter().map(Array::view).collect();
    let oracle = run_lir(&job.program, &views, Mode::Oracle).map_err(|e| e.to_string())?;
    let dtypes: Vec<DType> = job.program.outputs().map(|(_, _, ty)| ty.dtype).collect();
    let mut parts = got.split(" |");
    if parts.next().map(str::trim) != got.split(" |").next().map(str::trim) || !got.contains(" 0") {
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
