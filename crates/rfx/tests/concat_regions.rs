//! Concatenations stored part by part: a vector of computed scalars, a block matrix and a
//! batched rotation matrix compile to loop nests over their parts' points, each part stored at
//! its offset in the result (no choice by position at every point), with every bit of the
//! values the parts compute, at batch sizes 1 and 1,024.

use crate::common;

use common::f64s;
use rfx::{Array, DType, Tensor, TensorType};
use rfx_ir::mir::{MirOp, MirProgram};

fn mir<K: rfx::KernelFn>(f: &rfx::Jit<K>, types: &[TensorType]) -> MirProgram {
    f.executable(types).expect("compile").mir().clone()
}

/// Whether some kernel chooses by position (a `select`) or reads a part by clamped index.
fn chooses(program: &MirProgram) -> bool {
    program
        .kernels()
        .iter()
        .flat_map(|k| &k.body)
        .any(|inst| matches!(inst.op, MirOp::Select | MirOp::Gather { .. }))
}

fn region_stores(program: &MirProgram) -> usize {
    program
        .kernels()
        .iter()
        .flat_map(|k| &k.stores)
        .filter(|s| s.region.is_some())
        .count()
}

/// 81 scalars `2 x_i + 1`, each computed from its own element, stacked into a vector.
fn scalars(x: Tensor) -> Tensor {
    let parts: Vec<Tensor> = (0..81)
        .map(|i| (x.slice_axis(0, i..i + 1) * 2.0 + 1.0).reshape([1]))
        .collect();
    rfx::concat(&parts, 0)
}

#[test]
fn a_vector_of_computed_scalars_stores_each_scalar_once() {
    let one = rfx::jit(scalars);
    let batched = rfx::jit(rfx::vmap(scalars));
    for batch in [1usize, 1024] {
        let x: Vec<f64> = (0..81 * batch).map(|i| (i as f64 * 0.731).sin() * 3.0).collect();
        let input = Array::from_vec([batch, 81], x.clone()).expect("array");
        let out = batched.call((&input,)).expect("call");
        let want: Vec<f64> = x.iter().map(|v| v * 2.0 + 1.0).collect();
        assert_eq!(f64s(&out[0]), &want[..], "batch {batch}");
        let program = mir(&batched, &[TensorType::new(DType::F64, [batch, 81])]);
        assert!(!chooses(&program), "{program}");
        assert_eq!(region_stores(&program), 81, "{program}");
        assert_eq!(program.kernels().len(), 1, "{program}");
    }
    let x: Vec<f64> = (0..81).map(|i| i as f64 - 40.5).collect();
    assert_eq!(
        f64s(&one.call((&x[..],)).expect("call")[0]),
        &x.iter().map(|v| v * 2.0 + 1.0).collect::<Vec<_>>()[..]
    );
}

/// `[[a, 2b, c], [b, a - c, 0], [c, a, b + 1]]` from 3x3 blocks (the zero block made with
/// `full_like`, which folds to a constant part): rows are concatenations along
/// the columns, the matrix one along the rows.
fn blocks(a: Tensor, b: Tensor, c: Tensor) -> Tensor {
    let zero = a.full_like(0.0);
    let rows = [
        rfx::concat(&[a, b * 2.0, c], 1),
        rfx::concat(&[b, a - c, zero], 1),
        rfx::concat(&[c, a, b + 1.0], 1),
    ];
    rfx::concat(&rows, 0)
}

#[test]
fn a_block_matrix_stores_each_block_at_its_offset() {
    let f = rfx::jit(blocks);
    let block = |seed: f64| -> Vec<f64> { (0..9).map(|i| (i as f64 * 0.37 + seed).cos() * 2.0).collect() };
    let (a, b, c) = (block(0.1), block(1.3), block(-2.2));
    let arr = |v: &Vec<f64>| Array::from_vec([3, 3], v.clone()).expect("array");
    let out = f.call((&arr(&a), &arr(&b), &arr(&c))).expect("call");
    let got = f64s(&out[0]);
    let blocks_want: [[Vec<f64>; 3]; 3] = [
        [a.clone(), b.iter().map(|v| v * 2.0).collect(), c.clone()],
        [
            b.clone(),
            a.iter().zip(&c).map(|(x, y)| x - y).collect(),
            a.iter().map(|v| v * 0.0).collect(),
        ],
        [c.clone(), a.clone(), b.iter().map(|v| v + 1.0).collect()],
    ];
    for (br, row) in blocks_want.iter().enumerate() {
        for (bc, blk) in row.iter().enumerate() {
            for i in 0..3 {
                for j in 0..3 {
                    assert_eq!(
                        got[(3 * br + i) * 9 + 3 * bc + j],
                        blk[3 * i + j],
                        "block ({br}, {bc}) at ({i}, {j})"
                    );
                }
            }
        }
    }
    let m3 = TensorType::new(DType::F64, [3, 3]);
    let program = mir(&f, &[m3.clone(), m3.clone(), m3]);
    assert!(!chooses(&program), "{program}");
    // Eight computed blocks and the zero block, stored at the same points, in one loop nest.
    assert_eq!(region_stores(&program), 9, "{program}");
    assert_eq!(program.kernels().len(), 1, "{program}");
}

