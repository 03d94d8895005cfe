//! Assembled AVX2 passes (`crate::asm`): elementwise bodies compiled through the CPU backend
//! must give every output element the bits of a reference, whatever the pass does inside.
//!
//! Bodies of exact ops only are compared with the LIR interpreter (`run_lir`, native mode):
//! the plain pass (every plan register in a `ymm` register, a vector loop then a scalar tail).
//! Bodies with transcendentals (the chunked pass: exact runs as loops over a chunk, routines
//! called on the chunk, crossing values in frame buffers) are compared with the same kernel
//! run on each element alone (one-element kernels run scalar code, which calls the tile
//! routines one element at a time and does the exact ops inline), since the interpreter's
//! `std` transcendentals are not the tile routines'.
//!
//! The inputs mix special values (NaN, both zeros, both infinities, subnormals, ties of
//! rounding, values equal to the kernels' constants) with random ones, at row lengths around
//! the vector width, the assembled threshold (128) and the chunk (256), in `f32` and `f64`;
//! the bodies push the pass's limits (rows kept in registers, plan registers, NaN fix-ups of
//! `min`/`max` against literals and per-call values, values crossing routine calls).

use crate::common;

use common::assembled::*;
use rfx_codegen_cpu::CpuBackend;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayData, DType, Scalar};
use rfx_lower::{Backend, CompileOptions};

/// Runs the body `src` (with transcendentals) at each of `shapes` and checks every element's
/// bits against the same kernel run on that element alone (shape `[1]`, scalar inputs as they
/// are). Returns how many of the compiled kernels had an assembled pass.
fn matches_one_element_runs(
    rng: &mut TestRng,
    src: &str,
    dtype: DType,
    ins: &[In],
    shapes: &[Vec<usize>],
) -> usize {
    let one_text = instantiate(src, dt_name(dtype), &[1]);
    let one = CpuBackend
        .compile(
            &lir_of(&one_text),
            &CompileOptions {
                max_threads: Some(1),
                ..CompileOptions::default()
            },
        )
        .expect("compile one");
    let mut assembled = 0;
    for shape in shapes {
        let text = instantiate(src, dt_name(dtype), shape);
        let lir = lir_of(&text);
        if host_assembles() && assembled_passes(&lir) > 0 {
            assembled += 1;
        }
        let inputs = inputs(rng, dtype, ins, shape);
        let got = compile_and_run(&lir, &inputs);
        let n: usize = shape.iter().product();
        let mut want: Vec<Vec<Scalar>> = vec![Vec::with_capacity(n); got.len()];
        for i in 0..n {
            let alone: Vec<Array> = inputs
                .iter()
                .zip(ins)
                .map(|(a, kind)| match kind {
                    In::Scalar(_) | In::Values(_) => a.clone(),
                    In::Row => Array::new(
                        vec![1],
                        ArrayData::from_scalars(dtype, [a.get(i).expect("element")]).expect("one dtype"),
                    )
                    .expect("one"),
                })
                .collect();
            let views: Vec<_> = alone.iter().map(Array::view).collect();
            let outs = one.run_to_new(&views).expect("run one");
            for (k, o) in outs.iter().enumerate() {
                want[k].push(o.get(0).expect("one element"));
            }
        }
        check_bits(&text, &got, |k, i| want[k][i]);
    }
    assembled
}

/// Row lengths around the vector widths, the assembled threshold and the chunk.
fn lengths() -> Vec<Vec<usize>> {
    [127usize, 128, 129, 130, 255, 256, 257, 4097]
        .iter()
        .map(|&n| vec![n])
        .collect()
}

const DTYPES: [DType; 2] = [DType::F32, DType::F64];

#[test]
fn every_exact_op_in_one_body_matches_the_interpreter_at_ragged_lengths() {
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %k = const 1.5 : {dt}[]
 %a = mul %x, %y : {dt}[{S}]
 %b = add %a, %k : {dt}[{S}]
 %c = min %b, %x : {dt}[{S}]
 %d = max %c, %y : {dt}[{S}]
 %e = sub %d, %x : {dt}[{S}]
 %f = div %e, %y : {dt}[{S}]
 %g = sqrt %f : {dt}[{S}]
 %h = floor %e : {dt}[{S}]
 %i = ceil %f : {dt}[{S}]
 %j = round %x : {dt}[{S}]
 %l = rsqrt %y : {dt}[{S}]
 %m = recip %x : {dt}[{S}]
 %n = neg %g : {dt}[{S}]
 %o = abs %e : {dt}[{S}]
 %p = add %h, %i : {dt}[{S}]
 %q = sub %j, %l : {dt}[{S}]
 %r = mul %m, %n : {dt}[{S}]
 output p = %p
 output q = %q
 output r = %r
 output o = %o
 output d = %d
}";
    let mut rng = TestRng::new(7001);
    for dtype in DTYPES {
        let assembled = exact_matches_interpreter(&mut rng, src, dtype, &[In::Row, In::Row], &lengths());
        if host_assembles() {
            assert!(assembled > 0, "{dtype:?}: no assembled pass");
        }
    }
}

