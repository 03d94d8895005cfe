//! Higher-order derivatives by composition (grad of grad, jacobian of grad, hvp), Jacobians
//! in both modes, all against closed forms and finite differences of first derivatives.

use crate::common;

use common::{arr, assert_close, fd_grad, kernel_f64, run, run_named, uniform};
use rfx_autodiff::{
    AdError, grad, hessian, hvp, jacfwd, jacobian, jacrev, jvp, keep_outputs, value_and_grad,
};
use rfx_ir::hir::Kernel;
use rfx_ir::{BinaryOp, ReduceOp, Scalar, UnaryOp};

fn second_derivative(k: &Kernel, x: f64) -> f64 {
    let g2 = grad(&grad(k, &["x"]).expect("grad"), &["x"]).expect("grad of grad");
    run(&g2, &[arr(&[], &[x])])[0][0]
}

#[test]
fn second_derivatives_of_sin_exp_and_cube() {
    let sin = kernel_f64("sin", &[("x", &[])], |b, xs| b.unary(UnaryOp::Sin, xs[0]));
    let exp = kernel_f64("exp", &[("x", &[])], |b, xs| b.unary(UnaryOp::Exp, xs[0]));
    let cube = kernel_f64("cube", &[("x", &[])], |b, xs| {
        let three = b.scalar(Scalar::F64(3.0));
        b.binary(BinaryOp::Pow, xs[0], three)
    });
    let cube_mul = kernel_f64("cube_mul", &[("x", &[])], |b, xs| {
        let sq = b.binary(BinaryOp::Mul, xs[0], xs[0])?;
        b.binary(BinaryOp::Mul, sq, xs[0])
    });
    for x in uniform(7, 5, -2.0, 2.0) {
        assert_close("sin''", &[second_derivative(&sin, x)], &[-x.sin()], 1e-14, 1e-15);
        assert_close("exp''", &[second_derivative(&exp, x)], &[x.exp()], 1e-14, 0.0);
        assert_close(
            "(x^3)'' via pow",
            &[second_derivative(&cube, x)],
            &[6.0 * x],
            1e-13,
            1e-14,
        );
        assert_close(
            "(x^3)'' via mul",
            &[second_derivative(&cube_mul, x)],
            &[6.0 * x],
            1e-14,
            1e-15,
        );
    }
    // Third derivative of x³ is 6 everywhere, 0 included (pow's ∂a at b - 1 == 0 is handled).
    let g3 = grad(&grad(&grad(&cube, &["x"]).unwrap(), &["x"]).unwrap(), &["x"]).unwrap();
    for x in [-1.5, 0.0, 0.25, 2.0] {
        assert_close("(x^3)'''", &run(&g3, &[arr(&[], &[x])])[0], &[6.0], 1e-13, 0.0);
    }
    // Second derivative in forward-over-reverse agrees: jvp(grad(sin)) with tangent 1.
    let fr = jvp(&grad(&sin, &["x"]).unwrap(), &["x"]).unwrap();
    let out = run_named(&fr, &[arr(&[], &[0.4]), arr(&[], &[1.0])], "tangent_grad_x");
    assert_close("forward over reverse", &out, &[-(0.4f64).sin()], 1e-15, 0.0);
}

/// f(q) = |q| = sqrt(q·q) for a quaternion q: [4].
fn quaternion_norm() -> Kernel {
    kernel_f64("quat_norm", &[("q", &[4])], |b, xs| {
        let sq = b.binary(BinaryOp::Mul, xs[0], xs[0])?;
        let s = b.reduce_all(ReduceOp::Sum, sq)?;
        b.unary(UnaryOp::Sqrt, s)
    })
}

/// ∂²|q| / ∂q_i ∂q_j = (δ_ij - q_i q_j / |q|²) / |q|.
fn quaternion_norm_hessian(q: &[f64]) -> Vec<f64> {
    let n = q.iter().map(|v| v * v).sum::<f64>().sqrt();
    (0..16)
        .map(|k| {
            let (i, j) = (k / 4, k % 4);
            (f64::from(u8::from(i == j)) - q[i] * q[j] / (n * n)) / n
        })
        .collect()
}

