//! The tracing API's running folds (`cumsum`, `cumprod`, `cummax`, `cummin`, and `scan` from
//! either end) against loops written here from NumPy's definitions, folding one element at a
//! time in the operand's own dtype, so every result must match bit for bit on every backend;
//! their names in `rfx::expr`; their gradients; one loop nest for an integration and its
//! consumers; and the typed error for a missing axis. The linear recurrence (`linrec`) against
//! the loop `y = a[i] * y + x[i]` written here the same way, with coefficients given as tensors
//! and as numbers, a low-pass filter and its discounted cost-to-go fused into one loop nest, and
//! its gradient.

use crate::common;

use common::{array_of as array, type_error};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::expr::{Signature, compile};
use rfx::{All, Array, DType, ScanOp, Tensor, TensorType};
use rfx_ir::TypeError;

const BACKENDS: [&str; 2] = ["cpu", "interp"];

/// One step of the fold `op` in `dtype` (`i32` wrapping; NumPy's NaN-propagating maximum and
/// minimum, the later element winning a tie), on values held as `f64`s of that dtype.
fn step(op: ScanOp, dtype: DType, acc: f64, x: f64) -> f64 {
    let max = |a: f64, b: f64| if a > b || a.is_nan() { a } else { b };
    let min = |a: f64, b: f64| if a < b || a.is_nan() { a } else { b };
    match (op, dtype) {
        (ScanOp::Max, _) => max(acc, x),
        (ScanOp::Min, _) => min(acc, x),
        (ScanOp::Sum, DType::F32) => f64::from(acc as f32 + x as f32),
        (ScanOp::Prod, DType::F32) => f64::from(acc as f32 * x as f32),
        (ScanOp::Sum, DType::I32) => f64::from((acc as i32).wrapping_add(x as i32)),
        (ScanOp::Prod, DType::I32) => f64::from((acc as i32).wrapping_mul(x as i32)),
        (ScanOp::Sum, _) => acc + x,
        (ScanOp::Prod, _) => acc * x,
        (ScanOp::Linear, _) => panic!("the linear recurrence takes a coefficient: see `recurrence`"),
    }
}

/// The linear recurrence `y = a[i] * y + x[i]` from `y = -0` in `dtype` (the product, then the
/// sum, each rounded to `dtype`), on values held as `f64`s of that dtype, along `axis`.
fn recurrence(dtype: DType, x: &[f64], a: &[f64], dims: &[usize], axis: usize, reverse: bool) -> Vec<f64> {
    let step = |acc: f64, x: f64, a: f64| match dtype {
        DType::F32 => f64::from((a as f32 * acc as f32) + x as f32),
        DType::I32 => f64::from((a as i32).wrapping_mul(acc as i32).wrapping_add(x as i32)),
        _ => a * acc + x,
    };
    let inner: usize = dims[axis + 1..].iter().product();
    let (outer, n): (usize, usize) = (dims[..axis].iter().product(), dims[axis]);
    let mut out = x.to_vec();
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = if dtype == DType::I32 { 0.0 } else { -0.0 };
            for s in 0..n {
                let k = if reverse { n - 1 - s } else { s };
                let at = (o * n + k) * inner + i;
                acc = step(acc, x[at], a[at]);
                out[at] = acc;
            }
        }
    }
    out
}

/// The running fold of `values` (row-major over `dims`) along `axis`, from the end when
/// `reverse`, each line starting at its first element.
fn folded(op: ScanOp, dtype: DType, values: &[f64], dims: &[usize], axis: usize, reverse: bool) -> Vec<f64> {
    let inner: usize = dims[axis + 1..].iter().product();
    let (outer, n): (usize, usize) = (dims[..axis].iter().product(), dims[axis]);
    let mut out = values.to_vec();
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = None;
            for s in 0..n {
                let k = if reverse { n - 1 - s } else { s };
                let at = (o * n + k) * inner + i;
                let next = acc.map_or(values[at], |a| step(op, dtype, a, values[at]));
                out[at] = next;
                acc = Some(next);
            }
        }
    }
    out
}

