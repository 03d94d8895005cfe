//! Every kernel against an independent f64 reference (`reference/`), on seeded random inputs,
//! in f64 and f32.
//!
//! Inputs are drawn in f64; for the f32 run they are rounded to f32 *before* the reference
//! runs, so the comparison measures the kernel's arithmetic, not the input rounding. An element
//! passes when `|got - want| <= tol · (1 + |want|)`. Tolerances (f64 / f32): elementwise
//! arithmetic 1e-13 / 1e-6; with transcendentals (≤ 3 ULP polynomials) 1e-12 / 1e-5; slerp and
//! rotation-matrix conversions (acos, square roots of small differences) 1e-11 / 2e-5; FK
//! Jacobians against central differences (h = 1e-6 on the f64 reference, truncation ≈ 1e-12,
//! rounding ≈ 1e-10) 1e-8 / 2e-5.

use crate::reference;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reference as r;
use rfx::{Array, DType};
use rfx_control::*;

const N: usize = 203; // not a multiple of any vector width: the ragged tail runs too

type Input = (Vec<usize>, Vec<f64>);

fn vec1(values: Vec<f64>) -> Input {
    (vec![values.len()], values)
}

fn scalar(value: f64) -> Input {
    (vec![], vec![value])
}

fn uniform(rng: &mut StdRng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// Rounds the inputs to `dtype`'s precision (a no-op for f64).
fn round(inputs: &[Input], dtype: DType) -> Vec<Input> {
    inputs
        .iter()
        .map(|(shape, v)| {
            let v = match dtype {
                DType::F32 => v.iter().map(|&x| f64::from(x as f32)).collect(),
                _ => v.clone(),
            };
            (shape.clone(), v)
        })
        .collect()
}

/// The inputs as arrays of `dtype` (f32 or f64).
fn arrays(inputs: &[Input], dtype: DType) -> Vec<Array> {
    inputs
        .iter()
        .map(|(shape, v)| match dtype {
            DType::F32 => {
                rfx::array(shape.clone(), v.iter().map(|&x| x as f32).collect()).expect("f32 array")
            }
            _ => rfx::array(shape.clone(), v.clone()).expect("f64 array"),
        })
        .collect()
}

fn run(jit: &ControlJit, inputs: &[Input], dtype: DType) -> Vec<Vec<f64>> {
    let out = jit.call(&arrays(inputs, dtype)[..]).expect("kernel call");
    for a in &out {
        assert_eq!(a.dtype(), dtype);
    }
    out.iter().map(Array::to_f64_vec).collect()
}

#[track_caller]
fn check(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: got {g}, want {w} (diff {:e}, tol {tol:e})",
            (g - w).abs()
        );
    }
}

/// Runs `body(dtype, tol)` for f64 and f32.
fn each_dtype(tol64: f64, tol32: f64, mut body: impl FnMut(DType, f64)) {
    body(DType::F64, tol64);
    body(DType::F32, tol32);
}

/// The reference applied per element: `f(inputs at i) -> outputs at i`, as output columns.
fn per_element<const O: usize>(inputs: &[Input], f: impl Fn(&[f64]) -> [f64; O]) -> Vec<Vec<f64>> {
    let n = inputs.iter().map(|(_, v)| v.len()).max().expect("inputs");
    let mut cols = vec![Vec::with_capacity(n); O];
    for i in 0..n {
        // Inputs of one element broadcast.
        let row: Vec<f64> = inputs
            .iter()
            .map(|(_, v)| v[if v.len() == 1 { 0 } else { i }])
            .collect();
        for (col, value) in cols.iter_mut().zip(f(&row)) {
            col.push(value);
        }
    }
    cols
}

fn check_all(what: &str, got: &[Vec<f64>], want: &[Vec<f64>], tol: f64, dtype: DType) {
    assert_eq!(got.len(), want.len(), "{what}: output count");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        check(&format!("{what} {dtype} output {k}"), g, w, tol);
    }
}

