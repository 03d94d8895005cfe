//! Eight threads against one shared [`Cache`] and one [`DispatchQueue`] for a bounded time:
//! random shapes (hits and concurrent misses), random bad calls (each must return its typed
//! `CallError` and write nothing), failing compiles, and queue submissions whose handles are
//! kept or dropped. Checks that nothing deadlocks, that every accepted job runs exactly once and
//! every kept handle gets the value plain Rust arithmetic gives, that the cache compiles each
//! shape once and holds no more kernels than shapes, and that live heap bytes (counted by a
//! global allocator in this test binary only) do not grow over a replayed round.
//!
//! This file holds a single `#[test]` on purpose: the allocator counts the whole process, so a
//! second test running in parallel would disturb the measurement.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx_ir::hir::{Kernel, parse};
use rfx_ir::{ArrayView, ArrayViewMut, Shape};
use rfx_lower::{CallError, Scratch};
use rfx_runtime::{
    BoundKernel, Cache, CacheKey, CompileConfig, DispatchQueue, Executable, JobError, JobHandle,
    RuntimeError, SubmitError, registry,
};

struct Counting;

/// Bytes currently allocated through the global allocator (allocations minus frees).
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

fn size_of_layout(layout: Layout) -> isize {
    isize::try_from(layout.size()).unwrap_or(isize::MAX)
}

// SAFETY: forwards every call to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(size_of_layout(layout), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc_zeroed`'s contract.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(size_of_layout(layout), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(size_of_layout(layout), Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        let new_ptr = unsafe { System.realloc(ptr, layout, new_size) };
        if !new_ptr.is_null() {
            let new_size = isize::try_from(new_size).unwrap_or(isize::MAX);
            LIVE_BYTES.fetch_add(new_size - size_of_layout(layout), Ordering::Relaxed);
        }
        new_ptr
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const THREADS: usize = 8;
/// The input lengths: a few distinct shapes, so lookups both hit and miss.
const SIZES: [usize; 4] = [3, 8, 17, 64];
/// How long the first round runs; the second replays the same number of iterations.
const ROUND_TIME: Duration = Duration::from_millis(1300);
/// The fewest iterations a worker does in the first round, however slow the machine, so that
/// every kind of operation happens.
const MIN_ITERATIONS: usize = 256;
/// The longest a round may take before the test declares a deadlock.
const WATCHDOG: Duration = Duration::from_secs(60);
/// Most queue handles a worker keeps before it waits for the oldest.
const MAX_OUTSTANDING: usize = 8;
/// Largest growth of live heap bytes allowed over the replayed round.
const MAX_GROWTH_BYTES: isize = 16 * 1024;
/// What outputs hold before a call that must be rejected; a rejected call leaves it there.
const SENTINEL: f32 = -12_345.5;

/// `y = x * 2 + 1` and `s = sum(y)`. With small integer inputs every value is an exactly
/// representable f32, so the result does not depend on rounding or summation order and equals
/// the plain Rust computation bit for bit.
fn kernel(n: usize) -> Kernel {
    parse(&format!(
        "kernel stress {{ %x = input x : f32[{n}] %two = const 2.0 : f32[] %one = const 1.0 : f32[] \
         %a = mul %x, %two : f32[{n}] %y = add %a, %one : f32[{n}] %s = sum %y axes [0] : f32[] \
         output y = %y output s = %s }}"
    ))
    .expect("kernel parses")
}

fn expected(x: &[f32]) -> (Vec<f32>, f32) {
    let y: Vec<f32> = x.iter().map(|v| v * 2.0 + 1.0).collect();
    let s = y.iter().sum();
    (y, s)
}

