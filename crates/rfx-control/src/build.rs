//! How the kernels are built: wide closures, constant folding, and kernels stitched from parts.
//!
//! Three things the facade's closure API does not do directly, done here on top of its public
//! traits:
//! - **more than six inputs**: [`Wide`] implements [`TraceClosure`] for a closure over
//!   `[Tensor; N]`, so a quaternion product can take its eight component arrays;
//! - **named outputs and several kernels in one**: [`ControlKernel`] traces one or more parts
//!   (closures or derivative transforms of them) for the same inputs and copies them into one
//!   HIR kernel with the outputs renamed. The optimiser merges the parts' identical forward
//!   computations, so a value and its gradients compile to one kernel;
//! - **constant folding of captured constants**: [`S`] is a tensor or a Rust constant, so that
//!   products with structural zeros and ones (in Denavit–Hartenberg transforms) are not traced.

use std::ops;
use std::sync::Arc;

use rfx::{JitError, KernelFn, Tensor, TensorType, TraceClosure, TraceError};
use rfx_ir::hir::{Builder, Kernel, Op, ValueId};

/// A closure over `N` tensors given as an array (any `N`, where the facade's closures stop at
/// six).
pub(crate) struct Wide<const N: usize, F>(pub(crate) F);

/// The inference marker of [`Wide`]'s [`TraceClosure`] implementation.
pub(crate) struct WideMarker<const N: usize>;

impl<const N: usize, F> TraceClosure<WideMarker<N>> for Wide<N, F>
where
    F: Fn([Tensor; N]) -> Vec<Tensor> + Send + Sync + 'static,
{
    const ARITY: usize = N;

    fn call_traced(&self, args: &[Tensor]) -> Vec<Tensor> {
        (self.0)(std::array::from_fn(|i| args[i]))
    }
}

/// `v` with a last axis of one added (`[.., k]` → `[.., k, 1]`): a batch of column vectors, or
/// values set against a row of others by broadcasting.
pub(crate) fn column(v: Tensor) -> Tensor {
    let mut dims = v.shape().dims().to_vec();
    dims.push(1);
    v.reshape(dims)
}

/// A traceable closure with named inputs, captured values being constants of the kernel.
pub(crate) fn func<const N: usize, F>(name: &str, inputs: [&str; N], f: F) -> impl KernelFn + 'static
where
    F: Fn([Tensor; N]) -> Vec<Tensor> + Send + Sync + 'static,
{
    rfx::Func::with_constants(Wide::<N, F>(f))
        .named(&inputs)
        .kernel_name(name)
}

/// One part of a [`ControlKernel`]: a traceable function and the names its outputs get.
#[derive(Clone)]
struct Part {
    func: Arc<dyn KernelFn>,
    outputs: Vec<String>,
}

/// A control kernel: the traceable function every constructor of this crate returns (inside an
/// [`rfx::Jit`]). It has named inputs and named outputs, and may be made of several parts
/// (a forward kernel and the gradients of some of its outputs) traced for the same inputs and
/// compiled together as one kernel.
///
/// It is cheap to clone (the parts are shared), which is how to compile a kernel with another
/// configuration: `rfx::jit_with(jit.func().clone(), config)`.
#[derive(Clone)]
pub struct ControlKernel {
    name: String,
    inputs: Vec<String>,
    parts: Vec<Part>,
}

impl std::fmt::Debug for ControlKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlKernel")
            .field("name", &self.name)
            .field("inputs", &self.inputs)
            .field("outputs", &self.output_names())
            .finish()
    }
}

impl ControlKernel {
    /// A kernel called `name` with `inputs`, no parts yet.
    pub(crate) fn new(name: &str, inputs: &[&str]) -> ControlKernel {
        ControlKernel {
            name: name.to_string(),
            inputs: inputs.iter().map(|s| (*s).to_string()).collect(),
            parts: Vec::new(),
        }
    }

    /// Adds a part whose inputs are this kernel's (same names, same order) and whose outputs,
    /// in order, are called `outputs`.
    pub(crate) fn part(mut self, func: impl KernelFn + 'static, outputs: &[&str]) -> ControlKernel {
        debug_assert_eq!(
            func.input_names(),
            self.inputs,
            "a part must take the kernel's inputs"
        );
        self.parts.push(Part {
            func: Arc::new(func),
            outputs: outputs.iter().map(|s| (*s).to_string()).collect(),
        });
        self
    }

