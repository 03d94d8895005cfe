//! A select whose arm costs a transcendental (`sin(t)/t` beside its series near 0) computes
//! that arm only when it takes it: the preamble branches on the condition, and the values are
//! the interpreter's bits on both sides of the threshold, at the edges (zero, signed zero,
//! NaN, infinities) and wherever an arm's value is also read elsewhere.

use crate::common;

use rfx_codegen_cpu::compile;
use rfx_ir::{Array, ArrayData};
use rfx_lower::CompileOptions;

/// `k0` (one element): with `c = t² < 0.01` on `x = [t, u]`,
/// - `y[0] = c ? 1 - t²/6 : sin(t)/t` (a costly false arm, a cheap true one),
/// - `y[1] = c ? 1 : cos(t)` (the `cos` of the `sin` above: one `sincos` in the branch),
/// - `y[2] = c ? v : sin(t) * v` with `v = y[0] * u`, defined after the first select (the
///   second branch, reading `sin(t)` through the first one's merge),
/// - `y[3] = (c ? t² : exp(t)) + (exp(t) + t)` (`exp(t)` read outside the select: computed
///   whatever the condition),
/// - `y[4] = c ? exp(-t) * (c ? t : u) : t` (a costly true arm holding a select of its own).
///
/// `k1` (a loop of 4): `z[i] = w[i] * (c ? 1 : exp(t))`, the select's value read by the body.
const ARMS: &str = "lir arms arena 0 align 64 {
  buf0: f64[2] = input x
  buf1: f64[4] = input w
  buf2: f64[5] = output y
  buf3: f64[4] = output z
  kernel k0 dims [] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, f64, f64, bool, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64]
    preamble {
      s0 = load buf0 []
      s2 = mul s0, s0
      s3 = const 0.01
      s4 = lt s2, s3
      s5 = sin s0
      s6 = div s5, s0
      s7 = const 1.0
      s8 = const 6.0
      s9 = div s2, s8
      s10 = sub s7, s9
      s11 = select s4, s10, s6
      s12 = cos s0
      s13 = select s4, s7, s12
      s1 = load buf0 [] offset 1
      s14 = mul s11, s1
      s15 = mul s5, s14
      s16 = select s4, s14, s15
      s17 = exp s0
      s18 = select s4, s2, s17
      s19 = add s17, s0
      s20 = add s18, s19
      s21 = neg s0
      s22 = exp s21
      s23 = select s4, s0, s1
      s24 = mul s22, s23
      s25 = select s4, s24, s0
    }
    body {
      store buf2 [] = s11
      store buf2 [] offset 1 = s13
      store buf2 [] offset 2 = s16
      store buf2 [] offset 3 = s20
      store buf2 [] offset 4 = s25
    }
  }
  kernel k1 dims [4] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, bool, f64, f64, f64, f64, f64, f64]
    preamble {
      s0 = load buf0 [0]
      s1 = mul s0, s0
      s3 = const 0.01
      s2 = lt s1, s3
      s4 = exp s0
      s5 = const 1.0
      s6 = select s2, s5, s4
    }
    body {
      s7 = load buf1 [1]
      s8 = mul s7, s6
      store buf3 [1] = s8
    }
  }
}";

fn f64s(values: &[f64]) -> Array {
    Array::new([values.len()], ArrayData::F64(values.to_vec())).expect("array")
}

