//! `rfx::lie` SO(3) and SO(2) against a plain-Rust `f64` reference (`lie_ref`): values of
//! `exp`, `log`, the rotation matrix, `between` and `interp`; rfx's reverse-mode derivatives
//! through `exp` and `log` against the analytic Jacobians and against central differences of
//! the reference; the compose, act and inverse Jacobians against derivatives; all at 0, 1e-12,
//! 1e-7, generic angles, π - 1e-9 and π, and at seeded random angles near 0 and near π, in
//! `f64` and in `f32`, on every backend of the build. Each check is one kernel over a batch.

use crate::lie_common;
use crate::lie_ref;

use lie_common::{So3, exp_log_jacobians, operation_jacobians, zeros};
use lie_ref::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::lie;
use rfx::{Array, DType, JitError, Tensor, TraceError};

const PI: f64 = std::f64::consts::PI;

/// Rotation vectors at every test angle, each about a seeded random axis, and about the
/// coordinate axes at the fixed angles.
fn rotation_vectors(seed: u64) -> Vec<V3> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for (i, theta) in angles(6, seed).into_iter().enumerate() {
        out.push(scale(axis(&mut rng), theta));
        if i < 11 {
            out.push([0.0, 0.0, theta]);
        }
    }
    out
}

/// The `[n, 3]` array of `omegas` in `dtype` and the values it holds.
fn omega_input(dtype: DType, omegas: &[V3]) -> (Array, Vec<V3>) {
    let values = stored(dtype, &flat(omegas));
    let held = values.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
    (array(dtype, &[omegas.len(), 3], &values), held)
}

fn so3_values(dtype: DType) {
    let omegas = rotation_vectors(1);
    let (input, held) = omega_input(dtype, &omegas);
    let want_q: Vec<Q> = held.iter().map(|&w| so3_exp(w)).collect();
    let want_log: Vec<V3> = want_q.iter().map(|&q| so3_log(q)).collect();
    let want_r: Vec<M3> = held.iter().map(|&w| rodrigues(w)).collect();
    for backend in backends(dtype) {
        let f = rfx::jit(|w: Tensor| {
            let q = lie::so3_exp(w);
            (q, lie::so3_log(q), lie::so3_to_matrix(q))
        })
        .on_backend(backend);
        let Some(out) = run("so3 values", backend, &f, (&input,)) else {
            continue;
        };
        let what = |name: &str| format!("{backend} {dtype}: {name}");
        assert_close(&what("exp"), &out[0], &flat(&want_q), tol(dtype, 8.0));
        assert_close(&what("matrix"), &out[2], &m3s(&want_r), tol(dtype, 16.0));
        // Log(Exp(ω)) is ω up to rounding; where w is within rounding of 0 (θ at π) either
        // sign of the axis is the same rotation.
        for (i, (q, want)) in want_q.iter().zip(&want_log).enumerate() {
            let got = &out[1][3 * i..3 * i + 3];
            let err = |w: &V3| (0..3).map(|k| (got[k] - w[k]).abs()).fold(0.0, f64::max);
            let flipped = scale(*want, -1.0);
            let e = if q[0].abs() < 1e3 * roundoff(dtype) {
                err(want).min(err(&flipped))
            } else {
                err(want)
            };
            assert!(
                e <= tol(dtype, 32.0) * PI,
                "{}[{i}]: {got:?} against {want:?}",
                what("log(exp)")
            );
        }
    }
}

#[test]
fn so3_exp_log_and_matrix_match_closed_forms_f64() {
    so3_values(DType::F64);
}

#[test]
fn so3_exp_log_and_matrix_match_closed_forms_f32() {
    so3_values(DType::F32);
}

/// Quaternions near the identity and near π, of both signs and of scales other than one.
fn quaternions(seed: u64) -> Vec<Q> {
    let mut rng = StdRng::seed_from_u64(seed);
    angles(6, seed)
        .into_iter()
        .map(|theta| {
            let q = so3_exp(scale(axis(&mut rng), theta));
            let s = rng.random_range(0.5..2.0) * if rng.random_bool(0.5) { -1.0 } else { 1.0 };
            q.map(|c| c * s)
        })
        .collect()
}

