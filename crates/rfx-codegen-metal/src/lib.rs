//! `rfx-codegen-metal`: Metal kernels from LIR through `naga`, executed with `wgpu`.
//!
//! **Owns:** LIR → `naga::Module`, validation, MSL output with an explicit binding map, WGSL for
//! `wgpu`, and the `wgpu` runtime (Metal on Apple, Vulkan elsewhere, lavapipe in CI).
//!
//! **Depends on:** `rfx-ir`, `rfx-lower`, `naga`, `wgpu`. **May not depend on:** other code
//! generators, `rfx-opt` or `rfx-runtime`. `naga`/`wgpu` types never appear in the public API.
//!
//! # Design: WGSL text, parsed by naga
//!
//! The code generator writes WGSL text and lets naga's front end build the `naga::Module`,
//! rather than building the module through naga's IR API. WGSL is the language wgpu consumes
//! on every platform, so the text we dump (`rfx dump --stage wgsl`) is exactly what runs, and a
//! reviewer reads it directly; naga's IR, by contrast, needs explicit `Emit` ranges, handles and
//! spans that make a 10-line kernel 100 lines of builder code and its bugs hard to see. naga
//! then parses and validates the text (about a millisecond: small next to pipeline creation,
//! and a parse or validation error is reported as a code generator bug with naga's
//! diagnostic), and `naga::back::msl` writes the MSL with an explicit binding map (buffer `N`
//! at `[[buffer(N)]]`, never `fake_missing_bindings`).
//!
//! # Quiet on Linux
//!
//! On Linux, Mesa's Vulkan device-selection layer connects to the Wayland display when `wgpu`
//! creates its instance, and without a valid `XDG_RUNTIME_DIR` (a service, a container, a
//! remote login over SSH) `libwayland` prints `error: XDG_RUNTIME_DIR is invalid or not set in the
//! environment.` twice on stderr although the backend runs. Set `NODEVICE_SELECT=1` in the
//! environment to turn the layer off; the `rfx` command does so at its start. This crate never
//! writes the environment itself: a write races with any other thread's `getenv`.
//!
//! # Execution model
//!
//! One compute entry point per LIR kernel, `@workgroup_size(64)`; each LIR buffer is storage
//! binding `N` of group 0 (inputs `read`, the rest `read_write`; bool as `u32` 0/1, converted on
//! the host). An invocation handles one *unit*: a point of an elementwise kernel, or a leading
//! point of a kernel with reductions, which then walks its reduced points in row-major order
//! with the LIR's `lanes` partial accumulators (point `j` of the innermost dim into partial
//! `j % lanes`, partials combined by the LIR's pairwise tree), so reductions give the LIR
//! interpreter's bits.
//! A reduction of 1024 or more points per output instead runs as a *workgroup tree*: one
//! workgroup per output, invocation `l` folding the points `r ≡ l (mod 64)` in order, then a
//! fixed tree over the 64 totals in workgroup memory (`workgroupBarrier` between levels). The
//! order depends only on the shape, so results are deterministic; float sums are within
//! `(ceil(points / 64) + 6) · u · Σ|x|` of the exact sum (the sequential bound is
//! `(points − 1) · u · Σ|x|`), products within `(points − 1) · u · |p|` as in any order, and
//! i32 reductions and `max`/`min` give the interpreter's bits (a ±0 tie may keep either zero).
//! More than 65535 workgroups run as a 2D grid. Shapes are static, so there is no uniform
//! buffer. The device (`wgpu` instance, adapter, device, queue) is found once per process;
//! pipelines, bind groups and device buffers (one per LIR buffer; temporaries are not packed
//! into one arena) are made once per compiled program and reused by every call, which copies
//! the inputs up, submits every kernel in one compute pass, copies the outputs back and waits.
//! A program's loops (`LirProgram::loops`, ranges of kernels run up to `trips` times; see
//! `rfx_ir::repeat`) are run by the host: each kernel of a loop is dispatched once per trip,
//! in the order of `rfx_ir::repeat::steps`, so the shader does not depend on the trip count; a
//! call's dispatches are submitted in command buffers of at most 4096. A loop's exit flag (a
//! `while_loop`) costs a wait for the device to read back, so a host-array call reads it after
//! 4 trips, then after twice as many trips as the time before (at most 1024 between reads),
//! and stops the loop when it is false: a loop that stops early runs at most about twice its
//! trips (or 1024 more), which gives the same results because the optimiser masks such a
//! loop's body (once the flag is false its carries stop changing). A device-resident launch,
//! which does not wait, runs every trip.
//! Calls on one compiled program take turns on a mutex. For a control loop whose state should
//! stay on the device, [`MetalBackend::compile_program`] gives a [`MetalProgram`] whose
//! `launch`/`run_resident` take [`DeviceArray`]s (made by `to_device` or `zeros`, read by
//! `from_device`): the call copies them into and out of the program's buffers on the device, in
//! the same command buffer as the kernels, so no host transfer or mapping happens between
//! calls. No adapter gives
//! [`rfx_lower::BackendError::Unavailable`], never a panic; `f64` anywhere in a program gives
//! [`rfx_lower::BackendError::Unsupported`] with `Unsupported::DType(F64)` (WGSL has no `f64`;
//! rfx never downcasts silently).
//!
//! # Semantics and accuracy
//!
//! Where WGSL differs from rfx (see `rfx_ir::semantics`), the shader calls small helpers:
//! NaN-propagating `min`/`max` and `sign` with NaN tests on the bits (a fast-math compiler may
//! fold `x != x`), `fmod` exactly by integer long division on the significands, C99 `pow`
//! special values and negative bases, i32 floor division with `x / 0 = 0`, wrapping i32
//! arithmetic done on `u32` (signed overflow is undefined in MSL), saturating float → i32 casts
//! with NaN → 0. `round` is WGSL's ties-to-even. `add`, `sub`, `mul`, `div`, `sqrt` are the
//! device's: exact on lavapipe (and desktop Vulkan drivers in practice), where the tests check
//! every exactly-rounded op bit for bit against the LIR interpreter. **On Apple GPUs** wgpu
//! compiles MSL with Metal's default fast math, so `div`/`sqrt` may be off by an ULP or two,
//! subnormals may flush and products may fuse into FMAs; the rfx helpers stay exact because
//! they work on the bits.
//!
//! Transcendentals are rfx's own WGSL, so they are the same on every device: GPU built-ins
//! compute with an absolute error near their zeros and cut corners elsewhere (on lavapipe
//! `log(0.99999994)` came out 70% off, found by `rfx fuzz`'s bound check, `sin` 6 ULP next to
//! `3π`, `asin` 3825 ULP; NVIDIA's Vulkan `sin` lost all accuracy beyond a few periods).
//! `exp`, `exp2`, `log`, `log2`, `atan`, `asin`, `acos` are Cephes' `f32` routines on the bits
//! (subnormal arguments and results included: powers of two are built from bits, never
//! `ldexp`, which may flush); `sigmoid` and `atan2` (C99 at zeros and infinities) are built on
//! them; `pow` keeps C99's special values and computes `2^(y log2|x|)` with `log2|x|` and the
//! product carried as double-`f32` pairs (Knuth's two-sum, Dekker's two-product; about 2^-33
//! relative), since rounding `y log2|x|` to one `f32` cost up to 93 ULP on large and tiny
//! results; `sin`, `cos`, `tan` for
//! `|x| <= 32768` use a Cody–Waite reduction by π/2 in six parts, the first five of 9 bits, so
//! that every product is exact without a fused multiply-add (lavapipe splits `fma`), and beyond
//! it Payne and Hanek's reduction on the bits (the significand times 192 bits of 2/π in 32-bit
//! integer words, as CUDA's slow path; the built-ins gave ±1 at 1e30 and FLT_MAX on lavapipe),
//! before Cephes' polynomials; `tanh` is Cephes' polynomial below 0.625 and the built-in above. Every operand of a rounding op (`sqrt`, the transcendentals) and each
//! reduction step passes through `rfx_exact`, so the driver cannot rewrite across ops: NIR
//! turns `sqrt(exp2(a))` into `exp2(0.5 * a)`. The odd functions return `x` below `2^-12`
//! (keeps `-0` and subnormals). Max error measured on lavapipe (llvmpipe, Mesa 22.3.6, LLVM
//! 15) against the f64 oracle rounded to f32, 20,000 inputs per op (a quarter special values,
//! a quarter random bit patterns, half uniform in the range shown), plus, for `sin`, `cos`,
//! `tan`, the arguments next to every zero below 32768 and 40,000 beyond it up to FLT_MAX;
//! `tests/conformance.rs` (`transcendentals_within_documented_ulp_bounds`,
//! `trigonometric_functions_meet_their_bound_near_every_zero`) and `tests/huge_arguments.rs`
//! assert the bound column, which
//! [`MetalBackend`]'s `ulp_bound` states on lavapipe:
//!
//! | op | where the bound holds | measured max ULP | bound |
//! |---|---|---|---|
//! | exp, exp2, log, log2 | every input | 1 | 2 |
//! | sin, cos | every input | 1 random, 2 next to the zeros, 1 beyond 32768 | 3 |
//! | tan | every input | 3 random, 4 next to the zeros, 3 beyond 32768 | 6 |
//! | tanh | [-10, 10], normal arguments and results | 2 | 2 |
//! | atan, asin, acos | every input | 2, 2, 1 | 3 |
//! | sigmoid | every input | 2 | 4 |
//! | erf | every input (musl's `erff` on rfx's `exp`) | 1 | 2 |
//! | pow | every input (results from subnormal to overflow) | 1 | 2 |
//! | atan2 | every input | 3 | 4 |
//!
//! **lavapipe specifics** the code generator works around: Mesa's NIR treats SPIR-V float ops
//! as inexact (it fuses `a * b + c` into an FMA and folds `x - x` to 0), so `add`, `sub`,
//! `mul`, `div` route their operands through `rfx_exact`, a bit-or with a zero the compiler
//! cannot see (`gid.z`); and llvmpipe ends an invocation's loops after 65535 iterations in
//! total, so the innermost reduced dim of a short reduction is unrolled 16 points per
//! iteration, a workgroup tree needs `ceil(points / 64)` iterations per invocation, and the
//! backend returns `Unsupported::Size` on llvmpipe for a reduction that would still exceed the
//! budget (about four million points per output element) from `compile`, before anything
//! runs, instead of a silently truncated sum.
//!
//! **On NVIDIA's Vulkan driver** (an H100, driver 580.159, measured 2026-11-23 by running this
//! crate's conformance tests there) the exactness above does not hold, and nothing in WGSL
//! lets rfx ask for it: the driver flushes subnormal inputs and results to zero (so `-3e-39`
//! negates to `0`, and `-0 < 1e-40` is false), `div` is off by up to 1 ULP, and the
//! transcendentals were the driver's fast versions. Max ULP over the ranges of the table then:
//! tanh 1, and for the built-ins since replaced by rfx's own (not re-run there) exp 58, exp2 2,
//! log 19, log2 22, sin 301291, cos 354161, tan 182153 (their argument reduction was poor
//! beyond a few periods), atan 2, asin 2, acos 2, sigmoid 60, pow 88, atan2 2. `add`, `sub`,
//! `mul`, comparisons on normal numbers, integer ops, casts and reductions of normal numbers
//! matched the interpreter there. Apple GPUs compile MSL with fast math by default, with
//! similar consequences, and wgpu gives no way out: `wgpu-hal` 30.0.1 compiles the MSL with a
//! default `MTLCompileOptions` (`metal/device.rs`) and sets neither `fastMathEnabled` nor
//! `mathMode`. `rfx_exact` keeps the optimiser from rewriting across an op, but fast math also
//! licenses approximate `div` and `sqrt` and lets the compiler assume that no value is NaN or
//! infinite, which the special-value handling relies on. Exact results on a Mac need a wgpu
//! option or rfx's own Metal path; neither can be tested without a Mac. rfx's own transcendentals use only `add`, `sub`, `mul`, `div`,
//! `sqrt`, `floor`, `round` and bit operations, so a 1-ULP `div` and flushed subnormals are
//! what they meet there; exact division written in WGSL, and a bound table per device, are
//! future work.
//!
//! # Public API
//!
//! [`MetalBackend`] (`rfx_lower::Backend` named `"metal"`), [`wgsl`] and [`msl`] for the text
//! dumps. Nothing else is public.

#![deny(missing_docs)]

mod backend;
mod codegen;
mod gpu;
mod helpers;
mod shader;

pub use backend::{MetalBackend, MetalProgram, msl, wgsl};
pub use gpu::DeviceArray;

/// The backend's registry name, used in every error it returns.
const BACKEND: &str = "metal";
