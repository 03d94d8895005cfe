//! The `rfx` command: run, evaluate, differentiate, dump and draw rfx kernels; benchmark and
//! fuzz them.
//!
//! Exit codes: 0 success, 1 a user error (one line on stderr, `error: ...`), 2 an internal
//! error (a compiler bug). Nothing is written to an output directory unless every output was
//! computed.

mod npy;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use rfx::expr::{Signature, compile, compile_with_outputs};
use rfx::{Arg, Array, CompileConfig, Jit, JitError, Kernel, KernelSource};
use rfx_cli::bench::{self, BenchArgs};

/// What went wrong, and whose fault it is.
#[derive(Debug)]
pub(crate) enum CliError {
    /// Bad input: exit code 1.
    User(String),
    /// A bug: exit code 2.
    Internal(String),
}

impl From<JitError> for CliError {
    fn from(error: JitError) -> CliError {
        if error.is_user_error() {
            CliError::User(error.to_string())
        } else {
            CliError::Internal(error.to_string())
        }
    }
}

/// rfx: a JIT compiler for robotics control kernels.
#[derive(Debug, Parser)]
#[command(name = "rfx", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// One `--in name=FILE.npy` argument.
#[derive(Clone, Debug)]
struct NamedFile {
    name: String,
    path: PathBuf,
}

fn parse_named_file(text: &str) -> Result<NamedFile, String> {
    let (name, path) = text
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=FILE.npy, got `{text}`"))?;
    if name.is_empty() || path.is_empty() {
        return Err(format!("expected NAME=FILE.npy, got `{text}`"));
    }
    Ok(NamedFile {
        name: name.to_string(),
        path: PathBuf::from(path),
    })
}