    /// The names of the outputs, in order.
    pub fn output_names(&self) -> Vec<&str> {
        self.parts
            .iter()
            .flat_map(|p| p.outputs.iter().map(String::as_str))
            .collect()
    }

    /// Wraps the kernel in a jit (the CPU backend, the default configuration).
    pub(crate) fn jit(self) -> rfx::Jit<ControlKernel> {
        rfx::jit(self)
    }
}

fn build_error(source: rfx_ir::hir::BuildError) -> JitError {
    JitError::Trace(TraceError::Build { op: "stitch", source })
}

impl KernelFn for ControlKernel {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn input_names(&self) -> Vec<String> {
        self.inputs.clone()
    }

    fn trace(&self, types: &[TensorType]) -> Result<Kernel, JitError> {
        if types.len() != self.inputs.len() {
            return Err(rfx::CallError::Arity {
                what: "inputs",
                expected: self.inputs.len(),
                found: types.len(),
            }
            .into());
        }
        let mut builder = Builder::new(self.name.clone());
        let mut inputs = Vec::with_capacity(types.len());
        for (name, ty) in self.inputs.iter().zip(types) {
            inputs.push(builder.input(name.clone(), ty.clone()).map_err(build_error)?);
        }
        for part in &self.parts {
            let kernel = part.func.trace(types)?;
            let mut map: Vec<ValueId> = Vec::with_capacity(kernel.nodes().len());
            let mut next_input = 0;
            for node in kernel.nodes() {
                let args: Vec<ValueId> = node.args.iter().map(|a| map[a.index()]).collect();
                let value = match &node.op {
                    Op::Input { .. } => {
                        let Some(&value) = inputs.get(next_input) else {
                            return Err(JitError::InputCount {
                                transform: "stitch",
                                declared: inputs.len(),
                                traced: kernel.inputs().count(),
                            });
                        };
                        next_input += 1;
                        value
                    }
                    op => builder.copy(op, &args, &node.ty).map_err(build_error)?,
                };
                map.push(value);
            }
            for (output, name) in kernel.outputs().iter().zip(&part.outputs) {
                builder
                    .output(name.clone(), map[output.value.index()])
                    .map_err(build_error)?;
            }
        }
        builder.finish().map_err(build_error)
    }
}

/// A traced tensor or a Rust constant, with constant folding: `C(0) * x` is `C(0)`, `C(1) * x`
/// is `x`, `x + C(0)` is `x`, so structural zeros and ones never reach the kernel.
#[derive(Clone, Copy, Debug)]
pub(crate) enum S {
    /// A constant.
    C(f64),
    /// A traced value.
    T(Tensor),
}

impl S {
    /// The value as a tensor shaped like `like`.
    pub(crate) fn tensor(self, like: Tensor) -> Tensor {
        match self {
            S::T(t) => t,
            S::C(c) => like.full_like(c),
        }
    }
}

impl ops::Add for S {
    type Output = S;
    fn add(self, rhs: S) -> S {
        match (self, rhs) {
            (S::C(a), S::C(b)) => S::C(a + b),
            (S::C(z), x) | (x, S::C(z)) if z == 0.0 => x,
            (S::T(a), S::C(b)) | (S::C(b), S::T(a)) => S::T(a + b),
            (S::T(a), S::T(b)) => S::T(a + b),
        }
    }
}

impl ops::Neg for S {
    type Output = S;
    fn neg(self) -> S {
        match self {
            S::C(a) => S::C(-a),
            S::T(a) => S::T(-a),
        }
    }
}

impl ops::Sub for S {
    type Output = S;
    fn sub(self, rhs: S) -> S {
        self + (-rhs)
    }
}

impl ops::Mul for S {
    type Output = S;
    fn mul(self, rhs: S) -> S {
        match (self, rhs) {
            (S::C(a), S::C(b)) => S::C(a * b),
            (S::C(z), _) | (_, S::C(z)) if z == 0.0 => S::C(0.0),
            (S::C(o), x) | (x, S::C(o)) if o == 1.0 => x,
            (S::C(m), x) | (x, S::C(m)) if m == -1.0 => -x,
            (S::T(a), S::C(b)) | (S::C(b), S::T(a)) => S::T(a * b),
            (S::T(a), S::T(b)) => S::T(a * b),
        }
    }
}