#[test]
fn pid_matches_reference_and_hits_both_clamps() {
    let cfg = PidConfig {
        kp: 2.0,
        ki: 5.0,
        kd: 0.05,
        dt: 0.01,
        integral_min: -0.5,
        integral_max: 0.4,
        command_min: -3.0,
        command_max: 2.5,
    };
    let p = r::Pid {
        kp: 2.0,
        ki: 5.0,
        kd: 0.05,
        dt: 0.01,
        i_lo: -0.5,
        i_hi: 0.4,
        u_lo: -3.0,
        u_hi: 2.5,
    };
    let jit = pid(cfg);
    let mut rng = StdRng::seed_from_u64(1);
    let y = uniform(&mut rng, N, -2.0, 2.0);
    let y_prev: Vec<f64> = y.iter().map(|v| v + rng.random_range(-0.05..0.05)).collect();
    let inputs = [
        vec1(uniform(&mut rng, N, -2.0, 2.0)),
        vec1(y),
        vec1(y_prev),
        vec1(uniform(&mut rng, N, -0.6, 0.6)),
    ];
    each_dtype(1e-13, 1e-6, |dtype, tol| {
        let inputs = round(&inputs, dtype);
        let got = run(&jit, &inputs, dtype);
        let want = per_element(&inputs, |v| {
            let (u, i) = r::pid(&p, v[0], v[1], v[2], v[3]);
            [u, i]
        });
        check_all("pid", &got, &want, tol, dtype);
        // The limits as the kernel's dtype holds them.
        let limit = |v: f64| {
            if dtype == DType::F32 {
                f64::from(v as f32)
            } else {
                v
            }
        };
        let hits = |col: &[f64], lo: f64, hi: f64| {
            let (lo, hi) = (limit(lo), limit(hi));
            (
                col.iter().filter(|&&v| v == lo).count(),
                col.iter().filter(|&&v| v == hi).count(),
            )
        };
        let (u_lo, u_hi) = hits(&got[0], -3.0, 2.5);
        let (i_lo, i_hi) = hits(&got[1], -0.5, 0.4);
        assert!(
            u_lo > 0 && u_hi > 0 && i_lo > 0 && i_hi > 0,
            "clamps: {u_lo} {u_hi} {i_lo} {i_hi}"
        );
    });
    assert_eq!(jit.compile_count(), 2, "one kernel per dtype");
}

#[test]
fn low_pass_with_shared_and_per_element_alpha() {
    let jit = low_pass();
    let mut rng = StdRng::seed_from_u64(2);
    let x = vec1(uniform(&mut rng, N, -3.0, 3.0));
    let y = vec1(uniform(&mut rng, N, -3.0, 3.0));
    for alpha in [
        scalar(low_pass_alpha(5.0, 0.001)),
        vec1(uniform(&mut rng, N, 0.01, 1.0)),
    ] {
        let inputs = [x.clone(), y.clone(), alpha];
        each_dtype(1e-13, 1e-6, |dtype, tol| {
            let inputs = round(&inputs, dtype);
            let got = run(&jit, &inputs, dtype);
            let want = per_element(&inputs, |v| [r::low_pass(v[0], v[1], v[2])]);
            check_all("low_pass", &got, &want, tol, dtype);
        });
    }
    let alpha = low_pass_alpha(5.0, 0.001);
    assert!((alpha - 0.001 / (0.001 + 1.0 / (2.0 * std::f64::consts::PI * 5.0))).abs() < 1e-15);
}

#[test]
fn low_pass_signal_is_the_step_iterated_over_each_row() {
    let jit = low_pass_signal();
    let mut rng = StdRng::seed_from_u64(12);
    for steps in [1usize, 7, 64, 300] {
        let rows = 37;
        let x = (vec![rows, steps], uniform(&mut rng, rows * steps, -3.0, 3.0));
        let y_prev = vec1(uniform(&mut rng, rows, -3.0, 3.0));
        for alpha in [
            scalar(low_pass_alpha(5.0, 0.001)),
            vec1(uniform(&mut rng, rows, 0.01, 1.0)),
        ] {
            let inputs = [x.clone(), y_prev.clone(), alpha];
            each_dtype(1e-12, 2e-5, |dtype, tol| {
                let inputs = round(&inputs, dtype);
                let got = run(&jit, &inputs, dtype);
                let (xs, y0, alphas) = (&inputs[0].1, &inputs[1].1, &inputs[2].1);
                let mut want = Vec::with_capacity(rows * steps);
                let mut last = Vec::with_capacity(rows);
                for (row, signal) in xs.chunks(steps).enumerate() {
                    let a = alphas[if alphas.len() == 1 { 0 } else { row }];
                    let mut y = y0[row];
                    for &sample in signal {
                        y = r::low_pass(sample, y, a);
                        want.push(y);
                    }
                    last.push(y);
                }
                let what = format!("low_pass_signal T={steps} {dtype}");
                check(&format!("{what} y"), &got[0], &want, tol);
                check(&format!("{what} y_last"), &got[1], &last, tol);
            });
        }
    }
    // A step input approaches the input as 1 - (1 - alpha)^(t+1) from rest.
    let (rows, steps, alpha) = (2, 50, 0.1);
    let got = run(
        &jit,
        &[
            (vec![rows, steps], vec![1.0; rows * steps]),
            vec1(vec![0.0; rows]),
            scalar(alpha),
        ],
        DType::F64,
    );
    for (i, y) in got[0].iter().enumerate() {
        let t = (i % steps) as i32;
        check("step response", &[*y], &[1.0 - (1.0 - alpha).powi(t + 1)], 1e-14);
    }
    // No samples: the state is unchanged.
    let got = run(
        &jit,
        &[(vec![3, 0], vec![]), vec1(vec![1.0, -2.0, 0.5]), scalar(0.3)],
        DType::F64,
    );
    assert!(got[0].is_empty());
    assert_eq!(got[1], [1.0, -2.0, 0.5]);
}