#[test]
fn quaternion_norm_gradient_hessian_and_hvp_match_closed_forms() {
    let k = quaternion_norm();
    let q = [0.3, -0.5, 0.7, 0.4];
    let n = q.iter().map(|v| v * v).sum::<f64>().sqrt();
    let g = run(&grad(&k, &["q"]).unwrap(), &[arr(&[4], &q)]);
    assert_close("∇|q|", &g[0], &q.map(|v| v / n), 1e-15, 0.0);

    // Hessian as the reverse Jacobian of the gradient: one vectorised sweep seeded with I₄.
    let hess = jacrev(&grad(&k, &["q"]).unwrap(), &["q"]).unwrap();
    let inputs: Vec<&str> = hess.inputs().map(|(_, name, _)| name).collect();
    assert_eq!(inputs, ["q"]);
    let h = run_named(&hess, &[arr(&[4], &q)], "jac_grad_q_q");
    assert_close("Hessian", &h, &quaternion_norm_hessian(&q), 1e-14, 1e-15);

    // hvp = H · v.
    let v = [1.0, 2.0, -1.0, 0.5];
    let hv = run(&hvp(&k, &["q"]).unwrap(), &[arr(&[4], &q), arr(&[4], &v)]);
    let closed = quaternion_norm_hessian(&q);
    let want: Vec<f64> = (0..4)
        .map(|i| (0..4).map(|j| closed[i * 4 + j] * v[j]).sum())
        .collect();
    assert_close("hvp closed form", &hv[0], &want, 1e-14, 1e-15);
}

#[test]
fn quaternion_norm_hessian_kernel_gives_value_gradient_and_hessian() {
    let k = quaternion_norm();
    let h = hessian(&k, &["q"]).unwrap();
    let names: Vec<&str> = h.outputs().iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["out", "jac_out_q", "hess_out_q_q"]);
    let inputs: Vec<&str> = h.inputs().map(|(_, name, _)| name).collect();
    assert_eq!(inputs, ["q"]);
    for seed in 0..4 {
        let q = uniform(40 + seed, 4, -1.0, 1.0);
        let n = q.iter().map(|v| v * v).sum::<f64>().sqrt();
        let out = run(&h, &[arr(&[4], &q)]);
        assert_close("|q|", &out[0], &[n], 1e-15, 0.0);
        let grad: Vec<f64> = q.iter().map(|v| v / n).collect();
        assert_close("∇|q|", &out[1], &grad, 1e-15, 0.0);
        assert_close("∇²|q|", &out[2], &quaternion_norm_hessian(&q), 1e-14, 1e-15);
    }
}

/// out[i] = sin(x[i]) · Σy + x[i]² · Πy + exp(x[i] · Σy²) for x: [3], y: [2].
fn coupled() -> Kernel {
    kernel_f64("coupled", &[("x", &[3]), ("y", &[2])], |b, xs| {
        let (x, y) = (xs[0], xs[1]);
        let sum_y = b.reduce_all(ReduceOp::Sum, y)?;
        let prod_y = b.reduce_all(ReduceOp::Prod, y)?;
        let y2 = b.binary(BinaryOp::Mul, y, y)?;
        let sum_y2 = b.reduce_all(ReduceOp::Sum, y2)?;
        let sin = b.unary(UnaryOp::Sin, x)?;
        let a = b.binary(BinaryOp::Mul, sin, sum_y)?;
        let x2 = b.binary(BinaryOp::Mul, x, x)?;
        let c = b.binary(BinaryOp::Mul, x2, prod_y)?;
        let xy = b.binary(BinaryOp::Mul, x, sum_y2)?;
        let e = b.unary(UnaryOp::Exp, xy)?;
        let ac = b.binary(BinaryOp::Add, a, c)?;
        b.binary(BinaryOp::Add, ac, e)
    })
}

