//! HIR bounded loops: the interpreter against closed forms, the builder's and the verifier's
//! errors, the text format's round trip and the random loop-kernel generator.

// The helpers below unwrap interpreter and builder results: an error there is a test failure.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use rfx_ir::hir::{
    self, BuildError, Builder, Kernel, Loop, Node, Op, Output, ValueId, VerifyErrorKind, VerifyLocation,
};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::testgen::{LoopGenConfig, TestRng, random_inputs, random_loop_kernel, same_values};
use rfx_ir::{Array, BinaryOp, CmpOp, DType, Scalar, TensorType, TypeError, UnaryOp};

fn run(kernel: &Kernel, inputs: &[Array], mode: Mode) -> Vec<Array> {
    let views = inputs.iter().map(Array::view).collect::<Vec<_>>();
    run_hir(kernel, &views, mode).unwrap()
}

fn f64s(array: &Array) -> Vec<f64> {
    array.as_slice::<f64>().unwrap().to_vec()
}

fn f32s(array: &Array) -> Vec<f32> {
    array.as_slice::<f32>().unwrap().to_vec()
}

fn i32s(array: &Array) -> Vec<i32> {
    array.as_slice::<i32>().unwrap().to_vec()
}

fn f64_array(values: &[f64]) -> Array {
    Array::from_vec([values.len()], values.to_vec()).unwrap()
}

fn f64_scalar(value: f64) -> Array {
    Array::scalar(Scalar::F64(value))
}

fn ty(dtype: DType, dims: &[usize]) -> TensorType {
    TensorType::new(dtype, dims.to_vec())
}

/// A fori loop body over carries `x` (`dtype[n]`) and `i` (`i32[]`) with the invariant `a`
/// (`dtype[n]`): one Newton step for `sqrt(a)`, `x' = 0.5 * (x + a / x)`, and `i' = i + 1`.
fn newton_body(dtype: DType, n: usize) -> Kernel {
    let mut b = Builder::new("newton");
    let x = b.input("x", ty(dtype, &[n])).unwrap();
    let i = b.input("i", ty(DType::I32, &[])).unwrap();
    let a = b.input("a", ty(dtype, &[n])).unwrap();
    let q = b.binary(BinaryOp::Div, a, x).unwrap();
    let s = b.binary(BinaryOp::Add, x, q).unwrap();
    let half = b.scalar(if dtype == DType::F32 {
        Scalar::F32(0.5)
    } else {
        Scalar::F64(0.5)
    });
    let next = b.binary(BinaryOp::Mul, s, half).unwrap();
    let one = b.scalar(Scalar::I32(1));
    let next_i = b.binary(BinaryOp::Add, i, one).unwrap();
    b.output("x", next).unwrap();
    b.output("i", next_i).unwrap();
    b.finish().unwrap()
}

/// `sqrt(a)` by `trips` Newton steps from `x = a`: outputs the root and the step count.
fn newton_kernel(dtype: DType, n: usize, trips: u64) -> Kernel {
    let mut b = Builder::new("newton_sqrt");
    let a = b.input("a", ty(dtype, &[n])).unwrap();
    let zero = b.scalar(Scalar::I32(0));
    let spec = Loop {
        carries: 2,
        trips,
        body: newton_body(dtype, n),
        cond: None,
    };
    let finals = b.loop_(spec, &[a, zero, a]).unwrap();
    b.output("root", finals[0]).unwrap();
    b.output("steps", finals[1]).unwrap();
    b.finish().unwrap()
}

// ---------------------------------------------------------------------------------------------
// The interpreter

const NEWTON_ARGS: [f64; 6] = [0.25, 1.0, 2.0, 3.0, 4.0, 9.0];

#[test]
fn fori_newton_sqrt_matches_the_recurrence_and_sqrt() {
    let kernel = newton_kernel(DType::F64, NEWTON_ARGS.len(), 8);
    for mode in [Mode::Native, Mode::Oracle] {
        let out = run(&kernel, &[f64_array(&NEWTON_ARGS)], mode);
        assert_eq!(i32s(&out[1]), vec![8]);
        for (&got, &a) in f64s(&out[0]).iter().zip(&NEWTON_ARGS) {
            let mut x = a;
            for _ in 0..8 {
                x = 0.5 * (x + a / x);
            }
            assert_eq!(got.to_bits(), x.to_bits(), "a = {a}");
            assert!((got - a.sqrt()).abs() <= 1e-15 * a.sqrt(), "a = {a}: {got}");
        }
    }
    // f32: natively the f32 recurrence bit for bit, in oracle mode the f64 one.
    let kernel = newton_kernel(DType::F32, NEWTON_ARGS.len(), 8);
    let args: Vec<f32> = NEWTON_ARGS.iter().map(|&a| a as f32).collect();
    let input = Array::from_vec([args.len()], args.clone()).unwrap();
    let native = run(&kernel, std::slice::from_ref(&input), Mode::Native);
    let oracle = run(&kernel, &[input], Mode::Oracle);
    for (k, &a) in args.iter().enumerate() {
        let (mut x32, mut x64) = (a, f64::from(a));
        for _ in 0..8 {
            x32 = 0.5 * (x32 + a / x32);
            x64 = 0.5 * (x64 + f64::from(a) / x64);
        }
        assert_eq!(f32s(&native[0])[k].to_bits(), x32.to_bits(), "a = {a}");
        assert_eq!(f64s(&oracle[0])[k].to_bits(), x64.to_bits(), "a = {a}");
        assert!((f64::from(x32) - f64::from(a).sqrt()).abs() <= 2e-7 * f64::from(a).sqrt());
    }
}

