//! `vmap` on random kernels against the kernel it maps, run example by example.
//!
//! The reference is the unbatched kernel under the HIR interpreter on each example's slice of
//! the batched inputs (the shared inputs whole); example `b` of every batched output must have
//! its bits. Random kernels from the generator cover every op, every dtype (bool and i32
//! included), reductions, broadcasting, reshapes, transposes, `iota` and literals, with random
//! batch axes and sizes.

#[path = "../../rfx-autodiff/tests/common/vmap_examples.rs"]
mod vmap_examples;

use rfx_autodiff::vmap_out;
use rfx_check::generator::{KernelGenConfig, random_kernel};
use rfx_ir::hir::Kernel;
use rfx_ir::testgen::TestRng;
use vmap_examples::{check_against_examples, check_batched};

/// A batch axis for each input of `kernel` with probability `batched` (any position up to the
/// input's rank), `None` for the others; the first input is batched when no other is.
fn random_in_axes(rng: &mut TestRng, kernel: &Kernel, batched: f64) -> Vec<Option<usize>> {
    let mut in_axes: Vec<Option<usize>> = kernel
        .inputs()
        .map(|(_, _, ty)| rng.chance(batched).then(|| rng.below(ty.shape.rank() + 1)))
        .collect();
    if in_axes.iter().all(Option::is_none) {
        in_axes[0] = Some(0);
    }
    in_axes
}

#[test]
fn random_kernels_map_to_their_examples_bit_for_bit() {
    let config = KernelGenConfig::with_max_ops(14);
    let mut mapped = 0;
    for seed in 0..2000u64 {
        let mut rng = TestRng::new(0x7a6d_0000 + seed);
        let kernel = random_kernel(&mut rng, &config, "random");
        let in_axes = random_in_axes(&mut rng, &kernel, 0.7);
        let size = 1 + rng.below(4);
        check_against_examples(&kernel, &in_axes, size, &mut rng, &format!("seed {seed}"));
        mapped += 1;
    }
    assert_eq!(mapped, 2000);
}

#[test]
fn random_kernels_put_the_batch_where_out_axes_say() {
    let config = KernelGenConfig::with_max_ops(12);
    let (mut unbatched, mut moved) = (0, 0);
    for seed in 0..600u64 {
        let mut rng = TestRng::new(0x0a7e_0000 + seed);
        let kernel = random_kernel(&mut rng, &config, "random");
        let in_axes = random_in_axes(&mut rng, &kernel, 0.6);
        let size = 1 + rng.below(4);
        // `None` for the outputs the batch does not reach (found by asking), an axis up to the
        // output's rank for the others.
        let mut out_axes = Vec::new();
        for (k, output) in kernel.outputs().iter().enumerate() {
            let rank = kernel.value_type(output.value).expect("typed").shape.rank();
            let mut probe = vec![Some(0); kernel.outputs().len()];
            probe[k] = None;
            let shared = vmap_out(&kernel, &in_axes, &probe, size).is_ok();
            out_axes.push(if shared && rng.chance(0.5) {
                unbatched += 1;
                None
            } else {
                let axis = rng.below(rank + 1);
                moved += usize::from(axis > 0);
                Some(axis)
            });
        }
        let batched = vmap_out(&kernel, &in_axes, &out_axes, size)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{kernel}"));
        check_batched(
            &kernel,
            &batched,
            &in_axes,
            &out_axes,
            size,
            &mut rng,
            &format!("seed {seed}"),
        );
    }
    assert!(
        unbatched > 20 && moved > 100,
        "{unbatched} unbatched, {moved} moved"
    );
}
