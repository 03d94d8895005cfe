//! The tracing facade end to end: rfxJIT's examples, every op against the reference
//! interpreter on random inputs, the cache and its miss explanations, the transforms, the
//! real-time handle, and typed errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::{All, Array, CallError, DType, JitError, MissReason, Shape, Tensor, TensorType, TraceError};
use rfx_ir::interp::{Mode, run_hir};

fn random_f32(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

fn f32s(a: &Array) -> &[f32] {
    a.as_slice::<f32>().expect("an f32 array")
}

fn assert_close(actual: &[f32], expected: &[f32], rel: f32) {
    assert_eq!(actual.len(), expected.len());
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        let tol = rel * e.abs().max(1.0);
        assert!(
            (a - e).abs() <= tol || (a.is_nan() && e.is_nan()),
            "element {i}: {a} vs {e}"
        );
    }
}

/// Runs `f` compiled and on the reference interpreter with the same inputs; compares.
fn check_against_interp<K: rfx::KernelFn>(f: &rfx::Jit<K>, inputs: &[Array], rel: f32) {
    let types: Vec<TensorType> = inputs
        .iter()
        .map(|a| TensorType::new(a.dtype(), a.shape().clone()))
        .collect();
    let compiled = f.call(inputs).expect("compiled call");
    let kernel = f.trace(&types).expect("trace");
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let reference = run_hir(&kernel, &views, Mode::Native).expect("interpreter");
    assert_eq!(compiled.len(), reference.len());
    for (c, r) in compiled.iter().zip(&reference) {
        assert_eq!(c.shape(), r.shape());
        match c.dtype() {
            DType::F32 => assert_close(f32s(c), f32s(r), rel),
            _ => assert_eq!(c, r),
        }
    }
}

#[test]
fn rfxjit_fused_chain_example() {
    let f = rfx::jit(|x: Tensor, y: Tensor| (x * 2.0).sin() + y);
    let out = f.call((&[0.0f32, 1.0, 2.0], &[1.0f32, 2.0, 3.0])).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].shape(), &Shape::new([3]));
    assert_eq!(f32s(&out[0]), &[1.0f32, 2.909_297_5, 2.243_197_5]);
    // The macro form gives the same kernel.
    let g = rfx::jit!(|x, y| (x * 2.0).sin() + y);
    let out2 = g.call((&[0.0f32, 1.0, 2.0], &[1.0f32, 2.0, 3.0])).unwrap();
    assert_eq!(out, out2);
}

#[test]
fn rfxjit_grad_examples() {
    let loss = |x: Tensor| x.powf(2.0).sum(All);
    let g = rfx::jit(rfx::grad(loss));
    let out = g.call((&[1.0f64, 2.0, 3.0],)).unwrap();
    assert_eq!(out[0].as_slice::<f64>(), Some(&[2.0, 4.0, 6.0][..]));

    let vg = rfx::jit(rfx::value_and_grad(loss));
    let out = vg.call((&[1.0f64, 2.0, 3.0],)).unwrap();
    assert_eq!(out[0].as_slice::<f64>(), Some(&[14.0][..]));
    assert_eq!(out[1].as_slice::<f64>(), Some(&[2.0, 4.0, 6.0][..]));

    // f32 too, on random inputs: d/dx sum(x^2) = 2x.
    let mut rng = StdRng::seed_from_u64(7);
    let x = random_f32(&mut rng, 17, -3.0, 3.0);
    let out = g.call((&x,)).unwrap();
    let expected: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    assert_close(f32s(&out[0]), &expected, 1e-6);
}

