//! `set_row` through the transforms: the Jacobians of `y = set_row(x, sin(r), i)` by forward and
//! reverse mode against the closed form (`∂y/∂x` the identity off row `i`, `∂y/∂r` `cos(r)` on
//! row `i`), a gradient against central finite differences, and `vmap` (batched and unbatched
//! operands, a batched index) against each example run alone.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a test failure")]

use crate::common;

use common::{arr, assert_close, fd_grad, run, run_named};
use rfx_autodiff::{grad, jacfwd, jacrev, vmap};
use rfx_ir::hir::{Builder, Kernel};
use rfx_ir::{Array, DType, ReduceOp, Scalar, TensorType, UnaryOp};

const ROWS: usize = 3;
const WIDTH: usize = 2;

/// `y = set_row(x, sin(r), i)` for `x: f64[3, 2]`, `r: f64[2]`, `i: i32`.
fn kernel() -> Kernel {
    let mut b = Builder::new("k");
    let x = b.input("x", TensorType::new(DType::F64, [ROWS, WIDTH])).unwrap();
    let r = b.input("r", TensorType::new(DType::F64, [WIDTH])).unwrap();
    let i = b.input("i", TensorType::scalar(DType::I32)).unwrap();
    let s = b.unary(UnaryOp::Sin, r).unwrap();
    let y = b.set_row(x, s, i).unwrap();
    b.output("y", y).unwrap();
    b.finish().unwrap()
}

fn inputs(i: i32) -> Vec<Array> {
    vec![
        arr(&[ROWS, WIDTH], &[0.1, -0.2, 0.3, 0.4, -0.5, 0.6]),
        arr(&[WIDTH], &[0.7, -1.1]),
        Array::scalar(Scalar::I32(i)),
    ]
}

/// The closed-form Jacobians `(∂y/∂x, ∂y/∂r)`, output-major.
fn closed_form(i: i32) -> (Vec<f64>, Vec<f64>) {
    let target = i.clamp(0, ROWS as i32 - 1) as usize;
    let r = [0.7f64, -1.1];
    let n = ROWS * WIDTH;
    let mut dx = vec![0.0; n * n];
    let mut dr = vec![0.0; n * WIDTH];
    for out in 0..n {
        let (row, col) = (out / WIDTH, out % WIDTH);
        if row == target {
            dr[out * WIDTH + col] = r[col].cos();
        } else {
            dx[out * n + out] = 1.0;
        }
    }
    (dx, dr)
}

#[test]
fn jacobians_of_set_row_match_the_closed_form_in_both_modes() {
    let k = kernel();
    let fwd = jacfwd(&k, &["x", "r"]).unwrap();
    let rev = jacrev(&k, &["x", "r"]).unwrap();
    for i in [-2, 0, 1, 2, 9] {
        let (dx, dr) = closed_form(i);
        for (mode, jac) in [("jacfwd", &fwd), ("jacrev", &rev)] {
            let got_dx = run_named(jac, &inputs(i), "jac_y_x");
            let got_dr = run_named(jac, &inputs(i), "jac_y_r");
            assert_close(&format!("{mode} dy/dx, i = {i}"), &got_dx, &dx, 1e-15, 0.0);
            assert_close(&format!("{mode} dy/dr, i = {i}"), &got_dr, &dr, 1e-15, 0.0);
        }
    }
}

#[test]
fn gradient_through_set_row_matches_finite_differences() {
    // out = sum(exp(set_row(x, sin(r), i)))
    let mut b = Builder::new("k");
    let x = b.input("x", TensorType::new(DType::F64, [ROWS, WIDTH])).unwrap();
    let r = b.input("r", TensorType::new(DType::F64, [WIDTH])).unwrap();
    let i = b.input("i", TensorType::scalar(DType::I32)).unwrap();
    let s = b.unary(UnaryOp::Sin, r).unwrap();
    let y = b.set_row(x, s, i).unwrap();
    let e = b.unary(UnaryOp::Exp, y).unwrap();
    let out = b.reduce(ReduceOp::Sum, e, &[0, 1], false).unwrap();
    b.output("out", out).unwrap();
    let k = b.finish().unwrap();
    let g = grad(&k, &["x", "r"]).unwrap();
    for i in [0, 2] {
        let got = run(&g, &inputs(i));
        assert_close("d/dx", &got[0], &fd_grad(&k, &inputs(i), 0, 0, None), 1e-8, 1e-10);
        assert_close("d/dr", &got[1], &fd_grad(&k, &inputs(i), 1, 0, None), 1e-8, 1e-10);
    }
}

#[test]
fn vmap_of_set_row_matches_each_example() {
    let k = kernel();
    let batch = 4;
    let xs: Vec<f64> = (0..batch * ROWS * WIDTH).map(|v| v as f64 * 0.25 - 1.0).collect();
    let rs: Vec<f64> = (0..batch * WIDTH).map(|v| 0.3 * v as f64).collect();
    let is = [2i32, -1, 1, 7];
    for (x_axis, r_axis, i_axis) in [
        (Some(0), None, None),
        (None, Some(0), None),
        (Some(0), Some(0), Some(0)),
        (None, None, Some(0)),
    ] {
        let batched = vmap(&k, &[x_axis, r_axis, i_axis], batch).unwrap();
        let x = match x_axis {
            Some(_) => arr(&[batch, ROWS, WIDTH], &xs),
            None => arr(&[ROWS, WIDTH], &xs[..ROWS * WIDTH]),
        };
        let r = match r_axis {
            Some(_) => arr(&[batch, WIDTH], &rs),
            None => arr(&[WIDTH], &rs[..WIDTH]),
        };
        let i = match i_axis {
            Some(_) => Array::from_vec([batch], is.to_vec()).unwrap(),
            None => Array::scalar(Scalar::I32(is[0])),
        };
        let got = run(&batched, &[x, r, i]).swap_remove(0);
        for e in 0..batch {
            let xe = if x_axis.is_some() { e } else { 0 };
            let re = if r_axis.is_some() { e } else { 0 };
            let ie = if i_axis.is_some() { is[e] } else { is[0] };
            let one = vec![
                arr(&[ROWS, WIDTH], &xs[xe * ROWS * WIDTH..(xe + 1) * ROWS * WIDTH]),
                arr(&[WIDTH], &rs[re * WIDTH..(re + 1) * WIDTH]),
                Array::scalar(Scalar::I32(ie)),
            ];
            let want = run(&k, &one).swap_remove(0);
            let n = ROWS * WIDTH;
            assert_eq!(
                &got[e * n..(e + 1) * n],
                &want[..],
                "example {e}, axes {x_axis:?} {r_axis:?} {i_axis:?}"
            );
        }
    }
}
