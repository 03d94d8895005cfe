//! Helpers of the state-in/state-out convention: a kernel's `state` input `[.., S]` split into
//! its `S` components, and the components of `state_next` stacked back along the last axis.

use rfx::Tensor;

use crate::build::column;

/// The batch shape of a `state` `[.., S]`: its dims without the last axis (empty for a
/// state of rank 0, which the component split then rejects with a typed error).
pub(crate) fn batch_dims(state: Tensor) -> Vec<usize> {
    let mut dims = state.shape().dims().to_vec();
    dims.pop();
    dims
}

/// The `N` components of `t` along its last axis (`t[.., k]`). A last axis of another extent
/// fails the trace with a typed error (of the `reshape` to `[.., N]`: the element counts
/// differ), and so does a `t` of rank 0 (of the `index` op).
pub(crate) fn components<const N: usize>(t: Tensor) -> [Tensor; N] {
    let rank = t.shape().rank();
    let t = match rank {
        0 => t,
        _ => {
            let mut dims = batch_dims(t);
            dims.push(N);
            t.reshape(dims)
        }
    };
    let last = rank.saturating_sub(1);
    std::array::from_fn(|k| t.index_axis(last, k))
}

/// `parts`, each broadcast to `batch`, stacked along a new last axis: `[.., parts.len()]`.
pub(crate) fn stack_last(parts: &[Tensor], batch: &[usize]) -> Tensor {
    let columns: Vec<Tensor> = parts
        .iter()
        .map(|&p| column(p.broadcast_to(batch.to_vec())))
        .collect();
    rfx::concat(&columns, batch.len())
}
