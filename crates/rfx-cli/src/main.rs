//! The `rfx` command.

use clap::{Parser, Subcommand};

/// rfx: a small, fast JIT compiler for robotics control kernels.
#[derive(Parser)]
#[command(name = "rfx", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmark the standard kernels.
    Bench(rfx_cli::bench::BenchArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Bench(args) => rfx_cli::bench::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
