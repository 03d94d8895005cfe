//! `rfx::lax::fori_loop` and `while_loop`: the traced HIR (run by the HIR interpreter, the
//! reference semantics) against plain Rust loops and closed forms, captured tensors as
//! invariants, the typed errors; then the compiled path (CPU, `c` and `interp` backends),
//! derivatives against central finite differences and an unrolled trace, `vmap`, and the size
//! of the compiled code against the trip count.

use rfx::lax::{fori_loop, while_loop};
use rfx::{Array, DType, JitError, Kernel, Tensor, TensorType, Trace, TraceError};
use rfx_ir::hir::Op;
use rfx_ir::interp::{Mode, run_hir};

fn f64s(a: &Array) -> Vec<f64> {
    a.as_slice::<f64>().expect("an f64 array").to_vec()
}

fn vector(values: &[f64]) -> Array {
    Array::from_slice(values)
}

fn scalar(value: f64) -> Array {
    rfx::array([], vec![value]).expect("a scalar")
}

fn ty_of(a: &Array) -> TensorType {
    TensorType::new(a.dtype(), a.shape().clone())
}

/// The HIR kernel `f` traces to for `args`, run by the interpreter in its own dtypes.
fn interp(kernel: &Kernel, args: &[Array]) -> Vec<Array> {
    let views: Vec<_> = args.iter().map(Array::view).collect();
    run_hir(kernel, &views, Mode::Native).expect("the interpreter runs the traced kernel")
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{i}]: {g} against {w}"
        );
    }
}

/// Newton's iteration for `sqrt(a)` from `x = a`, `steps` times, in plain Rust.
fn newton_sqrt(a: f64, steps: usize) -> f64 {
    let mut x = a;
    for _ in 0..steps {
        x = (x + a / x) * 0.5;
    }
    x
}

fn sqrt_fori(a: Tensor) -> Tensor {
    fori_loop(0, 8, |_, x| vec![(x[0] + a / x[0]) * 0.5], &[a])[0]
}

const TOL: f64 = 1e-12;

/// The while loop's Newton iteration: until `|x² - a| <= TOL·a`, counting the steps.
fn sqrt_while(a: Tensor) -> (Tensor, Tensor) {
    sqrt_while_max::<50>(a)
}

/// [`sqrt_while`] with at most `MAX` iterations.
fn sqrt_while_max<const MAX: u64>(a: Tensor) -> (Tensor, Tensor) {
    let count = rfx::constant(&Array::scalar(rfx::Scalar::I32(0)));
    let c = while_loop(
        |c| (c[0] * c[0] - a).abs().gt(a * TOL),
        |c| vec![(c[0] + a / c[0]) * 0.5, c[1] + 1],
        &[a, count],
        MAX,
    );
    (c[0], c[1])
}

/// The plain-Rust reference of [`sqrt_while`].
fn newton_sqrt_while(a: f64) -> (f64, i32) {
    let (mut x, mut count) = (a, 0);
    while count < 50 && (x * x - a).abs() > a * TOL {
        x = (x + a / x) * 0.5;
        count += 1;
    }
    (x, count)
}

const ROOTS: [f64; 5] = [2.0, 9.0, 0.25, 100.0, 1e-3];

