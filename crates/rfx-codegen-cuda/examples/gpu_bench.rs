//! GPU benchmark of the CUDA backend: achieved bandwidth of large fused kernels as a fraction
//! of a device-to-device copy, and the latency of a cached PID kernel.
//!
//! ```sh
//! cargo run --release -p rfx-codegen-cuda --example gpu_bench -- [--size N] [--iterations K] [--json FILE]
//! ```
//!
//! Bandwidth: each kernel is launched `K` times on device-resident arrays and the stream is
//! synchronised once; the time per launch gives GB/s of useful traffic (inputs read plus
//! outputs written, once each). The reference is `DeviceArray::copy_from_device` of an
//! `N`-element f32 array (read plus write), measured the same way in the same run.
//! Latency: the PID-with-clip kernel at n = 1, per call: the host round trip
//! (`Compiled::run`: copy in, launch, copy out, wait), the resident call (`run_resident`:
//! launch and wait) and the enqueue cost alone (launches back to back, one wait).

use std::time::{Duration, Instant};

use rfx_codegen_cuda::{CudaBackend, DeviceArray};
use rfx_ir::hir::{self, Kernel};
use rfx_ir::lir::LirProgram;
use rfx_ir::{Array, DType, Scalar, TensorType};
use rfx_lower::{Backend, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

fn lir_of(text: &str) -> LirProgram {
    let kernel: Kernel = hir::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

fn elementwise(name: &str, n: usize, body: &str, out: &str) -> String {
    format!("kernel {name} {{ %x = input x : f32[{n}] %y = input y : f32[{n}] {body} output out = {out} }}")
}

struct Row {
    name: &'static str,
    micros: f64,
    bytes: f64,
}

fn time_launches(iterations: usize, mut launch: impl FnMut()) -> f64 {
    for _ in 0..5 {
        launch();
    }
    CudaBackend.synchronize().expect("synchronize");
    let start = Instant::now();
    for _ in 0..iterations {
        launch();
    }
    CudaBackend.synchronize().expect("synchronize");
    start.elapsed().as_secs_f64() * 1e6 / iterations as f64
}

fn percentiles(mut samples: Vec<Duration>) -> [f64; 3] {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    [at(0.5), at(0.99), at(0.999)]
}

fn main() {
    let mut size = 1usize << 24;
    let mut iterations = 200usize;
    let mut json = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--size" => size = args.next().and_then(|v| v.parse().ok()).expect("--size N"),
            "--iterations" => iterations = args.next().and_then(|v| v.parse().ok()).expect("--iterations K"),
            "--json" => json = args.next(),
            other => panic!("unknown argument {other}"),
        }
    }
    if let Err(e) = CudaBackend.check_available() {
        println!("skipped: no CUDA device ({e})");
        return;
    }
    let n = size;
    let ty = TensorType::new(DType::F32, [n]);
    let host: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 250.0)
        .collect();
    let x = CudaBackend
        .to_device(Array::from_slice(&host).view())
        .expect("to_device");
    let y = CudaBackend
        .to_device(Array::from_slice(&host).view())
        .expect("to_device");
    let mut out = CudaBackend.zeros(&ty).expect("zeros");
    let mut scalar = CudaBackend
        .zeros(&TensorType::new(DType::F32, rfx_ir::Shape::scalar()))
        .expect("zeros");

    let mut rows = Vec::new();
    let mut copy_dst = CudaBackend.zeros(&ty).expect("zeros");
    let copy = time_launches(iterations, || copy_dst.copy_from_device(&x).expect("copy"));
    rows.push(Row {
        name: "device-to-device copy",
        micros: copy,
        bytes: 8.0 * n as f64,
    });

    let kernels: [(&'static str, String, f64); 3] = [
        (
            "add",
            elementwise("add", n, &format!("%o = add %x, %y : f32[{n}]"), "%o"),
            12.0,
        ),
        (
            "fused_chain sin(x*2)+y",
            elementwise(
                "fused_chain",
                n,
                &format!(
                    "%two = const 2.0 : f32[] %a = mul %x, %two : f32[{n}] %s = sin %a : f32[{n}] %o = add %s, %y : f32[{n}]"
                ),
                "%o",
            ),
            12.0,
        ),
        (
            "chain10",
            elementwise(
                "chain10",
                n,
                &format!(
                    "%c15 = const 1.5 : f32[] %c05 = const 0.5 : f32[] %a = mul %x, %c15 : f32[{n}] \
                     %b = add %a, %y : f32[{n}] %c = mul %b, %c05 : f32[{n}] %d = sin %x : f32[{n}] \
                     %e = sub %c, %d : f32[{n}] %f = cos %y : f32[{n}] %g = mul %e, %f : f32[{n}] \
                     %h = mul %x, %x : f32[{n}] %i = neg %h : f32[{n}] %j = exp %i : f32[{n}] %k = add %g, %j : f32[{n}]"
                ),
                "%k",
            ),
            12.0,
        ),
    ];
    for (name, text, bytes_per) in kernels {
        let program = CudaBackend
            .compile_program(&lir_of(&text), &Default::default())
            .expect("compile");
        let t = time_launches(iterations, || {
            program.launch(&[&x, &y], &mut [&mut out]).expect("launch");
        });
        rows.push(Row {
            name,
            micros: t,
            bytes: bytes_per * n as f64,
        });
    }
    let sum = CudaBackend
        .compile_program(
            &lir_of(&format!(
                "kernel total {{ %x = input x : f32[{n}] %s = sum %x axes [0] : f32[] output s = %s }}"
            )),
            &Default::default(),
        )
        .expect("compile sum");
    let t = time_launches(iterations, || {
        sum.launch(&[&x], &mut [&mut scalar]).expect("launch");
    });
    rows.push(Row {
        name: "sum (tree reduction)",
        micros: t,
        bytes: 4.0 * n as f64,
    });

    let copy_gbs = 8.0 * n as f64 / copy / 1e3;
    println!(
        "rfx CUDA backend, n = {n} f32, {iterations} launches each (time per launch, one wait at the end)"
    );
    println!("{:<26} {:>10} {:>10} {:>12}", "kernel", "µs", "GB/s", "of copy");
    for row in &rows {
        let gbs = row.bytes / row.micros / 1e3;
        println!(
            "{:<26} {:>10.1} {:>10.0} {:>11.0}%",
            row.name,
            row.micros,
            gbs,
            100.0 * gbs / copy_gbs
        );
    }

    // Latency of a cached PID kernel at n = 1.
    let pid = lir_of(
        "kernel pid_clip { %e = input error : f32[1] %i = input integral : f32[1] %d = input derivative : f32[1] \
         %kp = const 1.2 : f32[] %ki = const 0.3 : f32[] %kd = const 0.05 : f32[] %lo = const -1.0 : f32[] \
         %hi = const 1.0 : f32[] %pe = mul %kp, %e : f32[1] %ii = mul %ki, %i : f32[1] %dd = mul %kd, %d : f32[1] \
         %s1 = add %pe, %ii : f32[1] %s2 = add %s1, %dd : f32[1] %u = clamp %s2, %lo, %hi : f32[1] output u = %u }",
    );
    let program = CudaBackend
        .compile_program(&pid, &Default::default())
        .expect("compile pid");
    let compiled = program.compiled();
    let (e, i, d) = (
        Array::from_slice(&[0.3f32]),
        Array::from_slice(&[0.1f32]),
        Array::from_slice(&[-0.2f32]),
    );
    let mut u = Array::filled(Scalar::F32(0.0), [1]);
    let calls = 20_000;
    let mut scratch = Scratch::new();
    let mut host_samples = Vec::with_capacity(calls);
    for k in 0..calls + 100 {
        let start = Instant::now();
        compiled
            .run(&[e.view(), i.view(), d.view()], &mut [u.view_mut()], &mut scratch)
            .expect("run");
        if k >= 100 {
            host_samples.push(start.elapsed());
        }
    }
    let expected = (1.2f32 * 0.3 + 0.3 * 0.1 + 0.05 * -0.2).clamp(-1.0, 1.0);
    assert!(
        (u.to_f64_vec()[0] - f64::from(expected)).abs() < 1e-6,
        "PID result {u:?}"
    );
    let de: DeviceArray = CudaBackend.to_device(e.view()).expect("to_device");
    let di = CudaBackend.to_device(i.view()).expect("to_device");
    let dd = CudaBackend.to_device(d.view()).expect("to_device");
    let mut du = CudaBackend
        .zeros(&TensorType::new(DType::F32, [1]))
        .expect("zeros");
    let mut resident_samples = Vec::with_capacity(calls);
    for k in 0..calls + 100 {
        let start = Instant::now();
        program
            .run_resident(&[&de, &di, &dd], &mut [&mut du])
            .expect("run_resident");
        if k >= 100 {
            resident_samples.push(start.elapsed());
        }
    }
    let enqueue = time_launches(calls, || {
        program.launch(&[&de, &di, &dd], &mut [&mut du]).expect("launch");
    });
    let host = percentiles(host_samples);
    let resident = percentiles(resident_samples);
    println!("\nPID with clip, n = 1, {calls} calls (µs):");
    println!("{:<44} {:>8} {:>8} {:>8}", "path", "p50", "p99", "p99.9");
    println!(
        "{:<44} {:>8.2} {:>8.2} {:>8.2}",
        "host arrays (copy in, launch, copy out, wait)", host[0], host[1], host[2]
    );
    println!(
        "{:<44} {:>8.2} {:>8.2} {:>8.2}",
        "resident (launch, wait)", resident[0], resident[1], resident[2]
    );
    println!("{:<44} {:>8.2}", "enqueue only (back-to-back launches)", enqueue);

    if let Some(path) = json {
        let mut text = String::from("{\n  \"schema\": 1,\n  \"n\": ");
        text.push_str(&format!(
            "{n},\n  \"iterations\": {iterations},\n  \"bandwidth\": [\n"
        ));
        for (k, row) in rows.iter().enumerate() {
            let gbs = row.bytes / row.micros / 1e3;
            text.push_str(&format!(
                "    {{\"kernel\": \"{}\", \"micros\": {:.3}, \"gb_per_s\": {:.1}, \"fraction_of_copy\": {:.3}}}{}\n",
                row.name,
                row.micros,
                gbs,
                gbs / copy_gbs,
                if k + 1 < rows.len() { "," } else { "" }
            ));
        }
        text.push_str(&format!(
            "  ],\n  \"pid_latency_us\": {{\"host_p50\": {:.3}, \"host_p99\": {:.3}, \"host_p999\": {:.3}, \
             \"resident_p50\": {:.3}, \"resident_p99\": {:.3}, \"resident_p999\": {:.3}, \"enqueue\": {:.3}}}\n}}\n",
            host[0], host[1], host[2], resident[0], resident[1], resident[2], enqueue
        ));
        std::fs::write(&path, text).expect("write the JSON report");
        println!("\nwrote {path}");
    }
}