#[test]
fn hessian_blocks_of_a_vector_output_match_finite_differences_of_its_jacobian() {
    // Every block `hess_out_x_y[i, j, k] = ∂ jac_out_x[i, j] / ∂y[k]` against central
    // differences of the first-derivative kernel, and the mixed blocks against each other.
    let k = coupled();
    let h = hessian(&k, &["x", "y"]).unwrap();
    let names: Vec<&str> = h.outputs().iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "out",
            "jac_out_x",
            "jac_out_y",
            "hess_out_x_x",
            "hess_out_x_y",
            "hess_out_y_x",
            "hess_out_y_y"
        ]
    );
    let shapes: Vec<Vec<usize>> = h
        .outputs()
        .iter()
        .map(|o| h.value_type(o.value).unwrap().shape.dims().to_vec())
        .collect();
    assert_eq!(
        shapes,
        [
            vec![3],
            vec![3, 3],
            vec![3, 2],
            vec![3, 3, 3],
            vec![3, 3, 2],
            vec![3, 2, 3],
            vec![3, 2, 2]
        ]
    );
    let (x, y) = (uniform(50, 3, -1.0, 1.0), uniform(51, 2, -1.0, 1.0));
    let inputs = [arr(&[3], &x), arr(&[2], &y)];
    let out = run(&h, &inputs);
    let first = jacrev(&k, &["x", "y"]).unwrap();
    assert_close("value", &out[0], &run(&k, &inputs)[0], 0.0, 0.0);
    let sizes = [3, 2];
    for (a, size_a) in sizes.iter().enumerate() {
        for (b, size_b) in sizes.iter().enumerate() {
            let block = &out[3 + 2 * a + b];
            // Column (i, j) of the block: the gradient of jac_out_a[i, j] along input b.
            for i in 0..3 {
                for j in 0..*size_a {
                    let mut weights = vec![0.0; 3 * size_a];
                    weights[i * size_a + j] = 1.0;
                    let fd = fd_grad(&first, &inputs, b, 1 + a, Some(&weights));
                    let start = (i * size_a + j) * size_b;
                    let got = &block[start..start + size_b];
                    assert_close(&format!("hess block {a}{b} [{i},{j}]"), got, &fd, 1e-6, 1e-7);
                }
            }
        }
    }
    // Symmetry of second derivatives: hess_out_x_y[i, j, k] = hess_out_y_x[i, k, j].
    for i in 0..3 {
        for j in 0..3 {
            for m in 0..2 {
                let xy = out[4][(i * 3 + j) * 2 + m];
                let yx = out[5][(i * 2 + m) * 3 + j];
                assert_close("mixed partials", &[xy], &[yx], 1e-14, 1e-15);
            }
        }
    }
}

#[test]
fn a_jacobian_of_a_jacobian_clashes_where_hessian_names_apart() {
    let k = coupled();
    let inner = jacobian(&k, &["x"]).unwrap();
    match jacobian(&inner, &["x"]) {
        Err(AdError::NameClash { name }) => assert_eq!(name, "jac_out_x"),
        other => panic!("expected a name clash, got {other:?}"),
    }
    // The clash is only in the names: the outer Jacobian of the kept inner Jacobian equals
    // the Hessian kernel's block.
    let kept = keep_outputs(&inner, &["jac_out_x"]).unwrap();
    let outer = jacobian(&kept, &["x"]).unwrap();
    let (x, y) = (uniform(60, 3, -1.0, 1.0), uniform(61, 2, -1.0, 1.0));
    let inputs = [arr(&[3], &x), arr(&[2], &y)];
    let nested = run_named(&outer, &inputs, "jac_jac_out_x_x");
    let direct = run_named(&hessian(&k, &["x"]).unwrap(), &inputs, "hess_out_x_x");
    assert_close("nested vs hessian", &direct, &nested, 1e-14, 1e-15);
    // x enters each output elementwise, so the x-x block is diagonal in its two last axes.
    for i in 0..3 {
        for j in 0..3 {
            for m in 0..3 {
                if !(i == j && j == m) {
                    assert_eq!(direct[(i * 3 + j) * 3 + m], 0.0, "[{i},{j},{m}]");
                }
            }
        }
    }
}

