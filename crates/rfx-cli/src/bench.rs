//! `rfx bench`: rfxJIT's benchmark, made trustworthy.
//!
//! Every kernel is compiled once (compile time measured separately), then called on random
//! inputs with preallocated outputs, each call timed on its own: the table has the mean, the
//! median, the p99 and p99.9 (only from enough samples: [`TAIL_MIN_SAMPLES`]) and the slowest
//! call, with the sample count in the JSON. Short calls are sampled up to 10,000 times
//! ([`tail_samples`]). Two baselines run in the same process on the same inputs: the
//! reference interpreter (`interp`) and an unfused op-by-op path (every HIR op its own compiled
//! kernel with a materialised result, the way rfxJIT runs one NumPy call per op, from a pool
//! of buffers reused by liveness). Each baseline's calls alternate with the kernel's, one
//! sample each, so a "vs" ratio divides two medians of equally many calls taken in the same
//! seconds ([`Comparison`]). A plain Rust loop over the same arrays is timed beside each kernel
//! as the reader's reference.

use std::time::{Duration, Instant};

use anyhow::Context;
use rfx_ir::hir::{self, Builder, Kernel};
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, ArrayView, ArrayViewMut, DataMut, Scalar, Shape};
use rfx_lower::{Backend, CallArgs, Compiled, InterpBackend, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, OptReport, optimize};

mod unfused;

use unfused::Unfused;

/// Arguments of `rfx bench`.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// Elements per input (ignored when `--sizes` is given).
    #[arg(long, default_value_t = 65536)]
    pub size: usize,
    /// A comma-separated sweep of sizes, e.g. `1,16,1024,65536,1048576`.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Option<Vec<usize>>,
    /// Single calls timed per kernel, at least: calls short enough get up to 10,000 samples
    /// (within about a second) so that p99 and p99.9 rest on enough of them.
    #[arg(long, default_value_t = 200)]
    pub iterations: usize,
    /// The backend to measure: `cpu`, `interp`, `c`, `cuda` or `metal` (CUDA and metal where
    /// the binary was built with their feature and their device is present, `c` where a C
    /// compiler is; else a user error). Kernels the backend has no code for are skipped.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json_out: Option<std::path::PathBuf>,
    /// Skip the interpreter and op-by-op baselines (faster).
    #[arg(long)]
    pub no_baselines: bool,
    /// Only run kernels whose name contains this text.
    #[arg(long)]
    pub filter: Option<String>,
    /// Draw time per element against size (rfx and the interpreter baseline) to this SVG file;
    /// most useful with `--sizes`.
    #[arg(long)]
    pub plot: Option<std::path::PathBuf>,
    /// Compile with fast math (the optimiser's fast-math rules and the backend's: FMA
    /// contraction on the CPU and CUDA, CUDA's hardware approximations).
    #[arg(long)]
    pub fast_math: bool,
    /// Most threads one call may use (default: every core; `--threads 1` measures one thread,
    /// as the single-threaded peers run).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The instruction set the `cpu` backend compiles for: `host` (what this CPU has),
    /// `baseline` (the architecture's base set, e.g. SSE2: the same code on every machine) or
    /// `avx2` (x86-64-v3).
    #[arg(long, default_value = "host", value_parser = parse_cpu_target)]
    pub cpu_target: rfx_lower::CpuTarget,
    /// Bench-only fault injection for testing `cargo xtask perf-check`: `KERNEL=MICROSECONDS`
    /// busy-waits that long inside every timed call of that kernel.
    #[arg(long, hide = true)]
    pub inject_delay_us: Option<String>,
}

/// A benchmark argument that cannot be honoured (an unknown backend, a size whose arrays do not
/// fit in this machine's memory): the user's error, not a bug in rfx.
#[derive(Debug)]
pub struct BenchArgError(pub String);

impl std::fmt::Display for BenchArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchArgError {}

/// `println!` that returns the error (a closed pipe, a full disk) instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        crate::output::print(|out| writeln!(out, $($arg)*))
    };
}

/// The machine's physical memory in bytes (Linux: `MemTotal` of `/proc/meminfo`); `None`
/// where it cannot be read.
fn physical_memory() -> Option<u128> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The bytes of arrays the benchmark of `kernel` at `n` elements holds at once, roughly: its
/// inputs and outputs in every rotation set, the reference loops' `f32` arrays and, with the
/// baselines, the unfused path's buffer pool ([`unfused::plan`]) and the interpreter's copies of
/// the inputs and outputs (one [`Scalar`] per element) and its temporaries (about the pool).
fn footprint(kernel: &Kernel, n: usize, baselines: bool) -> u128 {
    let bytes = |ty: &rfx_ir::TensorType| ty.shape.numel() as u128 * ty.dtype.size_bytes() as u128;
    let (mut io, mut io_elements, mut count) = (0u128, 0u128, 0usize);
    for ty in kernel
        .inputs()
        .map(|(_, _, ty)| ty)
        .chain(kernel.outputs().iter().filter_map(|o| kernel.value_type(o.value)))
    {
        io += bytes(ty);
        io_elements += ty.shape.numel() as u128;
        count += 1;
    }
    let sets = rotation_sets(n, count) as u128;
    let baseline = if baselines {
        let pool = unfused::plan(kernel).bytes();
        2 * pool + io_elements * std::mem::size_of::<Scalar>() as u128
    } else {
        0
    };
    io * sets + baseline + 24 * n.max(4096) as u128
}

/// An error unless the benchmark of `kernel` at `n` elements fits in this machine's memory,
/// checked before any of its arrays is allocated (a failed allocation aborts the process).
fn check_fits(name: &str, kernel: &Kernel, n: usize, baselines: bool) -> Result<(), BenchArgError> {
    let needed = footprint(kernel, n, baselines);
    match physical_memory() {
        Some(memory) if needed > memory => Err(BenchArgError(format!(
            "size {n}: kernel `{name}` needs about {needed} bytes of arrays, more than this \
             machine's {memory} bytes of memory"
        ))),
        None if needed > isize::MAX as u128 => Err(BenchArgError(format!(
            "size {n}: kernel `{name}` needs about {needed} bytes of arrays, more than a process \
             can address"
        ))),
        _ => Ok(()),
    }
}

/// The fewest single-call samples a tail is reported from: ten samples beyond the quantile, so
/// that p99 is not the third-slowest of 200 calls nor p99.9 the slowest.
pub const TAIL_MIN_SAMPLES: [(f64, usize); 2] = [(0.99, 1_000), (0.999, 10_000)];

/// The most single-call samples [`tail_samples`] asks for, and the time it may spend on them.
const TAIL_SAMPLES: usize = 10_000;
const TAIL_BUDGET: Duration = Duration::from_secs(1);

/// How many single calls to time when the first `iterations` calls took `typical` each (their
/// median: one preempted call must not decide): `iterations`, raised to 10,000 (p99.9) or else
/// 1,000 (p99) when that many calls fit in about a second.
pub fn tail_samples(iterations: usize, typical: Duration) -> usize {
    let fits = |count: usize| typical.as_secs_f64() * count as f64 <= TAIL_BUDGET.as_secs_f64();
    let wanted = TAIL_MIN_SAMPLES
        .iter()
        .rev()
        .map(|&(_, count)| count)
        .find(|&count| fits(count))
        .unwrap_or(0);
    iterations.max(wanted.min(TAIL_SAMPLES))
}

