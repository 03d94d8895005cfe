//! Compiled kernels called on NumPy arrays: [`PyCompiled`] reads its inputs in place (no copy),
//! writes its outputs into fresh arrays or into the caller's `out=` arrays, and releases the
//! GIL for calls above [`GIL_RELEASE_ELEMS`] elements.
//!
//! Every call checks what can change between calls of one kernel: each array's type (a NumPy
//! array), dtype, shape, C-contiguity and alignment, and the outputs' writability; the
//! backend then checks that no output overlaps another argument. The checks are comparisons
//! of a few integers, never skipped.

use std::sync::{Arc, Mutex, PoisonError};

use numpy::npyffi::{NPY_ARRAY_ALIGNED, NPY_ARRAY_C_CONTIGUOUS, NPY_ARRAY_WRITEABLE};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};

use rfx::{ArrayView, ArrayViewMut, CompileConfig, DType, Executable, Shape, TensorType};
use rfx_ir::{DataMut, DataRef};
use rfx_lower::Scratch;

use crate::errors::{CallError, runtime_error};
use crate::tracing::{PyKernel, numpy_name};

/// Calls moving at least this many elements (inputs and outputs together) release the GIL
/// while the kernel runs; smaller ones keep it (releasing costs more than they take).
pub const GIL_RELEASE_ELEMS: usize = 16_384;

/// The most arguments (inputs and outputs) a call gathers on the stack; more allocate.
const STACK_ARGS: usize = 8;

/// One argument of a call: where its elements are and how many.
#[derive(Clone, Copy)]
struct RawArg {
    addr: usize,
    len: usize,
    dtype: DType,
}

/// A kernel compiled for one signature, called on NumPy arrays.
#[pyclass(module = "rfxjit._rfx", name = "Compiled", frozen)]
pub struct PyCompiled {
    exe: Arc<Executable>,
    inputs: Vec<(String, TensorType)>,
    outputs: Vec<(String, TensorType)>,
    /// NumPy's type numbers of the inputs, then the outputs.
    typenums: Vec<i32>,
    /// NumPy's own descriptors of those dtypes (native byte order), held so that their
    /// addresses stay valid: an array whose descriptor is that very object has the right dtype
    /// without a closer look (most arrays share these singletons).
    descrs: Vec<Py<PyArrayDescr>>,
    /// `numpy.ndarray`: an argument of exactly this type is an array without a subclass check
    /// (which goes through NumPy's API table).
    ndarray: Py<PyType>,
    /// Spare scratch buffers: a call takes one (or makes one) and puts it back, so threads
    /// calling one kernel at once never share one.
    scratch: Mutex<Vec<Scratch>>,
    elems: usize,
    /// Compiled with fast math (kept for pickling).
    fast_math: bool,
}

