//! The tracing API's linear algebra and running sums (`matmul`, `dot`, `cross`, `norm`,
//! `cumsum`, `diff`) against loops written here from NumPy's definitions, evaluated in `f64`
//! on fresh random inputs, in every float dtype (and `i32` where NumPy takes it), on the CPU and
//! the interpreter; their gradients against closed forms; `rfx::expr`'s names and `@`; the
//! typed errors.

use crate::common;

use common::{array_of as array, as_stored as stored, f64s, type_error};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rfx::{All, Array, DType, Tensor, TensorType};
use rfx_ir::{Shape, TypeError};

/// Row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * dims[d + 1];
    }
    s
}

/// The multi-index of element `flat` of `dims`.
fn unravel(dims: &[usize], mut flat: usize) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for d in (0..dims.len()).rev() {
        idx[d] = flat % dims[d];
        flat /= dims[d];
    }
    idx
}

/// The element of a `dims` tensor at `idx`, an index of a broadcast shape of at least its rank
/// (NumPy's rules: right-aligned, extents of one repeat).
fn at(values: &[f64], dims: &[usize], idx: &[usize]) -> f64 {
    let skip = idx.len() - dims.len();
    let s = strides(dims);
    let flat: usize = (0..dims.len())
        .map(|d| if dims[d] == 1 { 0 } else { idx[skip + d] * s[d] })
        .sum();
    values[flat]
}

/// NumPy's broadcast of two shapes.
fn broadcast(a: &[usize], b: &[usize]) -> Vec<usize> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|d| {
            let x = if d + a.len() >= rank {
                a[d + a.len() - rank]
            } else {
                1
            };
            let y = if d + b.len() >= rank {
                b[d + b.len() - rank]
            } else {
                1
            };
            assert!(x == y || x == 1 || y == 1, "{a:?} and {b:?} do not broadcast");
            x.max(y)
        })
        .collect()
}

/// NumPy's `matmul` of `a` (`ad`) and `c` (`cd`), in `f64`: the result's shape and values.
fn matmul_ref(a: &[f64], ad: &[usize], c: &[f64], cd: &[usize]) -> (Vec<usize>, Vec<f64>) {
    let a2: Vec<usize> = if ad.len() == 1 {
        vec![1, ad[0]]
    } else {
        ad.to_vec()
    };
    let c2: Vec<usize> = if cd.len() == 1 {
        vec![cd[0], 1]
    } else {
        cd.to_vec()
    };
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], c2[c2.len() - 1]);
    let batch = broadcast(&a2[..a2.len() - 2], &c2[..c2.len() - 2]);
    let full: Vec<usize> = batch.iter().copied().chain([m, n]).collect();
    let total: usize = full.iter().product();
    let mut values = Vec::with_capacity(total);
    for flat in 0..total {
        let idx = unravel(&full, flat);
        let (i, j) = (idx[idx.len() - 2], idx[idx.len() - 1]);
        let mut acc = 0.0;
        for kk in 0..k {
            let mut ia = idx[..batch.len()].to_vec();
            ia.extend([i, kk]);
            let mut ic = idx[..batch.len()].to_vec();
            ic.extend([kk, j]);
            acc += at(a, &a2, &ia) * at(c, &c2, &ic);
        }
        values.push(acc);
    }
    let mut out = batch;
    if ad.len() > 1 {
        out.push(m);
    }
    if cd.len() > 1 {
        out.push(n);
    }
    (out, values)
}

/// NumPy's `dot` (operands of rank one or more): `[a.., k]` with `[k]` or `[b.., k, n]`.
fn dot_ref(a: &[f64], ad: &[usize], c: &[f64], cd: &[usize]) -> (Vec<usize>, Vec<f64>) {
    let k = ad[ad.len() - 1];
    let lead_a = &ad[..ad.len() - 1];
    let (lead_c, n): (&[usize], usize) = if cd.len() == 1 {
        (&[], 1)
    } else {
        (&cd[..cd.len() - 2], cd[cd.len() - 1])
    };
    let mut out: Vec<usize> = lead_a.iter().chain(lead_c).copied().collect();
    if cd.len() > 1 {
        out.push(n);
    }
    let full: Vec<usize> = lead_a.iter().chain(lead_c).copied().chain([n]).collect();
    let total: usize = full.iter().product();
    let (sa, sc) = (strides(ad), strides(cd));
    let values = (0..total)
        .map(|flat| {
            let idx = unravel(&full, flat);
            let (ia, rest) = idx.split_at(lead_a.len());
            let (ic, j) = rest.split_at(lead_c.len());
            (0..k)
                .map(|kk| {
                    let fa: usize =
                        ia.iter().zip(&sa).map(|(i, s)| i * s).sum::<usize>() + kk * sa[ad.len() - 1];
                    let mut fc: usize = ic.iter().zip(&sc).map(|(i, s)| i * s).sum();
                    if cd.len() == 1 {
                        fc += kk;
                    } else {
                        fc += kk * sc[cd.len() - 2] + j[0];
                    }
                    a[fa] * c[fc]
                })
                .sum()
        })
        .collect();
    (out, values)
}

fn random(rng: &mut StdRng, len: usize) -> Vec<f64> {
    (0..len).map(|_| rng.random_range(-2.0..2.0)).collect()
}

