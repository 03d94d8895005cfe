//! Table lookups by a computed index (`Tensor::take`): a gain scheduled on speed by linear
//! interpolation in a 16-entry table, against the same formula written as a Rust loop (rustc
//! `-O`), measured in one run; one speed per call (a control loop's use) and 65536; and the
//! gradient in the table (a scatter-add, which rfx writes as a masked sum over the table's
//! rows) against a Rust scatter-add loop.
//!
//! `cargo run --release -p rfx --example lookup_speed`

mod gain_schedule;
mod timing;

use gain_schedule::schedule;
use std::hint::black_box;

use rfx::{DType, Tensor, TensorType};

/// Median over 200 samples of the mean time of `calls` calls, in ns.
fn median_ns(calls: usize, f: impl FnMut()) -> f64 {
    timing::median_ns(200, 200, calls, f)
}

/// [`schedule`] in Rust, as one would write it (`pos as usize` truncates a position that is never
/// negative; `floor` would be a libm call for the default x86-64 target).
fn schedule_rust<T: Copy + Into<f64>>(v: &[T], table: &[T], out: &mut [T], from: fn(f64) -> T) {
    for (o, &v) in out.iter_mut().zip(v) {
        let pos = (v.into() * 2.5).clamp(0.0, 14.999);
        let i = pos as usize;
        let (lo, hi) = (table[i].into(), table[i + 1].into());
        *o = from(lo + (pos - i as f64) * (hi - lo));
    }
}

fn run<T: rfx::Element + Default + Copy + Into<f64>>(
    n: usize,
    from: fn(f64) -> T,
) -> Result<(), Box<dyn std::error::Error>> {
    let f = rfx::jit(schedule);
    let v: Vec<T> = (0..n)
        .map(|k| from(3.0 + 3.2 * (k as f64 * 0.37).sin()))
        .collect();
    let table: Vec<T> = (0..16).map(|k| from(1.0 + (k as f64 * 0.7).sin())).collect();
    let types = [TensorType::new(T::DTYPE, [n]), TensorType::new(T::DTYPE, [16])];
    let mut bound = f.bind(&types)?;
    let (mut out, mut rust) = (vec![T::default(); n], vec![T::default(); n]);
    let calls = if n > 1000 { 10 } else { 1000 };
    let kernels = f.executable(&types)?.mir().kernels().len();
    let mut rfx_ns = 0.0;
    let mut rust_ns = 0.0;
    // Alternately, so that both see the same machine.
    for _ in 0..3 {
        rfx_ns += median_ns(calls, || {
            bound
                .run_slices([&v[..], &table[..]], [&mut out[..]])
                .expect("run");
        });
        rust_ns += median_ns(calls, || {
            schedule_rust(black_box(&v), black_box(&table), black_box(&mut rust), from);
        });
    }
    println!(
        "schedule {}[{n:>5}]: rfx {:8.2} ns, Rust loop {:8.2} ns per {} ({:.2}x), {kernels} kernel(s)",
        T::DTYPE,
        rfx_ns / 3.0 / n as f64,
        rust_ns / 3.0 / n as f64,
        if n == 1 { "call" } else { "element" },
        rfx_ns / rust_ns,
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for n in [1, 65536] {
        run::<f32>(n, |x| x as f32)?;
        run::<f64>(n, |x| x)?;
    }

    // ∂(Σ gain)/∂table at n speeds: each speed adds 1 - t to its lower entry and t to its upper.
    let g = rfx::jit(rfx::grad(|v: Tensor, table: Tensor| schedule(v, table).sum(rfx::All)).wrt(&[1]));
    for n in [16, 4096] {
        let v: Vec<f64> = (0..n).map(|k| 3.0 + 3.2 * (k as f64 * 0.37).sin()).collect();
        let table: Vec<f64> = (0..16).map(|k| 1.0 + (k as f64 * 0.7).sin()).collect();
        let types = [
            TensorType::new(DType::F64, [n]),
            TensorType::new(DType::F64, [16]),
        ];
        let mut bound = g.bind(&types)?;
        let mut grad = [0.0f64; 16];
        let mut rust = [0.0f64; 16];
        let calls = if n > 1000 { 10 } else { 1000 };
        let kernels = g.executable(&types)?.mir().kernels().len();
        let (mut rfx_ns, mut rust_ns) = (0.0, 0.0);
        for _ in 0..3 {
            rfx_ns += median_ns(calls, || {
                bound
                    .run_slices([&v[..], &table[..]], [&mut grad[..]])
                    .expect("run");
            });
            rust_ns += median_ns(calls, || {
                let (v, rust) = (black_box(&v), black_box(&mut rust));
                rust.fill(0.0);
                for &v in v {
                    let pos = (v * 2.5).clamp(0.0, 14.999);
                    let i = pos as usize;
                    let t = pos - i as f64;
                    rust[i] += 1.0 - t;
                    rust[i + 1] += t;
                }
            });
        }
        println!(
            "table gradient f64[{n:>4}]: rfx {:8.1} ns, Rust scatter-add {:8.1} ns per call ({:.2}x), {kernels} kernel(s)",
            rfx_ns / 3.0,
            rust_ns / 3.0,
            rfx_ns / rust_ns,
        );
    }
    Ok(())
}
