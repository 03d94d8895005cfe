//! Every differentiable op against a hand-derived closed form and central finite differences
//! (f64, random points away from kinks), in reverse mode (`grad`) and forward mode (`jvp`); and
//! the documented conventions at kinks and special points.

use crate::common;

use common::{arr, assert_close, fd_grad, kernel_f64, run, run_named, uniform};
use rfx_autodiff::{grad, jvp, value_and_grad};
use rfx_ir::{BinaryOp, CmpOp, ReduceOp, Scalar, UnaryOp};

type Deriv = fn(f64) -> f64;

/// (op, sampling range, closed-form derivative).
fn unary_cases() -> Vec<(UnaryOp, (f64, f64), Deriv)> {
    vec![
        (UnaryOp::Neg, (-3.0, 3.0), |_| -1.0),
        (UnaryOp::Abs, (0.2, 3.0), |_| 1.0),
        (UnaryOp::Sqrt, (0.2, 4.0), |x| 0.5 / x.sqrt()),
        (UnaryOp::Rsqrt, (0.2, 4.0), |x| -0.5 * x.powf(-1.5)),
        (UnaryOp::Recip, (0.3, 4.0), |x| -1.0 / (x * x)),
        (UnaryOp::Exp, (-3.0, 3.0), f64::exp),
        (UnaryOp::Exp2, (-3.0, 3.0), |x| x.exp2() * std::f64::consts::LN_2),
        (UnaryOp::Log, (0.2, 4.0), |x| 1.0 / x),
        (UnaryOp::Log2, (0.2, 4.0), |x| 1.0 / (x * std::f64::consts::LN_2)),
        (UnaryOp::Sin, (-3.0, 3.0), f64::cos),
        (UnaryOp::Cos, (-3.0, 3.0), |x| -x.sin()),
        (UnaryOp::Tan, (-1.2, 1.2), |x| 1.0 / (x.cos() * x.cos())),
        (UnaryOp::Tanh, (-3.0, 3.0), |x| 1.0 / (x.cosh() * x.cosh())),
        (UnaryOp::Atan, (-3.0, 3.0), |x| 1.0 / (1.0 + x * x)),
        (UnaryOp::Asin, (-0.9, 0.9), |x| 1.0 / (1.0 - x * x).sqrt()),
        (UnaryOp::Acos, (-0.9, 0.9), |x| -1.0 / (1.0 - x * x).sqrt()),
        (UnaryOp::Sigmoid, (-4.0, 4.0), |x| {
            let s = 1.0 / (1.0 + (-x).exp());
            s * (1.0 - s)
        }),
        (UnaryOp::Erf, (-2.5, 2.5), |x| {
            std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp()
        }),
        // Piecewise constant: zero derivative away from the jumps (sampled off integers).
        (UnaryOp::Sign, (0.1, 0.9), |_| 0.0),
        (UnaryOp::Floor, (0.1, 0.9), |_| 0.0),
        (UnaryOp::Ceil, (0.1, 0.9), |_| 0.0),
        (UnaryOp::Round, (0.1, 0.4), |_| 0.0),
    ]
}

#[test]
fn unary_ops_match_closed_forms_and_finite_differences() {
    for (case, (op, (lo, hi), deriv)) in unary_cases().into_iter().enumerate() {
        let kernel = kernel_f64("unary", &[("x", &[6])], |b, xs| {
            let y = b.unary(op, xs[0])?;
            b.reduce_all(ReduceOp::Sum, y)
        });
        let x = uniform(case as u64, 6, lo, hi);
        let inputs = [arr(&[6], &x)];
        let g = run(&grad(&kernel, &["x"]).unwrap(), &inputs).swap_remove(0);
        let closed: Vec<f64> = x.iter().map(|&v| deriv(v)).collect();
        assert_close(&format!("{op} closed form"), &g, &closed, 1e-12, 1e-14);
        let fd = fd_grad(&kernel, &inputs, 0, 0, None);
        assert_close(&format!("{op} finite differences"), &g, &fd, 1e-6, 1e-8);

        // Forward mode: the tangent of the elementwise result is f'(x) · t.
        let elementwise = kernel_f64("unary", &[("x", &[6])], |b, xs| b.unary(op, xs[0]));
        let t = uniform(100 + case as u64, 6, -1.0, 1.0);
        let tangent = run_named(
            &jvp(&elementwise, &["x"]).unwrap(),
            &[arr(&[6], &x), arr(&[6], &t)],
            "tangent_out",
        );
        let want: Vec<f64> = x.iter().zip(&t).map(|(&v, &dv)| deriv(v) * dv).collect();
        assert_close(&format!("{op} jvp"), &tangent, &want, 1e-12, 1e-14);
    }
}

