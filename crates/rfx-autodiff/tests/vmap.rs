//! `vmap` against the kernel it maps, run example by example.
//!
//! The reference is the unbatched kernel under the HIR interpreter on each example's slice of
//! the batched inputs (the shared inputs whole); example `b` of every batched output must have
//! its bits, on hand-written kernels (the same on random kernels is `rfx-check`'s
//! `tests/vmap.rs`, beside the generator). Derivatives are checked against closed forms. The
//! HIR of one mapped kernel is snapshot-tested (`INSTA_UPDATE=always` to update; CI runs with `INSTA_UPDATE=no`).

mod common;
#[path = "common/vmap_examples.rs"]
mod vmap_examples;

use common::{assert_close, uniform};
use rfx_autodiff::{AdError, grad, value_and_grad, vjp, vmap, vmap_out};
use rfx_ir::hir::{self, Builder, Kernel};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, BinaryOp, DType, ReduceOp, TensorType, UnaryOp};
use vmap_examples::check_against_examples;

#[test]
fn bad_out_axes_are_user_errors() {
    let kernel = cost();
    let err = vmap_out(&kernel, &[Some(0), None], &[], 4).expect_err("no entry for one output");
    assert!(
        matches!(
            err,
            AdError::OutAxesCount {
                expected: 1,
                found: 0
            }
        ),
        "{err:?}"
    );
    let err = vmap_out(&kernel, &[Some(0), None], &[Some(1)], 4).expect_err("c is a scalar");
    assert!(
        matches!(&err, AdError::OutAxis { name, axis: 1, rank: 0 } if name == "c"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "output `c` has rank 0; its batch axis 1 must be at most 0"
    );
    let err = vmap_out(&kernel, &[Some(0), None], &[None], 4).expect_err("c depends on x");
    assert!(
        matches!(&err, AdError::BatchedOutput { name } if name == "c"),
        "{err:?}"
    );
    // Only `k` batched: `c` still depends on it.
    let err = vmap_out(&kernel, &[None, Some(0)], &[None], 4).expect_err("c depends on k");
    assert!(
        matches!(&err, AdError::BatchedOutput { name } if name == "c"),
        "{err:?}"
    );
}

/// One example's cost: `c = k · Σ sin(x) · x`, `x: [3]`, `k: []`.
fn cost() -> Kernel {
    let mut b = Builder::new("cost");
    let x = b.input("x", TensorType::new(DType::F64, [3])).expect("input");
    let k = b.input("k", TensorType::scalar(DType::F64)).expect("input");
    let s = b.unary(UnaryOp::Sin, x).expect("sin");
    let t = b.binary(BinaryOp::Mul, s, x).expect("mul");
    let sum = b.reduce_all(ReduceOp::Sum, t).expect("sum");
    let c = b.binary(BinaryOp::Mul, sum, k).expect("mul");
    b.output("c", c).expect("output");
    b.finish().expect("kernel")
}

#[test]
fn vmap_of_value_and_grad_gives_per_example_gradients() {
    let batch = 5;
    let kernel = value_and_grad(&cost(), &["x"]).expect("value_and_grad");
    let batched = vmap(&kernel, &[Some(0), None], batch).expect("vmap");
    let xs = uniform(11, batch * 3, -2.0, 2.0);
    let k = 0.75;
    let x = Array::from_vec(vec![batch, 3], xs.clone()).expect("x");
    let kk = Array::from_vec(vec![], vec![k]).expect("k");
    let out = run_hir(&batched, &[x.view(), kk.view()], Mode::Native).expect("runs");
    assert_eq!(out[0].shape().dims(), &[batch]);
    assert_eq!(out[1].shape().dims(), &[batch, 3]);
    // Closed forms: c = k Σ x sin x, ∂c/∂x = k (sin x + x cos x).
    let want_c: Vec<f64> = xs
        .chunks(3)
        .map(|e| k * e.iter().map(|x| x * x.sin()).sum::<f64>())
        .collect();
    let want_g: Vec<f64> = xs.iter().map(|x| k * (x.sin() + x * x.cos())).collect();
    assert_close("c", out[0].as_slice::<f64>().expect("f64"), &want_c, 1e-14, 1e-14);
    assert_close(
        "grad_x",
        out[1].as_slice::<f64>().expect("f64"),
        &want_g,
        1e-14,
        1e-14,
    );
}

#[test]
fn derivatives_of_a_mapped_kernel_are_the_mapped_derivatives() {
    // vjp(vmap(f)) with cotangent ct: example b's gradient is ct[b] ∇f(x_b); the shared gain's
    // gradient sums over the batch.
    let batch = 4;
    let batched = vmap(&cost(), &[Some(1), None], batch).expect("vmap");
    let pulled = vjp(&batched, &["x", "k"]).expect("vjp");
    let xs = uniform(12, 3 * batch, -2.0, 2.0); // x: [3, batch], the batch on axis 1
    let cts = uniform(13, batch, -1.0, 1.0);
    let k = -1.25;
    let x = Array::from_vec(vec![3, batch], xs.clone()).expect("x");
    let kk = Array::from_vec(vec![], vec![k]).expect("k");
    let ct = Array::from_vec(vec![batch], cts.clone()).expect("ct");
    let out = run_hir(&pulled, &[x.view(), kk.view(), ct.view()], Mode::Native).expect("runs");
    let col = |b: usize| (0..3).map(|i| xs[i * batch + b]).collect::<Vec<f64>>();
    let want_gx: Vec<f64> = (0..3 * batch)
        .map(|j| {
            let (x, b) = (xs[j], j % batch);
            cts[b] * k * (x.sin() + x * x.cos())
        })
        .collect();
    let want_gk: f64 = (0..batch)
        .map(|b| cts[b] * col(b).iter().map(|x| x * x.sin()).sum::<f64>())
        .sum();
    let names: Vec<&str> = pulled.outputs().iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["c", "grad_x", "grad_k"]);
    assert_close(
        "grad_x",
        out[1].as_slice::<f64>().expect("f64"),
        &want_gx,
        1e-14,
        1e-14,
    );
    assert_close(
        "grad_k",
        out[2].as_slice::<f64>().expect("f64"),
        &[want_gk],
        1e-13,
        1e-13,
    );
}

