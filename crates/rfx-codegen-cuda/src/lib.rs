//! `rfx-codegen-cuda`: CUDA kernels from LIR, compiled by NVRTC and run through `cudarc`.
//!
//! **Owns:** LIR → CUDA C (one `extern "C" __global__` function per LIR kernel, or one for a
//! whole program of small kernels; grid-stride loops, reductions in the LIR `lanes` order), NVRTC compilation to PTX, the device context,
//! module cache and buffer reuse, and a typed [`BackendError::Unavailable`] where no NVRTC,
//! driver or GPU exists (never a panic).
//!
//! **Depends on:** `rfx-ir`, `rfx-lower`, `cudarc` (and `libloading` to preload NVRTC by path).
//! **May not depend on:** other code generators, `rfx-opt` or `rfx-runtime`. `cudarc` types
//! never appear in the public API.
//!
//! # API
//! - [`CudaBackend`]: the `"cuda"` [`rfx_lower::Backend`].
//! - [`CudaOptions`] and [`CudaBackend::compile_program_with`]: the backend's own switches
//!   (staging of host arrays, one launch for small programs), both on by default.
//! - [`cuda_source`] and [`ptx`] (and their `_with` forms): the generated CUDA C and the PTX
//!   NVRTC makes of it, for `rfx dump --stage cuda|ptx` and for offline validation with
//!   `ptxas`.
//!
//! # Finding NVRTC
//! `RFX_NVRTC_LIB` (the path of `libnvrtc.so.12`), else the `nvidia-cuda-nvrtc-cu12` wheel
//! found by asking `python3` once, else the system library path. Without any of them the
//! error is [`BackendError::Unavailable`] saying `pip install nvidia-cuda-nvrtc-cu12`.
//!
//! # Semantics and accuracy
//! Without `fast_math`, NVRTC runs with `--fmad=false --ftz=false --prec-div=true
//! --prec-sqrt=true`, and every op other than the transcendentals gives the LIR interpreter's
//! bits: `+ - * /`, `sqrt`, `recip`, `rsqrt` (= `1/sqrt(x)`, two correctly rounded steps), `floor`,
//! `ceil`, `round` (`rint`, half to even), `fmod`, `abs`, `neg`, comparisons, NumPy `min`/`max`,
//! `sign`, i32 floor division and remainder, and saturating casts. Reductions follow the LIR
//! order exactly (see `codegen.rs`). One difference is allowed: a NaN result may carry a different
//! payload (NVIDIA GPUs return the canonical NaN from arithmetic).
//!
//! The transcendentals are CUDA's accurate device functions; their maximum errors, from the
//! CUDA C++ Programming Guide (appendix "Mathematical Functions", full range, no `-ftz`) are:
//!
//! | function | f32 (ULP) | f64 (ULP) |
//! |---|---|---|
//! | `exp`, `exp2` | 2 | 1 |
//! | `log`, `log2` | 1 | 1 |
//! | `sin`, `cos` | 2 | 2 |
//! | `tan` | 4 | 2 |
//! | `tanh` | 2 | 2 |
//! | `atan` | 2 | 2 |
//! | `asin`, `acos` | 2 | 2 |
//! | `erf` | 2 | 2 |
//! | `atan2` | 3 | 2 |
//! | `pow` | 4 | 2 |
//! | `sigmoid` | exp's bound plus three rounding steps (≤ 4) | ≤ 3 |
//!
//! With `fast_math` the f32 ops use the hardware intrinsics (`__expf`, `__logf`, `__log2f`,
//! `__sinf`, `__cosf`, `__tanf`, `__powf`, `__fdividef`, `rsqrtf`) and `--use_fast_math`
//! (flush-to-zero, approximate division and square root, FMA contraction). Their bounds are
//! those of the guide's intrinsics table: `__expf` 2 + floor(|1.173·x|) ULP, `__sinf`/`__cosf` 2^-21.41 absolute in [-π, π], `__logf` 2^-21.41 absolute in
//! [0.5, 2] else 3 ULP, `__fdividef` 2 ULP for |y| in [2^-126, 2^126]. NaN may not propagate
//! through `exp`, `pow`, `sin`, `cos` and `tanh` with fast math: ptxas assumes the hardware
//! approximations never return NaN and folds comparisons on their results (`exp(x) >= 0` to
//! true), so `min(exp(x), 0)` of NaN can be 0. The exact path guards against this (see
//! `codegen.rs` and `tests/sass.rs`).
//!
//! # Execution
//! The device is ordinal 0; PTX is compiled for `compute_XY` of its compute capability and
//! JIT-compiled by the driver; modules are cached by source and device, and different sources
//! compile in parallel (one source compiles once). The PTX is also kept on disk across
//! processes (see [`set_ptx_disk_cache`]), so a program that starts again skips NVRTC. Each compiled program allocates its device
//! buffers once. [`Compiled::run`](rfx_lower::Compiled::run) on host arrays copies the inputs
//! in, launches each kernel (256-thread blocks, fewer for small kernels, at most 32 blocks per
//! SM; the grid-stride loop covers the rest), copies the outputs out and synchronises.
//!
//! Two things cut the fixed costs of small calls, which dominate a control loop's:
//! - **Staging.** When a program's inputs and outputs take at most 1 MiB together, they live in
//!   one device buffer mirrored by one page-locked host buffer (each array 256-byte aligned).
//!   A host-array call then copies the caller's inputs into the mirror, makes one copy to the
//!   device, launches, makes one copy back and waits, whatever the number of arrays.
//! - **One launch.** A program of two or more kernels (or of one kernel in a loop), none a
//!   block-tree reduction, none of
//!   more than 1024 units, and none whose extra rounds in one 256-thread block would add more
//!   than 32 points to a thread's work, becomes one function launched as one block: each
//!   kernel's code runs in turn, `__syncthreads()` between them (a barrier orders and makes
//!   visible every global memory access of the block). [`CudaProgram::launches`] says which
//!   form a program took.
//!
//! Both can be turned off with [`CudaOptions`].
//!
//! # Program loops
//! A program's loops (`LirProgram::loops`: ranges of kernels run up to `trips` times, see
//! `rfx_ir::repeat`) never make the generated source depend on the trip count. In a program
//! in one launch they are `for` loops of its function around their kernels' code, with a
//! barrier before every kernel inside; a loop with an exit flag (a `while_loop`) reads it after
//! each iteration (`__syncthreads()`, then `__syncthreads_or(flag)`, so the whole block leaves
//! together) and stops as soon as it is false, so the whole loop costs one launch and no host
//! round trip. Otherwise the host launches each kernel of a loop once per trip, in the order of
//! `rfx_ir::repeat::steps`. Reading an exit flag back waits for the device, so a host-array
//! call reads it after 4 trips, then after twice as many trips as the time before (at most
//! 1024 between reads), and stops the loop when it is false: a loop that stops early runs at
//! most about twice its trips (or 1024 more), which gives the same results because the
//! optimiser masks such a loop's body (once the flag is false its carries stop changing). A
//! device-resident [`CudaProgram::launch`], which does not wait, queues every trip.
//!
//! # Device-resident data
//! A control loop that keeps its state on the GPU uses [`CudaBackend::to_device`],
//! [`CudaBackend::zeros`] and [`CudaBackend::from_device`] for explicit copies,
//! [`CudaBackend::compile_program`] for a [`CudaProgram`], and [`CudaProgram::launch`] on
//! [`DeviceArray`]s: the call checks every array's dtype and shape (nothing is queued on a
//! mismatch) and queues the kernels without waiting; [`DeviceArray::copy_from_device`] feeds
//! an output back as the next step's input without a host round trip.
//!
//! # Reductions
//! A reduction of fewer than 1024 points per output is folded by one thread per output in the
//! LIR `lanes` order, giving the interpreter's bits. Larger ones run as block trees: each
//! output's points are split over a number of 256-thread blocks that depends only on the shape,
//! each thread folds a strided (coalesced) subsequence, warp shuffles and shared memory combine
//! the block, and the last block to finish (an arrival counter) combines the block partials
//! with the same tree. The order is fixed by the shape, so results are deterministic and the
//! same on every GPU. Float sums then round differently from the interpreter's sequential sum
//! but within `(ceil(points / 256) + 20) · u · Σ|x|` of the exact sum (smaller than the
//! sequential bound `(n − 1) · u · Σ|x|`); products are within `(n − 1) · u · |p|` as in any
//! order; i32 reductions and `max`/`min` give the interpreter's bits, except that a tie
//! between +0 and −0 may keep either zero.
//!
//! # Measured
//! `examples/gpu_bench.rs` measures bandwidth at 16M elements as a fraction of a
//! device-to-device copy in the same run, and the latency of a cached PID kernel at n = 1
//! through host arrays, resident, and queued back to back. The figures, with their GPU and
//! date, are in `docs/performance.md` (one section per GPU model).
#![deny(missing_docs)]

