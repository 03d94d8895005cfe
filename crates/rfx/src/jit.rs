//! The jit object: a traceable function plus its cache of compiled kernels.

use std::sync::Arc;

use rfx_autodiff::AdError;
use rfx_ir::hir::Kernel;
use rfx_ir::{Array, ArrayView, DataRef, Element, Shape, TensorType};
use rfx_lower::CallError;
use rfx_runtime::{
    BoundKernel, Cache, CacheKey, CacheMiss, CompileConfig, Executable, RuntimeError, registry,
};

use crate::func::KernelFn;
use crate::trace::TraceError;

/// Why a jitted call failed. Nothing ran when the call itself was rejected (tracing, typing,
/// compiling, bad arguments); a backend failure while running (a GPU driver error) may leave
/// some outputs written.
#[derive(Debug, thiserror::Error)]
pub enum JitError {
    /// Tracing the function broke a typing rule (shape or dtype mismatch, ...).
    #[error("tracing failed: {0}")]
    Trace(#[from] TraceError),
    /// A transform (a derivative, `vmap`) rejected the kernel or its arguments.
    #[error("transform failed: {0}")]
    Autodiff(#[from] AdError),
    /// The arguments do not fit the function (arity, dtype, shape).
    #[error(transparent)]
    Call(#[from] CallError),
    /// Compiling or running failed.
    #[error(transparent)]
    Runtime(RuntimeError),
    /// [`crate::vmap`]: a batched argument has no axis where its batch should be.
    #[error("`vmap`: input `{name}` has shape {shape}, which has no axis {axis} to map over")]
    BatchAxisMissing {
        /// The input.
        name: String,
        /// Its batch axis.
        axis: usize,
        /// The argument's shape.
        shape: Shape,
    },
    /// [`crate::vmap`]: batched arguments disagree on the batch size.
    #[error(
        "`vmap`: input `{name}` has {found} example(s) along its batch axis, but `{first}` has {expected}"
    )]
    BatchSize {
        /// The input.
        name: String,
        /// Its batch size.
        found: usize,
        /// The first batched input.
        first: String,
        /// The first batched input's batch size.
        expected: usize,
    },
    /// A transform of a [`KernelFn`] whose traced kernel does not take exactly the inputs the
    /// function declares ([`KernelFn::input_names`]).
    #[error("`{transform}`: the function declares {declared} input(s) but its kernel takes {traced}")]
    InputCount {
        /// The transform.
        transform: &'static str,
        /// Inputs the function declares.
        declared: usize,
        /// Inputs of the kernel it traced.
        traced: usize,
    },
}

impl From<RuntimeError> for JitError {
    fn from(error: RuntimeError) -> JitError {
        match error {
            RuntimeError::Call(call) => JitError::Call(call),
            other => JitError::Runtime(other),
        }
    }
}

impl JitError {
    /// `true` when the error is the caller's doing rather than a compiler bug.
    pub fn is_user_error(&self) -> bool {
        match self {
            JitError::Runtime(e) => e.is_user_error(),
            _ => true,
        }
    }
}

/// One argument of an easy call: a shape and borrowed elements. Made from `&Array`,
/// `ArrayView`, `&[T]`, `&Vec<T>` and `&[T; N]` (the last three one-dimensional).
#[derive(Clone, Debug)]
pub struct Arg<'a> {
    shape: Shape,
    data: DataRef<'a>,
}

impl<'a> Arg<'a> {
    /// An argument of `shape` over `data`; the call checks that the lengths agree.
    pub fn new(shape: impl Into<Shape>, data: DataRef<'a>) -> Arg<'a> {
        Arg {
            shape: shape.into(),
            data,
        }
    }

    /// The argument's type.
    pub fn ty(&self) -> TensorType {
        TensorType::new(self.data.dtype(), self.shape.clone())
    }
}

impl<'a> From<&'a Array> for Arg<'a> {
    fn from(a: &'a Array) -> Arg<'a> {
        Arg::new(a.shape().clone(), a.data().as_ref())
    }
}

impl<'a> From<ArrayView<'a>> for Arg<'a> {
    fn from(v: ArrayView<'a>) -> Arg<'a> {
        Arg::new(v.shape().clone(), v.data())
    }
}

impl<'a, T: Element> From<&'a [T]> for Arg<'a> {
    fn from(s: &'a [T]) -> Arg<'a> {
        Arg::new([s.len()], T::data_ref(s))
    }
}

impl<'a, T: Element> From<&'a Vec<T>> for Arg<'a> {
    fn from(s: &'a Vec<T>) -> Arg<'a> {
        Arg::from(s.as_slice())
    }
}

impl<'a, T: Element, const N: usize> From<&'a [T; N]> for Arg<'a> {
    fn from(s: &'a [T; N]) -> Arg<'a> {
        Arg::from(&s[..])
    }
}

/// The arguments of an easy call: a tuple of up to six things that convert to [`Arg`], an
/// array of them, or a `Vec<Arg>`.
pub trait IntoArgs<'a> {
    /// The arguments, in order.
    fn into_args(self) -> Vec<Arg<'a>>;
}

