//! The HIR rewrites a level (a kernel or a loop body) gets before it is split into stages:
//! dead code and dead carries removed, loops that change nothing or run once replaced, and
//! invariants that are constants computed in the loop's body. Also the masked body of a
//! `while_loop`.

use std::collections::HashMap;

use rfx_ir::hir::{Builder, Kernel, Loop, Node, Op, ValueId, verify};

use crate::error::OptError;
use crate::passes::{finish_rebuilt, mapped_operands, reachable};

/// `kernel` without dead nodes, where every loop keeps only the carries that something after it
/// reads (or that those carries or the test need), a loop that changes nothing (no iteration,
/// or a body that returns every carry unchanged) is replaced by its initial carries, a loop
/// of one trip by its body (masked by its test for a `while_loop`), and a constant, literal or
/// `iota` invariant is computed in the body instead of read ([`bind_leaf_invariants`]).
///
/// Moving work out of a loop may move a loop out of it (one that reads only invariants), which
/// then gets the same rewrites: they are repeated until nothing changes, at most
/// [`PREPARE_ROUNDS`] times (a deeper nest of such loops is left partly rewritten, which costs
/// speed, not correctness).
pub(super) fn prepare(kernel: &Kernel) -> Result<Kernel, OptError> {
    let mut prepared = prepare_once(kernel)?;
    for _ in 1..PREPARE_ROUNDS {
        let again = prepare_once(&prepared)?;
        if again == prepared {
            break;
        }
        prepared = again;
    }
    Ok(prepared)
}

/// How many times [`prepare`] rewrites a level at most.
const PREPARE_ROUNDS: usize = 4;

/// One round of [`prepare`].
fn prepare_once(kernel: &Kernel) -> Result<Kernel, OptError> {
    verify(kernel).map_err(OptError::InvalidKernel)?;
    let live = crate::passes::live_values(kernel);
    let read = carries_read(kernel, &live);
    let mut b = Builder::new(kernel.name());
    let mut map: Vec<Option<ValueId>> = vec![None; kernel.nodes().len()];
    // The rebuilt final carries of each loop, by loop node; `None` for a dropped carry.
    let mut finals: HashMap<ValueId, Vec<Option<ValueId>>> = HashMap::new();
    for (index, node) in kernel.nodes().iter().enumerate() {
        let value = ValueId::new(index);
        if !live[index] && !matches!(node.op, Op::Input { .. }) {
            continue;
        }
        let args = mapped_operands(&map, &node.args)?;
        let built = match (&node.op, node.args.first()) {
            (Op::Loop(spec), _) => {
                let wanted = read.get(&value).ok_or(OptError::InvalidValue(value))?;
                let results = prepare_loop(&mut b, kernel, spec, &node.args, &args, wanted)?;
                // Only `loop_output`s read a loop whose carry 0 was dropped: any value will do.
                let carry0 = results.first().copied().flatten();
                let any = results.iter().flatten().next().copied();
                finals.insert(value, results);
                carry0.or(any).ok_or(OptError::InvalidValue(value))?
            }
            (Op::LoopOutput { index }, Some(of)) => finals
                .get(of)
                .and_then(|r| r.get(*index))
                .copied()
                .flatten()
                .ok_or(OptError::InvalidValue(value))?,
            _ => b.copy(&node.op, &args, &node.ty).map_err(OptError::Rebuild)?,
        };
        map[index] = Some(built);
    }
    finish_rebuilt(b, &map, kernel.outputs())
}

/// For each live loop node, which of its final carries live nodes or outputs read.
fn carries_read(kernel: &Kernel, live: &[bool]) -> HashMap<ValueId, Vec<bool>> {
    let mut read: HashMap<ValueId, Vec<bool>> = HashMap::new();
    for (index, node) in kernel.nodes().iter().enumerate() {
        if let (Op::Loop(spec), true) = (&node.op, live[index]) {
            read.insert(ValueId::new(index), vec![false; spec.carries]);
        }
    }
    let mut mark = |of: ValueId, carry: usize| {
        if let Some(slot) = read.get_mut(&of).and_then(|r| r.get_mut(carry)) {
            *slot = true;
        }
    };
    for (index, node) in kernel.nodes().iter().enumerate() {
        match (&node.op, node.args.first()) {
            _ if !live[index] => {}
            (Op::LoopOutput { index: carry }, Some(&of)) => mark(of, *carry),
            _ => node.args.iter().for_each(|&a| mark(a, 0)),
        }
    }
    for output in kernel.outputs() {
        mark(output.value, 0);
    }
    read
}

