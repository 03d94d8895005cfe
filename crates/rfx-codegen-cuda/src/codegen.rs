//! LIR → CUDA C.
//!
//! Every LIR kernel becomes one `extern "C" __global__` function whose threads walk the
//! kernel's *units* in a grid-stride loop. A unit is a point of the loop nest for elementwise
//! kernels, a leading point for kernels with reduced dims, and a row of the scanned dim for
//! kernels with scans (one thread folds the row in order: the interpreter's bits). A reduction
//! without the schedule's `gpu_tree` (fewer than 1024 points per unit; lowering decides) is
//! done by one thread in the LIR order (see `emit_kernel`), so results are the interpreter's
//! bits; one with it runs as a block tree (see `emit_tree_body`) in an order fixed by the
//! shape, within the bounds in the crate docs. Slots become local variables declared at the
//! top of the function; the preamble runs once per thread before the loop. Addresses are
//! `sum(idx[d] * stride[d])` with the LIR's strides; zero strides and size-1 dims drop out of
//! the expression.
//!
//! Memory: `bool` is `unsigned char` 0/1 in memory and `bool` in registers; `i32` is `int`;
//! `f32`/`f64` are `float`/`double`. Inputs and outputs are kernel parameters
//! (`__restrict__`: rfx-lower's validation guarantees outputs alias nothing); temporaries are
//! typed pointers at constant byte offsets of one `arena` parameter.
//!
//! Exactness: without `fast_math` the source calls CUDA's accurate math functions (`sinf`,
//! `expf`, ...), IEEE division and square root, and is compiled with `--fmad=false`, so every
//! exactly-rounded op gives the interpreter's bits (see `nvrtc.rs` for the flags and `lib.rs`
//! for the ULP bounds of the transcendentals). With `fast_math` the f32 transcendentals and
//! division use the `__expf`/`__sinf`/`__fdividef` intrinsics.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use rfx_ir::lir::{Inst, LirKernel, LirProgram, ScanOrder, SlotId, Storage};
use rfx_ir::repeat::Step;
use rfx_ir::{BinaryOp, BufId, CmpOp, DType, ReduceOp, Scalar, UnaryOp};
use rfx_lower::{BackendError, CompileOptions, LowerError};

mod one_launch;

use one_launch::emit_one_launch;

/// What the host needs to launch one generated kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelLaunch {
    /// The `extern "C"` function name.
    pub(crate) entry: String,
    /// The input/output buffers passed as parameters, in parameter order.
    pub(crate) params: Vec<BufId>,
    /// Whether the arena pointer follows them.
    pub(crate) uses_arena: bool,
    /// Units (threads' work items) of the grid-stride loop; for a tree reduction, the
    /// leading points (each reduced by `tree.chunks` blocks).
    pub(crate) units: usize,
    /// Set when the kernel's reductions run as block trees (see [`TreeLaunch`]).
    pub(crate) tree: Option<TreeLaunch>,
    /// Set for a whole program in one function ([`ONE_LAUNCH_MAX_UNITS`]): one block, whose
    /// threads run the kernels in order with a barrier between them; `units` is then the
    /// most units of any of its kernels.
    pub(crate) single_block: bool,
}

/// Programs of two or more kernels, none a block tree and none of more than this many units,
/// run as one function launched as one block: a launch costs microseconds, while a kernel of
/// at most 1024 units takes a 256-thread block at most four rounds of its loop.
pub(crate) const ONE_LAUNCH_MAX_UNITS: usize = 1024;
/// ... provided no kernel's extra rounds (beyond the one its own launch would take) add more
/// than this many points to a thread's sequence: 1024 units of a 1000-point reduction would
/// run four times as long in one block as in their own grid.
const ONE_LAUNCH_MAX_EXTRA_POINTS: usize = 32;
/// Threads of the block of a one-launch program (at most; fewer when every kernel has fewer
/// units). Without `__launch_bounds__` a 256-thread block has every register it may ask for.
pub(crate) const ONE_LAUNCH_BLOCK: usize = 256;

/// A kernel's function parameters and how its loop nest splits into units.
struct KernelPlan {
    /// The input and output buffers it uses, in parameter order.
    params: Vec<BufId>,
    /// Each parameter's declaration and what it is, the arena and tree scratch included.
    param_text: Vec<(String, String)>,
    /// Temporaries: buffer, memory type, byte offset in the arena.
    arena_bufs: Vec<(BufId, &'static str, usize)>,
    literal_bufs: Vec<(BufId, &'static str)>,
    uses_arena: bool,
    /// Dims before this index are the units', the rest are reduced or scanned per unit.
    split: usize,
    units: usize,
    reduced_points: usize,
    /// Whether its reductions run as block trees.
    tree: bool,
}

/// Threads per block of a tree reduction (a compile-time constant of the generated code).
pub(crate) const TREE_BLOCK: usize = 256;
/// Blocks a tree reduction aims for in all (units × chunks), enough to fill every SM of
/// current GPUs several times over.
const TREE_TARGET_BLOCKS: usize = 2048;
/// Elements a thread should fold at least before a reduction is split over more blocks.
const TREE_POINTS_PER_THREAD: usize = 16;

/// How a tree-reduction kernel is launched: `units × chunks` blocks of [`TREE_BLOCK`]
/// threads, and a zeroed scratch buffer of `scratch_bytes` for the block partials and the
/// per-unit arrival counters (the last block of a unit resets its counter, so the buffer is
/// zeroed once, at allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TreeLaunch {
    pub(crate) chunks: usize,
    pub(crate) scratch_bytes: usize,
}

/// The number of blocks each leading point's reduction of `points` elements is split over.
/// A function of the shape alone, so the summation order (and the bits) are the same on
/// every GPU.
fn tree_chunks(units: usize, points: usize) -> usize {
    let by_work = points.div_ceil(TREE_BLOCK * TREE_POINTS_PER_THREAD);
    let by_grid = (TREE_TARGET_BLOCKS / units.max(1)).max(1);
    by_work.min(by_grid).clamp(1, 1024)
}

/// The generated module: its source, one launch description per LIR kernel (or one for a
/// program in one launch), and the steps that run them.
#[derive(Clone, Debug)]
pub(crate) struct CudaModuleSource {
    pub(crate) source: String,
    pub(crate) kernels: Vec<KernelLaunch>,
    /// What the host launches, in order: `Step::Kernel(i)` launches `kernels[i]`, a loop
    /// repeats its steps (the program's loops; one step for a program in one launch, whose
    /// loops run inside the function).
    pub(crate) steps: Vec<Step>,
}

/// Device helper functions, emitted once each (in this order) when some kernel uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Helper {
    AddI32,
    SubI32,
    MulI32,
    NegI32,
    AbsI32,
    DivI32,
    FmodI32,
    MinI32,
    MaxI32,
    SignI32,
    MinF32,
    MaxF32,
    SignF32,
    Exp2F32,
    SigmoidF32,
    SigmoidFastF32,
    F32ToI32,
    MinF64,
    MaxF64,
    SignF64,
    SigmoidF64,
    F64ToI32,
}