/// NumPy's descriptor of a dtype (its singleton, in native byte order).
fn descr_of(py: Python<'_>, dtype: DType) -> Bound<'_, PyArrayDescr> {
    match dtype {
        DType::F32 => PyArrayDescr::of::<f32>(py),
        DType::F64 => PyArrayDescr::of::<f64>(py),
        DType::I32 => PyArrayDescr::of::<i32>(py),
        DType::Bool => PyArrayDescr::of::<bool>(py),
    }
}

fn descr_addr(array: &Bound<'_, PyUntypedArray>) -> usize {
    // SAFETY: as in `layout_flags`.
    unsafe { (*array.as_array_ptr()).fields.descr as usize }
}

fn layout_flags(array: &Bound<'_, PyUntypedArray>) -> i32 {
    // SAFETY: `as_array_ptr` points at the live array object `array` holds a reference to.
    unsafe { (*array.as_array_ptr()).fields.flags }
}

fn data_addr(array: &Bound<'_, PyUntypedArray>) -> usize {
    // SAFETY: as in `layout_flags`.
    unsafe { (*array.as_array_ptr()).fields.data as usize }
}

impl PyCompiled {
    fn new(py: Python<'_>, exe: Arc<Executable>, fast_math: bool) -> PyCompiled {
        let inputs = exe.inputs().to_vec();
        let outputs = exe.outputs().to_vec();
        let descrs: Vec<Py<PyArrayDescr>> = inputs
            .iter()
            .chain(&outputs)
            .map(|(_, ty)| descr_of(py, ty.dtype).unbind())
            .collect();
        let typenums = descrs.iter().map(|d| d.bind(py).num()).collect();
        let elems = inputs
            .iter()
            .chain(&outputs)
            .map(|(_, ty)| ty.shape.numel())
            .sum();
        PyCompiled {
            exe,
            inputs,
            outputs,
            typenums,
            descrs,
            ndarray: py.get_type::<PyUntypedArray>().unbind(),
            scratch: Mutex::new(Vec::new()),
            elems,
            fast_math,
        }
    }

    /// Checks one argument against the kernel's `k`-th slot (inputs, then outputs).
    fn check_arg(&self, k: usize, value: &Bound<'_, PyAny>, writing: bool) -> PyResult<RawArg> {
        let (role, (name, ty)) = if k < self.inputs.len() {
            ("input", &self.inputs[k])
        } else {
            ("output", &self.outputs[k - self.inputs.len()])
        };
        let array = if value.get_type_ptr() == self.ndarray.as_ptr().cast() {
            // SAFETY: the object's type is exactly `numpy.ndarray`.
            unsafe { value.cast_unchecked::<PyUntypedArray>() }
        } else {
            let Ok(array) = value.cast::<PyUntypedArray>() else {
                return Err(CallError::new_err(format!(
                    "{role} `{name}`: expected a numpy.ndarray, got {}",
                    value.get_type().name()?
                )));
            };
            array
        };
        if descr_addr(array) != self.descrs[k].as_ptr() as usize {
            let descr = array.dtype();
            // A byte-swapped array has the same type number as a native one.
            if descr.num() != self.typenums[k] || descr.is_native_byteorder() == Some(false) {
                return Err(CallError::new_err(format!(
                    "{role} `{name}`: expected dtype {}, got {}",
                    numpy_name(ty.dtype),
                    array.dtype().str()?
                )));
            }
        }
        if array.shape() != ty.shape.dims() {
            return Err(CallError::new_err(format!(
                "{role} `{name}`: expected shape {:?}, got {:?}",
                ty.shape.dims(),
                array.shape()
            )));
        }
        let flags = layout_flags(array);
        let needed =
            NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | if writing { NPY_ARRAY_WRITEABLE } else { 0 };
        if flags & needed != needed {
            let what = if flags & NPY_ARRAY_C_CONTIGUOUS == 0 {
                "is not C-contiguous (pass np.ascontiguousarray(...) or call through jit, which copies)"
            } else if flags & NPY_ARRAY_ALIGNED == 0 {
                "is not aligned"
            } else {
                "is read-only"
            };
            return Err(CallError::new_err(format!("{role} `{name}` {what}")));
        }
        let arg = RawArg {
            addr: data_addr(array),
            len: ty.shape.numel(),
            dtype: ty.dtype,
        };
        if ty.dtype == DType::Bool && arg.len > 0 {
            // A NumPy bool array made as a view of other bytes may hold values other than 0
            // and 1, which a Rust `bool` must never hold: look at the bytes first.
            // SAFETY: `addr` is the C-contiguous data of `len` one-byte elements (checked above).
            let bytes = unsafe { std::slice::from_raw_parts(arg.addr as *const u8, arg.len) };
            if bytes.iter().any(|&b| b > 1) {
                return Err(CallError::new_err(format!(
                    "{role} `{name}`: a bool array holds bytes other than 0 and 1 (a view of other data?)"
                )));
            }
        }
        Ok(arg)
    }

    /// Runs the kernel on checked arguments (inputs, then outputs).
    fn run_raw(&self, py: Python<'_>, args: &[RawArg]) -> PyResult<()> {
        let result = if self.elems >= GIL_RELEASE_ELEMS {
            let mut scratch = self
                .scratch
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop()
                .unwrap_or_default();
            let result = py.detach(|| self.run_views(args, &mut scratch));
            self.scratch
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(scratch);
            result
        } else {
            // A small call keeps the GIL throughout, and every other use of the pool happens
            // with the GIL held too (a large call takes its scratch and puts it back before
            // and after releasing it), so this lock is never contended: it is held for the
            // whole call and the scratch space stays in the pool.
            let mut pool = self.scratch.lock().unwrap_or_else(PoisonError::into_inner);
            if pool.is_empty() {
                pool.push(Scratch::default());
            }
            let last = pool.len() - 1;
            self.run_views(args, &mut pool[last])
        };
        result.map_err(|error| match error {
            RunError::Runtime(error) => runtime_error(error),
            RunError::Length(error) => CallError::new_err(error.to_string()),
        })
    }

    fn run_views(&self, args: &[RawArg], scratch: &mut Scratch) -> Result<(), RunError> {
        let (n_in, n_out) = (self.inputs.len(), self.outputs.len());
        if n_in <= STACK_ARGS && n_out == 1 {
            // The common case, kept apart so that a call builds one output view, not a full
            // stack of placeholders.
            let mut inputs: [ArrayView<'_>; STACK_ARGS] = [empty_view()?; STACK_ARGS];
            for (k, slot) in inputs.iter_mut().enumerate().take(n_in) {
                *slot = in_view(&self.inputs[k].1.shape, args[k])?;
            }
            let mut outputs = [out_view(&self.outputs[0].1.shape, args[n_in])?];
            Ok(self.exe.run(&inputs[..n_in], &mut outputs, scratch)?)
        } else if n_in <= STACK_ARGS && n_out <= STACK_ARGS {
            let mut inputs: [ArrayView<'_>; STACK_ARGS] = [empty_view()?; STACK_ARGS];
            for (k, slot) in inputs.iter_mut().enumerate().take(n_in) {
                *slot = in_view(&self.inputs[k].1.shape, args[k])?;
            }
            let mut outputs: [ArrayViewMut<'_>; STACK_ARGS] = [
                empty_view_mut()?,
                empty_view_mut()?,
                empty_view_mut()?,
                empty_view_mut()?,
                empty_view_mut()?,
                empty_view_mut()?,
                empty_view_mut()?,
                empty_view_mut()?,
            ];
            for (j, slot) in outputs.iter_mut().enumerate().take(n_out) {
                *slot = out_view(&self.outputs[j].1.shape, args[n_in + j])?;
            }
            Ok(self.exe.run(&inputs[..n_in], &mut outputs[..n_out], scratch)?)
        } else {
            let mut inputs = Vec::with_capacity(n_in);
            for (k, (_, ty)) in self.inputs.iter().enumerate() {
                inputs.push(in_view(&ty.shape, args[k])?);
            }
            let mut outputs = Vec::with_capacity(n_out);
            for (j, (_, ty)) in self.outputs.iter().enumerate() {
                outputs.push(out_view(&ty.shape, args[n_in + j])?);
            }
            Ok(self.exe.run(&inputs, &mut outputs, scratch)?)
        }
    }
}

/// Why a call failed once its arguments were checked.
enum RunError {
    Runtime(rfx_runtime::RuntimeError),
    Length(rfx_ir::ArrayLengthError),
}

impl From<rfx_runtime::RuntimeError> for RunError {
    fn from(error: rfx_runtime::RuntimeError) -> RunError {
        RunError::Runtime(error)
    }
}

impl From<rfx_ir::ArrayLengthError> for RunError {
    fn from(error: rfx_ir::ArrayLengthError) -> RunError {
        RunError::Length(error)
    }
}

/// The shape of the unused stack slots.
static EMPTY_SHAPE: std::sync::LazyLock<Shape> = std::sync::LazyLock::new(|| Shape::new([0usize]));

/// An empty view for an unused stack slot (never passed to a kernel).
fn empty_view() -> Result<ArrayView<'static>, rfx_ir::ArrayLengthError> {
    ArrayView::from_data(&EMPTY_SHAPE, DataRef::F32(&[]))
}

/// An empty mutable view for an unused stack slot (never passed to a kernel).
fn empty_view_mut() -> Result<ArrayViewMut<'static>, rfx_ir::ArrayLengthError> {
    ArrayViewMut::from_data(&EMPTY_SHAPE, DataMut::F32(&mut []))
}

/// A view of a checked input.
fn in_view(shape: &Shape, arg: RawArg) -> Result<ArrayView<'_>, rfx_ir::ArrayLengthError> {
    // SAFETY: `check_arg` proved that `addr` is the aligned, C-contiguous data of a live NumPy
    // array of `len` elements of `dtype`, and the caller holds a reference to the array for
    // the whole call (NumPy refuses to resize an array that is referenced). A NumPy bool is one
    // byte holding 0 or 1, as a Rust `bool`.
    let data = unsafe {
        match arg.dtype {
            DType::F32 => DataRef::F32(std::slice::from_raw_parts(arg.addr as *const f32, arg.len)),
            DType::F64 => DataRef::F64(std::slice::from_raw_parts(arg.addr as *const f64, arg.len)),
            DType::I32 => DataRef::I32(std::slice::from_raw_parts(arg.addr as *const i32, arg.len)),
            DType::Bool => DataRef::Bool(std::slice::from_raw_parts(arg.addr as *const bool, arg.len)),
        }
    };
    ArrayView::from_data(shape, data)
}