#[test]
fn cache_compiles_once_per_shape_and_explains_misses() {
    let f = rfx::jit(|x: Tensor, y: Tensor| (x * 2.0).sin() + y);
    assert_eq!(f.compile_count(), 0);
    let mut rng = StdRng::seed_from_u64(1);
    for _ in 0..5 {
        let x = random_f32(&mut rng, 3, -1.0, 1.0);
        let y = random_f32(&mut rng, 3, -1.0, 1.0);
        let out = f.call((&x, &y)).unwrap();
        let expected: Vec<f32> = x.iter().zip(&y).map(|(a, b)| (a * 2.0).sin() + b).collect();
        assert_close(f32s(&out[0]), &expected, 1e-6);
    }
    assert_eq!(f.compile_count(), 1);
    assert_eq!(f.last_miss().unwrap().reasons, vec![MissReason::FirstCall]);

    let x4 = random_f32(&mut rng, 4, -1.0, 1.0);
    let y4 = random_f32(&mut rng, 4, -1.0, 1.0);
    f.call((&x4, &y4)).unwrap();
    assert_eq!(f.compile_count(), 2);
    let miss = f.last_miss().unwrap();
    assert!(miss.reasons.contains(&MissReason::InputShape {
        name: "x".into(),
        from: Shape::new([3]),
        to: Shape::new([4]),
    }));
    let text = miss.to_string();
    assert!(text.contains("shape of input `x`: [3] → [4]"), "{text}");
    assert!(text.contains("shape of input `y`: [3] → [4]"), "{text}");

    // Back to [3]: cached, no compile.
    f.call((&[0.5f32, 0.25, 0.125], &[1.0f32, 1.0, 1.0])).unwrap();
    assert_eq!(f.compile_count(), 2);

    // A dtype change is explained too.
    f.call((&[0.5f64, 0.25, 0.125], &[1.0f64, 1.0, 1.0])).unwrap();
    assert_eq!(f.compile_count(), 3);
    assert!(
        f.last_miss()
            .unwrap()
            .to_string()
            .contains("dtype of input `x`: f32 → f64")
    );

    f.clear_cache();
    f.call((&[0.5f64, 0.25, 0.125], &[1.0f64, 1.0, 1.0])).unwrap();
    assert_eq!(f.compile_count(), 4);
    assert_eq!(f.last_miss().unwrap().reasons, vec![MissReason::Cleared]);
}

#[test]
fn backend_change_is_a_miss_and_interp_agrees() {
    let cpu = rfx::jit(|x: Tensor| x.exp() * 0.5 - x.tanh());
    let interp = rfx::jit(|x: Tensor| x.exp() * 0.5 - x.tanh()).on_backend("interp");
    let mut rng = StdRng::seed_from_u64(3);
    let x = random_f32(&mut rng, 33, -2.0, 2.0);
    let a = cpu.call((&x,)).unwrap();
    let b = interp.call((&x,)).unwrap();
    assert_close(f32s(&a[0]), f32s(&b[0]), 4e-6);
    assert_eq!(
        interp
            .executable(&[TensorType::new(DType::F32, [33])])
            .unwrap()
            .backend(),
        "interp"
    );
    let err = rfx::jit(|x: Tensor| x + 1.0)
        .on_backend("tpu")
        .call((&x,))
        .unwrap_err();
    assert!(err.to_string().contains("unknown backend `tpu`"), "{err}");
}

#[test]
fn every_arity_from_one_to_six() {
    let mut rng = StdRng::seed_from_u64(11);
    let ins: Vec<Array> = (0..6)
        .map(|_| Array::from_slice(&random_f32(&mut rng, 5, 0.5, 2.0)))
        .collect();
    check_against_interp(&rfx::jit(|a: Tensor| a.sqrt()), &ins[..1], 1e-6);
    check_against_interp(&rfx::jit(|a: Tensor, b: Tensor| a.atan2(b)), &ins[..2], 1e-5);
    check_against_interp(
        &rfx::jit(|a: Tensor, b: Tensor, c: Tensor| a.clamp(b, c)),
        &ins[..3],
        0.0,
    );
    check_against_interp(
        &rfx::jit(|a: Tensor, b: Tensor, c: Tensor, d: Tensor| (a.lt(b) & c.ge(d)).select(a, d)),
        &ins[..4],
        0.0,
    );
    check_against_interp(
        &rfx::jit(|a: Tensor, b: Tensor, c: Tensor, d: Tensor, e: Tensor| a * b + c / d - e),
        &ins[..5],
        1e-6,
    );
    // rfxJIT's PID example, with the gains as inputs.
    let pid = rfx::jit(
        |e: Tensor, i: Tensor, d: Tensor, kp: Tensor, ki: Tensor, kd: Tensor| {
            (kp * e + ki * i + kd * d).clamp(-1.0, 1.0)
        },
    );
    check_against_interp(&pid, &ins, 0.0);
    let out = pid
        .call((
            &[0.5f32],
            &[0.25f32],
            &[-1.0f32],
            &[0.5f32],
            &[0.1f32],
            &[0.05f32],
        ))
        .unwrap();
    assert_close(f32s(&out[0]), &[0.5 * 0.5 + 0.1 * 0.25 - 0.05], 1e-7);
}