#[test]
fn rounding_ops_on_ties_and_huge_values_match_the_interpreter() {
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %h = const 0.5 : {dt}[]
 %a = add %x, %h : {dt}[{S}]
 %r = round %a : {dt}[{S}]
 %f = floor %a : {dt}[{S}]
 %c = ceil %a : {dt}[{S}]
 %rr = round %x : {dt}[{S}]
 %s = sub %r, %f : {dt}[{S}]
 %t = sub %c, %rr : {dt}[{S}]
 output r = %r
 output s = %s
 output t = %t
 output rr = %rr
}";
    let mut rng = TestRng::new(7002);
    for dtype in DTYPES {
        exact_matches_interpreter(&mut rng, src, dtype, &[In::Row], &lengths());
    }
}

/// Literal constants of `min`/`max`: zeros of both signs, NaN, infinities, a subnormal and
/// ordinary values.
const LITERALS: [&str; 9] = [
    "0.0", "-0.0", "1.5", "-1.5", "inf", "-inf", "nan", "3e-39", "1e-300",
];

#[test]
fn min_and_max_against_literals_keep_nans_and_signed_zeros() {
    let mut rng = TestRng::new(7003);
    for dtype in DTYPES {
        for lit in LITERALS {
            for op in ["min", "max"] {
                // The literal on either side; `neg` after it so the body has two ops (a body of
                // one op is not assembled) and keeps the result's sign and NaN.
                for (a, b) in [("%x", "%c"), ("%c", "%x")] {
                    let src = format!(
                        "kernel k {{
 %x = input x : {{dt}}[{{S}}]
 %y = input y : {{dt}}[{{S}}]
 %c = const {lit} : {{dt}}[]
 %m = {op} {a}, {b} : {{dt}}[{{S}}]
 %n = neg %m : {{dt}}[{{S}}]
 %o = {op} %y, %m : {{dt}}[{{S}}]
 output n = %n
 output m = %m
 output o = %o
}}"
                    );
                    let shapes = [vec![128], vec![131], vec![257]];
                    let assembled =
                        exact_matches_interpreter(&mut rng, &src, dtype, &[In::Row, In::Row], &shapes);
                    if host_assembles() {
                        assert_eq!(assembled, shapes.len(), "{src}: not assembled");
                    }
                }
            }
        }
    }
}

#[test]
fn min_and_max_against_per_call_scalars_keep_nans_and_signed_zeros() {
    let mut rng = TestRng::new(7004);
    for dtype in DTYPES {
        for v in [0.0, -0.0, f64::NAN, 1.5, f64::INFINITY, -2.5] {
            for op in ["min", "max"] {
                for (a, b) in [("%x", "%c"), ("%c", "%x")] {
                    let src = format!(
                        "kernel k {{
 %x = input x : {{dt}}[{{S}}]
 %c = input c : {{dt}}[]
 %m = {op} {a}, {b} : {{dt}}[{{S}}]
 %n = neg %m : {{dt}}[{{S}}]
 output n = %n
 output m = %m
}}"
                    );
                    exact_matches_interpreter(
                        &mut rng,
                        &src,
                        dtype,
                        &[In::Row, In::Scalar(v)],
                        &[vec![129], vec![300]],
                    );
                }
            }
        }
    }
}

#[test]
fn clamps_against_literal_and_per_call_bounds_match_the_interpreter() {
    let mut rng = TestRng::new(7005);
    let bounds = [
        ("0.0", "1.0"),
        ("-0.0", "0.0"),
        ("-1.0", "-0.0"),
        ("-inf", "nan"),
        ("-1.5", "1.5"),
    ];
    for dtype in DTYPES {
        for (lo, hi) in bounds {
            let src = format!(
                "kernel k {{
 %e = input e : {{dt}}[{{S}}]
 %i = input i : {{dt}}[{{S}}]
 %kp = const 1.2 : {{dt}}[]
 %lo = const {lo} : {{dt}}[]
 %hi = const {hi} : {{dt}}[]
 %a = mul %kp, %e : {{dt}}[{{S}}]
 %s = add %a, %i : {{dt}}[{{S}}]
 %u = clamp %s, %lo, %hi : {{dt}}[{{S}}]
 %w = clamp %e, %lo, %hi : {{dt}}[{{S}}]
 output u = %u
 output w = %w
}}"
            );
            exact_matches_interpreter(&mut rng, &src, dtype, &[In::Row, In::Row], &lengths());
        }
        for (lo, hi) in [
            (0.0, 1.0),
            (-0.0, 0.0),
            (f64::NAN, 1.0),
            (-1.0, f64::NAN),
            (-0.0, -0.0),
        ] {
            let src = "kernel k {
 %e = input e : {dt}[{S}]
 %lo = input lo : {dt}[]
 %hi = input hi : {dt}[]
 %kp = const 1.2 : {dt}[]
 %a = mul %kp, %e : {dt}[{S}]
 %u = clamp %a, %lo, %hi : {dt}[{S}]
 %w = clamp %e, %lo, %hi : {dt}[{S}]
 output u = %u
 output w = %w
}";
            exact_matches_interpreter(
                &mut rng,
                src,
                dtype,
                &[In::Row, In::Scalar(lo), In::Scalar(hi)],
                &[vec![128], vec![257]],
            );
        }
    }
}

