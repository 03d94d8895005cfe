//! A barrier cost's value, gradient and Hessian from one kernel (`rfx::hessian`), against its
//! value and gradient alone (`rfx::value_and_grad`) and a hand-written Rust loop of the closed
//! forms; median ns per bound call.
//!
//! `cost(x) = Σ x² - log(1 - x²/4)`: `g' = 2x + (x/2) / (1 - x²/4)`,
//! `g'' = 2 + (1/2 + x²/8) / (1 - x²/4)²`, a diagonal Hessian.
//!
//! `cargo run --release -p rfx --example hessian_speed`

mod timing;

use std::hint::black_box;

use rfx::{All, DType, Tensor, TensorType};

fn cost(x: Tensor) -> Tensor {
    (x * x - (1.0 - x * x * 0.25).log()).sum(All)
}

/// The closed forms, written as a control engineer would: value, gradient, dense Hessian.
fn by_hand(x: &[f64], value: &mut f64, grad: &mut [f64], hess: &mut [f64]) {
    let n = x.len();
    *value = 0.0;
    hess.fill(0.0);
    for i in 0..n {
        let s = 1.0 - x[i] * x[i] * 0.25;
        *value += x[i] * x[i] - s.ln();
        grad[i] = 2.0 * x[i] + 0.5 * x[i] / s;
        hess[i * n + i] = 2.0 + (0.5 + x[i] * x[i] * 0.125) / (s * s);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for n in [6usize, 12, 32] {
        let x: Vec<f64> = (0..n).map(|i| -1.5 + 3.0 * i as f64 / n as f64).collect();
        let ty = [TensorType::new(DType::F64, [n])];
        let hessian = rfx::jit(rfx::hessian(cost));
        let mut bound = hessian.bind(&ty)?;
        let (mut value, mut grad, mut hess) = ([0.0f64], vec![0.0f64; n], vec![0.0f64; n * n]);
        let t_hessian = timing::median_ns(100, 400, 20, || {
            bound
                .run_slices([&x[..]], [&mut value[..], &mut grad[..], &mut hess[..]])
                .expect("run");
        });
        let value_and_grad = rfx::jit(rfx::value_and_grad(cost));
        let mut bound = value_and_grad.bind(&ty)?;
        let (mut v2, mut g2) = ([0.0f64], vec![0.0f64; n]);
        let t_grad = timing::median_ns(100, 400, 20, || {
            bound
                .run_slices([&x[..]], [&mut v2[..], &mut g2[..]])
                .expect("run");
        });
        let (mut v3, mut g3, mut h3) = (0.0f64, vec![0.0f64; n], vec![0.0f64; n * n]);
        let t_hand = timing::median_ns(100, 400, 20, || {
            by_hand(black_box(&x), &mut v3, &mut g3, &mut h3);
            black_box((&v3, &g3, &h3));
        });
        for i in 0..n * n {
            assert!(
                (hess[i] - h3[i]).abs() <= 1e-12 * h3[i].abs().max(1.0),
                "hess[{i}]"
            );
        }
        assert!((value[0] - v3).abs() < 1e-12 && (grad[n - 1] - g3[n - 1]).abs() < 1e-12);
        println!(
            "n = {n:>2}: hessian {t_hessian:7.1} ns, value_and_grad {t_grad:7.1} ns, Rust closed forms {t_hand:7.1} ns"
        );
    }
    Ok(())
}
