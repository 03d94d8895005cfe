//! Derivatives and `vmap` through bounded loops (`fori_loop`, `while_loop`, nested, with an
//! `i32` counter carry), against the HIR interpreter in f64: the same kernel unrolled by hand
//! (the body repeated with `Builder::inline`), central finite differences of the primal, and
//! closed forms.

use crate::common;

use common::{arr, assert_close, fd_grad, run, run_named};
use rfx_autodiff::{AdError, grad, hessian, hvp, jacfwd, jacrev, jvp, keep_outputs, value_and_grad, vmap};
use rfx_ir::hir::{Builder, Kernel, Loop, ValueId};
use rfx_ir::{Array, BinaryOp, CmpOp, DType, ReduceOp, Scalar, TensorType, UnaryOp};

fn f64_ty(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F64, shape.to_vec())
}

fn scalar(b: &mut Builder, v: f64) -> ValueId {
    b.scalar(Scalar::F64(v))
}

/// One Euler step of a damped pendulum driven by `sin(t)`: state `x = [θ, ω]`, step counter
/// `i` (i32), gain `k`: `θ' = θ + dt ω`, `ω' = ω + dt (-sin θ - k ω + 0.5 sin(i dt))`.
fn pendulum_step() -> Kernel {
    let mut b = Builder::new("pendulum_step");
    let x = b.input("x", f64_ty(&[2])).expect("builds");
    let i = b.input("i", TensorType::new(DType::I32, [])).expect("builds");
    let k = b.input("k", f64_ty(&[])).expect("builds");
    let dt = scalar(&mut b, 0.05);
    let theta = b.slice(x, &[0], [1]).expect("builds");
    let omega = b.slice(x, &[1], [1]).expect("builds");
    let time = b.cast(i, DType::F64).expect("builds");
    let time = b.binary(BinaryOp::Mul, time, dt).expect("builds");
    let drive = b.unary(UnaryOp::Sin, time).expect("builds");
    let half = scalar(&mut b, 0.5);
    let drive = b.binary(BinaryOp::Mul, drive, half).expect("builds");
    let gravity = b.unary(UnaryOp::Sin, theta).expect("builds");
    let damping = b.binary(BinaryOp::Mul, k, omega).expect("builds");
    let accel = b.binary(BinaryOp::Add, gravity, damping).expect("builds");
    let accel = b.binary(BinaryOp::Sub, drive, accel).expect("builds");
    let d_omega = b.binary(BinaryOp::Mul, accel, dt).expect("builds");
    let omega_next = b.binary(BinaryOp::Add, omega, d_omega).expect("builds");
    let d_theta = b.binary(BinaryOp::Mul, omega, dt).expect("builds");
    let theta_next = b.binary(BinaryOp::Add, theta, d_theta).expect("builds");
    let theta_next = b.pad(theta_next, &[0], [2]).expect("builds");
    let omega_next = b.pad(omega_next, &[1], [2]).expect("builds");
    let x_next = b.binary(BinaryOp::Add, theta_next, omega_next).expect("builds");
    let one = b.scalar(Scalar::I32(1));
    let i_next = b.binary(BinaryOp::Add, i, one).expect("builds");
    b.output("x", x_next).expect("builds");
    b.output("i", i_next).expect("builds");
    b.finish().expect("builds")
}

/// `cost(x0, k) = θ² + 0.5 ω²` after `steps` pendulum steps from `x0`, as one loop
/// (`unrolled == false`) or as the step repeated by hand.
fn pendulum(steps: u64, unrolled: bool) -> Kernel {
    let step = pendulum_step();
    let mut b = Builder::new("pendulum");
    let x0 = b.input("x0", f64_ty(&[2])).expect("builds");
    let k = b.input("k", f64_ty(&[])).expect("builds");
    let i0 = b.scalar(Scalar::I32(0));
    let x = if unrolled {
        let (mut x, mut i) = (x0, i0);
        for _ in 0..steps {
            let next = b.inline(&step, &[x, i, k]).expect("builds");
            (x, i) = (next[0], next[1]);
        }
        x
    } else {
        let spec = Loop {
            carries: 2,
            trips: steps,
            body: step,
            cond: None,
        };
        b.loop_(spec, &[x0, i0, k]).expect("builds")[0]
    };
    let weights = b.literal(&arr(&[2], &[1.0, 0.5]));
    let sq = b.binary(BinaryOp::Mul, x, x).expect("builds");
    let weighted = b.binary(BinaryOp::Mul, sq, weights).expect("builds");
    let cost = b.reduce_all(ReduceOp::Sum, weighted).expect("builds");
    b.output("cost", cost).expect("builds");
    b.finish().expect("builds")
}

fn pendulum_inputs() -> Vec<Array> {
    vec![arr(&[2], &[0.7, -0.3]), arr(&[], &[0.4])]
}

#[test]
fn grad_of_a_100_step_pendulum_rollout_matches_the_unrolled_kernel_and_finite_differences() {
    let looped = pendulum(100, false);
    let unrolled = pendulum(100, true);
    let inputs = pendulum_inputs();
    let got = run(&value_and_grad(&looped, &["x0", "k"]).expect("builds"), &inputs);
    let want = run(&value_and_grad(&unrolled, &["x0", "k"]).expect("builds"), &inputs);
    assert_close("value", &got[0], &want[0], 1e-14, 0.0);
    assert_close("grad_x0 vs unrolled", &got[1], &want[1], 1e-12, 1e-14);
    assert_close("grad_k vs unrolled", &got[2], &want[2], 1e-12, 1e-14);
    assert_close(
        "grad_x0 vs fd",
        &got[1],
        &fd_grad(&looped, &inputs, 0, 0, None),
        1e-6,
        1e-8,
    );
    assert_close(
        "grad_k vs fd",
        &got[2],
        &fd_grad(&looped, &inputs, 1, 0, None),
        1e-6,
        1e-8,
    );
    // The derivative is not trivial: the rollout moves the state far from its start.
    assert!(got[1].iter().all(|g| g.abs() > 1e-3), "{:?}", got[1]);
}

