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
//! (`Compiled::run`: copy in, launch, copy out, wait; through the staging buffer and, in
//! alternating rounds of the same run, array by array), the resident call (`run_resident`:
//! launch and wait) and the enqueue cost alone (launches back to back, one wait); the host
//! round trip of a step with eight inputs and four outputs, staged and array by array; and the
//! time to compile a new kernel (NVRTC and module load, the on-disk PTX cache off), one at a
//! time and on every core.

use std::time::{Duration, Instant};

use rfx_codegen_cuda::{CudaBackend, CudaOptions, CudaProgram, DeviceArray};
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

/// One row of a latency table: the label, then p50, p99 and p99.9 in µs.
fn print_row(label: &str, p: [f64; 3]) {
    println!("{label:<44} {:>8.2} {:>8.2} {:>8.2}", p[0], p[1], p[2]);
}

fn percentiles(mut samples: Vec<Duration>) -> [f64; 3] {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    [at(0.5), at(0.99), at(0.999)]
}

/// Per-call times of host-array calls (`Compiled::run`) of two programs of one signature,
/// taken in alternating rounds so that both see the same machine; `check` sees each program's
/// last outputs.
fn host_call_samples(
    programs: [&CudaProgram; 2],
    inputs: &[Array],
    calls: usize,
    check: impl Fn(&[Array]),
) -> [Vec<Duration>; 2] {
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let mut samples = [Vec::with_capacity(calls), Vec::with_capacity(calls)];
    let rounds = 10;
    for round in 0..rounds {
        for (program, samples) in programs.iter().zip(samples.iter_mut()) {
            let compiled = program.compiled();
            let mut outputs: Vec<Array> = compiled
                .program()
                .outputs()
                .map(|(_, _, ty)| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
                .collect();
            let mut scratch = Scratch::new();
            let warm = if round == 0 { 100 } else { 10 };
            for k in 0..calls / rounds + warm {
                let mut out_views: Vec<_> = outputs.iter_mut().map(Array::view_mut).collect();
                let start = Instant::now();
                compiled.run(&views, &mut out_views, &mut scratch).expect("run");
                if k >= warm {
                    samples.push(start.elapsed());
                }
            }
            check(&outputs);
        }
    }
    samples
}

/// Per-call times of resident calls (`run_resident`: launch and wait) of two programs of one
/// signature in alternating rounds, each with outputs of its own; also the enqueue cost of
/// each (launches back to back). Returns the samples, the enqueue costs and each program's
/// last outputs.
fn resident_call_samples(
    programs: [&CudaProgram; 2],
    inputs: &[&DeviceArray],
    calls: usize,
) -> ([Vec<Duration>; 2], [f64; 2], [Vec<Array>; 2]) {
    let mut outputs: Vec<Vec<DeviceArray>> = programs
        .iter()
        .map(|program| {
            program
                .compiled()
                .program()
                .outputs()
                .map(|(_, _, ty)| CudaBackend.zeros(ty).expect("zeros"))
                .collect()
        })
        .collect();
    let mut samples = [Vec::with_capacity(calls), Vec::with_capacity(calls)];
    let rounds = 10;
    for round in 0..rounds {
        for ((program, samples), outputs) in programs.iter().zip(samples.iter_mut()).zip(outputs.iter_mut()) {
            let mut outs: Vec<&mut DeviceArray> = outputs.iter_mut().collect();
            let warm = if round == 0 { 100 } else { 10 };
            for k in 0..calls / rounds + warm {
                let start = Instant::now();
                program.run_resident(inputs, &mut outs).expect("run_resident");
                if k >= warm {
                    samples.push(start.elapsed());
                }
            }
        }
    }
    let mut enqueue = [0.0; 2];
    for ((program, outputs), enqueue) in programs.iter().zip(outputs.iter_mut()).zip(enqueue.iter_mut()) {
        let mut outs: Vec<&mut DeviceArray> = outputs.iter_mut().collect();
        *enqueue = time_launches(calls, || program.launch(inputs, &mut outs).expect("launch"));
    }
    let back = |outputs: &Vec<DeviceArray>| -> Vec<Array> {
        outputs
            .iter()
            .map(|a| CudaBackend.from_device(a).expect("from_device"))
            .collect()
    };
    (samples, enqueue, [back(&outputs[0]), back(&outputs[1])])
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
    assert!(program.stages_host_arrays());
    let mut unstaged_options = CudaOptions::default();
    unstaged_options.stage_host_arrays = false;
    let unstaged = CudaBackend
        .compile_program_with(&pid, &Default::default(), &unstaged_options)
        .expect("compile pid");
    let (e, i, d) = (
        Array::from_slice(&[0.3f32]),
        Array::from_slice(&[0.1f32]),
        Array::from_slice(&[-0.2f32]),
    );
    let calls = 20_000;
    let expected = (1.2f32 * 0.3 + 0.3 * 0.1 + 0.05 * -0.2).clamp(-1.0, 1.0);
    let [host_samples, unstaged_samples] = host_call_samples(
        [&program, &unstaged],
        &[e.clone(), i.clone(), d.clone()],
        calls,
        |outputs| {
            assert!(
                (outputs[0].to_f64_vec()[0] - f64::from(expected)).abs() < 1e-6,
                "PID result {outputs:?}"
            );
        },
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
    let host_unstaged = percentiles(unstaged_samples);
    let resident = percentiles(resident_samples);
    println!("\nPID with clip, n = 1, {calls} calls (µs):");
    println!("{:<44} {:>8} {:>8} {:>8}", "path", "p50", "p99", "p99.9");
    print_row("host arrays (copy in, launch, copy out, wait)", host);
    print_row("  the same, array by array (no staging)", host_unstaged);
    print_row("resident (launch, wait)", resident);
    println!("{:<44} {:>8.2}", "enqueue only (back-to-back launches)", enqueue);

    // A wider control step: eight inputs and four outputs, host arrays.
    let step = lir_of(
        "kernel step8 { %a = input a : f32[3] %b = input b : f32[3] %c = input c : f32[3] %d = input d : f32[3] \
         %e = input e : f32[3] %f = input f : f32[3] %g = input g : f32[3] %h = input h : f32[3] \
         %ab = mul %a, %b : f32[3] %cd = mul %c, %d : f32[3] %ef = mul %e, %f : f32[3] %gh = mul %g, %h : f32[3] \
         %s = add %ab, %cd : f32[3] %t = add %ef, %gh : f32[3] \
         output s = %s output t = %t output p = %ab output q = %gh }",
    );
    let step_staged = CudaBackend
        .compile_program(&step, &Default::default())
        .expect("compile step8");
    let step_unstaged = CudaBackend
        .compile_program_with(&step, &Default::default(), &unstaged_options)
        .expect("compile step8");
    let step_inputs: Vec<Array> = (0..8)
        .map(|k| Array::from_slice(&[0.5f32 + k as f32, -1.0 + 0.25 * k as f32, 2.0 - 0.125 * k as f32]))
        .collect();
    let expected_s: Vec<f64> = (0..3)
        .map(|j| {
            let v = |k: usize| step_inputs[k].to_f64_vec()[j] as f32;
            f64::from(v(0) * v(1) + v(2) * v(3))
        })
        .collect();
    let [step_host, step_host_unstaged] =
        host_call_samples([&step_staged, &step_unstaged], &step_inputs, calls, |outputs| {
            assert_eq!(outputs[0].to_f64_vec(), expected_s, "step8 result")
        });
    let step_host = percentiles(step_host);
    let step_host_unstaged = percentiles(step_host_unstaged);
    println!("\nEight inputs and four outputs of f32[3], host arrays, {calls} calls (µs):");
    print_row("staged (one copy in, one copy out)", step_host);
    print_row("array by array (no staging)", step_host_unstaged);

    // A program of five small kernels (row means and spreads of a 37x19 matrix, a column
    // sum): one launch of one block against one launch per kernel.
    let norm = lir_of(
        "kernel norm_rows { %x = input x : f32[37,19] %m = mean %x axes [1] keepdims : f32[37,1] \
         %d = sub %x, %m : f32[37,19] %sq = mul %d, %d : f32[37,19] %v = mean %sq axes [1] keepdims : f32[37,1] \
         %eps = const 0.001 : f32[] %ve = add %v, %eps : f32[37,1] %sd = sqrt %ve : f32[37,1] \
         %y = div %d, %sd : f32[37,19] %t = sum %y axes [0] : f32[19] %w = input w : f64[19] \
         %tw = cast %t : f64[19] %u = mul %tw, %w : f64[19] output y = %y output u = %u }",
    );
    let one_launch = CudaBackend
        .compile_program(&norm, &Default::default())
        .expect("compile norm_rows");
    let mut per_kernel_options = CudaOptions::default();
    per_kernel_options.one_launch = false;
    let per_kernel = CudaBackend
        .compile_program_with(&norm, &Default::default(), &per_kernel_options)
        .expect("compile norm_rows");
    let norm_x: Vec<f32> = (0..37 * 19)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 16.0)
        .collect();
    let norm_w: Vec<f64> = (0..19).map(|i| 0.5 + f64::from(i) / 8.0).collect();
    let dx = CudaBackend
        .to_device(Array::from_vec([37, 19], norm_x).expect("x").view())
        .expect("to_device");
    let dw = CudaBackend
        .to_device(Array::from_slice(&norm_w).view())
        .expect("to_device");
    let ([one_samples, per_samples], [one_enqueue, per_enqueue], [one_out, per_out]) =
        resident_call_samples([&one_launch, &per_kernel], &[&dx, &dw], calls);
    assert_eq!(one_out, per_out, "one launch and one launch per kernel differ");
    let one_resident = percentiles(one_samples);
    let per_resident = percentiles(per_samples);
    println!("\nFive small kernels (norm_rows, 37x19), resident, {calls} calls (µs):");
    println!(
        "{:<44} {:>8.2} {:>8.2} {:>8.2}   enqueue {:.2}",
        format!("one launch ({} launch)", one_launch.launches()),
        one_resident[0],
        one_resident[1],
        one_resident[2],
        one_enqueue
    );
    println!(
        "{:<44} {:>8.2} {:>8.2} {:>8.2}   enqueue {:.2}",
        format!("one launch per kernel ({} launches)", per_kernel.launches()),
        per_resident[0],
        per_resident[1],
        per_resident[2],
        per_enqueue
    );

    // Compile latency: NVRTC and loading the module, for kernels no cache holds (a new gain
    // each, and the on-disk PTX cache off, so that a second run of this example measures the
    // same), one after another, then on every core at once.
    rfx_codegen_cuda::set_ptx_disk_cache(false);
    let fresh: Vec<LirProgram> = (0..80)
        .map(|k| {
            lir_of(&format!(
                "kernel pid_{k} {{ %e = input error : f32[1] %kp = const {} : f32[] %u = mul %kp, %e : f32[1] \
                 %lo = const -1.0 : f32[] %hi = const 1.0 : f32[] %c = clamp %u, %lo, %hi : f32[1] output u = %c }}",
                1.0 + k as f64 / 1024.0
            ))
        })
        .collect();
    let (sequential, parallel) = fresh.split_at(16);
    let mut compile_samples = Vec::new();
    for lir in sequential {
        let start = Instant::now();
        CudaBackend
            .compile_program(lir, &Default::default())
            .expect("compile");
        compile_samples.push(start.elapsed());
    }
    let compile_p50 = percentiles(compile_samples)[0] / 1e3;
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(parallel.len());
    let start = Instant::now();
    std::thread::scope(|scope| {
        for chunk in parallel.chunks(parallel.len().div_ceil(threads)) {
            scope.spawn(move || {
                for lir in chunk {
                    CudaBackend
                        .compile_program(lir, &Default::default())
                        .expect("compile");
                }
            });
        }
    });
    let parallel_ms = start.elapsed().as_secs_f64() * 1e3 / parallel.len() as f64;
    println!(
        "\nCompiling a new kernel (NVRTC and module load): {compile_p50:.1} ms p50 one at a time; \
         {parallel_ms:.1} ms per kernel with {threads} threads ({} kernels)",
        parallel.len()
    );

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
             \"host_unstaged_p50\": {:.3}, \"resident_p50\": {:.3}, \"resident_p99\": {:.3}, \"resident_p999\": {:.3}, \
             \"enqueue\": {:.3}}},\n  \"step8_host_us\": {{\"staged_p50\": {:.3}, \"unstaged_p50\": {:.3}}},\n  \
             \"norm_rows_resident_us\": {{\"one_launch_p50\": {:.3}, \"per_kernel_p50\": {:.3}, \
             \"one_launch_enqueue\": {:.3}, \"per_kernel_enqueue\": {:.3}}},\n  \
             \"compile_ms\": {{\"one_at_a_time_p50\": {:.2}, \"parallel_per_kernel\": {:.2}, \"threads\": {}}}\n}}\n",
            host[0], host[1], host[2], host_unstaged[0], resident[0], resident[1], resident[2], enqueue,
            step_host[0], step_host_unstaged[0], one_resident[0], per_resident[0], one_enqueue, per_enqueue,
            compile_p50, parallel_ms, threads
        ));
        std::fs::write(&path, text).expect("write the JSON report");
        println!("\nwrote {path}");
    }
}
