//! Lowering tests: LIR snapshots of the optimiser's corpus, memory-plan invariants, and call
//! validation. The same on random kernels is `rfx-check`'s `tests/lowering.rs`, beside the
//! generator.

mod common;
#[path = "../../rfx-opt/tests/common/mod.rs"]
mod opt_corpus;

use common::lower_kernel;
use opt_corpus::corpus;
use std::time::Duration;

use proptest::prelude::*;
use rfx_ir::hir::{self, Kernel};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayView, ArrayViewMut, Scalar, Shape};
use rfx_lower::{
    BackendError, CallError, InterpBackend, Interval, LowerConfig, Registry, Scratch, execute_lowered, lower,
    plan_memory,
};
use rfx_opt::{OptConfig, optimize};

#[test]
fn lir_snapshots_of_the_optimiser_corpus() {
    for (name, kernel) in corpus() {
        let (mir, _) = optimize(
            &kernel,
            &OptConfig {
                time_limit: Duration::from_secs(60),
                ..OptConfig::default()
            },
        )
        .unwrap();
        let (lir, report) = lower(&mir, &LowerConfig::default()).unwrap();
        let text = lir.to_string();
        assert_eq!(
            rfx_ir::lir::parse(&text).unwrap(),
            lir,
            "{name}: LIR text round-trips"
        );
        insta::assert_snapshot!(format!("lir_{name}"), format!("{text}\n{report}"));
    }
}

#[test]
fn a_contiguous_elementwise_kernel_is_one_flat_loop() {
    let kernel = hir::parse(
        "kernel k {\n %x = input x : f32[4,8,16]\n %y = input y : f32[4,8,16]\n %s = sin %x : f32[4,8,16]\n %r = add %s, %y : f32[4,8,16]\n output o = %r\n}",
    )
    .unwrap();
    let lir = lower_kernel(&kernel);
    assert_eq!(lir.kernels().len(), 1);
    let k = &lir.kernels()[0];
    assert_eq!(k.dims, vec![512]);
    assert_eq!(k.schedule.vector_width, 4);
}

#[test]
fn broadcast_scalars_are_hoisted_and_reductions_go_last() {
    let kernel = hir::parse(
        "kernel k {\n %x = input x : f64[3,5,7]\n %g = input g : f64[]\n %m = mul %x, %g : f64[3,5,7]\n %s = sum %m axes [1] : f64[3,7]\n output s = %s\n}",
    )
    .unwrap();
    let lir = lower_kernel(&kernel);
    let k = &lir.kernels()[0];
    assert_eq!((k.dims.clone(), k.reduce_dims), (vec![3, 7, 5], 1));
    assert_eq!(k.schedule.vector_width, 2);
    assert!(
        k.preamble
            .iter()
            .any(|i| matches!(i, rfx_ir::lir::Inst::Load { .. })),
        "{lir}"
    );
}

#[test]
fn a_scalar_computed_from_inputs_is_computed_in_its_readers_preamble() {
    // `tf + dt` from a parameter array, divided into a batch: one kernel, whose preamble loads
    // both parameters and adds them, and whose body divides by the sum.
    let kernel = hir::parse(
        "kernel k {\n %p = input p : f64[4]\n %x = input x : f64[64]\n %pa = slice %p starts [0] : f64[1]\n %a = reshape %pa : f64[]\n %pb = slice %p starts [1] : f64[1]\n %b = reshape %pb : f64[]\n %s = add %a, %b : f64[]\n %o = div %x, %s : f64[64]\n output o = %o\n}",
    )
    .unwrap();
    let lir = lower_kernel(&kernel);
    assert_eq!(lir.kernels().len(), 1, "{lir}");
    let k = &lir.kernels()[0];
    let binary = |insts: &[rfx_ir::lir::Inst], op: rfx_ir::BinaryOp| {
        insts
            .iter()
            .any(|i| matches!(i, rfx_ir::lir::Inst::Binary { op: o, .. } if *o == op))
    };
    assert!(binary(&k.preamble, rfx_ir::BinaryOp::Add), "{lir}");
    assert!(!binary(&k.body, rfx_ir::BinaryOp::Add), "{lir}");
    assert!(binary(&k.body, rfx_ir::BinaryOp::Div), "{lir}");
}

#[test]
fn slots_are_reused_once_dead() {
    let kernel = hir::parse(
        "kernel k {\n %x = input x : f32[64]\n %a = sin %x : f32[64]\n %b = cos %a : f32[64]\n %c = exp %b : f32[64]\n %d = log %c : f32[64]\n %e = tanh %d : f32[64]\n output o = %e\n}",
    )
    .unwrap();
    let (mir, _) = optimize(&kernel, &OptConfig::default()).unwrap();
    let (lir, report) = lower(&mir, &LowerConfig::default()).unwrap();
    assert_eq!(report.kernels[0].values, 6);
    assert!(report.kernels[0].slots < 6, "{lir}\n{report}");
}