#[test]
fn hvp_matches_finite_differences_of_the_gradient() {
    // f(x, y) = sum(exp(x) * sin(y) + x² y), x, y: [3]. (H v) computed as a directional finite
    // difference of the gradient kernel: (∇f(p + h v) - ∇f(p - h v)) / 2h.
    let k = kernel_f64("f", &[("x", &[3]), ("y", &[3])], |b, xs| {
        let e = b.unary(UnaryOp::Exp, xs[0])?;
        let s = b.unary(UnaryOp::Sin, xs[1])?;
        let es = b.binary(BinaryOp::Mul, e, s)?;
        let x2 = b.binary(BinaryOp::Mul, xs[0], xs[0])?;
        let x2y = b.binary(BinaryOp::Mul, x2, xs[1])?;
        let t = b.binary(BinaryOp::Add, es, x2y)?;
        b.reduce_all(ReduceOp::Sum, t)
    });
    let (x, y) = (uniform(11, 3, -1.0, 1.0), uniform(12, 3, -1.0, 1.0));
    let (vx, vy) = (uniform(13, 3, -1.0, 1.0), uniform(14, 3, -1.0, 1.0));
    let out = run(
        &hvp(&k, &["x", "y"]).unwrap(),
        &[arr(&[3], &x), arr(&[3], &y), arr(&[3], &vx), arr(&[3], &vy)],
    );
    let g = grad(&k, &["x", "y"]).unwrap();
    let h = 1e-5;
    let at = |s: f64| {
        let px: Vec<f64> = (0..3).map(|i| x[i] + s * vx[i]).collect();
        let py: Vec<f64> = (0..3).map(|i| y[i] + s * vy[i]).collect();
        run(&g, &[arr(&[3], &px), arr(&[3], &py)])
    };
    let (plus, minus) = (at(h), at(-h));
    for i in 0..2 {
        let fd: Vec<f64> = (0..3).map(|j| (plus[i][j] - minus[i][j]) / (2.0 * h)).collect();
        assert_close("hvp vs FD of grad", &out[i], &fd, 1e-7, 1e-9);
    }
}

/// A 2-link planar arm: end effector (x, y) = (l1 cos q1 + l2 cos(q1+q2), l1 sin q1 + l2 sin(q1+q2)).
fn planar_arm() -> Kernel {
    let mut b = rfx_ir::hir::Builder::new("planar_arm");
    let f64_ = rfx_ir::TensorType::scalar(rfx_ir::DType::F64);
    let q1 = b.input("q1", f64_.clone()).expect("q1");
    let q2 = b.input("q2", f64_).expect("q2");
    let l1 = b.scalar(Scalar::F64(1.0));
    let l2 = b.scalar(Scalar::F64(0.5));
    let q12 = b.binary(BinaryOp::Add, q1, q2).expect("add");
    let terms = [(UnaryOp::Cos, "x"), (UnaryOp::Sin, "y")].map(|(f, name)| {
        let a = b.unary(f, q1).expect("f q1");
        let a = b.binary(BinaryOp::Mul, l1, a).expect("l1");
        let c = b.unary(f, q12).expect("f q12");
        let c = b.binary(BinaryOp::Mul, l2, c).expect("l2");
        (b.binary(BinaryOp::Add, a, c).expect("sum"), name)
    });
    for (value, name) in terms {
        b.output(name, value).expect("output");
    }
    b.finish().expect("arm")
}

fn arm_jacobian(q1: f64, q2: f64) -> [[f64; 2]; 2] {
    let (l1, l2) = (1.0, 0.5);
    [
        [-l1 * q1.sin() - l2 * (q1 + q2).sin(), -l2 * (q1 + q2).sin()],
        [l1 * q1.cos() + l2 * (q1 + q2).cos(), l2 * (q1 + q2).cos()],
    ]
}