/// `got` against `want`: exact for `i32`; for floats within a few roundings of each term of a
/// sum whose magnitudes add to at most `scale`.
fn assert_close(dtype: DType, got: &[f64], want: &[f64], scale: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let eps = match dtype {
        DType::F32 => 1e-6,
        DType::F64 => 1e-14,
        _ => 0.0,
    };
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 4.0 * eps * scale,
            "{what}: element {k}: got {g}, want {w}"
        );
    }
}

const BACKENDS: [&str; 2] = ["cpu", "interp"];

#[test]
fn matmul_follows_numpy_for_vectors_matrices_and_batches() {
    let mut rng = StdRng::seed_from_u64(0x3a7_3a1);
    let cases: [(&[usize], &[usize]); 12] = [
        (&[3], &[3]),
        (&[2, 3], &[3]),
        (&[3], &[3, 4]),
        (&[2, 3], &[3, 4]),
        (&[5, 2, 3], &[3, 4]),
        (&[2, 3], &[5, 3, 4]),
        (&[5, 1, 2, 3], &[4, 3, 2]),
        (&[64, 3, 3], &[3]),
        (&[3], &[7, 3, 5]),
        (&[1, 1], &[1, 1]),
        (&[2, 0], &[0, 3]),
        (&[9, 17], &[17, 6]),
    ];
    for dtype in [DType::F32, DType::F64, DType::I32] {
        for (ad, cd) in cases {
            let a = random(&mut rng, ad.iter().product());
            let c = random(&mut rng, cd.iter().product());
            let (sa, sc) = (stored(dtype, &a), stored(dtype, &c));
            let (shape, want) = matmul_ref(&sa, ad, &sc, cd);
            let k = ad[ad.len() - 1];
            for backend in BACKENDS {
                let out = rfx::jit(|a: Tensor, c: Tensor| a.matmul(c))
                    .on_backend(backend)
                    .call((&array(dtype, ad, &a), &array(dtype, cd, &c)))
                    .expect("matmul");
                assert_eq!(out[0].shape().dims(), &shape[..], "{dtype}{ad:?} @ {cd:?}");
                assert_eq!(out[0].dtype(), dtype);
                let what = format!("{backend}: {dtype}{ad:?} @ {cd:?}");
                assert_close(dtype, &out[0].to_f64_vec(), &want, 4.0 * k as f64, &what);
            }
        }
    }
}

#[test]
fn dot_follows_numpy_including_its_outer_axes() {
    let mut rng = StdRng::seed_from_u64(0xd07);
    let cases: [(&[usize], &[usize]); 7] = [
        (&[3], &[3]),
        (&[4, 3], &[3]),
        (&[2, 5, 3], &[3]),
        (&[2, 3], &[3, 4]),
        (&[2, 3], &[4, 3, 5]),
        (&[3], &[2, 3, 2]),
        (&[2, 2, 3], &[2, 3, 4]),
    ];
    for dtype in [DType::F32, DType::F64] {
        for (ad, cd) in cases {
            let a = random(&mut rng, ad.iter().product());
            let c = random(&mut rng, cd.iter().product());
            let (shape, want) = dot_ref(&stored(dtype, &a), ad, &stored(dtype, &c), cd);
            for backend in BACKENDS {
                let out = rfx::jit(|a: Tensor, c: Tensor| a.dot(c))
                    .on_backend(backend)
                    .call((&array(dtype, ad, &a), &array(dtype, cd, &c)))
                    .expect("dot");
                assert_eq!(out[0].shape().dims(), &shape[..], "dot {ad:?} {cd:?}");
                let what = format!("{backend}: dot {dtype}{ad:?} {cd:?}");
                assert_close(
                    dtype,
                    &out[0].to_f64_vec(),
                    &want,
                    4.0 * ad[ad.len() - 1] as f64,
                    &what,
                );
            }
        }
    }
    // A scalar operand scales the other.
    let x = Array::from_vec([2, 2], vec![1.0, -2.0, 3.5, 0.25]).expect("x");
    let s = Array::scalar(rfx_ir::Scalar::F64(-2.0));
    let out = rfx::jit(|s: Tensor, x: Tensor| s.dot(x))
        .call((&s, &x))
        .expect("scalar dot");
    assert_eq!(f64s(&out[0]), [-2.0, 4.0, -7.0, -0.5]);
}

