//! SO(3): rotations stored as unit quaternions `[w, x, y, z]` (Hamilton, scalar first),
//! tangents `ω = θ · axis` (rad).

use crate::trace::{Tensor, where_};

use super::Side;
use super::parts::{
    M3, Quat, V3, cross, dot, identity, mat_mul, mat_neg, matrix, skew, split, stack, transpose,
};
use super::series::{
    ATAN, EXP, EXP_WITH_JACOBIANS, HALF_COS, HALF_SINC, INV_COT, ONE_MINUS_COS, Series, THETA_MINUS_SIN,
    shared_threshold,
};

/// `θ² = ‖ω‖²` split at a threshold, with the arguments of each branch and one sine and
/// cosine of `θ/2` for the closed forms.
struct HalfAngle {
    /// `θ²` below the threshold: the series are taken.
    small: Tensor,
    /// `θ²` where the series are taken, `0` elsewhere (their harmless argument).
    near: Tensor,
    /// `θ²` where the closed forms are taken, `1` elsewhere (their harmless argument).
    far: Tensor,
    /// `√far`, and the sine and cosine of half of it.
    theta: Tensor,
    sin: Tensor,
    cos: Tensor,
}

/// [`HalfAngle`] of `theta2` at the [`shared_threshold`] of `series`.
fn half_angle(theta2: Tensor, series: &[&Series]) -> HalfAngle {
    let small = theta2.lt(shared_threshold(series, theta2.dtype()));
    let far = where_(small, 1.0, theta2);
    let theta = far.sqrt();
    let half = theta * 0.5;
    HalfAngle {
        small,
        near: where_(small, theta2, 0.0),
        far,
        theta,
        sin: half.sin(),
        cos: half.cos(),
    }
}

/// `Exp(ω) = [cos(θ/2), k ω]` and `k = sin(θ/2)/θ`, from [`HALF_COS`] and [`HALF_SINC`]'s series
/// where `h` takes them and from `h`'s sine and cosine elsewhere (neither cancels).
fn exp_from(omega: V3, h: &HalfAngle) -> (Quat, Tensor) {
    let w = where_(h.small, HALF_COS.horner(h.near), h.cos);
    let k = half_sinc(h);
    ([w, k * omega[0], k * omega[1], k * omega[2]], k)
}

/// `sin(θ/2)/θ` of a [`HalfAngle`] split: [`HALF_SINC`]'s series or `h`'s sine over `θ`.
fn half_sinc(h: &HalfAngle) -> Tensor {
    where_(h.small, HALF_SINC.horner(h.near), h.sin / h.theta)
}

/// `Exp(ω)` of components, from one sine and cosine of `θ/2` above one threshold on `θ²` (the
/// smaller of [`HALF_COS`]'s and [`HALF_SINC`]'s, so both series are exact to rounding below
/// it and both closed forms, which do not cancel, above it).
pub(crate) fn exp_parts(omega: V3) -> Quat {
    exp_from(omega, &half_angle(dot(omega, omega), &EXP)).0
}

/// `Exp(ω)` with `Jr(ω)` and `Jl(ω)` from one sine and cosine of `θ/2`: with `s = sin(θ/2)`,
/// `c = cos(θ/2)` and `k = s/θ`, `Exp(ω) = [c, k ω]`, the `[ω]×` coefficient
/// `(1 - cos θ)/θ² = 2 k²` and the `[ω]×²` coefficient `(θ - sin θ)/θ³ = (θ - 2 s c)/θ³`.
/// Below one threshold on `θ²` ([`shared_threshold`] of [`EXP_WITH_JACOBIANS`], which is
/// [`THETA_MINUS_SIN`]'s) `c`, `k` and `(θ - sin θ)/θ³` come from their series, each truncated
/// below half the unit roundoff there, and `2 k²` from the series of `k` (`2 k² = (1 - cos θ)/θ²`
/// identically, so within a few units of roundoff). Above it the closed forms are taken: `c`,
/// `k` and `2 k²` do not cancel; `θ - 2 s c` does, as [`THETA_MINUS_SIN`]'s own closed form
/// `θ - sin θ` does from the same threshold on, with an absolute error of a few `u · sin θ`
/// (`2 s c` rounds three times where `sin θ` rounds once), which the `[ω]×²` factor `θ²` turns
/// into a few `u` on entries of a matrix of norm at least `1`: correct to rounding relative to
/// its norm, as the series module's closed forms are.
pub(crate) fn exp_with_jacobians_parts(omega: V3) -> (Quat, M3, M3) {
    let theta2 = dot(omega, omega);
    let h = half_angle(theta2, &EXP_WITH_JACOBIANS);
    let (q, k) = exp_from(omega, &h);
    let (a, b) = exp_jacobian_coefficients(&h, k);
    (
        q,
        jacobian_form(omega, theta2, -a, b),
        jacobian_form(omega, theta2, a, b),
    )
}

