//! Traced tensors for Python: `trace` (the Python function `rfxjit._rfx.trace`) runs a Python
//! callback inside an [`rfx::Trace`], handing it one [`PyTensor`] per input; the callback (the
//! `rfxjit` tracer running the user's NumPy code) records ops by calling the tensors' methods
//! and returns the output tensors.
//!
//! Each op records one or a few HIR nodes through the `rfx` facade. An op that breaks a typing
//! rule raises [`TraceError`] at once, with rfx's message, so the Python side can point at the
//! user's line.

use std::cell::RefCell;

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use rfx::{Array, ArrayData, DType, Tensor, TensorType, Trace};
use rfx_ir::ReduceOp;
use rfx_ir::hir::Kernel;

use crate::errors::{AutodiffError, ExprError, TraceError, jit_error};

thread_local! {
    /// The traces [`trace`] is running on this thread, innermost last.
    static ACTIVE: RefCell<Vec<Trace>> = const { RefCell::new(Vec::new()) };
}

/// Parses a dtype name (`float32`, `float64`, `int32`, `bool`, or rfx's `f32`, ...).
pub fn dtype_of(name: &str) -> PyResult<DType> {
    match name {
        "float32" | "f32" => Ok(DType::F32),
        "float64" | "f64" => Ok(DType::F64),
        "int32" | "i32" => Ok(DType::I32),
        "bool" => Ok(DType::Bool),
        other => Err(PyValueError::new_err(format!(
            "rfx has no dtype `{other}` (float32, float64, int32, bool)"
        ))),
    }
}

/// NumPy's name of a dtype.
pub fn numpy_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::I32 => "int32",
        DType::Bool => "bool",
    }
}

/// A tensor type from a NumPy dtype name and a shape.
pub fn tensor_type(dtype: &str, shape: Vec<usize>) -> PyResult<TensorType> {
    Ok(TensorType::new(dtype_of(dtype)?, shape))
}

/// The first error of the innermost active trace (a loop body's while one is traced), as a
/// Python [`TraceError`].
fn trace_failure(op: &str) -> PyErr {
    let message = Trace::innermost_error();
    match message {
        Some(error) => TraceError::new_err(error.to_string()),
        None => TraceError::new_err(format!(
            "`{op}`: a tensor was used outside the trace that made it (traced values must not escape the traced function)"
        )),
    }
}

/// Checks the result of an op: a poisoned tensor raises the trace's error.
fn checked(op: &str, t: Tensor) -> PyResult<PyTensor> {
    match t.ty() {
        Some(_) => Ok(PyTensor { t }),
        None => Err(trace_failure(op)),
    }
}

/// A traced value: a handle into the trace running on this thread.
#[pyclass(module = "rfxjit._rfx", name = "Tensor", frozen, from_py_object)]
#[derive(Clone, Copy)]
pub struct PyTensor {
    t: Tensor,
}

impl PyTensor {
    fn ty(&self) -> PyResult<TensorType> {
        self.t.ty().ok_or_else(|| trace_failure("type"))
    }
}

/// Converts a NumPy array of one of rfx's dtypes (C-contiguous or not) to an owned [`Array`].
fn owned_array(value: &Bound<'_, PyAny>) -> PyResult<Array> {
    let array = value.cast::<PyUntypedArray>().map_err(PyErr::from)?;
    let shape: Vec<usize> = array.shape().to_vec();
    let dtype = array.dtype();
    let kind = dtype.kind();
    let size = dtype.itemsize();
    // `ravel` copies a non-contiguous array into C order; `tolist` gives Python values.
    let flat = value.call_method0("ravel")?;
    let data = match (kind, size) {
        (b'f', 4) => ArrayData::F32(flat.call_method0("tolist")?.extract()?),
        (b'f', 8) => ArrayData::F64(flat.call_method0("tolist")?.extract()?),
        (b'i', 4) => ArrayData::I32(flat.call_method0("tolist")?.extract()?),
        (b'b', 1) => ArrayData::Bool(flat.call_method0("tolist")?.extract()?),
        _ => {
            return Err(TraceError::new_err(format!(
                "a constant array of dtype {} cannot be used: rfx has float32, float64, int32 and bool",
                dtype.str()?
            )));
        }
    };
    Array::new(shape, data).map_err(|e| TraceError::new_err(e.to_string()))
}

