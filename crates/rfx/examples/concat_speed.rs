//! Kernels that assemble their result from computed parts (`rfx::concat`, `Tensor::pad`) or
//! take windows of computed values (`Tensor::slice_axis`): median ns per bound call of each,
//! and the number of loop nests (MIR kernels) each compiles to.
//!
//! `cargo run --release -p rfx --example concat_speed`

mod timing;

use rfx::{DType, Tensor, TensorType};

/// Median over 200 samples of the mean time of `calls` calls, in ns.
fn median_ns(calls: usize, f: impl FnMut()) -> f64 {
    timing::median_ns(200, 200, calls, f)
}

/// The tip of a planar two-link arm, `[x, y]`, from its joint angles `q`.
fn arm_tip(q: Tensor) -> Tensor {
    let (q0, q1) = (q.slice_axis(0, 0..1), q.slice_axis(0, 1..2));
    let (l1, l2) = (0.7, 0.4);
    let x = l1 * q0.cos() + l2 * (q0 + q1).cos();
    let y = l1 * q0.sin() + l2 * (q0 + q1).sin();
    rfx::concat(&[x, y], 0)
}

/// A cost read from parts of a two-link arm's state `[θ1, θ2, ω1, ω2]`: `½|ω|²` plus the tip's
/// height. Its gradient places each part's adjoint in its window of the state (pads).
fn arm_cost(state: Tensor) -> Tensor {
    let (t1, t2) = (state.slice_axis(0, 0..1), state.slice_axis(0, 1..2));
    let omega = state.slice_axis(0, 2..4);
    let y = t1.sin() + 0.5 * (t1 + t2).sin();
    0.5 * (omega * omega).sum(rfx::All) + y.sum(rfx::All)
}

/// One Euler step of a 3D point mass: `[p + v dt, v + a dt]` from `p`, `v`, `a`.
fn euler_step(p: Tensor, v: Tensor, a: Tensor) -> Tensor {
    let dt = 0.01;
    rfx::concat(&[p + v * dt, v + a * dt], 0)
}

/// Two computed halves of one array.
fn halves(x: Tensor, y: Tensor) -> Tensor {
    rfx::concat(&[x * 2.0, y + 2.0], 0)
}

/// Two halves that each cost a transcendental per point.
fn dear_halves(x: Tensor, y: Tensor) -> Tensor {
    rfx::concat(&[x.sin(), y.cos()], 0)
}

fn kernels<K: rfx::KernelFn>(jit: &rfx::Jit<K>, types: &[TensorType]) -> Result<usize, rfx::JitError> {
    Ok(jit.executable(types)?.mir().kernels().len())
}

/// A window of a computed value: one point in from each end.
fn window(x: Tensor, y: Tensor) -> Tensor {
    let n = x.shape().dims()[0];
    (x * 2.0 + y).slice_axis(0, 1..n - 1)
}

/// A finite difference of a computed value.
fn difference(x: Tensor, y: Tensor) -> Tensor {
    let n = x.shape().dims()[0];
    let f = x * x + y;
    f.slice_axis(0, 1..n) - f.slice_axis(0, 0..n - 1)
}

/// Times `jit` on two inputs of `len` elements of `T` each (values from `value`), writing `out`
/// elements; prints ns per element of the larger side.
fn two_inputs<K: rfx::KernelFn, T: rfx::Element + Default>(
    name: &str,
    jit: &rfx::Jit<K>,
    (len, out): (usize, usize),
    value: fn(f64) -> T,
) -> Result<(), rfx::JitError> {
    let x: Vec<T> = (0..len).map(|i| value((i as f64 * 0.37).sin())).collect();
    let y: Vec<T> = (0..len).map(|i| value((i as f64 * 0.11).cos())).collect();
    let mut result = vec![T::default(); out];
    let types = [TensorType::new(T::DTYPE, [len]), TensorType::new(T::DTYPE, [len])];
    let mut bound = jit.bind(&types)?;
    let n = len.max(out);
    let calls = if n > 1000 { 10 } else { 1000 };
    let ns = median_ns(calls, || {
        bound
            .run_slices([&x[..], &y[..]], [&mut result[..]])
            .expect("run");
    });
    println!(
        "{name:<11} {}[{n:>5}]:           {:8.2} ns per element, {} kernel(s)",
        T::DTYPE,
        ns / n as f64,
        kernels(jit, &types)?
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let f64s = |n: usize| TensorType::new(DType::F64, [n]);

    let tip = rfx::jit(arm_tip);
    let q = [0.3f64, -1.1];
    let mut out = [0.0f64; 2];
    let mut bound = tip.bind(&[f64s(2)])?;
    let ns = median_ns(1000, || bound.run_slices([&q[..]], [&mut out[..]]).expect("run"));
    println!(
        "arm tip, f64[2] from q:           {ns:8.1} ns per call, {} kernel(s)",
        kernels(&tip, &[f64s(2)])?
    );

    let grad = rfx::jit(rfx::grad(arm_cost));
    let state = [0.3f64, -0.7, 1.5, -2.0];
    let mut g = [0.0f64; 4];
    let mut bound = grad.bind(&[f64s(4)])?;
    let ns = median_ns(1000, || {
        bound.run_slices([&state[..]], [&mut g[..]]).expect("run")
    });
    println!(
        "arm cost gradient, f64[4]:        {ns:8.1} ns per call, {} kernel(s)",
        kernels(&grad, &[f64s(4)])?
    );

    let step = rfx::jit(euler_step);
    let (p, v, a) = ([1.0f64, 2.0, 3.0], [0.1f64, -0.2, 0.3], [0.0f64, 0.0, -9.81]);
    let mut state = [0.0f64; 6];
    let mut bound = step.bind(&[f64s(3), f64s(3), f64s(3)])?;
    let ns = median_ns(1000, || {
        bound
            .run_slices([&p[..], &v[..], &a[..]], [&mut state[..]])
            .expect("run");
    });
    println!(
        "Euler step, f64[6] from 3 x [3]:  {ns:8.1} ns per call, {} kernel(s)",
        kernels(&step, &[f64s(3), f64s(3), f64s(3)])?
    );

    let (halves, dear, window, difference) = (
        rfx::jit(halves),
        rfx::jit(dear_halves),
        rfx::jit(window),
        rfx::jit(difference),
    );
    for n in [64, 65536] {
        two_inputs("halves", &halves, (n / 2, n), |v| v as f32)?;
    }
    two_inputs("halves", &halves, (32768, 65536), |v| v)?;
    for n in [64, 65536] {
        two_inputs("dear halves", &dear, (n / 2, n), |v| v as f32)?;
    }
    for n in [64, 65536] {
        two_inputs("window", &window, (n, n - 2), |v| v as f32)?;
    }
    for n in [64, 65536] {
        two_inputs("difference", &difference, (n, n - 1), |v| v as f32)?;
    }
    Ok(())
}