#[test]
fn planar_arm_jacobian_in_both_modes_matches_the_closed_form() {
    let arm = planar_arm();
    let (q1, q2) = (0.4, 1.1);
    let inputs = [arr(&[], &[q1]), arr(&[], &[q2])];
    let closed = arm_jacobian(q1, q2);
    for (mode, jac) in [
        ("jacfwd", jacfwd(&arm, &["q1", "q2"]).unwrap()),
        ("jacrev", jacrev(&arm, &["q1", "q2"]).unwrap()),
        ("jacobian", jacobian(&arm, &["q1", "q2"]).unwrap()),
    ] {
        for (r, out) in ["x", "y"].iter().enumerate() {
            for (c, input) in ["q1", "q2"].iter().enumerate() {
                let got = run_named(&jac, &inputs, &format!("jac_{out}_{input}"));
                assert_close(
                    &format!("{mode} ∂{out}/∂{input}"),
                    &got,
                    &[closed[r][c]],
                    1e-15,
                    1e-16,
                );
            }
        }
    }
}

#[test]
fn vector_jacobians_in_both_modes_agree_with_finite_differences() {
    // f: ([3], []) -> ([2, 2]): out[i, j] = sin(x[j]·s) · x[i+1]; checked column by column.
    let k = kernel_f64("vec", &[("x", &[3]), ("s", &[])], |b, xs| {
        let xs_ = b.binary(BinaryOp::Mul, xs[0], xs[1])?;
        let sn = b.unary(UnaryOp::Sin, xs_)?;
        let a = b.reshape(sn, vec![3, 1])?;
        let a = b.broadcast_to(a, vec![3, 2])?;
        let a = b.reduce(ReduceOp::Max, a, &[1], false)?; // = sn, through max (no ties)
        let col = b.reshape(a, vec![1, 3])?;
        let m = b.binary(BinaryOp::Mul, col, xs[0])?;
        let m = b.reshape(m, vec![3])?;
        let two = b.scalar(Scalar::F64(2.0));
        let m2 = b.binary(BinaryOp::Mul, m, two)?;
        let out = b.binary(BinaryOp::Add, m2, xs[0])?;
        let prod = b.reduce(ReduceOp::Prod, xs[0], &[0], true)?;
        let out = b.binary(BinaryOp::Mul, out, prod)?;
        let out = b.reshape(out, vec![3])?;
        let four = b.broadcast_to(out, vec![4, 3])?;
        let r = b.reduce(ReduceOp::Mean, four, &[0], false)?;
        let sq = b.binary(BinaryOp::Mul, r, r)?;
        b.reshape(sq, vec![3, 1])
    });
    let x = [0.4, -0.7, 1.2];
    let inputs = [arr(&[3], &x), arr(&[], &[0.9])];
    let out_n = 3;
    let rev = jacrev(&k, &["x", "s"]).unwrap();
    assert_eq!(rev.inputs().count(), 2, "the seed is built in the kernel");
    let jx = run_named(&rev, &inputs, "jac_out_x");
    let js = run_named(&rev, &inputs, "jac_out_s");
    for i in 0..out_n {
        let mut w = vec![0.0; out_n];
        w[i] = 1.0;
        let fd_x = fd_grad(&k, &inputs, 0, 0, Some(&w));
        let fd_s = fd_grad(&k, &inputs, 1, 0, Some(&w));
        assert_close("jacrev row x", &jx[i * 3..i * 3 + 3], &fd_x, 1e-6, 1e-8);
        assert_close("jacrev row s", &js[i..i + 1], &fd_s, 1e-6, 1e-8);
    }
    // Forward mode handles the scalar input; jacobian picks forward when it has fewer inputs.
    let fwd = jacfwd(&k, &["s"]).unwrap();
    let js_fwd = run_named(&fwd, &inputs, "jac_out_s");
    assert_close("jacfwd vs jacrev", &js_fwd, &js, 1e-14, 1e-15);
    let auto = jacobian(&k, &["s"]).unwrap();
    assert_eq!(auto.inputs().count(), 2);
    // Forward mode on the vector input: one batched sweep seeded with I₃, transposed.
    let fwd_x = jacfwd(&k, &["x"]).unwrap();
    assert_eq!(fwd_x.inputs().count(), 2, "the seed is built in the kernel");
    let jx_fwd = run_named(&fwd_x, &inputs, "jac_out_x");
    assert_close("jacfwd vs jacrev (vector input)", &jx_fwd, &jx, 1e-14, 1e-15);
    // With a vector input, jacobian falls back to reverse mode.
    assert_eq!(jacobian(&k, &["x"]).unwrap(), jacrev(&k, &["x"]).unwrap());
}

