//! Loops through the transforms. Forward mode carries the tangents as extra carries of a new
//! loop whose body is the body's JVP; reverse mode runs the loop again storing the carries
//! that enter each iteration, then runs the body's VJP over them from the last iteration down
//! in a second loop; `vmap` batches carries and, where the test differs per example, masks
//! the body. Every new body and test is an ordinary kernel built by the same transforms, so
//! nested loops and higher derivatives compose.

use std::collections::HashSet;

use rfx_ir::hir::{Builder, Kernel, Loop, Op, RowUpdate, ValueId};
use rfx_ir::{BinaryOp, CmpOp, DType, ReduceOp, Shape, TensorType};

use crate::batch::vmap_out;
use crate::error::AdError;
use crate::forward::forward;
use crate::graph::{Batched, Emitter, WrtInput, active_values, rebuild};
use crate::reverse::{backward, concat};

/// A kernel's inputs in order: value and type.
fn input_list(kernel: &Kernel) -> Vec<(ValueId, TensorType)> {
    kernel.inputs().map(|(v, _, ty)| (v, ty.clone())).collect()
}

/// The float inputs of `kernel` flagged in `flags` (one flag per input), as `wrt` inputs.
fn flagged_wrt(kernel: &Kernel, flags: &[bool]) -> Vec<WrtInput> {
    kernel
        .inputs()
        .zip(flags)
        .filter(|((_, _, ty), flag)| **flag && ty.dtype.is_float())
        .map(|((value, name, ty), _)| WrtInput {
            value,
            name: name.to_string(),
            ty: ty.clone(),
        })
        .collect()
}

/// Grows `flags` (one per body input: the carries, then the invariants) until it is closed
/// under one iteration: a float carry joins when the body's next value of it is active (a
/// float value depending on a flagged input). Only flagged carries and invariants carry a
/// derivative through the loop.
fn active_fixpoint(spec: &Loop, mut flags: Vec<bool>) -> Vec<bool> {
    let inputs = input_list(&spec.body);
    loop {
        let active = active_values(&spec.body, &flagged_wrt(&spec.body, &flags));
        let mut changed = false;
        for (k, output) in spec.body.outputs().iter().enumerate().take(spec.carries) {
            let float = inputs.get(k).is_some_and(|(_, ty)| ty.dtype.is_float());
            if !flags[k] && float && active.get(output.value.index()).copied().unwrap_or(false) {
                flags[k] = true;
                changed = true;
            }
        }
        if !changed {
            return flags;
        }
    }
}

/// Which nodes of `kernel` depend on the inputs flagged in `from` (one flag per input).
fn reaches(kernel: &Kernel, from: &[bool]) -> Vec<bool> {
    let mut reached = vec![false; kernel.nodes().len()];
    let mut position = 0;
    for (index, node) in kernel.nodes().iter().enumerate() {
        reached[index] = match node.op {
            Op::Input { .. } => {
                position += 1;
                from.get(position - 1).copied().unwrap_or(false)
            }
            _ => node
                .args
                .iter()
                .any(|a| reached.get(a.index()).copied().unwrap_or(false)),
        };
    }
    reached
}

/// Which of `kernel`'s inputs (by position) any node or output reads.
fn used_inputs(kernel: &Kernel) -> Vec<bool> {
    let mut read = vec![false; kernel.nodes().len()];
    for node in kernel.nodes() {
        for a in &node.args {
            if let Some(slot) = read.get_mut(a.index()) {
                *slot = true;
            }
        }
    }
    for output in kernel.outputs() {
        if let Some(slot) = read.get_mut(output.value.index()) {
            *slot = true;
        }
    }
    kernel.inputs().map(|(v, _, _)| read[v.index()]).collect()
}

/// A name starting with `base` that `taken` does not hold (then added to it).
fn fresh(taken: &mut HashSet<String>, base: &str) -> String {
    let mut name = base.to_string();
    while taken.contains(&name) {
        name.push('_');
    }
    taken.insert(name.clone());
    name
}

/// The input names of `kernel`, as a set to draw fresh names against.
fn input_names(kernel: &Kernel) -> HashSet<String> {
    kernel.inputs().map(|(_, name, _)| name.to_string()).collect()
}

/// A batched derivative as a value of exactly `batch ++ shape`.
fn full(em: &mut Emitter, d: Batched, batch: &Shape, shape: &Shape) -> Result<ValueId, AdError> {
    let want = concat(batch, shape);
    let d = d.dense(em, batch, shape)?;
    let have = em.shape(d)?;
    if have == want {
        Ok(d)
    } else if have.numel() == want.numel() {
        em.reshape(d, want)
    } else {
        em.broadcast_to(d, want)
    }
}

/// Declares one input per type of `types` in `b`, named `base0`, `base1`, ...
fn declare(b: &mut Builder, base: &str, types: &[TensorType]) -> Result<Vec<ValueId>, AdError> {
    types
        .iter()
        .enumerate()
        .map(|(i, ty)| Ok(b.input(format!("{base}{i}"), ty.clone())?))
        .collect()
}

/// The loop's test with the inputs `extended` (types of the new loop's carries and invariants),
/// reading the old ones at `old_positions` and ignoring the rest.
fn extended_cond(cond: &Kernel, extended: &[TensorType], old_positions: &[usize]) -> Result<Kernel, AdError> {
    let mut b = Builder::new(cond.name());
    let inputs = declare(&mut b, "x", extended)?;
    let args: Vec<ValueId> = old_positions.iter().map(|&p| inputs[p]).collect();
    let keep = b.inline(cond, &args)?;
    for (i, &v) in keep.iter().enumerate() {
        b.output(format!("keep{i}"), v)?;
    }
    Ok(b.finish()?)
}