impl Helper {
    fn source(self) -> &'static str {
        match self {
            Helper::AddI32 => {
                "__device__ __forceinline__ int rfx_add_i32(int a, int b) { return (int)((unsigned int)a + (unsigned int)b); }"
            }
            Helper::SubI32 => {
                "__device__ __forceinline__ int rfx_sub_i32(int a, int b) { return (int)((unsigned int)a - (unsigned int)b); }"
            }
            Helper::MulI32 => {
                "__device__ __forceinline__ int rfx_mul_i32(int a, int b) { return (int)((unsigned int)a * (unsigned int)b); }"
            }
            Helper::NegI32 => {
                "__device__ __forceinline__ int rfx_neg_i32(int a) { return (int)(0u - (unsigned int)a); }"
            }
            Helper::AbsI32 => {
                "__device__ __forceinline__ int rfx_abs_i32(int a) { return a < 0 ? (int)(0u - (unsigned int)a) : a; }"
            }
            Helper::DivI32 => concat!(
                "// Floor division (NumPy `//`): x / 0 = 0, INT_MIN / -1 wraps to INT_MIN.\n",
                "__device__ __forceinline__ int rfx_div_i32(int a, int b) {\n",
                "  if (b == 0) return 0;\n",
                "  if (b == -1) return (int)(0u - (unsigned int)a);\n",
                "  int q = a / b;\n",
                "  int r = a % b;\n",
                "  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;\n",
                "}"
            ),
            Helper::FmodI32 => concat!(
                "// Truncated remainder with the dividend's sign: x fmod 0 = 0, INT_MIN fmod -1 = 0.\n",
                "__device__ __forceinline__ int rfx_fmod_i32(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }"
            ),
            Helper::MinI32 => {
                "__device__ __forceinline__ int rfx_min_i32(int a, int b) { return a < b ? a : b; }"
            }
            Helper::MaxI32 => {
                "__device__ __forceinline__ int rfx_max_i32(int a, int b) { return a > b ? a : b; }"
            }
            Helper::SignI32 => {
                "__device__ __forceinline__ int rfx_sign_i32(int a) { return (a > 0) - (a < 0); }"
            }
            Helper::MinF32 => concat!(
                "// NumPy minimum/maximum: the first operand when it wins or is NaN, else the second.\n",
                "__device__ __forceinline__ float rfx_min_f32(float a, float b) { return (a < b || a != a) ? a : b; }"
            ),
            Helper::MaxF32 => {
                "__device__ __forceinline__ float rfx_max_f32(float a, float b) { return (a > b || a != a) ? a : b; }"
            }
            Helper::SignF32 => concat!(
                "// sign(±0) = +0, sign(NaN) = NaN.\n",
                "__device__ __forceinline__ float rfx_sign_f32(float a) { return a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : (a == 0.0f ? 0.0f : a)); }"
            ),
            Helper::Exp2F32 => concat!(
                "// exp2f is `ex2.approx.f32`, whose result ptxas assumes is never NaN: NaN is returned\n",
                "// by a select on the argument, about which ptxas assumes nothing.\n",
                "__device__ __forceinline__ float rfx_exp2_f32(float x) { return x != x ? x : exp2f(x); }"
            ),
            Helper::SigmoidF32 => concat!(
                "// exp(x) / (1 + exp(x)) below 0 keeps the subnormal results 1 / (1 + exp(-x)) would flush.\n",
                "__device__ __forceinline__ float rfx_sigmoid_f32(float x) {\n",
                "  if (x < 0.0f) { float e = expf(x); return e / (1.0f + e); }\n",
                "  return 1.0f / (1.0f + expf(-x));\n",
                "}"
            ),
            Helper::SigmoidFastF32 => concat!(
                "__device__ __forceinline__ float rfx_sigmoid_fast_f32(float x) {\n",
                "  if (x < 0.0f) { float e = __expf(x); return __fdividef(e, 1.0f + e); }\n",
                "  return __fdividef(1.0f, 1.0f + __expf(-x));\n",
                "}"
            ),
            Helper::F32ToI32 => concat!(
                "// Truncates toward zero and saturates; NaN gives 0.\n",
                "__device__ __forceinline__ int rfx_f32_to_i32(float x) {\n",
                "  if (x != x) return 0;\n",
                "  if (x >= 2147483648.0f) return 2147483647;\n",
                "  if (x <= -2147483648.0f) return -2147483647 - 1;\n",
                "  return (int)x;\n",
                "}"
            ),
            Helper::MinF64 => {
                "__device__ __forceinline__ double rfx_min_f64(double a, double b) { return (a < b || a != a) ? a : b; }"
            }
            Helper::MaxF64 => {
                "__device__ __forceinline__ double rfx_max_f64(double a, double b) { return (a > b || a != a) ? a : b; }"
            }
            Helper::SignF64 => {
                "__device__ __forceinline__ double rfx_sign_f64(double a) { return a > 0.0 ? 1.0 : (a < 0.0 ? -1.0 : (a == 0.0 ? 0.0 : a)); }"
            }
            Helper::SigmoidF64 => concat!(
                "__device__ __forceinline__ double rfx_sigmoid_f64(double x) {\n",
                "  if (x < 0.0) { double e = exp(x); return e / (1.0 + e); }\n",
                "  return 1.0 / (1.0 + exp(-x));\n",
                "}"
            ),
            Helper::F64ToI32 => concat!(
                "__device__ __forceinline__ int rfx_f64_to_i32(double x) {\n",
                "  if (x != x) return 0;\n",
                "  if (x >= 2147483648.0) return 2147483647;\n",
                "  if (x <= -2147483648.0) return -2147483647 - 1;\n",
                "  return (int)x;\n",
                "}"
            ),
        }
    }
}

fn invalid(program: &LirProgram) -> Option<BackendError> {
    rfx_ir::lir::verify(program)
        .err()
        .map(|e| BackendError::Lower(LowerError::InvalidLir(e)))
}

/// The most weighted instructions (a transcendental counts 20, `pow` and `atan2` 40, any
/// other instruction 1) a program's kernels may hold together. NVRTC inlines every
/// transcendental's code and its compile time grows about quadratically with the module
/// (measured with NVRTC 12.9 on 2 cores: 400 `sin`s, weight about 8,800, 13 s; 1,500, weight
/// about 33,000, 200 s; 20,000 ops would take hours), so a larger program is refused with
/// `Unsupported::Size` instead (at this bound, about 25 s).
pub(crate) const MAX_WEIGHTED_INSTS: usize = 12_000;

/// A program's weighted instruction count ([`MAX_WEIGHTED_INSTS`]).
fn weighted_insts(program: &LirProgram) -> usize {
    program
        .kernels()
        .iter()
        .flat_map(|kernel| kernel.preamble.iter().chain(&kernel.body))
        .map(rfx_ir::lir::Inst::work)
        .sum()
}

