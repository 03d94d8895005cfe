//! Joined stores: a kernel over a batch of small blocks whose body is mostly stores (a
//! Jacobian written block by block, zeros included) stores its `f64` elements two adjacent
//! ones per 16-byte store, whatever store instruction, row or position computed them. The
//! outputs must keep the bits of the stores one by one: every element the value its own store
//! computed, the last of two stores of one element winning, strided and `f32` stores beside
//! the joined ones.

use rfx_codegen_cpu::{CpuBackend, dump};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::{self, LirProgram};
use rfx_ir::{Array, ArrayData, DType, Scalar};
use rfx_lower::{Backend, CompileOptions};

/// Per example `u` of `n`: `o[u]` (9×9) and `p[u]` (9×6) written from `x[u]` and `y[u]` (3×3
/// each) and `d[u]` in 3×3 blocks as IMU preintegration's Jacobians are: products, copies,
/// negations and constant zeros (`0.0` and `-0.0`), every element once.
fn blocks(n: usize) -> String {
    format!(
        "\
lir blocks arena 0 align 64 {{
  buf0: f64[{n},9] = input x
  buf1: f64[{n},9] = input y
  buf2: f64[{n}] = input d
  buf3: f64[{n},9,9] = output o
  buf4: f64[{n},9,6] = output p
  kernel k0 dims [{n},3,3] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {{
    slots [f64, f64, f64, f64, f64, f64, f64, f64]
    preamble {{
      s6 = const 0.0
      s7 = const -0.0
    }}
    body {{
      s0 = load buf0 [9,3,1]
      s1 = load buf2 [1,0,0]
      s2 = mul s0, s1
      s3 = load buf1 [9,3,1]
      s4 = neg s3
      s5 = sub s3, s0
      store buf3 [81,9,1] offset 54 = s2
      store buf3 [81,9,1] offset 60 = s3
      store buf3 [81,9,1] offset 27 = s5
      store buf3 [81,9,1] offset 30 = s3
      store buf3 [81,9,1] offset 33 = s4
      store buf3 [81,9,1] = s0
      store buf4 [54,6,1] offset 21 = s2
      store buf4 [54,6,1] = s4
      store buf4 [54,6,1] offset 39 = s1
      store buf3 [81,9,1] offset 3 = s6
      store buf3 [81,9,1] offset 6 = s7
      store buf3 [81,9,1] offset 57 = s6
      store buf4 [54,6,1] offset 3 = s7
      store buf4 [54,6,1] offset 18 = s6
      store buf4 [54,6,1] offset 36 = s0
    }}
  }}
}}
"
    )
}

/// Per example `u`: stores that overlap (the row-broadcast store `q[u, 0, j]` from every row
/// `i`, and `q[u, i, 1]` stored twice), a transposed store (inner stride 3) into `t`, and an
/// `f32` output beside them.
fn overlapping(n: usize) -> String {
    format!(
        "\
lir overlapping arena 0 align 64 {{
  buf0: f64[{n},9] = input x
  buf1: f64[{n},3,3] = output q
  buf2: f64[{n},3,3] = output t
  buf3: f32[{n},3,3] = output f
  kernel k0 dims [{n},3,3] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {{
    slots [f64, f64, f64, f32]
    preamble {{
      s2 = const 2.0
    }}
    body {{
      s0 = load buf0 [9,3,1]
      s1 = mul s0, s2
      store buf1 [9,3,1] = s0
      store buf1 [9,0,1] = s1
      store buf1 [9,0,0] offset 4 = s0
      store buf2 [9,1,3] = s1
      s3 = cast s0
      store buf3 [9,3,1] = s3
      store buf1 [9,0,0] offset 4 = s1
    }}
  }}
}}
"
    )
}

/// Per example `u` of `n` (a kernel the tile routines run, vectors along the examples):
/// `m[u] = [sin x, x sin x, -sin x]` and `e[u] = [x, x sin x]` stored with strides (each
/// vector's two lanes apart), `c[u] = sin x` contiguous; with `overwrite`, `e[u, 1]` is stored
/// again (`-sin x`: the later store wins).
fn strided(n: usize, overwrite: bool) -> String {
    let again = if overwrite {
        "store buf3 [2] offset 1 = s3"
    } else {
        ""
    };
    format!(
        "\
lir strided arena 0 align 64 {{
  buf0: f64[{n}] = input x
  buf1: f64[{n},3] = output m
  buf2: f64[{n}] = output c
  buf3: f64[{n},2] = output e
  kernel k0 dims [{n}] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {{
    slots [f64, f64, f64, f64]
    preamble {{
    }}
    body {{
      s0 = load buf0 [1]
      s1 = sin s0
      s2 = mul s1, s0
      s3 = neg s1
      store buf3 [2] offset 1 = s2
      store buf1 [3] offset 2 = s3
      store buf1 [3] = s1
      store buf2 [1] = s1
      store buf3 [2] = s0
      store buf1 [3] offset 1 = s2
      {again}
    }}
  }}
}}
"
    )
}

