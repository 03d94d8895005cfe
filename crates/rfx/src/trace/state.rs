//! The thread-local stack of traces, the guard that begins and ends one, inlining of an
//! existing kernel, and the [`TraceOutput`] trait of traced functions' results.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};

use rfx_ir::hir::{Builder, Kernel, ValueId};
use rfx_ir::{DType, Scalar, TensorType};

use super::TraceError;
use super::tensor::{Operand, Tensor};

pub(super) const POISON: u32 = u32::MAX;

pub(super) struct TraceState {
    pub(super) id: u32,
    pub(super) builder: Builder,
    pub(super) error: Option<TraceError>,
    /// A loop's body or test: a tensor of the enclosing trace used here becomes an input of
    /// this trace (an invariant of the loop), listed in `captures`.
    pub(super) lifts: bool,
    pub(super) captures: Vec<Capture>,
}

/// A tensor of the enclosing trace that a loop's body or test uses.
#[derive(Clone, Debug)]
pub(crate) struct Capture {
    /// The tensor as the user holds it (its own trace and value).
    pub(crate) key: (u32, u32),
    /// The value in the enclosing trace (the tensor itself, or the enclosing trace's own
    /// capture of it when that trace is a loop body too).
    pub(crate) outer: ValueId,
    /// The input of this trace that stands for it.
    pub(crate) local: ValueId,
    /// Its type.
    pub(crate) ty: TensorType,
}

/// The innermost trace, with the traces that enclose it (outermost first), so that a loop
/// body can capture their tensors. Dereferences to the innermost trace.
pub(super) struct Active<'a> {
    inner: &'a mut TraceState,
    enclosing: &'a mut [TraceState],
}

impl Deref for Active<'_> {
    type Target = TraceState;
    fn deref(&self) -> &TraceState {
        self.inner
    }
}

impl DerefMut for Active<'_> {
    fn deref_mut(&mut self) -> &mut TraceState {
        self.inner
    }
}