/// Generates the CUDA C module of a verified-here program; `one_launch` lets a program of
/// small kernels become one function ([`emit_one_launch`]), its loops included.
pub(crate) fn generate(
    program: &LirProgram,
    options: &CompileOptions,
    one_launch: bool,
) -> Result<CudaModuleSource, BackendError> {
    if let Some(err) = invalid(program) {
        return Err(err);
    }
    let weight = weighted_insts(program);
    if weight > MAX_WEIGHTED_INSTS {
        return Err(BackendError::Unsupported {
            backend: "cuda",
            what: rfx_lower::Unsupported::Size {
                what: "weighted instructions of a program (transcendentals count 20, pow and atan2 40)",
                size: weight,
                limit: MAX_WEIGHTED_INSTS,
            },
        });
    }
    let steps = rfx_ir::repeat::steps(program.kernels().len(), program.loops()).map_err(|e| {
        BackendError::Compile {
            backend: "cuda",
            message: format!("the program's loops: {e}"),
        }
    })?;
    let mut helpers = BTreeSet::new();
    let mut kernels_text = String::new();
    let fused = if one_launch {
        emit_one_launch(program, options, &steps, &mut helpers, &mut kernels_text)
    } else {
        None
    };
    let (kernels, steps) = match fused {
        Some(launch) => (vec![launch], vec![Step::Kernel(0)]),
        None => {
            let mut kernels = Vec::with_capacity(program.kernels().len());
            for (index, kernel) in program.kernels().iter().enumerate() {
                let mut emitter = Emitter {
                    program,
                    kernel,
                    fast_math: options.fast_math,
                    helpers: &mut helpers,
                    out: String::new(),
                };
                let launch = emitter.emit_kernel(index);
                kernels_text.push('\n');
                kernels_text.push_str(&emitter.out);
                kernels.push(launch);
            }
            (kernels, steps)
        }
    };
    let mut source = String::new();
    let _ = writeln!(
        source,
        "// rfx program `{}`: {} kernel(s), generated by rfx-codegen-cuda ({}).",
        program.name(),
        program.kernels().len(),
        if options.fast_math {
            "fast math"
        } else {
            "exact IEEE"
        }
    );
    for helper in &helpers {
        source.push('\n');
        source.push_str(helper.source());
        source.push('\n');
    }
    for (index, buffer) in program.buffers().iter().enumerate() {
        if let Storage::Literal { values } = &buffer.storage {
            source.push('\n');
            source.push_str(&literal_data(BufId::new(index), buffer.ty.dtype, values));
        }
    }
    source.push_str(&kernels_text);
    Ok(CudaModuleSource {
        source,
        kernels,
        steps,
    })
}

/// The device array holding literal buffer `buf`'s data.
fn literal_name(buf: BufId) -> String {
    format!("rfx_literal_{}", buf.index())
}

/// The definition of literal buffer `buf`'s device array: the values' bit patterns (so every
/// float, NaN payloads and subnormals included, is exact without a constant expression), in
/// words of the element's size (`unsigned char` 0/1 for bool).
fn literal_data(buf: BufId, dtype: DType, values: &[Scalar]) -> String {
    let word = match dtype {
        DType::Bool => "unsigned char",
        DType::I32 | DType::F32 => "unsigned int",
        DType::F64 => "unsigned long long",
    };
    let mut words: Vec<String> = values
        .iter()
        .map(|&v| match v {
            Scalar::Bool(b) => u8::from(b).to_string(),
            Scalar::I32(x) => format!("0x{:08x}u", x as u32),
            Scalar::F32(x) => format!("0x{:08x}u", x.to_bits()),
            Scalar::F64(x) => format!("0x{:016x}ull", x.to_bits()),
        })
        .collect();
    // An empty literal is never read; C needs at least one element.
    if words.is_empty() {
        words.push("0".to_string());
    }
    let mut text = format!(
        "// literal {buf}: {} value(s) of {dtype}\n__device__ const {word} {}[{}] = {{",
        values.len(),
        literal_name(buf),
        words.len()
    );
    for (i, chunk) in words.chunks(8).enumerate() {
        text.push_str(if i == 0 { "\n  " } else { ",\n  " });
        text.push_str(&chunk.join(", "));
    }
    text.push_str("\n};\n");
    text
}

fn c_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "bool",
        DType::I32 => "int",
        DType::F32 => "float",
        DType::F64 => "double",
    }
}

fn memory_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "unsigned char",
        other => c_type(other),
    }
}

/// A literal of `value` in its own dtype that the CUDA compiler reads back bit for bit.
fn literal(value: Scalar) -> String {
    match value {
        Scalar::Bool(b) => b.to_string(),
        Scalar::I32(i32::MIN) => "(-2147483647 - 1)".to_string(),
        Scalar::I32(v) if v < 0 => format!("({v})"),
        Scalar::I32(v) => v.to_string(),
        Scalar::F32(v) => {
            if v.is_finite() && (v == 0.0 || v.is_normal()) {
                let text = format!("{v:?}f");
                if v.is_sign_negative() {
                    format!("({text})")
                } else {
                    text
                }
            } else {
                format!("__int_as_float(0x{:08x})", v.to_bits())
            }
        }
        Scalar::F64(v) => {
            if v.is_finite() && (v == 0.0 || v.is_normal()) {
                let text = format!("{v:?}");
                if v.is_sign_negative() {
                    format!("({text})")
                } else {
                    text
                }
            } else {
                format!("__longlong_as_double(0x{:016x}LL)", v.to_bits())
            }
        }
    }
}

fn identity(op: ReduceOp, dtype: DType) -> Scalar {
    rfx_ir::semantics::reduce_identity(op, dtype).unwrap_or(Scalar::zero(dtype))
}

struct Emitter<'a> {
    program: &'a LirProgram,
    kernel: &'a LirKernel,
    fast_math: bool,
    helpers: &'a mut BTreeSet<Helper>,
    out: String,
}

/// The kernel's index type: 32-bit when every count and offset fits, else 64-bit.
fn index_type(program: &LirProgram, kernel: &LirKernel) -> &'static str {
    let fits = rfx_lower::indices_fit_i32(program, kernel) && program.arena_bytes() <= i32::MAX as usize;
    if fits {
        "unsigned int"
    } else {
        "unsigned long long"
    }
}

