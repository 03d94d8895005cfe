//! Bounded loops in traced functions, as JAX's `lax` has them: [`fori_loop`] (a fixed trip
//! count) and [`while_loop`] (a test and a maximum trip count), carrying any number of tensors.
//!
//! The body is traced once, into a kernel of its own; the loop is one HIR node
//! ([`rfx_ir::hir::Op::Loop`]) and stays a loop through every stage: the compiled program
//! repeats the body's kernels, so a loop of 10,000 trips compiles to the same code as one of
//! 100. Loops differentiate ([`crate::grad`], [`crate::jvp`], ...) and map over batches
//! ([`crate::vmap`]). See `docs/loops.md` for how they compile and what derivatives cost.
//!
//! The body is a closure: a tensor of the enclosing function that it uses (a gain, a target,
//! a time step) becomes an *invariant* of the loop, read on every iteration. Carries keep
//! their dtype and shape: a body that returns other carries than it takes is a
//! [`TraceError::Loop`](crate::TraceError::Loop), reported by the `jit` call like every
//! tracing error (the loop's results are then poisoned tensors; nothing panics).
//!
//! ```
//! use rfx::Tensor;
//!
//! // Newton's iteration for sqrt(a): x <- (x + a / x) / 2, eight times.
//! let sqrt = rfx::jit(|a: Tensor| {
//!     rfx::lax::fori_loop(0, 8, |_, x| vec![(x[0] + a / x[0]) * 0.5], &[a])[0]
//! });
//! let out = sqrt.call((&[2.0f64, 9.0],))?;
//! let x = out[0].to_f64_vec();
//! assert!((x[0] - 2f64.sqrt()).abs() < 1e-15 && x[1] == 3.0);
//! # Ok::<(), rfx::JitError>(())
//! ```

use crate::Tensor;

/// Runs `body` for `i` from `lower` up to `upper` (excluded), threading the carries:
/// `c = init; for i in lower..upper { c = body(i, c) }`, and returns the final carries.
///
/// `i` is an `i32` scalar tensor; the carries are the tensors `body` receives and must
/// return, in number, dtype and shape as `init`. `upper - lower` is the trip count, known
/// when tracing; `upper < lower` is a [`TraceError::Loop`](crate::TraceError::Loop), as are
/// no carries at all and more than `i32::MAX` trips. Tensors of the enclosing function that
/// `body` uses become invariants of the loop.
///
/// ```
/// use rfx::Tensor;
///
/// // The sum of the counter and a running product, from one loop with two carries.
/// let f = rfx::jit(|x: Tensor| {
///     let zero = x.full_like(0.0);
///     let c = rfx::lax::fori_loop(1, 4, |i, c| vec![c[0] + i.cast(rfx::DType::F64), c[1] * x], &[zero, x]);
///     c[0] + c[1]
/// });
/// let out = f.call((&[2.0f64],))?;
/// assert_eq!(out[0].as_slice::<f64>(), Some(&[6.0 + 16.0][..]));
/// # Ok::<(), rfx::JitError>(())
/// ```
pub fn fori_loop<B>(lower: i32, upper: i32, body: B, init: &[Tensor]) -> Vec<Tensor>
where
    B: FnOnce(Tensor, &[Tensor]) -> Vec<Tensor>,
{
    crate::trace::fori_loop(lower, upper, body, init)
}

/// Runs `body` while `cond` holds, at most `max_iter` times:
/// `c = init; for _ in 0..max_iter { if !cond(c) { break } c = body(c) }`, and returns the
/// final carries.
///
/// `cond` returns a `bool` scalar tensor; `body` returns the carries in number, dtype and
/// shape as `init`. `max_iter` bounds the loop (every compiled loop is bounded, so that it
/// can be stored for reverse mode and run on GPUs); when the test still holds after
/// `max_iter` iterations, the loop ends there. Anything else is a
/// [`TraceError::Loop`](crate::TraceError::Loop). Tensors of the enclosing function that
/// `cond` or `body` use become invariants of the loop.
///
/// ```
/// use rfx::Tensor;
///
/// // Halve x until it is below 1, counting the steps (at most 64).
/// let f = rfx::jit(|x: Tensor| {
///     let steps = rfx::constant(&rfx::Array::scalar(rfx::Scalar::I32(0)));
///     let c = rfx::lax::while_loop(|c| c[0].ge(1.0), |c| vec![c[0] * 0.5, c[1] + 1], &[x, steps], 64);
///     (c[0], c[1])
/// });
/// let out = f.call((&rfx::array([], vec![10.0f64])?,))?;
/// assert_eq!(out[0].as_slice::<f64>(), Some(&[0.625][..]));
/// assert_eq!(out[1].as_slice::<i32>(), Some(&[4][..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn while_loop<C, B>(cond: C, body: B, init: &[Tensor], max_iter: u64) -> Vec<Tensor>
where
    C: FnOnce(&[Tensor]) -> Tensor,
    B: FnOnce(&[Tensor]) -> Vec<Tensor>,
{
    crate::trace::while_loop(cond, body, init, max_iter)
}
