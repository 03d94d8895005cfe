//! The three ways to call a bound kernel, timed on `a + b` at a few sizes: `run_slices` (plain
//! slices, lengths and dtypes checked), `run` (views, every argument checked) and `run_args`
//! (arguments made and checked once). Median ns per call over 200 samples of 100 calls; the
//! three are measured back to back, so compare them within a row.
//!
//! `cargo run --release -p rfx --example call_paths`

mod timing;

use rfx::{ArrayView, ArrayViewMut, DType, Shape, Tensor, TensorType};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for n in [1usize, 3, 9, 64] {
        let ty = TensorType::new(DType::F64, [n]);
        let mut bound = rfx::jit(|a: Tensor, b: Tensor| a + b).bind(&[ty.clone(), ty])?;
        let (a, mut c) = (vec![0.5f64; n], vec![0.0f64; n]);
        let slices = timing::median_ns(500, 200, 100, || {
            bound.run_slices([&a[..], &a[..]], [&mut c[..]]).expect("run")
        });
        let shape = Shape::new([n]);
        let views = timing::median_ns(500, 200, 100, || {
            let inputs = [
                ArrayView::new(&shape, &a[..]).expect("view"),
                ArrayView::new(&shape, &a[..]).expect("view"),
            ];
            let mut outputs = [ArrayViewMut::new(&shape, &mut c[..]).expect("view")];
            bound.run(&inputs, &mut outputs).expect("run")
        });
        let mut args = bound.args()?;
        let direct = timing::median_ns(500, 200, 100, || bound.run_args(&mut args).expect("run"));
        println!("n = {n:>2}: run_slices {slices:5.1} ns   run {views:5.1} ns   run_args {direct:5.1} ns");
    }
    Ok(())
}
