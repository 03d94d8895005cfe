//! `rfx::lie` SE(3) and SE(2) against the plain-Rust `f64` reference (`lie_ref`): `exp`,
//! `log`, the homogeneous matrix, composition, inverse, action, `between` and `interp`; the
//! right and left Jacobians of `Exp` and `Log` against reverse-mode derivatives through
//! `exp`/`log`, against Barfoot's block form evaluated in `f64`, and against central
//! differences; the compose, act and inverse Jacobians against derivatives; at the angles of
//! `lie_ref::angles` (0, 1e-12, 1e-7, generic, π - 1e-9, π, seeded random ones near 0 and π),
//! in `f64` and `f32`, on every backend of the build.

use crate::lie_common;
use crate::lie_ref;

use lie_common::{Se2, Se3, exp_log_jacobians, operation_jacobians, zeros};
use lie_ref::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::lie;
use rfx::{DType, Tensor};

const PI: f64 = std::f64::consts::PI;

/// SE(3) tangents `[ρ, ω]` with `‖ω‖` at every test angle and seeded random `ρ`.
fn se3_tangents(seed: u64) -> Vec<[f64; 6]> {
    let mut rng = StdRng::seed_from_u64(seed);
    angles(5, seed)
        .into_iter()
        .map(|theta| {
            let w = scale(axis(&mut rng), theta);
            let rho: V3 = std::array::from_fn(|_| rng.random_range(-2.0..2.0));
            [rho[0], rho[1], rho[2], w[0], w[1], w[2]]
        })
        .collect()
}

fn six(v: &[f64]) -> [f64; 6] {
    std::array::from_fn(|i| v[i])
}

fn se3_values(dtype: DType) {
    let xis = se3_tangents(11);
    let n = xis.len();
    let held: Vec<[f64; 6]> = stored(dtype, &flat(&xis)).chunks(6).map(six).collect();
    let input = array(dtype, &[n, 6], &flat(&held));
    let want: Vec<[f64; 7]> = held.iter().map(|&xi| pose_flat(se3_exp(xi))).collect();
    let want_m: Vec<f64> = want
        .iter()
        .flat_map(|&x| {
            let (q, t) = pose_of(x);
            let r = quat_matrix(q);
            [
                r[0][0], r[0][1], r[0][2], t[0], r[1][0], r[1][1], r[1][2], t[1], r[2][0], r[2][1], r[2][2],
                t[2], 0.0, 0.0, 0.0, 1.0,
            ]
        })
        .collect();
    for backend in backends(dtype) {
        let f = rfx::jit(|xi: Tensor| {
            let x = lie::se3_exp(xi);
            (x, lie::se3_log(x), lie::se3_to_matrix(x))
        })
        .on_backend(backend);
        let Some(out) = run("se3 values", backend, &f, (&input,)) else {
            continue;
        };
        let what = |name: &str| format!("{backend} {dtype}: {name}");
        // Translations reach |ρ| ≈ 3.5: errors relative to that.
        assert_close(&what("exp"), &out[0], &flat(&want), tol(dtype, 64.0));
        assert_close(&what("matrix"), &out[2], &want_m, tol(dtype, 64.0));
        for (i, xi) in held.iter().enumerate() {
            // At θ = π (w within rounding of 0) either axis sign is the same pose.
            if want[i][0].abs() < 1e3 * roundoff(dtype) {
                continue;
            }
            assert_close(
                &format!("{}[{i}]", what("log(exp)")),
                &out[1][6 * i..6 * i + 6],
                xi,
                tol(dtype, 256.0),
            );
        }
    }
}

#[test]
fn se3_exp_log_and_matrix_match_closed_forms_f64() {
    se3_values(DType::F64);
}

#[test]
fn se3_exp_log_and_matrix_match_closed_forms_f32() {
    se3_values(DType::F32);
}

fn mat6_mul(a: &[f64], b: &[f64]) -> Vec<f64> {
    (0..36)
        .map(|k| {
            let (i, j) = (k / 6, k % 6);
            (0..6).map(|l| a[6 * i + l] * b[6 * l + j]).sum()
        })
        .collect()
}