/// A body of `ins` input rows and `outs` output rows: each output a short chain of exact ops
/// over two or three of the inputs.
fn many_rows(ins: usize, outs: usize) -> String {
    let mut lines: Vec<String> = (0..ins)
        .map(|k| format!("%x{k} = input x{k} : {{dt}}[{{S}}]"))
        .collect();
    lines.push("%c = const 0.25 : {dt}[]".to_string());
    let mut outputs = Vec::new();
    for o in 0..outs {
        let (a, b, c) = (o % ins, (o + 1) % ins, (o + 2) % ins);
        lines.push(format!("%p{o} = mul %x{a}, %x{b} : {{dt}}[{{S}}]"));
        lines.push(format!("%q{o} = sub %p{o}, %x{c} : {{dt}}[{{S}}]"));
        lines.push(format!("%r{o} = max %q{o}, %c : {{dt}}[{{S}}]"));
        outputs.push(format!("output o{o} = %r{o}"));
    }
    // Every input is read.
    if ins > outs + 2 {
        let mut acc = "%x0".to_string();
        for k in 1..ins {
            lines.push(format!("%s{k} = add {acc}, %x{k} : {{dt}}[{{S}}]"));
            acc = format!("%s{k}");
        }
        let last = outputs.len() - 1;
        outputs[last] = format!("output o{last} = {acc}");
    }
    format!(
        "kernel k {{\n {}\n {}\n}}",
        lines.join("\n "),
        outputs.join("\n ")
    )
}

#[test]
fn bodies_of_many_rows_match_the_interpreter() {
    let mut rng = TestRng::new(7006);
    // 4 rows (all caller-saved), 5 (the first callee-saved), 8, 9, 10 (the limit), 11 (over it).
    for (ins, outs) in [(2, 2), (3, 2), (4, 4), (6, 3), (9, 1), (5, 5), (7, 3), (8, 3)] {
        let src = many_rows(ins, outs);
        let kinds = vec![In::Row; ins];
        for dtype in DTYPES {
            let assembled =
                exact_matches_interpreter(&mut rng, &src, dtype, &kinds, &[vec![129], vec![257], vec![1029]]);
            if host_assembles() && ins + outs <= 10 {
                assert_eq!(assembled, 3, "{src}: not assembled");
            }
        }
    }
}

/// A body with `live` values alive at once: `v_k = x * c_k + y` for each, then their sum.
fn many_live(live: usize) -> String {
    let mut lines = vec![
        "%x = input x : {dt}[{S}]".to_string(),
        "%y = input y : {dt}[{S}]".to_string(),
    ];
    for k in 0..live {
        lines.push(format!("%c{k} = const {}.5 : {{dt}}[]", k + 1));
        lines.push(format!("%m{k} = mul %x, %c{k} : {{dt}}[{{S}}]"));
        lines.push(format!("%v{k} = sub %m{k}, %y : {{dt}}[{{S}}]"));
    }
    let mut acc = "%v0".to_string();
    for k in 1..live {
        let op = ["add", "min", "max", "mul"][k % 4];
        lines.push(format!("%a{k} = {op} {acc}, %v{k} : {{dt}}[{{S}}]"));
        acc = format!("%a{k}");
    }
    format!(
        "kernel k {{\n {}\n output out = {acc}\n output first = %v0\n}}",
        lines.join("\n ")
    )
}

#[test]
fn bodies_with_many_live_values_match_the_interpreter() {
    let mut rng = TestRng::new(7007);
    for live in [3, 5, 6, 7, 8, 10, 14] {
        let src = many_live(live);
        for dtype in DTYPES {
            exact_matches_interpreter(
                &mut rng,
                &src,
                dtype,
                &[In::Row, In::Row],
                &[vec![128], vec![259], vec![1000]],
            );
        }
    }
}

#[test]
fn two_dimensional_exact_bodies_run_one_pass_per_row() {
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %k = const -0.0 : {dt}[]
 %a = mul %x, %y : {dt}[{S}]
 %b = max %a, %k : {dt}[{S}]
 %c = sub %b, %x : {dt}[{S}]
 %d = round %c : {dt}[{S}]
 output b = %b
 output d = %d
}";
    let mut rng = TestRng::new(7008);
    for dtype in DTYPES {
        let shapes = [vec![3, 300], vec![2, 129], vec![5, 257], vec![4, 128]];
        let assembled = exact_matches_interpreter(&mut rng, src, dtype, &[In::Row, In::Row], &shapes);
        if host_assembles() {
            assert_eq!(assembled, shapes.len(), "{dtype:?}: not assembled");
        }
    }
}

