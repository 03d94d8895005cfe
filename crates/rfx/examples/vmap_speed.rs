//! A batch of small kernels: one `vmap` call over the whole batch against one bound call per
//! example, on one thread. Median ns per example.
//!
//! - `cost`: value and gradient of `k Σ (x - w)² + log(1 + Σ exp x)` over a 6-vector (`f64`);
//! - `arm`: two-link arm position and its 2×2 Jacobian (`f64`).
//!
//! `cargo run --release -p rfx --example vmap_speed`

mod timing;

use rfx::{CompileConfig, DType, Tensor, TensorType};

fn cost(x: Tensor, w: Tensor, k: Tensor) -> Tensor {
    let d = x - w;
    (d * d).sum_all() * k + (x.exp().sum_all() + 1.0).log()
}

fn arm(q1: Tensor, q2: Tensor) -> (Tensor, Tensor) {
    let q12 = q1 + q2;
    (
        q1.cos() * 0.7 + q12.cos() * 0.45,
        q1.sin() * 0.7 + q12.sin() * 0.45,
    )
}

fn one_thread() -> CompileConfig {
    let mut config = CompileConfig::default();
    config.compile.max_threads = Some(1);
    config
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let f64t = |dims: &[usize]| TensorType::new(DType::F64, dims.to_vec());
    for batch in [16usize, 256, 4096] {
        let x: Vec<f64> = (0..batch * 6)
            .map(|i| ((i * 37) % 101) as f64 / 50.0 - 1.0)
            .collect();
        let w: Vec<f64> = (0..batch * 6)
            .map(|i| ((i * 53) % 97) as f64 / 60.0 - 0.8)
            .collect();
        let k = [0.8f64];

        let one = rfx::jit_with(rfx::value_and_grad(cost), one_thread());
        let mut bound = one.bind(&[f64t(&[6]), f64t(&[6]), f64t(&[])])?;
        let (mut v, mut g) = (vec![0.0f64; batch], vec![0.0f64; batch * 6]);
        let looped = timing::median_ns(20, 100, 1, || {
            for b in 0..batch {
                let r = b * 6..b * 6 + 6;
                bound
                    .run_slices(
                        [&x[r.clone()], &w[r.clone()], &k[..]],
                        [&mut v[b..b + 1], &mut g[r]],
                    )
                    .expect("run");
            }
        }) / batch as f64;
        let mapped = rfx::jit_with(
            rfx::vmap(rfx::value_and_grad(cost)).in_axes(&[Some(0), Some(0), None]),
            one_thread(),
        );
        let mut bound = mapped.bind(&[f64t(&[batch, 6]), f64t(&[batch, 6]), f64t(&[])])?;
        let (mut vb, mut gb) = (vec![0.0f64; batch], vec![0.0f64; batch * 6]);
        let vmapped = timing::median_ns(20, 100, 1, || {
            bound
                .run_slices([&x[..], &w[..], &k[..]], [&mut vb[..], &mut gb[..]])
                .expect("run");
        }) / batch as f64;
        let worst = v
            .iter()
            .chain(&g)
            .zip(vb.iter().chain(&gb))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        println!(
            "cost+grad batch {batch:>5}: per call {looped:7.1} ns/example, vmap {vmapped:6.1} ns/example ({:.1}x; max |diff| {worst:.1e})",
            looped / vmapped
        );

        let q1: Vec<f64> = (0..batch).map(|i| ((i * 37) % 101) as f64 / 16.0 - 3.0).collect();
        let q2: Vec<f64> = (0..batch).map(|i| ((i * 53) % 97) as f64 / 16.0 - 3.0).collect();
        let one = rfx::jit_with(rfx::jacobian(arm).wrt(&[0, 1]), one_thread());
        let mut bound = one.bind(&[f64t(&[]), f64t(&[])])?;
        let mut outs = vec![vec![0.0f64; batch]; 6];
        let looped = timing::median_ns(20, 100, 1, || {
            for b in 0..batch {
                let [o0, o1, o2, o3, o4, o5] = &mut outs[..] else {
                    unreachable!()
                };
                bound
                    .run_slices(
                        [&q1[b..b + 1], &q2[b..b + 1]],
                        [
                            &mut o0[b..b + 1],
                            &mut o1[b..b + 1],
                            &mut o2[b..b + 1],
                            &mut o3[b..b + 1],
                            &mut o4[b..b + 1],
                            &mut o5[b..b + 1],
                        ],
                    )
                    .expect("run");
            }
        }) / batch as f64;
        let mapped = rfx::jit_with(rfx::vmap(rfx::jacobian(arm).wrt(&[0, 1])), one_thread());
        let mut bound = mapped.bind(&[f64t(&[batch]), f64t(&[batch])])?;
        let mut outs_b = vec![vec![0.0f64; batch]; 6];
        let vmapped = timing::median_ns(20, 100, 1, || {
            let [o0, o1, o2, o3, o4, o5] = &mut outs_b[..] else {
                unreachable!()
            };
            bound
                .run_slices(
                    [&q1[..], &q2[..]],
                    [
                        &mut o0[..],
                        &mut o1[..],
                        &mut o2[..],
                        &mut o3[..],
                        &mut o4[..],
                        &mut o5[..],
                    ],
                )
                .expect("run");
        }) / batch as f64;
        let worst = outs
            .concat()
            .iter()
            .zip(outs_b.concat())
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        println!(
            "arm FK+J batch {batch:>5}: per call {looped:7.1} ns/example, vmap {vmapped:6.1} ns/example ({:.1}x; max |diff| {worst:.1e})",
            looped / vmapped
        );
    }
    Ok(())
}
