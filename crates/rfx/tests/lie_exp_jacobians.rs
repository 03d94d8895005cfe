//! `rfx::lie::so3_exp_with_jacobians` (`Exp(ω)` with `Jr(ω)` and `Jl(ω)` from one sine and
//! cosine of `θ/2`) against `so3_exp`, `so3_jr` and `so3_jl` called separately to a few units
//! of roundoff, against the plain-Rust `f64` reference (`lie_ref`: half-angle quaternions and
//! the textbook `Jr` and `Jl` with their series summed to convergence), and its reverse-mode
//! derivatives against central differences of the reference; at 0, 1e-12, 1e-7, generic
//! angles, π - 1e-9, π, angles past π, and seeded random angles near 0, near π and near the
//! series threshold of the dtype, in `f64` and `f32`, on every backend of the build.

use crate::lie_ref;

use lie_ref::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::lie;
use rfx::{DType, Tensor};

const PI: f64 = std::f64::consts::PI;

/// The thresholds on `θ` below which the series are taken, recomputed here from their
/// definition (the first omitted term of a five-term series in `x = θ²` at half the unit
/// roundoff relative to the leading one): `so3_exp_with_jacobians`' (that of `(θ - sin θ)/θ³`,
/// whose omitted term is `x⁵/13!` against `1/6`) and `so3_exp`'s (that of `cos(θ/2)`, `x⁵/(4⁵
/// 10!)` against `1`).
fn series_thresholds(dtype: DType) -> [f64; 2] {
    let factorial = |n: u32| (1..=n).map(f64::from).product::<f64>();
    let u = roundoff(dtype);
    [
        (u * factorial(13) / (6.0 * 2.0)).powf(0.2).sqrt(),
        (u * 1024.0 * factorial(10) / 2.0).powf(0.2).sqrt(),
    ]
}

/// Tangents at every test angle about seeded random axes and about `z`: `angles`, angles past
/// `π` (up to `2π` and beyond, where `Exp` is still defined), and seeded random angles within
/// 10% of `dtype`'s series thresholds on both sides.
fn tangents(seed: u64, dtype: DType) -> Vec<V3> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut thetas = angles(8, seed);
    thetas.extend([4.0, 2.0 * PI - 1e-9, 2.0 * PI, 10.0]);
    for t in series_thresholds(dtype) {
        thetas.extend([t, t * (1.0 - 1e-7), t * (1.0 + 1e-7)]);
        for _ in 0..8 {
            thetas.push(t * rng.random_range(0.9..1.1));
        }
    }
    let mut out = Vec::new();
    for (i, theta) in thetas.into_iter().enumerate() {
        let mut axes = vec![axis(&mut rng)];
        if i < 11 {
            axes.push([0.0, 0.0, 1.0]);
        }
        out.extend(axes.into_iter().map(|a| scale(a, theta)));
    }
    out
}

/// The reference `(Exp(ω), Jr(ω), Jl(ω))`.
fn reference(w: V3) -> (Q, M3, M3) {
    (so3_exp(w), so3_jr(w, false), so3_jr(w, true))
}

fn values(dtype: DType) {
    let ws = tangents(31, dtype);
    let held: Vec<V3> = stored(dtype, &flat(&ws))
        .chunks(3)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    let input = array(dtype, &[ws.len(), 3], &flat(&held));
    for backend in backends(dtype) {
        let f = rfx::jit(|w: Tensor| {
            let (q, jr, jl) = lie::so3_exp_with_jacobians(w);
            (q, jr, jl, lie::so3_exp(w), lie::so3_jr(w), lie::so3_jl(w))
        })
        .on_backend(backend);
        let Some(out) = run("exp with jacobians", backend, &f, (&input,)) else {
            continue;
        };
        let what = |name: &str| format!("{backend} {dtype}: {name}");
        // `so3_exp` takes a higher series threshold: a few units apart on a unit quaternion;
        // `so3_jr` and `so3_jl` are the same operations.
        assert_close(&what("exp vs so3_exp"), &out[0], &out[3], tol(dtype, 4.0));
        assert_eq!(out[1], out[4], "{}", what("jr vs so3_jr"));
        assert_eq!(out[2], out[5], "{}", what("jl vs so3_jl"));
        for (i, &w) in held.iter().enumerate() {
            let (q, jr, jl) = reference(w);
            let at = |name: &str| what(&format!("{name}[{i}]"));
            assert_close(&at("exp"), &out[0][4 * i..4 * i + 4], &q, tol(dtype, 4.0));
            assert_close(&at("so3_exp"), &out[3][4 * i..4 * i + 4], &q, tol(dtype, 4.0));
            assert_close(&at("jr"), &out[1][9 * i..9 * i + 9], &m3s(&[jr]), tol(dtype, 8.0));
            assert_close(&at("jl"), &out[2][9 * i..9 * i + 9], &m3s(&[jl]), tol(dtype, 8.0));
        }
    }
}