#[test]
fn fori_newton_sqrt_in_the_interpreter_is_the_plain_loop() {
    let a = vector(&ROOTS);
    let kernel = rfx::jit(sqrt_fori).trace(&[ty_of(&a)]).expect("traces");
    let out = interp(&kernel, &[a]);
    let want: Vec<f64> = ROOTS.iter().map(|&a| newton_sqrt(a, 8)).collect();
    assert_eq!(f64s(&out[0]), want, "bit for bit");
    let sqrt: Vec<f64> = ROOTS[..3].iter().map(|a| a.sqrt()).collect();
    assert_close("sqrt", &f64s(&out[0])[..3], &sqrt, 1e-15);
    // One loop node: the counter is a carry, the trip count is 8.
    let loops: Vec<_> = kernel
        .nodes()
        .iter()
        .filter_map(|n| match &n.op {
            Op::Loop(l) => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(loops.len(), 1);
    assert_eq!((loops[0].carries, loops[0].trips), (2, 8));
    assert!(loops[0].cond.is_none());
}

#[test]
fn while_newton_sqrt_stops_at_the_tolerance() {
    let kernel = rfx::jit(sqrt_while)
        .trace(&[TensorType::scalar(DType::F64)])
        .expect("traces");
    for &root in &ROOTS {
        let out = interp(&kernel, &[scalar(root)]);
        let (x, count) = newton_sqrt_while(root);
        assert_eq!(f64s(&out[0]), vec![x], "sqrt({root})");
        assert_eq!(out[1].as_slice::<i32>(), Some(&[count][..]), "steps for {root}");
        assert!((x - root.sqrt()).abs() <= 1e-12 * root.sqrt().max(1.0));
        assert!(count > 0 && count < 50, "{count} steps");
    }
    // `a` is used by the test and the body: one invariant, shared by both kernels.
    let spec = kernel
        .nodes()
        .iter()
        .find_map(|n| match &n.op {
            Op::Loop(l) => Some(l.clone()),
            _ => None,
        })
        .expect("a loop node");
    assert_eq!(spec.carries, 2);
    assert_eq!(spec.body.inputs().count(), 3);
    assert_eq!(spec.cond.as_ref().map(|c| c.inputs().count()), Some(3));
}

#[test]
fn while_loop_that_reaches_max_iter_ends_there() {
    // The test never fails: the loop runs `max_iter` = 7 times.
    let f = |x: Tensor| while_loop(|c| c[0].ge(0.0), |c| vec![c[0] + 1.0], &[x], 7)[0];
    let kernel = rfx::jit(f)
        .trace(&[TensorType::scalar(DType::F64)])
        .expect("traces");
    assert_eq!(f64s(&interp(&kernel, &[scalar(0.5)])[0]), vec![7.5]);
    // The test fails at once: no iteration.
    assert_eq!(f64s(&interp(&kernel, &[scalar(-0.5)])[0]), vec![-0.5]);
}

#[test]
fn captured_tensors_become_invariants_through_nested_loops() {
    // x <- x * k + b, three times inside an outer loop of four: the inner body captures `k`
    // from the outermost trace (through the outer body) and `b` from the outer body.
    let f = |x: Tensor, k: Tensor| {
        fori_loop(
            0,
            4,
            |i, c| {
                let b = i.cast(DType::F64) * 0.5;
                vec![fori_loop(0, 3, |_, d| vec![d[0] * k + b], &[c[0]])[0]]
            },
            &[x],
        )[0]
    };
    let types = [TensorType::new(DType::F64, [2]), TensorType::scalar(DType::F64)];
    let kernel = rfx::jit(f).trace(&types).expect("traces");
    let out = interp(&kernel, &[vector(&[1.0, -2.0]), scalar(0.75)]);
    let want: Vec<f64> = [1.0f64, -2.0]
        .iter()
        .map(|&x0| {
            let mut x = x0;
            for i in 0..4 {
                for _ in 0..3 {
                    x = x * 0.75 + f64::from(i) * 0.5;
                }
            }
            x
        })
        .collect();
    assert_eq!(f64s(&out[0]), want);
    // The outer loop's operands: the carry, the counter's start, then `k` (an invariant).
    let (outer, operands) = kernel
        .nodes()
        .iter()
        .find_map(|n| match &n.op {
            Op::Loop(l) => Some((l.clone(), n.args.clone())),
            _ => None,
        })
        .expect("a loop node");
    assert_eq!(outer.carries, 2);
    assert_eq!(operands.len(), 3);
    let k_input = kernel.inputs().nth(1).map(|(id, _, _)| id);
    assert_eq!(
        Some(operands[2]),
        k_input,
        "the captured gain is the outer loop's invariant"
    );
    let names: Vec<&str> = outer.body.inputs().map(|(_, name, _)| name).collect();
    assert_eq!(names, ["c0", "i", "inv0"]);
    // The inner loop, inside the outer body, takes `k` (the outer body's `inv0`) and `b`.
    let inner = outer
        .body
        .nodes()
        .iter()
        .find_map(|n| match &n.op {
            Op::Loop(l) => Some(l.clone()),
            _ => None,
        })
        .expect("the nested loop");
    assert_eq!(inner.body.inputs().count(), 4, "c0, i, k and b");
}

#[test]
fn a_body_may_return_a_captured_tensor_or_its_carry_unchanged() {
    let f = |x: Tensor, y: Tensor| {
        let c = fori_loop(0, 5, |_, c| vec![y, c[1]], &[x, x]);
        (c[0], c[1])
    };
    let s = TensorType::scalar(DType::F64);
    let kernel = rfx::jit(f).trace(&[s.clone(), s]).expect("traces");
    let out = interp(&kernel, &[scalar(1.0), scalar(3.0)]);
    assert_eq!((f64s(&out[0]), f64s(&out[1])), (vec![3.0], vec![1.0]));
    // Zero trips: the initial carries.
    let f = |x: Tensor| fori_loop(3, 3, |_, c| vec![c[0] * 2.0], &[x])[0];
    let kernel = rfx::jit(f)
        .trace(&[TensorType::scalar(DType::F64)])
        .expect("traces");
    assert_eq!(f64s(&interp(&kernel, &[scalar(1.5)])[0]), vec![1.5]);
}

fn trace_error<M, F: rfx::IntoKernelFn<M>>(f: F, types: &[TensorType]) -> TraceError {
    match rfx::jit(f).trace(types) {
        Err(JitError::Trace(error)) => error,
        other => panic!("expected a trace error, got {other:?}"),
    }
}

fn loop_reason(error: &TraceError) -> (&'static str, &str) {
    match error {
        TraceError::Loop { op, reason } => (op, reason.as_str()),
        other => panic!("expected TraceError::Loop, got {other:?}"),
    }
}

#[test]
fn loops_that_do_not_fit_are_trace_errors() {
    let s = [TensorType::scalar(DType::F64)];
    let e = trace_error(|x: Tensor| fori_loop(0, 3, |_, c| vec![c[0], c[0]], &[x])[0], &s);
    assert_eq!(
        loop_reason(&e),
        ("fori_loop", "the body returned 2 carries for 1")
    );
    let e = trace_error(
        |x: Tensor| fori_loop(0, 3, |_, c| vec![c[0].broadcast_to([3])], &[x])[0],
        &s,
    );
    assert_eq!(
        loop_reason(&e).1,
        "the body returned f64[3] for carry 0, which is f64[]"
    );
    let e = trace_error(
        |x: Tensor| fori_loop(0, 3, |_, c| vec![c[0].cast(DType::F32)], &[x])[0],
        &s,
    );
    assert_eq!(
        loop_reason(&e).1,
        "the body returned f32[] for carry 0, which is f64[]"
    );
    let e = trace_error(|x: Tensor| fori_loop(5, 2, |_, c| vec![c[0]], &[x])[0], &s);
    assert_eq!(loop_reason(&e), ("fori_loop", "upper (2) is below lower (5)"));
    let e = trace_error(
        |x: Tensor| fori_loop(i32::MIN, i32::MAX, |_, c| vec![c[0]], &[x])[0],
        &s,
    );
    assert!(loop_reason(&e).1.contains("the loop counter is an i32"), "{e}");
    let e = trace_error(
        |x: Tensor| fori_loop(0, 3, |_, _| vec![], &[]).first().copied().unwrap_or(x),
        &s,
    );
    assert_eq!(loop_reason(&e).1, "a loop needs at least one carry");
    let e = trace_error(
        |x: Tensor| while_loop(|c| c[0].gt(0.0), |c| vec![c[0]], &[x], 1 << 40)[0],
        &s,
    );
    assert!(loop_reason(&e).1.contains("at most 2147483647"), "{e}");
    let v = [TensorType::new(DType::F64, [2])];
    let e = trace_error(
        |x: Tensor| while_loop(|c| c[0].gt(0.0), |c| vec![c[0] - 1.0], &[x], 9)[0],
        &v,
    );
    assert_eq!(
        loop_reason(&e),
        ("while_loop", "the test returned bool[2], not a bool scalar")
    );
    let e = trace_error(
        |x: Tensor| while_loop(|c| c[0], |c| vec![c[0] - 1.0], &[x], 9)[0],
        &s,
    );
    assert_eq!(loop_reason(&e).1, "the test returned f64[], not a bool scalar");
    // An error inside the body is the body's own typing error.
    let bad_add = |c: &[Tensor]| (c[0].broadcast_to([2]) + c[0].broadcast_to([3])).sum_all();
    let e = trace_error(
        move |x: Tensor| fori_loop(0, 3, |_, c| vec![bad_add(c)], &[x])[0],
        &s,
    );
    assert!(matches!(e, TraceError::Build { op: "add", .. }), "{e:?}");
    // The message names the loop.
    assert_eq!(
        e_message(|x: Tensor| fori_loop(2, 1, |_, c| vec![c[0]], &[x])[0]),
        "`fori_loop`: upper (1) is below lower (2)"
    );
}

fn e_message(f: impl Fn(Tensor) -> Tensor + Send + Sync + 'static) -> String {
    trace_error(f, &[TensorType::scalar(DType::F64)]).to_string()
}

#[test]
fn a_tensor_of_an_unrelated_trace_is_a_foreign_tensor() {
    // A tensor kept from a finished trace.
    let old = Trace::begin("old");
    let stale = old.input("x", TensorType::scalar(DType::F64));
    let _ = old.finish(&[("out".to_string(), stale)]).expect("traces");
    let trace = Trace::begin("new");
    let x = trace.input("x", TensorType::scalar(DType::F64));
    let y = fori_loop(0, 2, |_, c| vec![c[0] + stale], &[x])[0];
    let error = trace
        .finish(&[("out".to_string(), y)])
        .expect_err("a foreign tensor");
    assert!(matches!(error, TraceError::ForeignTensor { .. }), "{error:?}");
    // A tensor of an enclosing trace that is not a loop body (a kernel traced inside another
    // function's trace) is not captured either.
    let outer = Trace::begin("outer");
    let a = outer.input("a", TensorType::scalar(DType::F64));
    let inner = Trace::begin("inner");
    let b = inner.input("b", TensorType::scalar(DType::F64));
    let z = fori_loop(0, 2, |_, c| vec![c[0] * a], &[b])[0];
    let error = inner
        .finish(&[("out".to_string(), z)])
        .expect_err("a foreign tensor");
    assert!(matches!(error, TraceError::ForeignTensor { .. }), "{error:?}");
    let _ = outer
        .finish(&[("out".to_string(), a)])
        .expect("the outer trace is intact");
    // A failed (poisoned) tensor kept from a finished trace is foreign too, in a loop body or
    // outside one.
    let old = Trace::begin("old");
    let x = old.input("x", TensorType::scalar(DType::F64));
    let failed = x.broadcast_to([2]) + x.broadcast_to([3]);
    assert!(old.finish(&[("out".to_string(), failed)]).is_err());
    for in_loop in [false, true] {
        let trace = Trace::begin("new");
        let x = trace.input("x", TensorType::scalar(DType::F64));
        let y = if in_loop {
            fori_loop(0, 2, |_, c| vec![c[0] + failed], &[x])[0]
        } else {
            x + failed
        };
        let error = trace
            .finish(&[("out".to_string(), y)])
            .expect_err("a foreign tensor");
        assert!(
            matches!(error, TraceError::ForeignTensor { op: "add" }),
            "{error:?}"
        );
    }
}

// -- a 2-link planar arm: inverse kinematics by damped Gauss-Newton steps ---------------------

const L1: f64 = 0.7;
const L2: f64 = 0.45;
const DAMPING: f64 = 1e-4;
const IK_STEPS: i32 = 40;

/// One damped Gauss-Newton step `dq = Jᵀ (J Jᵀ + λ I)⁻¹ e` toward `(tx, ty)`, on any type with
/// the arithmetic of `f64` (traced tensors or plain numbers).
fn ik_step<T>(q1: T, q2: T, tx: T, ty: T, sin: impl Fn(T) -> T, cos: impl Fn(T) -> T) -> (T, T)
where
    T: Copy
        + std::ops::Add<Output = T>
        + std::ops::Sub<Output = T>
        + std::ops::Mul<Output = T>
        + std::ops::Div<Output = T>
        + std::ops::Mul<f64, Output = T>
        + std::ops::Add<f64, Output = T>,
{
    let q12 = q1 + q2;
    let (s1, c1, s12, c12) = (sin(q1), cos(q1), sin(q12), cos(q12));
    let (x, y) = (c1 * L1 + c12 * L2, s1 * L1 + s12 * L2);
    let (ex, ey) = (tx - x, ty - y);
    // J = [[a, b], [c, d]].
    let (a, b) = (s1 * -L1 - s12 * L2, s12 * -L2);
    let (c, d) = (c1 * L1 + c12 * L2, c12 * L2);
    // M = J Jᵀ + λ I, solved for e.
    let (m11, m12, m22) = (a * a + b * b + DAMPING, a * c + b * d, c * c + d * d + DAMPING);
    let det = m11 * m22 - m12 * m12;
    let (u, v) = ((m22 * ex - m12 * ey) / det, (m11 * ey - m12 * ex) / det);
    (q1 + (a * u + c * v), q2 + (b * u + d * v))
}

fn ik_traced(q1: Tensor, q2: Tensor, tx: Tensor, ty: Tensor) -> (Tensor, Tensor) {
    let q = fori_loop(
        0,
        IK_STEPS,
        |_, q| {
            let (n1, n2) = ik_step(q[0], q[1], tx, ty, Tensor::sin, Tensor::cos);
            vec![n1, n2]
        },
        &[q1, q2],
    );
    (q[0], q[1])
}

fn ik_plain(q1: f64, q2: f64, tx: f64, ty: f64) -> (f64, f64) {
    let mut q = (q1, q2);
    for _ in 0..IK_STEPS {
        q = ik_step(q.0, q.1, tx, ty, f64::sin, f64::cos);
    }
    q
}

/// Targets from joint angles with the elbow bent one way, and the start `(0.2, 1.4)`.
fn ik_problem(n: usize) -> Vec<Array> {
    let (mut tx, mut ty) = (Vec::new(), Vec::new());
    for k in 0..n {
        let s = k as f64 / n as f64;
        let (a1, a2) = (-1.0 + 2.0 * s, 0.6 + 1.4 * ((7.0 * s) % 1.0));
        tx.push(a1.cos() * L1 + (a1 + a2).cos() * L2);
        ty.push(a1.sin() * L1 + (a1 + a2).sin() * L2);
    }
    vec![
        vector(&vec![0.2; n]),
        vector(&vec![1.4; n]),
        vector(&tx),
        vector(&ty),
    ]
}

fn check_ik(what: &str, problem: &[Array], q1: &[f64], q2: &[f64], exact: bool) {
    let (tx, ty) = (f64s(&problem[2]), f64s(&problem[3]));
    for k in 0..q1.len() {
        let (x, y) = (
            q1[k].cos() * L1 + (q1[k] + q2[k]).cos() * L2,
            q1[k].sin() * L1 + (q1[k] + q2[k]).sin() * L2,
        );
        assert!(
            (x - tx[k]).hypot(y - ty[k]) < 1e-9,
            "{what}: target {k} missed by {}",
            (x - tx[k]).hypot(y - ty[k])
        );
        let want = ik_plain(0.2, 1.4, tx[k], ty[k]);
        if exact {
            assert_eq!((q1[k], q2[k]), want, "{what}: target {k}");
        } else {
            assert_close(what, &[q1[k], q2[k]], &[want.0, want.1], 1e-9);
        }
    }
}

#[test]
fn arm_inverse_kinematics_reaches_its_targets() {
    let problem = ik_problem(16);
    let types: Vec<TensorType> = problem.iter().map(ty_of).collect();
    let kernel = rfx::jit(ik_traced).trace(&types).expect("traces");
    let out = interp(&kernel, &problem);
    check_ik("interpreter", &problem, &f64s(&out[0]), &f64s(&out[1]), true);
}

// -- a pendulum under PD control: a 100-step Euler rollout and its gradient --------------------

const DT: f64 = 0.01;
const G_OVER_L: f64 = 9.81;
const STEPS: i32 = 100;

/// One Euler step of `θ'' = -g/l sin θ - kp θ - kd ω`.
fn pendulum_step(theta: Tensor, omega: Tensor, kp: Tensor, kd: Tensor) -> (Tensor, Tensor) {
    let accel = theta.sin() * -G_OVER_L - kp * theta - kd * omega;
    (theta + omega * DT, omega + accel * DT)
}

/// The cost of the final state: `θ² + ω²/10`.
fn final_cost(theta: Tensor, omega: Tensor) -> Tensor {
    (theta * theta + omega * omega * 0.1).sum_all()
}

fn rollout(theta: Tensor, omega: Tensor, kp: Tensor, kd: Tensor) -> Tensor {
    let s = fori_loop(
        0,
        STEPS,
        |_, s| {
            let (t, w) = pendulum_step(s[0], s[1], kp, kd);
            vec![t, w]
        },
        &[theta, omega],
    );
    final_cost(s[0], s[1])
}

/// The same rollout, unrolled by the Rust loop while tracing.
fn rollout_unrolled(theta: Tensor, omega: Tensor, kp: Tensor, kd: Tensor) -> Tensor {
    let (mut t, mut w) = (theta, omega);
    for _ in 0..STEPS {
        (t, w) = pendulum_step(t, w, kp, kd);
    }
    final_cost(t, w)
}

fn rollout_plain(theta: f64, omega: f64, kp: f64, kd: f64) -> f64 {
    let (mut t, mut w) = (theta, omega);
    for _ in 0..STEPS {
        let accel = t.sin() * -G_OVER_L - kp * t - kd * w;
        (t, w) = (t + w * DT, w + accel * DT);
    }
    t * t + w * w * 0.1
}

const PENDULUM: [f64; 4] = [0.8, -0.3, 2.0, 0.5];

fn pendulum_args() -> Vec<Array> {
    PENDULUM.iter().map(|&v| scalar(v)).collect()
}

fn scalar_types(n: usize) -> Vec<TensorType> {
    vec![TensorType::scalar(DType::F64); n]
}

#[test]
fn pendulum_rollout_in_the_interpreter_is_the_plain_loop() {
    let kernel = rfx::jit(rollout).trace(&scalar_types(4)).expect("traces");
    let out = interp(&kernel, &pendulum_args());
    let [t, w, kp, kd] = PENDULUM;
    assert_eq!(f64s(&out[0]), vec![rollout_plain(t, w, kp, kd)]);
    let unrolled = rfx::jit(rollout_unrolled)
        .trace(&scalar_types(4))
        .expect("traces");
    assert!(
        kernel.nodes().len() * 20 < unrolled.nodes().len(),
        "the loop is one node, not 100 copies"
    );
}

/// Central finite differences of the plain rollout at [`PENDULUM`].
fn rollout_fd() -> Vec<f64> {
    let h = 1e-6;
    (0..4)
        .map(|k| {
            let (mut up, mut down) = (PENDULUM, PENDULUM);
            up[k] += h;
            down[k] -= h;
            (rollout_plain(up[0], up[1], up[2], up[3]) - rollout_plain(down[0], down[1], down[2], down[3]))
                / (2.0 * h)
        })
        .collect()
}

#[test]
fn pendulum_gradient_matches_finite_differences_and_the_unrolled_rollout() {
    let grad = rfx::jit(rfx::value_and_grad(rollout).wrt(&[0, 1, 2, 3]));
    let kernel = grad
        .trace(&scalar_types(4))
        .expect("differentiates through the loop");
    let out = interp(&kernel, &pendulum_args());
    let got: Vec<f64> = out[1..].iter().flat_map(f64s).collect();
    assert_close("gradient against finite differences", &got, &rollout_fd(), 1e-6);
    let unrolled = rfx::jit(rfx::value_and_grad(rollout_unrolled).wrt(&[0, 1, 2, 3]));
    let reference = interp(
        &unrolled.trace(&scalar_types(4)).expect("traces"),
        &pendulum_args(),
    );
    let want: Vec<f64> = reference[1..].iter().flat_map(f64s).collect();
    assert_close("gradient against the unrolled rollout", &got, &want, 1e-12);
    assert_eq!(f64s(&out[0]), f64s(&reference[0]));
}

/// The rollout of [`rollout`] with `STEPS` steps.
fn rollout_of<const STEPS: i32>(theta: Tensor, omega: Tensor, kp: Tensor, kd: Tensor) -> Tensor {
    let s = fori_loop(
        0,
        STEPS,
        |_, s| {
            let (t, w) = pendulum_step(s[0], s[1], kp, kd);
            vec![t, w]
        },
        &[theta, omega],
    );
    final_cost(s[0], s[1])
}

/// The kernels that the loops of the compiled gradient of a `trips`-step rollout repeat.
fn gradient_loop_kernels(kernel: &Kernel) -> (Vec<rfx_ir::mir::MirKernel>, usize) {
    let (mir, _) = rfx_opt::optimize(kernel, &rfx_opt::OptConfig::default()).expect("compiles");
    let repeated = mir
        .loops()
        .iter()
        .flat_map(|l| mir.kernels()[l.first..l.end].iter().cloned())
        .collect();
    let row_stores = mir
        .kernels()
        .iter()
        .flat_map(|k| &k.stores)
        .filter(|s| s.row().is_some())
        .count();
    (repeated, row_stores)
}

#[test]
fn the_recording_loop_stores_one_row_per_iteration() {
    // Each stored carry's history is updated by a row store: no kernel a loop repeats touches
    // a whole `[trips]` history, so an iteration's work does not grow with the trip count.
    let types = scalar_types(4);
    let short = rfx::jit(rfx::value_and_grad(rollout_of::<100>).wrt(&[0, 1, 2, 3]))
        .trace(&types)
        .expect("traces");
    let long = rfx::jit(rfx::value_and_grad(rollout_of::<1000>).wrt(&[0, 1, 2, 3]))
        .trace(&types)
        .expect("traces");
    let (short_kernels, short_rows) = gradient_loop_kernels(&short);
    let (long_kernels, long_rows) = gradient_loop_kernels(&long);
    assert_eq!(short_rows, 2, "one row store per stored carry");
    assert_eq!(long_rows, 2);
    assert_eq!(short_kernels.len(), long_kernels.len());
    for (a, b) in short_kernels.iter().zip(&long_kernels) {
        assert!(
            a.domain.numel() <= 1 && b.domain.numel() <= 1,
            "{} [{}]",
            b.name,
            b.domain
        );
    }
}

#[test]
fn a_vmapped_gradients_recording_loop_stores_one_row_of_the_batch_per_iteration() {
    // The batched history is held `[trips, batch, ...]`: one row store of the batch's carries
    // per iteration, and no kernel a loop repeats touches a whole history.
    let n = 8;
    let mut types = vec![TensorType::new(DType::F64, [n]); 2];
    types.extend(scalar_types(2));
    let short = rfx::jit(
        rfx::vmap(rfx::value_and_grad(rollout_of::<100>).wrt(&[0, 1, 2, 3])).in_axes(&[
            Some(0),
            Some(0),
            None,
            None,
        ]),
    )
    .trace(&types)
    .expect("traces");
    let long = rfx::jit(
        rfx::vmap(rfx::value_and_grad(rollout_of::<1000>).wrt(&[0, 1, 2, 3])).in_axes(&[
            Some(0),
            Some(0),
            None,
            None,
        ]),
    )
    .trace(&types)
    .expect("traces");
    let (short_kernels, short_rows) = gradient_loop_kernels(&short);
    let (long_kernels, long_rows) = gradient_loop_kernels(&long);
    assert_eq!((short_rows, long_rows), (2, 2), "one row store per stored carry");
    assert_eq!(short_kernels.len(), long_kernels.len());
    for k in short_kernels.iter().chain(&long_kernels) {
        assert!(k.domain.numel() <= n, "{} [{}]", k.name, k.domain);
    }
    // Each example's value and gradient: the bits of its own gradient (HIR interpreter), and
    // the LIR interpreter's bits; the compiled backends to rounding of their `sin`.
    let (theta, omega) = batch_of_states(n);
    let args = vec![
        vector(&theta),
        vector(&omega),
        scalar(PENDULUM[2]),
        scalar(PENDULUM[3]),
    ];
    let alone = rfx::jit(rfx::value_and_grad(rollout).wrt(&[0, 1, 2, 3]))
        .trace(&scalar_types(4))
        .expect("traces");
    let batched = interp(&short, &args);
    for e in 0..n {
        let one = [
            scalar(theta[e]),
            scalar(omega[e]),
            scalar(PENDULUM[2]),
            scalar(PENDULUM[3]),
        ];
        let want = interp(&alone, &one);
        for (o, w) in batched.iter().zip(&want) {
            assert_eq!(f64s(o)[e], f64s(w)[0], "example {e}");
        }
    }
    let f = || {
        rfx::vmap(rfx::value_and_grad(rollout).wrt(&[0, 1, 2, 3])).in_axes(&[Some(0), Some(0), None, None])
    };
    for backend in backends() {
        let out = call_on(f(), backend, &args);
        for (o, w) in out.iter().zip(&batched) {
            if backend == "interp" {
                assert_eq!(f64s(o), f64s(w), "{backend}");
            } else {
                assert_close(backend, &f64s(o), &f64s(w), 1e-12);
            }
        }
    }
}

/// [`rollout_of`] as a while loop testing a step counter, with room for twice the steps.
fn rollout_while<const STEPS: i32>(theta: Tensor, omega: Tensor, kp: Tensor, kd: Tensor) -> Tensor {
    let count = rfx::constant(&Array::scalar(rfx::Scalar::I32(0)));
    let s = while_loop(
        |s| s[2].lt(STEPS),
        |s| {
            let (t, w) = pendulum_step(s[0], s[1], kp, kd);
            vec![t, w, s[2] + 1]
        },
        &[theta, omega, count],
        2 * STEPS as u64,
    );
    final_cost(s[0], s[1])
}

/// A while loop whose test reads only its counter (the same for every example of a batch).
fn counted_while(x: Tensor) -> Tensor {
    let count = rfx::constant(&Array::scalar(rfx::Scalar::I32(0)));
    let c = while_loop(
        |c| c[1].lt(5),
        |c| vec![(c[0] * 0.9).sin() + c[0] * c[0] * 0.1, c[1] + 1],
        &[x, count],
        40,
    );
    c[0].sum_all()
}

#[test]
fn a_vmapped_while_gradient_with_an_unbatched_test_stores_rows_and_gives_each_examples_bits() {
    let n = 6;
    let xs: Vec<f64> = (0..n).map(|k| -1.2 + 0.45 * k as f64).collect();
    let f = || rfx::vmap(rfx::grad(counted_while));
    let kernel = rfx::jit(f())
        .trace(&[TensorType::new(DType::F64, [n])])
        .expect("traces");
    let (kernels, rows) = gradient_loop_kernels(&kernel);
    assert_eq!(rows, 1, "one row store for the stored carry");
    for k in &kernels {
        assert!(k.domain.numel() <= n, "{} [{}]", k.name, k.domain);
    }
    let alone = rfx::jit(rfx::grad(counted_while))
        .trace(&scalar_types(1))
        .expect("traces");
    let batched = interp(&kernel, &[vector(&xs)]);
    let want: Vec<f64> = xs
        .iter()
        .flat_map(|&x| f64s(&interp(&alone, &[scalar(x)])[0]))
        .collect();
    assert_eq!(f64s(&batched[0]), want);
    for backend in backends() {
        let out = call_on(f(), backend, &[vector(&xs)]);
        assert_close(backend, &f64s(&out[0]), &want, 1e-12);
    }
}

/// [`rollout_of`] as a while loop running while its step counter is below `limit` (an input:
/// one per example under `vmap`), at most `MAX` steps.
fn rollout_until<const MAX: u64>(
    theta: Tensor,
    omega: Tensor,
    kp: Tensor,
    kd: Tensor,
    limit: Tensor,
) -> Tensor {
    let count = rfx::constant(&Array::scalar(rfx::Scalar::F64(0.0)));
    let s = while_loop(
        |s| s[2].lt(limit),
        |s| {
            let (t, w) = pendulum_step(s[0], s[1], kp, kd);
            vec![t, w, s[2] + 1.0]
        },
        &[theta, omega, count],
        MAX,
    );
    final_cost(s[0], s[1])
}

/// [`rollout_plain`] with `steps` steps.
fn rollout_plain_steps(state: [f64; 4], steps: usize) -> f64 {
    let [mut t, mut w, kp, kd] = state;
    for _ in 0..steps {
        let accel = t.sin() * -G_OVER_L - kp * t - kd * w;
        (t, w) = (t + w * DT, w + accel * DT);
    }
    t * t + w * w * 0.1
}

fn vmapped_rollout_until<const MAX: u64>() -> rfx::Vmap<impl rfx::KernelFn> {
    rfx::vmap(rfx::value_and_grad(rollout_until::<MAX>).wrt(&[0, 1, 2, 3])).in_axes(&[
        Some(0),
        Some(0),
        None,
        None,
        Some(0),
    ])
}

#[test]
fn a_vmapped_while_gradient_with_a_per_example_test_stores_rows_and_gives_each_examples_bits() {
    // Each example runs its own number of steps: the recording loop masks the row of the
    // batch it stores (`[trips, batch]` histories), so no kernel a loop repeats touches a whole
    // history, at 100 steps as at 1,000.
    let n = 6;
    let mut types = vec![TensorType::new(DType::F64, [n]); 2];
    types.extend(scalar_types(2));
    types.push(TensorType::new(DType::F64, [n]));
    let short = rfx::jit(vmapped_rollout_until::<100>())
        .trace(&types)
        .expect("traces");
    let long = rfx::jit(vmapped_rollout_until::<1000>())
        .trace(&types)
        .expect("traces");
    let (short_kernels, short_rows) = gradient_loop_kernels(&short);
    let (long_kernels, long_rows) = gradient_loop_kernels(&long);
    assert_eq!((short_rows, long_rows), (2, 2), "one row store per stored carry");
    assert_eq!(short_kernels.len(), long_kernels.len());
    for k in short_kernels.iter().chain(&long_kernels) {
        assert!(k.domain.numel() <= n, "{} [{}]", k.name, k.domain);
    }
    // Each example's value and gradient: the bits of its own unbatched gradient (HIR
    // interpreter), finite differences of the plain rollout of its own length, and the
    // compiled backends (the LIR interpreter's bits; the others to rounding of their `sin`).
    let (theta, omega) = batch_of_states(n);
    let limits = [100.0, 37.0, 64.0, 1.0, 0.0, 99.5];
    let (kp, kd) = (PENDULUM[2], PENDULUM[3]);
    let args = vec![
        vector(&theta),
        vector(&omega),
        scalar(kp),
        scalar(kd),
        vector(&limits),
    ];
    let alone = rfx::jit(rfx::value_and_grad(rollout_until::<100>).wrt(&[0, 1, 2, 3]))
        .trace(&scalar_types(5))
        .expect("traces");
    let batched = interp(&short, &args);
    for e in 0..n {
        let one = [
            scalar(theta[e]),
            scalar(omega[e]),
            scalar(kp),
            scalar(kd),
            scalar(limits[e]),
        ];
        let want = interp(&alone, &one);
        for (o, w) in batched.iter().zip(&want) {
            assert_eq!(f64s(o)[e].to_bits(), f64s(w)[0].to_bits(), "example {e}");
        }
        let state = [theta[e], omega[e], kp, kd];
        let steps = limits[e].ceil() as usize;
        assert_close(
            "the value",
            &[f64s(&batched[0])[e]],
            &[rollout_plain_steps(state, steps)],
            1e-12,
        );
        let h = 1e-6;
        for (k, out) in batched[1..].iter().enumerate() {
            let (mut up, mut down) = (state, state);
            up[k] += h;
            down[k] -= h;
            let fd = (rollout_plain_steps(up, steps) - rollout_plain_steps(down, steps)) / (2.0 * h);
            assert_close(&format!("example {e}, d/d{k}"), &[f64s(out)[e]], &[fd], 1e-6);
        }
    }
    for backend in backends() {
        let out = call_on(vmapped_rollout_until::<100>(), backend, &args);
        for (o, w) in out.iter().zip(&batched) {
            if backend == "interp" {
                assert_eq!(f64s(o), f64s(w), "{backend}");
            } else {
                assert_close(backend, &f64s(o), &f64s(w), 1e-12);
            }
        }
    }
}

#[test]
fn a_vmapped_newton_sqrt_gradient_runs_each_examples_own_steps_on_rows() {
    // Newton's iteration to a tolerance relative to each root: a different number of steps per
    // example, the stored row masked per example; each gradient is its own run's bits and
    // `1 / (2 sqrt(a))`.
    let f = || rfx::vmap(rfx::grad(|a: Tensor| sqrt_while(a).0));
    let kernel = rfx::jit(f())
        .trace(&[TensorType::new(DType::F64, [ROOTS.len()])])
        .expect("traces");
    let (kernels, rows) = gradient_loop_kernels(&kernel);
    assert_eq!(rows, 1, "one row store for the stored carry");
    for k in &kernels {
        assert!(k.domain.numel() <= ROOTS.len(), "{} [{}]", k.name, k.domain);
    }
    let steps: Vec<i32> = ROOTS.iter().map(|&a| newton_sqrt_while(a).1).collect();
    assert!(steps.iter().any(|&s| s != steps[0]), "steps {steps:?}");
    let alone = rfx::jit(rfx::grad(|a: Tensor| sqrt_while(a).0))
        .trace(&scalar_types(1))
        .expect("traces");
    let batched = f64s(&interp(&kernel, &[vector(&ROOTS)])[0]);
    for (e, &root) in ROOTS.iter().enumerate() {
        let want = f64s(&interp(&alone, &[scalar(root)])[0]);
        assert_eq!(batched[e].to_bits(), want[0].to_bits(), "root {root}");
        assert_close("d sqrt(a) / da", &[batched[e]], &[0.5 / root.sqrt()], 1e-9);
    }
    for backend in backends() {
        let out = call_on(f(), backend, &[vector(&ROOTS)]);
        assert_eq!(f64s(&out[0]), batched, "{backend}: the HIR interpreter's bits");
    }
}

#[test]
fn a_while_loops_recording_loop_stores_one_row_per_iteration() {
    // The masked body of the recording while loop masks the row it stores, not the history.
    let types = scalar_types(1);
    let short = rfx::jit(rfx::grad(|a: Tensor| sqrt_while_max::<50>(a).0))
        .trace(&types)
        .expect("traces");
    let long = rfx::jit(rfx::grad(|a: Tensor| sqrt_while_max::<5000>(a).0))
        .trace(&types)
        .expect("traces");
    let (short_kernels, short_rows) = gradient_loop_kernels(&short);
    let (long_kernels, long_rows) = gradient_loop_kernels(&long);
    assert_eq!(
        (short_rows, long_rows),
        (1, 1),
        "one row store for the stored carry"
    );
    assert_eq!(short_kernels.len(), long_kernels.len());
    for k in short_kernels.iter().chain(&long_kernels) {
        assert!(k.domain.numel() <= 1, "{} [{}]", k.name, k.domain);
    }
    // The pendulum rollout as a while loop on a step counter: two histories, rows only.
    let pendulum = |kernel: &Kernel| {
        let (kernels, rows) = gradient_loop_kernels(kernel);
        assert_eq!(rows, 2, "one row store per stored carry");
        for k in &kernels {
            assert!(k.domain.numel() <= 1, "{} [{}]", k.name, k.domain);
        }
        kernels.len()
    };
    let wrt = [0, 1, 2, 3];
    let short_rollout = rfx::jit(rfx::value_and_grad(rollout_while::<100>).wrt(&wrt))
        .trace(&scalar_types(4))
        .expect("traces");
    let long_rollout = rfx::jit(rfx::value_and_grad(rollout_while::<1000>).wrt(&wrt))
        .trace(&scalar_types(4))
        .expect("traces");
    assert_eq!(pendulum(&short_rollout), pendulum(&long_rollout));
    let out = interp(&short_rollout, &pendulum_args());
    let fori = rfx::jit(rfx::value_and_grad(rollout).wrt(&wrt))
        .trace(&scalar_types(4))
        .expect("traces");
    let want = interp(&fori, &pendulum_args());
    let bits = |o: &[Array]| o.iter().flat_map(f64s).map(f64::to_bits).collect::<Vec<_>>();
    assert_eq!(
        bits(&out),
        bits(&want),
        "the while rollout's gradient is the fori one's"
    );
    for root in [2.0, 9.0] {
        let want = interp(&long, &[scalar(root)]);
        assert_close("interp", &f64s(&want[0]), &[0.5 / f64::sqrt(root)], 1e-9);
        for backend in backends() {
            let out = call_on(
                rfx::grad(|a: Tensor| sqrt_while_max::<5000>(a).0),
                backend,
                &[scalar(root)],
            );
            assert_eq!(
                f64s(&out[0]),
                f64s(&want[0]),
                "{backend}: the HIR interpreter's bits"
            );
        }
    }
}

#[test]
fn while_loop_newton_sqrt_differentiates_to_half_the_reciprocal() {
    let f = |a: Tensor| sqrt_while(a).0;
    let kernel = rfx::jit(rfx::grad(f))
        .trace(&scalar_types(1))
        .expect("differentiates");
    for root in [2.0, 9.0, 0.25] {
        let out = interp(&kernel, &[scalar(root)]);
        assert_close("d sqrt(a) / da", &f64s(&out[0]), &[0.5 / root.sqrt()], 1e-9);
        for backend in backends() {
            let out = call_on(rfx::grad(f), backend, &[scalar(root)]);
            assert_close(backend, &f64s(&out[0]), &[0.5 / root.sqrt()], 1e-9);
        }
    }
}

/// 1,024 initial states of the pendulum, one shared pair of gains.
fn batch_of_states(n: usize) -> (Vec<f64>, Vec<f64>) {
    let theta = (0..n).map(|k| -1.5 + 3.0 * k as f64 / n as f64).collect();
    let omega = (0..n).map(|k| ((k * 37) % 101) as f64 / 50.0 - 1.0).collect();
    (theta, omega)
}

fn batched_rollout() -> rfx::Vmap<impl rfx::KernelFn> {
    rfx::vmap(rollout).in_axes(&[Some(0), Some(0), None, None])
}

#[test]
fn vmap_of_the_rollout_over_1024_initial_states_is_each_rollout() {
    let n = 1024;
    let (theta, omega) = batch_of_states(n);
    let args = vec![
        vector(&theta),
        vector(&omega),
        scalar(PENDULUM[2]),
        scalar(PENDULUM[3]),
    ];
    let types: Vec<TensorType> = args.iter().map(ty_of).collect();
    let kernel = rfx::jit(batched_rollout())
        .trace(&types)
        .expect("maps over the batch");
    let out = interp(&kernel, &args);
    let want: Vec<f64> = (0..n)
        .map(|k| rollout_plain(theta[k], omega[k], PENDULUM[2], PENDULUM[3]))
        .collect();
    assert_eq!(f64s(&out[0]), want);
}

// -- the compiled path -------------------------------------------------------------------------

/// The backends every compiled test runs on: the CPU backend and the LIR interpreter, plus the
/// `c` backend where a C compiler is available.
fn backends() -> Vec<&'static str> {
    let mut names = vec!["cpu", "interp"];
    let probe = rfx::jit_with(|x: Tensor| x + 1.0, rfx::CompileConfig::with_backend("c"));
    if probe.call((&[1.0f64],)).is_ok() {
        names.push("c");
    }
    names
}

fn call_on<M, F: rfx::IntoKernelFn<M>>(f: F, backend: &str, args: &[Array]) -> Vec<Array> {
    let jit = rfx::jit_with(f, rfx::CompileConfig::with_backend(backend));
    jit.call(args).unwrap_or_else(|e| panic!("{backend}: {e}"))
}

#[test]
fn compiled_newton_sqrt_fori_and_while() {
    let a = vector(&ROOTS);
    let want: Vec<f64> = ROOTS.iter().map(|&a| newton_sqrt(a, 8)).collect();
    for backend in backends() {
        let out = call_on(sqrt_fori, backend, std::slice::from_ref(&a));
        assert_close(backend, &f64s(&out[0]), &want, 1e-15);
        for &root in &ROOTS {
            let out = call_on(sqrt_while, backend, &[scalar(root)]);
            let (x, count) = newton_sqrt_while(root);
            assert_close(backend, &f64s(&out[0]), &[x], 1e-15);
            assert_eq!(
                out[1].as_slice::<i32>(),
                Some(&[count][..]),
                "{backend}: steps for {root}"
            );
        }
    }
}

#[test]
fn compiled_arm_inverse_kinematics_reaches_its_targets() {
    let problem = ik_problem(64);
    for backend in backends() {
        let out = call_on(ik_traced, backend, &problem);
        check_ik(backend, &problem, &f64s(&out[0]), &f64s(&out[1]), false);
    }
}

#[test]
fn compiled_pendulum_gradient_and_vmap() {
    let fd = rollout_fd();
    for backend in backends() {
        let out = call_on(
            rfx::value_and_grad(rollout).wrt(&[0, 1, 2, 3]),
            backend,
            &pendulum_args(),
        );
        let got: Vec<f64> = out[1..].iter().flat_map(f64s).collect();
        assert_close(backend, &got, &fd, 1e-6);
        let [t, w, kp, kd] = PENDULUM;
        assert_close(backend, &f64s(&out[0]), &[rollout_plain(t, w, kp, kd)], 1e-12);
    }
    let n = 1024;
    let (theta, omega) = batch_of_states(n);
    let args = vec![
        vector(&theta),
        vector(&omega),
        scalar(PENDULUM[2]),
        scalar(PENDULUM[3]),
    ];
    let out = call_on(batched_rollout(), "cpu", &args);
    let want: Vec<f64> = (0..n)
        .map(|k| rollout_plain(theta[k], omega[k], PENDULUM[2], PENDULUM[3]))
        .collect();
    assert_close("vmap on cpu", &f64s(&out[0]), &want, 1e-12);
}

fn decay<const TRIPS: i32>(x: Tensor) -> Tensor {
    fori_loop(0, TRIPS, |_, c| vec![(c[0] * 0.999).sin() + 0.001], &[x])[0]
}

/// Every run of ASCII digits replaced by one `#`: the text of a program without its numbers.
fn without_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_digits = false;
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(ch);
            in_digits = false;
        }
    }
    out
}