fn reduce_op(name: &str) -> PyResult<ReduceOp> {
    match name {
        "sum" => Ok(ReduceOp::Sum),
        "prod" => Ok(ReduceOp::Prod),
        "mean" => Ok(ReduceOp::Mean),
        "max" => Ok(ReduceOp::Max),
        "min" => Ok(ReduceOp::Min),
        other => Err(PyValueError::new_err(format!("unknown reduction `{other}`"))),
    }
}

#[pymethods]
impl PyTensor {
    /// The shape, as a tuple.
    #[getter]
    fn shape(&self) -> PyResult<Vec<usize>> {
        Ok(self.ty()?.shape.dims().to_vec())
    }

    /// The dtype's NumPy name.
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        Ok(numpy_name(self.ty()?.dtype))
    }

    /// An elementwise op of one operand, by NumPy's ufunc name.
    fn unary(&self, op: &str) -> PyResult<PyTensor> {
        let x = self.t;
        let t = match op {
            "negative" => -x,
            "absolute" => x.abs(),
            "sign" => x.sign(),
            "floor" => x.floor(),
            "ceil" => x.ceil(),
            "rint" => x.round(),
            "sqrt" => x.sqrt(),
            "rsqrt" => x.rsqrt(),
            "reciprocal" => x.recip(),
            "exp" => x.exp(),
            "exp2" => x.exp2(),
            "log" => x.log(),
            "log2" => x.log2(),
            "sin" => x.sin(),
            "cos" => x.cos(),
            "tan" => x.tan(),
            "tanh" => x.tanh(),
            "arctan" => x.atan(),
            "arcsin" => x.asin(),
            "arccos" => x.acos(),
            "sigmoid" => x.sigmoid(),
            "logical_not" => x.logical_not(),
            "isnan" => x.is_nan(),
            "isinf" => x.is_inf(),
            "isfinite" => x.is_finite(),
            other => return Err(PyValueError::new_err(format!("unknown unary op `{other}`"))),
        };
        checked(op, t)
    }

    /// An elementwise op of two operands of one dtype (shapes broadcast), by NumPy's name.
    fn binary(&self, op: &str, other: &PyTensor) -> PyResult<PyTensor> {
        let (a, b) = (self.t, other.t);
        let t = match op {
            "add" => a + b,
            "subtract" => a - b,
            "multiply" => a * b,
            "divide" => a / b,
            "power" => a.pow(b),
            "arctan2" => a.atan2(b),
            "minimum" => a.minimum(b),
            "maximum" => a.maximum(b),
            "fmod" => a.fmod(b),
            "logical_and" => a.logical_and(b),
            "logical_or" => a.logical_or(b),
            "less" => a.lt(b),
            "less_equal" => a.le(b),
            "greater" => a.gt(b),
            "greater_equal" => a.ge(b),
            "equal" => a.eq(b),
            "not_equal" => a.ne(b),
            other => return Err(PyValueError::new_err(format!("unknown binary op `{other}`"))),
        };
        checked(op, t)
    }

    /// Converts to `dtype`.
    fn cast(&self, dtype: &str) -> PyResult<PyTensor> {
        checked("astype", self.t.cast(dtype_of(dtype)?))
    }

    /// Reinterprets as `shape` (same element count, row-major).
    fn reshape(&self, shape: Vec<usize>) -> PyResult<PyTensor> {
        checked("reshape", self.t.reshape(shape))
    }

    /// Permutes the axes.
    fn transpose(&self, perm: Vec<usize>) -> PyResult<PyTensor> {
        checked("transpose", self.t.transpose(&perm))
    }

    /// Broadcasts to `shape`.
    fn broadcast_to(&self, shape: Vec<usize>) -> PyResult<PyTensor> {
        checked("broadcast_to", self.t.broadcast_to(shape))
    }

    /// A reduction (`sum`, `prod`, `mean`, `max`, `min`) over `axes`.
    fn reduce(&self, op: &str, axes: Vec<usize>, keepdims: bool) -> PyResult<PyTensor> {
        checked(op, self.t.reduce(reduce_op(op)?, axes, keepdims))
    }

    /// The index of the largest element along `axis` (int32).
    fn argmax(&self, axis: usize) -> PyResult<PyTensor> {
        checked("argmax", self.t.argmax(axis))
    }

    /// The index of the smallest element along `axis` (int32).
    fn argmin(&self, axis: usize) -> PyResult<PyTensor> {
        checked("argmin", self.t.argmin(axis))
    }

    /// NumPy's `matmul`.
    fn matmul(&self, other: &PyTensor) -> PyResult<PyTensor> {
        checked("matmul", self.t.matmul(other.t))
    }

    /// NumPy's `dot`.
    fn dot(&self, other: &PyTensor) -> PyResult<PyTensor> {
        checked("dot", self.t.dot(other.t))
    }

    /// NumPy's `cross` along `axis`.
    fn cross(&self, other: &PyTensor, axis: usize) -> PyResult<PyTensor> {
        checked("cross", self.t.cross(other.t, axis))
    }

    /// The Euclidean norm over `axes`.
    fn norm(&self, axes: Vec<usize>) -> PyResult<PyTensor> {
        checked("norm", self.t.norm(axes))
    }

    /// The inverse of each matrix (last two axes).
    fn inv(&self) -> PyResult<PyTensor> {
        checked("inv", self.t.inv())
    }

    /// The determinant of each matrix (last two axes).
    fn det(&self) -> PyResult<PyTensor> {
        checked("det", self.t.det())
    }

    /// `solve(self, b)`.
    fn solve(&self, b: &PyTensor) -> PyResult<PyTensor> {
        checked("solve", self.t.solve(b.t))
    }

    /// Running sums along `axis`.
    fn cumsum(&self, axis: usize) -> PyResult<PyTensor> {
        checked("cumsum", self.t.cumsum(axis))
    }

    /// Running products along `axis`.
    fn cumprod(&self, axis: usize) -> PyResult<PyTensor> {
        checked("cumprod", self.t.cumprod(axis))
    }

    /// The entries at `index` along `axis` (indices clamped into the axis).
    fn take(&self, index: &PyTensor, axis: usize) -> PyResult<PyTensor> {
        checked("take", self.t.take(index.t, axis))
    }

    /// Elements `start..stop` along `axis`.
    fn slice_axis(&self, axis: usize, start: usize, stop: usize) -> PyResult<PyTensor> {
        checked("slice", self.t.slice_axis(axis, start..stop))
    }

    /// Element `i` along `axis`, that axis removed.
    fn index_axis(&self, axis: usize, i: usize) -> PyResult<PyTensor> {
        checked("index", self.t.index_axis(axis, i))
    }

    /// `self ? a : b` (NumPy's `where`); `self` is bool.
    fn select(&self, a: &PyTensor, b: &PyTensor) -> PyResult<PyTensor> {
        checked("where", self.t.select(a.t, b.t))
    }

    /// NumPy's `clip`.
    fn clip(&self, lo: &PyTensor, hi: &PyTensor) -> PyResult<PyTensor> {
        checked("clip", self.t.clamp(lo.t, hi.t))
    }

    fn __repr__(&self) -> String {
        match self.t.ty() {
            Some(ty) => format!("Tensor({}, {:?})", numpy_name(ty.dtype), ty.shape.dims()),
            None => "Tensor(<failed>)".to_string(),
        }
    }
}

