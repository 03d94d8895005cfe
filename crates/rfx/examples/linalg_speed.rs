//! The tracing API's cross products and batched rotations against the same loops written in
//! Rust (compiled by rustc with this build's optimisation, measured in the same run,
//! alternately): angular-velocity cross products, a rotation applied to each of a batch of
//! vectors (`matmul`), and 3×3 inverses (`inv`, against the same Gauss–Jordan elimination in
//! Rust), for one vehicle and for 1024. Running sums are in `scan_speed`.
//! Median time per call and its ratio to Rust's.
//!
//! `cargo run --release -p rfx --example linalg_speed`

mod timing;

use std::hint::black_box;

use rfx::{DType, Tensor, TensorType};

fn cross(a: &[f32], w: &[f32], out: &mut [f32]) {
    for ((a, w), o) in a
        .chunks_exact(3)
        .zip(w.chunks_exact(3))
        .zip(out.chunks_exact_mut(3))
    {
        o[0] = a[1] * w[2] - a[2] * w[1];
        o[1] = a[2] * w[0] - a[0] * w[2];
        o[2] = a[0] * w[1] - a[1] * w[0];
    }
}

fn rotate(r: &[f32], v: &[f32], out: &mut [f32]) {
    for ((r, v), o) in r
        .chunks_exact(9)
        .zip(v.chunks_exact(3))
        .zip(out.chunks_exact_mut(3))
    {
        for i in 0..3 {
            o[i] = r[3 * i] * v[0] + r[3 * i + 1] * v[1] + r[3 * i + 2] * v[2];
        }
    }
}

/// Gauss–Jordan elimination with partial pivoting of each 3×3 matrix, as `Tensor::inv` does.
fn invert3(a: &[f32], out: &mut [f32]) {
    for (a, out) in a.chunks_exact(9).zip(out.chunks_exact_mut(9)) {
        let mut m = [[0.0f32; 6]; 3];
        for i in 0..3 {
            m[i][..3].copy_from_slice(&a[3 * i..3 * i + 3]);
            m[i][3 + i] = 1.0;
        }
        for k in 0..3 {
            let p = (k..3).fold(
                k,
                |best, i| if m[i][k].abs() > m[best][k].abs() { i } else { best },
            );
            m.swap(k, p);
            let pivot = m[k][k];
            for v in &mut m[k] {
                *v /= pivot;
            }
            let unit = m[k];
            for (i, row) in m.iter_mut().enumerate() {
                if i != k {
                    let f = row[k];
                    for (v, u) in row.iter_mut().zip(&unit) {
                        *v -= f * u;
                    }
                }
            }
        }
        for i in 0..3 {
            out[3 * i..3 * i + 3].copy_from_slice(&m[i][3..]);
        }
    }
}

fn close(u: &[f32], v: &[f32]) -> bool {
    u.iter()
        .zip(v)
        .all(|(p, q)| (p - q).abs() <= 1e-4 * (1.0 + q.abs()))
}

fn report(name: &str, rfx_ns: f64, rust_ns: f64) {
    println!(
        "{name:<28} rfx {rfx_ns:10.1} ns   rust {rust_ns:10.1} ns   {:5.2}x",
        rfx_ns / rust_ns
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let f32s = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    let data =
        |n: usize, k: f32| -> Vec<f32> { (0..n).map(|i| ((i * 37) % 101) as f32 * 0.02 * k - 1.0).collect() };
    for n in [1, 1024] {
        let (a, w) = (data(3 * n, 1.0), data(3 * n, 0.7));
        let mut f = rfx::jit(|a: Tensor, w: Tensor| a.cross(w, 1)).bind(&[f32s(&[n, 3]), f32s(&[n, 3])])?;
        let (mut out, mut want) = (vec![0.0; 3 * n], vec![0.0; 3 * n]);
        let t = timing::median_ns(50, 60, 20, || {
            f.run_slices([&a[..], &w[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(50, 60, 20, || {
            cross(black_box(&a), black_box(&w), black_box(&mut want))
        });
        cross(&a, &w, &mut want);
        assert!(close(&out, &want), "cross values");
        report(&format!("cross [{n}, 3]"), t, r);
        let (rot, v) = (data(9 * n, 0.5), data(3 * n, 1.3));
        let mut g =
            rfx::jit(|r: Tensor, v: Tensor| r.matmul(v)).bind(&[f32s(&[n, 3, 3]), f32s(&[n, 3, 1])])?;
        let mut out = vec![0.0; 3 * n];
        let t = timing::median_ns(50, 60, 20, || {
            g.run_slices([&rot[..], &v[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(50, 60, 20, || {
            rotate(black_box(&rot), black_box(&v), black_box(&mut want))
        });
        assert!(close(&out, &want), "rotation values");
        report(&format!("matmul [{n}, 3, 3] [{n}, 3, 1]"), t, r);
        // Diagonally dominant, so both pivot alike and agree closely.
        let m: Vec<f32> = rot
            .iter()
            .enumerate()
            .map(|(i, v)| if i % 9 % 4 == 0 { v + 4.0 } else { *v })
            .collect();
        let mut h = rfx::jit(|a: Tensor| a.inv()).bind(&[f32s(&[n, 3, 3])])?;
        let (mut out, mut want) = (vec![0.0; 9 * n], vec![0.0; 9 * n]);
        let t = timing::median_ns(50, 60, 20, || {
            h.run_slices([&m[..]], [&mut out[..]]).expect("run")
        });
        let r = timing::median_ns(50, 60, 20, || invert3(black_box(&m), black_box(&mut want)));
        assert!(close(&out, &want), "inverse values");
        report(&format!("inv [{n}, 3, 3]"), t, r);
    }
    Ok(())
}