/// The values of `a` as `f64`s (a bool as 0 or 1).
fn values_of(a: &Array) -> Vec<f64> {
    (0..a.shape().numel())
        .map(|i| a.get(i).expect("element").to_f64())
        .collect()
}

fn same(got: &[f64], want: &[f64]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()))
}

#[test]
fn every_running_fold_in_every_dtype_both_ways_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(0x5ca7);
    let shapes: [&[usize]; 6] = [&[1], &[50], &[6, 9], &[3, 4, 5], &[2, 0], &[4, 1]];
    for dtype in [DType::F32, DType::F64, DType::I32, DType::Bool] {
        for dims in shapes {
            let len: usize = dims.iter().product();
            let mut x: Vec<f64> = (0..len).map(|_| rng.random_range(-3.0..3.0)).collect();
            // Special values among the floats: signed zeros, an infinity, a NaN.
            if dtype.is_float() && len > 8 {
                x[1] = -0.0;
                x[4] = f64::INFINITY;
                x[7] = f64::NAN;
            }
            let input = array(dtype, dims, &x);
            let stored = values_of(&input);
            for &op in ScanOp::FOLDS {
                for axis in 0..dims.len() {
                    for reverse in [false, true] {
                        // `bool` is counted as `i32`; its running maximum and minimum are cast back.
                        let counted = if dtype == DType::Bool { DType::I32 } else { dtype };
                        let want = folded(op, counted, &stored, dims, axis, reverse);
                        for backend in BACKENDS {
                            let f = rfx::Func::with_constants(move |x: Tensor| x.scan(op, axis, reverse));
                            let out = rfx::jit(f).on_backend(backend).call((&input,)).expect("scan");
                            let what =
                                format!("{backend}: {op} {dtype}{dims:?} axis {axis} reverse {reverse}");
                            let want_dtype = match (dtype, op) {
                                (DType::Bool, ScanOp::Max | ScanOp::Min) => DType::Bool,
                                _ => counted,
                            };
                            assert_eq!(out[0].dtype(), want_dtype, "{what}");
                            assert_eq!(out[0].shape().dims(), dims, "{what}");
                            let got = values_of(&out[0]);
                            assert!(same(&got, &want), "{what}:\n got {got:?}\nwant {want:?}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn named_folds_are_the_scan_from_the_start() {
    let x = Array::from_vec([2, 3], vec![3.0f64, -1.0, 2.0, 0.5, 4.0, -2.0]).expect("x");
    let run = |out: Result<Vec<Array>, rfx::JitError>| values_of(&out.expect("fold")[0]);
    let sums = run(rfx::jit(|x: Tensor| x.cumsum(1)).call((&x,)));
    assert_eq!(sums, [3.0, 2.0, 4.0, 0.5, 4.5, 2.5]);
    let products = run(rfx::jit(|x: Tensor| x.cumprod(0)).call((&x,)));
    assert_eq!(products, [3.0, -1.0, 2.0, 1.5, -4.0, -4.0]);
    let maxima = run(rfx::jit(|x: Tensor| x.cummax(1)).call((&x,)));
    assert_eq!(maxima, [3.0, 3.0, 3.0, 0.5, 4.0, 4.0]);
    let minima = run(rfx::jit(|x: Tensor| x.cummin(1)).call((&x,)));
    assert_eq!(minima, [3.0, -1.0, -1.0, 0.5, 0.5, -2.0]);
}

#[test]
fn expressions_name_the_folds() {
    let sig: Signature = "p: f64[2,3]".parse().expect("signature");
    let p = Array::from_vec([2, 3], vec![1.0f64, 2.0, 3.0, -1.0, 5.0, 0.5]).expect("p");
    let run = |source: &str| {
        let kernel = compile(source, &sig).unwrap_or_else(|e| panic!("{source}: {e}"));
        let out = rfx::jit_kernel(kernel).call((&p,)).expect("run");
        values_of(&out[0])
    };
    // Without an axis, of the flattened tensor (NumPy's `axis=None`).
    assert_eq!(run("cumsum(p)"), [1.0, 3.0, 6.0, 5.0, 10.0, 10.5]);
    assert_eq!(run("cumprod(p, axis=1)"), [1.0, 2.0, 6.0, -1.0, -5.0, -2.5]);
    assert_eq!(run("cumsum(p, 1, reverse=true)"), [6.0, 5.0, 3.0, 4.5, 5.5, 0.5]);
    assert_eq!(run("cummax(p, axis=0)"), [1.0, 2.0, 3.0, 1.0, 5.0, 3.0]);
    assert_eq!(
        run("cummin(p, -1, reverse=true)"),
        [1.0, 2.0, 3.0, -1.0, 0.5, 0.5]
    );
    let err = compile("cumsum(p, reverse=1)", &sig).expect_err("reverse must be a bool");
    assert!(err.message.contains("`reverse` must be true or false"), "{err}");
    let err = compile("cummax(p, 2)", &sig).expect_err("axis past the rank");
    assert!(err.message.contains("out of range"), "{err}");
}

#[test]
fn cost_to_go_and_its_gradient() {
    // The remaining cost from each step of a trajectory, `cost-to-go[t] = Σ_{s ≥ t} c[s]` with
    // `c = x²`, and the gradient of its weighted sum: `2 x[s] Σ_{t ≤ s} w[t]`.
    let mut rng = StdRng::seed_from_u64(0x60);
    let n = 40;
    let x: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    let w: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let vec = |v: &[f64]| Array::from_vec([v.len()], v.to_vec()).expect("vector");
    fn to_go(x: Tensor) -> Tensor {
        (x * x).scan(ScanOp::Sum, 0, true)
    }
    let value = rfx::jit(|x: Tensor| to_go(x)).call((&vec(&x),)).expect("value");
    let want: Vec<f64> = (0..n)
        .map(|t| x[t..].iter().rev().fold(-0.0, |acc, v| acc + v * v))
        .collect();
    assert!(same(&values_of(&value[0]), &want));
    let g = rfx::jit(rfx::grad(|x: Tensor, w: Tensor| (to_go(x) * w).sum(All)).wrt(&[0]));
    let out = g.call((&vec(&x), &vec(&w))).expect("grad");
    let mut prefix = 0.0;
    let want: Vec<f64> = (0..n)
        .map(|s| {
            prefix += w[s];
            2.0 * x[s] * prefix
        })
        .collect();
    let got = values_of(&out[0]);
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{got:?}\n{want:?}");
    }
}

#[test]
fn an_integration_and_what_reads_it_are_one_loop_nest() {
    // Positions from velocities and the per-step distance to a goal: the scan's kernel computes
    // its operand, the positions and the distances; nothing else runs.
    let f = rfx::jit(|v: Tensor, p0: Tensor, goal: Tensor| {
        let p = (v * 0.1).cumsum(1) + p0;
        let d = p - goal;
        d * d
    });
    let f32s = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    let exe = f
        .executable(&[f32s(&[8, 30]), f32s(&[8, 1]), f32s(&[30])])
        .expect("compile");
    assert_eq!(exe.lir().kernels().len(), 1, "{}", exe.lir());
    assert!(exe.lir().to_string().contains("scan forward"), "{}", exe.lir());
}

#[test]
fn a_missing_axis_is_a_typed_error() {
    let f = rfx::jit(|x: Tensor| x.cummax(2));
    let err = f
        .executable(&[TensorType::new(DType::F32, [3, 3])])
        .expect_err("axis 2 of a matrix");
    assert_eq!(type_error(err), TypeError::AxisOutOfRange { axis: 2, rank: 2 });
}

#[test]
fn linear_recurrences_in_every_dtype_both_ways_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(0x11ec);
    let shapes: [&[usize]; 6] = [&[1], &[50], &[6, 9], &[3, 4, 5], &[2, 0], &[33, 8]];
    for dtype in [DType::F32, DType::F64, DType::I32] {
        for dims in shapes {
            let len: usize = dims.iter().product();
            let draw = |rng: &mut StdRng, lo: f64, hi: f64| -> Vec<f64> {
                (0..len)
                    .map(|_| {
                        let v: f64 = rng.random_range(lo..hi);
                        if dtype == DType::I32 { v.round() } else { v }
                    })
                    .collect()
            };
            let mut x = draw(&mut rng, -3.0, 3.0);
            let mut a = draw(&mut rng, -1.2, 1.2);
            if dtype.is_float() && len > 8 {
                x[1] = -0.0;
                x[4] = f64::INFINITY;
                a[7] = f64::NAN;
                a[8] = 0.0;
            }
            let (xs, coefs) = (array(dtype, dims, &x), array(dtype, dims, &a));
            let (x, a) = (values_of(&xs), values_of(&coefs));
            for axis in 0..dims.len() {
                for reverse in [false, true] {
                    let want = recurrence(dtype, &x, &a, dims, axis, reverse);
                    for backend in BACKENDS {
                        let f =
                            rfx::Func::with_constants(move |x: Tensor, a: Tensor| x.linrec(a, axis, reverse));
                        let out = rfx::jit(f)
                            .on_backend(backend)
                            .call((&xs, &coefs))
                            .expect("linrec");
                        let what = format!("{backend}: linrec {dtype}{dims:?} axis {axis} reverse {reverse}");
                        assert_eq!(out[0].dtype(), dtype, "{what}");
                        let got = values_of(&out[0]);
                        assert!(same(&got, &want), "{what}:\n got {got:?}\nwant {want:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_low_pass_filter_and_its_discounted_cost_to_go_are_one_loop_nest() {
    // y[t] = 0.8 y[t-1] + 0.2 x[t] over each row of signals (a number as the coefficient,
    // broadcast), then g[t] = (y[t] - r[t])² + 0.9 g[t+1] from the end: two scans along the
    // same axis in opposite orders, so two loop nests, each computing its operand in place.
    let f = rfx::jit(|x: Tensor, r: Tensor| {
        let y = (x * 0.2).linrec(0.8, 1, false);
        let e = y - r;
        (y, (e * e).linrec(0.9, 1, true))
    });
    let (rows, steps) = (4, 64);
    let mut rng = StdRng::seed_from_u64(0x70);
    let x: Vec<f64> = (0..rows * steps).map(|_| rng.random_range(-1.0..1.0)).collect();
    let r: Vec<f64> = (0..steps).map(|_| rng.random_range(-0.5..0.5)).collect();
    let xs = Array::from_vec([rows, steps], x.clone()).expect("x");
    let rs = Array::from_vec([steps], r.clone()).expect("r");
    let out = f.call((&xs, &rs)).expect("filter");
    let driven: Vec<f64> = x.iter().map(|v| v * 0.2).collect();
    let y = recurrence(
        DType::F64,
        &driven,
        &vec![0.8; rows * steps],
        &[rows, steps],
        1,
        false,
    );
    assert!(same(&values_of(&out[0]), &y));
    let cost: Vec<f64> = y
        .iter()
        .enumerate()
        .map(|(i, v)| (v - r[i % steps]) * (v - r[i % steps]))
        .collect();
    let g = recurrence(
        DType::F64,
        &cost,
        &vec![0.9; rows * steps],
        &[rows, steps],
        1,
        true,
    );
    assert!(same(&values_of(&out[1]), &g));
    let f64s = |dims: &[usize]| TensorType::new(DType::F64, dims.to_vec());
    let exe = f
        .executable(&[f64s(&[rows, steps]), f64s(&[steps])])
        .expect("compile");
    assert_eq!(exe.lir().kernels().len(), 2, "{}", exe.lir());
    let text = exe.lir().to_string();
    assert!(
        text.contains("scan forward") && text.contains("scan reverse"),
        "{text}"
    );
}

#[test]
fn a_linear_recurrence_differentiates_in_its_signal_and_its_coefficient() {
    // f(x, a) = Σ linrec(x, a): ∂f/∂x[j] = Σ_{i ≥ j} Π_{j < k ≤ i} a[k] and
    // ∂f/∂a[i] = y[i-1] Σ_{m ≥ i} Π_{i < k ≤ m} a[k].
    let n = 12;
    let mut rng = StdRng::seed_from_u64(0x71);
    let x: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let a: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let vec = |v: &[f64]| Array::from_vec([v.len()], v.to_vec()).expect("vector");
    let g = rfx::jit(rfx::grad(|x: Tensor, a: Tensor| x.linrec(a, 0, false).sum(All)).wrt(&[0, 1]));
    let out = g.call((&vec(&x), &vec(&a))).expect("grad");
    let reach = |from: usize| -> f64 {
        // Σ_{m ≥ from} Π_{from < k ≤ m} a[k]
        let mut total = 1.0;
        let mut product = 1.0;
        for factor in &a[from + 1..] {
            product *= factor;
            total += product;
        }
        total
    };
    let y = recurrence(DType::F64, &x, &a, &[n], 0, false);
    let want_x: Vec<f64> = (0..n).map(reach).collect();
    let want_a: Vec<f64> = (0..n)
        .map(|i| if i == 0 { 0.0 } else { y[i - 1] * reach(i) })
        .collect();
    for (got, want) in [(values_of(&out[0]), want_x), (values_of(&out[1]), want_a)] {
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-13 * w.abs().max(1.0), "{got:?}\n{want:?}");
        }
    }
}

#[test]
fn expressions_name_the_linear_recurrence() {
    let sig: Signature = "x: f64[2,3], a: f64[2,3]".parse().expect("signature");
    let x = Array::from_vec([2, 3], vec![4.0f64, 4.0, 0.0, 1.0, 2.0, 4.0]).expect("x");
    let a = Array::from_vec([2, 3], vec![0.5f64, 0.5, 0.5, 0.25, 0.5, 1.0]).expect("a");
    let run = |source: &str| {
        let kernel = compile(source, &sig).unwrap_or_else(|e| panic!("{source}: {e}"));
        let out = rfx::jit_kernel(kernel).call((&x, &a)).expect("run");
        values_of(&out[0])
    };
    // Along the last axis by default, with a number or a tensor as the coefficient.
    assert_eq!(run("linrec(x, 0.5)"), [4.0, 6.0, 3.0, 1.0, 2.5, 5.25]);
    assert_eq!(run("linrec(x, a, axis=0)"), [4.0, 4.0, 0.0, 2.0, 4.0, 4.0]);
    assert_eq!(
        run("linrec(x, a, 1, reverse=true)"),
        [6.0, 4.0, 0.0, 2.0, 4.0, 4.0]
    );
    let err = compile("linrec(x)", &sig).expect_err("no coefficient");
    assert!(err.message.contains("takes 2 argument(s)"), "{err}");
}

#[test]
fn a_coefficient_that_does_not_broadcast_is_a_typed_error() {
    let f = rfx::jit(|x: Tensor, a: Tensor| x.linrec(a, 0, false));
    let err = f
        .executable(&[
            TensorType::new(DType::F32, [3, 4]),
            TensorType::new(DType::F32, [5]),
        ])
        .expect_err("shapes [3, 4] and [5]");
    assert!(matches!(
        type_error(err),
        TypeError::Broadcast { op: "linrec", .. }
    ));
    // The one-operand entry point reports the missing coefficient.
    let f = rfx::jit(|x: Tensor| x.scan(ScanOp::Linear, 0, false));
    let err = f
        .executable(&[TensorType::new(DType::F32, [3])])
        .expect_err("arity");
    assert!(matches!(
        type_error(err),
        TypeError::Arity {
            op: "linrec",
            expected: 2,
            found: 1
        }
    ));
}

#[test]
fn a_running_products_gradient_is_exact_at_a_zero() {
    // Against the closed form Σ_{i ≥ j} Π_{k ≤ i, k ≠ j} x[k], with a zero in the row: the
    // gradient is linear recurrences, with no division.
    let x = [0.5f64, -2.0, 0.0, 1.5, 3.0];
    let g = rfx::jit(rfx::grad(|x: Tensor| x.cumprod(0).sum(All)));
    let out = g.call((&x[..],)).expect("grad");
    let want: Vec<f64> = (0..5)
        .map(|j| {
            (j..5)
                .map(|i| (0..=i).filter(|&k| k != j).map(|k| x[k]).product::<f64>())
                .sum()
        })
        .collect();
    assert_eq!(values_of(&out[0]), want);
}