#[test]
fn value_and_grad_of_a_value_and_grad_output() {
    // Differentiate only grad_x of value_and_grad(sum(x³)): d/dx sum(3x²) = 6x.
    let k = kernel_f64("c", &[("x", &[3])], |b, xs| {
        let three = b.scalar(Scalar::F64(3.0));
        let c = b.binary(BinaryOp::Pow, xs[0], three)?;
        b.reduce_all(ReduceOp::Sum, c)
    });
    let vg = value_and_grad(&k, &["x"]).unwrap();
    let g = keep_outputs(&vg, &["grad_x"]).unwrap();
    let summed = kernel_sum_of(&g);
    let out = run(&grad(&summed, &["x"]).unwrap(), &[arr(&[3], &[1.0, -2.0, 0.5])]);
    assert_close("6x", &out[0], &[6.0, -12.0, 3.0], 1e-14, 0.0);
}

/// `sum(out)` of a single-output kernel, built by appending to its text.
fn kernel_sum_of(k: &Kernel) -> Kernel {
    let text = k.to_string();
    let out = &k.outputs()[0];
    let ty = k.value_type(out.value).expect("type");
    let axes: Vec<String> = (0..ty.shape.rank()).map(|a| a.to_string()).collect();
    let body = text
        .trim_end()
        .trim_end_matches('}')
        .replace(&format!("output {} = {}", out.name, out.value), "");
    let new = format!(
        "{body}  %total = sum {} axes [{}] : {}[]\n  output total = %total\n}}\n",
        out.value,
        axes.join(","),
        ty.dtype
    );
    rfx_ir::hir::parse(&new).unwrap_or_else(|e| panic!("{e}\n{new}"))
}

/// A vector input carried through elementwise ops of its own shape has a diagonal Jacobian:
/// both modes keep their identity seed as its diagonal, so off the diagonal there are exact
/// zeros, also where a partial is infinite (a dense sweep would give `0 · ∞ = NaN` there).
#[test]
fn jacobians_of_elementwise_maps_are_diagonal_with_exact_zeros() {
    // y = sqrt(x) * x + 3x: dy/dx = 1.5 sqrt(x) + 3, and sqrt's partial 1/(2 sqrt x) is ∞ at 0.
    let k = kernel_f64("map", &[("x", &[5])], |b, xs| {
        let r = b.unary(UnaryOp::Sqrt, xs[0])?;
        let rx = b.binary(BinaryOp::Mul, r, xs[0])?;
        let three = b.scalar(Scalar::F64(3.0));
        let t = b.binary(BinaryOp::Mul, xs[0], three)?;
        b.binary(BinaryOp::Add, rx, t)
    });
    let mut x = uniform(11, 5, 0.1, 4.0);
    x[2] = 0.0;
    let jac = run_named(&jacfwd(&k, &["x"]).unwrap(), &[arr(&[5], &x)], "jac_out_x");
    for i in 0..5 {
        for j in 0..5 {
            let got = jac[i * 5 + j];
            if i != j {
                assert_eq!(got.to_bits(), 0.0f64.to_bits(), "[{i}, {j}] = {got}");
            } else if i == 2 {
                // sqrt(0) · 0's partial: ∞ · 0 + sqrt(0) · 1 is NaN in IEEE, as in jvp.
                assert!(got.is_nan(), "[2, 2] = {got}");
            } else {
                let want = 1.5 * x[i].sqrt() + 3.0;
                assert_close("diagonal", &[got], &[want], 1e-14, 0.0);
            }
        }
    }
    // Reverse mode (and `jacobian`, which picks it for as many outputs as inputs) keeps its
    // identity seed as a diagonal too: exact zeros off the diagonal, the same diagonal (up to
    // the order its terms are added in).
    for (mode, kernel) in [
        ("jacrev", jacrev(&k, &["x"]).unwrap()),
        ("jacobian", jacobian(&k, &["x"]).unwrap()),
    ] {
        let rev = run_named(&kernel, &[arr(&[5], &x)], "jac_out_x");
        for (i, (&r, &f)) in rev.iter().zip(&jac).enumerate() {
            if i % 6 != 0 {
                assert_eq!(r.to_bits(), 0.0f64.to_bits(), "{mode}: element {i} = {r}");
            } else if f.is_nan() {
                assert!(r.is_nan(), "{mode}: element {i} = {r}");
            } else {
                assert_close(mode, &[r], &[f], 1e-15, 0.0);
            }
        }
        let square = kernel
            .nodes()
            .iter()
            .filter(|node| node.ty.shape.numel() == 25)
            .filter(|node| matches!(node.op, rfx_ir::hir::Op::Unary(_) | rfx_ir::hir::Op::Binary(_)))
            .count();
        assert_eq!(square, 0, "{mode}: arithmetic on the 5 × 5 Jacobian\n{kernel}");
    }
    // The diagonal entries are exactly jvp's tangents along each basis vector.
    let tangent = jvp(&k, &["x"]).unwrap();
    for i in [0, 3] {
        let mut e = vec![0.0; 5];
        e[i] = 1.0;
        let t = run_named(&tangent, &[arr(&[5], &x), arr(&[5], &e)], "tangent_out");
        assert_eq!(t[i].to_bits(), jac[i * 5 + i].to_bits(), "jvp along e{i}");
    }
}