#[test]
fn so3_log_matches_reference_for_any_sign_and_scale() {
    let qs = quaternions(2);
    let want: Vec<V3> = qs.iter().map(|&q| so3_log(q)).collect();
    for backend in backends(DType::F64) {
        let f = rfx::jit(lie::so3_log).on_backend(backend);
        let Some(out) = run(
            "log",
            backend,
            &f,
            (&array(DType::F64, &[qs.len(), 4], &flat(&qs)),),
        ) else {
            continue;
        };
        assert_close(
            &format!("{backend}: log"),
            &out[0],
            &flat(&want),
            32.0 * roundoff(DType::F64) * PI,
        );
    }
}

fn so3_derivatives(dtype: DType) {
    let omegas = rotation_vectors(3);
    let (input, held) = omega_input(dtype, &omegas);
    // The reference: the closed forms, and the inverses of the Jacobians of `Exp`.
    let jr: Vec<M3> = held.iter().map(|&w| so3_jr(w, false)).collect();
    let jl: Vec<M3> = held.iter().map(|&w| so3_jr(w, true)).collect();
    let jr_inv: Vec<M3> = jr.iter().map(inv3).collect();
    let jl_inv: Vec<M3> = jl.iter().map(inv3).collect();
    let ad_tol = [tol(dtype, 64.0), tol(dtype, 256.0)];
    for (backend, a) in exp_log_jacobians::<So3>(dtype, &input, ad_tol) {
        let what = |name: &str| format!("{backend} {dtype}: {name}");
        assert_close(&what("jr"), &a[0], &m3s(&jr), tol(dtype, 16.0));
        assert_close(&what("jl"), &a[1], &m3s(&jl), tol(dtype, 16.0));
        assert_close(&what("jr_inv"), &a[2], &m3s(&jr_inv), tol(dtype, 64.0));
        assert_close(&what("jl_inv"), &a[3], &m3s(&jl_inv), tol(dtype, 64.0));
    }
}

#[test]
fn so3_derivatives_through_exp_and_log_match_analytic_jacobians_f64() {
    so3_derivatives(DType::F64);
}

#[test]
fn so3_derivatives_through_exp_and_log_match_analytic_jacobians_f32() {
    so3_derivatives(DType::F32);
}

/// rfx's derivatives of `Exp` (`∂q/∂ω`, `[4, 3]`) and `Log` (`∂ω/∂q`, `[3, 4]`) against
/// central differences of the reference in `f64`, and `Log ∘ Exp` against the identity.
#[test]
fn so3_exp_and_log_derivatives_match_finite_differences() {
    let omegas = rotation_vectors(4);
    let n = omegas.len();
    let (input, _) = omega_input(DType::F64, &omegas);
    let qs = quaternions(5);
    let h = 1e-6;
    let fd_exp: Vec<[[f64; 3]; 4]> = omegas.iter().map(|&w| central(so3_exp, w, h)).collect();
    for backend in backends(DType::F64) {
        let what = |name: &str| format!("{backend}: {name}");
        let f = rfx::jit(rfx::vmap(rfx::jacobian(|w: Tensor| {
            (lie::so3_exp(w), lie::so3_log(lie::so3_exp(w)))
        })))
        .on_backend(backend);
        let Some(out) = run("exp derivative", backend, &f, (&input,)) else {
            continue;
        };
        let want = flat(&fd_exp.iter().flat_map(|m| m.iter().copied()).collect::<Vec<_>>());
        assert_close(&what("d exp / d omega"), &out[2], &want, 1e-9);
        for i in 0..n {
            assert_close(
                &what(&format!("d log(exp) [{i}]")),
                &out[3][9 * i..9 * i + 9],
                &flat(&eye()),
                1e-13,
            );
        }

        let g = rfx::jit(rfx::vmap(rfx::jacobian(lie::so3_log))).on_backend(backend);
        let Some(out) = run(
            "log derivative",
            backend,
            &g,
            (&array(DType::F64, &[qs.len(), 4], &flat(&qs)),),
        ) else {
            continue;
        };
        for (i, q) in qs.iter().enumerate() {
            // A step across w = 0 flips the axis: no difference quotient there.
            if q[0].abs() < 10.0 * h {
                continue;
            }
            let fd = central(so3_log, *q, h);
            let scale_fd = fd.iter().flatten().fold(1.0f64, |a, b| a.max(b.abs()));
            assert_close(
                &what(&format!("d log / d q [{i}]")),
                &out[1][12 * i..12 * i + 12],
                &flat(&fd),
                1e-8 * scale_fd,
            );
        }
    }
}

