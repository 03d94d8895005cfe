//! The 16M-element `add` against the machine's copy bandwidth, measured in the same run: a
//! plain `copy_from_slice` of 64 MiB on one thread and split over every core (bytes read plus
//! bytes written per second), then rfx's `x + y` on 16M `f32` with every core (12 bytes per
//! element moved). Medians of 30 runs each.
//!
//! `cargo run --release -p rfx-codegen-cpu --example bandwidth`

use std::time::{Duration, Instant};

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::{ArrayView, ArrayViewMut, Shape};
use rfx_lower::{Backend, CompileOptions, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

const N: usize = 1 << 24;

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort_unstable();
    v[v.len() / 2].as_secs_f64()
}

fn copy_gbs(threads: usize, src: &[f32], dst: &mut [f32]) -> f64 {
    let chunk = N.div_ceil(threads);
    let times: Vec<Duration> = (0..30)
        .map(|_| {
            let start = Instant::now();
            std::thread::scope(|s| {
                for (d, c) in dst.chunks_mut(chunk).zip(src.chunks(chunk)) {
                    s.spawn(move || d.copy_from_slice(c));
                }
            });
            start.elapsed()
        })
        .collect();
    (2 * N * 4) as f64 / median(times) / 1e9
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads = std::thread::available_parallelism()?.get();
    let x: Vec<f32> = (0..N).map(|i| (i % 1000) as f32 * 0.001).collect();
    let y: Vec<f32> = (0..N).map(|i| (i % 777) as f32 * 0.002).collect();
    let mut out = vec![0.0f32; N];
    let one = copy_gbs(1, &x, &mut out);
    let all = copy_gbs(threads, &x, &mut out);

    let kernel = rfx_ir::hir::parse(&format!(
        "kernel add {{\n %x = input x : f32[{N}]\n %y = input y : f32[{N}]\n %r = add %x, %y : f32[{N}]\n output out = %r\n}}"
    ))?;
    let (mir, _) = optimize(&kernel, &OptConfig::default())?;
    let (lir, _) = lower(&mir, &LowerConfig::default())?;
    let compiled = CpuBackend.compile(&lir, &CompileOptions::default())?;
    let shape = Shape::new([N]);
    let inputs = [ArrayView::new(&shape, &x)?, ArrayView::new(&shape, &y)?];
    let mut scratch = Scratch::new();
    let times: Vec<Duration> = (0..30)
        .map(|_| {
            let mut outputs = [ArrayViewMut::new(&shape, &mut out).expect("view")];
            let start = Instant::now();
            compiled.run(&inputs, &mut outputs, &mut scratch).expect("run");
            start.elapsed()
        })
        .collect();
    let add = (3 * N * 4) as f64 / median(times) / 1e9;
    println!(
        "copy: {one:.1} GB/s (1 thread), {all:.1} GB/s ({threads} threads); rfx add 16M: {add:.1} GB/s = {:.0}% of the {threads}-thread copy",
        100.0 * add / all
    );
    Ok(())
}