/// What every worker of a round shares (read-only apart from the cache, queue and run log).
struct Shared {
    cache: Arc<Cache>,
    config: CompileConfig,
    /// A configuration whose compile always fails (unknown backend).
    broken_config: CompileConfig,
    kernels: Vec<Kernel>,
    keys: Vec<CacheKey>,
    broken_keys: Vec<CacheKey>,
    shapes: Vec<Shape>,
    /// One longer than each shape, for wrong-shape calls.
    long_shapes: Vec<Shape>,
    queue: DispatchQueue,
    /// The id of every job the queue ran, in the order it ran them. Jobs hold this log, not
    /// `Shared`, so a queued job never keeps the queue that runs it alive.
    ran: Arc<Mutex<Vec<u64>>>,
}

/// How long a worker runs: until a deadline (the first round) or for a fixed number of
/// iterations (the replay).
#[derive(Clone, Copy)]
enum Budget {
    Until(Instant),
    Iterations(usize),
}

/// What one worker did.
#[derive(Default)]
struct WorkerReport {
    iterations: usize,
    lookups: usize,
    shapes_used: [bool; SIZES.len()],
    good_calls: usize,
    bad_calls: usize,
    failed_compiles: usize,
    accepted: Vec<u64>,
    refused: Vec<u64>,
    dropped_handles: usize,
}

/// What a round did, without heap data (the test measures the heap around a round).
#[derive(Clone, Copy, Debug, Default)]
struct RoundSummary {
    iterations: [usize; THREADS],
    lookups: usize,
    good_calls: usize,
    bad_calls: usize,
    failed_compiles: usize,
    jobs: usize,
    refused: usize,
    dropped_handles: usize,
    distinct_shapes: usize,
}

type JobResult = Result<(Vec<f32>, f32), RuntimeError>;

struct Pending {
    id: u64,
    want: Option<(Vec<f32>, f32)>,
    handle: JobHandle<(Vec<f32>, f32), RuntimeError>,
}

fn lookup(shared: &Shared, index: usize) -> Arc<Executable> {
    shared
        .cache
        .get_or_compile(shared.keys[index].clone(), &shared.config, registry(), || {
            Ok::<_, RuntimeError>(shared.kernels[index].clone())
        })
        .expect("compiling a valid kernel succeeds")
}

/// Small integers in f32, so every sum is exact.
fn random_input(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-50i32..=50) as f32).collect()
}

fn check_good(got_y: &[f32], got_s: f32, x: &[f32]) {
    let (want_y, want_s) = expected(x);
    assert_eq!(got_y, &want_y[..], "wrong `y` for x = {x:?}");
    assert_eq!(got_s.to_bits(), want_s.to_bits(), "wrong `s` for x = {x:?}");
}

/// What one call of the stress loop uses: the shared state, the shape's index, its executable,
/// its bound kernel and the thread's scratch.
struct CallSite<'a> {
    shared: &'a Shared,
    index: usize,
    exe: &'a Executable,
    bound: &'a mut BoundKernel,
    scratch: &'a mut Scratch,
}

/// A call through `Executable::run` or `BoundKernel::run_slices` that must succeed.
fn good_call(site: CallSite<'_>, rng: &mut StdRng) {
    let n = SIZES[site.index];
    let x = random_input(rng, n);
    let mut y = vec![SENTINEL; n];
    let mut s = [SENTINEL];
    if rng.random_bool(0.5) {
        let shape = &site.shared.shapes[site.index];
        let scalar = Shape::scalar();
        let inputs = [ArrayView::new(shape, &x).expect("input view")];
        let mut outputs = [
            ArrayViewMut::new(shape, &mut y).expect("output view"),
            ArrayViewMut::new(&scalar, &mut s).expect("output view"),
        ];
        site.exe
            .run(&inputs, &mut outputs, site.scratch)
            .expect("a valid call runs");
    } else {
        site.bound
            .run_slices([&x[..]], [&mut y[..], &mut s[..]])
            .expect("a valid call runs");
    }
    check_good(&y, s[0], &x);
}

