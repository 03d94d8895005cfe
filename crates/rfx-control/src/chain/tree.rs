//! Checking a parsed URDF robot and building the [`Chain`] from it.

use std::collections::{BTreeMap, BTreeSet};

use urdf_rs::JointType;

use super::{Chain, ChainError, ChainJoint, JointKind};

/// The chain of `robot`, or the first problem found: names, joint types and geometry first,
/// then the tree's shape (one parent per link, one root, every link reachable).
pub(super) fn build(robot: urdf_rs::Robot) -> Result<Chain, ChainError> {
    if robot.links.is_empty() {
        return Err(ChainError::NoLinks);
    }
    let mut links = Vec::with_capacity(robot.links.len());
    let mut link_set = BTreeSet::new();
    for link in &robot.links {
        if !link_set.insert(link.name.clone()) {
            return Err(ChainError::DuplicateName {
                what: "link",
                name: link.name.clone(),
            });
        }
        links.push(link.name.clone());
    }
    let mut joint_set = BTreeSet::new();
    let mut joints = Vec::with_capacity(robot.joints.len());
    let mut movable = Vec::new();
    for joint in &robot.joints {
        if !joint_set.insert(joint.name.clone()) {
            return Err(ChainError::DuplicateName {
                what: "joint",
                name: joint.name.clone(),
            });
        }
        for link in [&joint.parent.link, &joint.child.link] {
            if !link_set.contains(link) {
                return Err(ChainError::JointLinkMissing {
                    joint: joint.name.clone(),
                    link: link.clone(),
                });
            }
        }
        let kind = joint_kind(joint)?;
        let q_index = (kind != JointKind::Fixed).then(|| {
            movable.push(joints.len());
            movable.len() - 1
        });
        joints.push(chain_joint(joint, kind, q_index)?);
    }
    let parent_joint = parents(&joints)?;
    let root = root(&links, &parent_joint)?;
    check_reachable(&links, &joints, &parent_joint, &root)?;
    Ok(Chain {
        name: robot.name,
        root,
        links,
        joints,
        parent_joint,
        movable,
    })
}

fn joint_kind(joint: &urdf_rs::Joint) -> Result<JointKind, ChainError> {
    let unsupported = |kind| ChainError::UnsupportedJoint {
        joint: joint.name.clone(),
        kind,
    };
    match joint.joint_type {
        JointType::Revolute | JointType::Continuous => Ok(JointKind::Revolute),
        JointType::Prismatic => Ok(JointKind::Prismatic),
        JointType::Fixed => Ok(JointKind::Fixed),
        JointType::Floating => Err(unsupported("floating")),
        JointType::Planar => Err(unsupported("planar")),
        JointType::Spherical => Err(unsupported("spherical")),
    }
}

fn chain_joint(
    joint: &urdf_rs::Joint,
    kind: JointKind,
    q_index: Option<usize>,
) -> Result<ChainJoint, ChainError> {
    let bad = || ChainError::BadGeometry {
        joint: joint.name.clone(),
    };
    let origin_xyz = joint.origin.xyz.0;
    let origin_rpy = joint.origin.rpy.0;
    if origin_xyz.iter().chain(&origin_rpy).any(|v| !v.is_finite()) {
        return Err(bad());
    }
    let raw = joint.axis.xyz.0;
    let norm = raw.iter().map(|a| a * a).sum::<f64>().sqrt();
    let axis = if kind == JointKind::Fixed {
        // A fixed joint's axis is never used; URDF allows any value.
        [1.0, 0.0, 0.0]
    } else if norm.is_finite() && norm > 0.0 {
        raw.map(|a| a / norm)
    } else {
        return Err(bad());
    };
    let limits = match joint.joint_type {
        JointType::Revolute | JointType::Prismatic => Some((joint.limit.lower, joint.limit.upper)),
        _ => None,
    };
    Ok(ChainJoint {
        name: joint.name.clone(),
        kind,
        parent: joint.parent.link.clone(),
        child: joint.child.link.clone(),
        origin_xyz,
        origin_rpy,
        axis,
        q_index,
        limits,
    })
}

/// Each link's parent joint; a link with two is a closed loop.
fn parents(joints: &[ChainJoint]) -> Result<BTreeMap<String, usize>, ChainError> {
    let mut parent_joint = BTreeMap::new();
    for (j, joint) in joints.iter().enumerate() {
        if let Some(first) = parent_joint.insert(joint.child.clone(), j) {
            return Err(ChainError::MultipleParents {
                link: joint.child.clone(),
                first: joints[first].name.clone(),
                second: joint.name.clone(),
            });
        }
    }
    Ok(parent_joint)
}

/// The one link that is no joint's child.
fn root(links: &[String], parent_joint: &BTreeMap<String, usize>) -> Result<String, ChainError> {
    let roots: Vec<String> = links
        .iter()
        .filter(|l| !parent_joint.contains_key(*l))
        .cloned()
        .collect();
    match roots.len() {
        1 => Ok(roots[0].clone()),
        // Every link has a parent: the joints form a cycle.
        0 => Err(ChainError::Cycle {
            link: links[0].clone(),
        }),
        _ => Err(ChainError::MultipleRoots { roots }),
    }
}

/// With one parent per link and one root, a link whose walk up never reaches the root lies
/// on a cycle.
fn check_reachable(
    links: &[String],
    joints: &[ChainJoint],
    parent_joint: &BTreeMap<String, usize>,
    root: &str,
) -> Result<(), ChainError> {
    let mut reaches_root: BTreeSet<&str> = BTreeSet::from([root]);
    for link in links {
        let mut walked: Vec<&str> = Vec::new();
        let mut current = link.as_str();
        while !reaches_root.contains(current) {
            if walked.contains(&current) {
                return Err(ChainError::Cycle {
                    link: current.to_string(),
                });
            }
            walked.push(current);
            // Every link but the root has a parent joint (checked by `root`).
            let Some(&j) = parent_joint.get(current) else {
                return Err(ChainError::Cycle {
                    link: current.to_string(),
                });
            };
            current = &joints[j].parent;
        }
        reaches_root.extend(walked);
    }
    Ok(())
}