/// The Jacobians' coefficients `(1 - cos θ)/θ² = 2 k²` and `(θ - sin θ)/θ³` of a split at
/// [`EXP_WITH_JACOBIANS`]' threshold (see [`exp_with_jacobians_parts`]), given `k = sin(θ/2)/θ`.
fn exp_jacobian_coefficients(h: &HalfAngle, k: Tensor) -> (Tensor, Tensor) {
    let b = where_(
        h.small,
        THETA_MINUS_SIN.horner(h.near),
        (h.theta - h.sin * h.cos * 2.0) / (h.theta * h.far),
    );
    (k * k * 2.0, b)
}

/// `Log(q)` of components: the sign of `q` is chosen so that `w >= 0` (the same rotation),
/// then `θ = 2 atan2(‖v‖, w)` and `ω = θ v / ‖v‖`; below the threshold on `‖v‖² / w²` the
/// factor `θ / ‖v‖ = (2 / w) atan(y) / y` comes from its series in `y² = ‖v‖² / w²`.
/// Invariant to the scale of `q` (a non-unit `q` gives the log of its direction).
pub(crate) fn log_parts(q: Quat) -> V3 {
    log_terms(q).omega
}

/// `Log(q)` and the terms of the closed form its Jacobians reuse.
struct LogTerms {
    omega: V3,
    /// `q`'s scalar part, sign-normalised (`w >= 0`).
    w: Tensor,
    /// `‖v‖` and `θ = 2 atan2(‖v‖, w)` where the closed form is taken; where the series is
    /// (`w > 0` there), `1` and `2 atan2(1, w)`: finite, positive, harmless.
    n: Tensor,
    theta: Tensor,
}

/// See [`log_parts`].
fn log_terms(q: Quat) -> LogTerms {
    let flip = q[0].lt(0.0);
    let [w, x, y, z] = q.map(|c| where_(flip, -c, c));
    let v = [x, y, z];
    let n2 = dot(v, v);
    let small = n2.lt(w * w * ATAN.threshold(w.dtype()));
    let w_safe = where_(small, w, 1.0);
    let y2 = where_(small, n2 / (w_safe * w_safe), 0.0);
    let near = ATAN.horner(y2) * 2.0 / w_safe;
    let n = where_(small, 1.0, n2).sqrt();
    let theta = n.atan2(w) * 2.0;
    let far = theta / n;
    let factor = where_(small, near, far);
    LogTerms {
        omega: v.map(|c| c * factor),
        w,
        n,
        theta,
    }
}

/// `Log(q)` with `Jr⁻¹(Log q)` and `Jl⁻¹(Log q)`, whose `[ω]×²` coefficient
/// `1/θ² - cot(θ/2)/(2θ)` takes `cot(θ/2) = w / ‖v‖` from the quaternion itself (no sine or
/// cosine of `θ/2` after the `atan2`). Below [`INV_COT`]'s threshold on `θ² = ‖ω‖²` its series
/// is taken, as in [`jacobian_inv_parts`]; at `θ = π`, `w = 0` makes the cotangent term `0`.
/// Where the closed form is taken, so is `Log`'s (`θ² <= 4 ‖v‖²/w²`, and `4` times
/// [`ATAN`]'s threshold is below [`INV_COT`]'s: a test in `series.rs`), so `θ` and `‖v‖`
/// there are the logarithm's; elsewhere they are its harmless stand-ins.
pub(crate) fn log_with_jacobians_parts(q: Quat) -> (V3, M3, M3) {
    let LogTerms { omega, w, n, theta } = log_terms(q);
    let theta2 = dot(omega, omega);
    let small = theta2.lt(INV_COT.threshold(theta2.dtype()));
    let near = INV_COT.horner(where_(small, theta2, 0.0));
    let far = (theta * theta).recip() - w / (n * theta * 2.0);
    let b = where_(small, near, far);
    let half = |h: f64| theta2.full_like(h);
    (
        omega,
        jacobian_form(omega, theta2, half(0.5), b),
        jacobian_form(omega, theta2, half(-0.5), b),
    )
}

