//! The measured program of `cargo xtask icount`, the instruction-count gate: one path per
//! run, `icount PATH ITERATIONS`, called `ITERATIONS` times inside [`icount_measured_region`].
//! xtask runs it under `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect=*icount_measured_region*`, so only the calls are counted: not the process
//! start, not building the kernels, not the warm-up call, not compiling (except for the
//! compile path, whose region is exactly the compile).
//!
//! The kernels are `rfx bench`'s ([`rfx_cli::bench::kernels`]); the compile path traces
//! through the facade the same 20-op chain that `rfx-codegen-cpu`'s criterion bench
//! `compile_hir_to_native_20_ops` parses from text. Every path is compiled with one thread and
//! a pinned CPU target ([`config`]), so the counts are the same on any x86-64 machine: the
//! base instruction set ([`TARGET`]), or, for the paths named `_avx2`, x86-64-v3, whose
//! kernels run as assembled AVX2 passes (an exact pass, a reduction pass). On a CPU without
//! AVX2 and FMA the backend refuses that target, and those paths are skipped (exit status
//! [`UNAVAILABLE`]). No `_avx2` path calls a
//! transcendental routine: the routines are Rust compiled at the test profile's opt-level 1,
//! which does not vectorise them, so their counts would say nothing of the release build's.
//!
//! `cargo run --release -p rfx-cli --no-default-features --example icount -- --list` prints
//! the paths.

use std::hint::black_box;

use anyhow::{Context, anyhow, bail};
use rfx::{
    ArrayView, ArrayViewMut, CompileConfig, CpuTarget, DType, Jit, JitError, KernelSource, Tensor, TensorType,
};
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, Scalar};
use rfx_lower::BackendError;
use rfx_runtime::RuntimeError;

/// The measured paths: name and what one iteration does.
const PATHS: [(&str, &str); 8] = [
    (
        "pid_clip_n1.run",
        "BoundKernel::run of the PID clip at n = 1 (views, every argument checked)",
    ),
    (
        "pid_clip_n1.run_args",
        "BoundKernel::run_args of the PID clip at n = 1 (arguments made and checked once)",
    ),
    (
        "pid_clip_n1.jit_call",
        "Jit::call of the PID clip at n = 1 (the cached call: signature lookup, owned outputs)",
    ),
    (
        "compile_20op",
        "trace + optimise + lower + compile of the 20-op chain at f32[64] (a fresh Jit each time)",
    ),
    (
        "fused_chain_n1024.run_args",
        "run_args of fused_chain at n = 1,024",
    ),
    (
        "chain10_n1024.run_args",
        "run_args of the 10-op chain at n = 1,024",
    ),
    (
        "pid_clip_n1024_avx2.run_args",
        "run_args of the PID clip at n = 1,024 for x86-64-v3 (an assembled exact pass)",
    ),
    (
        "value_and_grad_sum_sq_n1024_avx2.run_args",
        "run_args of the value and gradient of sum(x²) at n = 1,024 for x86-64-v3 (a reduction pass)",
    ),
];

/// The exit status of a path this CPU cannot run: an `_avx2` path whose target the backend
/// refuses (`BackendError::Unavailable`: the CPU, as valgrind's CPUID reports it, lacks AVX2 or
/// FMA).
const UNAVAILABLE: i32 = 3;

/// The CPU target every path compiles for: x86-64's base instruction set (SSE2; no FMA, no
/// AVX2 routines), so that the generated code, and with it the counts, are the same on every
/// x86-64 machine. (The host target would follow what valgrind's CPUID reports.)
const TARGET: CpuTarget = CpuTarget::Baseline;

/// Every path compiles with this: one thread (no worker pool whose waits callgrind would
/// count) and `target` ([`TARGET`], or x86-64-v3 for the `_avx2` paths).
fn config(target: CpuTarget) -> CompileConfig {
    let mut config = CompileConfig::default().cpu_target(target);
    config.compile.max_threads = Some(1);
    config
}

/// The only function whose instructions callgrind counts: `call`, `iterations` times.
#[inline(never)]
fn icount_measured_region(
    iterations: u64,
    call: &mut dyn FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    for _ in 0..iterations {
        call()?;
    }
    Ok(())
}

/// `rfx bench`'s kernel `name` at `n` elements, compiled with [`config`] for `target`.
fn bench_jit(
    name: &str,
    n: usize,
    target: CpuTarget,
) -> anyhow::Result<(Jit<KernelSource>, Vec<Array>, Vec<TensorType>)> {
    let kernel = rfx_cli::bench::kernels(n)?
        .into_iter()
        .find_map(|(k, kernel)| (k == name).then_some(kernel))
        .ok_or_else(|| anyhow!("rfx bench has no kernel `{name}`"))?;
    let inputs = random_inputs(&mut TestRng::new(7), &kernel, 0.0);
    let types = inputs
        .iter()
        .map(|a| TensorType::new(a.dtype(), a.shape().clone()))
        .collect();
    Ok((
        Jit::with_config(KernelSource::new(kernel), config(target)),
        inputs,
        types,
    ))
}

