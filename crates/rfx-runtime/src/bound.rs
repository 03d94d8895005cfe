//! The real-time call path: a handle bound to one compiled kernel.

use std::mem::MaybeUninit;
use std::sync::Arc;

use rfx_ir::{Array, ArrayView, ArrayViewMut, DType, DataRef, Element, Shape};
use rfx_lower::{CallArgs, CallError, DirectEntry, Scratch};

use crate::error::RuntimeError;
use crate::executable::Executable;

/// Most inputs (caller's plus constant) a [`BoundKernel`] with constant inputs assembles on the
/// stack; beyond this a call with constant inputs allocates.
const MAX_STACK_INPUTS: usize = 32;

/// Most arguments (inputs, constants and outputs) [`BoundKernel::run_slices`] passes by address;
/// a call with more takes the checked path through views (which allocates).
const MAX_STACK_ARGS: usize = 32;

/// Most arguments [`BoundKernel::run_slices`] gathers in a short array (most control kernels
/// have fewer; zeroing the long one costs a call a few nanoseconds).
const SHORT_ARGS: usize = 8;

/// A kernel bound for real-time calls: it owns its temporaries ([`Scratch`]) and the shapes of
/// its arguments, so a call borrows the inputs, writes caller-provided outputs, and — once the
/// first call has grown the scratch — allocates nothing and takes no lock (on the CPU backend).
///
/// "No lock": a kernel small enough to run on the caller's thread (below the lowering's
/// `min_elems_per_thread`, 32,768 elements by default) touches no lock at all; a larger one
/// hands parts to the CPU backend's thread pool with a `try_lock` that never blocks (when the
/// pool is busy the caller runs the whole kernel itself).
///
/// A `BoundKernel` is `Send` but used from one thread at a time (`&mut self`); make one per
/// control thread with [`BoundKernel::new`] or clone one.
#[derive(Clone, Debug)]
pub struct BoundKernel {
    exe: Arc<Executable>,
    scratch: Scratch,
    input_shapes: Vec<Shape>,
    output_shapes: Vec<Shape>,
    /// The element counts of the caller's inputs, then the outputs (what `run_slices`
    /// compares its slices' lengths with).
    slice_lens: Vec<usize>,
    /// The dtypes of the caller's inputs, then the outputs.
    slice_dtypes: Vec<DType>,
    /// The dtype every caller input and output shares, if they share one (`run_slices` then
    /// compares its element type with this alone).
    slice_dtype: Option<DType>,
    /// Shared, not copied, by a clone: the addresses below stay those of its arrays' elements.
    constant_inputs: Arc<[Array]>,
    /// The address of each constant input's first element (what `run_slices` passes).
    constant_addresses: Box<[usize]>,
    /// Whether `run_slices` may pass addresses: the constants are as many as the kernel's last
    /// inputs and of their types (otherwise it takes the checked path, which says what is
    /// wrong).
    by_address: bool,
    /// The compiled program's whole call as one function on the addresses, where it is one.
    direct: Option<DirectEntry>,
}

impl BoundKernel {
    /// Binds `exe` for real-time calls.
    pub fn new(exe: Arc<Executable>) -> BoundKernel {
        BoundKernel::with_constant_inputs(exe, Vec::new())
    }

    /// Binds `exe`, whose last inputs are `constants` (fixed data the caller never passes, such
    /// as the identity a reverse-mode Jacobian is seeded with).
    pub fn with_constant_inputs(exe: Arc<Executable>, constants: Vec<Array>) -> BoundKernel {
        // Into their shared home first: the addresses taken below are of these arrays.
        let constants: Arc<[Array]> = constants.into();
        let n_caller = exe.inputs().len().saturating_sub(constants.len());
        let input_shapes: Vec<Shape> = exe.inputs()[..n_caller]
            .iter()
            .map(|(_, ty)| ty.shape.clone())
            .collect();
        let output_shapes: Vec<Shape> = exe.outputs().iter().map(|(_, ty)| ty.shape.clone()).collect();
        let slice_dtypes = exe.inputs()[..n_caller]
            .iter()
            .chain(exe.outputs())
            .map(|(_, ty)| ty.dtype)
            .collect::<Vec<_>>();
        let slice_dtype = match slice_dtypes.split_first() {
            Some((&first, rest)) if rest.iter().all(|&d| d == first) => Some(first),
            _ => None,
        };
        let slice_lens = input_shapes
            .iter()
            .chain(&output_shapes)
            .map(Shape::numel)
            .collect();
        let by_address = constants.len() <= exe.inputs().len()
            && exe.inputs()[n_caller..]
                .iter()
                .zip(constants.iter())
                .all(|((_, ty), c)| ty.dtype == c.dtype() && ty.shape == *c.shape());
        let direct = if by_address {
            exe.compiled().direct_entry()
        } else {
            None
        };
        BoundKernel {
            by_address,
            direct,
            exe,
            scratch: Scratch::new(),
            input_shapes,
            output_shapes,
            slice_lens,
            slice_dtypes,
            slice_dtype,
            constant_addresses: constants.iter().map(|c| data_address(c.view().data())).collect(),
            constant_inputs: constants,
        }
    }