/// Lengths for bodies with routines (chunked passes run at any length): around the vector
/// width and the chunk.
fn routine_lengths() -> Vec<Vec<usize>> {
    [1usize, 9, 128, 255, 256, 257, 515, 1030, 4111]
        .iter()
        .map(|&n| vec![n])
        .collect()
}

#[test]
fn a_value_computed_before_a_routine_is_read_after_it() {
    // `%a` crosses the `sin` (read by the last exact run), `%b` is read by `sin` and by two
    // exact runs, `%k` is read in every exact run.
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %k = const 1.5 : {dt}[]
 %a = mul %x, %k : {dt}[{S}]
 %b = sub %a, %y : {dt}[{S}]
 %s = sin %b : {dt}[{S}]
 %c = add %s, %a : {dt}[{S}]
 %d = min %c, %b : {dt}[{S}]
 %e = exp %d : {dt}[{S}]
 %f = mul %e, %a : {dt}[{S}]
 %g = max %f, %k : {dt}[{S}]
 %h = sub %g, %b : {dt}[{S}]
 output h = %h
 output c = %c
}";
    let mut rng = TestRng::new(7009);
    for dtype in DTYPES {
        let assembled =
            matches_one_element_runs(&mut rng, src, dtype, &[In::Row, In::Row], &routine_lengths());
        if host_assembles() {
            assert!(assembled > 0, "{dtype:?}: no assembled pass");
        }
    }
}

#[test]
fn a_value_read_by_two_routines_and_routines_reading_constants() {
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %c = const 1.25 : {dt}[]
 %z = const -0.0 : {dt}[]
 %a = mul %x, %y : {dt}[{S}]
 %b = abs %a : {dt}[{S}]
 %p = pow %b, %c : {dt}[{S}]
 %t = atan2 %c, %b : {dt}[{S}]
 %u = atan2 %a, %z : {dt}[{S}]
 %q = add %p, %t : {dt}[{S}]
 %r = max %q, %z : {dt}[{S}]
 %v = sub %r, %u : {dt}[{S}]
 %w = pow %c, %x : {dt}[{S}]
 %o = min %v, %w : {dt}[{S}]
 output o = %o
 output r = %r
 output a = %a
}";
    let mut rng = TestRng::new(7010);
    for dtype in DTYPES {
        matches_one_element_runs(&mut rng, src, dtype, &[In::Row, In::Row], &routine_lengths());
    }
}

#[test]
fn routines_reading_per_call_scalars() {
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %c = input c : {dt}[]
 %a = add %x, %c : {dt}[{S}]
 %p = pow %x, %c : {dt}[{S}]
 %t = atan2 %c, %a : {dt}[{S}]
 %m = min %p, %c : {dt}[{S}]
 %q = add %m, %t : {dt}[{S}]
 output q = %q
 output m = %m
}";
    let mut rng = TestRng::new(7011);
    for dtype in DTYPES {
        for v in [2.0, 0.0, -0.0, f64::NAN, -1.5] {
            matches_one_element_runs(
                &mut rng,
                src,
                dtype,
                &[In::Row, In::Scalar(v)],
                &[vec![9], vec![257], vec![600]],
            );
        }
    }
}

#[test]
fn routine_results_stored_directly_and_chained_routines() {
    // `sin` straight into an output, `exp` of `cos`, a routine of an input row, two routines
    // in a row with nothing exact between them.
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %s = sin %x : {dt}[{S}]
 %c = cos %y : {dt}[{S}]
 %e = exp %c : {dt}[{S}]
 %t = tanh %e : {dt}[{S}]
 %a = add %t, %x : {dt}[{S}]
 %l = log %a : {dt}[{S}]
 output s = %s
 output l = %l
 output e = %e
}";
    let mut rng = TestRng::new(7012);
    for dtype in DTYPES {
        matches_one_element_runs(&mut rng, src, dtype, &[In::Row, In::Row], &routine_lengths());
    }
}

