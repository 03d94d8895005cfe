//! Traceable functions: closures over [`Tensor`]s, HIR kernels, and transforms of either.

use std::marker::PhantomData;

use rfx_ir::TensorType;
use rfx_ir::hir::Kernel;
use rfx_lower::CallError;
use rfx_runtime::Fingerprint;

use crate::jit::JitError;
use crate::trace::{Tensor, TraceGuard, TraceOutput, output_names};

/// Something a [`crate::Jit`] can turn into a HIR kernel for given input types: a traced
/// closure ([`Func`]), a HIR kernel ([`KernelSource`]) or a transform ([`Transform`]).
pub trait KernelFn: Send + Sync {
    /// The kernel's name (used in cache explanations and dumps).
    fn name(&self) -> String;

    /// The names of the inputs the caller passes, in order.
    fn input_names(&self) -> Vec<String>;

    /// The fingerprint of the kernel when it is known without tracing (HIR kernels).
    fn fingerprint(&self) -> Option<Fingerprint> {
        None
    }

    /// The HIR kernel for inputs of `types` (one per [`KernelFn::input_names`]); its inputs are
    /// the caller's, in order.
    fn trace(&self, types: &[TensorType]) -> Result<Kernel, JitError>;
}

/// A Rust closure of `Tensor`s that can be traced; implemented for `Fn(Tensor, ...) -> R` with
/// one to six parameters, where `R` is a [`TraceOutput`]. `M` is an inference marker.
pub trait TraceClosure<M>: Send + Sync + 'static {
    /// The number of parameters.
    const ARITY: usize;
    /// Calls the closure on `args` (exactly `ARITY` tensors) and returns its outputs.
    fn call_traced(&self, args: &[Tensor]) -> Vec<Tensor>;
}

macro_rules! tensor_param {
    ($t:ident) => {
        Tensor
    };
}

macro_rules! closure_arity {
    ($n:literal; $($idx:literal => $a:ident),+) => {
        impl<F, R> TraceClosure<fn($(tensor_param!($a)),+) -> R> for F
        where
            F: Fn($(tensor_param!($a)),+) -> R + Send + Sync + 'static,
            R: TraceOutput,
        {
            const ARITY: usize = $n;
            fn call_traced(&self, args: &[Tensor]) -> Vec<Tensor> {
                self($(args[$idx]),+).into_tensors()
            }
        }
    };
}

closure_arity!(1; 0 => a);
closure_arity!(2; 0 => a, 1 => b);
closure_arity!(3; 0 => a, 1 => b, 2 => c);
closure_arity!(4; 0 => a, 1 => b, 2 => c, 3 => d);
closure_arity!(5; 0 => a, 1 => b, 2 => c, 3 => d, 4 => e);
closure_arity!(6; 0 => a, 1 => b, 2 => c, 3 => d, 4 => e, 5 => f);

/// The default input names for `n` inputs: `x, y, z, u, v, w` up to six, else `x0, x1, ...`.
fn default_input_names(n: usize) -> Vec<String> {
    const NAMES: [&str; 6] = ["x", "y", "z", "u", "v", "w"];
    if n <= NAMES.len() {
        NAMES[..n].iter().map(|s| (*s).to_string()).collect()
    } else {
        (0..n).map(|i| format!("x{i}")).collect()
    }
}

/// A traced closure with its kernel and input names.
///
/// **Captured values are constants.** The closure is traced once per input signature; whatever
/// Rust values it reads are baked into the kernel as constants and never read again. A gain
/// that changes at run time must be an *input*. To make the mistake hard, [`Func::new`] (and so
/// [`crate::jit()`], [`crate::grad`], ...) only accepts closures that capture nothing — a
/// capturing closure is a compile-time error:
///
/// ```compile_fail
/// let gain = 0.5;
/// // error: the closure captures `gain`, which would be frozen into the kernel
/// let f = rfx::jit(move |x: rfx::Tensor| x * gain);
/// ```
///
/// Pass the gain as an input instead, or, when it really is a constant, say so with
/// [`Func::with_constants`]:
///
/// ```
/// use rfx::{Func, Tensor};
/// let gain = 0.5; // fixed for the life of the kernel
/// let f = rfx::jit(Func::with_constants(move |x: Tensor| x * gain));
/// let out = f.call((&[2.0f32, 4.0][..],))?;
/// assert_eq!(out[0].as_slice::<f32>(), Some(&[1.0f32, 2.0][..]));
/// # Ok::<(), rfx::JitError>(())
/// ```
pub struct Func<F, M> {
    f: F,
    kernel_name: String,
    names: Vec<String>,
    _marker: PhantomData<fn() -> M>,
}

