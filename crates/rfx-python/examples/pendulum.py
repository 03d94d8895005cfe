"""rfxJIT's PID kernel in a 100 Hz control loop, balancing a simulated inverted pendulum.

The kernel is the guide's `pid_update`, unchanged; the robot is replaced by a pendulum written
here (semi-implicit Euler at the loop's rate). Run: `python examples/pendulum.py`.
"""

import numpy as np

import rfxjit as rj


@rj.jit
def pid_update(error, integral, derivative, kp, ki, kd):
    output = kp * error + ki * integral + kd * derivative
    return np.clip(output, -1.0, 1.0)


class InvertedPendulum:
    """θ'' = g/l·sin θ − c·θ' + k·u: upright at θ = 0, unstable without control."""

    def __init__(self, theta=0.3, g=9.81, length=1.0, damping=0.2, torque_per_unit=40.0):
        self.theta, self.omega = theta, 0.0
        self.g, self.length, self.damping, self.k = g, length, damping, torque_per_unit

    def step(self, u, dt):
        alpha = self.g / self.length * np.sin(self.theta) - self.damping * self.omega + self.k * u
        self.omega += alpha * dt
        self.theta += self.omega * dt


def run(seconds=5.0, rate_hz=100, gains=(0.5, 0.1, 0.05), setpoint=0.0):
    """Runs the loop; returns the angles and the controller outputs, one per tick."""
    dt = 1.0 / rate_hz
    plant = InvertedPendulum()
    kp, ki, kd = gains
    integral = 0.0
    prev_error = setpoint - plant.theta
    angles, outputs = [], []
    for _ in range(int(seconds * rate_hz)):
        error = setpoint - plant.theta
        integral += error * dt
        derivative = (error - prev_error) / dt
        output = pid_update(
            np.array([error]),
            np.array([integral]),
            np.array([derivative]),
            kp=kp,
            ki=ki,
            kd=kd,
        )
        plant.step(output[0], dt)
        prev_error = error
        angles.append(plant.theta)
        outputs.append(output[0])
    return np.array(angles), np.array(outputs)


if __name__ == "__main__":
    angles, outputs = run()
    print(f"start {0.3:+.4f} rad, after 1 s {angles[99]:+.4f} rad, after 5 s {angles[-1]:+.6f} rad")
    print(f"compiled {pid_update.cache_info().misses} time(s) for {len(angles)} ticks")