/// Distinct values, with a NaN, infinities and a negative zero among them.
fn values(len: usize, seed: usize) -> Vec<f64> {
    (0..len)
        .map(|i| match (i + seed) % 29 {
            5 => f64::NAN,
            11 => f64::INFINITY,
            17 => f64::NEG_INFINITY,
            19 => -0.0,
            _ => 0.375 * i as f64 - 11.0 + 1.0 / (i as f64 + 3.0 + seed as f64),
        })
        .collect()
}

fn array(shape: &[usize], xs: &[f64]) -> Array {
    let data = ArrayData::from_scalars(DType::F64, xs.iter().map(|&v| Scalar::F64(v))).expect("data");
    Array::new(shape.to_vec(), data).expect("array")
}

fn elements(a: &Array) -> Vec<u64> {
    (0..a.shape().numel())
        .map(|i| a.get(i).map_or(u64::MAX, |s| s.to_f64().to_bits()))
        .collect()
}

/// Runs `program` on the CPU (one thread) and the interpreter and compares every output
/// element's bits (NaNs by their bits too: both copy the input's).
fn check(program: &LirProgram, inputs: &[Array], what: &str) {
    lir::verify(program).unwrap_or_else(|e| panic!("{what}: {e}"));
    let options = CompileOptions {
        max_threads: Some(1),
        ..CompileOptions::default()
    };
    let compiled = CpuBackend.compile(program, &options).expect("compile");
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let got = compiled.run_to_new(&views).expect("run");
    let want = run_lir(program, &views, Mode::Native).expect("interpreter");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let (g, w) = (elements(g), elements(w));
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert_eq!(
                a,
                b,
                "{what}: output {k} element {i}: {:e} != {:e}",
                f64::from_bits(*a),
                f64::from_bits(*b)
            );
        }
    }
}

/// Counts the `store` instructions of the kernel's CLIF.
fn clif_stores(program: &LirProgram) -> usize {
    dump(program)
        .expect("dump")
        .iter()
        .map(|(_, clif, _)| {
            clif.lines()
                .filter(|l| l.trim_start().starts_with("store "))
                .count()
        })
        .sum()
}

#[test]
fn joined_block_stores_give_the_interpreters_bits() {
    for n in [2, 3, 5, 64, 129] {
        let what = format!("blocks, n = {n}");
        let program = lir::parse(&blocks(n)).unwrap_or_else(|e| panic!("{what}: {e}"));
        let inputs = [
            array(&[n, 9], &values(n * 9, 0)),
            array(&[n, 9], &values(n * 9, 7)),
            array(&[n], &values(n, 3)),
        ];
        check(&program, &inputs, &what);
    }
}

#[test]
fn overlapping_transposed_and_f32_stores_beside_joined_ones_give_the_interpreters_bits() {
    for n in [2, 3, 7, 64] {
        let what = format!("overlapping, n = {n}");
        let program = lir::parse(&overlapping(n)).unwrap_or_else(|e| panic!("{what}: {e}"));
        check(&program, &[array(&[n, 9], &values(n * 9, 1))], &what);
    }
}

/// Runs `program` (one thread) on `inputs`.
fn run(program: &LirProgram, inputs: &[Array]) -> Vec<Vec<f64>> {
    lir::verify(program).expect("verify");
    let options = CompileOptions {
        max_threads: Some(1),
        ..CompileOptions::default()
    };
    let compiled = CpuBackend.compile(program, &options).expect("compile");
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    let got = compiled.run_to_new(&views).expect("run");
    got.iter()
        .map(|a| elements(a).into_iter().map(f64::from_bits).collect())
        .collect()
}

#[test]
fn joined_lanes_of_strided_stores_in_tiles_give_each_element_its_value() {
    // The tile routine's sine may differ from the interpreter's in the last bits, so each
    // element is checked against `c` (the sine stored contiguously, never joined) and `x` by
    // the exact ops that made it. Tiles of the routines' length and shorter, ragged ends.
    for n in [64, 65, 127, 1024, 1031] {
        for overwrite in [false, true] {
            let what = format!("strided, n = {n}, overwrite {overwrite}");
            let program = lir::parse(&strided(n, overwrite)).unwrap_or_else(|e| panic!("{what}: {e}"));
            let xs = values(n, 2);
            let out = run(&program, &[array(&[n], &xs)]);
            let (m, c, e) = (&out[0], &out[1], &out[2]);
            for (u, &x) in xs.iter().enumerate() {
                let s = c[u];
                let e1 = if overwrite { -s } else { s * x };
                let want = [
                    (m[3 * u], s),
                    (m[3 * u + 1], s * x),
                    (m[3 * u + 2], -s),
                    (e[2 * u], x),
                    (e[2 * u + 1], e1),
                ];
                for (k, (got, want)) in want.into_iter().enumerate() {
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "{what}: example {u} value {k}: {got:e} != {want:e}"
                    );
                }
            }
        }
    }
}

