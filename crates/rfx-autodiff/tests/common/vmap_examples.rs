//! Checking a mapped kernel example by example: the unbatched kernel under the HIR interpreter
//! on each example's slice of the batched inputs (the shared inputs whole) must give the bits of
//! example `b` of every batched output. Used by `rfx-autodiff`'s `tests/vmap.rs` (hand-written
//! kernels) and, through a `#[path]` include, by `rfx-check`'s `tests/vmap.rs` (random kernels).

use rfx_autodiff::vmap;
use rfx_ir::hir::Kernel;
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::testgen::{TestRng, random_array};
use rfx_ir::{Array, ArrayData, Shape, TensorType};

/// Element `index` of axis `axis` of `array`: the array with that axis removed.
pub(crate) fn slice_axis(array: &Array, axis: usize, index: usize) -> Array {
    let dims = array.shape().dims();
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    let mut values = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let linear = (o * dims[axis] + index) * inner + i;
            values.push(array.get(linear).expect("in range"));
        }
    }
    let mut shape = dims.to_vec();
    shape.remove(axis);
    let data = ArrayData::from_scalars(array.dtype(), values).expect("one dtype");
    Array::new(Shape::new(shape), data).expect("sizes agree")
}

/// Every element of `got` and `want` has the same bits.
pub(crate) fn assert_same_bits(what: &str, got: &Array, want: &Array) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    for i in 0..got.shape().numel() {
        let (g, w) = (got.get(i).expect("in range"), want.get(i).expect("in range"));
        assert_eq!(g.to_bits(), w.to_bits(), "{what}: element {i}: {g} against {w}");
    }
}

/// Maps `kernel` with `in_axes` over `size` random examples and compares every output with the
/// kernel run on each example alone.
pub(crate) fn check_against_examples(
    kernel: &Kernel,
    in_axes: &[Option<usize>],
    size: usize,
    rng: &mut TestRng,
    what: &str,
) {
    let batched = vmap(kernel, in_axes, size).unwrap_or_else(|e| panic!("{what}: {e}\n{kernel}"));
    let out_axes = vec![Some(0); kernel.outputs().len()];
    check_batched(kernel, &batched, in_axes, &out_axes, size, rng, what);
}

/// Runs `batched` (`kernel` mapped with `in_axes` and `out_axes` over `size` examples) on
/// random inputs and compares every output with the kernel run on each example alone: example
/// `b` is element `b` of the output's batch axis, or the whole output where it has none.
pub(crate) fn check_batched(
    kernel: &Kernel,
    batched: &Kernel,
    in_axes: &[Option<usize>],
    out_axes: &[Option<usize>],
    size: usize,
    rng: &mut TestRng,
    what: &str,
) {
    let inputs: Vec<Array> = kernel
        .inputs()
        .zip(in_axes)
        .map(|((_, _, ty), axis)| {
            let mut dims = ty.shape.dims().to_vec();
            if let Some(axis) = *axis {
                dims.insert(axis, size);
            }
            random_array(rng, &TensorType::new(ty.dtype, dims), 0.05)
        })
        .collect();
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let outputs = run_hir(batched, &views, Mode::Native)
        .unwrap_or_else(|e| panic!("{what}: batched run: {e}\n{batched}"));
    assert_eq!(outputs.len(), kernel.outputs().len(), "{what}");
    for example in 0..size {
        let slices: Vec<Array> = inputs
            .iter()
            .zip(in_axes)
            .map(|(array, axis)| match *axis {
                Some(axis) => slice_axis(array, axis, example),
                None => array.clone(),
            })
            .collect();
        let views: Vec<_> = slices.iter().map(Array::view).collect();
        let want = run_hir(kernel, &views, Mode::Native).expect("the example runs");
        for (((got, want), out), axis) in outputs.iter().zip(&want).zip(kernel.outputs()).zip(out_axes) {
            let got = match *axis {
                Some(axis) => slice_axis(got, axis, example),
                None => got.clone(),
            };
            assert_same_bits(
                &format!(
                    "{what}: output `{}`, example {example}\n{kernel}\n{batched}",
                    out.name
                ),
                &got,
                want,
            );
        }
    }
}
