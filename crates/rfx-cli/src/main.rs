//! The `rfx` command: run, evaluate, differentiate, dump, draw and export rfx kernels;
//! benchmark and fuzz them.
//!
//! Exit codes (see `docs/errors.md`):
//! - 0: success, and also a reader closing stdout early (`rfx dump … | head`): the command
//!   stops writing and ends quietly, as Unix filters do;
//! - 1: a user error: bad input, a limit of rfx (sizes, depths), a file that cannot be read or
//!   written, a full disk; one line on stderr, `error: …` (for an error in an expression or a
//!   kernel file, followed by the source line and a caret under the place);
//! - 2: a usage error found by the argument parser (an unknown flag or value, a missing
//!   argument), clap's convention;
//! - 70 (`EX_SOFTWARE`): an internal error, a bug in rfx: `error: internal: …`, or a panic.
//!
//! Every file a command writes goes through [`rfx_cli::output`]: all or nothing per run,
//! atomic per file, safe beside other runs, never through a link.

mod export;
mod npy;
mod print;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use rfx::expr::{Signature, compile, compile_with_outputs};
use rfx::{Arg, Array, CompileConfig, Jit, JitError, Kernel, KernelSource};
use rfx_cli::bench::{self, BenchArgs};
use rfx_cli::output::{self, OutputSet, StdoutError, WriteError};

/// The exit code of a user error.
const EXIT_USER: u8 = 1;
/// The exit code of a usage error (clap's).
const EXIT_USAGE: u8 = 2;
/// The exit code of an internal error (a bug in rfx): `EX_SOFTWARE` of `sysexits.h`.
const EXIT_INTERNAL: u8 = 70;

