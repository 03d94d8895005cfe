//! Prints the fused MIR program of each of wrenfold's kernels, batched (`vmap` over 1,024
//! examples) or, with `--one`, for one example: the kernel count and each kernel's domain,
//! instructions, loads, selects and stores; with `--mir` the program itself; with
//! `--hir-dir DIR` each kernel's HIR (before optimisation) written to `DIR/NAME.rfx`.
//! `cargo run --release -p wrenfold-bench --example dump -- [NAME] [--one] [--mir]`.

use wrenfold_bench::{bind, kernels};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let one = args.iter().any(|a| a == "--one");
    let print_mir = args.iter().any(|a| a == "--mir");
    let hir_dir = args
        .iter()
        .position(|a| a == "--hir-dir")
        .and_then(|i| args.get(i + 1));
    let names: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with("--") && Some(*a) != hir_dir)
        .collect();
    for spec in kernels::ALL.iter() {
        if !names.is_empty() && !names.iter().any(|n| n.as_str() == spec.name) {
            continue;
        }
        let bound = bind(spec, (!one).then_some(1024), "cpu")?;
        let exe = bound.executable();
        let mir = exe.mir();
        println!("{}: {} kernels", spec.name, mir.kernels().len());
        for (k, kernel) in mir.kernels().iter().enumerate() {
            let count = |head: &str| {
                kernel
                    .body
                    .iter()
                    .filter(|i| format!("{:?}", i.op).starts_with(head))
                    .count()
            };
            println!(
                "  k{k} {} domain {:?}: {} insts, {} loads, {} selects, {} stores, {} reductions",
                kernel.name,
                kernel.domain.dims(),
                kernel.body.len(),
                count("Load"),
                count("Select"),
                kernel.stores.len(),
                kernel.reductions.len(),
            );
        }
        if print_mir {
            println!("{mir}");
        }
        if let Some(dir) = hir_dir {
            let path = std::path::Path::new(dir).join(format!("{}.rfx", spec.name));
            std::fs::write(&path, exe.hir().to_string()).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}
