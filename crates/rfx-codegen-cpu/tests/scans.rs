//! Kernels with scans on the CPU: every path (a kernel of a few points written out, one row at
//! a time, vectors of rows in groups with a ragged end), rows that lie apart and neighbouring
//! ones, both directions, `f32`, `f64` and `i32`, fused with elementwise work, on one thread
//! and on several, in kernels of two, three and four loop dims: every output element has the
//! LIR interpreter's bits.

use crate::common;

use common::assert_bits_match_interpreter;

#[test]
fn every_scan_path_matches_the_interpreter() {
    let mut seed = 0;
    for dtype in ["f32", "f64", "i32"] {
        for (rows, steps) in [
            (1, 3),
            (1, 20),
            (1, 100),
            (2, 9),
            (3, 40),
            (4, 7),
            (5, 12),
            (33, 9),
            (37, 1),
            (70, 31),
        ] {
            for (op, reverse) in [
                ("cumsum", false),
                ("cumprod", true),
                ("cummax", true),
                ("cummin", false),
            ] {
                let way = if reverse { " reverse" } else { "" };
                // Along each row (rows apart), and down the columns of the transposed layout
                // (neighbouring rows), each with elementwise work before and after.
                let text = format!(
                    "kernel scans {{
  %x = input x : {dtype}[{rows},{steps}]
  %y = input y : {dtype}[{steps},{rows}]
  %b = input b : {dtype}[{rows},1]
  %xx = mul %x, %x : {dtype}[{rows},{steps}]
  %s = {op} %xx axis 1{way} : {dtype}[{rows},{steps}]
  %t = add %s, %b : {dtype}[{rows},{steps}]
  %c = {op} %y axis 0{way} : {dtype}[{steps},{rows}]
  %d = sub %c, %y : {dtype}[{steps},{rows}]
  output t = %t
  output d = %d
}}"
                );
                for threads in [1, 2] {
                    seed += 1;
                    assert_bits_match_interpreter(&text, threads, seed);
                }
            }
        }
    }
}

#[test]
fn large_scans_split_over_threads() {
    // Enough rows and points that the pool splits the rows between threads.
    for (dtype, op) in [("f32", "cumsum"), ("f64", "cummax")] {
        let text = format!(
            "kernel big {{
  %x = input x : {dtype}[4099,300]
  %s = {op} %x axis 1 : {dtype}[4099,300]
  output s = %s
}}"
        );
        let lir = assert_bits_match_interpreter(&text, 4, 9);
        assert!(lir.to_string().contains("scan forward"), "{lir}");
    }
}

#[test]
fn a_scan_of_a_transcendental_keeps_its_rows_consistent() {
    // Transcendentals in a scan's body: the rows of a vector group and the ragged end all give
    // one answer per element (compared with the interpreter's within the routines' bounds by
    // the conformance suite; here the exact ops around them).
    let text = "kernel trig {
  %x = input x : f32[45,6]
  %s = sin %x : f32[45,6]
  %q = mul %s, %s : f32[45,6]
  %c = cummax %q axis 1 : f32[45,6]
  %k = const 2.0 : f32[]
  %m = mul %c, %k : f32[45,6]
  output m = %m
}";
    let kernel = rfx_ir::hir::parse(text).expect("parse");
    let (mir, _) = rfx_opt::optimize(&kernel, &rfx_opt::OptConfig::default()).expect("optimize");
    let lir = rfx_lower::lower(&mir, &rfx_lower::LowerConfig::default())
        .expect("lower")
        .0;
    assert!(lir.to_string().contains("scan forward"), "{lir}");
    let compiled = rfx_lower::Backend::compile(
        &rfx_codegen_cpu::CpuBackend,
        &lir,
        &rfx_lower::CompileOptions::default(),
    )
    .expect("compile");
    let mut rng = rfx_ir::testgen::TestRng::new(3);
    let inputs = rfx_ir::testgen::random_inputs(&mut rng, &kernel, 0.0);
    let views: Vec<_> = inputs.iter().map(rfx_ir::Array::view).collect();
    let oracle = rfx_ir::interp::run_hir(&kernel, &views, rfx_ir::interp::Mode::Oracle).expect("oracle");
    let mut got = rfx_ir::Array::filled(rfx_ir::Scalar::F32(0.0), rfx_ir::Shape::new(vec![45, 6]));
    compiled
        .run(&views, &mut [got.view_mut()], &mut rfx_lower::Scratch::new())
        .expect("run");
    for i in 0..270 {
        let (g, o) = (
            got.get(i).expect("got").to_f64(),
            oracle[0].get(i).expect("oracle").to_f64(),
        );
        assert!(
            (g - o).abs() <= 1e-6 * (1.0 + o.abs()),
            "element {i}: {g} against {o}"
        );
    }
}

