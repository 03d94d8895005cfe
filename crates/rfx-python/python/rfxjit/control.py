"""`rfxjit.control`: kinematic chains and trees read from URDF, with forward kinematics and
geometric Jacobians, and the stateful steps (`pid_step`, `biquad_step`, `alpha_beta_step`, from
`_controllers.py`; docs/control.md), written with the NumPy functions rfx traces, so they run inside
`rfxjit.jit`, differentiate with `rfxjit.grad`/`rfxjit.jacobian`, map with `rfxjit.vmap`, and
also run eagerly on NumPy arrays.

```python
import numpy as np
import rfxjit as rj
from rfxjit.control import Chain

arm = Chain.from_urdf("ur5.urdf")                # a path, or the URDF text itself
fk = rj.jit(lambda q: arm.fk(q, "tool0"))        # [.., 6] -> [.., 4, 4]
jac = rj.jit(lambda q: arm.jacobian(q, "tool0")) # [.., 6] -> [.., 6, 6]
```

The conventions are those of Rust's `rfx_control::Chain` (see `docs/kinematics.md`): `q` has
one entry per movable joint (revolute, continuous, prismatic) in URDF order along its last
axis, and every axis before it is a batch. Transforms are in the root link's frame; the
Jacobian's rows are `[v; ω]` (linear, then angular velocity, both in the root frame). The
URDF is read with `xml.etree` and checked by the same rules as the Rust reader (one root, no
loops, known links, supported joint types), with the same error kinds in `ChainError`.
"""

import math
import os
import xml.etree.ElementTree as ET

import numpy as np

from . import numpy as _rnp
from ._controllers import (
    ALPHA_BETA_PARAMS,
    ALPHA_BETA_STATE,
    BIQUAD_COEFFICIENTS,
    BIQUAD_STATE,
    PID_PARAMS,
    PID_STATE,
    alpha_beta_step,
    biquad_step,
    butterworth_low_pass,
    pid_initial_state,
    pid_params,
    pid_step,
)
from ._errors import RfxError

__all__ = [
    "ALPHA_BETA_PARAMS", "ALPHA_BETA_STATE", "BIQUAD_COEFFICIENTS", "BIQUAD_STATE", "Chain", "ChainError",
    "ChainJoint", "PID_PARAMS", "PID_STATE", "alpha_beta_step", "biquad_step", "butterworth_low_pass", "pid_initial_state", "pid_params", "pid_step",
]


