"""The controllers, filters and observers of `rfxjit.control` that carry state across calls:
the PID step with run-time gains (`pid_step`), the biquad (`biquad_step`) and the α-β tracker
(`alpha_beta_step`), the same equations and state convention as Rust's
`rfx_control::pid_tunable`, `biquad` and `alpha_beta` (docs/control.md).

State convention: a step takes `state` of shape `[..., S]` (the batch, then the `S` components)
and returns `state_next` of the same shape, which the caller passes as `state` next time. The
parameters are arrays too, so under `rfxjit.jit` new gains are new argument values and reuse
the compiled kernel. Written with the NumPy functions rfx traces: they run under `jit`,
differentiate, `vmap`, and run eagerly on NumPy arrays.

```python
import numpy as np
import rfxjit as rj
from rfxjit import control

step = rj.jit(control.pid_step)
params = control.pid_params(kp=8.0, ki=4.0, kd=0.5, dt=0.01, derivative_tf=0.02, kt=20.0,
                            command_min=-5.0, command_max=5.0)
state = control.pid_initial_state(np.zeros(4))     # four loops
command, state = step(np.ones(4), np.zeros(4), params, state)
```
"""

import math

import numpy as np

from . import numpy as _rnp
from ._errors import TraceError

PID_PARAMS = 10
PID_STATE = 3
BIQUAD_COEFFICIENTS = 5
BIQUAD_STATE = 2
ALPHA_BETA_PARAMS = 3
ALPHA_BETA_STATE = 2


def _float(x):
    x = _rnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    return x


def _components(x, n, name, what):
    x = _float(x)
    if x.ndim == 0 or x.shape[-1] != n:
        raise TraceError(f"{name}: {what} must have a last axis of {n} elements, got shape {tuple(x.shape)}")
    return [x[..., i] for i in range(n)]


def _stack(parts, batch):
    return np.stack([np.broadcast_to(p, batch) for p in parts], axis=-1)


def pid_params(kp, ki, kd, dt, derivative_tf=0.0, kt=0.0, command_min=-math.inf, command_max=math.inf,
               integral_min=-math.inf, integral_max=math.inf, dtype=np.float64):
    """The `params` array `[kp, ki, kd, dt, derivative_tf, kt, command_min, command_max,
    integral_min, integral_max]` of `pid_step` (Rust's `PidGains::to_params`). `kt` is the
    back-calculation gain (0: off), `derivative_tf` the derivative filter's time constant
    (0: unfiltered); the integral limits are in command units."""
    return np.array(
        [kp, ki, kd, dt, derivative_tf, kt, command_min, command_max, integral_min, integral_max], dtype=dtype
    )


def pid_initial_state(measurement, dtype=np.float64):
    """The state `[..., 3]` = `[integral, derivative, prev_measurement]` to start from at
    `measurement` (no integral, no derivative, no derivative kick on the first step)."""
    measurement = np.asarray(measurement, dtype=dtype)
    zero = np.zeros_like(measurement)
    return np.stack([zero, zero, measurement], axis=-1)


def pid_step(setpoint, measurement, params, state):
    """One PID step with run-time gains, a low-pass filtered derivative on the measurement and
    anti-windup by back-calculation beside the integral clamp; returns `(command, state_next)`.

    `params` is `[10]` (one tuning for the batch) or `[..., 10]` (`pid_params`), `state` is
    `[..., 3]` (`pid_initial_state`). With `h = dt`, `Tf = derivative_tf`:
    `derivative = (Tf·derivative - kd·(measurement - prev)) / (Tf + h)`,
    `v = kp·e + integral + derivative`, `command = clip(v, command_min, command_max)`,
    `integral = clip(integral + h·(ki·e + kt·(command - v)), integral_min, integral_max)`,
    `state_next = [integral, derivative, measurement]`."""
    kp, ki, kd, h, tf, kt, u_min, u_max, i_min, i_max = _components(params, PID_PARAMS, "pid_step", "params")
    integral, derivative, previous = _components(state, PID_STATE, "pid_step", "state")
    batch = tuple(np.shape(state))[:-1]
    error = setpoint - measurement
    derivative = (tf * derivative - kd * (measurement - previous)) / (tf + h)
    unsaturated = kp * error + integral + derivative
    command = np.clip(unsaturated, u_min, u_max)
    integral = np.clip(integral + h * (ki * error + kt * (command - unsaturated)), i_min, i_max)
    return np.broadcast_to(command, batch), _stack([integral, derivative, measurement], batch)


def butterworth_low_pass(cutoff_hz, dt, dtype=np.float64):
    """The coefficients `[b0, b1, b2, a1, a2]` of a second-order Butterworth low-pass with its
    -3 dB point at `cutoff_hz`, sampled every `dt` seconds (bilinear transform, pre-warped)."""
    k = math.tan(math.pi * cutoff_hz * dt)
    norm = 1.0 / (1.0 + math.sqrt(2.0) * k + k * k)
    b0 = k * k * norm
    return np.array([b0, 2.0 * b0, b0, 2.0 * (k * k - 1.0) * norm, (1.0 - math.sqrt(2.0) * k + k * k) * norm], dtype=dtype)


def biquad_step(x, coefficients, state):
    """One step of the second-order section `(b0 + b1 z⁻¹ + b2 z⁻²) / (1 + a1 z⁻¹ + a2 z⁻²)`
    in the transposed direct form II; returns `(y, state_next)`. `coefficients` is `[5]` or
    `[..., 5]` (`butterworth_low_pass`), `state` is `[..., 2]` (zeros: at rest)."""
    b0, b1, b2, a1, a2 = _components(coefficients, BIQUAD_COEFFICIENTS, "biquad_step", "coefficients")
    s1, s2 = _components(state, BIQUAD_STATE, "biquad_step", "state")
    batch = tuple(np.shape(state))[:-1]
    y = b0 * x + s1
    s1 = b1 * x - a1 * y + s2
    s2 = b2 * x - a2 * y
    return np.broadcast_to(y, batch), _stack([s1, s2], batch)


def alpha_beta_step(measurement, params, state):
    """One α-β tracker step (position and velocity from position measurements); returns
    `(residual, state_next)`. `params` is `[3]` or `[..., 3]` (`[alpha, beta, dt]`), `state`
    is `[..., 2]` (`[position, velocity]`): `predicted = position + dt·velocity`,
    `residual = measurement - predicted`, `position = predicted + alpha·residual`,
    `velocity = velocity + (beta/dt)·residual`."""
    alpha, beta, dt = _components(params, ALPHA_BETA_PARAMS, "alpha_beta_step", "params")
    position, velocity = _components(state, ALPHA_BETA_STATE, "alpha_beta_step", "state")
    batch = tuple(np.shape(state))[:-1]
    predicted = position + dt * velocity
    residual = measurement - predicted
    return np.broadcast_to(residual, batch), _stack(
        [predicted + alpha * residual, velocity + beta / dt * residual], batch
    )