#[test]
fn many_ops_match_the_interpreter_on_random_inputs() {
    let mut rng = StdRng::seed_from_u64(5);
    let x = Array::from_vec(vec![4, 6], random_f32(&mut rng, 24, -2.0, 2.0)).unwrap();
    let y = Array::from_vec(vec![6], random_f32(&mut rng, 6, 0.1, 3.0)).unwrap();
    let f = rfx::jit(|x: Tensor, y: Tensor| {
        let a = (2.0 * x - 1.0).abs().sqrt() + y.ln() - x.exp2() / 8.0;
        let b = x.max(y).min(1.5) + x.sign() * x.floor() - x.ceil() + x.round();
        let c = rfx::where_(x.gt(0.0) | x.eq(y), x.sigmoid(), -x.atan() + (1.0 / y).cos());
        let d = x.maximum(-x).minimum(y.tan()).fmod(0.75) + x.cast(DType::F64).cast(DType::F32);
        let e = (a + b + c + d).tanh().powf(2.0) + x.rsqrt().recip().ne(0.0).select(x.full_like(1.0), 0.0);
        let rows = e.sum(1);
        let cols = e.mean(0);
        let m = e.max_over(All) - e.min_over([0, 1]) + e.prod(1).sum(All) * 0.0;
        let r = x.reshape([6, 4]).sum(0).broadcast_to([2, 4]);
        (e, rows, cols, m, r)
    });
    check_against_interp(&f, &[x, y], 2e-5);
    let out = f.call(
        &[
            Array::filled(rfx::Scalar::F32(0.5), [4, 6]),
            Array::filled(rfx::Scalar::F32(1.0), [6]),
        ][..],
    );
    assert_eq!(out.unwrap().len(), 5);
}

#[test]
fn integer_and_bool_kernels() {
    let f = rfx::jit(|a: Tensor, b: Tensor| (a * 3 - b / 2, a.lt(b), (a % 4).max(1)));
    let a = [7i32, -3, 10, 0];
    let b = [5i32, -7, 4, 9];
    let out = f.call((&a, &b)).unwrap();
    let expect_0: Vec<i32> = a.iter().zip(&b).map(|(x, y)| x * 3 - y.div_euclid(2)).collect();
    assert_eq!(out[0].as_slice::<i32>(), Some(&expect_0[..]));
    assert_eq!(out[1].as_slice::<bool>(), Some(&[false, false, false, true][..]));
    assert_eq!(out[2].as_slice::<i32>(), Some(&[3, 1, 2, 1][..]));
}

#[test]
fn scalars_on_either_side() {
    let f = rfx::jit(|x: Tensor| (2.0 * x, 1.0 - x, 3.0 / x, -x + 0.5, x * 2.0f32));
    let x = [0.5f32, -2.0, 4.0];
    let out = f.call((&x,)).unwrap();
    let expect: [Vec<f32>; 5] = [
        x.iter().map(|v| 2.0 * v).collect(),
        x.iter().map(|v| 1.0 - v).collect(),
        x.iter().map(|v| 3.0 / v).collect(),
        x.iter().map(|v| -v + 0.5).collect(),
        x.iter().map(|v| v * 2.0).collect(),
    ];
    for (o, e) in out.iter().zip(&expect) {
        assert_eq!(f32s(o), &e[..]);
    }
}

