//! Small matrix products, `C = A B` and `y = A x`, as a control loop calls them: one bound call
//! per product, against the same loops written in Rust (compiled by rustc with this build's
//! optimisation, so a native reference measured in the same run). Median ns per call, both
//! measured alternately, and their ratio.
//!
//! `cargo run --release -p rfx --example small_matmul`

mod timing;

use std::hint::black_box;

use rfx::{DType, Tensor, TensorType};

/// `Tensor::matmul` of a matrix by a matrix or a vector (NumPy's `matmul`).
fn matmul(a: Tensor, b: Tensor) -> Tensor {
    a.matmul(b)
}

/// `c = a b` for `n`×`n` row-major matrices, accumulating in the order rfx does.
fn rust_matmul<T: Copy + Default + std::ops::Add<Output = T> + std::ops::Mul<Output = T>>(
    n: usize,
    a: &[T],
    b: &[T],
    c: &mut [T],
) {
    for i in 0..n {
        for j in 0..n {
            let mut acc = T::default();
            for k in 0..n {
                acc = acc + a[i * n + k] * b[k * n + j];
            }
            c[i * n + j] = acc;
        }
    }
}

fn rust_matvec<T: Copy + Default + std::ops::Add<Output = T> + std::ops::Mul<Output = T>>(
    n: usize,
    a: &[T],
    x: &[T],
    y: &mut [T],
) {
    for i in 0..n {
        let mut acc = T::default();
        for k in 0..n {
            acc = acc + a[i * n + k] * x[k];
        }
        y[i] = acc;
    }
}

macro_rules! run_dtype {
    ($t:ty, $dtype:expr, $n:expr) => {{
        let n: usize = $n;
        let a: Vec<$t> = (0..n * n).map(|i| (i as $t) * 0.25 - 1.5).collect();
        let b: Vec<$t> = (0..n * n).map(|i| 0.5 - (i as $t) * 0.125).collect();
        let x: Vec<$t> = (0..n).map(|i| (i as $t) * 0.3 - 0.7).collect();
        let mat = TensorType::new($dtype, [n, n]);
        let vec_t = TensorType::new($dtype, [n]);
        let mut mm = rfx::jit(matmul).bind(&[mat.clone(), mat.clone()])?;
        let mut mv = rfx::jit(matmul).bind(&[mat, vec_t])?;
        let (mut c, mut c_ref) = (vec![0 as $t; n * n], vec![0 as $t; n * n]);
        let (mut y, mut y_ref) = (vec![0 as $t; n], vec![0 as $t; n]);
        let (mut t_mm, mut t_mm_ref, mut t_mv, mut t_mv_ref) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..3 {
            t_mm += timing::median_ns(500, 200, 100, || {
                mm.run_slices([&a[..], &b[..]], [&mut c[..]]).expect("run")
            });
            t_mm_ref += timing::median_ns(500, 200, 100, || {
                rust_matmul(n, black_box(&a[..]), black_box(&b[..]), black_box(&mut c_ref[..]))
            });
            t_mv += timing::median_ns(500, 200, 100, || {
                mv.run_slices([&a[..], &x[..]], [&mut y[..]]).expect("run")
            });
            t_mv_ref += timing::median_ns(500, 200, 100, || {
                rust_matvec(n, black_box(&a[..]), black_box(&x[..]), black_box(&mut y_ref[..]))
            });
        }
        // Rows of more than 6 `f64`/12 `f32` points are summed in partials (another order).
        let close = |u: &[$t], v: &[$t]| {
            u.iter()
                .zip(v)
                .all(|(p, q)| (p - q).abs() <= 1e-4 * (1.0 + q.abs()))
        };
        assert!(close(&c, &c_ref), "matmul values");
        assert!(close(&y, &y_ref), "matvec values");
        println!(
            "{:>3} {}x{n}  matmul {:7.1} ns (rust {:6.1}, {:4.1}x)   matvec {:6.1} ns (rust {:5.1}, {:4.1}x)",
            stringify!($t),
            n,
            t_mm / 3.0,
            t_mm_ref / 3.0,
            t_mm / t_mm_ref,
            t_mv / 3.0,
            t_mv_ref / 3.0,
            t_mv / t_mv_ref
        );
    }};
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The cost of a bound call itself: a 3×3 add, two inputs as the products have.
    let mut floor = rfx::jit(|a: Tensor, b: Tensor| a + b).bind(&[
        TensorType::new(DType::F64, [3, 3]),
        TensorType::new(DType::F64, [3, 3]),
    ])?;
    let (a, mut c) = (vec![0.5f64; 9], vec![0.0f64; 9]);
    let t = timing::median_ns(500, 200, 100, || {
        floor.run_slices([&a[..], &a[..]], [&mut c[..]]).expect("run")
    });
    println!("a bound call of a 3x3 f64 add: {t:.1} ns");
    for n in [3, 4, 6, 8, 16] {
        run_dtype!(f64, DType::F64, n);
    }
    for n in [3, 4, 6, 8, 16] {
        run_dtype!(f32, DType::F32, n);
    }
    Ok(())
}