mod backend;
mod codegen;
mod nvrtc;
mod ptx_cache;

pub use backend::{CudaBackend, CudaOptions, CudaProgram, DeviceArray};

use rfx_ir::lir::LirProgram;
use rfx_lower::{BackendError, CompileOptions};

/// Turns the on-disk cache of PTX on or off for this process (on by default).
///
/// NVRTC takes tens of milliseconds per kernel, so the PTX it makes is kept in
/// `$RFX_CACHE_DIR/ptx` (else `$XDG_CACHE_HOME/rfx/ptx`, else `~/.cache/rfx/ptx`; set
/// `RFX_CACHE_DIR=off` to keep nothing), keyed by everything it depends on: the source, the
/// architecture, the options, the NVRTC library and version, and the code that calls it. An
/// entry is used only when its whole key matches, and a failure to read or write the cache
/// is a miss, never an error. The folder keeps at most 4096 entries. A program that compiles
/// each kernel once and never again, such as a fuzzer, turns it off.
pub fn set_ptx_disk_cache(enabled: bool) {
    ptx_cache::set_enabled(enabled);
}

/// The CUDA C source generated for `program` (verified first): helper functions, then one
/// `extern "C" __global__ void rfx_<index>_<kernel>(...)` per LIR kernel, or, for a program of
/// small kernels, one `rfx_program_<program>(...)` that runs them all (see
/// [`CudaOptions::one_launch`]). Needs no GPU or NVRTC.
pub fn cuda_source(program: &LirProgram, options: &CompileOptions) -> Result<String, BackendError> {
    cuda_source_with(program, options, &CudaOptions::default())
}

