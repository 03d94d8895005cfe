"""rfxjit.control's stateful steps (pid_step, biquad_step) against plain-float simulations of
many steps, under jit with the state passed back each call, and retuned without a recompile."""

import math

import numpy as np
import pytest

import rfxjit as rj
from rfxjit import control

DT = 0.01


def reference_pid(g, setpoint, y, state):
    """One PID step in Python floats, the documented equations; returns (command, state)."""
    kp, ki, kd, h, tf, kt, u_min, u_max, i_min, i_max = g
    integral, derivative, previous = state
    e = setpoint - y
    derivative = (tf * derivative - kd * (y - previous)) / (tf + h)
    v = kp * e + integral + derivative
    u = min(max(v, u_min), u_max)
    integral = min(max(integral + h * (ki * e + kt * (u - v)), i_min), i_max)
    return u, (integral, derivative, y)


def plant(position, velocity, u):
    velocity += (u - 0.5 * velocity) * DT
    return position + velocity * DT, velocity


def closed_loop(step, tunings, setpoint, steps, state=None, positions=None):
    """Runs len(tunings) loops through `step` (params [B, 10]) and the reference side by side;
    returns (positions, state, peaks)."""
    batch = len(tunings)
    params = np.stack([control.pid_params(**t) for t in tunings])
    state = control.pid_initial_state(np.zeros(batch)) if state is None else state
    pos = np.zeros(batch) if positions is None else positions[0]
    vel = np.zeros(batch) if positions is None else positions[1]
    ref_state = [tuple(s) for s in state]
    ref_pos, ref_vel = list(pos), list(vel)
    peaks = np.full(batch, -np.inf)
    for k in range(steps):
        command, state = step(np.full(batch, setpoint), pos, params, state)
        for b in range(batch):
            want, ref_state[b] = reference_pid(params[b], setpoint, ref_pos[b], ref_state[b])
            assert command[b] == pytest.approx(want, rel=1e-12, abs=1e-12), (b, k)
            ref_pos[b], ref_vel[b] = plant(ref_pos[b], ref_vel[b], want)
        pos, vel = plant(pos, vel, command)
        peaks = np.maximum(peaks, pos)
    np.testing.assert_allclose(state, np.array(ref_state), rtol=1e-11, atol=1e-12)
    return (pos, vel), state, peaks


GAINS = dict(kp=8.0, ki=4.0, kd=3.0, dt=DT, derivative_tf=0.05, command_min=-100.0, command_max=100.0,
             integral_min=-50.0, integral_max=50.0)


def test_pid_step_response_under_jit_matches_the_reference():
    step = rj.jit(control.pid_step)
    (pos, _), _, _ = closed_loop(step, [GAINS, dict(GAINS, derivative_tf=0.0)], 1.0, 1200)
    np.testing.assert_allclose(pos, [1.0, 1.0], atol=1e-3)
    assert step.cache_info().misses == 1


def test_pid_back_calculation_limits_the_windup_overshoot():
    saturating = dict(GAINS, command_min=-3.0, command_max=3.0, integral_min=-math.inf, integral_max=math.inf)
    step = rj.jit(control.pid_step)
    (pos, _), _, peaks = closed_loop(step, [saturating, dict(saturating, kt=10.0)], 2.0, 2500)
    overshoot = peaks - 2.0
    assert overshoot[0] > 0.3
    assert overshoot[1] < overshoot[0] / 2
    np.testing.assert_allclose(pos, [2.0, 2.0], atol=1e-2)


def test_pid_retuned_between_calls_reuses_the_compiled_kernel():
    step = rj.jit(control.pid_step)
    soft = dict(GAINS, kp=2.0, ki=0.5, kd=1.0)
    stiff = dict(GAINS, kp=20.0, ki=10.0, kd=5.0, derivative_tf=0.02, kt=5.0, command_max=30.0)
    positions, state, _ = closed_loop(step, [soft, GAINS], 1.0, 150)
    positions, state, _ = closed_loop(step, [stiff, soft], -0.5, 150, state, positions)
    assert step.cache_info().misses == 1
    assert step.cache_info().hits == 299


