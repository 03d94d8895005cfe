//! A persistent worker pool for large kernels.
//!
//! Workers are started once, on first need; after a job a worker spins for up to `SPIN` (50 µs) on an
//! atomic flag before it sleeps on a condition variable, so the back-to-back calls of a loop
//! hand work over without a futex wake-up (which costs tens of microseconds on a virtual
//! machine whose idle vCPU has been descheduled). No thread is spawned per call. A kernel is split into contiguous unit ranges, the caller runs
//! the first range itself, and waits for the others. Small kernels (below the schedule's
//! minimum points per thread) never touch the pool, so the real-time path takes no lock. Only
//! one parallel kernel runs at a time; a concurrent caller finding the pool busy runs its
//! kernel on its own thread instead of waiting. Results do not depend on the split: units are
//! independent (a reduction's unit is a whole output element).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::codegen::KernelShape;

/// A compiled kernel: `(buffer table, first unit, end unit)`.
pub(crate) type KernelFn = unsafe extern "C" fn(*const *mut u8, u64, u64);

/// Threads to use when the caller does not say: the machine's parallelism, asked once (the
/// answer reads cgroup files, which would otherwise cost every compile tens of microseconds).
pub(crate) fn default_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

struct Latch {
    remaining: AtomicUsize,
    lock: Mutex<()>,
    done: Condvar,
}

#[derive(Clone, Copy)]
struct Job {
    func: KernelFn,
    table: usize,
    lo: u64,
    hi: u64,
    latch: *const Latch,
}

// SAFETY: a job's raw pointers (the buffer table, the latch) stay valid until the dispatching
// caller has seen the latch reach zero, which happens only after the job ran.
unsafe impl Send for Job {}

/// How long a worker (after a job) or a dispatcher (waiting for its helpers) spins before it
/// blocks.
const SPIN: Duration = Duration::from_micros(50);

/// Spins until `ready()` or `SPIN` has passed; returns `ready()`.
fn spin_until(ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= SPIN {
            return ready();
        }
    }
}

struct Worker {
    slot: Mutex<Option<Job>>,
    wake: Condvar,
    /// Set (after the slot is filled) while a job waits in the slot.
    pending: AtomicBool,
}

struct Pool {
    workers: Vec<Arc<Worker>>,
    busy: Mutex<()>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let workers = (1..default_threads())
            .filter_map(|i| {
                let worker = Arc::new(Worker {
                    slot: Mutex::new(None),
                    wake: Condvar::new(),
                    pending: AtomicBool::new(false),
                });
                let mine = worker.clone();
                std::thread::Builder::new()
                    .name(format!("rfx-cpu-{i}"))
                    .spawn(move || worker_loop(&mine))
                    .ok()
                    .map(|_| worker)
            })
            .collect();
        Pool {
            workers,
            busy: Mutex::new(()),
        }
    })
}

fn worker_loop(worker: &Worker) {
    loop {
        spin_until(|| worker.pending.load(Ordering::Acquire));
        let job = {
            let mut slot = worker.slot.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(job) = slot.take() {
                    worker.pending.store(false, Ordering::Relaxed);
                    break job;
                }
                slot = worker.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
            }
        };
        // SAFETY: the dispatcher guarantees the table and buffers outlive the job (it waits on
        // the latch), and `func` is a finalized kernel of a live module.
        unsafe { (job.func)(job.table as *const *mut u8, job.lo, job.hi) };
        // SAFETY: the latch lives on the dispatcher's stack until `remaining` reaches zero.
        let latch = unsafe { &*job.latch };
        if latch.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _guard = latch.lock.lock().unwrap_or_else(|e| e.into_inner());
            latch.done.notify_all();
        }
    }
}

/// Runs `func` over all units of `shape`, on up to `max_threads` threads when the kernel is
/// large enough to pay for them.
///
/// # Safety
/// `table` must hold a valid base pointer for every buffer the kernel touches, with the lengths
/// its LIR declares, for the whole call.
#[inline]
pub(crate) unsafe fn run_kernel(
    func: KernelFn,
    table: *const *mut u8,
    shape: &KernelShape,
    max_threads: usize,
) {
    let threads = shape.thread_limit.min(max_threads);
    if threads <= 1 {
        // SAFETY: guaranteed by the caller.
        unsafe { func(table, 0, shape.units) };
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { run_split(func, table, shape.units, threads) };
    }
}

/// The split path of [`run_kernel`], kept out of line so the single-thread path inlines into
/// the caller.
///
/// # Safety
/// As [`run_kernel`].
#[inline(never)]
unsafe fn run_split(func: KernelFn, table: *const *mut u8, units: u64, threads: usize) {
    let pool = pool();
    let guard = match pool.busy.try_lock() {
        Ok(guard) => guard,
        Err(_) => {
            // SAFETY: guaranteed by the caller.
            unsafe { func(table, 0, units) };
            return;
        }
    };
    let threads = threads.min(pool.workers.len() + 1).max(1);
    // Balanced chunks: each holds at least `units / threads` units, which the thread limit
    // keeps at 64 or more (a vector loop re-runs its last full pass inside its own range).
    let bound = |t: usize| (u128::from(units) * t as u128 / threads as u128) as u64;
    let helpers = threads - 1;
    let latch = Latch {
        remaining: AtomicUsize::new(helpers),
        lock: Mutex::new(()),
        done: Condvar::new(),
    };
    for (t, worker) in (1..=helpers).zip(&pool.workers) {
        let (lo, hi) = (bound(t), bound(t + 1));
        let job = Job {
            func,
            table: table as usize,
            lo,
            hi,
            latch: &latch,
        };
        *worker.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
        worker.pending.store(true, Ordering::Release);
        worker.wake.notify_one();
    }
    // SAFETY: guaranteed by the caller; this thread computes the first chunk.
    unsafe { func(table, 0, bound(1)) };
    spin_until(|| latch.remaining.load(Ordering::Acquire) == 0);
    let mut lock = latch.lock.lock().unwrap_or_else(|e| e.into_inner());
    while latch.remaining.load(Ordering::Acquire) > 0 {
        lock = latch.done.wait(lock).unwrap_or_else(|e| e.into_inner());
    }
    drop(lock);
    drop(guard);
}
