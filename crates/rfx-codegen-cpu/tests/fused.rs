//! Elementwise bodies run as one fused pass per row (CPUs with AVX2 and FMA): generated chains
//! of exact ops around the transcendentals, `f32` and `f64`, at ragged lengths. Each element of
//! a fused kernel must have the bits of the same kernel run on that element alone (one-element
//! kernels run scalar code, which calls the tile routines one element at a time and does the
//! exact ops inline), and the fused call must really be emitted.

use rfx_codegen_cpu::{CpuBackend, dump, dump_with};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayData, DType, Scalar};
use rfx_lower::{Backend, CompileOptions, CpuTarget, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

fn routines_linked() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

fn lir_of(src: &str) -> LirProgram {
    let kernel = rfx_ir::hir::parse(src).expect("parse");
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

const UNARY: [&str; 9] = ["sin", "cos", "exp", "log", "tanh", "neg", "abs", "sqrt", "atan"];
const BINARY: [&str; 8] = ["add", "sub", "mul", "div", "min", "max", "pow", "atan2"];

/// A random elementwise chain of `dt` over inputs `x` and `y` and a constant, with two
/// outputs (the last value and one before it).
fn chain(rng: &mut TestRng, dt: &str) -> String {
    let mut lines = vec![
        format!("%x = input x : {dt}[{{N}}]"),
        format!("%y = input y : {dt}[{{N}}]"),
        format!("%c = const 1.5 : {dt}[]"),
    ];
    let mut values = vec!["%x".to_string(), "%y".to_string()];
    let steps = 4 + rng.below(5);
    for k in 0..steps {
        let a = values[rng.below(values.len())].clone();
        let name = format!("%v{k}");
        if rng.below(2) == 0 {
            let op = UNARY[rng.below(UNARY.len())];
            lines.push(format!("{name} = {op} {a} : {dt}[{{N}}]"));
        } else {
            let op = BINARY[rng.below(BINARY.len())];
            let b = if rng.below(4) == 0 {
                "%c".to_string()
            } else {
                values[rng.below(values.len())].clone()
            };
            lines.push(format!("{name} = {op} {a}, {b} : {dt}[{{N}}]"));
        }
        values.push(name);
    }
    // At least one transcendental, so the body has a routine.
    let last = values.last().cloned().unwrap_or_default();
    lines.push(format!("%s = sin {last} : {dt}[{{N}}]"));
    lines.push(format!("%o = add %s, %y : {dt}[{{N}}]"));
    let mid = values[2 + rng.below(values.len() - 2)].clone();
    format!(
        "kernel k {{\n {}\n output out = %o\n output mid = {mid}\n}}",
        lines.join("\n ")
    )
}

fn run(lir: &LirProgram, inputs: &[Array]) -> Vec<Array> {
    let compiled = CpuBackend
        .compile(
            lir,
            &CompileOptions {
                max_threads: Some(1),
                ..CompileOptions::default()
            },
        )
        .expect("compile");
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    compiled.run_to_new(&views).expect("run")
}

/// The bits of an element, every NaN alike.
fn bits(s: Scalar) -> u64 {
    if s.to_f64().is_nan() {
        u64::MAX
    } else {
        s.to_bits()
    }
}

fn input(rng: &mut TestRng, dtype: DType, n: usize) -> Array {
    let values: Vec<Scalar> = (0..n)
        .map(|_| {
            // Mostly moderate values, some huge, zero and negative ones (slow paths and NaNs).
            let v = match rng.below(16) {
                0 => 3.0e5,
                1 => 0.0,
                2 => -1.0e-3,
                _ => (rng.below(4001) as f64 - 2000.0) / 200.0,
            };
            Scalar::from_f64(dtype, v)
        })
        .collect();
    Array::new(
        vec![n],
        ArrayData::from_scalars(dtype, values).expect("one dtype"),
    )
    .expect("input")
}

#[test]
fn generated_chains_keep_their_bits_in_fused_passes() {
    if !routines_linked() {
        return;
    }
    let mut rng = TestRng::new(49);
    for case in 0..12 {
        let (dt, dtype) = if case % 2 == 0 {
            ("f32", DType::F32)
        } else {
            ("f64", DType::F64)
        };
        let src = chain(&mut rng, dt);
        let one = lir_of(&src.replace("{N}", "1"));
        for n in [1usize, 7, 8, 9, 63, 64, 65, 255, 256, 257, 1023, 1025] {
            let lir = lir_of(&src.replace("{N}", &n.to_string()));
            let inputs = [input(&mut rng, dtype, n), input(&mut rng, dtype, n)];
            let outputs = run(&lir, &inputs);
            for i in 0..n {
                let alone: Vec<Array> = inputs
                    .iter()
                    .map(|a| {
                        let v = a.get(i).expect("element");
                        Array::new(vec![1], ArrayData::from_scalars(dtype, [v]).expect("one dtype"))
                            .expect("one")
                    })
                    .collect();
                let expected = run(&one, &alone);
                for (k, (got, want)) in outputs.iter().zip(&expected).enumerate() {
                    let (g, w) = (got.get(i).expect("got"), want.get(0).expect("want"));
                    assert_eq!(
                        bits(g),
                        bits(w),
                        "{src}\nn = {n}, output {k}, element {i}: {g:?} vs {w:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_chain_around_a_transcendental_is_one_fused_call() {
    if !routines_linked() {
        return;
    }
    let src = "kernel k {\n %x = input x : f32[1024]\n %y = input y : f32[1024]\n %two = const 2 : f32[]\n \
               %a = mul %x, %two : f32[1024]\n %s = sin %a : f32[1024]\n %o = add %s, %y : f32[1024]\n output out = %o\n}";
    let lir = lir_of(src);
    let clif: String = dump(&lir).expect("dump").into_iter().map(|(_, c, _)| c).collect();
    let calls = clif
        .lines()
        .filter(|l| l.trim_start().starts_with("call fn"))
        .count();
    assert_eq!(calls, 1, "{clif}");
}

const EXACT_UNARY: [&str; 8] = ["neg", "abs", "sqrt", "rsqrt", "recip", "floor", "ceil", "round"];
const EXACT_BINARY: [&str; 6] = ["add", "sub", "mul", "div", "min", "max"];

/// Row lengths around the assembled pass's and the fused pass's thresholds and the chunk
/// boundaries.
const EXACT_LENGTHS: [usize; 11] = [0, 1, 127, 128, 129, 255, 256, 257, 511, 512, 4097];

/// Runs `src` (with `{N}` the row length) at each of [`EXACT_LENGTHS`] on the CPU backend and
/// on the LIR interpreter, and checks every element's bits.
fn matches_the_interpreter(rng: &mut TestRng, src: &str, dtype: DType) {
    for n in EXACT_LENGTHS {
        let lir = lir_of(&src.replace("{N}", &n.to_string()));
        let inputs = [input(rng, dtype, n), input(rng, dtype, n)];
        let outputs = run(&lir, &inputs);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_lir(&lir, &views, Mode::Native).expect("interpreter");
        for (k, (got, want)) in outputs.iter().zip(&expected).enumerate() {
            for i in 0..n {
                let (g, w) = (got.get(i).expect("got"), want.get(i).expect("want"));
                assert_eq!(
                    bits(g),
                    bits(w),
                    "{src}\nn = {n}, output {k}, element {i}: {g:?} vs {w:?}"
                );
            }
        }
    }
}

#[test]
fn every_exact_op_alone_has_the_interpreters_bits() {
    let mut rng = TestRng::new(4901);
    for (dt, dtype) in [("f32", DType::F32), ("f64", DType::F64)] {
        let head =
            format!("%x = input x : {dt}[{{N}}]\n %y = input y : {dt}[{{N}}]\n %c = const 0.75 : {dt}[]");
        let mut ops: Vec<String> = EXACT_UNARY
            .iter()
            .map(|op| format!("%o = {op} %x : {dt}[{{N}}]"))
            .collect();
        for op in EXACT_BINARY {
            ops.push(format!("%o = {op} %x, %y : {dt}[{{N}}]"));
            ops.push(format!("%o = {op} %c, %x : {dt}[{{N}}]"));
        }
        for op in ops {
            let src = format!("kernel k {{\n {head}\n {op}\n output out = %o\n}}");
            matches_the_interpreter(&mut rng, &src, dtype);
        }
    }
}

/// A random chain of exact ops of `dt` over inputs `x` and `y` and a constant, with two
/// outputs (the last value and one before it).
fn exact_chain(rng: &mut TestRng, dt: &str) -> String {
    let mut lines = vec![
        format!("%x = input x : {dt}[{{N}}]"),
        format!("%y = input y : {dt}[{{N}}]"),
        format!("%c = const -1.25 : {dt}[]"),
    ];
    let mut values = vec!["%x".to_string(), "%y".to_string()];
    let steps = 3 + rng.below(6);
    for k in 0..steps {
        let a = values[rng.below(values.len())].clone();
        let name = format!("%v{k}");
        if rng.below(3) == 0 {
            let op = EXACT_UNARY[rng.below(EXACT_UNARY.len())];
            lines.push(format!("{name} = {op} {a} : {dt}[{{N}}]"));
        } else {
            let op = EXACT_BINARY[rng.below(EXACT_BINARY.len())];
            let b = if rng.below(4) == 0 {
                "%c".to_string()
            } else {
                values[rng.below(values.len())].clone()
            };
            lines.push(format!("{name} = {op} {a}, {b} : {dt}[{{N}}]"));
        }
        values.push(name);
    }
    let last = values.last().cloned().unwrap_or_default();
    let mid = values[2 + rng.below(values.len() - 2)].clone();
    format!(
        "kernel k {{\n {}\n output out = {last}\n output mid = {mid}\n}}",
        lines.join("\n ")
    )
}

#[test]
fn generated_exact_chains_have_the_interpreters_bits() {
    let mut rng = TestRng::new(4902);
    for case in 0..8 {
        let (dt, dtype) = if case % 2 == 0 {
            ("f32", DType::F32)
        } else {
            ("f64", DType::F64)
        };
        let src = exact_chain(&mut rng, dt);
        matches_the_interpreter(&mut rng, &src, dtype);
    }
}

/// The `call` instructions of `src`'s CLIF for `target`.
fn calls(src: &str, target: CpuTarget) -> usize {
    let lir = lir_of(src);
    let options = CompileOptions {
        cpu_target: target,
        ..CompileOptions::default()
    };
    let clif: String = dump_with(&lir, &options)
        .expect("dump")
        .into_iter()
        .map(|(_, c, _)| c)
        .collect();
    clif.lines()
        .filter(|l| l.trim_start().starts_with("call fn"))
        .count()
}

#[test]
fn a_long_one_op_row_is_a_fused_call_and_a_short_one_inline_code() {
    let add = |n: usize, dt: &str| {
        format!(
            "kernel k {{\n %x = input x : {dt}[{n}]\n %y = input y : {dt}[{n}]\n %o = add %x, %y : {dt}[{n}]\n output out = %o\n}}"
        )
    };
    if routines_linked() {
        for dt in ["f32", "f64"] {
            assert_eq!(calls(&add(512, dt), CpuTarget::Host), 1, "{dt}");
            assert_eq!(calls(&add(65_536, dt), CpuTarget::Host), 1, "{dt}");
            assert_eq!(calls(&add(511, dt), CpuTarget::Host), 0, "{dt}");
        }
        // Rows of a 2-d kernel: one call per row.
        let rows = "kernel k {\n %x = input x : f32[3, 512]\n %y = input y : f32[3, 512]\n \
                    %o = mul %x, %y : f32[3, 512]\n output out = %o\n}";
        assert_eq!(calls(rows, CpuTarget::Host), 1);
    }
    // Without the routines (the baseline target: no AVX2) the row stays inline code.
    assert_eq!(calls(&add(4096, "f32"), CpuTarget::Baseline), 0);
}

#[test]
fn a_body_of_several_exact_ops_is_an_assembled_pass_from_128_elements() {
    let pid = |n: usize, dt: &str| {
        format!(
            "kernel k {{
 %e = input e : {dt}[{n}]
 %i = input i : {dt}[{n}]
              %kp = const 1.2 : {dt}[]
 %lo = const -1.0 : {dt}[]
 %hi = const 1.0 : {dt}[]
              %a = mul %kp, %e : {dt}[{n}]
 %s = add %a, %i : {dt}[{n}]
              %u = clamp %s, %lo, %hi : {dt}[{n}]
 output u = %u
}}"
        )
    };
    if routines_linked() {
        for dt in ["f32", "f64"] {
            assert_eq!(calls(&pid(128, dt), CpuTarget::Host), 1, "{dt}");
            assert_eq!(calls(&pid(4096, dt), CpuTarget::Host), 1, "{dt}");
            assert_eq!(calls(&pid(127, dt), CpuTarget::Host), 0, "{dt}");
        }
    }
    assert_eq!(calls(&pid(4096, "f32"), CpuTarget::Baseline), 0);
    let mut rng = TestRng::new(4903);
    for (dt, dtype) in [("f32", DType::F32), ("f64", DType::F64)] {
        let src = pid(0, dt).replace("[0]", "[{N}]");
        matches_the_interpreter(&mut rng, &src, dtype);
    }
}