/// What went wrong, and whose fault it is.
#[derive(Debug)]
pub(crate) enum CliError {
    /// Bad input or a limit: exit code 1.
    User(String),
    /// Bad input at a place in a source text (an expression, a kernel file): exit code 1; the
    /// message, then the source line with a caret under the place.
    UserAt {
        /// The one-line message.
        message: String,
        /// The source line and the caret line ([`excerpt`]).
        excerpt: String,
    },
    /// A bug: exit code 70.
    Internal(String),
    /// Stdout's reader went away (`| head`): stop, quietly, exit code 0.
    ClosedStdout,
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

impl From<WriteError> for CliError {
    fn from(error: WriteError) -> CliError {
        CliError::User(error.to_string())
    }
}

impl From<StdoutError> for CliError {
    /// A closed pipe ends the command quietly; anything else (a full disk) is the user's to fix.
    fn from(error: StdoutError) -> CliError {
        if error.is_closed_pipe() {
            CliError::ClosedStdout
        } else {
            CliError::User(error.to_string())
        }
    }
}

impl CliError {
    /// An error of `rfx bench` or `rfx fuzz`: stdout failing, an argument they cannot honour
    /// ([`bench::BenchArgError`]), an unusable output file, or else a bug.
    fn from_anyhow(error: &anyhow::Error) -> CliError {
        if let Some(e) = error.downcast_ref::<StdoutError>() {
            if e.is_closed_pipe() {
                CliError::ClosedStdout
            } else {
                CliError::User(e.to_string())
            }
        } else if let Some(e) = error.downcast_ref::<bench::BenchArgError>() {
            CliError::User(e.to_string())
        } else if error.chain().any(|e| e.downcast_ref::<WriteError>().is_some()) {
            CliError::User(format!("{error:#}"))
        } else {
            CliError::Internal(format!("{error:#}"))
        }
    }
}

/// rfx: a JIT compiler for robotics control kernels.
#[derive(Debug, Parser)]
#[command(
    name = "rfx",
    about,
    after_help = "Exit codes: 0 success (also when stdout's reader closes early, as with `| head`), \
                  1 user error, 2 usage error, 70 internal error (a bug in rfx). Output files are \
                  written all or nothing; see docs/errors.md."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// One `--in NAME=FILE.npy` or `--in NAME=FILE.npz[:ARRAY]` argument.
#[derive(Clone, Debug)]
struct NamedFile {
    name: String,
    path: PathBuf,
    /// The array of a `.npz` archive given after `.npz:`.
    member: Option<String>,
}

fn parse_named_file(text: &str) -> Result<NamedFile, String> {
    let bad = || format!("expected NAME=FILE.npy or NAME=FILE.npz[:ARRAY], got `{text}`");
    let (name, path) = text.split_once('=').ok_or_else(bad)?;
    if name.is_empty() || path.is_empty() {
        return Err(bad());
    }
    // `f.npz:x` names the array `x` of the archive `f.npz`; any other `:` is part of the path.
    let (path, member) = match path.rfind(".npz:") {
        Some(at) => {
            let member = &path[at + ".npz:".len()..];
            if member.is_empty() {
                return Err(bad());
            }
            (&path[..at + ".npz".len()], Some(member.to_string()))
        }
        None => (path, None),
    };
    Ok(NamedFile {
        name: name.to_string(),
        path: PathBuf::from(path),
        member,
    })
}

#[derive(Clone, Debug, clap::Args)]
struct Inputs {
    /// An input: NAME=FILE.npy, or NAME=FILE.npz[:ARRAY] for an array of a NumPy archive (by
    /// default the one called NAME, or its only one); repeat for each input. Integer arrays of
    /// any NumPy dtype but uint64 become int32 (an error if a value does not fit); Fortran-order
    /// arrays are read in C order.
    #[arg(long = "in", value_name = "NAME=FILE", value_parser = parse_named_file)]
    inputs: Vec<NamedFile>,
    /// The backend (every backend rfx knows, and which this build includes, are listed at run
    /// time by `cli_command`).
    #[arg(long, default_value = "cpu")]
    backend: String,
}

/// The form of one `--in-shapes` entry, in its help and its error.
const IN_SHAPES_FORM: &str = "NAME=DTYPE[DIMS] (DTYPE: f32, f64, i32 or bool; DIMS: comma-separated \
                              sizes, none for a scalar), e.g. x=f32[3],m=f64[2,3],k=i32[]";

/// The help of `--in-shapes`.
const IN_SHAPES_HELP: &str = "Input types for an expression, comma-separated: NAME=DTYPE[DIMS] (DTYPE: \
                              f32, f64, i32 or bool; DIMS: comma-separated sizes, none for a \
                              scalar), e.g. x=f32[3],m=f64[2,3],k=i32[] (or give --in files, not \
                              both)";

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
        /// The expression, e.g. 'sin(x*2.0)+y' (after `--` if it starts with `-`:
        /// `rfx eval --in x=x.npy -- '-x'`).
        #[arg(required_unless_present = "list_functions")]
        expr: Option<String>,
        /// Print the functions an expression may call, with their arguments, and exit.
        #[arg(long, exclusive = true)]
        list_functions: bool,
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
        /// A kernel file (a name ending in `.rfx`) or else an expression.
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
    ///
    /// KERNEL is a kernel file when it ends in `.rfx` (its inputs' types are in the file, so
    /// --in-shapes and --in are refused with it), and an expression otherwise (whatever files
    /// exist: `x` is the expression `x`, never a file named `x`).
    Dump {
        /// A kernel file (a name ending in `.rfx`) or else an expression.
        kernel: String,
        /// The stage to print.
        #[arg(long, value_enum)]
        stage: Stage,
        #[arg(long, value_name = "NAME=DTYPE[DIMS],...", help = IN_SHAPES_HELP)]
        in_shapes: Option<String>,
        /// Compile with fast math (fast-math rewrites; FMA contraction on the CPU and CUDA).
        #[arg(long)]
        fast_math: bool,
        /// The instruction set `--stage clif` and `--stage asm` compile for: `host` (what this
        /// CPU has), `baseline` (the architecture's base set) or `avx2` (x86-64-v3).
        #[arg(long, default_value = "host", value_parser = rfx_cli::bench::parse_cpu_target)]
        cpu_target: rfx_lower::CpuTarget,
        #[command(flatten)]
        inputs: Inputs,
    },
    /// Exports a kernel or expression (or its value and gradients, or its value and Jacobian)
    /// as portable C99 (DIR/NAME.c and DIR/NAME.h) or a no_std Rust module (DIR/NAME.rs), see
    /// docs/export.md; written all or nothing.
    ///
    /// KERNEL is a kernel file when it ends in `.rfx`, and an expression otherwise (as for
    /// `rfx dump`).
    Export {
        /// A kernel file (a name ending in `.rfx`) or else an expression.
        kernel: String,
        /// The language.
        #[arg(long, value_enum)]
        lang: export::Lang,
        /// The exported function's name (an identifier of the language); also the files' names.
        #[arg(long)]
        name: String,
        #[arg(long, value_name = "NAME=DTYPE[DIMS],...", help = IN_SHAPES_HELP)]
        in_shapes: Option<String>,
        /// Export the value and the gradients with respect to these inputs (comma-separated;
        /// the kernel must have one output): outputs value, then one gradient per name.
        #[arg(long, value_delimiter = ',', value_name = "INPUT,...")]
        grad: Vec<String>,
        /// Export the value and the Jacobian with respect to this input: outputs the kernel's
        /// outputs, then one Jacobian of shape output ++ input per float output.
        #[arg(long, value_name = "INPUT", conflicts_with = "grad")]
        jacobian: Option<String>,
        /// Apply the optimizer's fast-math rewrites before exporting.
        #[arg(long)]
        fast_math: bool,
        /// The directory to write into (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// An input whose dtype and shape the exported function takes: NAME=FILE.npy (or
        /// NAME=FILE.npz[:ARRAY]); only its type is read from the file, as with --in-shapes.
        #[arg(long = "in", value_name = "NAME=FILE", value_parser = parse_named_file)]
        inputs: Vec<NamedFile>,
    },
    /// Draws the HIR or MIR graph of a kernel or expression as Graphviz DOT (or SVG).
    ///
    /// KERNEL is a kernel file when it ends in `.rfx`, and an expression otherwise (as for
    /// `rfx dump`).
    Dot {
        /// A kernel file (a name ending in `.rfx`) or else an expression.
        kernel: String,
        /// The stage to draw.
        #[arg(long, value_enum, default_value = "hir")]
        stage: DotStage,
        /// Write to FILE.dot, or FILE.svg (needs Graphviz's `dot`); default: print DOT.
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        #[arg(long, value_name = "NAME=DTYPE[DIMS],...", help = IN_SHAPES_HELP)]
        in_shapes: Option<String>,
        #[command(flatten)]
        inputs: Inputs,
    },
    /// Benchmarks kernels end to end.
    Bench(BenchArgs),
    /// Prints a completion script for SHELL (e.g. `rfx completions bash > /etc/bash_completion.d/rfx`,
    /// `rfx completions fish > ~/.config/fish/completions/rfx.fish`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Runs random kernels through every execution path and compares them (exit 1 on a
    /// mismatch).
    #[cfg(feature = "fuzz")]
    Fuzz(FuzzArgs),
}

