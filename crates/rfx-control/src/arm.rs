//! Forward kinematics of serial arms and their Jacobians.

use rfx::{Jit, Tensor};

use crate::build::{ControlKernel, S, func};

/// Forward kinematics of a planar arm with two revolute joints and link lengths `l1`, `l2`
/// (constants of the kernel), elementwise over N configurations:
/// `x = l1·cos q1 + l2·cos(q1 + q2)`, `y = l1·sin q1 + l2·sin(q1 + q2)`.
///
/// Inputs `q1`, `q2` (rad); outputs `x`, `y`.
pub fn fk_planar2(l1: f64, l2: f64) -> Jit<ControlKernel> {
    ControlKernel::new("fk_planar2", &PLANAR_INPUTS)
        .part(planar2_func(l1, l2, None), &["x", "y"])
        .jit()
}

/// [`fk_planar2`] and its Jacobian from rfx's reverse-mode autodiff, as one kernel.
///
/// Inputs `q1`, `q2`; outputs `x`, `y`, `jac_x_q1`, `jac_x_q2`, `jac_y_q1`, `jac_y_q2`
/// (`jac_x_q1 = ∂x/∂q1` per configuration).
pub fn fk_planar2_jacobian(l1: f64, l2: f64) -> Jit<ControlKernel> {
    let mut kernel = ControlKernel::new("fk_planar2_jacobian", &PLANAR_INPUTS)
        .part(planar2_func(l1, l2, None), &["x", "y"]);
    for (component, name) in ["x", "y"].into_iter().enumerate() {
        let grad = rfx::grad(planar2_func(l1, l2, Some(component))).wrt(&[0, 1]);
        kernel = kernel.part(grad, &[&format!("jac_{name}_q1"), &format!("jac_{name}_q2")]);
    }
    kernel.jit()
}

const PLANAR_INPUTS: [&str; 2] = ["q1", "q2"];

/// The planar FK, or with `sum_of = Some(c)` the sum over the batch of component `c` (the
/// configurations are independent, so its gradient is `∂c/∂q` per configuration).
fn planar2_func(l1: f64, l2: f64, sum_of: Option<usize>) -> impl rfx::KernelFn + 'static {
    func("fk_planar2", PLANAR_INPUTS, move |[q1, q2]| {
        let q12 = q1 + q2;
        let position = [q1.cos() * l1 + q12.cos() * l2, q1.sin() * l1 + q12.sin() * l2];
        select_output(&position, sum_of)
    })
}

fn select_output(position: &[Tensor], sum_of: Option<usize>) -> Vec<Tensor> {
    match sum_of {
        None => position.to_vec(),
        Some(c) => vec![position[c].sum_all()],
    }
}

/// One joint's Denavit–Hartenberg parameters (the classic convention): the joint's transform
/// is `Rot_z(q + theta_offset) · Trans_z(d) · Trans_x(a) · Rot_x(alpha)`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DhParam {
    /// Link length along the new x axis (m).
    pub a: f64,
    /// Link twist about the new x axis (rad).
    pub alpha: f64,
    /// Link offset along the previous z axis (m).
    pub d: f64,
    /// Added to the joint angle (rad).
    pub theta_offset: f64,
}

impl DhParam {
    /// A joint with parameters `a`, `alpha`, `d` and no angle offset.
    pub fn new(a: f64, alpha: f64, d: f64) -> DhParam {
        DhParam {
            a,
            alpha,
            d,
            theta_offset: 0.0,
        }
    }
}

/// The DH parameters of the Universal Robots UR5 (metres), a common 6-DOF test arm.
pub const UR5: [DhParam; 6] = [
    DhParam {
        a: 0.0,
        alpha: std::f64::consts::FRAC_PI_2,
        d: 0.089159,
        theta_offset: 0.0,
    },
    DhParam {
        a: -0.425,
        alpha: 0.0,
        d: 0.0,
        theta_offset: 0.0,
    },
    DhParam {
        a: -0.39225,
        alpha: 0.0,
        d: 0.0,
        theta_offset: 0.0,
    },
    DhParam {
        a: 0.0,
        alpha: std::f64::consts::FRAC_PI_2,
        d: 0.10915,
        theta_offset: 0.0,
    },
    DhParam {
        a: 0.0,
        alpha: -std::f64::consts::FRAC_PI_2,
        d: 0.09465,
        theta_offset: 0.0,
    },
    DhParam {
        a: 0.0,
        alpha: 0.0,
        d: 0.0823,
        theta_offset: 0.0,
    },
];