class ChainError(RfxError, ValueError):
    """A URDF chain could not be built, or a chain function not applied. `kind` names the
    problem as Rust's `rfx_control::ChainError` variant does (`"Malformed"`, `"Cycle"`,
    `"UnsupportedJoint"`, `"UnknownLink"`, `"JointCount"`, ...)."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


class ChainJoint:
    """One joint: `name`, `kind` (`"revolute"`, `"prismatic"` or `"fixed"`; URDF's
    `continuous` is revolute), `parent`, `child`, `origin_xyz`, `origin_rpy`, the unit `axis`,
    `q_index` (`None` when fixed) and `limits` (`(lower, upper)` or `None`)."""

    def __init__(self, name, kind, parent, child, origin_xyz, origin_rpy, axis, q_index, limits):
        self.name = name
        self.kind = kind
        self.parent = parent
        self.child = child
        self.origin_xyz = origin_xyz
        self.origin_rpy = origin_rpy
        self.axis = axis
        self.q_index = q_index
        self.limits = limits

    def __repr__(self):
        return f"ChainJoint({self.name!r}, {self.kind!r}, {self.parent!r} -> {self.child!r})"


# -- reading URDF -----------------------------------------------------------------------------

_KINDS = {"revolute": "revolute", "continuous": "revolute", "prismatic": "prismatic", "fixed": "fixed"}
_UNSUPPORTED = ("floating", "planar", "spherical")


def _vector(element, attribute, default, joint):
    if element is None or element.get(attribute) is None:
        return default
    try:
        values = [float(v) for v in element.get(attribute).split()]
    except ValueError:
        text = element.get(attribute)
        raise ChainError("Malformed", f"malformed URDF: joint `{joint}`: {attribute}=\"{text}\"") from None
    if len(values) != 3:
        raise ChainError("Malformed", f"malformed URDF: joint `{joint}`: {attribute} needs 3 numbers")
    return values


def _link_of(joint_element, tag, name):
    element = joint_element.find(tag)
    if element is None or element.get("link") is None:
        raise ChainError("Malformed", f"malformed URDF: joint `{name}` has no {tag} link")
    return element.get("link")


def _read_joint(element, q_index):
    name = element.get("name")
    urdf_kind = element.get("type")
    if name is None or urdf_kind is None:
        raise ChainError("Malformed", "malformed URDF: a joint without a name or type")
    if urdf_kind in _UNSUPPORTED:
        raise ChainError(
            "UnsupportedJoint",
            f"joint `{name}` is {urdf_kind}: only revolute, continuous, prismatic and fixed joints are supported",
        )
    if urdf_kind not in _KINDS:
        raise ChainError("Malformed", f"malformed URDF: joint `{name}` has unknown type `{urdf_kind}`")
    kind = _KINDS[urdf_kind]
    origin = element.find("origin")
    xyz = _vector(origin, "xyz", [0.0, 0.0, 0.0], name)
    rpy = _vector(origin, "rpy", [0.0, 0.0, 0.0], name)
    raw = _vector(element.find("axis"), "xyz", [1.0, 0.0, 0.0], name)
    bad = ChainError("BadGeometry", f"joint `{name}` has a zero or non-finite axis or origin")
    if not all(math.isfinite(v) for v in xyz + rpy):
        raise bad
    if kind == "fixed":
        axis = [1.0, 0.0, 0.0]
    else:
        norm = math.sqrt(sum(a * a for a in raw))
        if not (math.isfinite(norm) and norm > 0.0):
            raise bad
        axis = [a / norm for a in raw]
    limits = None
    if urdf_kind in ("revolute", "prismatic"):
        limit = element.find("limit")
        lower = float(limit.get("lower", "0")) if limit is not None else 0.0
        upper = float(limit.get("upper", "0")) if limit is not None else 0.0
        limits = (lower, upper)
    parent = _link_of(element, "parent", name)
    child = _link_of(element, "child", name)
    return ChainJoint(name, kind, parent, child, xyz, rpy, axis, q_index if kind != "fixed" else None, limits)


def _check_tree(links, joints):
    """The root link and each link's parent joint, or the first structural problem."""
    parent_joint = {}
    for j, joint in enumerate(joints):
        if joint.child in parent_joint:
            first = joints[parent_joint[joint.child]].name
            message = f"link `{joint.child}` is the child of joints `{first}` and `{joint.name}`"
            raise ChainError("MultipleParents", message + ": closed loops are not supported")
        parent_joint[joint.child] = j
    roots = [link for link in links if link not in parent_joint]
    if not roots:
        raise ChainError("Cycle", f"the joints through link `{links[0]}` form a cycle")
    if len(roots) > 1:
        listed = ", ".join(roots)
        raise ChainError("MultipleRoots", f"the URDF has several root links ({listed}): a chain needs exactly one")
    reaches_root = {roots[0]}
    for link in links:
        walked = []
        current = link
        while current not in reaches_root:
            if current in walked:
                raise ChainError("Cycle", f"the joints through link `{current}` form a cycle")
            walked.append(current)
            current = joints[parent_joint[current]].parent
        reaches_root.update(walked)
    return roots[0], parent_joint


# -- traced math on entries that are Python floats (folded) or arrays -------------------------


def _const(x):
    return isinstance(x, float)


def _add(a, b):
    if _const(a) and _const(b):
        return a + b
    if _const(a) and a == 0.0:
        return b
    if _const(b) and b == 0.0:
        return a
    return a + b


def _mul(a, b):
    if _const(a) and _const(b):
        return a * b
    if (_const(a) and a == 0.0) or (_const(b) and b == 0.0):
        return 0.0
    if _const(a) and a == 1.0:
        return b
    if _const(b) and b == 1.0:
        return a
    return a * b


def _sum(*terms):
    acc = 0.0
    for t in terms:
        acc = _add(acc, t)
    return acc


def _neg(a):
    return _mul(-1.0, a) if not _const(a) else -a


def _sub(a, b):
    return _add(a, _neg(b))


def _mat_vec(m, v):
    return [_sum(*(_mul(m[i][k], v[k]) for k in range(3))) for i in range(3)]


def _compose(a, b):
    """`a ∘ b` of frames `(R, t)`."""
    ra, ta = a
    rb, tb = b
    rotation = [[_sum(*(_mul(ra[i][k], rb[k][j]) for k in range(3))) for j in range(3)] for i in range(3)]
    moved = _mat_vec(ra, tb)
    return rotation, [_add(moved[i], ta[i]) for i in range(3)]