/// `rfx fuzz` arguments.
#[cfg(feature = "fuzz")]
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
    /// Large kernels: 1,000 to 20,000 ops heavy in transcendentals, compared within a tolerance.
    #[arg(long)]
    large: bool,
    /// Compare only these backends (comma-separated or repeated: cpu, metal, cuda, c) with the
    /// interpreters; default: cpu, metal and cuda. `c` (the exported C, compiled by `$CC` or
    /// `cc` for every kernel) runs only when named.
    #[arg(long = "backend", value_name = "NAME", value_delimiter = ',')]
    backends: Vec<String>,
}

#[cfg(feature = "fuzz")]
fn fuzz(args: &FuzzArgs) -> Result<(), CliError> {
    let duration = match args.minutes {
        Some(m) if m > 0.0 => Some(
            std::time::Duration::try_from_secs_f64(m * 60.0)
                .map_err(|_| CliError::User(format!("--minutes {m} is too long")))?,
        ),
        Some(m) => return Err(CliError::User(format!("--minutes must be positive, got {m}"))),
        None => None,
    };
    if let Some(dir) = &args.save_dir {
        // Checked (and made) before any kernel runs, not when the first mismatch is saved.
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::User(format!("--save-dir {}: {e}", dir.display())))?;
        if !dir.is_dir() {
            return Err(CliError::User(format!(
                "--save-dir {}: not a directory",
                dir.display()
            )));
        }
    }
    let config = rfx_cli::fuzz::FuzzConfig {
        kernels: args.kernels,
        duration,
        first_seed: args.seed,
        metal_every: args.metal_every,
        save_dir: args.save_dir.clone(),
        large: args.large,
        ..rfx_cli::fuzz::FuzzConfig::default()
    };
    let backends = if args.backends.is_empty() {
        rfx_cli::fuzz::backends()
    } else {
        rfx_cli::fuzz::select(&args.backends).map_err(CliError::User)?
    };
    let report = rfx_cli::fuzz::run_with(&config, backends).map_err(|e| CliError::from_anyhow(&e))?;
    output::print(|out| write!(out, "{report}"))?;
    if report.mismatches.is_empty() {
        Ok(())
    } else {
        Err(CliError::User(format!(
            "{} mismatch(es) (see above)",
            report.mismatches.len()
        )))
    }
}

