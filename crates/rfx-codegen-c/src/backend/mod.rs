//! The `"c"` backend: the exported C compiled by the system C compiler into a shared object,
//! loaded, and called behind [`rfx_lower::Backend`] (CasADi's `jit` does the same with its
//! generated C).
//!
//! Each compile writes one translation unit to a temporary folder: the programs' exported
//! sources ([`c_source`](crate::c_source), as functions `rfx_jit_K`) and, per program, a packed
//! entry `int rfx_jit_K_packed(void *const *args)` that unpacks the argument table into the
//! exported ABI, so that Rust calls one fixed signature. The unit is compiled with `$CC` (else
//! `cc`) and [`JIT_FLAGS`], loaded, and the folder removed; the shared object stays loaded for
//! as long as any [`Compiled`] made from it lives. [`CBackend::compile_many`] puts many programs
//! in one unit: the compiler's start-up (50 to 100 ms) is paid once per unit.

mod toolchain;
mod unit;

use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

use rfx_ir::lir::LirProgram;
use rfx_ir::{ArrayView, ArrayViewMut, BinaryOp, DType, UnaryOp};
use rfx_lower::{
    Backend, BackendError, CallArgs, CallError, CompileOptions, Compiled, LowerError, Scratch, Signature,
    Transcendental, Unsupported,
};

pub use toolchain::JIT_FLAGS;
use toolchain::{Compiler, build_and_load};
use unit::{UnitPart, entry_name, part, unit_source};

use crate::{ExportError, work_align, work_layout};

/// The backend's registry name.
pub(crate) const BACKEND: &str = "c";

/// The documented accuracy of every transcendental the C export emits: 4 ULP of the `f64`
/// oracle in f32 and f64 (the CPU backend's bound, whose approximations the export ports).
const ULP_BOUND: u64 = 4;

/// Calls of fewer arguments than this keep their tables (the arguments, then `work`) in short
/// arrays on the stack.
const SHORT_ARGS: usize = 16;

/// Calls of fewer arguments than this keep their tables on the stack; others in vectors.
const STACK_ARGS: usize = 64;

/// The packed entry: the argument table (inputs' and outputs' first elements in call order,
/// then `work`) to the exported function's return code.
type PackedFn = unsafe extern "C" fn(*const *mut c_void) -> i32;

/// The exported C compiled by the system C compiler (`$CC`, else `cc`) and loaded.
pub struct CBackend {
    compiler: Compiler,
    /// [`Backend::check_available`]'s answer, found once.
    available: OnceLock<Result<(), String>>,
}

impl Default for CBackend {
    /// The compiler `$CC` names (read now), else `cc`.
    fn default() -> CBackend {
        CBackend::with_compiler_of(Compiler::from_env())
    }
}

impl std::fmt::Debug for CBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CBackend")
            .field("compiler", &self.compiler.describe())
            .finish_non_exhaustive()
    }
}

impl CBackend {
    /// The backend with the C compiler `command` (a program and the words after it, as `$CC`
    /// is read: `"clang"`, `"ccache gcc"`).
    pub fn with_compiler(command: &str) -> CBackend {
        CBackend::with_compiler_of(Compiler::parse(command))
    }

    fn with_compiler_of(compiler: Compiler) -> CBackend {
        CBackend {
            compiler,
            available: OnceLock::new(),
        }
    }

    /// The compiler command this backend runs.
    pub fn compiler(&self) -> String {
        self.compiler.describe()
    }

    /// Compiles `programs` into one shared object (one compiler run), returning one result
    /// per program in order. A program the export refuses gets its
    /// [`BackendError::Unsupported`] and is left out of the unit; the others share it. Should
    /// the unit fail to compile, each program is compiled alone, so that an error names the
    /// program it comes from. `options` changes nothing (see [`Backend::compile`]).
    pub fn compile_many(
        &self,
        programs: &[LirProgram],
        options: &CompileOptions,
    ) -> Vec<Result<Arc<dyn Compiled>, BackendError>> {
        let _ = options;
        if let Err(reason) = self.available() {
            return programs
                .iter()
                .map(|_| Err(unavailable(reason.clone())))
                .collect();
        }
        let parts: Vec<Result<UnitPart, BackendError>> = programs
            .iter()
            .enumerate()
            .map(|(index, program)| {
                rfx_ir::lir::verify(program).map_err(|e| BackendError::Lower(LowerError::InvalidLir(e)))?;
                part(program, index).map_err(|e| export_error(program, e))
            })
            .collect();
        let good: Vec<&UnitPart> = parts.iter().filter_map(|part| part.as_ref().ok()).collect();
        // The unit's library, or why it failed (given to its one program).
        let mut built = None;
        let mut failure = None;
        if !good.is_empty() {
            match self.build(&good) {
                Ok(library) => built = Some(library),
                Err(_) if good.len() > 1 => {
                    return programs
                        .iter()
                        .zip(parts)
                        .enumerate()
                        .map(|(index, (program, part))| {
                            let library = self.build(&[&part?])?;
                            load(library, program, index)
                        })
                        .collect();
                }
                Err(e) => failure = Some(e),
            }
        }
        programs
            .iter()
            .zip(parts)
            .enumerate()
            .map(|(index, (program, part))| {
                part?;
                if let Some(e) = failure.take() {
                    return Err(e);
                }
                let library = built.clone().ok_or_else(|| BackendError::Compile {
                    backend: BACKEND,
                    message: "no shared object was built".to_string(),
                })?;
                load(library, program, index)
            })
            .collect()
    }

