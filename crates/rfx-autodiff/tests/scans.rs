//! Running folds (`cumsum`, `cumprod`, `cummax`, `cummin`) and the linear recurrence (`linrec`,
//! in both operands) against hand-derived closed forms
//! and central finite differences, in reverse mode (`grad`), forward mode (`jvp`), both
//! directions and along every axis; the exact derivatives of a running product at zeros; the
//! derivative of a running maximum following the element each result is; and `vmap`.

use crate::common;

use common::{arr, assert_close, fd_grad, kernel_f64, run, run_named, uniform};
use rfx_autodiff::{grad, hessian, jacrev, jvp, vmap};
use rfx_ir::{BinaryOp, ReduceOp, ScanOp};

/// `Σ w · scan(x)` for `x` and `w` of `shape`.
fn weighted_scan(op: ScanOp, shape: &[usize], axis: usize, reverse: bool) -> rfx_ir::hir::Kernel {
    kernel_f64("scan", &[("x", shape), ("w", shape)], |b, xs| {
        let s = b.scan(op, xs[0], axis, reverse)?;
        let weighted = b.binary(BinaryOp::Mul, s, xs[1])?;
        b.reduce_all(ReduceOp::Sum, weighted)
    })
}

#[test]
fn every_scan_matches_finite_differences_both_ways_along_every_axis() {
    let shape = [2usize, 3, 4];
    let n: usize = shape.iter().product();
    for (case, &op) in ScanOp::FOLDS.iter().enumerate() {
        for axis in 0..shape.len() {
            for reverse in [false, true] {
                let kernel = weighted_scan(op, &shape, axis, reverse);
                // Distinct values in [0.5, 1.5): no ties for the maximum and minimum, and
                // products that stay well conditioned.
                let seed = (10 * case + 2 * axis + usize::from(reverse)) as u64;
                let x = uniform(seed, n, 0.5, 1.5);
                let w = uniform(100 + seed, n, -1.0, 1.0);
                let inputs = [arr(&shape, &x), arr(&shape, &w)];
                let what = format!("{op} axis {axis} reverse {reverse}");
                let g = run(&grad(&kernel, &["x"]).unwrap(), &inputs).swap_remove(0);
                let fd = fd_grad(&kernel, &inputs, 0, 0, None);
                assert_close(&format!("{what}: grad"), &g, &fd, 1e-6, 1e-8);
                // Forward mode: the tangent of the weighted sum is the gradient dotted with t.
                let t = uniform(200 + seed, n, -1.0, 1.0);
                let tangent = run_named(
                    &jvp(&kernel, &["x"]).unwrap(),
                    &[arr(&shape, &x), arr(&shape, &w), arr(&shape, &t)],
                    "tangent_out",
                );
                let want: f64 = g.iter().zip(&t).map(|(g, t)| g * t).sum();
                assert_close(&format!("{what}: jvp"), &tangent, &[want], 1e-12, 1e-14);
            }
        }
    }
}

#[test]
fn running_sum_gradient_is_the_running_sum_of_the_weights_from_the_other_end() {
    let x = uniform(1, 6, -2.0, 2.0);
    let w = uniform(2, 6, -1.0, 1.0);
    let inputs = [arr(&[6], &x), arr(&[6], &w)];
    for reverse in [false, true] {
        let g = run(
            &grad(&weighted_scan(ScanOp::Sum, &[6], 0, reverse), &["x"]).unwrap(),
            &inputs,
        )
        .swap_remove(0);
        // ∂/∂x_j Σ_i w_i Σ_{k ≤ i} x_k = Σ_{i ≥ j} w_i (and `i ≤ j` from the end).
        let want: Vec<f64> = (0..6)
            .map(|j| {
                (0..6)
                    .filter(|&i| if reverse { i <= j } else { i >= j })
                    .map(|i| w[i])
                    .sum()
            })
            .collect();
        assert_close(&format!("reverse {reverse}"), &g, &want, 1e-15, 1e-15);
    }
}

