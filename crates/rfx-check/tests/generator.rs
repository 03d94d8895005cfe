//! The random kernel generator: its kernels verify, print and parse back unchanged (the HIR
//! text format's round trip over every op the generator makes), and are not trivial.

use rfx_check::generator::{KernelGenConfig, random_kernel};
use rfx_ir::hir;
use rfx_ir::testgen::TestRng;

#[test]
fn random_kernels_round_trip() {
    let config = KernelGenConfig::with_max_ops(16);
    // Miri (`cargo xtask miri`) runs about a thousand times slower: a sample there.
    for seed in 0..if cfg!(miri) { 5 } else { 1000u64 } {
        let kernel = random_kernel(&mut TestRng::new(seed), &config, "random");
        hir::verify(&kernel).unwrap_or_else(|e| panic!("seed {seed}: generated kernel invalid:\n{e}"));
        let printed = kernel.to_string();
        let reparsed = hir::parse(&printed).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{printed}"));
        assert_eq!(reparsed, kernel, "seed {seed}");
        assert_eq!(reparsed.to_string(), printed, "seed {seed}");
    }
}

#[test]
fn random_kernels_are_not_trivial() {
    let config = KernelGenConfig::default();
    let sizes: Vec<usize> = (0..200u64)
        .map(|s| random_kernel(&mut TestRng::new(s), &config, "r").op_count())
        .collect();
    let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
    assert!(mean >= 5.0, "generated kernels average only {mean} ops");
    eprintln!("{}", random_kernel(&mut TestRng::new(3), &config, "sample"));
}
