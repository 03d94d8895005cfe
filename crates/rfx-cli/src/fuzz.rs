//! `rfx fuzz`: random kernels run through every execution path and compared.
//!
//! Each seed makes one random kernel ([`rfx_ir::testgen`], with a generator configuration and
//! dimension sizes varied by the seed; one in ten batched by `rfx_autodiff::vmap`) and its inputs, `random_inputs(&mut TestRng::new(seed),
//! &kernel, 0.2)`, so that a kernel and its seed reproduce a case exactly. The paths:
//!
//! - `lir-interp`: `rfx_opt::optimize`, `rfx_lower::lower` and the LIR interpreter, the
//!   reference of every backend;
//! - `hir-interp`: the HIR interpreter ([`Mode::Native`]), compared with `lir-interp`;
//! - `cpu`, `metal`, `cuda`: the backends, run on the same LIR and compared with `lir-interp`.
//!
//! The comparison rules are exact, so a reported mismatch is a bug, never noise:
//! - a backend must give the LIR interpreter's bits (any NaN equals any NaN) on kernels without
//!   transcendental ops ([`UnaryOp::is_transcendental`], `pow`, `atan2`);
//! - GPU kernels that reduce 1024 or more points per output run as trees, whose float rounding
//!   differs from the interpreter's order: there only outputs computed without any float
//!   reduction are compared (an i32 or bool output computed from a float sum may differ too);
//! - `hir-interp` must give `lir-interp`'s bits on kernels without float reductions where no
//!   refining rewrite fired: lowering splits reductions into lanes (`Schedule::reduce_lanes`),
//!   which changes float sums and, through ±0 ties, `max` and `min`; a refining rewrite
//!   replaces `pow(x, 2)` by the more accurate `x * x`. Both interpreters compute
//!   transcendentals with the same `rfx_ir::semantics`.
//! - kernels with transcendentals ([`Transcendental`]) are compared in two parts on each
//!   backend, which must also give the same bits on a second call. The backend runs the kernel
//!   with every transcendental node's value and operands as extra outputs (`Probed` in the
//!   source). Every transcendental value must lie within the backend's documented bound
//!   ([`Backend::ulp_bound`]) of the `f64` oracle at the backend's own operands; and the
//!   kernel's outputs and those operands must have the bits of the HIR interpreter run with
//!   the transcendental nodes replaced by the backend's values. So no error analysis is needed:
//!   approximations are checked one op at a time, and everything around them exactly. Outputs
//!   and operands a float reduction feeds must have the bits of the LIR interpreter run on the
//!   cut, lowered, with each reduction in the backend's lanes (those of the backend's kernel
//!   with the same loop nest); they are left out where no such kernel exists (rare) and behind
//!   GPU trees (as above), as are values where the backend documents no bound (metal outside
//!   its lavapipe table's ranges, or on another device).
//!
//! Large-kernel mode ([`FuzzConfig::large`], `rfx fuzz --large`) generates elementwise
//! kernels of 1,000 to 20,000 ops heavy in transcendentals instead, and compares each backend
//! with `lir-interp` within a tolerance (the kernels' ops do not amplify rounding errors), with
//! no shrinking: it checks that kernel size alone (stack frames, staging, compile time) breaks
//! nothing.
//!
//! An error from a path whose reference succeeded is a mismatch, except a typed
//! [`BackendError::Unsupported`] (metal has no `f64`; sizes beyond a device's limits), which is
//! counted as a skip. A mismatching kernel is shrunk (see [`shrink`]) and, with
//! [`FuzzConfig::save_dir`], written as `<path>_<seed>.rfx`: a `#` comment header followed by
//! the HIR text, which `rfx run` and the regression test read back.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rfx_ir::hir::{self, Builder, Kernel, Node, Op, Output, ValueId};
use rfx_ir::interp::{Mode, run_hir, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{KernelGenConfig, TestRng, random_inputs, random_kernel};
use rfx_ir::{Array, ArrayData, ArrayView, BinaryOp, DType, Scalar, TensorType, UnaryOp};
use rfx_lower::{Backend, BackendError, LowerConfig, Scratch, Transcendental, order_inputs, ulps};
use rfx_opt::{Exactness, OptConfig};

/// The rate of special float values (NaN, ±Inf, −0, subnormals, huge) among the inputs.
const SPECIAL_RATE: f64 = 0.2;

/// Reductions of this many points per output or more run as trees on the GPU backends.
const GPU_TREE_MIN_POINTS: usize = 1024;

/// The largest value a resized kernel may hold, so that one kernel stays cheap.
const MAX_RESIZED_NUMEL: usize = 6000;

/// Dimension sizes that resizing picks from: empty, odd and even sizes around the CPU vector
/// widths (2 `f64` or 4 `f32` lanes, reductions in 4 or 8 partial accumulators).
const INTERESTING_DIMS: [usize; 12] = [0, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33];

/// Sizes beyond the GPU tree threshold, used for rank-1 kernels now and then.
const LARGE_DIMS: [usize; 3] = [1024, 1031, 2053];

/// A hook that declares a mismatch on the path `injected` for any kernel it returns a
/// description for: lets tests check the shrinker and the saved files without a real bug.
pub type InjectedMismatch = fn(&Kernel) -> Option<String>;

/// What to fuzz and for how long.
#[derive(Clone, Debug)]
pub struct FuzzConfig {
    /// Stop after this many kernels (`None`: no limit; with no duration either, 10,000).
    pub kernels: Option<u64>,
    /// Stop once this much time has passed (checked between kernels).
    pub duration: Option<Duration>,
    /// The first seed; kernel `i` uses seed `first_seed + i`.
    pub first_seed: u64,
    /// Run the metal backend on every `metal_every`-th seed only (its pipelines are slow to
    /// create on lavapipe); 0 never runs it.
    pub metal_every: u64,
    /// Where to write shrunk mismatching kernels (`<path>_<seed>.rfx`); `None` writes nothing.
    pub save_dir: Option<PathBuf>,
    /// Worker threads (seeds are shared out; the report does not depend on the count).
    pub threads: usize,
    /// Most shrinking attempts per mismatch (each reruns the mismatching path).
    pub max_shrink_attempts: usize,
    /// A test hook: see [`InjectedMismatch`].
    pub inject: Option<InjectedMismatch>,
    /// Large-kernel mode: each seed makes an elementwise kernel of 1,000 to 20,000 ops, heavy in
    /// transcendentals ([`rfx_ir::testgen::transcendental_kernel`]), and every backend's values
    /// are compared with the LIR interpreter's within [`LARGE_TOLERANCE_F32`] /
    /// [`LARGE_TOLERANCE_F64`] (the kernel's ops do not amplify rounding errors); nothing is
    /// shrunk. Metal runs on every `metal_every`-th seed, as in the normal mode.
    pub large: bool,
}

/// Large-kernel mode's bound on the absolute difference of an `f32` output from the
/// interpreter's (values of magnitude at most 2; a value read from the wrong place is off by
/// 0.1 or more).
pub const LARGE_TOLERANCE_F32: f64 = 1e-3;

/// Large-kernel mode's bound for `f64` outputs.
pub const LARGE_TOLERANCE_F64: f64 = 1e-10;

impl Default for FuzzConfig {
    fn default() -> FuzzConfig {
        FuzzConfig {
            kernels: None,
            duration: None,
            first_seed: 1,
            metal_every: 50,
            save_dir: None,
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            max_shrink_attempts: 400,
            inject: None,
            large: false,
        }
    }
}

/// What happened on one path over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Kernels whose values were compared bit for bit (all outputs, or those a GPU tree
    /// reduction leaves comparable).
    pub compared: u64,
    /// Kernels not compared, or compared only in part, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Of `compared`, kernels with transcendental ops: compared bit for bit given the path's
    /// transcendental values, which were checked against the backend's ULP bounds.
    pub within_bounds: u64,
}

/// A path that disagreed with its reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The seed: the kernel's generator and its inputs' (`random_inputs(&mut
    /// TestRng::new(seed), ..)`).
    pub seed: u64,
    /// The path that disagreed.
    pub path: String,
    /// What differed, on the shrunk kernel when shrinking kept the mismatch.
    pub description: String,
    /// The shrunk kernel in HIR text.
    pub kernel: String,
    /// Non-input nodes before and after shrinking.
    pub ops_before_after: (usize, usize),
    /// The file written, with [`FuzzConfig::save_dir`].
    pub saved: Option<PathBuf>,
}

