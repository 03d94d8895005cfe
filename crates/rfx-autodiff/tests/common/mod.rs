//! Shared helpers: building small f64 kernels, running them, and central finite differences.
//! Finite differences are computed by running the *primal* kernel only, so they are independent
//! of the transforms under test.

#![allow(dead_code, unreachable_pub)]

use rfx_ir::hir::{BuildError, Builder, Kernel, ValueId};
use rfx_ir::interp::{Mode, run_hir};
use rfx_ir::{Array, DType, TensorType};

/// A kernel with f64 inputs `(name, shape)` and one output `out = body(inputs)`.
pub fn kernel_f64(
    name: &str,
    inputs: &[(&str, &[usize])],
    body: impl FnOnce(&mut Builder, &[ValueId]) -> Result<ValueId, BuildError>,
) -> Kernel {
    let mut b = Builder::new(name);
    let xs: Vec<ValueId> = inputs
        .iter()
        .map(|(n, s)| {
            b.input(*n, TensorType::new(DType::F64, s.to_vec()))
                .expect("input")
        })
        .collect();
    let out = body(&mut b, &xs).expect("body type-checks");
    b.output("out", out).expect("output");
    b.finish().expect("finish")
}

/// An f64 array of `shape` holding `values`.
pub fn arr(shape: &[usize], values: &[f64]) -> Array {
    Array::from_vec(shape.to_vec(), values.to_vec()).expect("length matches shape")
}

/// Runs `kernel` in native mode and returns every output as f64 values.
pub fn run(kernel: &Kernel, inputs: &[Array]) -> Vec<Vec<f64>> {
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    run_hir(kernel, &views, Mode::Native)
        .unwrap_or_else(|e| panic!("run failed: {e}\n{kernel}"))
        .iter()
        .map(Array::to_f64_vec)
        .collect()
}

/// Runs `kernel` and returns the output called `name`.
pub fn run_named(kernel: &Kernel, inputs: &[Array], name: &str) -> Vec<f64> {
    let index = kernel
        .outputs()
        .iter()
        .position(|o| o.name == name)
        .unwrap_or_else(|| panic!("no output {name} in\n{kernel}"));
    run(kernel, inputs).swap_remove(index)
}

/// Central finite-difference gradient of `Σ weights · output[out_index]` with respect to input
/// `input_index`, by running `kernel` itself (f64 inputs).
pub fn fd_grad(
    kernel: &Kernel,
    inputs: &[Array],
    input_index: usize,
    out_index: usize,
    weights: Option<&[f64]>,
) -> Vec<f64> {
    let base = inputs[input_index].to_f64_vec();
    let shape = inputs[input_index].shape().dims().to_vec();
    let eval = |point: &[f64]| -> f64 {
        let mut moved = inputs.to_vec();
        moved[input_index] = arr(&shape, point);
        let out = run(kernel, &moved).swap_remove(out_index);
        match weights {
            Some(w) => out.iter().zip(w).map(|(o, w)| o * w).sum(),
            None => out.iter().sum(),
        }
    };
    (0..base.len())
        .map(|i| {
            let h = 1e-6 * base[i].abs().max(1.0);
            let mut plus = base.clone();
            plus[i] += h;
            let mut minus = base.clone();
            minus[i] -= h;
            (eval(&plus) - eval(&minus)) / (2.0 * h)
        })
        .collect()
}

/// Asserts `|a - b| <= atol + rtol |b|` elementwise.
pub fn assert_close(what: &str, got: &[f64], want: &[f64], rtol: f64, atol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= atol + rtol * w.abs() || (g.is_nan() && w.is_nan()) || g == w;
        assert!(ok, "{what}[{i}]: got {g}, want {w}\n got {got:?}\nwant {want:?}");
    }
}

/// A deterministic pseudo-random sequence in `[lo, hi)` (SplitMix64).
pub fn uniform(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    let mut rng = rfx_ir::testgen::TestRng::new(seed);
    (0..n).map(|_| rng.uniform(lo, hi)).collect()
}
