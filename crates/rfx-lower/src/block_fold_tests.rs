//! Block folding on hand-written LIR: the folded program computes the same bits as the
//! original in the LIR interpreter.

use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::{self, LirProgram};
use rfx_ir::{Array, ArrayView};

use super::fold_blocks;

/// A producer over `[4]` storing nine values per point into `buf4` (reusing its slots), a
/// kernel over no dims storing an identity block into `buf5`, and a consumer over `[4,3,3]`
/// reading both (`CONSUMER_LOAD` is its load of the producer's values).
const PROGRAM: &str = "lir t arena 448 align 64 {
  buf0: f64[4] = input a
  buf1: f64[4] = input d
  buf2: f64[4,3,3] = output j
  buf3: f64[4] = output s
  buf4: f64[4,9] = arena 0
  buf5: f64[9] = arena 320
  buf6: f64[4,3,3] = output k
  buf7: f64[4,3,3] = output e
  kernel k0 dims [4] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, f64]
    preamble {
      s2 = const 2.0
    }
    body {
      s0 = load buf0 [1]
      s1 = mul s0, s2
      store buf4 [9] = s1
      s1 = sin s0
      store buf4 [9] offset 1 = s1
      s1 = neg s1
      store buf4 [9] offset 2 = s1
      s1 = add s0, s0
      store buf4 [9] offset 3 = s1
      s1 = mul s1, s0
      store buf4 [9] offset 4 = s1
      s1 = sqrt s0
      store buf4 [9] offset 5 = s1
      s1 = sub s1, s2
      store buf4 [9] offset 6 = s1
      s1 = div s0, s2
      store buf4 [9] offset 7 = s1
      s1 = mul s1, s1
      store buf4 [9] offset 8 = s1
      s1 = cos s0
      store buf3 [1] = s1
    }
  }
  kernel k1 dims [] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64]
    preamble {
      s0 = const 1.0
      s1 = const -0.0
    }
    body {
      store buf5 [] = s0
      store buf5 [] offset 1 = s1
      store buf5 [] offset 2 = s1
      store buf5 [] offset 3 = s1
      store buf5 [] offset 4 = s0
      store buf5 [] offset 5 = s1
      store buf5 [] offset 6 = s1
      store buf5 [] offset 7 = s1
      store buf5 [] offset 8 = s0
    }
  }
  kernel k2 dims [4,3,3] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, f64, f64, f64]
    preamble {}
    body {
      CONSUMER_LOAD
      s1 = load buf1 [1,0,0]
      s2 = mul s0, s1
      s3 = load buf5 [0,3,1]
      s4 = add s2, s3
      store buf2 [9,3,1] = s4
      store buf6 [9,3,1] = s2
      store buf7 [9,1,3] = s3
    }
  }
}";

fn program(consumer_load: &str) -> LirProgram {
    let text = PROGRAM.replace("CONSUMER_LOAD", consumer_load);
    let lir = lir::parse(&text).expect("parses");
    lir::verify(&lir).expect("verifies");
    lir
}

/// Folds `lir`'s kernels; the folded program and whether anything folded.
fn folded(lir: &LirProgram) -> (LirProgram, bool) {
    let mut kernels = lir.kernels().to_vec();
    let buffers = lir.buffers().to_vec();
    let is_temp = |b: rfx_ir::BufId| {
        matches!(
            buffers.get(b.index()).map(|b| &b.storage),
            Some(lir::Storage::Arena { .. })
        )
    };
    let done = fold_blocks(&mut kernels, &mut Vec::new(), &is_temp);
    let out = LirProgram::from_parts(
        lir.name(),
        buffers.clone(),
        lir.arena_bytes(),
        lir.arena_align(),
        kernels,
    );
    lir::verify(&out).expect("the folded program verifies");
    (out, done)
}