impl<'a> IntoArgs<'a> for Vec<Arg<'a>> {
    fn into_args(self) -> Vec<Arg<'a>> {
        self
    }
}

impl<'a> IntoArgs<'a> for &'a [Array] {
    fn into_args(self) -> Vec<Arg<'a>> {
        self.iter().map(Arg::from).collect()
    }
}

impl<'a, A: Into<Arg<'a>>, const N: usize> IntoArgs<'a> for [A; N] {
    fn into_args(self) -> Vec<Arg<'a>> {
        self.into_iter().map(Into::into).collect()
    }
}

/// `IntoArgs` for the tuple of the named type parameters and for each shorter tuple of its tail.
macro_rules! tuple_args {
    () => {};
    ($a:ident $(, $rest:ident)*) => {
        impl<'a, $a: Into<Arg<'a>>, $($rest: Into<Arg<'a>>),*> IntoArgs<'a> for ($a, $($rest,)*) {
            #[expect(non_snake_case, reason = "the tuple's fields are named after their type parameter")]
            fn into_args(self) -> Vec<Arg<'a>> {
                let ($a, $($rest,)*) = self;
                vec![$a.into(), $($rest.into()),*]
            }
        }
        tuple_args!($($rest),*);
    };
}

tuple_args!(A, B, C, D, E, G);

/// A traceable function with its own cache of compiled kernels (rfxJIT's `@jit`).
///
/// The first call with a new input signature (dtypes and shapes), backend or options traces
/// the function, optimises, lowers and compiles it; later calls with the same signature replay
/// the compiled kernel. [`Jit::compile_count`] counts compiles, [`Jit::last_miss`] explains the
/// last one (also logged to stderr with `RFX_LOG=cache`). A `Jit` is `Sync`: share it between
/// threads; each new signature compiles once.
///
/// For control loops, [`Jit::bind`] returns a [`BoundKernel`] whose calls allocate nothing and
/// take no lock; its [`BoundKernel::args`] and [`BoundKernel::run_args`] are the fastest path
/// (arguments checked once, written in place; on the CPU a call checks nothing).
///
/// ```
/// use rfx::{DType, Tensor, TensorType};
///
/// let pid = rfx::jit(|e: Tensor, i: Tensor| (e * 1.2 + i * 0.3).clamp(-1.0, 1.0));
/// let ty = TensorType::new(DType::F32, [1]);
/// let mut bound = pid.bind(&[ty.clone(), ty])?;
/// let mut args = bound.args()?;
/// for (e, i) in [(0.5f32, 0.1f32), (2.0, 0.0)] {
///     args.input_mut::<f32>(0).ok_or("e is f32")?[0] = e;
///     args.input_mut::<f32>(1).ok_or("i is f32")?[0] = i;
///     bound.run_args(&mut args)?;
///     let u = args.output::<f32>(0).ok_or("u is f32")?[0];
///     assert_eq!(u, (e * 1.2 + i * 0.3).clamp(-1.0, 1.0));
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Jit<K> {
    func: K,
    config: CompileConfig,
    /// `config.options_key()`, computed once: the configuration never changes.
    options_key: [String; 3],
    cache: Cache,
    input_names: Vec<String>,
}