#[test]
fn complementary_filter() {
    let jit = complementary();
    let mut rng = StdRng::seed_from_u64(3);
    let inputs = [
        vec1(uniform(&mut rng, N, -1.5, 1.5)),
        vec1(uniform(&mut rng, N, -4.0, 4.0)),
        vec1(uniform(&mut rng, N, -9.8, 9.8)),
        vec1(uniform(&mut rng, N, -9.8, 9.8)),
        scalar(0.98),
        scalar(0.002),
    ];
    each_dtype(1e-12, 1e-5, |dtype, tol| {
        let inputs = round(&inputs, dtype);
        let got = run(&jit, &inputs, dtype);
        let want = per_element(&inputs, |v| {
            [r::complementary(v[0], v[1], v[2], v[3], v[4], v[5])]
        });
        check_all("complementary", &got, &want, tol, dtype);
    });
}

#[test]
fn moving_average_over_axis_1() {
    let jit = moving_average();
    let mut rng = StdRng::seed_from_u64(4);
    for k in [1, 5, 8] {
        let window = uniform(&mut rng, N * k, -10.0, 10.0);
        let inputs = [(vec![N, k], window)];
        each_dtype(1e-13, 1e-6, |dtype, tol| {
            let inputs = round(&inputs, dtype);
            let got = run(&jit, &inputs, dtype);
            let want: Vec<f64> = inputs[0].1.chunks(k).map(r::moving_average).collect();
            check(&format!("moving_average k={k} {dtype}"), &got[0], &want, tol);
        });
    }
}

#[test]
fn gain_schedule_interpolates_and_holds_the_ends() {
    let (x0, dx) = (-0.5, 0.25);
    let jit = gain_schedule(x0, dx);
    let mut rng = StdRng::seed_from_u64(9);
    for k in [1, 2, 9] {
        // Operating points from below the first knot to past the last, the knots themselves,
        // and a NaN.
        let mut x = uniform(&mut rng, N, x0 - 2.0 * dx, x0 + (k as f64 + 1.0) * dx);
        for (j, x) in x.iter_mut().take(k).enumerate() {
            *x = x0 + j as f64 * dx;
        }
        x[N - 1] = f64::NAN;
        let table = uniform(&mut rng, k, -3.0, 3.0);
        let inputs = [vec1(x), vec1(table)];
        each_dtype(1e-13, 1e-6, |dtype, tol| {
            let inputs = round(&inputs, dtype);
            let got = run(&jit, &inputs, dtype);
            let table = &inputs[1].1;
            let want: Vec<f64> = inputs[0]
                .1
                .iter()
                .map(|&x| r::gain_schedule(x, x0, dx, table))
                .collect();
            assert!(got[0][N - 1].is_nan(), "k={k} {dtype}: a NaN point");
            check(
                &format!("gain_schedule k={k} {dtype}"),
                &got[0][..N - 1],
                &want[..N - 1],
                tol,
            );
        });
    }
}

fn random_covariance(rng: &mut StdRng) -> [Vec<f64>; 3] {
    let p00 = uniform(rng, N, 0.1, 2.0);
    let p11 = uniform(rng, N, 0.1, 2.0);
    let p01 = (0..N)
        .map(|i| rng.random_range(-0.9..0.9) * (p00[i] * p11[i]).sqrt())
        .collect();
    [p00, p01, p11]
}

