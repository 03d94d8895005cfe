//! Stores with regions (each kernel writing its part of a buffer at an offset, contiguous or
//! interleaved) compiled for the CPU, bit for bit the MIR interpreter's, at sizes that run one
//! point, a few vectors with a tail, and split across threads.

use rfx_codegen_cpu::compile;
use rfx_ir::interp::{Mode, run_lir, run_mir};
use rfx_ir::{Array, ArrayViewMut, mir};
use rfx_lower::{CompileOptions, Compiled, LowerConfig, Scratch, lower};

/// `out[n, 3k]`: columns `0..k` are `x`, `k..2k` are `x * x - x` and `2k..3k` are `2x` (blocks),
/// and `mix[n, k, 3]` interleaves `x`, `-x` and `x * x` along its last axis (a stack), each
/// part stored by its kernel at its offset.
fn program(n: usize, k: usize) -> mir::MirProgram {
    let w = 3 * k;
    let text = format!(
        "\
mir regions {{
  buf0: f32[{n},{k}] = input x
  buf1: f32[{n},{w}] = output out
  buf2: f32[{n},{k},3] = output mix
  kernel blocks [{n},{k}] {{
    %0 = load buf0 [{k},1] : f32
    %3 = mul %0, %0 : f32
    %1 = sub %3, %0 : f32
    %2 = add %0, %0 : f32
    store buf1 [{w},1] = %0
    store buf1 [{w},1] offset {k} = %1
    store buf1 [{w},1] offset {k2} = %2
  }}
  kernel first [{n},{k}] {{
    %0 = load buf0 [{k},1] : f32
    store buf2 [{w},3] = %0
  }}
  kernel rest [{n},{k}] {{
    %0 = load buf0 [{k},1] : f32
    %1 = neg %0 : f32
    %2 = mul %0, %0 : f32
    store buf2 [{w},3] offset 1 = %1
    store buf2 [{w},3] offset 2 = %2
  }}
}}
",
        k2 = 2 * k
    );
    mir::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn run(compiled: &dyn Compiled) -> Vec<Array> {
    let program = compiled.program();
    let input_ty = program.inputs().next().expect("one input").2.clone();
    let n = input_ty.shape.numel();
    let x = Array::from_vec(
        input_ty.shape.clone(),
        (0..n).map(|i| (i as f32) * 0.37 - 5.0).collect::<Vec<_>>(),
    )
    .expect("x");
    let mut outputs: Vec<Array> = program
        .outputs()
        .map(|(_, _, ty)| Array::filled(rfx_ir::Scalar::zero(ty.dtype), ty.shape.clone()))
        .collect();
    let mut outs: Vec<ArrayViewMut<'_>> = outputs.iter_mut().map(Array::view_mut).collect();
    compiled
        .run(&[x.view()], &mut outs, &mut Scratch::new())
        .expect("run");
    drop(outs);
    outputs.push(x);
    outputs
}

#[test]
fn region_stores_give_the_interpreters_bits() {
    for (n, k) in [(1, 1), (1, 5), (37, 3), (5, 17), (4096, 4)] {
        let program = program(n, k);
        let (lir, _) = lower(&program, &LowerConfig::default()).expect("lower");
        let compiled = compile(&lir, &CompileOptions::default()).expect("compile");
        let mut got = run(&compiled);
        let x = got.pop().expect("the input");
        let want = run_mir(&program, &[x.view()], Mode::Native).expect("interpret");
        assert_eq!(got, want, "n = {n}, k = {k}");
        let lir_run = run_lir(&lir, &[x.view()], Mode::Native).expect("interpret LIR");
        assert_eq!(lir_run, want, "LIR interpreter, n = {n}, k = {k}");
        // The interpreter itself puts each part where its region says.
        let xs = x.as_slice::<f32>().expect("f32");
        let out = want[0].as_slice::<f32>().expect("f32");
        let mix = want[1].as_slice::<f32>().expect("f32");
        for row in 0..n {
            for col in 0..k {
                let v = xs[row * k + col];
                let at = row * 3 * k + col;
                assert_eq!([out[at], out[at + k], out[at + 2 * k]], [v, v * v - v, v + v]);
                let at = (row * k + col) * 3;
                assert_eq!([mix[at], mix[at + 1], mix[at + 2]], [v, -v, v * v]);
            }
        }
    }
}
