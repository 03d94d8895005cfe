//! Compiling a HIR kernel through every stage, and the compiled result.

use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rfx_ir::hir::Kernel;
use rfx_ir::lir::LirProgram;
use rfx_ir::mir::MirProgram;
use rfx_ir::{Array, ArrayView, ArrayViewMut, Scalar, TensorType};
use rfx_lower::{CallArgs, Compiled, LowerReport, Registry, Scratch};
use rfx_opt::OptReport;

use crate::config::CompileConfig;
use crate::error::RuntimeError;

/// A stable 64-bit hash of a kernel's HIR text (FNV-1a): two kernels with the same fingerprint
/// print the same, so they compute the same thing. Prints as 16 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub u64);

impl Fingerprint {
    /// The fingerprint of `kernel`'s printed HIR.
    pub fn of(kernel: &Kernel) -> Fingerprint {
        Fingerprint::of_text(&kernel.to_string())
    }

    /// The FNV-1a hash of `text`.
    pub fn of_text(text: &str) -> Fingerprint {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in text.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        Fingerprint(hash)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A kernel compiled by one backend, with every intermediate stage kept for inspection.
///
/// Cheap to share (`Arc<Executable>`); [`Executable::call`] and [`Executable::run`] may be
/// called from any number of threads at once.
pub struct Executable {
    hir: Kernel,
    fingerprint: Fingerprint,
    mir: MirProgram,
    lir: LirProgram,
    opt_report: OptReport,
    lower_report: LowerReport,
    compiled: Arc<dyn Compiled>,
    inputs: Vec<(String, TensorType)>,
    outputs: Vec<(String, TensorType)>,
    compile_time: Duration,
    /// The backend options it was compiled with (the CLIF dump shows the code they give).
    compile_options: rfx_lower::CompileOptions,
}

impl fmt::Debug for Executable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executable")
            .field("kernel", &self.hir.name())
            .field("fingerprint", &self.fingerprint)
            .field("backend", &self.compiled.backend())
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// Temporaries of easy calls on this thread; grows to the largest program run here.
    static CALL_SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

impl Executable {
    /// The HIR kernel it was compiled from.
    pub fn hir(&self) -> &Kernel {
        &self.hir
    }

    /// The fingerprint of [`Executable::hir`].
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// The optimised, fused program.
    pub fn mir(&self) -> &MirProgram {
        &self.mir
    }

    /// The lowered program the backend compiled.
    pub fn lir(&self) -> &LirProgram {
        &self.lir
    }

    /// What the optimiser did.
    pub fn opt_report(&self) -> &OptReport {
        &self.opt_report
    }

    /// What lowering did.
    pub fn lower_report(&self) -> &LowerReport {
        &self.lower_report
    }

    /// The backend's compiled object.
    pub fn compiled(&self) -> &Arc<dyn Compiled> {
        &self.compiled
    }

    /// The backend's name.
    pub fn backend(&self) -> &'static str {
        self.compiled.backend()
    }

    /// The inputs, in call order.
    pub fn inputs(&self) -> &[(String, TensorType)] {
        &self.inputs
    }

    /// The outputs, in result order.
    pub fn outputs(&self) -> &[(String, TensorType)] {
        &self.outputs
    }

    /// How long optimising, lowering and compiling took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Runs on `inputs` (in [`Executable::inputs`] order) into caller-provided `outputs`, using
    /// `scratch` for temporaries. Arity, dtypes, shapes and aliasing are checked before
    /// anything runs. With a grown `scratch` this allocates nothing on the CPU backend.
    pub fn run(
        &self,
        inputs: &[ArrayView<'_>],
        outputs: &mut [ArrayViewMut<'_>],
        scratch: &mut Scratch,
    ) -> Result<(), RuntimeError> {
        self.compiled.run(inputs, outputs, scratch)?;
        Ok(())
    }

    /// Zero-filled arguments for [`Executable::run_args`], with this kernel's dtypes and shapes.
    pub fn args(&self) -> CallArgs {
        CallArgs::new(self.compiled.as_ref())
    }

    /// The real-time call: runs on `args` (made by [`Executable::args`]), whose inputs the caller
    /// writes in place between calls. On the CPU backend the call checks nothing (the arguments
    /// were checked when they were made) and allocates nothing once `scratch` has grown; other
    /// backends, and arguments made for another kernel, take [`Executable::run`]'s checks.
    pub fn run_args(&self, args: &mut CallArgs, scratch: &mut Scratch) -> Result<(), RuntimeError> {
        self.compiled.run_args(args, scratch)?;
        Ok(())
    }

    /// The easy call: runs on `inputs` and returns freshly allocated outputs
    /// ([`RuntimeError::OutputTooLarge`] when one cannot be allocated).
    pub fn call(&self, inputs: &[ArrayView<'_>]) -> Result<Vec<Array>, RuntimeError> {
        let mut results: Vec<Array> = Vec::with_capacity(self.outputs.len());
        for (name, ty) in &self.outputs {
            results.push(zeros(name, ty)?);
        }
        let mut views: Vec<ArrayViewMut<'_>> = results.iter_mut().map(Array::view_mut).collect();
        CALL_SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut scratch) => self.run(inputs, &mut views, &mut scratch),
            // A kernel run re-entrantly from inside another run on this thread (a backend
            // calling back into rfx) gets its own scratch.
            Err(_) => self.run(inputs, &mut views, &mut Scratch::new()),
        })?;
        drop(views);
        Ok(results)
    }
}

/// Allocations of at least this many bytes are tried first, so that one the allocator refuses is
/// an error rather than an abort; smaller ones are made directly (the easy call on a small
/// kernel costs what it did).
const CHECKED_ALLOCATION_BYTES: usize = 1 << 20;

/// A zero-filled array of `ty` for the output `name`, or [`RuntimeError::OutputTooLarge`] when
/// the allocator cannot provide its bytes.
fn zeros(name: &str, ty: &TensorType) -> Result<Array, RuntimeError> {
    let bytes = ty.shape.numel().saturating_mul(ty.dtype.size_bytes());
    if bytes >= CHECKED_ALLOCATION_BYTES {
        let mut probe: Vec<u8> = Vec::new();
        probe
            .try_reserve_exact(bytes)
            .map_err(|_| RuntimeError::OutputTooLarge {
                name: name.to_string(),
                bytes,
            })?;
    }
    Ok(Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
}

/// Optimises, lowers and compiles `kernel` with `config`, taking the backend from `registry`.
///
/// When the environment variable `RFX_DUMP` names a directory (unset or empty: no dump), every
/// stage of the kernel (HIR, the optimisation report, MIR, LIR and, on the CPU backend,
/// Cranelift IR) is written there as `<kernel>-<fingerprint>.<stage>.txt`, like XLA's dump flag. A failure to write the
/// dump is reported on stderr and does not fail the compile.
pub fn compile(
    kernel: &Kernel,
    config: &CompileConfig,
    registry: &Registry,
) -> Result<Executable, RuntimeError> {
    let start = Instant::now();
    let backend = registry.get(&config.backend)?;
    backend.check_available()?;
    let (mir, opt_report) = rfx_opt::optimize(kernel, &config.opt)?;
    let (lir, lower_report) = rfx_lower::lower(&mir, &config.lower)?;
    let compiled = backend.compile(&lir, &config.compile)?;
    let compile_time = start.elapsed();
    let fingerprint = Fingerprint::of(kernel);
    let inputs = lir
        .inputs()
        .map(|(_, name, ty)| (name.to_string(), ty.clone()))
        .collect();
    let outputs = lir
        .outputs()
        .map(|(_, name, ty)| (name.to_string(), ty.clone()))
        .collect();
    let exe = Executable {
        hir: kernel.clone(),
        fingerprint,
        mir,
        lir,
        opt_report,
        lower_report,
        compiled,
        inputs,
        outputs,
        compile_time,
        compile_options: config.compile.clone(),
    };
    if let Some(dir) = std::env::var_os("RFX_DUMP").filter(|dir| !dir.is_empty())
        && let Err(error) = write_dump(Path::new(&dir), &exe)
    {
        eprintln!(
            "rfx: RFX_DUMP: could not write the dump of kernel `{}` to {}: {error}",
            kernel.name(),
            Path::new(&dir).display()
        );
    }
    Ok(exe)
}

/// The text of every stage of `exe`: `(stage, text)` for `hir`, `opt` (the optimisation
/// report), `mir`, `lir` and, on the CPU backend, `clif`.
pub fn stage_dumps(exe: &Executable) -> Vec<(&'static str, String)> {
    let mut stages = vec![
        ("hir", exe.hir.to_string()),
        ("opt", exe.opt_report.to_string()),
        ("mir", exe.mir.to_string()),
        ("lir", exe.lir.to_string()),
    ];
    if exe.backend() == "cpu" {
        match rfx_codegen_cpu::dump_with(&exe.lir, &exe.compile_options) {
            Ok(kernels) => {
                let text = kernels
                    .iter()
                    .map(|(name, clif, _)| format!("; kernel {name}\n{clif}\n"))
                    .collect::<String>();
                stages.push(("clif", text));
            }
            Err(error) => stages.push(("clif", format!("; could not dump: {error}\n"))),
        }
    }
    stages
}

fn dump_path(dir: &Path, exe: &Executable, stage: &str) -> PathBuf {
    dir.join(format!("{}-{}.{stage}.txt", exe.hir.name(), exe.fingerprint))
}

fn write_dump(dir: &Path, exe: &Executable) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (stage, text) in stage_dumps(exe) {
        std::fs::write(dump_path(dir, exe, stage), text)?;
    }
    Ok(())
}
