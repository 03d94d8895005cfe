//! SE(2): planar rigid motions stored as `[cos θ, sin θ, x, y]`, tangents `[ρx, ρy, θ]`.

use crate::trace::Tensor;

use super::Side;
use super::parts::{matrix, one, split, stack, zero};
use super::series::{INV_COT, ONE_MINUS_COS, SINC, THETA_MINUS_SIN};
use super::so2::{self, Rot2};

type Pose2 = (Rot2, [Tensor; 2]);

fn pose(op: &'static str, x: Tensor) -> Pose2 {
    let [c, s, x, y] = split(op, x);
    ([c, s], [x, y])
}

fn pose_tensor((r, t): Pose2) -> Tensor {
    stack(&[r[0], r[1], t[0], t[1]])
}

fn exp_parts(rho: [Tensor; 2], theta: Tensor) -> Pose2 {
    let theta2 = theta * theta;
    // V = [[sin θ/θ, -(1 - cos θ)/θ], [(1 - cos θ)/θ, sin θ/θ]].
    let a = SINC.eval(theta2);
    let b = ONE_MINUS_COS.eval(theta2) * theta;
    let t = [a * rho[0] - b * rho[1], b * rho[0] + a * rho[1]];
    ([theta.cos(), theta.sin()], t)
}

fn log_parts((r, t): Pose2) -> ([Tensor; 2], Tensor) {
    let theta = so2::angle(r);
    // V⁻¹ = [[h, θ/2], [-θ/2, h]] with h = (θ/2) cot(θ/2) = 1 - θ² (1/θ² - cot(θ/2)/(2θ)).
    let theta2 = theta * theta;
    let h = 1.0 - theta2 * INV_COT.eval(theta2);
    let half = theta * 0.5;
    ([h * t[0] + half * t[1], h * t[1] - half * t[0]], theta)
}

fn compose_parts((ra, ta): Pose2, (rb, tb): Pose2) -> Pose2 {
    let moved = so2::rotate(ra, tb);
    (so2::mul(ra, rb), [ta[0] + moved[0], ta[1] + moved[1]])
}

fn inverse_parts((r, t): Pose2) -> Pose2 {
    let ri = so2::conj(r);
    let back = so2::rotate(ri, t);
    (ri, [-back[0], -back[1]])
}

/// The right or left Jacobian of `Exp` at `[ρx, ρy, θ]` (Solà et al., eqs. 163–164).
fn jacobian(op: &'static str, xi: Tensor, side: Side) -> Tensor {
    let [r0, r1, theta] = split(op, xi);
    let theta2 = theta * theta;
    let s = SINC.eval(theta2);
    let a = ONE_MINUS_COS.eval(theta2);
    let tb = THETA_MINUS_SIN.eval(theta2) * theta;
    let at = a * theta;
    let (z, o) = (zero(theta), one(theta));
    let rows = match side {
        Side::Right => [[s, at, r0 * tb - r1 * a], [-at, s, r0 * a + r1 * tb], [z, z, o]],
        Side::Left => [[s, -at, r0 * tb + r1 * a], [at, s, r1 * tb - r0 * a], [z, z, o]],
    };
    matrix(&rows)
}

/// `Exp([ρx, ρy, θ]) = (Exp(θ), V(θ) ρ)` (`[.., 3]` to `[.., 4]`).
pub fn se2_exp(xi: Tensor) -> Tensor {
    let [r0, r1, theta] = split("se2_exp", xi);
    pose_tensor(exp_parts([r0, r1], theta))
}

/// `Log(x) = [V(θ)⁻¹ t, θ]` with `θ = atan2(sin, cos)` in `(-π, π]` (`[.., 4]` to `[.., 3]`).
pub fn se2_log(x: Tensor) -> Tensor {
    let (rho, theta) = log_parts(pose("se2_log", x));
    stack(&[rho[0], rho[1], theta])
}

/// `a ∘ b = (R_a R_b, t_a + R_a t_b)`.
pub fn se2_compose(a: Tensor, b: Tensor) -> Tensor {
    pose_tensor(compose_parts(pose("se2_compose", a), pose("se2_compose", b)))
}

/// `x⁻¹ = (Rᵀ, -Rᵀ t)`.
pub fn se2_inverse(x: Tensor) -> Tensor {
    pose_tensor(inverse_parts(pose("se2_inverse", x)))
}

/// `x · p = R p + t` for points `p` (`[.., 2]`).
pub fn se2_act(x: Tensor, p: Tensor) -> Tensor {
    let (r, t) = pose("se2_act", x);
    let moved = so2::rotate(r, split("se2_act", p));
    stack(&[moved[0] + t[0], moved[1] + t[1]])
}

/// `a⁻¹ ∘ b`.
pub fn se2_between(a: Tensor, b: Tensor) -> Tensor {
    pose_tensor(compose_parts(
        inverse_parts(pose("se2_between", a)),
        pose("se2_between", b),
    ))
}

