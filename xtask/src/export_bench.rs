//! `cargo xtask export-bench`: rfx's exported C (`rfx export --lang c`, exact mode) against
//! CasADi's generated C and the hand-written gcc peers, timed from one C process.
//!
//! ```text
//! cargo xtask export-bench [--rounds N] [--out DIR] [--markdown FILE] [--rfx PATH]
//! ```
//!
//! 1. builds `rfx` (`cargo build --release -p rfx-cli`, unless `--rfx PATH` names a binary) and
//!    exports the peers script's K4 `sin(x*2)+y`, K5 (the 10-op chain) and K6 (the PID clip) at
//!    n = 1 and n = 65,536 into `DIR/rfx/` (default `target/export-bench`); a kernel whose
//!    export fails (an op the export does not support yet) is left out and named;
//! 2. writes CasADi's C for n = 1 into `DIR/casadi/` with `benches/export/casadi_gen.py` and
//!    the peers environment's Python (`target/peers/venv`, made by `../shared/peers/setup.sh`);
//!    without it the CasADi column is skipped, and the report says why;
//! 3. compiles each part with its own flags (below), records which of the exported loops gcc
//!    vectorised (`-fopt-info-vec`) and why not, links `benches/export/harness.c` with them
//!    and runs it (its header describes the timing method);
//! 4. exports each op of [`SURVEY`] alone over 1,024 elements into `DIR/survey/` and records
//!    whether gcc vectorises its loop (an op whose helper branches keeps every loop it is in
//!    scalar);
//! 5. prints the table and the goals of the export (the PID clip at n = 1 at most CasADi's C;
//!    K4 and K5 at 65,536 within 1.2× of the gcc peer), and writes `DIR/export-bench.json`.
//!
//! `DIR/rfx/`, `DIR/casadi/` and `DIR/survey/` are emptied first: they hold only this
//! command's files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// The exported C: the documented exact-mode flags (docs/export.md) at `-O3 -march=native`.
const EXPORT_FLAGS: &[&str] = &[
    "-std=c99",
    "-O3",
    "-march=native",
    "-Wall",
    "-Wextra",
    "-ffp-contract=off",
    "-fno-math-errno",
];
/// The hand-written peers, as the peers script compiles its "gcc C" column.
const PEER_FLAGS: &[&str] = &["-O3", "-march=native", "-ffast-math", "-fopenmp-simd"];
/// CasADi's generated C, as the peers script compiles it.
const CASADI_FLAGS: &[&str] = &["-O3", "-march=native"];
const HARNESS_FLAGS: &[&str] = &["-std=c99", "-O3", "-march=native", "-Wall", "-Wextra"];
/// The harness's CasADi scratch arrays (`CASADI_SCRATCH` in harness.c).
const CASADI_SCRATCH: u64 = 256;
const SIZES: [u64; 2] = [1, 65536];

/// One kernel of the benchmark: the peers script's name, rfx's expression, its inputs.
struct Kernel {
    id: &'static str,
    expr: &'static str,
    inputs: &'static [&'static str],
}

const KERNELS: [Kernel; 3] = [
    Kernel {
        id: "K4",
        expr: "sin(x*2)+y",
        inputs: &["x", "y"],
    },
    Kernel {
        id: "K5",
        expr: "((x*1.5+y)*0.5-sin(x))*cos(y)+exp(-x*x)",
        inputs: &["x", "y"],
    },
    Kernel {
        id: "K6",
        expr: "clip(1.2*e+0.3*i+0.05*d,-1,1)",
        inputs: &["e", "i", "d"],
    },
];

/// A goal of the export's speed, as a bound on rfx's time over a peer's.
struct Goal {
    kernel: &'static str,
    n: u64,
    peer: &'static str,
    bound: f64,
    text: &'static str,
}

const GOALS: [Goal; 3] = [
    Goal {
        kernel: "K6",
        n: 1,
        peer: "casadi",
        bound: 1.0,
        text: "PID clip at n = 1: at most CasADi's C",
    },
    Goal {
        kernel: "K4",
        n: 65536,
        peer: "gcc",
        bound: 1.2,
        text: "sin(x*2)+y at 65,536: within 1.2× of gcc -ffast-math",
    },
    Goal {
        kernel: "K5",
        n: 65536,
        peer: "gcc",
        bound: 1.2,
        text: "10-op chain at 65,536: within 1.2× of gcc -ffast-math",
    },
];

struct Options {
    rounds: u32,
    out: PathBuf,
    markdown: Option<PathBuf>,
    rfx: Option<PathBuf>,
}