#[test]
fn the_code_of_a_10000_trip_loop_is_the_code_of_a_100_trip_loop() {
    let types = [TensorType::new(DType::F32, [8])];
    let short = rfx::jit(decay::<100>).executable(&types).expect("compiles");
    let long = rfx::jit(decay::<10_000>).executable(&types).expect("compiles");
    assert_eq!(short.lir().kernels().len(), long.lir().kernels().len());
    assert_eq!(short.lir().loops().len(), 1);
    assert_eq!(short.lir().loops()[0].trips, 100);
    assert_eq!(long.lir().loops()[0].trips, 10_000);
    let dumps = |exe: &rfx::Executable| rfx_runtime::stage_dumps(exe);
    for ((stage, a), (_, b)) in dumps(&short).into_iter().zip(dumps(&long)) {
        if stage == "opt" {
            continue;
        }
        assert_eq!(
            without_numbers(&a),
            without_numbers(&b),
            "{stage}: only the trip count differs"
        );
        assert!(
            b.len() <= a.len() + 2,
            "{stage}: {} bytes for 10,000 trips, {} for 100",
            b.len(),
            a.len()
        );
    }
    // The exported C and Rust: the trip count is one literal.
    let options = rfx::export::ExportOptions::default();
    let short = short.hir().clone();
    let long = long.hir().clone();
    let c = |k: &Kernel| rfx::export::c(k, "decay", &options).expect("exports C");
    let (a, b) = (c(&short), c(&long));
    assert_eq!(without_numbers(&a.source), without_numbers(&b.source), "C");
    assert!(b.source.len() <= a.source.len() + 2, "C source");
    let rust = |k: &Kernel| rfx::export::rust(k, "decay", &options).expect("exports Rust");
    let (a, b) = (rust(&short), rust(&long));
    assert_eq!(without_numbers(&a.source), without_numbers(&b.source), "Rust");
    let x = Array::from_slice(&[0.5f32; 8]);
    let out = rfx::jit(decay::<10_000>)
        .call(std::slice::from_ref(&x))
        .expect("runs");
    let mut want = 0.5f32;
    for _ in 0..10_000 {
        want = (want * 0.999).sin() + 0.001;
    }
    let got = out[0].as_slice::<f32>().expect("f32")[0];
    assert!((got - want).abs() <= 1e-4, "{got} against {want}");
}