#[test]
fn trace_errors_are_typed_not_panics() {
    let f = rfx::jit(|x: Tensor, y: Tensor| x + y);
    let err = f.call((&[1.0f32, 2.0, 3.0], &[1.0f32, 2.0])).unwrap_err();
    assert!(
        matches!(err, JitError::Trace(TraceError::Build { op: "add", .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("[3] and [2] do not broadcast"), "{err}");

    let err = f.call((&[1.0f32], &[1.0f64])).unwrap_err();
    assert!(err.to_string().contains("one dtype"), "{err}");

    let err = rfx::jit(|x: Tensor| x.sin()).call((&[1i32],)).unwrap_err();
    assert!(matches!(err, JitError::Trace(_)), "{err:?}");

    let err = rfx::jit(|x: Tensor| x & true).call((&[1.5f32],)).unwrap_err();
    assert!(
        matches!(err, JitError::Trace(TraceError::Literal { .. })),
        "{err:?}"
    );

    let err = f.call((&[1.0f32],)).unwrap_err();
    assert!(
        matches!(
            err,
            JitError::Call(CallError::Arity {
                expected: 2,
                found: 1,
                ..
            })
        ),
        "{err:?}"
    );
    // Nothing was compiled for the failed calls.
    assert_eq!(f.compile_count(), 0);
}

#[test]
fn transforms_compose_and_run_under_jit() {
    let mut rng = StdRng::seed_from_u64(21);
    let x: Vec<f64> = (0..4).map(|_| rng.random_range(-1.0..1.0)).collect();
    let t: Vec<f64> = (0..4).map(|_| rng.random_range(-1.0..1.0)).collect();

    // jvp of sin: tangent_out = cos(x) * t.
    let f = rfx::jit(rfx::jvp(|x: Tensor| x.sin()));
    assert_eq!(f.input_names(), ["x", "tangent_x"]);
    let out = f.call((&x, &t)).unwrap();
    for i in 0..4 {
        assert!((out[0].as_slice::<f64>().unwrap()[i] - x[i].sin()).abs() < 1e-12);
        assert!((out[1].as_slice::<f64>().unwrap()[i] - x[i].cos() * t[i]).abs() < 1e-12);
    }

    // Jacobian of x * 3 + sin(x) (reverse mode, seeded with an identity built in the kernel).
    let j = rfx::jit(rfx::jacobian(|x: Tensor| x * 3.0 + x.sin()));
    let out = j.call((&x,)).unwrap();
    let jac = out[1].as_slice::<f64>().unwrap();
    assert_eq!(out[1].shape(), &Shape::new([4, 4]));
    for r in 0..4 {
        for c in 0..4 {
            let expected = if r == c { 3.0 + x[r].cos() } else { 0.0 };
            assert!((jac[r * 4 + c] - expected).abs() < 1e-12, "jac[{r},{c}]");
        }
    }
    // The bound handle computes the same.
    let mut bound = j.bind(&[TensorType::new(DType::F64, [4])]).unwrap();
    let (mut value, mut jac2) = (vec![0.0f64; 4], vec![0.0f64; 16]);
    bound
        .run_slices([&x[..]], [&mut value[..], &mut jac2[..]])
        .unwrap();
    assert_eq!(jac2, jac);
    // So do the real-time arguments.
    let mut args = bound.args().unwrap();
    args.input_mut::<f64>(0).unwrap().copy_from_slice(&x);
    bound.run_args(&mut args).unwrap();
    assert_eq!(args.output::<f64>(1), Some(jac));
    assert_eq!(args.output::<f64>(0), Some(&value[..]));

    // More output than input elements: forward mode, laid out by a transpose.
    let jf = rfx::jit(rfx::jacobian(|x: Tensor| (x.sin(), x * 2.0, x.exp())));
    let out = jf.call((&x,)).unwrap();
    assert_eq!(out.len(), 6, "three values, then three Jacobians");
    for (k, derivative) in [
        (3, &(|v: f64| v.cos()) as &dyn Fn(f64) -> f64),
        (4, &|_| 2.0),
        (5, &|v: f64| v.exp()),
    ] {
        assert_eq!(out[k].shape(), &Shape::new([4, 4]));
        let jac = out[k].as_slice::<f64>().unwrap();
        for r in 0..4 {
            for c in 0..4 {
                let expected = if r == c { derivative(x[r]) } else { 0.0 };
                assert!(
                    (jac[r * 4 + c] - expected).abs() < 1e-12,
                    "output {k}: jac[{r},{c}]"
                );
            }
        }
    }

    // A transform of the Jacobian: its kernel takes only x, so transforms compose. The jvp of
    // the Jacobian of x * 3 + sin(x) along t is diag(-sin(x) t).
    let jj = rfx::jit(rfx::jvp(rfx::jacobian(|x: Tensor| x * 3.0 + x.sin())));
    assert_eq!(jj.input_names(), ["x", "tangent_x"]);
    let out = jj.call((&x, &t)).unwrap();
    assert_eq!(out.len(), 4, "value, Jacobian, then their tangents");
    let tangent = out[3].as_slice::<f64>().unwrap();
    assert_eq!(out[3].shape(), &Shape::new([4, 4]));
    for r in 0..4 {
        for c in 0..4 {
            let expected = if r == c { -x[r].sin() * t[r] } else { 0.0 };
            assert!((tangent[r * 4 + c] - expected).abs() < 1e-12, "[{r},{c}]");
        }
    }

    // hvp of sum(x^3): H = diag(6x), so hvp = 6 x t.
    let h = rfx::jit(rfx::hvp(|x: Tensor| (x * x * x).sum(All)));
    let out = h.call((&x, &t)).unwrap();
    for i in 0..4 {
        assert!((out[0].as_slice::<f64>().unwrap()[i] - 6.0 * x[i] * t[i]).abs() < 1e-12);
    }

    // Hessian of sum(x^3): value, gradient 3x² and diag(6x) from one kernel.
    let h = rfx::jit(rfx::hessian(|x: Tensor| (x * x * x).sum(All)));
    let out = h.call((&x,)).unwrap();
    assert_eq!(out.len(), 3, "value, gradient, Hessian");
    assert_eq!(out[2].shape(), &Shape::new([4, 4]));
    let hess = out[2].as_slice::<f64>().unwrap();
    for r in 0..4 {
        assert!((out[1].as_slice::<f64>().unwrap()[r] - 3.0 * x[r] * x[r]).abs() < 1e-12);
        for c in 0..4 {
            let expected = if r == c { 6.0 * x[r] } else { 0.0 };
            assert!((hess[r * 4 + c] - expected).abs() < 1e-12, "hess[{r},{c}]");
        }
    }

    // grad of grad on a scalar input: d²/dx² x^3 = 6x; grad wrt the second input.
    let gg = rfx::jit(rfx::grad(rfx::grad(|x: Tensor| x * x * x)));
    let out = gg
        .call(vec![rfx::Arg::from(&Array::scalar(rfx::Scalar::F64(0.75)))])
        .unwrap();
    assert!((out[0].as_slice::<f64>().unwrap()[0] - 4.5).abs() < 1e-12);
    let gy = rfx::jit(rfx::grad(|x: Tensor, y: Tensor| (x * y.sin()).sum(All)).wrt(&[1]));
    let out = gy.call((&x, &t)).unwrap();
    for i in 0..4 {
        assert!((out[0].as_slice::<f64>().unwrap()[i] - x[i] * t[i].cos()).abs() < 1e-12);
    }
    let err = rfx::jit(rfx::grad(|x: Tensor| x * 2.0)).call((&x,)).unwrap_err();
    assert!(matches!(err, JitError::Autodiff(_)), "{err:?}");
}

#[test]
fn hessian_of_a_two_input_cost_matches_closed_forms_on_the_cpu() {
    // cost(x, u) = Σ x² u + sin(x) u²: per element ∂²/∂x² = 2u - sin(x) u²,
    // ∂²/∂x∂u = 2x + 2 cos(x) u, ∂²/∂u² = 2 sin(x); every block is diagonal.
    let cost = |x: Tensor, u: Tensor| (x * x * u + x.sin() * u * u).sum(All);
    let h = rfx::jit(rfx::hessian(cost).wrt(&[0, 1]));
    let mut rng = StdRng::seed_from_u64(71);
    let n = 5;
    let x: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    let u: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    let out = h.call((&x, &u)).unwrap();
    assert_eq!(out.len(), 7, "value, two gradients, four Hessian blocks");
    let value: f64 = (0..n)
        .map(|i| x[i] * x[i] * u[i] + x[i].sin() * u[i] * u[i])
        .sum();
    assert!((out[0].as_slice::<f64>().unwrap()[0] - value).abs() < 1e-12);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
    for i in 0..n {
        let gx = 2.0 * x[i] * u[i] + x[i].cos() * u[i] * u[i];
        let gu = x[i] * x[i] + 2.0 * x[i].sin() * u[i];
        assert!(close(out[1].as_slice::<f64>().unwrap()[i], gx), "grad x[{i}]");
        assert!(close(out[2].as_slice::<f64>().unwrap()[i], gu), "grad u[{i}]");
    }
    let diagonals: [&dyn Fn(usize) -> f64; 4] = [
        &|i| 2.0 * u[i] - x[i].sin() * u[i] * u[i],
        &|i| 2.0 * x[i] + 2.0 * x[i].cos() * u[i],
        &|i| 2.0 * x[i] + 2.0 * x[i].cos() * u[i],
        &|i| 2.0 * x[i].sin(),
    ];
    for (block, diagonal) in diagonals.iter().enumerate() {
        let got = out[3 + block].as_slice::<f64>().unwrap();
        assert_eq!(out[3 + block].shape(), &Shape::new([n, n]));
        for r in 0..n {
            for c in 0..n {
                let want = if r == c { diagonal(r) } else { 0.0 };
                assert!(
                    close(got[r * n + c], want),
                    "block {block} [{r},{c}]: {}",
                    got[r * n + c]
                );
            }
        }
    }
    // f32 inputs compile too and agree with the interpreter.
    let x32: Vec<f32> = x.iter().map(|v| *v as f32).collect();
    let u32: Vec<f32> = u.iter().map(|v| *v as f32).collect();
    let inputs = [
        Array::from_vec(vec![n], x32).unwrap(),
        Array::from_vec(vec![n], u32).unwrap(),
    ];
    check_against_interp(&h, &inputs, 1e-5);
}

#[test]
fn bound_calls_match_easy_calls_and_check_arguments() {
    let f = rfx::jit(|x: Tensor, y: Tensor| ((x * 2.0).sin() + y, x * y));
    let ty = TensorType::new(DType::F32, [8]);
    let mut bound = f.bind(&[ty.clone(), ty.clone()]).unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    let x = random_f32(&mut rng, 8, -3.0, 3.0);
    let y = random_f32(&mut rng, 8, -3.0, 3.0);
    let easy = f.call((&x, &y)).unwrap();
    let (mut a, mut b) = (vec![0.0f32; 8], vec![0.0f32; 8]);
    bound
        .run_slices([&x[..], &y[..]], [&mut a[..], &mut b[..]])
        .unwrap();
    assert_eq!(f32s(&easy[0]), &a[..]);
    assert_eq!(f32s(&easy[1]), &b[..]);
    assert_eq!(f.compile_count(), 1);

    let short = [0.0f32; 3];
    let err = bound
        .run_slices([&x[..], &short[..]], [&mut a[..], &mut b[..]])
        .unwrap_err();
    assert!(
        matches!(err, rfx_runtime::RuntimeError::Call(CallError::Shape { .. })),
        "{err:?}"
    );
    let xd: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let (mut ad, mut bd) = (vec![0.0f64; 8], vec![0.0f64; 8]);
    let err = bound
        .run_slices([&xd[..], &xd[..]], [&mut ad[..], &mut bd[..]])
        .unwrap_err();
    assert!(
        matches!(err, rfx_runtime::RuntimeError::Call(CallError::DType { .. })),
        "{err:?}"
    );
    let err = bound.run_slices([&x[..]], [&mut a[..], &mut b[..]]).unwrap_err();
    assert!(
        matches!(err, rfx_runtime::RuntimeError::Call(CallError::Arity { .. })),
        "{err:?}"
    );
}

#[test]
fn shared_by_eight_threads_with_mixed_shapes() {
    let f = rfx::jit(|x: Tensor, y: Tensor| (x * 2.0).sin() + y * y);
    let sizes = [1usize, 3, 8, 17];
    std::thread::scope(|scope| {
        for thread in 0..8u64 {
            let f = &f;
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(100 + thread);
                for call in 0..40 {
                    let n = sizes[(call + thread as usize) % sizes.len()];
                    let x = random_f32(&mut rng, n, -2.0, 2.0);
                    let y = random_f32(&mut rng, n, -2.0, 2.0);
                    let out = f.call((&x, &y)).unwrap();
                    let expected: Vec<f32> = x.iter().zip(&y).map(|(a, b)| (a * 2.0).sin() + b * b).collect();
                    assert_close(f32s(&out[0]), &expected, 1e-6);
                }
            });
        }
    });
    assert_eq!(f.compile_count(), sizes.len());
}

#[test]
fn captured_constants_need_the_opt_in() {
    let offset = 1.5f32;
    let f = rfx::jit(rfx::Func::with_constants(move |x: Tensor| x + offset).named(&["pos"]));
    assert_eq!(f.input_names(), ["pos"]);
    let out = f.call((&[1.0f32, 2.0],)).unwrap();
    assert_eq!(f32s(&out[0]), &[2.5f32, 3.5]);
    let kernel = f.trace(&[TensorType::new(DType::F32, [2])]).unwrap();
    assert!(kernel.to_string().contains("const 1.5"), "{kernel}");
}

#[test]
fn hir_kernels_jit_with_fingerprint_keys() {
    let kernel = rfx_ir::hir::parse(
        "kernel k { %x = input x : f32[3] %two = const 2.0 : f32[] %y = mul %x, %two : f32[3] output y = %y }",
    )
    .unwrap();
    let f = rfx::jit_kernel(kernel);
    let out = f.call((&[1.0f32, 2.0, 3.0],)).unwrap();
    assert_eq!(f32s(&out[0]), &[2.0f32, 4.0, 6.0]);
    let err = f.call((&[1.0f32, 2.0],)).unwrap_err();
    assert!(matches!(err, JitError::Call(CallError::Shape { .. })), "{err:?}");
    let miss = f.last_miss().unwrap();
    assert!(miss.key.kernel.is_some());
}

/// `F P Fᵀ + Q` (a Kalman covariance predict) written with `t()` and broadcast products, and an
/// identity built from `indices`, against the same products computed by hand in f64.
#[test]
fn transposes_and_indices_trace_and_run() {
    const N: usize = 4;
    // (N, N, 1) * (1, N, N) summed over the middle axis.
    fn matmul(a: Tensor, b: Tensor) -> Tensor {
        (a.reshape([N, N, 1]) * b.reshape([1, N, N])).sum(&[1][..])
    }
    let n = N;
    let predict = rfx::jit(|f: Tensor, p: Tensor, q: Tensor| {
        let eye = f.indices(0).eq(f.indices(1)).cast(DType::F64);
        (matmul(matmul(f, p), f.t()) + q, eye, f.transpose(&[1, 0]))
    });
    let mut rng = StdRng::seed_from_u64(11);
    let mut draw = |k: usize| -> Vec<f64> { (0..k).map(|_| rng.random_range(-1.0..1.0)).collect() };
    let (f, p, q) = (draw(n * n), draw(n * n), draw(n * n));
    let m = |v: &[f64]| Array::from_vec([n, n], v.to_vec()).unwrap();
    let out = predict.call((&m(&f), &m(&p), &m(&q))).unwrap();
    let got = out[0].as_slice::<f64>().unwrap();
    for i in 0..n {
        for j in 0..n {
            let mut want = q[i * n + j];
            for k in 0..n {
                for l in 0..n {
                    want += f[i * n + k] * p[k * n + l] * f[j * n + l];
                }
            }
            assert!(
                (got[i * n + j] - want).abs() < 1e-12,
                "[{i},{j}]: {} vs {want}",
                got[i * n + j]
            );
            let eye = out[1].as_slice::<f64>().unwrap()[i * n + j];
            assert_eq!(eye, f64::from(u8::from(i == j)), "eye[{i},{j}]");
            assert_eq!(
                out[2].as_slice::<f64>().unwrap()[i * n + j],
                f[j * n + i],
                "fᵀ[{i},{j}]"
            );
        }
    }
}

/// A Kalman predict whose transition and process-noise matrices are constants of the kernel
/// (`rfx::constant`), not inputs: `F x` and `F P Fᵀ + Q` against the products computed by hand
/// in f64; and a gradient through a constant weight vector (`d/dx sum(w x²) = 2 w x`).
#[test]
fn constant_matrices_are_part_of_the_kernel() {
    const N: usize = 4;
    fn matmul(a: Tensor, b: Tensor) -> Tensor {
        (a.reshape([N, N, 1]) * b.reshape([1, N, N])).sum(&[1][..])
    }
    let dt = 0.05;
    let f: Vec<f64> = vec![
        1.0, 0.0, dt, 0.0, //
        0.0, 1.0, 0.0, dt, //
        0.0, 0.0, 1.0, 0.0, //
        0.0, 0.0, 0.0, 1.0,
    ];
    let q: Vec<f64> = (0..N * N)
        .map(|i| {
            if i % (N + 1) == 0 {
                1e-3 * (1 + i) as f64
            } else {
                0.0
            }
        })
        .collect();
    let (f_array, q_array) = (
        Array::from_vec([N, N], f.clone()).unwrap(),
        Array::from_vec([N, N], q.clone()).unwrap(),
    );
    let predict = rfx::jit(
        rfx::Func::with_constants(move |x: Tensor, p: Tensor| {
            let (f, q) = (rfx::constant(&f_array), rfx::constant(&q_array));
            ((f * x).sum(&[1][..]), matmul(matmul(f, p), f.t()) + q)
        })
        .named(&["x", "p"]),
    );
    assert_eq!(predict.input_names(), ["x", "p"]);
    let kernel = predict
        .trace(&[
            TensorType::new(DType::F64, [N]),
            TensorType::new(DType::F64, [N, N]),
        ])
        .unwrap();
    assert_eq!(kernel.inputs().count(), 2, "{kernel}");
    assert!(kernel.to_string().contains("literal [1.0, 0.0, 0.05"), "{kernel}");

    let mut rng = StdRng::seed_from_u64(23);
    let mut draw = |k: usize| -> Vec<f64> { (0..k).map(|_| rng.random_range(-1.0..1.0)).collect() };
    for _ in 0..3 {
        let (x, p) = (draw(N), draw(N * N));
        let out = predict
            .call((
                &Array::from_vec([N], x.clone()).unwrap(),
                &Array::from_vec([N, N], p.clone()).unwrap(),
            ))
            .unwrap();
        let (x_next, p_next) = (
            out[0].as_slice::<f64>().unwrap(),
            out[1].as_slice::<f64>().unwrap(),
        );
        for i in 0..N {
            let want: f64 = (0..N).map(|k| f[i * N + k] * x[k]).sum();
            assert!(
                (x_next[i] - want).abs() < 1e-14,
                "x'[{i}]: {} vs {want}",
                x_next[i]
            );
            for j in 0..N {
                let mut want = q[i * N + j];
                for k in 0..N {
                    for l in 0..N {
                        want += f[i * N + k] * p[k * N + l] * f[j * N + l];
                    }
                }
                let got = p_next[i * N + j];
                assert!((got - want).abs() < 1e-13, "P'[{i},{j}]: {got} vs {want}");
            }
        }
    }

    let g = rfx::jit(rfx::grad(|x: Tensor| {
        let w = rfx::constant(&Array::from_vec([3], vec![0.5f64, -2.0, 4.0]).unwrap());
        (w * x * x).sum(All)
    }));
    let out = g.call((&[1.5f64, -0.25, 3.0],)).unwrap();
    assert_eq!(out[0].as_slice::<f64>(), Some(&[1.5, 1.0, 24.0][..]));
}