/// Adds loop `spec` over `built` (the rebuilt `operands`) to `b` as [`prepare`] says, given
/// which final carries are `wanted`; returns its final carries (`None` for the dropped ones).
fn prepare_loop(
    b: &mut Builder,
    kernel: &Kernel,
    spec: &Loop,
    operands: &[ValueId],
    built: &[ValueId],
    wanted: &[bool],
) -> Result<Vec<Option<ValueId>>, OptError> {
    let keep = needed_carries(spec, wanted);
    let (spec, positions) = if keep.iter().all(|&k| k) {
        (spec.clone(), (0..operands.len()).collect())
    } else {
        restrict_loop(spec, &keep)?
    };
    let pick = |values: &[ValueId]| -> Result<Vec<ValueId>, OptError> {
        positions
            .iter()
            .map(|&p| values.get(p).copied().ok_or(OptError::Cycle))
            .collect()
    };
    let (operands, built) = (pick(operands)?, pick(built)?);
    let kept = if changes_nothing(&spec) {
        built.get(..spec.carries).ok_or(OptError::Cycle)?.to_vec()
    } else if spec.trips == 1 {
        match &spec.cond {
            None => b.inline(&spec.body, &built).map_err(OptError::Rebuild)?,
            // The masked body's outputs are the carries, then the test's result.
            Some(cond) => {
                let mut finals = b
                    .inline(&masked_body(&spec, cond)?, &built)
                    .map_err(OptError::Rebuild)?;
                finals.truncate(spec.carries);
                finals
            }
        }
    } else {
        let carries = spec.carries;
        let (spec, args) = bind_leaf_invariants(kernel, &spec, &operands, &built)?;
        let (spec, args) = super::hoist::hoist_invariants(b, &spec, &args)?;
        let node = b.op(Op::Loop(Box::new(spec)), &args).map_err(OptError::Rebuild)?;
        let mut finals = vec![node];
        for k in 1..carries {
            finals.push(b.loop_output(node, k).map_err(OptError::Rebuild)?);
        }
        finals
    };
    let mut kept = kept.into_iter();
    Ok(keep.iter().map(|&k| if k { kept.next() } else { None }).collect())
}

/// The carries a loop must keep: the `wanted` ones, those its test reads, and those the body
/// needs to compute the kept ones.
fn needed_carries(spec: &Loop, wanted: &[bool]) -> Vec<bool> {
    let mut keep = wanted.to_vec();
    keep.resize(spec.carries, false);
    let body_deps: Vec<Vec<bool>> = spec
        .body
        .outputs()
        .iter()
        .map(|o| inputs_reached(&spec.body, o.value))
        .collect();
    if let Some(test) = spec
        .cond
        .as_ref()
        .and_then(|c| c.outputs().first().map(|o| inputs_reached(c, o.value)))
    {
        keep.iter_mut().zip(test).for_each(|(k, t)| *k |= t);
    }
    loop {
        let mut changed = false;
        for k in 0..spec.carries {
            if !keep[k] {
                continue;
            }
            for (j, &reads) in body_deps
                .get(k)
                .into_iter()
                .flatten()
                .enumerate()
                .take(spec.carries)
            {
                if reads && !keep[j] {
                    keep[j] = true;
                    changed = true;
                }
            }
        }
        if !changed {
            return keep;
        }
    }
}

/// Which of `kernel`'s inputs, by position, `value` is computed from.
fn inputs_reached(kernel: &Kernel, value: ValueId) -> Vec<bool> {
    let seen = reachable(kernel, [value]);
    kernel.inputs().map(|(v, _, _)| seen[v.index()]).collect()
}

/// `spec` with only the carries `keep` marks (and every invariant); returns it with the
/// positions of the operands it keeps.
fn restrict_loop(spec: &Loop, keep: &[bool]) -> Result<(Loop, Vec<usize>), OptError> {
    let n_inputs = spec.body.inputs().count();
    let keep_input: Vec<bool> = (0..n_inputs)
        .map(|p| keep.get(p).copied().unwrap_or(true))
        .collect();
    let positions = (0..n_inputs).filter(|&p| keep_input[p]).collect();
    let restricted = Loop {
        carries: keep.iter().filter(|&&k| k).count(),
        trips: spec.trips,
        body: restrict(&spec.body, &keep_input, keep)?,
        cond: spec
            .cond
            .as_ref()
            .map(|c| restrict(c, &keep_input, &[true]))
            .transpose()?,
    };
    Ok((restricted, positions))
}

/// `kernel` with only the inputs `keep_input` marks and the outputs `keep_output` marks, and
/// the nodes those outputs need (none of which may read a dropped input).
fn restrict(kernel: &Kernel, keep_input: &[bool], keep_output: &[bool]) -> Result<Kernel, OptError> {
    let outputs: Vec<_> = kernel
        .outputs()
        .iter()
        .zip(keep_output)
        .filter(|(_, k)| **k)
        .map(|(o, _)| o)
        .collect();
    let live = reachable(kernel, outputs.iter().map(|o| o.value));
    let mut b = Builder::new(kernel.name());
    let mut map: Vec<Option<ValueId>> = vec![None; kernel.nodes().len()];
    let mut position = 0;
    for (index, node) in kernel.nodes().iter().enumerate() {
        if let Op::Input { name } = &node.op {
            if keep_input.get(position).copied().unwrap_or(true) {
                map[index] = Some(
                    b.input(name.clone(), node.ty.clone())
                        .map_err(OptError::Rebuild)?,
                );
            }
            position += 1;
        } else if live[index] {
            let args = mapped_operands(&map, &node.args)?;
            map[index] = Some(b.copy(&node.op, &args, &node.ty).map_err(OptError::Rebuild)?);
        }
    }
    finish_rebuilt(b, &map, outputs)
}