/// The Hamilton product `a ⊗ b`.
pub(crate) use super::parts::quat_mul_parts as mul;

/// The conjugate (the inverse of a unit quaternion).
pub(crate) fn conj(q: Quat) -> Quat {
    [q[0], -q[1], -q[2], -q[3]]
}

/// `R(q) p`, as `p + w t + u × t` with `u = (x, y, z)` and `t = 2 u × p`.
pub(crate) fn rotate(q: Quat, p: V3) -> V3 {
    let u = [q[1], q[2], q[3]];
    let t = cross(u, p).map(|c| c * 2.0);
    let ut = cross(u, t);
    std::array::from_fn(|i| p[i] + q[0] * t[i] + ut[i])
}

/// The rotation matrix of a unit quaternion.
pub(crate) fn rotation(q: Quat) -> M3 {
    let [w, x, y, z] = q;
    let two = |a: Tensor, b: Tensor| a * b * 2.0;
    [
        [
            1.0 - two(y, y) - two(z, z),
            two(x, y) - two(w, z),
            two(x, z) + two(w, y),
        ],
        [
            two(x, y) + two(w, z),
            1.0 - two(x, x) - two(z, z),
            two(y, z) - two(w, x),
        ],
        [
            two(x, z) - two(w, y),
            two(y, z) + two(w, x),
            1.0 - two(x, x) - two(y, y),
        ],
    ]
}

/// `I + a [ω]× + b [ω]×²`, with `[ω]×² = ω ωᵀ - θ² I` (`theta2 = θ²`).
fn jacobian_form(omega: V3, theta2: Tensor, a: Tensor, b: Tensor) -> M3 {
    let diagonal = 1.0 - b * theta2;
    let s = skew(omega);
    std::array::from_fn(|i| {
        std::array::from_fn(|j| {
            let outer = b * omega[i] * omega[j];
            if i == j {
                diagonal + outer
            } else {
                a * s[i][j] + outer
            }
        })
    })
}

/// The right (`Side::Right`) or left Jacobian of `Exp` at `ω`:
/// `I ∓ (1 - cos θ)/θ² [ω]× + (θ - sin θ)/θ³ [ω]×²`, both coefficients from one sine and
/// cosine of `θ/2` as in [`exp_with_jacobians_parts`].
pub(crate) fn jacobian_parts(omega: V3, side: Side) -> M3 {
    let theta2 = dot(omega, omega);
    let h = half_angle(theta2, &EXP_WITH_JACOBIANS);
    let (a, b) = exp_jacobian_coefficients(&h, half_sinc(&h));
    jacobian_form(omega, theta2, signed(a, side), b)
}

/// [`jacobian_parts`] with each coefficient from its own series and threshold
/// (`(1 - cos θ)/θ²` from `sin(θ/2)`, `(θ - sin θ)/θ³` from `sin θ`): SE(3)'s Jacobians take
/// it, whose coupling block takes `(θ - sin θ)/θ³` from the same series (its batched kernel
/// measured 1.3× slower with the shared sine and cosine of [`jacobian_parts`]).
pub(crate) fn jacobian_separate_parts(omega: V3, side: Side) -> M3 {
    let theta2 = dot(omega, omega);
    let a = signed(ONE_MINUS_COS.eval(theta2), side);
    jacobian_form(omega, theta2, a, THETA_MINUS_SIN.eval(theta2))
}

/// The `[ω]×` coefficient of the Jacobian on `side`: `-a` on the right, `a` on the left.
fn signed(a: Tensor, side: Side) -> Tensor {
    match side {
        Side::Right => -a,
        Side::Left => a,
    }
}