/// A call with one thing wrong: it must fail with the matching `CallError` and leave both
/// outputs holding the sentinel.
fn bad_call(site: CallSite<'_>, rng: &mut StdRng) {
    let n = SIZES[site.index];
    let shape = &site.shared.shapes[site.index];
    let long = &site.shared.long_shapes[site.index];
    let scalar = Shape::scalar();
    let x = random_input(rng, n + 1);
    let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let mut y = vec![SENTINEL; n + 1];
    let mut s = [SENTINEL];
    let mut s64 = [f64::from(SENTINEL)];
    let kind = rng.random_range(0..8u8);
    let err = {
        let good_x = ArrayView::new(shape, &x[..n]).expect("input view");
        let mut run = |inputs: &[ArrayView<'_>], outputs: &mut [ArrayViewMut<'_>]| {
            site.exe
                .run(inputs, outputs, site.scratch)
                .expect_err("a bad call must be rejected")
        };
        match kind {
            0 => {
                let mut outputs = [
                    ArrayViewMut::new(shape, &mut y[..n]).expect("view"),
                    ArrayViewMut::new(&scalar, &mut s).expect("view"),
                ];
                run(&[], &mut outputs)
            }
            1 => {
                let mut outputs = [
                    ArrayViewMut::new(shape, &mut y[..n]).expect("view"),
                    ArrayViewMut::new(&scalar, &mut s).expect("view"),
                ];
                run(&[good_x, good_x], &mut outputs)
            }
            2 => {
                let mut outputs = [
                    ArrayViewMut::new(shape, &mut y[..n]).expect("view"),
                    ArrayViewMut::new(&scalar, &mut s).expect("view"),
                ];
                run(&[ArrayView::new(long, &x).expect("view")], &mut outputs)
            }
            3 => {
                let mut outputs = [
                    ArrayViewMut::new(shape, &mut y[..n]).expect("view"),
                    ArrayViewMut::new(&scalar, &mut s).expect("view"),
                ];
                run(&[ArrayView::new(shape, &x64[..n]).expect("view")], &mut outputs)
            }
            4 => {
                let mut outputs = [
                    ArrayViewMut::new(long, &mut y).expect("view"),
                    ArrayViewMut::new(&scalar, &mut s).expect("view"),
                ];
                run(&[good_x], &mut outputs)
            }
            5 => {
                let mut outputs = [ArrayViewMut::new(shape, &mut y[..n]).expect("view")];
                run(&[good_x], &mut outputs)
            }
            6 => {
                let mut outputs = [
                    ArrayViewMut::new(shape, &mut y[..n]).expect("view"),
                    ArrayViewMut::new(&scalar, &mut s64).expect("view"),
                ];
                run(&[good_x], &mut outputs)
            }
            _ => site
                .bound
                .run_slices([&x[..]], [&mut y[..n], &mut s[..]])
                .expect_err("a bad call must be rejected"),
        }
    };
    assert!(err.is_user_error(), "{err}");
    let RuntimeError::Call(call) = &err else {
        panic!("bad call {kind}: expected a CallError, got {err:?}");
    };
    let matches = match kind {
        0 => matches!(
            call,
            CallError::Arity {
                what: "inputs",
                expected: 1,
                found: 0
            }
        ),
        1 => matches!(
            call,
            CallError::Arity {
                what: "inputs",
                expected: 1,
                found: 2
            }
        ),
        2 => matches!(call, CallError::Shape { name, .. } if name == "x"),
        3 => matches!(call, CallError::DType { name, .. } if name == "x"),
        4 => matches!(call, CallError::Shape { name, .. } if name == "y"),
        5 => matches!(
            call,
            CallError::Arity {
                what: "outputs",
                expected: 2,
                found: 1
            }
        ),
        6 => matches!(call, CallError::DType { name, .. } if name == "s"),
        _ => matches!(call, CallError::Shape { name, .. } if name == "inputs[0]"),
    };
    assert!(matches, "bad call {kind}: unexpected error {call:?}");
    assert!(
        y.iter().all(|v| v.to_bits() == SENTINEL.to_bits()) && s[0].to_bits() == SENTINEL.to_bits(),
        "bad call {kind} ({call}) wrote to an output"
    );
    assert_eq!(s64[0], f64::from(SENTINEL), "bad call {kind} wrote to an output");
}

