//! The contract between lowered programs and code generators.

use std::sync::Arc;

use rfx_ir::lir::LirProgram;
use rfx_ir::{Array, ArrayView, ArrayViewMut, DType, DataMut, DataRef, Scalar, TensorType};

use crate::accuracy::Transcendental;
use crate::args::CallArgs;
use crate::error::{BackendError, CallError};

/// Options every backend understands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// Allow approximations and reassociation beyond each op's documented bound (fast-math
    /// intrinsics on GPUs, fused multiply-add).
    pub fast_math: bool,
    /// Most worker threads a kernel may use (`None`: the backend decides).
    pub max_threads: Option<usize>,
    /// The CPU features the `"cpu"` backend compiles for (other backends ignore it).
    pub cpu_target: CpuTarget,
}

/// The instruction-set features the `"cpu"` backend may use. Pinning a target other than
/// [`CpuTarget::Host`] makes the generated code the same on every machine that can run it
/// (tests, snapshots and instruction counts then do not depend on the build machine).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CpuTarget {
    /// Whatever this machine has, probed once per process: fused multiply-add where the CPU has
    /// it, and on x86-64 with AVX2 and FMA the ahead-of-time 8-lane routines for long
    /// elementwise loops.
    #[default]
    Host,
    /// The architecture's base instruction set (x86-64: SSE2): no fused multiply-add (fast
    /// math contracts nothing) and no AVX2 routines. Runs on every CPU of the architecture.
    Baseline,
    /// x86-64-v3 (AVX2, FMA, BMI1/2, LZCNT) with the AVX2 routines. Compiling for it on a CPU
    /// without AVX2 and FMA, or on another architecture, fails with
    /// [`BackendError::Unavailable`].
    Avx2,
}

impl CpuTarget {
    /// Every target, in order of their names.
    pub const ALL: [CpuTarget; 3] = [CpuTarget::Host, CpuTarget::Baseline, CpuTarget::Avx2];

