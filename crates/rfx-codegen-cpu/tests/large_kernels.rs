//! Kernels of thousands of ops: they compile to functions whose stack frames stay bounded
//! (staging buffers reused by liveness, `TILE_STAGING_MAX`, `MAX_FRAME`) and run with the LIR
//! interpreter's results. Each of the first four tests is a kernel that once crashed inside the
//! JIT code (its frame, one 2 KiB tile per staged value, stepped over the thread's guard page);
//! the last is a property test over generated kernels of 1,000 to 20,000 ops.
//!
//! A crash depends on the kernel's size, not on its element count: arrays are short, but at
//! least 2 elements (`MIN_TILED_ELEMS`), so that the tiled code runs. The optimiser and lowering
//! run on a thread of their own with a large stack, so that these tests exercise the backend
//! whatever the depth of those passes' walks; the compiled code runs on the test's thread.
//!
//! Tolerances: every op of these kernels is contracting or close to it (slopes of at most about
//! 1), so the backend's last-bit differences in transcendentals (4 ULP, `CpuBackend::ulp_bound`)
//! do not grow along the kernel; the absolute bounds below are far under the error of a value
//! read from the wrong staging cell (order 0.1 and more for these random inputs).

use crate::common;

use rfx_check::generator::transcendental_kernel;
use rfx_ir::hir::Kernel;
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayData, DType};
use rfx_lower::{CompileOptions, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

/// The bound every generated function's frame is checked against (`codegen::MAX_FRAME`).
const MAX_FRAME: u32 = 1024 * 1024;

/// Optimises and lowers `kernel` on a thread with a 1 GiB stack (reserved, not committed).
fn lir_of(kernel: &Kernel) -> LirProgram {
    let kernel = kernel.clone();
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(move || {
            let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
            lower(&mir, &LowerConfig::default()).expect("lower").0
        })
        .expect("spawn")
        .join()
        .expect("optimize and lower")
}

fn parse(text: &str) -> Kernel {
    let text = text.to_string();
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(move || rfx_ir::hir::parse(&text).expect("parse"))
        .expect("spawn")
        .join()
        .expect("parse")
}

/// Inputs for `kernel`: uniform in `[lo, hi]`, from `seed`.
fn inputs(kernel: &Kernel, seed: u64, lo: f64, hi: f64) -> Vec<Array> {
    let mut rng = TestRng::new(seed);
    kernel
        .inputs()
        .map(|(_, _, ty)| {
            let n = ty.shape.numel();
            let data = match ty.dtype {
                DType::F32 => ArrayData::F32((0..n).map(|_| rng.uniform(lo, hi) as f32).collect()),
                DType::F64 => ArrayData::F64((0..n).map(|_| rng.uniform(lo, hi)).collect()),
                other => panic!("input of dtype {other}"),
            };
            Array::new(ty.shape.clone(), data).expect("input")
        })
        .collect()
}

/// Compiles `lir` for the CPU (one thread), runs it and the native-precision LIR interpreter on
/// `inputs`, asserts every output element agrees within `tolerance` (absolute, in the output's
/// dtype units) and returns the largest frame of the compiled functions.
fn check(lir: &LirProgram, inputs: &[Array], tolerance: f64, what: &str) -> u32 {
    let options = CompileOptions {
        max_threads: Some(1),
        ..CompileOptions::default()
    };
    let compiled = rfx_codegen_cpu::compile(lir, &options).unwrap_or_else(|e| panic!("{what}: compile: {e}"));
    let (got, want) = common::run_with_interpreter(&compiled, lir, inputs);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        for i in 0..w.data().len() {
            let (a, b) = (g.get(i).expect("got").to_f64(), w.get(i).expect("want").to_f64());
            assert!(
                (a - b).abs() <= tolerance || (a.is_nan() && b.is_nan()),
                "{what}: output {k}, element {i}: cpu {a}, interpreter {b}"
            );
        }
    }
    let frame = compiled.max_frame_bytes();
    assert!(frame <= MAX_FRAME, "{what}: a frame of {frame} bytes");
    frame
}

fn tile_routines_linked() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