/// The result of a fuzzing run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FuzzReport {
    /// Kernels generated and run.
    pub kernels: u64,
    /// Per path (`hir-interp`, `lir-interp`, `cpu`, `metal`, `cuda`, ...).
    pub paths: BTreeMap<String, PathStats>,
    /// Every mismatch, by seed.
    pub mismatches: Vec<Mismatch>,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl FuzzReport {
    /// The stats of `path` (empty when it never ran).
    pub fn path(&self, path: &str) -> PathStats {
        self.paths.get(path).cloned().unwrap_or_default()
    }

    fn skip(&mut self, path: &str, reason: impl Into<String>) {
        *self
            .paths
            .entry(path.to_string())
            .or_default()
            .skipped
            .entry(reason.into())
            .or_default() += 1;
    }

    fn compared(&mut self, path: &str) {
        self.paths.entry(path.to_string()).or_default().compared += 1;
    }

    fn within_bounds(&mut self, path: &str) {
        self.paths.entry(path.to_string()).or_default().within_bounds += 1;
    }

    fn merge(&mut self, other: FuzzReport) {
        self.kernels += other.kernels;
        for (path, stats) in other.paths {
            let mine = self.paths.entry(path).or_default();
            mine.compared += stats.compared;
            mine.within_bounds += stats.within_bounds;
            for (reason, count) in stats.skipped {
                *mine.skipped.entry(reason).or_default() += count;
            }
        }
        self.mismatches.extend(other.mismatches);
    }
}

impl fmt::Display for FuzzReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fuzz: {} kernels in {:.1?}, {} mismatch(es)",
            self.kernels,
            self.elapsed,
            self.mismatches.len()
        )?;
        for (path, stats) in &self.paths {
            writeln!(f, "  {path:<11} compared {:>7}", stats.compared)?;
            if stats.within_bounds > 0 {
                writeln!(
                    f,
                    "  {:<11} of which {:>7}  with transcendentals, within the ULP bounds",
                    "", stats.within_bounds
                )?;
            }
            for (reason, count) in &stats.skipped {
                writeln!(f, "  {:<11} skipped  {count:>7}  {reason}", "")?;
            }
        }
        for m in &self.mismatches {
            writeln!(
                f,
                "  MISMATCH seed {} path {}: {} (shrunk {} -> {} ops){}",
                m.seed,
                m.path,
                m.description,
                m.ops_before_after.0,
                m.ops_before_after.1,
                m.saved
                    .as_ref()
                    .map_or(String::new(), |p| format!(", saved to {}", p.display()))
            )?;
        }
        Ok(())
    }
}

/// Runs the fuzzer: kernels from `config.first_seed` on, until `config.kernels` kernels or
/// `config.duration` time. Fails only when a mismatch cannot be written to
/// [`FuzzConfig::save_dir`]; mismatches are in the report. Turns the CUDA backend's on-disk
/// PTX cache off for the process: every kernel is compiled once, so storing them would only
/// fill the cache folder.
pub fn run(config: &FuzzConfig) -> anyhow::Result<FuzzReport> {
    #[cfg(feature = "cuda")]
    rfx_codegen_cuda::set_ptx_disk_cache(false);
    let start = Instant::now();
    let limit = match (config.kernels, config.duration) {
        (Some(n), _) => n,
        (None, Some(_)) => u64::MAX,
        (None, None) => 10_000,
    };
    let env = Environment::probe();
    let next = AtomicU64::new(0);
    let merged = Mutex::new(FuzzReport::default());
    std::thread::scope(|scope| {
        for _ in 0..config.threads.max(1) {
            scope.spawn(|| {
                let mut report = FuzzReport::default();
                loop {
                    if config.duration.is_some_and(|d| start.elapsed() >= d) {
                        break;
                    }
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= limit {
                        break;
                    }
                    let seed = config.first_seed.wrapping_add(index);
                    fuzz_seed(config, &env, seed, &mut report);
                }
                if let Ok(mut merged) = merged.lock() {
                    merged.merge(report);
                }
            });
        }
    });
    let mut report = merged
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a fuzz worker panicked"))?;
    report
        .mismatches
        .sort_by(|a, b| (a.seed, &a.path).cmp(&(b.seed, &b.path)));
    if let Some(dir) = &config.save_dir {
        for m in &mut report.mismatches {
            m.saved = Some(save(dir, m)?);
        }
    }
    report.elapsed = start.elapsed();
    Ok(report)
}

/// Runs one kernel through every path (metal included) with inputs from `seed`, adding to
/// `report`; a mismatch is shrunk as in [`run`] but not saved. For replaying saved files.
pub fn check_kernel(config: &FuzzConfig, kernel: &Kernel, seed: u64, report: &mut FuzzReport) {
    let env = Environment::probe();
    report.kernels += 1;
    check_and_shrink(config, &env, kernel, seed, true, report);
}

/// Reads a saved `.rfx` file (its `# seed: N` header line gives the inputs' seed, 0 without
/// one) and runs it through every path with [`check_kernel`].
pub fn replay_file(config: &FuzzConfig, path: &Path, report: &mut FuzzReport) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let kernel = hir::parse(&text)
        .map_err(|e| anyhow::anyhow!("{}:{}:{}: {}", path.display(), e.line, e.col, e.message))?;
    let seed = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("# seed:"))
        .find_map(|s| s.trim().parse().ok())
        .unwrap_or(0);
    check_kernel(config, &kernel, seed, report);
    Ok(())
}

/// The greedy shrinker: returns the smallest kernel it finds for which `fails` still holds
/// (`kernel` itself when nothing smaller does), trying at most `max_attempts` candidates.
///
/// Candidates, repeated until none is kept: keep a single output; replace every use of a node
/// by one of its operands of the same type, or by an input of the same type; drop unused
/// inputs. Each candidate is compacted (dead nodes removed) and verified before `fails` sees it.
pub fn shrink(kernel: &Kernel, max_attempts: usize, fails: &mut dyn FnMut(&Kernel) -> bool) -> Kernel {
    let mut best = kernel.clone();
    let mut attempts = 0;
    let size = |k: &Kernel| (k.op_count(), k.nodes().len(), k.outputs().len());
    'outer: loop {
        for candidate in shrink_candidates(&best) {
            if attempts >= max_attempts {
                break 'outer;
            }
            if size(&candidate) >= size(&best) {
                continue;
            }
            attempts += 1;
            if fails(&candidate) {
                best = candidate;
                continue 'outer;
            }
        }
        break;
    }
    best
}

/// What the run can use, found once.
struct Environment {
    metal: Result<&'static dyn Backend, String>,
    cuda: Result<&'static dyn Backend, String>,
}

impl Environment {
    fn probe() -> Environment {
        Environment {
            metal: metal_backend().and_then(|b| match b.check_available() {
                Ok(()) => Ok(b),
                Err(_) => Err("no adapter".to_string()),
            }),
            cuda: cuda_backend().and_then(|b| match b.check_available() {
                Ok(()) => Ok(b),
                Err(_) => Err("no GPU".to_string()),
            }),
        }
    }
}

#[cfg(feature = "metal")]
fn metal_backend() -> Result<&'static dyn Backend, String> {
    Ok(&rfx_codegen_metal::MetalBackend)
}

#[cfg(not(feature = "metal"))]
fn metal_backend() -> Result<&'static dyn Backend, String> {
    Err("not built (feature `metal`)".to_string())
}

#[cfg(feature = "cuda")]
fn cuda_backend() -> Result<&'static dyn Backend, String> {
    Ok(&rfx_codegen_cuda::CudaBackend)
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend() -> Result<&'static dyn Backend, String> {
    Err("not built (feature `cuda`)".to_string())
}

fn fuzz_seed(config: &FuzzConfig, env: &Environment, seed: u64, report: &mut FuzzReport) {
    report.kernels += 1;
    let with_metal = config.metal_every > 0 && seed.is_multiple_of(config.metal_every);
    if config.large {
        check_large(env, seed, with_metal, report);
        return;
    }
    let kernel = kernel_for_seed(seed);
    check_and_shrink(config, env, &kernel, seed, with_metal, report);
}

/// Large-kernel mode's kernel of `seed`: 1,000 to 20,000 ops in `f32` or `f64`, 1 to 70
/// elements (a kernel's frame and staging depend on its length in ops, not elements; lengths
/// from 2 run the CPU's tiled code, 1 its straight-line code).
pub fn large_kernel_for_seed(seed: u64) -> Kernel {
    let mut rng = TestRng::new(seed ^ 0x1a7e_6e4e_11a1_c0de);
    let ops = 1_000 + rng.below(19_001);
    let dtype = if rng.chance(0.5) { DType::F32 } else { DType::F64 };
    let len = 1 + rng.below(70);
    rfx_ir::testgen::transcendental_kernel(&mut rng, ops, dtype, len, "large")
}

