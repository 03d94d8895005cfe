//! One `add` call on the metal backend through host arrays (`Compiled::run`: upload, dispatch,
//! readback, wait) against device-resident arrays (`MetalProgram::run_resident`: device copies,
//! dispatch, wait); median µs per call, both measured in the same run on whatever adapter wgpu
//! finds (lavapipe, a CPU, on CI machines: its ratio is not a GPU's).
//!
//! `cargo run --release -p rfx-codegen-metal --example resident_latency`

use std::time::Instant;

use rfx_codegen_metal::MetalBackend;
use rfx_ir::{Array, DType, Shape, TensorType};
use rfx_lower::{LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

fn median_us(mut f: impl FnMut()) -> f64 {
    for _ in 0..20 {
        f();
    }
    let mut times: Vec<f64> = (0..200)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("adapter: {}", MetalBackend.adapter()?);
    for n in [1usize, 4096, 65536] {
        let text = format!(
            "kernel add {{\n %x = input x : f32[{n}]\n %y = input y : f32[{n}]\n \
             %z = add %x, %y : f32[{n}]\n output z = %z\n}}"
        );
        let kernel = rfx_ir::hir::parse(&text)?;
        let (mir, _) = optimize(&kernel, &OptConfig::default())?;
        let (lir, _) = lower(&mir, &LowerConfig::default())?;
        let program = MetalBackend.compile_program(&lir, &Default::default())?;
        let x = Array::from_vec([n], (0..n).map(|i| i as f32 * 0.5).collect::<Vec<f32>>())?;
        let y = Array::from_vec([n], vec![1.25f32; n])?;
        let mut z = Array::from_vec([n], vec![0.0f32; n])?;
        let host = program.compiled();
        let mut scratch = Scratch::new();
        let t_host = median_us(|| {
            host.run(&[x.view(), y.view()], &mut [z.view_mut()], &mut scratch)
                .expect("run");
        });
        let (dx, dy) = (
            MetalBackend.to_device(x.view())?,
            MetalBackend.to_device(y.view())?,
        );
        let mut dz = MetalBackend.zeros(&TensorType::new(DType::F32, Shape::new(vec![n])))?;
        let t_resident = median_us(|| {
            program
                .run_resident(&[&dx, &dy], &mut [&mut dz])
                .expect("run_resident");
        });
        let back = MetalBackend.from_device(&dz)?;
        assert_eq!(back.as_slice::<f32>(), z.as_slice::<f32>());
        println!(
            "n = {n:>6}: host arrays {t_host:8.1} µs, resident {t_resident:8.1} µs ({:.1}x)",
            t_host / t_resident
        );
    }
    Ok(())
}
