//! Long chains through the optimiser on the default 2 MiB test thread: fusion emits chains of
//! any length without recursion, bounds the nesting of windows (pads, slices, reshapes,
//! reductions computed elementwise) by storing a value every `MAX_FRAME_NESTING` frames, and
//! bounds the copies nested windows make. Each result is checked against the reference
//! interpreter on the unoptimised kernel.

use std::time::{Duration, Instant};

use rfx_ir::hir::{Builder, Kernel, ValueId};
use rfx_ir::interp::{Mode, run_hir, run_mir};
use rfx_ir::{Array, DType, ReduceOp, TensorType, UnaryOp};
use rfx_opt::{MAX_FRAME_NESTING, MissReason, OptConfig, optimize};

fn x() -> Array {
    Array::from_slice(&[0.25f32, 1.5, 2.0])
}

/// A kernel of one `f32[3]` input `x` whose output is `link` applied `n` times.
fn chain(n: usize, link: impl Fn(&mut Builder, ValueId, ValueId) -> ValueId) -> Kernel {
    let mut b = Builder::new("chain");
    let x = b.input("x", TensorType::new(DType::F32, [3])).expect("input");
    let mut v = x;
    for _ in 0..n {
        v = link(&mut b, v, x);
    }
    b.output("out", v).expect("output");
    b.finish().expect("kernel")
}

/// Optimises `kernel` (equality saturation on or off), checks the MIR against the interpreter
/// bit for bit, and returns how many values fusion stored because windows nested too deep.
fn check(kernel: &Kernel, saturate: bool) -> usize {
    let start = Instant::now();
    let config = OptConfig {
        saturate,
        ..OptConfig::default()
    };
    let (mir, report) = optimize(kernel, &config).expect("optimises");
    let input = x();
    let want = run_hir(kernel, &[input.view()], Mode::Native).expect("HIR runs");
    let got = run_mir(&mir, &[input.view()], Mode::Native).expect("MIR runs");
    assert_eq!(got[0].to_f64_vec(), want[0].to_f64_vec());
    assert!(start.elapsed() < Duration::from_secs(20), "{:?}", start.elapsed());
    report
        .missed_fusions
        .iter()
        .filter(|(_, reason)| *reason == MissReason::Nesting)
        .count()
}

#[test]
fn a_long_elementwise_chain_fuses_into_one_kernel() {
    let kernel = chain(20_000, |b, v, x| {
        let s = b.unary(UnaryOp::Sin, v).expect("sin");
        b.binary(rfx_ir::BinaryOp::Add, s, x).expect("add")
    });
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimises");
    assert_eq!(mir.kernels().len(), 1);
    assert_eq!(check(&kernel, true), 0);
}

#[test]
fn a_long_chain_of_lookups_is_emitted_iteratively() {
    // Each link looks the table up at the previous link's values (truncated, clamped).
    let kernel = chain(5_000, |b, v, x| {
        let i = b.unary(UnaryOp::Abs, v).expect("abs");
        b.gather(x, i, 0).expect("gather")
    });
    assert_eq!(check(&kernel, false), 0);
}

#[test]
fn nested_windows_are_stored_every_max_frame_nesting_frames() {
    // sin, padded by one on the left, then the window back: a pad frame and a slice frame per
    // link. Without saturation nothing folds the pair away.
    let links = 2_000;
    let kernel = chain(links, |b, v, _| {
        let s = b.unary(UnaryOp::Sin, v).expect("sin");
        let p = b.pad(s, &[1], [4]).expect("pad");
        b.slice(p, &[1], [3]).expect("slice")
    });
    let stored = check(&kernel, false);
    assert!(stored >= 2 * links / MAX_FRAME_NESTING - 1, "{stored}");
    assert!(stored <= 2 * links, "{stored}");
    // Reshapes that insert and drop an axis of one are frames too. The values that bound
    // their nesting have the kernel's points in the same order, so the one loop nest reads
    // each where it computed it, and none needs a buffer.
    let kernel = chain(5_000, |b, v, _| {
        let s = b.unary(UnaryOp::Sin, v).expect("sin");
        let r = b.reshape(s, [3, 1]).expect("reshape");
        b.reshape(r, [3]).expect("reshape")
    });
    assert_eq!(check(&kernel, false), 0);
    let config = OptConfig {
        saturate: false,
        ..OptConfig::default()
    };
    let (mir, _) = optimize(&kernel, &config).expect("optimises");
    assert_eq!(mir.kernels().len(), 1);
    assert_eq!(mir.buffers().len(), 2);
}

#[test]
fn nested_small_reductions_do_not_multiply_work() {
    // Each link sums two copies of the previous one (a reduction computed elementwise, one
    // frame per reduced point): computed in place, link `k` would repeat link 0 `2^k` times.
    let kernel = chain(300, |b, v, x| {
        let r = b.reshape(v, [3, 1]).expect("reshape");
        let w = b.broadcast_to(r, [3, 2]).expect("broadcast");
        let s = b.reduce(ReduceOp::Sum, w, &[1], false).expect("sum");
        let h = b.unary(UnaryOp::Sin, s).expect("sin");
        b.binary(rfx_ir::BinaryOp::Mul, h, x).expect("mul")
    });
    assert!(check(&kernel, false) > 0);
}
