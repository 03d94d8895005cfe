//! The checks `lie.rs` and `lie_se.rs` run on every group alike: a group's `rfx::lie`
//! functions gathered in a [`Fns`] (behind a [`Group`] type, so that the traced closures
//! capture nothing), and drivers that compare its analytic Jacobians with
//! reverse-mode derivatives of perturbed operations on every backend of the build. What the
//! analytic values are compared with in turn (the `f64` reference) stays with each test.

#![allow(dead_code, unreachable_pub)]

use crate::lie_ref::{assert_close, backends, run};
use rfx::lie::{self, Side};
use rfx::{Array, DType, Tensor};

/// One group's functions: `exp`/`log` between the tangent (`dof` components) and the group,
/// the group operations, the Jacobians of `Exp` and `Log`, and those of compose, act and
/// inverse. `act` moves points of `points` components.
#[derive(Clone, Copy)]
pub struct Fns {
    pub dof: usize,
    pub points: usize,
    pub exp: fn(Tensor) -> Tensor,
    pub log: fn(Tensor) -> Tensor,
    pub compose: fn(Tensor, Tensor) -> Tensor,
    pub inverse: fn(Tensor) -> Tensor,
    pub between: fn(Tensor, Tensor) -> Tensor,
    pub act: fn(Tensor, Tensor) -> Tensor,
    pub jr: fn(Tensor) -> Tensor,
    pub jl: fn(Tensor) -> Tensor,
    pub jr_inv: fn(Tensor) -> Tensor,
    pub jl_inv: fn(Tensor) -> Tensor,
    pub compose_jacobians: fn(Tensor, Tensor, Side) -> (Tensor, Tensor),
    pub act_jacobians: fn(Tensor, Tensor, Side) -> (Tensor, Tensor),
    pub inverse_jacobian: fn(Tensor, Side) -> Tensor,
}

pub struct So3;

impl Group for So3 {
    const FNS: Fns = Fns {
        dof: 3,
        points: 3,
        exp: lie::so3_exp,
        log: lie::so3_log,
        compose: lie::so3_compose,
        inverse: lie::so3_inverse,
        between: lie::so3_between,
        act: lie::so3_act,
        jr: lie::so3_jr,
        jl: lie::so3_jl,
        jr_inv: lie::so3_jr_inv,
        jl_inv: lie::so3_jl_inv,
        compose_jacobians: lie::so3_compose_jacobians,
        act_jacobians: lie::so3_act_jacobians,
        inverse_jacobian: lie::so3_inverse_jacobian,
    };
}

pub struct Se3;

impl Group for Se3 {
    const FNS: Fns = Fns {
        dof: 6,
        points: 3,
        exp: lie::se3_exp,
        log: lie::se3_log,
        compose: lie::se3_compose,
        inverse: lie::se3_inverse,
        between: lie::se3_between,
        act: lie::se3_act,
        jr: lie::se3_jr,
        jl: lie::se3_jl,
        jr_inv: lie::se3_jr_inv,
        jl_inv: lie::se3_jl_inv,
        compose_jacobians: lie::se3_compose_jacobians,
        act_jacobians: lie::se3_act_jacobians,
        inverse_jacobian: lie::se3_inverse_jacobian,
    };
}

pub struct Se2;

impl Group for Se2 {
    const FNS: Fns = Fns {
        dof: 3,
        points: 2,
        exp: lie::se2_exp,
        log: lie::se2_log,
        compose: lie::se2_compose,
        inverse: lie::se2_inverse,
        between: lie::se2_between,
        act: lie::se2_act,
        jr: lie::se2_jr,
        jl: lie::se2_jl,
        jr_inv: lie::se2_jr_inv,
        jl_inv: lie::se2_jl_inv,
        compose_jacobians: lie::se2_compose_jacobians,
        act_jacobians: lie::se2_act_jacobians,
        inverse_jacobian: lie::se2_inverse_jacobian,
    };
}

/// A group, as a type: its functions are a constant.
pub trait Group: 'static {
    const FNS: Fns;
}

