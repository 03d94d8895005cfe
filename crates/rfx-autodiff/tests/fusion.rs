//! A gradient kernel goes through `rfx-opt` and stays one fused loop: value and gradient of
//! `sum(x ** 2)` come out of a single MIR kernel that agrees with the HIR interpreter, for one
//! example and for a `vmap` batch of them.

use rfx_autodiff::value_and_grad;
use rfx_ir::hir::Builder;
use rfx_ir::interp::{Mode, run_hir, run_mir};
use rfx_ir::{Array, BinaryOp, DType, ReduceOp, Scalar, TensorType};
use rfx_opt::{OptConfig, optimize};

#[test]
fn value_and_grad_of_sum_of_squares_is_one_fused_mir_kernel() {
    for n in [3usize, 1000] {
        let mut b = Builder::new("sum_sq");
        let x = b.input("x", TensorType::new(DType::F32, [n])).unwrap();
        let two = b.scalar(Scalar::F32(2.0));
        let sq = b.binary(BinaryOp::Pow, x, two).unwrap();
        let s = b.reduce_all(ReduceOp::Sum, sq).unwrap();
        b.output("loss", s).unwrap();
        let kernel = value_and_grad(&b.finish().unwrap(), &["x"]).unwrap();

        let (program, report) = optimize(&kernel, &OptConfig::default()).unwrap();
        assert_eq!(program.kernels().len(), 1, "{program}\n{report:?}");

        let values: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 2.5).collect();
        let input = Array::from_vec(vec![n], values.clone()).unwrap();
        let hir = run_hir(&kernel, &[input.view()], Mode::Native).unwrap();
        let mir = run_mir(&program, &[input.view()], Mode::Native).unwrap();
        assert_eq!(hir, mir);
        if n == 3 {
            let x = Array::from_vec(vec![3], vec![1.0f32, 2.0, 3.0]).unwrap();
            let out = run_mir(&program, &[x.view()], Mode::Native).unwrap();
            assert_eq!(out[0].as_slice::<f32>().unwrap(), &[14.0f32]);
            assert_eq!(out[1].as_slice::<f32>().unwrap(), &[2.0f32, 4.0, 6.0]);
        }
        let grad = hir[1].as_slice::<f32>().unwrap();
        assert!(grad.iter().zip(&values).all(|(g, v)| *g == 2.0 * v));
    }
}

#[test]
fn a_mapped_gradient_kernel_fuses_like_the_example() {
    use rfx_autodiff::vmap;
    let mut b = Builder::new("sum_sq");
    let x = b.input("x", TensorType::new(DType::F64, [6])).unwrap();
    let sq = b.binary(BinaryOp::Mul, x, x).unwrap();
    let s = b.reduce_all(ReduceOp::Sum, sq).unwrap();
    b.output("loss", s).unwrap();
    let example = value_and_grad(&b.finish().unwrap(), &["x"]).unwrap();
    let (one, _) = optimize(&example, &OptConfig::default()).unwrap();
    for axis in [0, 1] {
        let batched = vmap(&example, &[Some(axis)], 1000).unwrap();
        let (program, report) = optimize(&batched, &OptConfig::default()).unwrap();
        // One loop nest over `[1000, 6]`: the batch axis moved by a transpose is a strided load.
        assert_eq!(
            program.kernels().len(),
            one.kernels().len(),
            "{program}\n{report:?}"
        );
        let dims = if axis == 0 { vec![1000, 6] } else { vec![6, 1000] };
        let values: Vec<f64> = (0..6000).map(|i| ((i * 37) % 101) as f64 / 17.0 - 3.0).collect();
        let input = Array::from_vec(dims, values).unwrap();
        let hir = run_hir(&batched, &[input.view()], Mode::Native).unwrap();
        let mir = run_mir(&program, &[input.view()], Mode::Native).unwrap();
        assert_eq!(hir, mir);
    }
}