const DH6_INPUTS: [&str; 6] = ["q1", "q2", "q3", "q4", "q5", "q6"];

/// Forward kinematics (end-effector position) of a 6-joint revolute arm given its DH
/// parameters (constants of the kernel), elementwise over N configurations: the position part
/// of `T1(q1)·…·T6(q6)` applied to the origin, in the base frame.
///
/// Inputs `q1` … `q6` (rad); outputs `x`, `y`, `z`. The constants are folded while tracing
/// (`cos(alpha) = 1`, `a = 0`, ... add no work), and the position is accumulated from the tip
/// (`p = R_i·p + p_i`), so the kernel does 3×3 matrix–vector work per joint, not 4×4 products.
pub fn fk_dh6(params: [DhParam; 6]) -> Jit<ControlKernel> {
    ControlKernel::new("fk_dh6", &DH6_INPUTS)
        .part(dh6_func(params, None), &["x", "y", "z"])
        .jit()
}

/// [`fk_dh6`] and the Jacobian of the position with respect to the joint angles, from rfx's
/// reverse-mode autodiff (the gradient of each component's batch sum, which is the per-
/// configuration derivative because configurations are independent), compiled as one kernel.
///
/// Inputs `q1` … `q6`; outputs `x`, `y`, `z`, then `jac_x_q1` … `jac_x_q6`, `jac_y_q1` …
/// `jac_y_q6`, `jac_z_q1` … `jac_z_q6` (21 arrays; `jac_y_q3 = ∂y/∂q3`).
pub fn fk_dh6_jacobian(params: [DhParam; 6]) -> Jit<ControlKernel> {
    let mut kernel =
        ControlKernel::new("fk_dh6_jacobian", &DH6_INPUTS).part(dh6_func(params, None), &["x", "y", "z"]);
    for (component, name) in ["x", "y", "z"].into_iter().enumerate() {
        let grad = rfx::grad(dh6_func(params, Some(component))).wrt(&[0, 1, 2, 3, 4, 5]);
        let names: Vec<String> = DH6_INPUTS.iter().map(|q| format!("jac_{name}_{q}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        kernel = kernel.part(grad, &names);
    }
    kernel.jit()
}

/// The names of [`fk_dh6_jacobian`]'s outputs, in order.
pub fn fk_dh6_jacobian_outputs() -> Vec<String> {
    let mut names: Vec<String> = ["x", "y", "z"].iter().map(|s| (*s).to_string()).collect();
    for c in ["x", "y", "z"] {
        names.extend(DH6_INPUTS.iter().map(|q| format!("jac_{c}_{q}")));
    }
    names
}

fn dh6_func(params: [DhParam; 6], sum_of: Option<usize>) -> impl rfx::KernelFn + 'static {
    func("fk_dh6", DH6_INPUTS, move |q| {
        let position = dh_position(&params, &q);
        let position: Vec<Tensor> = position.iter().map(|p| p.tensor(q[0])).collect();
        select_output(&position, sum_of)
    })
}

/// The base-frame position of the tip: `p = R1·(R2·(…·p6 + …) + p2) + p1`, where joint `i`'s
/// rotation is `R_i = [[c, -s·cα, s·sα], [s, c·cα, -c·sα], [0, sα, cα]]` and its translation
/// `p_i = (a·c, a·s, d)`, `c, s = cos, sin(q_i + offset)`.
fn dh_position(params: &[DhParam; 6], q: &[Tensor; 6]) -> [S; 3] {
    let mut position = [S::C(0.0); 3];
    for (param, &angle) in params.iter().zip(q).rev() {
        let theta = if param.theta_offset == 0.0 {
            angle
        } else {
            angle + param.theta_offset
        };
        let (c, s) = (S::T(theta.cos()), S::T(theta.sin()));
        let (ca, sa) = (S::C(param.alpha.cos()), S::C(param.alpha.sin()));
        let rotation = [
            [c, -(s * ca), s * sa],
            [s, c * ca, -(c * sa)],
            [S::C(0.0), sa, ca],
        ];
        let translation = [S::C(param.a) * c, S::C(param.a) * s, S::C(param.d)];
        position = std::array::from_fn(|row| {
            rotation[row][0] * position[0]
                + rotation[row][1] * position[1]
                + rotation[row][2] * position[2]
                + translation[row]
        });
    }
    position
}
