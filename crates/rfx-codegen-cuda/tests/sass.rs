//! SASS checks for two ptxas miscompiles that the generated code works around (found by `rfx
//! fuzz` on an H100; ptxas 12.9 and 13.0, sm_80 and sm_90):
//!
//! - `neg(cast(bool -> float))` of `false` must be -0.0. NVVM folds it into a select of the
//!   constants -0.0 and -1.0, which ptxas assembles as `SEL R, RZ, 0xffffffff` and
//!   `I2FP.F32.S32`, giving +0.0 (seed 1002753). `nvrtc::bitwise_selects` makes every float
//!   select of the PTX bitwise.
//! - ptxas assumes `abs.f32` is never NaN and folds `abs(x) >= c` to true, so that
//!   `min(max(abs(x), c1), 0)` of NaN stores the constant 0 (seed 4000814). f32 `abs` is emitted
//!   as an AND of the sign bit.
//! - ptxas makes the same assumption about `ex2.approx.f32`, which f32 `exp2f` compiles to:
//!   `exp2(x) >= 0` folds to true, so `min(exp2(x), 0)` of NaN stores 0. f32 `exp2` returns a
//!   NaN argument by a select (`rfx_exp2_f32`). The `nan_sweep_*` kernels check every float
//!   op of both dtypes this way (`min(op(..), 0)` and `op(..) >= -4`, each on inputs of its
//!   own): a folded check leaves its inputs unread.
//!
//! Each kernel is compiled by NVRTC, assembled by `ptxas -O3` and disassembled by `cuobjdump
//! -sass`; the SASS must not hold the miscompiled patterns. Without NVRTC, ptxas or cuobjdump
//! (`RFX_CUOBJDUMP`, beside ptxas, the `nvidia-cuda-cuobjdump` wheel or `PATH`) the test prints
//! `skipped: ...` and passes, unless `RFX_REQUIRE_CUOBJDUMP` is set (CI sets it and installs the
//! wheel) and cuobjdump is missing.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{lower_kernel, ptxas};
use rfx_codegen_cuda::ptx;
use rfx_ir::{BinaryOp, DType, UnaryOp, hir};
use rfx_lower::{BackendError, CompileOptions};

/// NVRTC `arch` → the `ptxas -arch` that assembles its output (the GPU backend compiles for
/// `compute_XY` of the device, which the driver assembles for `sm_XY`).
const TARGETS: [(&str, &str); 2] = [("compute_80", "sm_80"), ("compute_90", "sm_90")];

fn skipped(what: &str) {
    println!("skipped: {what}");
    eprintln!("skipped: {what}");
}

fn python_package_dir(package: &str) -> Option<PathBuf> {
    let script = format!("import nvidia.{package} as m; print(list(m.__path__)[0])");
    let output = Command::new("python3").args(["-c", &script]).output().ok()?;
    output
        .status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
}

/// `cuobjdump`: `RFX_CUOBJDUMP`, else beside `ptxas`, else the `nvidia-cuda-cuobjdump` wheel,
/// else `cuobjdump` on `PATH`.
fn cuobjdump(ptxas: &Path) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RFX_CUOBJDUMP").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    // Beside ptxas, or in the cuobjdump wheel installed into the same `--target` folder
    // (`.../nvidia/cuda_nvcc/bin/ptxas` and `.../nvidia/cu13/bin/cuobjdump`, as `.ci/run` does).
    let beside = ptxas.parent().map(|dir| dir.join("cuobjdump"));
    let wheel = ptxas
        .ancestors()
        .nth(3)
        .map(|nvidia| nvidia.join("cu13").join("bin").join("cuobjdump"));
    if let Some(path) = beside.into_iter().chain(wheel).find(|p| p.is_file()) {
        return Some(path);
    }
    if let Some(dir) = python_package_dir("cuda_cuobjdump") {
        let path = dir.join("bin").join("cuobjdump");
        if path.is_file() {
            return Some(path);
        }
    }
    let on_path = Command::new("cuobjdump").arg("--version").output();
    on_path
        .is_ok_and(|o| o.status.success())
        .then(|| PathBuf::from("cuobjdump"))
}