#[test]
fn zero_trips_return_the_initial_carries() {
    let kernel = newton_kernel(DType::F64, 3, 0);
    for mode in [Mode::Native, Mode::Oracle] {
        let out = run(&kernel, &[f64_array(&[2.0, -0.0, f64::NAN])], mode);
        let root = f64s(&out[0]);
        assert_eq!(root[0], 2.0);
        assert!(root[1] == 0.0 && root[1].is_sign_negative());
        assert!(root[2].is_nan());
        assert_eq!(i32s(&out[1]), vec![0]);
    }
}

/// A while loop over `(n: i32, s: f64)` adding `n + 1` to `s` while `s < limit`, at most
/// `trips` times: `n` ends as the least `n` with `n (n + 1) / 2 >= limit`, or `trips`.
fn triangular_kernel(trips: u64) -> Kernel {
    let carry_types = [ty(DType::I32, &[]), ty(DType::F64, &[]), ty(DType::F64, &[])];
    let inputs = |b: &mut Builder| {
        let names = ["n", "s", "limit"];
        names
            .iter()
            .zip(&carry_types)
            .map(|(name, t)| b.input(*name, t.clone()).unwrap())
            .collect::<Vec<_>>()
    };
    let mut body = Builder::new("step");
    let v = inputs(&mut body);
    let one = body.scalar(Scalar::I32(1));
    let n1 = body.binary(BinaryOp::Add, v[0], one).unwrap();
    let n1f = body.cast(n1, DType::F64).unwrap();
    let s1 = body.binary(BinaryOp::Add, v[1], n1f).unwrap();
    body.output("n", n1).unwrap();
    body.output("s", s1).unwrap();
    let mut test = Builder::new("below");
    let v = inputs(&mut test);
    let keep = test.compare(CmpOp::Lt, v[1], v[2]).unwrap();
    test.output("keep", keep).unwrap();

    let mut b = Builder::new("triangular");
    let limit = b.input("limit", ty(DType::F64, &[])).unwrap();
    let n0 = b.scalar(Scalar::I32(0));
    let s0 = b.scalar(Scalar::F64(0.0));
    let spec = Loop {
        carries: 2,
        trips,
        body: body.finish().unwrap(),
        cond: Some(test.finish().unwrap()),
    };
    let finals = b.loop_(spec, &[n0, s0, limit]).unwrap();
    b.output("n", finals[0]).unwrap();
    b.output("s", finals[1]).unwrap();
    b.finish().unwrap()
}

#[test]
fn while_loop_stops_when_its_test_fails() {
    let kernel = triangular_kernel(100);
    assert_eq!(kernel.nodes()[3].op.name(), "while_loop");
    for limit in [0.0f64, 0.5, 1.0, 2.0, 50.0, 55.0, 56.0, 1000.0] {
        // The least n with n (n + 1) / 2 >= limit.
        let n = ((-1.0 + (1.0 + 8.0 * limit).sqrt()) / 2.0).ceil() as i32;
        for mode in [Mode::Native, Mode::Oracle] {
            let out = run(&kernel, &[f64_scalar(limit)], mode);
            assert_eq!(i32s(&out[0]), vec![n], "limit {limit}");
            assert_eq!(f64s(&out[1]), vec![f64::from(n * (n + 1) / 2)], "limit {limit}");
        }
    }
}

#[test]
fn while_loop_stops_at_its_trips() {
    for trips in [0u64, 1, 7] {
        let kernel = triangular_kernel(trips);
        for mode in [Mode::Native, Mode::Oracle] {
            let out = run(&kernel, &[f64_scalar(1e9)], mode);
            let n = trips as i32;
            assert_eq!(i32s(&out[0]), vec![n]);
            assert_eq!(f64s(&out[1]), vec![f64::from(n * (n + 1) / 2)]);
        }
    }
}

/// `y <- y * x^3 + 1`, `trips` times, where the cube is an inner fori loop of three products
/// inside the outer loop's body.
fn nested_kernel(trips: u64) -> Kernel {
    let t = ty(DType::F64, &[3]);
    let mut inner = Builder::new("times_x");
    let p = inner.input("p", t.clone()).unwrap();
    let x = inner.input("x", t.clone()).unwrap();
    let px = inner.binary(BinaryOp::Mul, p, x).unwrap();
    inner.output("p", px).unwrap();
    let inner = inner.finish().unwrap();

    let mut outer = Builder::new("cube_plus_one");
    let y = outer.input("y", t.clone()).unwrap();
    let x = outer.input("x", t.clone()).unwrap();
    let cube = Loop {
        carries: 1,
        trips: 3,
        body: inner,
        cond: None,
    };
    let yx3 = outer.loop_(cube, &[y, x]).unwrap()[0];
    let one = outer.scalar(Scalar::F64(1.0));
    let next = outer.binary(BinaryOp::Add, yx3, one).unwrap();
    outer.output("y", next).unwrap();

    let mut b = Builder::new("nested");
    let y0 = b.input("y0", t.clone()).unwrap();
    let x = b.input("x", t).unwrap();
    let spec = Loop {
        carries: 1,
        trips,
        body: outer.finish().unwrap(),
        cond: None,
    };
    let y = b.loop_(spec, &[y0, x]).unwrap()[0];
    b.output("y", y).unwrap();
    b.finish().unwrap()
}

#[test]
fn nested_loops_match_the_closed_form() {
    let xs = [0.5, 2.0, -1.0];
    let y0 = [1.0, 1.0, 3.0];
    for trips in [0u64, 1, 4] {
        let kernel = nested_kernel(trips);
        for mode in [Mode::Native, Mode::Oracle] {
            let out = run(&kernel, &[f64_array(&y0), f64_array(&xs)], mode);
            for (k, (&x, &y)) in xs.iter().zip(&y0).enumerate() {
                // y_n = y0 r^n + (r^n - 1) / (r - 1) with r = x^3: exact for these dyadic values.
                let r: f64 = x * x * x;
                let rn = r.powi(trips as i32);
                let want = y * rn + (rn - 1.0) / (r - 1.0);
                assert_eq!(f64s(&out[0])[k], want, "x {x}, trips {trips}");
            }
        }
    }
}

