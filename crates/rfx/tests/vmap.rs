//! `rfx::vmap` end to end on the CPU backend: batched kinematics and Jacobians against closed
//! forms, batched costs against the per-example kernel under the `f64` interpreter, the cache
//! per batch size, and the typed errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::{AdError, Array, JitError, Tensor, TensorType};
use rfx_ir::interp::{Mode, run_hir};

fn f64s(a: &Array) -> &[f64] {
    a.as_slice::<f64>().expect("an f64 array")
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

const L1: f64 = 0.7;
const L2: f64 = 0.45;

/// Two-link planar arm: the end effector `(x, y)` of joint angles `q1`, `q2`.
fn arm(q1: Tensor, q2: Tensor) -> (Tensor, Tensor) {
    let q12 = q1 + q2;
    (q1.cos() * L1 + q12.cos() * L2, q1.sin() * L1 + q12.sin() * L2)
}

#[test]
fn batched_arm_kinematics_and_jacobians_match_closed_forms() {
    let mut rng = StdRng::seed_from_u64(21);
    let n = 1000;
    let q1: Vec<f64> = (0..n).map(|_| rng.random_range(-3.0..3.0)).collect();
    let q2: Vec<f64> = (0..n).map(|_| rng.random_range(-3.0..3.0)).collect();
    let jac = rfx::jit(rfx::vmap(rfx::jacobian(arm).wrt(&[0, 1])));
    let out = jac.call((&q1, &q2)).expect("runs");
    let names: Vec<String> = jac
        .trace(&[
            TensorType::new(rfx::DType::F64, [n]),
            TensorType::new(rfx::DType::F64, [n]),
        ])
        .expect("traces")
        .outputs()
        .iter()
        .map(|o| o.name.clone())
        .collect();
    assert_eq!(
        names,
        [
            "out0",
            "out1",
            "jac_out0_x",
            "jac_out0_y",
            "jac_out1_x",
            "jac_out1_y"
        ]
    );
    let (mut x, mut y, mut dxq1, mut dxq2, mut dyq1, mut dyq2) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for (a, b) in q1.iter().zip(&q2) {
        let (s1, c1, s12, c12) = (a.sin(), a.cos(), (a + b).sin(), (a + b).cos());
        x.push(L1 * c1 + L2 * c12);
        y.push(L1 * s1 + L2 * s12);
        dxq1.push(-L1 * s1 - L2 * s12);
        dxq2.push(-L2 * s12);
        dyq1.push(L1 * c1 + L2 * c12);
        dyq2.push(L2 * c12);
    }
    for (got, (what, want)) in out.iter().zip([
        ("x", &x),
        ("y", &y),
        ("dx/dq1", &dxq1),
        ("dx/dq2", &dxq2),
        ("dy/dq1", &dyq1),
        ("dy/dq2", &dyq2),
    ]) {
        assert_eq!(got.shape().dims(), &[n], "{what}");
        assert_close(what, f64s(got), want, 1e-14);
    }
}

/// One example's cost: `k · Σ (x - w)² + log(1 + Σ exp(x))` over a 6-vector `x`, with a
/// shared gain `k` and a per-example target `w`.
fn cost(x: Tensor, w: Tensor, k: Tensor) -> Tensor {
    let d = x - w;
    (d * d).sum_all() * k + ((x.exp()).sum_all() + 1.0).log()
}

#[test]
fn batched_costs_match_the_example_kernel_at_every_batch_size() {
    let mut rng = StdRng::seed_from_u64(22);
    let f = rfx::jit(rfx::vmap(rfx::value_and_grad(cost)).in_axes(&[Some(1), Some(0), None]));
    let example = rfx::jit(rfx::value_and_grad(cost));
    let example_kernel = example
        .trace(&[
            TensorType::new(rfx::DType::F64, [6]),
            TensorType::new(rfx::DType::F64, [6]),
            TensorType::new(rfx::DType::F64, []),
        ])
        .expect("traces");
    let k = rfx::array([], vec![0.8f64]).expect("k");
    for (batch, compiles) in [(1usize, 1), (5, 2), (64, 3), (5, 3)] {
        // x: [6, batch] (the batch on axis 1), w: [batch, 6].
        let xs: Vec<f64> = (0..6 * batch).map(|_| rng.random_range(-2.0..2.0)).collect();
        let ws: Vec<f64> = (0..6 * batch).map(|_| rng.random_range(-1.0..1.0)).collect();
        let x = rfx::array([6, batch], xs.clone()).expect("x");
        let w = rfx::array([batch, 6], ws.clone()).expect("w");
        let out = f.call((&x, &w, &k)).expect("runs");
        assert_eq!(out[0].shape().dims(), &[batch]);
        assert_eq!(out[1].shape().dims(), &[batch, 6]);
        for b in 0..batch {
            let xb = rfx::array([6], (0..6).map(|i| xs[i * batch + b]).collect()).expect("x_b");
            let wb = rfx::array([6], ws[b * 6..b * 6 + 6].to_vec()).expect("w_b");
            let want = run_hir(&example_kernel, &[xb.view(), wb.view(), k.view()], Mode::Oracle)
                .expect("interpreter");
            assert_close(
                &format!("value, example {b}"),
                &f64s(&out[0])[b..b + 1],
                f64s(&want[0]),
                1e-14,
            );
            assert_close(
                &format!("gradient, example {b}"),
                &f64s(&out[1])[b * 6..b * 6 + 6],
                f64s(&want[1]),
                1e-14,
            );
        }
        // One compile per batch size; the second call with 5 examples replays.
        assert_eq!(f.compile_count(), compiles, "batch {batch}");
    }
}

#[test]
fn vmap_arguments_that_do_not_fit_are_typed_errors() {
    let f = rfx::jit(rfx::vmap(|x: Tensor, y: Tensor| x * y));
    let err = f
        .call((&[1.0f32, 2.0, 3.0], &[1.0f32, 2.0]))
        .expect_err("3 against 2 examples");
    assert!(
        matches!(&err, JitError::BatchSize { name, found: 2, first, expected: 3 } if name == "y" && first == "x"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "`vmap`: input `y` has 2 example(s) along its batch axis, but `x` has 3"
    );
    assert!(err.is_user_error());

    let scalar = rfx::array([], vec![1.0f32]).expect("scalar");
    let err = f.call((&scalar, &[1.0f32])).expect_err("a scalar has no axis 0");
    assert!(
        matches!(&err, JitError::BatchAxisMissing { name, axis: 0, .. } if name == "x"),
        "{err:?}"
    );

    let none = rfx::jit(rfx::vmap(|x: Tensor, y: Tensor| x * y).in_axes(&[None, None]));
    let err = none.call((&[1.0f32], &[1.0f32])).expect_err("nothing batched");
    assert!(
        matches!(err, JitError::Autodiff(AdError::NothingBatched)),
        "{err:?}"
    );

    let short = rfx::jit(rfx::vmap(|x: Tensor, y: Tensor| x * y).in_axes(&[Some(0)]));
    let err = short
        .call((&[1.0f32], &[1.0f32]))
        .expect_err("one axis for two inputs");
    assert!(
        matches!(
            err,
            JitError::Autodiff(AdError::BatchAxesCount {
                expected: 2,
                found: 1
            })
        ),
        "{err:?}"
    );
    assert_eq!(f.compile_count(), 0);
}

#[test]
fn nested_vmaps_map_two_batch_axes() {
    // The outer batch on axis 1 of `x`, the inner on axis 0 of what is left: an outer product
    // of a dot product, each example `Σ_i x[i] y[i]` over the trailing axis.
    let f =
        rfx::jit(rfx::vmap(rfx::vmap(|x: Tensor, y: Tensor| (x * y).sum_all())).in_axes(&[Some(1), None]));
    let mut rng = StdRng::seed_from_u64(23);
    let xs: Vec<f64> = (0..4 * 3 * 5).map(|_| rng.random_range(-1.0..1.0)).collect();
    let ys: Vec<f64> = (0..4 * 5).map(|_| rng.random_range(-1.0..1.0)).collect();
    // x: [4, 3, 5] with the outer batch (3) on axis 1; y: [4, 5] shared by the outer batch,
    // its axis 0 (4) the inner batch.
    let x = rfx::array([4, 3, 5], xs.clone()).expect("x");
    let y = rfx::array([4, 5], ys.clone()).expect("y");
    let out = f.call((&x, &y)).expect("runs");
    assert_eq!(out[0].shape().dims(), &[3, 4]);
    let mut want = vec![];
    for o in 0..3 {
        for i in 0..4 {
            want.push(
                (0..5)
                    .map(|k| xs[(i * 3 + o) * 5 + k] * ys[i * 5 + k])
                    .sum::<f64>(),
            );
        }
    }
    assert_close("dots", f64s(&out[0]), &want, 1e-15);
}

#[test]
fn a_mapped_text_kernel_runs_through_the_real_time_handle() {
    // One example's PID step in rfx's HIR text, mapped over 8 loops sharing their gains; the
    // bound handle's in-place arguments against the per-example kernel in the interpreter.
    let text = "\
kernel pid {
  %e = input e : f32[]
  %i = input i : f32[]
  %d = input d : f32[]
  %k = input k : f32[3]
  %kp = literal [1.0, 0.0, 0.0] : f32[3]
  %ki = literal [0.0, 1.0, 0.0] : f32[3]
  %kd = literal [0.0, 0.0, 1.0] : f32[3]
  %pe = mul %k, %kp : f32[3]
  %ie = mul %k, %ki : f32[3]
  %de = mul %k, %kd : f32[3]
  %p = sum %pe axes [0] : f32[]
  %g = sum %ie axes [0] : f32[]
  %h = sum %de axes [0] : f32[]
  %u1 = mul %p, %e : f32[]
  %u2 = mul %g, %i : f32[]
  %u3 = mul %h, %d : f32[]
  %u12 = add %u1, %u2 : f32[]
  %u = add %u12, %u3 : f32[]
  %lo = const -1.0 : f32[]
  %hi = const 1.0 : f32[]
  %c = clamp %u, %lo, %hi : f32[]
  output u = %c
}
";
    let kernel = rfx_ir::hir::parse(text).expect("kernel");
    let batch = 8;
    let f = rfx::jit(rfx::vmap(rfx::KernelSource::new(kernel.clone())).in_axes(&[
        Some(0),
        Some(0),
        Some(0),
        None,
    ]));
    let f32t = |dims: &[usize]| TensorType::new(rfx::DType::F32, dims.to_vec());
    let mut bound = f
        .bind(&[f32t(&[batch]), f32t(&[batch]), f32t(&[batch]), f32t(&[3])])
        .expect("binds");
    let mut args = bound.args().expect("arguments");
    let mut rng = StdRng::seed_from_u64(24);
    let mut columns: Vec<Vec<f32>> = Vec::new();
    for input in 0..3 {
        let values: Vec<f32> = (0..batch).map(|_| rng.random_range(-2.0..2.0)).collect();
        args.input_mut::<f32>(input)
            .expect("f32")
            .copy_from_slice(&values);
        columns.push(values);
    }
    let gains = [0.9f32, 0.3, 0.05];
    args.input_mut::<f32>(3).expect("f32").copy_from_slice(&gains);
    bound.run_args(&mut args).expect("runs");
    let got = args.output::<f32>(0).expect("f32").to_vec();
    for b in 0..batch {
        let scalars: Vec<Array> = (0..3)
            .map(|i| rfx::array([], vec![columns[i][b]]).expect("scalar"))
            .collect();
        let k = rfx::array([3], gains.to_vec()).expect("gains");
        let views: Vec<_> = scalars.iter().chain([&k]).map(Array::view).collect();
        let want = run_hir(&kernel, &views, Mode::Native).expect("interpreter");
        assert_eq!(
            got[b].to_bits(),
            want[0].as_slice::<f32>().expect("f32")[0].to_bits(),
            "loop {b}"
        );
    }
}

#[test]
fn out_axes_place_the_batch_in_each_output() {
    // A batch of 2-vectors scaled by a shared gain: `y` with the examples as its columns
    // (`[2, batch]`), the doubled gain once (no batch axis), and the sum per example on axis 0.
    let f = |x: Tensor, k: Tensor| (x * k, k + k, x.sum(rfx::All));
    let mapped = rfx::jit(
        rfx::vmap(f)
            .in_axes(&[Some(0), None])
            .out_axes(&[Some(1), None, Some(0)]),
    );
    let batch = 5;
    let xs: Vec<f64> = (0..2 * batch).map(|i| (i as f64 * 0.77).sin() * 3.0).collect();
    let x = Array::from_vec([batch, 2], xs.clone()).expect("x");
    let k = 1.25f64;
    let gain = Array::from_vec([], vec![k]).expect("scalar");
    let out = mapped.call((&x, &gain)).expect("call");
    assert_eq!(out[0].shape().dims(), &[2, batch]);
    for b in 0..batch {
        for j in 0..2 {
            assert_eq!(f64s(&out[0])[j * batch + b], xs[2 * b + j] * k, "y[{j}, {b}]");
        }
        assert_eq!(f64s(&out[2])[b], xs[2 * b] + xs[2 * b + 1], "sum {b}");
    }
    assert_eq!(out[1].shape().dims(), &[] as &[usize]);
    assert_eq!(f64s(&out[1]), &[k + k]);

    // An output the batch reaches cannot drop its batch axis; `out_axes` needs one entry per
    // output.
    let bad = rfx::jit(
        rfx::vmap(f)
            .in_axes(&[Some(0), None])
            .out_axes(&[None, None, None]),
    );
    let err = bad.call((&x, &gain)).expect_err("y depends on x");
    assert!(
        matches!(&err, JitError::Autodiff(AdError::BatchedOutput { name }) if name == "out0"),
        "{err:?}"
    );
    let short = rfx::jit(rfx::vmap(f).out_axes(&[Some(0)]));
    let err = short
        .call((&x, &Array::from_vec([batch], vec![k; batch]).expect("k")))
        .expect_err("three outputs");
    assert!(
        matches!(
            err,
            JitError::Autodiff(AdError::OutAxesCount {
                expected: 3,
                found: 1
            })
        ),
        "{err:?}"
    );
}
