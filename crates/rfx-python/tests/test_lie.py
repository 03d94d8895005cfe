"""`rfxjit.lie` against NumPy closed forms (half-angle quaternions, Rodrigues' formula, the
SO(3) Jacobians summed as series where the closed forms cancel), rfxjit's derivatives through
`exp`/`log` against the analytic Jacobians and central differences, at 0, 1e-12, 1e-7,
generic angles, π - 1e-9 and π and at seeded random angles near 0 and π, jitted on the `cpu`,
`interp` and (where built) `c` backends and run eagerly on NumPy arrays."""

import math

import numpy as np
import pytest

import rfxjit as rj
from conftest import jit_backends
from rfxjit import lie

BACKENDS = jit_backends()
EPS = {np.float64: 2.0 ** -53, np.float32: 2.0 ** -24}


def angles(random=4, seed=0):
    rng = np.random.default_rng(seed)
    fixed = [0.0, 1e-12, 1e-7, 1e-4, 0.05, 0.4, 1.0, 2.0, 3.0, math.pi - 1e-9, math.pi]
    near0 = 10.0 ** rng.uniform(-12, -0.5, random)
    near_pi = math.pi - 10.0 ** rng.uniform(-12, -0.5, random)
    return np.concatenate([fixed, near0, near_pi])


