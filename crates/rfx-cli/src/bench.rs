//! `rfx bench`: rfxJIT's benchmark, made trustworthy.
//!
//! Every kernel is compiled once (compile time measured separately), then called `iterations`
//! times on fresh random inputs with preallocated outputs; each call is timed on its own, so
//! the report has the mean, p50, p99, p99.9 and max per call, calls and elements per second and
//! the useful memory traffic in GB/s. Two baselines run in the same process on the same
//! inputs: the reference interpreter (`interp`) and an unfused op-by-op path (every HIR op its
//! own compiled kernel with a materialised result, the way rfxJIT runs one NumPy call per op),
//! so the speed-ups printed are ratios measured in one run.

use std::time::{Duration, Instant};

use anyhow::Context;
use rfx_ir::hir::{self, Builder, Kernel, Op};
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, ArrayView, ArrayViewMut, Scalar};
use rfx_lower::{Backend, CallArgs, Compiled, InterpBackend, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, OptReport, optimize};

/// Arguments of `rfx bench`.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// Elements per input (ignored when `--sizes` is given).
    #[arg(long, default_value_t = 65536)]
    pub size: usize,
    /// A comma-separated sweep of sizes, e.g. `1,16,1024,65536,1048576`.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Option<Vec<usize>>,
    /// Timed calls per kernel.
    #[arg(long, default_value_t = 200)]
    pub iterations: usize,
    /// The backend to measure (`cpu`, `interp`).
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
/// inputs and outputs in every rotation set, the interpreter's copy, the reference loop's three
/// `f32` arrays and, with the baselines, every op's result materialised by the unfused path.
fn footprint(kernel: &Kernel, n: usize, baselines: bool) -> u128 {
    let bytes = |ty: &rfx_ir::TensorType| ty.shape.numel() as u128 * ty.dtype.size_bytes() as u128;
    let (mut io, mut count) = (0u128, 0usize);
    for ty in kernel
        .inputs()
        .map(|(_, _, ty)| ty)
        .chain(kernel.outputs().iter().filter_map(|o| kernel.value_type(o.value)))
    {
        io += bytes(ty);
        count += 1;
    }
    let sets = rotation_sets(n, count) as u128 + 1;
    let unfused: u128 = if baselines {
        kernel.nodes().iter().map(|node| 3 * bytes(&node.ty)).sum()
    } else {
        0
    };
    io * sets + unfused + 12 * n.max(4096) as u128
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

/// Statistics of per-call times.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Timing {
    /// Mean seconds per call.
    pub mean_s: f64,
    /// Median.
    pub p50_s: f64,
    /// 99th percentile.
    pub p99_s: f64,
    /// 99.9th percentile.
    pub p999_s: f64,
    /// Slowest call.
    pub max_s: f64,
}

