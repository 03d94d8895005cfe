//! A tiled kernel's staging buffers (CPUs with AVX2 and FMA) each end one cache line after their
//! cells: a full tile of `f64` cells is 8 KiB, and buffers laid out one after another would
//! otherwise all start at the same address modulo 4 KiB, so a segment touching a dozen staged
//! values at one cell would touch one L1 set for all of them. The values are those of the same
//! kernel computed by the interpreter (`tiled.rs` tests the staging itself at length).
//! A program input read again after a routine call is loaded again from the input, not staged.

use crate::common;

use rfx_codegen_cpu::{CpuBackend, dump};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::{Array, ArrayData, DType, Scalar};
use rfx_lower::{Backend, CompileOptions, LowerConfig, lower, ulps};
use rfx_opt::{OptConfig, optimize};

fn tile_routines_linked() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

/// Eight values of `x` and `y` computed before a `sin`/`cos` pair and all read after it (so
/// staged across the call), over `f64[n]`; `x` is the first column of an `[n, 2]` input (a
/// strided read, which no fused pass takes).
fn kernel(n: usize) -> String {
    let mut s = format!(
        "kernel k {{\n %x2 = input x : f64[{n},2]\n %xa = slice %x2 starts [0,0] : f64[{n},1]\n \
         %x = reshape %xa : f64[{n}]\n %y = input y : f64[{n}]\n"
    );
    for i in 0..8 {
        let c = 0.5 + 0.25 * i as f64;
        s += &format!(
            " %c{i} = const {c} : f64[]\n %p{i} = mul %x, %c{i} : f64[{n}]\n %q{i} = add %p{i}, %y : f64[{n}]\n"
        );
    }
    s += &format!(" %a = add %q0, %q7 : f64[{n}]\n %s = sin %a : f64[{n}]\n %co = cos %a : f64[{n}]\n");
    for i in 0..8 {
        s += &format!(
            " %m{i} = mul %q{i}, %s : f64[{n}]\n %o{i} = add %m{i}, %co : f64[{n}]\n output o{i} = %o{i}\n"
        );
    }
    s + "}\n"
}

fn lir_of(src: &str) -> LirProgram {
    let kernel = rfx_ir::hir::parse(src).expect("parse");
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

#[test]
fn staging_buffers_end_a_cache_line_after_their_cells() {
    if !tile_routines_linked() {
        return;
    }
    let n = 4096;
    let lir = lir_of(&kernel(n));
    let clif: String = dump(&lir).expect("dump").into_iter().map(|(_, c, _)| c).collect();
    let slots = common::staging_slot_bytes(&clif);
    assert!(slots.len() >= 4, "the staged values' buffers\n{clif}");
    for &bytes in &slots {
        // A tile of 512 or 1,024 cells of 8 bytes (a multiple of 4 KiB), and one line.
        assert_eq!(bytes % 4096, 64, "{slots:?}");
    }
    // Laid out one after another, the buffers start on different lines modulo 4 KiB.
    let mut lines: Vec<usize> = slots
        .iter()
        .scan(0usize, |start, &bytes| {
            let here = *start;
            *start += bytes;
            Some(here % 4096 / 64)
        })
        .collect();
    lines.sort_unstable();
    lines.dedup();
    assert_eq!(lines.len(), slots.len());

    // The values: the interpreter's, the transcendentals within the backend's bound.
    let xs: Vec<f64> = (0..2 * n).map(|i| (i as f64 * 0.37).sin() * 3.0).collect();
    let ys: Vec<f64> = (0..n).map(|i| 1.0 - (i % 17) as f64 * 0.125).collect();
    let (got, want) = cpu_and_interpreter(&lir, &xs, &ys, n);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        for i in 0..n {
            let (g, w) = (
                g.get(i).map_or(f64::NAN, Scalar::to_f64),
                w.get(i).map_or(f64::NAN, Scalar::to_f64),
            );
            let close = ulps(g, w, DType::F64) <= 4 || (g - w).abs() <= 1e-12 * (1.0 + w.abs());
            assert!(close, "o{k}[{i}]: {g} != {w}");
        }
    }
}

/// `o = sin(x·y) + x + y·x` over `f64[n]`, `x` the first column of an `[n, 2]` input: `x` and
/// `y` are read again after the routine call.
fn reread_kernel(n: usize) -> String {
    format!(
        "kernel k {{\n %x2 = input x : f64[{n},2]\n %xa = slice %x2 starts [0,0] : f64[{n},1]\n \
         %x = reshape %xa : f64[{n}]\n %y = input y : f64[{n}]\n %a = mul %x, %y : f64[{n}]\n \
         %s = sin %a : f64[{n}]\n %b = add %s, %x : f64[{n}]\n %c = mul %y, %x : f64[{n}]\n \
         %o = add %b, %c : f64[{n}]\n output o = %o\n}}\n"
    )
}

#[test]
fn program_inputs_read_after_a_routine_call_are_loaded_again_not_staged() {
    if !tile_routines_linked() {
        return;
    }
    let n = 1000;
    let lir = lir_of(&reread_kernel(n));
    let clif: String = dump(&lir).expect("dump").into_iter().map(|(_, c, _)| c).collect();
    // Only the routine's argument and result are staged: `x` and `y` are loaded again from
    // the inputs after the call.
    assert!(clif.contains("call fn"), "tiled\n{clif}");
    assert!(
        common::staging_slot_bytes(&clif).len() <= 2,
        "{:?}\n{clif}",
        common::staging_slot_bytes(&clif)
    );
    let xs: Vec<f64> = (0..2 * n).map(|i| (i as f64 * 0.61).cos() * 2.5).collect();
    let ys: Vec<f64> = (0..n)
        .map(|i| match i % 97 {
            7 => f64::NAN,
            31 => f64::INFINITY,
            _ => 0.5 - (i % 13) as f64 * 0.25,
        })
        .collect();
    let (got, want) = cpu_and_interpreter(&lir, &xs, &ys, n);
    for i in 0..n {
        let g = got[0].get(i).map_or(f64::NAN, Scalar::to_f64);
        let w = want[0].get(i).map_or(f64::NAN, Scalar::to_f64);
        // The exact ops after `sin` add x and y·x: a last-bit difference of `sin` stays within
        // a few units of the sum's roundoff.
        let close = (g.is_nan() && w.is_nan())
            || ulps(g, w, DType::F64) <= 4
            || (g - w).abs() <= 1e-12 * (1.0 + w.abs());
        assert!(close, "o[{i}]: {g} != {w} (x {}, y {})", xs[2 * i], ys[i]);
    }
}

/// `lir` run on `x: f64[n, 2]` holding `xs` and `y: f64[n]` holding `ys`, on one CPU thread
/// and by the interpreter: (the CPU's outputs, the interpreter's).
fn cpu_and_interpreter(lir: &LirProgram, xs: &[f64], ys: &[f64], n: usize) -> (Vec<Array>, Vec<Array>) {
    let array = |v: &[f64], shape: &[usize]| {
        Array::new(
            shape.to_vec(),
            ArrayData::from_scalars(DType::F64, v.iter().map(|&x| Scalar::F64(x))).expect("data"),
        )
        .expect("array")
    };
    let (x, y) = (array(xs, &[n, 2]), array(ys, &[n]));
    let options = CompileOptions {
        max_threads: Some(1),
        ..CompileOptions::default()
    };
    let got = CpuBackend
        .compile(lir, &options)
        .expect("compile")
        .run_to_new(&[x.view(), y.view()])
        .expect("run");
    let want = run_lir(lir, &[x.view(), y.view()], Mode::Native).expect("interpreter");
    (got, want)
}