proptest! {
    #[test]
    fn plan_memory_is_safe_and_no_worse_than_no_reuse(
        raw in proptest::collection::vec((0usize..5000, 0usize..12, 0usize..6), 0..24)
    ) {
        let intervals: Vec<Interval> = raw
            .iter()
            .enumerate()
            .map(|(i, &(bytes, start, len))| Interval { buf: rfx_ir::BufId::new(i), bytes, start, end: start + len })
            .collect();
        let plan = plan_memory(&intervals, 64);
        // Rounded up to the alignment, and one line more from 4 KiB up.
        let aligned = |b: usize| {
            let size = b.max(1).div_ceil(64) * 64;
            if size >= 4096 { size + 64 } else { size }
        };
        prop_assert!(plan.arena_bytes <= intervals.iter().map(|i| aligned(i.bytes)).sum::<usize>());
        // The peak is at least what is live at the busiest moment.
        for t in 0..20 {
            let live: usize = intervals.iter().filter(|i| i.start <= t && t <= i.end).map(|i| aligned(i.bytes)).sum();
            prop_assert!(plan.arena_bytes >= live);
        }
        for (i, a) in intervals.iter().enumerate() {
            prop_assert_eq!(plan.offsets[i] % 64, 0);
            for (j, b) in intervals.iter().enumerate().skip(i + 1) {
                if a.overlaps_in_time(b) {
                    let (ra, rb) = (plan.offsets[i]..plan.offsets[i] + aligned(a.bytes), plan.offsets[j]..plan.offsets[j] + aligned(b.bytes));
                    prop_assert!(ra.end <= rb.start || rb.end <= ra.start);
                }
            }
        }
    }
}

#[test]
fn a_chain_of_temporaries_reuses_space() {
    let intervals: Vec<Interval> = (0..6)
        .map(|i| Interval {
            buf: rfx_ir::BufId::new(i),
            bytes: 4096,
            start: i,
            end: i + 1,
        })
        .collect();
    let plan = plan_memory(&intervals, 64);
    // Two buffers live at a time, each 4 KiB and a skew line.
    assert_eq!(plan.arena_bytes, 2 * (4096 + 64));
}

#[test]
fn buffers_live_together_start_on_different_cache_lines_modulo_4_kib() {
    // Eight `f64[1024]` temporaries (8 KiB each, a multiple of 4 KiB) live at once, and three
    // small ones: the large ones start at eight different addresses modulo 4 KiB (a kernel
    // touching all of them at one index touches eight L1 sets, not one), the small ones keep
    // their sizes.
    let mut intervals: Vec<Interval> = (0..8)
        .map(|i| Interval {
            buf: rfx_ir::BufId::new(i),
            bytes: 8192,
            start: 0,
            end: 1,
        })
        .collect();
    intervals.extend((8..11).map(|i| Interval {
        buf: rfx_ir::BufId::new(i),
        bytes: 72,
        start: 0,
        end: 1,
    }));
    let plan = plan_memory(&intervals, 64);
    let mut lines: Vec<usize> = plan.offsets[..8].iter().map(|o| o % 4096 / 64).collect();
    lines.sort_unstable();
    lines.dedup();
    assert_eq!(lines.len(), 8, "{:?}", plan.offsets);
    assert_eq!(plan.arena_bytes, 8 * (8192 + 64) + 3 * 128);
}

fn fused_chain() -> (Kernel, LirProgram) {
    let kernel = hir::parse(
        "kernel fused_chain {\n %x = input x : f32[3]\n %y = input y : f32[3]\n %c = const 2.0 : f32[]\n %m = mul %x, %c : f32[3]\n %s = sin %m : f32[3]\n %r = add %s, %y : f32[3]\n output out = %r\n}",
    )
    .expect("valid kernel");
    let lir = lower_kernel(&kernel);
    (kernel, lir)
}

#[test]
fn rfxjit_example_through_execute_lowered() {
    let (_, lir) = fused_chain();
    let x = Array::from_slice(&[0.0f32, 1.0, 2.0]);
    let y = Array::from_slice(&[1.0f32, 2.0, 3.0]);
    let out = execute_lowered(&lir, &[("y", y.view()), ("x", x.view())], &InterpBackend).unwrap();
    assert_eq!(out[0].0, "out");
    assert_eq!(
        out[0].1.as_slice::<f32>().unwrap(),
        &[1.0, 2.909_297_5, 2.243_197_5]
    );
}