/// Assembles `ptx_text` for `sm` and returns the SASS instructions, one a line.
fn sass(tools: (&Path, &Path), dir: &Path, name: &str, ptx_text: &str, sm: &str) -> String {
    let (ptxas, cuobjdump) = tools;
    let ptx_path = dir.join(format!("{name}_{sm}.ptx"));
    let cubin_path = dir.join(format!("{name}_{sm}.cubin"));
    std::fs::write(&ptx_path, ptx_text).expect("write PTX");
    let assembled = Command::new(ptxas)
        .args(["-O3", &format!("-arch={sm}")])
        .arg(&ptx_path)
        .arg("-o")
        .arg(&cubin_path)
        .output()
        .expect("run ptxas");
    assert!(
        assembled.status.success(),
        "{name}: ptxas -arch={sm} failed: {}",
        String::from_utf8_lossy(&assembled.stderr)
    );
    let dumped = Command::new(cuobjdump)
        .arg("-sass")
        .arg(&cubin_path)
        .output()
        .expect("run cuobjdump");
    assert!(
        dumped.status.success(),
        "{name}: cuobjdump -sass failed: {}",
        String::from_utf8_lossy(&dumped.stderr)
    );
    let _ = std::fs::remove_file(&ptx_path);
    let _ = std::fs::remove_file(&cubin_path);
    // Instruction lines look like `/*0110*/  SEL R7, RZ, 0xffffffff, !P0 ;  /* 0x... */`.
    String::from_utf8_lossy(&dumped.stdout)
        .lines()
        .filter_map(|line| {
            let line = line.trim_start().strip_prefix("/*")?;
            let (_, rest) = line.split_once("*/")?;
            let text = rest.split("/*").next()?.trim();
            (!text.is_empty()).then(|| text.to_string())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first register operand of `instruction` (its destination), e.g. `R7`.
fn destination(instruction: &str) -> Option<&str> {
    let operands = instruction
        .split_whitespace()
        .skip_while(|w| w.starts_with('@'))
        .nth(1)?;
    Some(operands.trim_end_matches(','))
}

/// `SEL Rn, RZ, 0xffffffff` (either order) whose result an `I2F` converts: the select of
/// ±0.0 and -1.0 made integer, which loses the sign of zero.
fn zero_sign_lost(sass: &str) -> Option<String> {
    let mut selects: Vec<String> = Vec::new();
    for line in sass.lines() {
        let op = line
            .split_whitespace()
            .find(|w| !w.starts_with('@'))
            .unwrap_or("");
        if op == "SEL" && (line.contains("RZ, 0xffffffff") || line.contains("0xffffffff, RZ")) {
            if let Some(dst) = destination(line) {
                selects.push(dst.to_string());
            }
        } else if op.starts_with("I2F") {
            let source = line
                .split(',')
                .nth(1)
                .map(|s| s.trim().trim_end_matches(';').trim());
            if source.is_some_and(|s| selects.iter().any(|d| d == s)) {
                return Some(line.to_string());
            }
        }
    }
    None
}

/// A store of the constant zero register.
fn stores_constant_zero(sass: &str) -> Option<String> {
    sass.lines()
        .find(|line| line.contains("STG") && line.trim_end_matches(';').trim_end().ends_with(", RZ"))
        .map(str::to_string)
}

struct Check {
    name: String,
    text: String,
    /// The SASS must not convert a select of 0/-1 to float.
    signed_zero: bool,
    /// The SASS must not store the constant 0 (every output depends on a NaN input).
    nan: bool,
    /// For a sweep kernel, its dtype and ops, checked one by one when it fails.
    sweep: Option<(DType, Vec<UnaryOp>, Vec<BinaryOp>)>,
}

/// The float unary and binary ops of the sweep, in groups of about the same compile time.
fn sweep_groups() -> Vec<(Vec<UnaryOp>, Vec<BinaryOp>)> {
    let unary: Vec<UnaryOp> = UnaryOp::ALL
        .iter()
        .copied()
        .filter(|op| op.accepts(DType::F32))
        .collect();
    let binary: Vec<BinaryOp> = BinaryOp::ALL
        .iter()
        .copied()
        .filter(|op| op.accepts(DType::F32))
        .collect();
    let (unary_a, unary_b) = unary.split_at(unary.len() / 2);
    vec![
        (unary_a.to_vec(), Vec::new()),
        (unary_b.to_vec(), Vec::new()),
        (Vec::new(), binary),
    ]
}

/// One kernel that computes every op of `unary` and `binary`, each from inputs of its own, and
/// stores `min(r, 0)` and `r >= -4 ? 0 : r` of each result `r`: both are NaN for a NaN operand
/// (of `pow`, unless the other operand makes the result 1), and both fold to a store of the
/// constant 0 when ptxas assumes that `r` is never NaN and knows a range for it, as for
/// `abs.f32` and `ex2.approx.f32`.
fn nan_sweep(name: &str, dtype: DType, unary: &[UnaryOp], binary: &[BinaryOp]) -> Check {
    let mut text =
        format!("kernel {name} {{\n  %zero = const 0.0 : {dtype}[]\n  %low = const -4.0 : {dtype}[]\n");
    let mut inputs = 0;
    let ops = unary
        .iter()
        .map(|op| (op.name(), 1))
        .chain(binary.iter().map(|op| (op.name(), 2)));
    for (op, arity) in ops {
        let mut args = Vec::new();
        for _ in 0..arity {
            inputs += 1;
            let _ = writeln!(text, "  %in{inputs} = input in{inputs} : {dtype}[4]");
            args.push(format!("%in{inputs}"));
        }
        let _ = writeln!(
            text,
            "  %{op} = {op} {} : {dtype}[4]\n  %{op}_min = min %{op}, %zero : {dtype}[4]\n  \
             %{op}_ge = ge %{op}, %low : bool[4]\n  %{op}_sel = select %{op}_ge, %zero, %{op} : {dtype}[4]\n  \
             output {op}_min = %{op}_min\n  output {op}_sel = %{op}_sel",
            args.join(", ")
        );
    }
    text.push_str("}\n");
    Check {
        name: name.to_string(),
        text,
        signed_zero: false,
        nan: true,
        sweep: Some((dtype, unary.to_vec(), binary.to_vec())),
    }
}

fn checks() -> Vec<Check> {
    let mut checks = Vec::new();
    let shape = |dims: &[usize]| dims.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
    for dtype in ["f32", "f64"] {
        for dims in [&[][..], &[1], &[4], &[3, 3]] {
            let s = shape(dims);
            let tag = if dims.is_empty() {
                "scalar".to_string()
            } else {
                s.replace(',', "x")
            };
            // The bool loaded in the loop.
            checks.push(Check {
                name: format!("neg_cast_{dtype}_{tag}"),
                text: format!(
                    "kernel k {{\n  %0 = input in0 : bool[{s}]\n  %1 = cast %0 : {dtype}[{s}]\n  \
                     %2 = neg %1 : {dtype}[{s}]\n  output out0 = %2\n}}\n"
                ),
                signed_zero: true,
                nan: false,
                sweep: None,
            });
            // One bool broadcast: the cast and the negation are hoisted into the preamble.
            checks.push(Check {
                name: format!("neg_cast_hoisted_{dtype}_{tag}"),
                text: format!(
                    "kernel k {{\n  %0 = input in0 : bool[]\n  %1 = broadcast_to %0 : bool[{s}]\n  \
                     %2 = cast %1 : {dtype}[{s}]\n  %3 = neg %2 : {dtype}[{s}]\n  output out0 = %3\n}}\n"
                ),
                signed_zero: true,
                nan: false,
                sweep: None,
            });
            checks.push(Check {
                name: format!("mul_cast_{dtype}_{tag}"),
                text: format!(
                    "kernel k {{\n  %0 = input in0 : bool[{s}]\n  %1 = cast %0 : {dtype}[{s}]\n  \
                     %2 = const -1.0 : {dtype}[]\n  %3 = mul %1, %2 : {dtype}[{s}]\n  output out0 = %3\n}}\n"
                ),
                signed_zero: true,
                nan: false,
                sweep: None,
            });
            checks.push(Check {
                name: format!("select_consts_{dtype}_{tag}"),
                text: format!(
                    "kernel k {{\n  %0 = input in0 : bool[{s}]\n  %1 = const -0.0 : {dtype}[]\n  \
                     %2 = const -1.0 : {dtype}[]\n  %3 = select %0, %1, %2 : {dtype}[{s}]\n  output out0 = %3\n}}\n"
                ),
                signed_zero: true,
                nan: false,
                                sweep: None,
            });
            // min(max(abs(x), c), 0) is NaN for a NaN x.
            checks.push(Check {
                name: format!("min_max_abs_{dtype}_{tag}"),
                text: format!(
                    "kernel k {{\n  %0 = input in0 : {dtype}[{s}]\n  %1 = abs %0 : {dtype}[{s}]\n  \
                     %2 = const 0.5 : {dtype}[]\n  %3 = max %1, %2 : {dtype}[{s}]\n  \
                     %4 = const 0.0 : {dtype}[]\n  %5 = min %3, %4 : {dtype}[{s}]\n  output out0 = %5\n}}\n"
                ),
                signed_zero: false,
                nan: true,
                sweep: None,
            });
            // abs(x) >= 0 is false for a NaN x.
            checks.push(Check {
                name: format!("ge_abs_{dtype}_{tag}"),
                text: format!(
                    "kernel k {{\n  %0 = input in0 : {dtype}[{s}]\n  %1 = abs %0 : {dtype}[{s}]\n  \
                     %2 = const 0.0 : {dtype}[]\n  %3 = ge %1, %2 : bool[{s}]\n  output out0 = %3\n}}\n"
                ),
                signed_zero: false,
                nan: true,
                sweep: None,
            });
        }
    }
    // `rfx fuzz --seed 4000814`: element 6 (NaN) of `out0` was 0.0.
    checks.push(Check {
        name: "fuzz_4000814".to_string(),
        text: "kernel fuzz {\n  %0 = input in0 : f32[3,3]\n  %1 = abs %0 : f32[3,3]\n  \
               %2 = const 0.49852127 : f32[]\n  %3 = max %1, %2 : f32[3,3]\n  %4 = sign %3 : f32[3,3]\n  \
               %5 = const 1.9275922 : f32[]\n  %6 = max %4, %5 : f32[3,3]\n  %7 = const 0.0 : f32[]\n  \
               %8 = min %6, %7 : f32[3,3]\n  output out0 = %8\n}\n"
            .to_string(),
        signed_zero: false,
        nan: true,
        sweep: None,
    });
    for dtype in [DType::F32, DType::F64] {
        for (g, (unary, binary)) in sweep_groups().iter().enumerate() {
            checks.push(nan_sweep(&format!("nan_sweep_{dtype}_{g}"), dtype, unary, binary));
        }
    }
    checks
}

#[test]
fn sass_has_no_known_ptxas_miscompile() {
    let checks = checks();
    let first = lower_kernel(&hir::parse(&checks[0].text).expect("parse"));
    match ptx(&first, "sm_90", &CompileOptions::default()) {
        Err(BackendError::Unavailable { reason, .. }) => {
            return skipped(&format!("NVRTC is not installed ({reason})"));
        }
        Err(e) => panic!("{}: {e}", checks[0].name),
        Ok(_) => {}
    }
    let Some(ptxas) = ptxas() else {
        return skipped("ptxas was not found (pip install nvidia-cuda-nvcc-cu12, or set RFX_PTXAS)");
    };
    let Some(cuobjdump) = cuobjdump(&ptxas) else {
        let what = "cuobjdump was not found (pip install nvidia-cuda-cuobjdump, or set RFX_CUOBJDUMP)";
        // CI installs it and sets this, so that the check cannot silently stop running.
        assert!(std::env::var_os("RFX_REQUIRE_CUOBJDUMP").is_none(), "{what}");
        return skipped(what);
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rfx-cuda-sass");
    std::fs::create_dir_all(&dir).expect("temp dir");
    // NVRTC dominates (about 0.6 s a kernel): the checks run on every core.
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let tools = (ptxas.as_path(), cuobjdump.as_path());
    let results: Vec<(Vec<String>, usize)> = std::thread::scope(|scope| {
        // Every `threads`-th check to each, so that the long sweep kernels are spread out.
        let workers: Vec<_> = (0..threads.min(checks.len()))
            .map(|t| {
                let part: Vec<&Check> = checks.iter().skip(t).step_by(threads).collect();
                let dir = &dir;
                scope.spawn(move || check_all(&part, tools, dir))
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let assembled: usize = results.iter().map(|(_, n)| n).sum();
    let failures: Vec<String> = results.into_iter().flat_map(|(f, _)| f).collect();
    println!(
        "{} kernels, {assembled} cubins assembled by {} and read by {}",
        checks.len(),
        ptxas.display(),
        cuobjdump.display()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Compiles, assembles and reads every check of `checks`: the failures, and how many cubins.
fn check_all(checks: &[&Check], tools: (&Path, &Path), dir: &Path) -> (Vec<String>, usize) {
    let mut failures = Vec::new();
    let mut assembled = 0;
    for check in checks {
        for (arch, sm) in TARGETS {
            let code = compile(check, tools, dir, arch, sm);
            assembled += 1;
            if check.signed_zero
                && let Some(line) = zero_sign_lost(&code)
            {
                failures.push(format!("{} ({arch} -> {sm}): -0.0 lost at `{line}`", check.name));
            }
            if check.nan {
                if let Some(line) = stores_constant_zero(&code) {
                    // Name the ops of a sweep kernel that lose NaN, each compiled alone.
                    let culprits = check
                        .sweep
                        .as_ref()
                        .map_or_else(String::new, |(dtype, unary, binary)| {
                            let lost = |name: String, unary: &[UnaryOp], binary: &[BinaryOp]| {
                                let one = nan_sweep(&name, *dtype, unary, binary);
                                stores_constant_zero(&compile(&one, tools, dir, arch, sm)).is_some()
                            };
                            let name = |op: &dyn std::fmt::Display| format!("{}_{op}", check.name);
                            let unary = unary.iter().filter(|&&op| lost(name(&op), &[op], &[]));
                            let binary = binary.iter().filter(|&&op| lost(name(&op), &[], &[op]));
                            let ops: Vec<&str> = unary
                                .map(|op| op.name())
                                .chain(binary.map(|op| op.name()))
                                .collect();
                            format!(" (by {})", ops.join(", "))
                        });
                    failures.push(format!(
                        "{} ({arch} -> {sm}): NaN lost{culprits}, `{line}`",
                        check.name
                    ));
                }
                if !code.contains("SETP") {
                    failures.push(format!("{} ({arch} -> {sm}): no comparison left", check.name));
                }
            }
        }
    }
    (failures, assembled)
}

/// The SASS of `check` compiled by NVRTC for `arch` and assembled for `sm`.
fn compile(check: &Check, tools: (&Path, &Path), dir: &Path, arch: &str, sm: &str) -> String {
    let kernel = hir::parse(&check.text).unwrap_or_else(|e| panic!("{}: {e}\n{}", check.name, check.text));
    let lir = lower_kernel(&kernel);
    let ptx_text = ptx(&lir, arch, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{} ({arch}): {e}", check.name));
    sass(tools, dir, &check.name, &ptx_text, sm)
}