/// Statistics of single-call times.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Timing {
    /// Single calls timed.
    pub samples: usize,
    /// Mean seconds per call.
    pub mean_s: f64,
    /// Median.
    pub p50_s: f64,
    /// 99th percentile; `None` from fewer than 1,000 samples.
    pub p99_s: Option<f64>,
    /// 99.9th percentile; `None` from fewer than 10,000 samples.
    pub p999_s: Option<f64>,
    /// Slowest call.
    pub max_s: f64,
}

impl Timing {
    /// The statistics of `samples`; a tail only where [`TAIL_MIN_SAMPLES`] allows it.
    pub fn from_samples(mut samples: Vec<Duration>) -> Timing {
        samples.sort_unstable();
        let secs = |d: Duration| d.as_secs_f64();
        let at = |q: f64| {
            let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
            samples.get(i).copied().map_or(0.0, secs)
        };
        let tail = |q: f64| {
            let (_, needed) = TAIL_MIN_SAMPLES.iter().find(|(tq, _)| *tq == q)?;
            (samples.len() >= *needed).then(|| at(q))
        };
        let mean = samples.iter().map(|&d| secs(d)).sum::<f64>() / samples.len().max(1) as f64;
        Timing {
            samples: samples.len(),
            mean_s: mean,
            p50_s: at(0.5),
            p99_s: tail(0.99),
            p999_s: tail(0.999),
            max_s: at(1.0),
        }
    }
}

/// A baseline measured against the kernel like with like: their single calls alternate (kernel,
/// baseline, kernel, …) on the same inputs, so both medians come from `samples` calls each,
/// taken in the same seconds.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Comparison {
    /// Calls of each side.
    pub samples: usize,
    /// The baseline's median single call, seconds.
    pub p50_s: f64,
    /// The kernel's median single call over its alternating calls, seconds.
    pub rfx_p50_s: f64,
}

impl Comparison {
    /// How many times slower the baseline is.
    pub fn ratio(&self) -> f64 {
        self.p50_s / self.rfx_p50_s.max(1e-12)
    }
}

/// One kernel's results at one size.
#[derive(Clone, Debug, serde::Serialize)]
pub struct KernelResult {
    /// The kernel.
    pub kernel: String,
    /// Elements per input.
    pub size: usize,
    /// The backend measured.
    pub backend: String,
    /// HIR → native code, seconds.
    pub compile_s: f64,
    /// Per-call timing.
    pub timing: Timing,
    /// Calls per second (from the mean).
    pub calls_per_s: f64,
    /// Elements per second (from the median).
    pub elements_per_s: f64,
    /// Bytes of inputs and outputs per call divided by the median time.
    pub gb_per_s: f64,
    /// The interpreter baseline against the kernel (when run).
    pub interp: Option<Comparison>,
    /// The unfused op-by-op baseline against the kernel (when run).
    pub unfused: Option<Comparison>,
    /// `interp.p50_s`, kept for readers of the first layout.
    pub interp_p50_s: Option<f64>,
    /// `unfused.p50_s`, kept for readers of the first layout.
    pub unfused_p50_s: Option<f64>,
    /// The batched median (as `batch_p50_s`) of a plain Rust loop `out[i] = x[i] + y[i]` over
    /// `f32` arrays of this size: the reference a reader can rebuild.
    pub rust_loop_p50_s: f64,
    /// Median over 31 batches of back-to-back calls of the mean time per call, each batch at
    /// least 50 µs long, after the kernel has run back to back as long as the peers' C driver
    /// runs its calibration loop (24–150 ms by size): a throughput figure that timer resolution
    /// does not blur, measured as the driver measures gcc's kernels.
    pub batch_p50_s: f64,
    /// The same batched median through the real-time path: [`CallArgs`] made once per input
    /// set, run with `run_args` (on the CPU: no checks per call).
    pub args_batch_p50_s: f64,
    /// The same batched median for a plain Rust loop `out[i] = x[i] + y[i]` over the same size
    /// (at least 4096 elements), its batches interleaved with 31 more batches of the kernel's
    /// (after those of `batch_p50_s`).
    pub reference_p50_s: f64,
    /// The median over the 31 rounds of (kernel batch mean / reference batch mean), each pair
    /// timed back to back: the figure `cargo xtask perf-check` compares. A shared machine's
    /// speed changes by up to 2× from one minute to the next; two batches 100 µs apart see the
    /// same machine, so the ratio cancels that drift where a reference timed once per size
    /// did not.
    pub normalised_p50: f64,
    /// HIR ops before optimisation.
    pub ops_before: usize,
    /// HIR ops after optimisation.
    pub ops_after: usize,
    /// Fused kernels.
    pub kernels: usize,
}

/// The JSON document `--json-out` writes.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchReport {
    /// Version of this layout (2: each row carries its sample counts, and a tail without
    /// enough samples is `null`).
    pub schema_version: u32,
    /// The machine: CPU model and logical cores.
    pub machine: Machine,
    /// `git rev-parse HEAD` when run inside the repository.
    pub git_revision: Option<String>,
    /// When the run started, UTC (`YYYY-MM-DD HH:MM`).
    pub date_utc: String,
    /// `--iterations`: the fewest single calls timed per kernel.
    pub iterations: usize,
    /// Whether the kernels were compiled with fast math (`--fast-math`).
    pub fast_math: bool,
    /// The most threads a call could use (`--threads`; `None`: every core).
    pub threads: Option<usize>,
    /// The CPU backend's target (`--cpu-target`: `host`, `baseline` or `avx2`).
    pub cpu_target: &'static str,
    /// Every kernel at every size.
    pub results: Vec<KernelResult>,
}

/// What the benchmark ran on.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Machine {
    /// CPU model name.
    pub cpu: String,
    /// Logical cores.
    pub cores: usize,
    /// Operating system.
    pub os: String,
}

fn machine() -> Machine {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    Machine {
        cpu,
        cores,
        os: std::env::consts::OS.to_string(),
    }
}

/// The UTC date and time of `t` as `YYYY-MM-DD HH:MM`.
fn utc(t: std::time::SystemTime) -> String {
    let secs = t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's `civil_from_days`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        rest / 3_600,
        rest % 3_600 / 60
    )
}