#[test]
fn grad_of_a_batch_sum_equals_the_mapped_grad() {
    // Σ_b c(x_b) differentiated through the batch is the per-example gradient, computed both ways.
    let batch = 3;
    let mut b = Builder::new("total");
    let x = b.input("x", TensorType::new(DType::F64, [batch, 3])).expect("x");
    let k = b.input("k", TensorType::scalar(DType::F64)).expect("k");
    let s = b.unary(UnaryOp::Sin, x).expect("sin");
    let t = b.binary(BinaryOp::Mul, s, x).expect("mul");
    let rows = b.reduce(ReduceOp::Sum, t, &[1], false).expect("rows");
    let c = b.binary(BinaryOp::Mul, rows, k).expect("mul");
    let total = b.reduce_all(ReduceOp::Sum, c).expect("total");
    b.output("total", total).expect("output");
    let by_hand = grad(&b.finish().expect("kernel"), &["x"]).expect("grad");
    let mapped = vmap(&grad(&cost(), &["x"]).expect("grad"), &[Some(0), None], batch).expect("vmap");
    let x = Array::from_vec(vec![batch, 3], uniform(14, batch * 3, -3.0, 3.0)).expect("x");
    let kk = Array::from_vec(vec![], vec![0.5f64]).expect("k");
    let a = run_hir(&by_hand, &[x.view(), kk.view()], Mode::Native).expect("runs");
    let m = run_hir(&mapped, &[x.view(), kk.view()], Mode::Native).expect("runs");
    assert_close(
        "grad_x",
        m[0].as_slice::<f64>().expect("f64"),
        a[0].as_slice::<f64>().expect("f64"),
        1e-15,
        1e-15,
    );
}