#[test]
fn strided_lanes_in_tiles_are_stored_two_elements_per_store() {
    // Each example's `m[u, 0..2]` and `e[u]` are joined pairs of two vectors' lanes (one
    // shuffle each), `m[u, 2]` pairs with the next example's `m[u + 1, 0]`: no lane is taken
    // out of a vector to be stored alone.
    let program = lir::parse(&strided(1024, false)).expect("parse");
    let clif: String = dump(&program)
        .expect("dump")
        .into_iter()
        .map(|(_, c, _)| c)
        .collect();
    assert!(
        clif.contains("; plan: elementwise, 2 lanes, AOT routines on tiles"),
        "{clif}"
    );
    assert_eq!(clif.matches("extractlane").count(), 0, "{clif}");
}

#[test]
fn a_batch_of_blocks_stores_two_elements_per_store() {
    // An example's 81 + 54 elements: 40 pairs and one single of `o`, 27 pairs of `p`, in one
    // unit (the loop over examples); stored one block row at a time (a vector and a scalar
    // per row of three) they take 2 × 3 × 15 = 90 stores.
    let program = lir::parse(&blocks(64)).expect("parse");
    assert_eq!(clif_stores(&program), 41 + 27);
}

/// Per example `u` of `n` (vectors along the examples): `m[3u + 1] = sin x` and
/// `m[2u + 2] = -sin x`, two strided stores of one buffer whose elements overlap across
/// examples (`m[10]` is `sin x[3]`, then `-sin x[4]`), and `c[u] = sin x` contiguous.
fn crossing(n: usize) -> String {
    let len = 3 * n;
    format!(
        "\
lir crossing arena 0 align 64 {{
  buf0: f64[{n}] = input x
  buf1: f64[{len}] = output m
  buf2: f64[{n}] = output c
  kernel k0 dims [{n}] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {{
    slots [f64, f64, f64]
    preamble {{
    }}
    body {{
      s0 = load buf0 [1]
      s1 = sin s0
      s2 = neg s1
      store buf1 [3] offset 1 = s1
      store buf1 [2] offset 2 = s2
      store buf2 [1] = s1
    }}
  }}
}}
"
    )
}

#[test]
fn strided_stores_of_one_buffer_reaching_one_element_leave_the_later_value() {
    // The two stores' addresses are not displacements of one pointer: an element held
    // through one is stored before the other holds it, so the later store wins.
    for n in [3, 5, 6, 64, 65, 1031] {
        let what = format!("crossing, n = {n}");
        let program = lir::parse(&crossing(n)).unwrap_or_else(|e| panic!("{what}: {e}"));
        let xs = values(n, 4);
        let out = run(&program, &[array(&[n], &xs)]);
        let (m, c) = (&out[0], &out[1]);
        let mut want = vec![0.0f64; 3 * n];
        for (u, &s) in c.iter().enumerate() {
            want[3 * u + 1] = s;
            want[2 * u + 2] = -s;
        }
        for (i, (got, want)) in m.iter().zip(&want).enumerate() {
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{what}: m[{i}]: {got:e} != {want:e}"
            );
        }
    }
}

/// Per example `u`: `q[u, i, j] = x` and `q[u, j, i] = 2x` from each point `(i, j)` of the
/// block, two stores of one buffer with other strides (the transposed one later in the body).
fn transposed_into_one_buffer(n: usize, transposed_first: bool) -> String {
    let (first, second) = ("store buf1 [9,3,1] = s0", "store buf1 [9,1,3] = s1");
    let (first, second) = if transposed_first {
        (second, first)
    } else {
        (first, second)
    };
    format!(
        "\
lir transposed arena 0 align 64 {{
  buf0: f64[{n},9] = input x
  buf1: f64[{n},3,3] = output q
  kernel k0 dims [{n},3,3] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {{
    slots [f64, f64, f64]
    preamble {{
      s2 = const 2.0
    }}
    body {{
      s0 = load buf0 [9,3,1]
      s1 = mul s0, s2
      {first}
      {second}
    }}
  }}
}}
"
    )
}

#[test]
fn a_block_stored_twice_into_one_buffer_transposed_gives_the_interpreters_bits() {
    for n in [2, 3, 5, 64] {
        for transposed_first in [false, true] {
            let what = format!("transposed into one buffer, n = {n}, transposed first {transposed_first}");
            let program = lir::parse(&transposed_into_one_buffer(n, transposed_first))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            check(&program, &[array(&[n, 9], &values(n * 9, 2))], &what);
        }
    }
}
