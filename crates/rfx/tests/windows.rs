//! Windows, single elements, paddings and concatenations of traced tensors end to end: a
//! state vector taken apart inside one kernel, against hand-computed values; their gradients
//! against closed forms; a batched map over them; and the typed errors of bad windows.

use crate::common;

use common::{f64s, type_error};
use rfx::{All, Array, Tensor};
use rfx_ir::TypeError;

/// A two-link planar arm with state `[θ1, θ2, ω1, ω2]`: the tip position and the kinetic-like
/// cost `½|ω|² + tip_y`, all read from the one state input.
fn arm(state: Tensor) -> (Tensor, Tensor) {
    let (t1, t2) = (state.index_axis(0, 0), state.index_axis(0, 1));
    let omega = state.slice_axis(0, 2..);
    let a12 = t1 + t2;
    let x = t1.cos() + 0.5 * a12.cos();
    let y = t1.sin() + 0.5 * a12.sin();
    let tip = rfx::concat(&[x.reshape([1]), y.reshape([1])], 0);
    let cost = 0.5 * (omega * omega).sum(All) + y;
    (tip, cost)
}

#[test]
fn a_state_vector_taken_apart_in_one_kernel() {
    let state = [0.3f64, -0.7, 1.5, -2.0];
    let f = rfx::jit(arm);
    let out = f.call((&state,)).expect("call");
    let (t1, t2) = (state[0], state[1]);
    let x = t1.cos() + 0.5 * (t1 + t2).cos();
    let y = t1.sin() + 0.5 * (t1 + t2).sin();
    let tip = f64s(&out[0]);
    assert!(
        (tip[0] - x).abs() < 1e-15 && (tip[1] - y).abs() < 1e-15,
        "{tip:?}"
    );
    let cost = 0.5 * (1.5f64 * 1.5 + 2.0 * 2.0) + y;
    assert!((f64s(&out[1])[0] - cost).abs() < 1e-14);

    // ∂cost/∂state = [cos θ1 + ½cos(θ1+θ2), ½cos(θ1+θ2), ω1, ω2]: the windows' adjoints land
    // in their places of the one state gradient.
    let g = rfx::jit(rfx::grad(|s: Tensor| arm(s).1));
    let out = g.call((&state,)).expect("grad");
    let c12 = (t1 + t2).cos();
    let want = [t1.cos() + 0.5 * c12, 0.5 * c12, 1.5, -2.0];
    for (got, want) in f64s(&out[0]).iter().zip(want) {
        assert!((got - want).abs() < 1e-14, "{got} vs {want}");
    }

    // A batch of states, one kernel: each row is the single-state result.
    let batch: Vec<f64> = (0..5 * 4).map(|i| (i as f64 * 0.37).sin() * 2.0).collect();
    let batched = rfx::jit(rfx::vmap(|s: Tensor| arm(s).1));
    let out = batched
        .call((&Array::from_vec([5, 4], batch.clone()).expect("array"),))
        .expect("vmap");
    for row in 0..5 {
        let one = f.call((&batch[4 * row..4 * row + 4],)).expect("one state");
        assert_eq!(
            f64s(&out[0])[row].to_bits(),
            f64s(&one[1])[0].to_bits(),
            "row {row}"
        );
    }
}

