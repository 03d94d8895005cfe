//! `rfx bench`: end-to-end kernel benchmarks (the harness itself lands with the benchmark issue).

use std::path::PathBuf;

/// Arguments of `rfx bench`.
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct BenchArgs {
    /// Elements per input (one size).
    #[arg(long, default_value_t = 65_536, conflicts_with = "sizes")]
    pub size: usize,
    /// Several sizes, comma-separated (overrides `--size`).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Timed iterations per kernel and size.
    #[arg(long, default_value_t = 200)]
    pub iterations: usize,
    /// Backend: interp, cpu, cuda, metal.
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
    /// Draw a plot of the results to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// Runs the benchmarks described by `args`. For now it only says what it would do.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let sizes = if args.sizes.is_empty() {
        vec![args.size]
    } else {
        args.sizes.clone()
    };
    println!(
        "rfx bench: would benchmark the micro-kernels (add, mul, sin, fused_chain) on backend `{}` \
         at sizes {sizes:?}, {} iterations each",
        args.backend, args.iterations
    );
    if let Some(path) = &args.json_out {
        println!("rfx bench: would write JSON results to {}", path.display());
    }
    if let Some(path) = &args.plot {
        println!("rfx bench: would draw a plot to {}", path.display());
    }
    Ok(())
}