#[test]
fn kalman_predict_and_update() {
    let (dt, q, meas) = (0.01, 0.5, 0.04);
    let predict = kalman_predict(dt, q);
    let update = kalman_update(meas);
    let mut rng = StdRng::seed_from_u64(5);
    let [p00, p01, p11] = random_covariance(&mut rng);
    let state = [
        vec1(uniform(&mut rng, N, -5.0, 5.0)),
        vec1(uniform(&mut rng, N, -2.0, 2.0)),
        vec1(p00),
        vec1(p01),
        vec1(p11),
    ];
    let unpack = |v: &[f64]| ([v[0], v[1]], [[v[2], v[3]], [v[3], v[4]]]);
    let pack = |(x, p): ([f64; 2], r::Mat2)| {
        assert!((p[0][1] - p[1][0]).abs() < 1e-9, "covariance stays symmetric");
        [x[0], x[1], p[0][0], p[0][1], p[1][1]]
    };
    each_dtype(1e-13, 1e-6, |dtype, tol| {
        let inputs = round(&state, dtype);
        let got = run(&predict, &inputs, dtype);
        let want = per_element(&inputs, |v| {
            let (x, p) = unpack(v);
            pack(r::kalman_predict(x, p, dt, q))
        });
        check_all("kalman_predict", &got, &want, tol, dtype);
    });
    let mut with_z = state.to_vec();
    with_z.push(vec1(uniform(&mut rng, N, -5.0, 5.0)));
    each_dtype(1e-13, 1e-6, |dtype, tol| {
        let inputs = round(&with_z, dtype);
        let got = run(&update, &inputs, dtype);
        let want = per_element(&inputs, |v| {
            let (x, p) = unpack(v);
            pack(r::kalman_update(x, p, v[5], meas))
        });
        check_all("kalman_update", &got, &want, tol, dtype);
    });
}

fn random_quats(rng: &mut StdRng, unit: bool) -> [Vec<f64>; 4] {
    let mut q: [Vec<f64>; 4] = std::array::from_fn(|_| uniform(rng, N, -1.0, 1.0));
    if unit {
        for i in 0..N {
            let n = (0..4).map(|c| q[c][i] * q[c][i]).sum::<f64>().sqrt();
            for c in &mut q {
                c[i] /= n;
            }
        }
    }
    q
}

fn quat_inputs(q: &[Vec<f64>; 4]) -> Vec<Input> {
    q.iter().map(|c| vec1(c.clone())).collect()
}

#[test]
fn quaternion_product_and_conjugate() {
    let mut rng = StdRng::seed_from_u64(6);
    let a = random_quats(&mut rng, false);
    let b = random_quats(&mut rng, false);
    let mut inputs = quat_inputs(&a);
    inputs.extend(quat_inputs(&b));
    let mul = quat_mul();
    let conj = quat_conj();
    each_dtype(1e-13, 1e-6, |dtype, tol| {
        let inputs = round(&inputs, dtype);
        let got = run(&mul, &inputs, dtype);
        let want = per_element(&inputs, |v| {
            r::qmul([v[0], v[1], v[2], v[3]], [v[4], v[5], v[6], v[7]])
        });
        check_all("quat_mul", &got, &want, tol, dtype);
        let got = run(&conj, &inputs[..4], dtype);
        let want = per_element(&inputs[..4], |v| r::qconj([v[0], v[1], v[2], v[3]]));
        check_all("quat_conj", &got, &want, 0.0, dtype);
    });
}

#[test]
fn quaternion_normalize_including_near_zero_norm() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut q = random_quats(&mut rng, false);
    // Edge cases: exact zero, below NORM_EPS (identity), just above it and small but normal.
    for (i, scale) in [(0, 0.0), (1, 1e-14), (2, 3e-13), (3, 1e-11), (4, 1e-6), (5, 1e3)] {
        for c in &mut q {
            c[i] *= scale;
        }
    }
    let inputs = quat_inputs(&q);
    let jit = quat_normalize();
    each_dtype(1e-13, 1e-6, |dtype, tol| {
        let inputs = round(&inputs, dtype);
        let got = run(&jit, &inputs, dtype);
        let want = per_element(&inputs, |v| r::qnormalize([v[0], v[1], v[2], v[3]], NORM_EPS));
        check_all("quat_normalize", &got, &want, tol, dtype);
        for i in 0..3 {
            let gi: Vec<f64> = got.iter().map(|c| c[i]).collect();
            assert_eq!(gi, [1.0, 0.0, 0.0, 0.0], "element {i} ({dtype}) is the identity");
        }
        assert!(got.iter().flatten().all(|v| v.is_finite()));
    });
}

#[test]
fn quaternion_rotate_vector() {
    let mut rng = StdRng::seed_from_u64(8);
    let q = random_quats(&mut rng, true);
    let mut inputs = quat_inputs(&q);
    for _ in 0..3 {
        inputs.push(vec1(uniform(&mut rng, N, -2.0, 2.0)));
    }
    let jit = quat_rotate();
    each_dtype(1e-13, 1e-6, |dtype, tol| {
        let inputs = round(&inputs, dtype);
        let got = run(&jit, &inputs, dtype);
        // The reference normalises: the f32-rounded q is unit only to 1e-7.
        let want = per_element(&inputs, |v| {
            r::qrotate(r::qnormalize([v[0], v[1], v[2], v[3]], 0.0), [v[4], v[5], v[6]])
        });
        check_all("quat_rotate", &got, &want, tol * 4.0, dtype);
    });
}