fn se3_derivatives(dtype: DType) {
    let xis = se3_tangents(12);
    let n = xis.len();
    let held: Vec<[f64; 6]> = stored(dtype, &flat(&xis)).chunks(6).map(six).collect();
    let input = array(dtype, &[n, 6], &flat(&held));
    let jr: Vec<f64> = held.iter().flat_map(|&xi| flat(&se3_jr(xi, false))).collect();
    let jl: Vec<f64> = held.iter().flat_map(|&xi| flat(&se3_jr(xi, true))).collect();
    let identity: Vec<f64> = (0..36).map(|k| f64::from(u8::from(k / 6 == k % 6))).collect();
    let ad_tol = [tol(dtype, 1024.0); 2];
    for (backend, a) in exp_log_jacobians::<Se3>(dtype, &input, ad_tol) {
        let what = |name: &str| format!("{backend} {dtype}: {name}");
        assert_close(&what("jr"), &a[0], &jr, tol(dtype, 64.0));
        assert_close(&what("jl"), &a[1], &jl, tol(dtype, 64.0));
        for i in 0..n {
            let block = |k: usize| &a[k][36 * i..36 * i + 36];
            assert_close(
                &format!("{}[{i}]", what("jr jr_inv")),
                &mat6_mul(block(0), block(2)),
                &identity,
                tol(dtype, 512.0),
            );
            assert_close(
                &format!("{}[{i}]", what("jl jl_inv")),
                &mat6_mul(block(1), block(3)),
                &identity,
                tol(dtype, 512.0),
            );
        }
    }
}

#[test]
fn se3_derivatives_through_exp_and_log_match_analytic_jacobians_f64() {
    se3_derivatives(DType::F64);
}

#[test]
fn se3_derivatives_through_exp_and_log_match_analytic_jacobians_f32() {
    se3_derivatives(DType::F32);
}

/// The right Jacobian by reverse mode against central differences of the reference, and the
/// derivative of `Log ∘ Exp` against the identity.
#[test]
fn se3_derivatives_match_finite_differences() {
    let xis = se3_tangents(13);
    let n = xis.len();
    let input = array(DType::F64, &[n, 6], &flat(&xis));
    let zeros = zeros(DType::F64, n, 6);
    let identity: Vec<f64> = (0..36).map(|k| f64::from(u8::from(k / 6 == k % 6))).collect();
    for backend in backends(DType::F64) {
        let f = rfx::jit(rfx::vmap(
            rfx::jacobian(|xi: Tensor, d: Tensor| {
                (
                    lie::se3_log(lie::se3_between(lie::se3_exp(xi), lie::se3_exp(xi + d))),
                    lie::se3_log(lie::se3_exp(xi + d)),
                )
            })
            .wrt(&[1]),
        ))
        .on_backend(backend);
        let Some(out) = run("se3 fd", backend, &f, (&input, &zeros)) else {
            continue;
        };
        for (i, &xi) in xis.iter().enumerate() {
            let fd = central(
                |d: [f64; 6]| {
                    let moved = se3_exp(std::array::from_fn(|k| xi[k] + d[k]));
                    se3_log(se3_compose(se3_inverse(se3_exp(xi)), moved))
                },
                [0.0; 6],
                1e-6,
            );
            assert_close(
                &format!("{backend}: jr[{i}]"),
                &out[2][36 * i..36 * i + 36],
                &flat(&fd),
                1e-7,
            );
            assert_close(
                &format!("{backend}: d log(exp)[{i}]"),
                &out[3][36 * i..36 * i + 36],
                &identity,
                1e-12,
            );
        }
    }
}

fn random_poses(rng: &mut StdRng, n: usize) -> Vec<[f64; 7]> {
    (0..n)
        .map(|_| {
            let w = scale(axis(rng), rng.random_range(0.1..3.0));
            let t: V3 = std::array::from_fn(|_| rng.random_range(-2.0..2.0));
            pose_flat((so3_exp(w), t))
        })
        .collect()
}