#[test]
fn scans_of_three_and_four_loop_dims_run_rows_in_lanes() {
    // Batches of trajectories scanned along time, `[B, T, D]` along axis 1 (lowered to
    // `[B, D, T]`: the lanes run along `D` when every access is contiguous there and it is a
    // vector long, along `B`, gathered, otherwise), time-major `[T, B, D]` along axis 0, and a
    // four-dim `[A, B, T, D]`, with a broadcast operand and a linear recurrence, both ways, on
    // one thread and on several.
    let mut seed = 100;
    for dtype in ["f32", "f64", "i32"] {
        for (b, t, d) in [(5, 7, 2), (9, 13, 3), (4, 6, 8), (33, 5, 6), (2, 40, 9)] {
            for (op, reverse) in [
                ("cumsum", false),
                ("cummax", true),
                ("linrec", false),
                ("linrec", true),
            ] {
                let way = if reverse { " reverse" } else { "" };
                let (args_x, args_y) = if op == "linrec" {
                    ("%x, %g", "%y, %h")
                } else {
                    ("%x", "%y")
                };
                let text = format!(
                    "kernel trajectories {{
  %x0 = input x : {dtype}[{b},{t},{d}]
  %y = input y : {dtype}[{t},{b},{d}]
  %z0 = input z : {dtype}[2,{b},{t},{d}]
  %w = input w : {dtype}[{d}]
  %x = add %x0, %w : {dtype}[{b},{t},{d}]
  %g = sub %x0, %w : {dtype}[{b},{t},{d}]
  %h = mul %y, %y : {dtype}[{t},{b},{d}]
  %s = {op} {args_x} axis 1{way} : {dtype}[{b},{t},{d}]
  %c = {op} {args_y} axis 0{way} : {dtype}[{t},{b},{d}]
  %e = cumsum %z0 axis 2{way} : {dtype}[2,{b},{t},{d}]
  output s = %s
  output c = %c
  output e = %e
}}"
                );
                for threads in [1, 2] {
                    seed += 1;
                    assert_bits_match_interpreter(&text, threads, seed);
                }
            }
        }
    }
}

#[test]
fn a_shifted_operand_in_a_scan_of_three_loop_dims() {
    // A reverse linear recurrence whose coefficient is its operand shifted by one step (a
    // running product's adjoint: a window and a padding, read by masked gathers in the scan's
    // loop nest), over batches of trajectories whose lanes run along `D` or, gathered, `B`.
    let mut seed = 500;
    for dtype in ["f32", "f64"] {
        for (b, t, d) in [(3, 9, 4), (6, 17, 3), (40, 5, 2), (2, 33, 8)] {
            let text = format!(
                "kernel shifted {{
  %x = input x : {dtype}[{b},{t},{d}]
  %s = slice %x starts [0,1,0] : {dtype}[{b},{tm},{d}]
  %p = pad %s low [0,0,0] : {dtype}[{b},{t},{d}]
  %l = linrec %x, %p axis 1 reverse : {dtype}[{b},{t},{d}]
  %m = mul %l, %p : {dtype}[{b},{t},{d}]
  output l = %l
  output m = %m
}}",
                tm = t - 1
            );
            for threads in [1, 2] {
                seed += 1;
                assert_bits_match_interpreter(&text, threads, seed);
            }
        }
    }
}
