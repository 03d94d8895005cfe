//! Bounded loops in a trace: the body (and a `while_loop`'s test) traced into kernels of their
//! own, the tensors of enclosing traces they use lifted into invariants, and one HIR
//! [`Op::Loop`](rfx_ir::hir::Op::Loop) node recorded into the active trace. The public API is
//! [`crate::lax`].

use rfx_ir::hir::{BuildError, Builder, Kernel, Loop, ValueId};
use rfx_ir::{DType, Scalar, TensorType};

use super::TraceError;
use super::state::{Capture, TraceGuard, record_error, resolve, with_trace};
use super::tensor::Tensor;

/// The most trips a loop may have: the `fori_loop` counter is an `i32`.
const MAX_TRIPS: u64 = i32::MAX as u64;

/// A traced body or test: its kernel and the tensors of enclosing traces it captured.
struct Traced {
    kernel: Kernel,
    captures: Vec<Capture>,
}

/// `fori_loop(lower, upper, body, init)`: see [`crate::lax::fori_loop`].
pub(crate) fn fori_loop<B>(lower: i32, upper: i32, body: B, init: &[Tensor]) -> Vec<Tensor>
where
    B: FnOnce(Tensor, &[Tensor]) -> Vec<Tensor>,
{
    const OP: &str = "fori_loop";
    let n = init.len();
    if upper < lower {
        return fail(
            n,
            loop_error(OP, format!("upper ({upper}) is below lower ({lower})")),
        );
    }
    let trips = u64::try_from(i64::from(upper) - i64::from(lower)).unwrap_or(u64::MAX);
    let Some(types) = carry_types(OP, init, trips) else {
        return poisoned(n);
    };
    let guard = TraceGuard::begin_body("fori_body");
    let carries = body_inputs(&guard, &types);
    let counter = guard.input("i", TensorType::scalar(DType::I32));
    let next = body(counter, &carries);
    if let Err(error) = check_carries(OP, &types, &next) {
        drop(guard);
        return fail(n, error);
    }
    let mut outputs = named_carries(&next);
    outputs.push(("i".to_string(), counter + 1));
    let traced = match guard.finish_body(&outputs) {
        Ok((kernel, captures)) => Traced { kernel, captures },
        Err(error) => return fail(n, error),
    };
    let start = scalar(Scalar::I32(lower));
    let mut operands = init.to_vec();
    operands.push(start);
    let mut finals = record_loop(OP, &operands, trips, traced, None);
    finals.truncate(n);
    finals
}

/// `while_loop(cond, body, init, max_iter)`: see [`crate::lax::while_loop`].
pub(crate) fn while_loop<C, B>(cond: C, body: B, init: &[Tensor], max_iter: u64) -> Vec<Tensor>
where
    C: FnOnce(&[Tensor]) -> Tensor,
    B: FnOnce(&[Tensor]) -> Vec<Tensor>,
{
    const OP: &str = "while_loop";
    let n = init.len();
    let Some(types) = carry_types(OP, init, max_iter) else {
        return poisoned(n);
    };
    let guard = TraceGuard::begin_body("while_cond");
    let carries = body_inputs(&guard, &types);
    let keep = cond(&carries);
    if let Some(ty) = keep.ty()
        && ty != TensorType::scalar(DType::Bool)
    {
        drop(guard);
        let reason = format!("the test returned {ty}, not a bool scalar");
        return fail(n, loop_error(OP, reason));
    }
    let test = match guard.finish_body(&[("keep".to_string(), keep)]) {
        Ok((kernel, captures)) => Traced { kernel, captures },
        Err(error) => return fail(n, error),
    };
    let guard = TraceGuard::begin_body("while_body");
    let carries = body_inputs(&guard, &types);
    let next = body(&carries);
    if let Err(error) = check_carries(OP, &types, &next) {
        drop(guard);
        return fail(n, error);
    }
    let traced = match guard.finish_body(&named_carries(&next)) {
        Ok((kernel, captures)) => Traced { kernel, captures },
        Err(error) => return fail(n, error),
    };
    record_loop(OP, init, max_iter, traced, Some(test))
}

fn loop_error(op: &'static str, reason: String) -> TraceError {
    TraceError::Loop { op, reason }
}

/// `n` poisoned tensors of the active trace.
fn poisoned(n: usize) -> Vec<Tensor> {
    let id = with_trace(|state| state.id).unwrap_or(0);
    vec![Tensor::poisoned(id); n]
}

/// Records `error` in the active trace and returns `n` poisoned tensors.
fn fail(n: usize, error: TraceError) -> Vec<Tensor> {
    with_trace(|state| record_error(state, error));
    poisoned(n)
}

/// A scalar constant in the active trace.
fn scalar(value: Scalar) -> Tensor {
    with_trace(|state| Tensor::from_value(state.id, state.builder.scalar(value)))
        .unwrap_or(Tensor::poisoned(0))
}

