//! A kernel written out at fixed positions compares index values that are constants there (a
//! concatenation read as a value selects its parts by position): the comparisons, their
//! `and`/`or` and the selects on them are decided when the code is emitted, and the code keeps
//! only the operand each select picks, with the interpreter's bits.

use crate::common;

use rfx_codegen_cpu::compile;
use rfx_lower::CompileOptions;

/// A temporary `t = x[0] * x[5]`, then `y[i, j] = x[3i + j] * t` where `(j >= 2 or j < 1) and
/// 0 < 1` (an index of the preamble, splatted), and `x[3i + j]` elsewhere; the second kernel's
/// points are written out (one function for both).
const POSITIONS: &str = "lir positions arena 64 align 64 {
  buf0: f64[6] = input x
  buf1: f64[] = arena 0
  buf2: f64[2,3] = output y
  kernel k0 dims [] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, f64]
    preamble {}
    body {
      s0 = load buf0 []
      s1 = load buf0 [] offset 5
      s2 = mul s0, s1
      store buf1 [] = s2
    }
  }
  kernel k1 dims [2,3] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, bool, f64, f64, bool, bool, f64, f64, f64, f64, bool, bool]
    preamble {
      s0 = load buf1 [0,0]
      s1 = const 2.0
      s3 = const 1.0
      s10 = index [0,0]
      s11 = lt s10, s3
    }
    body {
      s4 = index [0,1]
      s2 = ge s4, s1
      s5 = lt s4, s3
      s6 = or s2, s5
      s12 = and s6, s11
      s7 = load buf0 [3,1]
      s8 = mul s7, s0
      s9 = select s12, s8, s7
      store buf2 [3,1] = s9
    }
  }
}";

#[test]
fn selects_by_position_are_decided_when_the_code_is_emitted() {
    let lir = rfx_ir::lir::parse(POSITIONS).expect("LIR text");
    let (clif, _) = rfx_codegen_cpu::dump_program(&lir, &CompileOptions::default())
        .expect("compile")
        .expect("one function");
    for op in ["fcmp", "select", "band", "bor"] {
        assert!(
            !clif.lines().any(|line| line.contains(&format!(" = {op}"))),
            "`{op}` left in the code:\n{clif}"
        );
    }
    let compiled = compile(&lir, &CompileOptions::default()).expect("compile");
    assert_eq!(compiled.function_count(), 1);
    for x in [
        [1.5, -2.0, 0.25, 3.0, -0.0, 4.0],
        [f64::NAN, 1.0, 2.0, f64::INFINITY, 5.0, -1.0],
        [-3.0, 1e300, -1e-300, 7.0, 0.5, 1e10],
    ] {
        let input = rfx_ir::Array::new([6], rfx_ir::ArrayData::F64(x.to_vec())).expect("array");
        let (got, want) = common::run_with_interpreter(&compiled, &lir, &[input]);
        for i in 0..6 {
            let (a, b) = (
                got[0].get(i).expect("got").to_f64(),
                want[0].get(i).expect("want").to_f64(),
            );
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "y[{i}]: {a} against {b} for {x:?}"
            );
        }
        // Columns 0 and 2 are scaled (the preamble's index is 0: `s11` holds everywhere).
        let t = x[0] * x[5];
        for (i, want) in [x[0] * t, x[1], x[2] * t, x[3] * t, x[4], x[5] * t]
            .into_iter()
            .enumerate()
        {
            let a = got[0].get(i).expect("got").to_f64();
            assert!(
                a.to_bits() == want.to_bits() || (a.is_nan() && want.is_nan()),
                "y[{i}]: {a}, expected {want}"
            );
        }
    }
}
