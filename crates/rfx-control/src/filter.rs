//! Filters: first-order low-pass (one step, or run over whole signals), complementary, moving
//! average, and the second-order section (biquad) with run-time coefficients.

use rfx::Jit;

use crate::build::{ControlKernel, column, func};
use crate::state::{batch_dims, components, stack_last};

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

/// The number of entries of [`biquad`]'s `coefficients`: `[b0, b1, b2, a1, a2]`.
pub const BIQUAD_COEFFICIENTS: usize = 5;

/// The number of entries of [`biquad`]'s `state` (the two delays of the transposed direct
/// form II).
pub const BIQUAD_STATE: usize = 2;

/// The second-order IIR section (biquad) step, elementwise over a batch of signals, with its
/// coefficients as a run-time input; it follows the crate's state convention (`state` in,
/// `state_next` out, one shape).
///
/// The transfer function is `(b0 + b1·z⁻¹ + b2·z⁻²) / (1 + a1·z⁻¹ + a2·z⁻²)`, computed in the
/// transposed direct form II (two delays, the form with the best rounding of the direct
/// forms):
///
/// ```text
/// y  = b0·x + s1
/// s1 = b1·x - a1·y + s2
/// s2 = b2·x - a2·y
/// ```
///
/// Inputs `x` `[..]`, `coefficients` `[BIQUAD_COEFFICIENTS]` (one filter for the batch) or
/// `[.., BIQUAD_COEFFICIENTS]` (one per signal), `state` `[.., BIQUAD_STATE]` (zeros to start
/// from rest; [`biquad_rest_state`] to start settled at a constant input). Outputs `y` `[..]`
/// and `state_next` `[.., BIQUAD_STATE]`. [`butterworth_low_pass`] gives the coefficients of
/// a second-order Butterworth low-pass.
pub fn biquad() -> Jit<ControlKernel> {
    let inputs = ["x", "coefficients", "state"];
    let step = func("biquad", inputs, |[x, coefficients, state]| {
        let [b0, b1, b2, a1, a2] = components::<BIQUAD_COEFFICIENTS>(coefficients);
        let [s1, s2] = components::<BIQUAD_STATE>(state);
        let batch = batch_dims(state);
        let y = b0 * x + s1;
        let s1 = b1 * x - a1 * y + s2;
        let s2 = b2 * x - a2 * y;
        vec![y.broadcast_to(batch.clone()), stack_last(&[s1, s2], &batch)]
    });
    ControlKernel::new("biquad", &inputs)
        .part(step, &["y", "state_next"])
        .jit()
}

/// The coefficients `[b0, b1, b2, a1, a2]` of a second-order Butterworth low-pass with
/// cut-off `cutoff_hz` (its -3 dB point) sampled every `dt` seconds, by the bilinear transform
/// with the cut-off pre-warped (`K = tan(π·cutoff_hz·dt)`; `0 < cutoff_hz < 1/(2·dt)`). The
/// gain at DC is 1.
pub fn butterworth_low_pass(cutoff_hz: f64, dt: f64) -> [f64; BIQUAD_COEFFICIENTS] {
    let k = (std::f64::consts::PI * cutoff_hz * dt).tan();
    let k2 = k * k;
    let sqrt2 = std::f64::consts::SQRT_2;
    let norm = 1.0 / (1.0 + sqrt2 * k + k2);
    let b0 = k2 * norm;
    [
        b0,
        2.0 * b0,
        b0,
        2.0 * (k2 - 1.0) * norm,
        (1.0 - sqrt2 * k + k2) * norm,
    ]
}

/// The [`biquad`] state of a filter that has seen the constant input `x` forever (its output
/// the DC gain times `x`), so a filter started at a measurement does not ramp up from zero.
/// The state of an unstable filter (`1 + a1 + a2 = 0`) is not finite.
pub fn biquad_rest_state(coefficients: [f64; BIQUAD_COEFFICIENTS], x: f64) -> [f64; BIQUAD_STATE] {
    let [b0, b1, b2, a1, a2] = coefficients;
    let y = x * (b0 + b1 + b2) / (1.0 + a1 + a2);
    let s2 = b2 * x - a2 * y;
    let s1 = y - b0 * x;
    [s1, s2]
}