#[test]
fn bad_calls_are_rejected_and_nothing_is_written() {
    let (_, lir) = fused_chain();
    let compiled = rfx_lower::Backend::compile(&InterpBackend, &lir, &Default::default()).unwrap();
    let x = Array::from_slice(&[0.0f32, 1.0, 2.0]);
    let y = Array::from_slice(&[1.0f32, 2.0, 3.0]);
    let y64 = Array::from_slice(&[1.0f64, 2.0, 3.0]);
    let y4 = Array::from_slice(&[1.0f32, 2.0, 3.0, 4.0]);
    let sentinel = -7.5f32;
    let run = |inputs: &[ArrayView<'_>], out_len: usize| -> (Result<(), BackendError>, Vec<f32>) {
        let mut out = vec![sentinel; out_len];
        let shape = Shape::new([out_len]);
        let mut views = vec![ArrayViewMut::new(&shape, &mut out).unwrap()];
        let result = compiled.run(inputs, &mut views, &mut Scratch::new());
        (result, out)
    };
    let cases: Vec<(Vec<ArrayView<'_>>, usize, CallError)> = vec![
        (
            vec![x.view()],
            3,
            CallError::Arity {
                what: "inputs",
                expected: 2,
                found: 1,
            },
        ),
        (
            vec![x.view(), y64.view()],
            3,
            CallError::DType {
                name: "y".into(),
                expected: rfx_ir::DType::F32,
                found: rfx_ir::DType::F64,
            },
        ),
        (
            vec![x.view(), y4.view()],
            3,
            CallError::Shape {
                name: "y".into(),
                expected: Shape::new([3]),
                found: Shape::new([4]),
            },
        ),
        (
            vec![x.view(), y.view()],
            4,
            CallError::Shape {
                name: "out".into(),
                expected: Shape::new([3]),
                found: Shape::new([4]),
            },
        ),
    ];
    for (inputs, out_len, expected) in cases {
        let (result, out) = run(&inputs, out_len);
        match result {
            Err(BackendError::Call(e)) => assert_eq!(e, expected),
            other => panic!("expected {expected:?}, got {other:?}"),
        }
        assert!(out.iter().all(|&v| v == sentinel), "an output was written");
    }
    // Named inputs.
    let err = execute_lowered(&lir, &[("x", x.view()), ("z", y.view())], &InterpBackend).unwrap_err();
    assert!(
        matches!(err, BackendError::Call(CallError::UnknownInput(ref n)) if n == "z"),
        "{err}"
    );
    let err = execute_lowered(&lir, &[("x", x.view())], &InterpBackend).unwrap_err();
    assert!(
        matches!(err, BackendError::Call(CallError::MissingInput(ref n)) if n == "y"),
        "{err}"
    );
    let err = execute_lowered(&lir, &[("x", x.view()), ("x", x.view())], &InterpBackend).unwrap_err();
    assert!(
        matches!(err, BackendError::Call(CallError::DuplicateInput(_))),
        "{err}"
    );
}

#[test]
fn an_output_aliasing_an_input_is_rejected() {
    let (_, lir) = fused_chain();
    let compiled = rfx_lower::Backend::compile(&InterpBackend, &lir, &Default::default()).unwrap();
    let shape = Shape::new([3]);
    let mut shared = vec![1.0f32, 2.0, 3.0];
    let x = Array::from_slice(&[0.0f32, 1.0, 2.0]);
    // The only safe way to alias is through raw parts, as an FFI caller could.
    let ptr = shared.as_mut_ptr();
    // SAFETY: the aliasing views are only inspected by validation, which rejects the call before
    // anything reads or writes through them.
    let (input, output) = unsafe {
        (
            std::slice::from_raw_parts(ptr, 3),
            std::slice::from_raw_parts_mut(ptr, 3),
        )
    };
    let inputs = [x.view(), ArrayView::new(&shape, input).unwrap()];
    let mut outputs = [ArrayViewMut::new(&shape, output).unwrap()];
    let err = compiled
        .run(&inputs, &mut outputs, &mut Scratch::new())
        .unwrap_err();
    assert!(
        matches!(err, BackendError::Call(CallError::Alias { .. })),
        "{err}"
    );
    assert_eq!(shared, vec![1.0, 2.0, 3.0]);
}