/// The inverse of [`jacobian_parts`]: `I ± ½ [ω]× + (1/θ² - cot(θ/2)/(2θ)) [ω]×²` (`θ < 2π`).
pub(crate) fn jacobian_inv_parts(omega: V3, side: Side) -> M3 {
    let theta2 = dot(omega, omega);
    let half = theta2.full_like(match side {
        Side::Right => 0.5,
        Side::Left => -0.5,
    });
    jacobian_form(omega, theta2, half, INV_COT.eval(theta2))
}

fn quat(op: &'static str, q: Tensor) -> Quat {
    split(op, q)
}

fn vec3(op: &'static str, v: Tensor) -> V3 {
    split(op, v)
}

/// `Exp(ω)`: the unit quaternion `[cos(θ/2), sin(θ/2) ω/θ]` of the rotation by `θ = ‖ω‖`
/// about `ω` (shape `[.., 3]` to `[.., 4]`). Exact at and near `θ = 0` (series below the
/// dtype's threshold); any `θ`.
pub fn so3_exp(omega: Tensor) -> Tensor {
    stack(&exp_parts(vec3("so3_exp", omega)))
}

/// `Log(q)`: the rotation vector `ω` with `‖ω‖ <= π` (shape `[.., 4]` to `[.., 3]`). `q` and
/// `-q` give the same `ω` (the sign is normalised to `w >= 0`); `q` need not be exactly unit
/// (its direction is used) but must not be zero. Exact near `θ = 0` and at `θ = π`.
pub fn so3_log(q: Tensor) -> Tensor {
    stack(&log_parts(quat("so3_log", q)))
}

/// `a ∘ b` (apply `b`, then `a`): the Hamilton product.
pub fn so3_compose(a: Tensor, b: Tensor) -> Tensor {
    stack(&mul(quat("so3_compose", a), quat("so3_compose", b)))
}

/// `q⁻¹`: the conjugate of a unit quaternion.
pub fn so3_inverse(q: Tensor) -> Tensor {
    stack(&conj(quat("so3_inverse", q)))
}

/// `q · p = R(q) p`: the point (or vector) `p` (`[.., 3]`) rotated by `q`.
pub fn so3_act(q: Tensor, p: Tensor) -> Tensor {
    stack(&rotate(quat("so3_act", q), vec3("so3_act", p)))
}

/// `a⁻¹ ∘ b`: the rotation from `a` to `b` in `a`'s frame (`Log` of it is `b ⊖ a`).
pub fn so3_between(a: Tensor, b: Tensor) -> Tensor {
    stack(&mul(conj(quat("so3_between", a)), quat("so3_between", b)))
}

/// The geodesic `a ∘ Exp(t Log(a⁻¹ ∘ b))` (slerp along the shorter arc), `t` of the batch
/// shape (or a scalar): `a` at `t = 0`, `b` (up to sign) at `t = 1`.
pub fn so3_interp(a: Tensor, b: Tensor, t: Tensor) -> Tensor {
    let qa = quat("so3_interp", a);
    let delta = log_parts(mul(conj(qa), quat("so3_interp", b)));
    stack(&mul(qa, exp_parts(delta.map(|c| c * t))))
}

/// The rotation matrix `R(q)` (`[.., 3, 3]`), which is also SO(3)'s adjoint.
pub fn so3_to_matrix(q: Tensor) -> Tensor {
    matrix(&rotation(quat("so3_to_matrix", q)))
}

/// The right Jacobian of `Exp` at `ω` (`[.., 3, 3]`): `Exp(ω + δ) ≈ Exp(ω) ∘ Exp(Jr(ω) δ)`.
pub fn so3_jr(omega: Tensor) -> Tensor {
    matrix(&jacobian_parts(vec3("so3_jr", omega), Side::Right))
}

/// The left Jacobian of `Exp` at `ω`: `Exp(ω + δ) ≈ Exp(Jl(ω) δ) ∘ Exp(ω)`; `Jl(ω) = Jr(-ω)`.
pub fn so3_jl(omega: Tensor) -> Tensor {
    matrix(&jacobian_parts(vec3("so3_jl", omega), Side::Left))
}

