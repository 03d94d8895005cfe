//! Running folds against the same loops written in Rust (compiled by rustc with this build's
//! optimisation, measured alternately in the same run): positions integrated over a horizon
//! (`cumsum` along each vehicle's row, batch-major, and along the time axis of a time-major
//! batch, and of a batch of trajectories `[batch, horizon, dim]`), a cost-to-go (the running
//! sum of squared errors from the end), a running maximum,
//! and the gradient of a single integrator's trajectory cost with respect to its velocities
//! (`grad` of `Σ (p0 + cumsum(v dt) - goal)²`: a reverse running sum); a low-pass filter over
//! each row of signals and down a time-major batch (`linrec`), and the gradients of a sum of
//! running products (two linear recurrences) and of running maxima (runs summed by one). Every rfx value must equal the Rust loop's bit for
//! bit (both fold in order in `f32`; gradients within rounding). rfx runs on one thread, as the
//! Rust loops do. Median time per call and its ratio to Rust's.
//!
//! `cargo run --release -p rfx --example scan_speed`

mod timing;

use std::hint::black_box;

use rfx::{All, CompileConfig, DType, ScanOp, Tensor, TensorType};

/// Running sums of each row of `horizon` points.
fn rows_cumsum(v: &[f32], horizon: usize, out: &mut [f32]) {
    for (row, o) in v.chunks_exact(horizon).zip(out.chunks_exact_mut(horizon)) {
        let mut acc = -0.0f32;
        for (x, y) in row.iter().zip(o) {
            acc += x;
            *y = acc;
        }
    }
}

/// Running sums down the time axis of a `[horizon, batch]` array (rustc vectorises the inner
/// loop over the batch).
fn columns_cumsum(v: &[f32], batch: usize, out: &mut [f32]) {
    out[..batch].copy_from_slice(&v[..batch]);
    for t in 1..v.len() / batch {
        for b in 0..batch {
            out[t * batch + b] = out[(t - 1) * batch + b] + v[t * batch + b];
        }
    }
}

/// The remaining cost from each step of each row: `Σ_{s ≥ t} (x_s - r)²`.
fn cost_to_go(x: &[f32], r: f32, horizon: usize, out: &mut [f32]) {
    for (row, o) in x.chunks_exact(horizon).zip(out.chunks_exact_mut(horizon)) {
        let mut acc = -0.0f32;
        for (x, y) in row.iter().zip(o.iter_mut()).rev() {
            acc += (x - r) * (x - r);
            *y = acc;
        }
    }
}

fn running_max(x: &[f32], horizon: usize, out: &mut [f32]) {
    for (row, o) in x.chunks_exact(horizon).zip(out.chunks_exact_mut(horizon)) {
        let mut acc = f32::NEG_INFINITY;
        for (x, y) in row.iter().zip(o) {
            acc = if acc > *x || acc.is_nan() { acc } else { *x };
            *y = acc;
        }
    }
}

/// The gradient of `Σ_t (p0 + Σ_{s ≤ t} v_s dt - goal)²` with respect to `v`, per row:
/// `dt Σ_{t ≥ s} 2 (p_t - goal)`.
fn integrator_grad(v: &[f32], p0: f32, goal: f32, dt: f32, horizon: usize, out: &mut [f32]) {
    let mut p = vec![0.0f32; horizon];
    for (row, o) in v.chunks_exact(horizon).zip(out.chunks_exact_mut(horizon)) {
        let mut acc = -0.0f32;
        for (x, q) in row.iter().zip(&mut p) {
            acc += x * dt;
            *q = acc + p0;
        }
        let mut back = -0.0f32;
        for (q, g) in p.iter().zip(o.iter_mut()).rev() {
            back += (q - goal) * 2.0;
            *g = back * dt;
        }
    }
}

