//! Broadcasting, reductions with keepdims, several outputs, fan-out, the vjp/jvp signatures,
//! and the typed errors.

use crate::common;

use common::{arr, assert_close, fd_grad, kernel_f64, run, run_named, uniform};
use rfx_autodiff::{AdError, grad, jvp, keep_outputs, value_and_grad, vjp};
use rfx_ir::hir::Builder;
use rfx_ir::{BinaryOp, DType, ReduceOp, Scalar, TensorType, UnaryOp};

#[test]
fn gradient_of_a_row_vector_broadcast_over_a_matrix_is_summed_over_rows() {
    // out = sum(a * b) with a: [2,3], b: [3] (implicitly broadcast): ∂b_j = Σ_i a_ij.
    let k = kernel_f64("bc", &[("a", &[2, 3]), ("b", &[3])], |b, xs| {
        let p = b.binary(BinaryOp::Mul, xs[0], xs[1])?;
        b.reduce_all(ReduceOp::Sum, p)
    });
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let bv = [0.5, -1.0, 2.0];
    let g = run(
        &grad(&k, &["a", "b"]).unwrap(),
        &[arr(&[2, 3], &a), arr(&[3], &bv)],
    );
    assert_eq!(g[0], vec![0.5, -1.0, 2.0, 0.5, -1.0, 2.0]);
    assert_eq!(g[1], vec![5.0, 7.0, 9.0]);
}

#[test]
fn gradient_with_respect_to_a_scalar_and_size_one_axes() {
    // out = sum(sin(s * x + c)) with s: [], x: [2,3], c: [2,1]: ∂s = Σ cos(..)·x, ∂c_i = Σ_j cos(..).
    let k = kernel_f64("sc", &[("s", &[]), ("x", &[2, 3]), ("c", &[2, 1])], |b, xs| {
        let sx = b.binary(BinaryOp::Mul, xs[0], xs[1])?;
        let z = b.binary(BinaryOp::Add, sx, xs[2])?;
        let y = b.unary(UnaryOp::Sin, z)?;
        b.reduce_all(ReduceOp::Sum, y)
    });
    let x = uniform(1, 6, -1.0, 1.0);
    let inputs = [arr(&[], &[0.7]), arr(&[2, 3], &x), arr(&[2, 1], &[0.2, -0.4])];
    let g = run(&grad(&k, &["s", "x", "c"]).unwrap(), &inputs);
    let cos: Vec<f64> = (0..6).map(|i| (0.7 * x[i] + [0.2, -0.4][i / 3]).cos()).collect();
    let ds: f64 = (0..6).map(|i| cos[i] * x[i]).sum();
    assert_close("∂s", &g[0], &[ds], 1e-14, 1e-15);
    assert_close(
        "∂x",
        &g[1],
        &cos.iter().map(|c| c * 0.7).collect::<Vec<_>>(),
        1e-14,
        1e-15,
    );
    assert_close(
        "∂c",
        &g[2],
        &[cos[..3].iter().sum(), cos[3..].iter().sum()],
        1e-14,
        1e-15,
    );
    for (i, gi) in g.iter().enumerate() {
        assert_close("FD", gi, &fd_grad(&k, &inputs, i, 0, None), 1e-6, 1e-8);
    }
}

#[test]
fn broadcast_to_and_reshape_adjoints() {
    // out = sum(w * reshape(broadcast_to(x, [4, 3]), [2, 6])) with x: [3].
    let k = kernel_f64("br", &[("x", &[3]), ("w", &[2, 6])], |b, xs| {
        let big = b.broadcast_to(xs[0], vec![4, 3])?;
        let r = b.reshape(big, vec![2, 6])?;
        let p = b.binary(BinaryOp::Mul, r, xs[1])?;
        b.reduce_all(ReduceOp::Sum, p)
    });
    let w = uniform(2, 12, -1.0, 1.0);
    let g = run(
        &grad(&k, &["x"]).unwrap(),
        &[arr(&[3], &[1.0, 2.0, 3.0]), arr(&[2, 6], &w)],
    );
    let want: Vec<f64> = (0..3).map(|j| (0..4).map(|i| w[i * 3 + j]).sum()).collect();
    assert_close("∂x", &g[0], &want, 1e-15, 1e-15);
}

