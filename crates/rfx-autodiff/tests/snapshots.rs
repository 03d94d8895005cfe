//! Snapshot tests of gradient HIR for the reference examples, with their values checked
//! against hand-derived closed forms. Update with `INSTA_UPDATE=always`, review the `.snap`
//! files, and run with `INSTA_UPDATE=no` in CI.

mod common;

use common::{arr, assert_close, fd_grad, run, run_named};
use rfx_autodiff::{jacfwd, value_and_grad, vjp};
use rfx_ir::hir::{Builder, Kernel, ValueId};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::{Array, BinaryOp, DType, ReduceOp, Scalar, TensorType, UnaryOp};

/// rfxJIT's example: `sum(x ** 2)` over `x: f32[3]`.
fn sum_of_squares() -> Kernel {
    let mut b = Builder::new("sum_sq");
    let x = b.input("x", TensorType::new(DType::F32, [3])).expect("x");
    let two = b.scalar(Scalar::F32(2.0));
    let sq = b.binary(BinaryOp::Pow, x, two).expect("pow");
    let s = b.reduce_all(ReduceOp::Sum, sq).expect("sum");
    b.output("loss", s).expect("output");
    b.finish().expect("kernel")
}

#[test]
fn sum_of_squares_value_and_grad() {
    let k = value_and_grad(&sum_of_squares(), &["x"]).unwrap();
    insta::assert_snapshot!("sum_of_squares_value_and_grad", k.to_string());
    let x = Array::from_vec(vec![3], vec![1.0f32, 2.0, 3.0]).unwrap();
    let out = run_hir(&k, &[x.view()], Mode::Native).unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[14.0f32]);
    assert_eq!(out[1].as_slice::<f32>().unwrap(), &[2.0f32, 4.0, 6.0]);
}

/// The PID cost `sum((clip(kp e + ki i + kd d, -1, 1) - target)²)` over a trajectory of 5 steps.
fn pid_cost() -> Kernel {
    let mut b = Builder::new("pid_cost");
    let scalar = TensorType::scalar(DType::F64);
    let series = TensorType::new(DType::F64, [5]);
    let kp = b.input("kp", scalar.clone()).expect("kp");
    let ki = b.input("ki", scalar.clone()).expect("ki");
    let kd = b.input("kd", scalar).expect("kd");
    let e = b.input("e", series.clone()).expect("e");
    let i = b.input("i", series.clone()).expect("i");
    let d = b.input("d", series.clone()).expect("d");
    let target = b.input("target", series).expect("target");
    let pe = b.binary(BinaryOp::Mul, kp, e).expect("kp e");
    let ie = b.binary(BinaryOp::Mul, ki, i).expect("ki i");
    let de = b.binary(BinaryOp::Mul, kd, d).expect("kd d");
    let u = b.binary(BinaryOp::Add, pe, ie).expect("add");
    let u = b.binary(BinaryOp::Add, u, de).expect("add");
    let lo = b.scalar(Scalar::F64(-1.0));
    let hi = b.scalar(Scalar::F64(1.0));
    let u = b.clamp(u, lo, hi).expect("clip");
    let err = b.binary(BinaryOp::Sub, u, target).expect("sub");
    let two = b.scalar(Scalar::F64(2.0));
    let sq = b.binary(BinaryOp::Pow, err, two).expect("pow");
    let cost = b.reduce_all(ReduceOp::Sum, sq).expect("sum");
    b.output("cost", cost).expect("output");
    b.finish().expect("kernel")
}