/// A constant of the trace from a NumPy array (copied into the kernel).
#[pyfunction]
fn constant(value: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let array = owned_array(value)?;
    checked("constant", rfx::constant(&array))
}

/// Joins `parts` along `axis` (NumPy's `concatenate`).
#[pyfunction]
fn concat(parts: Vec<PyTensor>, axis: usize) -> PyResult<PyTensor> {
    let tensors: Vec<Tensor> = parts.iter().map(|p| p.t).collect();
    checked("concatenate", rfx::concat(&tensors, axis))
}

/// Records `kernel` into the running trace with its inputs bound to `args` (a transform's
/// kernel used inside a traced function); returns its outputs.
#[pyfunction]
fn inline(kernel: &PyKernel, args: Vec<PyTensor>) -> PyResult<Vec<PyTensor>> {
    let tensors: Vec<Tensor> = args.iter().map(|a| a.t).collect();
    let outputs = rfx::inline(&kernel.kernel, &tensors).map_err(|e| TraceError::new_err(e.to_string()))?;
    outputs.into_iter().map(|t| checked("inline", t)).collect()
}

/// Whether a function is being traced on this thread.
#[pyfunction]
fn tracing() -> bool {
    ACTIVE.with(|active| !active.borrow().is_empty())
}

/// Calls a loop's Python `callback` on the counter (for a `fori_loop` body) and the carries (a
/// list) and returns the tensors it gives (a list, or one tensor for a test). A Python
/// exception is kept in `failure` (the first one) and the loop is given no tensors, which
/// fails the loop.
fn call_loop_callback(
    py: Python<'_>,
    callback: &Bound<'_, PyAny>,
    counter: Option<Tensor>,
    carries: &[Tensor],
    failure: &mut Option<PyErr>,
) -> Vec<Tensor> {
    let result = PyList::new(py, carries.iter().map(|&t| PyTensor { t })).and_then(|list| match counter {
        Some(i) => callback.call1((PyTensor { t: i }, list)),
        None => callback.call1((list,)),
    });
    let tensors = result.and_then(|out| match out.extract::<PyTensor>() {
        Ok(one) => Ok(vec![one.t]),
        Err(_) => out
            .extract::<Vec<PyTensor>>()
            .map(|v| v.into_iter().map(|p| p.t).collect()),
    });
    tensors.unwrap_or_else(|error| {
        failure.get_or_insert(error);
        Vec::new()
    })
}