/// A lookup whose compile fails: an error every time, and nothing cached.
fn failing_lookup(shared: &Shared, index: usize) {
    let err = shared
        .cache
        .get_or_compile(
            shared.broken_keys[index].clone(),
            &shared.broken_config,
            registry(),
            || Ok::<_, RuntimeError>(shared.kernels[index].clone()),
        )
        .expect_err("an unknown backend cannot compile");
    assert!(err.is_user_error(), "{err}");
    assert!(err.to_string().contains("unknown backend"), "{err}");
}

/// Submits a job running `exe` on a random input (or, sometimes, on an input of the wrong
/// shape); keeps the handle, drops it, or (with `try_submit` on a full queue) is refused.
fn submit_job(
    shared: &Shared,
    rng: &mut StdRng,
    index: usize,
    exe: Arc<Executable>,
    id: u64,
    report: &mut WorkerReport,
    pending: &mut VecDeque<Pending>,
) {
    let n = SIZES[index];
    let bad = rng.random_bool(0.1);
    let x = random_input(rng, if bad { n + 1 } else { n });
    let want = (!bad).then(|| expected(&x));
    let ran = shared.ran.clone();
    let job = move || -> JobResult {
        ran.lock().expect("run log").push(id);
        let shape = Shape::new([x.len()]);
        let out = exe.call(&[ArrayView::new(&shape, &x).expect("input view")])?;
        let y = out[0].as_slice::<f32>().expect("f32 output").to_vec();
        let s = out[1].as_slice::<f32>().expect("f32 output")[0];
        Ok((y, s))
    };
    let submitted = if rng.random_bool(0.2) {
        shared.queue.try_submit(job)
    } else {
        shared.queue.submit(job)
    };
    let handle = match submitted {
        Ok(handle) => handle,
        Err(SubmitError::Full { .. }) => {
            report.refused.push(id);
            return;
        }
        Err(SubmitError::ShutDown) => panic!("the queue shut down while workers were submitting"),
    };
    report.accepted.push(id);
    if rng.random_bool(0.25) {
        // The job still runs (the run log checks it); only its result is never read.
        drop(handle);
        report.dropped_handles += 1;
        return;
    }
    pending.push_back(Pending { id, want, handle });
    while pending.len() > MAX_OUTSTANDING {
        let oldest = pending.pop_front().expect("pending is not empty");
        check_job(oldest);
    }
}

fn check_job(pending: Pending) {
    let Pending { id, want, handle } = pending;
    match (want, handle.wait()) {
        (Some((want_y, want_s)), Ok((y, s))) => {
            assert_eq!(y, want_y, "job {id:#x}: wrong `y`");
            assert_eq!(s.to_bits(), want_s.to_bits(), "job {id:#x}: wrong `s`");
        }
        (None, Err(JobError::Failed(RuntimeError::Call(CallError::Shape { name, .. })))) => {
            assert_eq!(name, "x", "job {id:#x}");
        }
        (want, got) => panic!(
            "job {id:#x}: expected {}, got {got:?}",
            if want.is_some() {
                "a value"
            } else {
                "a shape error"
            }
        ),
    }
}

