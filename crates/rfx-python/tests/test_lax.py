"""`rfxjit.lax.fori_loop` and `while_loop` end to end: Newton iterations, arm inverse
kinematics, a pendulum rollout with its gradient and `vmap`, pytree carries, captured arrays,
the size of the compiled code against the trip count, and the errors."""

import re

import numpy as np
import pytest

import rfxjit as rj
from conftest import jit_backends

lax = rj.lax


def newton_sqrt(a, steps):
    x = a
    for _ in range(steps):
        x = 0.5 * (x + a / x)
    return x


ROOTS = np.array([2.0, 9.0, 0.25, 100.0, 1e-3])


@pytest.mark.parametrize("backend", jit_backends())
def test_fori_newton_sqrt(backend):
    f = rj.jit(lambda a: lax.fori_loop(0, 8, lambda i, x: 0.5 * (x + a / x), a), backend=backend)
    np.testing.assert_allclose(f(ROOTS), newton_sqrt(ROOTS, 8), rtol=1e-15)
    np.testing.assert_allclose(f(ROOTS)[:3], np.sqrt(ROOTS[:3]), rtol=1e-15)


def sqrt_while(a):
    def cond(c):
        return np.abs(c["x"] * c["x"] - a) > 1e-12 * a

    def body(c):
        return {"x": 0.5 * (c["x"] + a / c["x"]), "steps": c["steps"] + 1}

    return lax.while_loop(cond, body, {"x": a, "steps": np.int32(0)}, max_iter=50)


@pytest.mark.parametrize("backend", jit_backends())
def test_while_newton_sqrt_with_a_dict_carry(backend):
    f = rj.jit(sqrt_while, backend=backend)
    for root in ROOTS:
        out = f(np.float64(root))
        x, steps = root, 0
        while steps < 50 and abs(x * x - root) > 1e-12 * root:
            x, steps = 0.5 * (x + root / x), steps + 1
        assert out["x"] == pytest.approx(x, rel=1e-15)
        assert out["steps"] == steps and out["steps"].dtype == np.int32
        assert 0 < steps < 50


def test_while_loop_ends_at_max_iter():
    f = rj.jit(lambda x: lax.while_loop(lambda x: x >= 0.0, lambda x: x + 1.0, x, max_iter=7))
    assert f(np.float64(0.5)) == 7.5
    assert f(np.float64(-0.5)) == -0.5


def test_nested_tuple_carries_captured_arrays_and_the_counter():
    def f(x, k):
        def body(i, carry):
            (total, prod), n = carry
            return (total + i, prod * k), n + x

        return lax.fori_loop(1, 5, body, ((np.int32(0), np.float64(1.0)), x))

    (total, prod), n = rj.jit(f)(np.array([1.0, 2.0]), np.float64(0.5))
    assert total == 1 + 2 + 3 + 4 and total.dtype == np.int32
    assert prod == 0.5**4
    np.testing.assert_array_equal(n, [5.0, 10.0])


def test_nested_loops_capture_through_both_bodies():
    def f(x, k):
        def outer(i, x):
            b = i * 0.5
            return lax.fori_loop(0, 3, lambda _, d: d * k + b, x)

        return lax.fori_loop(0, 4, outer, x)

    x0 = np.array([1.0, -2.0])
    want = x0.copy()
    for i in range(4):
        for _ in range(3):
            want = want * 0.75 + i * 0.5
    np.testing.assert_allclose(rj.jit(f)(x0, np.float64(0.75)), want, rtol=1e-15)


def test_a_loop_outside_a_traced_function_runs_at_once():
    np.testing.assert_array_equal(lax.fori_loop(0, 3, lambda i, x: x * 2.0, np.ones(2)), [8.0, 8.0])
    assert lax.while_loop(lambda x: x < 100.0, lambda x: x * 3.0, np.float64(1.0), max_iter=10) == 243.0


# -- a 2-link planar arm: inverse kinematics by damped Gauss-Newton steps -----------------------

L1, L2, DAMPING = 0.7, 0.45, 1e-4


def fk(q1, q2):
    return np.cos(q1) * L1 + np.cos(q1 + q2) * L2, np.sin(q1) * L1 + np.sin(q1 + q2) * L2


def ik_step(q, target):
    q1, q2 = q
    tx, ty = target
    s1, c1, s12, c12 = np.sin(q1), np.cos(q1), np.sin(q1 + q2), np.cos(q1 + q2)
    ex, ey = tx - (c1 * L1 + c12 * L2), ty - (s1 * L1 + s12 * L2)
    a, b, c, d = -s1 * L1 - s12 * L2, -s12 * L2, c1 * L1 + c12 * L2, c12 * L2
    m11, m12, m22 = a * a + b * b + DAMPING, a * c + b * d, c * c + d * d + DAMPING
    det = m11 * m22 - m12 * m12
    u, v = (m22 * ex - m12 * ey) / det, (m11 * ey - m12 * ex) / det
    return q1 + (a * u + c * v), q2 + (b * u + d * v)