#[test]
fn costly_select_arms_run_behind_a_branch_with_the_interpreters_bits() {
    let lir = rfx_ir::lir::parse(ARMS).expect("LIR text");
    let (clif, _) = rfx_codegen_cpu::dump_program(&lir, &CompileOptions::default())
        .expect("compile")
        .expect("one function");
    // Two branches on k0's condition (the first for the arms of `y[0]`, `y[1]` and `y[4]`,
    // the second for `y[2]`'s, which reads `v`), and one on k1's.
    let branches = clif.lines().filter(|l| l.contains("brif")).count();
    assert!(branches >= 3, "{branches} branches:\n{clif}");
    let compiled = compile(&lir, &CompileOptions::default()).expect("compile");
    let w = f64s(&[1.5, -2.0, 0.0, 1e300]);
    let ts = [
        0.0,
        -0.0,
        1e-300,
        -1e-3,
        0.05,
        0.0999,
        0.1,
        0.1001,
        -0.2,
        3.0,
        700.0,
        -745.0,
        1e300,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    for t in ts {
        for u in [2.5, -0.0, f64::NAN] {
            let inputs = [f64s(&[t, u]), w.clone()];
            let (got, want) = common::run_with_interpreter(&compiled, &lir, &inputs);
            for (k, (g, e)) in got.iter().zip(&want).enumerate() {
                for i in 0..e.data().len() {
                    let (a, b) = (g.get(i).expect("got").to_f64(), e.get(i).expect("want").to_f64());
                    assert!(
                        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                        "output {k}[{i}] at t = {t}, u = {u}: {a} against {b}"
                    );
                }
            }
        }
    }
    // The closed forms, on both sides of the threshold.
    for t in [1e-3, 0.5] {
        let (got, _) = common::run_with_interpreter(&compiled, &lir, &[f64s(&[t, 2.0]), w.clone()]);
        let y = |i: usize| got[0].get(i).expect("y").to_f64();
        let small = t * t < 0.01;
        let y0 = if small { 1.0 - t * t / 6.0 } else { t.sin() / t };
        assert!((y(0) - y0).abs() <= 1e-15, "y[0] at {t}: {}", y(0));
        let y1 = if small { 1.0 } else { t.cos() };
        assert!((y(1) - y1).abs() <= 1e-15, "y[1] at {t}: {}", y(1));
    }
}

/// A select whose arms cost less than a transcendental (a square root and an add) computes
/// both and selects: no branch.
#[test]
fn a_select_on_arms_too_cheap_to_branch_over_stays_a_select() {
    let text = "lir cheap arena 0 align 64 {
  buf0: f64[1] = input x
  buf1: f64[1] = output y
  kernel k0 dims [] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, bool, f64, f64, f64, f64]
    preamble {
      s0 = load buf0 []
      s1 = const 0.5
      s2 = lt s0, s1
      s3 = mul s0, s0
      s4 = sqrt s0
      s5 = add s4, s1
      s6 = select s2, s3, s5
    }
    body {
      store buf1 [] = s6
    }
  }
}";
    let lir = rfx_ir::lir::parse(text).expect("LIR text");
    // The comparison's value feeds the select, never a branch.
    let dumps = rfx_codegen_cpu::dump(&lir).expect("compile");
    for (name, clif, _) in &dumps {
        let conditions: Vec<&str> = (clif.lines())
            .filter(|l| l.contains("= fcmp"))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert!(!conditions.is_empty(), "{name}: no comparison\n{clif}");
        let branched = clif.lines().any(|l| {
            l.trim_start().starts_with("brif") && conditions.iter().any(|c| l.contains(&format!(" {c},")))
        });
        assert!(!branched, "{name}:\n{clif}");
    }
    let compiled = compile(&lir, &CompileOptions::default()).expect("compile");
    for x in [0.25, 0.5, 4.0, -1.0, f64::NAN] {
        let (got, want) = common::run_with_interpreter(&compiled, &lir, &[f64s(&[x])]);
        let (a, b) = (
            got[0].get(0).expect("got").to_f64(),
            want[0].get(0).expect("want").to_f64(),
        );
        assert!(
            a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            "{x}: {a} against {b}"
        );
    }
}

