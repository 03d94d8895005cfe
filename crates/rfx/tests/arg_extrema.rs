//! `argmin` and `argmax` of traced tensors against a row-by-row reference with NumPy's rules
//! (the first of equal extrema, the first NaN where there is one), on random inputs full of
//! ties, signed zeros, infinities and NaNs, in every dtype, along every axis, on the CPU and
//! the interpreter; the nearest waypoint of a path found and read in one kernel, and its
//! gradient; the typed errors; the NaN and infinity tests a NaN-aware argmin is built with.

use crate::common;

use common::{array_of, as_stored, f64s, type_error};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::{Array, DType, Tensor, TensorType};
use rfx_ir::{Shape, TypeError};

/// NumPy's `argmin` (`want_max` false) or `argmax` of one row, given as `f64`s: a NaN wins at
/// once; otherwise only a strictly better element replaces the best so far.
fn reference(row: &[f64], want_max: bool) -> i32 {
    let mut best = 0;
    for (k, &x) in row.iter().enumerate() {
        if x.is_nan() {
            return k as i32;
        }
        let better = if want_max { x > row[best] } else { x < row[best] };
        if better {
            best = k;
        }
    }
    best as i32
}

/// The reference over `axis` of a row-major `dims` tensor: one index per element of the
/// remaining axes, in row-major order.
fn reference_over(values: &[f64], dims: &[usize], axis: usize, want_max: bool) -> Vec<i32> {
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    let n = dims[axis];
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let row: Vec<f64> = (0..n).map(|k| values[(o * n + k) * inner + i]).collect();
            out.push(reference(&row, want_max));
        }
    }
    out
}

/// Few distinct values, so most rows hold ties; some signed zeros, infinities and NaNs.
fn draw(rng: &mut StdRng) -> f64 {
    match rng.random_range(0..40) {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2 => f64::NEG_INFINITY,
        3 => -0.0,
        4 => 0.0,
        _ => f64::from(rng.random_range(-4i32..5)) * 0.75,
    }
}

#[test]
fn arg_extrema_follow_numpy_on_ties_zeros_and_nans() {
    let mut rng = StdRng::seed_from_u64(0x00a7_6e11);
    let shapes: [&[usize]; 8] = [
        &[1],
        &[9],
        &[1, 1],
        &[5, 7],
        &[3, 33],
        &[40, 9],
        &[2, 300],
        &[4, 5, 6],
    ];
    let mut checked = 0usize;
    for dtype in [DType::F32, DType::F64, DType::I32, DType::Bool] {
        for dims in shapes {
            let len: usize = dims.iter().product();
            let values: Vec<f64> = (0..len).map(|_| draw(&mut rng)).collect();
            // NaNs and infinities have no i32 or bool form: those dtypes draw finite values.
            let values: Vec<f64> = match dtype {
                DType::F32 | DType::F64 => values,
                _ => values
                    .iter()
                    .map(|&v| if v.is_finite() { v } else { 1.5 })
                    .collect(),
            };
            let x = array_of(dtype, dims, &values);
            let stored = as_stored(dtype, &values);
            for axis in 0..dims.len() {
                for want_max in [false, true] {
                    let want = reference_over(&stored, dims, axis, want_max);
                    for backend in ["cpu", "interp"] {
                        let f = rfx::jit(rfx::Func::with_constants(move |x: Tensor| {
                            if want_max { x.argmax(axis) } else { x.argmin(axis) }
                        }))
                        .on_backend(backend);
                        let out = f.call((&x,)).expect("call");
                        let mut kept = dims.to_vec();
                        kept.remove(axis);
                        assert_eq!(out[0].shape().dims(), &kept[..]);
                        let got = out[0].as_slice::<i32>().expect("an i32 index");
                        assert_eq!(
                            got,
                            &want[..],
                            "{backend}: arg{} of {dtype}{dims:?} along {axis}: {values:?}",
                            if want_max { "max" } else { "min" },
                        );
                        checked += got.len();
                    }
                }
            }
        }
    }
    assert!(checked > 4000, "only {checked} indices checked");
}

#[test]
fn a_batched_argmin_is_the_argmin_of_each_row() {
    // `vmap` of one row's argmin over a batch along axis 1 (the rows are columns of the input).
    let mut rng = StdRng::seed_from_u64(77);
    let (n, batch) = (13, 9);
    let values: Vec<f64> = (0..n * batch).map(|_| draw(&mut rng)).collect();
    let x = Array::from_vec([n, batch], values.clone()).expect("x");
    let f = rfx::jit(rfx::vmap(|x: Tensor| x.argmin(0)).in_axes(&[Some(1)]));
    let out = f.call((&x,)).expect("vmap");
    let want = reference_over(&values, &[n, batch], 0, false);
    assert_eq!(out[0].as_slice::<i32>(), Some(&want[..]));
}

/// The nearest waypoint of a path to each of a batch of positions: squared distances to every
/// waypoint, their `argmin`, and the waypoint read back by that index.
fn nearest(p: Tensor, path: Tensor) -> Tensor {
    let n = p.shape().dims()[0];
    let m = path.shape().dims()[0];
    let d = p.reshape([n, 1, 2]) - path.reshape([1, m, 2]);
    let d2 = (d * d).sum(2);
    path.take(d2.argmin(1), 0)
}

