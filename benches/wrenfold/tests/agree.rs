//! The rfx kernels against the hand-written Rust on random inputs (values and Jacobians within
//! a few units of roundoff of each output block's size), and the Jacobians against central
//! finite differences of the hand-written values.

use wrenfold_bench::handwritten::{self as hw, Quat};
use wrenfold_bench::kernels::{self, Spec};
use wrenfold_bench::{Batch, bind, generate, outputs, run_bound, run_handwritten};

const N: usize = 24;

/// How a kernel's outputs relate to its inputs, for the finite differences.
struct Layout {
    /// The value outputs stacked into one vector: `(output, is a rotation)`; a rotation's
    /// difference is `Log(a⁻¹ ∘ b)` (three components).
    values: &'static [(usize, bool)],
    /// `(Jacobian output, inputs)`: rows are the stacked values' tangents, columns the
    /// inputs' tangents in order.
    jacobians: &'static [(usize, &'static [usize])],
}

fn layout(spec: &Spec) -> Layout {
    match spec.name {
        "QuatLocalCoords" => Layout {
            values: &[(0, false)],
            jacobians: &[(1, &[0]), (2, &[1])],
        },
        "QuatInterpolation" => Layout {
            values: &[(0, true)],
            jacobians: &[(1, &[0]), (2, &[1])],
        },
        "ImuIntegration" => Layout {
            values: &[(0, true), (1, false), (2, false)],
            jacobians: &[(3, &[0, 1, 2]), (4, &[5, 6]), (5, &[3, 4])],
        },
        _ => Layout {
            values: &[(0, false)],
            jacobians: &[
                (1, &[0]),
                (2, &[1]),
                (3, &[2]),
                (4, &[3]),
                (5, &[4]),
                (6, &[5]),
                (7, &[6]),
            ],
        },
    }
}

/// The largest `|a - b|` over a block, in units of `f64::EPSILON` times the block's largest
/// entry (at least 1).
fn ulps(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / (scale * f64::EPSILON))
        .fold(0.0, f64::max)
}

fn hand_written(spec: &Spec, batch: &Batch) -> Vec<Vec<f64>> {
    let mut out = outputs(spec, batch.n);
    let mut slices: Vec<&mut [f64]> = out.iter_mut().map(Vec::as_mut_slice).collect();
    run_handwritten(spec, &batch.slices(), batch.n, &mut slices);
    out
}

fn rfx_batched(spec: &Spec, batch: &Batch) -> Vec<Vec<f64>> {
    let mut bound = bind(spec, Some(batch.n), "cpu").expect("compiles");
    let mut out = outputs(spec, batch.n);
    let mut slices: Vec<&mut [f64]> = out.iter_mut().map(Vec::as_mut_slice).collect();
    run_bound(spec, &mut bound, &batch.slices(), &mut slices).expect("runs");
    out
}

/// Example `i` of a batch as a batch of one.
fn example(spec: &Spec, batch: &Batch, i: usize) -> Batch {
    let inputs = batch
        .inputs
        .iter()
        .enumerate()
        .map(|(k, input)| {
            let len = spec.input_len(k);
            if spec.shared.contains(&spec.inputs[k].0) {
                input.clone()
            } else {
                input[len * i..len * (i + 1)].to_vec()
            }
        })
        .collect();
    Batch { n: 1, inputs }
}

#[test]
fn rfx_matches_the_hand_written_kernels() {
    for (seed, spec) in kernels::ALL.iter().enumerate() {
        let batch = generate(spec, N, 100 + seed as u64);
        let expected = hand_written(spec, &batch);
        let batched = rfx_batched(spec, &batch);
        // One example at a time through the unbatched kernel's bound call.
        let mut single = bind(spec, None, "cpu").expect("compiles");
        let mut worst = 0.0f64;
        for i in 0..N {
            let one = example(spec, &batch, i);
            let mut out = outputs(spec, 1);
            let mut slices: Vec<&mut [f64]> = out.iter_mut().map(Vec::as_mut_slice).collect();
            run_bound(spec, &mut single, &one.slices(), &mut slices).expect("runs");
            for (j, (name, _)) in spec.outputs.iter().enumerate() {
                let len = spec.output_len(j);
                let want = &expected[j][len * i..len * (i + 1)];
                let err_batched = ulps(&batched[j][len * i..len * (i + 1)], want);
                let err_single = ulps(&out[j], want);
                worst = worst.max(err_batched).max(err_single);
                assert!(
                    err_batched <= 16.0 && err_single <= 16.0,
                    "{} {name} example {i}: {err_batched} / {err_single} ulps\nrfx {:?}\nhand-written {want:?}",
                    spec.name,
                    &batched[j][len * i..len * (i + 1)],
                );
            }
        }
        eprintln!(
            "{}: rfx within {worst:.1} ulps of the hand-written Rust",
            spec.name
        );
    }
}

