//! Concatenations stored part by part.
//!
//! A traced `concat` (and so every `stack`, block matrix and vector of scalars) is a chain of
//! `select`s by position along one axis over `pad`s that place each part at its offset. Fused
//! as it stands, every point of the result would compute every part and choose one, so a
//! result of `k` parts costs `O(k)` per element. When the result is stored anyway (a kernel
//! output, the operand of a reshape, a gather's table), the chain is not computed at all: its
//! buffer is filled part by part, and what reads it runs after the last part (a dependency
//! on a buffer, never a value computed in the reader's kernel). Each `pad` placing a part becomes a
//! root whose iteration space is the part's and whose store has a region
//! (`rfx_ir::mir::Region`) putting the part's points where they lie in the output, so each part
//! is computed once per element it fills. The part itself is an ordinary value: what else reads
//! it computes or loads it as fusion decides for any shared value. Parts of one shape share a
//! loop nest like any roots, so `k` scalars stacked per batch row are one kernel over the batch
//! with `k` stores. A part that is itself such a chain read by nothing else (a block row of a
//! block matrix) is split the same way, its regions composed with its parent's. A constant part
//! (a zero block, whose `pad` of zeros folds to zeros) is stored by the loop nest that stores
//! another part of the same value at the same points, or else by a kernel of its own that
//! reads nothing, before every other kernel.

use std::collections::BTreeMap;

use rfx_ir::hir::{Kernel, Op, ValueId};
use rfx_ir::mir::Region;
use rfx_ir::semantics::{compare, index_value};
use rfx_ir::{Scalar, Shape};

use crate::report::MissReason;

/// The outputs split into parts, and where each part is stored.
#[derive(Default)]
pub(super) struct Splits {
    /// Each `pad` placing a part, with the output it is stored into and the region there.
    pub(super) parts: BTreeMap<ValueId, (ValueId, Region)>,
    /// The split values, each with the `pad`s placing its parts.
    pub(super) wholes: BTreeMap<ValueId, Vec<ValueId>>,
    /// The parts that are one constant (a zero block: a `pad` of zeros folds to zeros): the
    /// split value, the region, the part's shape and the constant.
    pub(super) fills: Vec<Fill>,
    /// The nodes of the chains (their `select`s, and the `pad`s and values of nested chains),
    /// which no kernel computes any more.
    pub(super) dead: Vec<ValueId>,
}

/// A constant part of a split value, stored by a kernel of its own that reads nothing.
pub(super) struct Fill {
    pub(super) whole: ValueId,
    pub(super) region: Region,
    pub(super) shape: Shape,
    pub(super) value: Scalar,
}

/// Finds the stored values (`roots`, the values stored so far) that are concatenations.
/// `uses` counts each value's live readers.
pub(super) fn split_concatenations(
    kernel: &Kernel,
    uses: &[usize],
    roots: &BTreeMap<ValueId, Option<MissReason>>,
) -> Splits {
    let mut splits = Splits::default();
    for &whole in roots.keys() {
        let Some(ty) = kernel.value_type(whole) else {
            continue;
        };
        let dims = ty.shape.dims().to_vec();
        let region = Region {
            strides: ty.shape.strides(),
            offset: 0,
            row: None,
        };
        let mut found = Found::default();
        if !is_chain(kernel, whole) || !flatten(kernel, uses, whole, &dims, region, &mut found) {
            continue;
        }
        // A chain inside another split chain is that chain's business.
        if found.nodes.iter().any(|n| splits.wholes.contains_key(n)) {
            continue;
        }
        let pads: Vec<ValueId> = found.parts.iter().map(|(pad, _)| *pad).collect();
        if pads
            .iter()
            .any(|p| splits.parts.contains_key(p) || roots.contains_key(p))
        {
            continue;
        }
        for (pad, region) in found.parts {
            splits.parts.insert(pad, (whole, region));
        }
        for (region, shape, value) in found.fills {
            splits.fills.push(Fill {
                whole,
                region,
                shape,
                value,
            });
        }
        splits.wholes.insert(whole, pads);
        splits.dead.extend(found.nodes);
    }
    splits
}