/// Arms around slot reuse and other dtypes: in `k0` (one element), with `c = t < 0.5` on
/// `x = [t, u]`,
/// - `y[0] = c ? u² : sin(t)`, the slot of `t` reused for `u²` between the `sin` and the
///   select (the arm reads `t`),
/// - `yi = c ? 3 : i32(exp(u))` (an `i32` select, its arm a cast of a transcendental),
/// - `yb = c ? cos(u) > 0.5 : c` (a `bool` select),
/// - `y[1] = c ? (cos(u) > 0.5 ? u² - u : u) : u²` (a select in the true arm whose condition
///   is computed in that arm),
/// - `yf = c ? f32(u) : sin(f32(u))` (`f32`);
///
/// in `k1` (a loop of 3), a select on `t ≠ t` (NaN) feeding `sin` in another select's arm:
/// `z[i] = w[i] * (t ≠ t ? sin(t ≠ t ? 0.5 : ln t) : t)`.
const ADV: &str = "lir adv arena 0 align 64 {
  buf0: f64[2] = input x
  buf1: f64[2] = output y
  buf2: i32[1] = output yi
  buf3: bool[1] = output yb
  buf4: f32[1] = output yf
  buf5: f64[3] = input w
  buf6: f64[3] = output z
  kernel k0 dims [] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, bool, f64, f64, f64, i32, i32, bool, f64, f64, f32, f32, bool, f64]
    preamble {
      s0 = load buf0 []
      s1 = load buf0 [] offset 1
      s3 = const 0.5
      s2 = lt s0, s3
      s4 = sin s0
      s0 = mul s1, s1
      s5 = select s2, s0, s4
      s9 = exp s1
      s6 = cast s9
      s7 = const 3
      s7 = select s2, s7, s6
      s10 = cos s1
      s8 = gt s10, s3
      s13 = select s2, s8, s2
      s14 = sub s0, s1
      s10 = select s8, s14, s1
      s9 = select s2, s10, s0
      s11 = cast s1
      s12 = sin s11
      s11 = select s2, s11, s12
    }
    body {
      store buf1 [] = s5
      store buf1 [] offset 1 = s9
      store buf2 [] = s7
      store buf3 [] = s13
      store buf4 [] = s11
    }
  }
  kernel k1 dims [3] reduce 0 vector 2 thread_min 32768 tile 1024 lanes 1 {
    slots [f64, f64, bool, f64, f64, f64, f64]
    preamble {
      s0 = load buf0 [0]
      s3 = const 0.5
      s2 = ne s0, s0
      s4 = log s0
      s1 = select s2, s3, s4
      s4 = sin s1
      s5 = select s2, s4, s0
    }
    body {
      s6 = load buf5 [1]
      s6 = mul s6, s5
      store buf6 [1] = s6
    }
  }
}";

#[test]
fn arms_reading_reused_slots_and_arms_of_other_dtypes_give_the_interpreters_bits() {
    let lir = rfx_ir::lir::parse(ADV).expect("LIR text");
    rfx_ir::lir::verify(&lir).expect("verify");
    let (clif, _) = rfx_codegen_cpu::dump_program(&lir, &CompileOptions::default())
        .expect("compile")
        .expect("one function");
    // One branch on `c` in k0, one on `t ≠ t` in k1.
    let branches = clif.lines().filter(|l| l.contains("brif")).count();
    assert!(branches >= 2, "{branches} branches:\n{clif}");
    let compiled = compile(&lir, &CompileOptions::default()).expect("compile");
    let w = f64s(&[1.5, -2.0, 0.0]);
    let values = [
        0.0,
        -0.0,
        0.3,
        0.5,
        0.7,
        -2.0,
        3.0,
        100.0,
        -100.0,
        1e300,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    for t in values {
        for u in values {
            let (got, want) = common::run_with_interpreter(&compiled, &lir, &[f64s(&[t, u]), w.clone()]);
            for (k, (g, e)) in got.iter().zip(&want).enumerate() {
                for i in 0..e.data().len() {
                    let (a, b) = (g.get(i).expect("got"), e.get(i).expect("want"));
                    let (x, y) = (a.to_f64(), b.to_f64());
                    assert!(
                        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                        "output {k}[{i}] at t = {t}, u = {u}: {a:?} against {b:?}"
                    );
                }
            }
        }
    }
}
