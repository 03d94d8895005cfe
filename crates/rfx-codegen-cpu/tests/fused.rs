//! Elementwise bodies run as one fused pass per row (CPUs with AVX2 and FMA): generated chains
//! of exact ops around the transcendentals, `f32` and `f64`, at ragged lengths. Each element of
//! a fused kernel must have the bits of the same kernel run on that element alone (one-element
//! kernels run scalar code, which calls the tile routines one element at a time and does the
//! exact ops inline), and the fused call must really be emitted.

use rfx_codegen_cpu::{CpuBackend, dump};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayData, DType, Scalar};
use rfx_lower::{Backend, CompileOptions, LowerConfig, Scratch, lower};
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
    let mut outputs: Vec<Array> = lir
        .outputs()
        .map(|(_, _, ty)| Array::filled(Scalar::zero(ty.dtype), ty.shape.clone()))
        .collect();
    {
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let mut out_views: Vec<_> = outputs.iter_mut().map(Array::view_mut).collect();
        compiled
            .run(&views, &mut out_views, &mut Scratch::new())
            .expect("run");
    }
    outputs
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
        for n in [1usize, 7, 8, 9, 63, 64, 65, 1023, 1025] {
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
