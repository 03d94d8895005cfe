//! A persistent worker pool for large kernels.
//!
//! Workers are started once, on first need; after a job a worker spins for up to `SPIN` (50 µs)
//! on an atomic flag before it sleeps on a condition variable, so the back-to-back calls of a
//! loop hand work over without a futex wake-up. No thread is spawned per call. Small kernels
//! (below the schedule's minimum points per thread) never touch the pool, so the real-time path
//! takes no lock.
//!
//! A split kernel is cut into a few chunks per thread, and the caller and the workers claim
//! chunks from a shared counter until none is left. The caller never waits for a worker to
//! *start*: a worker that has gone to sleep (a futex wake-up costs tens of microseconds on a
//! virtual machine whose idle vCPU has been descheduled) finds the chunks taken when it wakes,
//! and the caller, once it has claimed the last chunk, takes the job back from every worker that
//! has not picked it up. It then waits only for chunks already running. A call of a control
//! loop that comes after the workers fell asleep therefore costs at most about the one-thread
//! time, not that plus a wake-up. Only one parallel kernel runs at a time; a concurrent caller
//! finding the pool busy runs its kernel on its own thread instead of waiting. Results do not
//! depend on the split: units are independent (a reduction's unit is a whole output element),
//! and a reduction with too few outputs to share out runs in parts of its leaf trees, which
//! the caller merges in the trees' order once every part is done (`codegen::reduce_split`):
//! the same bits on any number of threads.
//!
//! Workers have 4 MiB stacks (`WORKER_STACK`), four times the largest frame a kernel function
//! may have (`codegen::MAX_FRAME`).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::codegen::{KernelShape, MAX_FRAME, SPLIT_COMBINE, SPLIT_PARTS};

/// A compiled kernel: `(buffer table, first unit, end unit)`.
pub(crate) type KernelFn = unsafe extern "C" fn(*const *mut u8, u64, u64);

/// Threads to use when the caller does not say: the machine's parallelism, asked once (the
/// answer reads cgroup files, which would otherwise cost every compile tens of microseconds).
pub(crate) fn default_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

/// Each worker's stack: one kernel function's frame (at most [`MAX_FRAME`], 1 MiB), the tile
/// routines and libm calls it makes (a few KiB), and the pool's own few frames, with a wide
/// margin (only the pages touched are ever committed). Set explicitly, so that `RUST_MIN_STACK`
/// cannot shrink it below what a kernel needs.
const WORKER_STACK: usize = 4 * MAX_FRAME as usize;

/// Chunks per thread: enough that a late worker leaves little for the caller to wait on, few
/// enough that claiming (one atomic add per chunk) stays negligible.
const CHUNKS_PER_THREAD: u64 = 4;

/// A parallel kernel: `units` cut into `chunks` balanced chunks, each called with `flags` set
/// in its first unit (a split reduction's mode: [`SPLIT_PARTS`]; 0 otherwise).
#[derive(Clone, Copy)]
struct Job {
    func: KernelFn,
    table: usize,
    units: u64,
    chunks: u64,
    flags: u64,
}

// SAFETY: a job's buffer table stays valid until the dispatching caller has retracted the job
// from every worker that did not take it and seen every worker that did take it check out
// (`Shared::holders` at zero); only then does it return.
unsafe impl Send for Job {}

impl Job {
    /// Chunk `c`'s unit range; every chunk holds at least `units / chunks` units, which
    /// [`run_split`] keeps at 64 or more (a vector loop re-runs its last full pass inside its
    /// own range).
    fn chunk(&self, c: u64) -> (u64, u64) {
        let bound = |c: u64| (u128::from(self.units) * u128::from(c) / u128::from(self.chunks)) as u64;
        (bound(c), bound(c + 1))
    }