    /// The target's name: `host`, `baseline` or `avx2`.
    pub fn name(self) -> &'static str {
        match self {
            CpuTarget::Host => "host",
            CpuTarget::Baseline => "baseline",
            CpuTarget::Avx2 => "avx2",
        }
    }

    /// The target named `name` ([`CpuTarget::name`]), if there is one.
    pub fn from_name(name: &str) -> Option<CpuTarget> {
        CpuTarget::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl std::fmt::Display for CpuTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A code generator: compiles LIR programs into runnable objects.
///
/// Implementations must be thread-safe: one backend compiles for many callers.
pub trait Backend: Send + Sync {
    /// The backend's registry name (`"interp"`, `"cpu"`, `"cuda"`, `"metal"`, `"c"`).
    fn name(&self) -> &'static str;

    /// `Ok` when the backend can compile and run here; otherwise
    /// [`BackendError::Unavailable`] saying why (no GPU, no driver, no compiler library).
    fn check_available(&self) -> Result<(), BackendError>;

    /// Compiles `program`. Fails with [`BackendError::Unsupported`] naming the op, dtype or
    /// size the backend cannot handle.
    fn compile(
        &self,
        program: &LirProgram,
        options: &CompileOptions,
    ) -> Result<Arc<dyn Compiled>, BackendError>;

    /// The documented accuracy of `op` on `dtype` operands `args` (one per operand, as `f64`)
    /// without fast math: the most [`ulps`](crate::ulps) by which this backend's result may
    /// differ from [`Transcendental::oracle`] rounded to `dtype`, where a result is NaN exactly
    /// when the oracle is and an infinity only one ULP from the largest finite value. `None`
    /// where the backend documents no bound (outside a range its table gives, or no table).
    /// Exactly rounded ops need no entry: they must give the LIR interpreter's bits.
    ///
    /// The default documents no bound.
    fn ulp_bound(&self, op: Transcendental, dtype: DType, args: &[f64]) -> Option<u64> {
        let _ = (op, dtype, args);
        None
    }
}

/// A compiled program, ready to run any number of times from any thread.
pub trait Compiled: Send + Sync {
    /// The backend that compiled it.
    fn backend(&self) -> &'static str;

    /// The program it was compiled from (its inputs and outputs are the call signature).
    fn program(&self) -> &LirProgram;

    /// Runs on `inputs` (in the program's input order) writing `outputs` (in output order).
    /// Implementations first call [`validate_call`]: when it rejects the call
    /// ([`BackendError::Call`]) nothing is written. A failure while running (a GPU driver
    /// error, [`BackendError::Runtime`]) may leave some outputs written and others not.
    /// `scratch` holds the program's temporaries; it grows on first use and is reused after, so
    /// a caller that keeps one `Scratch` per thread makes calls that allocate nothing.
    fn run(
        &self,
        inputs: &[ArrayView<'_>],
        outputs: &mut [ArrayViewMut<'_>],
        scratch: &mut Scratch,
    ) -> Result<(), BackendError>;

    /// Runs once on `inputs` into new outputs (one zeroed array of each output's type, in
    /// output order, returned) with a scratch of its own: for callers that run a program once,
    /// such as [`crate::execute_lowered`] and tests. Goes through [`Compiled::run`]'s checks.
    fn run_to_new(&self, inputs: &[ArrayView<'_>]) -> Result<Vec<Array>, BackendError> {
        let mut outputs: Vec<Array> = self
            .program()
            .outputs()
            .map(|(_, _, ty)| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
            .collect();
        {
            let mut views: Vec<_> = outputs.iter_mut().map(Array::view_mut).collect();
            self.run(inputs, &mut views, &mut Scratch::new())?;
        }
        Ok(outputs)
    }

    /// The identity [`CallArgs`] made for this program record ([`crate::new_compiled_id`]), for
    /// backends whose [`Compiled::run_args`] skips the checks; `None` (the default) otherwise.
    fn args_id(&self) -> Option<u64> {
        None
    }

    /// Runs on `args`, whose arrays stay in place between calls. A backend that recognises
    /// arguments made for this program ([`CallArgs::id`] equal to its [`Compiled::args_id`])
    /// may run on [`CallArgs::addresses`] without checking anything: the CPU backend's
    /// real-time path. The default, and every call with arguments made for another program,
    /// goes through [`Compiled::run`]'s checks.
    fn run_args(&self, args: &mut CallArgs, scratch: &mut Scratch) -> Result<(), BackendError> {
        let (inputs, mut outputs) = args.views();
        self.run(&inputs, &mut outputs, scratch)
    }

    /// Runs on the addresses of the arguments' first elements, in call order (inputs, then
    /// outputs): the path of a caller whose types prove the conditions below, such as the
    /// runtime's `BoundKernel::run_slices` (`&[T]` inputs and `&mut [T]` outputs, which the
    /// borrow rules keep apart, of checked dtype and length). The CPU backend launches on the
    /// addresses as they are; the default makes views of them and runs [`Compiled::run`], checks
    /// included.
    ///
    /// # Safety
    /// `addresses` holds one address per input and output of the program, in order. Each is the
    /// non-null, aligned address of exactly as many initialised elements of the argument's
    /// declared dtype as its shape holds (any address for an empty one), readable (inputs) or
    /// writable (outputs) for the whole call; no output overlaps another argument, and nothing
    /// else writes an input during the call.
    unsafe fn run_addresses(&self, addresses: &[usize], scratch: &mut Scratch) -> Result<(), BackendError> {
        let program = self.program();
        let types: Vec<&TensorType> = program
            .inputs()
            .chain(program.outputs())
            .map(|(_, _, ty)| ty)
            .collect();
        if addresses.len() != types.len() {
            return Err(CallError::Arity {
                what: "argument addresses",
                expected: types.len(),
                found: addresses.len(),
            }
            .into());
        }
        let n_in = program.inputs().count();
        let (in_types, out_types) = types.split_at(n_in);
        let (in_addresses, out_addresses) = addresses.split_at(n_in);
        // SAFETY (both): the caller guarantees each address holds the argument's elements.
        let inputs = in_types
            .iter()
            .zip(in_addresses)
            .map(|(ty, &address)| unsafe { view_at(ty, address) })
            .collect::<Result<Vec<_>, _>>()?;
        let mut outputs = out_types
            .iter()
            .zip(out_addresses)
            .map(|(ty, &address)| unsafe { view_mut_at(ty, address) })
            .collect::<Result<Vec<_>, _>>()?;
        self.run(&inputs, &mut outputs, scratch)
    }

    /// The function a caller may call in place of [`Compiled::run_addresses`], where the
    /// whole call is one function of this program on its arguments' addresses (the CPU
    /// backend's unsplit one-function programs); `None` otherwise.
    fn direct_entry(&self) -> Option<DirectEntry> {
        None
    }
}

/// A compiled program's whole call as one function taking the table of its arguments'
/// addresses in call order (see [`Compiled::direct_entry`]). Valid while the [`Compiled`] it
/// came from lives.
#[derive(Clone, Copy, Debug)]
pub struct DirectEntry {
    func: unsafe extern "C" fn(*const *mut u8, u64, u64),
    units: u64,
}

impl DirectEntry {
    /// The entry calling `func(table, 0, units)`.
    ///
    /// # Safety
    /// That call, with `table` a [`Compiled::run_addresses`] table of a program, runs the
    /// program's whole call on it, touching only its arguments' elements.
    pub unsafe fn new(func: unsafe extern "C" fn(*const *mut u8, u64, u64), units: u64) -> DirectEntry {
        DirectEntry { func, units }
    }

    /// Runs the call on `addresses`.
    ///
    /// # Safety
    /// The [`Compiled`] this came from is alive, and `addresses` points at one address per
    /// input and output of its program, in order, each as [`Compiled::run_addresses`]
    /// requires.
    #[inline(always)]
    pub unsafe fn call(&self, addresses: *const usize) {
        // SAFETY: as the caller guarantees and `DirectEntry::new` was promised.
        unsafe { (self.func)(addresses.cast(), 0, self.units) }
    }
}

/// A view whose element count is not its shape's (never, for views made from a shape's count).
fn length_error(e: rfx_ir::ArrayLengthError) -> BackendError {
    CallError::Shape {
        name: "argument".to_string(),
        expected: e.shape,
        found: rfx_ir::Shape::new([e.found]),
    }
    .into()
}

/// The slice of `len` elements of `T` at `address` (an empty slice for `len == 0`).
///
/// # Safety
/// As [`Compiled::run_addresses`] requires of an input.
unsafe fn slice_at<'a, T>(address: usize, len: usize) -> &'a [T] {
    if len == 0 {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(address as *const T, len) }
}

/// The mutable slice of `len` elements of `T` at `address`.
///
/// # Safety
/// As [`Compiled::run_addresses`] requires of an output.
unsafe fn slice_mut_at<'a, T>(address: usize, len: usize) -> &'a mut [T] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts_mut(address as *mut T, len) }
}

/// A view of the input of type `ty` at `address`.
///
/// # Safety
/// As [`Compiled::run_addresses`] requires of an input.
unsafe fn view_at(ty: &TensorType, address: usize) -> Result<ArrayView<'_>, BackendError> {
    let n = ty.shape.numel();
    // SAFETY: guaranteed by the caller.
    let data = unsafe {
        match ty.dtype {
            DType::Bool => DataRef::Bool(slice_at(address, n)),
            DType::I32 => DataRef::I32(slice_at(address, n)),
            DType::F32 => DataRef::F32(slice_at(address, n)),
            DType::F64 => DataRef::F64(slice_at(address, n)),
        }
    };
    ArrayView::from_data(&ty.shape, data).map_err(length_error)
}

/// A view of the output of type `ty` at `address`.
///
/// # Safety
/// As [`Compiled::run_addresses`] requires of an output.
unsafe fn view_mut_at(ty: &TensorType, address: usize) -> Result<ArrayViewMut<'_>, BackendError> {
    let n = ty.shape.numel();
    // SAFETY: guaranteed by the caller.
    let data = unsafe {
        match ty.dtype {
            DType::Bool => DataMut::Bool(slice_mut_at(address, n)),
            DType::I32 => DataMut::I32(slice_mut_at(address, n)),
            DType::F32 => DataMut::F32(slice_mut_at(address, n)),
            DType::F64 => DataMut::F64(slice_mut_at(address, n)),
        }
    };
    ArrayViewMut::from_data(&ty.shape, data).map_err(length_error)
}

/// Memory for a program's temporaries (the LIR arena), owned by the caller.
///
/// It starts on a cache line, as the LIR's arena offsets assume: a temporary placed at a
/// multiple of 64 bytes then holds whole lines, and its vectors never split one.
#[derive(Clone, Debug, Default)]
pub struct Scratch {
    lines: Vec<ScratchLine>,
}

/// One cache line of a [`Scratch`]: eight words, aligned to 64 bytes.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct ScratchLine([u64; 8]);

impl Scratch {
    /// An empty scratch area; it grows when a program needs it.
    pub fn new() -> Scratch {
        Scratch::default()
    }

    /// The first `bytes` bytes (rounded up to whole 8-byte words), growing once if needed.
    /// The memory starts on a 64-byte boundary; its contents are unspecified.
    pub fn words(&mut self, bytes: usize) -> &mut [u64] {
        let words = bytes.div_ceil(8);
        let lines = words.div_ceil(8);
        if self.lines.len() < lines {
            self.lines.resize(lines, ScratchLine::default());
        }
        let all = self.lines.len() * 8;
        // SAFETY: `ScratchLine` is `repr(C)` around `[u64; 8]`, 64 bytes with no padding, so
        // the vector's lines are `all` contiguous, initialised `u64`s, borrowed mutably here
        // through `self` for the slice's lifetime.
        let all = unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<u64>(), all) };
        &mut all[..words]
    }

    /// Bytes currently reserved.
    pub fn capacity_bytes(&self) -> usize {
        self.lines.len() * 64
    }
}

