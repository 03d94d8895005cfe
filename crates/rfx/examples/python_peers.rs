//! The Rust side of `crates/rfx-python/examples/peers.py`: each HIR file named on the command
//! line (`peers.py` writes them from its traced kernels) is compiled for the CPU as `rfxjit`
//! compiles it (`rfx_runtime::compile` with the default configuration) and its call is timed
//! through `Executable::run` on views made once — the call a bound kernel makes from Python,
//! without Python. Prints one line per file: `name compile_us=… run_ns=…` (median compile
//! time of 7 compilations; median over 200 samples of the mean time of a batch of calls).
//!
//! `cargo run --release -p rfx --features cuda,metal --example python_peers -- A.hir B.hir`
//! (the features only match the extension's build, so that nothing is compiled again).

mod timing;

use std::path::Path;
use std::time::Instant;

use rfx::{ArrayView, ArrayViewMut, CompileConfig, DType, Shape};
use rfx_lower::Scratch;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for path in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&path)?;
        let kernel = rfx_ir::hir::parse(&text)?;
        let config = CompileConfig::with_backend("cpu");
        let mut compile_us = Vec::new();
        let mut exe = None;
        for _ in 0..7 {
            let start = Instant::now();
            let compiled = rfx_runtime::compile(&kernel, &config, rfx_runtime::registry())?;
            compile_us.push(start.elapsed().as_secs_f64() * 1e6);
            exe = Some(compiled);
        }
        compile_us.sort_by(f64::total_cmp);
        let exe = exe.ok_or("no compilation")?;
        let types = exe.inputs().iter().chain(exe.outputs());
        if let Some((name, ty)) = types.clone().find(|(_, ty)| ty.dtype != DType::F32) {
            return Err(format!(
                "{path}: `{name}` is {:?}; only float32 kernels are timed",
                ty.dtype
            )
            .into());
        }
        let in_shapes: Vec<Shape> = exe.inputs().iter().map(|(_, ty)| ty.shape.clone()).collect();
        let out_shapes: Vec<Shape> = exe.outputs().iter().map(|(_, ty)| ty.shape.clone()).collect();
        let in_data: Vec<Vec<f32>> = in_shapes
            .iter()
            .map(|s| (0..s.numel()).map(|k| (k % 17) as f32 * 0.1 - 0.8).collect())
            .collect();
        let mut out_data: Vec<Vec<f32>> = out_shapes.iter().map(|s| vec![0.0; s.numel()]).collect();
        let inputs = in_shapes
            .iter()
            .zip(&in_data)
            .map(|(s, d)| ArrayView::new(s, d))
            .collect::<Result<Vec<_>, _>>()?;
        let mut outputs = out_shapes
            .iter()
            .zip(out_data.iter_mut())
            .map(|(s, d)| ArrayViewMut::new(s, d))
            .collect::<Result<Vec<_>, _>>()?;
        let elems = types.map(|(_, ty)| ty.shape.numel()).max().unwrap_or(0);
        let calls = if elems >= 4096 { 10 } else { 1000 };
        let mut scratch = Scratch::default();
        let run_ns = timing::median_ns(50, 200, calls, || {
            exe.run(&inputs, &mut outputs, &mut scratch).expect("run")
        });
        let name = Path::new(&path)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("kernel");
        println!(
            "{name} compile_us={:.1} run_ns={run_ns:.1}",
            compile_us[compile_us.len() / 2]
        );
    }
    Ok(())
}