fn sines(terms: usize, n: usize) -> Kernel {
    let mut text = format!("kernel sines {{\n  %x = input x : f32[{n}]\n");
    for k in 1..=terms {
        text += &format!("  %c{k} = const {k}.0 : f32[]\n  %m{k} = mul %x, %c{k} : f32[{n}]\n");
        text += &format!("  %s{k} = sin %m{k} : f32[{n}]\n");
        if k == 1 {
            text += &format!("  %a1 = add %s1, %s1 : f32[{n}]\n");
        } else {
            text += &format!("  %a{k} = add %a{}, %s{k} : f32[{n}]\n", k - 1);
        }
    }
    text += &format!("  output out = %a{terms}\n}}\n");
    parse(&text)
}

/// `sin(x*1.0) + … + sin(x*400.0)` (the first term twice): 1,200 ops, which crashed at 65,536
/// elements. With staging buffers reused, the whole kernel stages a handful of tiles.
#[test]
fn four_hundred_sines() {
    let kernel = sines(400, 70);
    let lir = lir_of(&kernel);
    let frame = check(&lir, &inputs(&kernel, 1, -3.0, 3.0), 2e-4, "400 sines");
    if tile_routines_linked() {
        // Tiles of 2 KiB: at least one staged, and far fewer than the 800 values staged.
        assert!((2048..=16 * 2048).contains(&frame), "frame {frame}");
    }
}

/// 1,500 sines on 3 elements (the tiled plan runs from 2).
#[test]
fn fifteen_hundred_sines_on_three_elements() {
    let kernel = sines(1500, 3);
    let lir = lir_of(&kernel);
    check(&lir, &inputs(&kernel, 2, -3.0, 3.0), 1e-3, "1500 sines");
}

/// `x ** x ** … ** x`, 1,200 terms (right-associative `pow`, each a routine call on a staged
/// argument): it converges for `x` in `[e^-e, e^(1/e)]`.
#[test]
fn power_tower() {
    let n = 9;
    let mut text = format!("kernel tower {{\n  %x = input x : f64[{n}]\n  %p0 = pow %x, %x : f64[{n}]\n");
    for k in 1..1200 {
        text += &format!("  %p{k} = pow %x, %p{} : f64[{n}]\n", k - 1);
    }
    text += "  output out = %p1199\n}\n";
    let kernel = parse(&text);
    let lir = lir_of(&kernel);
    check(&lir, &inputs(&kernel, 3, 0.1, 1.4), 1e-9, "power tower");
}

/// A 5,000-op chain of HIR ops (`sin`, `tanh`, scaling, adding the input back).
#[test]
fn five_thousand_op_chain() {
    let n = 5;
    let mut text = format!(
        "kernel chain {{\n  %x = input x : f32[{n}]\n  %h = const 0.5 : f32[]\n  %v0 = sin %x : f32[{n}]\n"
    );
    for k in 1..5000 {
        let prev = k - 1;
        let line = match k % 4 {
            0 => format!("  %v{k} = sin %v{prev} : f32[{n}]\n"),
            1 => format!("  %v{k} = mul %v{prev}, %h : f32[{n}]\n"),
            2 => format!("  %v{k} = add %v{prev}, %x : f32[{n}]\n"),
            _ => format!("  %v{k} = tanh %v{prev} : f32[{n}]\n"),
        };
        text += &line;
    }
    text += "  output out = %v4999\n}\n";
    let kernel = parse(&text);
    let lir = lir_of(&kernel);
    check(&lir, &inputs(&kernel, 4, -3.0, 3.0), 1e-4, "5000-op chain");
}

/// A kernel whose values stay live across hundreds of routine calls at once (every sine reads
/// one of 200 products computed first): more staged values than `TILE_STAGING_MAX` holds, so it
/// runs untiled, within the frame bound.
#[test]
fn many_values_live_across_routines() {
    let n = 33;
    let mut text = format!("kernel live {{\n  %x = input x : f32[{n}]\n");
    for k in 0..200 {
        text += &format!(
            "  %c{k} = const {}.0 : f32[]\n  %m{k} = mul %x, %c{k} : f32[{n}]\n",
            k + 1
        );
    }
    text += &format!("  %a0 = sin %m199 : f32[{n}]\n");
    for k in 1..200 {
        text += &format!(
            "  %s{k} = sin %m{} : f32[{n}]\n  %a{k} = add %a{}, %s{k} : f32[{n}]\n",
            199 - k,
            k - 1
        );
    }
    text += "  output out = %a199\n}\n";
    let kernel = parse(&text);
    let lir = lir_of(&kernel);
    check(&lir, &inputs(&kernel, 5, -3.0, 3.0), 2e-4, "200 live values");
}