    fn available(&self) -> Result<(), String> {
        self.available.get_or_init(|| self.compiler.probe()).clone()
    }

    /// Compiles one unit of `parts` and loads it.
    fn build(&self, parts: &[&UnitPart]) -> Result<Arc<libloading::Library>, BackendError> {
        let source = unit_source(parts);
        let mut files: Vec<(&str, &str)> = parts
            .iter()
            .map(|p| (p.header_file.as_str(), p.header.as_str()))
            .collect();
        files.push(("rfx_jit.c", &source));
        build_and_load(&self.compiler, &files)
    }
}

fn unavailable(reason: String) -> BackendError {
    BackendError::Unavailable {
        backend: BACKEND,
        reason,
    }
}

/// An export error as the backend reports it: an op the export refuses is
/// [`BackendError::Unsupported`] naming it.
fn export_error(program: &LirProgram, error: ExportError) -> BackendError {
    match error {
        ExportError::Unsupported(op) => BackendError::Unsupported {
            backend: BACKEND,
            what: unsupported_op(program, &op),
        },
        other => BackendError::Compile {
            backend: BACKEND,
            message: other.to_string(),
        },
    }
}

/// The op the export named (`"sin"`, `"fmod (float)"`) as an [`Unsupported`] with its static
/// name, and its dtype where the program shows it.
fn unsupported_op(program: &LirProgram, named: &str) -> Unsupported {
    let word = named.split_whitespace().next().unwrap_or(named);
    let unary = UnaryOp::ALL.iter().find(|op| op.name() == word);
    let binary = BinaryOp::ALL.iter().find(|op| op.name() == word);
    let name = unary
        .map(|op| op.name())
        .or_else(|| binary.map(|op| op.name()))
        .unwrap_or("an op the C export does not emit");
    let dtype = program.kernels().iter().find_map(|kernel| {
        kernel
            .preamble
            .iter()
            .chain(&kernel.body)
            .find_map(|inst| match inst {
                rfx_ir::lir::Inst::Unary { op, dst, .. } if unary == Some(op) => kernel.slot_dtype(*dst),
                rfx_ir::lir::Inst::Binary { op, dst, .. } if binary == Some(op) => kernel.slot_dtype(*dst),
                _ => None,
            })
    });
    match dtype {
        Some(dtype) => Unsupported::OpDType(name, dtype),
        None => Unsupported::Op(name),
    }
}

/// The program's compiled function, found in `library` by its entry's name.
fn load(
    library: Arc<libloading::Library>,
    program: &LirProgram,
    index: usize,
) -> Result<Arc<dyn Compiled>, BackendError> {
    let symbol = format!("{}\0", entry_name(index));
    // SAFETY: the unit defines the entry with exactly `PackedFn`'s signature (`unit::part`).
    let entry: PackedFn = unsafe { library.get::<PackedFn>(symbol.as_bytes()) }
        .map(|f| *f)
        .map_err(|e| BackendError::Compile {
            backend: BACKEND,
            message: format!("the shared object has no `{}`: {e}", entry_name(index)),
        })?;
    let layout = work_layout(program);
    Ok(Arc::new(CCompiled {
        program: program.clone(),
        signature: Signature::of(program),
        entry,
        work_bytes: layout.bytes,
        work_align: work_align(program),
        id: rfx_lower::new_compiled_id(),
        _library: library,
    }))
}