fn git_revision() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The benchmark kernels at `n` elements: rfxJIT's four (add, mul, sin, fused_chain), the
/// 10-op chain, PID with clip, a complementary filter, a quaternion product, 2-link arm forward
/// kinematics, `sum(x**2)` and its `value_and_grad`, a sum reduction, and the PID,
/// complementary filter, quaternion and UR5 forward-kinematics (with Jacobian) kernels of the
/// control library.
pub fn kernels(n: usize) -> anyhow::Result<Vec<(String, Kernel)>> {
    let ew =
        |name: &str, inputs: &[&str], body: &str, outputs: &[&str]| -> anyhow::Result<(String, Kernel)> {
            let mut text = format!("kernel {name} {{\n");
            for i in inputs {
                text += &format!("  %{i} = input {i} : f32[{n}]\n");
            }
            text += &body.replace("[N]", &format!("[{n}]"));
            for o in outputs {
                text += &format!("  output {o} = %{o}\n");
            }
            text += "}\n";
            let kernel = hir::parse(&text).with_context(|| format!("benchmark kernel {name}"))?;
            Ok((name.to_string(), kernel))
        };
    let mut list = vec![
        ew("add", &["x", "y"], "  %out = add %x, %y : f32[N]\n", &["out"])?,
        ew("mul", &["x", "y"], "  %out = mul %x, %y : f32[N]\n", &["out"])?,
        ew("sin", &["x"], "  %out = sin %x : f32[N]\n", &["out"])?,
        ew(
            "fused_chain",
            &["x", "y"],
            "  %c = const 2.0 : f32[]\n  %m = mul %x, %c : f32[N]\n  %s = sin %m : f32[N]\n  %out = add %s, %y : f32[N]\n",
            &["out"],
        )?,
        ew(
            "chain10",
            &["x", "y"],
            "  %a = const 1.5 : f32[]\n  %b = const 0.5 : f32[]\n  %p = mul %x, %a : f32[N]\n  %q = add %p, %y : f32[N]\n  %h = mul %q, %b : f32[N]\n  %sx = sin %x : f32[N]\n  %d = sub %h, %sx : f32[N]\n  %cy = cos %y : f32[N]\n  %e = mul %d, %cy : f32[N]\n  %xx = mul %x, %x : f32[N]\n  %nx = neg %xx : f32[N]\n  %ex = exp %nx : f32[N]\n  %out = add %e, %ex : f32[N]\n",
            &["out"],
        )?,
        ew(
            "pid_clip",
            &["e", "i", "d"],
            "  %kp = const 1.2 : f32[]\n  %ki = const 0.3 : f32[]\n  %kd = const 0.05 : f32[]\n  %lo = const -1.0 : f32[]\n  %hi = const 1.0 : f32[]\n  %a = mul %kp, %e : f32[N]\n  %b = mul %ki, %i : f32[N]\n  %c = mul %kd, %d : f32[N]\n  %s = add %a, %b : f32[N]\n  %t = add %s, %c : f32[N]\n  %u = clamp %t, %lo, %hi : f32[N]\n",
            &["u"],
        )?,
        ew(
            "complementary_filter",
            &["angle", "gyro", "ay", "az"],
            "  %dt = const 0.01 : f32[]\n  %alpha = const 0.98 : f32[]\n  %beta = const 0.02 : f32[]\n  %g = mul %gyro, %dt : f32[N]\n  %p = add %angle, %g : f32[N]\n  %acc = atan2 %ay, %az : f32[N]\n  %a = mul %alpha, %p : f32[N]\n  %b = mul %beta, %acc : f32[N]\n  %next = add %a, %b : f32[N]\n",
            &["next"],
        )?,
        ew(
            "quat_mul",
            &["aw", "ax", "ay", "az", "bw", "bx", "by", "bz"],
            "  %w1 = mul %aw, %bw : f32[N]\n  %w2 = mul %ax, %bx : f32[N]\n  %w3 = mul %ay, %by : f32[N]\n  %w4 = mul %az, %bz : f32[N]\n  %w5 = sub %w1, %w2 : f32[N]\n  %w6 = sub %w5, %w3 : f32[N]\n  %w = sub %w6, %w4 : f32[N]\n  %x1 = mul %aw, %bx : f32[N]\n  %x2 = mul %ax, %bw : f32[N]\n  %x3 = mul %ay, %bz : f32[N]\n  %x4 = mul %az, %by : f32[N]\n  %x5 = add %x1, %x2 : f32[N]\n  %x6 = add %x5, %x3 : f32[N]\n  %x = sub %x6, %x4 : f32[N]\n  %y1 = mul %aw, %by : f32[N]\n  %y2 = mul %ax, %bz : f32[N]\n  %y3 = mul %ay, %bw : f32[N]\n  %y4 = mul %az, %bx : f32[N]\n  %y5 = sub %y1, %y2 : f32[N]\n  %y6 = add %y5, %y3 : f32[N]\n  %y = add %y6, %y4 : f32[N]\n  %z1 = mul %aw, %bz : f32[N]\n  %z2 = mul %ax, %by : f32[N]\n  %z3 = mul %ay, %bx : f32[N]\n  %z4 = mul %az, %bw : f32[N]\n  %z5 = add %z1, %z2 : f32[N]\n  %z6 = sub %z5, %z3 : f32[N]\n  %z = add %z6, %z4 : f32[N]\n",
            &["w", "x", "y", "z"],
        )?,
        ew(
            "arm2_fk",
            &["q1", "q2"],
            "  %l1 = const 1.0 : f32[]\n  %l2 = const 0.7 : f32[]\n  %c1 = cos %q1 : f32[N]\n  %s1 = sin %q1 : f32[N]\n  %q12 = add %q1, %q2 : f32[N]\n  %c12 = cos %q12 : f32[N]\n  %s12 = sin %q12 : f32[N]\n  %a = mul %l1, %c1 : f32[N]\n  %b = mul %l2, %c12 : f32[N]\n  %px = add %a, %b : f32[N]\n  %c = mul %l1, %s1 : f32[N]\n  %d = mul %l2, %s12 : f32[N]\n  %py = add %c, %d : f32[N]\n",
            &["px", "py"],
        )?,
        ew("sum", &["x"], "  %out = sum %x axes [0] : f32[]\n", &["out"])?,
    ];
    // value_and_grad(sum(x**2)), through rfx-autodiff.
    let mut b = Builder::new("sum_squares");
    let x = b.input("x", rfx_ir::TensorType::new(rfx_ir::DType::F32, [n]))?;
    let two = b.scalar(Scalar::F32(2.0));
    let sq = b.binary(rfx_ir::BinaryOp::Pow, x, two)?;
    let s = b.reduce_all(rfx_ir::ReduceOp::Sum, sq)?;
    b.output("loss", s)?;
    let forward = b.finish()?;
    let vg = rfx_autodiff::value_and_grad(&forward, &["x"])?;
    list.push(("sum_sq".to_string(), forward));
    list.push(("value_and_grad_sum_sq".to_string(), vg));
    // Kernels of the control library (rfx-control), traced at f32[n] for every input.
    let pid = rfx_control::pid(rfx_control::PidConfig {
        kp: 1.2,
        ki: 0.3,
        kd: 0.05,
        dt: 0.001,
        integral_min: -0.5,
        integral_max: 0.5,
        command_min: -1.0,
        command_max: 1.0,
    });
    let control: Vec<(&str, rfx_control::ControlJit)> = vec![
        ("control_pid", pid),
        ("control_complementary", rfx_control::complementary()),
        ("control_quat_mul", rfx_control::quat_mul()),
        ("control_quat_rotate", rfx_control::quat_rotate()),
        ("control_fk_ur5", rfx_control::fk_dh6(rfx_control::UR5)),
        (
            "control_fk_ur5_jacobian",
            rfx_control::fk_dh6_jacobian(rfx_control::UR5),
        ),
    ];
    for (name, jit) in control {
        let types = vec![rfx_ir::TensorType::new(rfx_ir::DType::F32, [n]); jit.input_names().len()];
        let kernel = jit
            .trace(&types)
            .map_err(|e| anyhow::anyhow!("tracing {name}: {e}"))?;
        list.push((name.to_string(), kernel));
    }
    Ok(list)
}

/// A kernel compiled for timing, with its inputs and preallocated outputs.
struct Prepared {
    compiled: std::sync::Arc<dyn Compiled>,
    /// Input sets the timed calls cycle through ([`rotation_sets`]); the baselines run on the
    /// first.
    rotation_in: Vec<Vec<Array>>,
    /// The arrays the timed calls run on: each input set's copy and its outputs in a
    /// [`CallArgs`] of their own, made one after another. The checked call runs on their views
    /// and the pre-bound call on the arguments themselves, so both paths read and write the same
    /// rows, placed as the library places a real-time caller's: each on a cache line, a set's
    /// rows of a page or more a line apart within their pages and smaller ones packed (see
    /// `rfx_lower::CallArgs`), as the peers' C driver's rows lie (`posix_memalign(…, 64, …)`
    /// one after another, set after set).
    /// Where rows lie against each other modulo 4 KiB moves a 1,024-element loop streaming
    /// from the L3 cache by several percent (rows spread 1 KiB and more apart within their
    /// pages measured up to 8% slower than rows a line apart, for rfx and gcc alike), so
    /// rows placed alike are what makes the comparison fair.
    rotation: Vec<CallArgs>,
    /// The program's input shapes, then its output shapes: every view's ([`RotationViews`]).
    shapes: Vec<Shape>,
}

