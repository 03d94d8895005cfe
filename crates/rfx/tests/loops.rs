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
    let count = rfx::constant(&Array::scalar(rfx::Scalar::I32(0)));
    let c = while_loop(
        |c| (c[0] * c[0] - a).abs().gt(a * TOL),
        |c| vec![(c[0] + a / c[0]) * 0.5, c[1] + 1],
        &[a, count],
        50,
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
}