#[test]
fn batch_axes_move_to_the_front_and_unbatched_outputs_broadcast() {
    let text = "\
kernel k {
  %a = input a : f32[2, 3]
  %b = input b : f32[3]
  %m = mul %a, %b : f32[2, 3]
  %t = transpose %m perm [1, 0] : f32[3, 2]
  %r = reshape %t : f32[6]
  %s = sum %a axes [1] keepdims : f32[2, 1]
  %n = neg %b : f32[3]
  output r = %r
  output s = %s
  output n = %n
}
";
    let kernel = hir::parse(text).expect("kernel");
    let mapped = vmap(&kernel, &[Some(2), Some(0)], 4).expect("vmap");
    insta::assert_snapshot!("vmap_moves_batch_axes_to_the_front", mapped.to_string());
    let types: Vec<String> = mapped.inputs().map(|(_, _, ty)| ty.to_string()).collect();
    assert_eq!(types, ["f32[2,3,4]", "f32[4,3]"]);
    let outputs: Vec<String> = mapped
        .outputs()
        .iter()
        .map(|o| mapped.value_type(o.value).expect("typed").to_string())
        .collect();
    assert_eq!(outputs, ["f32[4,6]", "f32[4,2,1]", "f32[4,3]"]);
    let mut rng = TestRng::new(99);
    for in_axes in [
        [Some(2), Some(0)],
        [Some(0), None],
        [None, Some(1)],
        [Some(1), Some(1)],
    ] {
        check_against_examples(&kernel, &in_axes, 4, &mut rng, &format!("{in_axes:?}"));
    }
}

#[test]
fn batches_of_zero_one_and_more_scalar_examples_work() {
    let text = "\
kernel k {
  %x = input x : f64[]
  %y = input y : f64[]
  %z = atan2 %x, %y : f64[]
  output z = %z
}
";
    let kernel = hir::parse(text).expect("kernel");
    let mut rng = TestRng::new(7);
    for size in [0, 1, 2, 7] {
        check_against_examples(&kernel, &[Some(0), None], size, &mut rng, &format!("size {size}"));
        check_against_examples(
            &kernel,
            &[Some(0), Some(0)],
            size,
            &mut rng,
            &format!("size {size}"),
        );
    }
}

#[test]
fn bad_batch_axes_are_user_errors() {
    let kernel = cost();
    let err = vmap(&kernel, &[Some(0)], 4).expect_err("one entry for two inputs");
    assert!(
        matches!(
            err,
            AdError::BatchAxesCount {
                expected: 2,
                found: 1
            }
        ),
        "{err:?}"
    );
    let err = vmap(&kernel, &[Some(2), None], 4).expect_err("x has rank 1");
    assert!(
        matches!(&err, AdError::BatchAxis { name, axis: 2, rank: 1 } if name == "x"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "input `x` has rank 1; its batch axis 2 must be at most 1"
    );
    let err = vmap(&kernel, &[None, None], 4).expect_err("nothing batched");
    assert!(matches!(err, AdError::NothingBatched), "{err:?}");
    let err = vmap(&kernel, &[Some(0), None], usize::MAX / 4).expect_err("too large");
    assert!(
        matches!(&err, AdError::BatchTooLarge { size, ty } if *size == usize::MAX / 4 && ty.to_string() == "f64[3]"),
        "{err:?}"
    );
    let invalid = Kernel::from_parts("bad", Vec::new(), Vec::new());
    let err = vmap(&invalid, &[], 2).expect_err("no outputs");
    assert!(matches!(err, AdError::InvalidKernel(_)), "{err:?}");
}

#[test]
fn lookups_map_with_the_table_the_index_or_both_batched() {
    // rows of a [4, 3] table picked by an f64 index [2, 3], then scaled.
    let mut b = rfx_ir::hir::Builder::new("lookup");
    let table = b.input("table", TensorType::new(DType::F64, [4, 3])).unwrap();
    let at = b.input("at", TensorType::new(DType::F64, [2, 3])).unwrap();
    let g = b.gather(table, at, 0).unwrap();
    let sq = b.binary(rfx_ir::BinaryOp::Mul, g, g).unwrap();
    b.output("out", sq).unwrap();
    let kernel = b.finish().unwrap();
    let mut rng = TestRng::new(0x6a7e);
    for in_axes in [
        [Some(0), None],
        [None, Some(0)],
        [Some(0), Some(0)],
        [Some(2), Some(1)],
        [Some(1), None],
    ] {
        for size in [1, 3] {
            check_against_examples(&kernel, &in_axes, size, &mut rng, &format!("{in_axes:?} x{size}"));
        }
    }
}
