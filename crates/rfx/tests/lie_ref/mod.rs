//! A plain-Rust `f64` reference for the Lie group tests: Rodrigues' formula, quaternions,
//! the SO(3) and SE(3) Jacobians from their textbook closed forms (with their Taylor series
//! summed to convergence where the closed forms cancel), and central finite differences.
//! Written independently of `rfx::lie` (no shared code, no thresholds of its own).

#![allow(dead_code, unreachable_pub)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::{Array, DType};

pub type V3 = [f64; 3];
pub type M3 = [[f64; 3]; 3];
pub type Q = [f64; 4];

/// The backends of this build that run `dtype` (every registered one; metal has no `f64`).
pub fn backends(dtype: DType) -> Vec<&'static str> {
    let names = rfx_runtime::registry().names();
    let mut out: Vec<&'static str> = names
        .into_iter()
        .filter(|name| !(dtype == DType::F64 && *name == "metal"))
        .collect();
    out.sort_unstable();
    out
}

/// An array of `dtype` holding `values` (rounded into `f32`).
pub fn array(dtype: DType, dims: &[usize], values: &[f64]) -> Array {
    match dtype {
        DType::F32 => Array::from_vec(dims.to_vec(), values.iter().map(|&v| v as f32).collect()),
        _ => Array::from_vec(dims.to_vec(), values.to_vec()),
    }
    .expect("array")
}

/// The values an array of `dtype` stores for `values`.
pub fn stored(dtype: DType, values: &[f64]) -> Vec<f64> {
    match dtype {
        DType::F32 => values.iter().map(|&v| f64::from(v as f32)).collect(),
        _ => values.to_vec(),
    }
}

/// The unit roundoff of `dtype`.
pub fn roundoff(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => f64::from(f32::EPSILON) / 2.0,
        _ => f64::EPSILON / 2.0,
    }
}

/// Tolerances: values within a few units of roundoff; the `f32` backends' transcendentals
/// are within a few ULP of their own.
pub fn tol(dtype: DType, units: f64) -> f64 {
    units * roundoff(dtype)
}

/// The 3×3 matrices `rows` one after another, as the row-major values of an `[n, 3, 3]` array.
pub fn m3s(rows: &[M3]) -> Vec<f64> {
    rows.iter().flat_map(|m| m.iter().flatten().copied()).collect()
}

/// `rows` one after another, as the row-major values of an `[n, N]` array.
pub fn flat<const N: usize>(rows: &[[f64; N]]) -> Vec<f64> {
    rows.iter().flatten().copied().collect()
}

/// The angles every SO(3)/SE(3) test covers: 0, 1e-12, 1e-7, generic angles, π - 1e-9, π,
/// then `random` angles drawn (seeded) near 0 and near π, on log scales.
pub fn angles(random: usize, seed: u64) -> Vec<f64> {
    let pi = std::f64::consts::PI;
    let mut out = vec![0.0, 1e-12, 1e-7, 1e-4, 0.05, 0.4, 1.0, 2.0, 3.0, pi - 1e-9, pi];
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..random {
        let near0 = 10f64.powf(rng.random_range(-12.0..-0.5));
        let near_pi = pi - 10f64.powf(rng.random_range(-12.0..-0.5));
        out.extend([near0, near_pi]);
    }
    out
}

/// A seeded random unit axis.
pub fn axis(rng: &mut StdRng) -> V3 {
    loop {
        let v: V3 = std::array::from_fn(|_| rng.random_range(-1.0..1.0));
        let n = norm(v);
        if n > 0.1 && n < 1.0 {
            return v.map(|c| c / n);
        }
    }
}

pub fn norm(v: V3) -> f64 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

pub fn scale(v: V3, s: f64) -> V3 {
    v.map(|c| c * s)
}

pub fn add(a: V3, b: V3) -> V3 {
    std::array::from_fn(|i| a[i] + b[i])
}