#[test]
fn jvp_and_jacfwd_of_the_pendulum_rollout_match_the_unrolled_kernel() {
    let looped = pendulum(100, false);
    let unrolled = pendulum(100, true);
    let mut inputs = pendulum_inputs();
    inputs.push(arr(&[2], &[0.3, -1.1]));
    inputs.push(arr(&[], &[0.8]));
    let got = run(&jvp(&looped, &["x0", "k"]).expect("builds"), &inputs);
    let want = run(&jvp(&unrolled, &["x0", "k"]).expect("builds"), &inputs);
    assert_close("tangent vs unrolled", &got[1], &want[1], 1e-12, 1e-14);
    // Against the gradient: the tangent is the gradient dotted with the direction.
    let g = run(&grad(&looped, &["x0", "k"]).expect("builds"), &inputs[..2]);
    let dot = g[0][0] * 0.3 - g[0][1] * 1.1 + g[1][0] * 0.8;
    assert_close("tangent vs grad", &got[1], &[dot], 1e-12, 1e-14);
    // A diagonal (identity-seeded) batched sweep through the loop.
    let fwd = run_named(
        &jacfwd(&looped, &["x0"]).expect("builds"),
        &inputs[..2],
        "jac_cost_x0",
    );
    let rev = run_named(
        &jacrev(&looped, &["x0"]).expect("builds"),
        &inputs[..2],
        "jac_cost_x0",
    );
    assert_close("jacfwd vs jacrev", &fwd, &rev, 1e-12, 1e-14);
}

/// `sqrt(a)` by Newton's iteration `y' = (y + a / y) / 2` from `y = a`, while
/// `|y² - a| > 1e-12 a`, at most 100 iterations.
fn newton_sqrt() -> Kernel {
    let mut body = Builder::new("newton_step");
    let y = body.input("y", f64_ty(&[])).expect("builds");
    let a = body.input("a", f64_ty(&[])).expect("builds");
    let q = body.binary(BinaryOp::Div, a, y).expect("builds");
    let s = body.binary(BinaryOp::Add, y, q).expect("builds");
    let half = scalar(&mut body, 0.5);
    let next = body.binary(BinaryOp::Mul, s, half).expect("builds");
    body.output("y", next).expect("builds");
    let mut cond = Builder::new("newton_test");
    let y = cond.input("y", f64_ty(&[])).expect("builds");
    let a = cond.input("a", f64_ty(&[])).expect("builds");
    let sq = cond.binary(BinaryOp::Mul, y, y).expect("builds");
    let err = cond.binary(BinaryOp::Sub, sq, a).expect("builds");
    let err = cond.unary(UnaryOp::Abs, err).expect("builds");
    let tol = scalar(&mut cond, 1e-12);
    let tol = cond.binary(BinaryOp::Mul, tol, a).expect("builds");
    let going = cond.compare(CmpOp::Gt, err, tol).expect("builds");
    cond.output("going", going).expect("builds");
    let spec = Loop {
        carries: 1,
        trips: 100,
        body: body.finish().expect("builds"),
        cond: Some(cond.finish().expect("builds")),
    };
    let mut b = Builder::new("sqrt");
    let a = b.input("a", f64_ty(&[])).expect("builds");
    let root = b.loop_(spec, &[a, a]).expect("builds")[0];
    b.output("root", root).expect("builds");
    b.finish().expect("builds")
}

#[test]
fn grad_and_jvp_through_a_while_loop_give_the_derivative_of_sqrt() {
    let kernel = newton_sqrt();
    let g = grad(&kernel, &["a"]).expect("builds");
    let t = jvp(&kernel, &["a"]).expect("builds");
    for a in [0.25, 2.0, 9.0, 1234.5] {
        let root = run(&kernel, &[arr(&[], &[a])])[0][0];
        assert_close("root", &[root], &[a.sqrt()], 1e-12, 0.0);
        let want = 0.5 / a.sqrt();
        let got = run(&g, &[arr(&[], &[a])]);
        assert_close("grad sqrt", &got[0], &[want], 1e-9, 0.0);
        let got = run(&t, &[arr(&[], &[a]), arr(&[], &[2.0])]);
        assert_close("jvp sqrt", &got[1], &[2.0 * want], 1e-9, 0.0);
    }
}