impl<K> std::fmt::Debug for Jit<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jit")
            .field("inputs", &self.input_names)
            .field("config", &self.config)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl<K: KernelFn> Jit<K> {
    /// A jit of `func` with the default configuration (the CPU backend).
    pub fn new(func: K) -> Jit<K> {
        Jit::with_config(func, CompileConfig::default())
    }

    /// A jit of `func` compiled with `config`.
    pub fn with_config(func: K, config: CompileConfig) -> Jit<K> {
        let cache = Cache::new(func.name());
        let input_names = func.input_names();
        let options_key = config.options_key();
        Jit {
            func,
            config,
            options_key,
            cache,
            input_names,
        }
    }

    /// The same function on backend `name` (`"cpu"`, `"interp"`, `"cuda"`, `"metal"`, `"c"`),
    /// with a fresh cache.
    pub fn on_backend(self, name: &str) -> Jit<K> {
        let config = CompileConfig {
            backend: name.to_string(),
            ..self.config
        };
        Jit::with_config(self.func, config)
    }

    /// The configuration kernels are compiled with.
    pub fn config(&self) -> &CompileConfig {
        &self.config
    }

    /// The traceable function.
    pub fn func(&self) -> &K {
        &self.func
    }

    /// The names of the inputs, in call order.
    pub fn input_names(&self) -> &[String] {
        &self.input_names
    }

    /// How many kernels this jit has compiled.
    pub fn compile_count(&self) -> usize {
        self.cache.compile_count()
    }

    /// Drops every compiled kernel; the next call of each signature compiles again.
    pub fn clear_cache(&self) {
        self.cache.clear();
    }

    /// The last cache miss and what changed (`shape of input `x`: [3] → [4]`, ...).
    pub fn last_miss(&self) -> Option<CacheMiss> {
        self.cache.last_miss()
    }

    /// The cache itself.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The HIR kernel traced for inputs of `types` (not cached).
    pub fn trace(&self, types: &[TensorType]) -> Result<Kernel, JitError> {
        self.func.trace(types)
    }

    /// The compiled kernel for inputs of `types`: cached, or traced and compiled now.
    pub fn executable(&self, types: &[TensorType]) -> Result<Arc<Executable>, JitError> {
        if types.len() != self.input_names.len() {
            return Err(CallError::Arity {
                what: "inputs",
                expected: self.input_names.len(),
                found: types.len(),
            }
            .into());
        }
        let inputs = self
            .input_names
            .iter()
            .cloned()
            .zip(types.iter().cloned())
            .collect();
        let key = CacheKey {
            kernel: self.func.fingerprint(),
            inputs,
            backend: self.config.backend.clone(),
            options: self.options_key.clone(),
        };
        self.cache
            .get_or_compile(key, &self.config, registry(), || self.func.trace(types))
    }

    /// The easy call: arguments as arrays or slices, outputs as owned arrays in the kernel's
    /// output order.
    ///
    /// ```
    /// use rfx::Tensor;
    /// let f = rfx::jit(|x: Tensor, y: Tensor| (x * 2.0).sin() + y);
    /// let out = f.call((&[0.0f32, 1.0, 2.0], &[1.0f32, 2.0, 3.0]))?;
    /// assert_eq!(out[0].as_slice::<f32>(), Some(&[1.0f32, 2.9092975, 2.2431974][..]));
    /// # Ok::<(), rfx::JitError>(())
    /// ```
    pub fn call<'a>(&self, args: impl IntoArgs<'a>) -> Result<Vec<Array>, JitError> {
        let args = args.into_args();
        let types: Vec<TensorType> = args.iter().map(Arg::ty).collect();
        let mut views = Vec::with_capacity(args.len());
        for (arg, name) in args.iter().zip(&self.input_names) {
            views.push(
                ArrayView::from_data(&arg.shape, arg.data).map_err(|e| CallError::Shape {
                    name: name.clone(),
                    expected: e.shape.clone(),
                    found: Shape::new([e.found]),
                })?,
            );
        }
        let exe = self.executable(&types)?;
        Ok(exe.call(&views)?)
    }

    /// Compiles for inputs of `types` and returns a real-time handle: borrowed inputs,
    /// caller-provided outputs, no allocation and no lock once the first call has run.
    pub fn bind(&self, types: &[TensorType]) -> Result<BoundKernel, JitError> {
        Ok(BoundKernel::new(self.executable(types)?))
    }
}

/// An owned array from a `Vec` and a shape; a convenience for tests and examples.
pub fn array<T: Element>(shape: impl Into<Shape>, values: Vec<T>) -> Result<Array, rfx_ir::ArrayLengthError> {
    Array::new(shape, T::into_data(values))
}