pub fn cross(a: V3, b: V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

pub fn skew(v: V3) -> M3 {
    [[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]]
}

pub fn mat_mul(a: &M3, b: &M3) -> M3 {
    std::array::from_fn(|i| std::array::from_fn(|j| (0..3).map(|k| a[i][k] * b[k][j]).sum()))
}

pub fn mat_vec(a: &M3, v: V3) -> V3 {
    std::array::from_fn(|i| (0..3).map(|k| a[i][k] * v[k]).sum())
}

pub fn transpose(a: &M3) -> M3 {
    std::array::from_fn(|i| std::array::from_fn(|j| a[j][i]))
}

pub fn eye() -> M3 {
    std::array::from_fn(|i| std::array::from_fn(|j| f64::from(u8::from(i == j))))
}

/// `Σ_k sign^k x^k / den(k)` summed until the terms stop mattering (x small).
fn sum_series(x: f64, alternate: bool, den: impl Fn(u32) -> f64) -> f64 {
    let mut total = 0.0;
    let mut power = 1.0;
    for k in 0..40 {
        let sign = if alternate && k % 2 == 1 { -1.0 } else { 1.0 };
        let term = sign * power / den(k);
        total += term;
        if term.abs() < 1e-40 {
            break;
        }
        power *= x;
    }
    total
}

fn fact(n: u32) -> f64 {
    (1..=n).map(f64::from).product()
}

/// `(1 - cos θ) / θ²`.
pub fn coef_a(theta: f64) -> f64 {
    if theta < 0.5 {
        sum_series(theta * theta, true, |k| fact(2 * k + 2))
    } else {
        (1.0 - theta.cos()) / (theta * theta)
    }
}

/// `(θ - sin θ) / θ³`.
pub fn coef_b(theta: f64) -> f64 {
    if theta < 0.5 {
        sum_series(theta * theta, true, |k| fact(2 * k + 3))
    } else {
        (theta - theta.sin()) / theta.powi(3)
    }
}

/// `(θ² + 2 cos θ - 2) / (2 θ⁴)`.
pub fn coef_c2(theta: f64) -> f64 {
    if theta < 0.5 {
        sum_series(theta * theta, true, |k| fact(2 * k + 4))
    } else {
        (theta * theta + 2.0 * theta.cos() - 2.0) / (2.0 * theta.powi(4))
    }
}

/// `(2θ - 3 sin θ + θ cos θ) / (2 θ⁵)`.
pub fn coef_c3(theta: f64) -> f64 {
    if theta < 0.5 {
        sum_series(theta * theta, true, |k| fact(2 * k + 5) / f64::from(k + 1))
    } else {
        (2.0 * theta - 3.0 * theta.sin() + theta * theta.cos()) / (2.0 * theta.powi(5))
    }
}

/// The unit quaternion of the rotation vector `w` (axis-angle with half angles).
pub fn so3_exp(w: V3) -> Q {
    let theta = norm(w);
    if theta == 0.0 {
        return [1.0, 0.0, 0.0, 0.0];
    }
    let s = (theta / 2.0).sin() / theta;
    [(theta / 2.0).cos(), w[0] * s, w[1] * s, w[2] * s]
}

/// The rotation vector of `q` with `θ <= π` (sign normalised so that `w >= 0`).
pub fn so3_log(q: Q) -> V3 {
    let s = if q[0] < 0.0 { -1.0 } else { 1.0 };
    let v = [q[1] * s, q[2] * s, q[3] * s];
    let w = q[0] * s;
    let n = norm(v);
    if n == 0.0 {
        return scale(v, 2.0 / w);
    }
    scale(v, 2.0 * n.atan2(w) / n)
}

/// Rodrigues' formula `I + sin θ/θ [w]× + (1 - cos θ)/θ² [w]×²`.
pub fn rodrigues(w: V3) -> M3 {
    let theta = norm(w);
    let k = skew(w);
    let k2 = mat_mul(&k, &k);
    let sinc = if theta < 1e-4 {
        1.0 - theta * theta / 6.0
    } else {
        theta.sin() / theta
    };
    let a = coef_a(theta);
    std::array::from_fn(|i| std::array::from_fn(|j| eye()[i][j] + sinc * k[i][j] + a * k2[i][j]))
}

pub fn quat_mul(a: Q, b: Q) -> Q {
    [
        a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
        a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
        a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
        a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
    ]
}

pub fn conj(q: Q) -> Q {
    [q[0], -q[1], -q[2], -q[3]]
}

/// The rotation matrix of a unit quaternion, by `q ⊗ (0, e_j) ⊗ q*` per column.
pub fn quat_matrix(q: Q) -> M3 {
    let mut m = [[0.0; 3]; 3];
    for j in 0..3 {
        let mut e = [0.0; 4];
        e[j + 1] = 1.0;
        let r = quat_mul(quat_mul(q, e), conj(q));
        for i in 0..3 {
            m[i][j] = r[i + 1];
        }
    }
    m
}

/// `Jr(w) = I - A [w]× + B [w]×²` (left: `+ A`).
pub fn so3_jr(w: V3, left: bool) -> M3 {
    let theta = norm(w);
    let k = skew(w);
    let k2 = mat_mul(&k, &k);
    let a = if left { coef_a(theta) } else { -coef_a(theta) };
    let b = coef_b(theta);
    std::array::from_fn(|i| std::array::from_fn(|j| eye()[i][j] + a * k[i][j] + b * k2[i][j]))
}

/// `1/θ² - cot(θ/2)/(2θ)`: below 0.5 its series `Σ_{n ≥ 1} |B_2n| θ^(2n-2) / (2n)!` (the
/// Bernoulli numbers' magnitudes as fractions), whose terms fall by `(θ/2π)²`.
pub fn coef_inv(theta: f64) -> f64 {
    const BERNOULLI: [(f64, f64); 8] = [
        (1.0, 6.0),
        (1.0, 30.0),
        (1.0, 42.0),
        (1.0, 30.0),
        (5.0, 66.0),
        (691.0, 2730.0),
        (7.0, 6.0),
        (3617.0, 510.0),
    ];
    if theta < 0.5 {
        sum_series(theta * theta, false, |k| match BERNOULLI.get(k as usize) {
            Some((num, den)) => den * fact(2 * k + 2) / num,
            None => f64::INFINITY,
        })
    } else {
        let half = theta / 2.0;
        1.0 / (theta * theta) - half.cos() / (2.0 * theta * half.sin())
    }
}

/// `Jr(w)⁻¹ = I + ½ [w]× + (1/θ² - cot(θ/2)/(2θ)) [w]×²` (left: `- ½`), the closed form
/// (`θ < 2π`): near π its entries round by a unit or two, where the numerical inverse of the
/// rounded `Jr` ([`inv3`]) amplifies `Jr`'s rounding to several.
pub fn so3_jr_inv(w: V3, left: bool) -> M3 {
    let theta = norm(w);
    let k = skew(w);
    let k2 = mat_mul(&k, &k);
    let a = if left { -0.5 } else { 0.5 };
    let c = coef_inv(theta);
    std::array::from_fn(|i| std::array::from_fn(|j| eye()[i][j] + a * k[i][j] + c * k2[i][j]))
}

/// The inverse of a 3×3 matrix (adjugate over determinant).
pub fn inv3(m: &M3) -> M3 {
    let c = |i: usize, j: usize| {
        let (r0, r1) = ((i + 1) % 3, (i + 2) % 3);
        let (c0, c1) = ((j + 1) % 3, (j + 2) % 3);
        m[r0][c0] * m[r1][c1] - m[r0][c1] * m[r1][c0]
    };
    let det = m[0][0] * c(0, 0) + m[0][1] * c(0, 1) + m[0][2] * c(0, 2);
    std::array::from_fn(|i| std::array::from_fn(|j| c(j, i) / det))
}

/// Barfoot's `Q(ρ, ω)` of SE(3)'s left Jacobian.
pub fn se3_q(rho: V3, w: V3) -> M3 {
    let theta = norm(w);
    let (v, t) = (skew(rho), skew(w));
    let m = |a: &M3, b: &M3| mat_mul(a, b);
    let tv = m(&t, &v);
    let vt = m(&v, &t);
    let tvt = m(&tv, &t);
    let ttv = m(&t, &tv);
    let vtt = m(&vt, &t);
    let tvtt = m(&tvt, &t);
    let ttvt = m(&t, &tvt);
    let (a, c2, c3) = (coef_b(theta), coef_c2(theta), coef_c3(theta));
    std::array::from_fn(|i| {
        std::array::from_fn(|j| {
            0.5 * v[i][j]
                + a * (tv[i][j] + vt[i][j] + tvt[i][j])
                + c2 * (ttv[i][j] + vtt[i][j] - 3.0 * tvt[i][j])
                + c3 * (tvtt[i][j] + ttvt[i][j])
        })
    })
}

/// SE(3)'s `Exp([ρ, ω])` as `(q, t)`.
pub fn se3_exp(xi: [f64; 6]) -> (Q, V3) {
    let rho = [xi[0], xi[1], xi[2]];
    let w = [xi[3], xi[4], xi[5]];
    (so3_exp(w), mat_vec(&so3_jr(w, true), rho))
}

/// The right (or left) 6×6 Jacobian of SE(3)'s `Exp`, as rows.
pub fn se3_jr(xi: [f64; 6], left: bool) -> [[f64; 6]; 6] {
    let s = if left { 1.0 } else { -1.0 };
    let rho = [s * xi[0], s * xi[1], s * xi[2]];
    let w = [s * xi[3], s * xi[4], s * xi[5]];
    let j = so3_jr(w, true);
    let q = se3_q(rho, w);
    std::array::from_fn(|i| {
        std::array::from_fn(|k| match (i < 3, k < 3) {
            (true, true) => j[i][k],
            (true, false) => q[i][k - 3],
            (false, true) => 0.0,
            (false, false) => j[i - 3][k - 3],
        })
    })
}

/// The central-difference Jacobian of `f` at `x` with step `h` (rows: outputs).
pub fn central<const N: usize, const M: usize>(
    f: impl Fn([f64; N]) -> [f64; M],
    x: [f64; N],
    h: f64,
) -> [[f64; N]; M] {
    let mut jac = [[0.0; N]; M];
    for j in 0..N {
        let (mut up, mut down) = (x, x);
        up[j] += h;
        down[j] -= h;
        let (fu, fd) = (f(up), f(down));
        for i in 0..M {
            jac[i][j] = (fu[i] - fd[i]) / (2.0 * h);
        }
    }
    jac
}

/// The largest `|got - want|` over a row-major slice and a reference, with its index.
pub fn max_error(got: &[f64], want: &[f64]) -> (f64, usize) {
    assert_eq!(got.len(), want.len(), "lengths differ");
    got.iter()
        .zip(want)
        .enumerate()
        .map(|(i, (g, w))| ((g - w).abs(), i))
        .fold(
            (0.0, 0),
            |best, e| if e.0 > best.0 || e.0.is_nan() { e } else { best },
        )
}

/// Panics naming `what` when some `|got - want| > tol` (or a value is NaN).
pub fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    let (err, at) = max_error(got, want);
    assert!(
        err <= tol && got.iter().all(|g| g.is_finite()),
        "{what}: error {err:e} > {tol:e} at {at} ({} against {})",
        got[at],
        want[at]
    );
}

