//! The gradient of a pendulum rollout through `fori_loop` (docs/loops.md), per bound call: the
//! recording loop as compiled now (each carry's history updated by `set_row`, one row stored
//! per iteration), the same kernel with every `set_row` rewritten into the select over the
//! whole history that reverse mode wrote before (`select(iota == t, row, history)`), and the
//! gradient of the rollout unrolled while tracing. The rows run in alternating rounds in one
//! process; the ratios are medians of per-round ratios. The two loop kernels must give the same
//! bits. Then the same pair (row stores against selects over the whole history) for the
//! gradient through a `while_loop` (whose masked body masks the stored row) and for a `vmap` of
//! the gradient over a batch of initial states (whose batched history is stored one row of the
//! batch per iteration; the select form is the select-rewritten gradient mapped by `vmap`).
//!
//! Last, a `vmap` of the gradient through a `while_loop` whose test differs per example (each
//! example stops at its own step), whose recording loop masks the stored row per example.
//!
//! `cargo run --release -p rfx --example loop_grad_speed [-- fori|while|vmap|until]`

mod timing;

use rfx::lax::{fori_loop, while_loop};
use rfx::{DType, Kernel, Tensor, TensorType};
use rfx_ir::hir::{Builder, Loop, Op, ValueId};
use rfx_ir::{CmpOp, Shape};

const DT: f64 = 0.01;
const G_OVER_L: f64 = 9.81;

fn step(theta: Tensor, omega: Tensor, kp: Tensor, kd: Tensor) -> (Tensor, Tensor) {
    let accel = theta.sin() * -G_OVER_L - kp * theta - kd * omega;
    (theta + omega * DT, omega + accel * DT)
}

fn rollout<const STEPS: i32>(theta: Tensor, omega: Tensor, kp: Tensor, kd: Tensor) -> Tensor {
    let s = fori_loop(
        0,
        STEPS,
        |_, s| {
            let (t, w) = step(s[0], s[1], kp, kd);
            vec![t, w]
        },
        &[theta, omega],
    );
    (s[0] * s[0] + s[1] * s[1] * 0.1).sum_all()
}

/// [`rollout`] as a `while_loop` testing a step counter, with room for twice the steps: the
/// iteration after the last step runs masked.
fn rollout_while<const STEPS: i32>(theta: Tensor, omega: Tensor, kp: Tensor, kd: Tensor) -> Tensor {
    let count = rfx::constant(&rfx::Array::scalar(rfx::Scalar::I32(0)));
    let s = while_loop(
        |s| s[2].lt(STEPS),
        |s| {
            let (t, w) = step(s[0], s[1], kp, kd);
            vec![t, w, s[2] + 1]
        },
        &[theta, omega, count],
        2 * STEPS as u64,
    );
    (s[0] * s[0] + s[1] * s[1] * 0.1).sum_all()
}

/// [`rollout`] as a `while_loop` running while its step counter is below `limit` (one per
/// example under `vmap`), at most `MAX` steps.
fn rollout_until<const MAX: u64>(
    theta: Tensor,
    omega: Tensor,
    kp: Tensor,
    kd: Tensor,
    limit: Tensor,
) -> Tensor {
    let count = rfx::constant(&rfx::Array::scalar(rfx::Scalar::F64(0.0)));
    let s = while_loop(
        |s| s[2].lt(limit),
        |s| {
            let (t, w) = step(s[0], s[1], kp, kd);
            vec![t, w, s[2] + 1.0]
        },
        &[theta, omega, count],
        MAX,
    );
    (s[0] * s[0] + s[1] * s[1] * 0.1).sum_all()
}

fn unrolled<const STEPS: i32>(theta: Tensor, omega: Tensor, kp: Tensor, kd: Tensor) -> Tensor {
    let (mut t, mut w) = (theta, omega);
    for _ in 0..STEPS {
        (t, w) = step(t, w, kp, kd);
    }
    (t * t + w * w * 0.1).sum_all()
}