#[test]
fn pid_cost_gradient_wrt_gains() {
    let k = value_and_grad(&pid_cost(), &["kp", "ki", "kd"]).unwrap();
    insta::assert_snapshot!("pid_cost_value_and_grad", k.to_string());
    let (kp, ki, kd) = (0.8, 0.3, 0.1);
    let e = [0.5, -0.2, 1.5, 0.1, -2.0];
    let i = [0.1, 0.4, 0.9, 0.2, -0.5];
    let d = [-0.3, 0.2, 0.4, -0.1, 0.6];
    let target = [0.2, 0.0, 0.5, -0.1, -0.4];
    let inputs = [
        arr(&[], &[kp]),
        arr(&[], &[ki]),
        arr(&[], &[kd]),
        arr(&[5], &e),
        arr(&[5], &i),
        arr(&[5], &d),
        arr(&[5], &target),
    ];
    let out = run(&k, &inputs);
    // Closed form: ∂cost/∂k = Σ 2 (clip(u) - target) · [−1 < u < 1] · signal.
    let (mut cost, mut g) = (0.0, [0.0; 3]);
    for t in 0..5 {
        let u: f64 = kp * e[t] + ki * i[t] + kd * d[t];
        let inside = if -1.0 < u && u < 1.0 { 1.0 } else { 0.0 };
        let r = u.clamp(-1.0, 1.0) - target[t];
        cost += r * r;
        for (gk, s) in g.iter_mut().zip([e[t], i[t], d[t]]) {
            *gk += 2.0 * r * inside * s;
        }
    }
    assert_close("cost", &out[0], &[cost], 1e-15, 0.0);
    for (n, name) in ["kp", "ki", "kd"].iter().enumerate() {
        assert_close(name, &out[n + 1], &[g[n]], 1e-14, 1e-15);
        // The clip saturates at steps 2 and 4 (u = 1.35, -1.64), away from the kinks: FD agrees.
        assert_close(
            name,
            &out[n + 1],
            &fd_grad(&pid_cost(), &inputs, n, 0, None),
            1e-6,
            1e-8,
        );
    }
}

#[test]
fn planar_arm_jacobian() {
    let mut b = Builder::new("planar_arm");
    let scalar = TensorType::scalar(DType::F64);
    let q1 = b.input("q1", scalar.clone()).unwrap();
    let q2 = b.input("q2", scalar).unwrap();
    let l1 = b.scalar(Scalar::F64(1.0));
    let l2 = b.scalar(Scalar::F64(0.5));
    let q12 = b.binary(BinaryOp::Add, q1, q2).unwrap();
    for (f, name) in [(UnaryOp::Cos, "x"), (UnaryOp::Sin, "y")] {
        let a = b.unary(f, q1).unwrap();
        let a = b.binary(BinaryOp::Mul, l1, a).unwrap();
        let c = b.unary(f, q12).unwrap();
        let c = b.binary(BinaryOp::Mul, l2, c).unwrap();
        let p = b.binary(BinaryOp::Add, a, c).unwrap();
        b.output(name, p).unwrap();
    }
    let jac = jacfwd(&b.finish().unwrap(), &["q1", "q2"]).unwrap();
    insta::assert_snapshot!("planar_arm_jacfwd", jac.to_string());
    let (q1, q2) = (0.4, 1.1);
    let inputs = [arr(&[], &[q1]), arr(&[], &[q2])];
    let closed = [
        ("jac_x_q1", -q1.sin() - 0.5 * (q1 + q2).sin()),
        ("jac_x_q2", -0.5 * (q1 + q2).sin()),
        ("jac_y_q1", q1.cos() + 0.5 * (q1 + q2).cos()),
        ("jac_y_q2", 0.5 * (q1 + q2).cos()),
    ];
    for (name, want) in closed {
        assert_close(name, &run_named(&jac, &inputs, name), &[want], 1e-15, 1e-16);
    }
}