fn byte_range(data: (usize, usize)) -> std::ops::Range<usize> {
    data.0..data.0 + data.1
}

#[inline]
fn ref_range(data: &DataRef<'_>) -> (usize, usize) {
    match data {
        DataRef::Bool(v) => (v.as_ptr() as usize, std::mem::size_of_val(*v)),
        DataRef::I32(v) => (v.as_ptr() as usize, std::mem::size_of_val(*v)),
        DataRef::F32(v) => (v.as_ptr() as usize, std::mem::size_of_val(*v)),
        DataRef::F64(v) => (v.as_ptr() as usize, std::mem::size_of_val(*v)),
    }
}

#[inline]
fn mut_range(data: &DataMut<'_>) -> (usize, usize) {
    match data {
        DataMut::Bool(v) => (v.as_ptr() as usize, std::mem::size_of_val(&**v)),
        DataMut::I32(v) => (v.as_ptr() as usize, std::mem::size_of_val(&**v)),
        DataMut::F32(v) => (v.as_ptr() as usize, std::mem::size_of_val(&**v)),
        DataMut::F64(v) => (v.as_ptr() as usize, std::mem::size_of_val(&**v)),
    }
}

fn overlaps(a: std::ops::Range<usize>, b: std::ops::Range<usize>) -> bool {
    !a.is_empty() && !b.is_empty() && a.start < b.end && b.start < a.end
}

/// Checks one argument given by its type (a device-resident array's, which has no host view):
/// dtype, then shape; the error names the argument `name`.
pub fn check_type(name: &str, expected: &TensorType, found: &TensorType) -> Result<(), CallError> {
    check_arg(name, expected, found.dtype, &found.shape)
}

fn check_arg(
    name: &str,
    expected: &TensorType,
    dtype: rfx_ir::DType,
    shape: &rfx_ir::Shape,
) -> Result<(), CallError> {
    if dtype != expected.dtype {
        return Err(CallError::DType {
            name: name.to_string(),
            expected: expected.dtype,
            found: dtype,
        });
    }
    if *shape != expected.shape {
        return Err(CallError::Shape {
            name: name.to_string(),
            expected: expected.shape.clone(),
            found: shape.clone(),
        });
    }
    Ok(())
}

/// A program's call signature (input and output names and types, in order), extracted once
/// so that a hot call path validates against plain slices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    inputs: Vec<(String, TensorType)>,
    outputs: Vec<(String, TensorType)>,
    /// One precomputed check per input, then per output, for the accepting fast path.
    keys: Vec<ArgKey>,
}

/// Ranks up to this are compared inline by the fast path; higher ranks take the general path.
const INLINE_RANK: usize = 4;

/// Most outputs the fast path checks (its overlap check compares every pair of outputs; a
/// 6-joint arm's position and Jacobian are 21 outputs).
const MAX_FAST_OUTPUTS: usize = 32;

/// Most arguments [`Signature::validate`] checks on the fast path (addresses on the stack).
const MAX_FAST_ARGS: usize = 64;

/// What one argument must be, flattened so that the fast path reads one small record: its
/// byte length, its dimensions (inline), its rank and its dtype (a call whose dtype and dims
/// match has exactly these bytes, so only the view's address is read from its data).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ArgKey {
    bytes: usize,
    dims: [usize; INLINE_RANK],
    /// The rank, or `usize::MAX` (which no view has) above [`INLINE_RANK`].
    rank: usize,
    dtype: rfx_ir::DType,
}

impl ArgKey {
    fn of(ty: &TensorType) -> ArgKey {
        let dims = ty.shape.dims();
        let mut inline = [0; INLINE_RANK];
        let rank = if dims.len() <= INLINE_RANK {
            inline[..dims.len()].copy_from_slice(dims);
            dims.len()
        } else {
            usize::MAX
        };
        ArgKey {
            bytes: ty.shape.numel().saturating_mul(ty.dtype.size_bytes()),
            dims: inline,
            rank,
            dtype: ty.dtype,
        }
    }