/// An outer loop of 3 steps whose body runs an inner loop of 4 steps: inner `x' = sin(x) w +
/// 0.5 x`, outer `x'' = 0.3 x'² + w` after the inner loop.
fn nested(unrolled: bool) -> Kernel {
    let mut inner = Builder::new("inner");
    let x = inner.input("x", f64_ty(&[3])).expect("builds");
    let w = inner.input("w", f64_ty(&[3])).expect("builds");
    let s = inner.unary(UnaryOp::Sin, x).expect("builds");
    let s = inner.binary(BinaryOp::Mul, s, w).expect("builds");
    let half = scalar(&mut inner, 0.5);
    let h = inner.binary(BinaryOp::Mul, x, half).expect("builds");
    let next = inner.binary(BinaryOp::Add, s, h).expect("builds");
    inner.output("x", next).expect("builds");
    let inner = inner.finish().expect("builds");
    let mut outer = Builder::new("outer");
    let x = outer.input("x", f64_ty(&[3])).expect("builds");
    let w = outer.input("w", f64_ty(&[3])).expect("builds");
    let spec = Loop {
        carries: 1,
        trips: 4,
        body: inner,
        cond: None,
    };
    let y = outer.loop_(spec, &[x, w]).expect("builds")[0];
    let sq = outer.binary(BinaryOp::Mul, y, y).expect("builds");
    let c = scalar(&mut outer, 0.3);
    let sq = outer.binary(BinaryOp::Mul, sq, c).expect("builds");
    let next = outer.binary(BinaryOp::Add, sq, w).expect("builds");
    outer.output("x", next).expect("builds");
    let outer = outer.finish().expect("builds");
    let mut b = Builder::new("nested");
    let x0 = b.input("x0", f64_ty(&[3])).expect("builds");
    let w = b.input("w", f64_ty(&[3])).expect("builds");
    let x = if unrolled {
        let mut x = x0;
        for _ in 0..3 {
            x = b.inline(&outer, &[x, w]).expect("builds")[0];
        }
        x
    } else {
        let spec = Loop {
            carries: 1,
            trips: 3,
            body: outer,
            cond: None,
        };
        b.loop_(spec, &[x0, w]).expect("builds")[0]
    };
    let cost = b.reduce_all(ReduceOp::Sum, x).expect("builds");
    b.output("cost", cost).expect("builds");
    b.finish().expect("builds")
}

#[test]
fn nested_loops_differentiate_both_ways() {
    let looped = nested(false);
    let unrolled = nested(true);
    let inputs = vec![arr(&[3], &[0.2, -0.4, 0.9]), arr(&[3], &[0.7, 0.3, -0.5])];
    let got = run(&grad(&looped, &["x0", "w"]).expect("builds"), &inputs);
    let want = run(&grad(&unrolled, &["x0", "w"]).expect("builds"), &inputs);
    assert_close("grad_x0", &got[0], &want[0], 1e-12, 1e-14);
    assert_close("grad_w", &got[1], &want[1], 1e-12, 1e-14);
    assert_close(
        "grad_x0 vs fd",
        &got[0],
        &fd_grad(&looped, &inputs, 0, 0, None),
        1e-6,
        1e-8,
    );
    assert_close(
        "grad_w vs fd",
        &got[1],
        &fd_grad(&looped, &inputs, 1, 0, None),
        1e-6,
        1e-8,
    );
    let mut with_tangents = inputs.clone();
    with_tangents.push(arr(&[3], &[1.0, -2.0, 0.5]));
    with_tangents.push(arr(&[3], &[0.1, 0.2, 0.3]));
    let got = run(&jvp(&looped, &["x0", "w"]).expect("builds"), &with_tangents);
    let want = run(&jvp(&unrolled, &["x0", "w"]).expect("builds"), &with_tangents);
    assert_close("jvp", &got[1], &want[1], 1e-12, 1e-14);
}

/// A loop whose carry 0 is an `i32` counter and carry 1 a float vector that reads it:
/// `x' = x cos(0.1 i + x)`, 6 steps; the cost is `Σ x` of the final carry 1.
fn counted(unrolled: bool) -> Kernel {
    let mut body = Builder::new("counted_step");
    let i = body.input("i", TensorType::new(DType::I32, [])).expect("builds");
    let x = body.input("x", f64_ty(&[3])).expect("builds");
    let fi = body.cast(i, DType::F64).expect("builds");
    let tenth = scalar(&mut body, 0.1);
    let phase = body.binary(BinaryOp::Mul, fi, tenth).expect("builds");
    let phase = body.binary(BinaryOp::Add, phase, x).expect("builds");
    let c = body.unary(UnaryOp::Cos, phase).expect("builds");
    let next = body.binary(BinaryOp::Mul, x, c).expect("builds");
    let one = body.scalar(Scalar::I32(1));
    let i_next = body.binary(BinaryOp::Add, i, one).expect("builds");
    body.output("i", i_next).expect("builds");
    body.output("x", next).expect("builds");
    let body = body.finish().expect("builds");
    let mut b = Builder::new("counted");
    let x0 = b.input("x0", f64_ty(&[3])).expect("builds");
    let i0 = b.scalar(Scalar::I32(0));
    let x = if unrolled {
        let (mut i, mut x) = (i0, x0);
        for _ in 0..6 {
            let next = b.inline(&body, &[i, x]).expect("builds");
            (i, x) = (next[0], next[1]);
        }
        x
    } else {
        let spec = Loop {
            carries: 2,
            trips: 6,
            body,
            cond: None,
        };
        b.loop_(spec, &[i0, x0]).expect("builds")[1]
    };
    let cost = b.reduce_all(ReduceOp::Sum, x).expect("builds");
    b.output("cost", cost).expect("builds");
    b.finish().expect("builds")
}

#[test]
fn a_loop_with_an_i32_counter_carry_differentiates_through_its_float_carry() {
    let looped = counted(false);
    let unrolled = counted(true);
    let inputs = vec![arr(&[3], &[0.3, 1.2, -0.8])];
    let got = run(&grad(&looped, &["x0"]).expect("builds"), &inputs);
    let want = run(&grad(&unrolled, &["x0"]).expect("builds"), &inputs);
    assert_close("grad", &got[0], &want[0], 1e-12, 1e-14);
    assert_close(
        "grad vs fd",
        &got[0],
        &fd_grad(&looped, &inputs, 0, 0, None),
        1e-6,
        1e-8,
    );
    let tangents = vec![inputs[0].clone(), arr(&[3], &[1.0, 0.5, -1.0])];
    let got = run(&jvp(&looped, &["x0"]).expect("builds"), &tangents);
    let want = run(&jvp(&unrolled, &["x0"]).expect("builds"), &tangents);
    assert_close("jvp", &got[1], &want[1], 1e-12, 1e-14);
}