/// Turns off Mesa's Vulkan device-selection layer (`VK_LAYER_MESA_device_select`, an implicit
/// layer every Mesa install registers) for this process, unless the user asked for device
/// selection.
///
/// `wgpu` enables the Wayland and XCB surface extensions on every Linux instance, and with them
/// enabled the layer connects to the Wayland and X displays to find the default GPU. Without a
/// valid `XDG_RUNTIME_DIR` (a service, a container, a remote login over SSH) `libwayland` then prints
/// `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` twice on stderr, although
/// the metal backend runs. rfx draws nothing and picks its adapter itself, so it needs neither
/// the display connections nor the layer's ordering. `NODEVICE_SELECT=1` is the layer's
/// documented switch; a user who sets `NODEVICE_SELECT` or `MESA_VK_DEVICE_SELECT` keeps the
/// layer as they set it. The libraries never write the environment (a write races with any
/// other thread's `getenv`); the command does it here, before it starts a thread.
fn quiet_device_select() {
    #[cfg(all(unix, not(target_os = "macos"), not(target_os = "android")))]
    if std::env::var_os("NODEVICE_SELECT").is_none() && std::env::var_os("MESA_VK_DEVICE_SELECT").is_none() {
        // SAFETY: the first statement of `main`: the process has one thread (nothing in rfx or
        // its dependencies starts a thread before `main`), so no other reader of the
        // environment can run concurrently.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}

fn main() -> ExitCode {
    quiet_device_select();
    let cli = match cli_command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches))
    {
        Ok(cli) => cli,
        Err(error) => return parse_failure(&error),
    };
    // A panic is a bug like any internal error: the hook has printed it, the code says so.
    let result = std::panic::catch_unwind(|| match cli.command {
        Command::Bench(args) => bench::run(&args).map_err(|e| CliError::from_anyhow(&e)),
        #[cfg(feature = "fuzz")]
        Command::Fuzz(args) => fuzz(&args),
        other => run_command(other),
    })
    .unwrap_or_else(|_| Err(CliError::Internal("rfx panicked (see above)".into())));
    // A closed stderr cannot be reported anywhere: the exit code still is.
    let mut stderr = std::io::stderr();
    match result {
        Ok(()) | Err(CliError::ClosedStdout) => ExitCode::SUCCESS,
        Err(CliError::User(message)) => {
            let _ = writeln!(stderr, "error: {}", one_line(&message));
            ExitCode::from(EXIT_USER)
        }
        Err(CliError::UserAt { message, excerpt }) => {
            let _ = writeln!(stderr, "error: {}\n{excerpt}", one_line(&message));
            ExitCode::from(EXIT_USER)
        }
        Err(CliError::Internal(message)) => {
            let _ = writeln!(stderr, "error: internal: {}", one_line(&message));
            ExitCode::from(EXIT_INTERNAL)
        }
    }
}

