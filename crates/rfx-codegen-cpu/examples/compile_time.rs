//! Where the compile time of a one-op and a 20-op kernel goes: optimisation (e-graph, fusion), lowering and
//! Cranelift code generation, each the median of 200 runs.
//!
//! `cargo run --release -p rfx-codegen-cpu --example compile_time`

use std::time::{Duration, Instant};

use rfx_codegen_cpu::CpuBackend;
use rfx_lower::{Backend, CompileOptions, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

const ADD: &str = "kernel add {\n %x = input x : f32[64]\n %y = input y : f32[64]\n %r = add %x, %y : f32[64]\n output out = %r\n}";

/// The kernel of the `compile_hir_to_native_20_ops` criterion benchmark.
const CHAIN20: &str = "kernel compile20 {\n %x = input x : f32[64]\n %y = input y : f32[64]\n %a = const 1.5 : f32[]\n %b = const 0.5 : f32[]\n %p = mul %x, %a : f32[64]\n %q = add %p, %y : f32[64]\n %h = mul %q, %b : f32[64]\n %sx = sin %x : f32[64]\n %d = sub %h, %sx : f32[64]\n %cy = cos %y : f32[64]\n %e = mul %d, %cy : f32[64]\n %xx = mul %x, %x : f32[64]\n %nx = neg %xx : f32[64]\n %ex = exp %nx : f32[64]\n %f = add %e, %ex : f32[64]\n %g = mul %f, %f : f32[64]\n %k = sub %g, %x : f32[64]\n %l = max %k, %y : f32[64]\n %m = min %l, %b : f32[64]\n %o = abs %m : f32[64]\n %r = sqrt %o : f32[64]\n output out = %r\n}";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `--only add` or `--only chain` measures one kernel (for profilers).
    let only = std::env::args().skip_while(|a| a != "--only").nth(1);
    for (name, text) in [("add", ADD), ("20-op chain", CHAIN20)] {
        if only.as_deref().is_none_or(|o| name.contains(o)) {
            measure(name, text)?;
        }
    }
    Ok(())
}

fn measure(name: &str, text: &str) -> Result<(), Box<dyn std::error::Error>> {
    let kernel = rfx_ir::hir::parse(text)?;
    let (mut opt, mut low, mut code, mut total) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut free = Vec::new();
    for _ in 0..200 {
        let t0 = Instant::now();
        let (mir, _) = optimize(&kernel, &OptConfig::default())?;
        let t1 = Instant::now();
        let (lir, _) = lower(&mir, &LowerConfig::default())?;
        let t2 = Instant::now();
        let compiled = CpuBackend.compile(&lir, &CompileOptions::default())?;
        let t3 = Instant::now();
        let compiled = std::hint::black_box(compiled);
        let t4 = Instant::now();
        drop(compiled);
        free.push(t4.elapsed());
        opt.push(t1 - t0);
        low.push(t2 - t1);
        code.push(t3 - t2);
        total.push(t3 - t0);
    }
    println!(
        "{name}: optimize {:?}, lower {:?}, codegen {:?}, total {:?}; freeing the code {:?} (medians of 200)",
        median(opt),
        median(low),
        median(code),
        median(total),
        median(free)
    );
    Ok(())
}
