//! A per-example kernel (a `[n, 1]` domain over rows of its inputs and outputs, strided
//! accesses) whose body ends in its stores: the CPU backend emits each load right before its
//! first use and each store right after its value, and the values are bit for bit the
//! interpreters' at sizes that run one example, vectors with a tail and several threads.

use rfx_codegen_cpu::compile;
use rfx_ir::interp::{Mode, run_lir, run_mir};
use rfx_ir::{Array, ArrayViewMut, mir};
use rfx_lower::{CompileOptions, Compiled, LowerConfig, Scratch, lower};

/// `out[i, :]` from `x[i, :]` (3 columns) and `y[i, :]` (4 columns), five values per example
/// computed as a chain, all stored at the end of the body (as fusion leaves them).
fn program(n: usize) -> mir::MirProgram {
    let text = format!(
        "\
mir order {{
  buf0: f64[{n},3] = input x
  buf1: f64[{n},4] = input y
  buf2: f64[{n},5] = output out
  kernel rows [{n},1] {{
    %0 = load buf0 [3,0] : f64
    %1 = load buf0 [3,0] offset 1 : f64
    %2 = load buf0 [3,0] offset 2 : f64
    %3 = load buf1 [4,0] : f64
    %4 = load buf1 [4,0] offset 1 : f64
    %5 = load buf1 [4,0] offset 2 : f64
    %6 = load buf1 [4,0] offset 3 : f64
    %7 = mul %0, %1 : f64
    %8 = sub %7, %2 : f64
    %9 = mul %3, %4 : f64
    %10 = add %9, %8 : f64
    %11 = div %5, %6 : f64
    %12 = mul %11, %10 : f64
    %13 = sqrt %11 : f64
    %14 = sub %13, %7 : f64
    store buf2 [5,1] = %8
    store buf2 [5,1] offset 1 = %10
    store buf2 [5,1] offset 2 = %12
    store buf2 [5,1] offset 3 = %14
    store buf2 [5,1] offset 4 = %11
  }}
}}
"
    );
    mir::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn run(compiled: &dyn Compiled) -> Vec<Array> {
    let program = compiled.program();
    let inputs: Vec<Array> = program
        .inputs()
        .enumerate()
        .map(|(k, (_, _, ty))| {
            let n = ty.shape.numel();
            let values = (0..n)
                .map(|i| ((i * 7 + k * 3) % 23) as f64 * 0.173 + 0.25)
                .collect::<Vec<_>>();
            Array::from_vec(ty.shape.clone(), values).expect("input")
        })
        .collect();
    let mut outputs: Vec<Array> = program
        .outputs()
        .map(|(_, _, ty)| Array::filled(rfx_ir::Scalar::zero(ty.dtype), ty.shape.clone()))
        .collect();
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let mut outs: Vec<ArrayViewMut<'_>> = outputs.iter_mut().map(Array::view_mut).collect();
    compiled.run(&views, &mut outs, &mut Scratch::new()).expect("run");
    drop(outs);
    outputs.extend(inputs);
    outputs
}

#[test]
fn per_example_rows_give_the_interpreters_bits() {
    for n in [1, 2, 3, 37, 4096] {
        let program = program(n);
        let (lir, _) = lower(&program, &LowerConfig::default()).expect("lower");
        let compiled = compile(&lir, &CompileOptions::default()).expect("compile");
        let mut got = run(&compiled);
        let inputs = got.split_off(1);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let want = run_mir(&program, &views, Mode::Native).expect("interpret");
        assert_eq!(got, want, "n = {n}");
        let lir_run = run_lir(&lir, &views, Mode::Native).expect("interpret LIR");
        assert_eq!(got, lir_run, "n = {n}");
        // Not a vacuous comparison: every output was written.
        assert!(got[0].to_f64_vec().iter().all(|v| *v != 0.0), "n = {n}");
    }
}

/// In the kernel's loop, the first output is stored before the loads of `y` (it needs only
/// `x`), and the quotient `y[2] / y[3]` is loaded after the first two stores.
#[test]
fn stores_follow_their_values_and_loads_precede_their_uses() {
    let program = program(4096);
    let (lir, _) = lower(&program, &LowerConfig::default()).expect("lower");
    let dumps = rfx_codegen_cpu::dump(&lir).expect("dump");
    let (_, clif, _) = dumps.first().expect("one kernel");
    // One body: from the first load to the end of its block.
    let lines: Vec<&str> = clif.lines().collect();
    let first_load = lines
        .iter()
        .position(|l| l.contains("= load.f64"))
        .expect("a load");
    let end = lines[first_load..]
        .iter()
        .position(|l| l.contains("jump") || l.contains("brif") || l.contains("return"))
        .map_or(lines.len(), |e| first_load + e);
    let body = &lines[first_load..end];
    let kinds: Vec<char> = body
        .iter()
        .filter_map(|l| {
            if l.contains("= load.f64") {
                Some('L')
            } else if l.trim_start().starts_with("store") {
                Some('S')
            } else {
                None
            }
        })
        .collect();
    let first_store = kinds.iter().position(|&c| c == 'S').expect("a store");
    let last_load = kinds.iter().rposition(|&c| c == 'L').expect("a load");
    assert!(
        first_store < last_load,
        "stores wait for the last load: {}",
        kinds.iter().collect::<String>()
    );
}