/// `kernel` with every `set_row(x, row, t)` (in loop bodies too) written as the select over all
/// of `x` that the recording loop used before row stores.
fn as_selects(kernel: &Kernel) -> Result<Kernel, Box<dyn std::error::Error>> {
    let mut b = Builder::new(kernel.name());
    let mut map: Vec<ValueId> = Vec::with_capacity(kernel.nodes().len());
    for node in kernel.nodes() {
        let args: Vec<ValueId> = node.args.iter().map(|a| map[a.index()]).collect();
        let value = match (&node.op, args.as_slice()) {
            (Op::SetRow, &[x, row, t]) => {
                let dims = node.ty.shape.dims();
                let mut rows = vec![1; dims.len()];
                rows[0] = dims[0];
                let iota = b.iota(DType::I32, Shape::new(rows), 0)?;
                let here = b.compare(CmpOp::Eq, iota, t)?;
                let mut one_row = dims.to_vec();
                one_row[0] = 1;
                let row = b.reshape(row, Shape::new(one_row))?;
                b.select(here, row, x)?
            }
            (Op::Loop(spec), _) => {
                let spec = Loop {
                    carries: spec.carries,
                    trips: spec.trips,
                    body: as_selects(&spec.body)?,
                    cond: spec.cond.as_ref().map(as_selects).transpose()?,
                };
                b.copy(&Op::Loop(Box::new(spec)), &args, &node.ty)?
            }
            (op, _) => b.copy(op, &args, &node.ty)?,
        };
        map.push(value);
    }
    for output in kernel.outputs() {
        b.output(output.name.clone(), map[output.value.index()])?;
    }
    Ok(b.finish()?)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn measure<const STEPS: i32>() -> Result<(), Box<dyn std::error::Error>> {
    let types = vec![TensorType::scalar(DType::F64); 4];
    let row_stores = rfx::jit(rfx::value_and_grad(rollout::<STEPS>).wrt(&[0, 1, 2, 3])).trace(&types)?;
    let selects = as_selects(&row_stores)?;
    let mut bound = [
        rfx::jit_kernel(row_stores).bind(&types)?,
        rfx::jit_kernel(selects).bind(&types)?,
        rfx::jit(rfx::value_and_grad(unrolled::<STEPS>).wrt(&[0, 1, 2, 3])).bind(&types)?,
    ];
    let inputs = [[0.8f64], [-0.3], [2.0], [0.5]];
    let mut outs = [[[0.0f64]; 5]; 3];
    for (b, out) in bound.iter_mut().zip(&mut outs) {
        let [o0, o1, o2, o3, o4] = out;
        b.run_slices(
            [&inputs[0][..], &inputs[1][..], &inputs[2][..], &inputs[3][..]],
            [&mut o0[..], &mut o1[..], &mut o2[..], &mut o3[..], &mut o4[..]],
        )?;
    }
    let bits = |o: &[[f64; 1]; 5]| o.map(|v| v[0].to_bits());
    assert_eq!(
        bits(&outs[0]),
        bits(&outs[1]),
        "row stores and selects give the same bits"
    );
    let mut times: [Vec<f64>; 3] = Default::default();
    for _round in 0..15 {
        for (k, b) in bound.iter_mut().enumerate() {
            let mut out = [[0.0f64]; 5];
            let t = timing::median_ns(20, 31, 20, || {
                let [o0, o1, o2, o3, o4] = &mut out;
                b.run_slices(
                    [&inputs[0][..], &inputs[1][..], &inputs[2][..], &inputs[3][..]],
                    [&mut o0[..], &mut o1[..], &mut o2[..], &mut o3[..], &mut o4[..]],
                )
                .expect("run");
            });
            times[k].push(t / 1e3);
        }
    }
    let ratio = |a: usize, b: usize| median(times[a].iter().zip(&times[b]).map(|(x, y)| x / y).collect());
    println!(
        "{STEPS:>5} steps: row stores {:7.2} µs, selects {:7.2} µs, unrolled {:7.2} µs; \
         row stores / selects {:.3}, row stores / unrolled {:.3}, selects / unrolled {:.3}",
        median(times[0].clone()),
        median(times[1].clone()),
        median(times[2].clone()),
        ratio(0, 1),
        ratio(0, 2),
        ratio(1, 2),
    );
    Ok(())
}

/// Per bound call, `kernels[0]` (row stores) against `kernels[1]` (selects) on `inputs` (five
/// outputs of `out_len` each), after checking that both give the same bits.
fn pair<const I: usize>(
    label: &str,
    kernels: [Kernel; 2],
    types: &[TensorType],
    inputs: [&[f64]; I],
    out_len: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut bound = Vec::new();
    for kernel in kernels {
        bound.push(rfx::jit_kernel(kernel).bind(types)?);
    }
    let mut outs = vec![vec![vec![0.0f64; out_len]; 5]; 2];
    for (b, out) in bound.iter_mut().zip(&mut outs) {
        let [o0, o1, o2, o3, o4] = &mut out[..] else {
            unreachable!()
        };
        b.run_slices(
            inputs,
            [&mut o0[..], &mut o1[..], &mut o2[..], &mut o3[..], &mut o4[..]],
        )?;
    }
    let bits = |o: &Vec<Vec<f64>>| o.iter().flatten().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&outs[0]),
        bits(&outs[1]),
        "{label}: row stores and selects give the same bits"
    );
    let mut times: [Vec<f64>; 2] = Default::default();
    let mut out = vec![vec![0.0f64; out_len]; 5];
    // 20 calls per sample, 31 samples; fewer for kernels slower than 50 µs a call.
    let start = std::time::Instant::now();
    for b in &mut bound {
        let [o0, o1, o2, o3, o4] = &mut out[..] else {
            unreachable!()
        };
        b.run_slices(
            inputs,
            [&mut o0[..], &mut o1[..], &mut o2[..], &mut o3[..], &mut o4[..]],
        )?;
    }
    let slow = start.elapsed().as_secs_f64() > 100e-6;
    let (warmup, samples, calls) = if slow { (2, 5, 2) } else { (20, 31, 20) };
    for _round in 0..15 {
        for (k, b) in bound.iter_mut().enumerate() {
            let t = timing::median_ns(warmup, samples, calls, || {
                let [o0, o1, o2, o3, o4] = &mut out[..] else {
                    unreachable!()
                };
                b.run_slices(
                    inputs,
                    [&mut o0[..], &mut o1[..], &mut o2[..], &mut o3[..], &mut o4[..]],
                )
                .expect("run");
            });
            times[k].push(t / 1e3);
        }
    }
    let ratio = median(times[0].iter().zip(&times[1]).map(|(x, y)| x / y).collect());
    println!(
        "{label}: row stores {:9.2} µs, selects {:9.2} µs; row stores / selects {ratio:.3}",
        median(times[0].clone()),
        median(times[1].clone()),
    );
    Ok(())
}