type Deriv2 = fn(f64, f64) -> (f64, f64);
type Range = (f64, f64);

/// (op, range of a, range of b, closed-form (∂a, ∂b)).
fn binary_cases() -> Vec<(BinaryOp, Range, Range, Deriv2)> {
    vec![
        (BinaryOp::Add, (-3.0, 3.0), (-3.0, 3.0), |_, _| (1.0, 1.0)),
        (BinaryOp::Sub, (-3.0, 3.0), (-3.0, 3.0), |_, _| (1.0, -1.0)),
        (BinaryOp::Mul, (-3.0, 3.0), (-3.0, 3.0), |a, b| (b, a)),
        (BinaryOp::Div, (-3.0, 3.0), (0.5, 3.0), |a, b| {
            (1.0 / b, -a / (b * b))
        }),
        (BinaryOp::Pow, (0.3, 3.0), (-2.0, 2.0), |a, b| {
            (b * a.powf(b - 1.0), a.ln() * a.powf(b))
        }),
        (BinaryOp::Atan2, (-3.0, 3.0), (0.5, 3.0), |a, b| {
            (b / (a * a + b * b), -a / (a * a + b * b))
        }),
        // a in [2, 3), b in [-1.9, -1): no tie.
        (BinaryOp::Max, (2.0, 3.0), (-1.9, -1.0), |_, _| (1.0, 0.0)),
        (BinaryOp::Min, (2.0, 3.0), (-1.9, -1.0), |_, _| (0.0, 1.0)),
        // a / b in (1.05, 2.9): trunc(a / b) = 1 or 2 away from the jumps is checked by FD.
        (BinaryOp::Fmod, (2.1, 2.9), (1.3, 1.9), |a, b| {
            (1.0, -(a / b).trunc())
        }),
    ]
}

#[test]
fn binary_ops_match_closed_forms_and_finite_differences() {
    for (case, (op, ra, rb, deriv)) in binary_cases().into_iter().enumerate() {
        let kernel = kernel_f64("binary", &[("a", &[5]), ("b", &[5])], |b, xs| {
            let y = b.binary(op, xs[0], xs[1])?;
            b.reduce_all(ReduceOp::Sum, y)
        });
        let a = uniform(10 + case as u64, 5, ra.0, ra.1);
        let bv = uniform(20 + case as u64, 5, rb.0, rb.1);
        let inputs = [arr(&[5], &a), arr(&[5], &bv)];
        let grads = run(&grad(&kernel, &["a", "b"]).unwrap(), &inputs);
        let (da, db): (Vec<f64>, Vec<f64>) = a.iter().zip(&bv).map(|(&x, &y)| deriv(x, y)).unzip();
        assert_close(&format!("{op} ∂a closed form"), &grads[0], &da, 1e-12, 1e-14);
        assert_close(&format!("{op} ∂b closed form"), &grads[1], &db, 1e-12, 1e-14);
        assert_close(
            &format!("{op} ∂a FD"),
            &grads[0],
            &fd_grad(&kernel, &inputs, 0, 0, None),
            1e-6,
            1e-8,
        );
        assert_close(
            &format!("{op} ∂b FD"),
            &grads[1],
            &fd_grad(&kernel, &inputs, 1, 0, None),
            1e-6,
            1e-8,
        );

        let elementwise = kernel_f64("binary", &[("a", &[5]), ("b", &[5])], |b, xs| {
            b.binary(op, xs[0], xs[1])
        });
        let (ta, tb) = (uniform(30, 5, -1.0, 1.0), uniform(31, 5, -1.0, 1.0));
        let tangent = run_named(
            &jvp(&elementwise, &["a", "b"]).unwrap(),
            &[arr(&[5], &a), arr(&[5], &bv), arr(&[5], &ta), arr(&[5], &tb)],
            "tangent_out",
        );
        let want: Vec<f64> = (0..5).map(|i| da[i] * ta[i] + db[i] * tb[i]).collect();
        assert_close(&format!("{op} jvp"), &tangent, &want, 1e-12, 1e-14);
    }
}