#[test]
fn running_product_derivatives_are_exact_at_zeros() {
    // Two zeros: a quotient of the products would divide zero by zero.
    let x = [2.0, 0.0, 3.0, 0.0, -1.5];
    let w = [0.5, -1.0, 2.0, 0.25, 1.0];
    let inputs = [arr(&[5], &x), arr(&[5], &w)];
    for reverse in [false, true] {
        let kernel = weighted_scan(ScanOp::Prod, &[5], 0, reverse);
        let g = run(&grad(&kernel, &["x"]).unwrap(), &inputs).swap_remove(0);
        // ∂/∂x_j Σ_i w_i Π_{k ≤ i} x_k = Σ_{i ≥ j} w_i Π_{k ≤ i, k ≠ j} x_k.
        let want: Vec<f64> = (0..5)
            .map(|j| {
                (0..5)
                    .filter(|&i| if reverse { i <= j } else { i >= j })
                    .map(|i| {
                        let others: f64 = (0..5)
                            .filter(|&k| k != j && if reverse { k >= i } else { k <= i })
                            .map(|k| x[k])
                            .product();
                        w[i] * others
                    })
                    .sum()
            })
            .collect();
        assert!(g.iter().all(|v| v.is_finite()), "{g:?}");
        assert_close(&format!("reverse {reverse}: grad"), &g, &want, 1e-15, 1e-15);
        // The polynomial's finite differences agree at the zeros too.
        let fd = fd_grad(&kernel, &inputs, 0, 0, None);
        assert_close(&format!("reverse {reverse}: fd"), &g, &fd, 1e-6, 1e-8);
        // Forward mode, one basis direction at a time: the same numbers.
        for j in 0..5 {
            let mut t = [0.0; 5];
            t[j] = 1.0;
            let tangent = run_named(
                &jvp(&kernel, &["x"]).unwrap(),
                &[arr(&[5], &x), arr(&[5], &w), arr(&[5], &t)],
                "tangent_out",
            );
            assert_close(
                &format!("reverse {reverse}: jvp {j}"),
                &tangent,
                &[want[j]],
                1e-15,
                1e-15,
            );
        }
    }
}

#[test]
fn running_maximum_derivative_follows_the_element_each_result_is() {
    // Running maximum: 1, 3, 3, 3, 5, 5 (the 3 at index 3 ties the one at 1: the later wins), so
    // the results are the elements at 0, 1, 1, 3, 4, 4.
    let x = [1.0, 3.0, 2.0, 3.0, 5.0, 4.0];
    let w = [1.0, 10.0, 100.0, 1000.0, 10000.0, 100_000.0];
    let inputs = [arr(&[6], &x), arr(&[6], &w)];
    let g = run(
        &grad(&weighted_scan(ScanOp::Max, &[6], 0, false), &["x"]).unwrap(),
        &inputs,
    )
    .swap_remove(0);
    assert_close("cummax", &g, &[1.0, 110.0, 0.0, 1000.0, 110_000.0, 0.0], 0.0, 0.0);
    // From the end, the running minimum: 1, 2, 2, 3, 4, 4, the elements at 0, 2, 2, 3, 5, 5.
    let g = run(
        &grad(&weighted_scan(ScanOp::Min, &[6], 0, true), &["x"]).unwrap(),
        &inputs,
    )
    .swap_remove(0);
    assert_close(
        "cummin reverse",
        &g,
        &[1.0, 0.0, 110.0, 1000.0, 0.0, 110_000.0],
        0.0,
        0.0,
    );
    // A NaN takes over the running maximum, and the derivatives of what follows.
    let x = [1.0, f64::NAN, 3.0];
    let inputs = [arr(&[3], &x), arr(&[3], &[1.0, 10.0, 100.0])];
    let g = run(
        &grad(&weighted_scan(ScanOp::Max, &[3], 0, false), &["x"]).unwrap(),
        &inputs,
    )
    .swap_remove(0);
    assert_close("cummax after NaN", &g, &[1.0, 110.0, 0.0], 0.0, 0.0);
}

#[test]
fn running_extreme_jacobians_have_one_one_per_result() {
    // Reverse mode with a batch of cotangents (`jacrev`): row `i` of the Jacobian of a running
    // maximum or minimum holds a one at the element result `i` is (ties to the later element in
    // the scan's order), along both axes of a [3, 5] operand with ties and a NaN, both ways.
    let x = [
        2.0,
        2.0,
        1.0,
        4.0,
        4.0,
        -1.0,
        3.0,
        3.0,
        0.5,
        3.0,
        0.0,
        f64::NAN,
        5.0,
        -2.0,
        5.0,
    ];
    let shape = [3usize, 5];
    for op in [ScanOp::Max, ScanOp::Min] {
        for axis in 0..2 {
            for reverse in [false, true] {
                let kernel = kernel_f64("e", &[("x", &shape)], |b, xs| b.scan(op, xs[0], axis, reverse));
                let jac = run_named(&jacrev(&kernel, &["x"]).unwrap(), &[arr(&shape, &x)], "jac_out_x");
                // The expected Jacobian from the definition: fold each line, tracking which
                // element the accumulator holds.
                let mut want = vec![0.0; 15 * 15];
                let (lines, n) = if axis == 1 { (3, 5) } else { (5, 3) };
                for line in 0..lines {
                    let at = |k: usize| if axis == 1 { line * 5 + k } else { k * 5 + line };
                    let mut held: Option<usize> = None;
                    for step in 0..n {
                        let k = if reverse { n - 1 - step } else { step };
                        let take = match held {
                            None => true,
                            Some(h) => {
                                let (acc, v) = (x[h], x[at(k)]);
                                let keeps = match op {
                                    ScanOp::Max => acc > v,
                                    _ => acc < v,
                                };
                                !(keeps || acc.is_nan())
                            }
                        };
                        if take {
                            held = Some(at(k));
                        }
                        want[at(k) * 15 + held.unwrap()] = 1.0;
                    }
                }
                assert_close(
                    &format!("{op} axis {axis} reverse {reverse}"),
                    &jac,
                    &want,
                    0.0,
                    0.0,
                );
            }
        }
    }
}