/// `a × b` of two 3-vectors.
fn cross3(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// The 3-vector at `row` of a row-major `[n, 3]` array.
fn row3(v: &[f64], row: usize) -> [f64; 3] {
    [v[3 * row], v[3 * row + 1], v[3 * row + 2]]
}

#[test]
fn cross_products_of_rows_columns_and_broadcast_vectors() {
    let mut rng = StdRng::seed_from_u64(0xc055);
    let n = 37;
    for dtype in [DType::F32, DType::F64] {
        let a = stored(dtype, &random(&mut rng, 3 * n));
        let b = stored(dtype, &random(&mut rng, 3 * n));
        let w = stored(dtype, &random(&mut rng, 3));
        let want: Vec<f64> = (0..n).flat_map(|r| cross3(row3(&a, r), row3(&b, r))).collect();
        let want_w: Vec<f64> = (0..n).flat_map(|r| cross3(row3(&w, 0), row3(&b, r))).collect();
        // The same vectors as the columns of [3, n] arrays.
        let columns = |v: &[f64]| -> Vec<f64> { (0..3 * n).map(|k| v[(k % n) * 3 + k / n]).collect() };
        for backend in BACKENDS {
            let by_rows = rfx::jit(|a: Tensor, b: Tensor| a.cross(b, 1))
                .on_backend(backend)
                .call((&array(dtype, &[n, 3], &a), &array(dtype, &[n, 3], &b)))
                .expect("rows");
            assert_eq!(by_rows[0].shape().dims(), [n, 3]);
            assert_close(
                dtype,
                &by_rows[0].to_f64_vec(),
                &want,
                8.0,
                &format!("{backend} {dtype} rows"),
            );
            let by_columns = rfx::jit(|a: Tensor, b: Tensor| a.cross(b, 0))
                .on_backend(backend)
                .call((
                    &array(dtype, &[3, n], &columns(&a)),
                    &array(dtype, &[3, n], &columns(&b)),
                ))
                .expect("columns");
            assert_close(
                dtype,
                &by_columns[0].to_f64_vec(),
                &columns(&want),
                8.0,
                "columns",
            );
            // One vector against each row: it broadcasts.
            let broadcast = rfx::jit(|w: Tensor, b: Tensor| w.cross(b, 1))
                .on_backend(backend)
                .call((&array(dtype, &[3], &w), &array(dtype, &[n, 3], &b)))
                .expect("broadcast");
            assert_close(dtype, &broadcast[0].to_f64_vec(), &want_w, 8.0, "broadcast");
        }
    }
}

#[test]
fn cross_product_gradients_are_the_closed_forms() {
    // d/da sum(w · (a × b)) = b × w and d/db = w × a, row by row.
    let mut rng = StdRng::seed_from_u64(0x96ad);
    let n = 11;
    let (a, b, w) = (
        random(&mut rng, 3 * n),
        random(&mut rng, 3 * n),
        random(&mut rng, 3 * n),
    );
    let g = rfx::jit(rfx::grad(|a: Tensor, b: Tensor, w: Tensor| (a.cross(b, 1) * w).sum(All)).wrt(&[0, 1]));
    let arr = |v: &[f64]| Array::from_vec([n, 3], v.to_vec()).expect("array");
    let out = g.call((&arr(&a), &arr(&b), &arr(&w))).expect("grad");
    let want_a: Vec<f64> = (0..n).flat_map(|r| cross3(row3(&b, r), row3(&w, r))).collect();
    let want_b: Vec<f64> = (0..n).flat_map(|r| cross3(row3(&w, r), row3(&a, r))).collect();
    assert_close(DType::F64, f64s(&out[0]), &want_a, 8.0, "d/da");
    assert_close(DType::F64, f64s(&out[1]), &want_b, 8.0, "d/db");
}

#[test]
fn matmul_gradients_are_the_transposed_products() {
    // d/dA sum(W ∘ (A B)) = W Bᵀ and d/dB = Aᵀ W.
    let mut rng = StdRng::seed_from_u64(0x6a7);
    let (m, k, n) = (4, 5, 3);
    let (a, b, w) = (
        random(&mut rng, m * k),
        random(&mut rng, k * n),
        random(&mut rng, m * n),
    );
    let g = rfx::jit(rfx::grad(|a: Tensor, b: Tensor, w: Tensor| (a.matmul(b) * w).sum(All)).wrt(&[0, 1]));
    let out = g
        .call((
            &Array::from_vec([m, k], a.clone()).expect("a"),
            &Array::from_vec([k, n], b.clone()).expect("b"),
            &Array::from_vec([m, n], w.clone()).expect("w"),
        ))
        .expect("grad");
    let transpose =
        |v: &[f64], r: usize, c: usize| -> Vec<f64> { (0..r * c).map(|x| v[(x % r) * c + x / r]).collect() };
    let (_, want_a) = matmul_ref(&w, &[m, n], &transpose(&b, k, n), &[n, k]);
    let (_, want_b) = matmul_ref(&transpose(&a, m, k), &[k, m], &w, &[m, n]);
    assert_close(DType::F64, f64s(&out[0]), &want_a, 16.0, "d/dA");
    assert_close(DType::F64, f64s(&out[1]), &want_b, 16.0, "d/dB");
}

#[test]
fn norms_and_their_gradients() {
    let mut rng = StdRng::seed_from_u64(0x4e0);
    let (n, d) = (23, 4);
    let x = random(&mut rng, n * d);
    let rows: Vec<f64> = x
        .chunks(d)
        .map(|r| r.iter().map(|v| v * v).sum::<f64>().sqrt())
        .collect();
    let whole = x.iter().map(|v| v * v).sum::<f64>().sqrt();
    for dtype in [DType::F32, DType::F64] {
        let xs = stored(dtype, &x);
        let rows: Vec<f64> = xs
            .chunks(d)
            .map(|r| r.iter().map(|v| v * v).sum::<f64>().sqrt())
            .collect();
        for backend in BACKENDS {
            let out = rfx::jit(|x: Tensor| (x.norm(1), x.norm(All)))
                .on_backend(backend)
                .call((&array(dtype, &[n, d], &x),))
                .expect("norm");
            assert_eq!(out[0].shape().dims(), [n]);
            assert_eq!(out[1].shape().dims(), [0usize; 0]);
            assert_close(dtype, &out[0].to_f64_vec(), &rows, 4.0, "row norms");
            let whole = xs.iter().map(|v| v * v).sum::<f64>().sqrt();
            assert_close(dtype, &out[1].to_f64_vec(), &[whole], 8.0, "norm");
        }
    }
    // d/dx sum(w ∘ |x|_rows) = w x / |x|, row by row; the whole norm's gradient is x / |x|.
    let w = random(&mut rng, n);
    let g = rfx::jit(rfx::grad(|x: Tensor, w: Tensor| (x.norm(1) * w).sum(All) + x.norm(All)).wrt(&[0]));
    let out = g
        .call((
            &Array::from_vec([n, d], x.clone()).expect("x"),
            &Array::from_vec([n], w.clone()).expect("w"),
        ))
        .expect("grad");
    let want: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(k, v)| w[k / d] * v / rows[k / d] + v / whole)
        .collect();
    assert_close(DType::F64, f64s(&out[0]), &want, 8.0, "norm gradient");
}

