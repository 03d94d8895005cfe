//! The three ways to call a bound kernel, timed on `a + b` at a few sizes: `run_slices` (plain
//! slices, lengths and dtypes checked), `run` (views, every argument checked) and `run_args`
//! (arguments made and checked once). Median ns per call over 200 samples of 100 calls; the
//! three are measured back to back, so compare them within a row.
//!
//! `cargo run --release -p rfx --example call_paths`

use std::time::Instant;

use rfx::{ArrayView, ArrayViewMut, DType, Shape, Tensor, TensorType};

fn median_ns(mut f: impl FnMut()) -> f64 {
    for _ in 0..500 {
        f();
    }
    let mut times: Vec<f64> = (0..200)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..100 {
                f();
            }
            start.elapsed().as_secs_f64() * 1e9 / 100.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for n in [1usize, 3, 9, 64] {
        let ty = TensorType::new(DType::F64, [n]);
        let mut bound = rfx::jit(|a: Tensor, b: Tensor| a + b).bind(&[ty.clone(), ty])?;
        let (a, mut c) = (vec![0.5f64; n], vec![0.0f64; n]);
        let slices = median_ns(|| bound.run_slices([&a[..], &a[..]], [&mut c[..]]).expect("run"));
        let shape = Shape::new([n]);
        let views = median_ns(|| {
            let inputs = [
                ArrayView::new(&shape, &a[..]).expect("view"),
                ArrayView::new(&shape, &a[..]).expect("view"),
            ];
            let mut outputs = [ArrayViewMut::new(&shape, &mut c[..]).expect("view")];
            bound.run(&inputs, &mut outputs).expect("run")
        });
        let mut args = bound.args()?;
        let direct = median_ns(|| bound.run_args(&mut args).expect("run"));
        println!("n = {n:>2}: run_slices {slices:5.1} ns   run {views:5.1} ns   run_args {direct:5.1} ns");
    }
    Ok(())
}