#[test]
fn the_nearest_waypoint_is_found_and_read_in_one_call() {
    let mut rng = StdRng::seed_from_u64(0x9a7e);
    let m = 24;
    // A curved path, and positions near and far from it.
    let path: Vec<f64> = (0..m)
        .flat_map(|k| {
            let s = k as f64 * 0.4;
            [s, (0.7 * s).sin()]
        })
        .collect();
    let n = 50;
    let p: Vec<f64> = (0..2 * n).map(|_| rng.random_range(-1.0..10.0)).collect();
    let f = rfx::jit(nearest);
    let path_a = Array::from_vec([m, 2], path.clone()).expect("path");
    let p_a = Array::from_vec([n, 2], p.clone()).expect("positions");
    let out = f.call((&p_a, &path_a)).expect("call");
    assert_eq!(out[0].shape().dims(), [n, 2]);
    let got = f64s(&out[0]);
    // Each position's nearest waypoint, by the row reference over its squared distances.
    let picked: Vec<usize> = p
        .chunks(2)
        .map(|at| {
            let d2: Vec<f64> = path
                .chunks(2)
                .map(|w| (at[0] - w[0]).powi(2) + (at[1] - w[1]).powi(2))
                .collect();
            reference(&d2, false) as usize
        })
        .collect();
    for (k, &j) in picked.iter().enumerate() {
        assert_eq!(
            &got[2 * k..2 * k + 2],
            &path[2 * j..2 * j + 2],
            "position {k} {:?}",
            &p[2 * k..2 * k + 2]
        );
    }

    // The waypoint read depends on the path (one-hot rows, summed over the positions that
    // picked each waypoint) and not on the positions (the index is piecewise constant).
    let g = rfx::jit(rfx::grad(|p: Tensor, path: Tensor| nearest(p, path).sum(rfx::All)).wrt(&[0, 1]));
    let out = g.call((&p_a, &path_a)).expect("grad");
    assert!(f64s(&out[0]).iter().all(|&v| v == 0.0), "{:?}", f64s(&out[0]));
    let mut picks = vec![0.0; 2 * m];
    for &j in &picked {
        picks[2 * j] += 1.0;
        picks[2 * j + 1] += 1.0;
    }
    assert_eq!(f64s(&out[1]), &picks[..]);
}

#[test]
fn arg_extrema_of_an_empty_axis_or_past_the_rank_are_typed_errors() {
    let f = rfx::jit(|x: Tensor| x.argmin(1));
    let empty = Array::from_vec([3, 0], Vec::<f32>::new()).expect("empty");
    assert_eq!(
        type_error(f.call((&empty,)).expect_err("empty axis")),
        TypeError::EmptyAxis {
            shape: Shape::new([3, 0]),
            axis: 1
        }
    );
    // Along an axis that is not empty, an empty tensor has an empty result.
    let g = rfx::jit(|x: Tensor| x.argmax(0));
    let out = g.call((&empty,)).expect("no rows to reduce");
    assert_eq!(out[0].shape().dims(), [0]);
    let h = rfx::jit(|x: Tensor| x.argmax(2));
    let types = [TensorType::new(DType::F64, [3, 4])];
    assert_eq!(
        type_error(h.executable(&types).expect_err("axis past the rank")),
        TypeError::AxisOutOfRange { axis: 2, rank: 2 }
    );
}

#[test]
fn nan_and_infinity_tests_classify_every_special_value() {
    let values = [
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        f64::MAX,
        -f64::MIN_POSITIVE / 4.0,
        -3.5,
        1e300,
    ];
    fn classify(x: Tensor) -> (Tensor, Tensor, Tensor) {
        (x.is_nan(), x.is_inf(), x.is_finite())
    }
    for dtype in [DType::F32, DType::F64] {
        let x = array_of(dtype, &[values.len()], &values);
        for backend in ["cpu", "interp"] {
            let out = rfx::jit(classify).on_backend(backend).call((&x,)).expect("call");
            let stored = as_stored(dtype, &values);
            let flags = |k: usize| out[k].as_slice::<bool>().expect("bool").to_vec();
            let want_nan: Vec<bool> = stored.iter().map(|v| v.is_nan()).collect();
            let want_inf: Vec<bool> = stored.iter().map(|v| v.is_infinite()).collect();
            let want_finite: Vec<bool> = stored.iter().map(|v| v.is_finite()).collect();
            assert_eq!(flags(0), want_nan, "{backend} {dtype} isnan of {stored:?}");
            assert_eq!(flags(1), want_inf, "{backend} {dtype} isinf of {stored:?}");
            assert_eq!(flags(2), want_finite, "{backend} {dtype} isfinite of {stored:?}");
        }
    }
    let out = rfx::jit(classify)
        .call((&[3i32, -7, i32::MAX][..],))
        .expect("i32");
    assert_eq!(out[0].as_slice::<bool>(), Some(&[false; 3][..]));
    assert_eq!(out[1].as_slice::<bool>(), Some(&[false; 3][..]));
    assert_eq!(out[2].as_slice::<bool>(), Some(&[true; 3][..]));
}
