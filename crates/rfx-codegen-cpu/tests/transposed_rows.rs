//! Reductions with their outputs in vector lanes read each output's row `w` points at a time
//! as one vector and transpose the `w × w` block (`Gen::transposed_rows`) instead of
//! gathering one element per output: every row length (whole chunks, a tail of single points,
//! unrolled and looped rows), dtype, reduction and thread split must give the LIR
//! interpreter's bits, with operands that are not transposed (a weight row shared by every
//! output, a scalar) beside the transposed ones.

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::hir::parse;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, Scalar};
use rfx_lower::{Backend, CompileOptions, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

fn lir_of(text: &str) -> (rfx_ir::hir::Kernel, LirProgram) {
    let kernel = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    let lir = lower(&mir, &LowerConfig::default()).expect("lower").0;
    (kernel, lir)
}

fn check(text: &str, threads: usize, seed: u64) -> bool {
    let (kernel, lir) = lir_of(text);
    let across = lir
        .kernels()
        .iter()
        .any(|k| k.reduce_dims > 0 && k.schedule.reduce_lanes == 1 && k.schedule.vector_width > 1);
    let options = CompileOptions {
        max_threads: Some(threads),
        ..CompileOptions::default()
    };
    let compiled = CpuBackend.compile(&lir, &options).expect("compile");
    let mut rng = TestRng::new(seed);
    let inputs = random_inputs(&mut rng, &kernel, 0.05);
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let want = run_lir(&lir, &views, Mode::Native).expect("interpreter");
    let mut got: Vec<Array> = want
        .iter()
        .map(|a| Array::filled(Scalar::zero(a.dtype()), a.shape().clone()))
        .collect();
    {
        let mut out: Vec<_> = got.iter_mut().map(Array::view_mut).collect();
        compiled.run(&views, &mut out, &mut Scratch::new()).expect("run");
    }
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        for i in 0..w.data().len() {
            let (a, b) = (g.get(i).expect("got"), w.get(i).expect("want"));
            let same = a == b || (a.to_f64().is_nan() && b.to_f64().is_nan());
            assert!(
                same && (a.to_f64().is_nan() || a.to_f64().to_bits() == b.to_f64().to_bits()),
                "output {k}, element {i}: cpu {a:?}, interpreter {b:?}\n{text}"
            );
        }
    }
    across
}

#[test]
fn row_reductions_with_outputs_in_lanes_keep_the_interpreters_bits() {
    let mut across = 0;
    for dt in ["f32", "f64", "i32"] {
        for row in [1usize, 2, 3, 4, 5, 7, 8, 12, 16, 17, 20, 23, 32] {
            for outputs in [4usize, 5, 9, 67] {
                for (op, body) in [
                    ("sum", format!(" %v = mul %x, %w : {dt}[{outputs}, {row}]\n")),
                    ("max", format!(" %v = sub %x, %w : {dt}[{outputs}, {row}]\n")),
                ] {
                    let text = format!(
                        "kernel k {{\n %x = input x : {dt}[{outputs}, {row}]\n %w = input w : {dt}[{row}]\n\
                         {body} %r = {op} %v axes [1] : {dt}[{outputs}]\n output r = %r\n}}"
                    );
                    across += usize::from(check(&text, 1, (row * 100 + outputs) as u64));
                }
            }
        }
    }
    // Floats only from here: means, products, and rank 3 with an outer kept dim.
    for dt in ["f32", "f64"] {
        for row in [4usize, 6, 9, 18] {
            for op in ["mean", "prod", "min"] {
                let text = format!(
                    "kernel k {{\n %x = input x : {dt}[3, 10, {row}]\n %s = input s : {dt}[]\n \
                     %v = mul %x, %s : {dt}[3, 10, {row}]\n %r = {op} %v axes [2] : {dt}[3, 10]\n output r = %r\n}}"
                );
                across += usize::from(check(&text, 1, row as u64));
            }
        }
    }
    assert!(across >= 250, "only {across} kernels had their outputs in lanes");
}

#[test]
fn transposed_rows_split_across_threads() {
    for (dt, row) in [("f32", 12usize), ("f64", 20), ("f32", 19)] {
        let text = format!(
            "kernel k {{\n %x = input x : {dt}[40000, {row}]\n %v = mul %x, %x : {dt}[40000, {row}]\n \
             %r = sum %v axes [1] : {dt}[40000]\n output r = %r\n}}"
        );
        assert!(
            check(&text, 2, row as u64),
            "{dt} rows of {row}: outputs not in lanes"
        );
    }
}
