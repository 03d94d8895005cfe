//! Kernels of a few hundred exact ops, the size whose functions run Cranelift's mid-end
//! (e-graph GVN, LICM, folding, redundant-load elimination; `codegen::MID_END_MIN_BODY`)
//! before they are compiled: every output element has the LIR interpreter's bits, in `f32` and
//! `f64`, on inputs with NaNs and infinities, at sizes that run a scalar tail, vectors and
//! several threads. Smaller kernels (which skip the mid-end) are checked the same way beside
//! them.

use crate::common;

use common::assert_bits_match_interpreter;
use rfx_ir::testgen::TestRng;

/// The body length from which the CPU backend runs the mid-end (`codegen::MID_END_MIN_BODY`).
const MID_END_MIN_BODY: usize = 200;

/// A kernel of `ops` exact elementwise ops over three inputs of `n` elements, each op reading
/// two values drawn from those computed so far (so values are reused far apart), with three
/// outputs (the ops none of them reads are removed by the optimiser: about a third).
fn chain(rng: &mut TestRng, dt: &str, n: usize, ops: usize) -> String {
    let mut text = String::from("kernel big {\n");
    for name in ["a", "b", "c"] {
        text += &format!(" %{name} = input {name} : {dt}[{n}]\n");
    }
    let mut values: Vec<String> = vec!["%a".into(), "%b".into(), "%c".into()];
    for i in 0..ops {
        let pick = |rng: &mut TestRng, values: &[String]| {
            // Mostly recent values, sometimes an old one.
            let len = values.len();
            let back = if rng.below(4) == 0 {
                rng.below(len)
            } else {
                rng.below(len.min(6))
            };
            values[len - 1 - back].clone()
        };
        let x = pick(rng, &values);
        let y = pick(rng, &values);
        let op = match rng.below(10) {
            0 => format!("add {x}, {y}"),
            1 => format!("sub {x}, {y}"),
            2 => format!("mul {x}, {y}"),
            3 => format!("div {x}, {y}"),
            4 => format!("min {x}, {y}"),
            5 => format!("max {x}, {y}"),
            6 => format!("neg {x}"),
            7 => format!("abs {x}"),
            8 => format!("sqrt {x}"),
            _ => format!("mul {x}, {x}"),
        };
        text += &format!(" %v{i} = {op} : {dt}[{n}]\n");
        values.push(format!("%v{i}"));
    }
    for (k, v) in values.iter().rev().take(3).enumerate() {
        text += &format!(" output out{k} = {v}\n");
    }
    text + "}\n"
}

#[test]
fn large_kernels_run_the_mid_end_with_the_interpreters_bits() {
    let mut rng = TestRng::new(0x4d1d);
    let mut large = 0;
    for (case, dt) in ["f64", "f32", "f64", "f32"].into_iter().enumerate() {
        for n in [2, 7, 4099] {
            let text = chain(&mut rng, dt, n, 700);
            let lir = assert_bits_match_interpreter(&text, 2, 17 + case as u64);
            if lir
                .kernels()
                .iter()
                .any(|k| k.preamble.len() + k.body.len() >= MID_END_MIN_BODY)
            {
                large += 1;
            }
        }
    }
    // Not vacuous: the generated kernels are large enough for the rule.
    assert!(
        large >= 10,
        "only {large} of 12 programs have a kernel of {MID_END_MIN_BODY}+ instructions"
    );
}

#[test]
fn kernels_just_under_and_over_the_rule_agree_with_the_interpreter() {
    let mut rng = TestRng::new(0x51de);
    for ops in [150, 250, 350, 450] {
        for dt in ["f32", "f64"] {
            let text = chain(&mut rng, dt, 1031, ops);
            assert_bits_match_interpreter(&text, 1, ops as u64);
        }
    }
}
