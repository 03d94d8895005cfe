//! `min`/`max` (and `clamp`) with a constant operand compile to one `minps`/`maxps` where that
//! is exact (`Emitter::min_max_by_const`); every constant, zeros and NaN included, on either
//! side, must still give the LIR interpreter's bits: NaN propagation and the `±0` tie rules.

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::hir::parse;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayData, Scalar, Shape};
use rfx_lower::{Backend, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

const CONSTANTS: [&str; 8] = ["-1.5", "0.0", "-0.0", "1.0", "inf", "-inf", "nan", "3e-39"];

/// Inputs around the constants: the constants themselves, both zeros, NaN, infinities,
/// subnormals and random values.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let special = [
        -1.5,
        1.5,
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        3e-39,
        -3e-39,
    ];
    let mut rng = TestRng::new(seed);
    (0..n)
        .map(|i| {
            if i % 3 == 0 {
                special[(rng.next_u64() % special.len() as u64) as usize]
            } else {
                rng.uniform(-3.0, 3.0)
            }
        })
        .collect()
}

fn check(dtype: &str, body: &str, n: usize) {
    let text = format!("kernel k {{\n  %x = input x : {dtype}[{n}]\n{body}  output y = %y\n}}");
    let kernel = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    let lir = lower(&mir, &LowerConfig::default()).expect("lower").0;
    let compiled = CpuBackend.compile(&lir, &Default::default()).expect("compile");
    let x = values(n, n as u64);
    let data = if dtype == "f32" {
        ArrayData::F32(x.iter().map(|&v| v as f32).collect())
    } else {
        ArrayData::F64(x)
    };
    let input = Array::new(Shape::from(vec![n]), data).expect("input");
    let want = run_lir(&lir, &[input.view()], Mode::Native).expect("interpreter");
    let mut got = [Array::filled(
        Scalar::zero(want[0].dtype()),
        want[0].shape().clone(),
    )];
    {
        let mut views: Vec<_> = got.iter_mut().map(Array::view_mut).collect();
        compiled
            .run(&[input.view()], &mut views, &mut Scratch::new())
            .expect("run");
    }
    for i in 0..n {
        let (w, g) = (want[0].get(i).expect("w"), got[0].get(i).expect("g"));
        let (wf, gf) = (w.to_f64(), g.to_f64());
        let same = (wf.is_nan() && gf.is_nan()) || w == g;
        assert!(
            same,
            "{body}: element {i}, x = {:?}: interpreter {w:?}, cpu {g:?}",
            input.get(i)
        );
        assert!(
            wf.is_nan() || wf.to_bits() == gf.to_bits(),
            "{body}: element {i}: sign of zero differs ({w:?} vs {g:?})"
        );
    }
}

#[test]
fn min_and_max_with_any_constant_keep_the_interpreters_bits() {
    for dtype in ["f32", "f64"] {
        for c in CONSTANTS {
            for op in ["min", "max"] {
                let rhs = format!("  %c = const {c} : {dtype}[]\n  %y = {op} %x, %c : {dtype}[N]\n");
                let lhs = format!("  %c = const {c} : {dtype}[]\n  %y = {op} %c, %x : {dtype}[N]\n");
                for n in [1, 7, 64, 1031] {
                    check(dtype, &rhs.replace('N', &n.to_string()), n);
                    check(dtype, &lhs.replace('N', &n.to_string()), n);
                }
            }
        }
    }
}

#[test]
fn clamps_with_constant_bounds_keep_the_interpreters_bits() {
    for dtype in ["f32", "f64"] {
        for (lo, hi) in [
            ("-1.0", "1.0"),
            ("-0.0", "0.0"),
            ("0.0", "-0.0"),
            ("2.0", "-2.0"),
            ("nan", "1.0"),
        ] {
            for n in [1, 33, 4096] {
                let body = format!(
                    "  %lo = const {lo} : {dtype}[]\n  %hi = const {hi} : {dtype}[]\n  %y = clamp %x, %lo, %hi : {dtype}[{n}]\n"
                );
                check(dtype, &body, n);
            }
        }
    }
}

/// A select against a constant whose bits are all zero (`+0`) is the comparison's mask ANDed
/// with the other operand (`Emitter::select`); `-0`, NaN and other constants keep the full
/// bit-select. Either side, both widths: the interpreter's bits, NaN payloads and zero signs
/// included.
#[test]
fn selects_against_constants_keep_the_interpreters_bits() {
    for dtype in ["f32", "f64"] {
        for c in CONSTANTS {
            for (then, otherwise) in [("%x", "%c"), ("%c", "%x")] {
                for n in [1, 7, 64, 1031] {
                    let body = format!(
                        "  %c = const {c} : {dtype}[]\n  %z = const 0.5 : {dtype}[]\n  \
                         %p = gt %x, %z : bool[{n}]\n  %y = select %p, {then}, {otherwise} : {dtype}[{n}]\n"
                    );
                    check(dtype, &body, n);
                }
            }
        }
    }
}