/// The final carries of a loop, or the first Python exception of its callbacks, or the
/// trace's error.
fn loop_results(op: &str, finals: Vec<Tensor>, failure: Option<PyErr>) -> PyResult<Vec<PyTensor>> {
    if let Some(error) = failure {
        return Err(error);
    }
    finals.into_iter().map(|t| checked(op, t)).collect()
}

/// `rfx::lax::fori_loop` in the running trace: `body(i, carries)` returns the next carries (a
/// list of tensors).
#[pyfunction]
fn fori_loop(
    py: Python<'_>,
    lower: i32,
    upper: i32,
    body: &Bound<'_, PyAny>,
    init: Vec<PyTensor>,
) -> PyResult<Vec<PyTensor>> {
    let init: Vec<Tensor> = init.iter().map(|p| p.t).collect();
    let mut failure = None;
    let finals = rfx::lax::fori_loop(
        lower,
        upper,
        |i, carries| call_loop_callback(py, body, Some(i), carries, &mut failure),
        &init,
    );
    loop_results("fori_loop", finals, failure)
}

/// `rfx::lax::while_loop` in the running trace: `cond(carries)` returns a bool scalar tensor,
/// `body(carries)` the next carries (a list of tensors).
#[pyfunction]
fn while_loop(
    py: Python<'_>,
    cond: &Bound<'_, PyAny>,
    body: &Bound<'_, PyAny>,
    init: Vec<PyTensor>,
    max_iter: u64,
) -> PyResult<Vec<PyTensor>> {
    let init: Vec<Tensor> = init.iter().map(|p| p.t).collect();
    let failure = RefCell::new(None);
    let finals = rfx::lax::while_loop(
        |carries| {
            let mut slot = failure.borrow_mut();
            let keep = call_loop_callback(py, cond, None, carries, &mut slot);
            match keep.as_slice() {
                [one] => *one,
                _ => {
                    slot.get_or_insert_with(|| {
                        TraceError::new_err("while_loop: cond_fun must return one array")
                    });
                    // A tensor that fails the loop: the test is not a bool scalar.
                    carries
                        .first()
                        .copied()
                        .unwrap_or_else(|| rfx::constant(&Array::scalar(rfx::Scalar::F32(0.0))))
                }
            }
        },
        |carries| {
            let mut slot = failure.borrow_mut();
            if slot.is_some() {
                // The test failed: the loop fails, and the body is not run.
                return Vec::new();
            }
            call_loop_callback(py, body, None, carries, &mut slot)
        },
        &init,
        max_iter,
    );
    loop_results("while_loop", finals, failure.into_inner())
}