#[test]
fn so3_exp_with_jacobians_matches_exp_and_the_jacobians_f64() {
    values(DType::F64);
}

#[test]
fn so3_exp_with_jacobians_matches_exp_and_the_jacobians_f32() {
    values(DType::F32);
}

/// `Jr` and `Jl` as closed forms of the quaternion they come with, independent of the series:
/// `Jl - Jr = 2 A [ω]×` with `A = (1 - cos θ)/θ² = 2 (|v|/θ)²` (`v` the quaternion's vector
/// part), and `Jl = Jrᵀ`; and `Exp` is a unit quaternion along `ω`.
#[test]
fn so3_exp_with_jacobians_closed_form_relations() {
    for dtype in [DType::F64, DType::F32] {
        let ws = tangents(32, dtype);
        let held: Vec<V3> = stored(dtype, &flat(&ws))
            .chunks(3)
            .map(|c| [c[0], c[1], c[2]])
            .collect();
        let input = array(dtype, &[ws.len(), 3], &flat(&held));
        for backend in backends(dtype) {
            let f = rfx::jit(lie::so3_exp_with_jacobians).on_backend(backend);
            let Some(out) = run("exp with jacobians", backend, &f, (&input,)) else {
                continue;
            };
            for (i, &w) in held.iter().enumerate() {
                let what = format!("{backend} {dtype} [{i}]");
                let q = &out[0][4 * i..4 * i + 4];
                let (jr, jl) = (&out[1][9 * i..9 * i + 9], &out[2][9 * i..9 * i + 9]);
                let unit = q.iter().map(|c| c * c).sum::<f64>();
                assert!((unit - 1.0).abs() <= tol(dtype, 8.0), "{what}: |q|² = {unit}");
                let theta = norm(w);
                let v = [q[1], q[2], q[3]];
                // `v = sin(θ/2) ω/θ`: parallel to ω, so `v × ω = 0`.
                let c = cross(v, w);
                assert!(norm(c) <= tol(dtype, 8.0) * theta, "{what}: v × ω = {c:?}");
                let a = if theta > 0.0 {
                    2.0 * norm(v) * norm(v) / (theta * theta)
                } else {
                    0.5
                };
                let k = m3s(&[skew(w)]);
                let want: Vec<f64> = k.iter().map(|k| 2.0 * a * k).collect();
                let diff: Vec<f64> = jl.iter().zip(jr).map(|(l, r)| l - r).collect();
                assert_close(&format!("{what}: Jl - Jr"), &diff, &want, tol(dtype, 16.0));
                let jr_t: Vec<f64> = (0..9).map(|e| jr[3 * (e % 3) + e / 3]).collect();
                assert_close(&format!("{what}: Jl - Jrᵀ"), jl, &jr_t, tol(dtype, 4.0));
            }
        }
    }
}

/// A scalar mixing every output nonlinearly: `Σ q + ½ ‖Jr‖² + Σ_ij Jl_ij (Jr Jl)_ij`.
fn scalar_reference(w: V3) -> f64 {
    let (q, jr, jl) = reference(w);
    mix(&q, &jr, &jl)
}

fn scalar(w: Tensor) -> Tensor {
    let (q, jr, jl) = lie::so3_exp_with_jacobians(w);
    q.sum_all() + (jr * jr).sum_all() * 0.5 + (jl * jr.matmul(jl)).sum_all()
}