/// Seven input rows summed in one exact run before an `exp`, then five of them read again
/// after it, into two outputs; with `sum_out`, the sum is an output too (eight rows in the
/// first run: more than a segment keeps in registers).
fn rows_around_a_routine(sum_out: bool) -> String {
    let mut lines: Vec<String> = (0..7)
        .map(|k| format!("%x{k} = input x{k} : {{dt}}[{{S}}]"))
        .collect();
    let mut acc = "%x0".to_string();
    for k in 1..7 {
        lines.push(format!("%s{k} = add {acc}, %x{k} : {{dt}}[{{S}}]"));
        acc = format!("%s{k}");
    }
    lines.push(format!("%e = exp {acc} : {{dt}}[{{S}}]"));
    lines.push("%f = mul %e, %x0 : {dt}[{S}]".to_string());
    lines.push("%g = sub %f, %x1 : {dt}[{S}]".to_string());
    lines.push("%h = min %g, %x2 : {dt}[{S}]".to_string());
    lines.push("%i = max %h, %x3 : {dt}[{S}]".to_string());
    lines.push("%j = add %i, %x4 : {dt}[{S}]".to_string());
    let extra = if sum_out {
        format!("\n output s = {acc}")
    } else {
        String::new()
    };
    format!(
        "kernel k {{\n {}\n output j = %j\n output h = %h{extra}\n}}",
        lines.join("\n ")
    )
}

#[test]
fn segments_of_seven_and_eight_rows_around_a_routine() {
    let mut rng = TestRng::new(7013);
    for sum_out in [false, true] {
        let src = rows_around_a_routine(sum_out);
        for dtype in DTYPES {
            let assembled =
                matches_one_element_runs(&mut rng, &src, dtype, &[In::Row; 7], &[vec![130], vec![513]]);
            if host_assembles() && !sum_out {
                assert_eq!(assembled, 2, "{src}: not assembled");
            }
        }
    }
}

#[test]
fn routine_bodies_with_many_live_values() {
    // Values computed before a `sin` and all read after it: many crossing buffers and
    // registers, beyond the assembled pass's register limit for the larger counts.
    for live in [4, 8, 12] {
        let mut lines = vec![
            "%x = input x : {dt}[{S}]".to_string(),
            "%y = input y : {dt}[{S}]".to_string(),
        ];
        for k in 0..live {
            lines.push(format!("%c{k} = const {}.25 : {{dt}}[]", k + 1));
            lines.push(format!("%v{k} = mul %x, %c{k} : {{dt}}[{{S}}]"));
        }
        lines.push("%s = sin %y : {dt}[{S}]".to_string());
        let mut acc = "%s".to_string();
        for k in 0..live {
            lines.push(format!("%a{k} = add {acc}, %v{k} : {{dt}}[{{S}}]"));
            acc = format!("%a{k}");
        }
        let src = format!("kernel k {{\n {}\n output out = {acc}\n}}", lines.join("\n "));
        let mut rng = TestRng::new(7014 + live as u64);
        for dtype in DTYPES {
            matches_one_element_runs(
                &mut rng,
                &src,
                dtype,
                &[In::Row, In::Row],
                &[vec![255], vec![700]],
            );
        }
    }
}

#[test]
fn two_dimensional_bodies_with_routines_run_one_pass_per_row() {
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %k = const 2.0 : {dt}[]
 %a = mul %x, %k : {dt}[{S}]
 %s = sin %a : {dt}[{S}]
 %b = add %s, %y : {dt}[{S}]
 %c = max %b, %a : {dt}[{S}]
 output c = %c
 output a = %a
}";
    let mut rng = TestRng::new(7020);
    for dtype in DTYPES {
        matches_one_element_runs(
            &mut rng,
            src,
            dtype,
            &[In::Row, In::Row],
            &[vec![3, 300], vec![2, 257], vec![4, 7]],
        );
    }
}

#[test]
fn min_and_max_against_values_computed_per_call() {
    // `%s` is a sum computed by an earlier kernel (read by the elementwise one as a per-call
    // value, not a literal): NaN, zero, its negation minus zero, infinity, an ordinary value.
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[4]
 %s = sum %y axes [0] : {dt}[]
 %z = neg %s : {dt}[]
 %m = max %x, %s : {dt}[{S}]
 %n = min %s, %x : {dt}[{S}]
 %p = min %x, %z : {dt}[{S}]
 %q = max %z, %x : {dt}[{S}]
 %a = add %m, %n : {dt}[{S}]
 %b = sub %p, %q : {dt}[{S}]
 output a = %a
 output b = %b
 output m = %m
 output n = %n
 output p = %p
 output q = %q
}";
    const SUMS: [&[f64]; 5] = [
        &[1.0, 2.0, -3.0, 0.0],
        &[1.0, f64::NAN, 2.0, 3.0],
        &[f64::INFINITY, 1.0, 2.0, 3.0],
        &[0.5, 0.25, 1.0, 0.25],
        &[-1.5, 0.0, 0.0, 0.0],
    ];
    let mut rng = TestRng::new(7021);
    for dtype in DTYPES {
        for sum in SUMS {
            exact_matches_interpreter(&mut rng, src, dtype, &[In::Row, In::Values(sum)], &lengths());
        }
    }
}