/// Large-kernel mode ([`FuzzConfig::large`]): the kernel of `seed` on every backend against the
/// LIR interpreter, within the mode's tolerances. A mismatch is recorded whole (not shrunk).
fn check_large(env: &Environment, seed: u64, with_metal: bool, report: &mut FuzzReport) {
    let kernel = large_kernel_for_seed(seed);
    let ops = kernel.op_count();
    let mismatch = |report: &mut FuzzReport, path: &str, description: String| {
        report.mismatches.push(Mismatch {
            seed,
            path: path.to_string(),
            description,
            kernel: kernel.to_string(),
            ops_before_after: (ops, ops),
            saved: None,
        });
    };
    let inputs = random_inputs(&mut TestRng::new(seed), &kernel, SPECIAL_RATE);
    let views: Vec<ArrayView<'_>> = inputs.iter().map(Array::view).collect();
    let reference = lower_kernel(&kernel).and_then(|(lir, _)| {
        run_lir(&lir, &views, Mode::Native)
            .map(|outputs| (lir, outputs))
            .map_err(|e| format!("interpreter: {}", one_line(&e)))
    });
    let (lir, expected) = match reference {
        Ok(found) => found,
        Err(description) => return mismatch(report, "lir-interp", description),
    };
    report.compared("lir-interp");
    let backends: [(&str, Result<&'static dyn Backend, String>); 3] = [
        ("cpu", Ok(&rfx_codegen_cpu::CpuBackend as &'static dyn Backend)),
        (
            "metal",
            if with_metal {
                env.metal.clone()
            } else {
                Err("not this seed (--metal-every)".to_string())
            },
        ),
        ("cuda", env.cuda.clone()),
    ];
    for (path, backend) in backends {
        let backend = match backend {
            Ok(backend) => backend,
            Err(reason) => {
                report.skip(path, reason);
                continue;
            }
        };
        match run_backend(backend, &lir, &views, false) {
            Ok((got, _)) => match large_difference(&expected, &got) {
                None => report.compared(path),
                Some(description) => mismatch(report, path, description),
            },
            Err(BackendError::Unsupported { what, .. }) => report.skip(path, format!("unsupported: {what}")),
            Err(e) => mismatch(report, path, one_line(&e)),
        }
    }
}

/// The first element where `got` differs from `expected` by more than large-kernel mode's
/// tolerance (any NaN equals any NaN; infinities must match exactly).
fn large_difference(expected: &[Array], got: &[Array]) -> Option<String> {
    for (k, (want, have)) in expected.iter().zip(got).enumerate() {
        if want.shape() != have.shape() || want.dtype() != have.dtype() {
            return Some(format!(
                "output {k}: {} {} instead of {} {}",
                have.dtype(),
                have.shape(),
                want.dtype(),
                want.shape()
            ));
        }
        let tolerance = if want.dtype() == DType::F64 {
            LARGE_TOLERANCE_F64
        } else {
            LARGE_TOLERANCE_F32
        };
        for i in 0..want.data().len() {
            let (a, b) = (
                have.get(i).map_or(f64::NAN, |v| v.to_f64()),
                want.get(i).map_or(f64::NAN, |v| v.to_f64()),
            );
            let close = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tolerance;
            if !close {
                return Some(format!(
                    "output {k}, element {i}: {a} instead of {b} (tolerance {tolerance})"
                ));
            }
        }
    }
    None
}

/// The kernel of `seed`: a generator configuration drawn from the seed, then dimension sizes
/// remapped (to 0, odd sizes, sizes around the vector widths, now and then a GPU-tree size),
/// then now and then a `vmap` of it.
fn kernel_for_seed(seed: u64) -> Kernel {
    // The generator's stream is decorrelated from the inputs' (`TestRng::new(seed)`).
    let mut rng = TestRng::new(seed ^ 0x5eed_f022_a11c_0de5);
    let float_dtypes = match rng.below(4) {
        0 => vec![DType::F64],
        1 => vec![DType::F32, DType::F64],
        _ => vec![DType::F32],
    };
    let config = KernelGenConfig {
        max_ops: 1 + rng.below(20),
        max_inputs: 1 + rng.below(4),
        max_outputs: 1 + rng.below(3),
        max_rank: rng.below(4),
        max_dim: 2 + rng.below(3),
        float_dtypes,
        allow_int_bool: rng.chance(0.8),
        allow_reductions: rng.chance(0.75),
        allow_broadcast: rng.chance(0.7),
        allow_index: rng.chance(0.5),
        allow_literal: rng.chance(0.5),
        allow_window: rng.chance(0.5),
        allow_gather: rng.chance(0.4),
        allow_scan: rng.chance(0.4),
    };
    let mut kernel = random_kernel(&mut rng, &config, "fuzz");
    // Most generated kernels hold a transcendental op, whose values are not compared: in two
    // kernels of three each one is replaced by an exactly rounded op of the same dtype.
    if rng.chance(0.67) {
        let exact = rebuild(&kernel, &[], &mut |op: &Op, dtype: DType| {
            exact_op(&mut rng, op, dtype)
        });
        kernel = exact.unwrap_or(kernel);
    }
    if !rng.chance(0.4) {
        let large = rng.chance(0.08);
        let map: Vec<usize> = (0..=config.max_dim)
            .map(|d| match d {
                0 | 1 => d,
                _ if large => *rng.pick(&LARGE_DIMS).unwrap_or(&d),
                _ => *rng.pick(&INTERESTING_DIMS).unwrap_or(&d),
            })
            .collect();
        kernel = rebuild(&kernel, &map, &mut |op: &Op, _: DType| op.clone()).unwrap_or(kernel);
    }
    // One kernel in ten is batched by `vmap`: inputs batched on random axes (moved to the front
    // by transposes), unit axes reshaped in, unbatched outputs broadcast; shapes the generator
    // seldom makes.
    if rng.chance(0.1) {
        let mut in_axes: Vec<Option<usize>> = kernel
            .inputs()
            .map(|(_, _, ty)| rng.chance(0.7).then(|| rng.below(ty.shape.rank() + 1)))
            .collect();
        if let Some(first) = in_axes.first_mut() {
            first.get_or_insert(0);
        }
        let size = *rng.pick(&[1, 2, 3, 5, 8, 17]).unwrap_or(&2);
        if let Ok(batched) = rfx_autodiff::vmap(&kernel, &in_axes, size) {
            kernel = batched;
        }
    }
    kernel
}

/// `op` itself, or an exactly rounded op accepting `dtype` in place of a transcendental one.
fn exact_op(rng: &mut TestRng, op: &Op, dtype: DType) -> Op {
    match op {
        Op::Unary(u) if u.is_transcendental() => {
            let exact: Vec<UnaryOp> = UnaryOp::ALL
                .iter()
                .copied()
                .filter(|e| !e.is_transcendental() && e.accepts(dtype))
                .collect();
            rng.pick(&exact).map_or_else(|| op.clone(), |&e| Op::Unary(e))
        }
        Op::Binary(BinaryOp::Pow | BinaryOp::Atan2) => {
            let exact: Vec<BinaryOp> = BinaryOp::ALL
                .iter()
                .copied()
                .filter(|e| !matches!(e, BinaryOp::Pow | BinaryOp::Atan2) && e.accepts(dtype))
                .collect();
            rng.pick(&exact).map_or_else(|| op.clone(), |&e| Op::Binary(e))
        }
        _ => op.clone(),
    }
}

/// `kernel` rebuilt and type-checked with every dimension of size `d` replaced by `map[d]`
/// (sizes beyond `map` kept; 1 stays 1, so broadcasting is kept) and every op by
/// `replace_op(op, dtype of its first operand)`; `None` when a node no longer types or grew
/// too big.
fn rebuild(kernel: &Kernel, map: &[usize], replace_op: &mut dyn FnMut(&Op, DType) -> Op) -> Option<Kernel> {
    let map_dims =
        |dims: &[usize]| -> Vec<usize> { dims.iter().map(|&d| map.get(d).copied().unwrap_or(d)).collect() };
    let mut b = Builder::new(kernel.name());
    let mut ids: Vec<ValueId> = Vec::with_capacity(kernel.nodes().len());
    for node in kernel.nodes() {
        let args: Vec<ValueId> = node.args.iter().map(|a| ids[a.index()]).collect();
        let value = match &node.op {
            Op::Input { name } => b
                .input(
                    name.clone(),
                    TensorType::new(node.ty.dtype, map_dims(node.ty.shape.dims())),
                )
                .ok()?,
            Op::Const(value) => b.constant(*value, map_dims(node.ty.shape.dims())),
            Op::Cast => b.cast(args[0], node.ty.dtype).ok()?,
            Op::Iota { axis } => b
                .iota(node.ty.dtype, map_dims(node.ty.shape.dims()), *axis)
                .ok()?,
            // The values repeat to fill the new element count.
            Op::Literal(values) => {
                let ty = TensorType::new(node.ty.dtype, map_dims(node.ty.shape.dims()));
                let n = ty.shape.numel();
                if n > MAX_RESIZED_NUMEL {
                    return None;
                }
                let values = if values.is_empty() {
                    vec![Scalar::zero(ty.dtype); n]
                } else {
                    values.iter().copied().cycle().take(n).collect()
                };
                b.literal_values(ty, values).ok()?
            }
            Op::BroadcastTo => b.broadcast_to(args[0], map_dims(node.ty.shape.dims())).ok()?,
            Op::Reshape => {
                let numel = b.value_type(args[0]).ok()?.shape.numel();
                let dims = node.ty.shape.dims();
                let non_unit: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] != 1).collect();
                // The generator reshapes to `[numel]` or `[1, numel]`: the one non-unit
                // dimension (or the last) takes the new element count.
                let mut to = dims.to_vec();
                match non_unit.as_slice() {
                    [i] => to[*i] = numel,
                    [] => {
                        if let Some(last) = to.last_mut() {
                            *last = numel;
                        }
                    }
                    _ => to = map_dims(dims),
                }
                b.reshape(args[0], to).ok()?
            }
            // A window spanning its operand spans the resized operand; another keeps its start
            // where it still fits.
            Op::Slice { starts } => {
                let old = kernel.value_type(*node.args.first()?)?.shape.dims().to_vec();
                let new = b.value_type(args[0]).ok()?.shape.dims().to_vec();
                let (mut at, mut window) = (Vec::new(), Vec::new());
                for (((&s, &w), &d), &n) in starts.iter().zip(node.ty.shape.dims()).zip(&old).zip(&new) {
                    let w = if w == d {
                        n
                    } else {
                        map.get(w).copied().unwrap_or(w).min(n)
                    };
                    at.push(s.min(n - w));
                    window.push(w);
                }
                b.slice(args[0], &at, window).ok()?
            }
            // Zeros as before around the resized operand, out to the resized extent when it
            // still holds them.
            Op::Pad { low } => {
                let old = kernel.value_type(*node.args.first()?)?.shape.dims().to_vec();
                let new = b.value_type(args[0]).ok()?.shape.dims().to_vec();
                let dims: Vec<usize> = low
                    .iter()
                    .zip(node.ty.shape.dims())
                    .zip(old.iter().zip(&new))
                    .map(|((&l, &p), (&d, &n))| {
                        let mapped = map.get(p).copied().unwrap_or(p);
                        if mapped >= l + n {
                            mapped
                        } else {
                            l + n + (p - l - d)
                        }
                    })
                    .collect();
                b.pad(args[0], low, dims).ok()?
            }
            op => {
                let dtype = b.value_type(*args.first()?).ok()?.dtype;
                b.op(replace_op(op, dtype), &args).ok()?
            }
        };
        if b.value_type(value).ok()?.shape.numel() > MAX_RESIZED_NUMEL {
            return None;
        }
        ids.push(value);
    }
    for output in kernel.outputs() {
        b.output(output.name.clone(), ids[output.value.index()]).ok()?;
    }
    b.finish().ok()
}

/// Checks `kernel` on every path; a mismatch is shrunk and recorded in `report`.
fn check_and_shrink(
    config: &FuzzConfig,
    env: &Environment,
    kernel: &Kernel,
    seed: u64,
    with_metal: bool,
    report: &mut FuzzReport,
) {
    let paths = PathSet {
        hir: true,
        cpu: true,
        metal: with_metal,
        cuda: true,
    };
    let found = check(config, env, kernel, seed, paths, Some(&mut *report));
    for (path, description) in found {
        let only = PathSet::only(&path);
        let mut fails = |candidate: &Kernel| {
            check(config, env, candidate, seed, only, None)
                .iter()
                .any(|(p, _)| *p == path)
        };
        let shrunk = shrink(kernel, config.max_shrink_attempts, &mut fails);
        let description = check(config, env, &shrunk, seed, only, None)
            .into_iter()
            .find(|(p, _)| *p == path)
            .map_or(description, |(_, d)| d);
        report.mismatches.push(Mismatch {
            seed,
            path,
            description,
            kernel: shrunk.to_string(),
            ops_before_after: (kernel.op_count(), shrunk.op_count()),
            saved: None,
        });
    }
}

/// Which paths to run; the reference (`lir-interp`) always runs.
#[derive(Clone, Copy, Debug)]
struct PathSet {
    hir: bool,
    cpu: bool,
    metal: bool,
    cuda: bool,
}

impl PathSet {
    /// Only the path named `path` (and the reference).
    fn only(path: &str) -> PathSet {
        PathSet {
            hir: path == "hir-interp",
            cpu: path == "cpu",
            metal: path == "metal",
            cuda: path == "cuda",
        }
    }
}

/// What a kernel contains that limits comparisons.
struct Traits {
    transcendental: bool,
    float_reduction: bool,
    /// Per output (in kernel order): whether a float reduction feeds it.
    output_after_float_reduction: Vec<bool>,
}

fn traits_of(kernel: &Kernel) -> Traits {
    let nodes = kernel.nodes();
    let is_float_reduction = |n: &Node| matches!(n.op, Op::Reduce { .. }) && n.ty.dtype.is_float();
    // after[i]: a float reduction is node i or one of its ancestors.
    let mut after = vec![false; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        let fed = is_float_reduction(node) || node.args.iter().any(|a| after[a.index()]);
        after[i] = fed;
    }
    Traits {
        transcendental: nodes.iter().any(|n| match &n.op {
            Op::Unary(u) => u.is_transcendental(),
            Op::Binary(b) => matches!(b, BinaryOp::Pow | BinaryOp::Atan2),
            _ => false,
        }),
        float_reduction: nodes.iter().any(is_float_reduction),
        output_after_float_reduction: kernel
            .outputs()
            .iter()
            .map(|o| after.get(o.value.index()).copied().unwrap_or(true))
            .collect(),
    }
}

/// Whether a kernel of `lir` reduces enough points per output to run as a GPU tree.
fn uses_gpu_tree(lir: &LirProgram) -> bool {
    lir.kernels().iter().any(|k| {
        let split = k.dims.len() - k.reduce_dims;
        k.reduce_dims > 0 && k.dims[split..].iter().product::<usize>() >= GPU_TREE_MIN_POINTS
    })
}

/// Runs `kernel` on the paths of `paths` with the inputs of `seed`; returns the mismatches as
/// `(path, description)`, and counts comparisons and skips into `report` when given.
fn check(
    config: &FuzzConfig,
    env: &Environment,
    kernel: &Kernel,
    seed: u64,
    paths: PathSet,
    mut report: Option<&mut FuzzReport>,
) -> Vec<(String, String)> {
    let mut mismatches = Vec::new();
    let mut count = |path: &str, what: Option<String>| {
        if let Some(report) = report.as_deref_mut() {
            match what {
                None => report.compared(path),
                Some(reason) => report.skip(path, reason),
            }
        }
    };
    if let Some(describe) = config.inject
        && let Some(description) = describe(kernel)
    {
        mismatches.push(("injected".to_string(), description));
    }
    let inputs = random_inputs(&mut TestRng::new(seed), kernel, SPECIAL_RATE);
    let views: Vec<ArrayView<'_>> = inputs.iter().map(Array::view).collect();
    let traits = traits_of(kernel);
    let probed = if traits.transcendental {
        probe(kernel)
    } else {
        None
    };
    let mut within_bounds_paths = Vec::new();

    let (lir, refined) = match lower_kernel(kernel) {
        Ok(lowered) => lowered,
        Err(e) => {
            mismatches.push(("lower".to_string(), one_line(&e)));
            return mismatches;
        }
    };
    let named: Vec<(&str, ArrayView<'_>)> = kernel
        .inputs()
        .map(|(_, name, _)| name)
        .zip(views.iter().copied())
        .collect();
    let lir_inputs = match order_inputs(&lir, &named) {
        Ok(ordered) => ordered,
        Err(e) => {
            mismatches.push(("lower".to_string(), format!("the LIR's inputs: {e}")));
            return mismatches;
        }
    };
    let reference = match run_lir(&lir, &lir_inputs, Mode::Native) {
        Ok(outputs) => outputs,
        Err(e) => {
            mismatches.push(("lir-interp".to_string(), one_line(&e)));
            return mismatches;
        }
    };
    let output_names: Vec<&str> = lir.outputs().map(|(_, name, _)| name).collect();
    count("lir-interp", None);

    if paths.hir {
        match run_hir(kernel, &views, Mode::Native) {
            Err(e) => mismatches.push(("hir-interp".to_string(), one_line(&e))),
            Ok(_) if refined => count(
                "hir-interp",
                Some("refined by the optimiser (pow(x, 2) -> x * x): ran only".into()),
            ),
            Ok(_) if traits.float_reduction => count(
                "hir-interp",
                Some("float reduction (lane order): ran only".into()),
            ),
            Ok(got) => {
                // Match the HIR's outputs to the LIR's by name.
                let by_name: Vec<(&str, &Array)> = kernel
                    .outputs()
                    .iter()
                    .map(|o| o.name.as_str())
                    .zip(&got)
                    .collect();
                let mut differs = None;
                for (name, expected) in output_names.iter().zip(&reference) {
                    match by_name.iter().find(|(n, _)| n == name) {
                        None => differs = Some(format!("output `{name}` missing from the HIR")),
                        Some((_, g)) => {
                            if let Some(d) = first_difference(expected, g) {
                                differs = Some(format!("output `{name}`: {d} (LIR interpreter vs HIR)"));
                            }
                        }
                    }
                    if differs.is_some() {
                        break;
                    }
                }
                match differs {
                    Some(d) => mismatches.push(("hir-interp".to_string(), d)),
                    None => count("hir-interp", None),
                }
            }
        }
    }

    let backends: [(&str, bool, Result<&'static dyn Backend, String>); 3] = [
        (
            "cpu",
            paths.cpu,
            Ok(&rfx_codegen_cpu::CpuBackend as &'static dyn Backend),
        ),
        (
            "metal",
            paths.metal,
            env.metal.as_ref().map(|b| *b).map_err(Clone::clone),
        ),
        (
            "cuda",
            paths.cuda,
            env.cuda.as_ref().map(|b| *b).map_err(Clone::clone),
        ),
    ];
    for (path, wanted, backend) in backends {
        if !wanted {
            if path == "metal" {
                count(path, Some("not sampled (--metal-every)".into()));
            }
            continue;
        }
        let backend = match backend {
            Ok(backend) => backend,
            Err(reason) => {
                count(path, Some(reason));
                continue;
            }
        };
        let tree = path != "cpu" && uses_gpu_tree(&lir);
        let repeat = traits.transcendental || tree;
        let (got, again) = match run_backend(backend, &lir, &lir_inputs, repeat) {
            Ok(results) => results,
            Err(BackendError::Unsupported { what, .. }) => {
                count(path, Some(format!("unsupported: {what}")));
                continue;
            }
            Err(e) => {
                mismatches.push((path.to_string(), one_line(&e)));
                continue;
            }
        };
        if let Some(again) = &again {
            let nondeterministic = output_names
                .iter()
                .zip(got.iter().zip(again))
                .find_map(|(name, (a, b))| first_difference(a, b).map(|d| format!("output `{name}`: {d}")));
            if let Some(d) = nondeterministic {
                mismatches.push((path.to_string(), format!("two calls differ: {d}")));
                continue;
            }
        }
        if traits.transcendental {
            let Some(probed) = &probed else {
                count(path, Some("transcendental: ran twice, same bits".into()));
                continue;
            };
            match within_bounds(backend, path != "cpu", probed, kernel, &inputs) {
                Err(d) => mismatches.push((path.to_string(), d)),
                Ok(Bounded::Unsupported(reason)) => count(path, Some(reason)),
                Ok(Bounded::Compared { checked, reasons }) => {
                    if checked {
                        within_bounds_paths.push(path);
                    }
                    for reason in reasons {
                        count(path, Some(reason));
                    }
                    count(path, None);
                }
            }
            continue;
        }
        let mut differs = None;
        let (mut partial, mut compared_any) = (false, false);
        for (i, (name, (expected, g))) in output_names.iter().zip(reference.iter().zip(&got)).enumerate() {
            // The LIR's outputs follow the kernel's (by name; see `traits_of`).
            let index = kernel.outputs().iter().position(|o| o.name == *name).unwrap_or(i);
            if tree
                && traits
                    .output_after_float_reduction
                    .get(index)
                    .copied()
                    .unwrap_or(true)
            {
                partial = true;
                continue;
            }
            compared_any = true;
            if let Some(d) = first_difference(expected, g) {
                differs = Some(format!("output `{name}`: {d} (LIR interpreter vs {path})"));
                break;
            }
        }
        match differs {
            Some(d) => mismatches.push((path.to_string(), d)),
            None => {
                if partial {
                    count(
                        path,
                        Some("GPU tree: float-reduction outputs not compared".into()),
                    );
                }
                if compared_any || output_names.is_empty() {
                    count(path, None);
                }
            }
        }
    }
    if let Some(report) = report {
        for path in within_bounds_paths {
            report.within_bounds(path);
        }
    }
    mismatches
}

/// A kernel with transcendental ops prepared for the bound-aware comparison: the backend runs
/// `instrumented`, which also outputs each transcendental node's value and operands; the HIR
/// interpreter runs `cut`, where those values are inputs, so that everything but the
/// transcendental ops themselves is compared bit for bit.
struct Probed {
    /// The kernel plus the outputs `__t{k}` (transcendental node `k`) and `__a{k}_{j}` (its
    /// operand `j`, broadcast to the node's shape).
    instrumented: Kernel,
    /// The kernel with transcendental node `k` replaced by an input `__t{k}`; its outputs are
    /// the kernel's, then the `__a{k}_{j}`.
    cut: Kernel,
    /// Per transcendental node: the op and its dtype.
    ops: Vec<(Transcendental, DType)>,
    /// Outputs of `cut` that a float reduction feeds: their rounding depends on the lane order,
    /// so they are compared with the LIR interpreter's, not the HIR's (see the module
    /// documentation).
    after_float_reduction: Vec<String>,
}

fn transcendental_of(op: &Op) -> Option<Transcendental> {
    match op {
        Op::Unary(u) => Transcendental::unary(*u),
        Op::Binary(b) => Transcendental::binary(*b),
        _ => None,
    }
}

/// `kernel` prepared for [`within_bounds`]; `None` when the extra names clash or a kernel does
/// not verify.
fn probe(kernel: &Kernel) -> Option<Probed> {
    let nodes = kernel.nodes();
    let mut after = vec![false; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        let reduces = matches!(node.op, Op::Reduce { .. }) && node.ty.dtype.is_float();
        after[i] = reduces || node.args.iter().any(|a| after[a.index()]);
    }
    let mut instrumented_nodes = nodes.to_vec();
    let mut cut_nodes = nodes.to_vec();
    let mut instrumented_outputs = kernel.outputs().to_vec();
    let mut cut_outputs = kernel.outputs().to_vec();
    let mut after_float_reduction: Vec<String> = kernel
        .outputs()
        .iter()
        .filter(|o| after[o.value.index()])
        .map(|o| o.name.clone())
        .collect();
    let mut ops = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        let Some(op) = transcendental_of(&node.op) else {
            continue;
        };
        let k = ops.len();
        ops.push((op, node.ty.dtype));
        let t_name = format!("__t{k}");
        instrumented_outputs.push(Output {
            name: t_name.clone(),
            value: ValueId::new(index),
        });
        cut_nodes[index] = Node {
            op: Op::Input { name: t_name },
            args: Vec::new(),
            ty: node.ty.clone(),
        };
        for (j, arg) in node.args.iter().enumerate() {
            let arg_ty = &nodes[arg.index()].ty;
            let name = format!("__a{k}_{j}");
            let mut value = *arg;
            if arg_ty.shape != node.ty.shape {
                let broadcast = Node {
                    op: Op::BroadcastTo,
                    args: vec![*arg],
                    ty: TensorType::new(arg_ty.dtype, node.ty.shape.dims().to_vec()),
                };
                value = ValueId::new(instrumented_nodes.len());
                instrumented_nodes.push(broadcast.clone());
                cut_nodes.push(broadcast);
            }
            instrumented_outputs.push(Output {
                name: name.clone(),
                value,
            });
            cut_outputs.push(Output {
                name: name.clone(),
                value,
            });
            if after[arg.index()] {
                after_float_reduction.push(name);
            }
        }
    }
    let instrumented = Kernel::from_parts(kernel.name(), instrumented_nodes, instrumented_outputs);
    let cut = Kernel::from_parts(kernel.name(), cut_nodes, cut_outputs);
    hir::verify(&instrumented).ok()?;
    hir::verify(&cut).ok()?;
    Some(Probed {
        instrumented,
        cut,
        ops,
        after_float_reduction,
    })
}

/// What [`within_bounds`] compared.
#[derive(Debug, PartialEq, Eq)]
enum Bounded {
    /// The backend does not run the kernel with its probes (more outputs than it binds).
    Unsupported(String),
    /// Compared, except for what `reasons` says (values without a documented bound, outputs
    /// after float reductions); `checked`: some transcendental value was checked against a
    /// bound.
    Compared { checked: bool, reasons: Vec<String> },
}

/// The bound-aware comparison of a kernel with transcendental ops on `backend`: runs
/// `probed.instrumented` there and requires
/// - every output and every transcendental operand to have the bits of the HIR interpreter
///   run on `probed.cut` with the backend's transcendental values (outputs a float reduction
///   feeds aside), and
/// - every transcendental value to lie within [`Backend::ulp_bound`] of the `f64` oracle at
///   the backend's own operands.
///
/// Returns what was compared, or the first difference.
fn within_bounds(
    backend: &dyn Backend,
    gpu_trees: bool,
    probed: &Probed,
    kernel: &Kernel,
    inputs: &[Array],
) -> Result<Bounded, String> {
    let by_input: Vec<(&str, &Array)> = kernel.inputs().map(|(_, name, _)| name).zip(inputs).collect();
    let named: Vec<(&str, ArrayView<'_>)> = by_input.iter().map(|(n, a)| (*n, a.view())).collect();
    let (lir, _) = lower_kernel(&probed.instrumented).map_err(|e| format!("instrumented kernel: {e}"))?;
    let ordered = order_inputs(&lir, &named).map_err(|e| format!("instrumented kernel's inputs: {e}"))?;
    let (got, _) = match run_backend(backend, &lir, &ordered, false) {
        Ok(results) => results,
        // The instrumented kernel has more outputs than the original: a size limit may only
        // apply to it.
        Err(BackendError::Unsupported { what, .. }) => {
            return Ok(Bounded::Unsupported(format!(
                "unsupported: {what} (with the probes)"
            )));
        }
        Err(e) => return Err(format!("instrumented kernel: {}", one_line(&e))),
    };
    let got: BTreeMap<&str, &Array> = lir.outputs().map(|(_, name, _)| name).zip(&got).collect();
    let output = |name: &str| {
        got.get(name)
            .copied()
            .ok_or_else(|| format!("output `{name}` missing"))
    };

    // The exact parts, given the backend's transcendental values.
    let mut cut_inputs = Vec::new();
    for (_, name, _) in probed.cut.inputs() {
        let array = match by_input.iter().find(|(n, _)| *n == name) {
            Some((_, a)) => *a,
            None => output(name)?,
        };
        cut_inputs.push(array.view());
    }
    let expected = run_hir(&probed.cut, &cut_inputs, Mode::Native)
        .map_err(|e| format!("cut kernel: {}", one_line(&e)))?;
    for (o, e) in probed.cut.outputs().iter().zip(&expected) {
        if probed.after_float_reduction.contains(&o.name) {
            continue;
        }
        if let Some(d) = first_difference(e, output(&o.name)?) {
            return Err(format!(
                "output `{}`: {d} (HIR interpreter given the backend's transcendental values)",
                o.name
            ));
        }
    }
    // What a float reduction feeds: the LIR interpreter's bits on the lowered cut, whose
    // reductions run in the lanes of the backend's (GPU trees aside).
    let mut lane_order_compared = false;
    if !probed.after_float_reduction.is_empty() && (!gpu_trees || !uses_gpu_tree(&lir)) {
        let (cut_lir, _) = lower_kernel(&probed.cut).map_err(|e| format!("cut kernel: {e}"))?;
        if let Some(cut_lir) = with_backend_lanes(&lir, &cut_lir) {
            let named_cut: Vec<(&str, ArrayView<'_>)> = probed
                .cut
                .inputs()
                .map(|(_, name, _)| name)
                .zip(cut_inputs.iter().cloned())
                .collect();
            let ordered =
                order_inputs(&cut_lir, &named_cut).map_err(|e| format!("cut kernel's inputs: {e}"))?;
            let expected = run_lir(&cut_lir, &ordered, Mode::Native)
                .map_err(|e| format!("lowered cut kernel: {}", one_line(&e)))?;
            for ((_, name, _), e) in cut_lir.outputs().zip(&expected) {
                if !probed.after_float_reduction.iter().any(|n| n == name) {
                    continue;
                }
                if let Some(d) = first_difference(e, output(name)?) {
                    return Err(format!(
                        "output `{name}`: {d} (LIR interpreter given the backend's transcendental values)"
                    ));
                }
            }
            lane_order_compared = true;
        }
    }

    // The transcendental values, at the backend's operands.
    let (mut bounded, mut unbounded) = (0u64, 0u64);
    for (k, &(op, dtype)) in probed.ops.iter().enumerate() {
        let values = output(&format!("__t{k}"))?;
        let operands = (0..op.arity())
            .map(|j| output(&format!("__a{k}_{j}")))
            .collect::<Result<Vec<_>, _>>()?;
        for i in 0..values.data().len() {
            let args: Vec<f64> = operands
                .iter()
                .map(|a| a.get(i).map_or(f64::NAN, Scalar::to_f64))
                .collect();
            let Some(bound) = backend.ulp_bound(op, dtype, &args) else {
                unbounded += 1;
                continue;
            };
            bounded += 1;
            let value = values.get(i).map_or(f64::NAN, Scalar::to_f64);
            let want = op.oracle(&args);
            let d = ulps(value, want, dtype);
            if d > bound {
                let d = if d == u64::MAX {
                    "∞".to_string()
                } else {
                    d.to_string()
                };
                return Err(format!(
                    "{}({}) ({dtype}, node __t{k}, element {i}) = {value:e}, oracle {want:e}: {d} ULP > {bound}",
                    op.name(),
                    args.iter()
                        .map(|a| format!("{a:e}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    let mut reasons = Vec::new();
    if unbounded > 0 {
        reasons.push("transcendental: values without a documented bound not compared".to_string());
    }
    if !probed.after_float_reduction.is_empty() && !lane_order_compared {
        reasons.push("transcendental: outputs after a float reduction not compared".to_string());
    }
    Ok(Bounded::Compared {
        checked: bounded > 0,
        reasons,
    })
}

/// `cut` with each reduction kernel's lanes set to those of the kernel of `lir` with the same
/// dims and reduced dims (the backend's), so that the LIR interpreter rounds its reductions as
/// the backend did: the probes' extra stores can change lowering's choice between partial lanes
/// and one accumulator. `None` when a reduction of `cut` has no such kernel, or `lir` has two
/// with different lanes.
fn with_backend_lanes(lir: &LirProgram, cut: &LirProgram) -> Option<LirProgram> {
    let mut lanes = BTreeMap::new();
    for k in lir.kernels().iter().filter(|k| k.reduce_dims > 0) {
        let key = (k.dims.clone(), k.reduce_dims);
        if *lanes.entry(key).or_insert(k.schedule.reduce_lanes) != k.schedule.reduce_lanes {
            return None;
        }
    }
    let kernels = cut
        .kernels()
        .iter()
        .cloned()
        .map(|mut k| {
            if k.reduce_dims > 0 {
                k.schedule.reduce_lanes = *lanes.get(&(k.dims.clone(), k.reduce_dims))?;
            }
            Some(k)
        })
        .collect::<Option<Vec<_>>>()?;
    Some(LirProgram::from_parts(
        cut.name(),
        cut.buffers().to_vec(),
        cut.arena_bytes(),
        cut.arena_align(),
        kernels,
    ))
}

/// The kernel optimised and lowered with the default configuration, and whether a
/// [`Exactness::Refining`] rule fired (`pow(x, 2)` → `x * x`: more accurate than `pow`, so the
/// result may differ from the HIR's within `pow`'s bound).
fn lower_kernel(kernel: &Kernel) -> Result<(LirProgram, bool), String> {
    let (mir, report) = rfx_opt::optimize(kernel, &OptConfig::default())
        .map_err(|e| format!("optimize: {}", one_line(&e)))?;
    let refining: Vec<&str> = rfx_opt::rule_table()
        .into_iter()
        .filter(|r| r.exactness == Exactness::Refining)
        .map(|r| r.name)
        .collect();
    let refined = report
        .rules_fired
        .keys()
        .any(|name| refining.contains(&name.as_str()));
    rfx_lower::lower(&mir, &LowerConfig::default())
        .map(|(lir, _)| (lir, refined))
        .map_err(|e| format!("lower: {}", one_line(&e)))
}

/// Compiles and runs `lir` once (twice with `repeat`, on the same compiled program).
fn run_backend(
    backend: &dyn Backend,
    lir: &LirProgram,
    inputs: &[ArrayView<'_>],
    repeat: bool,
) -> Result<(Vec<Array>, Option<Vec<Array>>), BackendError> {
    let compiled = backend.compile(lir, &Default::default())?;
    let mut scratch = Scratch::new();
    let mut call = || -> Result<Vec<Array>, BackendError> {
        let mut outputs: Vec<Array> = lir
            .outputs()
            .map(|(_, _, ty)| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
            .collect();
        let mut views: Vec<_> = outputs.iter_mut().map(Array::view_mut).collect();
        compiled.run(inputs, &mut views, &mut scratch)?;
        drop(views);
        Ok(outputs)
    };
    let first = call()?;
    let second = if repeat { Some(call()?) } else { None };
    Ok((first, second))
}

/// The first element where `got` differs from `expected` in bits (any NaN equals any NaN), or
/// a shape or dtype difference; `None` when they agree.
fn first_difference(expected: &Array, got: &Array) -> Option<String> {
    if expected.shape() != got.shape() || expected.dtype() != got.dtype() {
        return Some(format!(
            "type {}{} vs {}{}",
            expected.dtype(),
            expected.shape(),
            got.dtype(),
            got.shape()
        ));
    }
    let index = match (expected.data(), got.data()) {
        (ArrayData::F32(a), ArrayData::F32(b)) => a
            .iter()
            .zip(b)
            .position(|(x, y)| x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan())),
        (ArrayData::F64(a), ArrayData::F64(b)) => a
            .iter()
            .zip(b)
            .position(|(x, y)| x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan())),
        (ArrayData::I32(a), ArrayData::I32(b)) => a.iter().zip(b).position(|(x, y)| x != y),
        (ArrayData::Bool(a), ArrayData::Bool(b)) => a.iter().zip(b).position(|(x, y)| x != y),
        _ => Some(0),
    }?;
    let show = |a: &Array| a.get(index).map_or("?".to_string(), |s| format!("{s:?}"));
    Some(format!(
        "element {index} of {}: expected {}, got {}",
        expected.shape(),
        show(expected),
        show(got)
    ))
}

fn one_line(error: &dyn fmt::Display) -> String {
    error.to_string().lines().next().unwrap_or("").to_string()
}

/// Every one-step simplification of `kernel` that still verifies, compacted.
fn shrink_candidates(kernel: &Kernel) -> Vec<Kernel> {
    let mut candidates = Vec::new();
    let outputs = kernel.outputs();
    if outputs.len() > 1 {
        for output in outputs {
            candidates.extend(compact(
                kernel.nodes(),
                std::slice::from_ref(output),
                kernel.name(),
                true,
            ));
        }
    }
    let nodes = kernel.nodes();
    let inputs: Vec<ValueId> = kernel.inputs().map(|(v, _, _)| v).collect();
    // Later nodes first: replacing a node near the outputs removes the most.
    for (index, node) in nodes.iter().enumerate().rev() {
        if matches!(node.op, Op::Input { .. }) {
            continue;
        }
        let replacements = node
            .args
            .iter()
            .chain(&inputs)
            .copied()
            .filter(|r| r.index() < index && nodes[r.index()].ty == node.ty);
        let mut seen = Vec::new();
        for replacement in replacements {
            if seen.contains(&replacement) {
                continue;
            }
            seen.push(replacement);
            let replace = |v: ValueId| if v.index() == index { replacement } else { v };
            let new_nodes: Vec<Node> = nodes
                .iter()
                .map(|n| Node {
                    op: n.op.clone(),
                    args: n.args.iter().map(|&a| replace(a)).collect(),
                    ty: n.ty.clone(),
                })
                .collect();
            let new_outputs: Vec<Output> = outputs
                .iter()
                .map(|o| Output {
                    name: o.name.clone(),
                    value: replace(o.value),
                })
                .collect();
            candidates.extend(compact(&new_nodes, &new_outputs, kernel.name(), true));
        }
    }
    candidates.extend(compact(nodes, outputs, kernel.name(), false));
    candidates
}

/// The kernel of `nodes` and `outputs` without the nodes the outputs do not need (unused
/// inputs kept with `keep_inputs`), renumbered; `None` when it does not verify.
fn compact(nodes: &[Node], outputs: &[Output], name: &str, keep_inputs: bool) -> Option<Kernel> {
    let mut live = vec![false; nodes.len()];
    for output in outputs {
        *live.get_mut(output.value.index())? = true;
    }
    for index in (0..nodes.len()).rev() {
        let is_input = matches!(nodes[index].op, Op::Input { .. });
        if live[index] || (keep_inputs && is_input) {
            live[index] = true;
            for arg in &nodes[index].args {
                *live.get_mut(arg.index())? = true;
            }
        }
    }
    let mut new_id = vec![None; nodes.len()];
    let mut kept = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        if !live[index] {
            continue;
        }
        let args = node
            .args
            .iter()
            .map(|a| new_id[a.index()])
            .collect::<Option<Vec<ValueId>>>()?;
        new_id[index] = Some(ValueId::new(kept.len()));
        kept.push(Node {
            op: node.op.clone(),
            args,
            ty: node.ty.clone(),
        });
    }
    let outputs = outputs
        .iter()
        .map(|o| {
            Some(Output {
                name: o.name.clone(),
                value: new_id[o.value.index()]?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let kernel = Kernel::from_parts(name, kept, outputs);
    hir::verify(&kernel).ok()?;
    Some(kernel)
}

/// Writes `mismatch` as `<dir>/<path>_<seed>.rfx`: a `#` header, then the shrunk kernel.
fn save(dir: &Path, mismatch: &Mismatch) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = dir.join(format!("{}_{}.rfx", mismatch.path, mismatch.seed));
    let text = format!(
        "# rfx fuzz regression (`rfx fuzz`; replayed by crates/rfx-cli/tests/fuzz.rs).\n\
         # seed: {}\n# path: {}\n# differed: {}\n# inputs: random_inputs(&mut TestRng::new(seed), &kernel, {SPECIAL_RATE})\n{}",
        mismatch.seed,
        mismatch.path,
        mismatch.description.replace('\n', " "),
        mismatch.kernel
    );
    crate::output::write_file(&file, |out| out.write_all(text.as_bytes()))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rfx_ir::lir::LirProgram;
    use rfx_ir::{ArrayView, ArrayViewMut, DataMut, ReduceOp, Shape};
    use rfx_lower::{CompileOptions, Compiled};

    use super::*;

    /// The CPU backend with the first element of the named outputs moved by `ulps` ULP after
    /// each call, and a bound of `bound` ULP for every transcendental: a backend with a known
    /// defect.
    struct Faulty {
        outputs: &'static [&'static str],
        ulps: u32,
        bound: u64,
    }

    struct FaultyCompiled {
        inner: Arc<dyn Compiled>,
        outputs: Vec<usize>,
        ulps: u32,
    }

    impl Backend for Faulty {
        fn name(&self) -> &'static str {
            "faulty"
        }

        fn check_available(&self) -> Result<(), BackendError> {
            Ok(())
        }

        fn compile(
            &self,
            program: &LirProgram,
            options: &CompileOptions,
        ) -> Result<Arc<dyn Compiled>, BackendError> {
            Ok(Arc::new(FaultyCompiled {
                inner: rfx_codegen_cpu::CpuBackend.compile(program, options)?,
                outputs: program
                    .outputs()
                    .enumerate()
                    .filter(|(_, (_, name, _))| self.outputs.contains(name))
                    .map(|(i, _)| i)
                    .collect(),
                ulps: self.ulps,
            }))
        }

        fn ulp_bound(&self, _: Transcendental, _: DType, _: &[f64]) -> Option<u64> {
            Some(self.bound)
        }
    }

    impl Compiled for FaultyCompiled {
        fn backend(&self) -> &'static str {
            "faulty"
        }

        fn program(&self) -> &LirProgram {
            self.inner.program()
        }

        fn run(
            &self,
            inputs: &[ArrayView<'_>],
            outputs: &mut [ArrayViewMut<'_>],
            scratch: &mut Scratch,
        ) -> Result<(), BackendError> {
            self.inner.run(inputs, outputs, scratch)?;
            for &i in &self.outputs {
                if let Some(DataMut::F32(values)) = outputs.get_mut(i).map(ArrayViewMut::data_mut)
                    && let Some(first) = values.first_mut()
                {
                    *first = f32::from_bits(first.to_bits() + self.ulps);
                }
            }
            Ok(())
        }
    }

    /// `y = sin(x) * 3 + x` on 4096 values in about [-10, 10], and its probe.
    fn sine_kernel() -> (Kernel, Vec<Array>, Probed) {
        let mut b = Builder::new("sine");
        let x = b.input("x", TensorType::new(DType::F32, [4096])).expect("input");
        let s = b.unary(UnaryOp::Sin, x).expect("sin");
        let three = b.constant(Scalar::F32(3.0), [4096]);
        let m = b.binary(BinaryOp::Mul, s, three).expect("mul");
        let y = b.binary(BinaryOp::Add, m, x).expect("add");
        b.output("y", y).expect("output");
        let kernel = b.finish().expect("kernel");
        let mut rng = TestRng::new(7);
        let x: Vec<f32> = (0..4096).map(|_| rng.uniform(-10.0, 10.0) as f32).collect();
        let inputs = vec![Array::new(Shape::from(vec![4096]), ArrayData::F32(x)).expect("array")];
        let probed = probe(&kernel).expect("probe");
        (kernel, inputs, probed)
    }

    #[test]
    fn the_probe_cuts_at_each_transcendental() {
        let (_, _, probed) = sine_kernel();
        assert_eq!(
            probed.ops,
            vec![(Transcendental::Unary(UnaryOp::Sin), DType::F32)]
        );
        let names = |k: &Kernel| k.outputs().iter().map(|o| o.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&probed.instrumented), ["y", "__t0", "__a0_0"]);
        assert_eq!(names(&probed.cut), ["y", "__a0_0"]);
        let inputs: Vec<&str> = probed.cut.inputs().map(|(_, name, _)| name).collect();
        assert_eq!(inputs, ["x", "__t0"]);
        assert!(probed.after_float_reduction.is_empty());
    }

    #[test]
    fn the_cpu_backend_is_within_its_bounds() {
        let (kernel, inputs, probed) = sine_kernel();
        let outcome = within_bounds(&rfx_codegen_cpu::CpuBackend, false, &probed, &kernel, &inputs);
        let expected = Bounded::Compared {
            checked: true,
            reasons: Vec::new(),
        };
        assert_eq!(outcome, Ok(expected));
    }

    #[test]
    fn a_bound_tighter_than_the_routines_is_caught() {
        // The CPU's `sin` is not correctly rounded everywhere (1 ULP measured): 0 ULP fails.
        let (kernel, inputs, probed) = sine_kernel();
        let strict = Faulty {
            outputs: &[],
            ulps: 0,
            bound: 0,
        };
        let error = within_bounds(&strict, false, &probed, &kernel, &inputs).expect_err("1 ULP > 0");
        assert!(
            error.starts_with("sin(") && error.ends_with("1 ULP > 0"),
            "{error}"
        );
    }

    #[test]
    fn a_wrong_transcendental_value_is_caught() {
        // `y = sin(x)`: the output and the probe are the same value, moved together.
        let mut b = Builder::new("sine");
        let x = b.input("x", TensorType::new(DType::F32, [64])).expect("input");
        let y = b.unary(UnaryOp::Sin, x).expect("sin");
        b.output("y", y).expect("output");
        let kernel = b.finish().expect("kernel");
        let inputs = vec![Array::new(Shape::from(vec![64]), ArrayData::F32(vec![0.75; 64])).expect("array")];
        let probed = probe(&kernel).expect("probe");
        let faulty = Faulty {
            outputs: &["y", "__t0"],
            ulps: 5,
            bound: 4,
        };
        let error = within_bounds(&faulty, false, &probed, &kernel, &inputs).expect_err("5 ULP > 4");
        assert!(
            error.contains("element 0") && error.contains("ULP > 4"),
            "{error}"
        );
    }

    /// `r = sum(sin(x) * x)` over rows of `n` (`rows` of them) and `m = max(r) * 2`, with
    /// inputs in about [-3, 3], and its probe.
    fn reduced_sine_kernel(rows: usize, n: usize) -> (Kernel, Vec<Array>, Probed) {
        let mut b = Builder::new("reduced");
        let x = b
            .input("x", TensorType::new(DType::F32, [rows, n]))
            .expect("input");
        let s = b.unary(UnaryOp::Sin, x).expect("sin");
        let v = b.binary(BinaryOp::Mul, s, x).expect("mul");
        let r = b.reduce(ReduceOp::Sum, v, &[1], false).expect("sum");
        let top = b.reduce_all(ReduceOp::Max, r).expect("max");
        let two = b.constant(Scalar::F32(2.0), Vec::<usize>::new());
        let m = b.binary(BinaryOp::Mul, top, two).expect("mul");
        b.output("r", r).expect("output");
        b.output("m", m).expect("output");
        let kernel = b.finish().expect("kernel");
        let mut rng = TestRng::new(11);
        let x: Vec<f32> = (0..rows * n).map(|_| rng.uniform(-3.0, 3.0) as f32).collect();
        let inputs = vec![Array::new(Shape::from(vec![rows, n]), ArrayData::F32(x)).expect("array")];
        let probed = probe(&kernel).expect("probe");
        (kernel, inputs, probed)
    }

    #[test]
    fn outputs_after_float_reductions_are_compared_in_lane_order() {
        // Short rows (one accumulator) and long ones (partial lanes): the CPU gives the LIR
        // interpreter's bits, so nothing is left out.
        for (rows, n) in [(3, 7), (5, 4096)] {
            let (kernel, inputs, probed) = reduced_sine_kernel(rows, n);
            assert_eq!(probed.after_float_reduction, ["r", "m"]);
            let outcome = within_bounds(&rfx_codegen_cpu::CpuBackend, false, &probed, &kernel, &inputs);
            let expected = Bounded::Compared {
                checked: true,
                reasons: Vec::new(),
            };
            assert_eq!(outcome, Ok(expected), "[{rows}, {n}]");
            // One ULP off in a row sum, or in what follows the reductions, is caught.
            for (name, outputs) in [("r", &["r"]), ("m", &["m"])] {
                let faulty = Faulty {
                    outputs,
                    ulps: 1,
                    bound: 4,
                };
                let error = within_bounds(&faulty, false, &probed, &kernel, &inputs).expect_err("1 ULP off");
                assert!(
                    error.starts_with(&format!("output `{name}`: element 0"))
                        && error.contains("LIR interpreter"),
                    "{error}"
                );
            }
        }
        // A backend whose long reductions run as trees leaves them out, and says so.
        let (kernel, inputs, probed) = reduced_sine_kernel(5, 4096);
        let faulty = Faulty {
            outputs: &["r"],
            ulps: 1,
            bound: 4,
        };
        let outcome = within_bounds(&faulty, true, &probed, &kernel, &inputs);
        let expected = Bounded::Compared {
            checked: true,
            reasons: vec!["transcendental: outputs after a float reduction not compared".to_string()],
        };
        assert_eq!(outcome, Ok(expected));
    }

    #[test]
    fn a_wrong_exact_value_downstream_is_caught() {
        let (kernel, inputs, probed) = sine_kernel();
        let faulty = Faulty {
            outputs: &["y"],
            ulps: 1,
            bound: 4,
        };
        let error = within_bounds(&faulty, false, &probed, &kernel, &inputs).expect_err("y is 1 ULP off");
        assert!(error.starts_with("output `y`: element 0"), "{error}");
    }
}
