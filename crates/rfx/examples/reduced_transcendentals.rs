//! Costs that sum a transcendental over a long vector (a log barrier over an MPC horizon, a
//! Gaussian likelihood): one bound call of `sum(f(x))`, of the elementwise `f(x)` alone, and a
//! Rust loop summing the platform's libm `f` in order, for one long vector and for batches of
//! 64 rows summed row by row; median ns per element, all measured in
//! the same run, in `f64` and `f32`.
//!
//! `cargo run --release -p rfx --example reduced_transcendentals`

mod timing;

use std::hint::black_box;

use rfx::{DType, Tensor, TensorType};

fn barrier(x: Tensor) -> Tensor {
    (1.0 - x * x * 0.25).log()
}

fn gaussian(x: Tensor) -> Tensor {
    (-(x * x) * 0.5).exp()
}

/// The last axis: a 1-D cost's only one, a batch's rows.
#[derive(Clone, Copy)]
struct Last;

impl rfx::Axes for Last {
    fn axes(&self, rank: usize) -> Vec<usize> {
        vec![rank.saturating_sub(1)]
    }
}

fn barrier_sum(x: Tensor) -> Tensor {
    barrier(x).sum(Last)
}

fn gaussian_sum(x: Tensor) -> Tensor {
    gaussian(x).sum(Last)
}

/// Median ns per element of `sum(f)`, of `f` elementwise, and of a Rust loop summing
/// `reference`.
fn measure<S: rfx::KernelFn, F: rfx::KernelFn>(
    reduced: rfx::Jit<S>,
    mapped: rfx::Jit<F>,
    reference: fn(f64) -> f64,
    dtype: DType,
    shape: &[usize],
) -> Result<[f64; 3], rfx::JitError> {
    let n: usize = shape.iter().product();
    let rows = n / shape.last().copied().unwrap_or(1).max(1);
    let x64: Vec<f64> = (0..n)
        .map(|i| -1.9 + 3.8 * ((i * 7919) % n) as f64 / n as f64)
        .collect();
    let ty = [TensorType::new(dtype, shape.to_vec())];
    let mut reduced = reduced.bind(&ty)?;
    let mut mapped = mapped.bind(&ty)?;
    let calls = (1 << 16) / n + 1;
    let per = |t: f64| t / n as f64;
    let expected: f64 = x64[..n / rows].iter().map(|&v| reference(v)).sum();
    let (t_sum, t_map) = if dtype == DType::F64 {
        let (mut s, mut y) = (vec![0.0f64; rows], vec![0.0f64; n]);
        let t_sum = timing::median_ns(20, 60, calls, || {
            reduced.run_slices([&x64[..]], [&mut s[..]]).expect("run");
        });
        let t_map = timing::median_ns(20, 60, calls, || {
            mapped.run_slices([&x64[..]], [&mut y[..]]).expect("run");
        });
        assert!((s[0] - expected).abs() <= 1e-9 * expected.abs().max(1.0));
        (t_sum, t_map)
    } else {
        let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
        let (mut s, mut y) = (vec![0.0f32; rows], vec![0.0f32; n]);
        let t_sum = timing::median_ns(20, 60, calls, || {
            reduced.run_slices([&x32[..]], [&mut s[..]]).expect("run");
        });
        let t_map = timing::median_ns(20, 60, calls, || {
            mapped.run_slices([&x32[..]], [&mut y[..]]).expect("run");
        });
        assert!((f64::from(s[0]) - expected).abs() <= 1e-3 * expected.abs().max(1.0));
        (t_sum, t_map)
    };
    let t_ref = timing::median_ns(20, 60, calls, || {
        let mut s = 0.0;
        for &v in black_box(&x64[..]) {
            s += reference(v);
        }
        black_box(s);
    });
    Ok([per(t_sum), per(t_map), per(t_ref)])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let shapes: [&[usize]; 6] = [&[64], &[1024], &[16384], &[64, 12], &[64, 40], &[64, 100]];
    for dtype in [DType::F64, DType::F32] {
        for shape in shapes {
            let rows = [
                (
                    "log barrier",
                    measure(
                        rfx::jit(barrier_sum),
                        rfx::jit(barrier),
                        |x| (1.0 - x * x * 0.25).ln(),
                        dtype,
                        shape,
                    )?,
                ),
                (
                    "gaussian",
                    measure(
                        rfx::jit(gaussian_sum),
                        rfx::jit(gaussian),
                        |x| (-(x * x) * 0.5).exp(),
                        dtype,
                        shape,
                    )?,
                ),
            ];
            for (name, [s, m, r]) in rows {
                let shape = format!("{shape:?}");
                println!(
                    "{name:<11} {dtype:?} {shape:<9}: sum(f) {s:5.2} ns/elem, f {m:5.2}, Rust f64 loop {r:5.2}"
                );
            }
        }
    }
    Ok(())
}