/// How many input/output sets the timed calls rotate through, as the peers script does
/// (`nsets_for` in `../shared/peers/peers.py`), so that caches and branch predictors flatter
/// nobody: one set up to 16 elements (latency); at least 2^18 elements per rotation below 2^20
/// elements; from 2^20 on a footprint of at least 256 MB (several times the L3), so the large
/// sizes measure DRAM bandwidth.
fn rotation_sets(n: usize, arrays: usize) -> usize {
    if n <= 16 {
        1
    } else if n < 1 << 20 {
        (1usize << 18).div_ceil(n).max(4)
    } else {
        (256e6 / (n as f64 * 4.0 * arrays.max(1) as f64)).ceil().max(2.0) as usize
    }
}

/// `--cpu-target`'s value.
pub fn parse_cpu_target(name: &str) -> Result<rfx_lower::CpuTarget, String> {
    rfx_lower::CpuTarget::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = rfx_lower::CpuTarget::ALL.iter().map(|t| t.name()).collect();
        format!("unknown CPU target `{name}` (one of: {})", names.join(", "))
    })
}

/// How a benchmark kernel is compiled beyond the optimiser's settings: the thread limit
/// (`--threads`) and the CPU target (`--cpu-target`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Exec {
    pub(crate) threads: Option<usize>,
    pub(crate) cpu_target: rfx_lower::CpuTarget,
}

/// `kernel` optimised, lowered and compiled on `backend`, with the time it took.
fn compile(
    kernel: &Kernel,
    backend: &dyn Backend,
    config: &OptConfig,
    exec: Exec,
) -> anyhow::Result<(std::sync::Arc<dyn Compiled>, OptReport, Duration)> {
    let start = Instant::now();
    let (mir, report) = optimize(kernel, config)?;
    let (lir, _) = lower(&mir, &LowerConfig::default())?;
    let options = rfx_lower::CompileOptions {
        fast_math: config.fast_math,
        max_threads: exec.threads,
        cpu_target: exec.cpu_target,
    };
    let compiled = backend.compile(&lir, &options)?;
    Ok((compiled, report, start.elapsed()))
}

fn prepare(
    kernel: &Kernel,
    backend: &dyn Backend,
    config: &OptConfig,
    exec: Exec,
) -> anyhow::Result<(Prepared, OptReport, Duration)> {
    let (compiled, report, compile_time) = compile(kernel, backend, config, exec)?;
    let n = kernel
        .inputs()
        .map(|(_, _, ty)| ty.shape.numel())
        .max()
        .unwrap_or(1);
    let sets = rotation_sets(n, kernel.inputs().count() + compiled.program().outputs().count());
    let rotation_in: Vec<Vec<Array>> = (0..sets as u64)
        .map(|s| random_inputs(&mut TestRng::new(7 + s), kernel, 0.0))
        .collect();
    let mut rotation = Vec::with_capacity(sets);
    for inputs in &rotation_in {
        let mut args = CallArgs::new(compiled.as_ref());
        for (k, input) in inputs.iter().enumerate() {
            args.set_input(k, input.view())?;
        }
        rotation.push(args);
    }
    let program = compiled.program();
    let shapes = program
        .inputs()
        .chain(program.outputs())
        .map(|(_, _, ty)| ty.shape.clone())
        .collect();
    Ok((
        Prepared {
            compiled,
            rotation_in,
            rotation,
            shapes,
        },
        report,
        compile_time,
    ))
}

/// How long a timed path first calls its kernel back to back before it measures: as long as the
/// peers' C driver's calibration loop runs before it samples (30% of its time budget for the
/// size, at least 2 ms: 24 ms up to 1,024 elements, 36 ms up to 65,536, 75 ms up to 1M and
/// 150 ms beyond), so that both harnesses time a kernel that has been running for as long.
/// Without it the value and gradient of `sum(x²)` at 65,536 points took 10.8 µs a call against
/// 8.9–9.2 µs after it (the same kernel, three alternating runs, 2026-11-29).
fn warm_up_time(n: usize) -> Duration {
    let budget_ms: u64 = match n {
        0..=1024 => 80,
        1025..=65_536 => 120,
        65_537..=1_048_576 => 250,
        _ => 500,
    };
    Duration::from_millis((budget_ms * 3 / 10).max(2))
}

/// Calls `call` back to back for `time` (at least three calls).
fn warm_up(call: &mut impl FnMut() -> anyhow::Result<()>, time: Duration) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut calls = 0u32;
    while calls < 3 || start.elapsed() < time {
        call()?;
        calls = calls.saturating_add(1);
    }
    Ok(())
}

/// The median over 31 batches of the mean time of `call`, each batch long enough (≥ 50 µs) that
/// the clock's resolution does not matter, after `warm` of back-to-back calls ([`warm_up_time`]).
fn batched_p50(mut call: impl FnMut() -> anyhow::Result<()>, warm: Duration) -> anyhow::Result<f64> {
    warm_up(&mut call, warm)?;
    let start = Instant::now();
    call()?;
    let batch = batch_len(start.elapsed());
    let mut means = Vec::with_capacity(31);
    for _ in 0..31 {
        let start = Instant::now();
        for _ in 0..batch {
            call()?;
        }
        means.push(start.elapsed().as_secs_f64() / batch as f64);
    }
    Ok(median_s(means))
}

/// The median of batch means in seconds, kept as `f64`: a `Duration` divided by the batch
/// length would round a few-nanosecond call down to whole nanoseconds.
fn median_s(mut secs: Vec<f64>) -> f64 {
    secs.sort_by(f64::total_cmp);
    secs.get(secs.len() / 2).copied().unwrap_or(0.0)
}

/// Calls per batch for a call that took `once`: enough for 50 µs, at most 2^20.
fn batch_len(once: Duration) -> usize {
    ((50e-6 / once.as_secs_f64().max(1e-9)).ceil() as usize).clamp(1, 1 << 20)
}

/// Batched medians of a kernel paired with a reference: 31 rounds, each a batch of `call`
/// (≥ 50 µs) and then a batch of `reference` (≥ 50 µs), so both see the machine in the same
/// state. Before each timed batch, up to `warm` calls (at most a batch's worth) run untimed:
/// one rotation of the input sets, so that the kernel's data is back in the caches the
/// reference's arrays went through, as it is for a peer timed in one continuous loop (without
/// them, a kernel whose rotation just fits the L2 cache, such as the value and gradient of
/// `sum(x²)` at 65,536 points, timed its refill after the reference's 768 KiB). Returns the
/// kernel's median batch mean, the reference's, and the median of the per-round ratios.
fn paired_p50(
    mut call: impl FnMut() -> anyhow::Result<()>,
    reference: &mut Reference,
    warm: usize,
) -> anyhow::Result<(f64, f64, f64)> {
    let start = Instant::now();
    call()?;
    let batch = batch_len(start.elapsed());
    let start = Instant::now();
    reference.run();
    let ref_batch = batch_len(start.elapsed());
    let (mut means, mut refs, mut ratios) = (
        Vec::with_capacity(31),
        Vec::with_capacity(31),
        Vec::with_capacity(31),
    );
    for _ in 0..31 {
        for _ in 0..warm.min(batch) {
            call()?;
        }
        let start = Instant::now();
        for _ in 0..batch {
            call()?;
        }
        let mean = start.elapsed().as_secs_f64() / batch as f64;
        let start = Instant::now();
        for _ in 0..ref_batch {
            reference.run();
        }
        let ref_mean = start.elapsed().as_secs_f64() / ref_batch as f64;
        ratios.push(mean / ref_mean.max(1e-12));
        means.push(mean);
        refs.push(ref_mean);
    }
    Ok((median_s(means), median_s(refs), median_s(ratios)))
}