#[test]
fn select_and_clamp_route_the_derivative_away_from_kinks() {
    // y = sum(select(x > 0, x², 3x)) + sum(clamp(x, lo, hi))
    let kernel = kernel_f64("sel", &[("x", &[6]), ("lo", &[]), ("hi", &[])], |b, xs| {
        let zero = b.scalar(Scalar::F64(0.0));
        let three = b.scalar(Scalar::F64(3.0));
        let pos = b.compare(CmpOp::Gt, xs[0], zero)?;
        let sq = b.binary(BinaryOp::Mul, xs[0], xs[0])?;
        let lin = b.binary(BinaryOp::Mul, three, xs[0])?;
        let sel = b.select(pos, sq, lin)?;
        let clamped = b.clamp(xs[0], xs[1], xs[2])?;
        let both = b.binary(BinaryOp::Add, sel, clamped)?;
        b.reduce_all(ReduceOp::Sum, both)
    });
    let x = [-2.5, -0.7, 0.4, 1.3, 2.2, 3.1];
    let inputs = [arr(&[6], &x), arr(&[], &[-1.0]), arr(&[], &[2.0])];
    let grads = run(&grad(&kernel, &["x", "lo", "hi"]).unwrap(), &inputs);
    let dx: Vec<f64> = x
        .iter()
        .map(|&v| (if v > 0.0 { 2.0 * v } else { 3.0 }) + if -1.0 < v && v < 2.0 { 1.0 } else { 0.0 })
        .collect();
    assert_close("∂x", &grads[0], &dx, 1e-14, 0.0);
    assert_close("∂lo (one element below)", &grads[1], &[1.0], 0.0, 0.0);
    assert_close("∂hi (two elements above)", &grads[2], &[2.0], 0.0, 0.0);
    for (i, g) in grads.iter().enumerate() {
        assert_close("FD", g, &fd_grad(&kernel, &inputs, i, 0, None), 1e-6, 1e-8);
    }
}

#[test]
fn reductions_with_and_without_keepdims_match_finite_differences() {
    // out = sum(w * reduce(x, axes)), w random so that the cotangent is not uniform.
    for (case, op) in [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
    ]
    .into_iter()
    .enumerate()
    {
        for (axes, keepdims) in [
            (vec![0], false),
            (vec![1], true),
            (vec![1], false),
            (vec![0, 1], true),
            (vec![0, 2], false),
        ] {
            let mut reduced_shape = Vec::new();
            for (i, d) in [2usize, 3, 4].into_iter().enumerate() {
                if !axes.contains(&i) {
                    reduced_shape.push(d);
                } else if keepdims {
                    reduced_shape.push(1);
                }
            }
            let n_out: usize = reduced_shape.iter().product();
            let kernel = kernel_f64("red", &[("x", &[2, 3, 4]), ("w", &reduced_shape)], |b, xs| {
                let r = b.reduce(op, xs[0], &axes, keepdims)?;
                let weighted = b.binary(BinaryOp::Mul, r, xs[1])?;
                b.reduce_all(ReduceOp::Sum, weighted)
            });
            // Distinct values (no ties) in [0.5, 1.5): the product stays well conditioned.
            let x = uniform(40 + case as u64, 24, 0.5, 1.5);
            let w = uniform(50, n_out, -1.0, 1.0);
            let inputs = [arr(&[2, 3, 4], &x), arr(&reduced_shape, &w)];
            let g = run(&grad(&kernel, &["x"]).unwrap(), &inputs).swap_remove(0);
            let fd = fd_grad(&kernel, &inputs, 0, 0, None);
            assert_close(
                &format!("{op} axes {axes:?} keepdims {keepdims}"),
                &g,
                &fd,
                1e-6,
                1e-8,
            );
        }
    }
}

