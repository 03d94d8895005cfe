"""`rfxjit.control.Chain` against NumPy: a product of homogeneous transforms of the UR5's and
the Panda's published parameters (typed in here, not read from the URDF), the Panda's modified
DH table, closed forms for a planar arm with a prismatic joint and for a branched tree; the
geometric Jacobian against central differences; rfxjit's reverse mode through `fk` against the
Jacobian; `vmap`; f32; typed errors. The URDF files are the Rust crate's test data."""

import math
import os

import numpy as np
import pytest

import rfxjit as rj
from conftest import jit_backends
from rfxjit.control import Chain, ChainError

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "rfx-control", "tests", "data")
HALF_PI = math.pi / 2


BACKENDS = jit_backends()


def trans(x, y, z):
    m = np.eye(4)
    m[:3, 3] = [x, y, z]
    return m


def rot(axis, a):
    c, s = math.cos(a), math.sin(a)
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    m = np.eye(4)
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


def product(joints, q):
    """`joints`: `(xyz, rpy, axis or None)`; movable ones take the next entry of `q`."""
    m = np.eye(4)
    k = 0
    for xyz, (r, p, y), axis in joints:
        m = m @ trans(*xyz) @ rot(2, y) @ rot(1, p) @ rot(0, r)
        if axis is not None:
            m = m @ rot(axis, q[k])
            k += 1
    return m


UR5 = [
    ((0, 0, 0.089159), (0, 0, 0), 2),
    ((0, 0.13585, 0), (0, HALF_PI, 0), 1),
    ((0, -0.1197, 0.425), (0, 0, 0), 1),
    ((0, 0, 0.39225), (0, HALF_PI, 0), 1),
    ((0, 0.093, 0), (0, 0, 0), 2),
    ((0, 0, 0.09465), (0, 0, 0), 1),
    ((0, 0.0823, 0), (-HALF_PI, 0, 0), None),  # tool0
]

PANDA = [
    ((0, 0, 0.333), (0, 0, 0), 2),
    ((0, 0, 0), (-HALF_PI, 0, 0), 2),
    ((0, -0.316, 0), (HALF_PI, 0, 0), 2),
    ((0.0825, 0, 0), (HALF_PI, 0, 0), 2),
    ((-0.0825, 0.384, 0), (-HALF_PI, 0, 0), 2),
    ((0, 0, 0), (HALF_PI, 0, 0), 2),
    ((0.088, 0, 0), (HALF_PI, 0, 0), 2),
    ((0, 0, 0.107), (0, 0, 0), None),  # panda_link8
    ((0, 0, 0), (0, 0, -math.pi / 4), None),  # panda_hand
]


def panda_mdh(q):
    """Franka's modified DH table to panda_link8: `Rx(alpha) Tx(a) Rz(q) Tz(d)`."""
    a = [0, 0, 0, 0.0825, -0.0825, 0, 0.088, 0]
    d = [0.333, 0, 0.316, 0, 0.384, 0, 0, 0.107]
    alpha = [0, -HALF_PI, HALF_PI, HALF_PI, -HALF_PI, HALF_PI, HALF_PI, 0]
    m = np.eye(4)
    for i in range(8):
        m = m @ rot(0, alpha[i]) @ trans(a[i], 0, 0) @ rot(2, q[i] if i < 7 else 0.0) @ trans(0, 0, d[i])
    return m


def jacobian_fd(fk, q, h=1e-6):
    """`[v; ω]` by central differences: the position, and the skew part of `dR Rᵀ`."""
    r0 = fk(q)[:3, :3]
    cols = []
    for i in range(len(q)):
        dq = np.zeros(len(q))
        dq[i] = h
        d = (fk(q + dq) - fk(q - dq)) / (2 * h)
        w = d[:3, :3] @ r0.T
        omega = 0.5 * np.array([w[2, 1] - w[1, 2], w[0, 2] - w[2, 0], w[1, 0] - w[0, 1]])
        cols.append(np.concatenate([d[:3, 3], omega]))
    return np.stack(cols, axis=1)