/// perf-check's yardstick: a plain Rust `out[i] = x[i] + y[i]` loop over `n` f32 elements.
struct Reference {
    x: Vec<f32>,
    y: Vec<f32>,
    out: Vec<f32>,
}

impl Reference {
    fn new(n: usize) -> Self {
        Self {
            x: (0..n).map(|i| i as f32 * 0.5).collect(),
            y: (0..n).map(|i| 1.0 - i as f32).collect(),
            out: vec![0.0; n],
        }
    }

    fn run(&mut self) {
        for ((o, a), b) in self
            .out
            .iter_mut()
            .zip(std::hint::black_box(&self.x))
            .zip(&self.y)
        {
            *o = a + b;
        }
        std::hint::black_box(&mut self.out);
    }
}

/// Views of every rotation set's arrays, made once so that timed calls build nothing: the
/// sets' input views in one list and their output views in another, set after set, each view
/// of the program's shapes ([`Prepared::shapes`]). A checked call so reads its views from
/// memory the calls before it used, as a caller's own views would be, rather than from
/// allocations of its set that the rotation has long evicted (three dependent cache misses
/// before the kernel starts, when each set's views borrowed its `CallArgs`' shapes).
struct RotationViews<'a> {
    inputs: Vec<ArrayView<'a>>,
    outputs: Vec<ArrayViewMut<'a>>,
    sets: usize,
}

impl<'a> RotationViews<'a> {
    fn new(rotation: &'a mut [CallArgs], shapes: &'a [Shape]) -> anyhow::Result<RotationViews<'a>> {
        let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
        let sets = rotation.len();
        for args in rotation {
            let (ins, outs) = args.views();
            let n_in = ins.len();
            for (view, shape) in ins.into_iter().zip(shapes) {
                inputs.push(ArrayView::from_data(shape, view.data())?);
            }
            for (mut view, shape) in outs.into_iter().zip(shapes.iter().skip(n_in)) {
                // The elements move to a view of the shared shape; an empty slice stays behind.
                let data = std::mem::replace(view.data_mut(), DataMut::Bool(&mut []));
                outputs.push(ArrayViewMut::from_data(shape, data)?);
            }
        }
        Ok(RotationViews {
            inputs,
            outputs,
            sets,
        })
    }

    /// How many sets there are (at least one, so that a call's index can wrap).
    fn sets(&self) -> usize {
        self.sets.max(1)
    }

    /// Set `k`'s input and output views.
    fn set(&mut self, k: usize) -> (&[ArrayView<'a>], &mut [ArrayViewMut<'a>]) {
        let n_in = self.inputs.len() / self.sets();
        let n_out = self.outputs.len() / self.sets();
        (
            &self.inputs[k * n_in..(k + 1) * n_in],
            &mut self.outputs[k * n_out..(k + 1) * n_out],
        )
    }
}

/// The batched median of `p`'s calls (plus the injected delay) as the peers' C driver times a
/// kernel: back-to-back calls for `warm` ([`warm_up_time`]), then 31 batches of back-to-back
/// calls ([`batched_p50`]); then the reference's median and the median ratio of rounds paired
/// with `reference` (see [`paired_p50`]). The median is not the paired rounds' own: the
/// reference's pass between two of the kernel's batches evicts the kernel's rotation from the
/// caches, which a caller running its kernel in a loop (and the driver) does not see (the value
/// and gradient of `sum(x²)` at 65,536 points took 9.0–9.1 µs a call paired against 8.3–8.4 µs
/// back to back, three alternating runs, 2026-11-29).
fn batch_p50(
    p: &mut Prepared,
    delay: Duration,
    reference: &mut Reference,
    warm: Duration,
) -> anyhow::Result<(f64, f64, f64)> {
    let mut scratch = Scratch::new();
    let mut views = RotationViews::new(&mut p.rotation, &p.shapes)?;
    let compiled = &p.compiled;
    let sets = views.sets();
    let mut next = 0usize;
    let mut call = || {
        // A wrapping index rather than `%`: a 64-bit division would cost more than a small call.
        let k = next;
        next = if next + 1 == sets { 0 } else { next + 1 };
        let (inputs, outputs) = views.set(k);
        compiled.run(inputs, outputs, &mut scratch)?;
        if !delay.is_zero() {
            busy_wait(delay);
        }
        Ok(())
    };
    let batch = batched_p50(&mut call, warm)?;
    let (_, reference_p50, normalised) = paired_p50(&mut call, reference, sets)?;
    Ok((batch, reference_p50, normalised))
}

/// The batched median of `p`'s calls through the real-time path: `run_args` on each rotation
/// set's [`CallArgs`] (made and checked once). One untimed rotation of calls comes first, as
/// [`paired_p50`] warms the checked call's batches: other arrays went through the caches
/// just before, and a rotation that does not fit the L2 cache timed its refill without it (the
/// PID clip at 1,024 elements measured 590–930 ns from one process to the next, against 585
/// once warm).
fn args_batch_p50(p: &mut Prepared, delay: Duration, warm: Duration) -> anyhow::Result<f64> {
    let mut scratch = Scratch::new();
    let compiled = &p.compiled;
    let sets = &mut p.rotation;
    anyhow::ensure!(!sets.is_empty(), "a benchmark rotates through at least one set");
    for args in sets.iter_mut() {
        compiled.run_args(args, &mut scratch)?;
    }
    let mut next = 0usize;
    batched_p50(
        || {
            let k = next;
            next = if next + 1 == sets.len() { 0 } else { next + 1 };
            compiled.run_args(&mut sets[k], &mut scratch)?;
            if !delay.is_zero() {
                busy_wait(delay);
            }
            Ok(())
        },
        warm,
    )
}

fn busy_wait(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Single calls of `p` (after one warm-up call), each timed on its own: `iterations` of them,
/// then more up to [`tail_samples`].
fn time_calls(p: &mut Prepared, iterations: usize, delay: Duration) -> anyhow::Result<Vec<Duration>> {
    let mut scratch = Scratch::new();
    let mut views = RotationViews::new(&mut p.rotation, &p.shapes)?;
    let compiled = &p.compiled;
    let sets = views.sets();
    let mut timed = |i: usize| -> anyhow::Result<Duration> {
        let k = i % sets;
        let start = Instant::now();
        let (inputs, outputs) = views.set(k);
        compiled.run(inputs, outputs, &mut scratch)?;
        if !delay.is_zero() {
            busy_wait(delay);
        }
        Ok(start.elapsed())
    };
    timed(0)?;
    // `--iterations` is the user's: a huge count must not become a huge allocation up front.
    let mut samples = Vec::with_capacity(iterations.min(1 << 16));
    for i in 1..=iterations {
        samples.push(timed(i)?);
    }
    let mut first = samples.clone();
    first.sort_unstable();
    let typical = first.get(first.len() / 2).copied().unwrap_or_default();
    let total = tail_samples(iterations, typical);
    for i in iterations + 1..=total {
        samples.push(timed(i)?);
    }
    Ok(samples)
}

/// Which side of a [`Comparison`] a call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Rfx,
    Baseline,
}