#[test]
fn routines_after_a_reduction_read_its_value() {
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[4]
 %s = sum %y axes [0] : {dt}[]
 %a = max %x, %s : {dt}[{S}]
 %p = pow %a, %s : {dt}[{S}]
 %t = atan2 %s, %x : {dt}[{S}]
 %b = add %p, %t : {dt}[{S}]
 %c = min %b, %s : {dt}[{S}]
 output c = %c
 output a = %a
}";
    const SUMS: [&[f64]; 3] = [
        &[1.0, 2.0, -3.0, 0.0],
        &[1.0, f64::NAN, 2.0, 3.0],
        &[0.5, 0.25, 1.0, 0.25],
    ];
    let mut rng = TestRng::new(7022);
    for dtype in DTYPES {
        for sum in SUMS {
            matches_one_element_runs(
                &mut rng,
                src,
                dtype,
                &[In::Row, In::Values(sum)],
                &[vec![9], vec![257], vec![600]],
            );
        }
    }
}

#[test]
fn long_rows_split_across_threads_keep_their_bits() {
    // Rows long enough for several threads, each calling the pass on its part of the row
    // (parts that need not start on a vector or a chunk boundary).
    let exact = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %k = const -0.0 : {dt}[]
 %a = mul %x, %y : {dt}[{S}]
 %b = max %a, %k : {dt}[{S}]
 %c = min %b, %x : {dt}[{S}]
 output c = %c
 output b = %b
}";
    let with_routine = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %k = const 2.0 : {dt}[]
 %a = mul %x, %k : {dt}[{S}]
 %s = sin %a : {dt}[{S}]
 %b = add %s, %a : {dt}[{S}]
 %c = min %b, %y : {dt}[{S}]
 output c = %c
}";
    let mut rng = TestRng::new(7023);
    for dtype in DTYPES {
        for n in [200_003usize, 1 << 20] {
            let text = instantiate(exact, dt_name(dtype), &[n]);
            let lir = lir_of(&text);
            let inputs = inputs(&mut rng, dtype, &[In::Row, In::Row], &[n]);
            let got = compile_and_run_on(&lir, &inputs, None);
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let want = run_lir(&lir, &views, Mode::Native).expect("interpreter");
            check_bits(&text, &got, |k, i| want[k].get(i).expect("want"));
            // With a routine: the threads' results against one thread's.
            let text = instantiate(with_routine, dt_name(dtype), &[n]);
            let lir = lir_of(&text);
            let got = compile_and_run_on(&lir, &inputs, None);
            let want = compile_and_run(&lir, &inputs);
            check_bits(&text, &got, |k, i| want[k].get(i).expect("want"));
        }
    }
}

#[test]
fn same_operand_twice_and_outputs_that_copy_inputs() {
    // Exact steps and routines reading one value twice, a value stored to two outputs, an
    // input stored unchanged, without and with a routine in the body.
    let exact = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %a = mul %x, %x : {dt}[{S}]
 %b = min %a, %a : {dt}[{S}]
 %c = max %y, %y : {dt}[{S}]
 %d = sub %b, %c : {dt}[{S}]
 %e = div %d, %d : {dt}[{S}]
 output e = %e
 output d1 = %d
 output d2 = %d
 output x = %x
}";
    let mut rng = TestRng::new(7024);
    for dtype in DTYPES {
        exact_matches_interpreter(&mut rng, exact, dtype, &[In::Row, In::Row], &lengths());
    }
    let with_routines = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %a = abs %x : {dt}[{S}]
 %p = pow %a, %a : {dt}[{S}]
 %t = atan2 %y, %y : {dt}[{S}]
 %m = min %p, %p : {dt}[{S}]
 %d = add %m, %t : {dt}[{S}]
 output d1 = %d
 output d2 = %d
 output y = %y
 output t = %t
}";
    for dtype in DTYPES {
        matches_one_element_runs(
            &mut rng,
            with_routines,
            dtype,
            &[In::Row, In::Row],
            &routine_lengths(),
        );
    }
}

const ROUTINE_UNARY: [&str; 6] = ["sin", "cos", "exp", "log", "tanh", "atan"];
const ROUTINE_BINARY: [&str; 2] = ["pow", "atan2"];
const EXACT_UNARY: [&str; 8] = ["neg", "abs", "sqrt", "rsqrt", "recip", "floor", "ceil", "round"];
const EXACT_BINARY: [&str; 6] = ["add", "sub", "mul", "div", "min", "max"];