/// `Jr(ω)⁻¹` in closed form (`‖ω‖ < 2π`): the right Jacobian of `Log` at `q = Exp(ω)`,
/// `Log(q ∘ Exp(δ)) ≈ Log(q) + Jr⁻¹(Log q) δ`.
pub fn so3_jr_inv(omega: Tensor) -> Tensor {
    matrix(&jacobian_inv_parts(vec3("so3_jr_inv", omega), Side::Right))
}

/// `Jl(ω)⁻¹` in closed form: the left Jacobian of `Log`, `Log(Exp(δ) ∘ q) ≈ Log(q) + Jl⁻¹(Log q) δ`.
pub fn so3_jl_inv(omega: Tensor) -> Tensor {
    matrix(&jacobian_inv_parts(vec3("so3_jl_inv", omega), Side::Left))
}

/// `Log(q)` with the Jacobians of `Log` at `q`, `(ω, Jr⁻¹(ω), Jl⁻¹(ω))` (`[.., 3]`,
/// `[.., 3, 3]`, `[.., 3, 3]`): the values of [`so3_log`], [`so3_jr_inv`] and [`so3_jl_inv`]
/// of it (to rounding), with the Jacobians' coefficient taken from the quaternion
/// (`cot(θ/2) = w / ‖v‖`) instead of the sine and cosine of `θ/2`, so the `atan2` of the
/// logarithm is the only transcendental function. Exact near `θ = 0` and at `θ = π`; `q` need
/// not be exactly unit (its direction is used) but must not be zero.
pub fn so3_log_with_jacobians(q: Tensor) -> (Tensor, Tensor, Tensor) {
    let (omega, jr_inv, jl_inv) = log_with_jacobians_parts(quat("so3_log_with_jacobians", q));
    (stack(&omega), matrix(&jr_inv), matrix(&jl_inv))
}

/// `Exp(ω)` with the Jacobians of `Exp` at `ω`, `(q, Jr(ω), Jl(ω))` (`[.., 4]`, `[.., 3, 3]`,
/// `[.., 3, 3]`): the values of [`so3_exp`] (to a few units of roundoff: its series threshold
/// is higher) and of [`so3_jr`] and [`so3_jl`] (the same operations), from one sine and cosine
/// of `θ/2` and one series region on `θ²`, where calling the three would take that sine and
/// cosine twice. Exact to rounding at and near `θ = 0`; any `θ`.
pub fn so3_exp_with_jacobians(omega: Tensor) -> (Tensor, Tensor, Tensor) {
    let (q, jr, jl) = exp_with_jacobians_parts(vec3("so3_exp_with_jacobians", omega));
    (stack(&q), matrix(&jr), matrix(&jl))
}

/// The Jacobians of `a ∘ b` with respect to `a` and `b` on `side`: right `(R(b)ᵀ, I)`,
/// left `(I, R(a))`.
pub fn so3_compose_jacobians(a: Tensor, b: Tensor, side: Side) -> (Tensor, Tensor) {
    let (qa, qb) = (quat("so3_compose_jacobians", a), quat("so3_compose_jacobians", b));
    let (ja, jb) = match side {
        Side::Right => (transpose(&rotation(qb)), identity(qa[0] * qb[0])),
        Side::Left => (identity(qa[0] * qb[0]), rotation(qa)),
    };
    (matrix(&ja), matrix(&jb))
}

/// The Jacobians of `q · p` with respect to `q` (on `side`) and `p`: right `(-R [p]×, R)`,
/// left `(-[R p]×, R)`.
pub fn so3_act_jacobians(q: Tensor, p: Tensor, side: Side) -> (Tensor, Tensor) {
    let (q, p) = (quat("so3_act_jacobians", q), vec3("so3_act_jacobians", p));
    let r = rotation(q);
    let jq = match side {
        Side::Right => mat_neg(&mat_mul(&r, &skew(p))),
        Side::Left => mat_neg(&skew(rotate(q, p))),
    };
    (matrix(&jq), matrix(&r))
}

/// The Jacobian of `q⁻¹` with respect to `q` on `side`: right `-R(q)`, left `-R(q)ᵀ`.
pub fn so3_inverse_jacobian(q: Tensor, side: Side) -> Tensor {
    let r = rotation(quat("so3_inverse_jacobian", q));
    matrix(&mat_neg(&match side {
        Side::Right => r,
        Side::Left => transpose(&r),
    }))
}
