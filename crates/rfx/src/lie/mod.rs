//! Lie groups for robotics as traced functions: SO(2), SO(3), SE(2) and SE(3) with `exp`,
//! `log`, composition, inverse, action on points, `between`, geodesic interpolation and the
//! right and left tangent-space Jacobians. Each function records ordinary rfx ops, so it runs
//! inside [`crate::jit()`], differentiates with [`crate::grad`] and [`crate::jacobian`], maps
//! with [`crate::vmap`], and compiles for every backend. The guide, with the derivations and
//! examples, is `docs/lie.md`.
//!
//! # Example
//!
//! A batch of rotation vectors to quaternions, and the right Jacobian of `Exp` checked by
//! reverse-mode differentiation through `exp` and `log`:
//!
//! ```
//! use rfx::{Tensor, lie};
//!
//! let omega = rfx::array([2, 3], vec![0.0f64, 0.0, 0.0, 0.0, 0.0, std::f64::consts::PI])?;
//! let q = rfx::jit(lie::so3_exp).call((&omega,))?;
//! assert_eq!(q[0].shape().dims(), &[2, 4]);
//!
//! // d/dδ Log(Exp(ω)⁻¹ ∘ Exp(ω + δ)) at δ = 0 is Jr(ω), per example.
//! let by_ad = rfx::jit(rfx::vmap(
//!     rfx::jacobian(|w: Tensor, d: Tensor| {
//!         lie::so3_log(lie::so3_between(lie::so3_exp(w), lie::so3_exp(w + d)))
//!     })
//!     .wrt(&[1]),
//! ));
//! let zeros = rfx::array([2, 3], vec![0.0f64; 6])?;
//! let ad = by_ad.call((&omega, &zeros))?;
//! let jr = rfx::jit(lie::so3_jr).call((&omega,))?;
//! for (a, b) in ad[1].to_f64_vec().iter().zip(jr[0].to_f64_vec()) {
//!     assert!((a - b).abs() < 1e-14);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Storage and shapes
//!
//! The group parameters are the **last axis** of a tensor; every axis before it is a batch,
//! broadcast between operands as in NumPy (`so3_compose` of `[n, 4]` and `[4]` is `[n, 4]`).
//!
//! | group | element | tangent |
//! |---|---|---|
//! | SO(2) | `[cos θ, sin θ]` | `[θ]` |
//! | SO(3) | unit quaternion `[w, x, y, z]` (Hamilton, scalar first) | `ω = θ · axis`, `[3]` |
//! | SE(2) | `[cos θ, sin θ, x, y]` | `[ρx, ρy, θ]` |
//! | SE(3) | `[w, x, y, z, tx, ty, tz]` (rotation, then translation) | `[ρ, ω]`, `[6]`: translation part first |
//!
//! Matrices (rotation matrices, adjoints, Jacobians) are `[.., r, c]`, rows first.
//!
//! For code that holds quaternions and vectors as separate components (one tensor, or one
//! constant, per component), [`quat_mul_parts`] and [`cross_parts`] are the Hamilton and cross
//! products on arrays of any type with `+`, `-` and `*`.
//!
//! # Conventions
//!
//! - `compose(a, b)` is `a ∘ b` (apply `b` first); `act(x, p)` is `R p + t`;
//!   `between(a, b)` is `a⁻¹ ∘ b`; `interp(a, b, t)` is `a ∘ Exp(t Log(a⁻¹ ∘ b))`.
//! - The **right** Jacobian of `f` at `x` maps a perturbation on the right of the input to one
//!   on the right of the output: `f(x ∘ Exp(δ)) ≈ f(x) ∘ Exp(J δ)`; the **left** Jacobian
//!   does the same on the left: `f(Exp(δ) ∘ x) ≈ Exp(J δ) ∘ f(x)` ([`Side`]). For `Exp`
//!   (a function from the tangent space) the right Jacobian is `Jr(τ)`:
//!   `Exp(τ + δ) ≈ Exp(τ) ∘ Exp(Jr(τ) δ)`, and `Jl(τ) = Jr(-τ)`; for `Log` the Jacobians are
//!   the inverses, `Jr⁻¹(Log x)` and `Jl⁻¹(Log x)` (Solà, Deray and Atchuthan, *A micro Lie
//!   theory for state estimation in robotics*, 2018).
//! - SE(3)'s `Exp(ρ, ω) = (Exp(ω), Jl(ω) ρ)` and its Jacobians are Barfoot's block forms
//!   `[[J(ω), Q], [0, J(ω)]]` for the `[ρ, ω]` ordering.
//!
//! # Singularities
//!
//! Every function is exact to rounding at and near `θ = 0` and `θ = π`, in value and in
//! derivative: the terms that are `0/0` at `θ = 0` switch per element to their Taylor series
//! below a threshold derived from the series' truncation error in the tensor's dtype (so `f32`
//! and `f64` thresholds differ), and each branch is fed a harmless argument where it is not
//! taken, so reverse-mode derivatives through the select stay finite. `so3_log` works on the
//! quaternion (`atan2(‖v‖, w)` with `w`'s sign normalised), which has no singularity at `π`.
//! Thresholds and error bounds: `series.rs` and `docs/lie.md`.