#[test]
fn concat_and_pad_keep_every_bit_of_their_parts() {
    let f = rfx::jit(|a: Tensor, b: Tensor| (rfx::concat(&[a, b, a], 0), b.pad(&[(2, 1)])));
    let a = [-0.0f32, f32::NAN];
    let b = [1.5f32, -0.0, f32::INFINITY];
    let out = f.call((&a, &b)).expect("call");
    let cat = out[0].as_slice::<f32>().expect("f32");
    let want = [-0.0f32, f32::NAN, 1.5, -0.0, f32::INFINITY, -0.0, f32::NAN];
    assert_eq!(cat.len(), want.len());
    for (got, want) in cat.iter().zip(want) {
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "{cat:?}"
        );
    }
    let padded = out[1].as_slice::<f32>().expect("f32");
    let want = [0.0f32, 0.0, 1.5, -0.0, f32::INFINITY, 0.0];
    assert_eq!(
        padded.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    // Concatenated matrices along the second axis.
    let g = rfx::jit(|a: Tensor, b: Tensor| rfx::concat(&[a, b], 1));
    let a = Array::from_vec([2, 1], vec![1.0f64, 2.0]).expect("array");
    let b = Array::from_vec([2, 2], vec![3.0f64, 4.0, 5.0, 6.0]).expect("array");
    let out = g.call((&a, &b)).expect("call");
    assert_eq!(f64s(&out[0]), &[1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);
}

#[test]
fn bad_windows_are_typed_errors() {
    let x = [1.0f32, 2.0, 3.0];
    let past_end = rfx::jit(|x: Tensor| x.slice_axis(0, 1..5));
    assert!(matches!(
        type_error(past_end.call((&x,)).expect_err("past the end")),
        TypeError::Slice { .. }
    ));
    let element = rfx::jit(|x: Tensor| x.index_axis(0, 3));
    assert!(matches!(
        type_error(element.call((&x,)).expect_err("no element 3")),
        TypeError::Slice { .. }
    ));
    let axis = rfx::jit(|x: Tensor| x.slice_axis(1, ..));
    assert_eq!(
        type_error(axis.call((&x,)).expect_err("no axis 1")),
        TypeError::AxisOutOfRange { axis: 1, rank: 1 }
    );
    let rank = rfx::jit(|x: Tensor| x.pad(&[(1, 1), (0, 0)]));
    assert!(matches!(
        type_error(rank.call((&x,)).expect_err("two widths for one axis")),
        TypeError::Pad { .. }
    ));
    let parts = rfx::jit(|x: Tensor| rfx::concat(&[x, x.reshape([1, 3])], 0));
    assert!(matches!(
        type_error(parts.call((&x,)).expect_err("ranks differ")),
        TypeError::Pad { .. }
    ));
    // An empty range is an empty window, as in NumPy.
    let empty = rfx::jit(|x: Tensor| x.slice_axis(0, 2..2));
    assert_eq!(empty.call((&x,)).expect("empty")[0].shape().numel(), 0);
}

/// The loop nests (MIR kernels) `f` compiles to for `types`.
fn mir_kernels<K: rfx::KernelFn>(f: &rfx::Jit<K>, types: &[rfx::TensorType]) -> Vec<rfx_ir::mir::MirKernel> {
    f.executable(types).expect("compile").mir().kernels().to_vec()
}

#[test]
fn computed_parts_concatenate_in_the_loop_that_stores_them() {
    use rfx::{DType, TensorType};
    // One Euler step of a point mass, `[p + v dt, v + a dt]`: one loop nest, nothing stored
    // between kernels.
    let dt = 0.01;
    let step = rfx::jit(|p: Tensor, v: Tensor, a: Tensor| rfx::concat(&[p + v * 0.01, v + a * 0.01], 0));
    let (p, v, a) = (
        [1.25f64, -2.5, 0.75],
        [0.5f64, -0.125, 3.0],
        [0.0f64, 0.25, -9.81],
    );
    let out = step.call((&p, &v, &a)).expect("call");
    let want: Vec<f64> = (0..3)
        .map(|i| p[i] + v[i] * dt)
        .chain((0..3).map(|i| v[i] + a[i] * dt))
        .collect();
    assert_eq!(f64s(&out[0]), &want[..]);
    let vec3 = TensorType::new(DType::F64, [3]);
    assert_eq!(mir_kernels(&step, &[vec3.clone(), vec3.clone(), vec3]).len(), 1);

    // A batch of two-link arm tips, rows `[x, y]` from rows `[θ1, θ2]`: every row equals the
    // single call's, and no instruction counts in `i32` (an `f64` kernel with `i32` lanes runs
    // one point at a time on the CPU).
    let tip = |q: Tensor| {
        let (t1, t2) = (q.slice_axis(0, 0..1), q.slice_axis(0, 1..2));
        let x = t1.cos() + 0.5 * (t1 + t2).cos();
        let y = t1.sin() + 0.5 * (t1 + t2).sin();
        rfx::concat(&[x, y], 0)
    };
    let one = rfx::jit(tip);
    let batched = rfx::jit(rfx::vmap(tip));
    let rows = 37;
    let q: Vec<f64> = (0..2 * rows).map(|i| (i as f64 * 0.61).sin() * 3.0).collect();
    let out = batched
        .call((&Array::from_vec([rows, 2], q.clone()).expect("array"),))
        .expect("vmap");
    for row in 0..rows {
        let single = one.call((&q[2 * row..2 * row + 2],)).expect("one row");
        let (t1, t2) = (q[2 * row], q[2 * row + 1]);
        let x = t1.cos() + 0.5 * (t1 + t2).cos();
        let y = t1.sin() + 0.5 * (t1 + t2).sin();
        let got = &f64s(&out[0])[2 * row..2 * row + 2];
        assert_eq!(got, f64s(&single[0]), "row {row}");
        assert!(
            (got[0] - x).abs() < 1e-15 && (got[1] - y).abs() < 1e-15,
            "row {row}: {got:?}"
        );
    }
    for k in mir_kernels(&batched, &[TensorType::new(DType::F64, [rows, 2])]) {
        assert!(
            k.body.iter().all(|inst| inst.dtype != DType::I32),
            "an i32 lane in {k:?}"
        );
    }

    // Halves that each cost a transcendental per point are computed once per point of their
    // own, each stored at its offset in the result: one loop nest over a half's points.
    let dear = rfx::jit(|x: Tensor, y: Tensor| rfx::concat(&[x.sin(), y.cos()], 0));
    let n = 4096;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos() * 4.0).collect();
    let out = dear.call((&x, &y)).expect("call");
    let got = out[0].as_slice::<f32>().expect("f32");
    for i in 0..n {
        assert!(
            (f64::from(got[i]) - f64::from(x[i]).sin()).abs() < 1e-6,
            "sin at {i}"
        );
        assert!(
            (f64::from(got[n + i]) - f64::from(y[i]).cos()).abs() < 1e-6,
            "cos at {i}"
        );
    }
    let half = TensorType::new(DType::F32, [n]);
    assert_eq!(mir_kernels(&dear, &[half.clone(), half]).len(), 1);
}
