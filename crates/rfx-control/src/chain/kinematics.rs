//! The traced kinematics: frames as arrays of entries, each a traced tensor of the batch
//! shape or a Rust constant ([`S`]), so the constant geometry of the URDF (zero offsets,
//! axes along a coordinate axis, identity orientations) folds away while tracing.

use rfx::Tensor;
use rfx::lie::{cross_parts, quat_mul_parts};

use super::{Chain, ChainJoint, JointKind};
use crate::build::S;

type M3 = [[S; 3]; 3];
type V3 = [S; 3];
type Quat = [S; 4];

/// The joints' positions, split from `q` `[.., n]`, and a tensor of the batch shape.
pub(super) struct JointInputs {
    positions: Vec<Tensor>,
    /// Shaped like the batch: what constants are broadcast to.
    like: Tensor,
    /// The batch shape (`q`'s without its last axis).
    batch: Vec<usize>,
}

impl JointInputs {
    /// Splits `q`, whose last axis has `dof` entries (checked by the caller).
    pub(super) fn new(q: Tensor, dof: usize) -> JointInputs {
        let dims = q.shape().dims().to_vec();
        let last = dims.len().saturating_sub(1);
        let batch = dims[..last].to_vec();
        let positions: Vec<Tensor> = (0..dof).map(|i| q.index_axis(last, i)).collect();
        // With no movable joint `q` is `[.., 0]`; its sum over the empty axis has the batch
        // shape and the dtype of `q`.
        let like = positions.first().copied().unwrap_or_else(|| q.sum(last));
        JointInputs {
            positions,
            like,
            batch,
        }
    }
}

/// A rigid transform: rotation matrix, translation and the rotation's quaternion
/// `[w, x, y, z]`, kept together so one walk gives the matrix, the pose and the Jacobian.
#[derive(Clone, Copy)]
struct Frame {
    rotation: M3,
    translation: V3,
    quat: Quat,
}

impl Frame {
    fn identity() -> Frame {
        let (o, z) = (S::C(1.0), S::C(0.0));
        Frame {
            rotation: [[o, z, z], [z, o, z], [z, z, o]],
            translation: [z; 3],
            quat: [o, z, z, z],
        }
    }

    /// `self ∘ other`: `other`'s frame expressed in `self`'s.
    fn then(&self, other: &Frame) -> Frame {
        let a = &self.rotation;
        let b = &other.rotation;
        let rotation = std::array::from_fn(|i| {
            std::array::from_fn(|j| a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j])
        });
        let moved = mat_vec(a, other.translation);
        Frame {
            rotation,
            translation: std::array::from_fn(|i| moved[i] + self.translation[i]),
            quat: quat_mul_parts(self.quat, other.quat),
        }
    }
}

fn mat_vec(m: &M3, v: V3) -> V3 {
    std::array::from_fn(|i| m[i][0] * v[0] + m[i][1] * v[1] + m[i][2] * v[2])
}

/// The constant frame of a joint's `origin`: `R = Rz(yaw) Ry(pitch) Rx(roll)`.
fn origin_frame(joint: &ChainJoint) -> Frame {
    let [roll, pitch, yaw] = joint.origin_rpy;
    let (sr, cr) = roll.sin_cos();
    let (sp, cp) = pitch.sin_cos();
    let (sy, cy) = yaw.sin_cos();
    let rotation = [
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ];
    let (shr, chr) = (roll / 2.0).sin_cos();
    let (shp, chp) = (pitch / 2.0).sin_cos();
    let (shy, chy) = (yaw / 2.0).sin_cos();
    // qz(yaw) ⊗ qy(pitch) ⊗ qx(roll).
    let quat = [
        chy * chp * chr + shy * shp * shr,
        chy * chp * shr - shy * shp * chr,
        chy * shp * chr + shy * chp * shr,
        shy * chp * chr - chy * shp * shr,
    ];
    Frame {
        rotation: rotation.map(|row| row.map(S::C)),
        translation: joint.origin_xyz.map(S::C),
        quat: quat.map(S::C),
    }
}

/// The motion of a joint at position `q` about or along its (unit) axis `a`, in the joint
/// frame: Rodrigues' `R = cos q (I - a aᵀ) + sin q [a]× + a aᵀ`, or the translation `a q`.
fn motion_frame(joint: &ChainJoint, q: Option<Tensor>) -> Frame {
    let identity = Frame::identity();
    let Some(q) = q else {
        return identity;
    };
    let a = joint.axis;
    match joint.kind {
        JointKind::Fixed => identity,
        JointKind::Prismatic => Frame {
            translation: a.map(|c| S::C(c) * S::T(q)),
            ..identity
        },
        JointKind::Revolute => {
            let (c, s) = (S::T(q.cos()), S::T(q.sin()));
            let skew = [[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]];
            let rotation = std::array::from_fn(|i| {
                std::array::from_fn(|j| {
                    let outer = a[i] * a[j];
                    let delta = if i == j { 1.0 } else { 0.0 };
                    c * S::C(delta - outer) + s * S::C(skew[i][j]) + S::C(outer)
                })
            });
            let half = q * 0.5;
            let (ch, sh) = (S::T(half.cos()), S::T(half.sin()));
            Frame {
                rotation,
                quat: [ch, sh * S::C(a[0]), sh * S::C(a[1]), sh * S::C(a[2])],
                ..identity
            }
        }
    }
}