#[test]
fn hessian_and_grad_of_grad_of_a_small_loop_match_the_unrolled_kernel() {
    let looped = pendulum(5, false);
    let unrolled = pendulum(5, true);
    let inputs = pendulum_inputs();
    let got = run_named(
        &hessian(&looped, &["x0"]).expect("builds"),
        &inputs,
        "hess_cost_x0_x0",
    );
    let want = run_named(
        &hessian(&unrolled, &["x0"]).expect("builds"),
        &inputs,
        "hess_cost_x0_x0",
    );
    assert_close("hessian", &got, &want, 1e-11, 1e-13);
    // Against finite differences of the gradient.
    let gradient =
        keep_outputs(&value_and_grad(&looped, &["x0"]).expect("builds"), &["grad_x0"]).expect("builds");
    let fd: Vec<f64> = (0..2)
        .map(|row| {
            let mut w = [0.0; 2];
            w[row] = 1.0;
            fd_grad(&gradient, &inputs, 0, 0, Some(&w))
        })
        .collect::<Vec<_>>()
        .concat();
    assert_close("hessian vs fd", &got, &fd, 1e-6, 1e-8);

    // Reverse over reverse: the gradient of `grad_x0 · v` is `H v`.
    let v = [0.6, -1.3];
    let mut b = Builder::new("directional");
    let x0 = b.input("x0", f64_ty(&[2])).expect("builds");
    let k = b.input("k", f64_ty(&[])).expect("builds");
    let g = b.inline(&gradient, &[x0, k]).expect("builds")[0];
    let v_lit = b.literal(&arr(&[2], &v));
    let gv = b.binary(BinaryOp::Mul, g, v_lit).expect("builds");
    let gv = b.reduce_all(ReduceOp::Sum, gv).expect("builds");
    b.output("gv", gv).expect("builds");
    let second = run(
        &grad(&b.finish().expect("builds"), &["x0"]).expect("builds"),
        &inputs,
    );
    let hv = [got[0] * v[0] + got[1] * v[1], got[2] * v[0] + got[3] * v[1]];
    assert_close("grad of grad", &second[0], &hv, 1e-11, 1e-13);
    // Forward over reverse: `hvp` is `jvp` of `grad`, through the recording and reverse loops.
    let mut with_v = inputs.clone();
    with_v.push(arr(&[2], &v));
    let product = run(&hvp(&looped, &["x0"]).expect("builds"), &with_v);
    assert_close("hvp", &product[0], &hv, 1e-11, 1e-13);
}

/// The final state of `steps` pendulum steps (no cost), to compare whole batches.
fn pendulum_state(steps: u64) -> Kernel {
    let mut b = Builder::new("rollout");
    let x0 = b.input("x0", f64_ty(&[2])).expect("builds");
    let k = b.input("k", f64_ty(&[])).expect("builds");
    let i0 = b.scalar(Scalar::I32(0));
    let spec = Loop {
        carries: 2,
        trips: steps,
        body: pendulum_step(),
        cond: None,
    };
    let finals = b.loop_(spec, &[x0, i0, k]).expect("builds");
    b.output("x", finals[0]).expect("builds");
    b.output("i", finals[1]).expect("builds");
    b.finish().expect("builds")
}

#[test]
fn vmap_of_a_fori_loop_over_1024_initial_states_matches_each_run() {
    let kernel = pendulum_state(20);
    let batched = vmap(&kernel, &[Some(0), None], 1024).expect("builds");
    let states = common::uniform(7, 2048, -1.5, 1.5);
    let k = arr(&[], &[0.4]);
    let out = run(&batched, &[arr(&[1024, 2], &states), k.clone()]);
    assert_eq!(out[0].len(), 2048);
    for example in 0..1024 {
        let x0 = arr(&[2], &states[2 * example..2 * example + 2]);
        let one = run(&kernel, &[x0, k.clone()]);
        assert_eq!(
            &out[0][2 * example..2 * example + 2],
            &one[0][..],
            "example {example}"
        );
        // The counter no batched input reaches still comes back per example.
        assert_eq!(out[1][example], 20.0);
    }
}

#[test]
fn vmap_of_a_while_loop_runs_each_example_for_its_own_trip_count() {
    let kernel = newton_sqrt();
    let a = [0.25, 2.0, 1.0, 1e6, 3.0, 1e-3];
    let batched = vmap(&kernel, &[Some(0)], a.len()).expect("builds");
    let out = run(&batched, &[arr(&[a.len()], &a)]);
    for (example, &a) in a.iter().enumerate() {
        let one = run(&kernel, &[arr(&[], &[a])]);
        assert_eq!(out[0][example].to_bits(), one[0][0].to_bits(), "a = {a}");
    }
    // The trip counts differ: `a = 1` stops at once, `a = 1e6` takes many steps.
    let steps = |a: f64| {
        let mut y: f64 = a;
        let mut n = 0;
        while (y * y - a).abs() > 1e-12 * a && n < 100 {
            y = 0.5 * (y + a / y);
            n += 1;
        }
        n
    };
    assert_eq!(steps(1.0), 0);
    assert!(steps(1e6) > 10);
}

