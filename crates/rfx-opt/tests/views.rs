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
