//! Builds rfxJIT's example kernel `sin(x*2) + y`, prints its HIR, checks it with the verifier
//! and runs it on the reference interpreter, in f32 and in the f64 oracle mode.
//!
//! Run with `cargo run --release -p rfx-ir --example quickstart`.

use rfx_ir::hir::{self, Builder};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::{Array, BinaryOp, DType, Scalar, TensorType, UnaryOp};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut b = Builder::new("fused_chain");
    let x = b.input("x", TensorType::new(DType::F32, [3]))?;
    let y = b.input("y", TensorType::new(DType::F32, [3]))?;
    let two = b.scalar(Scalar::F32(2.0));
    let x2 = b.binary(BinaryOp::Mul, x, two)?;
    let s = b.unary(UnaryOp::Sin, x2)?;
    let out = b.binary(BinaryOp::Add, s, y)?;
    b.output("out", out)?;
    let kernel = b.finish()?;

    println!("{kernel}");
    hir::verify(&kernel)?;
    let text = kernel.to_string();
    assert_eq!(hir::parse(&text)?, kernel, "the text format round-trips");

    let xs = Array::from_slice(&[0.0f32, 1.0, 2.0]);
    let ys = Array::from_slice(&[1.0f32, 2.0, 3.0]);
    let native = run_hir(&kernel, &[xs.view(), ys.view()], Mode::Native)?;
    let oracle = run_hir(&kernel, &[xs.view(), ys.view()], Mode::Oracle)?;
    println!("x      = {:?}", xs.as_slice::<f32>().unwrap_or_default());
    println!("y      = {:?}", ys.as_slice::<f32>().unwrap_or_default());
    println!(
        "out    = {:?}  (f32 interpreter)",
        native[0].as_slice::<f32>().unwrap_or_default()
    );
    println!(
        "oracle = {:?}  (f64 oracle)",
        oracle[0].as_slice::<f64>().unwrap_or_default()
    );
    println!("\n{}", rfx_ir::dot::hir_to_dot(&kernel));
    Ok(())
}