/// The rollout of docs/loops.md's worked example, as written there.
fn docs_rollout(theta: Tensor, omega: Tensor, kp: Tensor, kd: Tensor) -> Tensor {
    let s = fori_loop(
        0,
        100,
        |_, s| {
            let accel = s[0].sin() * -9.81 - kp * s[0] - kd * s[1];
            vec![s[0] + s[1] * 0.01, s[1] + accel * 0.01]
        },
        &[theta, omega],
    );
    s[0] * s[0] + s[1] * s[1] * 0.1
}

#[test]
fn the_worked_example_of_the_loops_guide() {
    let f = rfx::jit(rfx::value_and_grad(docs_rollout).wrt(&[0, 1, 2, 3]));
    let out = f
        .call((&[0.8f64], &[-0.3f64], &[2.0f64], &[0.5f64]))
        .expect("runs");
    let got: Vec<f64> = out.iter().flat_map(f64s).collect();
    // The values docs/loops.md prints (from the Python example).
    let want = [
        0.45177902914226126,
        1.07085478,
        -0.04457491,
        0.02038963,
        -0.43269821,
    ];
    assert_close("cost", &got[..1], &want[..1], 1e-13);
    assert_close("gradient", &got[1..], &want[1..], 1e-7);
    let batch = rfx::jit(rfx::vmap(docs_rollout).in_axes(&[Some(0), Some(0), None, None]));
    let theta: Vec<f64> = (0..1024).map(|k| -1.0 + 2.0 * k as f64 / 1023.0).collect();
    let out = batch
        .call((&theta, &vec![0.0f64; 1024], &scalar(2.0), &scalar(0.5)))
        .expect("runs");
    assert_close(
        "vmap",
        &f64s(&out[0])[..3],
        &[0.68135723, 0.67882869, 0.67630416],
        1e-7,
    );
}