/// A view of a checked output.
fn out_view(shape: &Shape, arg: RawArg) -> Result<ArrayViewMut<'_>, rfx_ir::ArrayLengthError> {
    // SAFETY: as in `in_view`, and the array is writeable. The backend checks that no output
    // overlaps another argument before it writes.
    let data = unsafe {
        match arg.dtype {
            DType::F32 => DataMut::F32(std::slice::from_raw_parts_mut(arg.addr as *mut f32, arg.len)),
            DType::F64 => DataMut::F64(std::slice::from_raw_parts_mut(arg.addr as *mut f64, arg.len)),
            DType::I32 => DataMut::I32(std::slice::from_raw_parts_mut(arg.addr as *mut i32, arg.len)),
            DType::Bool => DataMut::Bool(std::slice::from_raw_parts_mut(arg.addr as *mut bool, arg.len)),
        }
    };
    ArrayViewMut::from_data(shape, data)
}

/// `true` when the byte ranges of `a` and `b` overlap.
fn overlaps(a: &RawArg, b: &RawArg) -> bool {
    let (a0, a1) = (a.addr, a.addr + a.len * a.dtype.size_bytes());
    let (b0, b1) = (b.addr, b.addr + b.len * b.dtype.size_bytes());
    a0 < b1 && b0 < a1
}