impl Emitter<'_> {
    fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn dtype(&self, slot: SlotId) -> DType {
        self.kernel.slot_dtype(slot).unwrap_or(DType::F32)
    }

    fn buf_dtype(&self, buf: BufId) -> DType {
        self.program.buffer(buf).map_or(DType::F32, |b| b.ty.dtype)
    }

    /// Emits the kernel function and returns its launch description.
    ///
    /// Reduction order: for each reduction the thread owning a leading point keeps a running
    /// total. With `lanes` L, partial `l` folds the reduced points whose innermost index `j`
    /// has `j % L == l` in row-major order; the thread computes partial 0, then 1, ... (the
    /// `lane` loop) into an array of `L` partials that start at the identity, then combines
    /// them by the LIR's pairwise tree, which is exactly the LIR definition (partials never
    /// interact before the final combine, so computing them one after another instead of
    /// interleaved changes nothing). Lanes with no points are skipped: they keep the identity,
    /// as in the interpreter.
    fn emit_kernel(&mut self, index: usize) -> KernelLaunch {
        let entry = format!("rfx_{index}_{}", self.kernel.name);
        let plan = self.plan();
        self.emit_comment(&plan);
        self.line(0, &format!("extern \"C\" __global__ void {entry}("));
        for (i, (param, what)) in plan.param_text.iter().enumerate() {
            let comma = if i + 1 < plan.param_text.len() { "," } else { "" };
            self.line(1, &format!("{param}{comma}  // {what}"));
        }
        self.line(0, ") {");
        let tree = self.emit_body(&plan);
        self.line(0, "}");
        KernelLaunch {
            entry,
            params: plan.params,
            uses_arena: plan.uses_arena,
            units: plan.units,
            tree,
            single_block: false,
        }
    }

    /// What the kernel's function takes and how its loop nest splits into units.
    fn plan(&self) -> KernelPlan {
        let kernel = self.kernel;
        let mut used: BTreeSet<BufId> = BTreeSet::new();
        for inst in kernel.preamble.iter().chain(&kernel.body) {
            if let Some(buf) = inst.buf() {
                used.insert(buf);
            }
        }
        let mut params = Vec::new();
        let mut param_text = Vec::new();
        let mut arena_bufs = Vec::new();
        let mut literal_bufs = Vec::new();
        for &buf in &used {
            let Some(buffer) = self.program.buffer(buf) else {
                continue;
            };
            let ty = memory_type(buffer.ty.dtype);
            match &buffer.storage {
                Storage::Input { name } => {
                    params.push(buf);
                    param_text.push((
                        format!("const {ty}* __restrict__ {buf}"),
                        format!("input `{name}`"),
                    ));
                }
                Storage::Output { name } => {
                    params.push(buf);
                    param_text.push((format!("{ty}* __restrict__ {buf}"), format!("output `{name}`")));
                }
                Storage::Arena { offset } => arena_bufs.push((buf, ty, *offset)),
                Storage::Literal { .. } => literal_bufs.push((buf, ty)),
            }
        }
        let uses_arena = !arena_bufs.is_empty();
        if uses_arena {
            param_text.push(("unsigned char* arena".to_string(), "temporaries".to_string()));
        }
        let rank = kernel.dims.len();
        // A kernel with scans has one unit per row of its innermost (scanned) dim.
        let split = match kernel.scan {
            Some(_) => rank.saturating_sub(1),
            None => rank.saturating_sub(kernel.reduce_dims),
        };
        let (leading, reduced) = kernel.dims.split_at(split);
        let units: usize = leading.iter().product();
        let reduced_points: usize = reduced.iter().product();
        // Lowering decides which reductions run as block trees (`Schedule::gpu_tree`).
        let tree = kernel.scan.is_none() && !reduced.is_empty() && kernel.schedule.gpu_tree && units > 0;
        if tree {
            param_text.push((
                "unsigned char* rfx_tree".to_string(),
                "block partials and arrival counters".to_string(),
            ));
        }
        KernelPlan {
            params,
            param_text,
            arena_bufs,
            literal_bufs,
            uses_arena,
            split,
            units,
            reduced_points,
            tree,
        }
    }

    /// The comment line above the kernel's code.
    fn emit_comment(&mut self, plan: &KernelPlan) {
        let kernel = self.kernel;
        let (units, reduced_points) = (plan.units, plan.reduced_points);
        let lanes = kernel.schedule.reduce_lanes.max(1) as usize;
        let _ = match kernel.scan {
            Some(order) => writeln!(
                self.out,
                "// kernel `{}`: dims {:?}, scan {}; {units} row(s) of {reduced_points} point(s).",
                kernel.name,
                kernel.dims,
                order.name()
            ),
            None => writeln!(
                self.out,
                "// kernel `{}`: dims {:?}, reduce {}, lanes {lanes}; {units} unit(s) of {reduced_points} point(s).",
                kernel.name, kernel.dims, kernel.reduce_dims
            ),
        };
    }

    /// The kernel's code inside its function's braces: temporaries, slots and the unit loop.
    /// Returns the tree launch when its reductions run as block trees.
    fn emit_body(&mut self, plan: &KernelPlan) -> Option<TreeLaunch> {
        let kernel = self.kernel;
        let idx = index_type(self.program, kernel);
        let lanes = kernel.schedule.reduce_lanes.max(1) as usize;
        let rank = kernel.dims.len();
        let split = plan.split;
        let (leading, reduced) = kernel.dims.split_at(split);
        let reduced_points = plan.reduced_points;
        for (buf, ty, offset) in &plan.arena_bufs {
            self.line(1, &format!("{ty}* {buf} = ({ty}*)(arena + {offset});"));
        }
        for (buf, ty) in &plan.literal_bufs {
            let data = literal_name(*buf);
            self.line(1, &format!("const {ty}* {buf} = (const {ty}*){data};"));
        }
        for (slot, &dtype) in kernel.slots.iter().enumerate() {
            let zero = literal(Scalar::zero(dtype));
            self.line(1, &format!("{} s{slot} = {zero};", c_type(dtype)));
        }
        if kernel.scan.is_some() || plan.tree {
            return match kernel.scan {
                Some(order) => {
                    self.emit_scan_body(idx, order, leading, reduced_points);
                    None
                }
                None => Some(self.emit_tree_body(idx, split, leading, reduced)),
            };
        }
        self.emit_unit_loop_head(idx, leading, reduced_points);
        let reduces = self.reductions();
        for &(k, op, buf) in &reduces {
            let dtype = self.buf_dtype(buf);
            let init = literal(identity(op, dtype));
            self.line(2, &format!("{} acc{k} = {init};", c_type(dtype)));
        }
        if reduced.is_empty() {
            let accs = self.accumulators("acc");
            for (inst, acc) in kernel.body.iter().zip(&accs) {
                self.emit_inst(2, inst, acc.as_deref());
            }
        } else if reduced_points > 0 {
            let last = reduced[reduced.len() - 1];
            let outer = &reduced[..reduced.len() - 1];
            let outer_points: usize = outer.iter().product();
            let active_lanes = lanes.min(last);
            let (prefix, depth) = if active_lanes > 1 {
                for &(k, op, buf) in &reduces {
                    let dtype = self.buf_dtype(buf);
                    let init = literal(identity(op, dtype));
                    let inits = vec![init; lanes].join(", ");
                    self.line(2, &format!("{} lp{k}[{lanes}] = {{{inits}}};", c_type(dtype)));
                }
                self.line(
                    2,
                    &format!("for ({idx} lane = 0u; lane < {active_lanes}u; ++lane) {{"),
                );
                for &(k, op, buf) in &reduces {
                    let dtype = self.buf_dtype(buf);
                    let init = literal(identity(op, dtype));
                    self.line(3, &format!("{} part{k} = {init};", c_type(dtype)));
                }
                ("part", 3)
            } else {
                ("acc", 2)
            };
            let mut depth = depth;
            if !outer.is_empty() {
                self.line(
                    depth,
                    &format!("for ({idx} outer = 0u; outer < {outer_points}u; ++outer) {{"),
                );
                self.unravel(depth + 1, idx, "outer", split, outer);
                depth += 1;
            }
            let j = format!("i{}", rank - 1);
            if active_lanes > 1 {
                self.line(
                    depth,
                    &format!("for ({idx} {j} = lane; {j} < {last}u; {j} += {lanes}u) {{"),
                );
            } else {
                self.line(depth, &format!("for ({idx} {j} = 0u; {j} < {last}u; ++{j}) {{"));
            }
            let accs = self.accumulators(prefix);
            for (inst, acc) in kernel.body.iter().zip(&accs) {
                self.emit_inst(depth + 1, inst, acc.as_deref());
            }
            self.line(depth, "}");
            if !outer.is_empty() {
                depth -= 1;
                self.line(depth, "}");
            }
            if active_lanes > 1 {
                for &(k, _, _) in &reduces {
                    self.line(3, &format!("lp{k}[lane] = part{k};"));
                }
                self.line(2, "}");
                self.emit_lane_tree(&reduces, lanes);
            }
        }
        for &(k, op, buf) in &reduces {
            let dtype = self.buf_dtype(buf);
            let value = self.finish(op, dtype, &format!("acc{k}"), reduced_points);
            let value = if dtype == DType::Bool {
                format!("(unsigned char){value}")
            } else {
                value
            };
            self.line(2, &format!("{buf}[unit] = {value};"));
        }
        self.line(1, "}");
        None
    }

    /// Combines each reduction's partials `lp{k}` by the pairwise tree of
    /// [`rfx_ir::lir::reduce_lane_levels`] into `acc{k}`, one statement per combination.
    fn emit_lane_tree(&mut self, reduces: &[(usize, ReduceOp, BufId)], lanes: usize) {
        let levels = rfx_ir::lir::reduce_lane_levels(u32::try_from(lanes).unwrap_or(1));
        for &(k, op, buf) in reduces {
            let dtype = self.buf_dtype(buf);
            for &(half, offset) in &levels {
                for i in 0..half {
                    let left = format!("lp{k}[{i}]");
                    let combined = self.combine(op, dtype, &left, &format!("lp{k}[{}]", i + offset));
                    self.line(2, &format!("{left} = {combined};"));
                }
            }
            self.line(2, &format!("acc{k} = lp{k}[0];"));
        }
    }

    /// Emits the body of a kernel with scans (after the slot declarations): each thread takes
    /// rows of the innermost dim in a grid-stride loop and runs a row's points one after
    /// another in the kernel's scan order, each scan folding into a running accumulator that
    /// starts at its op's identity: the interpreter's sequential order, so its bits.
    fn emit_scan_body(&mut self, idx: &str, order: ScanOrder, leading: &[usize], points: usize) {
        let kernel = self.kernel;
        self.emit_unit_loop_head(idx, leading, points);
        let accs = self.accumulators("scan");
        for (inst, acc) in kernel.body.iter().zip(&accs) {
            if let (Inst::Scan { op, dst, .. }, Some(acc)) = (inst, acc) {
                let dtype = self.dtype(*dst);
                let init = literal(identity(op.reduce_op(), dtype));
                self.line(2, &format!("{} {acc} = {init};", c_type(dtype)));
            }
        }
        let j = format!("i{}", leading.len());
        self.line(2, &format!("for ({idx} step = 0u; step < {points}u; ++step) {{"));
        match order {
            ScanOrder::Forward => self.line(3, &format!("const {idx} {j} = step;")),
            ScanOrder::Reverse => self.line(
                3,
                &format!("const {idx} {j} = {}u - step;", points.saturating_sub(1)),
            ),
        }
        for (inst, acc) in kernel.body.iter().zip(&accs) {
            self.emit_inst(3, inst, acc.as_deref());
        }
        self.line(2, "}");
        self.line(1, "}");
    }

    /// The preamble, then the head of the grid-stride loop over the units (the points of the
    /// `leading` dims, each of `points` points) with their indices `i0..` unravelled. The
    /// preamble only feeds the body, which runs only when the loop nest has points (its loads
    /// are in bounds only then).
    fn emit_unit_loop_head(&mut self, idx: &str, leading: &[usize], points: usize) {
        let kernel = self.kernel;
        let units: usize = leading.iter().product();
        if units > 0 && points > 0 && !kernel.preamble.is_empty() {
            self.line(1, "// preamble");
            for inst in &kernel.preamble {
                self.emit_inst(1, inst, None);
            }
        }
        self.line(
            1,
            &format!(
                "for ({idx} unit = ({idx})blockIdx.x * blockDim.x + threadIdx.x; unit < {units}u; unit += ({idx})gridDim.x * blockDim.x) {{"
            ),
        );
        self.unravel(2, idx, "unit", 0, leading);
    }

    /// The reductions of the kernel as `(k, op, buf)`, in body order.
    fn reductions(&self) -> Vec<(usize, ReduceOp, BufId)> {
        self.kernel
            .body
            .iter()
            .filter_map(|inst| match inst {
                Inst::Reduce { op, buf, .. } => Some((*op, *buf)),
                _ => None,
            })
            .enumerate()
            .map(|(k, (op, buf))| (k, op, buf))
            .collect()
    }

    /// Emits the body of a tree-reduction kernel (after the slot declarations) and returns
    /// its launch description.
    ///
    /// Order, fixed by the shape alone: block `b = unit * C + chunk` (C = `chunks`) has
    /// thread `t` fold, in increasing order, the reduced points `r ≡ chunk·256 + t (mod
    /// C·256)`; the 256 thread totals are combined by a warp-shuffle tree (`v[l] ⊕= v[l+16]`,
    /// then 8, 4, 2, 1, lower index on the left), the 8 warp totals by the same tree, and the
    /// C block partials of a unit by one more block pass in the same shape. So `max`/`min`
    /// keep "the later element wins a ±0 tie" within a thread, and every combine has the
    /// earlier points on its left. Float sums and products differ from the interpreter's
    /// sequential ones only by rounding (see the crate docs for the bounds); i32 sums and
    /// products (wrapping, hence associative) and `max`/`min` give the same bits, except that
    /// a ±0 tie may keep either zero.
    fn emit_tree_body(
        &mut self,
        idx: &str,
        split: usize,
        leading: &[usize],
        reduced: &[usize],
    ) -> TreeLaunch {
        let kernel = self.kernel;
        let units: usize = leading.iter().product();
        let points: usize = reduced.iter().product();
        let chunks = tree_chunks(units, points);
        let reduces = self.reductions();
        // Scratch layout: each reduction's `units * chunks` partials (8-byte aligned), then
        // one u32 arrival counter per unit.
        let mut offsets = Vec::with_capacity(reduces.len());
        let mut scratch = 0usize;
        for &(_, _, buf) in &reduces {
            scratch = scratch.next_multiple_of(8);
            offsets.push(scratch);
            scratch += units * chunks * self.buf_dtype(buf).size_bytes();
        }
        let counters = scratch.next_multiple_of(8);
        let scratch_bytes = counters + units * 4;
        let warps = TREE_BLOCK / 32;
        for &(k, _, buf) in &reduces {
            let ty = c_type(self.buf_dtype(buf));
            self.line(1, &format!("__shared__ {ty} rfx_warp{k}[{warps}];"));
        }
        if chunks > 1 {
            self.line(1, "__shared__ bool rfx_last;");
        }
        if chunks > 1 {
            self.line(1, &format!("const {idx} unit = ({idx})blockIdx.x / {chunks}u;"));
            self.line(1, &format!("const {idx} chunk = ({idx})blockIdx.x % {chunks}u;"));
        } else {
            self.line(1, &format!("const {idx} unit = ({idx})blockIdx.x;"));
            self.line(1, &format!("const {idx} chunk = 0u;"));
        }
        self.unravel(1, idx, "unit", 0, leading);
        if !kernel.preamble.is_empty() {
            self.line(1, "// preamble");
            for inst in &kernel.preamble {
                self.emit_inst(1, inst, None);
            }
        }
        for &(k, op, buf) in &reduces {
            let dtype = self.buf_dtype(buf);
            let init = literal(identity(op, dtype));
            self.line(1, &format!("{} acc{k} = {init};", c_type(dtype)));
        }
        let stride = chunks * TREE_BLOCK;
        self.line(
            1,
            &format!("for ({idx} r = chunk * {TREE_BLOCK}u + threadIdx.x; r < {points}u; r += {stride}u) {{"),
        );
        self.unravel(2, idx, "r", split, reduced);
        let accs = self.accumulators("acc");
        for (inst, acc) in kernel.body.iter().zip(&accs) {
            self.emit_inst(2, inst, acc.as_deref());
        }
        self.line(1, "}");
        self.emit_block_tree(1, &reduces);
        if chunks == 1 {
            self.line(1, "if (threadIdx.x == 0u) {");
            self.emit_tree_stores(2, &reduces, points);
            self.line(1, "}");
            return TreeLaunch {
                chunks,
                scratch_bytes,
            };
        }
        self.line(1, "if (threadIdx.x == 0u) {");
        for (&(k, _, buf), offset) in reduces.iter().zip(&offsets) {
            let ty = memory_type(self.buf_dtype(buf));
            self.line(
                2,
                &format!("(({ty}*)(rfx_tree + {offset}))[blockIdx.x] = acc{k};"),
            );
        }
        self.line(2, "__threadfence();");
        self.line(
            2,
            &format!(
                "const unsigned int ticket = atomicAdd((unsigned int*)(rfx_tree + {counters}) + unit, 1u);"
            ),
        );
        self.line(2, &format!("rfx_last = ticket == {}u;", chunks - 1));
        self.line(1, "}");
        self.line(1, "__syncthreads();");
        self.line(1, "if (!rfx_last) return;");
        self.line(
            1,
            "// The last block of this unit folds the unit's partials, in chunk order.",
        );
        self.line(1, "__threadfence();");
        for (&(k, op, buf), offset) in reduces.iter().zip(&offsets) {
            let dtype = self.buf_dtype(buf);
            let ty = memory_type(dtype);
            let init = literal(identity(op, dtype));
            self.line(1, &format!("acc{k} = {init};"));
            self.line(
                1,
                &format!("for ({idx} c = threadIdx.x; c < {chunks}u; c += {TREE_BLOCK}u) {{"),
            );
            let partial = format!("__ldcg(((const {ty}*)(rfx_tree + {offset})) + unit * {chunks}u + c)");
            let combined = self.combine(op, dtype, &format!("acc{k}"), &partial);
            self.line(2, &format!("acc{k} = {combined};"));
            self.line(1, "}");
        }
        self.emit_block_tree(1, &reduces);
        self.line(1, "if (threadIdx.x == 0u) {");
        self.emit_tree_stores(2, &reduces, points);
        self.line(
            2,
            &format!("((unsigned int*)(rfx_tree + {counters}))[unit] = 0u;"),
        );
        self.line(1, "}");
        TreeLaunch {
            chunks,
            scratch_bytes,
        }
    }

    /// Combines every thread's `acc{k}` into thread 0's: a shuffle tree per warp, the warp
    /// totals through shared memory, and the same tree over them in warp 0.
    fn emit_block_tree(&mut self, depth: usize, reduces: &[(usize, ReduceOp, BufId)]) {
        let warps = TREE_BLOCK / 32;
        self.emit_warp_tree(depth, reduces);
        self.line(depth, "if ((threadIdx.x & 31u) == 0u) {");
        for &(k, _, _) in reduces {
            self.line(depth + 1, &format!("rfx_warp{k}[threadIdx.x >> 5] = acc{k};"));
        }
        self.line(depth, "}");
        self.line(depth, "__syncthreads();");
        self.line(depth, "if (threadIdx.x < 32u) {");
        for &(k, op, buf) in reduces {
            let init = literal(identity(op, self.buf_dtype(buf)));
            self.line(
                depth + 1,
                &format!("acc{k} = threadIdx.x < {warps}u ? rfx_warp{k}[threadIdx.x] : {init};"),
            );
        }
        self.emit_warp_tree(depth + 1, reduces);
        self.line(depth, "}");
    }

    fn emit_warp_tree(&mut self, depth: usize, reduces: &[(usize, ReduceOp, BufId)]) {
        self.line(depth, "for (int off = 16; off > 0; off >>= 1) {");
        for &(k, op, buf) in reduces {
            let dtype = self.buf_dtype(buf);
            let ty = c_type(dtype);
            self.line(
                depth + 1,
                &format!("const {ty} other{k} = __shfl_down_sync(0xffffffffu, acc{k}, off);"),
            );
            let combined = self.combine(op, dtype, &format!("acc{k}"), &format!("other{k}"));
            self.line(depth + 1, &format!("acc{k} = {combined};"));
        }
        self.line(depth, "}");
    }

    fn emit_tree_stores(&mut self, depth: usize, reduces: &[(usize, ReduceOp, BufId)], points: usize) {
        for &(k, op, buf) in reduces {
            let dtype = self.buf_dtype(buf);
            let value = self.finish(op, dtype, &format!("acc{k}"), points);
            self.line(depth, &format!("{buf}[unit] = {value};"));
        }
    }

    /// The accumulator name of each body instruction that is a `Reduce` or a `Scan` (a kernel
    /// has one kind or the other), by body position.
    fn accumulators(&self, prefix: &str) -> Vec<Option<String>> {
        let mut k = 0;
        self.kernel
            .body
            .iter()
            .map(|inst| match inst {
                Inst::Reduce { .. } | Inst::Scan { .. } => {
                    k += 1;
                    Some(format!("{prefix}{}", k - 1))
                }
                _ => None,
            })
            .collect()
    }

    /// Splits the row-major index `var` over `dims` into `i{first}`, `i{first+1}`, ...
    fn unravel(&mut self, depth: usize, idx: &str, var: &str, first: usize, dims: &[usize]) {
        match dims.len() {
            0 => {}
            1 => self.line(depth, &format!("const {idx} i{first} = {var};")),
            n => {
                self.line(depth, &format!("{idx} rest_{var} = {var};"));
                for d in (1..n).rev() {
                    let size = dims[d];
                    self.line(
                        depth,
                        &format!(
                            "const {idx} i{} = rest_{var} % {size}u; rest_{var} /= {size}u;",
                            first + d
                        ),
                    );
                }
                self.line(depth, &format!("const {idx} i{first} = rest_{var};"));
            }
        }
    }

    /// The element offset `sum(i_d * stride_d)` as C, dropping zero strides and size-1 dims.
    fn offset(&self, strides: &[usize]) -> String {
        let terms: Vec<String> = strides
            .iter()
            .enumerate()
            .filter(|&(d, &s)| s != 0 && self.kernel.dims.get(d).is_some_and(|&n| n > 1))
            .map(|(d, &s)| {
                if s == 1 {
                    format!("i{d}")
                } else {
                    format!("i{d} * {s}u")
                }
            })
            .collect();
        if terms.is_empty() {
            "0".to_string()
        } else {
            terms.join(" + ")
        }
    }

    fn use_helper(&mut self, helper: Helper, name: &str, args: &[&str]) -> String {
        self.helpers.insert(helper);
        format!("{name}({})", args.join(", "))
    }

    fn combine(&mut self, op: ReduceOp, dtype: DType, acc: &str, x: &str) -> String {
        let binary = match op {
            ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        self.binary(binary, dtype, acc, x)
    }

    fn finish(&mut self, op: ReduceOp, dtype: DType, acc: &str, count: usize) -> String {
        match (op, dtype) {
            (ReduceOp::Mean, DType::F32) => format!("{acc} / {}", literal(Scalar::F32(count as f32))),
            (ReduceOp::Mean, DType::F64) => format!("{acc} / {}", literal(Scalar::F64(count as f64))),
            (ReduceOp::Sum, DType::F32 | DType::F64) if count == 0 => literal(Scalar::zero(dtype)),
            _ => acc.to_string(),
        }
    }

    /// Element `element` of `buf` as a value of the buffer's dtype (bools are stored as bytes).
    fn read(&self, buf: BufId, element: &str) -> String {
        let load = format!("{buf}[{element}]");
        if self.buf_dtype(buf) == DType::Bool {
            format!("({load} != 0)")
        } else {
            load
        }
    }

    /// Emits one instruction; `acc` names the accumulator when it is a `Reduce` or a `Scan`.
    fn emit_inst(&mut self, depth: usize, inst: &Inst, acc: Option<&str>) {
        let text = match inst {
            Inst::Load {
                dst,
                buf,
                strides,
                offset,
            } => {
                let element = match offset {
                    0 => self.offset(strides),
                    at => format!("{at} + {}", self.offset(strides)),
                };
                format!("{dst} = {};", self.read(*buf, &element))
            }
            Inst::Gather { dst, buf, index } => {
                // The verifier guarantees at least one element; the index is clamped into them.
                let last = self
                    .program
                    .buffer(*buf)
                    .map_or(0, |b| b.ty.shape.numel().saturating_sub(1));
                let element = match self.dtype(*index) {
                    // Clamped as a double first (a NaN fails both tests and reads element 0;
                    // converting an out-of-range double to an integer is undefined in C), then
                    // truncated toward zero by the conversion.
                    DType::F64 => format!(
                        "(long long)({index} > 0.0 ? ({index} < {last}.0 ? {index} : {last}.0) : 0.0)"
                    ),
                    _ => format!("{index} < 0 ? 0 : ({index} > {last} ? {last} : {index})"),
                };
                format!("{dst} = {};", self.read(*buf, &element))
            }
            Inst::Index { dst, strides } => {
                // Exact: the verifier bounds every value by what the dtype holds.
                format!(
                    "{dst} = ({})({});",
                    c_type(self.dtype(*dst)),
                    self.offset(strides)
                )
            }
            Inst::Const { dst, value } => format!("{dst} = {};", literal(*value)),
            Inst::Unary { dst, op, src } => {
                let value = self.unary(*op, self.dtype(*src), &src.to_string());
                format!("{dst} = {value};")
            }
            Inst::Binary { dst, op, lhs, rhs } => {
                let value = self.binary(*op, self.dtype(*lhs), &lhs.to_string(), &rhs.to_string());
                format!("{dst} = {value};")
            }
            Inst::Compare { dst, op, lhs, rhs } => {
                let symbol = match op {
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                    CmpOp::Eq => "==",
                    CmpOp::Ne => "!=",
                };
                format!("{dst} = {lhs} {symbol} {rhs};")
            }
            Inst::Select {
                dst,
                cond,
                on_true,
                on_false,
            } => format!("{dst} = {cond} ? {on_true} : {on_false};"),
            Inst::Cast { dst, src } => {
                let value = self.cast(self.dtype(*src), self.dtype(*dst), &src.to_string());
                format!("{dst} = {value};")
            }
            Inst::Store {
                buf,
                strides,
                offset,
                src,
            } => {
                let value = if self.buf_dtype(*buf) == DType::Bool {
                    format!("(unsigned char){src}")
                } else {
                    src.to_string()
                };
                let mut element = match offset {
                    0 => self.offset(strides),
                    at => format!("{at} + {}", self.offset(strides)),
                };
                // A row store's row: its clamped index (a preamble slot) times the row stride.
                if let Some(row) = self.kernel.row_store.as_ref().filter(|r| r.buf == *buf) {
                    let (at, last) = (row.index, row.rows.saturating_sub(1));
                    element = format!(
                        "({at} < 0 ? 0ll : ({at} > {last} ? {last}ll : (long long){at})) * {} + {element}",
                        row.stride
                    );
                }
                format!("{buf}[{element}] = {value};")
            }
            Inst::Reduce { op, buf, src } => {
                let Some(acc) = acc else { return };
                let combined = self.combine(*op, self.buf_dtype(*buf), acc, &src.to_string());
                format!("{acc} = {combined};")
            }
            Inst::Scan { dst, op, src, coef } => {
                let Some(acc) = acc else { return };
                let dtype = self.dtype(*src);
                // A linear recurrence scales the accumulator first, `coef * acc + src`, rounded
                // twice: `__fmul_rn` is never contracted into a multiply-add, even under
                // `--fmad=true`.
                let scaled = match (coef, dtype) {
                    (Some(coef), DType::F32) => format!("__fmul_rn({coef}, {acc})"),
                    (Some(coef), DType::F64) => format!("__dmul_rn({coef}, {acc})"),
                    (Some(coef), _) => self.binary(BinaryOp::Mul, dtype, &coef.to_string(), acc),
                    (None, _) => acc.to_string(),
                };
                let combined = self.combine(op.reduce_op(), dtype, &scaled, &src.to_string());
                format!("{acc} = {combined}; {dst} = {acc};")
            }
        };
        self.line(depth, &text);
    }

    fn unary(&mut self, op: UnaryOp, dtype: DType, x: &str) -> String {
        let fast = self.fast_math && dtype == DType::F32;
        let f = |name32: &str, name64: &str| {
            let name = if dtype == DType::F32 { name32 } else { name64 };
            format!("{name}({x})")
        };
        match (op, dtype) {
            (UnaryOp::Not, _) => format!("!{x}"),
            (UnaryOp::Neg, DType::I32) => self.use_helper(Helper::NegI32, "rfx_neg_i32", &[x]),
            (UnaryOp::Neg, _) => format!("-{x}"),
            (UnaryOp::Abs, DType::I32) => self.use_helper(Helper::AbsI32, "rfx_abs_i32", &[x]),
            // f32 `abs` clears the sign bit with an integer AND, not `fabsf`: ptxas (12.9 and
            // 13.0, sm_80 and sm_90) assumes the result of `abs.f32` is never NaN and folds
            // ordered comparisons on it (`abs(x) >= 0` to true), which drops NaN through
            // `min`/`max`/`select` (fuzz seed 4000814: `min(max(sign(max(abs(x), c)), c2), 0)` of
            // NaN gave 0). NVVM keeps this form as `and.b32`, about which ptxas assumes nothing.
            // `abs.f64` is not affected.
            (UnaryOp::Abs, DType::F32) => format!("__int_as_float(__float_as_int({x}) & 0x7fffffff)"),
            (UnaryOp::Abs, _) => f("fabsf", "fabs"),
            (UnaryOp::Sign, DType::I32) => self.use_helper(Helper::SignI32, "rfx_sign_i32", &[x]),
            (UnaryOp::Sign, DType::F64) => self.use_helper(Helper::SignF64, "rfx_sign_f64", &[x]),
            (UnaryOp::Sign, _) => self.use_helper(Helper::SignF32, "rfx_sign_f32", &[x]),
            (UnaryOp::Floor, _) => f("floorf", "floor"),
            (UnaryOp::Ceil, _) => f("ceilf", "ceil"),
            (UnaryOp::Round, _) => f("rintf", "rint"),
            (UnaryOp::Sqrt, _) => f("sqrtf", "sqrt"),
            (UnaryOp::Rsqrt, DType::F32) if fast => format!("rsqrtf({x})"),
            (UnaryOp::Rsqrt, DType::F64) => format!("1.0 / sqrt({x})"),
            (UnaryOp::Rsqrt, _) => format!("1.0f / sqrtf({x})"),
            (UnaryOp::Recip, DType::F32) if fast => format!("__fdividef(1.0f, {x})"),
            (UnaryOp::Recip, DType::F64) => format!("1.0 / {x}"),
            (UnaryOp::Recip, _) => format!("1.0f / {x}"),
            (UnaryOp::Exp, _) if fast => format!("__expf({x})"),
            (UnaryOp::Exp, _) => f("expf", "exp"),
            // f32 `exp2f` compiles to `ex2.approx.f32` (`.ftz` with fast math), and ptxas (12.9 and
            // 13.0, sm_80 and sm_90) assumes its result is never NaN, like `abs.f32` above: it folds
            // `exp2(x) >= 0` to true, so `min(exp2(x), 0)` of NaN stores 0. The helper returns a
            // NaN argument by a select. No other op of the exact path is affected (`tests/sass.rs`
            // checks every float op); with fast math, `__expf`, `__powf`, `__sinf`, `__cosf` and
            // `tanhf` (`tanh.approx`) have the same problem, left as it is (see the crate docs).
            (UnaryOp::Exp2, DType::F32) => self.use_helper(Helper::Exp2F32, "rfx_exp2_f32", &[x]),
            (UnaryOp::Exp2, _) => f("exp2f", "exp2"),
            (UnaryOp::Log, _) if fast => format!("__logf({x})"),
            (UnaryOp::Log, _) => f("logf", "log"),
            (UnaryOp::Log2, _) if fast => format!("__log2f({x})"),
            (UnaryOp::Log2, _) => f("log2f", "log2"),
            (UnaryOp::Sin, _) if fast => format!("__sinf({x})"),
            (UnaryOp::Sin, _) => f("sinf", "sin"),
            (UnaryOp::Cos, _) if fast => format!("__cosf({x})"),
            (UnaryOp::Cos, _) => f("cosf", "cos"),
            (UnaryOp::Tan, _) if fast => format!("__tanf({x})"),
            (UnaryOp::Tan, _) => f("tanf", "tan"),
            (UnaryOp::Tanh, _) => f("tanhf", "tanh"),
            (UnaryOp::Atan, _) => f("atanf", "atan"),
            (UnaryOp::Asin, _) => f("asinf", "asin"),
            (UnaryOp::Acos, _) => f("acosf", "acos"),
            (UnaryOp::Erf, _) => f("erff", "erf"),
            (UnaryOp::Sigmoid, DType::F64) => self.use_helper(Helper::SigmoidF64, "rfx_sigmoid_f64", &[x]),
            (UnaryOp::Sigmoid, _) if fast => {
                self.use_helper(Helper::SigmoidFastF32, "rfx_sigmoid_fast_f32", &[x])
            }
            (UnaryOp::Sigmoid, _) => self.use_helper(Helper::SigmoidF32, "rfx_sigmoid_f32", &[x]),
        }
    }

    fn binary(&mut self, op: BinaryOp, dtype: DType, a: &str, b: &str) -> String {
        let fast = self.fast_math && dtype == DType::F32;
        let f = |name32: &str, name64: &str| {
            let name = if dtype == DType::F32 { name32 } else { name64 };
            format!("{name}({a}, {b})")
        };
        match (op, dtype) {
            (BinaryOp::And, _) => format!("{a} && {b}"),
            (BinaryOp::Or, _) => format!("{a} || {b}"),
            (BinaryOp::Add, DType::I32) => self.use_helper(Helper::AddI32, "rfx_add_i32", &[a, b]),
            (BinaryOp::Sub, DType::I32) => self.use_helper(Helper::SubI32, "rfx_sub_i32", &[a, b]),
            (BinaryOp::Mul, DType::I32) => self.use_helper(Helper::MulI32, "rfx_mul_i32", &[a, b]),
            (BinaryOp::Div, DType::I32) => self.use_helper(Helper::DivI32, "rfx_div_i32", &[a, b]),
            (BinaryOp::Fmod, DType::I32) => self.use_helper(Helper::FmodI32, "rfx_fmod_i32", &[a, b]),
            (BinaryOp::Min, DType::I32) => self.use_helper(Helper::MinI32, "rfx_min_i32", &[a, b]),
            (BinaryOp::Max, DType::I32) => self.use_helper(Helper::MaxI32, "rfx_max_i32", &[a, b]),
            (BinaryOp::Min, DType::F64) => self.use_helper(Helper::MinF64, "rfx_min_f64", &[a, b]),
            (BinaryOp::Max, DType::F64) => self.use_helper(Helper::MaxF64, "rfx_max_f64", &[a, b]),
            (BinaryOp::Min, _) => self.use_helper(Helper::MinF32, "rfx_min_f32", &[a, b]),
            (BinaryOp::Max, _) => self.use_helper(Helper::MaxF32, "rfx_max_f32", &[a, b]),
            (BinaryOp::Add, _) => format!("{a} + {b}"),
            (BinaryOp::Sub, _) => format!("{a} - {b}"),
            (BinaryOp::Mul, _) => format!("{a} * {b}"),
            (BinaryOp::Div, _) if fast => format!("__fdividef({a}, {b})"),
            (BinaryOp::Div, _) => format!("{a} / {b}"),
            (BinaryOp::Pow, _) if fast => format!("__powf({a}, {b})"),
            (BinaryOp::Pow, _) => f("powf", "pow"),
            (BinaryOp::Atan2, _) => f("atan2f", "atan2"),
            (BinaryOp::Fmod, _) => f("fmodf", "fmod"),
        }
    }

    fn cast(&mut self, from: DType, to: DType, x: &str) -> String {
        match (from, to) {
            _ if from == to => x.to_string(),
            (DType::Bool, DType::I32) => format!("{x} ? 1 : 0"),
            (DType::Bool, DType::F32) => format!("{x} ? 1.0f : 0.0f"),
            (DType::Bool, DType::F64) => format!("{x} ? 1.0 : 0.0"),
            (DType::I32, DType::Bool) => format!("{x} != 0"),
            (DType::F32, DType::Bool) => format!("{x} != 0.0f"),
            (DType::F64, DType::Bool) => format!("{x} != 0.0"),
            (DType::F32, DType::I32) => self.use_helper(Helper::F32ToI32, "rfx_f32_to_i32", &[x]),
            (DType::F64, DType::I32) => self.use_helper(Helper::F64ToI32, "rfx_f64_to_i32", &[x]),
            // int → float and f64 → f32 round to nearest even; f32 → f64 and int → f64 are exact.
            _ => format!("({}){x}", c_type(to)),
        }
    }
}
