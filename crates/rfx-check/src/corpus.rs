//! The corpus runner: seeds from a first one on, each made into a kernel ([`fuzz_kernel`] or,
//! in large-kernel mode, [`large_kernel`](crate::generator::large_kernel)) and its inputs,
//! run through the [`oracle`], any mismatch shrunk ([`shrink`]); and saved kernels read back
//! and run the same way ([`replay_file`]).
//!
//! Each seed makes one random kernel and its inputs, `random_inputs(&mut TestRng::new(seed),
//! &kernel, 0.2)`, so that a kernel and its seed reproduce a case exactly.
//!
//! Large-kernel mode ([`FuzzConfig::large`]) generates elementwise kernels of 1,000 to 20,000
//! ops heavy in transcendentals instead, and compares each backend with `lir-interp` within a
//! tolerance (the kernels' ops do not amplify rounding errors), with no shrinking: it checks
//! that kernel size alone (stack frames, staging, compile time) breaks nothing.
//!
//! An error from a path whose reference succeeded is a mismatch, except a typed
//! [`BackendError::Unsupported`](rfx_lower::BackendError::Unsupported) (metal has no `f64`;
//! sizes beyond a device's limits), which is counted as a skip. A mismatching kernel is shrunk
//! and, with [`FuzzConfig::save_dir`], written as `<path>_<seed>.rfx`: a `#` comment header
//! followed by the HIR text, which `rfx run` and the regression test read back.
//!
//! [`oracle`]: crate::oracle
//! [`shrink`]: crate::shrink::shrink

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rfx_ir::hir::{self, Kernel};

use crate::error::CheckError;
use crate::generator::fuzz_kernel;
use crate::oracle::{Backends, PathSet, SPECIAL_RATE, check, check_large};
use crate::report::{FuzzReport, Mismatch};
use crate::shrink::shrink;

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
    /// transcendentals ([`large_kernel`](crate::generator::large_kernel)), and every backend's
    /// values are compared with the LIR interpreter's within
    /// [`LARGE_TOLERANCE_F32`](crate::oracle::LARGE_TOLERANCE_F32) /
    /// [`LARGE_TOLERANCE_F64`](crate::oracle::LARGE_TOLERANCE_F64) (the kernel's ops do not
    /// amplify rounding errors); nothing is shrunk. Metal runs on every `metal_every`-th seed,
    /// as in the normal mode.
    pub large: bool,
    /// The backends to compare with the interpreters (none by default: the caller, such as
    /// `rfx fuzz`, hands in those it was built with).
    pub backends: Backends,
}

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
            backends: Backends::none(),
        }
    }
}

/// Runs the fuzzer: kernels from `config.first_seed` on, until `config.kernels` kernels or
/// `config.duration` time. Fails only when a mismatch cannot be written to
/// [`FuzzConfig::save_dir`]; mismatches are in the report. Backends whose device is missing
/// are skipped, with the reason in the report.
///
/// # Errors
///
/// [`CheckError::Io`] when a mismatch cannot be saved. Backends and the oracle return errors
/// rather than panic; a panic in a worker is a bug and propagates out of this function (as
/// from `std::thread::scope`).
pub fn run(config: &FuzzConfig) -> Result<FuzzReport, CheckError> {
    let start = Instant::now();
    let limit = match (config.kernels, config.duration) {
        (Some(n), _) => n,
        (None, Some(_)) => u64::MAX,
        (None, None) => 10_000,
    };
    let env = config.backends.available();
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
    // A worker that panicked has already re-panicked out of the scope above, so the lock
    // cannot be poisoned here; take the data either way.
    let mut report = merged
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
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
    let env = config.backends.available();
    report.kernels += 1;
    check_and_shrink(config, &env, kernel, seed, true, report);
}

/// Reads a saved `.rfx` file (its `# seed: N` header line gives the inputs' seed, 0 without
/// one) and runs it through every path with [`check_kernel`].
///
/// # Errors
///
/// [`CheckError::Io`] when the file cannot be read, [`CheckError::Parse`] when it is not HIR
/// text.
pub fn replay_file(config: &FuzzConfig, path: &Path, report: &mut FuzzReport) -> Result<(), CheckError> {
    let text = std::fs::read_to_string(path).map_err(|source| CheckError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let kernel = hir::parse(&text).map_err(|e| CheckError::Parse {
        path: path.to_path_buf(),
        line: e.line,
        col: e.col,
        message: e.message.clone(),
    })?;
    let seed = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("# seed:"))
        .find_map(|s| s.trim().parse().ok())
        .unwrap_or(0);
    check_kernel(config, &kernel, seed, report);
    Ok(())
}

fn fuzz_seed(config: &FuzzConfig, env: &Backends, seed: u64, report: &mut FuzzReport) {
    report.kernels += 1;
    let with_metal = config.metal_every > 0 && seed.is_multiple_of(config.metal_every);
    if config.large {
        check_large(env, seed, with_metal, report);
        return;
    }
    let kernel = fuzz_kernel(seed);
    check_and_shrink(config, env, &kernel, seed, with_metal, report);
}

/// Checks `kernel` on every path; a mismatch is shrunk and recorded in `report`.
fn check_and_shrink(
    config: &FuzzConfig,
    env: &Backends,
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
        c: true,
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

/// Writes `mismatch` as `<dir>/<path>_<seed>.rfx`: a `#` header, then the shrunk kernel.
fn save(dir: &Path, mismatch: &Mismatch) -> Result<PathBuf, CheckError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CheckError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let file = dir.join(format!("{}_{}.rfx", mismatch.path, mismatch.seed));
    let text = format!(
        "# rfx fuzz regression (`rfx fuzz`; replayed by crates/rfx-cli/tests/fuzz.rs).\n\
         # seed: {}\n# path: {}\n# differed: {}\n# inputs: random_inputs(&mut TestRng::new(seed), &kernel, {SPECIAL_RATE})\n{}",
        mismatch.seed,
        mismatch.path,
        mismatch.description.replace('\n', " "),
        mismatch.kernel
    );
    std::fs::write(&file, text).map_err(io(&file))?;
    Ok(file)
}
