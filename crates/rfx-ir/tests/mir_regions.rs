//! Stores with regions: kernels that each write one part of a buffer (the parts of a
//! concatenation, each stored where it lies in the whole), in the MIR and LIR text formats, the
//! verifiers and the interpreters.

use rfx_ir::interp::{Mode, run_lir, run_mir};
use rfx_ir::mir::{self, Region, VerifyErrorKind};
use rfx_ir::{Array, BufId, lir};

/// `out = [x | 10 * y | x0 + y]` along axis 1 (x: 2x2, y: 2x1), its parts written by two
/// kernels: the first stores `x` at columns 0..2, the second stores its two values at columns
/// 2 and 3 of each row; then a temp assembled the same way is read back by a third kernel.
const CONCAT: &str = "\
mir concat {
  buf0: f32[2,2] = input x
  buf1: f32[2,1] = input y
  buf2: f32[2,4] = output out
  buf3: f32[4] = temp
  buf4: f32[4] = output flat
  kernel k0 [2,2] {
    %0 = load buf0 [2,1] : f32
    store buf2 [4,1] = %0
    store buf3 [2,1] = %0
  }
  kernel k1 [2,1] {
    %0 = load buf1 [1,1] : f32
    %1 = const 10.0 : f32
    %2 = mul %0, %1 : f32
    %3 = load buf0 [2,0] : f32
    %4 = add %3, %0 : f32
    store buf2 [4,1] offset 2 = %2
    store buf2 [4,1] offset 3 = %4
  }
  kernel k2 [4] {
    %0 = load buf3 [1] : f32
    %1 = add %0, %0 : f32
    store buf4 = %1
  }
}
";

fn inputs() -> (Array, Array) {
    (
        Array::from_vec([2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).expect("x"),
        Array::from_vec([2, 1], vec![0.5f32, -1.5]).expect("y"),
    )
}

fn f32s(a: &Array) -> Vec<f32> {
    a.as_slice::<f32>().expect("f32 array").to_vec()
}

#[test]
fn region_stores_print_and_parse_back() {
    let program = mir::parse(CONCAT).expect("parse");
    let printed = program.to_string();
    assert!(printed.contains("store buf2 [4,1] offset 2 = %2"), "{printed}");
    assert!(printed.contains("store buf2 [4,1] = %0"), "{printed}");
    assert!(printed.contains("store buf4 = %1"), "{printed}");
    assert_eq!(mir::parse(&printed).expect("reparse"), program);
    let stores = &program.kernels()[1].stores;
    assert_eq!(
        stores[1].region,
        Some(Region {
            strides: vec![4, 1],
            offset: 3,
            row: None,
        })
    );
    assert_eq!(program.kernels()[2].stores[0].region, None);
}

#[test]
fn interpreter_writes_each_part_where_its_region_puts_it() {
    let program = mir::parse(CONCAT).expect("parse");
    let (x, y) = inputs();
    let out = run_mir(&program, &[x.view(), y.view()], Mode::Native).expect("run");
    assert_eq!(
        f32s(&out[0]),
        [1.0, 2.0, 5.0, 1.5, 3.0, 4.0, -15.0, 1.5],
        "rows [x | 10y | x0 + y]"
    );
    // The temp was filled by k0 alone (all four elements), then doubled.
    assert_eq!(f32s(&out[1]), [2.0, 4.0, 6.0, 8.0]);
}

fn kinds(text: &str) -> Vec<VerifyErrorKind> {
    let program = mir::parse(text).expect("parse");
    mir::verify(&program).map_or_else(
        |e| e.errors().iter().map(|e| e.kind.clone()).collect(),
        |()| Vec::new(),
    )
}

#[test]
fn verifier_checks_that_regions_write_each_element_once() {
    assert_eq!(kinds(CONCAT), Vec::new());
    // Without the last column, element 3 of `out` is never written.
    let gap = CONCAT.replace("    store buf2 [4,1] offset 3 = %4\n", "");
    assert_eq!(
        kinds(&gap),
        vec![VerifyErrorKind::RegionCoverage {
            buf: BufId::new(2),
            element: 3,
            count: 0
        }]
    );
    // Two parts at one offset: element 2 written twice, element 3 never.
    let overlap = CONCAT.replace("offset 3 = %4", "offset 2 = %4");
    assert_eq!(
        kinds(&overlap),
        vec![VerifyErrorKind::RegionCoverage {
            buf: BufId::new(2),
            element: 2,
            count: 2
        }]
    );
    // A whole store on top of the parts writes every element once more.
    let mixed = CONCAT.replace(
        "    store buf4 = %1\n",
        "    store buf4 = %1\n    store buf3 = %1\n",
    );
    assert!(
        kinds(&mixed).iter().any(|k| matches!(
            k,
            VerifyErrorKind::RegionCoverage {
                buf,
                count: 2,
                ..
            } if *buf == BufId::new(3)
        )),
        "{:?}",
        kinds(&mixed)
    );
}

/// A temp assembled by two kernels is complete only after the second: a kernel between them
/// may not read it.
#[test]
fn a_buffer_assembled_from_parts_is_read_after_its_last_part() {
    let text = "\
mir parts {
  buf0: f32[2] = input x
  buf1: f32[4] = temp
  buf2: f32[4] = output out
  buf3: f32[2] = output early
  kernel k0 [2] {
    %0 = load buf0 [1] : f32
    store buf1 [1] = %0
  }
  kernel k1 [2] {
    %0 = load buf1 [1] : f32
    store buf3 = %0
  }
  kernel k2 [2] {
    %0 = load buf0 [1] : f32
    %1 = neg %0 : f32
    store buf1 [1] offset 2 = %1
  }
  kernel k3 [4] {
    %0 = load buf1 [1] : f32
    store buf2 = %0
  }
}
";
    assert_eq!(kinds(text), vec![VerifyErrorKind::ReadBeforeWrite(BufId::new(1))]);
    let fixed = text.replace(
        "    %0 = load buf1 [1] : f32\n    store buf3",
        "    %0 = load buf0 [1] : f32\n    store buf3",
    );
    assert_eq!(kinds(&fixed), Vec::new());
    let x = Array::from_slice(&[2.0f32, -3.0]);
    let out = run_mir(&mir::parse(&fixed).expect("parse"), &[x.view()], Mode::Native).expect("run");
    assert_eq!(f32s(&out[0]), [2.0, -3.0, -2.0, 3.0]);
}

