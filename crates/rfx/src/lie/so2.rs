//! SO(2): planar rotations stored as `[cos θ, sin θ]`, tangents `[θ]` (a last axis of one).
//! Every Jacobian of SO(2) is `1` (the group is commutative), so none is provided.

use crate::trace::Tensor;

use super::parts::{split, stack};

/// A rotation's `cos θ, sin θ`.
pub(crate) type Rot2 = [Tensor; 2];

/// `a ∘ b`: the product of unit complex numbers.
pub(crate) fn mul(a: Rot2, b: Rot2) -> Rot2 {
    [a[0] * b[0] - a[1] * b[1], a[1] * b[0] + a[0] * b[1]]
}

/// `a⁻¹`.
pub(crate) fn conj(a: Rot2) -> Rot2 {
    [a[0], -a[1]]
}

/// `R p`.
pub(crate) fn rotate(a: Rot2, p: [Tensor; 2]) -> [Tensor; 2] {
    [a[0] * p[0] - a[1] * p[1], a[1] * p[0] + a[0] * p[1]]
}

/// The angle `atan2(sin, cos)` in `(-π, π]`.
pub(crate) fn angle(a: Rot2) -> Tensor {
    a[1].atan2(a[0])
}

/// `Exp([θ]) = [cos θ, sin θ]`.
pub fn so2_exp(theta: Tensor) -> Tensor {
    let [theta] = split("so2_exp", theta);
    stack(&[theta.cos(), theta.sin()])
}

/// `Log(r) = [atan2(sin, cos)]`, in `(-π, π]`; `r` need not be exactly unit.
pub fn so2_log(r: Tensor) -> Tensor {
    stack(&[angle(split("so2_log", r))])
}

/// `a ∘ b` (rotation by `θ_a + θ_b`).
pub fn so2_compose(a: Tensor, b: Tensor) -> Tensor {
    stack(&mul(split("so2_compose", a), split("so2_compose", b)))
}

/// `r⁻¹ = [cos θ, -sin θ]`.
pub fn so2_inverse(r: Tensor) -> Tensor {
    stack(&conj(split("so2_inverse", r)))
}

/// `r · p = R p` for points `p` (`[.., 2]`).
pub fn so2_act(r: Tensor, p: Tensor) -> Tensor {
    stack(&rotate(split("so2_act", r), split("so2_act", p)))
}

/// `a⁻¹ ∘ b`.
pub fn so2_between(a: Tensor, b: Tensor) -> Tensor {
    stack(&mul(conj(split("so2_between", a)), split("so2_between", b)))
}

/// `a ∘ Exp(t Log(a⁻¹ ∘ b))` along the shorter arc, `t` of the batch shape.
pub fn so2_interp(a: Tensor, b: Tensor, t: Tensor) -> Tensor {
    let ra = split("so2_interp", a);
    let step = angle(mul(conj(ra), split("so2_interp", b))) * t;
    stack(&mul(ra, [step.cos(), step.sin()]))
}
