//! Shared by the CUDA backend's tests: the conformance set of kernels and the tool finders.
#![allow(dead_code, reason = "each test binary uses a different part")]

use std::path::PathBuf;
use std::time::Duration;

use rfx_check::generator::{KernelGenConfig, random_kernel};
use rfx_ir::hir::{self, Kernel};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, read_corpus};
use rfx_ir::{BinaryOp, CmpOp, DType, UnaryOp};
use rfx_lower::{LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

/// One kernel of the conformance set: its name, HIR and lowered LIR.
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) kernel: Kernel,
    pub(crate) lir: LirProgram,
}

pub(crate) fn lower_kernel(kernel: &Kernel) -> LirProgram {
    let config = OptConfig {
        time_limit: Duration::from_secs(60),
        ..OptConfig::default()
    };
    let (mir, _) = optimize(kernel, &config).unwrap_or_else(|e| panic!("optimize: {e}\n{kernel}"));
    lower(&mir, &LowerConfig::default())
        .unwrap_or_else(|e| panic!("lower: {e}\n{mir}"))
        .0
}

fn case(name: String, text: &str) -> Case {
    let kernel = hir::parse(text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
    let lir = lower_kernel(&kernel);
    Case { name, kernel, lir }
}

const DTYPES: [DType; 4] = [DType::Bool, DType::I32, DType::F32, DType::F64];

/// Every LIR op on every dtype it accepts, casts between all dtypes, broadcasts, reductions
/// over inner/outer/middle axes and multiple outputs.
pub(crate) fn op_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for &op in UnaryOp::ALL {
        for dtype in DTYPES.into_iter().filter(|&d| op.accepts(d)) {
            let text = format!(
                "kernel {op}_{dtype} {{ %x = input x : {dtype}[37] %y = {op} %x : {dtype}[37] output y = %y }}"
            );
            cases.push(case(format!("unary_{op}_{dtype}"), &text));
        }
    }
    for &op in BinaryOp::ALL {
        for dtype in DTYPES.into_iter().filter(|&d| op.accepts(d)) {
            let text = format!(
                "kernel {op}_{dtype} {{ %a = input a : {dtype}[37] %b = input b : {dtype}[37] \
                 %y = {op} %a, %b : {dtype}[37] output y = %y }}"
            );
            cases.push(case(format!("binary_{op}_{dtype}"), &text));
            // Broadcasts: a row against a matrix, and a scalar.
            let text = format!(
                "kernel {op}_{dtype}_bcast {{ %a = input a : {dtype}[5,7] %b = input b : {dtype}[7] \
                 %s = input s : {dtype}[] %y = {op} %a, %b : {dtype}[5,7] %z = {op} %s, %y : {dtype}[5,7] \
                 output z = %z }}"
            );
            cases.push(case(format!("binary_{op}_{dtype}_bcast"), &text));
        }
    }
    for &op in CmpOp::ALL {
        for dtype in DTYPES.into_iter().filter(|&d| op.accepts(d)) {
            let text = format!(
                "kernel {op}_{dtype} {{ %a = input a : {dtype}[6,1] %b = input b : {dtype}[1,9] \
                 %y = {op} %a, %b : bool[6,9] output y = %y }}"
            );
            cases.push(case(format!("compare_{op}_{dtype}"), &text));
        }
    }
    for dtype in DTYPES {
        let text = format!(
            "kernel select_{dtype} {{ %c = input c : bool[4,6] %a = input a : {dtype}[4,6] %b = input b : {dtype}[6] \
             %y = select %c, %a, %b : {dtype}[4,6] output y = %y }}"
        );
        cases.push(case(format!("select_{dtype}"), &text));
        for to in DTYPES {
            let text = format!(
                "kernel cast_{dtype}_{to} {{ %x = input x : {dtype}[33] %y = cast %x : {to}[33] output y = %y }}"
            );
            cases.push(case(format!("cast_{dtype}_to_{to}"), &text));
        }
    }
    for dtype in [DType::I32, DType::F32, DType::F64] {
        let text = format!(
            "kernel clamp_{dtype} {{ %x = input x : {dtype}[3,8] %lo = input lo : {dtype}[] %hi = input hi : {dtype}[8] \
             %y = clamp %x, %lo, %hi : {dtype}[3,8] output y = %y }}"
        );
        cases.push(case(format!("clamp_{dtype}"), &text));
        let ops: &[&str] = if dtype == DType::I32 {
            &["sum", "prod", "max", "min"]
        } else {
            &["sum", "prod", "max", "min", "mean"]
        };
        for op in ops {
            for (axes, out) in [
                ("[2]", "[4,5]"),
                ("[0]", "[5,19]"),
                ("[1]", "[4,19]"),
                ("[0,2]", "[5]"),
                ("[0,1,2]", "[]"),
            ] {
                let tag = axes.trim_matches(['[', ']']).replace(',', "");
                let text = format!(
                    "kernel {op}_{dtype} {{ %x = input x : {dtype}[4,5,19] %y = {op} %x axes {axes} : {dtype}{out} \
                     output y = %y }}"
                );
                cases.push(case(format!("reduce_{op}_{dtype}_axes{tag}"), &text));
            }
            let text = format!(
                "kernel {op}_{dtype}_keep {{ %x = input x : {dtype}[3,40] %y = {op} %x axes [1] keepdims : {dtype}[3,1] \
                 output y = %y }}"
            );
            cases.push(case(format!("reduce_{op}_{dtype}_keepdims"), &text));
        }
    }
    cases.push(case(
        "multi_output".to_string(),
        "kernel multi { %x = input x : f32[6,10] %y = input y : f32[10] %a = mul %x, %y : f32[6,10] \
         %s = sum %a axes [1] : f32[6] %m = max %x axes [1] : f32[6] %e = exp %a : f32[6,10] \
         %i = cast %x : i32[6,10] output s = %s output m = %m output e = %e output i = %i }",
    ));
    cases.push(case(
        "big_sum".to_string(),
        "kernel big_sum { %x = input x : f32[100000] %s = sum %x axes [0] : f32[] output s = %s }",
    ));
    cases
}