use crate::trace::Tensor;

mod parts;
mod se2;
mod se3;
mod series;
mod so2;
mod so3;

pub use parts::{cross_parts, quat_mul_parts};
pub use se2::{
    se2_act, se2_act_jacobians, se2_adjoint, se2_between, se2_compose, se2_compose_jacobians, se2_exp,
    se2_interp, se2_inverse, se2_inverse_jacobian, se2_jl, se2_jl_inv, se2_jr, se2_jr_inv, se2_log,
};
pub use se3::{
    se3_act, se3_act_jacobians, se3_adjoint, se3_between, se3_compose, se3_compose_jacobians, se3_exp,
    se3_interp, se3_inverse, se3_inverse_jacobian, se3_jl, se3_jl_inv, se3_jr, se3_jr_inv, se3_log,
    se3_to_matrix,
};
pub use so2::{so2_act, so2_between, so2_compose, so2_exp, so2_interp, so2_inverse, so2_log};
pub use so3::{
    so3_act, so3_act_jacobians, so3_between, so3_compose, so3_compose_jacobians, so3_exp,
    so3_exp_with_jacobians, so3_interp, so3_inverse, so3_inverse_jacobian, so3_jl, so3_jl_inv, so3_jr,
    so3_jr_inv, so3_log, so3_log_with_jacobians, so3_to_matrix,
};

/// Which side of an element a tangent perturbation acts on (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// `x ∘ Exp(δ)`: the perturbation is in the element's own (body) frame.
    Right,
    /// `Exp(δ) ∘ x`: the perturbation is in the reference (world) frame.
    Left,
}

/// A single-output function of this module, by arity, as the expression language calls it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ExprCall {
    One(fn(Tensor) -> Tensor),
    Two(fn(Tensor, Tensor) -> Tensor),
    Three(fn(Tensor, Tensor, Tensor) -> Tensor),
}

impl ExprCall {
    /// The number of arguments.
    pub(crate) fn arity(self) -> usize {
        match self {
            ExprCall::One(_) => 1,
            ExprCall::Two(_) => 2,
            ExprCall::Three(_) => 3,
        }
    }

    /// The function applied to `args` (exactly [`ExprCall::arity`] of them).
    pub(crate) fn apply(self, args: &[Tensor]) -> Option<Tensor> {
        match (self, args) {
            (ExprCall::One(f), &[a]) => Some(f(a)),
            (ExprCall::Two(f), &[a, b]) => Some(f(a, b)),
            (ExprCall::Three(f), &[a, b, c]) => Some(f(a, b, c)),
            _ => None,
        }
    }
}

/// One function of this module in the expression language (`rfx::expr`): its name (as in
/// Rust and Python), arguments, one-line summary and the function.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExprFunction {
    pub(crate) name: &'static str,
    pub(crate) args: &'static str,
    pub(crate) summary: &'static str,
    pub(crate) call: ExprCall,
}

const fn entry(
    name: &'static str,
    args: &'static str,
    summary: &'static str,
    call: ExprCall,
) -> ExprFunction {
    ExprFunction {
        name,
        args,
        summary,
        call,
    }
}

use ExprCall::{One, Three, Two};

