"""The guide's PID kernel (called with keyword gains) balancing a simulated pendulum at 100 Hz
(examples/pendulum.py), against the same loop with the kernel written in NumPy."""

import os
import runpy

import numpy as np

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "pendulum.py")


def test_pendulum_example_balances_and_matches_numpy():
    example = runpy.run_path(EXAMPLE)
    angles, outputs = example["run"](seconds=8.0)
    assert abs(angles[0]) > 0.1
    assert np.max(np.abs(angles[-100:])) < 2e-3, angles[-100:]
    assert example["pid_update"].cache_info().misses == 1  # new gains or errors: no recompile

    # The same loop with NumPy's pid: the same trajectory.
    def numpy_pid(error, integral, derivative, kp, ki, kd):
        return np.clip(kp * error + ki * integral + kd * derivative, -1.0, 1.0)

    example["pid_update"] = numpy_pid
    run = example["run"]
    run.__globals__["pid_update"] = numpy_pid
    ref_angles, ref_outputs = run(seconds=8.0)
    np.testing.assert_allclose(outputs, ref_outputs, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(angles, ref_angles, rtol=1e-12, atol=1e-15)