/// `Log(Exp(ω)⁻¹ Exp(ω + δ))` by reverse mode against central differences of the reference.
#[test]
fn so3_right_jacobian_by_reverse_mode_matches_finite_differences() {
    let omegas = rotation_vectors(6);
    let n = omegas.len();
    let (input, _) = omega_input(DType::F64, &omegas);
    let zeros = zeros(DType::F64, n, 3);
    for backend in backends(DType::F64) {
        let f = rfx::jit(rfx::vmap(
            rfx::jacobian(|w: Tensor, d: Tensor| {
                lie::so3_log(lie::so3_between(lie::so3_exp(w), lie::so3_exp(w + d)))
            })
            .wrt(&[1]),
        ))
        .on_backend(backend);
        let Some(out) = run("jr", backend, &f, (&input, &zeros)) else {
            continue;
        };
        for (i, &w) in omegas.iter().enumerate() {
            let fd = central(
                |d: V3| so3_log(quat_mul(conj(so3_exp(w)), so3_exp(add(w, d)))),
                [0.0; 3],
                1e-6,
            );
            assert_close(
                &format!("{backend}: jr[{i}]"),
                &out[1][9 * i..9 * i + 9],
                &flat(&fd),
                1e-8,
            );
        }
    }
}

/// Seeded random rotations with generic angles.
fn random_quats(rng: &mut StdRng, n: usize) -> Vec<Q> {
    (0..n)
        .map(|_| so3_exp(scale(axis(rng), rng.random_range(0.1..3.0))))
        .collect()
}

/// The component products on `f64`: the Hamilton product against the reference's and
/// `i ⊗ j = k`, the cross product against the reference's and `x × y = z`.
#[test]
fn component_products_match_the_reference() {
    let mut rng = StdRng::seed_from_u64(10);
    let (a, b) = (random_quats(&mut rng, 6), random_quats(&mut rng, 6));
    for (&a, &b) in a.iter().zip(&b) {
        let tol = 4.0 * roundoff(DType::F64);
        assert_close("quat_mul_parts", &lie::quat_mul_parts(a, b), &quat_mul(a, b), tol);
        let (u, v) = ([a[1], a[2], a[3]], [b[1], b[2], b[3]]);
        assert_close("cross_parts", &lie::cross_parts(u, v), &cross(u, v), tol);
    }
    let (i, j) = ([0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]);
    assert_eq!(lie::quat_mul_parts(i, j), [0.0, 0.0, 0.0, 1.0]);
    assert_eq!(
        lie::cross_parts([1.0, 0.0, 0.0], [0.0, 1.0, 0.0]),
        [0.0, 0.0, 1.0]
    );
}