#[test]
fn running_sums_along_every_axis_in_every_dtype() {
    let mut rng = StdRng::seed_from_u64(0xc5);
    let shapes: [&[usize]; 5] = [&[1], &[50], &[6, 9], &[3, 4, 5], &[2, 0]];
    for dtype in [DType::F32, DType::F64, DType::I32, DType::Bool] {
        for dims in shapes {
            let len: usize = dims.iter().product();
            let x: Vec<f64> = (0..len).map(|_| rng.random_range(-9.0..9.0)).collect();
            let xs = stored(dtype, &x);
            for axis in 0..dims.len() {
                let s = strides(dims);
                // Sequential sums in f64 along the axis.
                let want: Vec<f64> = (0..len)
                    .map(|flat| {
                        let idx = unravel(dims, flat);
                        (0..=idx[axis])
                            .map(|j| xs[flat - (idx[axis] - j) * s[axis]])
                            .sum()
                    })
                    .collect();
                for backend in BACKENDS {
                    let out = rfx::jit(rfx::Func::with_constants(move |x: Tensor| x.cumsum(axis)))
                        .on_backend(backend)
                        .call((&array(dtype, dims, &x),))
                        .expect("cumsum");
                    assert_eq!(out[0].shape().dims(), dims);
                    let want_dtype = if dtype == DType::Bool { DType::I32 } else { dtype };
                    assert_eq!(out[0].dtype(), want_dtype);
                    let what = format!("{backend}: cumsum {dtype}{dims:?} along {axis}");
                    assert_close(
                        want_dtype,
                        &out[0].to_f64_vec(),
                        &want,
                        9.0 * dims[axis] as f64,
                        &what,
                    );
                }
            }
        }
    }
}

#[test]
fn running_sums_skip_nothing_and_leak_nothing() {
    // A NaN or an infinity reaches only the sums from its position on; -0.0 adds nothing, and a
    // sum of -0.0s is -0.0.
    let x = Array::from_vec([5], vec![1.5, f64::INFINITY, -2.0, f64::NAN, 0.0]).expect("x");
    for backend in BACKENDS {
        let out = rfx::jit(|x: Tensor| x.cumsum(0))
            .on_backend(backend)
            .call((&x,))
            .expect("cumsum");
        let got = f64s(&out[0]);
        assert_eq!(got[0], 1.5);
        assert_eq!(got[1], f64::INFINITY);
        assert_eq!(got[2], f64::INFINITY);
        assert!(got[3].is_nan() && got[4].is_nan(), "{got:?}");
    }
    let y = Array::from_vec([5], vec![-0.0f32, -0.0, 0.0, -0.0, -0.0]).expect("y");
    for backend in BACKENDS {
        let out = rfx::jit(|y: Tensor| y.cumsum(0))
            .on_backend(backend)
            .call((&y,))
            .expect("zeros");
        let signs: Vec<bool> = out[0]
            .as_slice::<f32>()
            .expect("f32")
            .iter()
            .map(|v| v.is_sign_negative())
            .collect();
        assert_eq!(signs, [true, true, false, false, false], "{backend}");
    }
}

#[test]
fn running_sum_and_difference_gradients() {
    // d/dx sum(w ∘ cumsum(x)) is the running sum of w from the end; d/dx sum(v ∘ diff(x)) is
    // v[j - 1] - v[j] (each missing term zero).
    let mut rng = StdRng::seed_from_u64(0x6c5);
    let n = 30;
    let (x, w) = (random(&mut rng, n), random(&mut rng, n));
    let v = random(&mut rng, n - 1);
    let g = rfx::jit(
        rfx::grad(|x: Tensor, w: Tensor, v: Tensor| (x.cumsum(0) * w).sum(All) + (x.diff(0) * v).sum(All))
            .wrt(&[0]),
    );
    let vec = |v: &[f64]| Array::from_vec([v.len()], v.to_vec()).expect("vector");
    let out = g.call((&vec(&x), &vec(&w), &vec(&v))).expect("grad");
    let want: Vec<f64> = (0..n)
        .map(|j| {
            let tail: f64 = w[j..].iter().sum();
            let before = if j > 0 { v[j - 1] } else { 0.0 };
            let after = if j < n - 1 { v[j] } else { 0.0 };
            tail + before - after
        })
        .collect();
    assert_close(DType::F64, f64s(&out[0]), &want, 4.0 * n as f64, "gradient");
}