#[test]
fn second_derivatives_of_a_running_product() {
    // f = Σ cumprod(x): its Hessian is the second difference of the gradient, here against
    // the closed form ∂²f/∂x_a∂x_b = Σ_{i ≥ max(a,b)} Π_{k ≤ i, k ∉ {a, b}} x_k (a ≠ b).
    let kernel = kernel_f64("p", &[("x", &[4])], |b, xs| {
        let s = b.scan(ScanOp::Prod, xs[0], 0, false)?;
        b.reduce_all(ReduceOp::Sum, s)
    });
    let x = [0.5, -2.0, 1.5, 3.0];
    let h = run_named(
        &hessian(&kernel, &["x"]).unwrap(),
        &[arr(&[4], &x)],
        "hess_out_x_x",
    );
    let mut want = vec![0.0; 16];
    for a in 0..4 {
        for b in 0..4 {
            if a == b {
                continue;
            }
            want[4 * a + b] = (a.max(b)..4)
                .map(|i| {
                    (0..=i)
                        .filter(|&k| k != a && k != b)
                        .map(|k| x[k])
                        .product::<f64>()
                })
                .sum();
        }
    }
    assert_close("hessian", &h, &want, 1e-14, 1e-14);
}

#[test]
fn a_mapped_scan_scans_each_example() {
    // vmap over rows of a [3, 5] batch of a running sum along the example's only axis.
    let kernel = kernel_f64("s", &[("x", &[5])], |b, xs| b.scan(ScanOp::Sum, xs[0], 0, true));
    let mapped = vmap(&kernel, &[Some(0)], 3).unwrap();
    let x = uniform(7, 15, -1.0, 1.0);
    let got = run(&mapped, &[arr(&[3, 5], &x)]).swap_remove(0);
    let mut want = vec![0.0; 15];
    for r in 0..3 {
        let mut acc = -0.0;
        for c in (0..5).rev() {
            acc += x[5 * r + c];
            want[5 * r + c] = acc;
        }
    }
    assert_close("vmap", &got, &want, 0.0, 0.0);
}

/// `Σ w · linrec(x, a)` for `x`, `a` and `w` of `shape`.
fn weighted_linrec(shape: &[usize], axis: usize, reverse: bool) -> rfx_ir::hir::Kernel {
    kernel_f64("linrec", &[("x", shape), ("a", shape), ("w", shape)], |b, xs| {
        let y = b.linrec(xs[0], xs[1], axis, reverse)?;
        let weighted = b.binary(BinaryOp::Mul, y, xs[2])?;
        b.reduce_all(ReduceOp::Sum, weighted)
    })
}

#[test]
fn linear_recurrence_matches_finite_differences_in_both_operands() {
    let shape = [2usize, 3, 5];
    let n: usize = shape.iter().product();
    for axis in 0..shape.len() {
        for reverse in [false, true] {
            let kernel = weighted_linrec(&shape, axis, reverse);
            let seed = (2 * axis + usize::from(reverse)) as u64;
            let x = uniform(300 + seed, n, -2.0, 2.0);
            // Coefficients of both signs, some past one in magnitude.
            let a = uniform(400 + seed, n, -1.3, 1.3);
            let w = uniform(500 + seed, n, -1.0, 1.0);
            let inputs = [arr(&shape, &x), arr(&shape, &a), arr(&shape, &w)];
            let what = format!("linrec axis {axis} reverse {reverse}");
            let g = run(&grad(&kernel, &["x", "a"]).unwrap(), &inputs);
            for (input, name) in [(0, "x"), (1, "a")] {
                let fd = fd_grad(&kernel, &inputs, input, 0, None);
                assert_close(&format!("{what}: grad {name}"), &g[input], &fd, 1e-6, 1e-8);
            }
            // Forward mode with tangents on both operands.
            let (tx, ta) = (
                uniform(600 + seed, n, -1.0, 1.0),
                uniform(700 + seed, n, -1.0, 1.0),
            );
            let tangent = run_named(
                &jvp(&kernel, &["x", "a"]).unwrap(),
                &[
                    arr(&shape, &x),
                    arr(&shape, &a),
                    arr(&shape, &w),
                    arr(&shape, &tx),
                    arr(&shape, &ta),
                ],
                "tangent_out",
            );
            let want: f64 = g[0]
                .iter()
                .zip(&tx)
                .chain(g[1].iter().zip(&ta))
                .map(|(g, t)| g * t)
                .sum();
            assert_close(&format!("{what}: jvp"), &tangent, &[want], 1e-12, 1e-14);
        }
    }
}

