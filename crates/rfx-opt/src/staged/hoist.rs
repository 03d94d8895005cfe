//! Loop-invariant code motion: the values of a loop's body and test that depend on no carry are
//! computed once, before the loop, and read as invariants. Only the *frontier* moves (the
//! invariant values that a carry-dependent value or an output reads); what they are computed
//! from moves with them. Constants, literals and `iota`s stay where they are (they cost nothing
//! to compute where they are read, and fold there). Computing a value once instead of once per
//! iteration gives the same bits.

use std::collections::HashMap;

use rfx_ir::TensorType;
use rfx_ir::hir::{Builder, Kernel, Loop, Op, ValueId};

use crate::error::OptError;
use crate::passes::{finish_rebuilt, mapped_operands, reachable};

/// `spec` with its body's and test's carry-independent values read as new invariants (after
/// the old ones), computed in `b` from `args` (the loop's operands there), and the operands
/// with those values appended.
pub(super) fn hoist_invariants(
    b: &mut Builder,
    spec: &Loop,
    args: &[ValueId],
) -> Result<(Loop, Vec<ValueId>), OptError> {
    let body_frontier = frontier(&spec.body, spec.carries);
    let cond_frontier = spec
        .cond
        .as_ref()
        .map(|c| frontier(c, spec.carries))
        .unwrap_or_default();
    if body_frontier.is_empty() && cond_frontier.is_empty() {
        return Ok((spec.clone(), args.to_vec()));
    }
    let mut hoisted = computed_outside(b, &spec.body, spec.carries, args, &body_frontier)?;
    if let Some(cond) = &spec.cond {
        hoisted.extend(computed_outside(b, cond, spec.carries, args, &cond_frontier)?);
    }
    // Body and test take the same inputs: each gets every new one, the body's first.
    let mut types = Vec::with_capacity(hoisted.len());
    for (kernel, values) in
        std::iter::once((&spec.body, &body_frontier)).chain(spec.cond.as_ref().map(|c| (c, &cond_frontier)))
    {
        for &v in values {
            types.push(kernel.value_type(v).cloned().ok_or(OptError::InvalidValue(v))?);
        }
    }
    let names = fresh_names(std::iter::once(&spec.body).chain(&spec.cond), types.len());
    let extra: Vec<(String, TensorType)> = names.into_iter().zip(types).collect();
    let body_reads: HashMap<ValueId, usize> =
        body_frontier.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    let cond_reads: HashMap<ValueId, usize> = cond_frontier
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, body_frontier.len() + i))
        .collect();
    let moved = Loop {
        carries: spec.carries,
        trips: spec.trips,
        body: with_inputs(&spec.body, &extra, &body_reads)?,
        cond: spec
            .cond
            .as_ref()
            .map(|c| with_inputs(c, &extra, &cond_reads))
            .transpose()?,
    };
    let mut operands = args.to_vec();
    operands.extend(hoisted);
    Ok((moved, operands))
}

/// The values of `kernel` (inputs: `carries` carries, then invariants) that move out of the
/// loop: those that depend on no carry, are neither inputs, leaves nor views, and are outputs or
/// read by a value that stays (one that depends on a carry, or a view).
fn frontier(kernel: &Kernel, carries: usize) -> Vec<ValueId> {
    let nodes = kernel.nodes();
    let mut variant = vec![false; nodes.len()];
    let mut position = 0;
    for (index, node) in nodes.iter().enumerate() {
        variant[index] = match node.op {
            Op::Input { .. } => {
                position += 1;
                position <= carries
            }
            _ => node
                .args
                .iter()
                .any(|a| variant.get(a.index()).copied().unwrap_or(true)),
        };
    }
    // A view of an invariant stays in the loop, where fusion reads it through strides for
    // free: stored before the loop, a broadcast would be a buffer of its full size.
    let view = |op: &Op| {
        matches!(
            op,
            Op::BroadcastTo | Op::Reshape | Op::Transpose { .. } | Op::Slice { .. } | Op::Pad { .. }
        )
    };
    let movable = |v: ValueId| {
        kernel
            .node(v)
            .is_some_and(|n| !n.args.is_empty() && !variant[v.index()] && !view(&n.op))
    };
    // From the outputs down, through what stays in the loop, to the first movable values.
    let mut wanted = vec![false; nodes.len()];
    let mut seen = vec![false; nodes.len()];
    let mut stack: Vec<ValueId> = kernel.outputs().iter().map(|o| o.value).collect();
    while let Some(value) = stack.pop() {
        match seen.get_mut(value.index()) {
            Some(slot) if !*slot => *slot = true,
            _ => continue,
        }
        if movable(value) {
            wanted[value.index()] = true;
        } else if let Some(node) = kernel.node(value) {
            stack.extend(node.args.iter().copied());
        }
    }
    kernel.values().filter(|v| wanted[v.index()]).collect()
}

