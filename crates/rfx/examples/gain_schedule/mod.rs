//! The gain schedule of the lookup example and of the lookup tests (`tests/lookup.rs` includes
//! this file).

use rfx::Tensor;

/// A gain scheduled on speed: linear interpolation in a table of 16 gains at speeds 0, 0.4,
/// ..., 6.0 (knots 0.4 apart), clamped at both ends.
pub(crate) fn schedule(v: Tensor, table: Tensor) -> Tensor {
    let pos = (v * 2.5).clamp(0.0, 14.999);
    let i = pos.floor();
    let t = pos - i;
    let lo = table.take(i, 0);
    let hi = table.take(i + 1.0, 0);
    lo + t * (hi - lo)
}