#[test]
fn se3_group_operations_match_the_reference() {
    let mut rng = StdRng::seed_from_u64(14);
    let n = 10;
    let (a, b) = (random_poses(&mut rng, n), random_poses(&mut rng, n));
    let p: Vec<V3> = (0..n)
        .map(|_| std::array::from_fn(|_| rng.random_range(-2.0..2.0)))
        .collect();
    let want_compose: Vec<[f64; 7]> = (0..n)
        .map(|i| pose_flat(se3_compose(pose_of(a[i]), pose_of(b[i]))))
        .collect();
    let want_inverse: Vec<[f64; 7]> = a.iter().map(|&x| pose_flat(se3_inverse(pose_of(x)))).collect();
    let want_between: Vec<[f64; 7]> = (0..n)
        .map(|i| pose_flat(se3_compose(se3_inverse(pose_of(a[i])), pose_of(b[i]))))
        .collect();
    let want_act: Vec<V3> = (0..n)
        .map(|i| {
            let (q, t) = pose_of(a[i]);
            add(mat_vec(&quat_matrix(q), p[i]), t)
        })
        .collect();
    // Halfway along the geodesic: a ∘ Exp(½ Log(a⁻¹ b)).
    let want_half: Vec<[f64; 7]> = (0..n)
        .map(|i| {
            let half = se3_log(pose_of(want_between[i])).map(|c| c * 0.5);
            pose_flat(se3_compose(pose_of(a[i]), se3_exp(half)))
        })
        .collect();
    let (xa, xb) = (
        array(DType::F64, &[n, 7], &flat(&a)),
        array(DType::F64, &[n, 7], &flat(&b)),
    );
    let pts = array(DType::F64, &[n, 3], &flat(&p));
    let half = array(DType::F64, &[], &[0.5]);
    for backend in backends(DType::F64) {
        let f = rfx::jit(|a: Tensor, b: Tensor, p: Tensor, t: Tensor| {
            vec![
                lie::se3_compose(a, b),
                lie::se3_inverse(a),
                lie::se3_between(a, b),
                lie::se3_act(a, p),
                lie::se3_interp(a, b, t),
            ]
        })
        .on_backend(backend);
        let Some(out) = run("se3 ops", backend, &f, (&xa, &xb, &pts, &half)) else {
            continue;
        };
        let tol = 256.0 * roundoff(DType::F64);
        assert_close(&format!("{backend}: compose"), &out[0], &flat(&want_compose), tol);
        assert_close(&format!("{backend}: inverse"), &out[1], &flat(&want_inverse), tol);
        assert_close(&format!("{backend}: between"), &out[2], &flat(&want_between), tol);
        assert_close(&format!("{backend}: act"), &out[3], &flat(&want_act), tol);
        assert_close(
            &format!("{backend}: interp"),
            &out[4],
            &flat(&want_half),
            4.0 * tol,
        );
    }
}

#[test]
fn se3_operation_jacobians_match_derivatives() {
    let mut rng = StdRng::seed_from_u64(15);
    let n = 6;
    let (a, b) = (random_poses(&mut rng, n), random_poses(&mut rng, n));
    let p: Vec<V3> = (0..n)
        .map(|_| std::array::from_fn(|_| rng.random_range(-2.0..2.0)))
        .collect();
    let (xa, xb) = (
        array(DType::F64, &[n, 7], &flat(&a)),
        array(DType::F64, &[n, 7], &flat(&b)),
    );
    let pts = array(DType::F64, &[n, 3], &flat(&p));
    operation_jacobians::<Se3>(&xa, &xb, &pts, 1024.0 * roundoff(DType::F64));
}