/// The `out=` keyword of a call, read from the keyword arguments as Python passed them (PyO3
/// hands `**kwargs` through without matching names, which costs more than the call itself at
/// n = 1: the lookup of the interned name is a hash-table probe). `out=None` is no `out`.
fn out_keyword<'py>(kwargs: &Bound<'py, PyDict>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let out = kwargs.get_item(intern!(kwargs.py(), "out"))?;
    if kwargs.len() > usize::from(out.is_some()) {
        for (key, _) in kwargs.iter() {
            if !key.eq("out")? {
                return Err(PyTypeError::new_err(format!(
                    "a compiled kernel takes the keyword argument out= only, got {key}="
                )));
            }
        }
    }
    Ok(out.filter(|value| !value.is_none()))
}

/// A fresh C-ordered NumPy array for output `ty`.
fn new_output<'py>(py: Python<'py>, ty: &TensorType) -> PyResult<Bound<'py, PyAny>> {
    use numpy::{PyArray, PyArrayDyn};
    let dims = ty.shape.dims();
    Ok(match ty.dtype {
        DType::F32 => PyArrayDyn::<f32>::zeros(py, dims, false).into_any(),
        DType::F64 => PyArrayDyn::<f64>::zeros(py, dims, false).into_any(),
        DType::I32 => PyArray::<i32, _>::zeros(py, dims, false).into_any(),
        DType::Bool => PyArray::<bool, _>::zeros(py, dims, false).into_any(),
    })
}