fn worker(shared: &Shared, thread: usize, budget: Budget) -> WorkerReport {
    let mut rng = StdRng::seed_from_u64(0x5EED_0000 + thread as u64);
    let mut report = WorkerReport::default();
    let mut scratch = Scratch::new();
    let mut bound: Vec<Option<BoundKernel>> = (0..SIZES.len()).map(|_| None).collect();
    let mut pending = VecDeque::new();
    loop {
        let iteration = report.iterations;
        let more = match budget {
            Budget::Until(deadline) => iteration < MIN_ITERATIONS || Instant::now() < deadline,
            Budget::Iterations(n) => iteration < n,
        };
        if !more {
            break;
        }
        // The first iterations visit every shape, so the first round compiles them all (two
        // threads start on each shape, so misses also happen concurrently).
        let index = if iteration < SIZES.len() {
            (thread + iteration) % SIZES.len()
        } else {
            rng.random_range(0..SIZES.len())
        };
        report.shapes_used[index] = true;
        report.lookups += 1;
        let exe = lookup(shared, index);
        let bound = bound[index].get_or_insert_with(|| BoundKernel::new(exe.clone()));
        let site = CallSite {
            shared,
            index,
            exe: &exe,
            bound,
            scratch: &mut scratch,
        };
        match rng.random_range(0..100u8) {
            0..=39 => {
                good_call(site, &mut rng);
                report.good_calls += 1;
            }
            40..=64 => {
                bad_call(site, &mut rng);
                report.bad_calls += 1;
            }
            65..=69 => {
                failing_lookup(shared, index);
                report.failed_compiles += 1;
            }
            _ => {
                let id = ((thread as u64) << 32) | iteration as u64;
                submit_job(shared, &mut rng, index, exe, id, &mut report, &mut pending);
            }
        }
        report.iterations += 1;
    }
    for job in pending {
        check_job(job);
    }
    report
}