/// Copies into `b` what the `frontier` values of `kernel` are computed from, its invariant
/// inputs bound to `args` (operands of the loop, carries first); returns the frontier's copies.
fn computed_outside(
    b: &mut Builder,
    kernel: &Kernel,
    carries: usize,
    args: &[ValueId],
    frontier: &[ValueId],
) -> Result<Vec<ValueId>, OptError> {
    let needed = reachable(kernel, frontier.iter().copied());
    let mut map: Vec<Option<ValueId>> = vec![None; kernel.nodes().len()];
    let mut position = 0;
    for (index, node) in kernel.nodes().iter().enumerate() {
        if let Op::Input { .. } = node.op {
            if position >= carries {
                map[index] = args.get(position).copied();
            }
            position += 1;
            continue;
        }
        if !needed[index] {
            continue;
        }
        let operands = mapped_operands(&map, &node.args)?;
        map[index] = Some(b.copy(&node.op, &operands, &node.ty).map_err(OptError::Rebuild)?);
    }
    frontier
        .iter()
        .map(|v| {
            map.get(v.index())
                .copied()
                .flatten()
                .ok_or(OptError::InvalidValue(*v))
        })
        .collect()
}

/// `count` input names that none of `kernels` uses.
fn fresh_names<'k>(kernels: impl Iterator<Item = &'k Kernel>, count: usize) -> Vec<String> {
    let taken: Vec<&str> = kernels
        .flat_map(|k| k.inputs().map(|(_, name, _)| name))
        .collect();
    let mut names = Vec::with_capacity(count);
    let mut n = 0;
    while names.len() < count {
        let name = format!("hoisted{n}");
        if !taken.contains(&name.as_str()) {
            names.push(name);
        }
        n += 1;
    }
    names
}

/// `kernel` with the inputs `extra` after its own, each value of `reads` read from the extra
/// input of that index instead of computed, and only the nodes its outputs still need.
fn with_inputs(
    kernel: &Kernel,
    extra: &[(String, TensorType)],
    reads: &HashMap<ValueId, usize>,
) -> Result<Kernel, OptError> {
    let mut b = Builder::new(kernel.name());
    let mut map: Vec<Option<ValueId>> = vec![None; kernel.nodes().len()];
    for (v, name, ty) in kernel.inputs() {
        map[v.index()] = Some(b.input(name, ty.clone()).map_err(OptError::Rebuild)?);
    }
    let mut extra_values = Vec::with_capacity(extra.len());
    for (name, ty) in extra {
        extra_values.push(b.input(name.clone(), ty.clone()).map_err(OptError::Rebuild)?);
    }
    // What the outputs need, not looking past the values now read.
    let mut needed = vec![false; kernel.nodes().len()];
    let mut stack: Vec<ValueId> = kernel.outputs().iter().map(|o| o.value).collect();
    while let Some(value) = stack.pop() {
        if let Some(slot) = needed.get_mut(value.index())
            && !*slot
        {
            *slot = true;
            if !reads.contains_key(&value)
                && let Some(node) = kernel.node(value)
            {
                stack.extend(node.args.iter().copied());
            }
        }
    }
    for (index, node) in kernel.nodes().iter().enumerate() {
        let value = ValueId::new(index);
        if matches!(node.op, Op::Input { .. }) || !needed[index] {
            continue;
        }
        map[index] = Some(match reads.get(&value) {
            Some(&i) => extra_values
                .get(i)
                .copied()
                .ok_or(OptError::InvalidValue(value))?,
            None => {
                let operands = mapped_operands(&map, &node.args)?;
                b.copy(&node.op, &operands, &node.ty).map_err(OptError::Rebuild)?
            }
        });
    }
    finish_rebuilt(b, &map, kernel.outputs())
}
