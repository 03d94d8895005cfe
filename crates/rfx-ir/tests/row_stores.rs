//! Row stores: a MIR store whose region moves by a run-time row (clamped) and the LIR kernel's
//! `row` clause it lowers to, in both text formats, both verifiers and both interpreters.

use rfx_ir::interp::{Mode, run_lir, run_mir};
use rfx_ir::mir::{self, VerifyErrorKind};
use rfx_ir::{Array, BufId, Scalar, lir};

/// `h` (3 rows of 2) filled with 7, then row `i` (clamped) set to `r`, then copied out.
const ROWS: &str = "\
mir rows {
  buf0: f32[2] = input r
  buf1: i32[] = input i
  buf2: f32[3,2] = output h
  buf3: f32[3,2] = temp
  kernel fill [3,2] {
    %0 = const 7.0 : f32
    store buf3 = %0
  }
  kernel row [2] {
    %0 = load buf0 [1] : f32
    store buf3 [1] row buf1 rows 3 stride 2 = %0
  }
  kernel out [3,2] {
    %0 = load buf3 [2,1] : f32
    store buf2 = %0
  }
}
";

fn kinds(text: &str) -> Vec<VerifyErrorKind> {
    let program = mir::parse(text).expect("parse");
    mir::verify(&program).map_or_else(
        |e| e.errors().iter().map(|e| e.kind.clone()).collect(),
        |()| Vec::new(),
    )
}

fn expected(i: i32) -> Vec<f32> {
    let row = i.clamp(0, 2) as usize;
    let mut h = vec![7.0f32; 6];
    h[2 * row] = 1.5;
    h[2 * row + 1] = -2.5;
    h
}

#[test]
fn a_row_store_prints_parses_and_writes_the_clamped_row() {
    let program = mir::parse(ROWS).expect("parse");
    assert_eq!(kinds(ROWS), Vec::new());
    let printed = program.to_string();
    assert!(
        printed.contains("store buf3 [1] row buf1 rows 3 stride 2 = %0"),
        "{printed}"
    );
    assert_eq!(mir::parse(&printed).expect("reparse"), program);
    let r = Array::from_slice(&[1.5f32, -2.5]);
    for i in [-4, 0, 1, 2, 3, i32::MAX] {
        let index = Array::scalar(Scalar::I32(i));
        for mode in [Mode::Native, Mode::Oracle] {
            let out = run_mir(&program, &[r.view(), index.view()], mode).expect("run");
            let got: Vec<f32> = out[0].to_f64_vec().iter().map(|&v| v as f32).collect();
            assert_eq!(got, expected(i), "i = {i}");
        }
    }
}

#[test]
fn the_verifier_checks_row_stores() {
    // The index must be a one-element i32 buffer, over at least one row.
    let float_index = ROWS.replace("buf1: i32[] = input i", "buf1: f32[] = input i");
    assert!(kinds(&float_index).contains(&VerifyErrorKind::RowIndex { index: BufId::new(1) }));
    let no_rows = ROWS.replace("rows 3", "rows 0");
    assert!(kinds(&no_rows).contains(&VerifyErrorKind::RowIndex { index: BufId::new(1) }));
    // The last row must lie inside the buffer.
    let past_end = ROWS.replace("rows 3 stride 2", "rows 4 stride 2");
    assert!(
        kinds(&past_end)
            .iter()
            .any(|k| matches!(k, VerifyErrorKind::StoreOutOfBounds { max_index: 7, .. })),
        "{:?}",
        kinds(&past_end)
    );
    // The buffer it updates must be written before.
    let unwritten = ROWS.replace("    store buf3 = %0\n", "");
    assert!(kinds(&unwritten).contains(&VerifyErrorKind::ReadBeforeWrite(BufId::new(3))));
    // One row store per kernel.
    let two = ROWS.replace(
        "    store buf3 [1] row buf1 rows 3 stride 2 = %0\n",
        "    store buf3 [1] row buf1 rows 3 stride 2 = %0\n    store buf3 [1] row buf1 rows 3 stride 2 = %0\n",
    );
    assert!(kinds(&two).contains(&VerifyErrorKind::RowStores { count: 2 }));
}

/// The LIR of [`ROWS`]' row kernel: the index loaded by the preamble, the stores shifted.
const LIR_ROWS: &str = "\
lir rows arena 0 align 8 {
  buf0: f32[2] = input r
  buf1: i32[] = input i
  buf2: f32[3,2] = output h
  kernel fill dims [6] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32]
    preamble {
      s0 = const 7.0
    }
    body {
      store buf2 [1] = s0
    }
  }
  kernel row dims [2] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32, i32]
    preamble {
      s1 = load buf1 [0]
    }
    body {
      s0 = load buf0 [1]
      store buf2 [1] = s0
    }
    row buf2 at s1 rows 3 stride 2
  }
}
";

#[test]
fn an_lir_row_store_round_trips_verifies_and_runs() {
    let program = lir::parse(LIR_ROWS).unwrap_or_else(|e| panic!("{e}"));
    lir::verify(&program).unwrap_or_else(|e| panic!("{e}"));
    let printed = program.to_string();
    assert!(printed.contains("row buf2 at s1 rows 3 stride 2"), "{printed}");
    assert_eq!(lir::parse(&printed).expect("reparse"), program);
    let r = Array::from_slice(&[1.5f32, -2.5]);
    for i in [-1, 1, 2, 9] {
        let index = Array::scalar(Scalar::I32(i));
        let out = run_lir(&program, &[r.view(), index.view()], Mode::Native).expect("run");
        assert_eq!(
            out[0].as_slice::<f32>().expect("f32"),
            expected(i).as_slice(),
            "i = {i}"
        );
    }
    let row_store_errors = |text: &str| {
        lir::verify(&lir::parse(text).expect("parse"))
            .err()
            .map_or(0, |e| {
                e.errors()
                    .iter()
                    .filter(|e| e.kind == lir::VerifyErrorKind::RowStore(BufId::new(2)))
                    .count()
            })
    };
    assert_eq!(row_store_errors(LIR_ROWS), 0);
    // The index slot must be an i32 the preamble defines; the kernel must store into the
    // buffer and not read it.
    assert_eq!(row_store_errors(&LIR_ROWS.replace("at s1", "at s0")), 1);
    assert_eq!(row_store_errors(&LIR_ROWS.replace("rows 3", "rows 0")), 1);
    assert_eq!(
        row_store_errors(&LIR_ROWS.replace("s0 = load buf0 [1]", "s0 = load buf2 [1]")),
        1
    );
    let past_end = LIR_ROWS.replace("rows 3 stride 2", "rows 3 stride 3");
    let errors = lir::verify(&lir::parse(&past_end).expect("parse")).expect_err("out of bounds");
    assert!(
        errors
            .errors()
            .iter()
            .any(|e| matches!(e.kind, lir::VerifyErrorKind::OutOfBounds { max_index: 7, .. })),
        "{errors}"
    );
}