#[pymethods]
impl PyCompiled {
    /// Runs the kernel: `inputs` are NumPy arrays of the kernel's dtypes and shapes
    /// (C-contiguous, read in place). Without `out`, returns fresh arrays (one array for one
    /// output, else a tuple); with `out` (an array, or a tuple/list of one per output), writes
    /// into those arrays in place and returns them.
    // Exactly `(*inputs, **kwargs)`, with no `py` argument: PyO3 then passes Python's tuple
    // and dict through as they are instead of matching keyword names.
    #[pyo3(signature = (*inputs, **kwargs))]
    fn __call__<'py>(
        &self,
        inputs: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = inputs.py();
        let out = match kwargs {
            Some(kwargs) => out_keyword(kwargs)?,
            None => None,
        };
        let (n_in, n_out) = (self.inputs.len(), self.outputs.len());
        if inputs.len() != n_in {
            return Err(CallError::new_err(format!(
                "the kernel takes {n_in} input(s), got {}",
                inputs.len()
            )));
        }
        let outputs: Bound<'py, PyAny> = match out {
            // One output array: checked as it is, with no tuple around it.
            Some(out) if n_out == 1 && out.is_instance_of::<PyUntypedArray>() => out,
            Some(out) if out.is_instance_of::<PyTuple>() || out.is_instance_of::<PyList>() => {
                // A tuple is used as it is and a list through Python's own copy: a call with
                // `out=` allocates nothing in Rust.
                let tuple = match out.cast::<PyList>() {
                    Ok(list) => list.to_tuple(),
                    Err(_) => out.cast::<PyTuple>()?.clone(),
                };
                if tuple.len() != n_out {
                    return Err(CallError::new_err(format!(
                        "out=: the kernel has {n_out} output(s), got {}",
                        tuple.len()
                    )));
                }
                tuple.into_any()
            }
            Some(out) if n_out == 1 => PyTuple::new(py, [out])?.into_any(),
            Some(_) => {
                return Err(CallError::new_err(format!(
                    "out=: the kernel has {n_out} outputs; pass a tuple of {n_out} arrays"
                )));
            }
            None => {
                let mut fresh = Vec::with_capacity(n_out);
                for (_, ty) in &self.outputs {
                    fresh.push(new_output(py, ty)?);
                }
                PyTuple::new(py, fresh)?.into_any()
            }
        };
        let single = n_out == 1 && !outputs.is_instance_of::<PyTuple>();
        let placeholder = RawArg {
            addr: 0,
            len: 0,
            dtype: DType::F32,
        };
        let total = n_in + n_out;
        let mut stack = [placeholder; STACK_ARGS * 2];
        let mut heap = Vec::new();
        let args: &mut [RawArg] = if total <= stack.len() {
            &mut stack[..total]
        } else {
            heap.resize(total, placeholder);
            &mut heap
        };
        for (k, value) in inputs.iter_borrowed().enumerate() {
            args[k] = self.check_arg(k, &value, false)?;
        }
        if single {
            args[n_in] = self.check_arg(n_in, &outputs, true)?;
        } else {
            let tuple = outputs.cast::<PyTuple>()?;
            for (j, value) in tuple.iter_borrowed().enumerate() {
                args[n_in + j] = self.check_arg(n_in + j, &value, true)?;
            }
        }
        for j in n_in..total {
            for k in 0..total {
                if k != j && args[j].len > 0 && args[k].len > 0 && overlaps(&args[j], &args[k]) {
                    let (out_name, _) = &self.outputs[j - n_in];
                    let other = if k < n_in {
                        format!("input `{}`", self.inputs[k].0)
                    } else {
                        format!("output `{}`", self.outputs[k - n_in].0)
                    };
                    return Err(CallError::new_err(format!(
                        "output `{out_name}` overlaps {other} in memory"
                    )));
                }
            }
        }
        self.run_raw(py, args)?;
        if single {
            Ok(outputs)
        } else if n_out == 1 {
            outputs.cast::<PyTuple>()?.get_item(0)
        } else {
            Ok(outputs)
        }
    }

    /// The inputs: `(name, dtype, shape)` each.
    fn inputs(&self) -> Vec<(String, &'static str, Vec<usize>)> {
        self.inputs
            .iter()
            .map(|(n, ty)| (n.clone(), numpy_name(ty.dtype), ty.shape.dims().to_vec()))
            .collect()
    }

    /// The outputs: `(name, dtype, shape)` each.
    fn outputs(&self) -> Vec<(String, &'static str, Vec<usize>)> {
        self.outputs
            .iter()
            .map(|(n, ty)| (n.clone(), numpy_name(ty.dtype), ty.shape.dims().to_vec()))
            .collect()
    }

    /// The kernel itself (what `Bound.compiled` gives, so both kinds of bound kernel have it).
    #[getter]
    fn compiled(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The kernel itself: `f.lower(*args).compile()` reads as JAX's ahead-of-time API (the
    /// kernel was compiled when it was lowered).
    fn compile(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The backend that compiled the kernel.
    #[getter]
    fn backend(&self) -> &'static str {
        self.exe.backend()
    }

    /// Seconds spent optimising, lowering and compiling.
    #[getter]
    fn compile_time(&self) -> f64 {
        self.exe.compile_time().as_secs_f64()
    }

    /// The HIR text (the traced kernel).
    fn hir(&self) -> String {
        self.exe.hir().to_string()
    }

    /// The MIR text (after optimisation and fusion).
    fn mir(&self) -> String {
        self.exe.mir().to_string()
    }

    /// The LIR text (loops and buffers).
    fn lir(&self) -> String {
        self.exe.lir().to_string()
    }

    /// The HIR as a Graphviz DOT graph (`stage="hir"`) or the MIR's fused kernels
    /// (`stage="mir"`).
    #[pyo3(signature = (stage = "hir"))]
    fn dot(&self, stage: &str) -> PyResult<String> {
        match stage {
            "hir" => Ok(rfx_ir::dot::hir_to_dot(self.exe.hir())),
            "mir" => Ok(rfx_ir::dot::mir_to_dot(self.exe.mir())),
            other => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "dot: unknown stage `{other}` (hir or mir)"
            ))),
        }
    }

    /// The optimisation report (rewrites, fusion decisions and missed fusions).
    fn report(&self) -> String {
        format!("{}\n{}", self.exe.opt_report(), self.exe.lower_report())
    }

    /// Pickles as the HIR text and the options: unpickling compiles again (native code is
    /// specific to the process that made it).
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let compile = py.import("rfxjit._rfx")?.getattr("compile")?;
        let kernel = Bound::new(
            py,
            PyKernel {
                kernel: self.exe.hir().clone(),
            },
        )?;
        let args = PyTuple::new(
            py,
            [
                kernel.into_any(),
                self.exe.backend().into_pyobject(py)?.into_any(),
                pyo3::types::PyBool::new(py, self.fast_math).to_owned().into_any(),
            ],
        )?;
        Ok((compile, args))
    }

    fn __repr__(&self) -> String {
        format!(
            "Compiled({}, backend={}, inputs={:?})",
            self.exe.hir().name(),
            self.exe.backend(),
            self.inputs()
                .iter()
                .map(|(n, d, s)| format!("{n}: {d}{s:?}"))
                .collect::<Vec<_>>()
        )
    }
}