/// Traces `callback` into a HIR kernel called `name` with `inputs` (`(name, dtype, shape)`):
/// the callback receives the input tensors as a list and returns the output tensors (a list).
#[pyfunction]
fn trace(
    py: Python<'_>,
    name: &str,
    inputs: Vec<(String, String, Vec<usize>)>,
    callback: &Bound<'_, PyAny>,
) -> PyResult<PyKernel> {
    let trace = Trace::begin(name);
    let mut args = Vec::with_capacity(inputs.len());
    for (input, dtype, shape) in &inputs {
        args.push(PyTensor {
            t: trace.input(input, tensor_type(dtype, shape.clone())?),
        });
    }
    if let Some(error) = trace.error() {
        return Err(TraceError::new_err(error.to_string()));
    }
    ACTIVE.with(|active| active.borrow_mut().push(trace));
    let result = PyList::new(py, args).and_then(|list| callback.call1((list,)));
    let trace = ACTIVE.with(|active| active.borrow_mut().pop());
    let Some(trace) = trace else {
        return Err(TraceError::new_err("the trace ended while the function ran"));
    };
    let outputs: Vec<PyTensor> = result?.extract()?;
    let names: Vec<String> = if outputs.len() == 1 {
        vec!["out".to_string()]
    } else {
        (0..outputs.len()).map(|i| format!("out{i}")).collect()
    };
    let named: Vec<(String, Tensor)> = names.into_iter().zip(outputs.iter().map(|o| o.t)).collect();
    let kernel = trace
        .finish(&named)
        .map_err(|e| TraceError::new_err(e.to_string()))?;
    Ok(PyKernel { kernel })
}

/// A HIR kernel: what tracing, a transform, an expression string or HIR text gives.
#[pyclass(module = "rfxjit._rfx", name = "Kernel", frozen)]
#[derive(Clone)]
pub struct PyKernel {
    pub(crate) kernel: Kernel,
}

fn types_of(types: Vec<(String, Vec<usize>)>) -> PyResult<Vec<TensorType>> {
    types
        .into_iter()
        .map(|(dtype, shape)| tensor_type(&dtype, shape))
        .collect()
}

fn signature(list: impl Iterator<Item = (String, TensorType)>) -> Vec<(String, &'static str, Vec<usize>)> {
    list.map(|(name, ty)| (name, numpy_name(ty.dtype), ty.shape.dims().to_vec()))
        .collect()
}

#[pymethods]
impl PyKernel {
    /// Parses HIR text (as `.hir()` prints it).
    #[staticmethod]
    fn from_hir(text: &str) -> PyResult<PyKernel> {
        rfx_ir::hir::parse(text)
            .map(|kernel| PyKernel { kernel })
            .map_err(|e| ExprError::new_err(e.to_string()))
    }