#[test]
fn so3_group_operations_match_quaternion_products() {
    let mut rng = StdRng::seed_from_u64(7);
    let n = 12;
    let (a, b) = (random_quats(&mut rng, n), random_quats(&mut rng, n));
    let p: Vec<V3> = (0..n)
        .map(|_| std::array::from_fn(|_| rng.random_range(-2.0..2.0)))
        .collect();
    let t: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
    let want_between: Vec<Q> = a.iter().zip(&b).map(|(&a, &b)| quat_mul(conj(a), b)).collect();
    let want_act: Vec<V3> = a
        .iter()
        .zip(&p)
        .map(|(&q, &p)| mat_vec(&quat_matrix(q), p))
        .collect();
    let want_interp: Vec<Q> = a
        .iter()
        .zip(&want_between)
        .zip(&t)
        .map(|((&a, &d), &t)| quat_mul(a, so3_exp(scale(so3_log(d), t))))
        .collect();
    let qa = array(DType::F64, &[n, 4], &flat(&a));
    let qb = array(DType::F64, &[n, 4], &flat(&b));
    let pts = array(DType::F64, &[n, 3], &flat(&p));
    let ts = array(DType::F64, &[n], &t);
    for backend in backends(DType::F64) {
        let f = rfx::jit(|a: Tensor, b: Tensor, p: Tensor, t: Tensor| {
            (
                lie::so3_between(a, b),
                lie::so3_act(a, p),
                lie::so3_interp(a, b, t),
            )
        })
        .on_backend(backend);
        let Some(out) = run("group ops", backend, &f, (&qa, &qb, &pts, &ts)) else {
            continue;
        };
        let tol = 64.0 * roundoff(DType::F64);
        assert_close(&format!("{backend}: between"), &out[0], &flat(&want_between), tol);
        assert_close(&format!("{backend}: act"), &out[1], &flat(&want_act), 4.0 * tol);
        // The geodesic's end points are `a` and `b` (w of a⁻¹b is made >= 0 by `Log`).
        assert_close(
            &format!("{backend}: interp"),
            &out[2],
            &flat(&want_interp),
            4.0 * tol,
        );
        let b_signed: Vec<f64> = (0..n)
            .flat_map(|i| {
                let s = if want_between[i][0] < 0.0 { -1.0 } else { 1.0 };
                b[i].map(|c| c * s)
            })
            .collect();
        assert_close(
            &format!("{backend}: interp(1)"),
            &out[2][4 * (n - 1)..],
            &b_signed[4 * (n - 1)..],
            4.0 * tol,
        );
        assert_close(
            &format!("{backend}: interp(0)"),
            &out[2][..4],
            &flat(&a)[..4],
            tol,
        );
    }
}

/// The compose, act and inverse Jacobians of both sides against reverse-mode derivatives of
/// the perturbed operations.
#[test]
fn so3_operation_jacobians_match_derivatives() {
    let mut rng = StdRng::seed_from_u64(8);
    let n = 8;
    let (a, b) = (random_quats(&mut rng, n), random_quats(&mut rng, n));
    let p: Vec<V3> = (0..n)
        .map(|_| std::array::from_fn(|_| rng.random_range(-2.0..2.0)))
        .collect();
    let qa = array(DType::F64, &[n, 4], &flat(&a));
    let qb = array(DType::F64, &[n, 4], &flat(&b));
    let pts = array(DType::F64, &[n, 3], &flat(&p));
    for (backend, want) in operation_jacobians::<So3>(&qa, &qb, &pts, 256.0 * roundoff(DType::F64)) {
        // And the matrices themselves: R(b)ᵀ for the right Jacobian of compose in a.
        let rbt: Vec<M3> = b.iter().map(|&q| transpose(&quat_matrix(q))).collect();
        assert_close(
            &format!("{backend}: R(b)ᵀ"),
            &want[0],
            &m3s(&rbt),
            16.0 * roundoff(DType::F64),
        );
    }
}

/// At the singular points the derivatives of the safe branches are finite and exact.
#[test]
fn so3_gradients_at_the_identity_are_finite() {
    for backend in backends(DType::F64) {
        let f = rfx::jit(rfx::grad(|w: Tensor| lie::so3_log(lie::so3_exp(w)).sum_all())).on_backend(backend);
        let Some(out) = run("grad at 0", backend, &f, (&[0.0f64, 0.0, 0.0],)) else {
            continue;
        };
        assert_eq!(out[0], [1.0, 1.0, 1.0], "{backend}");
        let g = rfx::jit(rfx::grad(|q: Tensor| lie::so3_log(q).sum_all())).on_backend(backend);
        let Some(out) = run("grad at identity", backend, &g, (&[1.0f64, 0.0, 0.0, 0.0],)) else {
            continue;
        };
        assert_eq!(out[0], [0.0, 2.0, 2.0, 2.0], "{backend}");
    }
}

#[test]
fn vmap_of_so3_exp_matches_the_batched_call() {
    let omegas = rotation_vectors(9);
    let (input, _) = omega_input(DType::F64, &omegas);
    let direct = rfx::jit(lie::so3_exp).call((&input,)).expect("direct");
    let mapped = rfx::jit(rfx::vmap(lie::so3_exp)).call((&input,)).expect("vmap");
    assert_eq!(direct[0].to_f64_vec(), mapped[0].to_f64_vec());
}

#[test]
fn a_wrong_component_count_is_a_typed_error() {
    let f = rfx::jit(lie::so3_exp);
    let err = f.call((&[0.0f64, 1.0, 2.0, 3.0],)).expect_err("four components");
    match err {
        JitError::Trace(TraceError::Build { op, .. }) => assert_eq!(op, "so3_exp"),
        other => panic!("expected a typing error, got {other:?}"),
    }
}