/// Running sums along the time axis of a batch of trajectories `[batch, horizon, dim]`
/// (batch-major: each step's `dim` values side by side).
// Indexed: 2.5-6x faster here than zipped iterators over the accumulators, which is the
// loop rfx is held to (clippy reads the indexing as a copy).
#[allow(clippy::manual_memcpy)]
fn trajectories_cumsum(v: &[f32], horizon: usize, dim: usize, out: &mut [f32]) {
    for (row, o) in v
        .chunks_exact(horizon * dim)
        .zip(out.chunks_exact_mut(horizon * dim))
    {
        let mut acc = [-0.0f32; 16];
        for (step, os) in row.chunks_exact(dim).zip(o.chunks_exact_mut(dim)) {
            for k in 0..dim {
                acc[k] += step[k];
                os[k] = acc[k];
            }
        }
    }
}

/// `y = 0.9 y + 0.1 x` along each row of `horizon` points.
fn rows_lowpass(x: &[f32], horizon: usize, out: &mut [f32]) {
    for (row, o) in x.chunks_exact(horizon).zip(out.chunks_exact_mut(horizon)) {
        let mut acc = -0.0f32;
        for (x, y) in row.iter().zip(o) {
            acc = 0.9 * acc + x * 0.1;
            *y = acc;
        }
    }
}

/// `y = 0.9 y + 0.1 x` down the time axis of a `[horizon, batch]` array.
fn columns_lowpass(x: &[f32], batch: usize, out: &mut [f32]) {
    let mut acc = vec![-0.0f32; batch];
    for (row, o) in x.chunks_exact(batch).zip(out.chunks_exact_mut(batch)) {
        for ((a, x), y) in acc.iter_mut().zip(row).zip(o) {
            *a = 0.9 * *a + x * 0.1;
            *y = *a;
        }
    }
}

/// The gradient of `Σ cumprod(x)` along each row: `λ_i Π_{k < i} x_k` with
/// `λ_i = 1 + x_{i+1} λ_{i+1}` (no division, exact at zeros).
fn cumprod_sum_grad(x: &[f32], horizon: usize, out: &mut [f32]) {
    let mut prefix = vec![0.0f32; horizon];
    for (row, o) in x.chunks_exact(horizon).zip(out.chunks_exact_mut(horizon)) {
        let mut acc = 1.0f32;
        for (x, p) in row.iter().zip(&mut prefix) {
            *p = acc;
            acc *= x;
        }
        let mut lambda = 0.0f32;
        let mut next = 0.0f32;
        for ((x, p), g) in row.iter().zip(&prefix).zip(o.iter_mut()).rev() {
            lambda = 1.0 + next * lambda;
            *g = lambda * p;
            next = *x;
        }
    }
}

/// One thread, as the Rust loops run: kernels past the split threshold would otherwise use
/// every core.
fn one_thread() -> CompileConfig {
    let mut config = CompileConfig::default();
    config.compile.max_threads = Some(1);
    config
}

/// The gradient of `Σ cummax(x)` along each row: each result's one added to the element it
/// holds (the later element on a tie).
fn cummax_sum_grad(x: &[f32], horizon: usize, out: &mut [f32]) {
    for (row, o) in x.chunks_exact(horizon).zip(out.chunks_exact_mut(horizon)) {
        o.fill(0.0);
        let mut held = 0;
        for (i, v) in row.iter().enumerate() {
            if !(row[held] > *v || row[held].is_nan()) || i == 0 {
                held = i;
            }
            o[held] += 1.0;
        }
    }
}

fn report(name: &str, rfx_ns: f64, rust_ns: f64) {
    println!(
        "{name:<34} rfx {rfx_ns:10.1} ns   rust {rust_ns:10.1} ns   {:5.2}x",
        rfx_ns / rust_ns
    );
}

fn same_bits(u: &[f32], v: &[f32]) -> bool {
    u.len() == v.len() && u.iter().zip(v).all(|(p, q)| p.to_bits() == q.to_bits())
}