impl<'a> Active<'a> {
    /// A trace with no enclosing ones.
    fn alone(state: &'a mut TraceState) -> Active<'a> {
        Active {
            inner: state,
            enclosing: &mut [],
        }
    }
}

thread_local! {
    static TRACES: RefCell<Vec<TraceState>> = const { RefCell::new(Vec::new()) };
}

pub(super) static NEXT_TRACE: AtomicU32 = AtomicU32::new(1);

/// Runs `body` on the active trace (the innermost one on this thread). Returns `None` without
/// an active trace.
pub(super) fn with_trace<R>(body: impl FnOnce(&mut Active<'_>) -> R) -> Option<R> {
    TRACES.with(|traces| {
        let mut traces = traces.borrow_mut();
        let (inner, enclosing) = traces.split_last_mut()?;
        Some(body(&mut Active { inner, enclosing }))
    })
}

pub(super) fn record_error(state: &mut TraceState, error: TraceError) {
    if state.error.is_none() {
        state.error = Some(error);
    }
}

/// Resolves tensor handles to value ids of `state`: `None` when any is poisoned (the error is
/// already recorded) or foreign (recorded now). In a loop's body or test, a tensor of an
/// enclosing trace is captured (see [`lift`]).
pub(super) fn resolve(state: &mut Active<'_>, op: &'static str, tensors: &[Tensor]) -> Option<Vec<ValueId>> {
    let mut ids = Vec::with_capacity(tensors.len());
    for t in tensors {
        match lift(state.enclosing, state.inner, *t) {
            Ok(Some(id)) => ids.push(id),
            Ok(None) => return None,
            Err(()) => {
                record_error(state, TraceError::ForeignTensor { op });
                return None;
            }
        }
    }
    Some(ids)
}

/// The value of `t` in `inner`: its own value, or, when `inner` is a loop's body or test and
/// `t` belongs to an enclosing trace, an input of `inner` standing for it (added on first use,
/// through every loop body in between). `Ok(None)` for a poisoned tensor (whose error its own
/// trace holds); `Err` when `t` belongs to no trace `inner` may capture from, poisoned or not.
fn lift(enclosing: &mut [TraceState], inner: &mut TraceState, t: Tensor) -> Result<Option<ValueId>, ()> {
    if t.trace == inner.id {
        return Ok((t.value != POISON).then(|| ValueId::new(t.value as usize)));
    }
    if !inner.lifts {
        return Err(());
    }
    let key = (t.trace, t.value);
    if let Some(capture) = inner.captures.iter().find(|c| c.key == key) {
        return Ok(Some(capture.local));
    }
    let Some((parent, rest)) = enclosing.split_last_mut() else {
        return Err(());
    };
    let Some(outer) = lift(rest, parent, t)? else {
        return Ok(None);
    };
    let Ok(ty) = parent.builder.value_type(outer).cloned() else {
        return Err(());
    };
    let name = format!("inv{}", inner.captures.len());
    match inner.builder.input(name, ty.clone()) {
        Ok(local) => {
            inner.captures.push(Capture {
                key,
                outer,
                local,
                ty,
            });
            Ok(Some(local))
        }
        Err(source) => {
            record_error(
                inner,
                TraceError::Build {
                    op: "capture",
                    source,
                },
            );
            Ok(None)
        }
    }
}

/// The type of `t` in the innermost trace or, for a tensor a loop body may capture, in the
/// enclosing trace it belongs to (without capturing it). `None` for a poisoned or foreign
/// tensor.
pub(super) fn type_of(t: Tensor) -> Option<TensorType> {
    if t.value == POISON {
        return None;
    }
    TRACES.with(|traces| {
        let traces = traces.borrow();
        for state in traces.iter().rev() {
            if state.id == t.trace {
                return state
                    .builder
                    .value_type(ValueId::new(t.value as usize))
                    .ok()
                    .cloned();
            }
            if !state.lifts {
                return None;
            }
        }
        None
    })
}

pub(super) fn literal_scalar(op: &'static str, operand: Operand, dtype: DType) -> Result<Scalar, TraceError> {
    let bad = |literal: String| TraceError::Literal { op, literal, dtype };
    match (operand, dtype) {
        (Operand::Bool(b), DType::Bool) => Ok(Scalar::Bool(b)),
        (Operand::Bool(b), _) => Err(bad(b.to_string())),
        (Operand::Float(v), DType::F32 | DType::F64) => Ok(Scalar::from_f64(dtype, v)),
        (Operand::Float(v), _) => Err(bad(v.to_string())),
        (Operand::Int(v), DType::I32) => i32::try_from(v).map(Scalar::I32).map_err(|_| bad(v.to_string())),
        (Operand::Int(v), DType::F32 | DType::F64) => Ok(Scalar::from_f64(dtype, v as f64)),
        (Operand::Int(v), DType::Bool) => Err(bad(v.to_string())),
        (Operand::Tensor(_), _) => Err(bad("tensor".to_string())),
    }
}

/// Copies the nodes of `kernel` into the innermost trace, its inputs bound to `args` (already
/// checked against the kernel's input types), and returns its outputs in order. A node that
/// does not fit records the error and poisons the outputs.
pub(crate) fn inline_kernel(kernel: &Kernel, args: &[Tensor]) -> Vec<Tensor> {
    let n_out = kernel.outputs().len();
    let trace_of = args.first().map_or(0, |t| t.trace);
    with_trace(|state| {
        let Some(ids) = resolve(state, "inline", args) else {
            return vec![Tensor::poisoned(state.id); n_out];
        };
        let mut map: Vec<ValueId> = Vec::with_capacity(kernel.nodes().len());
        let mut next_input = ids.iter();
        for node in kernel.nodes() {
            let value = if matches!(node.op, rfx_ir::hir::Op::Input { .. }) {
                next_input.next().copied()
            } else {
                let operands: Vec<ValueId> = node.args.iter().map(|a| map[a.index()]).collect();
                match state.builder.copy(&node.op, &operands, &node.ty) {
                    Ok(value) => Some(value),
                    Err(source) => {
                        record_error(state, TraceError::Build { op: "inline", source });
                        None
                    }
                }
            };
            let Some(value) = value else {
                return vec![Tensor::poisoned(state.id); n_out];
            };
            map.push(value);
        }
        kernel
            .outputs()
            .iter()
            .map(|o| Tensor::from_value(state.id, map[o.value.index()]))
            .collect()
    })
    .unwrap_or_else(|| vec![Tensor::poisoned(trace_of); n_out])
}

/// The first error recorded so far by the innermost trace of this thread.
pub(crate) fn innermost_error() -> Option<TraceError> {
    with_trace(|state| state.error.clone()).flatten()
}

/// Ends the trace when dropped, also when the traced function panics.
pub(crate) struct TraceGuard {
    id: u32,
    finished: bool,
}

impl TraceGuard {
    /// Starts a trace of a kernel called `name` on this thread.
    pub(crate) fn begin(name: &str) -> TraceGuard {
        let id = NEXT_TRACE.fetch_add(1, Ordering::Relaxed);
        TRACES.with(|traces| {
            traces.borrow_mut().push(TraceState {
                id,
                builder: Builder::new(name),
                error: None,
                lifts: false,
                captures: Vec::new(),
            });
        });
        TraceGuard { id, finished: false }
    }

    /// Starts the trace of a loop's body or test called `name`, innermost on this thread: the
    /// tensors of the enclosing traces it uses become its inputs (see [`TraceGuard::finish_body`]).
    pub(crate) fn begin_body(name: &str) -> TraceGuard {
        let guard = TraceGuard::begin(name);
        TRACES.with(|traces| {
            if let Some(state) = traces.borrow_mut().last_mut() {
                state.lifts = true;
            }
        });
        guard
    }

    /// Adds an input and returns its tensor.
    pub(crate) fn input(&self, name: &str, ty: TensorType) -> Tensor {
        with_trace(|state| match state.builder.input(name, ty) {
            Ok(value) => Tensor::from_value(state.id, value),
            Err(source) => {
                record_error(state, TraceError::Build { op: "input", source });
                Tensor::poisoned(state.id)
            }
        })
        .unwrap_or_else(|| Tensor::poisoned(self.id))
    }

    /// A scalar constant.
    pub(crate) fn constant(&self, value: Scalar) -> Tensor {
        with_trace(|state| Tensor::from_value(state.id, state.builder.scalar(value)))
            .unwrap_or_else(|| Tensor::poisoned(self.id))
    }

    /// The first error recorded so far.
    pub(crate) fn error(&self) -> Option<TraceError> {
        with_trace(|state| state.error.clone()).flatten()
    }

    /// Ends the trace with `outputs` (named) and returns the kernel or the first error.
    pub(crate) fn finish(mut self, outputs: &[(String, Tensor)]) -> Result<Kernel, TraceError> {
        self.finished = true;
        let state = TRACES
            .with(|traces| traces.borrow_mut().pop())
            .filter(|state| state.id == self.id);
        let Some(mut state) = state else {
            return Err(TraceError::ForeignTensor { op: "output" });
        };
        for (name, tensor) in outputs {
            let Some(ids) = resolve(&mut Active::alone(&mut state), "output", &[*tensor]) else {
                continue;
            };
            if let Err(source) = state.builder.output(name.clone(), ids[0]) {
                record_error(&mut state, TraceError::Build { op: "output", source });
            }
        }
        if let Some(error) = state.error {
            return Err(error);
        }
        if outputs.is_empty() {
            return Err(TraceError::NoOutputs);
        }
        state
            .builder
            .finish()
            .map_err(|source| TraceError::Build { op: "output", source })
    }
}

impl TraceGuard {
    /// Ends the trace of a loop's body or test (begun by [`TraceGuard::begin_body`]) with
    /// `outputs` (named) and returns the kernel and the tensors of enclosing traces it
    /// captured, in the order of its inputs after its own. The outputs may be captured tensors.
    pub(crate) fn finish_body(
        mut self,
        outputs: &[(String, Tensor)],
    ) -> Result<(Kernel, Vec<Capture>), TraceError> {
        let tensors: Vec<Tensor> = outputs.iter().map(|(_, t)| *t).collect();
        // Resolved before the trace ends: an output that is a tensor of an enclosing trace is
        // captured like any other use.
        let ids = with_trace(|state| {
            if state.id == self.id {
                resolve(state, "output", &tensors)
            } else {
                None
            }
        })
        .flatten();
        self.finished = true;
        let state = TRACES
            .with(|traces| traces.borrow_mut().pop())
            .filter(|state| state.id == self.id);
        let Some(mut state) = state else {
            return Err(TraceError::ForeignTensor { op: "output" });
        };
        if let Some(error) = state.error {
            return Err(error);
        }
        let Some(ids) = ids else {
            return Err(TraceError::ForeignTensor { op: "output" });
        };
        for ((name, _), id) in outputs.iter().zip(ids) {
            state
                .builder
                .output(name.clone(), id)
                .map_err(|source| TraceError::Build { op: "output", source })?;
        }
        let kernel = state
            .builder
            .finish()
            .map_err(|source| TraceError::Build { op: "output", source })?;
        Ok((kernel, state.captures))
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        if !self.finished {
            TRACES.with(|traces| {
                let mut traces = traces.borrow_mut();
                if traces.last().is_some_and(|s| s.id == self.id) {
                    traces.pop();
                }
            });
        }
    }
}

/// What a traced function returns: one tensor, a tuple of up to six, an array or a `Vec`.
/// One output is called `out`; several are `out0`, `out1`, ...
pub trait TraceOutput {
    /// The output tensors, in order.
    fn into_tensors(self) -> Vec<Tensor>;
}

impl TraceOutput for Tensor {
    fn into_tensors(self) -> Vec<Tensor> {
        vec![self]
    }
}

impl TraceOutput for Vec<Tensor> {
    fn into_tensors(self) -> Vec<Tensor> {
        self
    }
}

impl<const N: usize> TraceOutput for [Tensor; N] {
    fn into_tensors(self) -> Vec<Tensor> {
        self.to_vec()
    }
}

macro_rules! tensor_ty {
    ($t:ident) => {
        Tensor
    };
}

/// `TraceOutput` for the tuple of as many tensors as names and for each shorter tuple.
macro_rules! tuple_output {
    () => {};
    ($t:ident $(, $rest:ident)*) => {
        impl TraceOutput for (Tensor, $(tensor_ty!($rest),)*) {
            fn into_tensors(self) -> Vec<Tensor> {
                let ($t, $($rest,)*) = self;
                vec![$t, $($rest),*]
            }
        }
        tuple_output!($($rest),*);
    };
}

tuple_output!(a, b, c, d, e, f);

/// The default output names for `n` outputs: `out` for one, `out0, out1, ...` otherwise.
pub(crate) fn output_names(n: usize) -> Vec<String> {
    if n == 1 {
        vec!["out".to_string()]
    } else {
        (0..n).map(|i| format!("out{i}")).collect()
    }
}