/// [`cuda_source`] with the CUDA backend's own options (of which only
/// [`CudaOptions::one_launch`] changes the source).
pub fn cuda_source_with(
    program: &LirProgram,
    options: &CompileOptions,
    cuda: &CudaOptions,
) -> Result<String, BackendError> {
    codegen::generate(program, options, cuda.one_launch).map(|module| module.source)
}

/// The PTX that NVRTC makes of [`cuda_source`] for `arch` (`"compute_80"`, `"sm_90"`, ...), with
/// its float selects made bitwise (`selp.f32` → `selp.b32`, a ptxas workaround; see `nvrtc.rs`),
/// as the backend loads it.
/// Needs NVRTC but no GPU; [`BackendError::Unavailable`] when NVRTC is not installed,
/// [`BackendError::Compile`] with NVRTC's log when it rejects the source.
pub fn ptx(program: &LirProgram, arch: &str, options: &CompileOptions) -> Result<String, BackendError> {
    ptx_with(program, arch, options, &CudaOptions::default())
}

/// [`ptx`] of [`cuda_source_with`].
pub fn ptx_with(
    program: &LirProgram,
    arch: &str,
    options: &CompileOptions,
    cuda: &CudaOptions,
) -> Result<String, BackendError> {
    let source = cuda_source_with(program, options, cuda)?;
    nvrtc::compile_ptx(&source, program.name(), arch, options.fast_math)
}
