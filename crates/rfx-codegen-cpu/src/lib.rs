//! `rfx-codegen-cpu`: native CPU kernels from LIR through Cranelift.
//!
//! **Owns:** LIR → Cranelift IR (per kernel, a loop shape chosen from its size and
//! dimensions: straight-line code for small kernels, vector loops over the innermost dimension,
//! reductions with lane-parallel partial accumulators in the LIR's documented order or with
//! outputs in lanes, scans; f32/f64/i32/bool), so results are bit-identical to the LIR
//! interpreter for every exactly-rounded op; vectorised polynomial transcendentals with
//! documented ULP bounds (inline Cranelift SIMD everywhere; on targets with AVX2 and FMA,
//! long elementwise loops call 8-lane routines compiled ahead of time on tiles of 512
//! elements instead); the persistent thread pool for large kernels; and the safe wrapper
//! ([`CpuCompiled`]) that checks every buffer before JIT code sees a pointer.
//!
//! **Program loops** (`LirProgram::loops`, [`rfx_ir::repeat`]): a program whose kernels all run
//! as one function compiles each loop into a counted loop of that function, whose code does
//! not depend on the trip count, and leaves a `while_loop` after the iteration that clears its
//! exit flag; otherwise the call walks the same tree of steps over the kernels' functions
//! (threads split each kernel as usual), reading the flag after each iteration. Neither
//! allocates per call.
//!
//! **Targets** (`CompileOptions::cpu_target`): `host` probes this CPU once per process;
//! `baseline` (x86-64: SSE2) uses no fused multiply-add and no AVX2 routine; `avx2`
//! (x86-64-v3) uses both and is `Unavailable` on a CPU without them. The emitter reads the
//! target's features (`target::Features`) and never probes the CPU itself.
//!
//! **Fast math** (`CompileOptions::fast_math`): float `a * b ± c` whose product was computed in
//! the same kernel becomes one fused multiply-add (Cranelift `fma`) where the target has FMA; the
//! result is rounded once, so it can differ from the exact mode's two roundings (never less
//! accurate). Nothing else changes; exact mode never contracts. `dump_with` shows the code for
//! either mode (`rfx dump --stage clif --fast-math`).
//!
//! **Stack frames** are bounded: values staged across a tile's routine calls share buffers by
//! liveness (at most 64 KiB of them; a kernel that needs more runs untiled), every generated
//! function's frame is read from Cranelift's compiled code and refused above 1 MiB
//! (`Unsupported::Size`; about 250 KiB at 20,000 ops), frames above 4 KiB probe each page as
//! they grow (inline stack probes, none in smaller frames), and the pool's workers have 4 MiB
//! stacks. `docs/errors.md` (Limits) states the bounds.
//!
//! **Depends on:** `rfx-ir`, `rfx-lower`, `cranelift-*`. **May not depend on:** other code
//! generators, `rfx-opt` or `rfx-runtime`. Cranelift types never appear in the public API.

#![deny(missing_docs)]

mod aot;
#[cfg(target_arch = "x86_64")]
mod asm;
mod backend;
mod codegen;
mod imports;
mod math;
mod ops;
mod pool;
mod steps;
mod target;
#[cfg(test)]
mod test_rng;
mod transcendental;

pub use backend::{CpuBackend, CpuCompiled, compile, dump, dump_program, dump_with};
