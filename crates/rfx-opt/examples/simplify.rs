//! Prints a HIR kernel file (`.rfx`) after [`rfx_opt::simplify`] (the HIR the fusion pass
//! partitions) and the fused MIR program:
//! `cargo run --release -p rfx-opt --example simplify -- FILE.rfx`.

use rfx_opt::{OptConfig, optimize, simplify};

fn main() -> Result<(), String> {
    let path = std::env::args().nth(1).ok_or("usage: simplify FILE.rfx")?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let kernel = rfx_ir::hir::parse(&text).map_err(|e| format!("{path}: {e}"))?;
    let config = OptConfig::default();
    let (simplified, _) = simplify(&kernel, &config).map_err(|e| e.to_string())?;
    println!("{simplified}");
    let start = std::time::Instant::now();
    let (mir, report) = optimize(&kernel, &config).map_err(|e| e.to_string())?;
    println!("{mir}");
    println!(
        "# optimize: {:?}\n# {}",
        start.elapsed(),
        report.to_string().replace('\n', "\n# ")
    );
    Ok(())
}