/// `f` called on `args` on `backend`, its outputs as `f64`s; `None`, with a line on stderr,
/// where a backend other than the reference ones (`interp`, `cpu`) cannot run here (a typed
/// `Unavailable`: no device, no C compiler) or does not implement an op the kernel needs (a
/// typed `Unsupported`). Any other error fails the test.
pub fn run<'a, K: rfx::KernelFn>(
    what: &str,
    backend: &str,
    f: &rfx::Jit<K>,
    args: impl rfx::IntoArgs<'a>,
) -> Option<Vec<Vec<f64>>> {
    match f.call(args) {
        Ok(out) => Some(out.iter().map(Array::to_f64_vec).collect()),
        Err(rfx::JitError::Runtime(rfx_runtime::RuntimeError::Backend(
            error @ (rfx_lower::BackendError::Unsupported { .. }
            | rfx_lower::BackendError::Unavailable { .. }),
        ))) if !matches!(backend, "interp" | "cpu") => {
            eprintln!("{what}: skipped on `{backend}`: {error}");
            None
        }
        Err(error) => panic!("{what} on `{backend}`: {error:?}"),
    }
}

/// An SE(3) pose: rotation and translation.
pub type Pose = (Q, V3);

/// SE(3)'s `Log` as `[ρ, ω]`: `ω = Log(q)`, `ρ = Jl(ω)⁻¹ t` (a numerical inverse).
pub fn se3_log((q, t): Pose) -> [f64; 6] {
    let w = so3_log(q);
    let rho = mat_vec(&inv3(&so3_jr(w, true)), t);
    [rho[0], rho[1], rho[2], w[0], w[1], w[2]]
}

