//! Reverse mode on random kernels from the generator (f64 only, every op including
//! reductions, broadcasting, reshapes, select and clamp) against central finite differences of
//! the primal kernel at random points.
//!
//! The transform builds `vjp(kernel, every input)`; with random cotangents `ct` it must give
//! `∇_p Σ ct · kernel(p)`, which is estimated by finite differences of the primal kernel only.
//! Output elements that are not finite at the base point get a zero cotangent and are left out
//! of the sum.
//!
//! **Filter.** A random kernel is not smooth everywhere (floor, sign, comparisons feeding
//! select, min/max, clamp, fmod, abs) and may overflow, so an input element is compared only
//! where the finite-difference estimate is trustworthy: every evaluation is finite; central
//! differences with steps `h` and `h/10` agree (a kink or jump inside the stencil changes the
//! estimate with the step); and the one-sided differences `(f(p+h) - f(p))/h` and
//! `(f(p) - f(p-h))/h` agree (which rejects a kink sitting exactly at `p`, where the symmetric
//! estimate is the average of two slopes); and the rounding noise of the estimate,
//! `ulp(Σ |ct · out|) / h`, is small (huge outputs such as `pow(x², x²)` drown a small
//! derivative). Skipping is conservative; a separate test checks
//! that most elements are actually compared, so the filter cannot hide a broken transform.

#[path = "../../rfx-autodiff/tests/common/mod.rs"]
mod common;

use common::run;
use proptest::prelude::*;
use rfx_autodiff::vjp;
use rfx_check::generator::{KernelGenConfig, random_kernel};
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, DType};

fn config() -> KernelGenConfig {
    KernelGenConfig {
        max_ops: 10,
        float_dtypes: vec![DType::F64],
        allow_int_bool: false,
        ..KernelGenConfig::default()
    }
}

/// `Σ ct · kernel(inputs)` and `Σ |ct · kernel(inputs)|` (the scale of its rounding error), or
/// `None` when any output is not finite.
fn weighted(kernel: &rfx_ir::hir::Kernel, inputs: &[Array], ct: &[Vec<f64>]) -> Option<(f64, f64)> {
    let outs = run(kernel, inputs);
    let (mut total, mut magnitude) = (0.0, 0.0);
    for (out, w) in outs.iter().zip(ct) {
        for (o, w) in out.iter().zip(w) {
            if *w == 0.0 {
                // An element that is not finite at the base point: left out of the sum.
                continue;
            }
            if !o.is_finite() {
                return None;
            }
            total += o * w;
            magnitude += (o * w).abs();
        }
    }
    Some((total, magnitude))
}

/// Checks one random kernel; returns (elements compared, elements skipped by the filter).
fn check_seed(seed: u64) -> (usize, usize) {
    let mut rng = TestRng::new(seed);
    let kernel = random_kernel(&mut rng, &config(), "random");
    let inputs = random_inputs(&mut rng, &kernel, 0.0);
    let names: Vec<String> = kernel.inputs().map(|(_, n, _)| n.to_string()).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let gradient = vjp(&kernel, &name_refs).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{kernel}"));
    // Random cotangents, zero on output elements that are not finite at the base point (NaN
    // from log of a negative number, overflow): the rest of the kernel is still checked.
    let base_outputs = run(&kernel, &inputs);
    let ct: Vec<Vec<f64>> = base_outputs
        .iter()
        .map(|out| {
            out.iter()
                .map(|o| {
                    let w = rng.uniform(-1.0, 1.0);
                    if o.is_finite() { w } else { 0.0 }
                })
                .collect()
        })
        .collect();
    let mut vjp_inputs = inputs.clone();
    for (o, w) in kernel.outputs().iter().zip(&ct) {
        let shape = kernel.value_type(o.value).expect("output type").shape.clone();
        vjp_inputs.push(Array::from_vec(shape, w.clone()).expect("cotangent"));
    }
    let ad = run(&gradient, &vjp_inputs);
    let n_outputs = kernel.outputs().len();
    let Some((f0, _)) = weighted(&kernel, &inputs, &ct) else {
        return (0, 0);
    };
    let (mut compared, mut skipped) = (0, 0);
    for (i, input) in inputs.iter().enumerate() {
        let base = input.to_f64_vec();
        for j in 0..base.len() {
            let at = |delta: f64| {
                let mut moved = inputs.clone();
                let mut values = base.clone();
                values[j] += delta;
                moved[i] = Array::from_vec(input.shape().clone(), values).expect("same shape");
                weighted(&kernel, &moved, &ct)
            };
            let h = 1e-4 * base[j].abs().max(1.0);
            let points = [at(h), at(-h), at(h / 10.0), at(-h / 10.0)];
            let [Some((p1, mag)), Some((m1, _)), Some((p2, _)), Some((m2, _))] = points else {
                skipped += 1;
                continue;
            };
            let fd_coarse = (p1 - m1) / (2.0 * h);
            let fd_fine = (p2 - m2) / (0.2 * h);
            let (forward, backward) = ((p1 - f0) / h, (f0 - m1) / h);
            let scale = 1.0 + fd_fine.abs();
            // Rounding noise of the fine estimate: ~ulp(Σ|ct·out|) / step.
            let noise = 1e-15 * mag / (0.1 * h);
            let stable = noise <= 1e-6 * scale
                && (fd_coarse - fd_fine).abs() <= 1e-5 * scale
                && (forward - backward).abs() <= 1e-2 * scale;
            let got = ad[n_outputs + i][j];
            if !stable || !got.is_finite() {
                skipped += 1;
                continue;
            }
            compared += 1;
            assert!(
                (got - fd_fine).abs() <= 1e-4 * scale,
                "seed {seed}: ∂/∂{}[{j}]: vjp {got}, finite differences {fd_fine}\n{kernel}\n{gradient}",
                names[i]
            );
        }
    }
    check_jvp(seed, &kernel, &inputs, &ct, &mut rng);
    (compared, skipped)
}