    /// Compiles an expression string (`"sin(x*2)+y"`) for inputs `(name, dtype, shape)`.
    #[staticmethod]
    fn from_expr(source: &str, inputs: Vec<(String, String, Vec<usize>)>) -> PyResult<PyKernel> {
        let mut sig = rfx::expr::Signature::new();
        for (name, dtype, shape) in inputs {
            sig = sig.input(name, tensor_type(&dtype, shape)?);
        }
        rfx::expr::compile(source, &sig)
            .map(|kernel| PyKernel { kernel })
            .map_err(|e| ExprError::new_err(e.to_string()))
    }

    /// The kernel's name.
    #[getter]
    fn name(&self) -> String {
        self.kernel.name().to_string()
    }

    /// The inputs: `(name, dtype, shape)` each.
    fn inputs(&self) -> Vec<(String, &'static str, Vec<usize>)> {
        signature(
            self.kernel
                .inputs()
                .map(|(_, name, ty)| (name.to_string(), ty.clone())),
        )
    }

    /// The outputs: `(name, dtype, shape)` each.
    fn outputs(&self) -> Vec<(String, &'static str, Vec<usize>)> {
        let kernel = &self.kernel;
        signature(
            kernel
                .outputs()
                .iter()
                .filter_map(|o| kernel.value_type(o.value).map(|ty| (o.name.clone(), ty.clone()))),
        )
    }

    /// A derivative of this kernel (`grad`, `value_and_grad`, `jvp`, `jacobian`, `hessian`,
    /// `hvp`) with respect to the inputs at `wrt`, for inputs of `types` (`(dtype, shape)`).
    fn transform(&self, kind: &str, wrt: Vec<usize>, types: Vec<(String, Vec<usize>)>) -> PyResult<PyKernel> {
        use rfx::{KernelFn, KernelSource, Transform, TransformKind};
        let kind = match kind {
            "grad" => TransformKind::Grad,
            "value_and_grad" => TransformKind::ValueAndGrad,
            "jvp" => TransformKind::Jvp,
            "jacobian" => TransformKind::Jacobian,
            "hessian" => TransformKind::Hessian,
            "hvp" => TransformKind::Hvp,
            other => return Err(AutodiffError::new_err(format!("unknown transform `{other}`"))),
        };
        let transform = Transform::new(KernelSource::new(self.kernel.clone()), kind).wrt(&wrt);
        transform
            .trace(&types_of(types)?)
            .map(|kernel| PyKernel { kernel })
            .map_err(jit_error)
    }

    /// This kernel (written for one example) mapped over a batch: `in_axes` per input (`None`:
    /// shared), `out_axes` per output; `types` are the batched inputs' `(dtype, shape)`.
    fn vmap(
        &self,
        in_axes: Vec<Option<usize>>,
        out_axes: Vec<Option<usize>>,
        types: Vec<(String, Vec<usize>)>,
    ) -> PyResult<PyKernel> {
        use rfx::{KernelFn, KernelSource, Vmap};
        Vmap::new(KernelSource::new(self.kernel.clone()))
            .in_axes(&in_axes)
            .out_axes(&out_axes)
            .trace(&types_of(types)?)
            .map(|kernel| PyKernel { kernel })
            .map_err(jit_error)
    }

    /// The HIR text.
    fn hir(&self) -> String {
        self.kernel.to_string()
    }

    /// Pickles as the HIR text.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        let from_hir = py.get_type::<PyKernel>().getattr("from_hir")?;
        Ok((from_hir, (self.kernel.to_string(),)))
    }

    fn __repr__(&self) -> String {
        format!("Kernel({})", self.kernel.name())
    }
}

/// Adds the tracing classes and functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTensor>()?;
    m.add_class::<PyKernel>()?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(constant, m)?)?;
    m.add_function(wrap_pyfunction!(concat, m)?)?;
    m.add_function(wrap_pyfunction!(inline, m)?)?;
    m.add_function(wrap_pyfunction!(tracing, m)?)?;
    m.add_function(wrap_pyfunction!(fori_loop, m)?)?;
    m.add_function(wrap_pyfunction!(while_loop, m)?)?;
    Ok(())
}