    /// Claims and runs chunks until none is left.
    ///
    /// # Safety
    /// As [`run_kernel`], for the whole time any chunk of this job may run.
    unsafe fn run_chunks(&self, next: &AtomicU64) {
        loop {
            let c = next.fetch_add(1, Ordering::Relaxed);
            if c >= self.chunks {
                return;
            }
            let (lo, hi) = self.chunk(c);
            // SAFETY: guaranteed by the caller.
            unsafe { (self.func)(self.table as *const *mut u8, lo | self.flags, hi) };
        }
    }
}

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
    /// Whether the worker is blocked on `wake`; read and written only under `slot`'s lock, so a
    /// dispatcher that finds it clear knows the worker will see the job without a `notify`
    /// (a futex system call even when nobody waits).
    sleeping: AtomicBool,
}

/// The running job's counters. They live in the pool, never on a caller's stack: a worker
/// touches them after its last chunk (to check out and notify), possibly after the caller has
/// seen the count reach zero and returned.
struct Shared {
    /// The next chunk to claim.
    next: AtomicU64,
    /// Workers holding the current job (posted and not retracted, or taken and running).
    holders: AtomicUsize,
    /// Whether the dispatcher is blocked on `done` (so a worker that checks out last skips the
    /// `notify` system call while the dispatcher is still spinning).
    lock: Mutex<bool>,
    done: Condvar,
}

struct Pool {
    workers: Vec<Arc<Worker>>,
    shared: Arc<Shared>,
    busy: Mutex<()>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let shared = Arc::new(Shared {
            next: AtomicU64::new(0),
            holders: AtomicUsize::new(0),
            lock: Mutex::new(false),
            done: Condvar::new(),
        });
        let workers = (1..default_threads())
            .filter_map(|i| {
                let worker = Arc::new(Worker {
                    slot: Mutex::new(None),
                    wake: Condvar::new(),
                    pending: AtomicBool::new(false),
                    sleeping: AtomicBool::new(false),
                });
                let (mine, shared) = (worker.clone(), shared.clone());
                std::thread::Builder::new()
                    .name(format!("rfx-cpu-{i}"))
                    .stack_size(WORKER_STACK)
                    .spawn(move || worker_loop(&mine, &shared))
                    .ok()
                    .map(|_| worker)
            })
            .collect();
        Pool {
            workers,
            shared,
            busy: Mutex::new(()),
        }
    })
}