/// Forward mode on the same kernel: `Σ ct · jvp(kernel)(p, t)` against the directional
/// difference `(f(p + h t) - f(p - h t)) / 2h` of `f = Σ ct · kernel`, with the same filter.
fn check_jvp(seed: u64, kernel: &rfx_ir::hir::Kernel, inputs: &[Array], ct: &[Vec<f64>], rng: &mut TestRng) {
    let names: Vec<String> = kernel.inputs().map(|(_, n, _)| n.to_string()).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let forward =
        rfx_autodiff::jvp(kernel, &name_refs).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{kernel}"));
    let tangents: Vec<Vec<f64>> = inputs
        .iter()
        .map(|a| {
            (0..a.to_f64_vec().len())
                .map(|_| rng.uniform(-1.0, 1.0))
                .collect()
        })
        .collect();
    let moved = |s: f64| -> Vec<Array> {
        inputs
            .iter()
            .zip(&tangents)
            .map(|(a, t)| {
                let values: Vec<f64> = a.to_f64_vec().iter().zip(t).map(|(x, d)| x + s * d).collect();
                Array::from_vec(a.shape().clone(), values).expect("same shape")
            })
            .collect()
    };
    let mut jvp_inputs = inputs.to_vec();
    jvp_inputs.extend(
        inputs
            .iter()
            .zip(&tangents)
            .map(|(a, t)| Array::from_vec(a.shape().clone(), t.clone()).expect("tangent")),
    );
    let outs = run(&forward, &jvp_inputs);
    let n_outputs = kernel.outputs().len();
    let mut got = 0.0;
    for (tangent, w) in outs[n_outputs..].iter().zip(ct) {
        for (d, w) in tangent.iter().zip(w) {
            if *w != 0.0 {
                got += d * w;
            }
        }
    }
    let h = 1e-4;
    let values = [h, -h, h / 10.0, -h / 10.0, 0.0].map(|s| weighted(kernel, &moved(s), ct));
    let [
        Some((p1, mag)),
        Some((m1, _)),
        Some((p2, _)),
        Some((m2, _)),
        Some((f0, _)),
    ] = values
    else {
        return;
    };
    let fd_coarse = (p1 - m1) / (2.0 * h);
    let fd_fine = (p2 - m2) / (0.2 * h);
    let scale = 1.0 + fd_fine.abs();
    let stable = 1e-15 * mag / (0.1 * h) <= 1e-6 * scale
        && (fd_coarse - fd_fine).abs() <= 1e-5 * scale
        && ((p1 - f0) / h - (f0 - m1) / h).abs() <= 1e-2 * scale;
    if stable && got.is_finite() {
        assert!(
            (got - fd_fine).abs() <= 1e-4 * scale,
            "seed {seed}: jvp {got}, directional finite differences {fd_fine}\n{kernel}\n{forward}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn vjp_matches_finite_differences_on_random_kernels(seed in any::<u64>()) {
        check_seed(seed);
    }
}

#[test]
fn the_smoothness_filter_keeps_most_elements() {
    let (mut compared, mut skipped) = (0, 0);
    for seed in 0..400 {
        let (c, s) = check_seed(seed);
        compared += c;
        skipped += s;
    }
    println!("compared {compared} input elements, skipped {skipped}");
    assert!(
        compared >= 3 * skipped && compared > 1000,
        "compared {compared}, skipped {skipped}"
    );
}

/// Forward-mode Jacobians (batched sweeps seeded with identities) against reverse-mode
/// Jacobians of the same random kernel: two independent derivations of the same matrix.
/// Entries that are not finite in either are left out (a NaN partial at a kink may reach one
/// mode and be masked in the other).
fn check_jacobians(seed: u64) -> usize {
    let mut rng = TestRng::new(seed);
    let kernel = random_kernel(&mut rng, &config(), "random");
    let inputs = random_inputs(&mut rng, &kernel, 0.0);
    let names: Vec<String> = kernel.inputs().map(|(_, name, _)| name.to_string()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    if refs.is_empty() {
        return 0;
    }
    let fwd = rfx_autodiff::jacfwd(&kernel, &refs).expect("jacfwd");
    let rev = rfx_autodiff::jacrev(&kernel, &refs).expect("jacrev");
    // The identity seeds are built inside the kernels: no input is added.
    assert_eq!(fwd.inputs().count(), inputs.len(), "seed {seed}: jacfwd inputs");
    assert_eq!(rev.inputs().count(), inputs.len(), "seed {seed}: jacrev inputs");
    let f_out = run(&fwd, &inputs);
    let r_out = run(&rev, &inputs);
    assert_eq!(f_out.len(), r_out.len(), "seed {seed}: output counts\n{kernel}");
    let mut compared = 0;
    for (k, (f, r)) in f_out.iter().zip(&r_out).enumerate().skip(kernel.outputs().len()) {
        assert_eq!(f.len(), r.len(), "seed {seed}: output {k} sizes");
        for (i, (a, b)) in f.iter().zip(r).enumerate() {
            if a.is_finite() && b.is_finite() {
                assert!(
                    entries_agree(*a, *b),
                    "seed {seed}: output {k} element {i}: jacfwd {a}, jacrev {b}\n{kernel}\n{fwd}"
                );
                compared += 1;
            }
        }
    }
    compared
}

/// Two finite Jacobian entries computed by different modes agree to a relative `1e-9`.
fn entries_agree(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn forward_and_reverse_jacobians_agree_on_random_kernels() {
    let compared: usize = (0..300).map(check_jacobians).sum();
    println!("compared {compared} Jacobian entries");
    assert!(compared > 2000, "only {compared} entries compared");
}

/// Both Jacobian modes (whose identity seeds stay diagonal through elementwise ops) against
/// the rows of the Jacobian built one at a time by `vjp` with one-hot cotangents (dense
/// reverse mode, no seed structure), entry for entry on random kernels. Entries that are not
/// finite in either are left out (the modes propagate a NaN partial differently).
#[test]
fn jacobians_agree_with_one_hot_vector_jacobian_products() {
    let mut compared = 0;
    for seed in 0..200u64 {
        let mut rng = TestRng::new(seed ^ 0x1ac0);
        let kernel = random_kernel(&mut rng, &config(), "random");
        let inputs = random_inputs(&mut rng, &kernel, 0.0);
        let names: Vec<String> = kernel.inputs().map(|(_, n, _)| n.to_string()).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        if refs.is_empty() {
            continue;
        }
        let outputs = run(&kernel, &inputs);
        let total: usize = outputs.iter().map(Vec::len).sum();
        if total > 64 {
            continue;
        }
        let product = vjp(&kernel, &refs).expect("vjp");
        let fwd = run(&rfx_autodiff::jacfwd(&kernel, &refs).expect("jacfwd"), &inputs);
        let rev = run(&rfx_autodiff::jacrev(&kernel, &refs).expect("jacrev"), &inputs);
        let n_out = outputs.len();
        // Row `(k, i)` of every Jacobian: `vjp` with the cotangent `e_i` on output `k`.
        for (k, out) in outputs.iter().enumerate() {
            for i in 0..out.len() {
                let mut with_ct = inputs.clone();
                for (kk, o) in outputs.iter().enumerate() {
                    let mut ct = vec![0.0; o.len()];
                    if kk == k {
                        ct[i] = 1.0;
                    }
                    let shape: Vec<usize> = kernel
                        .value_type(kernel.outputs()[kk].value)
                        .map(|t| t.shape.dims().to_vec())
                        .unwrap_or_default();
                    with_ct.push(Array::from_vec(shape, ct).expect("cotangent"));
                }
                let row = run(&product, &with_ct);
                for (x, grad) in row.iter().skip(n_out).enumerate() {
                    // `jac_<output k>_<input x>`, output-major: index n_out + k * inputs + x.
                    let index = n_out + k * refs.len() + x;
                    for (j, &g) in grad.iter().enumerate() {
                        let entry = i * grad.len() + j;
                        for (mode, jac) in [("jacfwd", &fwd), ("jacrev", &rev)] {
                            let a = jac[index][entry];
                            if a.is_finite() && g.is_finite() {
                                assert!(
                                    entries_agree(a, g),
                                    "seed {seed}: {mode} [{k}][{i}, {j}] = {a}, vjp {g}\n{kernel}"
                                );
                                compared += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    println!("compared {compared} Jacobian entries");
    assert!(compared > 2000, "only {compared} entries compared");
}
