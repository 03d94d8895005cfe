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

mod parts;
mod se2;
mod se3;
mod series;
mod so2;
mod so3;

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
    so3_act, so3_act_jacobians, so3_between, so3_compose, so3_compose_jacobians, so3_exp, so3_interp,
    so3_inverse, so3_inverse_jacobian, so3_jl, so3_jl_inv, so3_jr, so3_jr_inv, so3_log, so3_to_matrix,
};

/// Which side of an element a tangent perturbation acts on (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// `x ∘ Exp(δ)`: the perturbation is in the element's own (body) frame.
    Right,
    /// `Exp(δ) ∘ x`: the perturbation is in the reference (world) frame.
    Left,
}