#[test]
fn carries_of_four_dtypes_come_out_through_loop_output() {
    let types = [
        ty(DType::F32, &[2]),
        ty(DType::I32, &[]),
        ty(DType::Bool, &[]),
        ty(DType::F64, &[]),
    ];
    let mut body = Builder::new("mixed");
    let v: Vec<ValueId> = ["x", "i", "flag", "d"]
        .iter()
        .zip(&types)
        .map(|(name, t)| body.input(*name, t.clone()).unwrap())
        .collect();
    let two = body.scalar(Scalar::F32(2.0));
    let three = body.scalar(Scalar::I32(3));
    let half = body.scalar(Scalar::F64(0.5));
    let outs = [
        body.binary(BinaryOp::Mul, v[0], two).unwrap(),
        body.binary(BinaryOp::Add, v[1], three).unwrap(),
        body.unary(UnaryOp::Not, v[2]).unwrap(),
        body.binary(BinaryOp::Add, v[3], half).unwrap(),
    ];
    for (k, out) in outs.iter().enumerate() {
        body.output(format!("o{k}"), *out).unwrap();
    }
    let mut b = Builder::new("mixed_carries");
    let inputs: Vec<ValueId> = ["x", "i", "flag", "d"]
        .iter()
        .zip(&types)
        .map(|(name, t)| b.input(*name, t.clone()).unwrap())
        .collect();
    let spec = Loop {
        carries: 4,
        trips: 5,
        body: body.finish().unwrap(),
        cond: None,
    };
    let finals = b.loop_(spec, &inputs).unwrap();
    assert!(matches!(b.value_type(finals[0]).unwrap().dtype, DType::F32));
    for (k, value) in finals.iter().enumerate() {
        b.output(format!("out{k}"), *value).unwrap();
    }
    let kernel = b.finish().unwrap();
    assert!(matches!(kernel.nodes()[5].op, Op::LoopOutput { index: 1 }));
    assert!(matches!(kernel.nodes()[7].op, Op::LoopOutput { index: 3 }));
    let inputs = [
        Array::from_vec([2], vec![1.5f32, -0.25]).unwrap(),
        Array::scalar(Scalar::I32(-4)),
        Array::scalar(Scalar::Bool(true)),
        f64_scalar(0.125),
    ];
    let native = run(&kernel, &inputs, Mode::Native);
    assert_eq!(f32s(&native[0]), vec![48.0, -8.0]);
    assert_eq!(i32s(&native[1]), vec![11]);
    assert_eq!(native[2].get(0), Some(Scalar::Bool(false)));
    assert_eq!(f64s(&native[3]), vec![2.625]);
    let oracle = run(&kernel, &inputs, Mode::Oracle);
    assert_eq!(f64s(&oracle[0]), vec![48.0, -8.0]);
    assert!(
        oracle[1..]
            .iter()
            .zip(&native[1..])
            .all(|(a, b)| same_values(a, b))
    );
}

#[test]
fn invariants_are_read_on_every_iteration() {
    // c <- c + v * s over 4 trips with the invariants v: f64[3] and s: f64[].
    let mut body = Builder::new("axpy");
    let c = body.input("c", ty(DType::F64, &[3])).unwrap();
    let v = body.input("v", ty(DType::F64, &[3])).unwrap();
    let s = body.input("s", ty(DType::F64, &[])).unwrap();
    let vs = body.binary(BinaryOp::Mul, v, s).unwrap();
    let next = body.binary(BinaryOp::Add, c, vs).unwrap();
    body.output("c", next).unwrap();
    let mut b = Builder::new("invariants");
    let c0 = b.input("c0", ty(DType::F64, &[3])).unwrap();
    let v = b.input("v", ty(DType::F64, &[3])).unwrap();
    let s = b.input("s", ty(DType::F64, &[])).unwrap();
    let spec = Loop {
        carries: 1,
        trips: 4,
        body: body.finish().unwrap(),
        cond: None,
    };
    let c = b.loop_(spec, &[c0, v, s]).unwrap()[0];
    // An invariant is still the kernel's own value after the loop.
    let after = b.binary(BinaryOp::Sub, c, v).unwrap();
    b.output("c", c).unwrap();
    b.output("after", after).unwrap();
    let kernel = b.finish().unwrap();
    let c0 = [1.0, -2.0, 0.5];
    let v = [0.25, 3.0, -1.0];
    for mode in [Mode::Native, Mode::Oracle] {
        let out = run(&kernel, &[f64_array(&c0), f64_array(&v), f64_scalar(0.5)], mode);
        let want: Vec<f64> = c0.iter().zip(&v).map(|(c, v)| c + 4.0 * v * 0.5).collect();
        assert_eq!(f64s(&out[0]), want);
        let after: Vec<f64> = want.iter().zip(&v).map(|(c, v)| c - v).collect();
        assert_eq!(f64s(&out[1]), after);
    }
}

#[test]
fn inlining_the_body_unrolls_the_loop() {
    let n = NEWTON_ARGS.len();
    let kernel = newton_kernel(DType::F64, n, 3);
    let body = newton_body(DType::F64, n);
    let mut b = Builder::new("unrolled");
    let a = b.input("a", ty(DType::F64, &[n])).unwrap();
    let mut carries = vec![a, b.scalar(Scalar::I32(0))];
    for _ in 0..3 {
        carries = b.inline(&body, &[carries[0], carries[1], a]).unwrap();
    }
    b.output("root", carries[0]).unwrap();
    b.output("steps", carries[1]).unwrap();
    let unrolled = b.finish().unwrap();
    assert!(!unrolled.nodes().iter().any(|n| matches!(n.op, Op::Loop(_))));
    let input = [f64_array(&NEWTON_ARGS)];
    let (looped, flat) = (
        run(&kernel, &input, Mode::Native),
        run(&unrolled, &input, Mode::Native),
    );
    assert!(looped.iter().zip(&flat).all(|(x, y)| same_values(x, y)));
    assert_eq!(i32s(&flat[1]), vec![3]);
}