#[test]
fn sum_of_squares_reduction_closed_form() {
    // d/dx mean(x²) = 2x / n; d/dx prod(x) = prod / x; d/dx max(x) = one-hot at the argmax.
    let x = [0.5, -1.5, 2.0, 1.25];
    let inputs = [arr(&[4], &x)];
    let mean_sq = kernel_f64("m", &[("x", &[4])], |b, xs| {
        let sq = b.binary(BinaryOp::Mul, xs[0], xs[0])?;
        b.reduce_all(ReduceOp::Mean, sq)
    });
    let g = run(&grad(&mean_sq, &["x"]).unwrap(), &inputs).swap_remove(0);
    assert_close("mean", &g, &x.map(|v| v / 2.0), 1e-15, 0.0);
    let prod = kernel_f64("p", &[("x", &[4])], |b, xs| b.reduce_all(ReduceOp::Prod, xs[0]));
    let g = run(&grad(&prod, &["x"]).unwrap(), &inputs).swap_remove(0);
    assert_close("prod", &g, &[-3.75, 1.25, -0.9375, -1.5], 1e-15, 0.0);
    let max = kernel_f64("mx", &[("x", &[4])], |b, xs| b.reduce_all(ReduceOp::Max, xs[0]));
    let g = run(&grad(&max, &["x"]).unwrap(), &inputs).swap_remove(0);
    assert_close("max", &g, &[0.0, 0.0, 1.0, 0.0], 0.0, 0.0);
}

// ---- Conventions at kinks (documented in the crate header) ----

fn grad_at(kernel: &rfx_ir::hir::Kernel, wrt: &[&str], inputs: &[rfx_ir::Array]) -> Vec<Vec<f64>> {
    run(&grad(kernel, wrt).expect("grad"), inputs)
}

#[test]
fn abs_at_zero_has_derivative_one_like_jax() {
    let k = kernel_f64("abs", &[("x", &[3])], |b, xs| {
        let y = b.unary(UnaryOp::Abs, xs[0])?;
        b.reduce_all(ReduceOp::Sum, y)
    });
    let g = grad_at(&k, &["x"], &[arr(&[3], &[0.0, -0.0, -2.0])]);
    assert_eq!(g[0], vec![1.0, 1.0, -1.0]);
}

#[test]
fn max_and_min_split_ties_evenly_like_jax() {
    for op in [BinaryOp::Max, BinaryOp::Min] {
        let k = kernel_f64("mm", &[("a", &[3]), ("b", &[3])], |b, xs| {
            let y = b.binary(op, xs[0], xs[1])?;
            b.reduce_all(ReduceOp::Sum, y)
        });
        let g = grad_at(
            &k,
            &["a", "b"],
            &[arr(&[3], &[1.0, 0.0, 5.0]), arr(&[3], &[1.0, -0.0, 2.0])],
        );
        let (wa, wb) = if op == BinaryOp::Max {
            (1.0, 0.0)
        } else {
            (0.0, 1.0)
        };
        assert_eq!(g[0], vec![0.5, 0.5, wa], "{op} ∂a");
        assert_eq!(g[1], vec![0.5, 0.5, wb], "{op} ∂b");
    }
    // relu(x) = max(x, 0) at 0: 1/2.
    let relu = kernel_f64("relu", &[("x", &[])], |b, xs| {
        let zero = b.scalar(Scalar::F64(0.0));
        b.binary(BinaryOp::Max, xs[0], zero)
    });
    assert_eq!(grad_at(&relu, &["x"], &[arr(&[], &[0.0])])[0], vec![0.5]);
}

#[test]
fn max_and_min_reductions_share_ties_equally() {
    for op in [ReduceOp::Max, ReduceOp::Min] {
        let k = kernel_f64("r", &[("x", &[2, 3])], |b, xs| {
            let r = b.reduce(op, xs[0], &[1], false)?;
            b.reduce_all(ReduceOp::Sum, r)
        });
        let x = if op == ReduceOp::Max {
            [3.0, 1.0, 3.0, 2.0, 2.0, 2.0]
        } else {
            [1.0, 3.0, 1.0, 2.0, 2.0, 2.0]
        };
        let g = grad_at(&k, &["x"], &[arr(&[2, 3], &x)]);
        let third = 1.0 / 3.0;
        assert_eq!(g[0], vec![0.5, 0.0, 0.5, third, third, third], "{op}");
    }
}