#[test]
fn the_registry_names_backends() {
    let registry = Registry::default();
    assert_eq!(registry.names(), vec!["interp"]);
    assert!(registry.get("interp").is_ok());
    match registry.get("cuda") {
        Err(BackendError::Unavailable { backend: "cuda", .. }) => {}
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("cuda is not registered"),
    }
    match registry.get("tpu") {
        Err(e @ BackendError::UnknownBackend { .. }) => {
            assert_eq!(e.to_string(), "unknown backend `tpu` (known: interp)")
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("tpu does not exist"),
    }
    let _ = Scalar::F32(0.0);
}

/// A reduction over axes of size 1 reduces one point per output, which is that point
/// (`-0 + x`, `1 * x`, `max(-inf, x)`, `x / 1`, NaN kept): it lowers to a store, so backends run
/// it as an elementwise loop, and gives the HIR interpreter's bits for every op and dtype, on
/// ±0, ±Inf and NaN too.
#[test]
fn reductions_of_one_point_per_output_are_stores_of_that_point() {
    let mut rng = TestRng::new(0x51);
    for dtype in ["f32", "f64", "i32"] {
        for op in ["sum", "prod", "max", "min", "mean"] {
            if op == "mean" && dtype == "i32" {
                continue;
            }
            for (shape, axes, out) in [
                ("1, 4", "[0]", "4"),
                ("3, 1, 2", "[1]", "3, 2"),
                ("5, 1", "[1]", "5"),
                ("1", "[0]", ""),
                ("1, 1, 6", "[0, 1]", "6"),
            ] {
                let text = format!(
                    "kernel k {{\n %x = input x : {dtype}[{shape}]\n %r = {op} %x axes {axes} : {dtype}[{out}]\n \
                     output r = %r\n}}"
                );
                let kernel = hir::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
                let lir = lower_kernel(&kernel);
                let reduces = lir
                    .kernels()
                    .iter()
                    .flat_map(|k| &k.body)
                    .filter(|i| matches!(i, rfx_ir::lir::Inst::Reduce { .. }))
                    .count();
                assert_eq!(reduces, 0, "{text}\n{lir}");
                let ty = kernel
                    .inputs()
                    .next()
                    .map(|(_, _, ty)| ty.clone())
                    .expect("input");
                let x = rfx_ir::testgen::random_array(&mut rng, &ty, 0.5);
                let expected = run_hir(&kernel, &[x.view()], Mode::Native).expect("interp");
                let got = execute_lowered(&lir, &[("x", x.view())], &InterpBackend).expect("lowered");
                let bits = |a: &Array| -> Vec<u64> {
                    (0..a.data().len())
                        .map(|i| {
                            a.get(i).map_or(0, |s| {
                                let v = s.to_f64();
                                if v.is_nan() { u64::MAX } else { v.to_bits() }
                            })
                        })
                        .collect()
                };
                assert_eq!(bits(&expected[0]), bits(&got[0].1), "{text}\n{lir}");
            }
        }
    }
}

/// Lowering decides which reductions run as GPU block trees (`Schedule::gpu_tree`): those of
/// at least 1024 points per output, over one reduced axis or several; never a scan, whatever
/// its length.
#[test]
fn reductions_of_1024_points_or_more_per_output_are_gpu_trees() {
    let tree_of = |text: &str| {
        let kernel = hir::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let lir = lower_kernel(&kernel);
        lir.kernels()
            .iter()
            .map(|k| k.schedule.gpu_tree)
            .collect::<Vec<_>>()
    };
    let sum = |shape: &str, axes: &str, out: &str| {
        format!(
            "kernel k {{\n %x = input x : f32[{shape}]\n %r = sum %x axes {axes} : f32[{out}]\n \
             output r = %r\n}}"
        )
    };
    assert_eq!(tree_of(&sum("3, 1023", "[1]", "3")), [false]);
    assert_eq!(tree_of(&sum("3, 1024", "[1]", "3")), [true]);
    assert_eq!(tree_of(&sum("32, 32, 2", "[0, 1]", "2")), [true]);
    assert_eq!(tree_of(&sum("31, 33, 2", "[0, 1]", "2")), [false]);
    assert_eq!(tree_of(&sum("33, 32, 2", "[0, 1]", "2")), [true]);
    let scan = "kernel k {\n %x = input x : f32[2, 4096]\n %c = cumsum %x axis 1 : f32[2, 4096]\n \
                output c = %c\n}";
    assert_eq!(tree_of(scan), [false]);
    // The decision is printed after the lanes and read back.
    let lir = lower_kernel(&hir::parse(&sum("3, 1024", "[1]", "3")).expect("parse"));
    let text = lir.to_string();
    assert!(text.contains(" tree {"), "{text}");
    assert_eq!(rfx_ir::lir::parse(&text).as_ref(), Ok(&lir));
}