fn parse(root: &Path, args: &[String]) -> Result<Options, String> {
    let flags = crate::perf::flags(args)?;
    if let Some(unknown) = flags
        .keys()
        .find(|k| !["rounds", "out", "markdown", "rfx"].contains(&k.as_str()))
    {
        return Err(format!(
            "unknown flag `--{unknown}` (export-bench takes --rounds N, --out DIR, --markdown FILE, --rfx PATH)"
        ));
    }
    let rounds = match flags.get("rounds") {
        None => 201,
        Some(r) => r
            .parse()
            .ok()
            .filter(|&r| r >= 5)
            .ok_or_else(|| format!("--rounds needs a whole number of at least 5, got `{r}`"))?,
    };
    Ok(Options {
        rounds,
        out: flags
            .get("out")
            .map_or_else(|| root.join("target/export-bench"), PathBuf::from),
        markdown: flags.get("markdown").map(PathBuf::from),
        rfx: flags.get("rfx").map(PathBuf::from),
    })
}

/// Runs the benchmark; prints the table and the goals and writes `DIR/export-bench.json`.
pub(crate) fn export_bench(root: &Path, args: &[String]) -> Result<(), String> {
    let options = parse(root, args)?;
    let rfx_dir = options.out.join("rfx");
    let casadi_dir = options.out.join("casadi");
    let survey_dir = options.out.join("survey");
    for dir in [&rfx_dir, &casadi_dir, &survey_dir] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let rfx = match &options.rfx {
        Some(path) => path.clone(),
        None => build_rfx(root)?,
    };
    let exports = export_kernels(&rfx, &rfx_dir)?;
    let casadi = generate_casadi(root, &casadi_dir);
    let build = compile(root, &options.out, &exports, &casadi)?;
    eprintln!("export-bench: which ops' loops gcc vectorises");
    let survey = survey(&rfx, &survey_dir)?;
    let harness_json = options.out.join("harness.json");
    eprintln!("export-bench: running the harness ({} rounds)", options.rounds);
    let status = Command::new(&build.harness)
        .arg(&harness_json)
        .arg(options.rounds.to_string())
        .status()
        .map_err(|e| format!("{}: {e}", build.harness.display()))?;
    if !status.success() {
        return Err(format!("the harness failed: {status}"));
    }
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(&harness_json).map_err(|e| format!("{}: {e}", harness_json.display()))?,
    )
    .map_err(|e| format!("{}: {e}", harness_json.display()))?;
    let report = json!({
        "date": output_of(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"])).unwrap_or_default(),
        "commit": output_of(Command::new("git").current_dir(root).args(["describe", "--always", "--dirty"]))
            .unwrap_or_default(),
        "cpu": cpu_model(),
        "gcc": output_of(Command::new("gcc").arg("--version"))?.lines().next().unwrap_or("").to_string(),
        "flags": {"export": EXPORT_FLAGS, "gcc_peer": PEER_FLAGS, "casadi": CASADI_FLAGS, "harness": HARNESS_FLAGS},
        "casadi": casadi.report(),
        "exports": exports.iter().map(Export::report).collect::<Vec<_>>(),
        "loops": build.loops,
        "survey": survey,
        "results": results,
        "goals": goals(&results),
    });
    let markdown = markdown(&report);
    println!("\n{markdown}");
    let json_path = options.out.join("export-bench.json");
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    eprintln!("export-bench: wrote {}", json_path.display());
    if let Some(path) = &options.markdown {
        std::fs::write(path, &markdown).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("export-bench: wrote {}", path.display());
    }
    Ok(())
}

fn build_rfx(root: &Path) -> Result<PathBuf, String> {
    eprintln!("export-bench: cargo build --release -p rfx-cli");
    let status = crate::cargo(root)
        .args(["build", "--release", "--quiet", "-p", "rfx-cli"])
        .status()
        .map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build --release -p rfx-cli failed: {status}"));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    Ok(target.join("release/rfx"))
}

/// One `rfx export` of a kernel at a size: the C function's name, or why it failed.
struct Export {
    kernel: &'static str,
    n: u64,
    name: String,
    error: Option<String>,
}

impl Export {
    fn report(&self) -> Value {
        json!({"kernel": self.kernel, "n": self.n, "name": self.name, "error": self.error})
    }
}