fn measure_while<const STEPS: i32>() -> Result<(), Box<dyn std::error::Error>> {
    let types = vec![TensorType::scalar(DType::F64); 4];
    let kernel = rfx::jit(rfx::value_and_grad(rollout_while::<STEPS>).wrt(&[0, 1, 2, 3])).trace(&types)?;
    let selects = as_selects(&kernel)?;
    let label = format!("while_loop gradient, {STEPS:>5} steps");
    pair(
        &label,
        [kernel, selects],
        &types,
        [&[0.8], &[-0.3], &[2.0], &[0.5]],
        1,
    )
}

fn measure_vmap<const STEPS: i32>(batch: usize) -> Result<(), Box<dyn std::error::Error>> {
    let scalars = vec![TensorType::scalar(DType::F64); 4];
    let gradient = rfx::jit(rfx::value_and_grad(rollout::<STEPS>).wrt(&[0, 1, 2, 3])).trace(&scalars)?;
    let in_axes = [Some(0), Some(0), None, None];
    let rows = rfx_autodiff::vmap(&gradient, &in_axes, batch)?;
    let selects = rfx_autodiff::vmap(&as_selects(&gradient)?, &in_axes, batch)?;
    let mut types = vec![TensorType::new(DType::F64, [batch]); 2];
    types.extend(vec![TensorType::scalar(DType::F64); 2]);
    let theta: Vec<f64> = (0..batch).map(|k| -1.5 + 3.0 * k as f64 / batch as f64).collect();
    let omega: Vec<f64> = (0..batch).map(|k| ((k * 37) % 101) as f64 / 50.0 - 1.0).collect();
    let label = format!("vmap of the gradient, {STEPS:>5} steps, batch {batch}");
    pair(
        &label,
        [rows, selects],
        &types,
        [&theta, &omega, &[2.0], &[0.5]],
        batch,
    )
}

/// `vmap` of the gradient of [`rollout_until`] over `batch` initial states and step limits
/// (from `MAX / 2` to `MAX`): every example stops at its own iteration.
fn measure_vmap_until<const MAX: u64>(batch: usize) -> Result<(), Box<dyn std::error::Error>> {
    let scalars = vec![TensorType::scalar(DType::F64); 5];
    let gradient = rfx::jit(rfx::value_and_grad(rollout_until::<MAX>).wrt(&[0, 1, 2, 3])).trace(&scalars)?;
    let in_axes = [Some(0), Some(0), None, None, Some(0)];
    let rows = rfx_autodiff::vmap(&gradient, &in_axes, batch)?;
    let selects = rfx_autodiff::vmap(&as_selects(&gradient)?, &in_axes, batch)?;
    let mut types = vec![TensorType::new(DType::F64, [batch]); 2];
    types.extend(vec![TensorType::scalar(DType::F64); 2]);
    types.push(TensorType::new(DType::F64, [batch]));
    let theta: Vec<f64> = (0..batch).map(|k| -1.5 + 3.0 * k as f64 / batch as f64).collect();
    let omega: Vec<f64> = (0..batch).map(|k| ((k * 37) % 101) as f64 / 50.0 - 1.0).collect();
    let limit: Vec<f64> = (0..batch)
        .map(|k| (MAX / 2 + (k as u64 * 97) % (MAX / 2 + 1)) as f64)
        .collect();
    let label = format!("vmap of the while gradient, per-example steps up to {MAX:>5}, batch {batch}");
    pair(
        &label,
        [rows, selects],
        &types,
        [&theta, &omega, &[2.0], &[0.5], &limit],
        batch,
    )
}

type Measure = fn() -> Result<(), Box<dyn std::error::Error>>;

/// Every row, or those whose name contains the first argument (`fori`, `while`, `vmap`,
/// `until`).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rows: [(&str, Measure); 8] = [
        ("fori 100", measure::<100>),
        ("fori 1000", measure::<1000>),
        ("while 100", measure_while::<100>),
        ("while 1000", measure_while::<1000>),
        ("vmap 100 batch 64", || measure_vmap::<100>(64)),
        ("vmap 100 batch 256", || measure_vmap::<100>(256)),
        ("vmap until 100 batch 64", || measure_vmap_until::<100>(64)),
        ("vmap until 1000 batch 64", || measure_vmap_until::<1000>(64)),
    ];
    let only = std::env::args().nth(1).unwrap_or_default();
    for (name, row) in rows {
        if name.contains(only.as_str()) {
            row()?;
        }
    }
    Ok(())
}
