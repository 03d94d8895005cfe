//! What one unbatched call of each of wrenfold's kernels runs: the program's kernels (their
//! loop points and LIR instruction counts) and its arena; with `--lir` the LIR, with `--clif`
//! the CPU backend's code of each kernel (one function per kernel, as `rfx dump` shows it);
//! with `--program` the one function an unbatched call runs (its CLIF after Cranelift's
//! mid-end, and its machine code); with `--calls N`, N bound calls (`run_slices`) of each
//! kernel (`--kernel NAME` for one), or with `--hw` N calls of the hand-written function, for
//! a profiler:
//!
//! ```text
//! cargo build --release -p wrenfold-bench --example n1_profile
//! valgrind --tool=callgrind --toggle-collect='*BoundKernel::run_slice*' \
//!     target/release/examples/n1_profile --kernel QuatLocalCoords --calls 2000
//! ```
//!
//! (instructions per call: the total over N; `--toggle-collect='wrenfold_bench::hw_*'` with
//! `--hw` for the hand-written code).

use wrenfold_bench::kernels;
use wrenfold_bench::{bind, generate, outputs, run_bound};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let only = flag("--kernel");
    let calls: usize = flag("--calls").and_then(|c| c.parse().ok()).unwrap_or(0);
    let dump = args.iter().any(|a| a == "--lir");
    for spec in &kernels::ALL {
        if only.as_deref().is_some_and(|k| k != spec.name) {
            continue;
        }
        let mut bound = bind(spec, None, "cpu")?;
        let exe = bound.executable().clone();
        let lir = exe.lir();
        println!(
            "{}: {} MIR kernels, {} LIR kernels, {} loops, arena {} bytes, {} buffers",
            spec.name,
            exe.mir().kernels().len(),
            lir.kernels().len(),
            lir.loops().len(),
            lir.arena_bytes(),
            lir.buffers().len()
        );
        for k in lir.kernels() {
            println!("  {}: dims {:?}, {} instructions", k.name, k.dims, k.body.len());
        }
        if dump {
            println!("{lir}");
        }
        if args.iter().any(|a| a == "--clif") {
            let dumps = rfx_codegen_cpu::dump(lir).map_err(|e| e.to_string())?;
            for (name, clif, asm) in dumps {
                println!("== {name}\n{clif}\n{asm}");
            }
        }
        if args.iter().any(|a| a == "--program") {
            let options = rfx::CompileOptions::default();
            match rfx_codegen_cpu::dump_program(lir, &options).map_err(|e| e.to_string())? {
                Some((clif, asm)) => println!("== program\n{clif}\n{asm}"),
                None => println!("== one function per kernel"),
            }
        }
        if calls > 0 && args.iter().any(|a| a == "--hw") {
            let batch = generate(spec, 64, 48);
            let inputs = batch.slices();
            let mut out = outputs(spec, 1);
            let mut out: Vec<&mut [f64]> = out.iter_mut().map(Vec::as_mut_slice).collect();
            let hw = match spec.name {
                "QuatLocalCoords" => wrenfold_bench::hw_local_coords,
                "QuatInterpolation" => wrenfold_bench::hw_interpolation,
                "ImuIntegration" => wrenfold_bench::hw_imu,
                _ => wrenfold_bench::hw_projection,
            };
            for c in 0..calls {
                hw(&inputs, c % batch.n, &mut out, 0);
                std::hint::black_box(&mut out);
            }
            println!("  {calls} hand-written calls");
            continue;
        }
        if calls > 0 {
            let batch = generate(spec, 64, 48);
            let inputs = batch.slices();
            let mut out = outputs(spec, 1);
            let mut out: Vec<&mut [f64]> = out.iter_mut().map(Vec::as_mut_slice).collect();
            let lens: Vec<usize> = (0..spec.inputs.len()).map(|k| spec.input_len(k)).collect();
            // Each example's slices, made before the calls (a call allocates nothing).
            let examples: Vec<Vec<&[f64]>> = (0..batch.n)
                .map(|i| {
                    (0..inputs.len())
                        .map(|k| {
                            if spec.shared.contains(&spec.inputs[k].0) {
                                inputs[k]
                            } else {
                                &inputs[k][lens[k] * i..lens[k] * (i + 1)]
                            }
                        })
                        .collect()
                })
                .collect();
            let start = std::time::Instant::now();
            for c in 0..calls {
                run_bound(spec, &mut bound, &examples[c % batch.n], &mut out)?;
            }
            let t = start.elapsed().as_secs_f64() / calls as f64;
            println!("  {calls} calls: {:.1} ns per call", t * 1e9);
        }
    }
    Ok(())
}