/// The `[n, dof]` array of zeros: the perturbation `δ` the derivatives are taken at.
pub fn zeros(dtype: DType, n: usize, dof: usize) -> Array {
    crate::lie_ref::array(dtype, &[n, dof], &vec![0.0; dof * n])
}

/// The tangent Jacobians by reverse mode through `exp`, `log` and the group operations:
/// `Log(Exp(τ)⁻¹ Exp(τ + δ))` (right Jacobian of `Exp`), `Log(Exp(τ + δ) Exp(τ)⁻¹)` (left),
/// `Log(Exp(τ) Exp(δ))` (right Jacobian of `Log`, `Jr⁻¹`) and `Log(Exp(δ) Exp(τ))` (left), all
/// at `δ = 0`.
fn tangent_jacobians<G: Group>(tau: Tensor, d: Tensor) -> Vec<Tensor> {
    let g = G::FNS;
    let x = (g.exp)(tau);
    let moved = (g.exp)(tau + d);
    let step = (g.exp)(d);
    vec![
        (g.log)((g.between)(x, moved)),
        (g.log)((g.compose)(moved, (g.inverse)(x))),
        (g.log)((g.compose)(x, step)),
        (g.log)((g.compose)(step, x)),
    ]
}

/// On every backend that runs: `jr`, `jl`, `jr_inv`, `jl_inv` at the `[n, dof]` tangents
/// `input`, then `jr_inv` and `jl_inv` at `Log(Exp(τ))` (the Jacobians of `Log` at `Exp(τ)`,
/// which are those at τ except at θ = π, where rounding may pick the other axis sign); each
/// tangent's reverse-mode Jacobians (`tangent_jacobians`) checked against them, within
/// `ad_tol[0]` for those of `Exp` and `ad_tol[1]` for those of `Log`. Returns the analytic
/// values per backend, for the caller to check against its reference.
pub fn exp_log_jacobians<G: Group>(
    dtype: DType,
    input: &Array,
    ad_tol: [f64; 2],
) -> Vec<(&'static str, Vec<Vec<f64>>)> {
    let n = input.shape().dims()[0];
    let g = G::FNS;
    let size = g.dof * g.dof;
    let zeros = zeros(dtype, n, g.dof);
    let mut analytic = Vec::new();
    for backend in backends(dtype) {
        let f = rfx::jit(|tau: Tensor| {
            let g = G::FNS;
            let back = (g.log)((g.exp)(tau));
            vec![
                (g.jr)(tau),
                (g.jl)(tau),
                (g.jr_inv)(tau),
                (g.jl_inv)(tau),
                (g.jr_inv)(back),
                (g.jl_inv)(back),
            ]
        })
        .on_backend(backend);
        let Some(a) = run("analytic", backend, &f, (input,)) else {
            continue;
        };
        let ad = rfx::jit(rfx::vmap(rfx::jacobian(tangent_jacobians::<G>).wrt(&[1]))).on_backend(backend);
        if let Some(out) = run("ad", backend, &ad, (input, &zeros)) {
            // Outputs: the four values, then their Jacobians with respect to δ.
            for (k, name) in ["AD jr", "AD jl", "AD jr_inv", "AD jl_inv"].iter().enumerate() {
                let (at, tol) = if k < 2 { (k, ad_tol[0]) } else { (k + 2, ad_tol[1]) };
                for i in 0..n {
                    let block = |v: &[f64]| v[size * i..size * (i + 1)].to_vec();
                    assert_close(
                        &format!("{backend} {dtype}: {name}[{i}]"),
                        &block(&out[4 + k]),
                        &block(&a[at]),
                        tol,
                    );
                }
            }
        }
        analytic.push((backend, a));
    }
    analytic
}

/// The names of what [`operation_jacobians`] returns, in order.
pub const OPERATION_JACOBIANS: [&str; 11] = [
    "compose right a",
    "compose right b",
    "compose left a",
    "compose left b",
    "act right x",
    "act p",
    "act left x",
    "inverse right",
    "inverse left",
    "jr_inv at Log(a)",
    "jl_inv at Log(a)",
];

