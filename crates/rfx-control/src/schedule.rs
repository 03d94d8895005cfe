//! Gain scheduling: a gain read from a table by the operating point.

use rfx::Jit;

use crate::build::{ControlKernel, func};

/// A gain scheduled on an operating point (a speed, a payload, an altitude), elementwise over N
/// loops: linear interpolation in a table of K gains given at the evenly spaced points `x0,
/// x0 + dx, ..., x0 + (K - 1)·dx`, held at the end values outside them.
///
/// Inputs `x` (N operating points) and `table` (K >= 1 gains, shared by every loop; an input, so
/// a new schedule needs no recompile, and a new K compiles its own kernel); output `gain`:
///
/// ```text
/// p    = clamp((x - x0) / dx, 0, K - 1)
/// i    = min(floor(p), K - 2)                  (0 when K = 1)
/// gain = table[i] + (p - i)·(table[i + 1] - table[i])
/// ```
///
/// The two reads are lookups by a computed index inside the kernel's one loop
/// ([`rfx::Tensor::take`]); a NaN operating point gives a NaN gain. `dx` must be positive.
pub fn gain_schedule(x0: f64, dx: f64) -> Jit<ControlKernel> {
    let inputs = ["x", "table"];
    let step = func("gain_schedule", inputs, move |[x, table]| {
        let k = table.shape().dims().first().copied().unwrap_or(1);
        let last = k.saturating_sub(1) as f64;
        let p = ((x - x0) / dx).clamp(0.0, last);
        let i = p.floor().min(k.saturating_sub(2) as f64);
        let lo = table.take(i, 0);
        let hi = table.take(i + 1.0, 0);
        vec![lo + (p - i) * (hi - lo)]
    });
    ControlKernel::new("gain_schedule", &inputs)
        .part(step, &["gain"])
        .jit()
}