#[test]
fn clamp_gives_nothing_on_ties_like_lax_clamp() {
    let k = kernel_f64("c", &[("x", &[5]), ("lo", &[]), ("hi", &[])], |b, xs| {
        let y = b.clamp(xs[0], xs[1], xs[2])?;
        b.reduce_all(ReduceOp::Sum, y)
    });
    // x == lo, x == hi, inside, below, above.
    let g = grad_at(
        &k,
        &["x", "lo", "hi"],
        &[
            arr(&[5], &[-1.0, 1.0, 0.5, -3.0, 4.0]),
            arr(&[], &[-1.0]),
            arr(&[], &[1.0]),
        ],
    );
    assert_eq!(g[0], vec![0.0, 0.0, 1.0, 0.0, 0.0]);
    assert_eq!(g[1], vec![1.0]);
    assert_eq!(g[2], vec![1.0]);
    // lo > hi: the result is hi everywhere, so hi gets every element's derivative.
    let g = grad_at(
        &k,
        &["x", "lo", "hi"],
        &[
            arr(&[5], &[-1.0, 1.0, 0.5, -3.0, 4.0]),
            arr(&[], &[2.0]),
            arr(&[], &[1.0]),
        ],
    );
    assert_eq!((g[0].iter().sum::<f64>(), g[1][0], g[2][0]), (0.0, 0.0, 5.0));
}

#[test]
fn sqrt_and_log_at_zero_are_infinite_like_jax() {
    let sqrt = kernel_f64("s", &[("x", &[])], |b, xs| b.unary(UnaryOp::Sqrt, xs[0]));
    assert_eq!(
        grad_at(&sqrt, &["x"], &[arr(&[], &[0.0])])[0],
        vec![f64::INFINITY]
    );
    let log = kernel_f64("l", &[("x", &[])], |b, xs| b.unary(UnaryOp::Log, xs[0]));
    assert_eq!(grad_at(&log, &["x"], &[arr(&[], &[0.0])])[0], vec![f64::INFINITY]);
    assert_eq!(
        grad_at(&log, &["x"], &[arr(&[], &[-0.0])])[0],
        vec![f64::NEG_INFINITY]
    );
}

#[test]
fn pow_special_points_follow_jax() {
    let k = kernel_f64("p", &[("a", &[3]), ("b", &[3])], |b, xs| {
        let y = b.binary(BinaryOp::Pow, xs[0], xs[1])?;
        b.reduce_all(ReduceOp::Sum, y)
    });
    // (0, 2): ∂a = 2·0 = 0, ∂b = 0 (log 0 replaced); (0, 0): ∂a = 0 (b == 0), ∂b = 0;
    // (3, 0): ∂a = 0 (b == 0), ∂b = log 3.
    let g = grad_at(
        &k,
        &["a", "b"],
        &[arr(&[3], &[0.0, 0.0, 3.0]), arr(&[3], &[2.0, 0.0, 0.0])],
    );
    assert_eq!(g[0], vec![0.0, 0.0, 0.0]);
    assert_eq!(g[1], vec![0.0, 0.0, 3.0f64.ln()]);
    // x³ at x = 0: ∂a = 3·0² = 0; x^0.5 at 0: +Inf like sqrt.
    let g = grad_at(
        &k,
        &["a"],
        &[arr(&[3], &[0.0, 0.0, 2.0]), arr(&[3], &[3.0, 0.5, 1.0])],
    );
    assert_eq!(g[0], vec![0.0, f64::INFINITY, 1.0]);
}

