//! `rfx-autodiff`: automatic differentiation as HIR → HIR transforms.
//!
//! **Owns:** reverse mode ([`vjp`], [`grad`], [`value_and_grad`]), forward mode ([`jvp`]),
//! Jacobians ([`jacrev`], [`jacfwd`], [`jacobian`]), Hessians ([`hessian`]) and Hessian-vector
//! products ([`hvp`]),
//! each producing one HIR kernel that computes values and derivatives together so that
//! `rfx-opt` can fuse them into a single loop; and the batching map [`vmap`], which turns a
//! kernel written for one example into one kernel over a batch of them (and composes with the
//! derivatives both ways).
//!
//! **Depends on:** `rfx-ir` only. **May not depend on:** the optimiser, lowering, code generators or
//! the runtime: a gradient is just another HIR kernel.
//!
//! # How the transforms work
//!
//! Every transform copies the primal kernel (inputs first, in order) into a new kernel and adds
//! derivative nodes after it: reverse mode walks the nodes backwards accumulating adjoints
//! (fan-out sums), forward mode walks them forwards carrying tangents. Only *active* values
//! (float values that depend on a `wrt` input) get derivatives; zeros are symbolic and never
//! emitted, except as a constant output when an output does not depend on an input at all.
//! Nodes that no output needs are dropped. The transforms accept any verified kernel, their
//! own results included, so higher derivatives are compositions (`grad` of `grad`, [`hvp`]
//! is `jvp` of `grad`); [`keep_outputs`] picks the outputs to differentiate further.
//!
//! Jacobians are batched sweeps: reverse mode pulls back an identity basis of each output in
//! one sweep (cotangents of shape `out ++ S`), forward mode pushes forward an identity basis of
//! each input (tangents of shape `in ++ S`). The identities are built inside the kernel from
//! `iota`s (they fuse into the sweep and cost no input or memory), and forward mode lays its
//! result out output-major with a `transpose`. A seeded derivative stays *diagonal* (kept as
//! its diagonal, of the seed's shape) while only elementwise ops of that shape act on it: the
//! Jacobian of an elementwise map (either mode), or the Hessian of a separable cost (forward
//! over the reverse sweep), costs `n` ops per op instead of `n²`, and its off-diagonal entries
//! are exact zeros where a dense sweep would compute `0 · ∂` (NaN where the partial `∂` is not
//! finite).
//!
//! Broadcasting: an operand broadcast (implicitly by an elementwise op, or by `broadcast_to`)
//! gets its adjoint summed over the broadcast axes and reshaped back to its shape. Reductions
//! spread their adjoint back over the reduced axes.
//!
//! # Batching
//!
//! [`vmap`] rewrites each op one axis up: reductions, scans and transposes shift their axes, a
//! batch axis given elsewhere is moved to the front by a `transpose` (which `rfx-opt` turns into
//! strided loads), and values no batched input reaches stay unbatched, so example `b` gets the
//! bits of the kernel run on example `b` alone. [`vmap_out`] moves each output's batch axis where
//! `out_axes` says (a `transpose`), or leaves an output that no batched input reaches without one.
//!
//! # Windows, lookups and scans
//!
//! `slice` and `pad` are each other's transpose. A `gather`'s table adjoint is a scatter-add
//! written as a masked sum over the index's extent (`iota == row`): an ordinary fused reduction
//! on every backend (no atomics), `O(table rows × lookups)`; the index gets no derivative. A
//! running sum's adjoint is the running sum from the other end. A running maximum's or
//! minimum's derivatives follow the element each result is (its position is a running maximum
//! of the positions where a step took its element): a lookup forward; back, each run of results
//! holding one element is summed from its end by a linear recurrence with coefficients of one
//! and zero, `O(n)`. A running product's derivatives are linear recurrences too, exact at zeros
//! and `O(n)`. A `linrec`'s tangent is the same recurrence of the tangents; its adjoint is the
//! recurrence run from the other end with the coefficient shifted by one.
//!
//! # Loops
//!
//! A loop (`fori_loop`, `while_loop`; see `rfx_ir::hir::Loop`) is transformed as a loop: the
//! generated code does not grow with its trip count. Each transform builds new body (and
//! test) kernels with the same transforms, so nested loops and higher derivatives (`grad` of
//! `grad`, [`hessian`], `vmap` of `grad`) compose.
//!
//! - **Forward mode** runs one loop carrying the carries and the tangent of each float carry
//!   that depends on a tangent (found by iterating the body's activity to a fixed point),
//!   with the invariants' tangents as extra invariants; its body is the body's JVP. A batched
//!   tangent carry (`jacfwd`, [`hessian`]) has the batch shape in front; an identity seed
//!   enters the loop densely (`|batch| · |carry|` per carry). The tangent loop also gives the
//!   primal carries, so the primal loop does not run besides it ([`jacfwd`] runs one tangent
//!   loop per `wrt` input, each a batched sweep).
//! - **Reverse mode** stores the carries. A recording loop runs the body again with a counter
//!   `t` and, for each carry the body's VJP reads, a history of shape `[trips, ...carry]`
//!   whose row `t` receives the carry entering iteration `t`, written as `set_row(history,
//!   carry, t)`, compiled to a store of that one row (`O(|carry|)` work per iteration; a
//!   `while_loop`'s masked body masks the row; under `vmap` a history updated at an unbatched
//!   row is held `[trips, batch, ...carry]` while the loop runs);
//!   `trips · |carry|` elements of memory per stored carry. A second loop then runs `t` from the number of iterations
//!   that ran minus one down to 0 (a while loop of at most `trips` iterations): it reads row
//!   `t` of each history with a `gather`, applies the body's VJP to the carries' cotangents,
//!   and sums the invariants' cotangents in extra carries. The recording loop also gives the
//!   primal carries, so a gradient runs the loop twice in all (forward, then backward), and
//!   [`jacrev`]'s sweeps share one recording loop, with one reverse loop per output. Histories
//!   that could not exist in memory (more than `isize::MAX` bytes) are an [`AdError::Loop`].
//! - **While loops**: the iterations that actually ran are differentiated; the test's
//!   decision is not (as JAX's `while_loop`): a loop that stops at once passes its initial
//!   carries through, with derivative one.
//! - **vmap** batches a carry when its initial value is batched or the body makes it depend
//!   on a batched value (an unbatched initial value is then broadcast at entry); the body is
//!   the body's `vmap`. A test that depends on a batched value gives one decision per example:
//!   every carry is batched, the loop runs while any example continues, and the body keeps an
//!   example's carries unchanged once its test fails (`select(keep, body(c), c)`), so each
//!   example gets the bits of its own run; a history updated at an unbatched row is still held
//!   `[trips, batch, ...carry]` and only its row is masked (`set_row(h, select(keep, row,
//!   h[t]), t)`, `t` carried once more unbatched).
//!
//! Only float carries and invariants carry derivatives; an `i32` counter or a `bool` flag is
//! still stored when the body's derivative reads it.
//!
//! # Names
//!
//! | transform | extra inputs | outputs |
//! |---|---|---|
//! | [`vjp`] | `ct_<output>` per float output | the outputs, then `grad_<input>` per `wrt` |
//! | [`grad`] | — | `grad_<input>` per `wrt` |
//! | [`value_and_grad`] | — | the output, then `grad_<input>` per `wrt` |
//! | [`jvp`] | `tangent_<input>` per `wrt` | the outputs, then `tangent_<output>` per float output |
//! | [`jacrev`], [`jacfwd`], [`jacobian`] | — | the outputs, then `jac_<output>_<input>`, shape `out ++ in` |
//! | [`hessian`] | — | the outputs, `jac_<output>_<x>`, then `hess_<output>_<x>_<y>`, shape `out ++ x ++ y` |
//! | [`hvp`] | `tangent_<input>` per `wrt` | `hvp_<input>` per `wrt` |
//! | [`vmap`] | — (inputs keep their names, batched ones gain the batch axis) | the outputs, each with the batch as axis 0 |
//!
//! `wrt` lists inputs by name (`&["x", "y"]`) or by position (`&[0, 1]`); see [`InputRef`].
//! Only f32 and f64 inputs can be differentiated; bool and i32 outputs get no cotangent or
//! tangent. A generated name that is already taken is an [`AdError::NameClash`].
//!
//! # Derivative conventions
//!
//! Where a function is not differentiable, rfx returns what JAX returns: the rules follow
//! `jax.lax`'s JVP rules (`abs`, `max_p`/`min_p`, `clamp_p`, `pow_p`, `rem_p`, the reduction
//! choosers). Each row is tested at its special points.
//!
//! | op | derivative | at kinks and special points |
//! |---|---|---|
//! | `abs x` | `+1` where `x >= 0`, else `-1` | `+1` at `±0` (JAX: `select(x >= 0, g, -g)`) |
//! | `max a, b` / `min a, b` | to the operand equal to the result | tie: `1/2` each (JAX's balanced rule) |
//! | `clamp x, lo, hi` | `x` iff `lo < x < hi`; `lo` iff `x < lo < hi`; `hi` iff `hi < max(x, lo)` | on ties (`x == lo`, `x == hi`) nobody gets it, as `lax.clamp`; with `lo > hi` (result `hi`) `hi` gets it |
//! | `select c, a, b` | `a` where `c`, `b` elsewhere, by select (a NaN in the other branch does not leak) | `c` gets none |
//! | `sign`, `floor`, `ceil`, `round` | 0 | 0 everywhere, jumps included |
//! | comparisons, `and`, `or`, `not`, casts to i32/bool | none (not differentiable) | |
//! | cast f32 ↔ f64 | the derivative, cast back | |
//! | `sqrt x` | `0.5 / sqrt(x)` | `+Inf` at 0 |
//! | `rsqrt x` | `-0.5 · rsqrt(x) / x` | `-Inf`/NaN at 0 |
//! | `recip x` | `-recip(x)²` | `-Inf` at 0 |
//! | `log x` | `1 / x` | `+Inf` at `+0`, `-Inf` at `-0` |
//! | `log2 x` | `1 / (x ln 2)` | as `log` |
//! | `exp`, `exp2` | `exp(x)`, `exp2(x) ln 2` | |
//! | `sin`, `cos`, `tan` | `cos x`, `-sin x`, `1 + tan² x` | |
//! | `tanh`, `sigmoid`, `atan` | `1 - tanh²`, `σ(1 - σ)`, `1 / (1 + x²)` | |
//! | `asin`, `acos` | `±rsqrt(1 - x²)` | `±Inf` at `±1` |
//! | `div a, b` | `g / b`; `-a / b²` | |
//! | `pow a, b` | `∂a = b · a^(b-1)`; `∂b = log(a) · a^b` | `∂a = 0` where `b == 0`; `∂b = 0` where `a == 0` (log(0) replaced by log(1), JAX); `∂b` is NaN for `a < 0` |
//! | `atan2 a, b` | `∂a = b / (a² + b²)`; `∂b = -a / (a² + b²)` | NaN at the origin |
//! | `fmod a, b` | `∂a = 1`; `∂b = -trunc(a / b)` | |
//! | `sum`, `mean` | spread (mean: divided by the count) | |
//! | `prod` | product of the other elements | exact at zeros: one zero gets the product of the rest, the rest 0; two or more zeros: all 0 |
//! | `max`/`min` reductions | to the elements equal to the result | ties share equally (`1/count` each), as JAX |
//!
//! A derivative multiplies the incoming derivative by these values, so a zero cotangent times
//! an infinite partial is NaN, as in JAX.
//!
//! # Example
//!
//! ```
//! use rfx_autodiff::value_and_grad;
//! use rfx_ir::hir::Builder;
//! use rfx_ir::interp::{Mode, run_hir};
//! use rfx_ir::{Array, BinaryOp, DType, ReduceOp, TensorType};
//!
//! // loss = sum(x * x)
//! let mut b = Builder::new("sum_sq");
//! let x = b.input("x", TensorType::new(DType::F64, [3]))?;
//! let sq = b.binary(BinaryOp::Mul, x, x)?;
//! let loss = b.reduce_all(ReduceOp::Sum, sq)?;
//! b.output("loss", loss)?;
//! let kernel = value_and_grad(&b.finish()?, &["x"])?;
//!
//! let x = Array::from_vec(vec![3], vec![1.0f64, 2.0, 3.0])?;
//! let out = run_hir(&kernel, &[x.view()], Mode::Native)?;
//! assert_eq!(out[0].as_slice::<f64>(), Some(&[14.0][..]));
//! assert_eq!(out[1].as_slice::<f64>(), Some(&[2.0, 4.0, 6.0][..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod batch;
mod error;
mod forward;
mod graph;
mod loops;
mod reverse;
mod rules;

pub use batch::{vmap, vmap_out};
pub use error::AdError;
pub use forward::{hessian, hvp, jacfwd, jacobian, jvp};
pub use graph::{InputRef, keep_outputs};
pub use reverse::{grad, jacrev, value_and_grad, vjp};