/// Inlining a kernel with loops into a builder holding only its inputs rebuilds it node for
/// node, loops and `loop_output`s included.
fn inline_round_trip(kernel: &Kernel) -> Kernel {
    let mut b = Builder::new(kernel.name());
    let inputs: Vec<ValueId> = kernel
        .inputs()
        .map(|(_, name, t)| b.input(name, t.clone()).unwrap())
        .collect();
    let outs = b.inline(kernel, &inputs).unwrap();
    for (output, value) in kernel.outputs().iter().zip(outs) {
        b.output(output.name.clone(), value).unwrap();
    }
    b.finish().unwrap()
}

#[test]
fn inlining_a_kernel_with_loops_rebuilds_it() {
    for kernel in [
        nested_kernel(2),
        triangular_kernel(9),
        newton_kernel(DType::F32, 2, 4),
    ] {
        assert_eq!(inline_round_trip(&kernel), kernel);
    }
}

// ---------------------------------------------------------------------------------------------
// Builder errors

fn loop_reason(error: BuildError) -> String {
    match error {
        BuildError::Type {
            source: TypeError::Loop { reason },
            ..
        } => reason,
        other => panic!("expected TypeError::Loop, got {other:?}"),
    }
}

/// A body over one `f64[3]` carry returning `sin` of it.
fn sin_body() -> Kernel {
    let mut b = Builder::new("sin_body");
    let c = b.input("c", ty(DType::F64, &[3])).unwrap();
    let s = b.unary(UnaryOp::Sin, c).unwrap();
    b.output("c", s).unwrap();
    b.finish().unwrap()
}

fn fori(body: Kernel, carries: usize) -> Loop {
    Loop {
        carries,
        trips: 3,
        body,
        cond: None,
    }
}

#[test]
fn builder_rejects_an_operand_of_the_wrong_type() {
    let mut b = Builder::new("k");
    let x = b.input("x", ty(DType::F32, &[3])).unwrap();
    let reason = loop_reason(b.loop_(fori(sin_body(), 1), &[x]).unwrap_err());
    assert_eq!(reason, "operand 0 is f32[3], the body's input 0 is f64[3]");
    let y = b.input("y", ty(DType::F64, &[1])).unwrap();
    let reason = loop_reason(b.loop_(fori(sin_body(), 1), &[y]).unwrap_err());
    assert!(reason.starts_with("operand 0 is f64[1]"), "{reason}");
    // Nothing was added.
    assert_eq!(
        b.value_type(ValueId::new(2)).unwrap_err(),
        BuildError::UnknownValue(ValueId::new(2))
    );
}

#[test]
fn builder_rejects_a_body_output_of_the_wrong_type() {
    let mut body = Builder::new("reduces");
    let c = body.input("c", ty(DType::F64, &[3])).unwrap();
    let total = body.reduce_all(rfx_ir::ReduceOp::Sum, c).unwrap();
    body.output("c", total).unwrap();
    let mut b = Builder::new("k");
    let x = b.input("x", ty(DType::F64, &[3])).unwrap();
    let reason = loop_reason(b.loop_(fori(body.finish().unwrap(), 1), &[x]).unwrap_err());
    assert_eq!(reason, "the body's output 0 is f64[], carry 0 is f64[3]");
    // Two outputs for one carry.
    let mut body = Builder::new("two");
    let c = body.input("c", ty(DType::F64, &[3])).unwrap();
    body.output("a", c).unwrap();
    body.output("b", c).unwrap();
    let reason = loop_reason(b.loop_(fori(body.finish().unwrap(), 1), &[x]).unwrap_err());
    assert_eq!(reason, "the body has 2 outputs for 1 carries");
}

#[test]
fn builder_rejects_a_bad_test_and_bad_counts() {
    let mut b = Builder::new("k");
    let x = b.input("x", ty(DType::F64, &[3])).unwrap();
    // A test giving a bool vector instead of a scalar.
    let mut test = Builder::new("test");
    let c = test.input("c", ty(DType::F64, &[3])).unwrap();
    let zero = test.scalar(Scalar::F64(0.0));
    let keep = test.compare(CmpOp::Gt, c, zero).unwrap();
    test.output("keep", keep).unwrap();
    let spec = Loop {
        cond: Some(test.finish().unwrap()),
        ..fori(sin_body(), 1)
    };
    let reason = loop_reason(b.loop_(spec, &[x]).unwrap_err());
    assert_eq!(
        reason,
        "the test must take the body's inputs and give one bool scalar"
    );
    // No carries.
    let reason = loop_reason(b.loop_(fori(sin_body(), 0), &[x]).unwrap_err());
    assert_eq!(reason, "0 carries for a body of 1 inputs");
    // A body that does not verify.
    let broken = Kernel::from_parts("broken", Vec::new(), Vec::new());
    let reason = loop_reason(b.loop_(fori(broken, 1), &[x]).unwrap_err());
    assert!(
        reason.starts_with("its kernel `broken` does not verify"),
        "{reason}"
    );
    // Past the verifier's limits: trips beyond the i32 counter, loops nested too deep.
    let spec = Loop {
        trips: 1 << 31,
        ..fori(sin_body(), 1)
    };
    let reason = loop_reason(b.loop_(spec, &[x]).unwrap_err());
    assert!(reason.contains("more than the limit of 2147483647"), "{reason}");
    let body = nested_deep(hir::MAX_LOOP_DEPTH - 1);
    b.loop_(fori(body, 1), &[x]).unwrap();
    let body = nested_deep(hir::MAX_LOOP_DEPTH);
    let reason = loop_reason(b.loop_(fori(body, 1), &[x]).unwrap_err());
    assert_eq!(reason, "loops nested more than 16 deep");
    // loop_output of something else than a loop, or of a carry the loop lacks.
    let reason = loop_reason(b.loop_output(x, 0).unwrap_err());
    assert_eq!(reason, "%0 is not a loop");
    let l = b.loop_(fori(sin_body(), 1), &[x]).unwrap()[0];
    let reason = loop_reason(b.loop_output(l, 1).unwrap_err());
    assert_eq!(reason, format!("{l} has 1 carries, not 2"));
}