/// Rotates `v` by the unit quaternion `q = (w, x, y, z)`: `v + 2w (u × v) + 2 u × (u × v)`.
/// HIR has no slicing, so components are scalar inputs and outputs.
fn quaternion_rotate() -> Kernel {
    let mut b = Builder::new("quat_rotate");
    let scalar = TensorType::scalar(DType::F64);
    let names = ["qw", "qx", "qy", "qz", "vx", "vy", "vz"];
    let ins: Vec<ValueId> = names
        .iter()
        .map(|n| b.input(*n, scalar.clone()).expect("input"))
        .collect();
    let (w, u, v) = (ins[0], [ins[1], ins[2], ins[3]], [ins[4], ins[5], ins[6]]);
    let cross = |b: &mut Builder, a: [ValueId; 3], c: [ValueId; 3]| -> [ValueId; 3] {
        [(1, 2), (2, 0), (0, 1)].map(|(i, j)| {
            let p = b.binary(BinaryOp::Mul, a[i], c[j]).expect("mul");
            let q = b.binary(BinaryOp::Mul, a[j], c[i]).expect("mul");
            b.binary(BinaryOp::Sub, p, q).expect("sub")
        })
    };
    let uv = cross(&mut b, u, v);
    let uuv = cross(&mut b, u, uv);
    let two = b.scalar(Scalar::F64(2.0));
    let two_w = b.binary(BinaryOp::Mul, two, w).expect("2w");
    for (k, name) in ["rx", "ry", "rz"].iter().enumerate() {
        let a = b.binary(BinaryOp::Mul, two_w, uv[k]).expect("mul");
        let c = b.binary(BinaryOp::Mul, two, uuv[k]).expect("mul");
        let r = b.binary(BinaryOp::Add, v[k], a).expect("add");
        let r = b.binary(BinaryOp::Add, r, c).expect("add");
        b.output(*name, r).expect("output");
    }
    b.finish().expect("kernel")
}

#[test]
fn quaternion_rotation_vjp() {
    let k = vjp(&quaternion_rotate(), &["qw", "qx", "qy", "qz", "vx", "vy", "vz"]).unwrap();
    insta::assert_snapshot!("quaternion_rotation_vjp", k.to_string());
    // q: rotation by 0.9 rad about the unit axis (1, 2, 2)/3.
    let half = 0.45f64;
    let axis = [1.0 / 3.0, 2.0 / 3.0, 2.0 / 3.0];
    let q = [
        half.cos(),
        axis[0] * half.sin(),
        axis[1] * half.sin(),
        axis[2] * half.sin(),
    ];
    let v = [0.3, -1.2, 0.8];
    let ct = [0.5, -0.25, 2.0];
    let mut inputs: Vec<Array> = q.iter().chain(&v).map(|x| arr(&[], &[*x])).collect();
    inputs.extend(ct.iter().map(|c| arr(&[], &[*c])));
    let out = run(&k, &inputs);
    // Rotation matrix of q (closed form); rotated vector R v and ∂(ct·Rv)/∂v = Rᵀ ct.
    let [w, x, y, z] = q;
    let r = [
        [
            1.0 - 2.0 * (y * y + z * z),
            2.0 * (x * y - w * z),
            2.0 * (x * z + w * y),
        ],
        [
            2.0 * (x * y + w * z),
            1.0 - 2.0 * (x * x + z * z),
            2.0 * (y * z - w * x),
        ],
        [
            2.0 * (x * z - w * y),
            2.0 * (y * z + w * x),
            1.0 - 2.0 * (x * x + y * y),
        ],
    ];
    for i in 0..3 {
        let rv: f64 = (0..3).map(|j| r[i][j] * v[j]).sum();
        assert_close("R v", &out[i], &[rv], 1e-15, 1e-15);
        let rt_ct: f64 = (0..3).map(|j| r[j][i] * ct[j]).sum();
        assert_close("Rᵀ ct", &out[3 + 4 + i], &[rt_ct], 1e-14, 1e-15);
    }
    // ∂/∂q by finite differences of ct · rotate(q, v) (the primal kernel only).
    let primal = quaternion_rotate();
    let primal_inputs: Vec<Array> = inputs[..7].to_vec();
    for qi in 0..4 {
        let fd: f64 = (0..3)
            .map(|o| ct[o] * fd_grad(&primal, &primal_inputs, qi, o, None)[0])
            .sum();
        assert_close("∂q", &out[3 + qi], &[fd], 1e-7, 1e-9);
    }
}