/// Forward mode through the loop `spec` applied to `args` (values of `em`) whose operands have
/// the tangents `arg_tangents`: one new loop carrying, besides the carries, the tangent of
/// every carry that depends on a tangent (batch axes in front), with the invariants' tangents
/// as extra invariants, and the body's JVP as its body. Returns the new loop's final carries
/// (the primal ones first: they equal the old loop's) and the tangent of each final carry
/// (`None`: zero); no loop and no tangents when no carry depends on a tangent.
pub(crate) fn forward_loop(
    em: &mut Emitter,
    spec: &Loop,
    args: &[ValueId],
    arg_tangents: &[Option<Batched>],
    batch: &Shape,
) -> Result<(Vec<ValueId>, Vec<Option<ValueId>>), AdError> {
    let n = spec.carries;
    let inputs = input_list(&spec.body);
    let seeded: Vec<bool> = inputs
        .iter()
        .zip(arg_tangents)
        .map(|((_, ty), t)| t.is_some() && ty.dtype.is_float())
        .collect();
    let flags = active_fixpoint(spec, seeded);
    let with_tangent: Vec<usize> = (0..inputs.len()).filter(|&p| flags[p]).collect();
    if !with_tangent.iter().any(|&p| p < n) {
        return Ok((Vec::new(), vec![None; n]));
    }
    let jvp_body = body_jvp(&spec.body, n, &with_tangent, batch)?;

    // The new loop: carries `c`, then `dc`; invariants `v`, then `dv`. The JVP kernel takes
    // `c, v, dc, dv` (the body's inputs first).
    let tangent_type = |p: usize| TensorType::new(inputs[p].1.dtype, concat(batch, &inputs[p].1.shape));
    let carry_tangents: Vec<usize> = with_tangent.iter().copied().filter(|&p| p < n).collect();
    let invariant_tangents: Vec<usize> = with_tangent.iter().copied().filter(|&p| p >= n).collect();
    let mut order: Vec<usize> = (0..n).collect();
    let mut types: Vec<TensorType> = inputs[..n].iter().map(|(_, ty)| ty.clone()).collect();
    for (i, &p) in carry_tangents.iter().enumerate() {
        types.push(tangent_type(p));
        order.push(inputs.len() + i);
    }
    types.extend(inputs[n..].iter().map(|(_, ty)| ty.clone()));
    order.extend(n..inputs.len());
    for (i, &p) in invariant_tangents.iter().enumerate() {
        types.push(tangent_type(p));
        order.push(inputs.len() + carry_tangents.len() + i);
    }
    // `order[i]`: the JVP kernel's input that the new loop's input `i` is.
    let mut position_of = vec![0; order.len()];
    for (i, &o) in order.iter().enumerate() {
        position_of[o] = i;
    }
    let mut b = Builder::new(format!("{}_jvp", spec.body.name()));
    let declared = declare(&mut b, "x", &types)?;
    let jvp_args: Vec<ValueId> = position_of.iter().map(|&i| declared[i]).collect();
    let next = b.inline(&jvp_body, &jvp_args)?;
    for (i, &v) in next.iter().enumerate() {
        b.output(format!("next{i}"), v)?;
    }
    let body = b.finish()?;
    let old_positions: Vec<usize> = (0..inputs.len()).map(|p| position_of[p]).collect();
    let cond = match &spec.cond {
        Some(cond) => Some(extended_cond(cond, &types, &old_positions)?),
        None => None,
    };

    let mut operands: Vec<ValueId> = args[..n].to_vec();
    let tangent_operand = |em: &mut Emitter, p: usize| -> Result<ValueId, AdError> {
        match arg_tangents[p] {
            Some(t) => full(em, t, batch, &inputs[p].1.shape),
            None => {
                let ty = tangent_type(p);
                Ok(em.constant(ty.dtype, 0.0, ty.shape))
            }
        }
    };
    for &p in &carry_tangents {
        operands.push(tangent_operand(em, p)?);
    }
    operands.extend_from_slice(&args[n..]);
    for &p in &invariant_tangents {
        operands.push(tangent_operand(em, p)?);
    }
    let spec = Loop {
        carries: n + carry_tangents.len(),
        trips: spec.trips,
        body,
        cond,
    };
    let finals = em.loop_(spec, &operands)?;
    let mut tangents = vec![None; n];
    for (i, &p) in carry_tangents.iter().enumerate() {
        tangents[p] = Some(finals[n + i]);
    }
    Ok((finals, tangents))
}

/// The JVP of a loop body: inputs the body's, then one tangent (`batch ++ shape`) per input
/// in `with_tangent`; outputs the next carries, then the next tangent of each carry in
/// `with_tangent`.
fn body_jvp(body: &Kernel, carries: usize, with_tangent: &[usize], batch: &Shape) -> Result<Kernel, AdError> {
    let inputs = input_list(body);
    let mut taken = input_names(body);
    let extra: Vec<(String, TensorType)> = with_tangent
        .iter()
        .map(|&p| {
            let ty = &inputs[p].1;
            (
                fresh(&mut taken, &format!("tangent{p}")),
                TensorType::new(ty.dtype, concat(batch, &ty.shape)),
            )
        })
        .collect();
    let (mut em, tangent_inputs) = Emitter::new(&format!("{}_jvp", body.name()), body, &extra)?;
    let mut flags = vec![false; inputs.len()];
    for &p in with_tangent {
        flags[p] = true;
    }
    let wrt = flagged_wrt(body, &flags);
    let active = active_values(body, &wrt);
    let seeds: Vec<Option<Batched>> = tangent_inputs.iter().map(|&t| Some(Batched::Dense(t))).collect();
    let tangents = forward(&mut em, body, &active, &wrt, &seeds, batch)?;
    let outputs: Vec<ValueId> = body.outputs().iter().map(|o| o.value).collect();
    for (k, &value) in outputs.iter().enumerate() {
        let v = em.primal(value);
        em.output(&format!("next{k}"), v)?;
    }
    for &p in with_tangent.iter().filter(|&&p| p < carries) {
        let value = outputs[p];
        let shape = &inputs[p].1.shape;
        let t = match tangents[value.index()] {
            Some(t) => full(&mut em, t, batch, shape)?,
            None => em.constant(inputs[p].1.dtype, 0.0, concat(batch, shape)),
        };
        em.output(&format!("tangent_next{p}"), t)?;
    }
    em.finish()
}