/// The time one comparison may take, and its fewest and most pairs of calls.
struct PairBudget {
    time: Duration,
    min: usize,
    max: usize,
}

/// The interpreter is slow: a few calls at the largest sizes.
const INTERP_PAIRS: PairBudget = PairBudget {
    time: Duration::from_millis(500),
    min: 3,
    max: 201,
};

const UNFUSED_PAIRS: PairBudget = PairBudget {
    time: Duration::from_millis(500),
    min: 5,
    max: 1_001,
};

/// Single calls of the kernel and of a baseline, alternating (after one warm-up call of each):
/// as many pairs as fit in the budget's time, within its bounds.
fn alternate(
    mut call: impl FnMut(Side) -> anyhow::Result<()>,
    budget: &PairBudget,
) -> anyhow::Result<Comparison> {
    let mut timed = |side: Side| -> anyhow::Result<Duration> {
        let start = Instant::now();
        call(side)?;
        Ok(start.elapsed())
    };
    let pair = timed(Side::Rfx)? + timed(Side::Baseline)?;
    let fit = budget.time.as_secs_f64() / pair.as_secs_f64().max(1e-9);
    let pairs = (fit as usize).clamp(budget.min, budget.max);
    let (mut rfx, mut base) = (Vec::with_capacity(pairs), Vec::with_capacity(pairs));
    for _ in 0..pairs {
        rfx.push(timed(Side::Rfx)?);
        base.push(timed(Side::Baseline)?);
    }
    Ok(Comparison {
        samples: pairs,
        p50_s: Timing::from_samples(base).p50_s,
        rfx_p50_s: Timing::from_samples(rfx).p50_s,
    })
}

/// The kernel against the reference interpreter, on the first input set.
fn interp_comparison(p: &mut Prepared, kernel: &Kernel, delay: Duration) -> anyhow::Result<Comparison> {
    let (interp, _, _) = compile(kernel, &InterpBackend, &OptConfig::default(), Exec::default())?;
    against_baseline(p, delay, &INTERP_PAIRS, |_, inputs, outputs, scratch| {
        Ok(interp.run(inputs, outputs, scratch)?)
    })
}

/// The kernel against its unfused op-by-op path on the same backend, with the same options,
/// on the first input set.
fn unfused_comparison(
    p: &mut Prepared,
    kernel: &Kernel,
    backend: &dyn Backend,
    options: (&OptConfig, Exec, Duration),
) -> anyhow::Result<Comparison> {
    let (config, exec, delay) = options;
    let mut unfused = Unfused::new(kernel, backend, config.fast_math, exec)?;
    against_baseline(p, delay, &UNFUSED_PAIRS, |arrays, _, _, scratch| {
        unfused.run(arrays, scratch)
    })
}

/// The kernel (with the injected `delay` after each call) alternating with `baseline`, both
/// on the first input set; `baseline` gets that set as arrays and as views, the output views
/// and a scratch buffer.
fn against_baseline(
    p: &mut Prepared,
    delay: Duration,
    budget: &PairBudget,
    mut baseline: impl FnMut(
        &[Array],
        &[ArrayView<'_>],
        &mut [ArrayViewMut<'_>],
        &mut Scratch,
    ) -> anyhow::Result<()>,
) -> anyhow::Result<Comparison> {
    let mut views = RotationViews::new(&mut p.rotation[..1], &p.shapes)?;
    let arrays = &p.rotation_in[0];
    let compiled = &p.compiled;
    let mut scratch = Scratch::new();
    alternate(
        |side| match side {
            Side::Rfx => {
                let (inputs, outputs) = views.set(0);
                compiled.run(inputs, outputs, &mut scratch)?;
                if !delay.is_zero() {
                    busy_wait(delay);
                }
                Ok(())
            }
            Side::Baseline => {
                let (inputs, outputs) = views.set(0);
                baseline(arrays, inputs, outputs, &mut scratch)
            }
        },
        budget,
    )
}

/// Bytes of inputs and outputs one call reads and writes.
fn bytes_per_call(p: &Prepared) -> usize {
    let program = p.compiled.program();
    program
        .inputs()
        .chain(program.outputs())
        .map(|(_, _, ty)| ty.shape.numel() * ty.dtype.size_bytes())
        .sum()
}

fn backend_named(name: &str) -> anyhow::Result<std::sync::Arc<dyn Backend>> {
    let backend = rfx_runtime::registry()
        .get(name)
        .map_err(|e| BenchArgError(e.to_string()))?;
    backend
        .check_available()
        .map_err(|e| BenchArgError(e.to_string()))?;
    Ok(backend)
}

/// What every kernel of one run shares.
struct Run<'a> {
    args: &'a BenchArgs,
    backend: &'a dyn Backend,
    iterations: usize,
    /// `--inject-delay-us`: a kernel and the delay added to each of its timed calls.
    injected: Option<(String, Duration)>,
}

/// The plain Rust loops of one size: perf-check's yardstick (at least 4096 elements) and, below
/// 4096, one of exactly the size for the table.
struct Loops {
    yardstick: Reference,
    exact: Option<Reference>,
}

impl Loops {
    fn new(n: usize) -> Loops {
        // perf-check's yardstick has at least 4096 elements, so that it takes about a
        // microsecond and the clock's granularity does not quantise it (at n = 1 one step of
        // the clock is a large fraction of the loop, and of every time normalised by it).
        Loops {
            yardstick: Reference::new(n.max(4096)),
            exact: (n < 4096).then(|| Reference::new(n)),
        }
    }
}

/// Measures `kernel` (named `name`) at `n` elements.
fn bench_kernel(
    run: &Run<'_>,
    name: &str,
    kernel: &Kernel,
    n: usize,
    loops: &mut Loops,
) -> anyhow::Result<KernelResult> {
    let args = run.args;
    let config = OptConfig {
        fast_math: args.fast_math,
        ..OptConfig::default()
    };
    let exec = Exec {
        threads: args.threads,
        cpu_target: args.cpu_target,
    };
    let (mut prepared, report, compile) = prepare(kernel, run.backend, &config, exec)?;
    let delay = run
        .injected
        .as_ref()
        .filter(|(k, _)| *k == name)
        .map_or(Duration::ZERO, |(_, d)| *d);
    let timing = Timing::from_samples(time_calls(&mut prepared, run.iterations, delay)?);
    let warm = warm_up_time(n);
    let (batch, reference_p50, normalised) = batch_p50(&mut prepared, delay, &mut loops.yardstick, warm)?;
    let args_batch = args_batch_p50(&mut prepared, delay, warm)?;
    let rust_loop = match &mut loops.exact {
        Some(exact) => batched_p50(
            || {
                exact.run();
                Ok(())
            },
            warm,
        )?,
        None => reference_p50,
    };
    let bytes = bytes_per_call(&prepared);
    let (interp, unfused) = if args.no_baselines {
        (None, None)
    } else {
        let interp = interp_comparison(&mut prepared, kernel, delay)?;
        let unfused = unfused_comparison(&mut prepared, kernel, run.backend, (&config, exec, delay))?;
        (Some(interp), Some(unfused))
    };
    Ok(KernelResult {
        kernel: name.to_string(),
        size: n,
        backend: args.backend.clone(),
        compile_s: compile.as_secs_f64(),
        calls_per_s: 1.0 / timing.mean_s.max(1e-12),
        elements_per_s: n as f64 / timing.p50_s.max(1e-12),
        gb_per_s: bytes as f64 / timing.p50_s.max(1e-12) / 1e9,
        timing,
        interp_p50_s: interp.as_ref().map(|c| c.p50_s),
        unfused_p50_s: unfused.as_ref().map(|c| c.p50_s),
        interp,
        unfused,
        rust_loop_p50_s: rust_loop,
        batch_p50_s: batch,
        args_batch_p50_s: args_batch,
        reference_p50_s: reference_p50,
        normalised_p50: normalised,
        ops_before: report.ops_before,
        ops_after: report.ops_after,
        kernels: report.kernels,
    })
}

/// `--inject-delay-us KERNEL=MICROSECONDS`, parsed.
fn injected_delay(spec: Option<&str>) -> anyhow::Result<Option<(String, Duration)>> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let (name, us) = spec
        .split_once('=')
        .context("--inject-delay-us takes KERNEL=MICROSECONDS")?;
    Ok(Some((
        name.to_string(),
        Duration::from_micros(us.parse().context("microseconds")?),
    )))
}