/// Runs the workers, drains the queue and checks the round's invariants. Returns only plain
/// numbers, so that nothing the round allocated outlives it.
fn run_round(shared: Arc<Shared>, budgets: [Budget; THREADS]) -> RoundSummary {
    let workers: Vec<JoinHandle<WorkerReport>> = (0..THREADS)
        .map(|thread| {
            let shared = shared.clone();
            let budget = budgets[thread];
            std::thread::spawn(move || worker(&shared, thread, budget))
        })
        .collect();
    let reports: Vec<WorkerReport> = workers
        .into_iter()
        .map(|handle| {
            handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
        .collect();
    // Runs every job still queued, then joins the queue's worker.
    shared.queue.shutdown();

    let mut summary = RoundSummary::default();
    let mut accepted = HashSet::new();
    let mut refused = HashSet::new();
    let mut shapes_used = [false; SIZES.len()];
    for (thread, report) in reports.iter().enumerate() {
        summary.iterations[thread] = report.iterations;
        summary.lookups += report.lookups;
        summary.good_calls += report.good_calls;
        summary.bad_calls += report.bad_calls;
        summary.failed_compiles += report.failed_compiles;
        summary.dropped_handles += report.dropped_handles;
        summary.refused += report.refused.len();
        for (used, &here) in shapes_used.iter_mut().zip(&report.shapes_used) {
            *used |= here;
        }
        for &id in &report.accepted {
            assert!(accepted.insert(id), "job id {id:#x} submitted twice");
        }
        refused.extend(report.refused.iter().copied());
    }
    summary.jobs = accepted.len();
    summary.distinct_shapes = shapes_used.iter().filter(|&&used| used).count();

    let ran = shared.ran.lock().expect("run log");
    let mut ran_once = HashSet::with_capacity(ran.len());
    for &id in ran.iter() {
        assert!(ran_once.insert(id), "job {id:#x} ran twice");
        assert!(
            !refused.contains(&id),
            "job {id:#x} ran although the queue refused it"
        );
    }
    assert_eq!(ran_once, accepted, "accepted jobs and jobs that ran differ");
    summary
}

/// Runs a round on a new thread and panics if it has not finished within [`WATCHDOG`]. The
/// waiting thread is the watchdog: a panic on any other thread would not fail the test, and
/// the stuck round thread is left behind (the process exits after the test reports).
fn watched_round(shared: Arc<Shared>, budgets: [Budget; THREADS]) -> RoundSummary {
    let start = Instant::now();
    let round = std::thread::spawn(move || run_round(shared, budgets));
    while !round.is_finished() {
        assert!(
            start.elapsed() < WATCHDOG,
            "deadlock: a stress round has not finished after {WATCHDOG:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    round
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

fn new_shared(cache: &Arc<Cache>) -> Arc<Shared> {
    let config = CompileConfig::default();
    let broken_config = CompileConfig::with_backend("no-such-backend");
    let kernels: Vec<Kernel> = SIZES.iter().map(|&n| kernel(n)).collect();
    Arc::new(Shared {
        cache: cache.clone(),
        keys: kernels.iter().map(|k| CacheKey::of_kernel(k, &config)).collect(),
        broken_keys: kernels
            .iter()
            .map(|k| CacheKey::of_kernel(k, &broken_config))
            .collect(),
        kernels,
        config,
        broken_config,
        shapes: SIZES.iter().map(|&n| Shape::new([n])).collect(),
        long_shapes: SIZES.iter().map(|&n| Shape::new([n + 1])).collect(),
        queue: DispatchQueue::new(8),
        ran: Arc::new(Mutex::new(Vec::new())),
    })
}

fn live_bytes() -> isize {
    LIVE_BYTES.load(Ordering::SeqCst)
}

fn check_cache(cache: &Cache, summary: &RoundSummary, total_lookups: usize) {
    assert_eq!(summary.distinct_shapes, SIZES.len(), "{summary:?}");
    assert!(
        cache.len() <= summary.distinct_shapes,
        "the cache holds {} kernels for {} shapes",
        cache.len(),
        summary.distinct_shapes
    );
    // Concurrent misses of one key wait for a single compile; failed compiles cache nothing.
    assert_eq!(cache.compile_count(), SIZES.len(), "{summary:?}");
    assert_eq!(cache.len(), SIZES.len());
    assert_eq!(
        cache.hit_count() + cache.compile_count(),
        total_lookups,
        "{summary:?}"
    );
}

#[test]
fn eight_threads_share_cache_and_queue_without_loss_deadlock_or_leak() {
    let start = Instant::now();
    let cache = Arc::new(Cache::new("stress"));

    // The warm-up round is the stress test proper (concurrent first compiles, misses, hits). It
    // is also needed before measuring memory: it compiles every shape into the cache (kernels,
    // Cranelift code and the miss history stay alive with the cache by design) and initialises
    // process-wide state on first use (the backend registry, std's thread bookkeeping), none of
    // which is a leak. Only a second round over the same work shows growth per round.
    let warm_up = watched_round(
        new_shared(&cache),
        [Budget::Until(Instant::now() + ROUND_TIME); THREADS],
    );
    check_cache(&cache, &warm_up, warm_up.lookups);
    assert!(warm_up.good_calls > 0 && warm_up.bad_calls > 0, "{warm_up:?}");
    assert!(warm_up.failed_compiles > 0 && warm_up.jobs > 0, "{warm_up:?}");
    assert!(warm_up.dropped_handles > 0, "{warm_up:?}");

    // The replay: the same seeds and the same iteration counts per thread, so every thread does
    // exactly the work it did in the warm-up, now against a warm cache.
    let before = live_bytes();
    let replay = watched_round(new_shared(&cache), warm_up.iterations.map(Budget::Iterations));
    let after = live_bytes();
    check_cache(&cache, &replay, warm_up.lookups + replay.lookups);
    assert_eq!(replay.iterations, warm_up.iterations);
    assert!(
        after - before < MAX_GROWTH_BYTES,
        "live heap grew by {} bytes over a replayed round ({before} → {after})",
        after - before
    );
    eprintln!(
        "stress: {} iterations per round ({} good calls, {} bad calls, {} failed compiles, {} jobs, \
         {} refused, {} handles dropped); heap growth over the replay: {} bytes; {:.2?} in all",
        warm_up.iterations.iter().sum::<usize>(),
        warm_up.good_calls,
        warm_up.bad_calls,
        warm_up.failed_compiles,
        warm_up.jobs,
        warm_up.refused,
        warm_up.dropped_handles,
        after - before,
        start.elapsed()
    );
}
