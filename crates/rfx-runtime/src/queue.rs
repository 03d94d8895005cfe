//! The single-worker dispatch queue (rfxJIT's `runtime/queue.py`).

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Why a job was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The queue holds `capacity` jobs already ([`DispatchQueue::try_submit`] only).
    #[error("the dispatch queue is full ({capacity} jobs waiting)")]
    Full {
        /// The queue's capacity.
        capacity: usize,
    },
    /// The queue was shut down.
    #[error("the dispatch queue is shut down")]
    ShutDown,
}

/// Why a job produced no value.
#[derive(Debug, thiserror::Error)]
pub enum JobError<E> {
    /// The job returned an error.
    #[error("the job failed: {0}")]
    Failed(E),
    /// The job panicked; the panic was caught and its message kept.
    #[error("the job panicked: {0}")]
    Panicked(String),
}

struct State {
    jobs: VecDeque<Job>,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    not_empty: Condvar,
    not_full: Condvar,
    capacity: usize,
}

/// A FIFO queue with one worker thread: jobs run one at a time, in submission order. A job's
/// result, error or panic is delivered to its [`JobHandle`]; a panicking job does not stop the
/// worker. The queue is bounded: [`DispatchQueue::submit`] blocks while it is full,
/// [`DispatchQueue::try_submit`] returns [`SubmitError::Full`]. Shutting down (explicitly or on
/// drop) runs every job already submitted, then joins the worker.
pub struct DispatchQueue {
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl fmt::Debug for DispatchQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DispatchQueue")
            .field("capacity", &self.shared.capacity)
            .field("pending", &self.pending())
            .finish()
    }
}

struct Completion<T, E> {
    result: Mutex<Option<Result<T, JobError<E>>>>,
    done: Condvar,
}

/// The pending result of a submitted job.
pub struct JobHandle<T, E> {
    completion: Arc<Completion<T, E>>,
}

impl<T, E> fmt::Debug for JobHandle<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobHandle")
            .field("done", &self.is_done())
            .finish()
    }
}

impl<T, E> JobHandle<T, E> {
    /// Waits for the job and returns its value, its error, or its panic.
    pub fn wait(self) -> Result<T, JobError<E>> {
        let mut result = self
            .completion
            .result
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(outcome) = result.take() {
                return outcome;
            }
            result = self
                .completion
                .done
                .wait(result)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// `true` once the job has finished.
    pub fn is_done(&self) -> bool {
        self.completion
            .result
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

impl DispatchQueue {
    /// A queue holding at most `capacity` waiting jobs (at least 1), with its worker started.
    pub fn new(capacity: usize) -> DispatchQueue {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                jobs: VecDeque::with_capacity(capacity.max(1)),
                closed: false,
            }),
            not_empty: Condvar::new(),
            not_full: Condvar::new(),
            capacity: capacity.max(1),
        });
        let worker_shared = shared.clone();
        let worker = std::thread::Builder::new()
            .name("rfx-dispatch".to_string())
            .spawn(move || worker_loop(&worker_shared))
            .ok();
        if worker.is_none() {
            // No thread, no worker: refuse every job rather than queue jobs nobody runs.
            shared.state.lock().unwrap_or_else(PoisonError::into_inner).closed = true;
        }
        DispatchQueue {
            shared,
            worker: Mutex::new(worker),
        }
    }

    /// The most jobs that may wait.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// Jobs waiting (not counting the one running).
    pub fn pending(&self) -> usize {
        self.lock().jobs.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `job`, blocking while the queue is full. Fails only when the queue is shut down.
    pub fn submit<T, E, F>(&self, job: F) -> Result<JobHandle<T, E>, SubmitError>
    where
        T: Send + 'static,
        E: Send + 'static,
        F: FnOnce() -> Result<T, E> + Send + 'static,
    {
        self.enqueue(job, true)
    }

    /// Queues `job` if there is room; [`SubmitError::Full`] otherwise (the job is dropped).
    pub fn try_submit<T, E, F>(&self, job: F) -> Result<JobHandle<T, E>, SubmitError>
    where
        T: Send + 'static,
        E: Send + 'static,
        F: FnOnce() -> Result<T, E> + Send + 'static,
    {
        self.enqueue(job, false)
    }

    fn enqueue<T, E, F>(&self, job: F, block: bool) -> Result<JobHandle<T, E>, SubmitError>
    where
        T: Send + 'static,
        E: Send + 'static,
        F: FnOnce() -> Result<T, E> + Send + 'static,
    {
        let completion = Arc::new(Completion {
            result: Mutex::new(None),
            done: Condvar::new(),
        });
        let sender = completion.clone();
        let wrapped: Job = Box::new(move || {
            let outcome = match catch_unwind(AssertUnwindSafe(job)) {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(error)) => Err(JobError::Failed(error)),
                Err(payload) => Err(JobError::Panicked(panic_message(payload.as_ref()))),
            };
            *sender.result.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
            sender.done.notify_all();
        });
        let mut state = self.lock();
        loop {
            if state.closed {
                return Err(SubmitError::ShutDown);
            }
            if state.jobs.len() < self.shared.capacity {
                break;
            }
            if !block {
                return Err(SubmitError::Full {
                    capacity: self.shared.capacity,
                });
            }
            state = self
                .shared
                .not_full
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.jobs.push_back(wrapped);
        drop(state);
        self.shared.not_empty.notify_one();
        Ok(JobHandle { completion })
    }

    /// Stops accepting jobs, runs every job already queued, and joins the worker. Idempotent.
    pub fn shutdown(&self) {
        self.lock().closed = true;
        self.shared.not_empty.notify_all();
        self.shared.not_full.notify_all();
        let worker = self.worker.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(worker) = worker {
            // Jobs run under catch_unwind, so the worker itself never panics.
            let _ = worker.join();
        }
    }
}

impl Drop for DispatchQueue {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn worker_loop(shared: &Shared) {
    loop {
        let job = {
            let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if let Some(job) = state.jobs.pop_front() {
                    break job;
                }
                if state.closed {
                    return;
                }
                state = shared
                    .not_empty
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        shared.not_full.notify_one();
        job();
    }
}
