//! Kinematic chains and trees read from URDF: forward kinematics of any link and its geometric
//! Jacobian, as traced rfx functions.
//!
//! A [`Chain`] is the robot's joint tree, checked when it is built (one root, no loops, known
//! links, supported joint types). Its traced functions ([`Chain::fk`], [`Chain::fk_pose`],
//! [`Chain::jacobian`]) take the joint positions `q` `[.., n]` (one entry per movable joint, in
//! [`Chain::joint_names`] order; every leading axis is a batch) and record ordinary rfx ops, so
//! they jit, differentiate, `vmap` and run on every backend. The `*_jit` constructors wrap them
//! as ready-made kernels.

mod kernel;
mod kinematics;
mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rfx::Tensor;

pub use kernel::{ChainKernel, ChainOutput};

/// What a joint does with its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JointKind {
    /// A rotation about the axis by `q` radians (URDF `revolute` and `continuous`).
    Revolute,
    /// A translation along the axis by `q` metres (URDF `prismatic`).
    Prismatic,
    /// No motion (URDF `fixed`); it takes no entry of `q`.
    Fixed,
}

/// One joint of a [`Chain`], with its constant geometry.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainJoint {
    /// The joint's name in the URDF.
    pub name: String,
    /// What it does.
    pub kind: JointKind,
    /// The parent link.
    pub parent: String,
    /// The child link.
    pub child: String,
    /// The joint frame in the parent link's frame: translation `xyz` (m).
    pub origin_xyz: [f64; 3],
    /// The joint frame's orientation in the parent's: roll, pitch, yaw (rad), the fixed-axis
    /// `R = Rz(yaw) Ry(pitch) Rx(roll)` of URDF.
    pub origin_rpy: [f64; 3],
    /// The unit axis of motion in the joint frame (normalised from the URDF's `axis`).
    pub axis: [f64; 3],
    /// The joint's index in `q`, `None` for a fixed joint.
    pub q_index: Option<usize>,
    /// The position limits `(lower, upper)` for revolute and prismatic joints; `None` for
    /// continuous and fixed joints.
    pub limits: Option<(f64, f64)>,
}

/// A robot's kinematic tree read from URDF (see the module docs).
///
/// ```
/// use rfx_control::Chain;
///
/// let urdf = r#"<robot name="arm">
///   <link name="base"/><link name="upper"/><link name="tool"/>
///   <joint name="shoulder" type="continuous">
///     <parent link="base"/><child link="upper"/><axis xyz="0 0 1"/>
///   </joint>
///   <joint name="elbow" type="prismatic">
///     <parent link="upper"/><child link="tool"/><origin xyz="0.5 0 0"/><axis xyz="1 0 0"/>
///     <limit lower="0" upper="0.3" effort="1" velocity="1"/>
///   </joint>
/// </robot>"#;
/// let chain = Chain::from_urdf(urdf)?;
/// assert_eq!(chain.joint_names(), ["shoulder", "elbow"]);
///
/// // The tool's transform at q = (π/2, 0.1): it is at (0, 0.6, 0).
/// let fk = chain.fk_jit("tool")?;
/// let out = fk.call((&rfx::array([2], vec![std::f64::consts::FRAC_PI_2, 0.1])?,))?;
/// let m = out[0].to_f64_vec();
/// assert!((m[3] - 0.0).abs() < 1e-15 && (m[7] - 0.6).abs() < 1e-15);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    name: String,
    root: String,
    links: Vec<String>,
    joints: Vec<ChainJoint>,
    /// For each link other than the root, the joint whose child it is.
    parent_joint: BTreeMap<String, usize>,
    /// The movable joints' indices into `joints`, in `q` order.
    movable: Vec<usize>,
}

/// Why a [`Chain`] could not be built, or a chain function not applied.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The URDF file could not be read.
    #[error("cannot read URDF file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The text is not well-formed URDF (bad XML, a missing required attribute, a number that
    /// does not parse); the message is the parser's (`urdf-rs`, whose error type is opaque).
    #[error("malformed URDF: {message}")]
    Malformed {
        /// The parser's message.
        message: String,
    },
    /// The robot has no links.
    #[error("the URDF robot has no links")]
    NoLinks,
    /// Two links, or two joints, have one name.
    #[error("the URDF names two {what}s `{name}`")]
    DuplicateName {
        /// `"link"` or `"joint"`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// A joint names a parent or child link the robot does not have.
    #[error("joint `{joint}` names link `{link}`, which the URDF does not define")]
    JointLinkMissing {
        /// The joint.
        joint: String,
        /// The missing link.
        link: String,
    },
    /// A link is the child of more than one joint (a closed loop, which a tree cannot hold).
    #[error("link `{link}` is the child of joints `{first}` and `{second}`: closed loops are not supported")]
    MultipleParents {
        /// The link.
        link: String,
        /// One joint whose child it is.
        first: String,
        /// Another.
        second: String,
    },
    /// More than one link is the child of no joint (a forest, not one tree).
    #[error("the URDF has several root links ({}): a chain needs exactly one", roots.join(", "))]
    MultipleRoots {
        /// The links that are no joint's child.
        roots: Vec<String>,
    },
    /// Links that cannot be reached from the root: they form a cycle of joints (and with it,
    /// possibly, no root at all).
    #[error("the joints through link `{link}` form a cycle")]
    Cycle {
        /// A link on the cycle.
        link: String,
    },
    /// A joint type this crate does not model (`floating`, `planar`, `spherical`): each
    /// would take several entries of `q`. Replace it with fixed, revolute and prismatic joints.
    #[error("joint `{joint}` is {kind}: only revolute, continuous, prismatic and fixed joints are supported")]
    UnsupportedJoint {
        /// The joint.
        joint: String,
        /// Its URDF type.
        kind: &'static str,
    },
    /// A revolute or prismatic joint whose axis is zero (or not finite), or an origin that is
    /// not finite.
    #[error("joint `{joint}` has a zero or non-finite axis or origin")]
    BadGeometry {
        /// The joint.
        joint: String,
    },
    /// A link the chain does not have was asked for.
    #[error("the chain has no link `{link}`")]
    UnknownLink {
        /// The link asked for.
        link: String,
    },
    /// `q` does not have one entry per movable joint along its last axis.
    #[error("q must have {expected} joint positions along its last axis, got shape {found}")]
    JointCount {
        /// The chain's number of movable joints.
        expected: usize,
        /// `q`'s shape.
        found: rfx::Shape,
    },
}