/// Optimises, lowers and compiles `kernel` on `backend` (`cpu`, `interp`, `cuda`, `metal`).
#[pyfunction]
#[pyo3(signature = (kernel, backend = "cpu", fast_math = false))]
fn compile(py: Python<'_>, kernel: &PyKernel, backend: &str, fast_math: bool) -> PyResult<PyCompiled> {
    let mut config = CompileConfig::with_backend(backend);
    if fast_math {
        config = config.fast_math();
    }
    let kernel = kernel.kernel.clone();
    let exe = py
        .detach(|| rfx_runtime::compile(&kernel, &config, rfx_runtime::registry()))
        .map_err(runtime_error)?;
    Ok(PyCompiled::new(py, Arc::new(exe), fast_math))
}

/// The names of the backends built into this module.
#[pyfunction]
fn backends() -> Vec<&'static str> {
    let mut names = vec!["cpu", "interp"];
    if rfx_runtime::registry().names().contains(&"c") {
        names.push("c");
    }
    if cfg!(feature = "cuda") {
        names.push("cuda");
    }
    if cfg!(feature = "metal") {
        names.push("metal");
    }
    names
}

/// Adds the compiled-kernel class and functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCompiled>()?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(backends, m)?)?;
    m.add("GIL_RELEASE_ELEMS", GIL_RELEASE_ELEMS)?;
    Ok(())
}
