//! SE(3): rigid motions stored as `[w, x, y, z, tx, ty, tz]` (a unit quaternion, then the
//! translation), tangents `[ρ, ω]` (translation part first).

use crate::trace::Tensor;

use super::Side;
use super::parts::{
    M3, Quat, V3, blocks, identity, mat_mul, mat_neg, mat_vec, matrix, one, skew, split, stack, zero, zeros,
};
use super::series::{SE3_C2, SE3_C3, THETA_MINUS_SIN};
use super::so3;

/// A pose's rotation and translation.
type Pose = (Quat, V3);

fn pose(op: &'static str, x: Tensor) -> Pose {
    let [w, qx, qy, qz, tx, ty, tz] = split(op, x);
    ([w, qx, qy, qz], [tx, ty, tz])
}

fn tangent(op: &'static str, xi: Tensor) -> (V3, V3) {
    let [r0, r1, r2, w0, w1, w2] = split(op, xi);
    ([r0, r1, r2], [w0, w1, w2])
}

fn pose_tensor((q, t): Pose) -> Tensor {
    stack(&[q[0], q[1], q[2], q[3], t[0], t[1], t[2]])
}

/// `(Exp(ω), Jl(ω) ρ)`, `Exp(ω)` and `Jl(ω)` from one sine and cosine of `θ/2`.
fn exp_parts(rho: V3, omega: V3) -> Pose {
    let (q, _, jl) = so3::exp_with_jacobians_parts(omega);
    (q, mat_vec(&jl, rho))
}

fn log_parts((q, t): Pose) -> (V3, V3) {
    let omega = so3::log_parts(q);
    let jl_inv = so3::jacobian_inv_parts(omega, Side::Left);
    (mat_vec(&jl_inv, t), omega)
}

fn compose_parts((qa, ta): Pose, (qb, tb): Pose) -> Pose {
    let moved = so3::rotate(qa, tb);
    (so3::mul(qa, qb), std::array::from_fn(|i| ta[i] + moved[i]))
}

fn inverse_parts((q, t): Pose) -> Pose {
    let qi = so3::conj(q);
    (qi, so3::rotate(qi, t).map(|c| -c))
}

/// `Ad(X) = [[R, [t]× R], [0, R]]` for `[ρ, ω]` tangents.
fn adjoint_parts((q, t): Pose) -> [[Tensor; 6]; 6] {
    let r = so3::rotation(q);
    let corner = mat_mul(&skew(t), &r);
    blocks(&r, &corner, &zeros(q[0]), &r)
}

/// Barfoot's `Q(ρ, ω)`, the coupling block of SE(3)'s left Jacobian:
/// `½V + a (ΘV + VΘ + ΘVΘ) + c₂ (Θ²V + VΘ² - 3ΘVΘ) + c₃ (ΘVΘ² + Θ²VΘ)` with `V = [ρ]×`,
/// `Θ = [ω]×`, `a = (θ - sin θ)/θ³`, `c₂ = (θ² + 2cos θ - 2)/(2θ⁴)`,
/// `c₃ = (2θ - 3 sin θ + θ cos θ)/(2θ⁵)`.
fn coupling(rho: V3, omega: V3) -> M3 {
    let theta2 = super::parts::dot(omega, omega);
    let a = THETA_MINUS_SIN.eval(theta2);
    let c2 = SE3_C2.eval(theta2);
    let c3 = SE3_C3.eval(theta2);
    let (v, w) = (skew(rho), skew(omega));
    let wv = mat_mul(&w, &v);
    let vw = mat_mul(&v, &w);
    let wvw = mat_mul(&wv, &w);
    let wwv = mat_mul(&w, &wv);
    let vww = mat_mul(&vw, &w);
    let wvww = mat_mul(&wvw, &w);
    let wwvw = mat_mul(&w, &wvw);
    std::array::from_fn(|i| {
        std::array::from_fn(|j| {
            v[i][j] * 0.5
                + a * (wv[i][j] + vw[i][j] + wvw[i][j])
                + c2 * (wwv[i][j] + vww[i][j] - wvw[i][j] * 3.0)
                + c3 * (wvww[i][j] + wwvw[i][j])
        })
    })
}