#[test]
fn so2_operations_match_closed_forms() {
    let thetas = [0.0, 1e-12, 0.5, -2.0, PI - 1e-9, PI];
    let others = [0.3, -1.0, 2.9, 1.0, 0.2, -PI + 1e-3];
    let n = thetas.len();
    let ra: Vec<[f64; 2]> = thetas.iter().map(|t| [t.cos(), t.sin()]).collect();
    let rb: Vec<[f64; 2]> = others.iter().map(|t| [t.cos(), t.sin()]).collect();
    let wrap = |t: f64| (t.sin()).atan2(t.cos());
    for backend in backends(DType::F64) {
        let f = rfx::jit(|th: Tensor, b: Tensor, t: Tensor| {
            let a = lie::so2_exp(th);
            (
                a,
                lie::so2_log(a),
                lie::so2_between(a, b),
                lie::so2_interp(a, b, t),
                lie::so2_act(a, b),
            )
        })
        .on_backend(backend);
        let th = array(DType::F64, &[n, 1], &thetas);
        let b = array(DType::F64, &[n, 2], &flat(&rb));
        let t = array(DType::F64, &[], &[0.25]);
        let Some(out) = run("so2", backend, &f, (&th, &b, &t)) else {
            continue;
        };
        let tol = 16.0 * roundoff(DType::F64);
        assert_close(&format!("{backend}: exp"), &out[0], &flat(&ra), tol);
        let logs: Vec<f64> = thetas.iter().map(|&t| wrap(t)).collect();
        assert_close(&format!("{backend}: log"), &out[1], &logs, tol * PI);
        let between: Vec<f64> = (0..n)
            .flat_map(|i| {
                let d = others[i] - thetas[i];
                [d.cos(), d.sin()]
            })
            .collect();
        assert_close(&format!("{backend}: between"), &out[2], &between, tol);
        let interp: Vec<f64> = (0..n)
            .flat_map(|i| {
                let d = wrap(others[i] - thetas[i]);
                let t = thetas[i] + 0.25 * d;
                [t.cos(), t.sin()]
            })
            .collect();
        assert_close(&format!("{backend}: interp"), &out[3], &interp, 4.0 * tol);
        let act: Vec<f64> = (0..n)
            .flat_map(|i| {
                let (c, s) = (thetas[i].cos(), thetas[i].sin());
                [c * rb[i][0] - s * rb[i][1], s * rb[i][0] + c * rb[i][1]]
            })
            .collect();
        assert_close(&format!("{backend}: act"), &out[4], &act, tol);
    }
}

/// Second derivatives stay finite and exact through the series branches: the Hessian of
/// `‖Log(Exp(τ))‖²` is `2 I` at 0, near 0 and at a generic tangent, for SO(3) and SE(3).
#[test]
fn hessians_through_exp_and_log_are_exact_at_the_identity() {
    let so3 = rfx::jit(rfx::hessian(|w: Tensor| {
        let l = lie::so3_log(lie::so3_exp(w));
        (l * l).sum_all()
    }));
    let se3 = rfx::jit(rfx::hessian(|x: Tensor| {
        let l = lie::se3_log(lie::se3_exp(x));
        (l * l).sum_all()
    }));
    let tol = 64.0 * roundoff(DType::F64);
    for w in [[0.0f64, 0.0, 0.0], [1e-9, 0.0, 0.0], [0.3, -0.2, 0.1]] {
        let out = so3.call((&w,)).expect("so3 hessian");
        let want: Vec<f64> = flat(&eye()).iter().map(|v| 2.0 * v).collect();
        assert_close(&format!("so3 hessian at {w:?}"), &out[2].to_f64_vec(), &want, tol);
        let x = [0.1, 0.2, 0.3, w[0], w[1], w[2]];
        let out = se3.call((&x,)).expect("se3 hessian");
        let want: Vec<f64> = (0..36).map(|k| if k / 6 == k % 6 { 2.0 } else { 0.0 }).collect();
        assert_close(&format!("se3 hessian at {x:?}"), &out[2].to_f64_vec(), &want, tol);
    }
}
