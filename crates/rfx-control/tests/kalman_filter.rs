//! `kalman_filter` (any linear model, in matrix form) against a reference written here with the
//! textbook formulas in `f64` (the gain through a closed-form 2×2 inverse, the covariance in
//! the short form `(I - K H) P`, where the kernel solves for the gain and uses Joseph's form),
//! against the constant-velocity kernels `kalman_predict` and `kalman_update` for that model,
//! and its derivative in the measurement noise against central differences.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::{Array, DType};
use rfx_control::{kalman_filter, kalman_predict, kalman_update};

type Mat = Vec<Vec<f64>>;

fn mul(a: &Mat, b: &Mat) -> Mat {
    (0..a.len())
        .map(|i| {
            (0..b[0].len())
                .map(|j| (0..b.len()).map(|k| a[i][k] * b[k][j]).sum())
                .collect()
        })
        .collect()
}

fn t(a: &Mat) -> Mat {
    (0..a[0].len())
        .map(|j| (0..a.len()).map(|i| a[i][j]).collect())
        .collect()
}

fn add(a: &Mat, b: &Mat, sign: f64) -> Mat {
    a.iter()
        .zip(b)
        .map(|(r, s)| r.iter().zip(s).map(|(x, y)| x + sign * y).collect())
        .collect()
}

fn inv2(s: &Mat) -> Mat {
    let det = s[0][0] * s[1][1] - s[0][1] * s[1][0];
    vec![
        vec![s[1][1] / det, -s[0][1] / det],
        vec![-s[1][0] / det, s[0][0] / det],
    ]
}

/// One predict and update with the textbook formulas: `(x, P, nis)`.
fn reference(x: &[f64], p: &Mat, z: &[f64], f: &Mat, h: &Mat, q: &Mat, r: &Mat) -> (Vec<f64>, Mat, f64) {
    let col = |v: &[f64]| -> Mat { v.iter().map(|&e| vec![e]).collect() };
    let xp = mul(f, &col(x));
    let pp = add(&mul(&mul(f, p), &t(f)), q, 1.0);
    let y = add(&col(z), &mul(h, &xp), -1.0);
    let s = add(&mul(&mul(h, &pp), &t(h)), r, 1.0);
    let s_inv = inv2(&s);
    let k = mul(&mul(&pp, &t(h)), &s_inv);
    let x_new = add(&xp, &mul(&k, &y), 1.0);
    let n = x.len();
    let identity: Mat = (0..n)
        .map(|i| (0..n).map(|j| f64::from(u8::from(i == j))).collect())
        .collect();
    let p_new = mul(&add(&identity, &mul(&k, h), -1.0), &pp);
    let nis = mul(&mul(&t(&y), &s_inv), &y)[0][0];
    (x_new.iter().map(|r| r[0]).collect(), p_new, nis)
}

/// A random symmetric positive-definite `n`×`n` matrix: `A Aᵀ + shift I`.
fn spd(rng: &mut StdRng, n: usize, shift: f64) -> Mat {
    let a: Mat = (0..n)
        .map(|_| (0..n).map(|_| rng.random_range(-1.0..1.0)).collect())
        .collect();
    let mut m = mul(&a, &t(&a));
    for (i, row) in m.iter_mut().enumerate() {
        row[i] += shift;
    }
    m
}

fn flat(m: &Mat) -> Vec<f64> {
    m.concat()
}

fn array(dtype: DType, dims: &[usize], values: &[f64]) -> Array {
    match dtype {
        DType::F32 => rfx::array(dims.to_vec(), values.iter().map(|&v| v as f32).collect()),
        _ => rfx::array(dims.to_vec(), values.to_vec()),
    }
    .expect("array")
}

/// A constant-velocity model in the plane: state `(px, py, vx, vy)`, positions measured.
fn plane_model(rng: &mut StdRng) -> [Mat; 4] {
    let dt = 0.1;
    let f = vec![
        vec![1.0, 0.0, dt, 0.0],
        vec![0.0, 1.0, 0.0, dt],
        vec![0.0, 0.0, 1.0, 0.0],
        vec![0.0, 0.0, 0.0, 1.0],
    ];
    let h = vec![vec![1.0, 0.0, 0.0, 0.0], vec![0.0, 1.0, 0.0, 0.0]];
    let q = spd(rng, 4, 0.01);
    let r = spd(rng, 2, 0.05);
    [f, h, q, r]
}