#[test]
fn quaternion_from_axis_angle_including_zero_axis() {
    let mut rng = StdRng::seed_from_u64(9);
    let mut axis: Vec<Vec<f64>> = (0..3).map(|_| uniform(&mut rng, N, -2.0, 2.0)).collect();
    for c in &mut axis {
        c[0] = 0.0;
        c[1] *= 1e-14;
    }
    let mut inputs: Vec<Input> = axis.into_iter().map(vec1).collect();
    inputs.push(vec1(uniform(
        &mut rng,
        N,
        -std::f64::consts::PI,
        std::f64::consts::PI,
    )));
    let jit = quat_from_axis_angle();
    each_dtype(1e-12, 1e-5, |dtype, tol| {
        let inputs = round(&inputs, dtype);
        let got = run(&jit, &inputs, dtype);
        let want = per_element(&inputs, |v| {
            r::qfrom_axis_angle([v[0], v[1], v[2]], v[3], NORM_EPS)
        });
        check_all("quat_from_axis_angle", &got, &want, tol, dtype);
        assert_eq!([got[0][0], got[1][0], got[2][0], got[3][0]], [1.0, 0.0, 0.0, 0.0]);
        assert_eq!([got[0][1], got[1][1], got[2][1], got[3][1]], [1.0, 0.0, 0.0, 0.0]);
    });
}

#[test]
fn quaternion_slerp_including_antipodal_and_near_identical() {
    let mut rng = StdRng::seed_from_u64(10);
    let a = random_quats(&mut rng, true);
    let mut b = random_quats(&mut rng, true);
    let small_rotation = |rng: &mut StdRng, angle: f64| {
        let axis = [
            rng.random_range(-1.0..1.0),
            rng.random_range(-1.0..1.0),
            rng.random_range(-1.0..1.0),
        ];
        r::qfrom_axis_angle(axis, angle, 0.0)
    };
    for i in 0..40 {
        let ai = [a[0][i], a[1][i], a[2][i], a[3][i]];
        let bi = match i % 4 {
            0 => ai.map(|c| -c),                                          // exactly antipodal
            1 => r::qmul(ai, small_rotation(&mut rng, 0.5)).map(|c| -c),  // flipped, slerp branch
            2 => r::qmul(ai, small_rotation(&mut rng, 0.01)),             // near-identical: lerp
            _ => r::qmul(ai, small_rotation(&mut rng, 0.01)).map(|c| -c), // both
        };
        for c in 0..4 {
            b[c][i] = bi[c];
        }
    }
    let mut inputs = quat_inputs(&a);
    inputs.extend(quat_inputs(&b));
    let jit = quat_slerp();
    for t in [
        vec1(uniform(&mut rng, N, 0.0, 1.0)),
        scalar(0.3),
        scalar(0.0),
        scalar(1.0),
    ] {
        let mut inputs = inputs.clone();
        inputs.push(t);
        each_dtype(1e-11, 2e-5, |dtype, tol| {
            let inputs = round(&inputs, dtype);
            let got = run(&jit, &inputs, dtype);
            let want = per_element(&inputs, |v| {
                r::qslerp(
                    [v[0], v[1], v[2], v[3]],
                    [v[4], v[5], v[6], v[7]],
                    v[8],
                    SLERP_LERP_THRESHOLD,
                )
            });
            check_all("quat_slerp", &got, &want, tol, dtype);
            // b = -a: the short arc is no motion at all.
            for (c, col) in got.iter().enumerate() {
                assert!(
                    (col[0] - inputs[c].1[0]).abs() < 1e-6,
                    "antipodal slerp stays at a"
                );
            }
        });
    }
}