impl Chain {
    /// Reads a chain from URDF: `urdf` is the XML text itself when it starts with `<` (after
    /// white space), and otherwise the path of a file to read.
    pub fn from_urdf(urdf: &str) -> Result<Chain, ChainError> {
        if urdf.trim_start().starts_with('<') {
            Chain::from_urdf_str(urdf)
        } else {
            Chain::from_urdf_file(urdf)
        }
    }

    /// Reads a chain from the URDF file at `path`.
    pub fn from_urdf_file(path: impl AsRef<Path>) -> Result<Chain, ChainError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ChainError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Chain::from_urdf_str(&text)
    }

    /// Reads a chain from URDF text.
    pub fn from_urdf_str(text: &str) -> Result<Chain, ChainError> {
        let robot = urdf_rs::read_from_string(text).map_err(|e| ChainError::Malformed {
            message: e.to_string(),
        })?;
        tree::build(robot)
    }

    /// The robot's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The root link (the base frame every transform is expressed in).
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The links, in URDF order.
    pub fn link_names(&self) -> &[String] {
        &self.links
    }

    /// Every joint, fixed ones included, in URDF order.
    pub fn joints(&self) -> &[ChainJoint] {
        &self.joints
    }

    /// The number of movable joints: the length of `q`.
    pub fn dof(&self) -> usize {
        self.movable.len()
    }

    /// The movable joints' names in `q` order (the URDF's order).
    pub fn joint_names(&self) -> Vec<&str> {
        self.movable
            .iter()
            .map(|&j| self.joints[j].name.as_str())
            .collect()
    }

    /// The joints from the root to `link`, root first (indices into [`Chain::joints`]).
    pub fn path_to(&self, link: &str) -> Result<Vec<usize>, ChainError> {
        if !self.links.iter().any(|l| l == link) {
            return Err(ChainError::UnknownLink {
                link: link.to_string(),
            });
        }
        let mut path = Vec::new();
        let mut current = link;
        while let Some(&j) = self.parent_joint.get(current) {
            path.push(j);
            current = &self.joints[j].parent;
        }
        path.reverse();
        Ok(path)
    }

    /// The transform of `link` in the root frame, `[.., 4, 4]` (homogeneous, `[[R, p], [0, 1]]`),
    /// traced from `q` `[.., n]`.
    pub fn fk(&self, q: Tensor, link: &str) -> Result<Tensor, ChainError> {
        let path = self.path_to(link)?;
        let q = self.joint_inputs(q)?;
        Ok(kinematics::fk_matrix(&kinematics::walk(self, &path, &q), &q))
    }

    /// The pose of `link` in the root frame as an SE(3) element of [`rfx::lie`]'s storage,
    /// `[.., 7]` = `[w, x, y, z, px, py, pz]` (the unit quaternion, then the position), traced
    /// from `q` `[.., n]`. The quaternion is the product of the joints' quaternions; its sign
    /// is not normalised (`q` and `-q` are one rotation).
    pub fn fk_pose(&self, q: Tensor, link: &str) -> Result<Tensor, ChainError> {
        let path = self.path_to(link)?;
        let q = self.joint_inputs(q)?;
        Ok(kinematics::fk_pose(&kinematics::walk(self, &path, &q), &q))
    }

    /// The geometric Jacobian of `link`'s frame, `[.., 6, n]`, traced from `q` `[.., n]`: rows
    /// 0–2 the linear velocity of the link's origin, rows 3–5 its angular velocity, both in the
    /// root frame, per unit joint velocity (`[v; ω] = J q̇`). Column `i` is `[zᵢ × (p - pᵢ); zᵢ]`
    /// for a revolute joint and `[zᵢ; 0]` for a prismatic one (`zᵢ`, `pᵢ`: joint `i`'s axis and
    /// origin in the root frame, `p`: the link's origin), and zero for joints not on the
    /// path from the root to the link.
    pub fn jacobian(&self, q: Tensor, link: &str) -> Result<Tensor, ChainError> {
        let path = self.path_to(link)?;
        let q = self.joint_inputs(q)?;
        Ok(kinematics::jacobian(&kinematics::walk(self, &path, &q), &q))
    }

    /// Checks `q`'s last axis and splits it into the joints' positions.
    fn joint_inputs(&self, q: Tensor) -> Result<kinematics::JointInputs, ChainError> {
        let shape = q.shape();
        if shape.dims().last() != Some(&self.dof()) {
            return Err(ChainError::JointCount {
                expected: self.dof(),
                found: shape,
            });
        }
        Ok(kinematics::JointInputs::new(q, self.dof()))
    }
}