/// The VJP of a loop body for the carries and invariants flagged in `flags`: inputs the
/// body's, then a cotangent (`batch ++ shape`) of the next value of each flagged carry;
/// outputs the cotangent of each flagged input (carries, then invariants).
fn body_vjp(body: &Kernel, carries: usize, flags: &[bool], batch: &Shape) -> Result<Kernel, AdError> {
    let inputs = input_list(body);
    let mut taken = input_names(body);
    let flagged_carries: Vec<usize> = (0..carries).filter(|&k| flags[k]).collect();
    let extra: Vec<(String, TensorType)> = flagged_carries
        .iter()
        .map(|&k| {
            let ty = &inputs[k].1;
            (
                fresh(&mut taken, &format!("ct{k}")),
                TensorType::new(ty.dtype, concat(batch, &ty.shape)),
            )
        })
        .collect();
    let (mut em, ct_inputs) = Emitter::new(&format!("{}_vjp", body.name()), body, &extra)?;
    let wrt = flagged_wrt(body, flags);
    let active = active_values(body, &wrt);
    let seeds: Vec<(ValueId, Batched)> = flagged_carries
        .iter()
        .zip(&ct_inputs)
        .map(|(&k, &ct)| (body.outputs()[k].value, Batched::Dense(ct)))
        .collect();
    let grads = backward(&mut em, body, &active, &wrt, batch, &seeds)?;
    for (i, (input, g)) in wrt.iter().zip(grads).enumerate() {
        let value = match g {
            Some(g) => full(&mut em, g, batch, &input.ty.shape)?,
            None => em.constant(input.ty.dtype, 0.0, concat(batch, &input.ty.shape)),
        };
        em.output(&format!("ct_in{i}"), value)?;
    }
    em.finish()
}

/// Reverse mode through the loop `spec` (at `value`) applied to `args` (values of `em`; the
/// operands active where `arg_active`), given the cotangents `cts` of its final carries.
/// Returns the cotangent of each operand (`None`: zero).
///
/// Stored carries: a forward loop runs the body again with a counter `t` and, per carry the
/// body's VJP reads, a history `H` of shape `[trips, ...carry]` whose row `t` receives the
/// carry entering iteration `t` (`set_row(H, c, t)`, compiled to a row store: `O(|c|)` per
/// iteration, in a `while_loop` too, whose masked body masks the row; under `vmap` the batched
/// history is held `[trips, batch, ...]`, see [`vmap_loop`]).
/// A while loop from `t = iterations - 1` down to 0 then reads row `t` of each history
/// (`gather`), applies the body's VJP to the carries' cotangents and sums the invariants'
/// cotangents in extra carries. A while loop's test is not differentiated: the iterations
/// that ran are. The recording loop's final carries (returned second; none when no loop was
/// needed) start with the primal loop's.
pub(crate) fn reverse_loop(
    em: &mut Emitter,
    value: ValueId,
    spec: &Loop,
    args: &[ValueId],
    arg_active: &[bool],
    cts: &[Option<Batched>],
    batch: &Shape,
) -> Result<(Vec<Option<Batched>>, Vec<ValueId>), AdError> {
    let n = spec.carries;
    let inputs = input_list(&spec.body);
    let seeded: Vec<bool> = inputs
        .iter()
        .zip(arg_active)
        .map(|((_, ty), &a)| a && ty.dtype.is_float())
        .collect();
    let flags = active_fixpoint(spec, seeded);
    let carried: Vec<usize> = (0..n).filter(|&k| flags[k]).collect();
    let summed: Vec<usize> = (n..inputs.len()).filter(|&p| flags[p]).collect();
    if carried.is_empty() || cts.iter().all(Option::is_none) {
        return Ok((vec![None; inputs.len()], Vec::new()));
    }
    if spec.trips == 0 {
        // No iteration: the final carries are the initial ones.
        let mut contributions = cts.to_vec();
        contributions.resize(inputs.len(), None);
        return Ok((contributions, Vec::new()));
    }
    let loop_error = |reason: String| AdError::Loop { value, reason };
    let trips = i32::try_from(spec.trips).map_err(|_| {
        loop_error(format!(
            "{} iterations do not fit the i32 counter of its stored carries",
            spec.trips
        ))
    })?;
    let vjp = body_vjp(&spec.body, n, &flags, batch)?;
    let used = used_inputs(&vjp);
    let stored: Vec<usize> = (0..n).filter(|&k| used[k]).collect();
    let mut bytes: usize = 0;
    for &k in &stored {
        let ty = &inputs[k].1;
        bytes = ty
            .shape
            .numel()
            .checked_mul(ty.dtype.size_bytes())
            .and_then(|b| b.checked_mul(trips as usize))
            .and_then(|b| b.checked_add(bytes))
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| {
                loop_error(format!(
                    "its stored carries ({} iterations of {ty} and more) would not fit in memory",
                    spec.trips
                ))
            })?;
    }
    let history_type = |k: usize| {
        let ty = &inputs[k].1;
        TensorType::new(ty.dtype, concat(&Shape::new([trips as usize]), &ty.shape))
    };

    // The forward loop again, storing the carries: carries `c, t, H`, invariants `v`.
    let record = record_body(spec, &stored, &history_type)?;
    let mut types: Vec<TensorType> = inputs[..n].iter().map(|(_, ty)| ty.clone()).collect();
    types.push(TensorType::new(DType::I32, Shape::scalar()));
    types.extend(stored.iter().map(|&k| history_type(k)));
    types.extend(inputs[n..].iter().map(|(_, ty)| ty.clone()));
    let old_positions: Vec<usize> = (0..n).chain(n + 1 + stored.len()..types.len()).collect();
    let cond = match &spec.cond {
        Some(cond) => Some(extended_cond(cond, &types, &old_positions)?),
        None => None,
    };
    let mut operands: Vec<ValueId> = args[..n].to_vec();
    operands.push(em.scalar(DType::I32, 0.0));
    for &k in &stored {
        let ty = history_type(k);
        operands.push(em.constant(ty.dtype, 0.0, ty.shape));
    }
    operands.extend_from_slice(&args[n..]);
    let mut recorded = em.loop_(
        Loop {
            carries: n + 1 + stored.len(),
            trips: spec.trips,
            body: record,
            cond,
        },
        &operands,
    )?;
    let ran = recorded[n];
    let histories = recorded[n + 1..].to_vec();

    // The reverse loop: carries `t, λ (carried), acc (summed)`, invariants `H, v`.
    let back = reverse_body(spec, &vjp, &carried, &summed, &stored, &history_type, batch)?;
    let one = em.scalar(DType::I32, 1.0);
    let mut operands = vec![em.sub(ran, one)?];
    for &k in &carried {
        let shape = &inputs[k].1.shape;
        operands.push(match cts.get(k).copied().flatten() {
            Some(ct) => full(em, ct, batch, shape)?,
            None => em.constant(inputs[k].1.dtype, 0.0, concat(batch, shape)),
        });
    }
    for &p in &summed {
        let ty = &inputs[p].1;
        operands.push(em.constant(ty.dtype, 0.0, concat(batch, &ty.shape)));
    }
    operands.extend_from_slice(&histories);
    operands.extend_from_slice(&args[n..]);
    let finals = em.loop_(
        Loop {
            carries: 1 + carried.len() + summed.len(),
            trips: spec.trips,
            body: back.0,
            cond: Some(back.1),
        },
        &operands,
    )?;
    let mut contributions = vec![None; inputs.len()];
    for (i, &p) in carried.iter().chain(&summed).enumerate() {
        contributions[p] = Some(Batched::Dense(finals[1 + i]));
    }
    recorded.truncate(n);
    Ok((contributions, recorded))
}