fn worker_loop(worker: &Worker, shared: &Shared) {
    loop {
        spin_until(|| worker.pending.load(Ordering::Acquire));
        let job = {
            let mut slot = worker.slot.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(job) = slot.take() {
                    worker.pending.store(false, Ordering::Relaxed);
                    break job;
                }
                worker.sleeping.store(true, Ordering::Relaxed);
                slot = worker.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
                worker.sleeping.store(false, Ordering::Relaxed);
            }
        };
        // SAFETY: the dispatcher keeps the table and buffers alive until this worker checks
        // out below (it waits for `holders` to reach zero), and `func` is a finalized kernel
        // of a live module.
        unsafe { job.run_chunks(&shared.next) };
        if shared.holders.fetch_sub(1, Ordering::AcqRel) == 1 {
            let waiting = *shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            if waiting {
                shared.done.notify_all();
            }
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
    } else if shape.parts > 1 {
        // SAFETY: guaranteed by the caller; the shape's parts are the kernel's.
        unsafe { run_split_parts(func, table, shape, threads) };
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
    let Ok(guard) = pool.busy.try_lock() else {
        // SAFETY: guaranteed by the caller.
        unsafe { func(table, 0, units) };
        return;
    };
    let threads = threads.min(pool.workers.len() + 1).max(1);
    // The thread limit keeps `units / threads` at 64 or more; chunks keep that minimum too.
    let chunks = (threads as u64 * CHUNKS_PER_THREAD)
        .min(units / 64)
        .max(threads as u64);
    let job = Job {
        func,
        table: table as usize,
        units,
        chunks,
        flags: 0,
    };
    // SAFETY: guaranteed by the caller.
    unsafe { pool.run_job(job, threads) };
    drop(guard);
}

/// A reduction split within its outputs: the `(output, part)` units, a chunk each, on the
/// pool's threads, then the merge of every output's parts on the caller's; both under the
/// pool's lock, which keeps the kernel's scratch to this call. A busy pool runs the kernel
/// whole on the caller's thread (the same bits).
///
/// # Safety
/// As [`run_kernel`]; `shape` is `func`'s.
#[inline(never)]
unsafe fn run_split_parts(func: KernelFn, table: *const *mut u8, shape: &KernelShape, threads: usize) {
    let pool = pool();
    let Ok(guard) = pool.busy.try_lock() else {
        // SAFETY: guaranteed by the caller.
        unsafe { func(table, 0, shape.units) };
        return;
    };
    let threads = threads.min(pool.workers.len() + 1).max(1);
    let units = shape.units.saturating_mul(shape.parts);
    let job = Job {
        func,
        table: table as usize,
        units,
        chunks: units,
        flags: SPLIT_PARTS,
    };
    // SAFETY: guaranteed by the caller. Every part has run, and its stores are visible here,
    // when `run_job` returns (each worker's check-out is a release that its wait acquires).
    unsafe {
        pool.run_job(job, threads);
        func(table, SPLIT_COMBINE, shape.units);
    }
    drop(guard);
}

impl Pool {
    /// Runs `job` on the caller's thread and up to `threads - 1` workers; returns once every
    /// chunk has run. The caller holds `busy`.
    ///
    /// # Safety
    /// As [`run_kernel`], for `job`'s function and table.
    unsafe fn run_job(&self, job: Job, threads: usize) {
        let helpers = &self.workers[..threads.clamp(1, self.workers.len() + 1) - 1];
        let shared = &self.shared;
        shared.next.store(0, Ordering::Relaxed);
        shared.holders.store(helpers.len(), Ordering::Release);
        for worker in helpers {
            let sleeping = {
                let mut slot = worker.slot.lock().unwrap_or_else(|e| e.into_inner());
                *slot = Some(job);
                worker.sleeping.load(Ordering::Relaxed)
            };
            worker.pending.store(true, Ordering::Release);
            if sleeping {
                worker.wake.notify_one();
            }
        }
        // SAFETY: guaranteed by the caller.
        unsafe { job.run_chunks(&shared.next) };
        // Every chunk is claimed: take the job back from each worker that has not picked it up
        // (asleep, or not yet scheduled), so that it never touches this call's buffers.
        for worker in helpers {
            let mut slot = worker.slot.lock().unwrap_or_else(|e| e.into_inner());
            if slot.take().is_some() {
                worker.pending.store(false, Ordering::Relaxed);
                shared.holders.fetch_sub(1, Ordering::AcqRel);
            }
        }
        // The workers that did take it are running their last chunks.
        spin_until(|| shared.holders.load(Ordering::Acquire) == 0);
        let mut lock = shared.lock.lock().unwrap_or_else(|e| e.into_inner());
        while shared.holders.load(Ordering::Acquire) > 0 {
            *lock = true;
            lock = shared.done.wait(lock).unwrap_or_else(|e| e.into_inner());
            *lock = false;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The pool's protocol with a Rust kernel (no JIT), so that Miri can run it too:
    //! `MIRIFLAGS="-Zmiri-num-cpus=2 -Zmiri-permissive-provenance" cargo +nightly miri test -p
    //! rfx-codegen-cpu --lib pool` (Miri reports one CPU unless told, and then the pool has no
    //! workers). Data races and uses of freed memory are what it finds.

    use std::sync::atomic::{AtomicU32, Ordering};

    use super::{SPLIT_COMBINE, SPLIT_PARTS, run_split, run_split_parts};
    use crate::codegen::KernelShape;

    /// Counts, per unit, how often it ran: `table[0]` is the address of the counters.
    unsafe extern "C" fn count_units(table: *const *mut u8, lo: u64, hi: u64) {
        // SAFETY: the tests pass a table whose first entry points at `hi` or more counters.
        let counts = unsafe { *table } as *const AtomicU32;
        for u in lo..hi {
            // SAFETY: `u < units`, within the counters (see above).
            unsafe { &*counts.add(u as usize) }.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn run_counted(units: usize, threads: usize) -> Vec<u32> {
        let counts: Vec<AtomicU32> = (0..units).map(|_| AtomicU32::new(0)).collect();
        let table = [counts.as_ptr() as *mut u8];
        // SAFETY: the table's one entry points at `units` counters, alive for the call; every
        // chunk holds at least 64 units (units >= 64 * threads).
        unsafe { run_split(count_units, table.as_ptr(), units as u64, threads) };
        counts.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    /// Calls per test: fewer under Miri, which runs code about a thousand times slower.
    fn calls(native: usize) -> usize {
        if cfg!(miri) { native.min(20) } else { native }
    }

    #[test]
    fn every_unit_runs_exactly_once() {
        let sizes: &[usize] = if cfg!(miri) {
            &[128, 129, 1000]
        } else {
            &[128, 129, 1000, 4097, 100_000]
        };
        for &units in sizes {
            for threads in [2, 3, 8] {
                if units < 64 * threads {
                    continue;
                }
                let counts = run_counted(units, threads);
                assert!(
                    counts.iter().all(|&c| c == 1),
                    "units {units}, threads {threads}: {:?}",
                    counts.iter().enumerate().find(|(_, c)| **c != 1)
                );
            }
        }
    }

    #[test]
    fn back_to_back_calls_and_two_callers() {
        let one = || {
            for k in 0..calls(5000) {
                let units = 128 + (k % 7) * 100;
                assert!(run_counted(units, 2).iter().all(|&c| c == 1), "call {k}");
            }
        };
        // One caller, then two at once (one of them finds the pool busy and runs alone).
        one();
        let other = std::thread::spawn(one);
        one();
        other.join().expect("the other caller");
    }

    /// A reduction in parts: `table[0]` points at a counter per `(output, part)` unit, which
    /// the parts mode increments; `table[1]` at a result per output, which the combination sets
    /// to the sum of its parts' counters and a whole (one-thread) call to `u32::MAX`.
    unsafe extern "C" fn in_parts(table: *const *mut u8, lo: u64, hi: u64) {
        const PARTS: u64 = 5;
        // SAFETY: the test's table holds the two pointers, to `hi` (parts mode: units; else
        // outputs) or more elements.
        let (counts, results) = unsafe { (*table as *const AtomicU32, *table.add(1) as *const AtomicU32) };
        let first = lo & !(SPLIT_PARTS | SPLIT_COMBINE);
        for u in first..hi {
            // SAFETY: within the arrays (see above).
            unsafe {
                if lo & SPLIT_PARTS != 0 {
                    (*counts.add(u as usize)).fetch_add(1, Ordering::Relaxed);
                } else if lo & SPLIT_COMBINE != 0 {
                    let done: u32 = (0..PARTS)
                        .map(|p| (*counts.add((u * PARTS + p) as usize)).load(Ordering::Relaxed))
                        .sum();
                    (*results.add(u as usize)).store(done, Ordering::Relaxed);
                } else {
                    (*results.add(u as usize)).store(u32::MAX, Ordering::Relaxed);
                }
            }
        }
    }

    #[test]
    fn every_part_runs_once_before_its_output_is_combined() {
        for _ in 0..calls(200) {
            let counts: Vec<AtomicU32> = (0..15).map(|_| AtomicU32::new(0)).collect();
            let results: Vec<AtomicU32> = (0..3).map(|_| AtomicU32::new(0)).collect();
            let table = [counts.as_ptr() as *mut u8, results.as_ptr() as *mut u8];
            let shape = KernelShape {
                units: 3,
                width: 1,
                thread_limit: 2,
                parts: 5,
            };
            // SAFETY: the table's entries point at 15 counters and 3 results, alive for the call.
            unsafe { run_split_parts(in_parts, table.as_ptr(), &shape, 2) };
            let results: Vec<u32> = results.iter().map(|r| r.load(Ordering::Relaxed)).collect();
            let counts: Vec<u32> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            if results == [u32::MAX; 3] {
                // The pool was busy with another test's call: the kernel ran whole.
                assert!(counts.iter().all(|&c| c == 0));
            } else {
                assert!(counts.iter().all(|&c| c == 1), "{counts:?}");
                assert_eq!(results, [5, 5, 5]);
            }
        }
    }
}