#[test]
fn linear_recurrence_gradients_in_closed_form() {
    // y = linrec(x, a) with a constant a: y[i] = Σ_{j ≤ i} a^(i-j) x[j], so the gradient of
    // Σ y is Σ_{i ≥ j} a^(i-j) = (1 - a^(n-j)) / (1 - a), and of y[n-1] alone a^(n-1-j).
    let n = 8;
    let a = 0.5;
    let kernel = kernel_f64("lp", &[("x", &[n]), ("a", &[n])], |b, xs| {
        let y = b.linrec(xs[0], xs[1], 0, false)?;
        b.reduce_all(ReduceOp::Sum, y)
    });
    let x = uniform(11, n, -1.0, 1.0);
    let g = run(
        &grad(&kernel, &["x", "a"]).unwrap(),
        &[arr(&[n], &x), arr(&[n], &[a; 8])],
    );
    let want: Vec<f64> = (0..n)
        .map(|j| (1.0 - a.powi((n - j) as i32)) / (1.0 - a))
        .collect();
    assert_close("d Σy / dx", &g[0], &want, 1e-15, 0.0);
    // The coefficient's gradient is λ[i] y[i-1], and a[0] multiplies y[-1] = 0.
    let mut y = vec![0.0; n];
    let mut acc = 0.0;
    for i in 0..n {
        acc = a * acc + x[i];
        y[i] = acc;
    }
    let want_a: Vec<f64> = (0..n)
        .map(|i| if i == 0 { 0.0 } else { want[i] * y[i - 1] })
        .collect();
    assert_close("d Σy / da", &g[1], &want_a, 1e-14, 1e-15);
}

#[test]
fn second_derivatives_of_a_linear_recurrence() {
    // f = Σ linrec(x, a) is bilinear-ish in (x, a): its Hessian against central differences
    // of the gradient.
    let n = 5;
    let kernel = kernel_f64("lr", &[("z", &[2 * n])], |b, xs| {
        let x = b.slice(xs[0], &[0], [n])?;
        let a = b.slice(xs[0], &[n], [n])?;
        let y = b.linrec(x, a, 0, true)?;
        let sq = b.binary(BinaryOp::Mul, y, y)?;
        b.reduce_all(ReduceOp::Sum, sq)
    });
    let z = uniform(21, 2 * n, -0.9, 0.9);
    let h = run_named(
        &hessian(&kernel, &["z"]).unwrap(),
        &[arr(&[2 * n], &z)],
        "hess_out_z_z",
    );
    let g = grad(&kernel, &["z"]).unwrap();
    let mut want = vec![0.0; 4 * n * n];
    for j in 0..2 * n {
        let step = 1e-6;
        let mut plus = z.clone();
        plus[j] += step;
        let mut minus = z.clone();
        minus[j] -= step;
        let gp = run(&g, &[arr(&[2 * n], &plus)]).swap_remove(0);
        let gm = run(&g, &[arr(&[2 * n], &minus)]).swap_remove(0);
        for i in 0..2 * n {
            want[i * 2 * n + j] = (gp[i] - gm[i]) / (2.0 * step);
        }
    }
    assert_close("hessian", &h, &want, 1e-6, 1e-7);
}

#[test]
fn a_mapped_linear_recurrence_filters_each_example() {
    // vmap over rows of signals, with a coefficient shared by every example (unbatched).
    let kernel = kernel_f64("f", &[("x", &[6]), ("a", &[6])], |b, xs| {
        b.linrec(xs[0], xs[1], 0, false)
    });
    let mapped = vmap(&kernel, &[Some(0), None], 3).unwrap();
    let x = uniform(8, 18, -1.0, 1.0);
    let a = uniform(9, 6, 0.0, 1.0);
    let got = run(&mapped, &[arr(&[3, 6], &x), arr(&[6], &a)]).swap_remove(0);
    let mut want = vec![0.0; 18];
    for r in 0..3 {
        let mut acc = -0.0;
        for c in 0..6 {
            acc = a[c] * acc + x[6 * r + c];
            want[6 * r + c] = acc;
        }
    }
    assert_close("vmap", &got, &want, 0.0, 0.0);
}