/// The body of the recording loop: inputs `c, t, H (stored carries), v`; outputs the next
/// carries, `t + 1`, and each history with row `t` set to the carry entering the iteration
/// (`set_row`, which a `fori` loop stores as one row per iteration).
fn record_body(
    spec: &Loop,
    stored: &[usize],
    history_type: &dyn Fn(usize) -> TensorType,
) -> Result<Kernel, AdError> {
    let n = spec.carries;
    let inputs = input_list(&spec.body);
    let mut b = Builder::new(format!("{}_record", spec.body.name()));
    let carry_types: Vec<TensorType> = inputs[..n].iter().map(|(_, ty)| ty.clone()).collect();
    let c = declare(&mut b, "c", &carry_types)?;
    let t = b.input("t", TensorType::new(DType::I32, Shape::scalar()))?;
    let history_types: Vec<TensorType> = stored.iter().map(|&k| history_type(k)).collect();
    let h = declare(&mut b, "h", &history_types)?;
    let invariant_types: Vec<TensorType> = inputs[n..].iter().map(|(_, ty)| ty.clone()).collect();
    let v = declare(&mut b, "v", &invariant_types)?;
    let body_args: Vec<ValueId> = c.iter().chain(&v).copied().collect();
    let next = b.inline(&spec.body, &body_args)?;
    let one = b.scalar(rfx_ir::Scalar::I32(1));
    let t_next = b.binary(BinaryOp::Add, t, one)?;
    let mut updated = Vec::with_capacity(stored.len());
    for (&k, &history) in stored.iter().zip(&h) {
        updated.push(b.set_row(history, c[k], t)?);
    }
    for (i, &value) in next
        .iter()
        .chain(std::iter::once(&t_next))
        .chain(&updated)
        .enumerate()
    {
        b.output(format!("next{i}"), value)?;
    }
    Ok(b.finish()?)
}

/// The reverse loop's body and test: inputs `t, λ (carried), acc (summed), H (stored), v`;
/// the body reads row `t` of the histories, applies `vjp` and gives `t - 1`, the carries'
/// cotangents entering iteration `t`, and the sums with the invariants' new terms; the test
/// is `t >= 0`.
fn reverse_body(
    spec: &Loop,
    vjp: &Kernel,
    carried: &[usize],
    summed: &[usize],
    stored: &[usize],
    history_type: &dyn Fn(usize) -> TensorType,
    batch: &Shape,
) -> Result<(Kernel, Kernel), AdError> {
    let n = spec.carries;
    let inputs = input_list(&spec.body);
    let derivative = |p: usize| TensorType::new(inputs[p].1.dtype, concat(batch, &inputs[p].1.shape));
    let mut types = vec![TensorType::new(DType::I32, Shape::scalar())];
    types.extend(carried.iter().map(|&k| derivative(k)));
    types.extend(summed.iter().map(|&p| derivative(p)));
    types.extend(stored.iter().map(|&k| history_type(k)));
    types.extend(inputs[n..].iter().map(|(_, ty)| ty.clone()));
    let name = format!("{}_reverse", spec.body.name());

    let mut b = Builder::new(name.clone());
    let x = declare(&mut b, "x", &types)?;
    let t = x[0];
    let lambda = &x[1..1 + carried.len()];
    let acc = &x[1 + carried.len()..1 + carried.len() + summed.len()];
    let h = &x[1 + carried.len() + summed.len()..1 + carried.len() + summed.len() + stored.len()];
    let v = &x[1 + carried.len() + summed.len() + stored.len()..];
    let mut vjp_args = Vec::with_capacity(inputs.len() + carried.len());
    for (k, (_, ty)) in inputs[..n].iter().enumerate() {
        vjp_args.push(match stored.iter().position(|&s| s == k) {
            Some(i) => {
                let ones = vec![1; ty.shape.rank() + 1];
                let at = b.reshape(t, Shape::new(ones))?;
                let one_row = Shape::new([&[1][..], ty.shape.dims()].concat());
                let at = b.broadcast_to(at, one_row)?;
                let row = b.gather(h[i], at, 0)?;
                b.reshape(row, ty.shape.clone())?
            }
            // The VJP does not read this carry.
            None => b.constant(rfx_ir::Scalar::zero(ty.dtype), ty.shape.clone()),
        });
    }
    vjp_args.extend_from_slice(v);
    vjp_args.extend_from_slice(lambda);
    let grads = b.inline(vjp, &vjp_args)?;
    let one = b.scalar(rfx_ir::Scalar::I32(1));
    let t_next = b.binary(BinaryOp::Sub, t, one)?;
    let mut outputs = vec![t_next];
    outputs.extend_from_slice(&grads[..carried.len()]);
    for (&a, &g) in acc.iter().zip(&grads[carried.len()..]) {
        outputs.push(b.binary(BinaryOp::Add, a, g)?);
    }
    let named: Vec<(String, ValueId)> = outputs
        .iter()
        .enumerate()
        .map(|(i, &v)| (format!("next{i}"), v))
        .collect();
    for (name, v) in &named {
        b.output(name.clone(), *v)?;
    }
    let body = rebuild(&b.finish()?, &named)?;

    let mut b = Builder::new(format!("{name}_test"));
    let x = declare(&mut b, "x", &types)?;
    let zero = b.scalar(rfx_ir::Scalar::I32(0));
    let more = b.compare(CmpOp::Ge, x[0], zero)?;
    b.output("more", more)?;
    Ok((body, b.finish()?))
}

