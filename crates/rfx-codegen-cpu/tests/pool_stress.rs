//! The worker pool under a control loop's call pattern: thousands of split calls, back to back
//! and with gaps long enough for the workers to fall asleep, from one caller and from two at
//! once (one of which finds the pool busy and runs alone). Every output must equal the
//! one-thread result bit for bit, and the calls must finish (a deadlock fails the test after
//! 120 s instead of hanging CI).
//!
//! A pool that keeps its completion latch on the caller's stack lets a worker that locks it
//! after the caller has returned corrupt the next call's latch and deadlock. `cargo run
//! --release -p rfx-codegen-cpu --example split_latency -- --period-us 0 --calls 20000` hangs
//! on such a pool (`cargo xtask miri` reports the race too), but this test, built at the test
//! profile's opt-level 1, need not: the race needs a worker descheduled in a window of a few
//! instructions. It guards the split results and the hand-over protocol, not that race
//! specifically.

use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, ArrayView, ArrayViewMut, Shape};
use rfx_lower::{Backend, CompileOptions, Compiled, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

/// Large enough that the kernel is split (three transcendentals make its body cost about 64
/// instruction-equivalents, so the CPU backend hands a thread 32768 * 16 / 64 = 8192 points),
/// small enough for tens of thousands of calls in a few seconds.
const N: usize = 16384;

fn compile(threads: Option<usize>) -> Arc<dyn Compiled> {
    let kernel = rfx_ir::hir::parse(&format!(
        "kernel k {{\n %x = input x : f32[{N}]\n %y = input y : f32[{N}]\n %s = sin %x : f32[{N}]\n %c = cos %y : f32[{N}]\n %m = mul %s, %c : f32[{N}]\n %o = exp %m : f32[{N}]\n output o = %o\n}}"
    ))
    .expect("parse");
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    let (lir, _) = lower(&mir, &LowerConfig::default()).expect("lower");
    CpuBackend
        .compile(
            &lir,
            &CompileOptions {
                max_threads: threads,
                ..CompileOptions::default()
            },
        )
        .expect("compile")
}

fn run_into(compiled: &dyn Compiled, inputs: &[ArrayView], out: &mut [f32], scratch: &mut Scratch) {
    let shape = Shape::new([N]);
    let mut outputs = [ArrayViewMut::new(&shape, out).expect("view")];
    compiled.run(inputs, &mut outputs, scratch).expect("run");
}

fn bits(out: &[f32]) -> Vec<u32> {
    out.iter().map(|v| v.to_bits()).collect()
}

/// `calls` rounds of a split call and a one-thread call on rotating inputs, back to back (the
/// split call's result checked every 16th round, so that checking leaves the workers no slack);
/// every `gap_every`-th round waits `gap` first.
fn hammer(seed: u64, calls: usize, gap_every: usize, gap: Duration) {
    let kernel = rfx_ir::hir::parse(&format!(
        "kernel k {{\n %x = input x : f32[{N}]\n %y = input y : f32[{N}]\n output x = %x\n}}"
    ))
    .expect("parse");
    let mut rng = TestRng::new(seed);
    let sets: Vec<Vec<Array>> = (0..4).map(|_| random_inputs(&mut rng, &kernel, 0.01)).collect();
    let views: Vec<Vec<ArrayView>> = sets.iter().map(|s| s.iter().map(Array::view).collect()).collect();
    let (split, single) = (compile(None), compile(Some(1)));
    let mut scratch = Scratch::new();
    let mut out = vec![0.0f32; N];
    let want: Vec<Vec<u32>> = views
        .iter()
        .map(|v| {
            run_into(single.as_ref(), v, &mut out, &mut scratch);
            bits(&out)
        })
        .collect();
    let mut other = vec![0.0f32; N];
    for k in 0..calls {
        if gap_every > 0 && k % gap_every == 0 {
            let until = Instant::now() + gap;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        let set = k % views.len();
        run_into(split.as_ref(), &views[set], &mut out, &mut scratch);
        if k % 16 == 0 {
            assert!(
                bits(&out) == want[set],
                "call {k}: split result differs from one thread"
            );
        }
        run_into(
            single.as_ref(),
            &views[(k + 1) % views.len()],
            &mut other,
            &mut scratch,
        );
    }
}

/// Runs `hammer`s on threads, failing after 120 s instead of hanging.
fn finish_within_two_minutes(runs: &[(u64, usize, usize)]) {
    let (done, finished) = mpsc::channel();
    for &(seed, calls, gap_every) in runs {
        let done = done.clone();
        std::thread::spawn(move || {
            // Gaps of 200 µs outlast the workers' 50 µs spin, so they sleep between bursts.
            hammer(seed, calls, gap_every, Duration::from_micros(200));
            let _ = done.send(seed);
        });
    }
    drop(done);
    for _ in runs {
        match finished.recv_timeout(Duration::from_secs(120)) {
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("split calls did not finish in 120 s: the pool deadlocked")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("a hammer thread panicked (see above)"),
        }
    }
}

#[test]
fn split_calls_finish_and_match_one_thread() {
    // One caller, back to back, then with gaps; then two callers at once.
    finish_within_two_minutes(&[(1, 10_000, 0)]);
    finish_within_two_minutes(&[(2, 5_000, 7)]);
    finish_within_two_minutes(&[(3, 5_000, 7), (4, 2_000, 0)]);
}