/// The backends of `--backend`'s help and `--version`: every backend rfx knows, each one this
/// build leaves out marked so.
fn backends_line() -> String {
    let built = rfx_runtime::registry().names();
    rfx_lower::KNOWN_BACKENDS
        .iter()
        .map(|name| {
            if built.contains(name) {
                (*name).to_string()
            } else {
                format!("{name} (not in this build)")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `rfx --version`: the version, the git commit built from (`unknown` outside a git
/// checkout) and the backends.
fn version_line() -> String {
    format!(
        "{} (commit {}; backends: {})",
        env!("CARGO_PKG_VERSION"),
        env!("RFX_GIT_COMMIT"),
        backends_line()
    )
}

/// The argument parser: the derived one, with the version and each `--backend`'s help listing
/// the backends of this build (known only at run time).
fn cli_command() -> clap::Command {
    let backend_help = format!("The backend: {}", backends_line());
    let mut command = Cli::command().version(version_line());
    let with_backend: Vec<String> = command
        .get_subcommands()
        .filter(|sub| sub.get_arguments().any(|arg| arg.get_id() == "backend"))
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in with_backend {
        let help = backend_help.clone();
        command = command.mut_subcommand(name, |sub| sub.mut_arg("backend", |arg| arg.help(help)));
    }
    command
}

/// `--help` and `--version` (exit 0, or 1 if stdout cannot be written, quietly 0 if its reader
/// went away) and usage errors (exit 2 with clap's message, clap's convention).
fn parse_failure(error: &clap::Error) -> ExitCode {
    let printed = error.print();
    if error.use_stderr() {
        return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(EXIT_USAGE));
    }
    match printed {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: cannot write to stdout: {e}");
            ExitCode::from(EXIT_USER)
        }
    }
}

/// `rfx eval --list-functions`: the expression language's table of functions
/// ([`rfx::expr::functions`]), one a line: `name(args)`, aliases, what it computes.
fn function_list() -> String {
    let functions = rfx::expr::functions();
    let signature = |f: &rfx::expr::Function| format!("{}({})", f.name, f.args);
    let width = functions.iter().map(|f| signature(f).len()).max().unwrap_or(0);
    let mut text = String::from(
        "Functions of rfx expressions (operators: + - * / % ** @ < <= > >= == != & | ~; \
         constants: pi, true, false):\n",
    );
    for f in &functions {
        let aliases = if f.aliases.is_empty() {
            String::new()
        } else {
            format!(" (also {})", f.aliases.join(", "))
        };
        text.push_str(&format!("  {:width$}  {}{aliases}\n", signature(f), f.summary));
    }
    text
}

/// The longest source line an error prints whole; a longer one is cut to a window around the
/// error's column.
const EXCERPT_WIDTH: usize = 100;

/// `source_line` and under it a caret at 1-based character column `col`, both indented by two
/// spaces (a tab before the column stays a tab under it, so the caret lines up). A line longer
/// than [`EXCERPT_WIDTH`] characters is cut to a window around the column, `...` marking the
/// cuts.
fn excerpt(source_line: &str, col: usize) -> String {
    let chars: Vec<char> = source_line.chars().collect();
    let at = col.saturating_sub(1).min(chars.len());
    let (start, end) = if chars.len() <= EXCERPT_WIDTH {
        (0, chars.len())
    } else {
        let start = at.saturating_sub(EXCERPT_WIDTH * 2 / 3);
        (start, (start + EXCERPT_WIDTH).min(chars.len()))
    };
    let lead = if start > 0 { "..." } else { "" };
    let tail = if end < chars.len() { "..." } else { "" };
    let shown: String = chars[start..end].iter().collect();
    let pad: String = chars[start..at.max(start)]
        .iter()
        .map(|&c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    format!("  {lead}{shown}{tail}\n  {}{pad}^", " ".repeat(lead.len()))
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
            let text = npy::read_text(&kernel)?;
            let kernel_ir = parse_kernel_file(&kernel.display().to_string(), &text)?;
            let arrays = load_inputs(&inputs.inputs)?;
            let outputs = run_kernel(kernel_ir, &arrays, &inputs.backend)?;
            emit(&outputs, out.as_deref())
        }
        Command::Eval {
            expr,
            list_functions,
            inputs,
            outputs,
            out,
        } => {
            let Some(expr) = expr.filter(|_| !list_functions) else {
                return Ok(output::print_str(&function_list())?);
            };
            let arrays = load_inputs(&inputs.inputs)?;
            let signature = signature_of(&arrays);
            let names: Vec<&str> = outputs.iter().map(String::as_str).collect();
            let kernel = compile_expr(&expr, &signature, &names)?;
            check_all_used(&kernel, arrays.iter().map(|(n, _)| n.as_str()), "expression")?;
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
            // A kernel file's inputs are its signature (run_kernel names any unknown one); an
            // expression's are the --in files, each of which it must use.
            if !is_kernel_file(&kernel) {
                check_all_used(&kernel_ir, arrays.iter().map(|(n, _)| n.as_str()), "expression")?;
            }
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
            cpu_target,
            inputs,
        } => {
            let kernel_ir = load_kernel_typed(&kernel, in_shapes.as_deref(), &inputs.inputs)?;
            let options = rfx_lower::CompileOptions {
                fast_math,
                cpu_target,
                ..rfx_lower::CompileOptions::default()
            };
            let text = dump(&kernel_ir, stage, &options)?;
            Ok(output::print_str(&text)?)
        }
        Command::Export {
            kernel,
            lang,
            name,
            in_shapes,
            grad,
            jacobian,
            fast_math,
            out,
            inputs,
        } => {
            let kernel_ir = load_kernel_typed(&kernel, in_shapes.as_deref(), &inputs)?;
            let args = export::ExportArgs {
                lang,
                name: &name,
                grad: &grad,
                jacobian: jacobian.as_deref(),
                fast_math,
                dir: &out,
            };
            export::export(&kernel_ir, &args)
        }
        Command::Dot {
            kernel,
            stage,
            output,
            in_shapes,
            inputs,
        } => {
            let kernel_ir = load_kernel_typed(&kernel, in_shapes.as_deref(), &inputs.inputs)?;
            let dot = match stage {
                DotStage::Hir => rfx_ir::dot::hir_to_dot(&kernel_ir),
                DotStage::Mir => rfx_ir::dot::mir_to_dot(&optimize(&kernel_ir)?.0),
            };
            write_dot(&dot, output.as_deref())
        }
        Command::Bench(args) => bench::run(&args).map_err(|e| CliError::from_anyhow(&e)),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cli_command(), "rfx", &mut script);
            Ok(output::print(|out| out.write_all(&script))?)
        }
        #[cfg(feature = "fuzz")]
        Command::Fuzz(args) => fuzz(&args),
    }
}