#[test]
fn differences_along_every_axis_are_exact() {
    let mut rng = StdRng::seed_from_u64(0xd1ff);
    let shapes: [&[usize]; 4] = [&[1], &[40], &[7, 6], &[3, 4, 5]];
    for dtype in [DType::F32, DType::F64, DType::I32] {
        for dims in shapes {
            let len: usize = dims.iter().product();
            let x = stored(
                dtype,
                &(0..len)
                    .map(|_| rng.random_range(-50.0..50.0))
                    .collect::<Vec<_>>(),
            );
            for axis in 0..dims.len() {
                let mut out_dims = dims.to_vec();
                out_dims[axis] = dims[axis] - 1;
                let s = strides(dims);
                let want: Vec<f64> = (0..out_dims.iter().product())
                    .map(|flat| {
                        let idx = unravel(&out_dims, flat);
                        let at: usize = idx.iter().zip(&s).map(|(i, s)| i * s).sum();
                        let diff = x[at + s[axis]] - x[at];
                        // The difference rounded to the dtype once, as the kernel computes it.
                        stored(dtype, &[diff])[0]
                    })
                    .collect();
                for backend in BACKENDS {
                    let out = rfx::jit(rfx::Func::with_constants(move |x: Tensor| x.diff(axis)))
                        .on_backend(backend)
                        .call((&array(dtype, dims, &x),))
                        .expect("diff");
                    assert_eq!(out[0].shape().dims(), &out_dims[..]);
                    assert_eq!(
                        out[0].to_f64_vec(),
                        want,
                        "{backend}: diff {dtype}{dims:?} along {axis}"
                    );
                }
            }
        }
    }
}

#[test]
fn expressions_name_them_as_numpy_does() {
    use rfx::expr::{Signature, compile};
    let mut rng = StdRng::seed_from_u64(0xe4);
    let (m, k) = (3, 4);
    let a = random(&mut rng, m * k);
    let v = random(&mut rng, k);
    let p = random(&mut rng, 2 * 3);
    let q = random(&mut rng, 2 * 3);
    let sig: Signature = format!("a: f64[{m},{k}], v: f64[{k}], p: f64[2,3], q: f64[2,3]")
        .parse()
        .expect("signature");
    let arrays = (
        &Array::from_vec([m, k], a.clone()).expect("a"),
        &Array::from_vec([k], v.clone()).expect("v"),
        &Array::from_vec([2, 3], p.clone()).expect("p"),
        &Array::from_vec([2, 3], q.clone()).expect("q"),
    );
    let run = |text: &str| -> Array {
        let kernel = compile(text, &sig).unwrap_or_else(|e| panic!("{text}: {e}"));
        rfx::jit_kernel(kernel).call(arrays).expect(text).remove(0)
    };
    let (_, av) = matmul_ref(&a, &[m, k], &v, &[k]);
    assert_close(DType::F64, f64s(&run("a @ v")), &av, 16.0, "a @ v");
    assert_close(DType::F64, f64s(&run("matmul(a, v)")), &av, 16.0, "matmul");
    assert_close(DType::F64, f64s(&run("dot(a, v) * 2 - a @ v")), &av, 16.0, "dot");
    // `@` binds as `*`: left to right, before `+`.
    let (_, vv) = matmul_ref(&v, &[k], &v, &[k]);
    assert_close(
        DType::F64,
        f64s(&run("1 + v @ v * 2")),
        &[1.0 + 2.0 * vv[0]],
        16.0,
        "precedence",
    );
    let crossed: Vec<f64> = (0..2).flat_map(|r| cross3(row3(&p, r), row3(&q, r))).collect();
    assert_close(DType::F64, f64s(&run("cross(p, q)")), &crossed, 8.0, "cross");
    assert_close(
        DType::F64,
        f64s(&run("cross(p, q, axis=-1)")),
        &crossed,
        8.0,
        "cross axis",
    );
    let rows: Vec<f64> = p
        .chunks(3)
        .map(|r| r.iter().map(|x| x * x).sum::<f64>().sqrt())
        .collect();
    assert_close(DType::F64, f64s(&run("norm(p, 1)")), &rows, 4.0, "norm");
    let whole = p.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert_close(DType::F64, f64s(&run("norm(p)")), &[whole], 8.0, "norm of all");
    let flat: Vec<f64> = p
        .iter()
        .scan(0.0, |s, x| {
            *s += x;
            Some(*s)
        })
        .collect();
    assert_close(DType::F64, f64s(&run("cumsum(p)")), &flat, 16.0, "cumsum flat");
    let by_rows: Vec<f64> = p
        .chunks(3)
        .flat_map(|r| [r[0], r[0] + r[1], r[0] + r[1] + r[2]])
        .collect();
    assert_close(
        DType::F64,
        f64s(&run("cumsum(p, axis=1)")),
        &by_rows,
        16.0,
        "cumsum rows",
    );
    let diffs: Vec<f64> = p.chunks(3).flat_map(|r| [r[1] - r[0], r[2] - r[1]]).collect();
    assert_eq!(f64s(&run("diff(p)")), &diffs[..]);
    let columns: Vec<f64> = (0..3).map(|c| p[3 + c] - p[c]).collect();
    assert_eq!(f64s(&run("diff(p, 0)")), &columns[..]);
    // `linalg`'s names: a 2×2 system by Cramer's rule.
    let sig2: Signature = "m: f64[2,2], r: f64[2]".parse().expect("signature");
    let (m, r) = ([4.0, -1.5, 2.0, 3.0], [1.0, -2.0]);
    let arrays2 = (
        &Array::from_vec([2, 2], m.to_vec()).expect("m"),
        &Array::from_vec([2], r.to_vec()).expect("r"),
    );
    let run2 = |text: &str| -> Vec<f64> {
        let kernel = compile(text, &sig2).unwrap_or_else(|e| panic!("{text}: {e}"));
        f64s(&rfx::jit_kernel(kernel).call(arrays2).expect(text)[0]).to_vec()
    };
    let det = m[0] * m[3] - m[1] * m[2];
    let cramer = [
        (r[0] * m[3] - m[1] * r[1]) / det,
        (m[0] * r[1] - r[0] * m[2]) / det,
    ];
    assert_close(DType::F64, &run2("solve(m, r)"), &cramer, 8.0, "solve");
    assert_close(DType::F64, &run2("inv(m) @ r"), &cramer, 8.0, "inv");
    assert_close(DType::F64, &run2("det(m)"), &[det], 8.0, "det");
    // A number is no matrix.
    let err = compile("2 @ v", &sig).expect_err("scalar matmul");
    assert!(err.to_string().contains("matmul"), "{err}");
}

