//! Lowering on random kernels: lowered programs run by the LIR interpreter against the HIR
//! interpreter, and the memory plans of random programs.

#[path = "../../rfx-lower/tests/common/mod.rs"]
mod common;

use common::{lower_kernel, lower_with};

use rfx_check::generator::{KernelGenConfig, random_kernel};
use rfx_ir::hir::{self, Kernel};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::lir::{LirProgram, Storage};
use rfx_ir::testgen::{TestRng, random_inputs, same_values};
use rfx_ir::{Array, ArrayView};
use rfx_lower::{InterpBackend, LowerConfig, execute_lowered};

fn temps_of(lir: &LirProgram) -> Vec<(usize, usize, usize, usize)> {
    // (offset, bytes, first kernel, last kernel) for every arena buffer.
    let mut out = Vec::new();
    for (i, buf) in lir.buffers().iter().enumerate() {
        if let Storage::Arena { offset } = buf.storage {
            let id = rfx_ir::BufId::new(i);
            let uses: Vec<usize> = lir
                .kernels()
                .iter()
                .enumerate()
                .filter(|(_, k)| {
                    k.preamble
                        .iter()
                        .chain(&k.body)
                        .any(|inst| inst.buf() == Some(id))
                })
                .map(|(k, _)| k)
                .collect();
            // A temporary whose kernels were folded into others is touched by none.
            let Some(&first) = uses.first() else { continue };
            out.push((offset, buf.ty.size_bytes(), first, *uses.last().unwrap_or(&first)));
        }
    }
    out
}

/// Whether the kernel has a float reduction, whose bits depend on the combination order.
fn has_float_reduction(kernel: &Kernel) -> bool {
    kernel
        .nodes()
        .iter()
        .any(|n| matches!(n.op, hir::Op::Reduce { .. }) && n.ty.dtype.is_float())
}