/// The Hessian of a separable cost: forward over reverse keeps the gradient's tangent
/// diagonal, so the `n × n` part of the kernel only places the diagonal (no arithmetic), and
/// the values match the closed form.
#[test]
fn hessians_of_separable_costs_place_their_diagonal() {
    // cost = Σ x² - log(1 - x²/4): ∂² = 2 + (1/2 + x²/8) / (1 - x²/4)².
    let n = 7;
    let k = kernel_f64("barrier", &[("x", &[n])], |b, xs| {
        let xx = b.binary(BinaryOp::Mul, xs[0], xs[0])?;
        let quarter = b.scalar(Scalar::F64(0.25));
        let q = b.binary(BinaryOp::Mul, xx, quarter)?;
        let one = b.scalar(Scalar::F64(1.0));
        let s = b.binary(BinaryOp::Sub, one, q)?;
        let l = b.unary(UnaryOp::Log, s)?;
        let c = b.binary(BinaryOp::Sub, xx, l)?;
        b.reduce_all(ReduceOp::Sum, c)
    });
    let h = hessian(&k, &["x"]).unwrap();
    let square: Vec<_> = h
        .nodes()
        .iter()
        .filter(|node| node.ty.shape.numel() == n * n)
        .map(|node| &node.op)
        .collect();
    assert!(
        square.iter().all(|op| matches!(
            op,
            rfx_ir::hir::Op::Iota { .. }
                | rfx_ir::hir::Op::Compare(_)
                | rfx_ir::hir::Op::Select
                | rfx_ir::hir::Op::BroadcastTo
                | rfx_ir::hir::Op::Const(_)
        )),
        "arithmetic on the n × n Hessian: {square:?}\n{h}"
    );
    let x = uniform(12, n, -1.5, 1.5);
    let got = run_named(&h, &[arr(&[n], &x)], "hess_out_x_x");
    for i in 0..n {
        for j in 0..n {
            let s = 1.0 - x[i] * x[i] / 4.0;
            let want = if i == j {
                2.0 + (0.5 + x[i] * x[i] / 8.0) / (s * s)
            } else {
                0.0
            };
            assert_close("Hessian", &[got[i * n + j]], &[want], 1e-13, 0.0);
        }
    }
}