// ---------------------------------------------------------------------------------------------
// Verifier errors

/// The kinds of the errors of `kernel`, which must not verify.
fn verify_errors(kernel: &Kernel) -> Vec<(VerifyLocation, VerifyErrorKind)> {
    hir::verify(kernel)
        .unwrap_err()
        .errors()
        .iter()
        .map(|e| (e.location, e.kind.clone()))
        .collect()
}

/// A kernel `x: f64[3] -> loop(x)` around `spec` (nodes: `%0` the input, `%1` the loop).
fn around(spec: Loop) -> Kernel {
    let ty = spec.carry_type(0).cloned().unwrap_or(ty(DType::F64, &[3]));
    let nodes = vec![
        Node {
            op: Op::Input { name: "x".into() },
            args: Vec::new(),
            ty: ty.clone(),
        },
        Node {
            op: Op::Loop(Box::new(spec)),
            args: vec![ValueId::new(0)],
            ty,
        },
    ];
    let outputs = vec![Output {
        name: "out".into(),
        value: ValueId::new(1),
    }];
    Kernel::from_parts("k", nodes, outputs)
}

/// `depth` loops nested inside one another, each the only node of its parent's body but the
/// input, around `sin`.
fn nested_deep(depth: usize) -> Kernel {
    let mut kernel = sin_body();
    for _ in 0..depth {
        kernel = around(fori(kernel, 1));
    }
    kernel
}

#[test]
fn verifier_checks_trips_and_carries() {
    let mut spec = fori(sin_body(), 1);
    spec.trips = i32::MAX as u64;
    hir::verify(&around(spec.clone())).unwrap();
    spec.trips = i32::MAX as u64 + 1;
    let errors = verify_errors(&around(spec));
    assert_eq!(
        errors,
        vec![(
            VerifyLocation::Value(ValueId::new(1)),
            VerifyErrorKind::LoopTrips { trips: 1 << 31 }
        )]
    );
    let message = hir::verify(&around(Loop {
        trips: 1 << 40,
        ..fori(sin_body(), 1)
    }))
    .unwrap_err()
    .errors()[0]
        .to_string();
    assert_eq!(
        message,
        "%1: the loop runs at most 1099511627776 trips, more than the limit of 2147483647 (an i32 counter)"
    );
    let errors = verify_errors(&around(fori(sin_body(), 0)));
    assert!(
        matches!(&errors[..], [(_, VerifyErrorKind::Type(TypeError::Loop { reason }))] if reason == "0 carries for a body of 1 inputs"),
        "{errors:?}"
    );
}

#[test]
fn verifier_reports_errors_inside_bodies_and_tests_with_their_loop() {
    // The body's `sin` declared as f32[3].
    let mut body = sin_body();
    let mut nodes = body.nodes().to_vec();
    nodes[1].ty = ty(DType::F32, &[3]);
    body = Kernel::from_parts("sin_body", nodes, body.outputs().to_vec());
    let errors = verify_errors(&around(fori(body.clone(), 1)));
    let [(location, VerifyErrorKind::InLoopBody(inner))] = &errors[..] else {
        panic!("{errors:?}")
    };
    assert_eq!(*location, VerifyLocation::Value(ValueId::new(1)));
    assert_eq!(inner.location, VerifyLocation::Value(ValueId::new(1)));
    assert!(matches!(
        inner.kind,
        VerifyErrorKind::Type(TypeError::ResultType { .. })
    ));
    // Two levels down, the location names both loops.
    let outer = around(fori(around(fori(body, 1)), 1));
    let message = hir::verify(&outer).unwrap_err().errors()[0].to_string();
    assert_eq!(
        message,
        "%1: in the loop's body: %1: in the loop's body: %1: declared type f32[3] but the operands give f64[3]"
    );
    // A test with an error of its own.
    let test = Kernel::from_parts("test", Vec::new(), Vec::new());
    let spec = Loop {
        cond: Some(test),
        ..fori(sin_body(), 1)
    };
    let errors = verify_errors(&around(spec));
    assert!(
        errors.iter().any(|(_, kind)| matches!(
            kind,
            VerifyErrorKind::InLoopTest(inner) if inner.kind == VerifyErrorKind::NoOutputs
        )),
        "{errors:?}"
    );
}

#[test]
fn verifier_limits_loop_depth_without_overflowing_the_stack() {
    hir::verify(&nested_deep(hir::MAX_LOOP_DEPTH)).unwrap();
    let errors = verify_errors(&nested_deep(hir::MAX_LOOP_DEPTH + 1));
    assert_eq!(
        errors,
        vec![(VerifyLocation::Value(ValueId::new(1)), VerifyErrorKind::LoopDepth)]
    );
    // Far deeper kernels are rejected the same way, by a walk that stops past the limit.
    let deep = nested_deep(300);
    assert_eq!(verify_errors(&deep), errors);
    let input = f64_array(&[1.0, 2.0, 3.0]);
    let result = run_hir(&deep, &[input.view()], Mode::Native);
    assert!(
        matches!(result, Err(rfx_ir::interp::InterpError::InvalidHir(_))),
        "{result:?}"
    );
}