#[test]
fn mismatched_products_are_typed_errors() {
    let f32s = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    let matmul = rfx::jit(|a: Tensor, b: Tensor| a.matmul(b));
    assert_eq!(
        type_error(
            matmul
                .executable(&[f32s(&[2, 3]), f32s(&[4, 5])])
                .expect_err("inner")
        ),
        TypeError::Contraction {
            op: "matmul",
            lhs: Shape::new([2, 3]),
            rhs: Shape::new([4, 5])
        }
    );
    assert_eq!(
        type_error(matmul.executable(&[f32s(&[]), f32s(&[3])]).expect_err("scalar")),
        TypeError::Contraction {
            op: "matmul",
            lhs: Shape::new([0usize; 0]),
            rhs: Shape::new([3])
        }
    );
    assert_eq!(
        type_error(
            matmul
                .executable(&[f32s(&[2, 3, 3]), f32s(&[4, 3, 3])])
                .expect_err("batch")
        ),
        TypeError::Broadcast {
            op: "matmul",
            lhs: Shape::new([2, 3, 3]),
            rhs: Shape::new([4, 3, 3])
        }
    );
    let dot = rfx::jit(|a: Tensor, b: Tensor| a.dot(b));
    assert_eq!(
        type_error(dot.executable(&[f32s(&[3]), f32s(&[4])]).expect_err("dot")),
        TypeError::Contraction {
            op: "dot",
            lhs: Shape::new([3]),
            rhs: Shape::new([4])
        }
    );
    let cross = rfx::jit(|a: Tensor, b: Tensor| a.cross(b, 1));
    assert_eq!(
        type_error(
            cross
                .executable(&[f32s(&[5, 2]), f32s(&[5, 3])])
                .expect_err("2-vectors")
        ),
        TypeError::AxisExtent {
            op: "cross",
            shape: Shape::new([5, 2]),
            axis: 1,
            expected: 3
        }
    );
    // A lower-rank operand is named with the axes it broadcasts over.
    let cross0 = rfx::jit(|a: Tensor, b: Tensor| a.cross(b, 0));
    assert_eq!(
        type_error(
            cross0
                .executable(&[f32s(&[3]), f32s(&[3, 3])])
                .expect_err("broadcast axis")
        ),
        TypeError::AxisExtent {
            op: "cross",
            shape: Shape::new([1, 3]),
            axis: 0,
            expected: 3
        }
    );
    assert_eq!(
        type_error(
            cross
                .executable(&[f32s(&[3]), f32s(&[3])])
                .expect_err("past the rank")
        ),
        TypeError::AxisOutOfRange { axis: 1, rank: 1 }
    );
    let cumsum = rfx::jit(|x: Tensor| x.cumsum(2));
    assert_eq!(
        type_error(cumsum.executable(&[f32s(&[3, 3])]).expect_err("cumsum axis")),
        TypeError::AxisOutOfRange { axis: 2, rank: 2 }
    );
}