/// A random body of exact ops and routines over three input rows and four constants (zeros of
/// both signs among them), values read long after they are computed, and three outputs.
fn mixed_chain(rng: &mut TestRng) -> String {
    let mut lines = vec![
        "%x = input x : {dt}[{S}]".to_string(),
        "%y = input y : {dt}[{S}]".to_string(),
        "%w = input w : {dt}[{S}]".to_string(),
        "%c0 = const 0.0 : {dt}[]".to_string(),
        "%c1 = const -0.0 : {dt}[]".to_string(),
        "%c2 = const 1.5 : {dt}[]".to_string(),
        "%c3 = const -2.0 : {dt}[]".to_string(),
    ];
    let mut values: Vec<String> = ["%x", "%y", "%w"].iter().map(|s| s.to_string()).collect();
    let consts = ["%c0", "%c1", "%c2", "%c3"];
    let steps = 6 + rng.below(8);
    for k in 0..steps {
        let a = values[rng.below(values.len())].clone();
        let b = if rng.below(3) == 0 {
            consts[rng.below(consts.len())].to_string()
        } else {
            values[rng.below(values.len())].clone()
        };
        let (a, b) = if rng.below(2) == 0 { (a, b) } else { (b, a) };
        let name = format!("%v{k}");
        let line = match rng.below(8) {
            0 => format!(
                "{name} = {} {a} : {{dt}}[{{S}}]",
                ROUTINE_UNARY[rng.below(ROUTINE_UNARY.len())]
            ),
            1 => format!(
                "{name} = {} {a}, {b} : {{dt}}[{{S}}]",
                ROUTINE_BINARY[rng.below(ROUTINE_BINARY.len())]
            ),
            2 | 3 => format!(
                "{name} = {} {a} : {{dt}}[{{S}}]",
                EXACT_UNARY[rng.below(EXACT_UNARY.len())]
            ),
            _ => format!(
                "{name} = {} {a}, {b} : {{dt}}[{{S}}]",
                EXACT_BINARY[rng.below(EXACT_BINARY.len())]
            ),
        };
        // A unary op of a constant alone is not a row: keep to rows.
        if a.starts_with("%c") && !line.contains(", ") {
            continue;
        }
        if a.starts_with("%c") && b.starts_with("%c") {
            continue;
        }
        lines.push(line);
        values.push(name);
    }
    // At least one routine.
    let last = values.last().cloned().unwrap_or_default();
    lines.push(format!("%s = exp {last} : {{dt}}[{{S}}]"));
    lines.push("%o = min %s, %x : {dt}[{S}]".to_string());
    let early = values[3.min(values.len() - 1)].clone();
    let mid = values[values.len() / 2].clone();
    lines.push(format!("%p = max {early}, %o : {{dt}}[{{S}}]"));
    format!(
        "kernel k {{\n {}\n output o = %o\n output p = %p\n output mid = {mid}\n}}",
        lines.join("\n ")
    )
}

#[test]
fn generated_bodies_of_routines_and_exact_ops_keep_their_bits() {
    let mut rng = TestRng::new(7025);
    for case in 0..120 {
        let dtype = DTYPES[case % 2];
        let src = mixed_chain(&mut rng);
        matches_one_element_runs(
            &mut rng,
            &src,
            dtype,
            &[In::Row, In::Row, In::Row],
            &[vec![9], vec![257], vec![600]],
        );
    }
}

/// A random body of exact ops over four input rows and literal constants (zeros of both
/// signs, NaN, infinity among them), long enough that many values are live at once, with
/// four outputs.
fn exact_chain(rng: &mut TestRng) -> String {
    let mut lines: Vec<String> = (0..4)
        .map(|k| format!("%x{k} = input x{k} : {{dt}}[{{S}}]"))
        .collect();
    let literals = ["0.0", "-0.0", "1.5", "-2.0", "nan", "inf", "0.75"];
    for (k, v) in literals.iter().enumerate() {
        lines.push(format!("%c{k} = const {v} : {{dt}}[]"));
    }
    let mut values: Vec<String> = (0..4).map(|k| format!("%x{k}")).collect();
    let steps = 8 + rng.below(16);
    for k in 0..steps {
        let a = values[rng.below(values.len())].clone();
        let b = if rng.below(3) == 0 {
            format!("%c{}", rng.below(literals.len()))
        } else {
            values[rng.below(values.len())].clone()
        };
        let (a, b) = if rng.below(2) == 0 { (a, b) } else { (b, a) };
        let name = format!("%v{k}");
        if rng.below(3) == 0 {
            let a = if a.starts_with("%c") { b } else { a };
            lines.push(format!(
                "{name} = {} {a} : {{dt}}[{{S}}]",
                EXACT_UNARY[rng.below(EXACT_UNARY.len())]
            ));
        } else {
            lines.push(format!(
                "{name} = {} {a}, {b} : {{dt}}[{{S}}]",
                EXACT_BINARY[rng.below(EXACT_BINARY.len())]
            ));
        }
        values.push(name);
    }
    let n = values.len();
    let outs: Vec<String> = [n - 1, n - 2, 4 + rng.below(n - 4), 4 + rng.below(n - 4)]
        .iter()
        .enumerate()
        .map(|(k, &i)| format!("output o{k} = {}", values[i]))
        .collect();
    format!("kernel k {{\n {}\n {}\n}}", lines.join("\n "), outs.join("\n "))
}

