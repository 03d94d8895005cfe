//! Two `f64` lanes read with a stride of two or more elements (an example's field in a batch of
//! examples, a column of a matrix): lane 1 and the element before it come in one 16-byte load and
//! lane 0 is moved in beside it, so neither read leaves the elements the two lanes span. Every
//! length (written-out code, vector loops, ragged ends), stride and offset gives the bits a
//! hand-computed reference and the LIR interpreter give, including a buffer that ends at the
//! last element read.

use rfx_codegen_cpu::{CpuBackend, dump};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::{self, LirProgram};
use rfx_ir::{Array, ArrayData, Scalar};
use rfx_lower::{Backend, CompileOptions};

/// `out[p] = x[p·s] - x[p·s + o]` and `sum[p] = x[p·s + o] + x[p·s]` over `n` points, `x`
/// holding exactly the elements up to the last one read.
fn program(n: usize, s: usize, o: usize) -> String {
    let len = (n - 1) * s + o + 1;
    format!(
        "\
lir strided arena 0 align 64 {{
  buf0: f64[{len}] = input x
  buf1: f64[{n}] = output out
  buf2: f64[{n}] = output sum
  kernel k0 dims [{n}] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {{
    slots [f64, f64, f64, f64]
    preamble {{
    }}
    body {{
      s0 = load buf0 [{s}]
      s1 = load buf0 [{s}] offset {o}
      s2 = sub s0, s1
      s3 = add s1, s0
      store buf1 [1] = s2
      store buf2 [1] = s3
    }}
  }}
}}
"
    )
}

/// Distinct values, with a NaN, infinities and a negative zero among them.
fn values(len: usize) -> Vec<f64> {
    (0..len)
        .map(|i| match i % 23 {
            5 => f64::NAN,
            11 => f64::INFINITY,
            17 => f64::NEG_INFINITY,
            19 => -0.0,
            _ => 0.375 * i as f64 - 11.0 + 1.0 / (i as f64 + 3.0),
        })
        .collect()
}

fn same_bits(got: f64, want: f64) -> bool {
    (got.is_nan() && want.is_nan()) || got.to_bits() == want.to_bits()
}

fn column(a: &Array, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| a.get(i).map_or(f64::NAN, Scalar::to_f64))
        .collect()
}

fn compile_and_run(program: &LirProgram, x: &Array) -> Vec<Array> {
    let options = CompileOptions {
        max_threads: Some(1),
        ..CompileOptions::default()
    };
    let compiled = CpuBackend.compile(program, &options).expect("compile");
    compiled.run_to_new(&[x.view()]).expect("run")
}

#[test]
fn strided_f64_lane_pairs_give_the_interpreters_bits_at_every_length_stride_and_offset() {
    for n in [1, 2, 3, 4, 5, 7, 8, 9, 31, 64, 65, 130, 1023] {
        for s in [2, 3, 4, 9] {
            for o in [1, s - 1, s + 1, 2 * s + 1] {
                let what = format!("n = {n}, stride {s}, offset {o}");
                let text = program(n, s, o);
                let lir = lir::parse(&text).unwrap_or_else(|e| panic!("{what}: {e}"));
                lir::verify(&lir).unwrap_or_else(|e| panic!("{what}: {e}"));
                let len = (n - 1) * s + o + 1;
                let xs = values(len);
                let x = Array::new(
                    [len],
                    ArrayData::from_scalars(rfx_ir::DType::F64, xs.iter().map(|&v| Scalar::F64(v)))
                        .expect("x"),
                )
                .expect("x");
                let got = compile_and_run(&lir, &x);
                let oracle = run_lir(&lir, &[x.view()], Mode::Native).expect("interpreter");
                for p in 0..n {
                    let (a, b) = (xs[p * s], xs[p * s + o]);
                    for (k, want) in [a - b, b + a].into_iter().enumerate() {
                        let (cpu, interp) = (column(&got[k], n)[p], column(&oracle[k], n)[p]);
                        assert!(same_bits(cpu, want), "{what}, output {k} at {p}: {cpu} != {want}");
                        assert!(same_bits(interp, want), "{what}, interpreter {k} at {p}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_strided_f64_lane_pair_is_one_wide_load_and_one_scalar_load() {
    // The vector loop's body: the two strided reads are vector loads with lane 0 moved in, and
    // no lane is built from scalars (`scalar_to_vector`).
    let lir = lir::parse(&program(1024, 3, 1)).expect("parse");
    let clif: String = dump(&lir).expect("dump").into_iter().map(|(_, c, _)| c).collect();
    assert!(clif.contains("load.f64x2"), "{clif}");
    assert!(clif.contains("insertlane") && clif.contains(", 0\n"), "{clif}");
    assert!(!clif.contains("scalar_to_vector"), "{clif}");
}