#[test]
fn a_batch_of_filters_matches_the_textbook_step() {
    let mut rng = StdRng::seed_from_u64(0x4a1);
    let batch = 37;
    let [f, h, q, r] = plane_model(&mut rng);
    let xs: Vec<Vec<f64>> = (0..batch)
        .map(|_| (0..4).map(|_| rng.random_range(-5.0..5.0)).collect())
        .collect();
    let ps: Vec<Mat> = (0..batch).map(|_| spd(&mut rng, 4, 0.1)).collect();
    let zs: Vec<Vec<f64>> = (0..batch)
        .map(|_| (0..2).map(|_| rng.random_range(-5.0..5.0)).collect())
        .collect();
    let step = kalman_filter();
    for (dtype, tol) in [(DType::F64, 1e-10), (DType::F32, 5e-4)] {
        // The reference sees the inputs as the kernel does (rounded to the dtype).
        let round = |v: f64| {
            if dtype == DType::F32 {
                f64::from(v as f32)
            } else {
                v
            }
        };
        let rm = |m: &Mat| -> Mat { m.iter().map(|r| r.iter().map(|&v| round(v)).collect()).collect() };
        let out = step
            .call([
                &array(dtype, &[batch, 4], &xs.concat()),
                &array(
                    dtype,
                    &[batch, 4, 4],
                    &ps.iter().flat_map(flat).collect::<Vec<_>>(),
                ),
                &array(dtype, &[batch, 2], &zs.concat()),
                &array(dtype, &[4, 4], &flat(&f)),
                &array(dtype, &[2, 4], &flat(&h)),
                &array(dtype, &[4, 4], &flat(&q)),
                &array(dtype, &[2, 2], &flat(&r)),
            ])
            .expect("kalman_filter");
        assert_eq!(out[0].shape().dims(), [batch, 4]);
        assert_eq!(out[1].shape().dims(), [batch, 4, 4]);
        assert_eq!(out[2].shape().dims(), [batch]);
        let (x_got, p_got, nis_got) = (out[0].to_f64_vec(), out[1].to_f64_vec(), out[2].to_f64_vec());
        for b in 0..batch {
            let x: Vec<f64> = xs[b].iter().map(|&v| round(v)).collect();
            let z: Vec<f64> = zs[b].iter().map(|&v| round(v)).collect();
            let (x_want, p_want, nis_want) =
                reference(&x, &rm(&ps[b]), &z, &rm(&f), &rm(&h), &rm(&q), &rm(&r));
            let close = |got: f64, want: f64| (got - want).abs() <= tol * (1.0 + want.abs());
            for i in 0..4 {
                assert!(
                    close(x_got[4 * b + i], x_want[i]),
                    "{dtype} filter {b}: x[{i}] {} want {}",
                    x_got[4 * b + i],
                    x_want[i]
                );
                for j in 0..4 {
                    let got = p_got[16 * b + 4 * i + j];
                    assert!(
                        close(got, p_want[i][j]),
                        "{dtype} filter {b}: P[{i}][{j}] {got} want {}",
                        p_want[i][j]
                    );
                    // Joseph's form keeps P symmetric.
                    assert!(
                        close(got, p_got[16 * b + 4 * j + i]),
                        "{dtype} filter {b}: P not symmetric"
                    );
                }
            }
            assert!(
                close(nis_got[b], nis_want),
                "{dtype} filter {b}: nis {} want {nis_want}",
                nis_got[b]
            );
        }
    }
}