fn exp(w: [f64; 3]) -> Quat {
    let theta = (w[0] * w[0] + w[1] * w[1] + w[2] * w[2]).sqrt();
    let (s, c) = (theta / 2.0).sin_cos();
    let k = if theta > 0.0 { s / theta } else { 0.5 };
    [c, k * w[0], k * w[1], k * w[2]]
}

/// `Log(a⁻¹ ∘ b)` on the shorter arc (finite at `a = b`).
fn minus(a: &[f64], b: &[f64]) -> [f64; 3] {
    let q = |s: &[f64]| -> Quat { std::array::from_fn(|i| s[i]) };
    let conj = |q: Quat| [q[0], -q[1], -q[2], -q[3]];
    let mut d = hw::quat_mul(conj(q(a)), q(b));
    if d[0] < 0.0 {
        d = d.map(|c| -c);
    }
    let n = (d[1] * d[1] + d[2] * d[2] + d[3] * d[3]).sqrt();
    let k = if n > 0.0 {
        2.0 * n.atan2(d[0]) / n
    } else {
        2.0 / d[0]
    };
    [k * d[1], k * d[2], k * d[3]]
}

/// Input `k` of a one-example batch moved by `h` along its tangent direction `d`.
fn perturbed(spec: &Spec, one: &Batch, k: usize, d: usize, h: f64) -> Batch {
    let mut moved = one.clone();
    if spec.inputs[k].1 == [4] {
        let mut e = [0.0; 3];
        e[d] = h;
        let q: Quat = std::array::from_fn(|i| one.inputs[k][i]);
        moved.inputs[k] = hw::quat_mul(q, exp(e)).to_vec();
    } else {
        moved.inputs[k][d] += h;
    }
    moved
}

/// The stacked value tangent of `at` relative to `base`.
fn value_difference(layout: &Layout, base: &[Vec<f64>], at: &[Vec<f64>]) -> Vec<f64> {
    let mut out = Vec::new();
    for &(j, rotation) in layout.values {
        if rotation {
            out.extend(minus(&base[j], &at[j]));
        } else {
            out.extend(at[j].iter().zip(&base[j]).map(|(a, b)| a - b));
        }
    }
    out
}

#[test]
fn jacobians_match_central_differences() {
    const H: f64 = 1e-6;
    for (seed, spec) in kernels::ALL.iter().enumerate() {
        let layout = layout(spec);
        let batch = generate(spec, 4, 200 + seed as u64);
        let rfx = rfx_batched(spec, &batch);
        let mut worst = 0.0f64;
        for i in 0..batch.n {
            let one = example(spec, &batch, i);
            let base = hand_written(spec, &one);
            for &(jac, inputs) in layout.jacobians {
                let cols: usize = inputs.iter().map(|&k| spec.input_len(k).min(3)).sum();
                let len = spec.output_len(jac);
                let got = &rfx[jac][len * i..len * (i + 1)];
                let rows = len / cols;
                let mut col = 0;
                for &k in inputs {
                    for d in 0..spec.input_len(k).min(3) {
                        let plus = hand_written(spec, &perturbed(spec, &one, k, d, H));
                        let minus = hand_written(spec, &perturbed(spec, &one, k, d, -H));
                        let up = value_difference(&layout, &base, &plus);
                        let down = value_difference(&layout, &base, &minus);
                        for r in 0..rows {
                            let fd = (up[r] - down[r]) / (2.0 * H);
                            let j = got[r * cols + col];
                            worst = worst.max((fd - j).abs() / (1.0 + j.abs()));
                            assert!(
                                (fd - j).abs() <= 1e-6 * (1.0 + j.abs()),
                                "{} {} row {r} col {col} example {i}: rfx {j}, central difference {fd}",
                                spec.name,
                                spec.outputs[jac].0,
                            );
                        }
                        col += 1;
                    }
                }
                assert_eq!(col, cols);
            }
        }
        eprintln!("{}: central differences within {worst:.1e} (relative)", spec.name);
    }
}
