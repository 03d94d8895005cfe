//! Jacobian kernels through the facade: reverse mode (`x * 3 + sin x`, n outputs) and forward
//! mode (`(sin x, 2x, exp x)`, more outputs than inputs), median µs per bound call.
//!
//! `cargo run --release -p rfx --example jacobian_speed`

mod timing;

use rfx::{DType, Tensor, TensorType};

/// Median over 400 single calls, in µs.
fn median_us(f: impl FnMut()) -> f64 {
    timing::median_ns(50, 400, 1, f) / 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for n in [4usize, 16, 64] {
        let x: Vec<f64> = (0..n).map(|i| 0.1 + 0.37 * i as f64).collect();
        let ty = [TensorType::new(DType::F64, [n])];
        let rev = rfx::jit(rfx::jacobian(|x: Tensor| x * 3.0 + x.sin()));
        let mut bound = rev.bind(&ty)?;
        let (mut value, mut jac) = (vec![0.0f64; n], vec![0.0f64; n * n]);
        let t_rev = median_us(|| {
            bound
                .run_slices([&x[..]], [&mut value[..], &mut jac[..]])
                .expect("run");
        });
        let fwd = rfx::jit(rfx::jacobian(|x: Tensor| (x.sin(), x * 2.0, x.exp())));
        let mut bound = fwd.bind(&ty)?;
        let (mut s, mut d, mut e) = (vec![0.0f64; n], vec![0.0f64; n], vec![0.0f64; n]);
        let (mut js, mut jd, mut je) = (vec![0.0f64; n * n], vec![0.0f64; n * n], vec![0.0f64; n * n]);
        let t_fwd = median_us(|| {
            bound
                .run_slices(
                    [&x[..]],
                    [
                        &mut s[..],
                        &mut d[..],
                        &mut e[..],
                        &mut js[..],
                        &mut jd[..],
                        &mut je[..],
                    ],
                )
                .expect("run");
        });
        assert!((js[0] - x[0].cos()).abs() < 1e-12 && jac[n + 1] == 3.0 + x[1].cos());
        println!("n = {n:>3}: jacrev {t_rev:8.2} µs, jacfwd {t_fwd:8.2} µs");
    }
    Ok(())
}
