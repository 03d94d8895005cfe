//! Results assembled from many computed parts: 81 scalars concatenated into a vector, and a
//! 9×9 matrix from 3×3 blocks (`concat` of `concat`s). Median time per bound call, batched
//! over 1,024 examples with `vmap` and one example at a time, with the number of loop nests
//! (MIR kernels) each compiles to.
//!
//! `cargo run --release -p rfx --example concat_parts_speed`

mod timing;

use rfx::{DType, Tensor, TensorType};

/// 81 scalars `x_i * x_(80 - i) + 1`, each computed from two elements, concatenated.
fn scalars(x: Tensor) -> Tensor {
    let parts: Vec<Tensor> = (0..81)
        .map(|i| x.slice_axis(0, i..i + 1) * x.slice_axis(0, 80 - i..81 - i) + 1.0)
        .collect();
    rfx::concat(&parts, 0)
}

/// `[[a, b, c], [b, c, a], [c, a, b]]` of the three computed 3×3 blocks `a = x + y`,
/// `b = x * y`, `c = x - y`, assembled with `concat` along the columns, then the rows.
fn blocks(x: Tensor, y: Tensor) -> Tensor {
    let (a, b, c) = (x + y, x * y, x - y);
    let rows = [
        rfx::concat(&[a, b, c], 1),
        rfx::concat(&[b, c, a], 1),
        rfx::concat(&[c, a, b], 1),
    ];
    rfx::concat(&rows, 0)
}

fn report<K: rfx::KernelFn>(
    name: &str,
    jit: &rfx::Jit<K>,
    types: &[TensorType],
    calls: usize,
    run: &mut dyn FnMut(&mut rfx::BoundKernel),
) -> Result<(), rfx::JitError> {
    let mut bound = jit.bind(types)?;
    let ns = timing::median_ns(20, 101, calls, || run(&mut bound));
    let kernels = jit.executable(types)?.mir().kernels().len();
    println!("{name:<34} {ns:12.1} ns per call, {kernels} kernel(s)");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let batch = 1024;
    let x: Vec<f64> = (0..81 * batch).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut out = vec![0.0f64; 81 * batch];

    let one = rfx::jit(scalars);
    let many = rfx::jit(rfx::vmap(scalars));
    report(
        "81 scalars, batch 1,024",
        &many,
        &[TensorType::new(DType::F64, [batch, 81])],
        1,
        &mut |b| b.run_slices([&x[..]], [&mut out[..]]).expect("run"),
    )?;
    report(
        "81 scalars, n = 1",
        &one,
        &[TensorType::new(DType::F64, [81])],
        100,
        &mut |b| b.run_slices([&x[..81]], [&mut out[..81]]).expect("run"),
    )?;

    let y: Vec<f64> = (0..9 * batch).map(|i| (i as f64 * 0.11).cos()).collect();
    let one = rfx::jit(blocks);
    let many = rfx::jit(rfx::vmap(blocks));
    let m = |dims: &[usize]| TensorType::new(DType::F64, dims.to_vec());
    report(
        "9x9 from 3x3 blocks, batch 1,024",
        &many,
        &[m(&[batch, 3, 3]), m(&[batch, 3, 3])],
        1,
        &mut |b| {
            b.run_slices([&x[..9 * batch], &y[..]], [&mut out[..]])
                .expect("run")
        },
    )?;
    report(
        "9x9 from 3x3 blocks, n = 1",
        &one,
        &[m(&[3, 3]), m(&[3, 3])],
        100,
        &mut |b| b.run_slices([&x[..9], &y[..9]], [&mut out[..81]]).expect("run"),
    )?;
    Ok(())
}