def _qmul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return [
        _sum(_mul(aw, bw), _neg(_mul(ax, bx)), _neg(_mul(ay, by)), _neg(_mul(az, bz))),
        _sum(_mul(aw, bx), _mul(ax, bw), _mul(ay, bz), _neg(_mul(az, by))),
        _sum(_mul(aw, by), _neg(_mul(ax, bz)), _mul(ay, bw), _mul(az, bx)),
        _sum(_mul(aw, bz), _mul(ax, by), _neg(_mul(ay, bx)), _mul(az, bw)),
    ]


_IDENTITY = ([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [0.0, 0.0, 0.0])


def _origin(joint):
    """The joint origin's constant frame, `R = Rz(yaw) Ry(pitch) Rx(roll)`, and quaternion."""
    roll, pitch, yaw = joint.origin_rpy
    sr, cr = math.sin(roll), math.cos(roll)
    sp, cp = math.sin(pitch), math.cos(pitch)
    sy, cy = math.sin(yaw), math.cos(yaw)
    rotation = [
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ]
    shr, chr_ = math.sin(roll / 2), math.cos(roll / 2)
    shp, chp = math.sin(pitch / 2), math.cos(pitch / 2)
    shy, chy = math.sin(yaw / 2), math.cos(yaw / 2)
    quat = [
        chy * chp * chr_ + shy * shp * shr,
        chy * chp * shr - shy * shp * chr_,
        chy * shp * chr_ + shy * chp * shr,
        shy * chp * chr_ - chy * shp * shr,
    ]
    return (rotation, list(joint.origin_xyz)), quat


def _motion(joint, q):
    """The joint's motion at `q`: Rodrigues' `cos q (I - a aᵀ) + sin q [a]× + a aᵀ` and the
    half-angle quaternion, or the translation `a q`."""
    a = joint.axis
    if joint.kind == "prismatic":
        return (_IDENTITY[0], [_mul(c, q) for c in a]), [1.0, 0.0, 0.0, 0.0]
    c, s = np.cos(q), np.sin(q)
    skew = [[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]]
    rotation = [
        [_sum(_mul(c, float(i == j) - a[i] * a[j]), _mul(s, skew[i][j]), a[i] * a[j]) for j in range(3)]
        for i in range(3)
    ]
    half = q * 0.5
    ch, sh = np.cos(half), np.sin(half)
    return (rotation, [0.0, 0.0, 0.0]), [ch, _mul(sh, a[0]), _mul(sh, a[1]), _mul(sh, a[2])]


class Chain:
    """A robot's kinematic tree read from URDF; see the module docs."""

    def __init__(self, name, links, joints):
        self.name = name
        self.links = list(links)
        self.joints = list(joints)
        self.root, self._parent_joint = _check_tree(self.links, self.joints)
        self._movable = [j for j, joint in enumerate(self.joints) if joint.q_index is not None]

    @classmethod
    def from_urdf(cls, urdf):
        """A chain from URDF: `urdf` is the XML text when it starts with `<`, else a path."""
        if isinstance(urdf, os.PathLike) or not str(urdf).lstrip().startswith("<"):
            try:
                with open(urdf, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise ChainError("Io", f"cannot read URDF file {urdf}: {e}") from e
        else:
            text = str(urdf)
        try:
            root = ET.fromstring(text)
        except ET.ParseError as e:
            raise ChainError("Malformed", f"malformed URDF: {e}") from None
        if root.tag != "robot":
            raise ChainError("Malformed", f"malformed URDF: the root element is <{root.tag}>, not <robot>")
        links = []
        for link in root.findall("link"):
            name = link.get("name")
            if name is None:
                raise ChainError("Malformed", "malformed URDF: a link without a name")
            if name in links:
                raise ChainError("DuplicateName", f"the URDF names two links `{name}`")
            links.append(name)
        if not links:
            raise ChainError("NoLinks", "the URDF robot has no links")
        joints = []
        n_movable = 0
        for element in root.findall("joint"):
            joint = _read_joint(element, n_movable)
            if any(j.name == joint.name for j in joints):
                raise ChainError("DuplicateName", f"the URDF names two joints `{joint.name}`")
            for link in (joint.parent, joint.child):
                if link not in links:
                    raise ChainError(
                        "JointLinkMissing", f"joint `{joint.name}` names link `{link}`, which the URDF does not define"
                    )
            n_movable += joint.q_index is not None
            joints.append(joint)
        return cls(root.get("name", ""), links, joints)

    @property
    def dof(self):
        """The number of movable joints: the length of `q`."""
        return len(self._movable)

    @property
    def joint_names(self):
        """The movable joints' names, in `q` order."""
        return [self.joints[j].name for j in self._movable]

    def path_to(self, link):
        """The joints from the root to `link`, root first (indices into `joints`)."""
        if link not in self.links:
            raise ChainError("UnknownLink", f"the chain has no link `{link}`")
        path = []
        while link in self._parent_joint:
            j = self._parent_joint[link]
            path.append(j)
            link = self.joints[j].parent
        return path[::-1]

    def _inputs(self, q):
        q = _rnp.asarray(q)
        if q.dtype not in (np.float32, np.float64):
            q = q.astype(np.float64)
        if q.ndim == 0 or q.shape[-1] != self.dof:
            raise ChainError(
                "JointCount",
                f"q must have {self.dof} joint positions along its last axis, got shape {tuple(q.shape)}",
            )
        positions = [q[..., i] for i in range(self.dof)]
        like = positions[0] if positions else np.sum(q, axis=-1)
        return positions, like

    def _walk(self, q, link):
        path = self.path_to(link)
        positions, like = self._inputs(q)
        frame, quat = _IDENTITY, [1.0, 0.0, 0.0, 0.0]
        moving = []
        for j in path:
            joint = self.joints[j]
            origin, origin_quat = _origin(joint)
            frame = _compose(frame, origin)
            quat = _qmul(quat, origin_quat)
            if joint.q_index is not None:
                moving.append((joint, _mat_vec(frame[0], joint.axis), frame[1]))
                motion, motion_quat = _motion(joint, positions[joint.q_index])
                frame = _compose(frame, motion)
                quat = _qmul(quat, motion_quat)
        return frame, quat, moving, like

    def fk(self, q, link):
        """The transform of `link` in the root frame, `[.., 4, 4]`, from `q` `[.., n]`."""
        (rotation, translation), _, _, like = self._walk(q, link)
        rows = [rotation[i] + [translation[i]] for i in range(3)] + [[0.0, 0.0, 0.0, 1.0]]
        return _matrix(rows, like)

    def fk_pose(self, q, link):
        """The pose of `link` as `rfxjit.lie`'s SE(3) element `[w, x, y, z, px, py, pz]`
        (the product of the joints' quaternions, sign not normalised), `[.., 7]`."""
        (_, translation), quat, _, like = self._walk(q, link)
        return _stack(quat + translation, like)

    def jacobian(self, q, link):
        """The geometric Jacobian of `link`'s frame, `[.., 6, n]`: rows `[v; ω]` in the root
        frame; column `i` is `[zᵢ × (p - pᵢ); zᵢ]` for a revolute joint, `[zᵢ; 0]` for a
        prismatic one, zero for joints not on the path to `link`."""
        (_, p), _, moving, like = self._walk(q, link)
        n = self.dof
        columns = [[0.0] * 6 for _ in range(n)]
        for joint, z, origin in moving:
            if joint.kind == "revolute":
                lever = [_sub(p[i], origin[i]) for i in range(3)]
                linear = [
                    _sub(_mul(z[1], lever[2]), _mul(z[2], lever[1])),
                    _sub(_mul(z[2], lever[0]), _mul(z[0], lever[2])),
                    _sub(_mul(z[0], lever[1]), _mul(z[1], lever[0])),
                ]
                columns[joint.q_index] = linear + z
            else:
                columns[joint.q_index] = z + [0.0, 0.0, 0.0]
        if n == 0:
            batch = tuple(np.shape(like))
            return np.broadcast_to(np.zeros_like(like)[..., None, None], batch + (6, 0))
        return _matrix([[columns[c][r] for c in range(n)] for r in range(6)], like)


def _stack(entries, like):
    """`entries` (constants broadcast to `like`'s shape) along a new last axis."""
    parts = [np.zeros_like(like) + e if _const(e) else np.broadcast_to(e, np.shape(like)) for e in entries]
    return np.stack(parts, axis=-1)


def _matrix(rows, like):
    flat = _stack([e for row in rows for e in row], like)
    return flat.reshape(tuple(flat.shape[:-1]) + (len(rows), len(rows[0])))