fn export_kernels(rfx: &Path, dir: &Path) -> Result<Vec<Export>, String> {
    let mut exports = Vec::new();
    for kernel in &KERNELS {
        for n in SIZES {
            let name = format!("rfx_{}_{n}", kernel.id.to_lowercase());
            let shapes: Vec<String> = kernel.inputs.iter().map(|i| format!("{i}=f32[{n}]")).collect();
            let out = Command::new(rfx)
                .args(["export", kernel.expr, "--lang", "c", "--name", &name])
                .args(["--in-shapes", &shapes.join(",")])
                .arg("--out")
                .arg(dir)
                .output()
                .map_err(|e| format!("{}: {e}", rfx.display()))?;
            let error =
                (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).trim().to_string());
            if let Some(e) = &error {
                eprintln!("export-bench: {} at n = {n} not exported: {e}", kernel.id);
            }
            exports.push(Export {
                kernel: kernel.id,
                n,
                name,
                error,
            });
        }
    }
    if let Some(failed) = exports.iter().find(|e| e.kernel == "K6" && e.error.is_some()) {
        return Err(format!(
            "the PID clip must export: {}",
            failed.error.as_deref().unwrap_or("")
        ));
    }
    Ok(exports)
}

/// Whether every size of `kernel` exported.
fn exported(exports: &[Export], kernel: &str) -> bool {
    exports
        .iter()
        .filter(|e| e.kernel == kernel)
        .all(|e| e.error.is_none())
}

/// CasADi's C for n = 1: its version, or why there is none.
enum Casadi {
    Generated { version: String },
    Skipped { reason: String },
}

impl Casadi {
    fn report(&self) -> Value {
        match self {
            Casadi::Generated { version } => json!({"version": version}),
            Casadi::Skipped { reason } => json!({"skipped": reason}),
        }
    }
}

