//! Outputs that are elementwise ops of a concatenation: each is stored part by part, in the
//! loop nests that compute the concatenation's parts (no kernel reads a stored concatenation
//! back to apply the op), and gives the interpreter's bits.

use rfx_ir::hir::{Kernel, parse};
use rfx_ir::interp::{Mode, run_hir, run_mir};
use rfx_ir::mir::{MirOp, MirProgram};
use rfx_ir::testgen::{TestRng, random_inputs, same_values};
use rfx_ir::{Array, Scalar};
use rfx_opt::{OptConfig, fuse_chains, optimize};

/// The program `kernel` optimises to, after checking that it and the program fused without
/// algebraic rewriting agree with the interpreter bit for bit on random inputs. Returns the
/// interpreter's outputs for the last seed too.
fn checked(kernel: &Kernel) -> (MirProgram, Vec<Array>) {
    let (program, _) = optimize(kernel, &OptConfig::default()).expect("optimize");
    let plain = fuse_chains(kernel).expect("fuse_chains");
    let mut last = Vec::new();
    for seed in 0..4 {
        let inputs = random_inputs(&mut TestRng::new(seed), kernel, 0.1);
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let expected = run_hir(kernel, &views, Mode::Native).expect("run_hir");
        for p in [&program, &plain] {
            let got = run_mir(p, &views, Mode::Native).expect("run_mir");
            assert_eq!(expected.len(), got.len());
            for (e, g) in expected.iter().zip(&got) {
                assert!(same_values(e, g), "seed {seed}:\nexpected {e:?}\ngot {g:?}\n{p}");
            }
        }
        last = run_mir(&program, &views, Mode::Native).expect("run_mir");
    }
    (program, last)
}

/// How many kernels load a buffer that an earlier kernel of the program stores.
fn read_back(program: &MirProgram) -> usize {
    let mut stored = std::collections::BTreeSet::new();
    let mut count = 0;
    for k in program.kernels() {
        let loads = k.body.iter().any(|i| match &i.op {
            MirOp::Load { buf, .. } => stored.contains(buf),
            _ => false,
        });
        count += usize::from(loads);
        stored.extend(k.stores.iter().map(|s| s.buf));
    }
    count
}

/// A batched 9×6 block matrix of 3×3 blocks (ImuIntegration's measurement Jacobian): block
/// rows along axis 1, each a concatenation along axis 2 of a computed block, an unbatched
/// identity (of lower rank, broadcast by the choice) or a zero block; `OPS` is replaced by
/// outputs that read it.
const BLOCKS: &str = r"
kernel blocks {
  %j = input j : f64[4,3,3]
  %dt = input dt : f64[4,1,1]
  %g = input g : f64[4,1,1]
  %w = input w : f64[4,9,6]
  %jdt = mul %j, %dt : f64[4,3,3]
  %s = sin %j : f64[4,3,3]
  %r = iota axis 0 : f64[3,3]
  %k = iota axis 1 : f64[3,3]
  %diag = eq %r, %k : bool[3,3]
  %one = const 1.0 : f64[]
  %zero = const 0.0 : f64[]
  %eye = select %diag, %one, %zero : f64[3,3]
  %col = iota axis 0 : f64[6]
  %three = const 3.0 : f64[]
  %left = lt %col, %three : bool[6]
  %a1 = pad %jdt low [0,0,0] : f64[4,3,6]
  %a2 = pad %eye low [0,3] : f64[3,6]
  %top = select %left, %a1, %a2 : f64[4,3,6]
  %b1 = pad %s low [0,0,3] : f64[4,3,6]
  %zeros = const 0.0 : f64[4,3,6]
  %mid = select %left, %zeros, %b1 : f64[4,3,6]
  %c1 = pad %eye low [0,0] : f64[3,6]
  %c2 = pad %jdt low [0,0,3] : f64[4,3,6]
  %bottom = select %left, %c1, %c2 : f64[4,3,6]
  %ptop = pad %top low [0,0,0] : f64[4,9,6]
  %pmid = pad %mid low [0,3,0] : f64[4,9,6]
  %pbottom = pad %bottom low [0,6,0] : f64[4,9,6]
  %row = iota axis 0 : f64[9,6]
  %six = const 6.0 : f64[]
  %lower = ge %row, %six : bool[9,6]
  %upper = lt %row, %three : bool[9,6]
  %rest = select %lower, %pbottom, %pmid : f64[4,9,6]
  %m = select %upper, %ptop, %rest : f64[4,9,6]
  output m = %m
OPS
}
";

fn blocks(ops: &str) -> Kernel {
    parse(&BLOCKS.replace("OPS", ops)).expect("parse")
}

fn stores(program: &MirProgram) -> usize {
    program.kernels().iter().map(|k| k.stores.len()).sum()
}

#[test]
fn a_negated_block_matrix_is_stored_beside_it_block_by_block() {
    let (program, outputs) = checked(&blocks("  %n = neg %m : f64[4,9,6]\n  output n = %n"));
    // One loop nest over a block's points stores both matrices (five computed blocks and a
    // zero block each), and nothing is read back.
    assert_eq!(program.kernels().len(), 1, "{program}");
    assert_eq!(read_back(&program), 0, "{program}");
    assert_eq!(stores(&program), 12, "{program}");
    // The zero block of the negation is -0.0, as the interpreter has it.
    let n = &outputs[1];
    for b in 0..4 {
        for r in 3..6 {
            for c in 0..3 {
                let v = n.get(b * 54 + r * 6 + c);
                assert!(
                    matches!(v, Some(Scalar::F64(v)) if v == 0.0 && v.is_sign_negative()),
                    "{v:?}"
                );
            }
        }
    }
}

#[test]
fn ops_with_operands_constant_along_the_axis_are_stored_part_by_part() {
    // A scale per batch row (the same across the blocks), a cast and a transcendental: each
    // output is stored block by block in the same loop nest; the blocks of constants scaled
    // by a batch value or under an approximated op are computed there.
    let (program, _) = checked(&blocks(concat!(
        "  %sm = mul %m, %g : f64[4,9,6]\n  output sm = %sm\n",
        "  %f = cast %m : f32[4,9,6]\n  output f = %f\n",
        "  %e = exp %m : f64[4,9,6]\n  output e = %e",
    )));
    assert_eq!(program.kernels().len(), 1, "{program}");
    assert_eq!(read_back(&program), 0, "{program}");
    assert_eq!(stores(&program), 4 * 6, "{program}");
}

#[test]
fn an_operand_that_varies_across_the_parts_keeps_the_op_whole() {
    // Weights per element differ between blocks: the product is computed over the whole
    // (here from the stored matrix), with the interpreter's bits.
    let (program, _) = checked(&blocks("  %p = mul %m, %w : f64[4,9,6]\n  output p = %p"));
    assert_eq!(read_back(&program), 1, "{program}");
}