fn close(u: &[f32], v: &[f32]) -> bool {
    u.iter()
        .zip(v)
        .all(|(p, q)| (p - q).abs() <= 1e-4 * (1.0 + q.abs()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let f32s = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    let data =
        |n: usize, k: f32| -> Vec<f32> { (0..n).map(|i| ((i * 37) % 101) as f32 * 0.02 * k - 1.0).collect() };
    for (batch, horizon) in [(1, 20), (1, 100), (1024, 20), (1024, 50), (1024, 200)] {
        let v = data(batch * horizon, 1.0);
        let mut f = rfx::jit_with(|v: Tensor| v.cumsum(1), one_thread()).bind(&[f32s(&[batch, horizon])])?;
        let (mut out, mut want) = (vec![0.0; v.len()], vec![0.0; v.len()]);
        let t = timing::median_ns(50, 60, 20, || {
            f.run_slices([&v[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(50, 60, 20, || {
            rows_cumsum(black_box(&v), horizon, black_box(&mut want))
        });
        assert!(same_bits(&out, &want), "cumsum values");
        report(&format!("cumsum rows [{batch}, {horizon}]"), t, r);
    }
    for (horizon, batch) in [(50, 1024), (200, 64)] {
        let v = data(batch * horizon, 0.7);
        let mut f = rfx::jit_with(|v: Tensor| v.cumsum(0), one_thread()).bind(&[f32s(&[horizon, batch])])?;
        let (mut out, mut want) = (vec![0.0; v.len()], vec![0.0; v.len()]);
        let t = timing::median_ns(20, 40, 10, || {
            f.run_slices([&v[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(20, 40, 10, || {
            columns_cumsum(black_box(&v), batch, black_box(&mut want))
        });
        // Rust starts each column at its first element, rfx at `-0 + x`: the same bits here.
        assert!(same_bits(&out, &want), "time-major cumsum values");
        report(&format!("cumsum time-major [{horizon}, {batch}]"), t, r);
    }
    for (batch, horizon, dim) in [(256, 50, 3), (256, 50, 6), (64, 200, 4)] {
        let v = data(batch * horizon * dim, 0.8);
        let mut f =
            rfx::jit_with(|v: Tensor| v.cumsum(1), one_thread()).bind(&[f32s(&[batch, horizon, dim])])?;
        let (mut out, mut want) = (vec![0.0; v.len()], vec![0.0; v.len()]);
        let t = timing::median_ns(50, 60, 20, || {
            f.run_slices([&v[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(50, 60, 20, || {
            trajectories_cumsum(black_box(&v), horizon, dim, black_box(&mut want))
        });
        assert!(same_bits(&out, &want), "trajectory cumsum values");
        report(&format!("cumsum trajectories [{batch}, {horizon}, {dim}]"), t, r);
    }
    for (batch, horizon) in [(1, 50), (1024, 50)] {
        let x = data(batch * horizon, 1.3);
        let mut ctg = rfx::jit_with(
            |x: Tensor| {
                let e = x - 0.25;
                (e * e).scan(ScanOp::Sum, 1, true)
            },
            one_thread(),
        )
        .bind(&[f32s(&[batch, horizon])])?;
        let mut mx = rfx::jit_with(|x: Tensor| x.cummax(1), one_thread()).bind(&[f32s(&[batch, horizon])])?;
        let (mut out, mut want) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        let t = timing::median_ns(50, 60, 20, || {
            ctg.run_slices([&x[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(50, 60, 20, || {
            cost_to_go(black_box(&x), 0.25, horizon, black_box(&mut want))
        });
        assert!(same_bits(&out, &want), "cost-to-go values");
        report(&format!("cost-to-go [{batch}, {horizon}]"), t, r);
        let t = timing::median_ns(50, 60, 20, || {
            mx.run_slices([&x[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(50, 60, 20, || {
            running_max(black_box(&x), horizon, black_box(&mut want))
        });
        assert!(same_bits(&out, &want), "running maximum values");
        report(&format!("cummax [{batch}, {horizon}]"), t, r);
    }
    for (batch, horizon) in [(1, 30), (256, 30)] {
        let v = data(batch * horizon, 0.9);
        let (p0, goal, dt) = (0.5f32, 2.0f32, 0.1f32);
        let mut g = rfx::jit_with(
            rfx::grad(|v: Tensor| {
                let p = (v * 0.1).cumsum(1) + 0.5;
                let e = p - 2.0;
                (e * e).sum(All)
            }),
            one_thread(),
        )
        .bind(&[f32s(&[batch, horizon])])?;
        let (mut out, mut want) = (vec![0.0; v.len()], vec![0.0; v.len()]);
        let t = timing::median_ns(50, 60, 20, || {
            g.run_slices([&v[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(50, 60, 20, || {
            integrator_grad(black_box(&v), p0, goal, dt, horizon, black_box(&mut want))
        });
        assert!(close(&out, &want), "integrator gradient values");
        report(&format!("integrator grad [{batch}, {horizon}]"), t, r);
    }
    for (batch, horizon) in [(1, 100), (1024, 50), (1024, 200)] {
        let x = data(batch * horizon, 1.1);
        let mut f = rfx::jit_with(|x: Tensor| (x * 0.1).linrec(0.9, 1, false), one_thread())
            .bind(&[f32s(&[batch, horizon])])?;
        let (mut out, mut want) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        let t = timing::median_ns(50, 60, 20, || {
            f.run_slices([&x[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(50, 60, 20, || {
            rows_lowpass(black_box(&x), horizon, black_box(&mut want))
        });
        assert!(same_bits(&out, &want), "low-pass values");
        report(&format!("low-pass rows [{batch}, {horizon}]"), t, r);
    }
    for (horizon, batch) in [(50, 1024), (200, 64)] {
        let x = data(batch * horizon, 0.8);
        let mut f = rfx::jit_with(|x: Tensor| (x * 0.1).linrec(0.9, 0, false), one_thread())
            .bind(&[f32s(&[horizon, batch])])?;
        let (mut out, mut want) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        let t = timing::median_ns(20, 40, 10, || {
            f.run_slices([&x[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(20, 40, 10, || {
            columns_lowpass(black_box(&x), batch, black_box(&mut want))
        });
        assert!(same_bits(&out, &want), "time-major low-pass values");
        report(&format!("low-pass time-major [{horizon}, {batch}]"), t, r);
    }
    for (batch, horizon) in [(1, 30), (256, 30), (64, 200)] {
        // Factors near one keep the products in range over 200 steps.
        let x: Vec<f32> = data(batch * horizon, 0.05)
            .iter()
            .map(|v| 1.0 + 0.05 * v)
            .collect();
        let mut g = rfx::jit_with(rfx::grad(|x: Tensor| x.cumprod(1).sum(All)), one_thread())
            .bind(&[f32s(&[batch, horizon])])?;
        let (mut out, mut want) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        let t = timing::median_ns(50, 60, 20, || {
            g.run_slices([&x[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(50, 60, 20, || {
            cumprod_sum_grad(black_box(&x), horizon, black_box(&mut want))
        });
        assert!(close(&out, &want), "cumprod gradient values");
        report(&format!("cumprod grad [{batch}, {horizon}]"), t, r);
    }
    for (batch, horizon) in [(1, 30), (256, 30), (64, 200)] {
        let x = data(batch * horizon, 0.6);
        let mut g = rfx::jit_with(rfx::grad(|x: Tensor| x.cummax(1).sum(All)), one_thread())
            .bind(&[f32s(&[batch, horizon])])?;
        let (mut out, mut want) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        let t = timing::median_ns(50, 60, 20, || {
            g.run_slices([&x[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(50, 60, 20, || {
            cummax_sum_grad(black_box(&x), horizon, black_box(&mut want))
        });
        assert!(same_bits(&out, &want), "cummax gradient values");
        report(&format!("cummax grad [{batch}, {horizon}]"), t, r);
    }
    Ok(())
}
