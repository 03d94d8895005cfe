//! Latency of a kernel large enough to be split over threads, called the way a control loop
//! calls it: once per period, with the workers idle in between (so they have stopped spinning
//! and gone to sleep). Prints p50, p99 and max per call for one thread and for every thread,
//! interleaved call by call in the same run, and the same back to back (period 0), where the
//! workers are still spinning.
//!
//! `cargo run --release -p rfx-codegen-cpu --example split_latency -- [--n 65536]
//! [--period-us 1000] [--calls 2000]`

use std::time::{Duration, Instant};

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{ArrayView, ArrayViewMut, Shape};
use rfx_lower::{Backend, CompileOptions, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

fn percentiles(mut ns: Vec<u64>) -> String {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q) as usize];
    format!(
        "p50 {:>7.1} µs  p99 {:>7.1} µs  max {:>7.1} µs",
        at(0.5) as f64 / 1e3,
        at(0.99) as f64 / 1e3,
        at(1.0) as f64 / 1e3
    )
}

fn arg(args: &[String], name: &str, default: u64) -> Result<u64, Box<dyn std::error::Error>> {
    match args.iter().position(|a| a == name) {
        Some(pos) => Ok(args
            .get(pos + 1)
            .ok_or(format!("{name} needs a value"))?
            .parse()?),
        None => Ok(default),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let n = arg(&args, "--n", 65536)? as usize;
    let period = Duration::from_micros(arg(&args, "--period-us", 1000)?);
    let calls = arg(&args, "--calls", 2000)? as usize;
    let kernel = rfx_ir::hir::parse(&format!(
        "kernel k {{\n %x = input x : f32[{n}]\n %y = input y : f32[{n}]\n %two = const 2.0 : f32[]\n %a = mul %x, %two : f32[{n}]\n %s = sin %a : f32[{n}]\n %r = add %s, %y : f32[{n}]\n output r = %r\n}}"
    ))?;
    let (mir, _) = optimize(&kernel, &OptConfig::default())?;
    let (lir, _) = lower(&mir, &LowerConfig::default())?;
    let compile = |threads: Option<usize>| {
        CpuBackend.compile(
            &lir,
            &CompileOptions {
                max_threads: threads,
                ..CompileOptions::default()
            },
        )
    };
    let variants = [("one thread", compile(Some(1))?), ("all threads", compile(None)?)];
    let inputs = random_inputs(&mut TestRng::new(7), &kernel, 0.0);
    let shape = Shape::new([n]);
    let views: Vec<ArrayView> = inputs.iter().map(|a| a.view()).collect();
    let mut out = vec![0.0f32; n];
    let mut scratch = Scratch::new();
    for (label, period) in [("once per period", period), ("back to back", Duration::ZERO)] {
        let mut samples = vec![Vec::with_capacity(calls); variants.len()];
        let mut next = Instant::now();
        for k in 0..calls * variants.len() {
            let v = k % variants.len();
            // Busy-wait to the next tick, as a control loop's timer would wake it.
            while Instant::now() < next {
                std::hint::spin_loop();
            }
            next = Instant::now() + period;
            let mut outputs = [ArrayViewMut::new(&shape, &mut out)?];
            let start = Instant::now();
            variants[v].1.run(&views, &mut outputs, &mut scratch)?;
            samples[v].push(start.elapsed().as_nanos() as u64);
        }
        println!("n = {n}, sin(x*2)+y, {label} ({} µs):", period.as_micros());
        for ((name, _), s) in variants.iter().zip(samples) {
            println!("  {name:<12} {}", percentiles(s));
        }
    }
    Ok(())
}