#[test]
fn verifier_checks_loop_outputs() {
    let kernel = carries_kernel();
    hir::verify(&kernel).unwrap();
    let with_node = |index: usize, node: Node| {
        let mut nodes = kernel.nodes().to_vec();
        nodes[index] = node;
        Kernel::from_parts("k", nodes, kernel.outputs().to_vec())
    };
    let t = ty(DType::I32, &[]);
    // %3 = loop_output %2 index 1 : i32[] is the valid one.
    let not_a_loop = with_node(
        3,
        Node {
            op: Op::LoopOutput { index: 1 },
            args: vec![ValueId::new(0)],
            ty: t.clone(),
        },
    );
    assert_eq!(
        verify_errors(&not_a_loop),
        vec![(
            VerifyLocation::Value(ValueId::new(3)),
            VerifyErrorKind::NotALoop(ValueId::new(0))
        )]
    );
    let past_the_carries = with_node(
        3,
        Node {
            op: Op::LoopOutput { index: 2 },
            args: vec![ValueId::new(2)],
            ty: t.clone(),
        },
    );
    assert_eq!(
        verify_errors(&past_the_carries),
        vec![(
            VerifyLocation::Value(ValueId::new(3)),
            VerifyErrorKind::LoopOutputIndex { index: 2, carries: 2 }
        )]
    );
    let wrong_type = with_node(
        3,
        Node {
            op: Op::LoopOutput { index: 1 },
            args: vec![ValueId::new(2)],
            ty: ty(DType::F64, &[]),
        },
    );
    let errors = verify_errors(&wrong_type);
    assert!(
        matches!(&errors[..], [(_, VerifyErrorKind::Type(TypeError::ResultType { declared, inferred }))]
            if declared == "f64[]" && inferred == "i32[]"),
        "{errors:?}"
    );
    let two_operands = with_node(
        3,
        Node {
            op: Op::LoopOutput { index: 1 },
            args: vec![ValueId::new(2), ValueId::new(2)],
            ty: t,
        },
    );
    let errors = verify_errors(&two_operands);
    assert!(
        matches!(&errors[..], [(_, VerifyErrorKind::Type(TypeError::Arity { .. }))]),
        "{errors:?}"
    );
}

/// `%0 = x: f64[]`, `%1 = 0: i32[]`, `%2 = loop` over `(x, i)` 5 times, `%3` its carry 1.
fn carries_kernel() -> Kernel {
    let mut body = Builder::new("body");
    let x = body.input("x", ty(DType::F64, &[])).unwrap();
    let i = body.input("i", ty(DType::I32, &[])).unwrap();
    let one = body.scalar(Scalar::I32(1));
    let i1 = body.binary(BinaryOp::Add, i, one).unwrap();
    let x2 = body.binary(BinaryOp::Mul, x, x).unwrap();
    body.output("x", x2).unwrap();
    body.output("i", i1).unwrap();
    let mut b = Builder::new("k");
    let x = b.input("x", ty(DType::F64, &[])).unwrap();
    let zero = b.scalar(Scalar::I32(0));
    let spec = Loop {
        carries: 2,
        trips: 5,
        body: body.finish().unwrap(),
        cond: None,
    };
    let finals = b.loop_(spec, &[x, zero]).unwrap();
    b.output("x", finals[0]).unwrap();
    b.output("i", finals[1]).unwrap();
    b.finish().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Text format

const WHILE_TEXT: &str = "kernel triangular {
  %0 = input limit : f64[]
  %1 = const 0 : i32[]
  %2 = const 0.0 : f64[]
  %3 = while_loop %1, %2, %0 carries 2 trips 100 {
    kernel step {
      %0 = input n : i32[]
      %1 = input s : f64[]
      %2 = input limit : f64[]
      %3 = const 1 : i32[]
      %4 = add %0, %3 : i32[]
      %5 = cast %4 : f64[]
      %6 = add %1, %5 : f64[]
      output n = %4
      output s = %6
    }
  } cond {
    kernel below {
      %0 = input n : i32[]
      %1 = input s : f64[]
      %2 = input limit : f64[]
      %3 = lt %1, %2 : bool[]
      output keep = %3
    }
  } : i32[]
  %4 = loop_output %3 index 1 : f64[]
  output n = %3
  output s = %4
}
";

#[test]
fn loops_print_in_the_text_format() {
    assert_eq!(triangular_kernel(100).to_string(), WHILE_TEXT);
    assert_eq!(hir::parse(WHILE_TEXT).unwrap(), triangular_kernel(100));
}

#[test]
fn nested_and_while_loops_round_trip_through_text() {
    let kernels = [
        nested_kernel(4),
        triangular_kernel(7),
        carries_kernel(),
        newton_kernel(DType::F32, 3, 8),
        nested_deep(hir::MAX_LOOP_DEPTH),
    ];
    for kernel in kernels {
        let printed = kernel.to_string();
        let parsed = hir::parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(parsed, kernel);
        assert_eq!(parsed.to_string(), printed);
    }
    let text = nested_kernel(4).to_string();
    assert!(
        text.contains("  %2 = loop %0, %1 carries 1 trips 4 {\n    kernel cube_plus_one {\n"),
        "{text}"
    );
    assert!(
        text.contains("      %2 = loop %0, %1 carries 1 trips 3 {\n        kernel times_x {\n"),
        "{text}"
    );
}

#[test]
fn generated_loop_kernels_round_trip_through_text_and_inline() {
    for seed in 0..200u64 {
        let kernel = random_loop_kernel(&mut TestRng::new(seed), &LoopGenConfig::default(), "k");
        let printed = kernel.to_string();
        let parsed = hir::parse(&printed).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{printed}"));
        assert_eq!(parsed, kernel, "seed {seed}");
        assert_eq!(inline_round_trip(&kernel), kernel, "seed {seed}");
    }
}