/// The right or left Jacobian of `Exp` at `[ρ, ω]`, and its inverse when `inverse`.
fn jacobian_parts(rho: V3, omega: V3, side: Side, inverse: bool) -> [[Tensor; 6]; 6] {
    // Jr(ξ) = Jl(-ξ).
    let (rho, omega) = match side {
        Side::Left => (rho, omega),
        Side::Right => (rho.map(|c| -c), omega.map(|c| -c)),
    };
    let q = coupling(rho, omega);
    let z = zeros(omega[0]);
    if inverse {
        let j_inv = so3::jacobian_inv_parts(omega, Side::Left);
        let corner = mat_neg(&mat_mul(&mat_mul(&j_inv, &q), &j_inv));
        blocks(&j_inv, &corner, &z, &j_inv)
    } else {
        let j = so3::jacobian_separate_parts(omega, Side::Left);
        blocks(&j, &q, &z, &j)
    }
}

fn jacobian(op: &'static str, xi: Tensor, side: Side, inverse: bool) -> Tensor {
    let (rho, omega) = tangent(op, xi);
    matrix(&jacobian_parts(rho, omega, side, inverse))
}

/// `Exp([ρ, ω]) = (Exp(ω), Jl(ω) ρ)` (`[.., 6]` to `[.., 7]`).
pub fn se3_exp(xi: Tensor) -> Tensor {
    let (rho, omega) = tangent("se3_exp", xi);
    pose_tensor(exp_parts(rho, omega))
}

/// `Log(x) = [Jl(ω)⁻¹ t, ω]` with `ω = Log(q)` (`[.., 7]` to `[.., 6]`, `‖ω‖ <= π`).
pub fn se3_log(x: Tensor) -> Tensor {
    let (rho, omega) = log_parts(pose("se3_log", x));
    stack(&[rho[0], rho[1], rho[2], omega[0], omega[1], omega[2]])
}

/// `a ∘ b = (q_a q_b, t_a + R_a t_b)`.
pub fn se3_compose(a: Tensor, b: Tensor) -> Tensor {
    pose_tensor(compose_parts(pose("se3_compose", a), pose("se3_compose", b)))
}

/// `x⁻¹ = (q*, -R(q)ᵀ t)`.
pub fn se3_inverse(x: Tensor) -> Tensor {
    pose_tensor(inverse_parts(pose("se3_inverse", x)))
}

/// `x · p = R p + t` for points `p` (`[.., 3]`).
pub fn se3_act(x: Tensor, p: Tensor) -> Tensor {
    let (q, t) = pose("se3_act", x);
    let p = split("se3_act", p);
    let moved = so3::rotate(q, p);
    stack(&std::array::from_fn::<_, 3, _>(|i| moved[i] + t[i]))
}

/// `a⁻¹ ∘ b`.
pub fn se3_between(a: Tensor, b: Tensor) -> Tensor {
    pose_tensor(compose_parts(
        inverse_parts(pose("se3_between", a)),
        pose("se3_between", b),
    ))
}

/// The geodesic `a ∘ Exp(t Log(a⁻¹ ∘ b))` (a screw motion), `t` of the batch shape.
pub fn se3_interp(a: Tensor, b: Tensor, t: Tensor) -> Tensor {
    let pa = pose("se3_interp", a);
    let (rho, omega) = log_parts(compose_parts(inverse_parts(pa), pose("se3_interp", b)));
    let step = exp_parts(rho.map(|c| c * t), omega.map(|c| c * t));
    pose_tensor(compose_parts(pa, step))
}

/// The homogeneous matrix `[[R, t], [0, 1]]` (`[.., 4, 4]`).
pub fn se3_to_matrix(x: Tensor) -> Tensor {
    let (q, t) = pose("se3_to_matrix", x);
    let r = so3::rotation(q);
    let (z, o) = (zero(q[0]), one(q[0]));
    matrix(&[
        [r[0][0], r[0][1], r[0][2], t[0]],
        [r[1][0], r[1][1], r[1][2], t[1]],
        [r[2][0], r[2][1], r[2][2], t[2]],
        [z, z, z, o],
    ])
}