def rotation_vectors(seed=0):
    rng = np.random.default_rng(seed + 100)
    th = angles(seed=seed)
    axes = rng.normal(size=(th.size, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    return axes * th[:, None]


def ref_exp(w):
    th = np.linalg.norm(w, axis=-1)
    safe = np.where(th == 0.0, 1.0, th)
    k = np.where(th == 0.0, 0.5, np.sin(safe / 2) / safe)
    return np.concatenate([np.cos(th / 2)[..., None], w * k[..., None]], axis=-1)


def skew(v):
    z = np.zeros_like(v[..., 0])
    return np.stack(
        [np.stack([z, -v[..., 2], v[..., 1]], -1), np.stack([v[..., 2], z, -v[..., 0]], -1), np.stack([-v[..., 1], v[..., 0], z], -1)],
        -2,
    )


def series(x, den, terms=30):
    return sum((-1) ** k * x ** k / den(k) for k in range(terms))


def coef(th, closed, den):
    """A Jacobian coefficient: its series below 0.5 (summed far past rounding), else closed."""
    small = th < 0.5
    safe = np.where(small, 1.0, th)
    return np.where(small, series(th * th, den), closed(safe))


def ref_jr(w, left=False):
    th = np.linalg.norm(w, axis=-1)
    a = coef(th, lambda t: (1 - np.cos(t)) / t ** 2, lambda k: math.factorial(2 * k + 2))
    b = coef(th, lambda t: (t - np.sin(t)) / t ** 3, lambda k: math.factorial(2 * k + 3))
    k = skew(w)
    s = 1.0 if left else -1.0
    return np.eye(3) + s * a[..., None, None] * k + b[..., None, None] * (k @ k)


def rodrigues(w):
    th = np.linalg.norm(w, axis=-1)
    sinc = coef(th, lambda t: np.sin(t) / t, lambda k: math.factorial(2 * k + 1))
    a = coef(th, lambda t: (1 - np.cos(t)) / t ** 2, lambda k: math.factorial(2 * k + 2))
    k = skew(w)
    return np.eye(3) + sinc[..., None, None] * k + a[..., None, None] * (k @ k)


def per_point(f, *arrays):
    """`f` (one jitted kernel) called on each row of `arrays`, results stacked: the batch of
    derivatives without `vmap` of a Jacobian, which rfxjit does not build yet."""
    rows = [f(*(a[i] for a in arrays)) for i in range(arrays[0].shape[0])]
    if isinstance(rows[0], tuple):
        return tuple(np.stack(parts) for parts in zip(*rows))
    return np.stack(rows)


def central(f, x, h=1e-6):
    """The central-difference Jacobian of `f` at one point `x` (shape `f(x).shape + x.shape`)."""
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e.flat[j] = h
        cols.append((f(x + e) - f(x - e)) / (2 * h))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_so3_exp_log_matrix_match_closed_forms(backend, dtype):
    w = rotation_vectors(1).astype(dtype)
    held = w.astype(np.float64)
    f = rj.jit(lambda w: (lie.so3_exp(w), lie.so3_log(lie.so3_exp(w)), lie.so3_to_matrix(lie.so3_exp(w))), backend=backend)
    q, back, r = f(w)
    assert q.dtype == dtype
    eps = EPS[dtype]
    want_q = ref_exp(held)
    np.testing.assert_allclose(q, want_q, rtol=0, atol=16 * eps)
    np.testing.assert_allclose(r, rodrigues(held), rtol=0, atol=32 * eps)
    # Log(Exp(ω)) = ω, except that at θ = π (w within rounding of 0) -ω is the same rotation.
    ok = np.abs(want_q[:, 0]) > 1e3 * eps
    np.testing.assert_allclose(back[ok], held[ok], rtol=0, atol=64 * eps * math.pi)
    flip = ~ok
    err = np.minimum(np.abs(back[flip] - held[flip]).max(-1), np.abs(back[flip] + held[flip]).max(-1))
    assert (err < 1e-5).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_so3_eager_numpy_matches_jit(backend):
    w = rotation_vectors(2)
    eager = (lie.so3_exp(w), lie.so3_jr(w), lie.so3_jl_inv(w))
    jitted = rj.jit(lambda w: (lie.so3_exp(w), lie.so3_jr(w), lie.so3_jl_inv(w)), backend=backend)(w)
    for e, j in zip(eager, jitted):
        np.testing.assert_allclose(j, e, rtol=0, atol=64 * EPS[np.float64])
    np.testing.assert_allclose(eager[1], ref_jr(w), rtol=0, atol=32 * EPS[np.float64])


@pytest.mark.parametrize("backend", BACKENDS)
def test_so3_derivatives_match_analytic_jacobians_and_differences(backend):
    w = rotation_vectors(3)
    zeros = np.zeros_like(w)

    def tangents(w, d):
        q = lie.so3_exp(w)
        return (
            lie.so3_log(lie.so3_between(q, lie.so3_exp(w + d))),
            lie.so3_log(lie.so3_compose(q, lie.so3_exp(d))),
        )

    jac = rj.jit(rj.jacobian(tangents, argnums=1), backend=backend)
    jr_ad, jr_inv_ad = per_point(jac, w, zeros)
    back = lie.so3_log(lie.so3_exp(w))
    np.testing.assert_allclose(jr_ad, ref_jr(w), rtol=0, atol=1e-13)
    np.testing.assert_allclose(jr_inv_ad, np.linalg.inv(ref_jr(back)), rtol=0, atol=1e-12)
    for i in range(w.shape[0]):
        fd = central(lambda d: lie.so3_log(lie.so3_between(ref_exp(w[i]), ref_exp(w[i] + d))), np.zeros(3))
        np.testing.assert_allclose(jr_ad[i], fd, rtol=0, atol=1e-8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_through_exp_and_log_matches_finite_differences(backend):
    weights = np.array([0.3, -1.2, 0.7, 2.0])
    w = rotation_vectors(4)

    def scalar(w):
        return np.sum(lie.so3_exp(w) * np.array([0.3, -1.2, 0.7, 2.0]))

    g = rj.jit(rj.vmap(rj.grad(scalar)), backend=backend)(w)
    for i in range(w.shape[0]):
        fd = central(lambda x: np.sum(ref_exp(x) * weights), w[i])
        np.testing.assert_allclose(g[i], fd, rtol=0, atol=1e-9)
    # Log ∘ Exp is the identity map below π, and its gradient at 0 is finite.
    g = rj.jit(rj.grad(lambda w: np.sum(lie.so3_log(lie.so3_exp(w)))), backend=backend)(np.zeros(3))
    np.testing.assert_array_equal(g, [1.0, 1.0, 1.0])
    gq = rj.jit(rj.grad(lambda q: np.sum(lie.so3_log(q))), backend=backend)(np.array([1.0, 0.0, 0.0, 0.0]))
    np.testing.assert_array_equal(gq, [0.0, 2.0, 2.0, 2.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_so3_log_jacobian_matches_differences_of_numpy_log(backend):
    rng = np.random.default_rng(5)
    q = ref_exp(rotation_vectors(5)) * rng.choice([-1.0, 1.0], size=(1, 1)) * 1.5
    jac = per_point(rj.jit(rj.jacobian(lie.so3_log), backend=backend), q)
    for i in range(q.shape[0]):
        if abs(q[i, 0]) < 1e-5:  # a step across w = 0 flips the axis
            continue
        fd = central(lie.so3_log, q[i])
        np.testing.assert_allclose(jac[i], fd, rtol=0, atol=1e-7 * max(1.0, np.abs(fd).max()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_se3_round_trip_and_jacobians(backend):
    rng = np.random.default_rng(6)
    w = rotation_vectors(6)
    xi = np.concatenate([rng.uniform(-2, 2, size=w.shape), w], axis=-1)
    zeros = np.zeros_like(xi)

    def tangent(xi, d):
        return lie.se3_log(lie.se3_between(lie.se3_exp(xi), lie.se3_exp(xi + d)))

    jr_ad = per_point(rj.jit(rj.jacobian(tangent, argnums=1), backend=backend), xi, zeros)
    back = rj.jit(lambda xi: lie.se3_log(lie.se3_exp(xi)), backend=backend)(xi)
    jr = lie.se3_jr(xi)
    np.testing.assert_allclose(jr_ad, jr, rtol=0, atol=1e-12)
    x = lie.se3_exp(xi)
    m = lie.se3_to_matrix(x)
    np.testing.assert_allclose(m[:, :3, :3], rodrigues(w), rtol=0, atol=1e-14)
    # The translation is Jl(ω) ρ.
    np.testing.assert_allclose(x[:, 4:], np.einsum("nij,nj->ni", ref_jr(w, left=True), xi[:, :3]), rtol=0, atol=1e-14)
    ok = np.abs(x[:, 0]) > 1e-12
    np.testing.assert_allclose(back[ok], xi[ok], rtol=0, atol=1e-13)
    for i in range(xi.shape[0]):
        fd = central(lambda d: lie.se3_log(lie.se3_between(x[i], lie.se3_exp(xi[i] + d))), np.zeros(6))
        np.testing.assert_allclose(jr_ad[i], fd, rtol=0, atol=1e-7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_group_operations_against_matrices(backend):
    rng = np.random.default_rng(7)
    n = 8
    wa, wb = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    a = np.concatenate([ref_exp(wa), rng.normal(size=(n, 3))], -1)
    b = np.concatenate([ref_exp(wb), rng.normal(size=(n, 3))], -1)
    p = rng.normal(size=(n, 3))
    f = rj.jit(
        lambda a, b, p: (lie.se3_compose(a, b), lie.se3_inverse(a), lie.se3_act(a, p), lie.se3_interp(a, b, 1.0)),
        backend=backend,
    )
    ab, ai, ap, end = f(a, b, p)
    ma, mb = lie.se3_to_matrix(a), lie.se3_to_matrix(b)
    np.testing.assert_allclose(lie.se3_to_matrix(ab), ma @ mb, rtol=0, atol=1e-13)
    np.testing.assert_allclose(lie.se3_to_matrix(ai), np.linalg.inv(ma), rtol=0, atol=1e-13)
    np.testing.assert_allclose(ap, np.einsum("nij,nj->ni", ma[:, :3, :3], p) + a[:, 4:], rtol=0, atol=1e-14)
    np.testing.assert_allclose(lie.se3_to_matrix(end), mb, rtol=0, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_planar_groups(backend):
    th = np.array([0.0, 1e-12, 1e-7, 0.5, -2.0, math.pi - 1e-9, math.pi])
    rng = np.random.default_rng(8)
    xi = np.stack([rng.uniform(-2, 2, th.size), rng.uniform(-2, 2, th.size), th], -1)
    f = rj.jit(lambda xi: (lie.se2_exp(xi), lie.se2_log(lie.se2_exp(xi)), lie.so2_log(lie.so2_exp(xi[..., 2:]))), backend=backend)
    x, back, angle = f(xi)
    np.testing.assert_allclose(x[:, :2], np.stack([np.cos(th), np.sin(th)], -1), rtol=0, atol=1e-15)
    np.testing.assert_allclose(back, xi, rtol=0, atol=1e-13)
    np.testing.assert_allclose(angle[:, 0], th, rtol=0, atol=1e-15)
    jac = rj.jit(
        rj.jacobian(lambda xi, d: lie.se2_log(lie.se2_between(lie.se2_exp(xi), lie.se2_exp(xi + d))), argnums=1),
        backend=backend,
    )
    jr_ad = per_point(jac, xi, np.zeros_like(xi))
    np.testing.assert_allclose(jr_ad, lie.se2_jr(xi), rtol=0, atol=1e-13)


@pytest.mark.parametrize("backend", BACKENDS)
def test_se2_operation_jacobians_match_derivatives(backend):
    rng = np.random.default_rng(9)
    a = lie.se2_exp(np.array([0.4, -1.0, 2.0]))
    b = lie.se2_exp(np.array([-0.3, 0.8, -2.5]))
    p = rng.normal(size=2)

    def perturbed(d):
        e = lie.se2_exp(d)
        ab = lie.se2_compose(a, b)
        return (
            lie.se2_log(lie.se2_between(ab, lie.se2_compose(lie.se2_compose(a, e), b))),
            lie.se2_log(lie.se2_compose(lie.se2_compose(e, a), lie.se2_compose(b, lie.se2_inverse(ab)))),
            lie.se2_act(lie.se2_compose(a, e), p),
            lie.se2_act(lie.se2_compose(e, a), p),
            lie.se2_log(lie.se2_between(lie.se2_inverse(a), lie.se2_inverse(lie.se2_compose(a, e)))),
            lie.se2_log(lie.se2_compose(a, e)),
        )

    got = rj.jit(rj.jacobian(perturbed), backend=backend)(np.zeros(3))
    want = (
        lie.se2_compose_jacobians(a, b, "right")[0],
        lie.se2_compose_jacobians(a, b, "left")[0],
        lie.se2_act_jacobians(a, p, "right")[0],
        lie.se2_act_jacobians(a, p, "left")[0],
        lie.se2_inverse_jacobian(a, "right"),
        lie.se2_jr_inv(lie.se2_log(a)),
    )
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-13)


def test_wrong_component_count_is_an_error():
    # rfxjit's typed error, eagerly and while tracing under jit.
    with pytest.raises(rj.TraceError, match="so3_exp"):
        lie.so3_exp(np.zeros(4))
    with pytest.raises(rj.TraceError, match=r"se3_log: the last axis must have 7 elements, got shape \(2, 6\)"):
        lie.se3_log(np.zeros((2, 6)))
    with pytest.raises(rj.TraceError, match="so3_log"):
        rj.jit(lie.so3_log)(np.zeros(3))
    with pytest.raises(rj.TraceError, match="side"):
        lie.so3_inverse_jacobian(np.array([1.0, 0, 0, 0]), side="up")


def exp_tangents(seed, dtype):
    """Rotation vectors at every test angle, past π (to 2π and beyond), and at seeded random
    angles within 10% of `dtype`'s series threshold (the square root of that of
    `(θ - sin θ)/θ³`'s five-term series: its omitted `x⁵/13!` at half the roundoff of `1/6`)."""
    rng = np.random.default_rng(seed)
    t = math.sqrt((EPS[dtype] * math.factorial(13) / 12.0) ** 0.2)
    th = np.concatenate([angles(seed=seed), [4.0, 2 * math.pi - 1e-9, 2 * math.pi, 10.0, t], t * rng.uniform(0.9, 1.1, 8)])
    axes = rng.normal(size=(th.size, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    return axes * th[:, None]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_so3_exp_with_jacobians_matches_exp_and_the_jacobians(backend, dtype):
    w = exp_tangents(8, dtype).astype(dtype)
    held = w.astype(np.float64)
    f = rj.jit(lambda w: lie.so3_exp_with_jacobians(w) + (lie.so3_exp(w), lie.so3_jr(w), lie.so3_jl(w)), backend=backend)
    q, jr, jl, q_sep, jr_sep, jl_sep = f(w)
    assert q.dtype == dtype and q.shape == (w.shape[0], 4) and jl.shape == (w.shape[0], 3, 3)
    eps = EPS[dtype]
    # `so3_exp` takes a higher threshold; `so3_jr` and `so3_jl` are the same operations.
    np.testing.assert_allclose(q, q_sep, rtol=0, atol=4 * eps)
    np.testing.assert_allclose(jr, jr_sep, rtol=0, atol=8 * eps)
    np.testing.assert_allclose(jl, jl_sep, rtol=0, atol=8 * eps)
    np.testing.assert_allclose(q, ref_exp(held), rtol=0, atol=4 * eps)
    np.testing.assert_allclose(jr, ref_jr(held), rtol=0, atol=8 * eps)
    np.testing.assert_allclose(jl, ref_jr(held, left=True), rtol=0, atol=8 * eps)
    eager = lie.so3_exp_with_jacobians(w)
    for e, j in zip(eager, (q, jr, jl)):
        np.testing.assert_allclose(j, e, rtol=0, atol=8 * eps)


@pytest.mark.parametrize("backend", BACKENDS)
def test_so3_exp_with_jacobians_derivatives_match_finite_differences(backend):
    w = exp_tangents(9, np.float64)

    def outputs(w):
        q, jr, jl = lie.so3_exp_with_jacobians(w)
        return np.sum(q) + 0.5 * np.sum(jr * jr) + np.sum(jl * (jr @ jl))

    def ref_outputs(w):
        jr, jl = ref_jr(w), ref_jr(w, left=True)
        return np.sum(ref_exp(w)) + 0.5 * np.sum(jr * jr) + np.sum(jl * (jr @ jl))

    g = rj.jit(rj.vmap(rj.grad(outputs)), backend=backend)(w)
    for i in range(w.shape[0]):
        fd = central(ref_outputs, w[i])
        np.testing.assert_allclose(g[i], fd, rtol=0, atol=1e-8 * max(1.0, np.abs(fd).max()))
    # At ω = 0 (the series) the derivatives are exact: d Exp / d ω = [0; ½ I], d Jr / d ω_j =
    # -½ [e_j]×.
    d_q, d_jr = rj.jit(rj.jacobian(lambda w: lie.so3_exp_with_jacobians(w)[:2]), backend=backend)(np.zeros(3))
    np.testing.assert_array_equal(d_q, np.concatenate([np.zeros((1, 3)), 0.5 * np.eye(3)]))
    np.testing.assert_array_equal(d_jr, -0.5 * np.moveaxis(skew(np.eye(3)), 0, -1))


def ref_log(q):
    """`Log(q)` in NumPy: sign normalised to `w >= 0`, `2 atan2(‖v‖, w) v/‖v‖` (`2 v/w` at `v = 0`)."""
    q = np.where(q[..., :1] < 0.0, -q, q)
    w, v = q[..., 0], q[..., 1:]
    n = np.linalg.norm(v, axis=-1)
    safe = np.where(n == 0.0, 1.0, n)
    k = np.where(n == 0.0, 2.0 / w, 2.0 * np.arctan2(n, w) / safe)
    return v * k[..., None]


def log_quaternions(seed):
    """Quaternions at every test angle, of both signs and of scales in [0.5, 2)."""
    rng = np.random.default_rng(seed)
    q = ref_exp(rotation_vectors(seed))
    return q * (rng.uniform(0.5, 2.0, (q.shape[0], 1)) * rng.choice([-1.0, 1.0], (q.shape[0], 1)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_so3_log_with_jacobians_matches_log_and_inverse_jacobians(backend, dtype):
    q = log_quaternions(6).astype(dtype)
    held = q.astype(np.float64)
    f = rj.jit(
        lambda q: lie.so3_log_with_jacobians(q) + (lie.so3_jr_inv(lie.so3_log(q)), lie.so3_jl_inv(lie.so3_log(q))),
        backend=backend,
    )
    w, jr_inv, jl_inv, jr_inv_log, jl_inv_log = f(q)
    assert w.dtype == dtype and jr_inv.shape == (q.shape[0], 3, 3)
    eps = EPS[dtype]
    # The same values as the inverse Jacobians of the log to a few units of roundoff.
    np.testing.assert_allclose(jr_inv, jr_inv_log, rtol=0, atol=8 * eps)
    np.testing.assert_allclose(jl_inv, jl_inv_log, rtol=0, atol=8 * eps)
    # Against NumPy's closed forms, at the returned log (at θ = π either sign of the axis).
    ok = np.abs(held[:, 0]) > 1e3 * eps
    np.testing.assert_allclose(w[ok], ref_log(held)[ok], rtol=0, atol=64 * eps * math.pi)
    w64 = w.astype(np.float64)
    np.testing.assert_allclose(jr_inv, np.linalg.inv(ref_jr(w64)), rtol=0, atol=64 * eps)
    np.testing.assert_allclose(jl_inv, np.linalg.inv(ref_jr(w64, left=True)), rtol=0, atol=64 * eps)
    eager = lie.so3_log_with_jacobians(q)
    for e, j in zip(eager, (w, jr_inv, jl_inv)):
        np.testing.assert_allclose(j, e, rtol=0, atol=8 * eps)


@pytest.mark.parametrize("backend", BACKENDS)
def test_so3_log_with_jacobians_gradient_matches_finite_differences(backend):
    q = log_quaternions(7)

    def scalar(q):
        w, jr_inv, jl_inv = lie.so3_log_with_jacobians(q)
        return np.sum(w) + 0.5 * np.sum(jr_inv * jr_inv) + np.sum(jl_inv * (jr_inv @ jl_inv))

    def ref_scalar(q):
        w = ref_log(q)
        jr_inv, jl_inv = np.linalg.inv(ref_jr(w)), np.linalg.inv(ref_jr(w, left=True))
        return np.sum(w) + 0.5 * np.sum(jr_inv * jr_inv) + np.sum(jl_inv * (jr_inv @ jl_inv))

    g = rj.jit(rj.vmap(rj.grad(scalar)), backend=backend)(q)
    for i in range(q.shape[0]):
        if abs(q[i, 0]) < 1e-5:  # a step across w = 0 flips the axis
            continue
        fd = central(ref_scalar, q[i])
        np.testing.assert_allclose(g[i], fd, rtol=0, atol=1e-8 * max(1.0, np.abs(fd).max()))
    # At the identity the gradient of the log through the series branches is exact.
    gq = rj.jit(rj.grad(lambda q: np.sum(lie.so3_log_with_jacobians(q)[0])), backend=backend)(np.array([1.0, 0.0, 0.0, 0.0]))
    np.testing.assert_array_equal(gq, [0.0, 2.0, 2.0, 2.0])
