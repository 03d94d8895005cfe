//! A plain-Rust `f64` reference for the chain tests: homogeneous 4×4 products of the joints'
//! published parameters (typed in here, not read from the URDF files), the UR5's classic and
//! the Panda's modified Denavit–Hartenberg tables, and central finite differences. It shares
//! no code with `rfx_control::Chain`.

#![allow(dead_code, unreachable_pub)]

use std::f64::consts::FRAC_PI_2;

pub type M4 = [[f64; 4]; 4];

pub fn identity() -> M4 {
    std::array::from_fn(|i| std::array::from_fn(|j| if i == j { 1.0 } else { 0.0 }))
}

pub fn mul(a: &M4, b: &M4) -> M4 {
    std::array::from_fn(|i| std::array::from_fn(|j| (0..4).map(|k| a[i][k] * b[k][j]).sum()))
}

pub fn trans(x: f64, y: f64, z: f64) -> M4 {
    let mut m = identity();
    m[0][3] = x;
    m[1][3] = y;
    m[2][3] = z;
    m
}

pub fn rot_x(a: f64) -> M4 {
    let (s, c) = a.sin_cos();
    [
        [1.0, 0.0, 0.0, 0.0],
        [0.0, c, -s, 0.0],
        [0.0, s, c, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ]
}

pub fn rot_y(a: f64) -> M4 {
    let (s, c) = a.sin_cos();
    [
        [c, 0.0, s, 0.0],
        [0.0, 1.0, 0.0, 0.0],
        [-s, 0.0, c, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ]
}

pub fn rot_z(a: f64) -> M4 {
    let (s, c) = a.sin_cos();
    [
        [c, -s, 0.0, 0.0],
        [s, c, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ]
}

/// A URDF joint of the reference: origin, rotation axis (a coordinate axis, signed), movable.
#[derive(Clone, Copy)]
pub struct Joint {
    pub xyz: [f64; 3],
    pub rpy: [f64; 3],
    /// `Some((axis index, sign))` for a revolute joint about ±x, ±y or ±z; `None` for fixed.
    pub axis: Option<(usize, f64)>,
}

const fn rev(xyz: [f64; 3], rpy: [f64; 3], axis: usize) -> Joint {
    Joint {
        xyz,
        rpy,
        axis: Some((axis, 1.0)),
    }
}

const fn fixed(xyz: [f64; 3], rpy: [f64; 3]) -> Joint {
    Joint { xyz, rpy, axis: None }
}

/// `Trans(xyz) Rz(yaw) Ry(pitch) Rx(roll) Rot_axis(q)`.
pub fn joint_transform(joint: &Joint, q: f64) -> M4 {
    let [r, p, y] = joint.rpy;
    let origin = mul(
        &mul(&trans(joint.xyz[0], joint.xyz[1], joint.xyz[2]), &rot_z(y)),
        &mul(&rot_y(p), &rot_x(r)),
    );
    match joint.axis {
        None => origin,
        Some((axis, sign)) => {
            let motion = [rot_x, rot_y, rot_z][axis](sign * q);
            mul(&origin, &motion)
        }
    }
}

/// The product of `joints` (movable ones take the next entry of `q`).
pub fn chain_product(joints: &[Joint], q: &[f64]) -> M4 {
    let mut m = identity();
    let mut next = 0;
    for joint in joints {
        let angle = if joint.axis.is_some() {
            next += 1;
            q[next - 1]
        } else {
            0.0
        };
        m = mul(&m, &joint_transform(joint, angle));
    }
    m
}

/// UR5 from `base_link` to `wrist_3_link` (ur_description's published origins).
pub const UR5_ARM: [Joint; 6] = [
    rev([0.0, 0.0, 0.089159], [0.0, 0.0, 0.0], 2),
    rev([0.0, 0.13585, 0.0], [0.0, FRAC_PI_2, 0.0], 1),
    rev([0.0, -0.1197, 0.425], [0.0, 0.0, 0.0], 1),
    rev([0.0, 0.0, 0.39225], [0.0, FRAC_PI_2, 0.0], 1),
    rev([0.0, 0.093, 0.0], [0.0, 0.0, 0.0], 2),
    rev([0.0, 0.0, 0.09465], [0.0, 0.0, 0.0], 1),
];

/// `wrist_3_link` to `tool0`.
pub const UR5_TOOL0: Joint = fixed([0.0, 0.0823, 0.0], [-FRAC_PI_2, 0.0, 0.0]);
/// `wrist_3_link` to `ee_link`.
pub const UR5_EE: Joint = fixed([0.0, 0.0823, 0.0], [0.0, 0.0, FRAC_PI_2]);

/// The UR5's flange in its DH base frame (the `base` link), by the classic DH table
/// `Rz(q) Tz(d) Tx(a) Rx(alpha)`.
pub fn ur5_dh(q: &[f64]) -> M4 {
    let a = [0.0, -0.425, -0.39225, 0.0, 0.0, 0.0];
    let d = [0.089159, 0.0, 0.0, 0.10915, 0.09465, 0.0823];
    let alpha = [FRAC_PI_2, 0.0, 0.0, FRAC_PI_2, -FRAC_PI_2, 0.0];
    let mut m = identity();
    for i in 0..6 {
        let t = mul(
            &mul(&rot_z(q[i]), &trans(0.0, 0.0, d[i])),
            &mul(&trans(a[i], 0.0, 0.0), &rot_x(alpha[i])),
        );
        m = mul(&m, &t);
    }
    m
}

/// The Panda from `panda_link0` to `panda_link7` (franka_description's published origins).
pub const PANDA_ARM: [Joint; 7] = [
    rev([0.0, 0.0, 0.333], [0.0, 0.0, 0.0], 2),
    rev([0.0, 0.0, 0.0], [-FRAC_PI_2, 0.0, 0.0], 2),
    rev([0.0, -0.316, 0.0], [FRAC_PI_2, 0.0, 0.0], 2),
    rev([0.0825, 0.0, 0.0], [FRAC_PI_2, 0.0, 0.0], 2),
    rev([-0.0825, 0.384, 0.0], [-FRAC_PI_2, 0.0, 0.0], 2),
    rev([0.0, 0.0, 0.0], [FRAC_PI_2, 0.0, 0.0], 2),
    rev([0.088, 0.0, 0.0], [FRAC_PI_2, 0.0, 0.0], 2),
];

/// `panda_link7` to `panda_link8`, to `panda_hand`, to `panda_hand_tcp`.
pub const PANDA_TAIL: [Joint; 3] = [
    fixed([0.0, 0.0, 0.107], [0.0, 0.0, 0.0]),
    fixed([0.0, 0.0, 0.0], [0.0, 0.0, -std::f64::consts::FRAC_PI_4]),
    fixed([0.0, 0.0, 0.1034], [0.0, 0.0, 0.0]),
];

/// The Panda's `panda_link8` by Franka's modified DH table (Craig:
/// `Rx(alpha) Tx(a) Rz(q) Tz(d)`), flange `d = 0.107`.
pub fn panda_mdh(q: &[f64]) -> M4 {
    let a = [0.0, 0.0, 0.0, 0.0825, -0.0825, 0.0, 0.088, 0.0];
    let d = [0.333, 0.0, 0.316, 0.0, 0.384, 0.0, 0.0, 0.107];
    let alpha = [
        0.0, -FRAC_PI_2, FRAC_PI_2, FRAC_PI_2, -FRAC_PI_2, FRAC_PI_2, FRAC_PI_2, 0.0,
    ];
    let mut m = identity();
    for i in 0..8 {
        let angle = q.get(i).copied().unwrap_or(0.0);
        let t = mul(
            &mul(&rot_x(alpha[i]), &trans(a[i], 0.0, 0.0)),
            &mul(&rot_z(angle), &trans(0.0, 0.0, d[i])),
        );
        m = mul(&m, &t);
    }
    m
}

/// The geometric Jacobian `[v; ω]` (6 × n) of `fk` at `q` by central differences: the
/// position's derivative, and `ω` from the skew part of `(R(q + h) - R(q - h)) / 2h · R(q)ᵀ`.
pub fn jacobian_fd(fk: impl Fn(&[f64]) -> M4, q: &[f64]) -> Vec<[f64; 6]> {
    let h = 1e-6;
    let r0 = fk(q);
    (0..q.len())
        .map(|i| {
            let mut qp = q.to_vec();
            let mut qm = q.to_vec();
            qp[i] += h;
            qm[i] -= h;
            let (mp, mm) = (fk(&qp), fk(&qm));
            let d: M4 = std::array::from_fn(|r| std::array::from_fn(|c| (mp[r][c] - mm[r][c]) / (2.0 * h)));
            // W = dR Rᵀ is skew: ω = (W21, W02, W10), averaged with the negated transposes.
            let w = |r: usize, c: usize| (0..3).map(|k| d[r][k] * r0[c][k]).sum::<f64>();
            [
                d[0][3],
                d[1][3],
                d[2][3],
                (w(2, 1) - w(1, 2)) / 2.0,
                (w(0, 2) - w(2, 0)) / 2.0,
                (w(1, 0) - w(0, 1)) / 2.0,
            ]
        })
        .collect()
}

/// The 16 entries of `m`, row-major.
pub fn flat(m: &M4) -> Vec<f64> {
    m.iter().flatten().copied().collect()
}

/// The backends of this build that run `f64` (every registered one but metal).
pub fn backends() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = rfx_runtime::registry()
        .names()
        .into_iter()
        .filter(|n| *n != "metal")
        .collect();
    names.sort_unstable();
    names
}

/// `f`'s outputs as `f64`, or `None` (with a line on stderr) when `backend` cannot run here.
pub fn run<'a, K: rfx::KernelFn>(
    what: &str,
    backend: &str,
    f: &rfx::Jit<K>,
    args: impl rfx::IntoArgs<'a>,
) -> Option<Vec<Vec<f64>>> {
    match f.call(args) {
        Ok(out) => Some(out.iter().map(rfx::Array::to_f64_vec).collect()),
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

pub fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol, "{what}[{i}]: got {g}, want {w} (tol {tol})");
    }
}
