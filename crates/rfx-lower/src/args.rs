//! Arguments checked once and reused by every call: the real-time call path.

use std::sync::atomic::{AtomicU64, Ordering};

use rfx_ir::{Array, ArrayData, ArrayView, ArrayViewMut, DType, DataMut, DataRef, Element, Scalar};

use crate::backend::Compiled;
use crate::error::CallError;

/// Arrays of at least this many bytes get spare capacity that staggers their starting
/// offsets within a 4 KiB page (see [`staggered_zeros`]).
const STAGGER_FROM_BYTES: usize = 1024;

/// A zero-filled array of type `ty`, the `index`-th of a [`CallArgs`]. Arrays allocated one
/// after another tend to lie one after another, so arrays of a whole number of pages start at
/// the same offset within a page; a loop that stores to one while loading another at the same
/// offset then stalls on 4 KiB aliasing (the store and a later load look alike to the CPU's
/// memory disambiguation), which slows loops such as a 1024-element PID's. Spare capacity of a
/// page plus a different number of cache lines per array spreads the starts.
fn staggered_zeros(ty: &rfx_ir::TensorType, index: usize) -> Array {
    let n = ty.shape.numel();
    let size = ty.dtype.size_bytes().max(1);
    let bytes = n.saturating_mul(size);
    let spare = if bytes >= STAGGER_FROM_BYTES {
        (bytes.next_multiple_of(4096) - bytes + 1024 + 64 * (index % 32)) / size
    } else {
        0
    };
    fn zeros<T: Element + Default>(n: usize, spare: usize) -> ArrayData {
        let mut v: Vec<T> = Vec::new();
        // A failed reservation only loses the stagger.
        let _ = v.try_reserve_exact(n.saturating_add(spare));
        v.resize(n, T::default());
        T::into_data(v)
    }
    let data = match ty.dtype {
        DType::Bool => zeros::<bool>(n, spare),
        DType::I32 => zeros::<i32>(n, spare),
        DType::F32 => zeros::<f32>(n, spare),
        DType::F64 => zeros::<f64>(n, spare),
    };
    Array::new(ty.shape.clone(), data)
        .unwrap_or_else(|_| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh identity for a compiled program, never handed out twice in a process: a backend
/// takes one at compile time and returns it from [`Compiled::args_id`], so that [`CallArgs`]
/// made for it are recognised, and no others.
pub fn new_compiled_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// A compiled program's inputs and outputs, owned and checked once, for calls that validate
/// nothing: a control loop writes its inputs in place ([`CallArgs::input_mut`]), calls
/// [`Compiled::run_args`] and reads its outputs ([`CallArgs::output`]).
///
/// The arrays are allocated with the program's exact dtypes and shapes when the `CallArgs` is
/// made, and only their elements are ever lent out (never the vectors), so their lengths and
/// addresses cannot change: the backend that made the program runs it on the recorded
/// addresses without looking at the arrays again. Passed to another program, a `CallArgs` is
/// checked like any call ([`crate::CallError`] when it does not fit).
///
/// ```
/// use rfx_lower::{Backend, CallArgs, InterpBackend, LowerConfig, Scratch};
///
/// let kernel = rfx_ir::hir::parse(
///     "kernel k {\n %x = input x : f32[2]\n %y = add %x, %x : f32[2]\n output y = %y\n}",
/// )?;
/// let (mir, _) = rfx_opt::optimize(&kernel, &Default::default())?;
/// let (lir, _) = rfx_lower::lower(&mir, &LowerConfig::default())?;
/// let compiled = InterpBackend.compile(&lir, &Default::default())?;
/// let mut args = CallArgs::new(compiled.as_ref());
/// let mut scratch = Scratch::new();
/// for step in 0..3 {
///     args.input_mut::<f32>(0).ok_or("x is f32")?.copy_from_slice(&[step as f32, 1.0]);
///     compiled.run_args(&mut args, &mut scratch)?;
///     assert_eq!(args.output::<f32>(0), Some(&[2.0 * step as f32, 2.0][..]));
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct CallArgs {
    /// The [`Compiled::args_id`] of the program the arrays were made for (0: none).
    id: u64,
    inputs: Vec<Array>,
    /// The inputs' names (for errors).
    input_names: Vec<String>,
    outputs: Vec<Array>,
    /// The base address of every input's elements, then every output's.
    addresses: Vec<usize>,
}

impl CallArgs {
    /// Zero-filled inputs and outputs for `compiled`, with its dtypes and shapes.
    pub fn new(compiled: &dyn Compiled) -> CallArgs {
        let program = compiled.program();
        let mut made = 0;
        let mut zeros = |ty: &rfx_ir::TensorType| {
            made += 1;
            staggered_zeros(ty, made)
        };
        let inputs: Vec<Array> = program.inputs().map(|(_, _, ty)| zeros(ty)).collect();
        let input_names = program.inputs().map(|(_, name, _)| name.to_string()).collect();
        let outputs: Vec<Array> = program.outputs().map(|(_, _, ty)| zeros(ty)).collect();
        let addresses = inputs
            .iter()
            .chain(&outputs)
            .map(|array| match array.view().data() {
                DataRef::Bool(v) => v.as_ptr() as usize,
                DataRef::I32(v) => v.as_ptr() as usize,
                DataRef::F32(v) => v.as_ptr() as usize,
                DataRef::F64(v) => v.as_ptr() as usize,
            })
            .collect();
        CallArgs {
            id: compiled.args_id().unwrap_or(0),
            inputs,
            input_names,
            outputs,
            addresses,
        }
    }

    /// The inputs, in call order.
    pub fn inputs(&self) -> &[Array] {
        &self.inputs
    }

    /// The outputs, in call order.
    pub fn outputs(&self) -> &[Array] {
        &self.outputs
    }

    /// The elements of input `index` to write, or `None` when there is no such input or its
    /// dtype is not `T`'s.
    pub fn input_mut<T: Element>(&mut self, index: usize) -> Option<&mut [T]> {
        self.inputs.get_mut(index)?.as_slice_mut()
    }

    /// Copies `value` into input `index`; it must have the input's dtype and shape.
    pub fn set_input(&mut self, index: usize, value: ArrayView<'_>) -> Result<(), CallError> {
        let n_inputs = self.inputs.len();
        let (Some(input), Some(name)) = (self.inputs.get_mut(index), self.input_names.get(index)) else {
            return Err(CallError::Arity {
                what: "inputs",
                expected: n_inputs,
                found: index.saturating_add(1),
            });
        };
        if value.dtype() != input.dtype() {
            return Err(CallError::DType {
                name: name.clone(),
                expected: input.dtype(),
                found: value.dtype(),
            });
        }
        if value.shape() != input.shape() {
            return Err(CallError::Shape {
                name: name.clone(),
                expected: input.shape().clone(),
                found: value.shape().clone(),
            });
        }
        match (input.data_mut(), value.data()) {
            (DataMut::Bool(to), DataRef::Bool(from)) => to.copy_from_slice(from),
            (DataMut::I32(to), DataRef::I32(from)) => to.copy_from_slice(from),
            (DataMut::F32(to), DataRef::F32(from)) => to.copy_from_slice(from),
            (DataMut::F64(to), DataRef::F64(from)) => to.copy_from_slice(from),
            // The dtypes were compared above.
            _ => {}
        }
        Ok(())
    }

    /// The elements of output `index`, or `None` when there is no such output or its dtype is
    /// not `T`'s.
    pub fn output<T: Element>(&self, index: usize) -> Option<&[T]> {
        self.outputs.get(index)?.as_slice()
    }

    /// The [`Compiled::args_id`] of the program these arguments were made for.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The base address of every input's elements, then every output's: each array has the
    /// dtype and shape of the program that [`CallArgs::id`] names, they do not overlap, and
    /// they stay valid and in place while `self` is borrowed.
    pub fn addresses(&self) -> &[usize] {
        &self.addresses
    }

    /// Views of the inputs and the outputs, for the checked path ([`Compiled::run`]): what a
    /// backend without a faster path runs on, and what every backend runs on with arguments
    /// made for another program. Allocates the two lists.
    pub fn views(&mut self) -> (Vec<ArrayView<'_>>, Vec<ArrayViewMut<'_>>) {
        (
            self.inputs.iter().map(Array::view).collect(),
            self.outputs.iter_mut().map(Array::view_mut).collect(),
        )
    }
}