/// The functions of this module with one output, which the expression language can hold (the
/// operation Jacobians return pairs and take a [`Side`]: Rust and Python only).
pub(crate) const EXPR_FUNCTIONS: &[ExprFunction] = &[
    entry(
        "so2_exp",
        "theta",
        "SO(2) Exp: [theta] to [cos, sin]",
        One(so2_exp),
    ),
    entry("so2_log", "r", "SO(2) Log: [cos, sin] to [theta]", One(so2_log)),
    entry("so2_compose", "a, b", "SO(2) a ∘ b", Two(so2_compose)),
    entry("so2_inverse", "r", "SO(2) inverse", One(so2_inverse)),
    entry("so2_act", "r, p", "SO(2) rotation of 2-vectors p", Two(so2_act)),
    entry("so2_between", "a, b", "SO(2) a⁻¹ ∘ b", Two(so2_between)),
    entry(
        "so2_interp",
        "a, b, t",
        "SO(2) geodesic a ∘ Exp(t Log(a⁻¹ ∘ b))",
        Three(so2_interp),
    ),
    entry(
        "so3_exp",
        "omega",
        "SO(3) Exp: rotation vector to unit quaternion [w, x, y, z]",
        One(so3_exp),
    ),
    entry(
        "so3_log",
        "q",
        "SO(3) Log: quaternion to rotation vector (|omega| <= pi)",
        One(so3_log),
    ),
    entry(
        "so3_compose",
        "a, b",
        "SO(3) a ∘ b (Hamilton product)",
        Two(so3_compose),
    ),
    entry("so3_inverse", "q", "SO(3) inverse (conjugate)", One(so3_inverse)),
    entry("so3_act", "q, p", "SO(3) rotation of 3-vectors p", Two(so3_act)),
    entry("so3_between", "a, b", "SO(3) a⁻¹ ∘ b", Two(so3_between)),
    entry(
        "so3_interp",
        "a, b, t",
        "SO(3) slerp a ∘ Exp(t Log(a⁻¹ ∘ b))",
        Three(so3_interp),
    ),
    entry(
        "so3_to_matrix",
        "q",
        "SO(3) rotation matrix [.., 3, 3]",
        One(so3_to_matrix),
    ),
    entry("so3_jr", "omega", "SO(3) right Jacobian of Exp", One(so3_jr)),
    entry("so3_jl", "omega", "SO(3) left Jacobian of Exp", One(so3_jl)),
    entry(
        "so3_jr_inv",
        "omega",
        "SO(3) inverse right Jacobian (of Log)",
        One(so3_jr_inv),
    ),
    entry(
        "so3_jl_inv",
        "omega",
        "SO(3) inverse left Jacobian (of Log)",
        One(so3_jl_inv),
    ),
    entry(
        "se2_exp",
        "xi",
        "SE(2) Exp: [rho_x, rho_y, theta] to [cos, sin, x, y]",
        One(se2_exp),
    ),
    entry(
        "se2_log",
        "x",
        "SE(2) Log: [cos, sin, x, y] to [rho_x, rho_y, theta]",
        One(se2_log),
    ),
    entry("se2_compose", "a, b", "SE(2) a ∘ b", Two(se2_compose)),
    entry("se2_inverse", "x", "SE(2) inverse", One(se2_inverse)),
    entry("se2_act", "x, p", "SE(2) transform of 2-points p", Two(se2_act)),
    entry("se2_between", "a, b", "SE(2) a⁻¹ ∘ b", Two(se2_between)),
    entry(
        "se2_interp",
        "a, b, t",
        "SE(2) geodesic a ∘ Exp(t Log(a⁻¹ ∘ b))",
        Three(se2_interp),
    ),
    entry("se2_adjoint", "x", "SE(2) adjoint [.., 3, 3]", One(se2_adjoint)),
    entry("se2_jr", "xi", "SE(2) right Jacobian of Exp", One(se2_jr)),
    entry("se2_jl", "xi", "SE(2) left Jacobian of Exp", One(se2_jl)),
    entry(
        "se2_jr_inv",
        "xi",
        "SE(2) inverse right Jacobian (of Log)",
        One(se2_jr_inv),
    ),
    entry(
        "se2_jl_inv",
        "xi",
        "SE(2) inverse left Jacobian (of Log)",
        One(se2_jl_inv),
    ),
    entry(
        "se3_exp",
        "xi",
        "SE(3) Exp: [rho, omega] to [w, x, y, z, tx, ty, tz]",
        One(se3_exp),
    ),
    entry("se3_log", "x", "SE(3) Log: pose to [rho, omega]", One(se3_log)),
    entry("se3_compose", "a, b", "SE(3) a ∘ b", Two(se3_compose)),
    entry("se3_inverse", "x", "SE(3) inverse", One(se3_inverse)),
    entry("se3_act", "x, p", "SE(3) transform of 3-points p", Two(se3_act)),
    entry("se3_between", "a, b", "SE(3) a⁻¹ ∘ b", Two(se3_between)),
    entry(
        "se3_interp",
        "a, b, t",
        "SE(3) screw motion a ∘ Exp(t Log(a⁻¹ ∘ b))",
        Three(se3_interp),
    ),
    entry(
        "se3_to_matrix",
        "x",
        "SE(3) homogeneous matrix [.., 4, 4]",
        One(se3_to_matrix),
    ),
    entry("se3_adjoint", "x", "SE(3) adjoint [.., 6, 6]", One(se3_adjoint)),
    entry("se3_jr", "xi", "SE(3) right Jacobian of Exp", One(se3_jr)),
    entry("se3_jl", "xi", "SE(3) left Jacobian of Exp", One(se3_jl)),
    entry(
        "se3_jr_inv",
        "xi",
        "SE(3) inverse right Jacobian (of Log)",
        One(se3_jr_inv),
    ),
    entry(
        "se3_jl_inv",
        "xi",
        "SE(3) inverse left Jacobian (of Log)",
        One(se3_jl_inv),
    ),
];

/// The expression-language entry called `name`.
pub(crate) fn expr_function(name: &str) -> Option<&'static ExprFunction> {
    EXPR_FUNCTIONS.iter().find(|f| f.name == name)
}