impl Backend for CBackend {
    fn name(&self) -> &'static str {
        BACKEND
    }

    /// Compiles and loads one tiny shared object with the compiler (once; the answer is kept).
    fn check_available(&self) -> Result<(), BackendError> {
        self.available().map_err(unavailable)
    }

    /// [`CBackend::compile_many`] of one program. `options` changes nothing: the export is
    /// exact-mode code (fast math allows approximations, it does not require them).
    fn compile(
        &self,
        program: &LirProgram,
        options: &CompileOptions,
    ) -> Result<Arc<dyn Compiled>, BackendError> {
        let mut results = self.compile_many(std::slice::from_ref(program), options);
        results.pop().unwrap_or_else(|| {
            Err(BackendError::Compile {
                backend: BACKEND,
                message: "no result for the program".to_string(),
            })
        })
    }

    /// 4 ULP for every transcendental op on `f32` and `f64` (those the export emits; programs
    /// with the others do not compile).
    fn ulp_bound(&self, op: Transcendental, dtype: DType, args: &[f64]) -> Option<u64> {
        (dtype.is_float() && args.len() == op.arity()).then_some(ULP_BOUND)
    }
}

/// A program compiled by the C compiler: its packed entry in a loaded shared object.
pub struct CCompiled {
    program: LirProgram,
    signature: Signature,
    entry: PackedFn,
    /// The header's `NAME_WORK_BYTES` and `NAME_WORK_ALIGN`.
    work_bytes: usize,
    work_align: usize,
    /// This program's [`Compiled::args_id`].
    id: u64,
    /// Keeps the code `entry` points into mapped.
    _library: Arc<libloading::Library>,
}

impl std::fmt::Debug for CCompiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CCompiled")
            .field("program", &self.program.name())
            .field("work_bytes", &self.work_bytes)
            .finish_non_exhaustive()
    }
}

// SAFETY: the exported function is re-entrant and thread-safe (no mutable globals: its state
// is on its stack and in the caller's `work`); the library is only read after loading.
unsafe impl Send for CCompiled {}
// SAFETY: as above.
unsafe impl Sync for CCompiled {}

impl CCompiled {
    /// Bytes of temporaries a call needs in its `Scratch` (the header's `NAME_WORK_BYTES`).
    pub fn work_bytes(&self) -> usize {
        self.work_bytes
    }

    /// Calls the entry on `table` (every argument's first element, in call order, with the last
    /// slot left for `work`), which it completes with `scratch`'s work area.
    ///
    /// # Safety
    /// Every argument slot of `table` holds the address of an array of exactly its argument's
    /// dtype and element count, readable (inputs) or writable (outputs) for the call, no output
    /// overlapping another argument, and nothing else writing an input during the call.
    unsafe fn call(&self, table: &mut [*mut c_void], scratch: &mut Scratch) -> Result<(), BackendError> {
        let work = if self.work_bytes == 0 {
            std::ptr::null_mut()
        } else {
            // Extra bytes to align the area when the header asks for more than 8.
            let slack = self.work_align.saturating_sub(8);
            let words = scratch.words(self.work_bytes + slack);
            let base = words.as_mut_ptr().cast::<u8>();
            let offset = base.align_offset(self.work_align);
            base.wrapping_add(offset).cast::<c_void>()
        };
        if let Some(last) = table.last_mut() {
            *last = work;
        }
        // SAFETY: the caller guarantees the arguments; `work` holds `work_bytes` bytes aligned
        // to `work_align` (or is null when none are needed), borrowed mutably from `scratch`.
        let code = unsafe { (self.entry)(table.as_ptr()) };
        match code {
            0 => Ok(()),
            1 => Err(runtime_error(
                "the generated function found a null pointer (return code 1)",
            )),
            2 => Err(runtime_error(
                "the generated function found `work` misaligned (return code 2)",
            )),
            other => Err(runtime_error(&format!("the generated function returned {other}"))),
        }
    }
}

fn runtime_error(message: &str) -> BackendError {
    BackendError::Runtime {
        backend: BACKEND,
        message: message.to_string(),
    }
}

impl Compiled for CCompiled {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn program(&self) -> &LirProgram {
        &self.program
    }