/// The group's operation Jacobians at the `f64` arrays of elements `a`, `b` and points `p`
/// (`OPERATION_JACOBIANS`, from `compose_jacobians`, `act_jacobians`, `inverse_jacobian` and
/// the inverse Jacobians of `Exp` at `Log(a)`), on every backend that runs, checked within
/// `tol` against reverse-mode derivatives of the operations perturbed by `Exp(δ)` on the side
/// each names (and `p` by the first `points` components of δ). Returns the analytic values
/// per backend.
pub fn operation_jacobians<G: Group>(
    a: &Array,
    b: &Array,
    p: &Array,
    tol: f64,
) -> Vec<(&'static str, Vec<Vec<f64>>)> {
    let g = G::FNS;
    let zeros = zeros(DType::F64, a.shape().dims()[0], g.dof);
    let count = OPERATION_JACOBIANS.len();
    let mut analytic = Vec::new();
    for backend in backends(DType::F64) {
        let f = rfx::jit(|a: Tensor, b: Tensor, p: Tensor| {
            let g = G::FNS;
            let (right_a, right_b) = (g.compose_jacobians)(a, b, Side::Right);
            let (left_a, left_b) = (g.compose_jacobians)(a, b, Side::Left);
            let (act_right, act_p) = (g.act_jacobians)(a, p, Side::Right);
            let (act_left, _) = (g.act_jacobians)(a, p, Side::Left);
            let log = (g.log)(a);
            vec![
                right_a,
                right_b,
                left_a,
                left_b,
                act_right,
                act_p,
                act_left,
                (g.inverse_jacobian)(a, Side::Right),
                (g.inverse_jacobian)(a, Side::Left),
                (g.jr_inv)(log),
                (g.jl_inv)(log),
            ]
        })
        .on_backend(backend);
        let Some(want) = run("analytic", backend, &f, (a, b, p)) else {
            continue;
        };
        let ad = rfx::jit(rfx::vmap(rfx::jacobian(perturbed_operations::<G>).wrt(&[3]))).on_backend(backend);
        if let Some(got) = run("ad", backend, &ad, (a, b, p, &zeros)) {
            for (k, name) in OPERATION_JACOBIANS.iter().enumerate() {
                // The derivative of `act(a, p + dp)` has the shape [points, dof]: its first
                // `points` columns are the Jacobian with respect to p.
                let got_k: Vec<f64> = if k == 5 {
                    got[count + k]
                        .chunks(g.dof)
                        .flat_map(|row| row[..g.points].to_vec())
                        .collect()
                } else {
                    got[count + k].clone()
                };
                assert_close(&format!("{backend}: {name}"), &got_k, &want[k], tol);
            }
        }
        analytic.push((backend, want));
    }
    analytic
}

/// The operations of `OPERATION_JACOBIANS`, each perturbed by `e = Exp(δ)` where its
/// Jacobian measures: the result's tangent (right or left) or the moved point.
fn perturbed_operations<G: Group>(a: Tensor, b: Tensor, p: Tensor, d: Tensor) -> Vec<Tensor> {
    let g = G::FNS;
    let (log, compose, inverse) = (g.log, g.compose, g.inverse);
    let e = (g.exp)(d);
    let ab = compose(a, b);
    let ai = inverse(a);
    vec![
        log((g.between)(ab, compose(compose(a, e), b))),
        log((g.between)(ab, compose(a, compose(b, e)))),
        log(compose(compose(compose(e, a), b), inverse(ab))),
        log(compose(compose(a, compose(e, b)), inverse(ab))),
        (g.act)(compose(a, e), p),
        (g.act)(a, p + d.slice_axis(0, 0..g.points)),
        (g.act)(compose(e, a), p),
        log((g.between)(ai, inverse(compose(a, e)))),
        log(compose(inverse(compose(e, a)), inverse(ai))),
        log(compose(a, e)),
        log(compose(e, a)),
    ]
}
