//! `kalman_filter` (predict and update of a linear model in matrix form) against the same step
//! written as a plain Rust loop (rustc `-O`, with a closed-form 2×2 inverse, which is all a
//! 2-measurement filter needs), measured alternately in one run: a constant-velocity model in
//! the plane (4 states, 2 measured positions), one filter per call (a control loop's use) and
//! 1024. The Rust loop updates the covariance two ways: in Joseph form,
//! `(I - K H) P (I - K H)ᵀ + K R Kᵀ`, as `kalman_filter` does (it keeps `P` symmetric and
//! positive definite under rounding), and by the textbook `P - K H P` (two products fewer).
//!
//! `cargo run --release -p rfx-control --example kalman_speed`

mod timing;

use std::hint::black_box;

use rfx::{DType, TensorType};
use rfx_control::kalman_filter;

/// A Rust step: `x`, `p`, `z`, `f`, `h`, `q`, `r`.
type StepFn = fn(&mut [f64], &mut [f64], &[f64], &[f64; 16], &[f64; 8], &[f64; 16], &[f64; 4]);

/// One step of each 4-state, 2-measurement filter, in place; `JOSEPH` picks the covariance
/// update.
fn step_rust<const JOSEPH: bool>(
    x: &mut [f64],
    p: &mut [f64],
    z: &[f64],
    f: &[f64; 16],
    h: &[f64; 8],
    q: &[f64; 16],
    r: &[f64; 4],
) {
    for ((x, p), z) in x
        .chunks_exact_mut(4)
        .zip(p.chunks_exact_mut(16))
        .zip(z.chunks_exact(2))
    {
        let mut xp = [0.0; 4];
        let mut fp = [0.0; 16];
        let mut pp = [0.0; 16];
        for i in 0..4 {
            xp[i] = (0..4).map(|k| f[4 * i + k] * x[k]).sum();
            for j in 0..4 {
                fp[4 * i + j] = (0..4).map(|k| f[4 * i + k] * p[4 * k + j]).sum();
            }
        }
        for i in 0..4 {
            for j in 0..4 {
                pp[4 * i + j] = (0..4).map(|k| fp[4 * i + k] * f[4 * j + k]).sum::<f64>() + q[4 * i + j];
            }
        }
        let mut y = [0.0; 2];
        let mut hp = [0.0; 8];
        for i in 0..2 {
            y[i] = z[i] - (0..4).map(|k| h[4 * i + k] * xp[k]).sum::<f64>();
            for j in 0..4 {
                hp[4 * i + j] = (0..4).map(|k| h[4 * i + k] * pp[4 * k + j]).sum();
            }
        }
        let mut s = [0.0; 4];
        for i in 0..2 {
            for j in 0..2 {
                s[2 * i + j] = (0..4).map(|k| hp[4 * i + k] * h[4 * j + k]).sum::<f64>() + r[2 * i + j];
            }
        }
        let det = s[0] * s[3] - s[1] * s[2];
        let si = [s[3] / det, -s[1] / det, -s[2] / det, s[0] / det];
        // K = P Hᵀ S⁻¹ = (H P)ᵀ S⁻¹, then x += K y and P = (I - K H) P.
        let mut k = [0.0; 8];
        for i in 0..4 {
            for j in 0..2 {
                k[2 * i + j] = hp[i] * si[j] + hp[4 + i] * si[2 + j];
            }
        }
        for i in 0..4 {
            x[i] = xp[i] + k[2 * i] * y[0] + k[2 * i + 1] * y[1];
        }
        if !JOSEPH {
            for i in 0..4 {
                for j in 0..4 {
                    p[4 * i + j] = pp[4 * i + j] - k[2 * i] * hp[j] - k[2 * i + 1] * hp[4 + j];
                }
            }
            continue;
        }
        // A = I - K H; P = A P Aᵀ + K R Kᵀ.
        let mut a = [0.0; 16];
        for i in 0..4 {
            for j in 0..4 {
                let kh = k[2 * i] * h[j] + k[2 * i + 1] * h[4 + j];
                a[4 * i + j] = f64::from(u8::from(i == j)) - kh;
            }
        }
        let mut ap = [0.0; 16];
        for i in 0..4 {
            for j in 0..4 {
                ap[4 * i + j] = (0..4).map(|l| a[4 * i + l] * pp[4 * l + j]).sum();
            }
        }
        let mut kr = [0.0; 8];
        for i in 0..4 {
            for j in 0..2 {
                kr[2 * i + j] = k[2 * i] * r[j] + k[2 * i + 1] * r[2 + j];
            }
        }
        for i in 0..4 {
            for j in 0..4 {
                let apa: f64 = (0..4).map(|l| ap[4 * i + l] * a[4 * j + l]).sum();
                p[4 * i + j] = apa + kr[2 * i] * k[2 * j] + kr[2 * i + 1] * k[2 * j + 1];
            }
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dt = 0.1;
    let f = [
        1.0, 0.0, dt, 0.0, 0.0, 1.0, 0.0, dt, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0,
    ];
    let h = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0];
    let q = [
        0.02, 0.0, 0.01, 0.0, 0.0, 0.02, 0.0, 0.01, 0.01, 0.0, 0.1, 0.0, 0.0, 0.01, 0.0, 0.1,
    ];
    let r = [0.05, 0.01, 0.01, 0.04];
    let jit = kalman_filter();
    for n in [1usize, 1024] {
        let x: Vec<f64> = (0..4 * n).map(|i| ((i * 37) % 101) as f64 * 0.05 - 2.5).collect();
        let p: Vec<f64> = (0..n)
            .flat_map(|_| {
                [
                    1.0, 0.1, 0.0, 0.0, 0.1, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.05, 0.0, 0.0, 0.05, 0.5,
                ]
            })
            .collect();
        let z: Vec<f64> = (0..2 * n).map(|i| ((i * 53) % 97) as f64 * 0.05 - 2.4).collect();
        let t = |dims: &[usize]| TensorType::new(DType::F64, dims.to_vec());
        let types = [
            t(&[n, 4]),
            t(&[n, 4, 4]),
            t(&[n, 2]),
            t(&[4, 4]),
            t(&[2, 4]),
            t(&[4, 4]),
            t(&[2, 2]),
        ];
        let kernels = jit.executable(&types)?.mir().kernels().len();
        let mut bound = jit.bind(&types)?;
        let (mut x_out, mut p_out, mut nis) = (vec![0.0; 4 * n], vec![0.0; 16 * n], vec![0.0; n]);
        let (mut x_ref, mut p_ref) = (x.clone(), p.clone());
        step_rust::<true>(&mut x_ref, &mut p_ref, &z, &f, &h, &q, &r);
        bound.run_slices(
            [&x[..], &p[..], &z[..], &f[..], &h[..], &q[..], &r[..]],
            [&mut x_out[..], &mut p_out[..], &mut nis[..]],
        )?;
        let close = |a: &[f64], b: &[f64]| {
            a.iter()
                .zip(b)
                .all(|(u, v)| (u - v).abs() <= 1e-9 * (1.0 + v.abs()))
        };
        assert!(
            close(&x_out, &x_ref) && close(&p_out, &p_ref),
            "rfx and the Rust loop disagree"
        );
        let calls = if n == 1 { 2000 } else { 20 };
        let (mut t_rfx, mut t_joseph, mut t_textbook) = (0.0, 0.0, 0.0);
        // The Rust loops step their filters in place, call after call.
        let (mut xs, mut ps) = (x.clone(), p.clone());
        for _ in 0..3 {
            t_rfx += timing::median_ns(calls, || {
                bound
                    .run_slices(
                        [&x[..], &p[..], &z[..], &f[..], &h[..], &q[..], &r[..]],
                        [&mut x_out[..], &mut p_out[..], &mut nis[..]],
                    )
                    .expect("run")
            });
            let steps: [(StepFn, &mut f64); 2] = [
                (step_rust::<true>, &mut t_joseph),
                (step_rust::<false>, &mut t_textbook),
            ];
            for (step, total) in steps {
                *total += timing::median_ns(calls, || {
                    step(
                        black_box(&mut xs),
                        black_box(&mut ps),
                        black_box(&z),
                        &f,
                        &h,
                        &q,
                        &r,
                    );
                });
            }
        }
        println!(
            "f64 {n:>5} filters: rfx {:10.1} ns   rust Joseph {:10.1} ns {:5.2}x   rust textbook {:10.1} ns {:5.2}x   {kernels} loop nests",
            t_rfx / 3.0,
            t_joseph / 3.0,
            t_rfx / t_joseph,
            t_textbook / 3.0,
            t_rfx / t_textbook
        );
    }
    Ok(())
}
