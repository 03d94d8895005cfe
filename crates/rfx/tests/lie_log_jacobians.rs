//! `rfx::lie::so3_log_with_jacobians` (`Log(q)` with `Jr⁻¹` and `Jl⁻¹` whose coefficient comes
//! from the quaternion) against `so3_jr_inv(so3_log(q))` and `so3_jl_inv(so3_log(q))` to a
//! few units of roundoff, against the plain-Rust `f64` reference (`lie_ref`: the inverses of
//! the textbook `Jr` and `Jl`), and its reverse-mode derivatives against central differences
//! of the reference; at 0, 1e-12, 1e-7, generic angles, π - 1e-9 and π and at seeded random
//! angles near 0 and near π, for quaternions of both signs and of scales other than one, in
//! `f64` and `f32`, on every backend of the build.

use crate::lie_ref;

use lie_ref::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::lie;
use rfx::{DType, Tensor};

const PI: f64 = std::f64::consts::PI;

/// Quaternions at every test angle about seeded random axes and about `z`, each scaled by a
/// seeded factor in `±[0.5, 2)`.
fn quaternions(seed: u64) -> Vec<Q> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for (i, theta) in angles(8, seed).into_iter().enumerate() {
        let mut axes = vec![axis(&mut rng)];
        if i < 11 {
            axes.push([0.0, 0.0, 1.0]);
        }
        for a in axes {
            let s = rng.random_range(0.5..2.0) * if rng.random_bool(0.5) { -1.0 } else { 1.0 };
            out.push(so3_exp(scale(a, theta)).map(|c| c * s));
        }
    }
    out
}

/// The reference `(ω, Jr⁻¹(ω), Jl⁻¹(ω))` of `q`.
fn reference(q: Q) -> (V3, M3, M3) {
    let w = so3_log(q);
    (w, inv3(&so3_jr(w, false)), inv3(&so3_jr(w, true)))
}