/// What one output's chain is made of: the `pad`s placing parts with their regions, and the
/// nodes no kernel computes once the parts are stored.
#[derive(Default)]
struct Found {
    parts: Vec<(ValueId, Region)>,
    fills: Vec<(Region, Shape, Scalar)>,
    nodes: Vec<ValueId>,
}

/// The constant `value` is, if it is one (a constant, or one broadcast).
fn constant(kernel: &Kernel, value: ValueId) -> Option<Scalar> {
    let node = kernel.node(value)?;
    match node.op {
        Op::Const(c) => Some(c),
        Op::BroadcastTo => constant(kernel, *node.args.first()?),
        _ => None,
    }
}

/// A `select` by position: the start of a chain.
fn is_chain(kernel: &Kernel, value: ValueId) -> bool {
    kernel
        .node(value)
        .is_some_and(|n| matches!(n.op, Op::Select) && position_split(kernel, value).is_some())
}

/// For `value` = `select(position <op> constant, on_true, on_false)` along one axis (a
/// comparison of an `iota` with a scalar constant), the axis, the positions along it (of
/// `0..extent`) where the condition holds, and the two operands.
pub(super) fn position_split(
    kernel: &Kernel,
    value: ValueId,
) -> Option<(usize, Vec<bool>, ValueId, ValueId)> {
    let node = kernel.node(value)?;
    let [cond, on_true, on_false] = node.args[..] else {
        return None;
    };
    let cond_node = kernel.node(cond)?;
    let Op::Compare(op) = cond_node.op else {
        return None;
    };
    let [lhs, rhs] = cond_node.args[..] else {
        return None;
    };
    let iota_of = |v: ValueId| match kernel.node(v).map(|n| (&n.op, n)) {
        Some((Op::Iota { axis }, n)) => Some((*axis, n.ty.clone())),
        _ => None,
    };
    let const_of = |v: ValueId| match kernel.node(v).map(|n| &n.op) {
        Some(Op::Const(c)) if kernel.value_type(v).is_some_and(|t| t.shape.rank() == 0) => Some(*c),
        _ => None,
    };
    let (iota_axis, iota_ty, constant, iota_first) =
        match (iota_of(lhs), const_of(rhs), iota_of(rhs), const_of(lhs)) {
            (Some((axis, ty)), Some(c), _, _) => (axis, ty, c, true),
            (_, _, Some((axis, ty)), Some(c)) => (axis, ty, c, false),
            _ => return None,
        };
    // The iota counts along one axis of the result (operands broadcast from the right, so a
    // traced function's iota under `vmap` has fewer axes than the result).
    let (rank, iota_rank) = (node.ty.shape.rank(), iota_ty.shape.rank());
    let axis = iota_axis + rank.checked_sub(iota_rank)?;
    let extent = *iota_ty.shape.dims().get(iota_axis)?;
    if node.ty.shape.dims().get(axis) != Some(&extent) {
        return None;
    }
    let holds = (0..extent)
        .map(|i| {
            let at = index_value(i, iota_ty.dtype)?;
            if iota_first {
                compare(op, at, constant)
            } else {
                compare(op, constant, at)
            }
        })
        .collect::<Option<Vec<bool>>>()?;
    Some((axis, holds, on_true, on_false))
}