#[test]
fn piecewise_constant_ops_have_zero_derivative_even_at_jumps() {
    for op in [UnaryOp::Sign, UnaryOp::Floor, UnaryOp::Ceil, UnaryOp::Round] {
        let k = kernel_f64("pc", &[("x", &[3])], |b, xs| {
            let y = b.unary(op, xs[0])?;
            let y = b.binary(BinaryOp::Add, y, xs[0])?;
            b.reduce_all(ReduceOp::Sum, y)
        });
        let g = grad_at(&k, &["x"], &[arr(&[3], &[0.0, 1.0, 0.5])]);
        assert_eq!(g[0], vec![1.0, 1.0, 1.0], "{op}");
    }
}

#[test]
fn prod_gradient_is_exact_at_zeros() {
    let k = kernel_f64("p", &[("x", &[2, 3])], |b, xs| {
        let r = b.reduce(ReduceOp::Prod, xs[0], &[1], false)?;
        b.reduce_all(ReduceOp::Sum, r)
    });
    // Row 0 has one zero, row 1 two zeros.
    let g = grad_at(&k, &["x"], &[arr(&[2, 3], &[2.0, 0.0, 3.0, 0.0, 5.0, 0.0])]);
    assert_eq!(g[0], vec![0.0, 6.0, 0.0, 0.0, 0.0, 0.0]);
}

#[test]
fn comparisons_and_casts_to_integers_carry_no_derivative() {
    // out = x * cast(cast(x, i32), f64) + select(x > 1, 1, 0): only the first factor carries.
    let k = kernel_f64("c", &[("x", &[2])], |b, xs| {
        let i = b.cast(xs[0], rfx_ir::DType::I32)?;
        let f = b.cast(i, rfx_ir::DType::F64)?;
        let y = b.binary(BinaryOp::Mul, xs[0], f)?;
        b.reduce_all(ReduceOp::Sum, y)
    });
    let g = grad_at(&k, &["x"], &[arr(&[2], &[2.5, -1.5])]);
    assert_eq!(g[0], vec![2.0, -1.0]);
}

#[test]
fn float_casts_pass_the_derivative_through() {
    // f32 round trip in the middle of an f64 kernel: d/dx sin(cast(cast(x, f32), f64)) ≈ cos.
    let k = kernel_f64("c", &[("x", &[2])], |b, xs| {
        let narrow = b.cast(xs[0], rfx_ir::DType::F32)?;
        let s = b.unary(UnaryOp::Sin, narrow)?;
        let wide = b.cast(s, rfx_ir::DType::F64)?;
        b.reduce_all(ReduceOp::Sum, wide)
    });
    let x = [0.3, 1.1];
    let g = grad_at(&k, &["x"], &[arr(&[2], &x)]);
    assert_close("cast", &g[0], &x.map(f64::cos), 1e-6, 0.0);
}

#[test]
fn value_and_grad_keeps_the_value() {
    let k = kernel_f64("v", &[("x", &[2])], |b, xs| {
        let e = b.unary(UnaryOp::Exp, xs[0])?;
        b.reduce_all(ReduceOp::Sum, e)
    });
    let out = run(&value_and_grad(&k, &["x"]).unwrap(), &[arr(&[2], &[0.0, 1.0])]);
    assert_close("value", &out[0], &[1.0 + 1f64.exp()], 1e-15, 0.0);
    assert_close("grad", &out[1], &[1.0, 1f64.exp()], 1e-15, 0.0);
}