#[test]
fn vmap_of_grad_of_loops_gives_per_example_gradients() {
    let kernel = grad(&pendulum(30, false), &["x0", "k"]).expect("builds");
    let batched = vmap(&kernel, &[Some(0), None], 4).expect("builds");
    let states = [0.7, -0.3, 0.1, 0.2, -1.0, 0.5, 2.0, 0.0];
    let k = arr(&[], &[0.4]);
    let out = run(&batched, &[arr(&[4, 2], &states), k.clone()]);
    for example in 0..4 {
        let one = run(
            &kernel,
            &[arr(&[2], &states[2 * example..2 * example + 2]), k.clone()],
        );
        assert_close(
            "grad_x0",
            &out[0][2 * example..2 * example + 2],
            &one[0],
            1e-14,
            0.0,
        );
        assert_close("grad_k", &out[1][example..=example], &one[1], 1e-14, 0.0);
    }
    // Through a while loop whose trip count differs per example.
    let kernel = grad(&newton_sqrt(), &["a"]).expect("builds");
    let a = [0.25, 1.0, 1e6, 7.0];
    let out = run(&vmap(&kernel, &[Some(0)], 4).expect("builds"), &[arr(&[4], &a)]);
    for (example, &a) in a.iter().enumerate() {
        let one = run(&kernel, &[arr(&[], &[a])]);
        assert_close("grad sqrt", &out[0][example..=example], &one[0], 1e-14, 0.0);
        // At `a = 1` the test stops the loop before any iteration: the root is the initial
        // carry `a` itself, whose derivative is 1 (the test's decision is not differentiated).
        let want = if a == 1.0 { 1.0 } else { 0.5 / a.sqrt() };
        assert_close("grad sqrt closed form", &one[0], &[want], 1e-9, 0.0);
    }
}

#[test]
fn stored_carries_too_large_for_memory_are_a_loop_error() {
    let mut body = Builder::new("big_step");
    let x = body.input("x", f64_ty(&[1 << 31])).expect("builds");
    let s = body.unary(UnaryOp::Sin, x).expect("builds");
    body.output("x", s).expect("builds");
    let body = body.finish().expect("builds");
    {
        let trips = 1_000_000_000;
        let mut b = Builder::new("big");
        let x0 = b.input("x0", f64_ty(&[1 << 31])).expect("builds");
        let spec = Loop {
            carries: 1,
            trips,
            body: body.clone(),
            cond: None,
        };
        let x = b.loop_(spec, &[x0]).expect("builds")[0];
        let total = b.reduce_all(ReduceOp::Sum, x).expect("builds");
        b.output("total", total).expect("builds");
        let kernel = b.finish().expect("builds");
        match grad(&kernel, &["x0"]) {
            Err(AdError::Loop { reason, .. }) => {
                assert!(reason.contains("would not fit in memory"), "{reason}");
            }
            other => panic!("expected AdError::Loop, got {other:?}"),
        }
        // Forward mode stores nothing and accepts it.
        assert!(jvp(&kernel, &["x0"]).is_ok());
    }
}

/// The number of top-level loop nodes of `kernel`.
fn loops_in(kernel: &Kernel) -> usize {
    kernel
        .nodes()
        .iter()
        .filter(|n| matches!(n.op, rfx_ir::hir::Op::Loop(_)))
        .count()
}

#[test]
fn derivative_kernels_run_each_loop_once_and_do_not_grow_with_the_trip_count() {
    // Reverse mode: the recording loop (which also gives the primal carries) and the reverse
    // loop; forward mode: one loop carrying the primal and the tangents.
    let short = pendulum(10, false);
    let long = pendulum(1000, false);
    for (what, make) in [
        (
            "value_and_grad",
            (|k: &Kernel| value_and_grad(k, &["x0", "k"])) as fn(&Kernel) -> _,
        ),
        ("jvp", |k: &Kernel| jvp(k, &["x0", "k"])),
    ] {
        let (a, b) = (make(&short).expect("builds"), make(&long).expect("builds"));
        let want = if what == "jvp" { 1 } else { 2 };
        assert_eq!(loops_in(&a), want, "{what}:\n{a}");
        assert_eq!(a.nodes().len(), b.nodes().len(), "{what}");
    }
    // The primal output of `value_and_grad` comes from the recording loop, bit for bit.
    let kernel = value_and_grad(&long, &["x0"]).expect("builds");
    let inputs = pendulum_inputs();
    let got = run(&kernel, &inputs);
    assert_eq!(got[0][0].to_bits(), run(&long, &inputs)[0][0].to_bits());
}

#[test]
fn loop_derivatives_agree_under_the_f64_oracle() {
    use rfx_ir::interp::{Mode, run_hir};
    let kernel = value_and_grad(&pendulum(40, false), &["x0", "k"]).expect("builds");
    let unrolled = value_and_grad(&pendulum(40, true), &["x0", "k"]).expect("builds");
    let inputs = pendulum_inputs();
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let got = run_hir(&kernel, &views, Mode::Oracle).expect("runs");
    let want = run_hir(&unrolled, &views, Mode::Oracle).expect("runs");
    for (g, w) in got.iter().zip(&want) {
        assert_close("oracle", &g.to_f64_vec(), &w.to_f64_vec(), 1e-12, 1e-14);
    }
}