#[test]
fn a_mapped_matrix_vector_product_is_a_batched_matmul() {
    // `vmap` of one rotation applied to one vector, over a batch of both, against `matmul` of
    // the stacks with the vectors as columns.
    let mut rng = StdRng::seed_from_u64(0x7a9);
    let n = 19;
    let (r, v) = (random(&mut rng, 9 * n), random(&mut rng, 3 * n));
    let r_a = Array::from_vec([n, 3, 3], r.clone()).expect("rotations");
    let mapped = rfx::jit(rfx::vmap(|r: Tensor, v: Tensor| r.matmul(v)))
        .call((&r_a, &Array::from_vec([n, 3], v.clone()).expect("vectors")))
        .expect("vmap");
    let (shape, want) = matmul_ref(&r, &[n, 3, 3], &v, &[n, 3, 1]);
    assert_eq!(shape, [n, 3, 1]);
    assert_eq!(mapped[0].shape().dims(), [n, 3]);
    assert_close(DType::F64, f64s(&mapped[0]), &want, 12.0, "vmap");
}

/// `n`×`n` row-major `a` times `b` (`n`×`k`), in `f64`.
fn mat_mul(a: &[f64], b: &[f64], n: usize, k: usize) -> Vec<f64> {
    (0..n * k)
        .map(|x| (0..n).map(|j| a[(x / k) * n + j] * b[j * k + x % k]).sum())
        .collect()
}

/// The determinant by Leibniz's formula (every permutation), in `f64`: independent of any
/// elimination.
fn leibniz_det(a: &[f64], n: usize) -> f64 {
    fn permutations(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![Vec::new()];
        }
        let mut out = Vec::new();
        for p in permutations(n - 1) {
            for at in 0..n {
                let mut q = p.clone();
                q.insert(at, n - 1);
                out.push(q);
            }
        }
        out
    }
    permutations(n)
        .iter()
        .map(|p| {
            let inversions = (0..n)
                .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
                .filter(|&(i, j)| p[i] > p[j])
                .count();
            let sign = if inversions % 2 == 0 { 1.0 } else { -1.0 };
            sign * (0..n).map(|i| a[i * n + p[i]]).product::<f64>()
        })
        .sum()
}

/// Matrices that need row exchanges: a scaled reversal, and (from 2×2) a random matrix with
/// its diagonal zeroed; plus a random one made comfortably invertible.
fn test_matrices(rng: &mut StdRng, n: usize) -> Vec<Vec<f64>> {
    let mut zero_diagonal = random(rng, n * n);
    for i in 0..n {
        zero_diagonal[i * n + i] = 0.0;
    }
    let mut reversal = vec![0.0; n * n];
    for i in 0..n {
        reversal[i * n + (n - 1 - i)] = 1.0 + i as f64;
    }
    let mut dominant = random(rng, n * n);
    for i in 0..n {
        dominant[i * n + i] += 3.0;
    }
    // A 1×1 matrix with a zero diagonal is singular.
    let mut matrices = vec![reversal, dominant];
    if n > 1 {
        matrices.push(zero_diagonal);
    }
    matrices
}

#[test]
fn inverses_determinants_and_solutions_of_small_matrices() {
    let mut rng = StdRng::seed_from_u64(0x1a7);
    for n in 1..=5 {
        let matrices = test_matrices(&mut rng, n);
        let batch = matrices.len();
        let flat: Vec<f64> = matrices.concat();
        let rhs = random(&mut rng, batch * n * 2);
        let vector = random(&mut rng, n);
        for dtype in [DType::F32, DType::F64] {
            let a = array(dtype, &[batch, n, n], &flat);
            let stored_a = stored(dtype, &flat);
            let tolerance = if dtype == DType::F32 { 2e-4 } else { 1e-11 };
            for backend in BACKENDS {
                let out =
                    rfx::jit(|a: Tensor, b: Tensor, v: Tensor| (a.inv(), a.det(), a.solve(b), a.solve(v)))
                        .on_backend(backend)
                        .call((
                            &a,
                            &array(dtype, &[batch, n, 2], &rhs),
                            &array(dtype, &[n], &vector),
                        ))
                        .expect("linalg");
                assert_eq!(out[0].shape().dims(), [batch, n, n]);
                assert_eq!(out[1].shape().dims(), [batch]);
                assert_eq!(out[2].shape().dims(), [batch, n, 2]);
                assert_eq!(out[3].shape().dims(), [batch, n]);
                let (inv, det, x, y) = (
                    out[0].to_f64_vec(),
                    out[1].to_f64_vec(),
                    out[2].to_f64_vec(),
                    out[3].to_f64_vec(),
                );
                let rhs = stored(dtype, &rhs);
                let vector = stored(dtype, &vector);
                for (m, a) in stored_a.chunks(n * n).enumerate() {
                    let what = format!("{backend}: {dtype} n={n} matrix {m}");
                    // A A⁻¹ = I, A X = B, A y = v: residuals independent of the method.
                    let product = mat_mul(a, &inv[m * n * n..(m + 1) * n * n], n, n);
                    for (k, p) in product.iter().enumerate() {
                        let want = if k / n == k % n { 1.0 } else { 0.0 };
                        assert!((p - want).abs() <= tolerance, "{what}: A A⁻¹ [{k}] = {p}");
                    }
                    let ax = mat_mul(a, &x[m * n * 2..(m + 1) * n * 2], n, 2);
                    for (k, (p, w)) in ax.iter().zip(&rhs[m * n * 2..]).enumerate() {
                        assert!(
                            (p - w).abs() <= tolerance * 4.0,
                            "{what}: A X [{k}] = {p}, want {w}"
                        );
                    }
                    let ay = mat_mul(a, &y[m * n..(m + 1) * n], n, 1);
                    for (p, w) in ay.iter().zip(&vector) {
                        assert!((p - w).abs() <= tolerance * 4.0, "{what}: A y = {p}, want {w}");
                    }
                    let want = leibniz_det(a, n);
                    assert!(
                        (det[m] - want).abs() <= tolerance * (1.0 + want.abs()),
                        "{what}: det {} want {want}",
                        det[m]
                    );
                }
            }
        }
    }
}