#[test]
fn keepdims_reduction_feeding_a_broadcast_normalises_rows() {
    // Row softmax-like: out = sum(w * x / sum(x, axis 1, keepdims)); checked by FD.
    let k = kernel_f64("norm", &[("x", &[2, 3]), ("w", &[2, 3])], |b, xs| {
        let s = b.reduce(ReduceOp::Sum, xs[0], &[1], true)?;
        let n = b.binary(BinaryOp::Div, xs[0], s)?;
        let p = b.binary(BinaryOp::Mul, n, xs[1])?;
        b.reduce_all(ReduceOp::Sum, p)
    });
    let inputs = [
        arr(&[2, 3], &uniform(3, 6, 0.5, 2.0)),
        arr(&[2, 3], &uniform(4, 6, -1.0, 1.0)),
    ];
    let g = run(&grad(&k, &["x"]).unwrap(), &inputs);
    assert_close("∂x", &g[0], &fd_grad(&k, &inputs, 0, 0, None), 1e-6, 1e-8);
}

#[test]
fn fan_out_adjoints_are_summed() {
    // out = x·sin(x)·exp(x) uses x three times: derivative sin·e + x·cos·e + x·sin·e.
    let k = kernel_f64("fan", &[("x", &[])], |b, xs| {
        let s = b.unary(UnaryOp::Sin, xs[0])?;
        let e = b.unary(UnaryOp::Exp, xs[0])?;
        let xs_ = b.binary(BinaryOp::Mul, xs[0], s)?;
        b.binary(BinaryOp::Mul, xs_, e)
    });
    let x: f64 = 0.8;
    let g = run(&grad(&k, &[0usize]).unwrap(), &[arr(&[], &[x])]);
    let want = x.exp() * (x.sin() + x * x.cos() + x * x.sin());
    assert_close("fan-out", &g[0], &[want], 1e-14, 0.0);
}

fn two_output_kernel() -> rfx_ir::hir::Kernel {
    // p = x * y (shape [3]), q = sum(x²) (scalar), n = cast(x > 0, i32) (not differentiable).
    let mut b = Builder::new("two");
    let x = b.input("x", TensorType::new(DType::F64, [3])).expect("x");
    let y = b.input("y", TensorType::new(DType::F64, [3])).expect("y");
    let p = b.binary(BinaryOp::Mul, x, y).expect("mul");
    let sq = b.binary(BinaryOp::Mul, x, x).expect("sq");
    let q = b.reduce_all(ReduceOp::Sum, sq).expect("sum");
    let zero = b.scalar(Scalar::F64(0.0));
    let pos = b.compare(rfx_ir::CmpOp::Gt, x, zero).expect("gt");
    let n = b.cast(pos, DType::I32).expect("cast");
    b.output("p", p).expect("p");
    b.output("q", q).expect("q");
    b.output("n", n).expect("n");
    b.finish().expect("kernel")
}

#[test]
fn vjp_with_several_outputs_takes_one_cotangent_per_float_output() {
    let k = two_output_kernel();
    let v = vjp(&k, &["x", "y"]).unwrap();
    let inputs: Vec<&str> = v.inputs().map(|(_, n, _)| n).collect();
    assert_eq!(inputs, ["x", "y", "ct_p", "ct_q"]);
    let outputs: Vec<&str> = v.outputs().iter().map(|o| o.name.as_str()).collect();
    assert_eq!(outputs, ["p", "q", "n", "grad_x", "grad_y"]);
    let (x, y, ct_p, ct_q) = ([1.0, -2.0, 3.0], [0.5, 4.0, -1.0], [1.0, 2.0, 3.0], 0.5);
    let out = run(
        &v,
        &[arr(&[3], &x), arr(&[3], &y), arr(&[3], &ct_p), arr(&[], &[ct_q])],
    );
    // ∂x = ct_p·y + ct_q·2x, ∂y = ct_p·x.
    let gx: Vec<f64> = (0..3).map(|i| ct_p[i] * y[i] + ct_q * 2.0 * x[i]).collect();
    let gy: Vec<f64> = (0..3).map(|i| ct_p[i] * x[i]).collect();
    assert_eq!(out[3], gx);
    assert_eq!(out[4], gy);
    assert_eq!(out[2], vec![1.0, 0.0, 1.0]);
}

#[test]
fn jvp_with_several_outputs_gives_one_tangent_per_float_output() {
    let k = two_output_kernel();
    let j = jvp(&k, &["x"]).unwrap();
    let inputs: Vec<&str> = j.inputs().map(|(_, n, _)| n).collect();
    assert_eq!(inputs, ["x", "y", "tangent_x"]);
    let outputs: Vec<&str> = j.outputs().iter().map(|o| o.name.as_str()).collect();
    assert_eq!(outputs, ["p", "q", "n", "tangent_p", "tangent_q"]);
    let (x, y, t) = ([1.0, -2.0, 3.0], [0.5, 4.0, -1.0], [0.1, 0.2, 0.3]);
    let out = run(&j, &[arr(&[3], &x), arr(&[3], &y), arr(&[3], &t)]);
    assert_eq!(out[3], (0..3).map(|i| y[i] * t[i]).collect::<Vec<_>>());
    assert_close("tangent_q", &out[4], &[2.0 * (0.1 - 0.4 + 0.9)], 1e-15, 0.0);
}