fn parse_err(text: &str) -> (usize, usize, String) {
    let e = hir::parse(text).unwrap_err();
    (e.line, e.col, e.message)
}

#[test]
fn malformed_loops_give_line_and_column() {
    // A missing `trips`.
    let text = WHILE_TEXT.replace("carries 2 trips 100", "carries 2");
    let (line, col, message) = parse_err(&text);
    assert_eq!((line, col), (5, 40), "{message}");
    assert!(message.contains("`trips`"), "{message}");
    // Unbalanced braces: the body's closing brace is missing.
    let text = WHILE_TEXT.replacen("      output s = %6\n    }\n", "      output s = %6\n", 1);
    let (line, col, message) = parse_err(&text);
    assert_eq!((line, col), (16, 5), "{message}");
    // One brace too many at the end.
    let (line, col, _) = parse_err(&format!("{WHILE_TEXT}}}"));
    assert_eq!((line, col), (30, 1));
    // A while_loop without its test, a loop with one.
    let text = WHILE_TEXT.replace("} cond {", "} {");
    let (line, col, message) = parse_err(&text);
    assert_eq!((line, col), (17, 5), "{message}");
    assert!(message.contains("`cond`"), "{message}");
    let text = WHILE_TEXT.replace("while_loop", "loop");
    let (line, col, message) = parse_err(&text);
    assert_eq!((line, col), (17, 5), "{message}");
    // A body whose types disagree: the error is at the statement inside the body.
    let text = WHILE_TEXT.replace("%6 = add %1, %5 : f64[]", "%6 = add %1, %4 : f64[]");
    let (line, col, message) = parse_err(&text);
    assert_eq!((line, col), (13, 7), "{message}");
    assert!(
        message.starts_with("%3: in the loop's body: %6: `add` needs operands of one dtype"),
        "{message}"
    );
    // ... and in the test.
    let text = WHILE_TEXT.replace("%3 = lt %1, %2 : bool[]", "%3 = lt %1, %0 : bool[]");
    let (line, col, message) = parse_err(&text);
    assert_eq!((line, col), (22, 7), "{message}");
    assert!(
        message.starts_with("%3: in the loop's test: %3: `lt` needs operands of one dtype"),
        "{message}"
    );
    // A body output that is not its carry's type: at the loop's statement.
    let text = WHILE_TEXT.replace(
        "output n = %4\n      output s = %6",
        "output n = %4\n      output s = %4",
    );
    let (line, col, message) = parse_err(&text);
    assert_eq!((line, col), (5, 3), "{message}");
    assert!(
        message.contains("the body's output 1 is i32[], carry 1 is f64[]"),
        "{message}"
    );
    // loop_output without its index, or past the carries.
    let (line, col, message) = parse_err(&WHILE_TEXT.replace("%3 index 1", "%3"));
    assert_eq!((line, col), (26, 23), "{message}");
    let (line, col, message) = parse_err(&WHILE_TEXT.replace("%3 index 1", "%3 index 2"));
    assert_eq!((line, col), (26, 3), "{message}");
    assert!(
        message.contains("reads carry 2 of a loop with 2 carries"),
        "{message}"
    );
    // Trips past the i32 counter.
    let (line, col, message) = parse_err(&WHILE_TEXT.replace("trips 100", "trips 3000000000"));
    assert_eq!((line, col), (5, 3), "{message}");
    assert!(message.contains("more than the limit of 2147483647"), "{message}");
}

#[test]
fn too_deep_text_is_a_parse_error() {
    let deep = nested_deep(hir::MAX_LOOP_DEPTH + 1).to_string();
    let (line, col, message) = parse_err(&deep);
    assert_eq!(
        message,
        format!("loops nested more than {} deep", hir::MAX_LOOP_DEPTH)
    );
    assert_eq!(line, 3 + 3 * hir::MAX_LOOP_DEPTH);
    assert!(col > 1);
    // Thousands of levels: the parser stops at the limit instead of recursing.
    let mut text = String::new();
    for _ in 0..5000 {
        text.push_str("kernel k { %0 = input x : f64[3] %1 = loop %0 carries 1 trips 1 { ");
    }
    let (_, _, message) = parse_err(&text);
    assert_eq!(
        message,
        format!("loops nested more than {} deep", hir::MAX_LOOP_DEPTH)
    );
}

#[test]
fn loops_draw_in_dot() {
    let dot = rfx_ir::dot::hir_to_dot(&nested_kernel(4));
    assert!(
        dot.contains("n2 [label=\"%2 loop ×4, 1 carry\\nf64[3]\", shape=hexagon];"),
        "{dot}"
    );
    assert!(dot.contains("subgraph \"cluster_n2_body\" {"), "{dot}");
    assert!(dot.contains("subgraph \"cluster_n2_body_n2_body\" {"), "{dot}");
    assert!(
        dot.contains("n2_body_n2 [label=\"%2 loop ×3, 1 carry\\nf64[3]\", shape=hexagon];"),
        "{dot}"
    );
    assert!(
        dot.contains("n2_body_n2_body_n0 -> n2_body_n2_body_n2 [label=\"0\"];"),
        "{dot}"
    );
    let dot = rfx_ir::dot::hir_to_dot(&triangular_kernel(100));
    assert!(dot.contains("%3 while_loop ≤100, 2 carries\\ni32[]"), "{dot}");
    assert!(dot.contains("subgraph \"cluster_n3_test\" {"), "{dot}");
    assert!(
        dot.contains("n4 [label=\"%4 loop_output 1\\nf64[]\", shape=ellipse];"),
        "{dot}"
    );
    assert!(dot.ends_with("  }\n}\n"), "{dot}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn mutated_loop_text_never_panics(
        edits in proptest::collection::vec((0usize..10_000, 0u8..4, any::<char>()), 1..6),
    ) {
        let mut chars: Vec<char> = WHILE_TEXT.chars().collect();
        for (pos, kind, c) in edits {
            if chars.is_empty() { break; }
            let pos = pos % chars.len();
            match kind {
                0 => { chars.remove(pos); }
                1 => chars.insert(pos, c),
                2 => chars[pos] = c,
                _ => chars.truncate(pos),
            }
        }
        let text: String = chars.into_iter().collect();
        if let Err(e) = hir::parse(&text) {
            prop_assert!(e.line >= 1 && e.col >= 1);
        }
        let _ = hir::parse_unverified(&text);
    }
}

