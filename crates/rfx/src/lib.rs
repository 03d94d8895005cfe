//! `rfx`: a small, fast JIT compiler for robotics control kernels.
//!
//! **Owns:** the facade most users depend on: the tracing API ([`Tensor`], a `Copy` handle
//! into a thread-local trace, with operators and a method per HIR op), [`jit()`] (a traceable
//! function with a TinyJIT-style cache), the transforms [`grad`], [`value_and_grad`], [`jvp`],
//! [`jacobian`], [`hessian`], [`hvp`] and the batching map [`vmap`] (composable, and usable under
//! `jit`), bounded loops ([`lax`]), the expression front end
//! ([`expr`]), export as portable source ([`mod@export`]) and a [`prelude`]. It re-exports the host
//! array types of `rfx-ir` and the runtime's real-time handle.
//!
//! **Depends on:** `rfx-ir`, `rfx-opt`, `rfx-autodiff`, `rfx-lower`, `rfx-runtime`, and
//! `rfx-codegen-c` for [`mod@export`]. **May not depend on:** the JIT code generators directly; it
//! reaches them through the runtime.
//!
//! # Example
//!
//! rfxJIT's `sin(x * 2) + y`, then a gradient:
//!
//! ```
//! use rfx::Tensor;
//!
//! let f = rfx::jit(|x: Tensor, y: Tensor| (x * 2.0).sin() + y);
//! let out = f.call((&[0.0f32, 1.0, 2.0], &[1.0f32, 2.0, 3.0]))?;
//! assert_eq!(out[0].as_slice::<f32>(), Some(&[1.0f32, 2.9092975, 2.2431974][..]));
//!
//! let df = rfx::jit(rfx::value_and_grad(|x: Tensor| (x * x).sum_all()));
//! let out = df.call((&[1.0f64, 2.0, 3.0],))?;
//! assert_eq!(out[0].as_slice::<f64>(), Some(&[14.0][..]));
//! assert_eq!(out[1].as_slice::<f64>(), Some(&[2.0, 4.0, 6.0][..]));
//! # Ok::<(), rfx::JitError>(())
//! ```
//!
//! Rust cannot infer the parameter types of a closure passed to a function generic over the
//! closure's arity, so write `|x: Tensor, y: Tensor|`, or use the [`jit!`] macro, which adds
//! them: `rfx::jit!(|x, y| (x * 2.0).sin() + y)`.
//!
//! # Captured values are constants
//!
//! A traced closure runs once per input signature; the Rust values it reads become constants
//! of the kernel. Gains that change at run time must be inputs. [`jit()`] therefore rejects
//! closures that capture anything at compile time; see [`Func`] for the opt-in.
//!
//! # Cargo features
//!
//! - `cuda`, `metal`: the GPU backends, through the runtime.
//! - `nalgebra`: the module `rfx::nalgebra`, conversions between nalgebra's `SVector`,
//!   `SMatrix`, `UnitQuaternion` and `Isometry3` and rfx arrays. rfx arrays are row-major
//!   where nalgebra stores column-major (so `m.as_slice()` handed over as a `[R, C]` array is
//!   the transpose), and rfx quaternions are `[w, x, y, z]` where nalgebra stores
//!   `[x, y, z, w]`: the conversions go through indices and named components, never storage.
#![deny(missing_docs)]

mod dynamic;
pub mod export;
pub mod expr;
mod func;
mod jit;
pub mod lax;
pub mod lie;
#[cfg(feature = "nalgebra")]
pub mod nalgebra;
mod trace;

pub use dynamic::{Trace, inline};
pub use func::{
    ClosureMarker, Func, IntoKernelFn, KernelFn, KernelFnMarker, KernelSource, TraceClosure, Transform,
    TransformKind, Vmap,
};
pub use jit::{Arg, IntoArgs, Jit, JitError, array};
pub use trace::{All, Axes, Operand, Tensor, TraceError, TraceOutput, concat, constant, where_};

pub use rfx_autodiff::AdError;
pub use rfx_ir::hir::Kernel;
pub use rfx_ir::{
    Array, ArrayData, ArrayView, ArrayViewMut, DType, Element, Scalar, ScanOp, Shape, TensorType,
};
pub use rfx_lower::CallError;
pub use rfx_opt::OptConfig;
pub use rfx_runtime::{
    BoundKernel, CacheMiss, CallArgs, CompileConfig, CompileOptions, CpuTarget, DispatchQueue, Executable,
    MissReason,
};

/// Compiles `f` (a closure of [`Tensor`]s, or any [`KernelFn`] such as a transform) with a
/// cache of compiled kernels keyed by input signature; see [`Jit`].
pub fn jit<M, F: IntoKernelFn<M>>(f: F) -> Jit<F::Output> {
    Jit::new(f.into_kernel_fn())
}

/// Like [`jit()`], compiled with `config` (backend, optimiser, lowering options).
pub fn jit_with<M, F: IntoKernelFn<M>>(f: F, config: CompileConfig) -> Jit<F::Output> {
    Jit::with_config(f.into_kernel_fn(), config)
}

