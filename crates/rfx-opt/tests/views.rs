//! Views through reshapes of stored values: a transpose of a reshape of a computed value reads
//! the computed value's buffer in place, with the interpreter's bits.

use rfx_ir::Array;
use rfx_ir::hir::parse;
use rfx_ir::interp::{Mode, run_hir, run_mir};
use rfx_ir::mir::BufKind;
use rfx_ir::testgen::{TestRng, random_inputs, same_values};
use rfx_opt::{OptConfig, optimize};

#[test]
fn a_transpose_of_a_reshaped_computed_value_reads_its_buffer_in_place() {
    let text = include_str!("corpus/transpose_reshaped_computed.rfx");
    let kernel = parse(text).expect("parse");
    let (program, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    for seed in 0..4 {
        let inputs = random_inputs(&mut TestRng::new(seed), &kernel, 0.1);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_hir(&kernel, &views, Mode::Native).expect("run_hir");
        let got = run_mir(&program, &views, Mode::Native).expect("run_mir");
        for (e, g) in expected.iter().zip(&got) {
            assert!(
                same_values(e, g),
                "seed {seed}:\nexpected {e:?}\ngot {g:?}\n{program}"
            );
        }
    }
    // One temporary (the sines, as computed) and no kernel copying it into another.
    let temps: Vec<Vec<usize>> = program
        .buffers()
        .iter()
        .filter(|b| b.kind == BufKind::Temp)
        .map(|b| b.ty.shape.dims().to_vec())
        .collect();
    assert_eq!(temps, vec![vec![4, 9]], "{program}");
    assert_eq!(program.kernels().len(), 2, "{program}");
}

/// The bits of every output of `text` through `optimize` and through `fuse_chains`, against the
/// interpreter; returns the optimised program.
fn agrees(text: &str) -> rfx_ir::mir::MirProgram {
    let kernel = parse(text).expect("parse");
    let (program, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    let plain = rfx_opt::fuse_chains(&kernel).expect("fuse_chains");
    for seed in 0..4 {
        let inputs = random_inputs(&mut TestRng::new(seed), &kernel, 0.1);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_hir(&kernel, &views, Mode::Native).expect("run_hir");
        for p in [&program, &plain] {
            let got = run_mir(p, &views, Mode::Native).expect("run_mir");
            for (e, g) in expected.iter().zip(&got) {
                assert!(same_values(e, g), "seed {seed}:\nexpected {e:?}\ngot {g:?}\n{p}");
            }
        }
    }
    program
}

/// A view (a slice of a broadcast) of a reshape of an `iota`, which has no buffer to read in
/// place: the reshape is stored for it (a random kernel of the soundness suite, seed 1112).
#[test]
fn a_view_of_a_reshaped_iota_still_stores_the_reshape() {
    agrees(
        "kernel random {
  %0 = input in0 : f32[3]
  %5 = iota axis 0 : f32[3]
  %6 = reshape %5 : f32[3]
  %11 = broadcast_to %6 : f32[3,3]
  %12 = slice %11 starts [1,0] : f32[2,3]
  %t = transpose %12 perm [1,0] : f32[3,2]
  %13 = reshape %0 : f32[3,1]
  %out = add %t, %13 : f32[3,2]
  output out = %out
}",
    );
}

/// A transpose of a reshape of an input reads the input in place: nothing is stored.
#[test]
fn a_transpose_of_a_reshaped_input_reads_the_input_in_place() {
    let program = agrees(
        "kernel t {
  %x = input x : f64[2,6]
  %m = reshape %x : f64[2,2,3]
  %t = transpose %m perm [0,2,1] : f64[2,3,2]
  %e = exp %t : f64[2,3,2]
  output out = %e
}",
    );
    assert_eq!(program.kernels().len(), 1, "{program}");
    assert!(
        program.buffers().iter().all(|b| b.kind != BufKind::Temp),
        "{program}"
    );
}