    /// Checks the call ([`Signature::validate_into`]: counts, dtypes, shapes, no output
    /// overlapping another argument, as the C ABI requires), then calls the packed entry on
    /// the arguments' addresses and `scratch`'s work area. Allocates nothing for calls of fewer
    /// than 64 arguments once `scratch` has grown.
    fn run(
        &self,
        inputs: &[ArrayView<'_>],
        outputs: &mut [ArrayViewMut<'_>],
        scratch: &mut Scratch,
    ) -> Result<(), BackendError> {
        let count = inputs.len() + outputs.len();
        // A short table for the usual few arguments, so that a call clears no more than it uses.
        if count < SHORT_ARGS {
            self.checked(inputs, outputs, &mut [0usize; SHORT_ARGS][..count], scratch)
        } else if count < STACK_ARGS {
            self.checked(inputs, outputs, &mut [0usize; STACK_ARGS][..count], scratch)
        } else {
            self.checked(inputs, outputs, &mut vec![0usize; count], scratch)
        }
    }

    fn args_id(&self) -> Option<u64> {
        Some(self.id)
    }

    /// The real-time path: arguments made for this program ([`CallArgs::new`]) are run on their
    /// recorded addresses without a check; any others are checked like [`Compiled::run`].
    fn run_args(&self, args: &mut CallArgs, scratch: &mut Scratch) -> Result<(), BackendError> {
        if args.id() != self.id {
            let (inputs, mut outputs) = args.views();
            return self.run(&inputs, &mut outputs, scratch);
        }
        // SAFETY: `args` was made for this program (its id is ours, and ids are never reused):
        // one array per input and output with exactly the declared dtype and shape, owned by
        // `args`, borrowed mutably for this call, distinct, listed in call order.
        unsafe { self.call_on(args.addresses(), scratch) }
    }

    /// Calls the entry on `addresses` as they are, after checking only their count.
    unsafe fn run_addresses(&self, addresses: &[usize], scratch: &mut Scratch) -> Result<(), BackendError> {
        let expected = self.signature.inputs().len() + self.signature.outputs().len();
        if addresses.len() != expected {
            return Err(CallError::Arity {
                what: "argument addresses",
                expected,
                found: addresses.len(),
            }
            .into());
        }
        // SAFETY: guaranteed by the caller; the count is checked.
        unsafe { self.call_on(addresses, scratch) }
    }
}

impl CCompiled {
    /// Validates the call, writing the arguments' addresses into `addresses` (one per
    /// argument), and calls the entry on them.
    fn checked(
        &self,
        inputs: &[ArrayView<'_>],
        outputs: &[ArrayViewMut<'_>],
        addresses: &mut [usize],
        scratch: &mut Scratch,
    ) -> Result<(), BackendError> {
        self.signature.validate_into(inputs, outputs, addresses)?;
        // SAFETY: `validate_into` accepted the call and wrote one address per argument, of the
        // declared dtype and length, no output overlapping another argument; the views are
        // borrowed (inputs shared, outputs exclusively) for the whole call.
        unsafe { self.call_on(addresses, scratch) }
    }

    /// Builds the entry's table (`addresses`, then `work`) and calls it.
    ///
    /// # Safety
    /// As [`Compiled::run_addresses`] requires, with one address per input and output.
    unsafe fn call_on(&self, addresses: &[usize], scratch: &mut Scratch) -> Result<(), BackendError> {
        let n = addresses.len();
        let fill = |slots: &mut [*mut c_void]| {
            for (slot, &address) in slots.iter_mut().zip(addresses) {
                *slot = address as *mut c_void;
            }
        };
        // SAFETY (each branch): the table holds the caller's addresses, then room for `work`.
        if n < SHORT_ARGS {
            let mut slots = [std::ptr::null_mut(); SHORT_ARGS];
            fill(&mut slots[..n]);
            unsafe { self.call(&mut slots[..=n], scratch) }
        } else if n < STACK_ARGS {
            let mut slots = [std::ptr::null_mut(); STACK_ARGS];
            fill(&mut slots[..n]);
            unsafe { self.call(&mut slots[..=n], scratch) }
        } else {
            let mut slots = vec![std::ptr::null_mut(); n + 1];
            fill(&mut slots[..n]);
            unsafe { self.call(&mut slots, scratch) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lowered(mir: &str) -> LirProgram {
        let program = rfx_ir::mir::parse(mir).expect("parses");
        rfx_lower::lower(&program, &rfx_lower::LowerConfig::default())
            .expect("lowers")
            .0
    }

    /// The export's op names become the ops' static names, with the dtype the program uses.
    #[test]
    fn a_refused_op_is_named_with_its_dtype() {
        let lir = lowered(
            "mir m {\n  buf0: f64[2] = input x\n  buf1: f64[2] = output y\n  kernel k0 [2] {\n    %0 = load buf0 [1] : f64\n    %1 = fmod %0, %0 : f64\n    store buf1 = %1\n  }\n}\n",
        );
        assert_eq!(
            unsupported_op(&lir, "fmod (float)"),
            Unsupported::OpDType("fmod", DType::F64)
        );
        assert_eq!(unsupported_op(&lir, "sin"), Unsupported::Op("sin"));
        assert_eq!(
            unsupported_op(&lir, "frobnicate"),
            Unsupported::Op("an op the C export does not emit")
        );
        let err = export_error(&lir, ExportError::Unsupported("fmod (float)".into()));
        assert_eq!(err.to_string(), "backend `c` does not support op `fmod` on f64");
    }
}