pub fn se3_compose((qa, ta): Pose, (qb, tb): Pose) -> Pose {
    (quat_mul(qa, qb), add(ta, mat_vec(&quat_matrix(qa), tb)))
}

pub fn se3_inverse((q, t): Pose) -> Pose {
    let qi = conj(q);
    (qi, scale(mat_vec(&quat_matrix(qi), t), -1.0))
}

/// A pose as its 7 stored numbers.
pub fn pose_flat((q, t): Pose) -> [f64; 7] {
    [q[0], q[1], q[2], q[3], t[0], t[1], t[2]]
}

pub fn pose_of(x: [f64; 7]) -> Pose {
    ([x[0], x[1], x[2], x[3]], [x[4], x[5], x[6]])
}

/// SE(2)'s `Exp([ρx, ρy, θ])` as `[cos, sin, x, y]`.
pub fn se2_exp(xi: [f64; 3]) -> [f64; 4] {
    let theta = xi[2];
    let sinc = if theta.abs() < 1e-4 {
        1.0 - theta * theta / 6.0
    } else {
        theta.sin() / theta
    };
    let b = theta * coef_a(theta.abs());
    [
        theta.cos(),
        theta.sin(),
        sinc * xi[0] - b * xi[1],
        b * xi[0] + sinc * xi[1],
    ]
}