/// The types of the initial carries (captured from an enclosing trace where needed), after
/// checking the carries and the trip count; `None` when an error is recorded.
fn carry_types(op: &'static str, init: &[Tensor], trips: u64) -> Option<Vec<TensorType>> {
    with_trace(|state| {
        if init.is_empty() {
            record_error(
                state,
                loop_error(op, "a loop needs at least one carry".to_string()),
            );
            return None;
        }
        if trips > MAX_TRIPS {
            let reason = format!("{trips} trips; at most {MAX_TRIPS} (the loop counter is an i32)");
            record_error(state, loop_error(op, reason));
            return None;
        }
        let ids = resolve(state, op, init)?;
        ids.iter()
            .map(|&id| state.builder.value_type(id).ok().cloned())
            .collect()
    })
    .flatten()
}

/// The inputs of a body or test, one per carry: `c0`, `c1`, ...
fn body_inputs(guard: &TraceGuard, types: &[TensorType]) -> Vec<Tensor> {
    types
        .iter()
        .enumerate()
        .map(|(k, ty)| guard.input(&format!("c{k}"), ty.clone()))
        .collect()
}

fn named_carries(next: &[Tensor]) -> Vec<(String, Tensor)> {
    next.iter()
        .enumerate()
        .map(|(k, t)| (format!("c{k}"), *t))
        .collect()
}

/// Checks that the body returned one tensor per carry, each of its carry's type (a poisoned
/// one is left to the body's own error).
fn check_carries(op: &'static str, types: &[TensorType], next: &[Tensor]) -> Result<(), TraceError> {
    if next.len() != types.len() {
        let reason = format!("the body returned {} carries for {}", next.len(), types.len());
        return Err(loop_error(op, reason));
    }
    for (k, (t, want)) in next.iter().zip(types).enumerate() {
        if let Some(found) = t.ty()
            && found != *want
        {
            let reason = format!("the body returned {found} for carry {k}, which is {want}");
            return Err(loop_error(op, reason));
        }
    }
    Ok(())
}

/// Records the loop over `init` (the carries) into the active trace: the invariants are the
/// union of what the body and the test captured, the body's first. Returns the final carries.
fn record_loop(
    op: &'static str,
    init: &[Tensor],
    trips: u64,
    body: Traced,
    cond: Option<Traced>,
) -> Vec<Tensor> {
    let n = init.len();
    let mut all = body.captures.clone();
    for capture in cond.iter().flat_map(|c| &c.captures) {
        if !all.iter().any(|c| c.key == capture.key) {
            all.push(capture.clone());
        }
    }
    let widened = widen(&body, n, &all).and_then(|body| {
        cond.as_ref()
            .map(|test| widen(test, n, &all))
            .transpose()
            .map(|cond| (body, cond))
    });
    let (body, cond) = match widened {
        Ok(kernels) => kernels,
        Err(source) => return fail(n, TraceError::Build { op, source }),
    };
    with_trace(|state| {
        let Some(mut operands) = resolve(state, op, init) else {
            return vec![Tensor::poisoned(state.id); n];
        };
        operands.extend(all.iter().map(|c| c.outer));
        let spec = Loop {
            carries: n,
            trips,
            body,
            cond,
        };
        match state.builder.loop_(spec, &operands) {
            Ok(finals) => finals
                .into_iter()
                .map(|v| Tensor::from_value(state.id, v))
                .collect(),
            Err(source) => {
                record_error(state, TraceError::Build { op, source });
                vec![Tensor::poisoned(state.id); n]
            }
        }
    })
    .unwrap_or_else(|| vec![Tensor::poisoned(0); n])
}

/// `traced`'s kernel taking the invariants `all` (a superset of its own captures, which it
/// takes in its own order) after its `carries` carry inputs.
fn widen(traced: &Traced, carries: usize, all: &[Capture]) -> Result<Kernel, BuildError> {
    let same =
        traced.captures.len() == all.len() && traced.captures.iter().zip(all).all(|(a, b)| a.key == b.key);
    if same {
        return Ok(traced.kernel.clone());
    }
    let kernel = &traced.kernel;
    let mut b = Builder::new(kernel.name());
    let mut args: Vec<ValueId> = Vec::with_capacity(carries + traced.captures.len());
    for (_, name, ty) in kernel.inputs().take(carries) {
        args.push(b.input(name, ty.clone())?);
    }
    let mut invariants = Vec::with_capacity(all.len());
    for (j, capture) in all.iter().enumerate() {
        invariants.push(b.input(format!("inv{j}"), capture.ty.clone())?);
    }
    // Every own capture is in `all` (a miss would show as an arity error of `inline`).
    args.extend(
        traced
            .captures
            .iter()
            .filter_map(|own| all.iter().position(|c| c.key == own.key).map(|p| invariants[p])),
    );
    let outputs = b.inline(kernel, &args)?;
    for (output, value) in kernel.outputs().iter().zip(outputs) {
        b.output(output.name.clone(), value)?;
    }
    b.finish()
}