/// A movable joint on the path, in the root frame: its `q` index, kind, axis and origin.
struct JointInRoot {
    q_index: usize,
    kind: JointKind,
    axis: V3,
    origin: V3,
}

/// The link's frame and the movable joints on its path: what every output is made of, traced
/// once per kernel.
pub(super) struct Walk {
    frame: Frame,
    moving: Vec<JointInRoot>,
}

/// Walks the path (root first) and returns the link's frame and the movable joints met.
pub(super) fn walk(chain: &Chain, path: &[usize], q: &JointInputs) -> Walk {
    let mut frame = Frame::identity();
    let mut moving = Vec::new();
    for &j in path {
        let joint = &chain.joints[j];
        frame = frame.then(&origin_frame(joint));
        let position = joint.q_index.and_then(|i| q.positions.get(i).copied());
        if let Some(q_index) = joint.q_index {
            moving.push(JointInRoot {
                q_index,
                kind: joint.kind,
                axis: mat_vec(&frame.rotation, joint.axis.map(S::C)),
                origin: frame.translation,
            });
        }
        frame = frame.then(&motion_frame(joint, position));
    }
    Walk { frame, moving }
}

/// `entries` (constants broadcast to the batch) stacked along a new last axis, then that axis
/// reshaped to `tail`.
fn stack(entries: &[S], q: &JointInputs, tail: &[usize]) -> Tensor {
    let mut column = q.batch.clone();
    column.push(1);
    let columns: Vec<Tensor> = entries
        .iter()
        .map(|e| e.tensor(q.like).reshape(column.clone()))
        .collect();
    let stacked = rfx::concat(&columns, q.batch.len());
    let mut dims = q.batch.clone();
    dims.extend_from_slice(tail);
    stacked.reshape(dims)
}

pub(super) fn fk_matrix(walk: &Walk, q: &JointInputs) -> Tensor {
    let frame = &walk.frame;
    let (z, o) = (S::C(0.0), S::C(1.0));
    let r = frame.rotation;
    let t = frame.translation;
    let entries = [
        r[0][0], r[0][1], r[0][2], t[0], r[1][0], r[1][1], r[1][2], t[1], r[2][0], r[2][1], r[2][2], t[2], z,
        z, z, o,
    ];
    stack(&entries, q, &[4, 4])
}

pub(super) fn fk_pose(walk: &Walk, q: &JointInputs) -> Tensor {
    let frame = &walk.frame;
    let [w, x, y, z] = frame.quat;
    let [px, py, pz] = frame.translation;
    stack(&[w, x, y, z, px, py, pz], q, &[7])
}

pub(super) fn jacobian(walk: &Walk, q: &JointInputs) -> Tensor {
    let n = q.positions.len();
    let mut dims = q.batch.clone();
    if n == 0 {
        // `[.., 6, 0]`: nothing to stack; the empty `q` has the right number of elements.
        let like = q.like.reshape({
            let mut d = dims.clone();
            d.extend([1, 1]);
            d
        });
        dims.extend([6, 0]);
        return like.slice_axis(q.batch.len() + 1, 0..0).broadcast_to(dims);
    }
    let frame = &walk.frame;
    let mut columns = vec![[S::C(0.0); 6]; n];
    for joint in &walk.moving {
        let column = match joint.kind {
            JointKind::Revolute => {
                let lever: V3 = std::array::from_fn(|i| frame.translation[i] - joint.origin[i]);
                let linear = cross_parts(joint.axis, lever);
                [
                    linear[0],
                    linear[1],
                    linear[2],
                    joint.axis[0],
                    joint.axis[1],
                    joint.axis[2],
                ]
            }
            JointKind::Prismatic => {
                let z = S::C(0.0);
                [joint.axis[0], joint.axis[1], joint.axis[2], z, z, z]
            }
            JointKind::Fixed => continue,
        };
        columns[joint.q_index] = column;
    }
    let entries: Vec<S> = (0..6)
        .flat_map(|row| columns.iter().map(move |c| c[row]))
        .collect();
    stack(&entries, q, &[6, n])
}