impl Timing {
    fn from_samples(mut samples: Vec<Duration>) -> Timing {
        samples.sort_unstable();
        let secs = |d: Duration| d.as_secs_f64();
        let at = |q: f64| {
            let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
            samples.get(i).copied().map_or(0.0, secs)
        };
        let mean = samples.iter().map(|&d| secs(d)).sum::<f64>() / samples.len().max(1) as f64;
        Timing {
            mean_s: mean,
            p50_s: at(0.5),
            p99_s: at(0.99),
            p999_s: at(0.999),
            max_s: at(1.0),
        }
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
    /// Median of the interpreter baseline, seconds (when run).
    pub interp_p50_s: Option<f64>,
    /// Median of the unfused op-by-op baseline, seconds (when run).
    pub unfused_p50_s: Option<f64>,
    /// Median over 31 batches of the mean time per call, each batch at least 50 µs long: a
    /// throughput figure that timer resolution does not blur, for `cargo xtask perf-check`.
    pub batch_p50_s: f64,
    /// The same batched median through the real-time path: [`CallArgs`] made once per input
    /// set, run with `run_args` (on the CPU: no checks per call).
    pub args_batch_p50_s: f64,
    /// The same batched median for a plain Rust loop `out[i] = x[i] + y[i]` over the same size
    /// (at least 4096 elements), its batches interleaved with the kernel's batches of
    /// `batch_p50_s`.
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
    /// Version of this layout.
    pub schema_version: u32,
    /// The machine: CPU model and logical cores.
    pub machine: Machine,
    /// `git rev-parse HEAD` when run inside the repository.
    pub git_revision: Option<String>,
    /// Timed calls per kernel.
    pub iterations: usize,
    /// Whether the kernels were compiled with fast math (`--fast-math`).
    pub fast_math: bool,
    /// The most threads a call could use (`--threads`; `None`: every core).
    pub threads: Option<usize>,
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
    inputs: Vec<Array>,
    outputs: Vec<Array>,
    /// Input sets the timed calls cycle through ([`rotation_sets`]); the first is `inputs`.
    rotation_in: Vec<Vec<Array>>,
    /// Output sets, one per input set.
    rotation_out: Vec<Vec<Array>>,
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

fn prepare(
    kernel: &Kernel,
    backend: &dyn Backend,
    config: &OptConfig,
    threads: Option<usize>,
) -> anyhow::Result<(Prepared, OptReport, Duration)> {
    let start = Instant::now();
    let (mir, report) = optimize(kernel, config)?;
    let (lir, _) = lower(&mir, &LowerConfig::default())?;
    let options = rfx_lower::CompileOptions {
        fast_math: config.fast_math,
        max_threads: threads,
        ..rfx_lower::CompileOptions::default()
    };
    let compiled = backend.compile(&lir, &options)?;
    let compile = start.elapsed();
    let inputs = random_inputs(&mut TestRng::new(7), kernel, 0.0);
    let outputs: Vec<Array> = lir
        .outputs()
        .map(|(_, _, ty)| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
        .collect();
    let n = inputs.iter().map(|a| a.data().len()).max().unwrap_or(1);
    let sets = rotation_sets(n, inputs.len() + outputs.len());
    let rotation_in = (0..sets as u64)
        .map(|s| {
            if s == 0 {
                inputs.clone()
            } else {
                random_inputs(&mut TestRng::new(7 + s), kernel, 0.0)
            }
        })
        .collect();
    let rotation_out = vec![outputs.clone(); sets];
    Ok((
        Prepared {
            compiled,
            inputs,
            outputs,
            rotation_in,
            rotation_out,
        },
        report,
        compile,
    ))
}

/// The median over 31 batches of the mean time of `call`, each batch long enough (≥ 50 µs) that
/// the clock's resolution does not matter.
fn batched_p50(mut call: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    let start = Instant::now();
    call()?;
    let batch = batch_len(start.elapsed());
    let mut means = Vec::with_capacity(31);
    for _ in 0..31 {
        let start = Instant::now();
        for _ in 0..batch {
            call()?;
        }
        means.push(start.elapsed() / batch as u32);
    }
    Ok(Timing::from_samples(means).p50_s)
}

/// Calls per batch for a call that took `once`: enough for 50 µs, at most 2^20.
fn batch_len(once: Duration) -> usize {
    ((50e-6 / once.as_secs_f64().max(1e-9)).ceil() as usize).clamp(1, 1 << 20)
}

/// Batched medians of a kernel paired with a reference: 31 rounds, each a batch of `call`
/// (≥ 50 µs) and then a batch of `reference` (≥ 50 µs), so both see the machine in the same
/// state. Returns the kernel's median batch mean, the reference's, and the median of the
/// per-round ratios.
fn paired_p50(
    mut call: impl FnMut() -> anyhow::Result<()>,
    reference: &mut Reference,
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
        let start = Instant::now();
        for _ in 0..batch {
            call()?;
        }
        let mean = start.elapsed() / batch as u32;
        let start = Instant::now();
        for _ in 0..ref_batch {
            reference.run();
        }
        let ref_mean = start.elapsed() / ref_batch as u32;
        ratios.push(mean.as_secs_f64() / ref_mean.as_secs_f64().max(1e-12));
        means.push(mean);
        refs.push(ref_mean);
    }
    ratios.sort_by(f64::total_cmp);
    Ok((
        Timing::from_samples(means).p50_s,
        Timing::from_samples(refs).p50_s,
        ratios[ratios.len() / 2],
    ))
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

/// Views of every rotation set, made once so that timed calls build nothing.
fn rotation_views<'a>(
    inputs: &'a [Vec<Array>],
    outputs: &'a mut [Vec<Array>],
) -> (Vec<Vec<ArrayView<'a>>>, Vec<Vec<ArrayViewMut<'a>>>) {
    let in_views = inputs
        .iter()
        .map(|set| set.iter().map(Array::view).collect())
        .collect();
    let out_views = outputs
        .iter_mut()
        .map(|set| set.iter_mut().map(Array::view_mut).collect())
        .collect();
    (in_views, out_views)
}

/// The batched median of `p`'s calls (plus the injected delay), paired with `reference`
/// (see [`paired_p50`]).
fn batch_p50(
    p: &mut Prepared,
    delay: Duration,
    reference: &mut Reference,
) -> anyhow::Result<(f64, f64, f64)> {
    let mut scratch = Scratch::new();
    let (in_views, mut out_views) = rotation_views(&p.rotation_in, &mut p.rotation_out);
    let compiled = &p.compiled;
    let sets = in_views.len().max(1);
    let mut next = 0usize;
    paired_p50(
        || {
            // A wrapping index rather than `%`: a 64-bit division would cost more than a small call.
            let k = next;
            next = if next + 1 == sets { 0 } else { next + 1 };
            compiled.run(&in_views[k], &mut out_views[k], &mut scratch)?;
            if !delay.is_zero() {
                busy_wait(delay);
            }
            Ok(())
        },
        reference,
    )
}

/// The batched median of `p`'s calls through the real-time path: one [`CallArgs`] per rotation
/// set, made (and checked) once, then `run_args`.
fn args_batch_p50(p: &mut Prepared, delay: Duration) -> anyhow::Result<f64> {
    let mut scratch = Scratch::new();
    let compiled = &p.compiled;
    let mut sets = Vec::with_capacity(p.rotation_in.len());
    for inputs in &p.rotation_in {
        let mut args = CallArgs::new(compiled.as_ref());
        for (k, input) in inputs.iter().enumerate() {
            args.set_input(k, input.view())?;
        }
        sets.push(args);
    }
    if sets.is_empty() {
        sets.push(CallArgs::new(compiled.as_ref()));
    }
    let mut next = 0usize;
    batched_p50(|| {
        let k = next;
        next = if next + 1 == sets.len() { 0 } else { next + 1 };
        compiled.run_args(&mut sets[k], &mut scratch)?;
        if !delay.is_zero() {
            busy_wait(delay);
        }
        Ok(())
    })
}

fn busy_wait(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Times `iterations` calls (after one warm-up call), each call timed on its own.
fn time_calls(p: &mut Prepared, iterations: usize) -> anyhow::Result<Vec<Duration>> {
    time_calls_delayed(p, iterations, Duration::ZERO)
}

fn time_calls_delayed(p: &mut Prepared, iterations: usize, delay: Duration) -> anyhow::Result<Vec<Duration>> {
    let mut scratch = Scratch::new();
    // `--iterations` is the user's: a huge count must not become a huge allocation up front.
    let mut samples = Vec::with_capacity(iterations.min(1 << 16));
    let (in_views, mut out_views) = rotation_views(&p.rotation_in, &mut p.rotation_out);
    let sets = in_views.len().max(1);
    for i in 0..=iterations {
        let start = Instant::now();
        p.compiled
            .run(&in_views[i % sets], &mut out_views[i % sets], &mut scratch)?;
        if !delay.is_zero() {
            busy_wait(delay);
        }
        let elapsed = start.elapsed();
        if i > 0 {
            samples.push(elapsed);
        }
    }
    Ok(samples)
}

/// The unfused path: every HIR op of `kernel` compiled as its own one-op kernel, run in order
/// with every intermediate materialised (rfxJIT's one-NumPy-call-per-op execution).
fn unfused_p50(kernel: &Kernel, backend: &dyn Backend, iterations: usize) -> anyhow::Result<f64> {
    let config = OptConfig {
        saturate: false,
        ..OptConfig::default()
    };
    let mut steps: Vec<(Prepared, Vec<usize>)> = Vec::new();
    let inputs = random_inputs(&mut TestRng::new(7), kernel, 0.0);
    let mut values: Vec<Option<Array>> = vec![None; kernel.nodes().len()];
    let mut next_input = inputs.into_iter();
    for (i, node) in kernel.nodes().iter().enumerate() {
        if let Op::Input { .. } = node.op {
            values[i] = next_input.next();
            continue;
        }
        let mut b = Builder::new(format!("op{i}"));
        let mut args = Vec::new();
        for (k, a) in node.args.iter().enumerate() {
            let ty = kernel.value_type(*a).context("operand type")?.clone();
            args.push(b.input(format!("a{k}"), ty)?);
        }
        let v = b.copy(&node.op, &args, &node.ty)?;
        b.output("out", v)?;
        let single = b.finish()?;
        let (mut prepared, _, _) = prepare(&single, backend, &config, None)?;
        prepared.inputs = node
            .args
            .iter()
            .map(|a| values[a.index()].clone().context("operand value"))
            .collect::<anyhow::Result<_>>()?;
        values[i] = prepared.outputs.first().cloned();
        steps.push((prepared, node.args.iter().map(|a| a.index()).collect()));
    }
    let mut scratch = Scratch::new();
    let mut samples = Vec::with_capacity(iterations.min(1 << 16));
    for iter in 0..=iterations {
        let start = Instant::now();
        for (p, _) in steps.iter_mut() {
            let views: Vec<_> = p.inputs.iter().map(Array::view).collect();
            let mut outs: Vec<_> = p.outputs.iter_mut().map(Array::view_mut).collect();
            p.compiled.run(&views, &mut outs, &mut scratch)?;
        }
        if iter > 0 {
            samples.push(start.elapsed());
        }
    }
    Ok(Timing::from_samples(samples).p50_s)
}

fn bytes_per_call(kernel: &Kernel, p: &Prepared) -> usize {
    let _ = kernel;
    p.inputs
        .iter()
        .chain(&p.outputs)
        .map(|a| a.data().len() * a.dtype().size_bytes())
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

/// Runs the benchmark and prints rfxJIT-style lines and a table; returns the report.
pub fn run_bench(args: &BenchArgs) -> anyhow::Result<BenchReport> {
    let backend = backend_named(&args.backend)?;
    if args.backend == "metal" {
        outln!(
            "note: the metal backend runs through wgpu; on Linux CI that is lavapipe, a software \
             Vulkan device on the CPU, so its timings say little about a real GPU"
        )?;
    }
    let sizes = args.sizes.clone().unwrap_or_else(|| vec![args.size]);
    let iterations = args.iterations.max(1);
    let injected = match &args.inject_delay_us {
        Some(spec) => {
            let (name, us) = spec
                .split_once('=')
                .context("--inject-delay-us takes KERNEL=MICROSECONDS")?;
            Some((
                name.to_string(),
                Duration::from_micros(us.parse().context("microseconds")?),
            ))
        }
        None => None,
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
    for &n in &sizes {
        say(format!(
            "Benchmarking kernels (size={n}, iterations={iterations}, backend={}{})",
            args.backend,
            if args.fast_math { ", fast math" } else { "" }
        ))?;
        // The yardstick of perf-check: at least 4096 elements, so that it takes about a
        // microsecond and the clock's granularity does not quantise it (at n = 1 it took 2 or
        // 3 ns, which moved every normalised time by half).
        let mut reference = Reference::new(n.max(4096));
        for (name, kernel) in kernels(n)? {
            if let Some(bar) = &progress {
                bar.inc(1);
                bar.set_message(format!("{name} at {n}"));
            }
            if args.filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
                continue;
            }
            let config = OptConfig {
                fast_math: args.fast_math,
                ..OptConfig::default()
            };
            let (mut prepared, report, compile) = prepare(&kernel, backend.as_ref(), &config, args.threads)?;
            let delay = injected
                .as_ref()
                .filter(|(k, _)| *k == name)
                .map_or(Duration::ZERO, |(_, d)| *d);
            let timing = Timing::from_samples(time_calls_delayed(&mut prepared, iterations, delay)?);
            let (batch, reference_p50, normalised) = batch_p50(&mut prepared, delay, &mut reference)?;
            let args_batch = args_batch_p50(&mut prepared, delay)?;
            let bytes = bytes_per_call(&kernel, &prepared);
            // The baselines are slow; fewer calls keep the run short and the medians stable.
            let baseline_iters = (iterations / 10).clamp(3, 50);
            let (interp, unfused) = if args.no_baselines {
                (None, None)
            } else {
                let (mut ip, _, _) = prepare(&kernel, &InterpBackend, &OptConfig::default(), None)?;
                let interp = Timing::from_samples(time_calls(
                    &mut ip,
                    baseline_iters.min(if n > 100_000 { 3 } else { 20 }),
                )?)
                .p50_s;
                (
                    Some(interp),
                    Some(unfused_p50(&kernel, backend.as_ref(), baseline_iters)?),
                )
            };
            let result = KernelResult {
                kernel: name.clone(),
                size: n,
                backend: args.backend.clone(),
                compile_s: compile.as_secs_f64(),
                calls_per_s: 1.0 / timing.mean_s.max(1e-12),
                elements_per_s: n as f64 / timing.p50_s.max(1e-12),
                gb_per_s: bytes as f64 / timing.p50_s.max(1e-12) / 1e9,
                timing,
                interp_p50_s: interp,
                unfused_p50_s: unfused,
                batch_p50_s: batch,
                args_batch_p50_s: args_batch,
                reference_p50_s: reference_p50,
                normalised_p50: normalised,
                ops_before: report.ops_before,
                ops_after: report.ops_after,
                kernels: report.kernels,
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
        schema_version: 1,
        machine: machine(),
        git_revision: git_revision(),
        iterations,
        fast_math: args.fast_math,
        threads: args.threads,
        results,
    };
    // Both files, or neither.
    let mut files = crate::output::OutputSet::new();
    if let Some(path) = &args.json_out {
        let json = serde_json::to_string_pretty(&report)?;
        files.stage(path, |out| out.write_all(json.as_bytes()))?;
    }
    if let Some(path) = &args.plot {
        let svg = crate::plot::draw(&report.results)?;
        files.stage(path, |out| out.write_all(svg.as_bytes()))?;
    }
    files.commit()?;
    for path in args.json_out.iter().chain(&args.plot) {
        outln!("wrote {}", path.display())?;
    }
    Ok(report)
}

/// The results as a table and a list of what the optimiser did.
fn table(results: &[KernelResult]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<22} {:>9} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9} {:>9} {:>11}",
        "kernel",
        "size",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "GB/s",
        "compile",
        "vs interp",
        "vs unfused",
        "ops (kernels)"
    );
    for r in results {
        let ratio = |base: Option<f64>| {
            base.map_or("-".to_string(), |b| {
                format!("{:.1}x", b / r.timing.p50_s.max(1e-12))
            })
        };
        let _ = writeln!(
            out,
            "{:<22} {:>9} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>8.2} {:>7.2}ms {:>9} {:>9} {:>5} -> {} ({})",
            r.kernel,
            r.size,
            r.timing.p50_s * 1e6,
            r.timing.p99_s * 1e6,
            r.timing.p999_s * 1e6,
            r.timing.max_s * 1e6,
            r.gb_per_s,
            r.compile_s * 1e3,
            ratio(r.interp_p50_s),
            ratio(r.unfused_p50_s),
            r.ops_before,
            r.ops_after,
            r.kernels
        );
    }
    // Ops can grow: `clamp` becomes `max` and `min`, a gradient's shared subterms are kept.
    let _ = writeln!(
        out,
        "\nOptimization impact (HIR ops -> optimised ops, fused kernels):"
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

/// `rfx bench`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    run_bench(args).map(|_| ())
}