def test_pid_step_eager_shared_params_and_gradient():
    # One tuning for three loops, eagerly on NumPy arrays; d command / d kp = e unsaturated.
    params = control.pid_params(**GAINS)
    state = control.pid_initial_state([0.5, 0.0, 0.0])
    command, state_next = control.pid_step(np.array([1.0, -1.0, 0.5]), np.array([0.25, 0.5, 0.5]), params, state)
    for b, (r, y) in enumerate([(1.0, 0.25), (-1.0, 0.5), (0.5, 0.5)]):
        want, ref = reference_pid(params, r, y, tuple(state[b]))
        assert command[b] == pytest.approx(want, rel=1e-14)
        np.testing.assert_allclose(state_next[b], ref, rtol=1e-14)
    dkp = rj.grad(lambda p: control.pid_step(1.0, 0.25, p, control.pid_initial_state(0.25))[0])(params)
    np.testing.assert_allclose(dkp[0], 0.75, rtol=1e-14)


def test_wrong_state_or_params_size_is_a_trace_error():
    with pytest.raises(rj.TraceError, match="pid_step: state"):
        control.pid_step(1.0, 0.0, control.pid_params(1.0, 0.0, 0.0, DT), np.zeros(2))
    with pytest.raises(rj.TraceError, match="pid_step: params"):
        rj.jit(control.pid_step)(1.0, 0.0, np.zeros(9), np.zeros(3))
    with pytest.raises(rj.TraceError, match="biquad_step: coefficients"):
        control.biquad_step(1.0, np.zeros(4), np.zeros(2))


def reference_biquad(c, x):
    """Direct form I: y[n] = b0 x[n] + b1 x[n-1] + b2 x[n-2] - a1 y[n-1] - a2 y[n-2]."""
    b0, b1, b2, a1, a2 = c
    y = []
    for n in range(len(x)):
        xs = [x[n - k] if n >= k else 0.0 for k in range(3)]
        ys = [y[n - k] if n >= k else 0.0 for k in (1, 2)]
        y.append(b0 * xs[0] + b1 * xs[1] + b2 * xs[2] - a1 * ys[0] - a2 * ys[1])
    return y


def test_biquad_step_matches_direct_form_one_and_the_butterworth_gain():
    coefficients = np.stack([control.butterworth_low_pass(5.0, DT), [0.2, -0.1, 0.05, -0.5, 0.25]])
    rng = np.random.default_rng(7)
    signals = rng.uniform(-1, 1, size=(2, 300))
    step = rj.jit(control.biquad_step)
    state = np.zeros((2, 2))
    out = []
    for n in range(300):
        y, state = step(signals[:, n], coefficients, state)
        out.append(y)
    out = np.array(out).T
    for b in range(2):
        np.testing.assert_allclose(out[b], reference_biquad(coefficients[b], list(signals[b])), rtol=1e-12, atol=1e-14)
    # The Butterworth section's gain: 1 at DC, 1/√2 at the cut-off (from the coefficients).
    b0, b1, b2, a1, a2 = control.butterworth_low_pass(5.0, DT)
    z = np.exp(-2j * np.pi * 5.0 * DT)
    assert (b0 + b1 + b2) / (1 + a1 + a2) == pytest.approx(1.0, rel=1e-14)
    assert abs((b0 + b1 * z + b2 * z * z) / (1 + a1 * z + a2 * z * z)) == pytest.approx(1 / math.sqrt(2), rel=1e-12)
    assert step.cache_info().misses == 1


def test_alpha_beta_step_tracks_a_ramp_and_matches_the_reference():
    params = np.array([[0.5, 0.2, DT], [0.85, 0.5, DT]])
    step = rj.jit(control.alpha_beta_step)
    state = np.zeros((2, 2))
    reference = [[0.0, 0.0], [0.0, 0.0]]
    for n in range(600):
        t = n * DT
        z = np.full(2, 1.0 + 3.0 * t)
        residual, state = step(z, params, state)
        for b in range(2):
            alpha, beta, dt = params[b]
            predicted = reference[b][0] + dt * reference[b][1]
            want = z[b] - predicted
            reference[b] = [predicted + alpha * want, reference[b][1] + beta / dt * want]
            assert residual[b] == pytest.approx(want, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(state, np.array(reference), rtol=1e-12)
    np.testing.assert_allclose(state[:, 0], 1.0 + 3.0 * 599 * DT, atol=1e-6)
    np.testing.assert_allclose(state[:, 1], 3.0, atol=1e-5)
    assert step.cache_info().misses == 1