impl<F, M> std::fmt::Debug for Func<F, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Func")
            .field("name", &self.kernel_name)
            .field("inputs", &self.names)
            .finish_non_exhaustive()
    }
}

impl<F: TraceClosure<M>, M> Func<F, M> {
    /// Wraps a closure that captures nothing (checked at compile time: see the type's docs).
    pub fn new(f: F) -> Func<F, M> {
        const {
            assert!(
                std::mem::size_of::<F>() == 0,
                "rfx: the traced closure captures variables; captured values are frozen into the \
                 kernel as constants. Pass run-time values (gains, set points) as inputs, or wrap \
                 the closure in `rfx::Func::with_constants` if they really are constants."
            );
        }
        Func::with_constants(f)
    }

    /// Wraps a closure whose captured values are meant as constants of the kernel: they are
    /// read once, when a new input signature is traced, and never again.
    pub fn with_constants(f: F) -> Func<F, M> {
        Func {
            f,
            kernel_name: "jit_fn".to_string(),
            names: default_input_names(F::ARITY),
            _marker: PhantomData,
        }
    }

    /// Names the inputs (default `x, y, z, u, v, w`); extra names are ignored, missing ones
    /// keep their default.
    pub fn named(mut self, names: &[&str]) -> Func<F, M> {
        for (slot, name) in self.names.iter_mut().zip(names) {
            *slot = (*name).to_string();
        }
        self
    }

    /// Names the kernel (default `jit_fn`).
    pub fn kernel_name(mut self, name: &str) -> Func<F, M> {
        self.kernel_name = name.to_string();
        self
    }
}

impl<F: TraceClosure<M>, M> KernelFn for Func<F, M> {
    fn name(&self) -> String {
        self.kernel_name.clone()
    }

    fn input_names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn trace(&self, types: &[TensorType]) -> Result<Kernel, JitError> {
        check_arity(self.names.len(), types.len())?;
        let guard = TraceGuard::begin(&self.kernel_name);
        let args: Vec<Tensor> = self
            .names
            .iter()
            .zip(types)
            .map(|(name, ty)| guard.input(name, ty.clone()))
            .collect();
        let outputs = self.f.call_traced(&args);
        let named: Vec<(String, Tensor)> = output_names(outputs.len()).into_iter().zip(outputs).collect();
        Ok(guard.finish(&named)?)
    }
}

fn check_arity(expected: usize, found: usize) -> Result<(), CallError> {
    if expected == found {
        Ok(())
    } else {
        Err(CallError::Arity {
            what: "inputs",
            expected,
            found,
        })
    }
}

/// A HIR kernel (parsed from text, built with the `Builder`, or compiled from an expression)
/// as a [`KernelFn`]: "tracing" checks the input types against the kernel's declared ones.
#[derive(Clone, Debug)]
pub struct KernelSource {
    kernel: Kernel,
    fingerprint: Fingerprint,
}

impl KernelSource {
    /// Wraps `kernel`.
    pub fn new(kernel: Kernel) -> KernelSource {
        let fingerprint = Fingerprint::of(&kernel);
        KernelSource { kernel, fingerprint }
    }

    /// The kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }
}

impl KernelFn for KernelSource {
    fn name(&self) -> String {
        self.kernel.name().to_string()
    }

    fn input_names(&self) -> Vec<String> {
        self.kernel
            .inputs()
            .map(|(_, name, _)| name.to_string())
            .collect()
    }

    fn fingerprint(&self) -> Option<Fingerprint> {
        Some(self.fingerprint)
    }

    fn trace(&self, types: &[TensorType]) -> Result<Kernel, JitError> {
        check_arity(self.kernel.inputs().count(), types.len())?;
        for ((_, name, declared), ty) in self.kernel.inputs().zip(types) {
            if declared.dtype != ty.dtype {
                return Err(CallError::DType {
                    name: name.to_string(),
                    expected: declared.dtype,
                    found: ty.dtype,
                }
                .into());
            }
            if declared.shape != ty.shape {
                return Err(CallError::Shape {
                    name: name.to_string(),
                    expected: declared.shape.clone(),
                    found: ty.shape.clone(),
                }
                .into());
            }
        }
        Ok(self.kernel.clone())
    }
}