/// The pre-bound call of `rfx bench`'s kernel `name` at `n` elements, compiled for `target`.
fn run_args(name: &str, n: usize, target: CpuTarget, iterations: u64) -> anyhow::Result<()> {
    let (jit, inputs, types) = bench_jit(name, n, target)?;
    let mut bound = match jit.bind(&types) {
        Err(JitError::Runtime(RuntimeError::Backend(BackendError::Unavailable { reason, .. }))) => {
            eprintln!("icount: {name} for the `{target}` target cannot run here: {reason}");
            std::process::exit(UNAVAILABLE);
        }
        bound => bound?,
    };
    let mut args = bound.args()?;
    for (i, input) in inputs.iter().enumerate() {
        args.set_input(i, input.view())?;
    }
    bound.run_args(&mut args)?;
    icount_measured_region(iterations, &mut || Ok(bound.run_args(black_box(&mut args))?))
}

/// The checked call of the PID clip on views.
fn pid_run(iterations: u64) -> anyhow::Result<()> {
    let (jit, inputs, types) = bench_jit("pid_clip", 1, TARGET)?;
    let mut bound = jit.bind(&types)?;
    let shape = bound
        .output_shapes()
        .first()
        .cloned()
        .ok_or_else(|| anyhow!("pid_clip has an output"))?;
    let mut output = Array::filled(Scalar::zero(DType::F32), shape);
    // Fixed-size arrays of views, as a real-time caller holds them: no allocation per call.
    let views: [ArrayView<'_>; 3] = [inputs[0].view(), inputs[1].view(), inputs[2].view()];
    let mut outs: [ArrayViewMut<'_>; 1] = [output.view_mut()];
    let mut call = || -> anyhow::Result<()> { Ok(bound.run(black_box(&views), black_box(&mut outs))?) };
    call()?;
    icount_measured_region(iterations, &mut call)
}

/// The facade's cached call of the PID clip.
fn pid_jit_call(iterations: u64) -> anyhow::Result<()> {
    let (jit, inputs, _) = bench_jit("pid_clip", 1, TARGET)?;
    let slice =
        |i: usize| -> anyhow::Result<&[f32]> { inputs[i].as_slice::<f32>().context("pid_clip input is f32") };
    let (e, i, d) = (slice(0)?, slice(1)?, slice(2)?);
    jit.call((e, i, d))?;
    icount_measured_region(iterations, &mut || {
        black_box(jit.call(black_box((e, i, d)))?);
        Ok(())
    })
}

/// The 20-op chain of `compile_hir_to_native_20_ops`, traced.
fn chain20(x: Tensor, y: Tensor) -> Tensor {
    let (a, b) = (1.5f32, 0.5f32);
    let q = x * a + y;
    let d = q * b - x.sin();
    let e = d * y.cos();
    let ex = (-(x * x)).exp();
    let f = e + ex;
    let k = f * f - x;
    k.max(y).min(b).abs().sqrt()
}

/// Trace, optimise, lower and compile the 20-op chain, from a fresh cache each time.
fn compile_20op(iterations: u64) -> anyhow::Result<()> {
    let ty = TensorType::new(DType::F32, [64]);
    let types = [ty.clone(), ty];
    let compile = || -> anyhow::Result<()> {
        let jit = rfx::jit_with(chain20, config(TARGET));
        let exe = jit.executable(black_box(&types))?;
        if exe.hir().op_count() < 20 {
            bail!("the 20-op chain traced to {} ops", exe.hir().op_count());
        }
        black_box(exe);
        Ok(())
    };
    // The first compile builds the process's one-time state (the ISA, the backend registry).
    compile()?;
    let mut compile = compile;
    icount_measured_region(iterations, &mut compile)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--list") => {
            for (name, what) in PATHS {
                println!("{name:<42} {what}");
            }
            return Ok(());
        }
        Some("--target") => {
            println!("{TARGET}");
            return Ok(());
        }
        _ => {}
    }
    let [path, iterations] = &args[..] else {
        bail!("usage: icount PATH ITERATIONS (or --list, or --target)");
    };
    let iterations: u64 = iterations
        .parse()
        .with_context(|| format!("ITERATIONS must be a count, got `{iterations}`"))?;
    let v3 = CpuTarget::Avx2;
    match path.as_str() {
        "pid_clip_n1.run" => pid_run(iterations),
        "pid_clip_n1.run_args" => run_args("pid_clip", 1, TARGET, iterations),
        "pid_clip_n1.jit_call" => pid_jit_call(iterations),
        "compile_20op" => compile_20op(iterations),
        "fused_chain_n1024.run_args" => run_args("fused_chain", 1024, TARGET, iterations),
        "chain10_n1024.run_args" => run_args("chain10", 1024, TARGET, iterations),
        "pid_clip_n1024_avx2.run_args" => run_args("pid_clip", 1024, v3, iterations),
        "value_and_grad_sum_sq_n1024_avx2.run_args" => {
            run_args("value_and_grad_sum_sq", 1024, v3, iterations)
        }
        other => bail!("unknown path `{other}` (see --list)"),
    }
}