/// The optimiser's corpus (`crates/rfx-opt/tests/corpus/*.rfx`).
pub(crate) fn corpus_cases() -> Vec<Case> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../rfx-opt/tests/corpus");
    read_corpus(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .into_iter()
        .map(|(name, text)| case(format!("corpus_{name}"), &text))
        .collect()
}

/// The backend conformance suite every backend runs (`rfx_check::conformance::cases`), lowered,
/// each case's name prefixed with `suite_`.
pub(crate) fn suite_cases() -> Vec<Case> {
    rfx_check::conformance::cases()
        .into_iter()
        .map(|c| Case {
            name: format!("suite_{}", c.name),
            lir: lower_kernel(&c.kernel),
            kernel: c.kernel,
        })
        .collect()
}

/// `count` random kernels (seeds 1..=count).
pub(crate) fn random_cases(count: u64) -> Vec<Case> {
    let config = KernelGenConfig {
        max_ops: 12,
        max_dim: 9,
        ..KernelGenConfig::default()
    };
    (1..=count)
        .map(|seed| {
            let mut rng = TestRng::new(seed);
            let kernel = random_kernel(&mut rng, &config, "random");
            let lir = lower_kernel(&kernel);
            Case {
                name: format!("random_{seed}"),
                kernel,
                lir,
            }
        })
        .collect()
}

/// Whether CI demands the CUDA toolchain (`RFX_REQUIRE_NVRTC=1`).
pub(crate) fn toolchain_required() -> bool {
    std::env::var("RFX_REQUIRE_NVRTC").is_ok_and(|v| v == "1")
}

/// Reports a missing tool: a failure when CI requires the toolchain, else a `skipped:` line.
pub(crate) fn missing(what: &str) {
    if toolchain_required() {
        panic!("RFX_REQUIRE_NVRTC=1 but {what}");
    }
    println!("skipped: {what}");
    eprintln!("skipped: {what}");
}

fn python_package_dir(package: &str) -> Option<PathBuf> {
    let script = format!("import nvidia.{package} as m; print(list(m.__path__)[0])");
    let output = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
}

/// `ptxas`: `RFX_PTXAS`, else the `nvidia-cuda-nvcc-cu12` wheel, else `ptxas` on `PATH`.
pub(crate) fn ptxas() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RFX_PTXAS").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    if let Some(dir) = python_package_dir("cuda_nvcc") {
        let path = dir.join("bin").join("ptxas");
        if path.is_file() {
            return Some(path);
        }
    }
    let on_path = std::process::Command::new("ptxas").arg("--version").output();
    on_path
        .is_ok_and(|o| o.status.success())
        .then(|| PathBuf::from("ptxas"))
}