/// What the rfxJIT-format lines are, printed before them.
const RFXJIT_LINES: &str = "Lines `[backend] kernel: X.XXXXms avg, N ops/s` keep rfxJIT's \
    format (its users parse them): the mean of the kernel's single timed calls in milliseconds, \
    and calls per second (rfxJIT's \"ops/s\"). The table after them is the one to read.";

/// Whether `error` is a backend's refusal of a kernel it has no code for.
fn is_unsupported(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref(),
            Some(rfx_lower::BackendError::Unsupported { .. })
        )
    })
}

/// Runs the benchmark and prints rfxJIT-format lines and the table; returns the report.
pub fn run_bench(args: &BenchArgs) -> anyhow::Result<BenchReport> {
    let backend = backend_named(&args.backend)?;
    let date_utc = utc(std::time::SystemTime::now());
    if args.backend == "metal" {
        outln!(
            "note: the metal backend runs through wgpu; on Linux CI that is lavapipe, a software \
             Vulkan device on the CPU, so its timings say little about a real GPU"
        )?;
    }
    let sizes = args.sizes.clone().unwrap_or_else(|| vec![args.size]);
    let run = Run {
        args,
        backend: backend.as_ref(),
        iterations: args.iterations.max(1),
        injected: injected_delay(args.inject_delay_us.as_deref())?,
    };
    // Every kernel's arrays at every size are checked before the first one is allocated.
    for &n in &sizes {
        for (name, kernel) in kernels(n)? {
            if args.filter.as_ref().is_none_or(|f| name.contains(f.as_str())) {
                check_fits(&name, &kernel, n, !args.no_baselines)?;
            }
        }
    }
    let mut results = Vec::new();
    let total = sizes.len() * kernels(1)?.len();
    // A progress bar only on a terminal: piped output and CI logs stay plain lines.
    let progress = std::io::IsTerminal::is_terminal(&std::io::stdout()).then(|| {
        let bar = indicatif::ProgressBar::new(total as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}") {
            bar.set_style(style);
        }
        bar
    });
    let say = |text: String| match &progress {
        Some(bar) => bar.suspend(|| outln!("{text}")),
        None => outln!("{text}"),
    };
    say(RFXJIT_LINES.to_string())?;
    for &n in &sizes {
        say(format!(
            "Benchmarking kernels (size={n}, iterations={}, backend={}{})",
            run.iterations,
            args.backend,
            if args.fast_math { ", fast math" } else { "" }
        ))?;
        let mut loops = Loops::new(n);
        for (name, kernel) in kernels(n)? {
            if let Some(bar) = &progress {
                bar.inc(1);
                bar.set_message(format!("{name} at {n}"));
            }
            if args.filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
                continue;
            }
            let result = match bench_kernel(&run, &name, &kernel, n, &mut loops) {
                Ok(result) => result,
                // A kernel the backend has no code for (an op the exported C does not emit
                // yet) is left out of the run, said so, not an error.
                Err(e) if is_unsupported(&e) => {
                    say(format!("[{}] {name}: skipped: {e}", args.backend))?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            say(format!(
                "[{}] {}: {:.4}ms avg, {:.0} ops/s",
                result.backend,
                result.kernel,
                result.timing.mean_s * 1e3,
                result.calls_per_s
            ))?;
            results.push(result);
        }
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    crate::output::print_str(&table(&results))?;
    let report = BenchReport {
        schema_version: 2,
        machine: machine(),
        git_revision: git_revision(),
        date_utc,
        iterations: run.iterations,
        fast_math: args.fast_math,
        threads: args.threads,
        cpu_target: args.cpu_target.name(),
        results,
    };
    // Both files, or neither.
    let mut files = crate::output::OutputSet::new();
    if let Some(path) = &args.json_out {
        let json = serde_json::to_string_pretty(&report)?;
        files.stage(path, |out| out.write_all(json.as_bytes()))?;
    }
    if let Some(path) = &args.plot {
        let svg = crate::plot::draw(&report)?;
        files.stage(path, |out| out.write_all(svg.as_bytes()))?;
    }
    files.commit()?;
    for path in args.json_out.iter().chain(&args.plot) {
        outln!("wrote {}", path.display())?;
    }
    Ok(report)
}

/// A time in µs with three decimals, or "–" when there is none.
fn micros(seconds: Option<f64>) -> String {
    seconds.map_or_else(|| "–".to_string(), |s| format!("{:.3}", s * 1e6))
}

/// The results as a table, what its columns mean, and a list of what the optimiser did.
fn table(results: &[KernelResult]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<22} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9} {:>10} {:>11}",
        "kernel",
        "size",
        "calls",
        "mean µs",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "batch µs",
        "Rust µs",
        "GB/s",
        "compile",
        "vs interp",
        "vs unfused",
        "ops (kernels)"
    );
    for r in results {
        let ratio = |c: &Option<Comparison>| {
            c.as_ref()
                .map_or("-".to_string(), |c| format!("{:.1}x", c.ratio()))
        };
        let _ = writeln!(
            out,
            "{:<22} {:>9} {:>7} {:>10.3} {:>10.3} {:>10} {:>10} {:>10.3} {:>10.3} {:>10.3} {:>8.2} {:>7.2}ms {:>9} {:>10} {:>5} -> {} ({})",
            r.kernel,
            r.size,
            r.timing.samples,
            r.timing.mean_s * 1e6,
            r.timing.p50_s * 1e6,
            micros(r.timing.p99_s),
            micros(r.timing.p999_s),
            r.timing.max_s * 1e6,
            r.batch_p50_s * 1e6,
            r.rust_loop_p50_s * 1e6,
            r.gb_per_s,
            r.compile_s * 1e3,
            ratio(&r.interp),
            ratio(&r.unfused),
            r.ops_before,
            r.ops_after,
            r.kernels
        );
    }
    let _ = writeln!(out, "\n{}\n", footnotes(results));
    // Ops can grow: `clamp` becomes `max` and `min`, a gradient's shared subterms are kept.
    let _ = writeln!(
        out,
        "Optimization impact (HIR ops -> optimised ops, fused kernels):"
    );
    let mut seen = std::collections::HashSet::new();
    for r in results.iter().filter(|r| seen.insert(r.kernel.as_str())) {
        let _ = writeln!(
            out,
            "- {}: {} -> {} ops, {} fused kernel{}",
            r.kernel,
            r.ops_before,
            r.ops_after,
            r.kernels,
            if r.kernels == 1 { "" } else { "s" }
        );
    }
    out
}