/// SE(2)'s `Log`: `θ = atan2(sin, cos)`, `ρ = V(θ)⁻¹ t` (a numerical inverse).
pub fn se2_log(x: [f64; 4]) -> [f64; 3] {
    let theta = x[1].atan2(x[0]);
    let sinc = if theta.abs() < 1e-4 {
        1.0 - theta * theta / 6.0
    } else {
        theta.sin() / theta
    };
    let b = theta * coef_a(theta.abs());
    let det = sinc * sinc + b * b;
    [
        (sinc * x[2] + b * x[3]) / det,
        (-b * x[2] + sinc * x[3]) / det,
        theta,
    ]
}

pub fn se2_compose(a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
    [
        a[0] * b[0] - a[1] * b[1],
        a[1] * b[0] + a[0] * b[1],
        a[2] + a[0] * b[2] - a[1] * b[3],
        a[3] + a[1] * b[2] + a[0] * b[3],
    ]
}

pub fn se2_inverse(a: [f64; 4]) -> [f64; 4] {
    [
        a[0],
        -a[1],
        -(a[0] * a[2] + a[1] * a[3]),
        a[1] * a[2] - a[0] * a[3],
    ]
}

/// `Σ v + ½ ‖a‖² + Σ_ij b_ij (a b)_ij`: one scalar mixing a vector and two matrices
/// nonlinearly, so its gradient reaches every entry of each.
pub fn mix(v: &[f64], a: &M3, b: &M3) -> f64 {
    let product = mat_mul(a, b);
    let mut s = v.iter().sum::<f64>();
    for i in 0..3 {
        for j in 0..3 {
            s += 0.5 * a[i][j] * a[i][j] + b[i][j] * product[i][j];
        }
    }
    s
}