/// `vmap` of the loop `spec` over `args` (values of `b`, each with whether it carries the
/// batch as axis 0). A carry is batched when its initial value is or when the body makes it
/// depend on a batched value (an unbatched initial value is then broadcast at entry); the body
/// is the body's `vmap`. A test that depends on a batched value gives one `keep` per example:
/// every carry is batched, the loop runs while any example keeps going, and the body is
/// `select(keep[b], body(c)[b], c[b])`, so an example's carries stop changing once its test
/// fails (it then stays false) and each example runs exactly its own iterations. A batched
/// carry updated by one row at an unbatched index (a history) is held with the batch after its
/// row axis, so each iteration still stores one row ([`vmap_row_loop`]); with a batched test
/// that row is masked per example ([`vmap_masked_row_loop`]).
///
/// Returns the final carries, each with whether it is batched.
pub(crate) fn vmap_loop(
    b: &mut Builder,
    spec: &Loop,
    args: &[(ValueId, bool)],
    size: usize,
) -> Result<Vec<(ValueId, bool)>, AdError> {
    let n = spec.carries;
    let mut flags: Vec<bool> = args.iter().map(|&(_, batched)| batched).collect();
    loop {
        let reached = reaches(&spec.body, &flags);
        let mut changed = false;
        for (k, output) in spec.body.outputs().iter().enumerate().take(n) {
            if !flags[k] && reached.get(output.value.index()).copied().unwrap_or(false) {
                flags[k] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let batched_test = spec.cond.as_ref().is_some_and(|cond| {
        let reached = reaches(cond, &flags);
        cond.outputs()
            .iter()
            .any(|o| reached.get(o.value.index()).copied().unwrap_or(false))
    });
    if batched_test {
        let updates = masked_row_updates(&spec.body, n, &flags);
        if !updates.is_empty()
            && let Some(finals) = vmap_masked_row_loop(b, spec, args, &flags, &updates, size)?
        {
            return Ok(finals);
        }
        flags[..n].iter_mut().for_each(|f| *f = true);
    } else {
        let updates = batched_row_updates(&spec.body, n, &flags);
        if !updates.is_empty()
            && let Some(finals) = vmap_row_loop(b, spec, args, &flags, &updates, size)?
        {
            return Ok(finals);
        }
    }
    let in_axes: Vec<Option<usize>> = flags.iter().map(|&f| f.then_some(0)).collect();
    let out_axes: Vec<Option<usize>> = flags[..n].iter().map(|&f| f.then_some(0)).collect();
    let body = vmap_out(&spec.body, &in_axes, &out_axes, size)?;
    let (body, cond) = match &spec.cond {
        None => (body, None),
        Some(cond) if !batched_test => (body, Some(vmap_out(cond, &in_axes, &[None], size)?)),
        Some(cond) => {
            let keep = vmap_out(cond, &in_axes, &[Some(0)], size)?;
            let (body, test) = masked(&body, &keep, n, size)?;
            (body, Some(test))
        }
    };
    let mut operands = Vec::with_capacity(args.len());
    for (p, &(v, batched)) in args.iter().enumerate() {
        operands.push(if flags[p] && !batched {
            let ty = b.value_type(v)?.clone();
            let shape = Shape::new([&[size][..], ty.shape.dims()].concat());
            b.broadcast_to(v, shape)?
        } else {
            v
        });
    }
    let finals = b.loop_(
        Loop {
            carries: n,
            trips: spec.trips,
            body,
            cond,
        },
        &operands,
    )?;
    Ok(finals.into_iter().zip(flags).collect())
}

/// The batched carries (flagged in `flags`) of `body` updated by one row at an index that no
/// batched value reaches: every example replaces the same row.
fn batched_row_updates(body: &Kernel, carries: usize, flags: &[bool]) -> Vec<RowUpdate> {
    masked_row_updates(body, carries, flags)
        .into_iter()
        .filter(|u| flags.get(u.carry) == Some(&true))
        .collect()
}

/// The carries of `body` updated by one row at an index that no value batched in `flags`
/// reaches, read nowhere else.
fn masked_row_updates(body: &Kernel, carries: usize, flags: &[bool]) -> Vec<RowUpdate> {
    let reached = reaches(body, flags);
    body.row_updates(carries)
        .into_iter()
        .filter(|u| !u.read_elsewhere && !reached.get(u.index.index()).copied().unwrap_or(true))
        .collect()
}

/// `body` without the inputs of the carries in `updates` and their `set_row` nodes: inputs the
/// others, outputs the other carries' next values, then each update's row and (with `indices`)
/// its index.
fn without_row_updates(
    body: &Kernel,
    carries: usize,
    updates: &[RowUpdate],
    indices: bool,
) -> Result<Kernel, AdError> {
    let inputs: Vec<ValueId> = body.inputs().map(|(v, _, _)| v).collect();
    let skipped: HashSet<usize> = updates
        .iter()
        .flat_map(|u| [inputs[u.carry].index(), u.node.index()])
        .collect();
    let mut b = Builder::new(body.name());
    let map = copy_nodes(&mut b, body, |index| !skipped.contains(&index))?;
    let mapped = |v: ValueId| copied_value(&map, v);
    for (k, output) in body.outputs().iter().enumerate().take(carries) {
        if !updates.iter().any(|u| u.carry == k) {
            b.output(format!("next{k}"), mapped(output.value)?)?;
        }
    }
    for (i, update) in updates.iter().enumerate() {
        b.output(format!("row{i}"), mapped(update.row)?)?;
        if indices {
            b.output(format!("index{i}"), mapped(update.index)?)?;
        }
    }
    Ok(b.finish()?)
}

/// `ty` with an axis of `size` inserted at `axis`.
fn with_axis(ty: &TensorType, axis: usize, size: usize) -> TensorType {
    let mut dims = ty.shape.dims().to_vec();
    dims.insert(axis.min(dims.len()), size);
    TensorType::new(ty.dtype, Shape::new(dims))
}

/// [`vmap_loop`] (no batched test) where the carries in `updates` are batched histories updated
/// by one row at an unbatched index: such a carry is held as `[rows, size, ...row]` (the batch
/// after the row axis), so that the batched update is still one `set_row` of the carry itself,
/// `size · |row|` elements stored per iteration (a row store) rather than a select over the
/// whole history. It is moved there before the loop and back to `[size, rows, ...row]` after.
/// `None` when nothing but the updated carries is batched.
fn vmap_row_loop(
    b: &mut Builder,
    spec: &Loop,
    args: &[(ValueId, bool)],
    flags: &[bool],
    updates: &[RowUpdate],
    size: usize,
) -> Result<Option<Vec<(ValueId, bool)>>, AdError> {
    let n = spec.carries;
    let inputs = input_list(&spec.body);
    let updated = |p: usize| updates.iter().position(|u| u.carry == p);
    let kept: Vec<usize> = (0..inputs.len()).filter(|&p| updated(p).is_none()).collect();
    let in_axes: Vec<Option<usize>> = kept.iter().map(|&p| flags[p].then_some(0)).collect();
    if in_axes.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut out_axes: Vec<Option<usize>> = kept
        .iter()
        .filter(|&&p| p < n)
        .map(|&p| flags[p].then_some(0))
        .collect();
    let carried = out_axes.len();
    for _ in updates {
        out_axes.extend([Some(0), None]);
    }
    let stripped = without_row_updates(&spec.body, n, updates, true)?;
    let batched = vmap_out(&stripped, &in_axes, &out_axes, size)?;

    let axes: Vec<Option<usize>> = (0..inputs.len())
        .map(|p| match updated(p) {
            Some(_) => Some(1),
            None => flags[p].then_some(0),
        })
        .collect();
    let types: Vec<TensorType> = inputs
        .iter()
        .zip(&axes)
        .map(|((_, ty), axis)| match *axis {
            Some(axis) => with_axis(ty, axis, size),
            None => ty.clone(),
        })
        .collect();
    let mut w = Builder::new(spec.body.name());
    let x = declare(&mut w, "x", &types)?;
    let kept_args: Vec<ValueId> = kept.iter().map(|&p| x[p]).collect();
    let outs = w.inline(&batched, &kept_args)?;
    let mut others = outs.iter().take(carried);
    let missing = || AdError::Internal(rfx_ir::hir::BuildError::NoOutputs);
    for (k, &carry) in x.iter().enumerate().take(n) {
        let next = match updated(k) {
            Some(i) => {
                let (row, index) = (outs.get(carried + 2 * i), outs.get(carried + 2 * i + 1));
                let (Some(&row), Some(&index)) = (row, index) else {
                    return Err(missing());
                };
                w.set_row(carry, row, index)?
            }
            None => *others.next().ok_or_else(missing)?,
        };
        w.output(format!("next{k}"), next)?;
    }
    let body = w.finish()?;
    let cond = match &spec.cond {
        Some(cond) => Some(vmap_out(cond, &axes, &[None], size)?),
        None => None,
    };

    let mut operands = Vec::with_capacity(args.len());
    for (p, &(v, is_batched)) in args.iter().enumerate() {
        operands.push(match updated(p) {
            Some(_) => rows_first(b, v, is_batched, size)?,
            None if flags[p] && !is_batched => {
                let ty = b.value_type(v)?.clone();
                b.broadcast_to(v, with_axis(&ty, 0, size).shape)?
            }
            None => v,
        });
    }
    let finals = b.loop_(
        Loop {
            carries: n,
            trips: spec.trips,
            body,
            cond,
        },
        &operands,
    )?;
    let mut out = Vec::with_capacity(n);
    for (k, v) in finals.into_iter().enumerate() {
        out.push(match updated(k) {
            Some(_) => (batch_first(b, v)?, true),
            None => (v, flags[k]),
        });
    }
    Ok(Some(out))
}

/// The axes `[1, 0, 2, ...]` of a tensor of `rank`: swapping the first two axes moves the
/// batch between the front and after the rows.
fn swap_first(rank: usize) -> Vec<usize> {
    [1, 0].into_iter().chain(2..rank).collect()
}

/// A history's initial value `v` held `[rows, size, ...row]`: moved there from `[size, rows,
/// ...row]` when `batched`, else broadcast over the batch.
fn rows_first(b: &mut Builder, v: ValueId, batched: bool, size: usize) -> Result<ValueId, AdError> {
    let ty = b.value_type(v)?.clone();
    if batched {
        return Ok(b.transpose(v, &swap_first(ty.shape.rank()))?);
    }
    let column = b.reshape(v, with_axis(&ty, 1, 1).shape)?;
    Ok(b.broadcast_to(column, with_axis(&ty, 1, size).shape)?)
}

/// A final history `v` held `[rows, size, ...row]` moved to `[size, rows, ...row]`.
fn batch_first(b: &mut Builder, v: ValueId) -> Result<ValueId, AdError> {
    let rank = b.value_type(v)?.shape.rank();
    Ok(b.transpose(v, &swap_first(rank))?)
}

/// [`vmap_loop`] with a batched test where the carries in `updates` are updated by one row at
/// an index that no batched value reaches: every carry is batched and masked per example as in
/// [`masked`], but such a carry is held `[rows, size, ...row]` (as in [`vmap_row_loop`]) and
/// its *row* is masked, `set_row(c, select(keep, row, c[index]), index)`: the row of the
/// examples that stopped is stored back unchanged, so an iteration stores `size · |row|`
/// elements rather than selecting over the whole history, and every example gets the bits of
/// the whole select. The indices are computed from unbatched copies of the carries they read,
/// extra carries that are not masked: for an example still running they are its own values
/// (it has run every iteration so far), and a stopped example's row is not changed at any
/// index. `None` when the body reads nothing batched but the updated carries.
fn vmap_masked_row_loop(
    b: &mut Builder,
    spec: &Loop,
    args: &[(ValueId, bool)],
    flags: &[bool],
    updates: &[RowUpdate],
    size: usize,
) -> Result<Option<Vec<(ValueId, bool)>>, AdError> {
    let n = spec.carries;
    let inputs = input_list(&spec.body);
    let updated = |p: usize| updates.iter().position(|u| u.carry == p);
    let (index_kernel, copied, index_inputs) = index_part(&spec.body, n, updates)?;
    let m = copied.len();

    // The original inputs' batch axes (every carry batched, the histories after their rows).
    let axes: Vec<Option<usize>> = (0..inputs.len())
        .map(|p| match updated(p) {
            Some(_) => Some(1),
            None => (p < n || flags[p]).then_some(0),
        })
        .collect();
    let keep = vmap_out(
        spec.cond
            .as_ref()
            .ok_or(AdError::Internal(rfx_ir::hir::BuildError::NoOutputs))?,
        &axes,
        &[Some(0)],
        size,
    )?;
    let kept: Vec<usize> = (0..inputs.len()).filter(|&p| updated(p).is_none()).collect();
    let in_axes: Vec<Option<usize>> = kept.iter().map(|&p| axes[p]).collect();
    if in_axes.iter().all(Option::is_none) {
        return Ok(None);
    }
    let carried = kept.iter().filter(|&&p| p < n).count();
    let stripped = without_row_updates(&spec.body, n, updates, false)?;
    let batched = vmap_out(&stripped, &in_axes, &vec![Some(0); carried + updates.len()], size)?;

    // Inputs: the carries, the unbatched copies, the invariants.
    let mut types: Vec<TensorType> = inputs
        .iter()
        .zip(&axes)
        .map(|((_, ty), axis)| match *axis {
            Some(axis) => with_axis(ty, axis, size),
            None => ty.clone(),
        })
        .collect();
    let copy_types: Vec<TensorType> = copied.iter().map(|&k| inputs[k].1.clone()).collect();
    types.splice(n..n, copy_types);
    let original = |x: &[ValueId]| -> Vec<ValueId> { x[..n].iter().chain(&x[n + m..]).copied().collect() };

    let mut w = Builder::new(spec.body.name());
    let x = declare(&mut w, "x", &types)?;
    let going = one_output(&w.inline(&keep, &original(&x))?)?;
    let kept_args: Vec<ValueId> = kept.iter().map(|&p| original(&x)[p]).collect();
    let outs = w.inline(&batched, &kept_args)?;
    let index_args: Vec<ValueId> = index_inputs
        .iter()
        .map(|&p| match copied.iter().position(|&k| k == p) {
            Some(j) => x[n + j],
            None => x[p + m],
        })
        .collect();
    let index_outs = w.inline(&index_kernel, &index_args)?;
    let missing = || AdError::Internal(rfx_ir::hir::BuildError::NoOutputs);
    let mut others = outs.iter().take(carried);
    for (k, &carry) in x.iter().enumerate().take(n) {
        let next = match updated(k) {
            Some(i) => {
                let (Some(&row), Some(&index)) = (outs.get(carried + i), index_outs.get(i)) else {
                    return Err(missing());
                };
                let old = row_at(&mut w, carry, index)?;
                let lanes = lanes(&mut w, going, row, size)?;
                let row = w.select(lanes, row, old)?;
                w.set_row(carry, row, index)?
            }
            None => {
                let next = *others.next().ok_or_else(missing)?;
                let lanes = lanes(&mut w, going, next, size)?;
                w.select(lanes, next, carry)?
            }
        };
        w.output(format!("next{k}"), next)?;
    }
    for j in 0..m {
        let next = *index_outs.get(updates.len() + j).ok_or_else(missing)?;
        w.output(format!("copy{j}"), next)?;
    }
    let body = w.finish()?;

    let mut w = Builder::new(keep.name());
    let x = declare(&mut w, "x", &types)?;
    let going = one_output(&w.inline(&keep, &original(&x))?)?;
    let count = w.cast(going, DType::I32)?;
    let count = w.reduce(ReduceOp::Sum, count, &[0], false)?;
    let any = w.cast(count, DType::Bool)?;
    w.output("any", any)?;
    let cond = w.finish()?;

    let mut operands = Vec::with_capacity(args.len() + m);
    for (p, &(v, is_batched)) in args.iter().enumerate() {
        if p == n {
            operands.extend(copied.iter().map(|&k| args[k].0));
        }
        operands.push(match updated(p) {
            Some(_) => rows_first(b, v, is_batched, size)?,
            None if axes[p].is_some() && !is_batched => {
                let ty = b.value_type(v)?.clone();
                b.broadcast_to(v, with_axis(&ty, 0, size).shape)?
            }
            None => v,
        });
    }
    if args.len() == n {
        operands.extend(copied.iter().map(|&k| args[k].0));
    }
    let finals = b.loop_(
        Loop {
            carries: n + m,
            trips: spec.trips,
            body,
            cond: Some(cond),
        },
        &operands,
    )?;
    let mut out = Vec::with_capacity(n);
    for (k, v) in finals.into_iter().enumerate().take(n) {
        out.push(match updated(k) {
            Some(_) => (batch_first(b, v)?, true),
            None => (v, true),
        });
    }
    Ok(Some(out))
}

/// `keep` (one bool per example, `[size]`) shaped to select over `like` (`[size, ...]`).
fn lanes(b: &mut Builder, keep: ValueId, like: ValueId, size: usize) -> Result<ValueId, AdError> {
    let rank = b.value_type(like)?.shape.rank();
    let shape = Shape::new([&[size][..], &vec![1; rank.saturating_sub(1)]].concat());
    Ok(b.reshape(keep, shape)?)
}

/// Row `index` of `x` (clamped, as `set_row` clamps it) along axis 0, of the shape of a row.
fn row_at(b: &mut Builder, x: ValueId, index: ValueId) -> Result<ValueId, AdError> {
    let shape = b.value_type(x)?.shape.clone();
    let row_shape = Shape::new(shape.dims().get(1..).unwrap_or_default());
    let at = b.reshape(index, Shape::new(vec![1; shape.rank()]))?;
    let at = b.broadcast_to(at, Shape::new([&[1][..], row_shape.dims()].concat()))?;
    let row = b.gather(x, at, 0)?;
    Ok(b.reshape(row, row_shape)?)
}

/// The part of `body` that computes the indices of `updates` (which no batched value reaches),
/// with the carries it reads: the kernel, the positions of those carries, and the positions
/// (among `body`'s inputs) of the kernel's inputs. Its outputs: the indices, then the next
/// values of those carries, whose own next values it computes too.
fn index_part(
    body: &Kernel,
    carries: usize,
    updates: &[RowUpdate],
) -> Result<(Kernel, Vec<usize>, Vec<usize>), AdError> {
    let inputs: Vec<ValueId> = body.inputs().map(|(v, _, _)| v).collect();
    let mut needed = vec![false; body.nodes().len()];
    let mut roots: Vec<ValueId> = updates.iter().map(|u| u.index).collect();
    let mut copied: Vec<usize> = Vec::new();
    loop {
        for root in &roots {
            if let Some(slot) = needed.get_mut(root.index()) {
                *slot = true;
            }
        }
        for (index, node) in body.nodes().iter().enumerate().rev() {
            if needed[index] {
                for a in &node.args {
                    if let Some(slot) = needed.get_mut(a.index()) {
                        *slot = true;
                    }
                }
            }
        }
        let more: Vec<usize> = (0..carries)
            .filter(|&k| needed[inputs[k].index()] && !copied.contains(&k))
            .collect();
        if more.is_empty() {
            break;
        }
        copied.extend(&more);
        roots = more.iter().map(|&k| body.outputs()[k].value).collect();
    }
    copied.sort_unstable();
    let mut b = Builder::new(format!("{}_index", body.name()));
    let map = copy_nodes(&mut b, body, |index| needed[index])?;
    let mapped = |v: ValueId| copied_value(&map, v);
    for (i, update) in updates.iter().enumerate() {
        b.output(format!("index{i}"), mapped(update.index)?)?;
    }
    for &k in &copied {
        b.output(format!("next{k}"), mapped(body.outputs()[k].value)?)?;
    }
    let index_inputs = (0..inputs.len()).filter(|&p| needed[inputs[p].index()]).collect();
    Ok((b.finish()?, copied, index_inputs))
}

/// The masked body `select(keep, body(c), c)` per carry and the test `any(keep)`, from the
/// batched body and the batched test `keep` (one bool per example), every carry batched.
fn masked(body: &Kernel, keep: &Kernel, carries: usize, size: usize) -> Result<(Kernel, Kernel), AdError> {
    let types: Vec<TensorType> = body.inputs().map(|(_, _, ty)| ty.clone()).collect();
    let mut b = Builder::new(body.name());
    let x = declare(&mut b, "x", &types)?;
    let going = one_output(&b.inline(keep, &x)?)?;
    let next = b.inline(body, &x)?;
    for (k, (&c, &nc)) in x.iter().zip(&next).enumerate().take(carries) {
        let rank = types[k].shape.rank();
        let lanes = Shape::new([&[size][..], &vec![1; rank.saturating_sub(1)]].concat());
        let going = b.reshape(going, lanes)?;
        let kept = b.select(going, nc, c)?;
        b.output(format!("next{k}"), kept)?;
    }
    let body = b.finish()?;

    let mut b = Builder::new(keep.name());
    let x = declare(&mut b, "x", &types)?;
    let going = one_output(&b.inline(keep, &x)?)?;
    let count = b.cast(going, DType::I32)?;
    let count = b.reduce(ReduceOp::Sum, count, &[0], false)?;
    let any = b.cast(count, DType::Bool)?;
    b.output("any", any)?;
    Ok((body, b.finish()?))
}

fn one_output(values: &[ValueId]) -> Result<ValueId, AdError> {
    values
        .first()
        .copied()
        .ok_or(AdError::Internal(rfx_ir::hir::BuildError::NoOutputs))
}

/// Copies the nodes of `body` that `keep` accepts (by index), in order, into `b`; returns each
/// copied node's new value by its old index. A kept node reading a node not kept is an error.
fn copy_nodes(
    b: &mut Builder,
    body: &Kernel,
    keep: impl Fn(usize) -> bool,
) -> Result<Vec<Option<ValueId>>, AdError> {
    let mut map: Vec<Option<ValueId>> = vec![None; body.nodes().len()];
    for (index, node) in body.nodes().iter().enumerate() {
        if !keep(index) {
            continue;
        }
        let args = node
            .args
            .iter()
            .map(|&a| copied_value(&map, a))
            .collect::<Result<Vec<_>, _>>()?;
        map[index] = Some(b.copy(&node.op, &args, &node.ty)?);
    }
    Ok(map)
}

/// The copy of `v` that [`copy_nodes`] made.
fn copied_value(map: &[Option<ValueId>], v: ValueId) -> Result<ValueId, AdError> {
    map.get(v.index())
        .copied()
        .flatten()
        .ok_or(AdError::Internal(rfx_ir::hir::BuildError::UnknownValue(v)))
}
