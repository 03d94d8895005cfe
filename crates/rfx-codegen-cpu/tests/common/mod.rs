//! What several test files share: a kernel's text optimised, lowered, compiled for the CPU and
//! run on fresh random inputs, every output element compared with the LIR interpreter's bits; and
//! a compiled program run beside the interpreter. Each test file uses part of it.

#![allow(dead_code)]

pub(crate) mod assembled;

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::Array;
use rfx_ir::hir::parse;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_lower::{Backend, CompileOptions, Compiled, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

/// Runs the kernel `text` on the CPU backend (at most `threads` threads) and the LIR interpreter
/// on inputs drawn from `seed`, asserts that every output element has the same bits (or is NaN
/// in both), and returns the lowered program.
pub(crate) fn assert_bits_match_interpreter(text: &str, threads: usize, seed: u64) -> LirProgram {
    let kernel = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    let lir = lower(&mir, &LowerConfig::default()).expect("lower").0;
    let options = CompileOptions {
        max_threads: Some(threads),
        ..CompileOptions::default()
    };
    let compiled = CpuBackend.compile(&lir, &options).expect("compile");
    let mut rng = TestRng::new(seed);
    let inputs = random_inputs(&mut rng, &kernel, 0.05);
    let (got, want) = run_with_interpreter(&*compiled, &lir, &inputs);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        for i in 0..w.data().len() {
            let (a, b) = (g.get(i).expect("got"), w.get(i).expect("want"));
            let (a64, b64) = (a.to_f64(), b.to_f64());
            assert!(
                a64.to_bits() == b64.to_bits() || (a64.is_nan() && b64.is_nan()),
                "output {k}, element {i}: cpu {a:?}, interpreter {b:?}\n{text}"
            );
        }
    }
    lir
}

/// Runs `compiled` (compiled from `lir`) and the native-precision LIR interpreter on `inputs`:
/// the backend's outputs, then the interpreter's.
pub(crate) fn run_with_interpreter(
    compiled: &dyn Compiled,
    lir: &LirProgram,
    inputs: &[Array],
) -> (Vec<Array>, Vec<Array>) {
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let want = run_lir(lir, &views, Mode::Native).expect("interpreter");
    let got = compiled.run_to_new(&views).expect("run");
    (got, want)
}

/// The sizes in bytes of the CLIF's 32-byte aligned stack slots (`explicit_slot N, align =
/// 32`: the tile staging buffers, each a cache line longer than its cells).
pub(crate) fn staging_slot_bytes(clif: &str) -> Vec<usize> {
    clif.lines()
        .filter(|line| line.contains("explicit_slot") && line.contains("align = 32"))
        .filter_map(|line| {
            line.split("explicit_slot")
                .nth(1)?
                .split(',')
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .collect()
}