#[test]
fn vmap_over_a_batched_invariant_broadcasts_the_shared_initial_carry() {
    // One initial state, four gains: the carries become batched through the body.
    let kernel = pendulum_state(15);
    let gains = [0.0, 0.4, 1.0, 2.5];
    let x0 = arr(&[2], &[0.9, 0.1]);
    let batched = vmap(&kernel, &[None, Some(0)], 4).expect("builds");
    let out = run(&batched, &[x0.clone(), arr(&[4], &gains)]);
    for (example, &k) in gains.iter().enumerate() {
        let one = run(&kernel, &[x0.clone(), arr(&[], &[k])]);
        assert_eq!(&out[0][2 * example..2 * example + 2], &one[0][..], "k = {k}");
    }
    // And per-example gradients with respect to the shared state.
    let g = grad(&pendulum(15, false), &["x0", "k"]).expect("builds");
    let out = run(
        &vmap(&g, &[None, Some(0)], 4).expect("builds"),
        &[x0.clone(), arr(&[4], &gains)],
    );
    for (example, &k) in gains.iter().enumerate() {
        let one = run(&g, &[x0.clone(), arr(&[], &[k])]);
        assert_close(
            "grad_x0",
            &out[0][2 * example..2 * example + 2],
            &one[0],
            1e-14,
            0.0,
        );
        assert_close("grad_k", &out[1][example..=example], &one[1], 1e-14, 0.0);
    }
}

#[test]
fn a_loop_of_zero_trips_passes_its_derivatives_through() {
    let looped = pendulum(0, false);
    let unrolled = pendulum(0, true);
    let inputs = pendulum_inputs();
    let got = run(&grad(&looped, &["x0", "k"]).expect("builds"), &inputs);
    let want = run(&grad(&unrolled, &["x0", "k"]).expect("builds"), &inputs);
    assert_eq!(got, want);
    assert_close("grad_x0", &got[0], &[1.4, -0.3], 1e-15, 0.0);
    let mut with_tangents = inputs.clone();
    with_tangents.push(arr(&[2], &[1.0, 1.0]));
    with_tangents.push(arr(&[], &[1.0]));
    let got = run(&jvp(&looped, &["x0", "k"]).expect("builds"), &with_tangents);
    assert_close("jvp", &got[1], &[1.4 - 0.3], 1e-15, 0.0);
}

#[test]
fn loop_derivative_kernels_optimise_to_mir_programs_with_loops_that_agree() {
    use rfx_ir::interp::{Mode, run_hir, run_mir};
    use rfx_opt::{OptConfig, optimize};
    let inputs = pendulum_inputs();
    let mut with_tangents = inputs.clone();
    with_tangents.push(arr(&[2], &[1.0, 0.5]));
    with_tangents.push(arr(&[], &[0.3]));
    let cases = [
        (
            "value_and_grad",
            value_and_grad(&pendulum(30, false), &["x0", "k"]).expect("builds"),
            inputs.clone(),
            2,
        ),
        (
            "jvp",
            jvp(&pendulum(30, false), &["x0", "k"]).expect("builds"),
            with_tangents,
            1,
        ),
        (
            "grad of a while loop",
            grad(&newton_sqrt(), &["a"]).expect("builds"),
            vec![arr(&[], &[7.0])],
            2,
        ),
        (
            "vmap of a while loop",
            vmap(&newton_sqrt(), &[Some(0)], 3).expect("builds"),
            vec![arr(&[3], &[7.0, 1.0, 1e6])],
            1,
        ),
    ];
    for (what, kernel, inputs, loops) in cases {
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let (program, _) = optimize(&kernel, &OptConfig::default()).expect("optimises");
        assert_eq!(program.loops().len(), loops, "{what}:\n{program}");
        let hir = run_hir(&kernel, &views, Mode::Native).expect("runs");
        let mir = run_mir(&program, &views, Mode::Native).expect("runs");
        for (h, m) in hir.iter().zip(&mir) {
            assert_close(what, &m.to_f64_vec(), &h.to_f64_vec(), 1e-12, 1e-14);
        }
    }
}

#[test]
fn jacobians_of_a_loop_with_several_results_agree_both_ways_and_compose_with_vmap() {
    // Two float outputs read one loop: each reverse sweep reuses one recording loop.
    let mut b = Builder::new("two_outputs");
    let x0 = b.input("x0", f64_ty(&[2])).expect("builds");
    let k = b.input("k", f64_ty(&[])).expect("builds");
    let x = b.inline(&pendulum_state(25), &[x0, k]).expect("builds")[0];
    let sq = b.binary(BinaryOp::Mul, x, x).expect("builds");
    let e = b.reduce_all(ReduceOp::Sum, sq).expect("builds");
    b.output("x", x).expect("builds");
    b.output("e", e).expect("builds");
    let kernel = b.finish().expect("builds");
    let inputs = pendulum_inputs();
    let rev = jacrev(&kernel, &["x0", "k"]).expect("builds");
    let fwd = jacfwd(&kernel, &["x0", "k"]).expect("builds");
    assert_eq!(
        loops_in(&rev),
        3,
        "one recording loop and one reverse loop per output\n{rev}"
    );
    for name in ["jac_x_x0", "jac_x_k", "jac_e_x0", "jac_e_k"] {
        let r = run_named(&rev, &inputs, name);
        let f = run_named(&fwd, &inputs, name);
        assert_close(name, &r, &f, 1e-12, 1e-14);
    }
    // The gradient of a batch of while loops (each example stopping on its own) is each
    // example's derivative: `1 / (2 sqrt a)`, or 1 where the loop stops at once (`a = 1`).
    let a = [0.25, 1.0, 9.0, 1e6];
    let batched = vmap(&newton_sqrt(), &[Some(0)], 4).expect("builds");
    let mut b = Builder::new("total");
    let x = b.input("a", f64_ty(&[4])).expect("builds");
    let roots = b.inline(&batched, &[x]).expect("builds")[0];
    let total = b.reduce_all(ReduceOp::Sum, roots).expect("builds");
    b.output("total", total).expect("builds");
    let g = run(
        &grad(&b.finish().expect("builds"), &["a"]).expect("builds"),
        &[arr(&[4], &a)],
    );
    let want: Vec<f64> = a
        .iter()
        .map(|&a| if a == 1.0 { 1.0 } else { 0.5 / a.sqrt() })
        .collect();
    assert_close("grad of vmap", &g[0], &want, 1e-9, 0.0);
    // And the JVP of the batch, mapped the other way: vmap of jvp.
    let t = jvp(&newton_sqrt(), &["a"]).expect("builds");
    let mapped = vmap(&t, &[Some(0), Some(0)], 4).expect("builds");
    let out = run(&mapped, &[arr(&[4], &a), arr(&[4], &[1.0; 4])]);
    assert_close("vmap of jvp", &out[1], &want, 1e-9, 0.0);
}

