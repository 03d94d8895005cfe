//! The PID steps: gains compiled in ([`pid`]), or a run-time input with a filtered
//! derivative and back-calculation ([`pid_tunable`]).

use rfx::Jit;

use crate::build::{ControlKernel, func};
use crate::state::{batch_dims, components, stack_last};

/// The constants of a [`pid`] kernel. They are compiled into the kernel: changing one means
/// building a new kernel (a compile of well under a millisecond to a few milliseconds), so they
/// suit fixed gains. Gains that change with the operating point are inputs of a kernel of your
/// own, computed for instance by [`crate::gain_schedule`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PidConfig {
    /// Proportional gain.
    pub kp: f64,
    /// Integral gain.
    pub ki: f64,
    /// Derivative gain (the derivative is taken on the measurement).
    pub kd: f64,
    /// The sample period in seconds (> 0).
    pub dt: f64,
    /// Anti-windup limits of the integral term, in command units (`integral_min <= integral_max`).
    pub integral_min: f64,
    /// See [`PidConfig::integral_min`].
    pub integral_max: f64,
    /// Output saturation limits (`command_min <= command_max`).
    pub command_min: f64,
    /// See [`PidConfig::command_min`].
    pub command_max: f64,
}

/// The PID step, elementwise over N loops.
///
/// Inputs `setpoint`, `measurement`, `prev_measurement`, `integral`; outputs `command`,
/// `integral` (the new integral state, to feed back next step):
///
/// ```text
/// e        = setpoint - measurement
/// integral = clamp(integral + ki·dt·e, integral_min, integral_max)     (anti-windup)
/// command  = clamp(kp·e + integral - kd·(measurement - prev_measurement)/dt,
///                  command_min, command_max)
/// ```
///
/// The integral state is the integral *term* (already multiplied by `ki`), so its clamp is in
/// command units. Taking the derivative on the measurement avoids the kick of a set-point step.
pub fn pid(config: PidConfig) -> Jit<ControlKernel> {
    let inputs = ["setpoint", "measurement", "prev_measurement", "integral"];
    let step = func("pid", inputs, move |[r, y, y_prev, integral]| {
        let c = config;
        let error = r - y;
        let integral = (integral + error * (c.ki * c.dt)).clamp(c.integral_min, c.integral_max);
        let derivative = (y - y_prev) * (-c.kd / c.dt);
        let command = (error * c.kp + integral + derivative).clamp(c.command_min, c.command_max);
        vec![command, integral]
    });
    ControlKernel::new("pid", &inputs)
        .part(step, &["command", "integral"])
        .jit()
}

/// The number of entries of [`pid_tunable`]'s `params` input: [`PidGains::to_params`].
pub const PID_PARAMS: usize = 10;

/// The number of entries of [`pid_tunable`]'s `state`: `[integral, derivative,
/// prev_measurement]` ([`PidGains::initial_state`]).
pub const PID_STATE: usize = 3;

/// The parameters of a [`pid_tunable`] step, passed at run time as its `params` input (the
/// array of [`PidGains::to_params`]): writing new numbers into that buffer retunes the
/// controller on the next call, with no new compile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PidGains {
    /// Proportional gain.
    pub kp: f64,
    /// Integral gain (per second).
    pub ki: f64,
    /// Derivative gain (seconds; the derivative is taken on the measurement).
    pub kd: f64,
    /// The sample period in seconds (> 0).
    pub dt: f64,
    /// The time constant of the derivative's first-order low-pass filter, in seconds (`>= 0`;
    /// `0` is the unfiltered difference quotient). A common choice is `kd / (kp · n)` with `n`
    /// between 2 and 20.
    pub derivative_tf: f64,
    /// The back-calculation (tracking) gain of the anti-windup, per second (`>= 0`; `0` turns
    /// it off). It bleeds the integral by `kt · (command - unsaturated command)` while the
    /// output saturates; `1 / kt` between `√(Ti·Td)` and `Ti` is the usual range.
    pub kt: f64,
    /// Output saturation limits (`command_min <= command_max`).
    pub command_min: f64,
    /// See [`PidGains::command_min`].
    pub command_max: f64,
    /// Clamping limits of the integral term, in command units (`integral_min <= integral_max`;
    /// `±∞` for back-calculation alone).
    pub integral_min: f64,
    /// See [`PidGains::integral_min`].
    pub integral_max: f64,
}

impl PidGains {
    /// The `params` input of [`pid_tunable`]: `[kp, ki, kd, dt, derivative_tf, kt,
    /// command_min, command_max, integral_min, integral_max]`.
    pub fn to_params(&self) -> [f64; PID_PARAMS] {
        [
            self.kp,
            self.ki,
            self.kd,
            self.dt,
            self.derivative_tf,
            self.kt,
            self.command_min,
            self.command_max,
            self.integral_min,
            self.integral_max,
        ]
    }