#[derive(Clone, Debug, clap::Args)]
struct Inputs {
    /// An input: NAME=FILE.npy (repeat for each input).
    #[arg(long = "in", value_name = "NAME=FILE", value_parser = parse_named_file)]
    inputs: Vec<NamedFile>,
    /// Backend: interp, cpu, cuda, metal.
    #[arg(long, default_value = "cpu")]
    backend: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Stage {
    Hir,
    Mir,
    Lir,
    Clif,
    Asm,
    Cuda,
    Ptx,
    Msl,
    Wgsl,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DotStage {
    Hir,
    Mir,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs a kernel in rfx's HIR text format on .npy inputs.
    Run {
        /// The kernel file (`.rfx`).
        kernel: PathBuf,
        #[command(flatten)]
        inputs: Inputs,
        /// Write each output to DIR/<output>.npy (default: print them).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Evaluates an expression on .npy inputs (the output is `out` unless named).
    Eval {
        /// The expression, e.g. 'sin(x*2.0)+y'.
        expr: String,
        #[command(flatten)]
        inputs: Inputs,
        /// Output names (assigned in the expression), comma-separated.
        #[arg(long, value_delimiter = ',')]
        outputs: Vec<String>,
        /// Write each output to DIR/<output>.npy (default: print them).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Computes the value and gradient of a kernel or expression with one output.
    Grad {
        /// A kernel file or an expression.
        kernel: String,
        /// Inputs to differentiate with respect to, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        wrt: Vec<String>,
        #[command(flatten)]
        inputs: Inputs,
        /// Write value.npy and grad_<name>.npy to DIR (default: print them).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Prints a compiler stage of a kernel or expression.
    Dump {
        /// A kernel file or an expression.
        kernel: String,
        /// The stage to print.
        #[arg(long, value_enum)]
        stage: Stage,
        /// Input types for an expression: x=f32[3],y=f32[3] (or give --in files).
        #[arg(long)]
        in_shapes: Option<String>,
        /// Compile with fast math (fast-math rewrites; FMA contraction on the CPU and CUDA).
        #[arg(long)]
        fast_math: bool,
        #[command(flatten)]
        inputs: Inputs,
    },
    /// Draws the HIR or MIR graph of a kernel or expression as Graphviz DOT (or SVG).
    Dot {
        /// A kernel file or an expression.
        kernel: String,
        /// The stage to draw.
        #[arg(long, value_enum, default_value = "hir")]
        stage: DotStage,
        /// Write to FILE.dot, or FILE.svg (needs Graphviz's `dot`); default: print DOT.
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// Input types for an expression: x=f32[3],y=f32[3] (or give --in files).
        #[arg(long)]
        in_shapes: Option<String>,
        #[command(flatten)]
        inputs: Inputs,
    },
    /// Benchmarks kernels end to end.
    Bench(BenchArgs),
    /// Runs random kernels through every execution path and compares them (exit 1 on a
    /// mismatch).
    Fuzz(FuzzArgs),
}

/// `rfx fuzz` arguments.
#[derive(Debug, clap::Args)]
struct FuzzArgs {
    /// Kernels to try (default 10000 unless --minutes is given).
    #[arg(long)]
    kernels: Option<u64>,
    /// Stop after this many minutes.
    #[arg(long)]
    minutes: Option<f64>,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run the metal backend on every K-th kernel only (0: never).
    #[arg(long, default_value_t = 50)]
    metal_every: u64,
    /// Write each shrunk mismatching kernel to DIR/<path>_<seed>.rfx.
    #[arg(long)]
    save_dir: Option<PathBuf>,
}

fn fuzz(args: &FuzzArgs) -> Result<(), CliError> {
    let duration = match args.minutes {
        Some(m) if m.is_finite() && m > 0.0 => Some(std::time::Duration::from_secs_f64(m * 60.0)),
        Some(m) => return Err(CliError::User(format!("--minutes must be positive, got {m}"))),
        None => None,
    };
    let config = rfx_cli::fuzz::FuzzConfig {
        kernels: args.kernels,
        duration,
        first_seed: args.seed,
        metal_every: args.metal_every,
        save_dir: args.save_dir.clone(),
        ..rfx_cli::fuzz::FuzzConfig::default()
    };
    let report = rfx_cli::fuzz::run(&config).map_err(|e| CliError::Internal(format!("{e:#}")))?;
    print!("{report}");
    if report.mismatches.is_empty() {
        Ok(())
    } else {
        Err(CliError::User(format!(
            "{} mismatch(es) (see above)",
            report.mismatches.len()
        )))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::run(&args).map_err(|e| CliError::Internal(format!("{e:#}"))),
        Command::Fuzz(args) => fuzz(&args),
        other => run_command(other),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::User(message)) => {
            eprintln!("error: {}", one_line(&message));
            ExitCode::from(1)
        }
        Err(CliError::Internal(message)) => {
            eprintln!("error: internal: {}", one_line(&message));
            ExitCode::from(2)
        }
    }
}

/// The message on one line: a multi-line message (an IR printed with errors) keeps its first
/// line and its first `# error:` line.
fn one_line(message: &str) -> String {
    let mut lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("").to_string();
    match message.lines().map(str::trim).find(|l| l.starts_with("# error:")) {
        Some(detail) => format!("{first} {}", detail.trim_start_matches("# ")),
        None => first,
    }
}

fn run_command(command: Command) -> Result<(), CliError> {
    match command {
        Command::Run { kernel, inputs, out } => {
            let text = std::fs::read_to_string(&kernel)
                .map_err(|e| CliError::User(format!("cannot read {}: {e}", kernel.display())))?;
            let kernel_ir = rfx_ir::hir::parse(&text).map_err(|e| {
                CliError::User(format!(
                    "{}:{}:{}: {}",
                    kernel.display(),
                    e.line,
                    e.col,
                    e.message
                ))
            })?;
            let arrays = load_inputs(&inputs.inputs)?;
            let outputs = run_kernel(kernel_ir, &arrays, &inputs.backend)?;
            emit(&outputs, out.as_deref())
        }
        Command::Eval {
            expr,
            inputs,
            outputs,
            out,
        } => {
            let arrays = load_inputs(&inputs.inputs)?;
            let signature = signature_of(&arrays);
            let names: Vec<&str> = outputs.iter().map(String::as_str).collect();
            let kernel = compile_expr(&expr, &signature, &names)?;
            let results = run_kernel(kernel, &arrays, &inputs.backend)?;
            emit(&results, out.as_deref())
        }
        Command::Grad {
            kernel,
            wrt,
            inputs,
            out,
        } => {
            let arrays = load_inputs(&inputs.inputs)?;
            let signature = signature_of(&arrays);
            let kernel_ir = load_kernel(&kernel, Some(&signature))?;
            let gradient =
                rfx_autodiff::value_and_grad(&kernel_ir, &wrt).map_err(|e| CliError::User(e.to_string()))?;
            let mut results = run_kernel(gradient, &arrays, &inputs.backend)?;
            if let Some(first) = results.first_mut() {
                first.0 = "value".to_string();
            }
            emit(&results, out.as_deref())
        }
        Command::Dump {
            kernel,
            stage,
            in_shapes,
            fast_math,
            inputs,
        } => {
            let signature = signature_from(in_shapes.as_deref(), &inputs.inputs)?;
            let kernel_ir = load_kernel(&kernel, signature.as_ref())?;
            print!("{}", dump(&kernel_ir, stage, fast_math)?);
            Ok(())
        }
        Command::Dot {
            kernel,
            stage,
            output,
            in_shapes,
            inputs,
        } => {
            let signature = signature_from(in_shapes.as_deref(), &inputs.inputs)?;
            let kernel_ir = load_kernel(&kernel, signature.as_ref())?;
            let dot = match stage {
                DotStage::Hir => rfx_ir::dot::hir_to_dot(&kernel_ir),
                DotStage::Mir => rfx_ir::dot::mir_to_dot(&optimize(&kernel_ir)?.0),
            };
            write_dot(&dot, output.as_deref())
        }
        Command::Bench(args) => bench::run(&args).map_err(|e| CliError::Internal(format!("{e:#}"))),
        Command::Fuzz(args) => fuzz(&args),
    }
}

fn load_inputs(files: &[NamedFile]) -> Result<Vec<(String, Array)>, CliError> {
    let mut arrays: Vec<(String, Array)> = Vec::with_capacity(files.len());
    for file in files {
        if arrays.iter().any(|(name, _)| *name == file.name) {
            return Err(CliError::User(format!("input `{}` is given twice", file.name)));
        }
        arrays.push((file.name.clone(), npy::read(&file.path)?));
    }
    Ok(arrays)
}

fn signature_of(arrays: &[(String, Array)]) -> Signature {
    arrays.iter().fold(Signature::new(), |sig, (name, array)| {
        sig.input(
            name.clone(),
            rfx::TensorType::new(array.dtype(), array.shape().clone()),
        )
    })
}

fn signature_from(in_shapes: Option<&str>, files: &[NamedFile]) -> Result<Option<Signature>, CliError> {
    if let Some(text) = in_shapes {
        return text
            .parse()
            .map(Some)
            .map_err(|e: rfx::expr::SignatureError| CliError::User(e.to_string()));
    }
    if files.is_empty() {
        return Ok(None);
    }
    Ok(Some(signature_of(&load_inputs(files)?)))
}

fn compile_expr(expr: &str, signature: &Signature, outputs: &[&str]) -> Result<Kernel, CliError> {
    let result = if outputs.is_empty() {
        compile(expr, signature)
    } else {
        compile_with_outputs(expr, signature, outputs)
    };
    result.map_err(|e| CliError::User(format!("in expression: {}", e.one_line())))
}

/// A kernel file (an existing path or a name ending in `.rfx`) or an expression.
fn load_kernel(arg: &str, signature: Option<&Signature>) -> Result<Kernel, CliError> {
    let path = Path::new(arg);
    if path.is_file() || arg.ends_with(".rfx") {
        let text =
            std::fs::read_to_string(path).map_err(|e| CliError::User(format!("cannot read {arg}: {e}")))?;
        return rfx_ir::hir::parse(&text)
            .map_err(|e| CliError::User(format!("{arg}:{}:{}: {}", e.line, e.col, e.message)));
    }
    let signature = signature.ok_or_else(|| {
        CliError::User(
            "an expression needs input types: pass --in NAME=FILE.npy or --in-shapes x=f32[3]".into(),
        )
    })?;
    compile_expr(arg, signature, &[])
}

/// Runs `kernel` on the named arrays (matched to its inputs by name) with `backend`.
fn run_kernel(
    kernel: Kernel,
    arrays: &[(String, Array)],
    backend: &str,
) -> Result<Vec<(String, Array)>, CliError> {
    let declared: Vec<String> = kernel.inputs().map(|(_, name, _)| name.to_string()).collect();
    for (name, _) in arrays {
        if !declared.contains(name) {
            return Err(CliError::User(format!(
                "unknown input `{name}`: the kernel's inputs are {}",
                declared.join(", ")
            )));
        }
    }
    let mut args = Vec::with_capacity(declared.len());
    for name in &declared {
        let (_, array) = arrays
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| CliError::User(format!("missing input `{name}` (pass --in {name}=FILE.npy)")))?;
        args.push(Arg::from(array));
    }
    let output_names: Vec<String> = kernel.outputs().iter().map(|o| o.name.clone()).collect();
    let jit = Jit::with_config(KernelSource::new(kernel), CompileConfig::with_backend(backend));
    let results = jit.call(args)?;
    Ok(output_names.into_iter().zip(results).collect())
}

/// Writes every output to `dir/<name>.npy`, or prints them. Called only once every output
/// exists, so a failed command leaves nothing behind.
fn emit(outputs: &[(String, Array)], dir: Option<&Path>) -> Result<(), CliError> {
    let Some(dir) = dir else {
        for (name, array) in outputs {
            println!(
                "{name}: {}{} = {:?}",
                array.dtype(),
                array.shape(),
                array.to_f64_vec()
            );
        }
        return Ok(());
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::User(format!("cannot create {}: {e}", dir.display())))?;
    for (name, array) in outputs {
        npy::write(&dir.join(format!("{name}.npy")), array)?;
    }
    Ok(())
}

fn optimize(kernel: &Kernel) -> Result<(rfx_ir::mir::MirProgram, rfx_opt::OptReport), CliError> {
    optimize_with(kernel, false)
}

fn optimize_with(
    kernel: &Kernel,
    fast_math: bool,
) -> Result<(rfx_ir::mir::MirProgram, rfx_opt::OptReport), CliError> {
    let config = rfx_opt::OptConfig {
        fast_math,
        ..rfx_opt::OptConfig::default()
    };
    rfx_opt::optimize(kernel, &config).map_err(|e| match e {
        rfx_opt::OptError::InvalidKernel(_) => CliError::User(e.to_string()),
        other => CliError::Internal(other.to_string()),
    })
}

fn lower_with(kernel: &Kernel, fast_math: bool) -> Result<rfx_ir::lir::LirProgram, CliError> {
    let (mir, _) = optimize_with(kernel, fast_math)?;
    rfx_lower::lower(&mir, &rfx_lower::LowerConfig::default())
        .map(|(lir, _)| lir)
        .map_err(|e| CliError::Internal(e.to_string()))
}

fn not_built_in(backend: &str) -> CliError {
    CliError::User(format!(
        "the `{backend}` backend is not built into this rfx (rebuild rfx-cli with `--features {backend}`)"
    ))
}

fn dump(kernel: &Kernel, stage: Stage, fast_math: bool) -> Result<String, CliError> {
    let options = rfx_lower::CompileOptions {
        fast_math,
        ..rfx_lower::CompileOptions::default()
    };
    Ok(match stage {
        Stage::Hir => kernel.to_string(),
        Stage::Mir => {
            let (mir, report) = optimize_with(kernel, fast_math)?;
            format!("{mir}\n# {}\n", report.to_string().replace('\n', "\n# "))
        }
        Stage::Lir => lower_with(kernel, fast_math)?.to_string(),
        Stage::Clif | Stage::Asm => {
            let lir = lower_with(kernel, fast_math)?;
            let kernels =
                rfx_codegen_cpu::dump_with(&lir, &options).map_err(|e| CliError::Internal(e.to_string()))?;
            kernels
                .into_iter()
                .map(|(name, clif, asm)| {
                    let text = if stage == Stage::Clif { clif } else { asm };
                    format!("; kernel {name}\n{text}\n")
                })
                .collect()
        }
        Stage::Cuda | Stage::Ptx | Stage::Msl | Stage::Wgsl => gpu_dump(kernel, stage, &options)?,
    })
}

#[cfg(feature = "cuda")]
fn cuda_dump(
    lir: &rfx_ir::lir::LirProgram,
    stage: Stage,
    options: &rfx_lower::CompileOptions,
) -> Result<String, CliError> {
    let result = if stage == Stage::Ptx {
        rfx_codegen_cuda::ptx(lir, "sm_80", options)
    } else {
        rfx_codegen_cuda::cuda_source(lir, options)
    };
    result.map_err(|e| CliError::User(e.to_string()))
}

#[cfg(feature = "metal")]
fn metal_dump(lir: &rfx_ir::lir::LirProgram, stage: Stage) -> Result<String, CliError> {
    let result = if stage == Stage::Msl {
        rfx_codegen_metal::msl(lir)
    } else {
        rfx_codegen_metal::wgsl(lir)
    };
    result.map_err(|e| CliError::User(e.to_string()))
}

fn gpu_dump(kernel: &Kernel, stage: Stage, options: &rfx_lower::CompileOptions) -> Result<String, CliError> {
    let backend = if matches!(stage, Stage::Cuda | Stage::Ptx) {
        "cuda"
    } else {
        "metal"
    };
    #[cfg(feature = "cuda")]
    if backend == "cuda" {
        return cuda_dump(&lower_with(kernel, options.fast_math)?, stage, options);
    }
    #[cfg(feature = "metal")]
    if backend == "metal" {
        return metal_dump(&lower_with(kernel, options.fast_math)?, stage);
    }
    let _ = (kernel, options);
    Err(not_built_in(backend))
}

fn write_dot(dot: &str, output: Option<&Path>) -> Result<(), CliError> {
    let Some(path) = output else {
        print!("{dot}");
        return Ok(());
    };
    if path.extension().is_some_and(|e| e == "svg") {
        let child = std::process::Command::new("dot")
            .arg("-Tsvg")
            .arg("-o")
            .arg(path)
            .stdin(std::process::Stdio::piped())
            .spawn();
        let mut child = child.map_err(|_| {
            CliError::User(format!(
                "Graphviz `dot` is not installed, so {} cannot be drawn; write a .dot file instead (-o graph.dot)",
                path.display()
            ))
        })?;
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write as _;
            stdin
                .write_all(dot.as_bytes())
                .map_err(|e| CliError::Internal(format!("writing to `dot`: {e}")))?;
        }
        let status = child
            .wait()
            .map_err(|e| CliError::Internal(format!("waiting for `dot`: {e}")))?;
        if !status.success() {
            return Err(CliError::Internal(format!("`dot -Tsvg` failed with {status}")));
        }
        return Ok(());
    }
    std::fs::write(path, dot).map_err(|e| CliError::User(format!("cannot write {}: {e}", path.display())))
}