fn load_inputs(files: &[NamedFile]) -> Result<Vec<(String, Array)>, CliError> {
    let mut arrays: Vec<(String, Array)> = Vec::with_capacity(files.len());
    for file in files {
        if arrays.iter().any(|(name, _)| *name == file.name) {
            return Err(CliError::User(format!("input `{}` is given twice", file.name)));
        }
        let array = npy::read(&file.path, file.member.as_deref(), &file.name)?;
        arrays.push((file.name.clone(), array));
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
        if let Some(file) = files.first() {
            return Err(CliError::User(format!(
                "give the input types with --in-shapes or with --in files, not both (--in {}=…)",
                file.name
            )));
        }
        return text.parse().map(Some).map_err(|e: rfx::expr::SignatureError| {
            CliError::User(format!(
                "--in-shapes: invalid entry `{}`: expected {IN_SHAPES_FORM}",
                e.entry
            ))
        });
    }
    if files.is_empty() {
        return Ok(None);
    }
    Ok(Some(signature_of(&load_inputs(files)?)))
}

/// An error naming the first of `names` that `kernel` does not use (no op reads it and no
/// output returns it): an input given but unused is almost always a misspelt name or a wrong
/// expression, and a kernel silently ignoring it would hide that.
fn check_all_used<'a>(
    kernel: &Kernel,
    names: impl IntoIterator<Item = &'a str>,
    what: &str,
) -> Result<(), CliError> {
    let used = |name: &str| {
        let Some((id, _, _)) = kernel.inputs().find(|(_, n, _)| *n == name) else {
            return false;
        };
        kernel.outputs().iter().any(|o| o.value == id) || kernel.nodes().iter().any(|n| n.args.contains(&id))
    };
    match names.into_iter().find(|name| !used(name)) {
        Some(name) => Err(CliError::User(format!(
            "input `{name}` is not used by the {what}"
        ))),
        None => Ok(()),
    }
}

fn compile_expr(expr: &str, signature: &Signature, outputs: &[&str]) -> Result<Kernel, CliError> {
    let result = if outputs.is_empty() {
        compile(expr, signature)
    } else {
        compile_with_outputs(expr, signature, outputs)
    };
    result.map_err(|e| CliError::UserAt {
        message: format!("in expression: {}", e.one_line()),
        excerpt: excerpt(&e.source_line, e.col),
    })
}