/// `Σ_outputs Σ w · output` of `kernel`'s float outputs, with fixed pseudo-random weights.
fn weighted_cost(kernel: &Kernel) -> Kernel {
    let mut b = Builder::new("cost");
    let inputs: Vec<ValueId> = kernel
        .inputs()
        .map(|(_, name, ty)| b.input(name, ty.clone()).expect("builds"))
        .collect();
    let outputs = b.inline(kernel, &inputs).expect("builds");
    let mut total = None;
    for (i, &out) in outputs.iter().enumerate() {
        let ty = b.value_type(out).expect("typed").clone();
        if ty.dtype != DType::F64 {
            continue;
        }
        let w = common::uniform(100 + i as u64, ty.shape.numel(), -1.0, 1.0);
        let w = b.literal(&arr(ty.shape.dims(), &w));
        let weighted = b.binary(BinaryOp::Mul, out, w).expect("builds");
        let s = b.reduce_all(ReduceOp::Sum, weighted).expect("builds");
        total = Some(match total {
            Some(t) => b.binary(BinaryOp::Add, t, s).expect("builds"),
            None => s,
        });
    }
    let total = total.unwrap_or_else(|| scalar(&mut b, 0.0));
    b.output("cost", total).expect("builds");
    b.finish().expect("builds")
}

#[test]
fn random_loop_kernels_differentiate_like_finite_differences_and_batch_like_each_example() {
    use rfx_ir::testgen::{LoopGenConfig, TestRng, random_inputs, random_loop_kernel};
    // While tests on the counter only: a test on a float carry may stop one iteration apart
    // under a finite-difference step, which no derivative sees.
    let config = LoopGenConfig {
        float_tests: false,
        ..LoopGenConfig::default()
    };
    let mut checked = 0;
    for seed in 0..80 {
        let mut rng = TestRng::new(seed);
        let kernel = random_loop_kernel(&mut rng, &config, "random");
        if kernel.inputs().any(|(_, _, ty)| ty.dtype != DType::F64) {
            continue;
        }
        checked += 1;
        let cost = weighted_cost(&kernel);
        let inputs = random_inputs(&mut rng, &cost, 0.0);
        let names: Vec<String> = cost.inputs().map(|(_, name, _)| name.to_string()).collect();
        let gradient = run(&grad(&cost, &names).expect("grad builds"), &inputs);
        for (position, g) in gradient.iter().enumerate() {
            let fd = fd_grad(&cost, &inputs, position, 0, None);
            assert_close(
                &format!("seed {seed} input {position}\n{kernel}"),
                g,
                &fd,
                1e-5,
                1e-7,
            );
        }
        // The JVP along the inputs themselves is the gradient dotted with them.
        let mut with_tangents = inputs.clone();
        with_tangents.extend(inputs.iter().cloned());
        let tangent = run(&jvp(&cost, &names).expect("jvp builds"), &with_tangents)[1][0];
        let dot: f64 = gradient
            .iter()
            .zip(&inputs)
            .map(|(g, x)| g.iter().zip(x.to_f64_vec()).map(|(g, x)| g * x).sum::<f64>())
            .sum();
        assert_close(&format!("seed {seed} jvp"), &[tangent], &[dot], 1e-10, 1e-12);
        assert_vmap_is_each_example(&kernel, &inputs, seed);
    }
    assert!(checked >= 10, "only {checked} f64 kernels");
}

/// An array of `dtype` (a float) holding `values`.
fn arr_of(dtype: DType, shape: &[usize], values: &[f64]) -> Array {
    let scalars = values.iter().map(|&v| Scalar::from_f64(dtype, v));
    let data = rfx_ir::ArrayData::from_scalars(dtype, scalars).expect("one dtype");
    Array::new(shape.to_vec(), data).expect("length matches shape")
}

/// `vmap` of `kernel` over three examples of its first input (the others shared) gives each
/// example's bits.
fn assert_vmap_is_each_example(kernel: &Kernel, inputs: &[Array], seed: u64) {
    // Three examples of the first input, the others shared: each example's bits.
    let first = &inputs[0];
    let n = first.shape().numel();
    let values: Vec<f64> = (0..3)
        .flat_map(|e| {
            first
                .to_f64_vec()
                .into_iter()
                .map(move |v| v * (1.0 - 0.3 * e as f64))
        })
        .collect();
    let mut dims = vec![3];
    dims.extend_from_slice(first.shape().dims());
    let mut batched_inputs = inputs.to_vec();
    batched_inputs[0] = arr_of(first.dtype(), &dims, &values);
    let mut in_axes = vec![None; inputs.len()];
    in_axes[0] = Some(0);
    let mapped = vmap(kernel, &in_axes, 3).expect("vmap builds");
    let out = run(&mapped, &batched_inputs);
    for example in 0..3 {
        let mut one = inputs.to_vec();
        one[0] = arr_of(
            first.dtype(),
            first.shape().dims(),
            &values[example * n..(example + 1) * n],
        );
        let want = run(kernel, &one);
        for (o, w) in out.iter().zip(&want) {
            let m = w.len();
            assert_eq!(
                &o[example * m..(example + 1) * m],
                &w[..],
                "seed {seed} example {example}\n{kernel}"
            );
        }
    }
}