/// The adjoint `Ad(x) = [[R, [t]× R], [0, R]]` (`[.., 6, 6]`): `x ∘ Exp(δ) = Exp(Ad(x) δ) ∘ x`.
pub fn se3_adjoint(x: Tensor) -> Tensor {
    matrix(&adjoint_parts(pose("se3_adjoint", x)))
}

/// The right Jacobian of `Exp` at `ξ = [ρ, ω]` (`[.., 6, 6]`): `[[Jr(ω), Q(-ρ, -ω)], [0, Jr(ω)]]`.
pub fn se3_jr(xi: Tensor) -> Tensor {
    jacobian("se3_jr", xi, Side::Right, false)
}

/// The left Jacobian of `Exp` at `ξ`: `[[Jl(ω), Q(ρ, ω)], [0, Jl(ω)]]`.
pub fn se3_jl(xi: Tensor) -> Tensor {
    jacobian("se3_jl", xi, Side::Left, false)
}

/// `Jr(ξ)⁻¹` in closed form (`‖ω‖ < 2π`): the right Jacobian of `Log` at `Exp(ξ)`.
pub fn se3_jr_inv(xi: Tensor) -> Tensor {
    jacobian("se3_jr_inv", xi, Side::Right, true)
}

/// `Jl(ξ)⁻¹` in closed form: the left Jacobian of `Log` at `Exp(ξ)`.
pub fn se3_jl_inv(xi: Tensor) -> Tensor {
    jacobian("se3_jl_inv", xi, Side::Left, true)
}

/// The Jacobians of `a ∘ b` with respect to `a` and `b` on `side`: right `(Ad(b⁻¹), I)`,
/// left `(I, Ad(a))`.
pub fn se3_compose_jacobians(a: Tensor, b: Tensor, side: Side) -> (Tensor, Tensor) {
    let (pa, pb) = (pose("se3_compose_jacobians", a), pose("se3_compose_jacobians", b));
    let like = pa.0[0] * pb.0[0];
    let eye = blocks(&identity(like), &zeros(like), &zeros(like), &identity(like));
    let (ja, jb) = match side {
        Side::Right => (adjoint_parts(inverse_parts(pb)), eye),
        Side::Left => (eye, adjoint_parts(pa)),
    };
    (matrix(&ja), matrix(&jb))
}

/// The Jacobians of `x · p` with respect to `x` (on `side`, `[.., 3, 6]`) and `p` (`[.., 3, 3]`):
/// right `([R, -R [p]×], R)`, left `([I, -[x · p]×], R)`.
pub fn se3_act_jacobians(x: Tensor, p: Tensor, side: Side) -> (Tensor, Tensor) {
    let (q, t) = pose("se3_act_jacobians", x);
    let p: V3 = split("se3_act_jacobians", p);
    let r = so3::rotation(q);
    let (translation, rotation) = match side {
        Side::Right => (r, mat_neg(&mat_mul(&r, &skew(p)))),
        Side::Left => {
            let moved = so3::rotate(q, p);
            let image: V3 = std::array::from_fn(|i| moved[i] + t[i]);
            (identity(q[0]), mat_neg(&skew(image)))
        }
    };
    let jx: [[Tensor; 6]; 3] = std::array::from_fn(|i| {
        std::array::from_fn(|j| {
            if j < 3 {
                translation[i][j]
            } else {
                rotation[i][j - 3]
            }
        })
    });
    (matrix(&jx), matrix(&r))
}

/// The Jacobian of `x⁻¹` with respect to `x` on `side`: right `-Ad(x)`, left `-Ad(x⁻¹)`.
pub fn se3_inverse_jacobian(x: Tensor, side: Side) -> Tensor {
    let p = pose("se3_inverse_jacobian", x);
    let ad = match side {
        Side::Right => adjoint_parts(p),
        Side::Left => adjoint_parts(inverse_parts(p)),
    };
    matrix(&ad.map(|row| row.map(|c| -c)))
}
