//! The dispatch queue: FIFO order, errors and panics delivered to handles, back-pressure,
//! draining shutdown, and 100,000 submissions with random failures.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx_runtime::{DispatchQueue, JobError, SubmitError};

#[test]
fn hundred_thousand_jobs_with_random_failures_in_order() {
    // Panicking jobs are caught by the queue; keep the default hook from printing each one.
    std::panic::set_hook(Box::new(|_| {}));
    let queue = DispatchQueue::new(256);
    let log = Arc::new(Mutex::new(Vec::with_capacity(100_000)));
    let mut rng = StdRng::seed_from_u64(42);
    let mut handles = Vec::with_capacity(100_000);
    let mut expected = Vec::with_capacity(100_000);
    for i in 0..100_000u64 {
        let outcome: u8 = rng.random_range(0..100);
        let log = log.clone();
        let kind = match outcome {
            0..=9 => 1, // error
            10 => 2,    // panic
            _ => 0,     // success
        };
        expected.push(kind);
        let handle = queue
            .submit(move || {
                log.lock().expect("log").push(i);
                match kind {
                    1 => Err(format!("job {i} failed")),
                    2 => panic!("job {i} panicked"),
                    _ => Ok(i * 3),
                }
            })
            .expect("submit");
        handles.push(handle);
    }
    for (i, (handle, kind)) in handles.into_iter().zip(expected).enumerate() {
        let i = i as u64;
        match (kind, handle.wait()) {
            (0, Ok(v)) => assert_eq!(v, i * 3),
            (1, Err(JobError::Failed(msg))) => assert_eq!(msg, format!("job {i} failed")),
            (2, Err(JobError::Panicked(msg))) => assert_eq!(msg, format!("job {i} panicked")),
            (kind, other) => panic!("job {i} (kind {kind}): unexpected {other:?}"),
        }
    }
    let _ = std::panic::take_hook();
    let log = log.lock().expect("log");
    assert_eq!(log.len(), 100_000);
    assert!(
        log.iter().enumerate().all(|(i, &v)| v == i as u64),
        "jobs ran out of order"
    );
}

#[test]
fn try_submit_reports_full_and_submit_blocks_until_room() {
    let queue = Arc::new(DispatchQueue::new(2));
    let gate = Arc::new(Barrier::new(2));
    // The first job occupies the worker until the gate opens; two more fill the queue.
    let g = gate.clone();
    let first = queue.submit(move || {
        g.wait();
        Ok::<_, ()>(1)
    });
    let first = first.expect("submit");
    // Wait until the worker has taken the first job off the queue.
    while queue.pending() > 0 {
        std::thread::yield_now();
    }
    let second = queue.try_submit(|| Ok::<_, ()>(2)).expect("room");
    let third = queue.try_submit(|| Ok::<_, ()>(3)).expect("room");
    assert_eq!(
        queue.try_submit(|| Ok::<_, ()>(4)).unwrap_err(),
        SubmitError::Full { capacity: 2 }
    );
    // A blocking submit waits for room, which appears once the gate opens.
    let blocked_done = Arc::new(AtomicUsize::new(0));
    let (q, flag) = (queue.clone(), blocked_done.clone());
    let waiter = std::thread::spawn(move || {
        let handle = q.submit(|| Ok::<_, ()>(5)).expect("submit");
        flag.store(1, Ordering::SeqCst);
        handle.wait()
    });
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(
        blocked_done.load(Ordering::SeqCst),
        0,
        "submit did not block on a full queue"
    );
    gate.wait();
    assert_eq!(first.wait().expect("first"), 1);
    assert_eq!(second.wait().expect("second"), 2);
    assert_eq!(third.wait().expect("third"), 3);
    assert_eq!(waiter.join().expect("join").expect("fifth"), 5);
}

#[test]
fn shutdown_drains_and_then_refuses() {
    let queue = DispatchQueue::new(1000);
    let counter = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..500)
        .map(|_| {
            let c = counter.clone();
            queue
                .submit(move || {
                    std::thread::sleep(std::time::Duration::from_micros(10));
                    Ok::<_, ()>(c.fetch_add(1, Ordering::SeqCst))
                })
                .expect("submit")
        })
        .collect();
    queue.shutdown();
    assert_eq!(counter.load(Ordering::SeqCst), 500, "shutdown did not drain");
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.wait().expect("job"), i);
    }
    assert_eq!(
        queue.submit(|| Ok::<_, ()>(0)).unwrap_err(),
        SubmitError::ShutDown
    );
}