/// `spec` with each invariant whose operand (of `operands`, in `kernel`) is a constant, a
/// literal or an `iota` computed in the body and the test instead of read from a buffer, so
/// that they fold it; and the operands (of `built`, the operands rebuilt) that are left.
fn bind_leaf_invariants(
    kernel: &Kernel,
    spec: &Loop,
    operands: &[ValueId],
    built: &[ValueId],
) -> Result<(Loop, Vec<ValueId>), OptError> {
    let leaves: HashMap<usize, &Node> = operands
        .iter()
        .enumerate()
        .skip(spec.carries)
        .filter_map(|(position, &a)| kernel.node(a).map(|n| (position, n)))
        .filter(|(_, n)| n.args.is_empty() && !matches!(n.op, Op::Input { .. }))
        .collect();
    if leaves.is_empty() {
        return Ok((spec.clone(), built.to_vec()));
    }
    let bind = |inner: &Kernel| -> Result<Kernel, OptError> {
        let mut b = Builder::new(inner.name());
        let mut map = Vec::with_capacity(inner.nodes().len());
        let mut position = 0;
        for node in inner.nodes() {
            let value = match (&node.op, leaves.get(&position)) {
                (Op::Input { .. }, Some(leaf)) => b.copy(&leaf.op, &[], &leaf.ty),
                (Op::Input { name }, None) => b.input(name.clone(), node.ty.clone()),
                (op, _) => {
                    let args = node
                        .args
                        .iter()
                        .map(|a| map.get(a.index()).copied().ok_or(OptError::InvalidValue(*a)))
                        .collect::<Result<Vec<ValueId>, _>>()?;
                    b.copy(op, &args, &node.ty)
                }
            }
            .map_err(OptError::Rebuild)?;
            position += usize::from(matches!(node.op, Op::Input { .. }));
            map.push(value);
        }
        for output in inner.outputs() {
            let value = map
                .get(output.value.index())
                .copied()
                .ok_or(OptError::InvalidValue(output.value))?;
            b.output(output.name.clone(), value).map_err(OptError::Rebuild)?;
        }
        b.finish().map_err(OptError::Rebuild)
    };
    let bound = Loop {
        carries: spec.carries,
        trips: spec.trips,
        body: bind(&spec.body)?,
        cond: spec.cond.as_ref().map(bind).transpose()?,
    };
    let left = built
        .iter()
        .enumerate()
        .filter(|(position, _)| !leaves.contains_key(position))
        .map(|(_, &v)| v)
        .collect();
    Ok((bound, left))
}

/// `true` for a loop whose results are its initial carries: it runs no iteration, or its body
/// returns every carry unchanged.
fn changes_nothing(spec: &Loop) -> bool {
    let inputs: Vec<ValueId> = spec.body.inputs().map(|(v, _, _)| v).collect();
    spec.trips == 0
        || spec
            .body
            .outputs()
            .iter()
            .enumerate()
            .all(|(k, o)| inputs.get(k) == Some(&o.value))
}

/// A `while_loop`'s body that may run past the test's failure: with the body's inputs, it
/// returns `select(keep, body(c), c)` for each carry `c` (or `c` itself where the body returns
/// it unchanged), where `keep = cond(c)`, then `keep`.
pub(super) fn masked_body(spec: &Loop, cond: &Kernel) -> Result<Kernel, OptError> {
    let mut b = Builder::new(spec.body.name());
    let (_, keep, _) = masked_carries(&mut b, spec, cond, &spec.body)?;
    b.output("keep", keep).map_err(OptError::Rebuild)?;
    b.finish().map_err(OptError::Rebuild)
}

/// In `b`: `spec.body`'s inputs, `keep = cond(inputs)` and `body(inputs)` (a body with the
/// loop's inputs whose first outputs are the carries' next values), with the outputs `c0`, `c1`,
/// … set to `select(keep, next, c)` for each carry (or `c` where `body` returns it unchanged).
/// Returns the inputs, `keep` and all of `body`'s outputs.
pub(super) fn masked_carries(
    b: &mut Builder,
    spec: &Loop,
    cond: &Kernel,
    body: &Kernel,
) -> Result<(Vec<ValueId>, ValueId, Vec<ValueId>), OptError> {
    let inputs = spec
        .body
        .inputs()
        .map(|(_, name, ty)| b.input(name, ty.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(OptError::Rebuild)?;
    let keep = b
        .inline(cond, &inputs)
        .map_err(OptError::Rebuild)?
        .first()
        .copied()
        .ok_or(OptError::Cycle)?;
    let next = b.inline(body, &inputs).map_err(OptError::Rebuild)?;
    for (k, (&carry, &new)) in inputs.iter().zip(&next).enumerate().take(spec.carries) {
        let out = if carry == new {
            carry
        } else {
            b.select(keep, new, carry).map_err(OptError::Rebuild)?
        };
        b.output(format!("c{k}"), out).map_err(OptError::Rebuild)?;
    }
    Ok((inputs, keep, next))
}