/// A part read elsewhere too (`w` is stacked and also negated, as in a skew matrix) is still
/// stored at its offset; an output scaled after the concatenation is stored part by part; a
/// concatenation that a kernel reads as a value (weighted element by element after it) keeps
/// its choice by position.
#[test]
fn shared_parts_and_concatenations_read_as_values() {
    let skew_row = |w: Tensor| {
        let (x, y, z) = (
            w.slice_axis(0, 0..1),
            w.slice_axis(0, 1..2),
            w.slice_axis(0, 2..3),
        );
        rfx::concat(&[z * 0.0, -z, y, z, x * 0.0, -x, -y, x, z * 0.0], 0)
    };
    let f = rfx::jit(skew_row);
    let w = [0.25f64, -1.5, 3.0];
    let out = f.call((&w[..],)).expect("call");
    assert_eq!(f64s(&out[0]), [0.0, -3.0, -1.5, 3.0, 0.0, -0.25, 1.5, 0.25, 0.0]);
    let program = mir(&f, &[TensorType::new(DType::F64, [3])]);
    assert!(!chooses(&program), "{program}");

    // Zero blocks made with `full_like`, as `rfx::lie` makes them.
    let with_zeros = rfx::jit(|w: Tensor| {
        let zero = w.full_like(0.0);
        rfx::concat(&[zero, w * 2.0, zero], 0)
    });
    let out = with_zeros.call((&w[..],)).expect("call");
    assert_eq!(f64s(&out[0]), [0.0, 0.0, 0.0, 0.5, -3.0, 6.0, 0.0, 0.0, 0.0]);
    let program = mir(&with_zeros, &[TensorType::new(DType::F64, [3])]);
    assert!(!chooses(&program), "{program}");
    assert_eq!(region_stores(&program), 3, "{program}");

    let scaled = rfx::jit(|a: Tensor, b: Tensor| rfx::concat(&[a, b], 0) * 3.0);
    let out = scaled.call((&[1.0f64, 2.0][..], &[-4.0f64][..])).expect("call");
    assert_eq!(f64s(&out[0]), [3.0, 6.0, -12.0]);
    let program = mir(
        &scaled,
        &[TensorType::new(DType::F64, [2]), TensorType::new(DType::F64, [1])],
    );
    // An output that is an op of the concatenation alone (a scale the same for every part)
    // is the concatenation of the scaled parts: stored part by part, no choice left.
    assert!(!chooses(&program), "{program}");
    assert_eq!(region_stores(&program), 2, "{program}");

    let weighted = rfx::jit(|a: Tensor, b: Tensor, w: Tensor| rfx::concat(&[a, b], 0) * w);
    let out = weighted
        .call((&[1.0f64, 2.0][..], &[-4.0f64][..], &[0.5f64, 2.0, -1.0][..]))
        .expect("call");
    assert_eq!(f64s(&out[0]), [0.5, 4.0, 4.0]);
    let program = mir(
        &weighted,
        &[
            TensorType::new(DType::F64, [2]),
            TensorType::new(DType::F64, [1]),
            TensorType::new(DType::F64, [3]),
        ],
    );
    assert_eq!(region_stores(&program), 0, "{program}");
}

/// `so3_to_matrix` over a batch: the nine entries stacked and reshaped to `[.., 3, 3]` are
/// stored part by part, and every row equals the single call's bits.
#[test]
fn batched_rotation_matrices_equal_single_calls() {
    let one = rfx::jit(rfx::lie::so3_to_matrix);
    let batched = rfx::jit(rfx::vmap(rfx::lie::so3_to_matrix));
    let rows = 1024;
    let q: Vec<f64> = (0..4 * rows).map(|i| (i as f64 * 0.913).sin()).collect();
    let out = batched
        .call((&Array::from_vec([rows, 4], q.clone()).expect("array"),))
        .expect("call");
    let got = f64s(&out[0]);
    for row in [0, 1, 511, 1023] {
        let single = one.call((&q[4 * row..4 * row + 4],)).expect("one");
        assert_eq!(&got[9 * row..9 * row + 9], f64s(&single[0]), "row {row}");
    }
    let program = mir(&batched, &[TensorType::new(DType::F64, [rows, 4])]);
    assert!(region_stores(&program) >= 9, "{program}");
}
