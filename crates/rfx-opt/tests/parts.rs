//! Concatenations read through windows inside one part, and parts of lower rank than their
//! concatenation: the fused program reads the parts (no choice by position left, no copy of the
//! whole stored to be read back) and gives the interpreter's bits. Outputs that are elementwise
//! ops of a concatenation are stored part by part, in the loop nests that compute the
//! concatenation's parts (no kernel reads a stored concatenation back to apply the op).

use rfx_ir::hir::{Kernel, parse};
use rfx_ir::interp::{Mode, run_hir, run_mir};
use rfx_ir::mir::{BufKind, MirOp, MirProgram};
use rfx_ir::testgen::{TestRng, random_inputs, same_values};
use rfx_ir::{Array, Scalar};
use rfx_opt::{OptConfig, fuse_chains, optimize};

/// The program `kernel` optimises to, after checking that it and the program fused without
/// algebraic rewriting agree with the interpreter bit for bit on random inputs.
fn checked(kernel: &Kernel) -> MirProgram {
    checked_outputs(kernel).0
}

/// [`checked`]'s program and its outputs for the last seed.
fn checked_outputs(kernel: &Kernel) -> (MirProgram, Vec<Array>) {
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

fn selects(program: &MirProgram) -> usize {
    program
        .kernels()
        .iter()
        .flat_map(|k| &k.body)
        .filter(|i| matches!(i.op, MirOp::Select))
        .count()
}

/// The temporaries' shapes.
fn temps(program: &MirProgram) -> Vec<Vec<usize>> {
    program
        .buffers()
        .iter()
        .filter(|b| b.kind == BufKind::Temp)
        .map(|b| b.ty.shape.dims().to_vec())
        .collect()
}

/// A quaternion of four computed scalars per row, read back one component at a time (each
/// window inside one part) and output whole.
const QUATERNION: &str = r"
kernel quaternion {
  %q = input q : f64[5,4]
  %w = slice %q starts [0,0] : f64[5,1]
  %x = slice %q starts [0,1] : f64[5,1]
  %y = slice %q starts [0,2] : f64[5,1]
  %z = slice %q starts [0,3] : f64[5,1]
  %a = mul %w, %x : f64[5,1]
  %b = sin %y : f64[5,1]
  %c = mul %y, %z : f64[5,1]
  %d = sub %z, %w : f64[5,1]
  %pa = pad %a low [0,0] : f64[5,4]
  %pb = pad %b low [0,1] : f64[5,4]
  %pc = pad %c low [0,2] : f64[5,4]
  %pd = pad %d low [0,3] : f64[5,4]
  %i = iota axis 0 : f64[4]
  %one = const 1.0 : f64[]
  %two = const 2.0 : f64[]
  %three = const 3.0 : f64[]
  %c3 = ge %i, %three : bool[4]
  %c2 = ge %i, %two : bool[4]
  %c1 = ge %i, %one : bool[4]
  %s1 = select %c1, %pb, %pa : f64[5,4]
  %s2 = select %c2, %pc, %s1 : f64[5,4]
  %cat = select %c3, %pd, %s2 : f64[5,4]
  %r0 = slice %cat starts [0,0] : f64[5,1]
  %r1 = slice %cat starts [0,1] : f64[5,1]
  %r3 = slice %cat starts [3,3] : f64[2,1]
  %p = mul %r0, %r1 : f64[5,1]
  %t = exp %r3 : f64[2,1]
  output cat = %cat
  output p = %p
  output t = %t
}
";

#[test]
fn windows_inside_one_part_read_the_part() {
    let kernel = parse(QUATERNION).expect("parse");
    let program = checked(&kernel);
    // The windows read the scalars where they are computed: one loop nest over the rows
    // stores the quaternion part by part and the product; nothing chooses a part. The window
    // of rows 3 and 4 runs over other points, so the one part it reads is stored for it (not
    // the whole quaternion).
    assert_eq!(program.kernels().len(), 2, "{program}");
    assert_eq!(selects(&program), 0, "{program}");
    assert_eq!(temps(&program), vec![vec![5, 1]], "{program}");
}

/// The same quaternion read only through windows (not an output): no kernel computes it, and
/// each window computes its part at its own points, from the input.
#[test]
fn a_concatenation_read_only_through_windows_is_never_stored() {
    let text = QUATERNION.replace("  output cat = %cat\n", "");
    let kernel = parse(&text).expect("parse");
    let program = checked(&kernel);
    assert_eq!(program.kernels().len(), 2, "{program}");
    assert_eq!(selects(&program), 0, "{program}");
    assert!(temps(&program).is_empty(), "{program}");
}

/// A window across two parts is still a window of the concatenation, with its values.
#[test]
fn a_window_across_parts_keeps_its_values() {
    let text = QUATERNION
        .replace(
            "%r1 = slice %cat starts [0,1] : f64[5,1]",
            "%r1 = slice %cat starts [0,1] : f64[5,2]",
        )
        .replace("%p = mul %r0, %r1 : f64[5,1]", "%p = mul %r0, %r1 : f64[5,2]");
    let kernel = parse(&text).expect("parse");
    checked(&kernel);
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

#[test]
fn a_block_matrix_with_an_unbatched_block_is_stored_block_by_block() {
    // Two block rows read back through windows of one block.
    let program = checked(&blocks(concat!(
        "  %eye_back = slice %m starts [0,0,3] : f64[4,3,3]\n",
        "  %s_back = slice %m starts [0,3,3] : f64[4,3,3]\n",
        "  %sum = add %eye_back, %s_back : f64[4,3,3]\n  output sum = %sum",
    )));
    // The only select left makes the identity block; no point chooses between blocks, and
    // the windows read the blocks where they are computed.
    assert_eq!(selects(&program), 1, "{program}");
    assert!(temps(&program).is_empty(), "{program}");
    // One loop nest over a block's points stores the six blocks (the zero block with them)
    // and the sum.
    assert_eq!(program.kernels().len(), 1, "{program}");
    assert_eq!(stores(&program), 7, "{program}");
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

fn stores(program: &MirProgram) -> usize {
    program.kernels().iter().map(|k| k.stores.len()).sum()
}

#[test]
fn a_negated_block_matrix_is_stored_beside_it_block_by_block() {
    let (program, outputs) = checked_outputs(&blocks("  %n = neg %m : f64[4,9,6]\n  output n = %n"));
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
    let program = checked(&blocks(concat!(
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
    let program = checked(&blocks("  %p = mul %m, %w : f64[4,9,6]\n  output p = %p"));
    assert_eq!(read_back(&program), 1, "{program}");
}