/// Collects the parts of `value` (of the output's rank, stored at `region`), a chain over the
/// positions of `within` (one flag per position along the chain's axis; all for the whole):
/// `select`s by position along one axis, and `pad`s placing a part exactly on the positions
/// chosen for it. False when `value` is anything else.
fn flatten(
    kernel: &Kernel,
    uses: &[usize],
    value: ValueId,
    dims: &[usize],
    region: Region,
    found: &mut Found,
) -> bool {
    let Some((axis, holds, ..)) = position_split(kernel, value) else {
        return false;
    };
    let all = vec![true; holds.len()];
    let mut pending = vec![(value, all)];
    while let Some((v, within)) = pending.pop() {
        let Some(node) = kernel.node(v) else { return false };
        // A constant (broadcast into the chain) on one range of positions.
        if let Some(value) = constant(kernel, v) {
            let (Some(lo), Some(last)) = (within.iter().position(|&w| w), within.iter().rposition(|&w| w))
            else {
                return false;
            };
            if within[lo..=last].iter().any(|&w| !w) {
                return false;
            }
            let mut shape = dims.to_vec();
            if let Some(extent) = shape.get_mut(axis) {
                *extent = last + 1 - lo;
            }
            let fill_region = Region {
                strides: region.strides.clone(),
                offset: region.offset + lo * region.strides.get(axis).copied().unwrap_or(0),
                row: None,
            };
            found.fills.push((fill_region, Shape::new(shape), value));
            continue;
        }
        if node.ty.shape.dims() != dims {
            return false;
        }
        match &node.op {
            Op::Select => {
                let Some((a, holds, t, f)) = position_split(kernel, v) else {
                    return false;
                };
                if a != axis || (v != value && uses.get(v.index()) != Some(&1)) {
                    return false;
                }
                if v != value {
                    found.nodes.push(v);
                }
                let chosen_true: Vec<bool> = within.iter().zip(&holds).map(|(&w, &h)| w && h).collect();
                let chosen_false: Vec<bool> = within.iter().zip(&holds).map(|(&w, &h)| w && !h).collect();
                for (operand, chosen) in [(t, chosen_true), (f, chosen_false)] {
                    if chosen.iter().any(|&c| c) {
                        pending.push((operand, chosen));
                    }
                }
            }
            Op::Pad { low } => {
                if uses.get(v.index()) != Some(&1) {
                    return false;
                }
                let Some(&part) = node.args.first() else {
                    return false;
                };
                let Some(part_ty) = kernel.value_type(part) else {
                    return false;
                };
                let part_dims = part_ty.shape.dims();
                let start = low.get(axis).copied().unwrap_or(0);
                let len = part_dims.get(axis).copied().unwrap_or(0);
                // The part fills exactly the positions chosen for it, and all of every other axis.
                let exact = (0..within.len()).all(|i| within[i] == (start <= i && i < start + len))
                    && fills_other_axes(low, part_dims, dims, axis);
                if !exact {
                    return false;
                }
                let part_region = Region {
                    strides: region.strides.clone(),
                    offset: region.offset + start * region.strides.get(axis).copied().unwrap_or(0),
                    row: None,
                };
                // A part that is itself a chain (along another axis, or the same) read by
                // nothing else is split too.
                if uses.get(part.index()) == Some(&1) && is_chain(kernel, part) {
                    let mut inner = Found::default();
                    if flatten(kernel, uses, part, part_dims, part_region.clone(), &mut inner) {
                        found.parts.extend(inner.parts);
                        found.fills.extend(inner.fills);
                        found.nodes.extend(inner.nodes);
                        found.nodes.extend([v, part]);
                        continue;
                    }
                }
                found.parts.push((v, part_region));
            }
            _ => return false,
        }
    }
    true
}

/// Whether a part padded by `low` to `dims` lies at the start of every axis but `axis` and
/// covers all of it (`part_dims` equal to `dims` there).
pub(super) fn fills_other_axes(low: &[usize], part_dims: &[usize], dims: &[usize], axis: usize) -> bool {
    low.iter().enumerate().all(|(a, &l)| a == axis || l == 0)
        && part_dims
            .iter()
            .zip(dims)
            .enumerate()
            .all(|(a, (&p, &d))| a == axis || p == d)
}

/// How many live nodes read each value (a node reading a value twice counts once).
pub(super) fn live_uses(kernel: &Kernel, live: &[bool]) -> Vec<usize> {
    let mut counts = vec![0usize; kernel.nodes().len()];
    for (i, node) in kernel.nodes().iter().enumerate() {
        if !live.get(i).copied().unwrap_or(false) {
            continue;
        }
        for (k, a) in node.args.iter().enumerate() {
            if !node.args[..k].contains(a)
                && let Some(count) = counts.get_mut(a.index())
            {
                *count += 1;
            }
        }
    }
    counts
}