@pytest.mark.parametrize("backend", jit_backends())
def test_arm_inverse_kinematics_reaches_its_targets(backend):
    s = np.arange(64) / 64
    a1, a2 = -1.0 + 2.0 * s, 0.6 + 1.4 * ((7.0 * s) % 1.0)
    tx, ty = fk(a1, a2)

    @rj.jit
    def solve(q1, q2, tx, ty):
        return lax.fori_loop(0, 40, lambda i, q: ik_step(q, (tx, ty)), (q1, q2))

    q1, q2 = rj.jit(solve, backend=backend)(np.full(64, 0.2), np.full(64, 1.4), tx, ty)
    x, y = fk(q1, q2)
    assert np.max(np.hypot(x - tx, y - ty)) < 1e-9


# -- a pendulum under PD control: a 100-step Euler rollout --------------------------------------

DT, G_OVER_L, STEPS = 0.01, 9.81, 100


def pendulum_step(state, kp, kd):
    theta, omega = state
    accel = -G_OVER_L * np.sin(theta) - kp * theta - kd * omega
    return theta + DT * omega, omega + DT * accel


def rollout(theta, omega, kp, kd):
    theta, omega = lax.fori_loop(0, STEPS, lambda i, s: pendulum_step(s, kp, kd), (theta, omega))
    return theta * theta + 0.1 * omega * omega


def rollout_unrolled(theta, omega, kp, kd):
    state = (theta, omega)
    for _ in range(STEPS):
        state = pendulum_step(state, kp, kd)
    return state[0] * state[0] + 0.1 * state[1] * state[1]


PENDULUM = np.array([0.8, -0.3, 2.0, 0.5])


@pytest.mark.parametrize("backend", jit_backends())
def test_pendulum_gradient_against_finite_differences_and_the_unrolled_rollout(backend):
    args = [np.float64(v) for v in PENDULUM]
    value, grads = rj.jit(rj.value_and_grad(rollout, argnums=(0, 1, 2, 3)), backend=backend)(*args)
    assert value == pytest.approx(rollout_unrolled(*PENDULUM), rel=1e-13)
    h = 1e-6
    fd = []
    for k in range(4):
        up, down = PENDULUM.copy(), PENDULUM.copy()
        up[k] += h
        down[k] -= h
        fd.append((rollout_unrolled(*up) - rollout_unrolled(*down)) / (2 * h))
    np.testing.assert_allclose(grads, fd, rtol=1e-6)
    unrolled = rj.grad(rollout_unrolled, argnums=(0, 1, 2, 3))(*args)
    np.testing.assert_allclose(grads, unrolled, rtol=1e-12)


def test_vmap_of_the_rollout_over_1024_initial_states():
    n = 1024
    theta = -1.5 + 3.0 * np.arange(n) / n
    omega = ((np.arange(n) * 37) % 101) / 50.0 - 1.0
    batched = rj.vmap(rollout, in_axes=(0, 0, None, None))
    out = batched(theta, omega, np.float64(PENDULUM[2]), np.float64(PENDULUM[3]))
    want = rollout_unrolled(theta, omega, PENDULUM[2], PENDULUM[3])
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-15)
    # Per-example gradients through the loop.
    grads = rj.vmap(rj.grad(rollout, argnums=(0, 1)), in_axes=(0, 0, None, None))(
        theta[:8], omega[:8], np.float64(PENDULUM[2]), np.float64(PENDULUM[3])
    )
    one = rj.grad(rollout, argnums=(0, 1))(np.float64(theta[3]), np.float64(omega[3]), *map(np.float64, PENDULUM[2:]))
    assert grads[0][3] == pytest.approx(one[0], rel=1e-12)
    assert grads[1][3] == pytest.approx(one[1], rel=1e-12)


def test_the_code_of_10000_trips_is_the_code_of_100_trips():
    def decay(trips):
        return rj.jit(lambda x: lax.fori_loop(0, trips, lambda i, c: np.sin(c * 0.999) + 0.001, x))

    x = np.full(8, 0.5, dtype=np.float32)
    short, long = decay(100), decay(10_000)

    def shape_of(text):
        return re.sub(r"[0-9]+", "#", text)

    for stage in ("mir", "lir"):
        a, b = getattr(short, stage)(x), getattr(long, stage)(x)
        assert shape_of(a) == shape_of(b), stage
        assert len(b) <= len(a) + 2, stage
    want = np.float32(0.5)
    for _ in range(10_000):
        want = np.sin(want * np.float32(0.999)) + np.float32(0.001)
    np.testing.assert_allclose(long(x), np.full(8, want), rtol=1e-4)


# -- errors -------------------------------------------------------------------------------------


def trace_error(f, *args):
    with pytest.raises(rj.TraceError) as info:
        rj.jit(f)(*args)
    return str(info.value)