fn generate_casadi(root: &Path, dir: &Path) -> Casadi {
    let python = root.join("target/peers/venv/bin/python");
    if !python.exists() {
        return Casadi::Skipped {
            reason: format!(
                "no peers environment at {} (run `PEERS_WORKDIR=target/peers ../shared/peers/setup.sh`)",
                python.display()
            ),
        };
    }
    let script = root.join("benches/export/casadi_gen.py");
    let out = match Command::new(&python).arg(&script).arg(dir).arg("1").output() {
        Ok(out) => out,
        Err(e) => {
            return Casadi::Skipped {
                reason: format!("{}: {e}", python.display()),
            };
        }
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Casadi::Skipped {
            reason: stderr
                .trim()
                .lines()
                .last()
                .unwrap_or("casadi_gen.py failed")
                .to_string(),
        };
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    match casadi_version(&stdout) {
        Ok(version) => Casadi::Generated { version },
        Err(reason) => Casadi::Skipped { reason },
    }
}

/// Reads casadi_gen.py's JSON line: the version, after checking every function's scratch fits
/// the harness's arrays.
fn casadi_version(stdout: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(stdout.trim()).map_err(|e| format!("casadi_gen.py's output: {e}"))?;
    for (name, f) in v
        .get("functions")
        .and_then(Value::as_object)
        .ok_or("casadi_gen.py: no functions")?
    {
        for key in ["sz_iw", "sz_w"] {
            let size = f.get(key).and_then(Value::as_u64).unwrap_or(u64::MAX);
            if size > CASADI_SCRATCH {
                return Err(format!(
                    "{name} needs {key} = {size}, more than the harness's {CASADI_SCRATCH}"
                ));
            }
        }
    }
    Ok(v.get("casadi").and_then(Value::as_str).unwrap_or("?").to_string())
}

struct Build {
    harness: PathBuf,
    loops: Vec<Value>,
}

fn gcc(flags: &[&str], args: &[&std::ffi::OsStr], what: &str) -> Result<String, String> {
    let out = Command::new("gcc")
        .args(flags)
        .args(args)
        .output()
        .map_err(|e| format!("gcc ({what}): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "gcc ({what}) failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Compiles every part with its flags and links the harness; records the exported loops'
/// vectorisation.
fn compile(root: &Path, out: &Path, exports: &[Export], casadi: &Casadi) -> Result<Build, String> {
    let mut objects: Vec<PathBuf> = Vec::new();
    let mut loops = Vec::new();
    for export in exports.iter().filter(|e| e.error.is_none()) {
        let source = out.join("rfx").join(format!("{}.c", export.name));
        let object = source.with_extension("o");
        let export_loops = compile_export(&source, &object)?;
        let undefined = output_of(Command::new("nm").arg("-u").arg(&object)).unwrap_or_default();
        for l in export_loops {
            loops.push(json!({
                "export": export.name, "line": l.line, "vectorised": l.vectorised,
                "versioned_for_aliasing": l.versioned_for_aliasing, "missed": l.missed,
                "rerun": l.rerun,
                "undefined_symbols": undefined.lines().filter_map(|s| s.split_whitespace().last()).collect::<Vec<_>>(),
            }));
        }
        objects.push(object);
    }
    let peer_object = out.join("gcc_kernels.o");
    let peer_source = root.join("benches/export/gcc_kernels.c");
    gcc(
        PEER_FLAGS,
        &[
            "-c".as_ref(),
            peer_source.as_os_str(),
            "-o".as_ref(),
            peer_object.as_os_str(),
        ],
        "gcc_kernels.c",
    )?;
    objects.push(peer_object);
    let mut defines: Vec<&str> = Vec::new();
    if let Casadi::Generated { .. } = casadi {
        defines.push("-DHAVE_CASADI");
        for kernel in &KERNELS {
            let source = out.join("casadi").join(format!("{}_1.c", kernel.id));
            let object = source.with_extension("o");
            gcc(
                CASADI_FLAGS,
                &[
                    "-c".as_ref(),
                    source.as_os_str(),
                    "-o".as_ref(),
                    object.as_os_str(),
                ],
                "CasADi's C",
            )?;
            objects.push(object);
        }
    }
    if exported(exports, "K4") {
        defines.push("-DHAVE_RFX_K4");
    }
    if exported(exports, "K5") {
        defines.push("-DHAVE_RFX_K5");
    }
    let harness_object = out.join("harness.o");
    let harness_source = root.join("benches/export/harness.c");
    let include = out.join("rfx");
    let mut args: Vec<&std::ffi::OsStr> = defines.iter().map(|d| d.as_ref()).collect();
    args.extend([
        "-I".as_ref(),
        include.as_os_str(),
        "-c".as_ref(),
        harness_source.as_os_str(),
        "-o".as_ref(),
        harness_object.as_os_str(),
    ]);
    gcc(HARNESS_FLAGS, &args, "harness.c")?;
    let harness = out.join("harness");
    let mut link: Vec<&std::ffi::OsStr> = vec![harness_object.as_os_str()];
    link.extend(objects.iter().map(|o| o.as_os_str()));
    link.extend(["-lm".as_ref(), "-o".as_ref(), harness.as_os_str()]);
    gcc(&[], &link, "linking the harness")?;
    Ok(Build { harness, loops })
}

/// Compiles one exported source with [`EXPORT_FLAGS`] into `object` and returns its loops with
/// what gcc's `-fopt-info-vec-optimized` and `-fopt-info-vec-missed` said about them.
fn compile_export(source: &Path, object: &Path) -> Result<Vec<LoopInfo>, String> {
    let what = source.display().to_string();
    let text = std::fs::read_to_string(source).map_err(|e| format!("{what}: {e}"))?;
    let mut info = String::new();
    for (flag, target) in [
        ("-fopt-info-vec-optimized", object),
        ("-fopt-info-vec-missed", Path::new("/dev/null")),
    ] {
        info += &gcc(
            EXPORT_FLAGS,
            &[
                flag.as_ref(),
                "-c".as_ref(),
                source.as_os_str(),
                "-o".as_ref(),
                target.as_os_str(),
            ],
            &what,
        )?;
    }
    let file = source
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(loop_report(&text, &info, &file))
}

/// One op of the vectorisation survey: a label and the expression, exported over `f32[1024]`
/// inputs `x` and `y` (or `i32[1024]` where the label says so).
const SURVEY: [(&str, &str); 20] = [
    ("abs", "abs(x)"),
    ("sqrt", "sqrt(x)"),
    ("floor", "floor(x)"),
    ("ceil", "ceil(x)"),
    ("round", "round(x)"),
    ("exp", "exp(x)"),
    ("exp2", "exp2(x)"),
    ("log", "log(x)"),
    ("log2", "log2(x)"),
    ("tanh", "tanh(x)"),
    ("sigmoid", "sigmoid(x)"),
    ("erf", "erf(x)"),
    ("sin", "sin(x)"),
    ("cos", "cos(x)"),
    ("tan", "tan(x)"),
    ("atan", "atan(x)"),
    ("asin", "asin(x)"),
    ("pow", "pow(x,y)"),
    ("atan2", "atan2(x,y)"),
    ("i32 x / y", "x / y"),
];

/// Exports each [`SURVEY`] op alone into `dir` and records whether gcc vectorised its loop, or
/// why not, or why the op did not export.
fn survey(rfx: &Path, dir: &Path) -> Result<Vec<Value>, String> {
    let mut rows = Vec::new();
    for (index, (label, expr)) in SURVEY.iter().enumerate() {
        let name = format!("op_{index}");
        let dtype = if label.starts_with("i32") { "i32" } else { "f32" };
        let uses_y = expr.contains('y');
        let shapes = if uses_y {
            format!("x={dtype}[1024],y={dtype}[1024]")
        } else {
            format!("x={dtype}[1024]")
        };
        let out = Command::new(rfx)
            .args([
                "export",
                expr,
                "--lang",
                "c",
                "--name",
                &name,
                "--in-shapes",
                &shapes,
            ])
            .arg("--out")
            .arg(dir)
            .output()
            .map_err(|e| format!("{}: {e}", rfx.display()))?;
        if !out.status.success() {
            let error = String::from_utf8_lossy(&out.stderr).trim().to_string();
            rows.push(json!({"op": label, "error": error}));
            continue;
        }
        let source = dir.join(format!("{name}.c"));
        let loops = compile_export(&source, &source.with_extension("o"))?;
        rows.push(json!({
            "op": label,
            // The exact reruns (taken only for rare arguments) do not count.
            "vectorised": loops.iter().any(|l| !l.rerun)
                && loops.iter().filter(|l| !l.rerun).all(|l| l.vectorised),
            "missed": loops.iter().filter(|l| !l.rerun).flat_map(|l| l.missed.clone()).collect::<Vec<_>>(),
        }));
    }
    Ok(rows)
}

/// A `for` loop of an exported source and what gcc's `-fopt-info-vec` said about it.
#[derive(Debug, PartialEq)]
struct LoopInfo {
    line: usize,
    vectorised: bool,
    /// Vectorised behind a run-time check that the arrays do not overlap (gcc could not prove
    /// it: the parameters are not `restrict`).
    versioned_for_aliasing: bool,
    /// gcc's reasons for not vectorising it (`not vectorized: ...`), deduplicated.
    missed: Vec<String>,
    /// The exact rerun of a fast loop (inside `if (any_slow != 0) {`), run only when an
    /// element needs the exact code (a `sin` argument beyond 4096, say).
    rerun: bool,
}

/// The `for` loops of `source`'s exported function (1-based lines; the loops of the `static
/// inline` helpers above it, such as the software square root's, are not the kernel's) with
/// gcc's `-fopt-info-vec-optimized` and `-vec-missed` messages about them, read from `info`
/// (lines `FILE:LINE:COL: KIND: TEXT`).
fn loop_report(source: &str, info: &str, file: &str) -> Vec<LoopInfo> {
    let function_start = source.lines().position(|l| l.starts_with("int ")).unwrap_or(0);
    // The indentation of the `if (any_slow != 0) {` whose block the current line is in.
    let mut rerun_block: Option<usize> = None;
    let mut loops = Vec::new();
    for (i, l) in source.lines().enumerate().skip(function_start) {
        let text = l.trim_start();
        let indent = l.len() - text.len();
        if rerun_block == Some(indent) && text == "}" {
            rerun_block = None;
        } else if text == "if (any_slow != 0) {" && rerun_block.is_none() {
            rerun_block = Some(indent);
        } else if text.starts_with("for (") {
            loops.push(LoopInfo {
                line: i + 1,
                vectorised: false,
                versioned_for_aliasing: false,
                missed: Vec::new(),
                rerun: rerun_block.is_some(),
            });
        }
    }
    for message in info.lines() {
        let Some(rest) = message
            .split_once(file)
            .and_then(|(before, rest)| (before.is_empty() || before.ends_with('/')).then_some(rest))
        else {
            continue;
        };
        let mut parts = rest.trim_start_matches(':').splitn(3, ':');
        let (Some(line), Some(_col), Some(text)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Some(l) = line
            .parse::<usize>()
            .ok()
            .and_then(|n| loops.iter_mut().find(|l| l.line == n))
        else {
            continue;
        };
        let text = text.trim();
        if text.starts_with("optimized: loop vectorized") {
            l.vectorised = true;
        } else if text.contains("loop versioned for vectorization because of possible aliasing") {
            l.versioned_for_aliasing = true;
        } else if let Some(reason) = text.strip_prefix("missed: not vectorized: ") {
            let reason = reason.trim_end_matches('.').to_string();
            if !l.missed.contains(&reason) {
                l.missed.push(reason);
            }
        }
    }
    loops
}

/// Each goal with rfx's time over the peer's (ratio of medians, the median per-round ratio and
/// the ratio of thread-CPU-time medians) and whether it is met (by the ratio of medians);
/// `null` figures where a variant was not measured.
fn goals(results: &Value) -> Vec<Value> {
    GOALS
        .iter()
        .map(|goal| {
            let case = find_case(results, goal.kernel, goal.n);
            let variant = |name: &str| {
                case.and_then(|c| c.get("variants")?.as_array()?.iter().find(|v| v["name"] == name))
            };
            let (rfx, peer) = (variant("rfx"), variant(goal.peer));
            let ratio_of = |key: &str| {
                rfx.zip(peer)
                    .and_then(|(r, p)| Some(r[key].as_f64()? / p[key].as_f64()?))
            };
            let (ratio, cpu_ratio) = (ratio_of("med_ns"), ratio_of("med_cpu_ns"));
            let paired = peer
                .and_then(|p| p["paired_ratio_to_rfx"].as_f64())
                .map(|x| 1.0 / x);
            json!({
                "goal": goal.text, "kernel": goal.kernel, "n": goal.n, "peer": goal.peer, "bound": goal.bound,
                "ratio": ratio, "paired_ratio": paired, "cpu_ratio": cpu_ratio, "met": ratio.map(|r| r <= goal.bound),
            })
        })
        .collect()
}

fn find_case<'a>(results: &'a Value, kernel: &str, n: u64) -> Option<&'a Value> {
    results
        .get("cases")?
        .as_array()?
        .iter()
        .find(|c| c["kernel"] == kernel && c["n"].as_u64() == Some(n))
}

/// The report as markdown: the table (median per call; in brackets the peer's time over
/// rfx's), the goals, the exported loops gcc did not vectorise and what was skipped.
fn markdown(report: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}, commit {}, {}; {}.\n",
        report["date"].as_str().unwrap_or("?"),
        report["commit"].as_str().unwrap_or("?"),
        report["cpu"].as_str().unwrap_or("?"),
        report["gcc"].as_str().unwrap_or("?"),
    );
    out.push_str(
        "| kernel | n | rfx export (exact) | CasADi C | gcc C (`-ffast-math`) |\n|---|---|---|---|---|\n",
    );
    for case in report["results"]["cases"].as_array().into_iter().flatten() {
        let variants = case["variants"].as_array().map_or(&[][..], Vec::as_slice);
        let med = |name: &str| {
            variants
                .iter()
                .find(|v| v["name"] == name)
                .and_then(|v| v["med_ns"].as_f64())
        };
        let Some(rfx) = med("rfx") else { continue };
        let _ = write!(
            out,
            "| {} {} | {} | {} |",
            case["kernel"].as_str().unwrap_or("?"),
            case["title"].as_str().unwrap_or(""),
            case["n"],
            fmt_ns(rfx)
        );
        for peer in ["casadi", "gcc"] {
            match med(peer) {
                Some(t) => {
                    let _ = write!(out, " {} ({:.2}×) |", fmt_ns(t), t / rfx);
                }
                None => out.push_str(" – |"),
            }
        }
        out.push('\n');
    }
    out.push('\n');
    for goal in report["goals"].as_array().into_iter().flatten() {
        let verdict = match goal["met"].as_bool() {
            Some(true) => "met",
            Some(false) => "missed",
            None => "not measured",
        };
        let figures = match (
            goal["ratio"].as_f64(),
            goal["paired_ratio"].as_f64(),
            goal["cpu_ratio"].as_f64(),
        ) {
            (Some(r), Some(p), Some(c)) => format!(
                ": rfx / {} = {r:.2} (per-round median {p:.2}; in thread CPU time {c:.2})",
                goal["peer"].as_str().unwrap_or("?")
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "- {}: **{verdict}**{figures}",
            goal["goal"].as_str().unwrap_or("?")
        );
    }
    for l in report["loops"].as_array().into_iter().flatten() {
        if l["rerun"] == true {
            let _ = writeln!(
                out,
                "- the exact rerun at {}.c:{} ({}): run only when an element needs the exact code",
                l["export"].as_str().unwrap_or("?"),
                l["line"],
                if l["vectorised"] == true {
                    "vectorised"
                } else {
                    "not vectorised"
                }
            );
        } else if l["vectorised"] == false {
            let missed: Vec<&str> = l["missed"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let _ = writeln!(
                out,
                "- not vectorised: the loop at {}.c:{} ({})",
                l["export"].as_str().unwrap_or("?"),
                l["line"],
                if missed.is_empty() {
                    "no reason given".to_string()
                } else {
                    missed.join("; ")
                }
            );
        } else if l["versioned_for_aliasing"] == true {
            let _ = writeln!(
                out,
                "- vectorised behind a run-time overlap check: the loop at {}.c:{}",
                l["export"].as_str().unwrap_or("?"),
                l["line"],
            );
        }
    }
    let survey: Vec<&Value> = report["survey"].as_array().into_iter().flatten().collect();
    if !survey.is_empty() {
        let label = |row: &Value| row["op"].as_str().unwrap_or("?").to_string();
        let vectorised: Vec<String> = survey
            .iter()
            .filter(|r| r["vectorised"] == true)
            .map(|r| label(r))
            .collect();
        let scalar: Vec<String> = survey
            .iter()
            .filter(|r| r["vectorised"] == false)
            .map(|r| {
                let missed: Vec<&str> = r["missed"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                format!(
                    "{} ({})",
                    label(r),
                    missed.first().copied().unwrap_or("no reason given")
                )
            })
            .collect();
        let refused: Vec<String> = survey
            .iter()
            .filter(|r| r["error"].is_string())
            .map(|r| label(r))
            .collect();
        let list = |items: &[String]| {
            if items.is_empty() {
                "none".to_string()
            } else {
                items.join(", ")
            }
        };
        let _ = writeln!(
            out,
            "- one op over 1,024 elements: gcc vectorises the loop of {}; not of {}; not exported: {}",
            list(&vectorised),
            list(&scalar),
            list(&refused)
        );
    }
    for e in report["exports"].as_array().into_iter().flatten() {
        if let Some(error) = e["error"].as_str() {
            let _ = writeln!(
                out,
                "- {} at n = {} not exported: {error}",
                e["kernel"].as_str().unwrap_or("?"),
                e["n"]
            );
        }
    }
    if let Some(reason) = report["casadi"]["skipped"].as_str() {
        let _ = writeln!(out, "- CasADi skipped: {reason}");
    }
    out
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1000.0 {
        format!("{:.2} µs", ns / 1000.0)
    } else {
        format!("{ns:.2} ns")
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_default()
}

fn output_of(command: &mut Command) -> Result<String, String> {
    let out = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{command:?} failed: {}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "static inline int h(void) { int k; for (k = 0; k < 3; ++k) {} return k; }\nint f(void) {\n  uint32_t i0;\n  for (i0 = 0; i0 < 8u; ++i0) {\n  }\n    for (i0 = 0; i0 < 4u; ++i0) {\n  }\n}\n";

    #[test]
    fn loops_inside_the_any_slow_block_are_the_exact_reruns() {
        let source = "int f(void) {\n  {\n    uint32_t any_slow = 0u;\n    uint32_t i0;\n    \
                      for (i0 = 0; i0 < 8u; ++i0) {\n    }\n    if (any_slow != 0) {\n      \
                      uint32_t i0;\n      for (i0 = 0; i0 < 8u; ++i0) {\n        \
                      for (i1 = 0; i1 < 2u; ++i1) {\n        }\n      }\n    }\n  }\n  \
                      {\n    for (i0 = 0; i0 < 8u; ++i0) {\n    }\n  }\n}\n";
        let reruns: Vec<(usize, bool)> = loop_report(source, "", "f.c")
            .iter()
            .map(|l| (l.line, l.rerun))
            .collect();
        assert_eq!(reruns, [(5, false), (9, true), (10, true), (16, false)]);
    }

    #[test]
    fn loops_are_matched_to_gccs_messages_by_file_and_line() {
        let info = "\
/tmp/x/rfx_k4_1.c:1:40: missed: not vectorized: number of iterations cannot be computed.
/tmp/x/rfx_k4_1.c:4:21: optimized: loop vectorized using 32 byte vectors
/tmp/x/rfx_k4_1.c:4:21: optimized:  loop versioned for vectorization because of possible aliasing
/tmp/x/rfx_k4_1.c:6:5: missed: couldn't vectorize loop
/tmp/x/rfx_k4_1.c:6:5: missed: not vectorized: control flow in loop.
/tmp/x/rfx_k4_1.c:6:5: missed: not vectorized: control flow in loop.
/tmp/x/other_rfx_k4_1.c:6:5: optimized: loop vectorized using 32 byte vectors
/tmp/x/rfx_k4_1.c:3:3: missed: not vectorized: unsupported data-type
";
        let loops = loop_report(SOURCE, info, "rfx_k4_1.c");
        assert_eq!(
            loops,
            [
                LoopInfo {
                    line: 4,
                    vectorised: true,
                    versioned_for_aliasing: true,
                    missed: vec![],
                    rerun: false,
                },
                LoopInfo {
                    line: 6,
                    vectorised: false,
                    versioned_for_aliasing: false,
                    missed: vec!["control flow in loop".to_string()],
                    rerun: false,
                },
            ]
        );
    }

    fn results() -> Value {
        json!({"rounds": 5, "cases": [
            {"kernel": "K6", "title": "PID clip", "n": 1, "sets": 1, "variants": [
                {"name": "rfx", "med_ns": 2.5, "med_cpu_ns": 2.5, "paired_ratio_to_rfx": 1.0},
                {"name": "casadi", "med_ns": 5.0, "med_cpu_ns": 4.0, "paired_ratio_to_rfx": 1.6},
                {"name": "gcc", "med_ns": 2.0, "med_cpu_ns": 2.0, "paired_ratio_to_rfx": 0.8}]},
            {"kernel": "K4", "title": "sin(x*2)+y", "n": 65536, "sets": 4, "variants": [
                {"name": "rfx", "med_ns": 30000.0, "med_cpu_ns": 25000.0, "paired_ratio_to_rfx": 1.0},
                {"name": "gcc", "med_ns": 20000.0, "med_cpu_ns": 20000.0, "paired_ratio_to_rfx": 0.625}]},
        ]})
    }

    #[test]
    fn goals_divide_rfx_by_the_peer_and_compare_with_the_bound() {
        let goals = goals(&results());
        assert_eq!(goals.len(), 3);
        assert_eq!(goals[0]["ratio"].as_f64(), Some(0.5));
        assert_eq!(goals[0]["paired_ratio"].as_f64(), Some(0.625));
        assert_eq!(goals[0]["cpu_ratio"].as_f64(), Some(0.625));
        assert_eq!(goals[0]["met"], true);
        assert_eq!(goals[1]["ratio"].as_f64(), Some(1.5));
        assert_eq!(goals[1]["paired_ratio"].as_f64(), Some(1.6));
        assert_eq!(goals[1]["cpu_ratio"].as_f64(), Some(1.25));
        assert_eq!(goals[1]["met"], false);
        assert_eq!(goals[2]["met"], Value::Null, "K5 was not measured");
    }

    #[test]
    fn the_markdown_gives_each_peer_over_rfx_and_the_verdicts() {
        let results = results();
        let report = json!({
            "date": "2026-11-28 14:00 UTC", "commit": "abc1234", "cpu": "Some CPU", "gcc": "gcc 12",
            "casadi": {"skipped": "no casadi"}, "results": results, "goals": goals(&results),
            "loops": [
                {"export": "rfx_k4_65536", "line": 80, "vectorised": false, "missed": ["control flow in loop"]},
                {"export": "rfx_k6_65536", "line": 50, "vectorised": true, "versioned_for_aliasing": true, "missed": []},
            ],
            "exports": [{"kernel": "K5", "n": 1, "name": "rfx_k5_1", "error": "no sin"}],
            "survey": [
                {"op": "abs", "vectorised": true, "missed": []},
                {"op": "exp", "vectorised": false, "missed": ["control flow in loop"]},
                {"op": "sqrt", "vectorised": true, "missed": []},
                {"op": "pow", "error": "error: the C export does not support `pow` yet"},
            ],
        });
        let text = markdown(&report);
        assert!(
            text.contains("| K6 PID clip | 1 | 2.50 ns | 5.00 ns (2.00×) | 2.00 ns (0.80×) |"),
            "{text}"
        );
        assert!(
            text.contains("| K4 sin(x*2)+y | 65536 | 30.00 µs | – | 20.00 µs (0.67×) |"),
            "{text}"
        );
        assert!(
            text.contains("at most CasADi's C: **met**: rfx / casadi = 0.50 (per-round median 0.62; in thread CPU time 0.62)"),
            "{text}"
        );
        assert!(
            text.contains("gcc -ffast-math: **missed**: rfx / gcc = 1.50"),
            "{text}"
        );
        assert!(text.contains("**not measured**"), "{text}");
        assert!(
            text.contains(
                "gcc vectorises the loop of abs, sqrt; not of exp (control flow in loop); not exported: pow"
            ),
            "{text}"
        );
        assert!(
            text.contains("run-time overlap check: the loop at rfx_k6_65536.c:50"),
            "{text}"
        );
        assert!(
            text.contains("the loop at rfx_k4_65536.c:80 (control flow in loop)"),
            "{text}"
        );
        assert!(text.contains("K5 at n = 1 not exported: no sin"), "{text}");
        assert!(text.contains("CasADi skipped: no casadi"), "{text}");
    }

    #[test]
    fn casadi_scratch_beyond_the_harness_arrays_is_refused() {
        let ok = r#"{"casadi": "3.8.2", "functions": {"K6_1": {"sz_arg": 3, "sz_res": 1, "sz_iw": 0, "sz_w": 3}}}"#;
        assert_eq!(casadi_version(ok).as_deref(), Ok("3.8.2"));
        let big = r#"{"casadi": "3.8.2", "functions": {"K5_1": {"sz_iw": 0, "sz_w": 300}}}"#;
        assert!(casadi_version(big).unwrap_err().contains("sz_w = 300"));
    }

    #[test]
    fn options_are_checked() {
        let root = Path::new("/r");
        let o = parse(root, &["--rounds".into(), "31".into()]).unwrap();
        assert_eq!((o.rounds, o.out), (31, PathBuf::from("/r/target/export-bench")));
        assert!(parse(root, &["--rounds".into(), "2".into()]).is_err());
        assert!(parse(root, &["--bogus".into(), "1".into()]).is_err());
    }
}