#[test]
fn random_loop_kernels_with_float_tests_batch_like_each_example() {
    use rfx_ir::testgen::{LoopGenConfig, TestRng, random_inputs, random_loop_kernel};
    // Every example stops on its own float test: the batched test masks the body.
    for seed in 0..60 {
        let mut rng = TestRng::new(1000 + seed);
        let kernel = random_loop_kernel(&mut rng, &LoopGenConfig::default(), "random");
        let inputs = random_inputs(&mut rng, &kernel, 0.0);
        assert_vmap_is_each_example(&kernel, &inputs, seed);
    }
}

#[test]
fn a_bool_carry_the_body_reads_is_stored_for_reverse_mode() {
    // Carries `(flag, x)`: `x' = flag ? 0.9 x : 1.1 x + 0.05`, `flag' = x > 0.5` (per element).
    let mut body = Builder::new("switching");
    let flag = body
        .input("flag", TensorType::new(DType::Bool, [2]))
        .expect("builds");
    let x = body.input("x", f64_ty(&[2])).expect("builds");
    let shrink = scalar(&mut body, 0.9);
    let grow = scalar(&mut body, 1.1);
    let bias = scalar(&mut body, 0.05);
    let down = body.binary(BinaryOp::Mul, x, shrink).expect("builds");
    let up = body.binary(BinaryOp::Mul, x, grow).expect("builds");
    let up = body.binary(BinaryOp::Add, up, bias).expect("builds");
    let next = body.select(flag, down, up).expect("builds");
    let half = scalar(&mut body, 0.5);
    let flag_next = body.compare(CmpOp::Gt, x, half).expect("builds");
    body.output("flag", flag_next).expect("builds");
    body.output("x", next).expect("builds");
    let body = body.finish().expect("builds");
    let build = |unrolled: bool| {
        let mut b = Builder::new("switched");
        let x0 = b.input("x0", f64_ty(&[2])).expect("builds");
        let f0 = b.constant(Scalar::Bool(false), [2]);
        let x = if unrolled {
            let (mut f, mut x) = (f0, x0);
            for _ in 0..12 {
                let next = b.inline(&body, &[f, x]).expect("builds");
                (f, x) = (next[0], next[1]);
            }
            x
        } else {
            let spec = Loop {
                carries: 2,
                trips: 12,
                body: body.clone(),
                cond: None,
            };
            b.loop_(spec, &[f0, x0]).expect("builds")[1]
        };
        let sq = b.binary(BinaryOp::Mul, x, x).expect("builds");
        let cost = b.reduce_all(ReduceOp::Sum, sq).expect("builds");
        b.output("cost", cost).expect("builds");
        b.finish().expect("builds")
    };
    let inputs = vec![arr(&[2], &[0.2, 0.9])];
    let got = run(&grad(&build(false), &["x0"]).expect("builds"), &inputs);
    let want = run(&grad(&build(true), &["x0"]).expect("builds"), &inputs);
    assert_eq!(got, want);
    assert_close(
        "vs fd",
        &got[0],
        &fd_grad(&build(false), &inputs, 0, 0, None),
        1e-6,
        1e-8,
    );
}

/// `vmap` of a while loop whose only carry is updated by one row at a fixed index, read by the
/// batched test alone: the body reads nothing batched, and every example gets its own run.
#[test]
fn vmap_of_a_while_loop_over_a_row_updated_carry_alone() {
    let mut body = Builder::new("body");
    let h = body.input("h", f64_ty(&[3])).expect("builds");
    let x = body.input("x", f64_ty(&[])).expect("builds");
    let one = body.scalar(Scalar::I32(1));
    let next = body.set_row(h, x, one).expect("builds");
    body.output("h", next).expect("builds");
    let mut cond = Builder::new("cond");
    let h = cond.input("h", f64_ty(&[3])).expect("builds");
    cond.input("x", f64_ty(&[])).expect("builds");
    let sum = cond.reduce(ReduceOp::Sum, h, &[0], false).expect("builds");
    let limit = scalar(&mut cond, 4.0);
    let keep = cond.compare(CmpOp::Lt, sum, limit).expect("builds");
    cond.output("keep", keep).expect("builds");
    let mut b = Builder::new("fixed_row");
    let h0 = b.input("h0", f64_ty(&[3])).expect("builds");
    let x = b.input("x", f64_ty(&[])).expect("builds");
    let finals = b
        .loop_(
            Loop {
                carries: 1,
                trips: 5,
                body: body.finish().expect("builds"),
                cond: Some(cond.finish().expect("builds")),
            },
            &[h0, x],
        )
        .expect("builds");
    b.output("h", finals[0]).expect("builds");
    let kernel = b.finish().expect("builds");
    let batched = vmap(&kernel, &[Some(0), None], 2).expect("builds");
    let h0 = [0.5, 0.0, 0.25, 3.0, 0.0, 3.0];
    let out = run(&batched, &[arr(&[2, 3], &h0), arr(&[], &[2.5])]);
    assert_eq!(out[0], vec![0.5, 2.5, 0.25, 3.0, 0.0, 3.0]);
    for example in 0..2 {
        let one = run(
            &kernel,
            &[arr(&[3], &h0[3 * example..3 * example + 3]), arr(&[], &[2.5])],
        );
        assert_eq!(
            out[0][3 * example..3 * example + 3],
            one[0][..],
            "example {example}"
        );
    }
}