/// Reverse-mode derivatives in `f64`: the full Jacobian of the three outputs with respect to
/// `ω` and the gradient of a scalar of them, against central differences of the reference.
#[test]
fn so3_exp_with_jacobians_derivatives_match_finite_differences() {
    let ws = tangents(33, DType::F64);
    let input = array(DType::F64, &[ws.len(), 3], &flat(&ws));
    let h = 1e-6;
    for backend in backends(DType::F64) {
        let f = rfx::jit(rfx::vmap(rfx::jacobian(lie::so3_exp_with_jacobians))).on_backend(backend);
        let g = rfx::jit(rfx::vmap(rfx::grad(scalar))).on_backend(backend);
        let (Some(jac), Some(grad)) = (
            run("jacobian", backend, &f, (&input,)),
            run("grad", backend, &g, (&input,)),
        ) else {
            continue;
        };
        for (i, w) in ws.iter().enumerate() {
            let fd = central(
                |w: V3| {
                    let (q, jr, jl) = reference(w);
                    let mut out = [0.0; 22];
                    out[..4].copy_from_slice(&q);
                    out[4..13].copy_from_slice(&m3s(&[jr]));
                    out[13..].copy_from_slice(&m3s(&[jl]));
                    out
                },
                *w,
                h,
            );
            let scale_fd = fd.iter().flatten().fold(1.0f64, |a, b| a.max(b.abs()));
            let what = |name: &str| format!("{backend}: d {name} / d ω [{i}]");
            let rows = |from: usize, to: usize| flat(&fd[from..to]);
            let (q, jr, jl) = (&jac[3], &jac[4], &jac[5]);
            let tol = 1e-8 * scale_fd;
            assert_close(&what("exp"), &q[12 * i..12 * i + 12], &rows(0, 4), tol);
            assert_close(&what("jr"), &jr[27 * i..27 * i + 27], &rows(4, 13), tol);
            assert_close(&what("jl"), &jl[27 * i..27 * i + 27], &rows(13, 22), tol);
            let fd = central(|w: V3| [scalar_reference(w)], *w, h);
            let scale_fd = fd[0].iter().fold(1.0f64, |a, b| a.max(b.abs()));
            assert_close(
                &what("scalar"),
                &grad[0][3 * i..3 * i + 3],
                &fd[0],
                1e-8 * scale_fd,
            );
        }
    }
}

/// At `ω = 0` (the series) the derivatives are exact: `d Exp / d ω = [0; ½ I]`, and
/// `d Jr / d ωⱼ = -½ [eⱼ]×`, `d Jl / d ωⱼ = ½ [eⱼ]×` (the `[ω]×²` term is of second order).
#[test]
fn so3_exp_with_jacobians_derivatives_at_zero() {
    let zero = [0.0f64; 3];
    for backend in backends(DType::F64) {
        let f = rfx::jit(rfx::jacobian(lie::so3_exp_with_jacobians)).on_backend(backend);
        let Some(jac) = run("jacobian at zero", backend, &f, (&zero,)) else {
            continue;
        };
        assert_eq!(jac[0], [1.0, 0.0, 0.0, 0.0], "{backend}: Exp(0)");
        assert_eq!(jac[1], m3s(&[eye()]), "{backend}: Jr(0)");
        assert_eq!(jac[2], m3s(&[eye()]), "{backend}: Jl(0)");
        let mut dq = vec![0.0; 12];
        for j in 0..3 {
            dq[3 * (j + 1) + j] = 0.5;
        }
        assert_eq!(jac[3], dq, "{backend}: d Exp / d ω at 0");
        for (sign, got, name) in [(-0.5, &jac[4], "Jr"), (0.5, &jac[5], "Jl")] {
            // Entry (r, c, j) of the [3, 3, 3] Jacobian is d J_rc / d ω_j.
            let want: Vec<f64> = (0..27)
                .map(|e| {
                    let (r, c, j) = (e / 9, (e / 3) % 3, e % 3);
                    let mut unit = [0.0; 3];
                    unit[j] = 1.0;
                    sign * skew(unit)[r][c]
                })
                .collect();
            assert_eq!(got, &want, "{backend}: d {name} / d ω at 0");
        }
    }
}