#[test]
fn windows_and_concatenations_differentiate_to_paddings_and_windows() {
    // f(x, y) = sum(sin(x[1:4]) * cat(x[0:1], y)) with cat(a, y) = pad(a) + pad(y) of length 3:
    // x: [5], y: [2]. By hand, with w = x[1:4] and c = [x0, y0, y1]:
    //   ∂f/∂x_{1+i} = cos(w_i) c_i (i < 3), ∂f/∂x_0 = sin(w_0), ∂f/∂x_4 = 0,
    //   ∂f/∂y_j = sin(w_{1+j}).
    let kernel = kernel_f64("windows", &[("x", &[5]), ("y", &[2])], |b, xs| {
        let w = b.slice(xs[0], &[1], [3])?;
        let s = b.unary(UnaryOp::Sin, w)?;
        let head = b.slice(xs[0], &[0], [1])?;
        let head = b.pad(head, &[0], [3])?;
        let tail = b.pad(xs[1], &[1], [3])?;
        let cat = b.binary(BinaryOp::Add, head, tail)?;
        let p = b.binary(BinaryOp::Mul, s, cat)?;
        b.reduce_all(ReduceOp::Sum, p)
    });
    let x = uniform(7, 5, -2.0, 2.0);
    let y = uniform(8, 2, -2.0, 2.0);
    let inputs = [arr(&[5], &x), arr(&[2], &y)];
    let g = run(&grad(&kernel, &["x", "y"]).unwrap(), &inputs);
    let c = [x[0], y[0], y[1]];
    let mut gx = vec![0.0; 5];
    gx[0] = x[1].sin();
    for i in 0..3 {
        gx[1 + i] += x[1 + i].cos() * c[i];
    }
    let gy = [x[2].sin(), x[3].sin()];
    assert_close("slice/pad grad x", &g[0], &gx, 1e-12, 1e-14);
    assert_close("slice/pad grad y", &g[1], &gy, 1e-12, 1e-14);
    assert_close("fd x", &g[0], &fd_grad(&kernel, &inputs, 0, 0, None), 1e-6, 1e-8);
    assert_close("fd y", &g[1], &fd_grad(&kernel, &inputs, 1, 0, None), 1e-6, 1e-8);

    // Forward mode: the tangent of the value is the same sum over the tangents.
    let t = uniform(9, 5, -1.0, 1.0);
    let u = uniform(10, 2, -1.0, 1.0);
    let tangent = run_named(
        &jvp(&kernel, &["x", "y"]).unwrap(),
        &[arr(&[5], &x), arr(&[2], &y), arr(&[5], &t), arr(&[2], &u)],
        "tangent_out",
    );
    let want: f64 = gx
        .iter()
        .zip(&t)
        .chain(gy.iter().zip(&u))
        .map(|(g, d)| g * d)
        .sum();
    assert_close("slice/pad jvp", &tangent, &[want], 1e-12, 1e-14);
}

