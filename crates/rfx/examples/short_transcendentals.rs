//! Short kernels of one transcendental (a control loop's 3 to 12 joints), one bound call each,
//! against a Rust loop over the same values (`f64::ln`, `exp`, `sin`, `tanh`: the platform's
//! libm, scalar); median ns per call, both measured in the same run.
//!
//! `cargo run --release -p rfx --example short_transcendentals`

mod timing;

use std::hint::black_box;

use rfx::{DType, Tensor, TensorType};

/// Median ns of one bound call of `f` at `x`, and of the Rust loop applying `reference`.
fn measure<K: rfx::KernelFn>(
    jit: rfx::Jit<K>,
    reference: fn(f64) -> f64,
    x: &[f64],
) -> Result<(f64, f64), rfx::JitError> {
    let n = x.len();
    let mut bound = jit.bind(&[TensorType::new(DType::F64, [n])])?;
    let (mut y, mut y_ref) = (vec![0.0f64; n], vec![0.0f64; n]);
    let t = timing::median_ns(500, 200, 50, || {
        bound.run_slices([x], [&mut y[..]]).expect("run");
    });
    let t_ref = timing::median_ns(500, 200, 50, || {
        for (o, &v) in y_ref.iter_mut().zip(black_box(x)) {
            *o = reference(v);
        }
        black_box(&y_ref);
    });
    assert!(
        y.iter()
            .zip(&y_ref)
            .all(|(a, b)| (a - b).abs() <= 1e-14 * b.abs().max(1.0))
    );
    Ok((t, t_ref))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for n in [1usize, 2, 6, 16, 32] {
        let x: Vec<f64> = (0..n).map(|i| 0.3 + 0.17 * i as f64).collect();
        let results = [
            ("log", measure(rfx::jit(|x: Tensor| x.log()), f64::ln, &x)?),
            ("exp", measure(rfx::jit(|x: Tensor| x.exp()), f64::exp, &x)?),
            ("sin", measure(rfx::jit(|x: Tensor| x.sin()), f64::sin, &x)?),
            ("tanh", measure(rfx::jit(|x: Tensor| x.tanh()), f64::tanh, &x)?),
        ];
        let mut line = format!("n = {n:>2}:");
        for (name, (t, t_ref)) in results {
            line += &format!("  {name} {t:6.1} ns (Rust {t_ref:5.1})");
        }
        println!("{line}");
    }
    Ok(())
}