/// SE(2): values against the reference, the Jacobians of `Exp` and `Log` against reverse mode
/// and (in `f64`) that of `Exp` against central differences, at 0, 1e-12, 1e-7, generic angles, ±(π - 1e-9) and π.
fn se2_reference(dtype: DType) {
    let mut rng = StdRng::seed_from_u64(16);
    let thetas = [0.0, 1e-12, -1e-7, 0.3, -1.5, 2.5, PI - 1e-9, -(PI - 1e-9), PI];
    let n = thetas.len();
    let xis: Vec<[f64; 3]> = thetas
        .iter()
        .map(|&t| [rng.random_range(-2.0..2.0), rng.random_range(-2.0..2.0), t])
        .collect();
    let others: Vec<[f64; 4]> = (0..n)
        .map(|_| {
            se2_exp([
                rng.random_range(-2.0..2.0),
                rng.random_range(-2.0..2.0),
                rng.random_range(-3.0..3.0),
            ])
        })
        .collect();
    // The reference runs on the values the arrays hold.
    let xis: Vec<[f64; 3]> = stored(dtype, &flat(&xis))
        .chunks(3)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    let others: Vec<[f64; 4]> = stored(dtype, &flat(&others))
        .chunks(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    let want_exp: Vec<[f64; 4]> = xis.iter().map(|&xi| se2_exp(xi)).collect();
    let want_between: Vec<[f64; 4]> = (0..n)
        .map(|i| se2_compose(se2_inverse(want_exp[i]), others[i]))
        .collect();
    let input = array(dtype, &[n, 3], &flat(&xis));
    let other = array(dtype, &[n, 4], &flat(&others));
    let tol = 256.0 * roundoff(dtype);
    for backend in backends(dtype) {
        let f = rfx::jit(|xi: Tensor, b: Tensor| {
            let x = lie::se2_exp(xi);
            (x, lie::se2_log(x), lie::se2_between(x, b))
        })
        .on_backend(backend);
        let Some(out) = run("se2 values", backend, &f, (&input, &other)) else {
            continue;
        };
        assert_close(&format!("{backend}: exp"), &out[0], &flat(&want_exp), tol);
        let want_log: Vec<[f64; 3]> = want_exp.iter().map(|&x| se2_log(x)).collect();
        assert_close(&format!("{backend}: log"), &out[1], &flat(&want_log), tol);
        assert_close(&format!("{backend}: between"), &out[2], &flat(&want_between), tol);
    }
    for (backend, a) in exp_log_jacobians::<Se2>(dtype, &input, [tol, 4.0 * tol]) {
        if dtype != DType::F64 {
            continue;
        }
        for (i, &xi) in xis.iter().enumerate() {
            let fd = central(
                |d: [f64; 3]| {
                    se2_log(se2_compose(
                        se2_inverse(se2_exp(xi)),
                        se2_exp(std::array::from_fn(|k| xi[k] + d[k])),
                    ))
                },
                [0.0; 3],
                1e-6,
            );
            assert_close(
                &format!("{backend}: jr[{i}] vs differences"),
                &a[0][9 * i..9 * i + 9],
                &flat(&fd),
                1e-7,
            );
        }
    }
}

#[test]
fn se2_matches_the_reference_f64() {
    se2_reference(DType::F64);
}

#[test]
fn se2_matches_the_reference_f32() {
    se2_reference(DType::F32);
}

/// SE(2)'s Jacobians of `Log` and of compose, act and inverse against reverse-mode
/// derivatives of the perturbed operations.
#[test]
fn se2_operation_jacobians_match_derivatives() {
    let mut rng = StdRng::seed_from_u64(17);
    let n = 8;
    let pose = |rng: &mut StdRng| {
        se2_exp([
            rng.random_range(-2.0..2.0),
            rng.random_range(-2.0..2.0),
            rng.random_range(-3.1..3.1),
        ])
    };
    let a: Vec<[f64; 4]> = (0..n).map(|_| pose(&mut rng)).collect();
    let b: Vec<[f64; 4]> = (0..n).map(|_| pose(&mut rng)).collect();
    let p: Vec<[f64; 2]> = (0..n)
        .map(|_| [rng.random_range(-2.0..2.0), rng.random_range(-2.0..2.0)])
        .collect();
    let (xa, xb) = (
        array(DType::F64, &[n, 4], &flat(&a)),
        array(DType::F64, &[n, 4], &flat(&b)),
    );
    let pts = array(DType::F64, &[n, 2], &flat(&p));
    operation_jacobians::<Se2>(&xa, &xb, &pts, 256.0 * roundoff(DType::F64));
}

/// The single-output functions in `rfx::expr` compute what the Rust functions compute, and a
/// wrong argument count is a typed error with a position.
#[test]
fn expression_language_calls_the_lie_functions() {
    let mut rng = StdRng::seed_from_u64(18);
    let n = 5;
    let xis: Vec<[f64; 6]> = (0..n)
        .map(|_| std::array::from_fn(|_| rng.random_range(-2.0..2.0)))
        .collect();
    let p: Vec<V3> = (0..n)
        .map(|_| std::array::from_fn(|_| rng.random_range(-2.0..2.0)))
        .collect();
    let input = array(DType::F64, &[n, 6], &flat(&xis));
    let pts = array(DType::F64, &[n, 3], &flat(&p));
    let source =
        "x = se3_exp(xi); y = se3_act(x, p); w = so3_log(so3_exp(omega)); j = se3_jr_inv(se3_log(x))";
    let signature = "xi: f64[5,6], p: f64[5,3], omega: f64[5,3]"
        .parse()
        .expect("signature");
    let kernel =
        rfx::expr::compile_with_outputs(source, &signature, &["x", "y", "w", "j"]).expect("compiles");
    let omega = array(DType::F64, &[n, 3], &flat(&p));
    let got = rfx::jit_kernel(kernel)
        .call((&input, &pts, &omega))
        .expect("runs");
    let want = rfx::jit(|xi: Tensor, p: Tensor, omega: Tensor| {
        let x = lie::se3_exp(xi);
        vec![
            x,
            lie::se3_act(x, p),
            lie::so3_log(lie::so3_exp(omega)),
            lie::se3_jr_inv(lie::se3_log(x)),
        ]
    })
    .call((&input, &pts, &omega))
    .expect("runs");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.shape(), w.shape());
        assert_eq!(g.to_f64_vec(), w.to_f64_vec());
    }
    let err = rfx::expr::compile("so3_exp(omega, omega)", &signature).expect_err("two arguments");
    assert!(
        err.to_string().contains("`so3_exp` takes 1 argument(s), got 2"),
        "{err}"
    );
    let names: Vec<&str> = rfx::expr::functions().iter().map(|f| f.name).collect();
    assert!(names.contains(&"se3_jl_inv") && names.contains(&"so2_interp"));
}