#[test]
fn the_matrix_filter_agrees_with_the_constant_velocity_kernels() {
    let mut rng = StdRng::seed_from_u64(0x4a2);
    let (dt, accel_var, meas_var) = (0.02, 0.7, 0.05);
    let n = 23;
    let pos: Vec<f64> = (0..n).map(|_| rng.random_range(-3.0..3.0)).collect();
    let vel: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let covs: Vec<Mat> = (0..n).map(|_| spd(&mut rng, 2, 0.1)).collect();
    let z: Vec<f64> = (0..n).map(|_| rng.random_range(-3.0..3.0)).collect();
    let entry = |i: usize, j: usize| -> Vec<f64> { covs.iter().map(|c| c[i][j]).collect() };
    let predicted = kalman_predict(dt, accel_var)
        .call([
            &pos[..],
            &vel[..],
            &entry(0, 0)[..],
            &entry(0, 1)[..],
            &entry(1, 1)[..],
        ])
        .expect("predict");
    let predicted: Vec<Vec<f64>> = predicted.iter().map(Array::to_f64_vec).collect();
    let updated = kalman_update(meas_var)
        .call([
            &predicted[0][..],
            &predicted[1][..],
            &predicted[2][..],
            &predicted[3][..],
            &predicted[4][..],
            &z[..],
        ])
        .expect("update");
    let want: Vec<Vec<f64>> = updated.iter().map(Array::to_f64_vec).collect();
    let f = [1.0, dt, 0.0, 1.0];
    let q = [
        accel_var * dt.powi(3) / 3.0,
        accel_var * dt * dt / 2.0,
        accel_var * dt * dt / 2.0,
        accel_var * dt,
    ];
    let x: Vec<f64> = (0..n).flat_map(|i| [pos[i], vel[i]]).collect();
    let p: Vec<f64> = covs.iter().flat_map(flat).collect();
    let out = kalman_filter()
        .call([
            &array(DType::F64, &[n, 2], &x),
            &array(DType::F64, &[n, 2, 2], &p),
            &array(DType::F64, &[n, 1], &z),
            &array(DType::F64, &[2, 2], &f),
            &array(DType::F64, &[1, 2], &[1.0, 0.0]),
            &array(DType::F64, &[2, 2], &q),
            &array(DType::F64, &[1, 1], &[meas_var]),
        ])
        .expect("kalman_filter");
    let (x_got, p_got) = (out[0].to_f64_vec(), out[1].to_f64_vec());
    let close = |got: f64, want: f64| (got - want).abs() <= 1e-12 * (1.0 + want.abs());
    for i in 0..n {
        assert!(
            close(x_got[2 * i], want[0][i]) && close(x_got[2 * i + 1], want[1][i]),
            "x of filter {i}"
        );
        for (k, (a, b)) in [(0, 0), (0, 1), (1, 1)].into_iter().enumerate() {
            let got = p_got[4 * i + 2 * a + b];
            assert!(
                close(got, want[2 + k][i]),
                "P[{a}][{b}] of filter {i}: {got} want {}",
                want[2 + k][i]
            );
        }
    }
}

#[test]
fn the_innovation_test_differentiates_in_the_measurement_noise() {
    // Forward mode along a symmetric direction of R, against central differences of the
    // kernel itself in f64.
    let mut rng = StdRng::seed_from_u64(0x4a3);
    let batch = 5;
    let [f, h, q, r] = plane_model(&mut rng);
    let x: Vec<f64> = (0..4 * batch).map(|_| rng.random_range(-2.0..2.0)).collect();
    let p: Vec<f64> = (0..batch).flat_map(|_| flat(&spd(&mut rng, 4, 0.1))).collect();
    let z: Vec<f64> = (0..2 * batch).map(|_| rng.random_range(-2.0..2.0)).collect();
    let direction = [0.3, -0.2, -0.2, 0.5];
    let inputs = |r: &[f64]| -> Vec<Array> {
        vec![
            array(DType::F64, &[batch, 4], &x),
            array(DType::F64, &[batch, 4, 4], &p),
            array(DType::F64, &[batch, 2], &z),
            array(DType::F64, &[4, 4], &flat(&f)),
            array(DType::F64, &[2, 4], &flat(&h)),
            array(DType::F64, &[4, 4], &flat(&q)),
            array(DType::F64, &[2, 2], r),
        ]
    };
    let jit = kalman_filter();
    let tangent = rfx::jit(rfx::jvp(jit.func().clone()).wrt(&[6]));
    let mut args = inputs(&flat(&r));
    args.push(array(DType::F64, &[2, 2], &direction));
    let out = tangent.call(&args[..]).expect("jvp");
    // Outputs: x, p, nis, then the tangents of x, p and nis.
    let d_nis = out[5].to_f64_vec();
    let eps = 1e-6;
    let shifted = |sign: f64| -> Vec<f64> {
        let r_shift: Vec<f64> = flat(&r)
            .iter()
            .zip(direction)
            .map(|(v, d)| v + sign * eps * d)
            .collect();
        jit.call(&inputs(&r_shift)[..]).expect("nis")[2].to_f64_vec()
    };
    let (up, down) = (shifted(1.0), shifted(-1.0));
    for b in 0..batch {
        let fd = (up[b] - down[b]) / (2.0 * eps);
        assert!(
            (d_nis[b] - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
            "filter {b}: {} against {fd}",
            d_nis[b]
        );
    }
}