/// The LIR store's offset: printed only when nonzero, parsed back, bounds-checked with it, and
/// honoured by the interpreter.
#[test]
fn lir_store_offsets_round_trip_and_run() {
    let text = "\
lir offsets arena 0 align 8 {
  buf0: f32[2] = input x
  buf1: f32[4] = output out
  kernel k0 dims [2] reduce 0 vector 1 thread_min 16384 tile 1024 lanes 1 {
    slots [f32, f32]
    preamble {}
    body {
      s0 = load buf0 [1]
      store buf1 [1] = s0
      s1 = neg s0
      store buf1 [1] offset 2 = s1
    }
  }
}
";
    let program = match lir::parse(text) {
        Ok(p) => p,
        Err(e) => panic!("{e}\n{text}"),
    };
    let printed = program.to_string();
    assert!(printed.contains("store buf1 [1] offset 2 = s1"), "{printed}");
    assert!(printed.contains("store buf1 [1] = s0"), "{printed}");
    assert_eq!(lir::parse(&printed).expect("reparse"), program);
    let x = Array::from_slice(&[2.0f32, -3.0]);
    let out = run_lir(&program, &[x.view()], Mode::Native).expect("run");
    assert_eq!(f32s(&out[0]), [2.0, -3.0, -2.0, 3.0]);
    let past_end = text.replace("offset 2", "offset 3");
    let errors = lir::verify(&lir::parse(&past_end).expect("parse")).expect_err("out of bounds");
    assert!(
        errors
            .errors()
            .iter()
            .any(|e| matches!(e.kind, lir::VerifyErrorKind::OutOfBounds { max_index: 4, .. })),
        "{errors}"
    );
}