/// The kernel in `text`, read from the file `path`; a parse error names the file, line and
/// column and shows the line.
fn parse_kernel_file(path: &str, text: &str) -> Result<Kernel, CliError> {
    rfx_ir::hir::parse(text).map_err(|e| {
        let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or("");
        CliError::UserAt {
            message: format!("{path}:{}:{}: {}", e.line, e.col, e.message),
            excerpt: excerpt(line, e.col),
        }
    })
}

/// Whether the KERNEL argument names a kernel file: it ends in `.rfx`. Anything else is an
/// expression, whatever files exist, so that `rfx dump x` never reads a file named `x`.
fn is_kernel_file(arg: &str) -> bool {
    arg.ends_with(".rfx")
}

/// A kernel file (see [`is_kernel_file`]) or an expression typed by `signature`.
fn load_kernel(arg: &str, signature: Option<&Signature>) -> Result<Kernel, CliError> {
    if is_kernel_file(arg) {
        let text = npy::read_text(Path::new(arg))?;
        return parse_kernel_file(arg, &text);
    }
    let signature = signature.ok_or_else(|| {
        let hint = if Path::new(arg).is_file() {
            format!(" (`{arg}` is read as an expression; a kernel file's name ends in .rfx)")
        } else {
            String::new()
        };
        CliError::User(format!(
            "an expression needs input types: pass --in NAME=FILE.npy or --in-shapes NAME=DTYPE[DIMS], \
             e.g. --in-shapes x=f32[3]{hint}"
        ))
    })?;
    compile_expr(arg, signature, &[])
}

/// [`load_kernel`] for `dump` and `dot`: an expression's types come from `--in-shapes` or the
/// `--in` files; a kernel file declares its own, so either flag with one is an error rather than
/// ignored.
fn load_kernel_typed(arg: &str, in_shapes: Option<&str>, files: &[NamedFile]) -> Result<Kernel, CliError> {
    if is_kernel_file(arg) {
        if in_shapes.is_some() || !files.is_empty() {
            return Err(CliError::User(format!(
                "{arg} is a kernel file, which declares its inputs' types: --in-shapes and --in \
                 are for expressions"
            )));
        }
        return load_kernel(arg, None);
    }
    let signature = signature_from(in_shapes, files)?;
    let kernel = load_kernel(arg, signature.as_ref())?;
    check_all_used(&kernel, files.iter().map(|f| f.name.as_str()), "expression")?;
    Ok(kernel)
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
    check_outputs_fit(&kernel)?;
    let output_names: Vec<String> = kernel.outputs().iter().map(|o| o.name.clone()).collect();
    let jit = Jit::with_config(KernelSource::new(kernel), CompileConfig::with_backend(backend));
    let results = jit.call(args)?;
    Ok(output_names.into_iter().zip(results).collect())
}

/// An error naming the first output whose bytes the allocator refuses, found before anything
/// is compiled or allocated for the kernel (the sizes come from the user's input, and a failed
/// allocation aborts the process). The runtime's easy call checks again when it allocates.
fn check_outputs_fit(kernel: &Kernel) -> Result<(), CliError> {
    for output in kernel.outputs() {
        let Some(ty) = kernel.value_type(output.value) else {
            continue;
        };
        let bytes = ty.shape.numel().saturating_mul(ty.dtype.size_bytes());
        let mut probe: Vec<u8> = Vec::new();
        if probe.try_reserve_exact(bytes).is_err() {
            return Err(CliError::User(format!(
                "output `{}` ({ty}) needs {bytes} bytes, more than can be allocated",
                output.name
            )));
        }
    }
    Ok(())
}

