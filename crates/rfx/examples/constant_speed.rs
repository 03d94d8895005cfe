//! A 6-state constant-velocity Kalman predict, `x' = F x` and `P' = F P Fᵀ + Q`, with `F` and
//! `Q` as constants of the kernel (`rfx::constant`) and as inputs the caller passes at every
//! call; median µs per bound call of each, measured alternately.
//!
//! `cargo run --release -p rfx --example constant_speed`

mod timing;

use rfx::{Array, DType, Func, Tensor, TensorType};

const N: usize = 6;

fn matmul(a: Tensor, b: Tensor) -> Tensor {
    (a.reshape([N, N, 1]) * b.reshape([1, N, N])).sum(&[1][..])
}

fn predict(f: Tensor, q: Tensor, x: Tensor, p: Tensor) -> (Tensor, Tensor) {
    ((f * x).sum(&[1][..]), matmul(matmul(f, p), f.t()) + q)
}

/// Median over 200 samples of the mean time of 50 calls, in µs.
fn median_us(f: impl FnMut()) -> f64 {
    timing::median_ns(200, 200, 50, f) / 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dt = 0.01;
    // Position, velocity, acceleration in x and y: F = [[I, dt I, dt²/2 I], [0, I, dt I], [0, 0, I]].
    let mut f = vec![0.0f64; N * N];
    for i in 0..N {
        f[i * N + i] = 1.0;
        if i + 2 < N {
            f[i * N + i + 2] = dt;
        }
        if i + 4 < N {
            f[i * N + i + 4] = dt * dt / 2.0;
        }
    }
    let q: Vec<f64> = (0..N * N)
        .map(|i| if i % (N + 1) == 0 { 1e-4 } else { 0.0 })
        .collect();
    let (f_array, q_array) = (
        Array::from_vec([N, N], f.clone())?,
        Array::from_vec([N, N], q.clone())?,
    );
    let constants = rfx::jit(Func::with_constants(move |x: Tensor, p: Tensor| {
        predict(rfx::constant(&f_array), rfx::constant(&q_array), x, p)
    }));
    let inputs = rfx::jit(predict);
    let vec_t = TensorType::new(DType::F64, [N]);
    let mat_t = TensorType::new(DType::F64, [N, N]);
    let mut with_constants = constants.bind(&[vec_t.clone(), mat_t.clone()])?;
    let mut with_inputs = inputs.bind(&[mat_t.clone(), mat_t.clone(), vec_t, mat_t])?;

    let x: Vec<f64> = (0..N).map(|i| 0.3 * i as f64 - 0.7).collect();
    let p: Vec<f64> = (0..N * N)
        .map(|i| if i % (N + 1) == 0 { 1.0 } else { 0.01 })
        .collect();
    let (mut xa, mut pa) = (vec![0.0; N], vec![0.0; N * N]);
    let (mut xb, mut pb) = (vec![0.0; N], vec![0.0; N * N]);
    // Flat arguments: x (N values) then P (N²); the input form passes F and Q first.
    let (mut t_const, mut t_input) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        t_const.push(median_us(|| {
            with_constants
                .run_slices([&x[..], &p[..]], [&mut xa[..], &mut pa[..]])
                .expect("run");
        }));
        t_input.push(median_us(|| {
            with_inputs
                .run_slices([&f[..], &q[..], &x[..], &p[..]], [&mut xb[..], &mut pb[..]])
                .expect("run");
        }));
    }
    assert_eq!((&xa, &pa), (&xb, &pb), "both forms compute the same bits");
    let show = |t: &[f64]| t.iter().map(|v| format!("{v:.3}")).collect::<Vec<_>>().join(" ");
    println!("F, Q constants: {} µs", show(&t_const));
    println!("F, Q inputs:    {} µs", show(&t_input));
    Ok(())
}