/// `x*1.0 + x*2.0 + … ` with 6,667 distinct constants (20,000 ops) on rows long enough that
/// the constants' vectors are built before the loop: the most values a kernel of this size can
/// keep live through its loop, every one spilled.
#[test]
fn twenty_thousand_ops_of_distinct_constants() {
    for (dtype, n) in [("f64", 40), ("f32", 3)] {
        let mut text = format!("kernel consts {{\n  %x = input x : {dtype}[{n}]\n");
        let terms = 6_667;
        for k in 1..=terms {
            text += &format!("  %c{k} = const {k}.5 : {dtype}[]\n  %m{k} = mul %x, %c{k} : {dtype}[{n}]\n");
            if k == 1 {
                text += &format!("  %a1 = add %m1, %m1 : {dtype}[{n}]\n");
            } else {
                text += &format!("  %a{k} = add %a{}, %m{k} : {dtype}[{n}]\n", k - 1);
            }
        }
        text += &format!("  output out = %a{terms}\n}}\n");
        let kernel = parse(&text);
        let lir = lir_of(&kernel);
        check(
            &lir,
            &inputs(&kernel, 6, -3.0, 3.0),
            1e-2,
            &format!("distinct constants, {dtype}[{n}]"),
        );
    }
}

/// A generated kernel of 100,000 ops on one element, heavy in transcendentals, whose values
/// stay live far along it: its transcendentals call the routines' one-element entries (no
/// staging slot per call), so its frame holds little more than spills, far inside the 1 MiB
/// bound (`codegen::frame_tests` checks that a larger frame is refused with
/// `Unsupported::Size`).
#[test]
fn a_kernel_of_100_000_ops_on_one_element_fits_the_frame() {
    let kernel = transcendental_kernel(&mut TestRng::new(0xf4a3e), 100_000, DType::F32, 1, "huge");
    let lir = lir_of(&kernel);
    let frame = rfx_codegen_cpu::compile(&lir, &CompileOptions::default())
        .map(|c| c.max_frame_bytes())
        .unwrap_or_else(|e| panic!("100,000 ops on one element: {e}"));
    assert!(frame < MAX_FRAME / 8, "frame of {frame} bytes");
}

/// Generated kernels of 1,000 to 20,000 ops, heavy in transcendentals (`rfx_check::generator::
/// transcendental_kernel`), in `f32` and `f64`, against the interpreter. `RFX_LARGE_KERNEL_CASES`
/// sets the number of cases (3 by default; `rfx fuzz --large` and `cargo xtask fuzz --large
/// true` run more of the same generator, on every backend); case `k` is reproduced from its
/// seed alone.
#[test]
fn generated_large_kernels_match_interpreter() {
    let cases: u64 = std::env::var("RFX_LARGE_KERNEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    for case in 0..cases {
        let seed = 0x1a7e_0000 + case;
        let mut rng = TestRng::new(seed);
        // The first cases span the range: 20,000 ops, then 1,000, then anywhere between.
        let ops = match case {
            0 => 20_000,
            1 => 1_000,
            _ => 1_000 + rng.below(19_001),
        };
        let dtype = if case % 2 == 0 { DType::F32 } else { DType::F64 };
        let len = 2 + rng.below(70);
        let kernel = transcendental_kernel(&mut rng, ops, dtype, len, "large");
        assert!(kernel.op_count() >= ops, "seed {seed}: {} ops", kernel.op_count());
        let lir = lir_of(&kernel);
        let tolerance = if dtype == DType::F32 { 1e-3 } else { 1e-10 };
        check(
            &lir,
            &inputs(&kernel, seed, -4.0, 4.0),
            tolerance,
            &format!("seed {seed} ({ops} ops, {dtype}[{len}])"),
        );
    }
}