fn run(lir: &LirProgram) -> Vec<Vec<u64>> {
    let a = Array::from_slice(&[0.25f64, -1.5, 3.0, 0.0]);
    let d = Array::from_slice(&[0.5f64, -2.0, 1e-3, -0.0]);
    let inputs: [ArrayView<'_>; 2] = [a.view(), d.view()];
    run_lir(lir, &inputs, Mode::Native)
        .expect("runs")
        .iter()
        .map(|out| {
            out.as_slice::<f64>()
                .expect("f64")
                .iter()
                .map(|v| v.to_bits())
                .collect()
        })
        .collect()
}

#[test]
fn a_block_consumer_is_written_out_in_its_producer_with_the_same_bits() {
    let lir = program("s0 = load buf4 [9,3,1]");
    let (fused, done) = folded(&lir);
    assert!(done);
    // The consumer is folded into the producer and the identity kernel, read by no one now,
    // is gone; the producer no longer stores the temporary.
    assert_eq!(fused.kernels().len(), 1);
    let k0 = &fused.kernels()[0];
    assert_eq!(k0.dims, vec![4]);
    let stores_to = |buf: usize| {
        k0.body
            .iter()
            .filter(|i| matches!(i, lir::Inst::Store { buf: b, .. } if b.index() == buf))
            .count()
    };
    assert_eq!(
        (stores_to(4), stores_to(2), stores_to(6), stores_to(7)),
        (0, 9, 9, 9)
    );
    // The identity's entries are constants now, `-0.0` kept apart from `1.0`; `d` is loaded
    // once per point.
    let loads_of_d = k0
        .body
        .iter()
        .filter(|i| matches!(i, lir::Inst::Load { buf, .. } if buf.index() == 1))
        .count();
    assert_eq!(loads_of_d, 1);
    assert_eq!(run(&fused), run(&lir));
}

#[test]
fn a_consumer_reading_another_points_values_is_not_folded() {
    // Every point reads the first point's row: not what the producer just stored.
    let lir = program("s0 = load buf4 [0,3,1]");
    let (fused, done) = folded(&lir);
    assert!(!done);
    assert_eq!(fused.kernels().len(), 3);
}

/// A consumer whose two stores into `buf2` step by 1 and by 2 along the producer's dim: at
/// point 2 both write `o[4]`, the second store's value (`-t`) last. Held in address order the
/// first store's would be.
const CROSSING: &str = "lir c arena 96 align 64 {
  buf0: f64[4] = input a
  buf1: f64[4,3] = arena 0
  buf2: f64[7] = output o
  kernel k0 dims [4] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64]
    preamble {}
    body {
      s0 = load buf0 [1]
      store buf1 [3] = s0
      s1 = mul s0, s0
      store buf1 [3] offset 1 = s1
      s1 = add s0, s0
      store buf1 [3] offset 2 = s1
    }
  }
  kernel k1 dims [4,3] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64]
    preamble {}
    body {
      s0 = load buf1 [3,1]
      s1 = neg s0
      store buf2 [1,0] offset 2 = s0
      store buf2 [2,0] = s1
    }
  }
}";

#[test]
fn stores_of_one_buffer_stepping_apart_keep_their_order() {
    let lir = lir::parse(CROSSING).expect("parses");
    lir::verify(&lir).expect("verifies");
    let (fused, done) = folded(&lir);
    assert!(done);
    assert_eq!(fused.kernels().len(), 1);
    let a = Array::from_slice(&[0.25f64, -1.5, 3.0, 0.0]);
    let bits = |lir: &LirProgram| -> Vec<u64> {
        let out = run_lir(lir, &[a.view()], Mode::Native).expect("runs");
        out[0]
            .as_slice::<f64>()
            .expect("f64")
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    assert_eq!(bits(&fused), bits(&lir));
    // `o[4]` is the last block position's `-t` at point 2: `-(3 + 3)`.
    assert_eq!(f64::from_bits(bits(&lir)[4]), -6.0);
}
