//! The PID step.

use rfx::Jit;

use crate::build::{ControlKernel, func};

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