/// The geodesic `a ∘ Exp(t Log(a⁻¹ ∘ b))`, `t` of the batch shape.
pub fn se2_interp(a: Tensor, b: Tensor, t: Tensor) -> Tensor {
    let pa = pose("se2_interp", a);
    let (rho, theta) = log_parts(compose_parts(inverse_parts(pa), pose("se2_interp", b)));
    pose_tensor(compose_parts(pa, exp_parts(rho.map(|c| c * t), theta * t)))
}

/// The right Jacobian of `Exp` at `ξ = [ρx, ρy, θ]` (`[.., 3, 3]`); its inverse is
/// [`se2_jr_inv`].
pub fn se2_jr(xi: Tensor) -> Tensor {
    jacobian("se2_jr", xi, Side::Right)
}

/// The left Jacobian of `Exp` at `ξ`; `Jl(ξ) = Jr(-ξ)`.
pub fn se2_jl(xi: Tensor) -> Tensor {
    jacobian("se2_jl", xi, Side::Left)
}

/// `Ad(x) = [[R, (ty, -tx)ᵀ], [0, 1]]`: `x ∘ Exp(δ) = Exp(Ad(x) δ) ∘ x`.
fn adjoint_parts((r, t): Pose2) -> [[Tensor; 3]; 3] {
    let (z, o) = (zero(r[0]), one(r[0]));
    [[r[0], -r[1], t[1]], [r[1], r[0], -t[0]], [z, z, o]]
}

/// The adjoint `Ad(x) = [[R, (ty, -tx)ᵀ], [0, 1]]` (`[.., 3, 3]`).
pub fn se2_adjoint(x: Tensor) -> Tensor {
    matrix(&adjoint_parts(pose("se2_adjoint", x)))
}

/// `Jr(ξ)⁻¹`, the right Jacobian of `Log` at `Exp(ξ)` (the inverse of [`se2_jr`], `|θ| < 2π`).
pub fn se2_jr_inv(xi: Tensor) -> Tensor {
    jacobian("se2_jr_inv", xi, Side::Right).inv()
}

/// `Jl(ξ)⁻¹`, the left Jacobian of `Log` at `Exp(ξ)`.
pub fn se2_jl_inv(xi: Tensor) -> Tensor {
    jacobian("se2_jl_inv", xi, Side::Left).inv()
}

/// The Jacobians of `a ∘ b` with respect to `a` and `b` on `side`: right `(Ad(b⁻¹), I)`,
/// left `(I, Ad(a))`.
pub fn se2_compose_jacobians(a: Tensor, b: Tensor, side: Side) -> (Tensor, Tensor) {
    let (pa, pb) = (pose("se2_compose_jacobians", a), pose("se2_compose_jacobians", b));
    let like = pa.0[0] * pb.0[0];
    let (z, o) = (zero(like), one(like));
    let eye = [[o, z, z], [z, o, z], [z, z, o]];
    let (ja, jb) = match side {
        Side::Right => (adjoint_parts(inverse_parts(pb)), eye),
        Side::Left => (eye, adjoint_parts(pa)),
    };
    (matrix(&ja), matrix(&jb))
}

/// The Jacobians of `x · p` with respect to `x` (on `side`, `[.., 2, 3]`) and `p` (`[.., 2, 2]`):
/// right `([R, R (-py, px)ᵀ], R)`, left `([I, (-y₂, y₁)ᵀ], R)` with `y = x · p`.
pub fn se2_act_jacobians(x: Tensor, p: Tensor, side: Side) -> (Tensor, Tensor) {
    let (r, t) = pose("se2_act_jacobians", x);
    let p: [Tensor; 2] = split("se2_act_jacobians", p);
    let rot = [[r[0], -r[1]], [r[1], r[0]]];
    let jx = match side {
        Side::Right => {
            let turn = so2::rotate(r, [-p[1], p[0]]);
            [[r[0], -r[1], turn[0]], [r[1], r[0], turn[1]]]
        }
        Side::Left => {
            let moved = so2::rotate(r, p);
            let y = [moved[0] + t[0], moved[1] + t[1]];
            let (z, o) = (zero(r[0]), one(r[0]));
            [[o, z, -y[1]], [z, o, y[0]]]
        }
    };
    (matrix(&jx), matrix(&rot))
}

/// The Jacobian of `x⁻¹` with respect to `x` on `side`: right `-Ad(x)`, left `-Ad(x⁻¹)`.
pub fn se2_inverse_jacobian(x: Tensor, side: Side) -> Tensor {
    let p = pose("se2_inverse_jacobian", x);
    let ad = match side {
        Side::Right => adjoint_parts(p),
        Side::Left => adjoint_parts(inverse_parts(p)),
    };
    matrix(&ad.map(|row| row.map(|c| -c)))
}