    /// The compiled kernel.
    pub fn executable(&self) -> &Arc<Executable> {
        &self.exe
    }

    /// The shapes of the inputs the caller passes, in order.
    pub fn input_shapes(&self) -> &[Shape] {
        &self.input_shapes
    }

    /// The shapes of the outputs, in order.
    pub fn output_shapes(&self) -> &[Shape] {
        &self.output_shapes
    }

    /// Runs on borrowed `inputs` into caller-provided `outputs`. Arity, dtypes, shapes and
    /// aliasing are checked before anything runs.
    pub fn run(
        &mut self,
        inputs: &[ArrayView<'_>],
        outputs: &mut [ArrayViewMut<'_>],
    ) -> Result<(), RuntimeError> {
        if self.constant_inputs.is_empty() {
            return self.exe.run(inputs, outputs, &mut self.scratch);
        }
        let total = inputs.len() + self.constant_inputs.len();
        if inputs.len() != self.input_shapes.len() {
            return Err(CallError::Arity {
                what: "inputs",
                expected: self.input_shapes.len(),
                found: inputs.len(),
            }
            .into());
        }
        let constant = |i: usize| self.constant_inputs[i - inputs.len()].view();
        if total <= MAX_STACK_INPUTS {
            let first = self.constant_inputs[0].view();
            let all: [ArrayView<'_>; MAX_STACK_INPUTS] = std::array::from_fn(|i| {
                if i < inputs.len() {
                    inputs[i]
                } else if i < total {
                    constant(i)
                } else {
                    first
                }
            });
            self.exe.run(&all[..total], outputs, &mut self.scratch)
        } else {
            let all: Vec<ArrayView<'_>> = (0..total)
                .map(|i| if i < inputs.len() { inputs[i] } else { constant(i) })
                .collect();
            self.exe.run(&all, outputs, &mut self.scratch)
        }
    }

    /// Zero-filled arguments for [`BoundKernel::run_args`] (the constant inputs, if any, already
    /// in place after the caller's).
    pub fn args(&self) -> Result<CallArgs, RuntimeError> {
        let mut args = self.exe.args();
        let first = self.input_shapes.len();
        for (k, constant) in self.constant_inputs.iter().enumerate() {
            args.set_input(first + k, constant.view())?;
        }
        Ok(args)
    }

    /// The fastest call: runs on `args` (from [`BoundKernel::args`]), whose inputs the caller
    /// writes in place ([`CallArgs::input_mut`]) and whose outputs it reads
    /// ([`CallArgs::output`]). On the CPU backend this checks nothing and allocates nothing
    /// (the arguments were checked when they were made); see [`Executable::run_args`].
    pub fn run_args(&mut self, args: &mut CallArgs) -> Result<(), RuntimeError> {
        self.exe.run_args(args, &mut self.scratch)
    }

    /// Runs on plain slices of one element type, using the bound shapes: `inputs[i]` must hold
    /// exactly the elements of input `i`, `outputs[j]` of output `j`, each of the kernel's dtype
    /// for it. Allocates nothing.
    ///
    /// The slices' types prove most of what [`BoundKernel::run`] checks (the borrow rules keep
    /// `&mut` outputs apart from each other and from the inputs), so after comparing lengths
    /// and dtypes this hands the backend the slices' addresses: on the CPU backend a call costs
    /// about what [`BoundKernel::run_args`] does.
    #[inline]
    pub fn run_slices<T: Element, const I: usize, const O: usize>(
        &mut self,
        inputs: [&[T]; I],
        mut outputs: [&mut [T]; O],
    ) -> Result<(), RuntimeError> {
        self.run_slice_refs(&inputs, &mut outputs)
    }

    /// [`BoundKernel::run_slices`] on arrays of slices the caller keeps: a control loop whose
    /// arguments stay in place builds them once, and a call copies nothing (an array passed
    /// by value is copied into the call's frame, by a `memcpy` call when it is long: 1.2× the
    /// time of a 17-argument call that passed prepared arrays by value).
    pub fn run_slice_refs<T: Element, const I: usize, const O: usize>(
        &mut self,
        inputs: &[&[T]; I],
        outputs: &mut [&mut [T]; O],
    ) -> Result<(), RuntimeError> {
        if I + O != self.slice_lens.len() {
            return Err(self.slices_error(inputs, outputs).into());
        }
        if self.slice_dtype != Some(T::DTYPE)
            && let Some(k) = self.slice_dtypes.iter().position(|&d| d != T::DTYPE)
        {
            self.check_lengths(inputs, outputs)?;
            return Err(self.dtype_error(k, T::DTYPE).into());
        }
        let total = I + self.constant_addresses.len() + O;
        if total <= SHORT_ARGS && self.by_address {
            self.run_addresses::<T, I, O, SHORT_ARGS>(inputs, outputs)
        } else if total <= MAX_STACK_ARGS && self.by_address {
            self.run_addresses::<T, I, O, MAX_STACK_ARGS>(inputs, outputs)
        } else {
            self.check_lengths(inputs, outputs)?;
            self.run_slice_views(inputs, outputs)
        }
    }

    /// Runs on the slices' addresses, gathered in an array of `N` (at least the argument
    /// count) on the stack, after comparing the slices' lengths with the bound ones;
    /// [`BoundKernel::run_slices`] checked the arity and the dtypes.
    #[inline(always)]
    fn run_addresses<T: Element, const I: usize, const O: usize, const N: usize>(
        &mut self,
        inputs: &[&[T]; I],
        outputs: &mut [&mut [T]; O],
    ) -> Result<(), RuntimeError> {
        let n_const = self.constant_addresses.len();
        let total = I + n_const + O;
        // Only the first `total` entries are written and read: nothing clears the rest.
        let mut addresses = [MaybeUninit::<usize>::uninit(); N];
        // `run_slices` checked that `I + O` lengths are bound: fixed-size views let the loops
        // below unroll (the `else` arms are for the arity alone).
        let (Some((input_lens, rest)), Some((input_slots, slots))) = (
            self.slice_lens.split_first_chunk::<I>(),
            addresses.split_first_chunk_mut::<I>(),
        ) else {
            return Err(self.slices_error(inputs, outputs).into());
        };
        let (Some(output_lens), Some((constant_slots, slots))) =
            (rest.first_chunk::<O>(), slots.split_at_mut_checked(n_const))
        else {
            return Err(self.slices_error(inputs, outputs).into());
        };
        let Some(output_slots) = slots.first_chunk_mut::<O>() else {
            return Err(self.slices_error(inputs, outputs).into());
        };
        let lens_match = inputs.iter().zip(input_lens).all(|(s, &n)| s.len() == n)
            && outputs.iter().zip(output_lens).all(|(s, &n)| s.len() == n);
        if !lens_match {
            return Err(self.slices_error(inputs, outputs).into());
        }
        for (slot, s) in input_slots.iter_mut().zip(inputs) {
            slot.write(s.as_ptr() as usize);
        }
        for (slot, &address) in constant_slots.iter_mut().zip(&self.constant_addresses) {
            slot.write(address);
        }
        for (slot, s) in output_slots.iter_mut().zip(outputs.iter_mut()) {
            slot.write(s.as_mut_ptr() as usize);
        }
        // SAFETY: the loops above wrote the first `total` entries (`I` inputs, `n_const`
        // constants and `O` outputs: the chunks taken above prove `total <= N`), and
        // `MaybeUninit<usize>` has `usize`'s layout.
        let addresses: &[usize] =
            unsafe { std::slice::from_raw_parts(addresses.as_ptr().cast::<usize>(), total) };
        // SAFETY: one address per argument in call order (the caller's inputs, the constant
        // inputs, the outputs: the arities were checked). Each is a slice's (so non-null and
        // aligned) or a constant array's, holding exactly its argument's elements (lengths
        // checked above against the bound shapes, constants made with theirs) of its dtype
        // (checked by `run_slices`; constants carry theirs). The inputs are shared borrows and
        // the constants are held here and never mutated, so nothing writes them during the
        // call; the outputs are `&mut` borrows, held for the whole call and so overlapping
        // nothing else passed.
        // The direct entry, where there is one, is of the program `self.exe` holds.
        unsafe {
            if let Some(entry) = &self.direct {
                entry.call(addresses.as_ptr());
            } else {
                self.exe.compiled().run_addresses(addresses, &mut self.scratch)?;
            }
        }
        Ok(())
    }

    /// The arity or shape error for `run_slices` slices whose count or lengths differ from the
    /// bound ones (`Ok` when they match).
    #[cold]
    fn check_lengths<T: Element, const I: usize, const O: usize>(
        &self,
        inputs: &[&[T]; I],
        outputs: &[&mut [T]; O],
    ) -> Result<(), CallError> {
        check_slices("inputs", &self.input_shapes, inputs.iter().map(|s| s.len()))?;
        check_slices("outputs", &self.output_shapes, outputs.iter().map(|s| s.len()))
    }

    /// The error for `run_slices` slices whose count or lengths are known to differ from the
    /// bound ones.
    #[cold]
    fn slices_error<T: Element, const I: usize, const O: usize>(
        &self,
        inputs: &[&[T]; I],
        outputs: &[&mut [T]; O],
    ) -> CallError {
        match self.check_lengths(inputs, outputs) {
            Err(err) => err,
            Ok(()) => CallError::Arity {
                what: "arguments",
                expected: self.slice_lens.len(),
                found: I + O,
            },
        }
    }

    /// [`BoundKernel::run_slices`] through views and [`Executable::run`]'s checks, for calls
    /// with more arguments than the address path keeps on the stack.
    #[cold]
    fn run_slice_views<T: Element, const I: usize, const O: usize>(
        &mut self,
        inputs: &[&[T]; I],
        outputs: &mut [&mut [T]; O],
    ) -> Result<(), RuntimeError> {
        let in_views: Vec<ArrayView<'_>> = inputs
            .iter()
            .zip(&self.input_shapes)
            .map(|(slice, shape)| {
                ArrayView::new(shape, slice).expect("invariant: lengths checked by run_slices")
            })
            .chain(self.constant_inputs.iter().map(Array::view))
            .collect();
        let mut out_views: Vec<ArrayViewMut<'_>> = outputs
            .iter_mut()
            .map(|s| &mut **s)
            .zip(&self.output_shapes)
            .map(|(slice, shape)| {
                ArrayViewMut::new(shape, slice).expect("invariant: lengths checked by run_slices")
            })
            .collect();
        self.exe.run(&in_views, &mut out_views, &mut self.scratch)
    }

    /// The error for a `run_slices` call with elements of `found` where argument `k` (the
    /// caller's inputs, then the outputs) has another dtype.
    #[cold]
    fn dtype_error(&self, k: usize, found: DType) -> CallError {
        let n_caller = self.input_shapes.len();
        let name = self.exe.inputs()[..n_caller]
            .iter()
            .chain(self.exe.outputs())
            .nth(k)
            .map_or_else(|| format!("argument {k}"), |(name, _)| name.clone());
        CallError::DType {
            name,
            expected: self.slice_dtypes[k],
            found,
        }
    }
}

/// The address of the first element of `data`.
fn data_address(data: DataRef<'_>) -> usize {
    match data {
        DataRef::Bool(v) => v.as_ptr() as usize,
        DataRef::I32(v) => v.as_ptr() as usize,
        DataRef::F32(v) => v.as_ptr() as usize,
        DataRef::F64(v) => v.as_ptr() as usize,
    }
}

/// The arity or shape error for slices whose lengths differ from the bound shapes' (`Ok` when
/// they match).
#[cold]
fn check_slices(
    what: &'static str,
    shapes: &[Shape],
    lens: impl ExactSizeIterator<Item = usize>,
) -> Result<(), CallError> {
    if lens.len() != shapes.len() {
        return Err(CallError::Arity {
            what,
            expected: shapes.len(),
            found: lens.len(),
        });
    }
    for (index, (len, shape)) in lens.zip(shapes).enumerate() {
        if len != shape.numel() {
            return Err(CallError::Shape {
                name: format!("{what}[{index}]"),
                expected: shape.clone(),
                found: Shape::new([len]),
            });
        }
    }
    Ok(())
}
