//! Run time of compiled kernels (per call, one thread unless the kernel is large) and the
//! compile time from HIR to native code. Peers (gcc, NumPy, JAX) are measured by
//! `../shared/peers`; `rfx bench` prints the side-by-side table.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use rfx_codegen_cpu::CpuBackend;
use rfx_ir::hir::{self, Kernel};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, Scalar};
use rfx_lower::{Backend, CompileOptions, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

fn kernel(text: &str) -> Kernel {
    hir::parse(text).expect("kernel")
}

fn elementwise(name: &str, n: usize, body: &str) -> Kernel {
    kernel(&format!(
        "kernel {name} {{\n %x = input x : f32[{n}]\n %y = input y : f32[{n}]\n{body}\n output out = %r\n}}"
    ))
}

fn to_lir(k: &Kernel) -> LirProgram {
    let (mir, _) = optimize(k, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

fn bench_run(c: &mut Criterion, name: &str, k: &Kernel) {
    let lir = to_lir(k);
    let compiled = CpuBackend
        .compile(&lir, &CompileOptions::default())
        .expect("compile");
    let inputs = random_inputs(&mut TestRng::new(1), k, 0.0);
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let mut outputs: Vec<Array> = lir
        .outputs()
        .map(|(_, _, ty)| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
        .collect();
    let mut scratch = Scratch::new();
    c.bench_function(name, |b| {
        b.iter(|| {
            let mut outs: Vec<_> = outputs.iter_mut().map(Array::view_mut).collect();
            compiled
                .run(black_box(&views), &mut outs, &mut scratch)
                .expect("run");
        })
    });
}

fn benches(c: &mut Criterion) {
    let n = 65536;
    bench_run(
        c,
        "add_65536",
        &elementwise("add", n, " %r = add %x, %y : f32[65536]"),
    );
    bench_run(
        c,
        "sin2y_65536",
        &elementwise(
            "sin2y",
            n,
            " %c = const 2.0 : f32[]\n %m = mul %x, %c : f32[65536]\n %s = sin %m : f32[65536]\n %r = add %s, %y : f32[65536]",
        ),
    );
    bench_run(
        c,
        "chain10_65536",
        &elementwise(
            "chain10",
            n,
            " %a = const 1.5 : f32[]\n %b = const 0.5 : f32[]\n %p = mul %x, %a : f32[65536]\n %q = add %p, %y : f32[65536]\n %h = mul %q, %b : f32[65536]\n %sx = sin %x : f32[65536]\n %d = sub %h, %sx : f32[65536]\n %cy = cos %y : f32[65536]\n %e = mul %d, %cy : f32[65536]\n %xx = mul %x, %x : f32[65536]\n %nx = neg %xx : f32[65536]\n %ex = exp %nx : f32[65536]\n %r = add %e, %ex : f32[65536]",
        ),
    );
    bench_run(
        c,
        "pid_clip_1",
        &kernel(
            "kernel pid {\n %e = input e : f32[1]\n %i = input i : f32[1]\n %d = input d : f32[1]\n %kp = const 1.2 : f32[]\n %ki = const 0.3 : f32[]\n %kd = const 0.05 : f32[]\n %lo = const -1.0 : f32[]\n %hi = const 1.0 : f32[]\n %a = mul %kp, %e : f32[1]\n %b = mul %ki, %i : f32[1]\n %c = mul %kd, %d : f32[1]\n %s = add %a, %b : f32[1]\n %t = add %s, %c : f32[1]\n %r = clamp %t, %lo, %hi : f32[1]\n output u = %r\n}",
        ),
    );
    bench_run(
        c,
        "sum_sq_65536",
        &kernel(
            "kernel ss {\n %x = input x : f32[65536]\n %q = mul %x, %x : f32[65536]\n %s = sum %q axes [0] : f32[]\n output s = %s\n}",
        ),
    );
    // Small matrix products, as a Kalman predict or a kinematics chain makes them.
    for (dtype, n) in [("f64", 6), ("f32", 8)] {
        bench_run(
            c,
            &format!("matmul_{n}x{n}_{dtype}"),
            &kernel(&format!(
                "kernel mm {{\n %a = input a : {dtype}[{n},{n}]\n %b = input b : {dtype}[{n},{n}]\n \
                 %a3 = reshape %a : {dtype}[{n},{n},1]\n %b3 = reshape %b : {dtype}[1,{n},{n}]\n \
                 %p = mul %a3, %b3 : {dtype}[{n},{n},{n}]\n %r = sum %p axes [1] : {dtype}[{n},{n}]\n output c = %r\n}}"
            )),
        );
    }
    bench_run(
        c,
        "add_16m",
        &elementwise("add16m", 1 << 24, " %r = add %x, %y : f32[16777216]"),
    );

    let chain = elementwise(
        "compile20",
        64,
        " %a = const 1.5 : f32[]\n %b = const 0.5 : f32[]\n %p = mul %x, %a : f32[64]\n %q = add %p, %y : f32[64]\n %h = mul %q, %b : f32[64]\n %sx = sin %x : f32[64]\n %d = sub %h, %sx : f32[64]\n %cy = cos %y : f32[64]\n %e = mul %d, %cy : f32[64]\n %xx = mul %x, %x : f32[64]\n %nx = neg %xx : f32[64]\n %ex = exp %nx : f32[64]\n %f = add %e, %ex : f32[64]\n %g = mul %f, %f : f32[64]\n %k = sub %g, %x : f32[64]\n %l = max %k, %y : f32[64]\n %m = min %l, %b : f32[64]\n %o = abs %m : f32[64]\n %r = sqrt %o : f32[64]",
    );
    c.bench_function("compile_hir_to_native_20_ops", |b| {
        b.iter(|| {
            let lir = to_lir(black_box(&chain));
            CpuBackend
                .compile(&lir, &CompileOptions::default())
                .expect("compile")
        })
    });
}

criterion_group!(kernel_benches, benches);
criterion_main!(kernel_benches);