#[test]
fn singular_matrices_have_a_zero_determinant_and_no_finite_inverse() {
    let singular = Array::from_vec(
        [2, 3, 3],
        vec![
            1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 1.0, 0.0, 1.0, // two proportional rows
            0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, // a zero row
        ],
    )
    .expect("singular");
    for backend in BACKENDS {
        let out = rfx::jit(|a: Tensor| (a.det(), a.inv()))
            .on_backend(backend)
            .call((&singular,))
            .expect("singular");
        assert_eq!(f64s(&out[0]), [0.0, 0.0], "{backend}");
        for m in f64s(&out[1]).chunks(9) {
            assert!(m.iter().any(|v| !v.is_finite()), "{backend}: {m:?}");
        }
    }
    // An empty matrix has determinant one and an empty inverse, as NumPy's.
    let empty = Array::from_vec([4, 0, 0], Vec::<f64>::new()).expect("empty");
    let out = rfx::jit(|a: Tensor| (a.det(), a.inv()))
        .call((&empty,))
        .expect("empty");
    assert_eq!(f64s(&out[0]), [1.0; 4]);
    assert_eq!(out[1].shape().dims(), [4, 0, 0]);
}

#[test]
fn inverse_and_determinant_gradients_are_the_closed_forms() {
    // d/dA sum(W ∘ A⁻¹) = -A⁻ᵀ W A⁻ᵀ; d det(A)/dA = det(A) A⁻ᵀ (Jacobi's formula).
    // The closed forms of 2×2 and 3×3 matrices and the elimination of larger ones.
    let mut rng = StdRng::seed_from_u64(0x9e7);
    for n in 2..=4 {
        gradients_of_size(&mut rng, n);
    }
}

fn gradients_of_size(rng: &mut StdRng, n: usize) {
    let a = test_matrices(rng, n).remove(2);
    let w = random(rng, n * n);
    let arr = |v: &[f64]| Array::from_vec([n, n], v.to_vec()).expect("matrix");
    let inv = rfx::jit(|a: Tensor| a.inv())
        .call((&arr(&a),))
        .expect("inv")
        .remove(0);
    let inv = f64s(&inv).to_vec();
    let inv_t: Vec<f64> = (0..n * n).map(|k| inv[(k % n) * n + k / n]).collect();
    let g = rfx::jit(rfx::grad(|a: Tensor, w: Tensor| (a.inv() * w).sum(All) + a.det()).wrt(&[0]));
    let out = g.call((&arr(&a), &arr(&w))).expect("grad");
    let det = leibniz_det(&a, n);
    let want: Vec<f64> = mat_mul(&mat_mul(&inv_t, &w, n, n), &inv_t, n, n)
        .iter()
        .zip(&inv_t)
        .map(|(p, t)| -p + det * t)
        .collect();
    assert_close(DType::F64, f64s(&out[0]), &want, 1e3, &format!("gradient, n={n}"));
}

#[test]
fn matrix_functions_check_their_operands() {
    let f32s = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    let inv = rfx::jit(|a: Tensor| a.inv());
    assert_eq!(
        type_error(inv.executable(&[f32s(&[2, 3])]).expect_err("not square")),
        TypeError::NotSquare {
            op: "inv",
            shape: Shape::new([2, 3])
        }
    );
    assert_eq!(
        type_error(inv.executable(&[f32s(&[3])]).expect_err("a vector")),
        TypeError::NotSquare {
            op: "inv",
            shape: Shape::new([3])
        }
    );
    let det = rfx::jit(|a: Tensor| a.det());
    assert_eq!(
        type_error(
            det.executable(&[TensorType::new(DType::I32, [2, 2])])
                .expect_err("integers")
        ),
        TypeError::UnsupportedDType {
            op: "det",
            dtype: DType::I32
        }
    );
    let solve = rfx::jit(|a: Tensor, b: Tensor| a.solve(b));
    assert_eq!(
        type_error(solve.executable(&[f32s(&[3, 3]), f32s(&[4])]).expect_err("rows")),
        TypeError::Contraction {
            op: "solve",
            lhs: Shape::new([3, 3]),
            rhs: Shape::new([4])
        }
    );
    assert_eq!(
        type_error(
            solve
                .executable(&[f32s(&[2, 3, 3]), f32s(&[5, 3, 1])])
                .expect_err("batches")
        ),
        TypeError::Broadcast {
            op: "solve",
            lhs: Shape::new([2, 3, 3]),
            rhs: Shape::new([5, 3, 1])
        }
    );
}