/// Converts closures and [`KernelFn`]s into a [`KernelFn`]; what [`crate::jit()`] and the
/// transforms accept. `M` is an inference marker.
pub trait IntoKernelFn<M> {
    /// The resulting kernel function.
    type Output: KernelFn;
    /// Converts.
    fn into_kernel_fn(self) -> Self::Output;
}

/// Marker for closures in [`IntoKernelFn`].
#[derive(Debug)]
pub struct ClosureMarker<M>(PhantomData<M>);

/// Marker for [`KernelFn`]s in [`IntoKernelFn`].
#[derive(Debug)]
pub struct KernelFnMarker;

impl<F: TraceClosure<M>, M> IntoKernelFn<ClosureMarker<M>> for F {
    type Output = Func<F, M>;
    fn into_kernel_fn(self) -> Func<F, M> {
        Func::new(self)
    }
}

impl<K: KernelFn> IntoKernelFn<KernelFnMarker> for K {
    type Output = K;
    fn into_kernel_fn(self) -> K {
        self
    }
}

/// Which derivative a [`Transform`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransformKind {
    /// [`crate::grad`].
    Grad,
    /// [`crate::value_and_grad`].
    ValueAndGrad,
    /// [`crate::jvp`].
    Jvp,
    /// [`crate::jacobian`].
    Jacobian,
    /// [`crate::hessian`].
    Hessian,
    /// [`crate::hvp`].
    Hvp,
}

impl TransformKind {
    fn name(self) -> &'static str {
        match self {
            TransformKind::Grad => "grad",
            TransformKind::ValueAndGrad => "value_and_grad",
            TransformKind::Jvp => "jvp",
            TransformKind::Jacobian => "jacobian",
            TransformKind::Hessian => "hessian",
            TransformKind::Hvp => "hvp",
        }
    }

    fn takes_tangents(self) -> bool {
        matches!(self, TransformKind::Jvp | TransformKind::Hvp)
    }
}

/// A derivative of a [`KernelFn`], itself a [`KernelFn`] (so transforms compose and run under
/// [`crate::jit()`]). Input and output names follow `rfx-autodiff`'s conventions (`grad_<input>`,
/// `tangent_<input>`, `jac_<output>_<input>`, `hess_<output>_<x>_<y>`, ...). Differentiates with respect to input 0
/// unless [`Transform::wrt`] says otherwise.
#[derive(Clone, Debug)]
pub struct Transform<K> {
    inner: K,
    kind: TransformKind,
    wrt: Vec<usize>,
}

impl<K: KernelFn> Transform<K> {
    /// A transform of `inner`.
    pub fn new(inner: K, kind: TransformKind) -> Transform<K> {
        Transform {
            inner,
            kind,
            wrt: vec![0],
        }
    }

    /// Differentiates with respect to the inputs at `positions`.
    pub fn wrt(mut self, positions: &[usize]) -> Transform<K> {
        self.wrt = positions.to_vec();
        self
    }
}

impl<K: KernelFn> KernelFn for Transform<K> {
    fn name(&self) -> String {
        format!("{}_{}", self.kind.name(), self.inner.name())
    }

    fn input_names(&self) -> Vec<String> {
        let mut names = self.inner.input_names();
        if self.kind.takes_tangents() {
            let tangents: Vec<String> = self
                .wrt
                .iter()
                .filter_map(|&i| names.get(i).map(|n| format!("tangent_{n}")))
                .collect();
            names.extend(tangents);
        }
        names
    }

    fn trace(&self, types: &[TensorType]) -> Result<Kernel, JitError> {
        let n_inner = self.inner.input_names().len();
        check_arity(self.input_names().len(), types.len())?;
        let kernel = self.inner.trace(&types[..n_inner])?;
        let traced = kernel.inputs().count();
        if traced != n_inner {
            return Err(JitError::InputCount {
                transform: self.kind.name(),
                declared: n_inner,
                traced,
            });
        }
        let wrt = self.wrt.as_slice();
        let result = match self.kind {
            TransformKind::Grad => rfx_autodiff::grad(&kernel, wrt),
            TransformKind::ValueAndGrad => rfx_autodiff::value_and_grad(&kernel, wrt),
            TransformKind::Jvp => rfx_autodiff::jvp(&kernel, wrt),
            TransformKind::Jacobian => rfx_autodiff::jacobian(&kernel, wrt),
            TransformKind::Hessian => rfx_autodiff::hessian(&kernel, wrt),
            TransformKind::Hvp => rfx_autodiff::hvp(&kernel, wrt),
        };
        Ok(result?)
    }
}