#[test]
fn an_input_no_output_depends_on_gets_a_zero_gradient() {
    let k = kernel_f64("z", &[("x", &[2]), ("unused", &[3])], |b, xs| {
        b.reduce_all(ReduceOp::Sum, xs[0])
    });
    let g = run(
        &grad(&k, &["unused"]).unwrap(),
        &[arr(&[2], &[1.0, 2.0]), arr(&[3], &[0.0; 3])],
    );
    assert_eq!(g[0], vec![0.0; 3]);
}

#[test]
fn f32_kernels_differentiate_in_f32() {
    let mut b = Builder::new("f32");
    let x = b.input("x", TensorType::new(DType::F32, [2])).unwrap();
    let s = b.unary(UnaryOp::Sin, x).unwrap();
    let y = b.reduce_all(ReduceOp::Sum, s).unwrap();
    b.output("y", y).unwrap();
    let g = grad(&b.finish().unwrap(), &["x"]).unwrap();
    let x = rfx_ir::Array::from_vec(vec![2], vec![0.5f32, 1.0]).unwrap();
    let out = rfx_ir::interp::run_hir(&g, &[x.view()], rfx_ir::interp::Mode::Native).unwrap();
    assert_eq!(out[0].dtype(), DType::F32);
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[0.5f32.cos(), 1.0f32.cos()]);
}

#[test]
fn keep_outputs_selects_and_prunes() {
    let k = two_output_kernel();
    let only = keep_outputs(&k, &["q"]).unwrap();
    assert_eq!(only.outputs().len(), 1);
    let g = run_named(
        &grad(&only, &["x"]).unwrap(),
        &[arr(&[3], &[1.0, 2.0, 3.0]), arr(&[3], &[0.0; 3])],
        "grad_x",
    );
    assert_eq!(g, vec![2.0, 4.0, 6.0]);
    assert!(matches!(
        keep_outputs(&k, &["nope"]),
        Err(AdError::UnknownOutput { .. })
    ));
}

#[test]
fn typed_errors() {
    let k = two_output_kernel();
    assert!(matches!(grad(&k, &["x"]), Err(AdError::OutputCount { found: 3 })));
    let p_only = keep_outputs(&k, &["p"]).unwrap();
    assert!(matches!(
        grad(&p_only, &["x"]),
        Err(AdError::NonScalarOutput { .. })
    ));
    let n_only = keep_outputs(&k, &["n"]).unwrap();
    assert!(matches!(
        value_and_grad(&n_only, &["x"]),
        Err(AdError::NonFloatOutput { .. })
    ));
    assert!(matches!(vjp(&k, &["z"]), Err(AdError::UnknownInput { .. })));
    assert!(matches!(
        vjp(&k, &[7usize]),
        Err(AdError::InputPosition {
            position: 7,
            n_inputs: 2
        })
    ));
    assert!(matches!(vjp(&k, &["x", "x"]), Err(AdError::DuplicateWrt { .. })));
    assert!(matches!(vjp(&k, &[] as &[&str]), Err(AdError::EmptyWrt)));

    let mut b = Builder::new("int");
    let i = b.input("i", TensorType::new(DType::I32, [2])).unwrap();
    let f = b.cast(i, DType::F64).unwrap();
    let s = b.reduce_all(ReduceOp::Sum, f).unwrap();
    b.output("s", s).unwrap();
    let ik = b.finish().unwrap();
    assert!(matches!(
        grad(&ik, &["i"]),
        Err(AdError::NonFloatInput {
            dtype: DType::I32,
            ..
        })
    ));

    // A generated name that is already an input.
    let clash = kernel_f64("c", &[("x", &[]), ("ct_out", &[])], |b, xs| {
        b.binary(BinaryOp::Mul, xs[0], xs[1])
    });
    assert!(matches!(vjp(&clash, &["x"]), Err(AdError::NameClash { .. })));
    let bad = rfx_ir::hir::Kernel::from_parts("bad", vec![], vec![]);
    assert!(matches!(grad(&bad, &["x"]), Err(AdError::InvalidKernel(_))));
}