// ---------------------------------------------------------------------------------------------
// The random loop-kernel generator

/// `true` when `got` (native) is within `tol · max(1, |want|)` of `want` (oracle) everywhere,
/// non-finite values matching exactly (any NaN matching any NaN).
fn close(got: &Array, want: &Array, tol: f64) -> bool {
    let (got, want) = (got.to_f64_vec(), want.to_f64_vec());
    got.len() == want.len()
        && got.iter().zip(&want).all(|(&g, &w)| {
            if g.is_nan() || w.is_nan() {
                g.is_nan() && w.is_nan()
            } else if !w.is_finite() || !g.is_finite() {
                g == w || (g - w).abs() <= tol * w.abs().max(1.0)
            } else {
                (g - w).abs() <= tol * w.abs().max(1.0)
            }
        })
}

#[test]
fn generated_loop_kernels_verify_and_run() {
    let config = LoopGenConfig::default();
    let (mut whiles, mut nested, mut counters, mut chained) = (0, 0, 0, 0);
    for seed in 0..200u64 {
        let mut rng = TestRng::new(seed);
        let name = format!("loops{seed}");
        let kernel = random_loop_kernel(&mut rng, &config, &name);
        assert_eq!(kernel.name(), name, "seed {seed}: the generator fell back");
        hir::verify(&kernel).unwrap_or_else(|e| panic!("seed {seed}:\n{e}"));
        let loops: Vec<&hir::Loop> = kernel
            .nodes()
            .iter()
            .filter_map(|n| match &n.op {
                hir::Op::Loop(l) => Some(&**l),
                _ => None,
            })
            .collect();
        assert!(!loops.is_empty(), "seed {seed}: no loop");
        whiles += usize::from(loops.iter().any(|l| l.cond.is_some()));
        chained += usize::from(loops.len() > 1);
        counters += usize::from(kernel.outputs().iter().any(|o| o.name == "count"));
        nested += usize::from(
            loops
                .iter()
                .any(|l| l.body.nodes().iter().any(|n| matches!(n.op, hir::Op::Loop(_)))),
        );
        let inputs = random_inputs(&mut TestRng::new(seed ^ 0x5eed), &kernel, 0.1);
        let native = run(&kernel, &inputs, Mode::Native);
        let oracle = run(&kernel, &inputs, Mode::Oracle);
        assert_eq!(native.len(), kernel.outputs().len());
        assert_eq!(oracle.len(), kernel.outputs().len());
        for (output, value) in kernel.outputs().iter().zip(&native) {
            let ty = kernel.value_type(output.value).unwrap();
            assert_eq!(value.dtype(), ty.dtype, "seed {seed}");
            assert_eq!(value.shape(), &ty.shape, "seed {seed}");
        }
        // Running twice gives the same bits: the generated kernel is deterministic.
        let again = run(&kernel, &inputs, Mode::Native);
        assert!(native.iter().zip(&again).all(|(a, b)| same_values(a, b)));
    }
    // Each feature appears in a fair share of 200 kernels.
    for (feature, count) in [
        ("while", whiles),
        ("nested", nested),
        ("counter", counters),
        ("chained", chained),
    ] {
        assert!(count >= 20, "only {count} of 200 kernels have a {feature} loop");
    }
}

#[test]
fn fori_only_kernels_hold_one_plain_loop() {
    for seed in 0..50u64 {
        let kernel = random_loop_kernel(&mut TestRng::new(seed), &LoopGenConfig::fori_only(), "plain");
        let loops: Vec<&hir::Loop> = kernel
            .nodes()
            .iter()
            .filter_map(|n| match &n.op {
                hir::Op::Loop(l) => Some(&**l),
                _ => None,
            })
            .collect();
        assert_eq!(loops.len(), 1, "seed {seed}");
        let spec = loops[0];
        assert!(spec.cond.is_none() && spec.trips <= 20, "seed {seed}");
        assert!((1..=3).contains(&spec.carries), "seed {seed}");
        assert!(
            spec.operand_types().iter().all(|t| t.dtype.is_float()),
            "seed {seed}"
        );
        assert!(!spec.body.nodes().iter().any(|n| matches!(n.op, hir::Op::Loop(_))));
    }
}

/// Without tests on float carries the loops run the same iterations in every precision, and
/// the bounded, about 1-Lipschitz bodies keep `f32` within a small distance of the `f64` oracle
/// after up to 20 iterations.
#[test]
fn generated_fori_loops_stay_close_to_the_oracle() {
    let config = LoopGenConfig {
        float_tests: false,
        ..LoopGenConfig::default()
    };
    for seed in 0..100u64 {
        let kernel = random_loop_kernel(&mut TestRng::new(seed), &config, "close");
        let inputs = random_inputs(&mut TestRng::new(seed + 1000), &kernel, 0.05);
        let native = run(&kernel, &inputs, Mode::Native);
        let oracle = run(&kernel, &inputs, Mode::Oracle);
        for ((output, got), want) in kernel.outputs().iter().zip(&native).zip(&oracle) {
            let tol = if got.dtype() == DType::F32 { 1e-4 } else { 1e-12 };
            assert!(
                close(got, want, tol),
                "seed {seed}, output {}: {:?} vs {:?}\n{kernel}",
                output.name,
                got.to_f64_vec(),
                want.to_f64_vec()
            );
        }
    }
}