#[test]
fn generated_exact_bodies_keep_the_interpreters_bits() {
    let mut rng = TestRng::new(7026);
    for case in 0..150 {
        let dtype = DTYPES[case % 2];
        let src = exact_chain(&mut rng);
        exact_matches_interpreter(
            &mut rng,
            &src,
            dtype,
            &[In::Row; 4],
            &[vec![128], vec![131], vec![263]],
        );
    }
}

/// A `[rows, n]` array of `dtype` with the values of `f(i)` at flat index `i`.
fn array_of(dtype: DType, shape: &[usize], f: impl Fn(usize) -> f64) -> Array {
    let n: usize = shape.iter().product();
    Array::new(
        shape.to_vec(),
        ArrayData::from_scalars(dtype, (0..n).map(|i| Scalar::from_f64(dtype, f(i)))).expect("one dtype"),
    )
    .expect("array")
}

#[test]
fn broadcast_and_transposed_operands_of_two_dimensional_bodies() {
    // A row broadcast over the rows, a column broadcast along them, a transposed input: the
    // pass may read only contiguous rows, so each operand is either a row of the pass or
    // staged for it. Exact ops against the interpreter; with a routine, against the same body
    // on inputs broadcast and transposed beforehand.
    let body = |routine: bool| {
        let tail = if routine {
            " %s = sin %d : {dt}[{R}, {N}]\n %e = max %s, %b : {dt}[{R}, {N}]\n output e = %e\n"
        } else {
            " output d = %d\n"
        };
        format!(
            "kernel k {{
 %x = input x : {{dt}}[{{R}}, {{N}}]
 %r = input r : {{dt}}[{{N}}]
 %c = input c : {{dt}}[{{R}}, 1]
 %t = input t : {{dt}}[{{N}}, {{R}}]
 %rb = broadcast_to %r : {{dt}}[{{R}}, {{N}}]
 %cb = broadcast_to %c : {{dt}}[{{R}}, {{N}}]
 %tt = transpose %t perm [1, 0] : {{dt}}[{{R}}, {{N}}]
 %a = mul %x, %rb : {{dt}}[{{R}}, {{N}}]
 %b = min %a, %cb : {{dt}}[{{R}}, {{N}}]
 %d = sub %b, %tt : {{dt}}[{{R}}, {{N}}]
 output b = %b
{tail}}}"
        )
    };
    let plain = |routine: bool| {
        let tail = if routine {
            " %s = sin %d : {dt}[{R}, {N}]\n %e = max %s, %b : {dt}[{R}, {N}]\n output e = %e\n"
        } else {
            " output d = %d\n"
        };
        format!(
            "kernel k {{
 %x = input x : {{dt}}[{{R}}, {{N}}]
 %rb = input r : {{dt}}[{{R}}, {{N}}]
 %cb = input c : {{dt}}[{{R}}, {{N}}]
 %tt = input t : {{dt}}[{{R}}, {{N}}]
 %a = mul %x, %rb : {{dt}}[{{R}}, {{N}}]
 %b = min %a, %cb : {{dt}}[{{R}}, {{N}}]
 %d = sub %b, %tt : {{dt}}[{{R}}, {{N}}]
 output b = %b
{tail}}}"
        )
    };
    let mut rng = TestRng::new(7027);
    for dtype in DTYPES {
        for (rows, n) in [(3usize, 300usize), (2, 129), (5, 257)] {
            let fill = |src: &str| {
                src.replace("{dt}", dt_name(dtype))
                    .replace("{R}", &rows.to_string())
                    .replace("{N}", &n.to_string())
            };
            let x = row(&mut rng, dtype, &[rows, n]);
            let r = row(&mut rng, dtype, &[n]);
            let c = row(&mut rng, dtype, &[rows, 1]);
            let t = row(&mut rng, dtype, &[n, rows]);
            let get = |a: &Array, i: usize| a.get(i).expect("element").to_f64();
            let materialized = [
                x.clone(),
                array_of(dtype, &[rows, n], |i| get(&r, i % n)),
                array_of(dtype, &[rows, n], |i| get(&c, i / n)),
                array_of(dtype, &[rows, n], |i| get(&t, (i % n) * rows + i / n)),
            ];
            let inputs = [x, r, c, t];
            // Exact ops: the interpreter.
            let text = fill(&body(false));
            let lir = lir_of(&text);
            let got = compile_and_run(&lir, &inputs);
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let want = run_lir(&lir, &views, Mode::Native).expect("interpreter");
            check_bits(&text, &got, |k, i| want[k].get(i).expect("want"));
            // With a routine: the body on materialized inputs.
            let text = fill(&body(true));
            let got = compile_and_run(&lir_of(&text), &inputs);
            let want = compile_and_run(&lir_of(&fill(&plain(true))), &materialized);
            check_bits(&text, &got, |k, i| want[k].get(i).expect("want"));
        }
    }
}