fn values(dtype: DType) {
    let qs = quaternions(21);
    let held: Vec<Q> = stored(dtype, &flat(&qs))
        .chunks(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    let input = array(dtype, &[qs.len(), 4], &flat(&held));
    let want: Vec<(V3, M3, M3)> = held.iter().map(|&q| reference(q)).collect();
    for backend in backends(dtype) {
        let f = rfx::jit(|q: Tensor| {
            let (w, jr_inv, jl_inv) = lie::so3_log_with_jacobians(q);
            let v = lie::so3_log(q);
            (w, jr_inv, jl_inv, v, lie::so3_jr_inv(v), lie::so3_jl_inv(v))
        })
        .on_backend(backend);
        let Some(out) = run("log with jacobians", backend, &f, (&input,)) else {
            continue;
        };
        let what = |name: &str| format!("{backend} {dtype}: {name}");
        // The same logarithm; Jacobians with entries up to 1 + π/2 within a few units.
        assert_eq!(out[0], out[3], "{}", what("log"));
        assert_close(
            &what("jr_inv vs so3_jr_inv(log)"),
            &out[1],
            &out[4],
            tol(dtype, 8.0),
        );
        assert_close(
            &what("jl_inv vs so3_jl_inv(log)"),
            &out[2],
            &out[5],
            tol(dtype, 8.0),
        );
        for (i, (q, (w, jr_inv, jl_inv))) in held.iter().zip(&want).enumerate() {
            // At π (w within rounding of 0) the axis may come out with either sign: compare
            // with the reference of the same sign.
            let got = &out[0][3 * i..3 * i + 3];
            let flip =
                q[0].abs() < 1e3 * roundoff(dtype) && got[0] * w[0] + got[1] * w[1] + got[2] * w[2] < 0.0;
            let (w, jr_inv, jl_inv) = if flip {
                reference(q.map(|c| -c))
            } else {
                (*w, *jr_inv, *jl_inv)
            };
            let at = |name: &str| what(&format!("{name}[{i}]"));
            assert_close(&at("log"), got, &w, tol(dtype, 32.0) * PI);
            assert_close(
                &at("jr_inv"),
                &out[1][9 * i..9 * i + 9],
                &m3s(&[jr_inv]),
                tol(dtype, 64.0),
            );
            assert_close(
                &at("jl_inv"),
                &out[2][9 * i..9 * i + 9],
                &m3s(&[jl_inv]),
                tol(dtype, 64.0),
            );
        }
    }
}

#[test]
fn so3_log_with_jacobians_matches_log_and_the_inverse_jacobians_f64() {
    values(DType::F64);
}

#[test]
fn so3_log_with_jacobians_matches_log_and_the_inverse_jacobians_f32() {
    values(DType::F32);
}

/// A scalar mixing every output nonlinearly: `Σ ω + ½ ‖Jr⁻¹‖² + Σ_ij Jl⁻¹_ij (Jr⁻¹ Jl⁻¹)_ij`.
fn scalar_reference(q: Q) -> f64 {
    let (w, jr_inv, jl_inv) = reference(q);
    mix(&w, &jr_inv, &jl_inv)
}

fn scalar(q: Tensor) -> Tensor {
    let (w, jr_inv, jl_inv) = lie::so3_log_with_jacobians(q);
    w.sum_all() + (jr_inv * jr_inv).sum_all() * 0.5 + (jl_inv * jr_inv.matmul(jl_inv)).sum_all()
}

/// Reverse-mode derivatives in `f64`: the full Jacobian of the three outputs with respect to
/// `q` and the gradient of a scalar of them, against central differences of the reference.
#[test]
fn so3_log_with_jacobians_derivatives_match_finite_differences() {
    let qs = quaternions(22);
    let input = array(DType::F64, &[qs.len(), 4], &flat(&qs));
    let h = 1e-6;
    for backend in backends(DType::F64) {
        let f = rfx::jit(rfx::vmap(rfx::jacobian(lie::so3_log_with_jacobians))).on_backend(backend);
        let g = rfx::jit(rfx::vmap(rfx::grad(scalar))).on_backend(backend);
        let (Some(jac), Some(grad)) = (
            run("jacobian", backend, &f, (&input,)),
            run("grad", backend, &g, (&input,)),
        ) else {
            continue;
        };
        for (i, q) in qs.iter().enumerate() {
            // A step across w = 0 flips the axis: no difference quotient there.
            if q[0].abs() < 10.0 * h {
                continue;
            }
            let fd = central(
                |q: Q| {
                    let (w, jr_inv, jl_inv) = reference(q);
                    let mut out = [0.0; 21];
                    out[..3].copy_from_slice(&w);
                    out[3..12].copy_from_slice(&m3s(&[jr_inv]));
                    out[12..].copy_from_slice(&m3s(&[jl_inv]));
                    out
                },
                *q,
                h,
            );
            let scale_fd = fd.iter().flatten().fold(1.0f64, |a, b| a.max(b.abs()));
            let what = |name: &str| format!("{backend}: d {name} / d q [{i}]");
            let (omega, jr_inv, jl_inv) = (&jac[3], &jac[4], &jac[5]);
            let rows = |from: usize, to: usize| flat(&fd[from..to]);
            assert_close(
                &what("log"),
                &omega[12 * i..12 * i + 12],
                &rows(0, 3),
                1e-8 * scale_fd,
            );
            assert_close(
                &what("jr_inv"),
                &jr_inv[36 * i..36 * i + 36],
                &rows(3, 12),
                1e-8 * scale_fd,
            );
            assert_close(
                &what("jl_inv"),
                &jl_inv[36 * i..36 * i + 36],
                &rows(12, 21),
                1e-8 * scale_fd,
            );
            let fd = central(|q: Q| [scalar_reference(q)], *q, h);
            let scale_fd = fd[0].iter().fold(1.0f64, |a, b| a.max(b.abs()));
            assert_close(
                &what("scalar"),
                &grad[0][4 * i..4 * i + 4],
                &fd[0],
                1e-8 * scale_fd,
            );
        }
    }
}

/// At the identity (both series) the derivatives are finite and those of `Log` exact; at
/// `θ = π` (`w = 0`) the Jacobians' coefficient is `1/π²`.
#[test]
fn so3_log_with_jacobians_at_the_identity_and_at_pi() {
    for backend in backends(DType::F64) {
        let f =
            rfx::jit(rfx::grad(|q: Tensor| lie::so3_log_with_jacobians(q).0.sum_all())).on_backend(backend);
        let Some(out) = run("grad at identity", backend, &f, (&[1.0f64, 0.0, 0.0, 0.0],)) else {
            continue;
        };
        assert_eq!(out[0], [0.0, 2.0, 2.0, 2.0], "{backend}");
        let g = rfx::jit(scalar).on_backend(backend);
        let Some(at_pi) = run("at pi", backend, &g, (&[0.0f64, 0.0, 0.0, 1.0],)) else {
            continue;
        };
        let want = scalar_reference([0.0, 0.0, 0.0, 1.0]);
        assert_close(
            &format!("{backend}: scalar at pi"),
            &at_pi[0],
            &[want],
            tol(DType::F64, 64.0) * want.abs(),
        );
    }
}