    /// Whether a view of `dtype` and `dims` matches (an indexed loop: the test profile, which
    /// the instruction-count gate measures, does not inline iterator adapters).
    #[inline(always)]
    fn matches(&self, dtype: rfx_ir::DType, dims: &[usize]) -> bool {
        if dtype != self.dtype || dims.len() != self.rank {
            return false;
        }
        // The rank is at most `INLINE_RANK` here (no view has `usize::MAX` dims).
        let n = dims.len().min(INLINE_RANK);
        let mut i = 0;
        while i < n {
            if dims[i] != self.dims[i] {
                return false;
            }
            i += 1;
        }
        true
    }
}

impl Signature {
    /// Checks a call's arguments given by their types (device-resident arrays) against the
    /// signature: the number of inputs, then each input's dtype and shape, then the same for
    /// the outputs. The GPU backends' resident calls run it before they queue anything.
    pub fn check_types<'a>(
        &self,
        inputs: impl ExactSizeIterator<Item = &'a TensorType>,
        outputs: impl ExactSizeIterator<Item = &'a TensorType>,
    ) -> Result<(), CallError> {
        fn check<'a>(
            declared: &[(String, TensorType)],
            found: impl ExactSizeIterator<Item = &'a TensorType>,
            what: &'static str,
        ) -> Result<(), CallError> {
            if declared.len() != found.len() {
                return Err(CallError::Arity {
                    what,
                    expected: declared.len(),
                    found: found.len(),
                });
            }
            for ((name, ty), found) in declared.iter().zip(found) {
                check_type(name, ty, found)?;
            }
            Ok(())
        }
        check(&self.inputs, inputs, "inputs")?;
        check(&self.outputs, outputs, "outputs")
    }

    /// The signature of `program`.
    pub fn of(program: &LirProgram) -> Signature {
        let own = |(_, name, ty): (_, &str, &TensorType)| (name.to_string(), ty.clone());
        Signature::from_parts(
            program.inputs().map(own).collect(),
            program.outputs().map(own).collect(),
        )
    }

    fn from_parts(inputs: Vec<(String, TensorType)>, outputs: Vec<(String, TensorType)>) -> Signature {
        let keys = inputs
            .iter()
            .chain(&outputs)
            .map(|(_, ty)| ArgKey::of(ty))
            .collect();
        Signature {
            inputs,
            outputs,
            keys,
        }
    }

    /// The inputs, in call order.
    pub fn inputs(&self) -> &[(String, TensorType)] {
        &self.inputs
    }

    /// The outputs, in call order.
    pub fn outputs(&self) -> &[(String, TensorType)] {
        &self.outputs
    }

    /// [`validate_call`] against this signature. Allocates nothing unless it reports an error.
    pub fn validate(&self, inputs: &[ArrayView<'_>], outputs: &[ArrayViewMut<'_>]) -> Result<(), CallError> {
        let count = inputs.len() + outputs.len();
        if count <= 16 {
            self.validate_into(inputs, outputs, &mut [0usize; 16])
        } else if count <= MAX_FAST_ARGS {
            self.validate_into(inputs, outputs, &mut [0usize; MAX_FAST_ARGS])
        } else {
            self.slow_validate(inputs, outputs)
        }
    }

    /// [`Signature::validate`], writing the base address of every input and then every output
    /// into `addresses` as it checks them (what a backend puts in its buffer table). Allocates
    /// nothing unless it reports an error; on an error `addresses` holds no meaning.
    /// `addresses` must have room for every argument ([`CallError::Arity`] otherwise).
    ///
    /// The accepting path is one tight pass (dtype and dims compared against a flat record per
    /// argument, byte ranges compared for overlap): it is on every call of a control loop. Any
    /// failure, and a call with more arguments than `addresses` holds, re-runs the general
    /// check, which names the offending argument.
    #[inline]
    pub fn validate_into(
        &self,
        inputs: &[ArrayView<'_>],
        outputs: &[ArrayViewMut<'_>],
        addresses: &mut [usize],
    ) -> Result<(), CallError> {
        if self.accepts(inputs, outputs, addresses) {
            return Ok(());
        }
        self.slow_validate(inputs, outputs)?;
        // A valid call outside the fast path (many outputs, a high rank): fill in the
        // addresses here.
        let total = inputs.len() + outputs.len();
        let Some(slots) = addresses.get_mut(..total) else {
            return Err(CallError::Arity {
                what: "argument addresses",
                expected: total,
                found: addresses.len(),
            });
        };
        let starts = inputs
            .iter()
            .map(|v| ref_range(&v.data()).0)
            .chain(outputs.iter().map(|v| mut_range(v.data()).0));
        for (slot, start) in slots.iter_mut().zip(starts) {
            *slot = start;
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn slow_validate(&self, inputs: &[ArrayView<'_>], outputs: &[ArrayViewMut<'_>]) -> Result<(), CallError> {
        validate_parts(
            || self.inputs.iter().map(|(n, t)| (n.as_str(), t)),
            || self.outputs.iter().map(|(n, t)| (n.as_str(), t)),
            inputs,
            outputs,
        )
    }

    /// Whether the call fits: the fast path of [`Signature::validate_into`], which must accept
    /// exactly the calls `validate_parts` accepts (calls with more than `MAX_FAST_OUTPUTS`
    /// outputs, or a rank above `INLINE_RANK`, always take the general path). One pass over
    /// the arguments, outputs first: each output's address goes into `addresses` as it is
    /// checked, and the hull of the outputs' byte ranges (lowest start, highest end) grows with
    /// it. An argument outside the hull overlaps no output, which settles the usual call with
    /// two compares; one inside is compared with each output's range, rebuilt from the
    /// addresses and the keys' byte lengths (no array of ranges to clear). Declines when
    /// `addresses` is too short.
    #[inline(always)]
    fn accepts(
        &self,
        inputs: &[ArrayView<'_>],
        outputs: &[ArrayViewMut<'_>],
        addresses: &mut [usize],
    ) -> bool {
        /// Whether `[start, end)` overlaps any of the non-empty ranges at `starts` with `keys`'
        /// byte lengths (indexed, as in `ArgKey::matches`).
        #[inline(never)]
        fn overlaps_any(start: usize, end: usize, starts: &[usize], keys: &[ArgKey]) -> bool {
            let n = starts.len().min(keys.len());
            let mut i = 0;
            while i < n {
                let (other, bytes) = (starts[i], keys[i].bytes);
                if bytes != 0 && start < other + bytes && other < end {
                    return true;
                }
                i += 1;
            }
            false
        }
        let n_in = inputs.len();
        let n_out = outputs.len();
        let total = n_in + n_out;
        if n_in != self.inputs.len()
            || total != self.keys.len()
            || n_out > MAX_FAST_OUTPUTS
            || addresses.len() < total
        {
            return false;
        }
        let (in_keys, out_keys) = self.keys.split_at(n_in);
        let (in_addr, out_addr) = addresses[..total].split_at_mut(n_in);
        // The outputs' hull: empty (`lo > hi`) until a non-empty output is seen.
        let (mut lo, mut hi) = (usize::MAX, 0usize);
        let mut k = 0;
        while k < n_out {
            let (view, key) = (&outputs[k], &out_keys[k]);
            if !key.matches(view.dtype(), view.shape().dims()) {
                return false;
            }
            let start = mut_range(view.data()).0;
            if key.bytes != 0 {
                let end = start + key.bytes;
                if start < hi && lo < end && overlaps_any(start, end, &out_addr[..k], &out_keys[..k]) {
                    return false;
                }
                lo = lo.min(start);
                hi = hi.max(end);
            }
            out_addr[k] = start;
            k += 1;
        }
        let out_addr = &*out_addr;
        let mut i = 0;
        while i < n_in {
            let (view, key) = (&inputs[i], &in_keys[i]);
            if !key.matches(view.dtype(), view.shape().dims()) {
                return false;
            }
            let start = ref_range(&view.data()).0;
            if key.bytes != 0 {
                let end = start + key.bytes;
                if start < hi && lo < end && overlaps_any(start, end, out_addr, out_keys) {
                    return false;
                }
            }
            in_addr[i] = start;
            i += 1;
        }
        true
    }
}

/// Checks a call against `program`'s signature before anything runs: the number of inputs and
/// outputs, each one's dtype and shape (so every buffer has exactly the length the code will
/// touch), and that no output overlaps an input or another output. Allocates nothing.
pub fn validate_call(
    program: &LirProgram,
    inputs: &[ArrayView<'_>],
    outputs: &[ArrayViewMut<'_>],
) -> Result<(), CallError> {
    validate_parts(
        || program.inputs().map(|(_, n, t)| (n, t)),
        || program.outputs().map(|(_, n, t)| (n, t)),
        inputs,
        outputs,
    )
}

fn validate_parts<'s, I, O>(
    declared_inputs: impl Fn() -> I,
    declared_outputs: impl Fn() -> O,
    inputs: &[ArrayView<'_>],
    outputs: &[ArrayViewMut<'_>],
) -> Result<(), CallError>
where
    I: Iterator<Item = (&'s str, &'s TensorType)>,
    O: Iterator<Item = (&'s str, &'s TensorType)>,
{
    let n_inputs = declared_inputs().count();
    if inputs.len() != n_inputs {
        return Err(CallError::Arity {
            what: "inputs",
            expected: n_inputs,
            found: inputs.len(),
        });
    }
    let n_outputs = declared_outputs().count();
    if outputs.len() != n_outputs {
        return Err(CallError::Arity {
            what: "outputs",
            expected: n_outputs,
            found: outputs.len(),
        });
    }
    for ((name, ty), view) in declared_inputs().zip(inputs) {
        check_arg(name, ty, view.dtype(), view.shape())?;
    }
    for ((name, ty), view) in declared_outputs().zip(outputs) {
        check_arg(name, ty, view.dtype(), view.shape())?;
    }
    for (i, ((out_name, _), out)) in declared_outputs().zip(outputs).enumerate() {
        let range = byte_range(mut_range(out.data()));
        for ((in_name, _), input) in declared_inputs().zip(inputs) {
            if overlaps(range.clone(), byte_range(ref_range(&input.data()))) {
                return Err(CallError::Alias {
                    output: out_name.to_string(),
                    other: in_name.to_string(),
                });
            }
        }
        for ((other_name, _), other) in declared_outputs().zip(outputs).skip(i + 1) {
            if overlaps(range.clone(), byte_range(mut_range(other.data()))) {
                return Err(CallError::Alias {
                    output: out_name.to_string(),
                    other: other_name.to_string(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod signature_tests {
    use super::*;
    use rfx_ir::{DType, Shape};

    fn sig(inputs: &[(DType, &[usize])], outputs: &[(DType, &[usize])]) -> Signature {
        let named = |prefix: &str, list: &[(DType, &[usize])]| {
            list.iter()
                .enumerate()
                .map(|(i, (d, s))| {
                    (
                        format!("{prefix}{i}"),
                        TensorType::new(*d, Shape::new(s.to_vec())),
                    )
                })
                .collect()
        };
        Signature::from_parts(named("x", inputs), named("y", outputs))
    }

    /// Arguments given by their types: arity, then dtype, then shape, inputs before outputs.
    #[test]
    fn types_are_checked_by_arity_dtype_and_shape() {
        let signature = sig(&[(DType::F32, &[3]), (DType::I32, &[])], &[(DType::F32, &[3])]);
        let ty = |d: DType, s: &[usize]| TensorType::new(d, Shape::new(s.to_vec()));
        let (f3, i0, f2) = (ty(DType::F32, &[3]), ty(DType::I32, &[]), ty(DType::F32, &[2]));
        assert_eq!(
            signature.check_types([&f3, &i0].into_iter(), [&f3].into_iter()),
            Ok(())
        );
        assert_eq!(
            signature.check_types([&f3].into_iter(), [&f3].into_iter()),
            Err(CallError::Arity {
                what: "inputs",
                expected: 2,
                found: 1
            })
        );
        assert_eq!(
            signature.check_types([&f3, &f3].into_iter(), [&f3].into_iter()),
            Err(CallError::DType {
                name: "x1".into(),
                expected: DType::I32,
                found: DType::F32
            })
        );
        assert_eq!(
            signature.check_types([&f3, &i0].into_iter(), [&f2].into_iter()),
            Err(CallError::Shape {
                name: "y0".into(),
                expected: Shape::new(vec![3]),
                found: Shape::new(vec![2])
            })
        );
        assert_eq!(
            signature.check_types([&f3, &i0].into_iter(), [].into_iter()),
            Err(CallError::Arity {
                what: "outputs",
                expected: 1,
                found: 0
            })
        );
        assert_eq!(
            check_type("copy_to_host", &f3, &f2),
            Err(CallError::Shape {
                name: "copy_to_host".into(),
                expected: Shape::new(vec![3]),
                found: Shape::new(vec![2])
            })
        );
    }

    /// The fast path accepts exactly the calls the general check accepts.
    #[test]
    fn the_fast_path_agrees_with_the_general_check() {
        let shapes: [&[usize]; 4] = [&[], &[3], &[1, 3], &[3, 1]];
        let (f32s, f64s, i32s) = ([0.5f32; 3], [0.5f64; 3], [1i32; 3]);
        let mut outs_f32 = [0.0f32; 3];
        let mut checked = 0;
        for declared in shapes {
            for dtype in [DType::F32, DType::F64] {
                let signature = sig(
                    &[(dtype, declared), (DType::I32, &[3])],
                    &[(DType::F32, declared)],
                );
                for given in shapes {
                    let numel: usize = given.iter().product();
                    let shape = Shape::new(given.to_vec());
                    let i_shape = Shape::new(vec![3]);
                    let x = match dtype {
                        DType::F32 => ArrayView::new(&shape, &f32s[..numel]),
                        _ => ArrayView::new(&shape, &f64s[..numel]),
                    }
                    .expect("view");
                    let k = ArrayView::new(&i_shape, &i32s[..]).expect("view");
                    let out = ArrayViewMut::new(&shape, &mut outs_f32[..numel]).expect("view");
                    let mut outputs = [out];
                    for inputs in [vec![x, k], vec![x], vec![k, x]] {
                        let general = validate_parts(
                            || signature.inputs.iter().map(|(n, t)| (n.as_str(), t)),
                            || signature.outputs.iter().map(|(n, t)| (n.as_str(), t)),
                            &inputs,
                            &outputs,
                        );
                        let mut addresses = [0usize; 16];
                        assert_eq!(
                            signature.accepts(&inputs, &outputs, &mut addresses),
                            general.is_ok(),
                            "declared {declared:?} {dtype}, given {given:?}: {general:?}"
                        );
                        assert_eq!(signature.validate(&inputs, &outputs).is_ok(), general.is_ok());
                        checked += 1;
                    }
                    let _ = &mut outputs;
                }
            }
        }
        assert_eq!(checked, 4 * 2 * 4 * 3);
    }

    /// A call with the right number of arguments split differently between inputs and outputs
    /// (two and two for three and one, every argument of one type) is an arity error on every
    /// path: the fast path must not accept it because the total and the types fit.
    #[test]
    fn inputs_and_outputs_are_counted_apart() {
        let one: &[usize] = &[1];
        let signature = sig(&[(DType::F32, one); 3], &[(DType::F32, one)]);
        let shape = Shape::new(vec![1]);
        let (a, b) = ([1.0f32], [2.0f32]);
        let (mut c, mut d) = ([3.0f32], [4.0f32]);
        let inputs = [
            ArrayView::new(&shape, &a).expect("a"),
            ArrayView::new(&shape, &b).expect("b"),
        ];
        let outputs = [
            ArrayViewMut::new(&shape, &mut c).expect("c"),
            ArrayViewMut::new(&shape, &mut d).expect("d"),
        ];
        let mut addresses = [0usize; 4];
        assert!(!signature.accepts(&inputs, &outputs, &mut addresses));
        let arity = Err(CallError::Arity {
            what: "inputs",
            expected: 3,
            found: 2,
        });
        assert_eq!(signature.validate(&inputs, &outputs), arity);
        assert_eq!(signature.validate_into(&inputs, &outputs, &mut addresses), arity);
    }

    /// A call of `signature` (two inputs and two outputs of two elements, the second output
    /// of `out1_len`) on views at element offsets `at` of the `f32` array at `base` (which
    /// holds at least 16): the general check's verdict, the fast path's and its addresses.
    fn placed_call(
        signature: &Signature,
        base: *mut f32,
        out1_len: usize,
        at: [usize; 4],
    ) -> (Result<(), CallError>, bool, [usize; 4]) {
        let [a, b, c, d] = at;
        assert!(a.max(b).max(c) + 2 <= 16 && d + out1_len <= 16);
        let two = Shape::new(vec![2]);
        let out1_shape = Shape::new(vec![out1_len]);
        // SAFETY: every view lies inside the caller's 16 elements (checked above), which
        // outlive them; the views alias on purpose, and nothing reads or writes through them
        // (only their addresses are compared).
        let (inputs, outputs) = unsafe {
            (
                [
                    ArrayView::new(&two, std::slice::from_raw_parts(base.add(a), 2)).expect("view"),
                    ArrayView::new(&two, std::slice::from_raw_parts(base.add(b), 2)).expect("view"),
                ],
                [
                    ArrayViewMut::new(&two, std::slice::from_raw_parts_mut(base.add(c), 2)).expect("view"),
                    ArrayViewMut::new(&out1_shape, std::slice::from_raw_parts_mut(base.add(d), out1_len))
                        .expect("view"),
                ],
            )
        };
        let general = validate_parts(
            || signature.inputs.iter().map(|(n, t)| (n.as_str(), t)),
            || signature.outputs.iter().map(|(n, t)| (n.as_str(), t)),
            &inputs,
            &outputs,
        );
        if let Err(e) = &general {
            assert_eq!(signature.validate(&inputs, &outputs).as_ref(), Err(e));
        }
        let mut addresses = [0usize; 4];
        let fast = signature.accepts(&inputs, &outputs, &mut addresses);
        (general, fast, addresses)
    }

    /// The fast path refuses exactly the calls whose outputs overlap an input or another output
    /// (partly, wholly, or touching without overlap, which is accepted), as the general check
    /// does; an empty output overlaps nothing.
    #[test]
    fn the_fast_path_refuses_overlaps_as_the_general_check_does() {
        let mut backing = vec![0.0f32; 16];
        let base = backing.as_mut_ptr();
        let mut refused = Vec::new();
        for out1_len in [2usize, 0] {
            let signature = sig(
                &[(DType::F32, &[2]), (DType::F32, &[2])],
                &[(DType::F32, &[2]), (DType::F32, &[out1_len])],
            );
            for [a, b, c, d] in [
                [0, 4, 8, 12],
                [0, 1, 8, 12],
                [0, 4, 3, 12],
                [0, 4, 8, 9],
                [0, 4, 8, 8],
                [0, 4, 2, 10],
                [0, 4, 10, 8],
                [0, 4, 8, 1],
            ] {
                let (general, fast, _) = placed_call(&signature, base, out1_len, [a, b, c, d]);
                assert_eq!(
                    fast,
                    general.is_ok(),
                    "offsets {a} {b} {c} {d}, y1 of {out1_len}: {general:?}"
                );
                if let Err(e) = general {
                    assert!(matches!(e, CallError::Alias { .. }), "{e}");
                    refused.push((out1_len, [a, b, c, d]));
                }
            }
        }
        // Refused: y0 over x1's first element, y1 on y0 (partly and wholly), y1 over x0's
        // second element; inputs overlapping each other and arrays that only touch are
        // accepted, and an empty y1 overlaps nothing.
        let expected = vec![
            (2, [0, 4, 3, 12]),
            (2, [0, 4, 8, 9]),
            (2, [0, 4, 8, 8]),
            (2, [0, 4, 8, 1]),
            (0, [0, 4, 3, 12]),
        ];
        assert_eq!(refused, expected);
        drop(backing);
    }

    /// Every placement of two inputs and two outputs of two elements (the second output also
    /// empty) among 12 element offsets: the fast path, whose hull of the outputs settles most
    /// calls with two compares, accepts exactly what the general check accepts, including an
    /// input between two outputs (inside the hull, overlapping neither).
    #[test]
    fn the_outputs_hull_decides_as_the_general_check_does() {
        let mut backing = vec![0.0f32; 16];
        let base = backing.as_mut_ptr();
        let (mut accepted, mut between) = (0, 0);
        for out1_len in [2usize, 0] {
            let signature = sig(
                &[(DType::F32, &[2]), (DType::F32, &[2])],
                &[(DType::F32, &[2]), (DType::F32, &[out1_len])],
            );
            for at in 0..12usize.pow(4) {
                let [a, b, c, d] = [at % 12, at / 12 % 12, at / 144 % 12, at / 1728];
                let (general, fast, addresses) = placed_call(&signature, base, out1_len, [a, b, c, d]);
                assert_eq!(fast, general.is_ok(), "offsets {a} {b} {c} {d}, y1 of {out1_len}");
                if fast {
                    accepted += 1;
                    let starts: Vec<usize> = [a, b, c, d]
                        .iter()
                        .map(|&k| base.wrapping_add(k) as usize)
                        .collect();
                    assert_eq!(addresses.to_vec(), starts);
                    let (lo, hi) = (c.min(d), c.max(d));
                    if out1_len == 2 && a > lo + 1 && a + 2 <= hi {
                        between += 1;
                    }
                }
            }
        }
        assert!(
            accepted > 1000 && between > 10,
            "{accepted} accepted, {between} between"
        );
        drop(backing);
    }

    /// Calls with many outputs (a 6-joint arm's position and Jacobian are 21) take the fast
    /// path up to `MAX_FAST_OUTPUTS`, the general one beyond, and both list the addresses and
    /// name a wrong argument the same way.
    #[test]
    fn many_outputs_are_checked_on_the_fast_path() {
        for n_out in [21usize, MAX_FAST_OUTPUTS, MAX_FAST_OUTPUTS + 9] {
            let outs: Vec<(DType, &[usize])> = vec![(DType::F64, &[2]); n_out];
            let signature = sig(&[(DType::F64, &[2]), (DType::F32, &[3])], &outs);
            let shape = Shape::new(vec![2]);
            let (x, k) = ([1.0f64; 2], [1.0f32; 3]);
            let k_shape = Shape::new(vec![3]);
            let mut storage = vec![0.0f64; 2 * n_out];
            let starts: Vec<usize> = storage.chunks(2).map(|c| c.as_ptr() as usize).collect();
            let inputs = [
                ArrayView::new(&shape, &x[..]).expect("view"),
                ArrayView::new(&k_shape, &k[..]).expect("view"),
            ];
            let mut outputs: Vec<ArrayViewMut<'_>> = storage
                .chunks_mut(2)
                .map(|c| ArrayViewMut::new(&shape, c).expect("view"))
                .collect();
            let mut addresses = vec![0usize; 2 + n_out];
            assert_eq!(
                signature.accepts(&inputs, &outputs, &mut addresses),
                n_out <= MAX_FAST_OUTPUTS,
                "{n_out} outputs"
            );
            signature
                .validate_into(&inputs, &outputs, &mut addresses)
                .expect("valid");
            assert_eq!(addresses[..2], [x.as_ptr() as usize, k.as_ptr() as usize]);
            assert_eq!(addresses[2..], starts[..]);
            assert!(signature.validate(&inputs, &outputs).is_ok());
            // A wrong shape late in the list is named.
            let last = n_out - 1;
            let mut wrong = [0.0f64; 3];
            let wrong_shape = Shape::new(vec![3]);
            outputs[last] = ArrayViewMut::new(&wrong_shape, &mut wrong[..]).expect("view");
            let err = signature.validate(&inputs, &outputs).expect_err("wrong shape");
            assert!(err.to_string().contains(&format!("y{last}")), "{err}");
        }
    }

    /// `validate_into` lists every argument's address in call order, on the fast path and on
    /// the general one (a rank above the inline limit), and asks for room for all of them.
    #[test]
    fn validate_into_lists_the_addresses() {
        for dims in [vec![2usize, 3], vec![1, 1, 1, 2, 3]] {
            let signature = sig(&[(DType::F32, &dims), (DType::F64, &[2])], &[(DType::F32, &dims)]);
            let shape = Shape::new(dims.clone());
            let (x, y) = ([1.0f32; 6], [2.0f64; 2]);
            let mut out = [0.0f32; 6];
            let y_shape = Shape::new(vec![2]);
            let inputs = [
                ArrayView::new(&shape, &x[..]).expect("view"),
                ArrayView::new(&y_shape, &y[..]).expect("view"),
            ];
            let out_address = out.as_ptr() as usize;
            let outputs = [ArrayViewMut::new(&shape, &mut out[..]).expect("view")];
            let mut addresses = [0usize; 3];
            signature
                .validate_into(&inputs, &outputs, &mut addresses)
                .expect("valid");
            assert_eq!(
                addresses,
                [x.as_ptr() as usize, y.as_ptr() as usize, out_address],
                "{dims:?}"
            );
            let mut short = [0usize; 2];
            assert!(matches!(
                signature.validate_into(&inputs, &outputs, &mut short),
                Err(CallError::Arity {
                    what: "argument addresses",
                    expected: 3,
                    found: 2
                })
            ));
        }
    }
}

#[cfg(test)]
mod run_addresses_tests {
    use super::*;
    use crate::{InterpBackend, LowerConfig, lower};
    use rfx_ir::mir;

    /// `y = -x` (f64) and `m = -n` (i32): two dtypes, two kernels.
    const MIR: &str = "\
mir m {
  buf0: f64[3] = input x
  buf1: i32[2] = input n
  buf2: f64[3] = output y
  buf3: i32[2] = output m
  kernel k0 [3] {
    %0 = load buf0 [1] : f64
    %1 = neg %0 : f64
    store buf2 = %1
  }
  kernel k1 [2] {
    %0 = load buf1 [1] : i32
    %1 = neg %0 : i32
    store buf3 = %1
  }
}
";

    fn compiled() -> Arc<dyn Compiled> {
        let program = mir::parse(MIR).expect("parses");
        let (lir, _) = lower(&program, &LowerConfig::default()).expect("lowers");
        InterpBackend
            .compile(&lir, &CompileOptions::default())
            .expect("compiles")
    }

    /// The default implementation (views over the addresses, then `run`) computes what `run`
    /// does, and refuses a wrong number of addresses before reading any.
    #[test]
    fn the_default_runs_on_views_of_the_addresses() {
        let compiled = compiled();
        let (x, n) = ([0.25f64, -1.5, 3.0], [7i32, -9]);
        let (mut y, mut m) = ([0.0f64; 3], [0i32; 2]);
        let addresses = [
            x.as_ptr() as usize,
            n.as_ptr() as usize,
            y.as_mut_ptr() as usize,
            m.as_mut_ptr() as usize,
        ];
        // SAFETY: one address per argument in call order, each of an array of exactly the
        // declared dtype and length, the outputs distinct and written by nothing else.
        unsafe { compiled.run_addresses(&addresses, &mut Scratch::new()) }.expect("runs");
        assert_eq!(y, [-0.25, 1.5, -3.0]);
        assert_eq!(m, [-7, 9]);

        // SAFETY: the count is wrong, which the implementation checks before using any address.
        let err = unsafe { compiled.run_addresses(&addresses[..3], &mut Scratch::new()) }
            .expect_err("three addresses for four arguments");
        assert!(
            matches!(
                err,
                BackendError::Call(CallError::Arity {
                    expected: 4,
                    found: 3,
                    ..
                })
            ),
            "{err:?}"
        );
    }
}

#[cfg(test)]
mod cpu_target_tests {
    use super::CpuTarget;

    #[test]
    fn cpu_target_names_round_trip() {
        for target in CpuTarget::ALL {
            assert_eq!(CpuTarget::from_name(target.name()), Some(target));
            assert_eq!(target.to_string(), target.name());
        }
        assert_eq!(CpuTarget::default(), CpuTarget::Host);
        assert_eq!(CpuTarget::from_name("x86-64-v3"), None);
        assert_eq!(CpuTarget::from_name("AVX2"), None);
    }
}

#[cfg(test)]
mod scratch_tests {
    use super::Scratch;

    #[test]
    fn scratch_starts_on_a_cache_line_at_every_size() {
        let mut scratch = Scratch::new();
        assert_eq!(scratch.capacity_bytes(), 0);
        for bytes in [1, 8, 63, 64, 65, 1000, 4096, 1 << 16, 3] {
            let words = scratch.words(bytes);
            assert_eq!(words.len(), bytes.div_ceil(8), "{bytes} bytes");
            assert_eq!(words.as_ptr() as usize % 64, 0, "{bytes} bytes");
            words.fill(bytes as u64);
            assert!(scratch.capacity_bytes() >= bytes);
            assert_eq!(scratch.capacity_bytes() % 64, 0);
        }
        // A request that fits keeps the memory (and what it holds).
        let before = scratch.words(16).as_ptr();
        assert_eq!(scratch.words(24).as_ptr(), before);
        // The last fill (3 bytes: one word) wrote 3 over the 65,536-byte fill.
        assert_eq!(scratch.words(24)[..], [3, 1 << 16, 1 << 16]);
    }
}