def configs(n, count, seed):
    return np.random.default_rng(seed).uniform(-3.0, 3.0, (count, n))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "robot,link,reference",
    [
        ("ur5", "tool0", lambda q: product(UR5, q)),
        ("ur5", "forearm_link", lambda q: product(UR5[:3], q[:3])),
        ("panda", "panda_hand", lambda q: product(PANDA, q)),
        ("panda", "panda_link8", panda_mdh),
    ],
)
def test_fk_and_jacobian_match_numpy(backend, robot, link, reference):
    chain = Chain.from_urdf(os.path.join(DATA, f"{robot}.urdf"))
    q = configs(chain.dof, 6, 1)
    fk = rj.jit(lambda q: chain.fk(q, link), backend=backend)
    jac = rj.jit(lambda q: chain.jacobian(q, link), backend=backend)
    m, j = fk(q), jac(q)
    assert m.shape == (6, 4, 4) and j.shape == (6, 6, chain.dof)
    for k in range(len(q)):
        np.testing.assert_allclose(m[k], reference(q[k]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(j[k], jacobian_fd(reference, q[k]), rtol=0, atol=1e-8)
    # Eagerly on NumPy arrays: the same values.
    np.testing.assert_allclose(chain.fk(q, link), m, rtol=0, atol=1e-14)


def test_pose_is_an_se3_element_of_rfxjit_lie():
    chain = Chain.from_urdf(os.path.join(DATA, "panda.urdf"))
    q = configs(7, 4, 2)
    pose = rj.jit(lambda q: chain.fk_pose(q, "panda_hand"))(q)
    np.testing.assert_allclose(np.sum(pose[:, :4] ** 2, axis=-1), 1.0, atol=1e-14)
    np.testing.assert_allclose(rj.lie.se3_to_matrix(pose), chain.fk(q, "panda_hand"), atol=1e-14)


PLANAR = """<robot name="planar">
  <link name="base"/><link name="link1"/><link name="link2"/><link name="tool"/>
  <joint name="q1" type="continuous"><parent link="base"/><child link="link1"/><axis xyz="0 0 1"/></joint>
  <joint name="q2" type="revolute"><parent link="link1"/><child link="link2"/>
    <origin xyz="0.7 0 0"/><axis xyz="0 0 2"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="d" type="prismatic"><parent link="link2"/><child link="tool"/>
    <origin xyz="0.4 0 0"/><axis xyz="1 0 0"/><limit lower="0" upper="0.5" effort="1" velocity="1"/></joint>
</robot>"""


def test_planar_arm_with_a_prismatic_joint_matches_its_closed_form():
    l1, l2 = 0.7, 0.4
    chain = Chain.from_urdf(PLANAR)
    assert chain.joint_names == ["q1", "q2", "d"]
    assert chain.joints[2].limits == (0.0, 0.5)
    q = np.array([[0.3, -1.1, 0.2], [-2.0, 0.5, 0.05]])
    m = rj.jit(lambda q: chain.fk(q, "tool"))(q)
    j = rj.jit(lambda q: chain.jacobian(q, "tool"))(q)
    for k, (q1, q2, d) in enumerate(q):
        s1, c1, s12, c12 = math.sin(q1), math.cos(q1), math.sin(q1 + q2), math.cos(q1 + q2)
        r = l2 + d
        np.testing.assert_allclose(m[k, :3, 3], [l1 * c1 + r * c12, l1 * s1 + r * s12, 0.0], atol=1e-15)
        np.testing.assert_allclose(m[k, :2, :2], [[c12, -s12], [s12, c12]], atol=1e-15)
        want = np.array(
            [
                [-l1 * s1 - r * s12, -r * s12, c12],
                [l1 * c1 + r * c12, r * c12, s12],
                [0, 0, 0],
                [0, 0, 0],
                [0, 0, 0],
                [1, 1, 0],
            ]
        )
        np.testing.assert_allclose(j[k], want, atol=1e-15)


def test_branches_move_with_their_own_joints():
    urdf = """<robot name="b"><link name="base"/><link name="l"/><link name="r"/>
      <joint name="left" type="continuous"><parent link="base"/><child link="l"/>
        <origin xyz="0 0.3 1"/><axis xyz="0 1 0"/></joint>
      <joint name="right" type="continuous"><parent link="base"/><child link="r"/>
        <origin xyz="0 -0.3 1" rpy="0 0 1.5707963267948966"/><axis xyz="1 0 0"/></joint></robot>"""
    chain = Chain.from_urdf(urdf)
    q = np.array([0.4, -0.9])
    jl = rj.jit(lambda q: chain.jacobian(q, "l"))(q)
    jr = rj.jit(lambda q: chain.jacobian(q, "r"))(q)
    np.testing.assert_allclose(jl[:, 1], 0.0)
    np.testing.assert_allclose(jr[:, 0], 0.0)
    np.testing.assert_allclose(jl[3:, 0], [0, 1, 0], atol=1e-16)
    np.testing.assert_allclose(jr[3:, 1], [0, 1, 0], atol=1e-16)


def test_reverse_mode_through_fk_is_the_jacobian():
    chain = Chain.from_urdf(os.path.join(DATA, "ur5.urdf"))
    d_fk = rj.jit(rj.jacobian(lambda q: chain.fk(q, "tool0")))
    jac = rj.jit(lambda q: chain.jacobian(q, "tool0"))
    for q in configs(6, 3, 3):
        dm = d_fk(q)  # [4, 4, 6]
        m = chain.fk(q, "tool0")
        w = np.einsum("rjn,cj->rcn", dm[:3, :3], m[:3, :3])
        ad = np.concatenate([dm[:3, 3], np.stack([w[2, 1], w[0, 2], w[1, 0]])], axis=0)
        np.testing.assert_allclose(ad, jac(q), rtol=0, atol=1e-13)


def test_grad_of_a_reaching_cost():
    # d/dq ½‖p(q) - target‖² = Jᵥᵀ (p - target).
    chain = Chain.from_urdf(os.path.join(DATA, "panda.urdf"))
    target = np.array([0.4, 0.1, 0.5])
    cost = rj.jit(rj.grad(lambda q: 0.5 * np.sum((chain.fk(q, "panda_hand")[:3, 3] - target) ** 2)))
    q = configs(7, 1, 4)[0]
    p = chain.fk(q, "panda_hand")[:3, 3]
    np.testing.assert_allclose(cost(q), chain.jacobian(q, "panda_hand")[:3].T @ (p - target), atol=1e-13)


def test_vmap_over_256_configurations():
    chain = Chain.from_urdf(os.path.join(DATA, "ur5.urdf"))
    q = configs(6, 256, 5)
    m = rj.jit(rj.vmap(lambda q: chain.fk(q, "tool0")))(q)
    assert m.shape == (256, 4, 4)
    want = np.stack([product(UR5, qk) for qk in q])
    np.testing.assert_allclose(m, want, rtol=0, atol=1e-12)


def test_f32_stays_f32():
    chain = Chain.from_urdf(os.path.join(DATA, "ur5.urdf"))
    q = configs(6, 8, 6).astype(np.float32)
    m = rj.jit(lambda q: chain.fk(q, "tool0"))(q)
    assert m.dtype == np.float32
    want = np.stack([product(UR5, qk) for qk in q.astype(np.float64)])
    np.testing.assert_allclose(m, want, rtol=0, atol=2e-6)


LINKS = '<link name="a"/><link name="b"/><link name="c"/>'


def joint(name, kind, parent, child):
    links = f'<parent link="{parent}"/><child link="{child}"/>'
    return f'<joint name="{name}" type="{kind}">{links}<axis xyz="0 0 1"/></joint>'


@pytest.mark.parametrize(
    "body,kind",
    [
        ("", "NoLinks"),
        ('<link name="a"/><link name="a"/>', "DuplicateName"),
        (LINKS + joint("j", "fixed", "a", "hand"), "JointLinkMissing"),
        (LINKS + joint("ab", "fixed", "a", "b") + joint("bc", "fixed", "b", "c") + joint("ac", "fixed", "a", "c"),
         "MultipleParents"),
        (LINKS + joint("ab", "fixed", "a", "b"), "MultipleRoots"),
        (LINKS + joint("bc", "fixed", "b", "c") + joint("cb", "fixed", "c", "b"), "Cycle"),
        (LINKS + joint("f", "floating", "a", "b"), "UnsupportedJoint"),
        (LINKS + joint("f", "planar", "a", "b"), "UnsupportedJoint"),
        (LINKS + joint("f", "rotary", "a", "b"), "Malformed"),
        (LINKS + joint("j", "revolute", "a", "b").replace("0 0 1", "0 0 0"), "BadGeometry"),
    ],
)
def test_bad_urdf_is_a_typed_error(body, kind):
    with pytest.raises(ChainError) as info:
        Chain.from_urdf(f'<robot name="r">{body}</robot>')
    assert info.value.kind == kind, str(info.value)
    assert isinstance(info.value, rj.RfxError)


def test_bad_xml_missing_files_unknown_links_and_wrong_q():
    with pytest.raises(ChainError, match="malformed URDF"):
        Chain.from_urdf('<robot name="r"><link name="a">')
    with pytest.raises(ChainError, match="nonexistent") as info:
        Chain.from_urdf("/nonexistent/robot.urdf")
    assert info.value.kind == "Io"
    chain = Chain.from_urdf(PLANAR)
    with pytest.raises(ChainError, match="no link `hand`"):
        chain.fk(np.zeros(3), "hand")
    with pytest.raises(ChainError, match="3 joint positions") as info:
        chain.jacobian(np.zeros((2, 4)), "tool")
    assert info.value.kind == "JointCount"
    with pytest.raises(rj.RfxError, match="3 joint positions"):
        rj.jit(lambda q: chain.fk(q, "tool"))(np.zeros(2))