/// With sequential reductions (`reduce_lanes = 1`) lowering changes no bit; with the default
/// lane-parallel reductions only float reductions may differ (in rounding order), so those
/// kernels are compared on the sequential configuration only.
#[test]
fn lowered_programs_match_the_hir_interpreter_on_10000_random_kernels() {
    let config = KernelGenConfig::with_max_ops(14);
    let sequential = LowerConfig {
        reduce_lanes: Some(1),
        ..LowerConfig::default()
    };
    let mut multi_kernel = 0;
    let (mut with_iota, mut with_transpose, mut with_literal) = (0, 0, 0);
    // Miri (`cargo xtask miri`) runs about a thousand times slower: a sample there.
    for seed in 0..if cfg!(miri) { 5 } else { 10_000u64 } {
        let mut rng = TestRng::new(seed);
        let kernel = random_kernel(&mut rng, &config, "random");
        let lanes_matter = has_float_reduction(&kernel) || seed % 2 == 0;
        let lir = if lanes_matter {
            lower_with(&kernel, &sequential)
        } else {
            lower_kernel(&kernel)
        };
        multi_kernel += usize::from(lir.kernels().len() > 1);
        let has = |f: fn(&hir::Op) -> bool| kernel.nodes().iter().any(|n| f(&n.op));
        with_iota += usize::from(has(|op| matches!(op, hir::Op::Iota { .. })));
        with_transpose += usize::from(has(|op| matches!(op, hir::Op::Transpose { .. })));
        // Literal data survives to the LIR (unless folded to a splat or dead), and its text
        // reads back to the same program.
        if lir
            .buffers()
            .iter()
            .any(|b| matches!(b.storage, rfx_ir::lir::Storage::Literal { .. }))
        {
            with_literal += 1;
            let text = lir.to_string();
            assert_eq!(
                rfx_ir::lir::parse(&text).as_ref(),
                Ok(&lir),
                "seed {seed}:\n{text}"
            );
        }
        let inputs = random_inputs(&mut rng, &kernel, 0.2);
        let named: Vec<(String, ArrayView<'_>)> = kernel
            .inputs()
            .map(|(_, n, _)| n.to_string())
            .zip(inputs.iter().map(Array::view))
            .collect();
        let named: Vec<(&str, ArrayView<'_>)> = named.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_hir(&kernel, &views, Mode::Native).expect("interp");
        let got = execute_lowered(&lir, &named, &InterpBackend)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{lir}"));
        assert_eq!(expected.len(), got.len());
        for ((e, (name, g)), output) in expected.iter().zip(&got).zip(kernel.outputs()) {
            assert_eq!(name, &output.name);
            assert!(
                same_values(e, g),
                "seed {seed}, output {name}:\n{kernel}\n{lir}\nexpected {e:?}\ngot {g:?}"
            );
        }
    }
    assert!(multi_kernel > 100, "only {multi_kernel} multi-kernel programs");
    if !cfg!(miri) {
        assert!(
            with_iota > 500 && with_transpose > 500 && with_literal > 500,
            "{with_iota} kernels with an iota, {with_transpose} with a transpose, {with_literal} \
             with literal data"
        );
    }
}

#[test]
fn memory_plans_of_random_programs_never_overlap_live_buffers() {
    let config = KernelGenConfig {
        max_ops: 24,
        max_outputs: 3,
        ..KernelGenConfig::default()
    };
    let mut with_temps = 0;
    for seed in 0..if cfg!(miri) { 5 } else { 3_000u64 } {
        let kernel = random_kernel(&mut TestRng::new(seed), &config, "random");
        let lir = lower_kernel(&kernel);
        let temps = temps_of(&lir);
        with_temps += usize::from(temps.len() > 1);
        let total: usize = lir
            .buffers()
            .iter()
            .filter(|b| matches!(b.storage, Storage::Arena { .. }))
            .map(|b| b.ty.size_bytes().max(1).div_ceil(64) * 64)
            .sum();
        assert!(
            lir.arena_bytes() <= total,
            "seed {seed}: arena larger than no reuse"
        );
        for (i, a) in temps.iter().enumerate() {
            assert_eq!(a.0 % 64, 0, "seed {seed}: misaligned");
            assert!(a.0 + a.1 <= lir.arena_bytes(), "seed {seed}: outside the arena");
            for b in &temps[i + 1..] {
                let live_together = a.2 <= b.3 && b.2 <= a.3;
                let bytes_overlap = a.0 < b.0 + b.1 && b.0 < a.0 + a.1 && a.1 > 0 && b.1 > 0;
                assert!(
                    !(live_together && bytes_overlap),
                    "seed {seed}: live buffers overlap\n{lir}"
                );
            }
        }
    }
    assert!(
        with_temps > 20,
        "only {with_temps} programs with several temporaries"
    );
}

/// The conformance suite's block cases are written out in one kernel (each block position
/// stored by the kernel of its values), so every backend's conformance run covers folded
/// blocks.
#[test]
fn the_conformance_block_cases_lower_to_one_kernel() {
    let cases: Vec<_> = rfx_check::conformance::cases()
        .into_iter()
        .filter(|c| c.name.starts_with("block_per_point_"))
        .collect();
    assert_eq!(cases.len(), 6);
    for case in cases {
        let lir = lower_kernel(&case.kernel);
        assert_eq!(lir.kernels().len(), 1, "{}\n{lir}", case.name);
    }
}

/// A value's bits, signed zeros apart, every NaN alike (a NaN's payload may differ between
/// the interpreters).
fn bits_of(v: rfx_ir::Scalar) -> u64 {
    let v = v.to_f64();
    if v.is_nan() { u64::MAX } else { v.to_bits() }
}

/// The conformance suite's block cases (folded or not: `i32`, `f32` and `f64` blocks, one
/// point, the most block positions folded and one more, a constant block added) lowered and
/// run by the LIR interpreter give the HIR interpreter's bits: the backends' conformance runs
/// compare against the lowered program, this against the kernel itself.
#[test]
fn the_conformance_block_cases_lower_to_the_hir_interpreters_bits() {
    let cases: Vec<_> = rfx_check::conformance::cases()
        .into_iter()
        .filter(|c| c.name.starts_with("block_"))
        .collect();
    assert_eq!(cases.len(), 18);
    let mut folded = 0;
    for case in &cases {
        let lir = lower_kernel(&case.kernel);
        folded += usize::from(lir.kernels().len() == 1);
        for seed in 0..3 {
            let mut rng = TestRng::new(seed);
            let inputs = random_inputs(&mut rng, &case.kernel, 0.2);
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let expected = run_hir(&case.kernel, &views, Mode::Native).expect("interp");
            let named: Vec<(String, ArrayView<'_>)> = case
                .kernel
                .inputs()
                .map(|(_, n, _)| n.to_string())
                .zip(views.iter().copied())
                .collect();
            let named: Vec<(&str, ArrayView<'_>)> = named.iter().map(|(n, v)| (n.as_str(), *v)).collect();
            let got = execute_lowered(&lir, &named, &InterpBackend).expect("lowered");
            assert_eq!(expected.len(), got.len(), "{}", case.name);
            for (e, (name, g)) in expected.iter().zip(&got) {
                let bits = |a: &Array| -> Vec<Option<u64>> {
                    (0..a.data().len()).map(|i| a.get(i).map(bits_of)).collect()
                };
                assert!(
                    e.shape() == g.shape() && e.dtype() == g.dtype() && bits(e) == bits(g),
                    "{} output {name} (seed {seed})\n{lir}",
                    case.name
                );
            }
        }
    }
    // The six `[n, 3, 3]` cases and `r × c` blocks of 6 and 64 positions at `n` 5 and 4.
    assert_eq!(folded, 12);
}

/// The conformance suite's `[n, 3, 3]` block cases batched (`vmap`), differentiated forward
/// (`jvp`) and backward (`vjp`), lowered with sequential reductions: the LIR interpreter gives
/// the HIR interpreter's bits, and the CPU backend the LIR interpreter's.
#[test]
fn transformed_block_cases_lower_to_the_hir_interpreters_bits() {
    use rfx_lower::Backend;
    let sequential = LowerConfig {
        reduce_lanes: Some(1),
        ..LowerConfig::default()
    };
    let bits =
        |a: &Array| -> Vec<Option<u64>> { (0..a.data().len()).map(|i| a.get(i).map(bits_of)).collect() };
    let cases: Vec<_> = rfx_check::conformance::cases()
        .into_iter()
        .filter(|c| c.name.starts_with("block_per_point_"))
        .collect();
    let mut folded = 0;
    for case in &cases {
        let inputs = case.kernel.inputs().count();
        let transformed = [
            (
                "vmap",
                rfx_autodiff::vmap(&case.kernel, &vec![Some(0); inputs], 4).expect("vmap"),
            ),
            ("jvp", rfx_autodiff::jvp(&case.kernel, &["x", "d"]).expect("jvp")),
            ("vjp", rfx_autodiff::vjp(&case.kernel, &["x", "y"]).expect("vjp")),
        ];
        for (how, kernel) in &transformed {
            let lir = lower_with(kernel, &sequential);
            // Folded: one kernel stores each block position of `scaled` on its own.
            let scaled = lir
                .buffers()
                .iter()
                .position(|b| matches!(&b.storage, Storage::Output { name } if name == "scaled"));
            folded += usize::from(lir.kernels().iter().any(|k| {
                let stores = k.body.iter().filter(
                    |i| matches!(i, rfx_ir::lir::Inst::Store { buf, .. } if Some(buf.index()) == scaled),
                );
                stores.count() >= 9
            }));
            let compiled = rfx_codegen_cpu::CpuBackend
                .compile(&lir, &Default::default())
                .expect("compile");
            let mut rng = TestRng::new(7);
            let inputs = random_inputs(&mut rng, kernel, 0.2);
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let expected = run_hir(kernel, &views, Mode::Native).expect("interp");
            let named: Vec<(String, ArrayView<'_>)> = kernel
                .inputs()
                .map(|(_, n, _)| n.to_string())
                .zip(views.iter().copied())
                .collect();
            let named: Vec<(&str, ArrayView<'_>)> = named.iter().map(|(n, v)| (n.as_str(), *v)).collect();
            let got = execute_lowered(&lir, &named, &InterpBackend).expect("lowered");
            let cpu = compiled.run_to_new(&views).expect("cpu");
            for ((e, (name, g)), c) in expected.iter().zip(&got).zip(&cpu) {
                let what = format!("{} under {how}, output {name}", case.name);
                assert_eq!(bits(e), bits(g), "{what}\n{lir}");
                assert_eq!(bits(g), bits(c), "{what} on the CPU\n{lir}");
            }
        }
    }
    // Of the 18 transformed programs, the ones whose block stays store-bound fold.
    assert!(folded >= 6, "{folded} transformed programs with a folded block");
}
