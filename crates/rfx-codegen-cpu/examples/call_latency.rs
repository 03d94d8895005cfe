//! Per-call latency of a cached PID kernel at n = 1 through the safe API, with preallocated
//! views and scratch (the real-time path): prints p50, p99, p99.9 and max over 1e6 calls, and
//! the same for an empty Rust function call through a function pointer, measured in the same
//! run.
//!
//! `cargo run --release -p rfx-codegen-cpu --example call_latency`
//!
//! With `--calls N` it only makes N untimed calls, for instruction counts:
//! `valgrind --tool=callgrind target/release/examples/call_latency --calls 100000`.

use std::time::Instant;

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::{ArrayView, ArrayViewMut, Shape};
use rfx_lower::{Backend, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

fn percentiles(mut ns: Vec<u64>) -> String {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q) as usize];
    format!(
        "p50 {} ns, p99 {} ns, p99.9 {} ns, max {} ns",
        at(0.5),
        at(0.99),
        at(0.999),
        at(1.0)
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let kernel = rfx_ir::hir::parse(
        "kernel pid {\n %e = input e : f32[1]\n %i = input i : f32[1]\n %d = input d : f32[1]\n %kp = const 1.2 : f32[]\n %ki = const 0.3 : f32[]\n %kd = const 0.05 : f32[]\n %lo = const -1.0 : f32[]\n %hi = const 1.0 : f32[]\n %a = mul %kp, %e : f32[1]\n %b = mul %ki, %i : f32[1]\n %c = mul %kd, %d : f32[1]\n %s = add %a, %b : f32[1]\n %t = add %s, %c : f32[1]\n %u = clamp %t, %lo, %hi : f32[1]\n output u = %u\n}",
    )?;
    let (mir, _) = optimize(&kernel, &OptConfig::default())?;
    let (lir, _) = lower(&mir, &LowerConfig::default())?;
    let compiled = CpuBackend.compile(&lir, &Default::default())?;
    let shape = Shape::new([1]);
    let (e, i, d) = ([0.3f32], [0.1f32], [-0.2f32]);
    let mut u = [0.0f32];
    let inputs = [
        ArrayView::new(&shape, &e)?,
        ArrayView::new(&shape, &i)?,
        ArrayView::new(&shape, &d)?,
    ];
    let mut scratch = Scratch::new();
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a == "--calls") {
        let calls: usize = args.get(pos + 1).ok_or("--calls needs a count")?.parse()?;
        for _ in 0..calls {
            let mut outputs = [ArrayViewMut::new(&shape, &mut u)?];
            compiled.run(std::hint::black_box(&inputs), &mut outputs, &mut scratch)?;
        }
        println!("{calls} calls (u = {})", u[0]);
        return Ok(());
    }
    let n = 1_000_000;
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let mut outputs = [ArrayViewMut::new(&shape, &mut u)?];
        let start = Instant::now();
        compiled.run(&inputs, &mut outputs, &mut scratch)?;
        samples.push(start.elapsed().as_nanos() as u64);
    }
    println!("rfx PID (n=1) call:   {}  (u = {})", percentiles(samples), u[0]);
    let f: fn(f32) -> f32 = std::hint::black_box(|x| x * 2.0);
    let mut empty = Vec::with_capacity(n);
    for k in 0..n {
        let start = Instant::now();
        std::hint::black_box(f(k as f32));
        empty.push(start.elapsed().as_nanos() as u64);
    }
    println!(
        "empty fn-pointer call: {}  (timer overhead included in both)",
        percentiles(empty)
    );
    Ok(())
}