    /// The state to start from at `measurement`: no integral, no derivative, and the
    /// measurement as the previous one (so the first step has no derivative kick).
    pub fn initial_state(measurement: f64) -> [f64; PID_STATE] {
        [0.0, 0.0, measurement]
    }
}

/// The PID step with its gains and limits as a run-time input, a low-pass filtered
/// derivative, and anti-windup by back-calculation beside the integral's clamp, elementwise
/// over a batch of loops. It follows the crate's state convention (the `state` input and the
/// `state_next` output have one shape; the caller swaps the two buffers after each call).
///
/// Inputs `setpoint`, `measurement` (the batch shape `[..]`, or `[]` to broadcast), `params`
/// `[PID_PARAMS]` for one tuning shared by the batch or `[.., PID_PARAMS]` for one per loop
/// ([`PidGains::to_params`]), `state` `[.., PID_STATE]` (`[integral, derivative,
/// prev_measurement]`, from [`PidGains::initial_state`]). Outputs `command` `[..]` and
/// `state_next` `[.., PID_STATE]`. With `h = dt` and `Tf = derivative_tf`:
///
/// ```text
/// e          = setpoint - measurement
/// derivative = (Tf·derivative - kd·(measurement - prev_measurement)) / (Tf + h)
/// v          = kp·e + integral + derivative                     (unsaturated command)
/// command    = clamp(v, command_min, command_max)
/// integral   = clamp(integral + h·(ki·e + kt·(command - v)), integral_min, integral_max)
/// state_next = [integral, derivative, measurement]
/// ```
///
/// The derivative is the backward-Euler discretisation of `kd·s / (1 + Tf·s)` acting on
/// `-measurement` (`Tf = 0`: `-kd·Δmeasurement/h`); the integral is a forward-Euler
/// integrator updated after the output (the command of a step uses the integral of the steps
/// before it). The step is the discretisation in Åström and Hägglund's *Advanced PID Control*
/// with set-point weights `b = 1`, `c = 0`. The kernel compiles once per input
/// signature: new gains, limits, `dt` or filter constants are new numbers in `params`.
///
/// ```
/// use rfx::{DType, TensorType};
/// use rfx_control::{PID_PARAMS, PID_STATE, PidGains, pid_tunable};
///
/// let gains = PidGains {
///     kp: 2.0, ki: 1.0, kd: 0.0, dt: 0.01, derivative_tf: 0.0, kt: 0.0,
///     command_min: -10.0, command_max: 10.0, integral_min: -1.0, integral_max: 1.0,
/// };
/// let jit = pid_tunable();
/// let ty = |dims: &[usize]| TensorType::new(DType::F64, dims.to_vec());
/// let mut pid = jit.bind(&[ty(&[]), ty(&[]), ty(&[PID_PARAMS]), ty(&[PID_STATE])])?;
/// let (mut state, mut state_next) = (PidGains::initial_state(0.0), [0.0; PID_STATE]);
/// let mut command = [0.0];
/// let mut params = gains.to_params();
/// for _ in 0..2 {
///     pid.run_slices([&[1.0][..], &[0.0], &params, &state], [&mut command[..], &mut state_next])?;
///     std::mem::swap(&mut state, &mut state_next); // state_next becomes the next call's state
/// }
/// // Second step: kp·e + the integral of the first step, ki·dt·e.
/// assert!((command[0] - (2.0 + 0.01)).abs() < 1e-12);
/// params[0] = 4.0; // retuned kp: the next call uses it, nothing is compiled
/// pid.run_slices([&[1.0][..], &[0.0], &params, &state], [&mut command[..], &mut state_next])?;
/// assert!((command[0] - (4.0 + 0.02)).abs() < 1e-12);
/// assert_eq!(jit.compile_count(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn pid_tunable() -> Jit<ControlKernel> {
    let inputs = ["setpoint", "measurement", "params", "state"];
    let step = func("pid_tunable", inputs, |[r, y, params, state]| {
        let [kp, ki, kd, h, tf, kt, u_min, u_max, i_min, i_max] = components::<PID_PARAMS>(params);
        let [integral, derivative, y_prev] = components::<PID_STATE>(state);
        let batch = batch_dims(state);
        let error = r - y;
        let derivative = (tf * derivative - kd * (y - y_prev)) / (tf + h);
        let unsaturated = kp * error + integral + derivative;
        let command = unsaturated.clamp(u_min, u_max);
        let integral = (integral + h * (ki * error + kt * (command - unsaturated))).clamp(i_min, i_max);
        vec![
            command.broadcast_to(batch.clone()),
            stack_last(&[integral, derivative, y], &batch),
        ]
    });
    ControlKernel::new("pid_tunable", &inputs)
        .part(step, &["command", "state_next"])
        .jit()
}