#[test]
fn a_test_and_a_body_that_capture_different_tensors_share_the_invariants() {
    // The test reads `limit`, the body reads `step`: both kernels take both invariants.
    let f = |x: Tensor, limit: Tensor, step: Tensor| {
        while_loop(|c| c[0].lt(limit), |c| vec![c[0] + step], &[x], 100)[0]
    };
    let kernel = rfx::jit(f).trace(&scalar_types(3)).expect("traces");
    let out = interp(&kernel, &[scalar(0.0), scalar(10.0), scalar(3.0)]);
    assert_eq!(f64s(&out[0]), vec![12.0]);
    let spec = kernel
        .nodes()
        .iter()
        .find_map(|n| match &n.op {
            Op::Loop(l) => Some(l.clone()),
            _ => None,
        })
        .expect("a loop node");
    let inputs = |k: &Kernel| {
        k.inputs()
            .map(|(_, name, _)| name.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(inputs(&spec.body), ["c0", "inv0", "inv1"]);
    assert_eq!(spec.cond.as_ref().map(inputs), Some(inputs(&spec.body)));
    for backend in backends() {
        let out = call_on(f, backend, &[scalar(0.0), scalar(10.0), scalar(3.0)]);
        assert_eq!(f64s(&out[0]), vec![12.0], "{backend}");
    }
}

#[test]
fn forward_mode_and_the_hessian_through_loops() {
    let fd = rollout_fd();
    let jvp = rfx::jit(rfx::jvp(rollout).wrt(&[0, 1, 2, 3]));
    for (k, want) in fd.iter().enumerate() {
        let mut args = pendulum_args();
        args.extend((0..4).map(|j| scalar(if j == k { 1.0 } else { 0.0 })));
        let out = jvp.call(&args[..]).expect("runs");
        assert_close(&format!("jvp along input {k}"), &f64s(&out[1]), &[*want], 1e-6);
    }
    // sqrt's second derivative, -a^(-3/2) / 4, from the Newton loop.
    let hessian = rfx::jit(rfx::hessian(|a: Tensor| sqrt_fori(a).sum_all()));
    let out = hessian.call((&[2.0f64, 9.0],)).expect("runs");
    let h = f64s(&out[2]);
    assert_close(
        "hessian",
        &h,
        &[-0.25 * 2f64.powf(-1.5), 0.0, 0.0, -0.25 * 9f64.powf(-1.5)],
        1e-9,
    );
}