#[test]
fn a_lookup_differentiates_to_a_scatter_add_into_its_table() {
    use rfx_ir::hir::Builder;
    use rfx_ir::{Array, DType, TensorType};
    // f(table, w) = sum(sin(table[clamp(trunc(at)), c]) * w) with table [5, 2], at and w [6, 2]:
    // ∂f/∂table[r, c] = cos(table[r, c]) Σ_{i: row(i, c) = r} w[i, c] (repeats add, rows past
    // either end clamp), ∂f/∂w = sin(table[row, c]), and the index has no gradient.
    let at = [
        1.7,
        -0.2,
        9.0,
        f64::NAN,
        4.99,
        2.0,
        1.2,
        0.0,
        -7.0,
        3.5,
        2.9,
        f64::INFINITY,
    ];
    let row = |v: f64| {
        if v.is_nan() || v < 0.0 {
            0
        } else {
            (v as usize).min(4)
        }
    };
    for index_dtype in [DType::F64, DType::I32] {
        let mut b = Builder::new("lookup");
        let table = b.input("table", TensorType::new(DType::F64, [5, 2])).unwrap();
        let index = b.input("at", TensorType::new(index_dtype, [6, 2])).unwrap();
        let w = b.input("w", TensorType::new(DType::F64, [6, 2])).unwrap();
        let g = b.gather(table, index, 0).unwrap();
        let s = b.unary(UnaryOp::Sin, g).unwrap();
        let p = b.binary(BinaryOp::Mul, s, w).unwrap();
        let out = b.reduce_all(ReduceOp::Sum, p).unwrap();
        b.output("out", out).unwrap();
        let kernel = b.finish().unwrap();
        let t = uniform(21, 10, -2.0, 2.0);
        let wv = uniform(22, 12, -1.0, 1.0);
        let index = match index_dtype {
            DType::F64 => arr(&[6, 2], &at),
            _ => Array::from_vec(
                vec![6, 2],
                at.iter().map(|&v| row(v) as i32).collect::<Vec<i32>>(),
            )
            .unwrap(),
        };
        let inputs = [arr(&[5, 2], &t), index, arr(&[6, 2], &wv)];
        let mut want_t = vec![0.0; 10];
        let mut want_w = vec![0.0; 12];
        for i in 0..6 {
            for c in 0..2 {
                let r = row(at[2 * i + c]);
                want_t[2 * r + c] += t[2 * r + c].cos() * wv[2 * i + c];
                want_w[2 * i + c] = t[2 * r + c].sin();
            }
        }
        let what = format!("{index_dtype} index");
        let g = run(&grad(&kernel, &["table", "w"]).unwrap(), &inputs);
        assert_close(&format!("{what}: grad table"), &g[0], &want_t, 1e-13, 1e-15);
        assert_close(&format!("{what}: grad w"), &g[1], &want_w, 1e-13, 1e-15);
        if index_dtype == DType::F64 {
            assert_close(
                "fd table",
                &g[0],
                &fd_grad(&kernel, &inputs, 0, 0, None),
                1e-6,
                1e-8,
            );
            // Piecewise constant in the index: a zero gradient (all positive zeros).
            let gi = run(&grad(&kernel, &["at"]).unwrap(), &inputs);
            assert!(gi[0].iter().all(|v| v.to_bits() == 0), "{:?}", gi[0]);
        }
        // Forward mode: the table's tangent read at the same rows.
        let dt = uniform(23, 10, -1.0, 1.0);
        let dw = uniform(24, 12, -1.0, 1.0);
        let mut tangent_inputs = inputs.to_vec();
        tangent_inputs.push(arr(&[5, 2], &dt));
        tangent_inputs.push(arr(&[6, 2], &dw));
        let tangent = run_named(
            &jvp(&kernel, &["table", "w"]).unwrap(),
            &tangent_inputs,
            "tangent_out",
        );
        let want: f64 = want_t
            .iter()
            .zip(&dt)
            .chain(want_w.iter().zip(&dw))
            .map(|(g, d)| g * d)
            .sum();
        assert_close(&format!("{what}: jvp"), &tangent, &[want], 1e-12, 1e-14);
    }

    // Gain scheduling: a gain interpolated linearly in a table at a speed v; the gradient in v
    // is the slope of the segment it lies on, times the scale.
    let kernel = kernel_f64("schedule", &[("v", &[8]), ("table", &[6])], |b, xs| {
        let scale = b.scalar(Scalar::F64(2.0));
        let pos = b.binary(BinaryOp::Mul, xs[0], scale)?;
        let i = b.unary(UnaryOp::Floor, pos)?;
        let t = b.binary(BinaryOp::Sub, pos, i)?;
        let one = b.scalar(Scalar::F64(1.0));
        let j = b.binary(BinaryOp::Add, i, one)?;
        let lo = b.gather(xs[1], i, 0)?;
        let hi = b.gather(xs[1], j, 0)?;
        let d = b.binary(BinaryOp::Sub, hi, lo)?;
        let td = b.binary(BinaryOp::Mul, t, d)?;
        let gain = b.binary(BinaryOp::Add, lo, td)?;
        b.reduce_all(ReduceOp::Sum, gain)
    });
    // Speeds inside [0, 2.5) away from the knots at multiples of 0.5.
    let v: Vec<f64> = uniform(25, 8, 0.0, 5.0)
        .iter()
        .map(|u| (u.floor() + 0.1 + 0.8 * u.fract()) / 2.0)
        .collect();
    let table = uniform(26, 6, -3.0, 3.0);
    let inputs = [arr(&[8], &v), arr(&[6], &table)];
    let g = run(&grad(&kernel, &["v", "table"]).unwrap(), &inputs);
    let slope: Vec<f64> = v
        .iter()
        .map(|&v| {
            let i = (2.0 * v).floor() as usize;
            2.0 * (table[i + 1] - table[i])
        })
        .collect();
    assert_close("schedule grad v", &g[0], &slope, 1e-12, 1e-14);
    assert_close(
        "schedule fd v",
        &g[0],
        &fd_grad(&kernel, &inputs, 0, 0, None),
        1e-6,
        1e-8,
    );
    assert_close(
        "schedule fd table",
        &g[1],
        &fd_grad(&kernel, &inputs, 1, 0, None),
        1e-6,
        1e-8,
    );
}