def test_a_body_returning_another_structure_is_an_error():
    message = trace_error(lambda x: lax.fori_loop(0, 3, lambda i, c: c[0], (x, x)), np.ones(2))
    assert "fori_loop: body_fun must return a carry of init_val's structure (*, *), got *" in message
    message = trace_error(lambda x: lax.fori_loop(0, 3, lambda i, c: {"a": c["a"]}, {"a": x, "b": x}), np.ones(2))
    assert "structure {'a': *, 'b': *}, got {'a': *}" in message


def test_a_body_returning_another_dtype_or_shape_is_an_error():
    message = trace_error(lambda x: lax.fori_loop(0, 3, lambda i, c: c.astype(np.float32), x), np.ones(2))
    assert "returned float32[2] for carry leaf 0, which is float64[2]" in message
    message = trace_error(lambda x: lax.fori_loop(0, 3, lambda i, c: np.sum(c), x), np.ones(2))
    assert "returned float64[] for carry leaf 0, which is float64[2]" in message
    # A Python scalar takes the carry's dtype.
    assert rj.jit(lambda x: lax.fori_loop(0, 3, lambda i, c: 1.5, x))(np.float32(0.0)) == np.float32(1.5)


def test_bad_tests_bounds_and_trip_counts_are_errors():
    message = trace_error(lambda x: lax.while_loop(lambda c: c > 0.0, lambda c: c - 1.0, x, max_iter=5), np.ones(2))
    assert "cond_fun must return a bool scalar, got bool[2]" in message
    message = trace_error(lambda x: lax.fori_loop(0, x, lambda i, c: c, x), np.int32(3))
    assert "fori_loop: upper must be an integer known when tracing" in message
    with pytest.raises(rj.TraceError, match=r"upper \(1\) is below lower \(2\)"):
        lax.fori_loop(2, 1, lambda i, c: c, np.ones(1))
    with pytest.raises(rj.TraceError, match="max_iter = -1 is out of range"):
        lax.while_loop(lambda c: c > 0.0, lambda c: c, np.ones(()), max_iter=-1)
    with pytest.raises(TypeError):
        lax.while_loop(lambda c: c > 0.0, lambda c: c, np.ones(()))  # max_iter is required
    # An exception in the body reaches the caller as it is.
    def body(i, c):
        raise KeyError("from the body")

    with pytest.raises(KeyError, match="from the body"):
        rj.jit(lambda x: lax.fori_loop(0, 2, body, x))(np.ones(1))


def test_an_error_inside_the_body_names_the_op_and_the_users_line():
    message = trace_error(lambda x: lax.fori_loop(0, 2, lambda i, c: c + np.ones(3), x), np.ones(2))
    assert "`add`: shapes [2] and [3] do not broadcast" in message
    assert "test_lax.py" in message


def test_vmap_of_a_while_loop_whose_trip_count_differs_per_example():
    roots = np.array([2.0, 9.0, 0.25, 100.0, 1e-3, 1.0])
    out = rj.vmap(sqrt_while)(roots)
    for k, root in enumerate(roots):
        one = rj.jit(sqrt_while)(np.float64(root))
        assert out["x"][k] == one["x"]
        assert out["steps"][k] == one["steps"]
    assert len(set(out["steps"].tolist())) > 2


def test_jacobian_and_hessian_through_a_loop():
    def sqrt8(a):
        return lax.fori_loop(0, 8, lambda i, x: 0.5 * (x + a / x), a)

    a = np.array([2.0, 9.0])
    np.testing.assert_allclose(rj.jacobian(sqrt8)(a), np.diag(0.5 / np.sqrt(a)), rtol=1e-12)
    h = rj.hessian(lambda a: np.sum(sqrt8(a)))(a)
    np.testing.assert_allclose(h, np.diag(-0.25 * a**-1.5), rtol=1e-9)


def test_the_counter_keeps_a_float32_carry_float32():
    f = rj.jit(lambda x: lax.fori_loop(0, 4, lambda i, c: c + i * c, x))
    out = f(np.ones(2, dtype=np.float32))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [24.0, 24.0])  # 1 · 2 · 3 · 4
    # With an int32 array the counter stays int32.
    total = rj.jit(lambda x: lax.fori_loop(0, 4, lambda i, c: c + i, x))(np.zeros(3, dtype=np.int32))
    assert total.dtype == np.int32
    np.testing.assert_array_equal(total, [6, 6, 6])


def test_an_exception_in_the_test_stops_the_trace_before_the_body_runs():
    calls = []

    def cond(c):
        raise ValueError("from the test")

    def body(c):
        calls.append(c)
        return c

    with pytest.raises(ValueError, match="from the test"):
        rj.jit(lambda x: lax.while_loop(cond, body, x, max_iter=3))(np.ones((), dtype=np.bool_))
    assert calls == []