/// A jit of a HIR kernel (parsed from text, built, or compiled from an expression); the cache
/// key includes the kernel's fingerprint.
pub fn jit_kernel(kernel: Kernel) -> Jit<KernelSource> {
    Jit::new(KernelSource::new(kernel))
}

/// The gradient of `f` (one single-element float output) with respect to input 0 (change with
/// [`Transform::wrt`]): outputs `grad_<input>`.
pub fn grad<M, F: IntoKernelFn<M>>(f: F) -> Transform<F::Output> {
    Transform::new(f.into_kernel_fn(), TransformKind::Grad)
}

/// The value of `f` and its gradient, from one kernel: outputs the value, then `grad_<input>`.
pub fn value_and_grad<M, F: IntoKernelFn<M>>(f: F) -> Transform<F::Output> {
    Transform::new(f.into_kernel_fn(), TransformKind::ValueAndGrad)
}

/// Forward mode: takes `f`'s inputs then `tangent_<input>` per `wrt` input; outputs `f`'s
/// outputs then `tangent_<output>` per float output.
pub fn jvp<M, F: IntoKernelFn<M>>(f: F) -> Transform<F::Output> {
    Transform::new(f.into_kernel_fn(), TransformKind::Jvp)
}

/// The Jacobians of every float output: outputs `f`'s outputs then `jac_<output>_<input>` of
/// shape `output ++ input`, forward or reverse mode by shape, from one kernel.
pub fn jacobian<M, F: IntoKernelFn<M>>(f: F) -> Transform<F::Output> {
    Transform::new(f.into_kernel_fn(), TransformKind::Jacobian)
}

/// First and second derivatives of every float output, from one kernel (forward over reverse
/// mode, as `jax.hessian`): outputs `f`'s outputs, then `jac_<output>_<x>` per `wrt` input,
/// then `hess_<output>_<x>_<y>` of shape `output ++ x ++ y` per pair of `wrt` inputs. The value,
/// gradient and Hessian a Newton step needs. (A `jacobian` of a `jacobian` is a name clash.)
///
/// ```
/// use rfx::Tensor;
/// // f(x) = Σ x³: gradient 3x², Hessian diag(6x).
/// let h = rfx::jit(rfx::hessian(|x: Tensor| (x * x * x).sum_all()));
/// let out = h.call((&[1.0f64, 2.0],))?;
/// assert_eq!(out[1].as_slice::<f64>(), Some(&[3.0, 12.0][..]));
/// assert_eq!(out[2].as_slice::<f64>(), Some(&[6.0, 0.0, 0.0, 12.0][..]));
/// # Ok::<(), rfx::JitError>(())
/// ```
pub fn hessian<M, F: IntoKernelFn<M>>(f: F) -> Transform<F::Output> {
    Transform::new(f.into_kernel_fn(), TransformKind::Hessian)
}

/// Hessian-vector products: takes `f`'s inputs then `tangent_<input>`; outputs `hvp_<input>`.
pub fn hvp<M, F: IntoKernelFn<M>>(f: F) -> Transform<F::Output> {
    Transform::new(f.into_kernel_fn(), TransformKind::Hvp)
}

/// `f` (written for one example) mapped over a batch, as one kernel: every input carries the
/// batch as axis 0 unless [`Vmap::in_axes`] says otherwise, and every output has it as axis 0.
/// Composes with the derivatives both ways: `vmap(grad(f))` gives per-example gradients, and a
/// derivative of `vmap(f)` differentiates the whole batch.
///
/// ```
/// use rfx::Tensor;
/// // Per-example gradients of k · Σ x², for three 2-vectors and one shared gain k.
/// let f = rfx::jit(
///     rfx::vmap(rfx::grad(|x: Tensor, k: Tensor| (x * x).sum_all() * k))
///         .in_axes(&[Some(0), None]),
/// );
/// let x = rfx::array([3, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0])?;
/// let k = rfx::array([], vec![0.5f64])?;
/// let out = f.call((&x, &k))?;
/// assert_eq!(out[0].shape().dims(), &[3, 2]);
/// assert_eq!(out[0].as_slice::<f64>(), Some(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0][..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn vmap<M, F: IntoKernelFn<M>>(f: F) -> Vmap<F::Output> {
    Vmap::new(f.into_kernel_fn())
}

/// [`jit()`] of a closure written without parameter types: `rfx::jit!(|x, y| (x * 2.0).sin() + y)`
/// is `rfx::jit(|x: Tensor, y: Tensor| ...)`.
///
/// ```
/// let f = rfx::jit!(|x, y| x * y + 1.0);
/// let out = f.call((&[2.0f32], &[3.0f32]))?;
/// assert_eq!(out[0].as_slice::<f32>(), Some(&[7.0f32][..]));
/// # Ok::<(), rfx::JitError>(())
/// ```
#[macro_export]
macro_rules! jit {
    (|$($arg:ident),* $(,)?| $body:expr) => {
        $crate::jit(|$($arg: $crate::Tensor),*| $body)
    };
}

/// The names most programs need: `use rfx::prelude::*;`.
pub mod prelude {
    pub use crate::{
        All, Array, DType, Jit, JitError, Shape, Tensor, TensorType, constant, grad, hessian, hvp, jacobian,
        jit, jvp, value_and_grad, vmap, where_,
    };
}
