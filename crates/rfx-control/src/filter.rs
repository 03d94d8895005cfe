//! Filters: first-order low-pass (one step, or run over whole signals), complementary, moving
//! average.

use rfx::Jit;

use crate::build::{ControlKernel, column, func};

/// The first-order low-pass step `y = y_prev + alpha·(x - y_prev)`, elementwise.
///
/// Inputs `x`, `y_prev`, `alpha` (any shape that broadcasts: one `alpha` for all, or one per
/// element; `0 < alpha <= 1`, see [`low_pass_alpha`]); output `y`.
pub fn low_pass() -> Jit<ControlKernel> {
    let inputs = ["x", "y_prev", "alpha"];
    let step = func("low_pass", inputs, |[x, y_prev, alpha]| {
        vec![y_prev + alpha * (x - y_prev)]
    });
    ControlKernel::new("low_pass", &inputs).part(step, &["y"]).jit()
}

/// The [`low_pass`] coefficient for a cut-off frequency `cutoff_hz` sampled every `dt` seconds:
/// `dt / (dt + 1/(2π·cutoff_hz))` (the RC filter discretised by backward Euler).
pub fn low_pass_alpha(cutoff_hz: f64, dt: f64) -> f64 {
    let rc = 1.0 / (2.0 * std::f64::consts::PI * cutoff_hz);
    dt / (dt + rc)
}

/// The [`low_pass`] filter run over whole signals: `y[t] = y[t-1] + alpha·(x[t] - y[t-1])` from
/// `y[-1] = y_prev`, one linear recurrence (`y[t] = (1 - alpha)·y[t-1] + alpha·x[t]`, a
/// [`rfx::Tensor::linrec`]) along each row in one ordered loop nest: smoothing a logged or
/// buffered signal, or a horizon of predicted samples, in one call.
///
/// Inputs `x` `[N, T]` (N signals of T samples), `y_prev` `[N]` (each filter's state before
/// its first sample), `alpha` (`[]` for one value, or `[N]` for one per signal; `0 < alpha <=
/// 1`, see [`low_pass_alpha`]). Outputs `y` `[N, T]` and `y_last` `[N]` (the state after the
/// last sample: the next block's `y_prev`). The values are [`low_pass`] iterated over the
/// samples up to rounding (the recurrence rounds `(1 - alpha)·y` and `alpha·x` separately).
pub fn low_pass_signal() -> Jit<ControlKernel> {
    let inputs = ["x", "y_prev", "alpha"];
    let run = func("low_pass_signal", inputs, |[x, y_prev, alpha]| {
        let steps = x.shape().dims().get(1).copied().unwrap_or(0);
        let alpha = column(alpha);
        let keep = 1.0 - alpha;
        // The state before the first sample enters through the first sample's drive.
        let start = (keep * column(y_prev)).broadcast_to(x.shape().clone());
        let first = x.indices(1).eq(0.0);
        let driven = alpha * x + first.select(start, 0.0);
        let y = driven.linrec(keep, 1, false);
        // No samples leave the state as it was.
        let y_last = match steps {
            0 => y_prev * 1.0,
            _ => y.index_axis(1, steps - 1),
        };
        vec![y, y_last]
    });
    ControlKernel::new("low_pass_signal", &inputs)
        .part(run, &["y", "y_last"])
        .jit()
}

/// The complementary filter step for one tilt angle, elementwise:
/// `angle = alpha·(angle + gyro·dt) + (1 - alpha)·atan2(accel_y, accel_z)`.
///
/// Inputs `angle` (rad), `gyro` (rad/s about the same axis), `accel_y`, `accel_z` (the
/// accelerometer's components in the plane of rotation; any unit), `alpha` (the gyro's weight,
/// `0..=1`), `dt` (s); `alpha` and `dt` broadcast (`[]` for one value). Output `angle`.
/// The accelerometer angle is in `(-π, π]`; the filter does not unwrap angles.
pub fn complementary() -> Jit<ControlKernel> {
    let inputs = ["angle", "gyro", "accel_y", "accel_z", "alpha", "dt"];
    let step = func("complementary", inputs, |[angle, gyro, ay, az, alpha, dt]| {
        let integrated = angle + gyro * dt;
        let measured = ay.atan2(az);
        vec![alpha * integrated + (1.0 - alpha) * measured]
    });
    ControlKernel::new("complementary", &inputs)
        .part(step, &["angle"])
        .jit()
}

/// The moving average over a fixed window: input `window` of shape `[N, K]` (the last K samples
/// of each of N signals, in any order), output `mean` of shape `[N]` (the mean over axis 1).
/// The window length K is the input's second dimension; each K compiles its own kernel.
pub fn moving_average() -> Jit<ControlKernel> {
    let inputs = ["window"];
    let step = func("moving_average", inputs, |[window]| vec![window.mean(1usize)]);
    ControlKernel::new("moving_average", &inputs)
        .part(step, &["mean"])
        .jit()
}