/// What the table's columns are; the "–" rule only when a tail is missing.
fn footnotes(results: &[KernelResult]) -> String {
    let mut notes = vec![
        "calls: single calls timed, each on its own; mean, p50, p99, p99.9 and max are over them."
            .to_string(),
    ];
    if results
        .iter()
        .any(|r| r.timing.p99_s.is_none() || r.timing.p999_s.is_none())
    {
        notes.push(
            "–: too few calls for that tail: p99 needs 1,000 and p99.9 10,000 (ten calls beyond \
             it). Calls are timed up to 10,000 times only where that many fit in about a second; \
             --iterations asks for more."
                .to_string(),
        );
    }
    notes.push(
        "batch µs: the median over 31 batches of back-to-back calls (each batch ≥ 50 µs) of the \
         mean call. Rust µs: the same for a plain Rust loop out[i] = x[i] + y[i] over f32 arrays \
         of the same size."
            .to_string(),
    );
    notes.push(
        "vs interp, vs unfused: the baseline's median call over the kernel's, from equally many \
         single calls of each, alternating on the same inputs (`samples` of `interp` and \
         `unfused` in the JSON)."
            .to_string(),
    );
    notes.join("\n")
}

/// `rfx bench`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    run_bench(args).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros_1_to(n: u64) -> Vec<Duration> {
        (1..=n).map(Duration::from_micros).collect()
    }

    /// The start of a view's elements.
    fn start(data: rfx_ir::DataRef<'_>) -> usize {
        match data {
            rfx_ir::DataRef::Bool(d) => d.as_ptr() as usize,
            rfx_ir::DataRef::I32(d) => d.as_ptr() as usize,
            rfx_ir::DataRef::F32(d) => d.as_ptr() as usize,
            rfx_ir::DataRef::F64(d) => d.as_ptr() as usize,
        }
    }

    #[test]
    fn warm_up_runs_as_long_as_the_drivers_calibration() -> anyhow::Result<()> {
        // The peers driver calibrates for 30% of its budget: 80, 120, 250 and 500 ms by size.
        let ms = |n| warm_up_time(n).as_millis();
        assert_eq!(
            [ms(1), ms(1024), ms(1025), ms(65_536), ms(1 << 20), ms(1 << 24)],
            [24, 24, 36, 36, 75, 150]
        );
        let mut calls = 0u32;
        let start = Instant::now();
        warm_up(
            &mut || {
                calls += 1;
                Ok(())
            },
            Duration::from_millis(3),
        )?;
        assert!(start.elapsed() >= Duration::from_millis(3));
        assert!(calls > 3);
        let mut few = 0u32;
        warm_up(
            &mut || {
                few += 1;
                Ok(())
            },
            Duration::ZERO,
        )?;
        assert_eq!(few, 3);
        Ok(())
    }

    #[test]
    fn checked_calls_run_on_each_sets_call_args() -> anyhow::Result<()> {
        let n = 4096;
        let kernel = kernels(n)?
            .into_iter()
            .find_map(|(name, k)| (name == "pid_clip").then_some(k))
            .context("pid_clip")?;
        let (mut p, _, _) = prepare(&kernel, &InterpBackend, &OptConfig::default(), Exec::default())?;
        assert_eq!(p.rotation.len(), rotation_sets(n, 4));
        let expected: Vec<Vec<usize>> = p.rotation.iter().map(|a| a.addresses().to_vec()).collect();
        let last = p.rotation.len() - 1;
        {
            let compiled = p.compiled.clone();
            let mut views = RotationViews::new(&mut p.rotation, &p.shapes)?;
            assert_eq!(views.sets(), last + 1);
            for k in [0, 1, last] {
                let (inputs, outputs) = views.set(k);
                let starts: Vec<usize> = inputs
                    .iter()
                    .map(|v| start(v.data()))
                    .chain(outputs.iter().map(|v| match v.data() {
                        DataMut::Bool(d) => d.as_ptr() as usize,
                        DataMut::I32(d) => d.as_ptr() as usize,
                        DataMut::F32(d) => d.as_ptr() as usize,
                        DataMut::F64(d) => d.as_ptr() as usize,
                    }))
                    .collect();
                assert_eq!(starts, expected[k], "set {k}");
                for (view, shape) in inputs
                    .iter()
                    .map(|v| v.shape())
                    .chain(outputs.iter().map(|v| v.shape()))
                    .zip(&p.shapes)
                {
                    assert_eq!(view, shape);
                }
                compiled.run(inputs, outputs, &mut Scratch::new())?;
            }
        }
        // What the checked call wrote into set k's `CallArgs` is the kernel on set k's inputs.
        for k in [0, 1, last] {
            let mut want = Array::filled(Scalar::zero(rfx_ir::DType::F32), [n]);
            let inputs: Vec<ArrayView<'_>> = p.rotation_in[k].iter().map(Array::view).collect();
            p.compiled
                .run(&inputs, &mut [want.view_mut()], &mut Scratch::new())?;
            let rfx_ir::ArrayData::F32(want) = want.data() else {
                anyhow::bail!("pid_clip's output is f32");
            };
            assert_eq!(p.rotation[k].output::<f32>(0), Some(&want[..]), "set {k}");
        }
        Ok(())
    }

    #[test]
    fn a_tail_needs_ten_samples_beyond_it() {
        let t = Timing::from_samples(micros_1_to(999));
        assert_eq!(t.samples, 999);
        assert_eq!((t.p99_s, t.p999_s), (None, None));
        assert_eq!((t.p50_s, t.max_s), (500e-6, 999e-6));
        let t = Timing::from_samples(micros_1_to(1_000));
        assert_eq!(t.p99_s, Some(990e-6));
        assert_eq!(t.p999_s, None);
        let t = Timing::from_samples(micros_1_to(10_000));
        assert_eq!((t.p99_s, t.p999_s), (Some(9_900e-6), Some(9_990e-6)));
        assert_eq!(t.samples, 10_000);
    }

    #[test]
    fn short_calls_are_sampled_enough_for_their_tails() {
        let us = Duration::from_micros;
        assert_eq!(tail_samples(200, us(1)), 10_000);
        assert_eq!(tail_samples(200, us(100)), 10_000);
        assert_eq!(tail_samples(200, us(101)), 1_000);
        assert_eq!(tail_samples(200, us(1_000)), 1_000);
        assert_eq!(tail_samples(200, us(1_001)), 200);
        assert_eq!(tail_samples(5, us(2_000)), 5);
        // --iterations above the tails' counts is honoured.
        assert_eq!(tail_samples(20_000, us(1)), 20_000);
    }

    #[test]
    fn a_comparison_alternates_equally_many_calls_of_each_side() {
        let mut order = Vec::new();
        let budget = PairBudget {
            time: Duration::from_millis(10),
            min: 5,
            max: 51,
        };
        let c = alternate(
            |side| {
                order.push(side);
                busy_wait(Duration::from_micros(match side {
                    Side::Rfx => 20,
                    Side::Baseline => 60,
                }));
                Ok(())
            },
            &budget,
        )
        .expect("comparison");
        assert!((5..=51).contains(&c.samples), "{c:?}");
        // One warm-up pair, then the timed pairs, always kernel then baseline.
        assert_eq!(order.len(), 2 * (c.samples + 1));
        assert!(order.chunks(2).all(|p| p == [Side::Rfx, Side::Baseline]));
        assert!(c.rfx_p50_s >= 20e-6 && c.p50_s >= 60e-6, "{c:?}");
        assert!((2.0..4.5).contains(&c.ratio()), "{c:?}");
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        let at = |s: u64| utc(std::time::UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01 00:00");
        assert_eq!(at(951_868_800), "2000-03-01 00:00");
        assert_eq!(at(1_709_210_040), "2024-02-29 12:34");
        assert_eq!(at(4_102_444_799), "2099-12-31 23:59");
    }
}