/// A [`KernelFn`] mapped over a batch ([`crate::vmap`]): `inner` written for one example, run
/// on a batch of them as one kernel. By default every input carries the batch as its axis 0;
/// [`Vmap::in_axes`] picks other axes or shares inputs across the batch. The batch size comes
/// from the arguments of each call (a new size is a new signature: traced and compiled once,
/// then cached). Every output has the batch as axis 0 unless [`Vmap::out_axes`] says otherwise.
#[derive(Clone, Debug)]
pub struct Vmap<K> {
    inner: K,
    in_axes: Option<Vec<Option<usize>>>,
    out_axes: Option<Vec<Option<usize>>>,
}

impl<K: KernelFn> Vmap<K> {
    /// `inner` mapped with every input batched along axis 0.
    pub fn new(inner: K) -> Vmap<K> {
        Vmap {
            inner,
            in_axes: None,
            out_axes: None,
        }
    }

    /// One entry per input: `Some(a)`, the input's axis `a` is the batch; `None`, the input is
    /// shared by every example (a gain, a DH table).
    pub fn in_axes(mut self, axes: &[Option<usize>]) -> Vmap<K> {
        self.in_axes = Some(axes.to_vec());
        self
    }

    /// One entry per output: `Some(a)`, the batch is the output's axis `a` (`[n, batch]` rows
    /// of examples' columns for `a = 1` and a vector output); `None`, the output has no batch
    /// axis, which only an output that no batched input reaches can have (a value shared by
    /// every example, computed once). The default is `Some(0)` for every output.
    pub fn out_axes(mut self, axes: &[Option<usize>]) -> Vmap<K> {
        self.out_axes = Some(axes.to_vec());
        self
    }
}

impl<K: KernelFn> KernelFn for Vmap<K> {
    fn name(&self) -> String {
        format!("vmap_{}", self.inner.name())
    }

    fn input_names(&self) -> Vec<String> {
        self.inner.input_names()
    }

    fn trace(&self, types: &[TensorType]) -> Result<Kernel, JitError> {
        let names = self.inner.input_names();
        check_arity(names.len(), types.len())?;
        let in_axes = self.in_axes.clone().unwrap_or_else(|| vec![Some(0); names.len()]);
        if in_axes.len() != names.len() {
            return Err(rfx_autodiff::AdError::BatchAxesCount {
                expected: names.len(),
                found: in_axes.len(),
            }
            .into());
        }
        let mut size: Option<(usize, &str)> = None;
        let mut example_types = Vec::with_capacity(types.len());
        for ((ty, axis), name) in types.iter().zip(&in_axes).zip(&names) {
            let Some(axis) = *axis else {
                example_types.push(ty.clone());
                continue;
            };
            let Some(&extent) = ty.shape.dims().get(axis) else {
                return Err(JitError::BatchAxisMissing {
                    name: name.clone(),
                    axis,
                    shape: ty.shape.clone(),
                });
            };
            match size {
                Some((expected, first)) if expected != extent => {
                    return Err(JitError::BatchSize {
                        name: name.clone(),
                        found: extent,
                        first: first.to_string(),
                        expected,
                    });
                }
                _ => size = Some((extent, name)),
            }
            let mut dims = ty.shape.dims().to_vec();
            dims.remove(axis);
            example_types.push(TensorType::new(ty.dtype, dims));
        }
        let Some((size, _)) = size else {
            return Err(rfx_autodiff::AdError::NothingBatched.into());
        };
        let kernel = self.inner.trace(&example_types)?;
        let traced = kernel.inputs().count();
        if traced != names.len() {
            return Err(JitError::InputCount {
                transform: "vmap",
                declared: names.len(),
                traced,
            });
        }
        let out_axes = self
            .out_axes
            .clone()
            .unwrap_or_else(|| vec![Some(0); kernel.outputs().len()]);
        Ok(rfx_autodiff::vmap_out(&kernel, &in_axes, &out_axes, size)?)
    }
}
