//! Prints the Cranelift IR and machine code of a kernel given as HIR text on stdin.
//!
//! `echo 'kernel k { ... }' | cargo run --release -p rfx-codegen-cpu --example dump_clif`

use std::io::Read;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    let kernel = rfx_ir::hir::parse(&text)?;
    let (mir, _) = rfx_opt::optimize(&kernel, &rfx_opt::OptConfig::default())?;
    let (lir, _) = rfx_lower::lower(&mir, &rfx_lower::LowerConfig::default())?;
    println!("{lir}");
    for (name, clif, asm) in rfx_codegen_cpu::dump(&lir)? {
        println!("== {name}\n{clif}\n{asm}");
    }
    Ok(())
}