#[test]
fn quaternion_to_rotation_matrix_and_back() {
    let mut rng = StdRng::seed_from_u64(11);
    let mut q = random_quats(&mut rng, false);
    // Edge cases: identity, rotations by π about each axis (w = 0), w = 0 with mixed axis.
    let edges = [
        [1.0, 0.0, 0.0, 0.0],
        [0.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0],
        [0.0, 0.0, 0.0, 1.0],
        [0.0, 0.6, -0.8, 0.0],
        [0.0, 0.0, 0.0, 0.0], // to_rotmat only: the identity matrix
    ];
    for (i, e) in edges.iter().enumerate() {
        for c in 0..4 {
            q[c][i] = e[c];
        }
    }
    let to_mat = quat_to_rotmat();
    let to_quat = rotmat_to_quat();
    each_dtype(1e-13, 1e-6, |dtype, tol| {
        let inputs = round(&quat_inputs(&q), dtype);
        let got = run(&to_mat, &inputs, dtype);
        let want = per_element(&inputs, |v| {
            if v.iter().all(|&c| c == 0.0) {
                [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
            } else {
                r::qto_rotmat([v[0], v[1], v[2], v[3]])
            }
        });
        check_all("quat_to_rotmat", &got, &want, tol * 4.0, dtype);
    });
    // Back: matrices from unit quaternions (the reference's own), skipping the zero quaternion.
    let mats = per_element(&quat_inputs(&q), |v| {
        r::qto_rotmat(if v.iter().all(|&c| c == 0.0) {
            [1.0, 0.0, 0.0, 0.0]
        } else {
            [v[0], v[1], v[2], v[3]]
        })
    });
    let mat_inputs: Vec<Input> = mats.into_iter().map(vec1).collect();
    each_dtype(1e-11, 2e-5, |dtype, tol| {
        let inputs = round(&mat_inputs, dtype);
        let got = run(&to_quat, &inputs, dtype);
        let want = per_element(&inputs, |m| r::rotmat_to_quat(std::array::from_fn(|i| m[i])));
        for i in 0..N {
            let g: Vec<f64> = got.iter().map(|c| c[i]).collect();
            let w: Vec<f64> = want.iter().map(|c| c[i]).collect();
            assert!(g[0] >= 0.0, "w >= 0");
            // q and -q are one rotation; at w = 0 both signs are valid.
            let same = (0..4).all(|c| (g[c] - w[c]).abs() <= tol * 2.0);
            let flipped = (0..4).all(|c| (g[c] + w[c]).abs() <= tol * 2.0);
            assert!(
                same || (flipped && w[0].abs() < 1e-6),
                "rotmat_to_quat {dtype} [{i}]: {g:?} vs {w:?}"
            );
        }
    });
}

fn transpose_jacobian<const O: usize>(cd: &[[f64; O]]) -> Vec<f64> {
    // [input][output] → outputs-major, inputs inner (the kernel's jac_<out>_<in> order).
    (0..O).flat_map(|o| cd.iter().map(move |col| col[o])).collect()
}

#[test]
fn planar_arm_fk_and_jacobian_including_stretched_arm() {
    let (l1, l2) = (0.7, 0.45);
    let fk = fk_planar2(l1, l2);
    let jac = fk_planar2_jacobian(l1, l2);
    let mut rng = StdRng::seed_from_u64(12);
    let q1 = uniform(&mut rng, N, -3.1, 3.1);
    let mut q2 = uniform(&mut rng, N, -3.1, 3.1);
    for v in q2.iter_mut().take(10) {
        *v = 0.0; // fully stretched: the Jacobian loses rank
    }
    q2[10] = std::f64::consts::PI; // folded back
    let inputs = [vec1(q1), vec1(q2)];
    each_dtype(1e-12, 1e-5, |dtype, tol| {
        let inputs = round(&inputs, dtype);
        let got = run(&fk, &inputs, dtype);
        let want = per_element(&inputs, |v| r::fk_planar2(l1, l2, v[0], v[1]));
        check_all("fk_planar2", &got, &want, tol, dtype);
        let got = run(&jac, &inputs, dtype);
        check_all("fk_planar2_jacobian value", &got[..2], &want, tol, dtype);
        let jtol = if dtype == DType::F64 { 1e-8 } else { 2e-5 };
        let want_j = per_element::<4>(&inputs, |v| {
            let cd = r::central_differences(|q| r::fk_planar2(l1, l2, q[0], q[1]), v, 1e-6);
            std::array::from_fn(|k| transpose_jacobian(&cd)[k])
        });
        check_all("fk_planar2_jacobian", &got[2..], &want_j, jtol, dtype);
        // Stretched: the columns are parallel (det = l1 l2 sin q2 = 0).
        let det = |i: usize| got[2][i] * got[5][i] - got[3][i] * got[4][i];
        for det in (0..10).map(det) {
            assert!(det.abs() < 1e-6, "singular at q2 = 0: det {det}");
        }
    });
}

fn dh_reference(params: &[DhParam; 6]) -> Vec<r::Dh> {
    params
        .iter()
        .map(|p| (p.a, p.alpha, p.d, p.theta_offset))
        .collect()
}

#[test]
fn six_dof_fk_and_jacobian_including_singularities() {
    let custom = [
        DhParam {
            a: 0.1,
            alpha: 0.3,
            d: 0.2,
            theta_offset: 0.1,
        },
        DhParam {
            a: 0.5,
            alpha: -1.2,
            d: 0.05,
            theta_offset: -0.4,
        },
        DhParam {
            a: 0.4,
            alpha: 0.7,
            d: 0.0,
            theta_offset: 0.0,
        },
        DhParam::new(0.05, std::f64::consts::FRAC_PI_2, 0.3),
        DhParam::new(0.0, -std::f64::consts::FRAC_PI_2, 0.1),
        DhParam {
            a: 0.02,
            alpha: 0.0,
            d: 0.08,
            theta_offset: 0.25,
        },
    ];
    let mut rng = StdRng::seed_from_u64(13);
    for params in [UR5, custom] {
        let reference = dh_reference(&params);
        let fk = fk_dh6(params);
        let jac = fk_dh6_jacobian(params);
        let mut q: Vec<Vec<f64>> = (0..6).map(|_| uniform(&mut rng, N, -3.1, 3.1)).collect();
        // Singular configurations: the elbow stretched (q3 = 0), the wrist aligned (q5 = 0),
        // and both.
        for (i, angle) in q[2].iter_mut().enumerate().take(12) {
            if i % 3 != 1 {
                *angle = 0.0;
            }
        }
        for (i, angle) in q[4].iter_mut().enumerate().take(12) {
            if i % 3 != 0 {
                *angle = 0.0;
            }
        }
        let inputs: Vec<Input> = q.into_iter().map(vec1).collect();
        each_dtype(1e-12, 1e-5, |dtype, tol| {
            let inputs = round(&inputs, dtype);
            let got = run(&fk, &inputs, dtype);
            let want = per_element(&inputs, |v| r::fk_dh(&reference, v));
            check_all("fk_dh6", &got, &want, tol, dtype);
            let got = run(&jac, &inputs, dtype);
            assert_eq!(got.len(), 21);
            check_all("fk_dh6_jacobian value", &got[..3], &want, tol, dtype);
            let jtol = if dtype == DType::F64 { 1e-8 } else { 2e-5 };
            let want_cd = per_element::<18>(&inputs, |v| {
                let cd = r::central_differences(|q| r::fk_dh(&reference, q), v, 1e-6);
                let t = transpose_jacobian(&cd);
                std::array::from_fn(|k| t[k])
            });
            check_all(
                "fk_dh6_jacobian vs central differences",
                &got[3..],
                &want_cd,
                jtol,
                dtype,
            );
            // And the geometric Jacobian, exactly.
            let want_geo = per_element::<18>(&inputs, |v| {
                let cols = r::fk_dh_jacobian(&reference, v);
                std::array::from_fn(|k| cols[k % 6][k / 6])
            });
            check_all("fk_dh6_jacobian vs geometric", &got[3..], &want_geo, tol, dtype);
        });
    }
    assert_eq!(fk_dh6_jacobian_outputs()[3], "jac_x_q1");
    assert_eq!(
        fk_dh6_jacobian(UR5).func().output_names(),
        fk_dh6_jacobian_outputs()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
}

#[test]
fn tracking_cost_and_gradient() {
    let horizon = 10;
    let mut rng = StdRng::seed_from_u64(14);
    let shape = vec![N, horizon];
    let x = uniform(&mut rng, N * horizon, -2.0, 2.0);
    let x_ref = uniform(&mut rng, N * horizon, -2.0, 2.0);
    let u = uniform(&mut rng, N * horizon, -1.0, 1.0);
    let (q, rw) = (3.0, 0.2);
    let inputs = [
        (shape.clone(), x),
        (shape.clone(), x_ref),
        (shape.clone(), u),
        scalar(q),
        scalar(rw),
    ];
    let cost = tracking_cost();
    let grad = tracking_cost_grad();
    each_dtype(1e-12, 1e-5, |dtype, tol| {
        let inputs = round(&inputs, dtype);
        let (c, gx, gu) = r::tracking_cost(&inputs[0].1, &inputs[1].1, &inputs[2].1, q, rw);
        let got = run(&cost, &inputs, dtype);
        check(&format!("tracking_cost {dtype}"), &got[0], &[c], tol);
        let got = run(&grad, &inputs, dtype);
        check(&format!("tracking_cost_grad cost {dtype}"), &got[0], &[c], tol);
        check(&format!("tracking_cost_grad grad_x {dtype}"), &got[1], &gx, tol);
        check(&format!("tracking_cost_grad grad_u {dtype}"), &got[2], &gu, tol);
    });
}

/// `a - b` as an angle, brought into `[-π, π]` (so `π` and `-π` are 0 apart).
fn angle_diff(a: f64, b: f64) -> f64 {
    use std::f64::consts::PI;
    (a - b + PI).rem_euclid(2.0 * PI) - PI
}

#[test]
fn path_tracking_finds_the_nearest_segment_and_its_errors() {
    // A winding path of 10 waypoints with a repeated one (a segment of length zero), and
    // vehicles around it, on its waypoints and on a segment's midpoint.
    let mut rng = StdRng::seed_from_u64(23);
    let mut path: Vec<[f64; 2]> = (0..9)
        .map(|k| {
            let s = k as f64 * 0.9;
            [s + 0.3 * (1.7 * s).sin(), 1.2 * (0.8 * s).sin()]
        })
        .collect();
    path.insert(4, path[4]);
    let m = path.len();
    let mut x = uniform(&mut rng, N, -1.5, 9.0);
    let mut y = uniform(&mut rng, N, -2.5, 2.5);
    let heading = uniform(&mut rng, N, -4.0, 4.0);
    for (k, p) in path.iter().enumerate() {
        x[k] = p[0];
        y[k] = p[1];
    }
    x[m] = 0.5 * (path[1][0] + path[2][0]);
    y[m] = 0.5 * (path[1][1] + path[2][1]);
    let px: Vec<f64> = path.iter().map(|p| p[0]).collect();
    let py: Vec<f64> = path.iter().map(|p| p[1]).collect();
    let inputs = [vec1(x), vec1(y), vec1(heading), vec1(px), vec1(py)];
    let jit = path_tracking();
    assert_eq!(
        jit.func().output_names(),
        ["segment", "cross_track", "heading_error"]
    );
    each_dtype(1e-12, 2e-5, |dtype, tol| {
        let inputs = round(&inputs, dtype);
        let out = jit.call(&arrays(&inputs, dtype)[..]).expect("path_tracking");
        let segment = out[0].as_slice::<i32>().expect("an i32 segment");
        let (cross, turn) = (out[1].to_f64_vec(), out[2].to_f64_vec());
        let (path_x, path_y) = (&inputs[3].1, &inputs[4].1);
        let mut agree = 0;
        for i in 0..N {
            let [x, y, heading] = [0, 1, 2].map(|k| inputs[k].1[i]);
            let seen: Vec<(f64, f64, f64)> = (0..m - 1)
                .map(|j| {
                    let (a, b) = ([path_x[j], path_y[j]], [path_x[j + 1], path_y[j + 1]]);
                    r::path_segment(x, y, heading, a, b)
                })
                .collect();
            let best = (0..m - 1).fold(0, |b, j| if seen[j].0 < seen[b].0 { j } else { b });
            // Segments as near as the best up to rounding (a vehicle beside a shared
            // waypoint is as near to both its segments) may be chosen instead.
            let j = usize::try_from(segment[i]).expect("a segment index");
            assert!(j < m - 1, "{dtype} vehicle {i}: segment {j}");
            let slack = 1e3 * tol * (1.0 + seen[best].0);
            assert!(
                seen[j].0 <= seen[best].0 + slack,
                "{dtype} vehicle {i}: segment {j} at {} against {best} at {}",
                seen[j].0,
                seen[best].0
            );
            agree += usize::from(j == best);
            let (_, signed, wrapped) = seen[j];
            // On the path the sign is a rounding's choice.
            if signed.abs() > 1e3 * tol {
                check(&format!("cross_track {dtype}[{i}]"), &[cross[i]], &[signed], tol);
            } else {
                assert!(cross[i].abs() <= 2e3 * tol, "{dtype} vehicle {i}: {}", cross[i]);
            }
            let off = angle_diff(turn[i], wrapped);
            assert!(
                off.abs() <= tol * 10.0,
                "heading_error {dtype}[{i}]: {} against {wrapped}",
                turn[i]
            );
            assert!(turn[i].abs() <= std::f64::consts::PI + tol);
        }
        assert!(
            agree >= N - 10,
            "{dtype}: only {agree} of {N} vehicles on the reference's segment"
        );
    });

    // Fewer than two waypoints: no segment to be near.
    let one = rfx::array(vec![1], vec![0.0f64]).expect("one waypoint");
    let pose = rfx::array(vec![2], vec![0.5f64, 1.0]).expect("pose");
    let err = jit
        .call(&[pose.clone(), pose.clone(), pose, one.clone(), one][..])
        .expect_err("a path of one waypoint");
    assert!(err.to_string().contains("empty axis"), "{err}");
}