/// Writes every output to `dir/<name>.npy`, or prints them. The files are written as one
/// [`OutputSet`]: if any of them cannot be written, every existing file in `dir` is left as it
/// was and no new one appears.
fn emit(outputs: &[(String, Array)], dir: Option<&Path>) -> Result<(), CliError> {
    let Some(dir) = dir else {
        return output::print(|out| {
            for (name, array) in outputs {
                write!(out, "{name}: {}{} = ", array.dtype(), array.shape())?;
                print::write_array(out, array)?;
                writeln!(out)?;
            }
            Ok(())
        })
        .map_err(CliError::from);
    };
    let mut set = OutputSet::new();
    set.create_dir(dir)?;
    for (name, array) in outputs {
        set.stage(&dir.join(format!("{name}.npy")), |out| npy::write(out, array))?;
    }
    set.commit()?;
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
    rfx_opt::optimize(kernel, &config).map_err(|e| classified(rfx_runtime::RuntimeError::Opt(e)))
}

/// A compiler error as the user's or a bug, as the runtime classifies it (a limit such as a
/// `pad` past `i32` indices is the user's).
fn classified(error: rfx_runtime::RuntimeError) -> CliError {
    if error.is_user_error() {
        CliError::User(error.to_string())
    } else {
        CliError::Internal(error.to_string())
    }
}

fn lower_with(kernel: &Kernel, fast_math: bool) -> Result<rfx_ir::lir::LirProgram, CliError> {
    let (mir, _) = optimize_with(kernel, fast_math)?;
    rfx_lower::lower(&mir, &rfx_lower::LowerConfig::default())
        .map(|(lir, _)| lir)
        .map_err(|e| classified(rfx_runtime::RuntimeError::Lower(e)))
}

fn not_built_in(backend: &str) -> CliError {
    CliError::User(format!(
        "the `{backend}` backend is not built into this rfx (rebuild rfx-cli with `--features {backend}`)"
    ))
}

fn dump(kernel: &Kernel, stage: Stage, options: &rfx_lower::CompileOptions) -> Result<String, CliError> {
    let fast_math = options.fast_math;
    Ok(match stage {
        Stage::Hir => kernel.to_string(),
        Stage::Mir => {
            let (mir, report) = optimize_with(kernel, fast_math)?;
            format!("{mir}\n# {}\n", report.to_string().replace('\n', "\n# "))
        }
        Stage::Lir => lower_with(kernel, fast_math)?.to_string(),
        Stage::Clif | Stage::Asm => {
            let lir = lower_with(kernel, fast_math)?;
            let kernels = rfx_codegen_cpu::dump_with(&lir, options)
                .map_err(|e| classified(rfx_runtime::RuntimeError::from(e)))?;
            kernels
                .into_iter()
                .map(|(name, clif, asm)| {
                    let text = if stage == Stage::Clif { clif } else { asm };
                    format!("; kernel {name}\n{text}\n")
                })
                .collect()
        }
        Stage::Cuda | Stage::Ptx | Stage::Msl | Stage::Wgsl => gpu_dump(kernel, stage, options)?,
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
        return Ok(output::print_str(dot)?);
    };
    let bytes = if path.extension().is_some_and(|e| e == "svg") {
        svg_of(dot, path)?
    } else {
        dot.as_bytes().to_vec()
    };
    output::write_file(path, |out| out.write_all(&bytes))?;
    Ok(())
}

/// Graphviz's drawing of `dot` as SVG (read from `dot -Tsvg`'s stdout, so that the file is
/// written like every other output).
fn svg_of(dot: &str, path: &Path) -> Result<Vec<u8>, CliError> {
    use std::process::{Command, Stdio};
    let child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = child.map_err(|_| {
        CliError::User(format!(
            "Graphviz `dot` is not installed, so {} cannot be drawn; write a .dot file instead (-o graph.dot)",
            path.display()
        ))
    })?;
    let writer = child.stdin.take().map(|mut stdin| {
        let text = dot.to_string();
        // A separate thread, so that a large graph cannot deadlock on full pipes.
        std::thread::spawn(move || stdin.write_all(text.as_bytes()))
    });
    let result = child
        .wait_with_output()
        .map_err(|e| CliError::Internal(format!("waiting for `dot`: {e}")))?;
    if let Some(Ok(Err(e))) = writer.map(std::thread::JoinHandle::join) {
        return Err(CliError::Internal(format!("writing to `dot`: {e}")));
    }
    if !result.status.success() {
        return Err(CliError::Internal(format!(
            "`dot -Tsvg` failed with {}: {}",
            result.status,
            String::from_utf8_lossy(&result.stderr).trim()
        )));
    }
    Ok(result.stdout)
}
