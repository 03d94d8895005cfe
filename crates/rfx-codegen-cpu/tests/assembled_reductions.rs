//! Assembled reduction passes (`crate::asm::assemble_reduction`): a float reduction whose body
//! is exact ops on contiguous rows runs its rows' whole vector steps as one assembled pass per
//! row or leaf, each reduction's partials carried in `ymm` accumulators, the points after the
//! last whole step, the lane tree and the leaf tree in the inline code. Every output must have
//! the LIR interpreter's bits (its lane order and leaves), whatever the pass does inside.
//!
//! The rows mix special values (NaN, both zeros, both infinities, subnormals) with random
//! ones, at lengths around the pass's threshold (128 points), the lanes, the leaf (2,048
//! points) and beyond, in `f32` and `f64`, on one thread and on two (a long sum then runs in
//! parts of its leaf tree).

use crate::common;

use common::assembled::*;
use rfx_ir::DType;
use rfx_ir::testgen::TestRng;
use rfx_lower::CompileOptions;

const DTYPES: [DType; 2] = [DType::F32, DType::F64];

fn shapes(lengths: &[usize]) -> Vec<Vec<usize>> {
    lengths.iter().map(|&n| vec![n]).collect()
}

/// The value and gradient of `sum(x²)` (rfx bench's `value_and_grad_sum_sq`): a sum and a
/// store in one body, at lengths around the threshold, the lanes and the leaves.
#[test]
fn a_sum_of_squares_and_its_gradient_match_the_interpreter() {
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %two = const 2.0 : {dt}[]
 %sq = mul %x, %x : {dt}[{S}]
 %s = sum %sq axes [0] : {dt}[]
 %g = mul %two, %x : {dt}[{S}]
 output s = %s
 output g = %g
}";
    let lengths = shapes(&[127, 128, 129, 143, 1024, 2047, 2048, 2049, 4111, 65_543]);
    let mut rng = TestRng::new(1);
    for dtype in DTYPES {
        let assembled = exact_matches_interpreter_on(&mut rng, src, dtype, &[In::Row], (&lengths, 1));
        if host_assembles() {
            // Every length from 128 on.
            assert_eq!(assembled, lengths.len() - 1, "{dtype:?}");
        }
    }
}

/// Sums, means, products, maxima and minima of a computed row holding NaNs, zeros of both
/// signs, infinities and subnormals: each op's fold (IEEE add and multiply, NumPy's NaN-keeping
/// minimum and maximum) in the interpreter's lane order.
#[test]
fn every_reduction_op_folds_special_values_as_the_interpreter() {
    let mut rng = TestRng::new(2);
    for op in ["sum", "mean", "prod", "max", "min"] {
        let src = format!(
            "kernel k {{
 %x = input x : {{dt}}[{{S}}]
 %y = input y : {{dt}}[{{S}}]
 %a = sub %x, %y : {{dt}}[{{S}}]
 %r = {op} %a axes [0] : {{dt}}[]
 output r = %r
}}"
        );
        for dtype in DTYPES {
            let lengths = shapes(&[128, 200, 1000, 2048 + 16, 5003]);
            let assembled =
                exact_matches_interpreter_on(&mut rng, &src, dtype, &[In::Row, In::Row], (&lengths, 1));
            if host_assembles() {
                assert_eq!(assembled, lengths.len(), "{op} {dtype:?}");
            }
        }
    }
}

/// Maxima and minima of a row with no NaN but zeros of both signs, ties and infinities, and of
/// a row compared with literals: the folds' ties keep the interpreter's operand.
#[test]
fn maxima_and_minima_of_ties_and_zeros_match_the_interpreter() {
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %z = const -0.0 : {dt}[]
 %c = max %x, %z : {dt}[{S}]
 %d = min %x, %z : {dt}[{S}]
 %hi = max %c axes [0] : {dt}[]
 %lo = min %d axes [0] : {dt}[]
 %n = neg %d : {dt}[{S}]
 %m = max %n axes [0] : {dt}[]
 output hi = %hi
 output lo = %lo
 output m = %m
}";
    let mut rng = TestRng::new(3);
    for dtype in DTYPES {
        let lengths = shapes(&[128, 129, 777, 4099]);
        let assembled = exact_matches_interpreter_on(&mut rng, src, dtype, &[In::Row], (&lengths, 1));
        if host_assembles() {
            assert_eq!(assembled, lengths.len(), "{dtype:?}");
        }
    }
}

/// Several reductions of different ops beside stores, with per-call scalars and a literal, in
/// one body: each reduction's accumulators apart, the stores the elementwise values.
#[test]
fn several_reductions_and_stores_in_one_body_match_the_interpreter() {
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %k = input k : {dt}[]
 %h = const 0.5 : {dt}[]
 %p = mul %x, %y : {dt}[{S}]
 %d = sum %p axes [0] : {dt}[]
 %ax = abs %x : {dt}[{S}]
 %inf = max %ax axes [0] : {dt}[]
 %ky = mul %k, %y : {dt}[{S}]
 %lo = min %ky axes [0] : {dt}[]
 %s = add %x, %y : {dt}[{S}]
 %t = mul %s, %h : {dt}[{S}]
 %m = mean %t axes [0] : {dt}[]
 output d = %d
 output inf = %inf
 output lo = %lo
 output m = %m
 output s = %s
 output t = %t
}";
    let mut rng = TestRng::new(4);
    for dtype in DTYPES {
        for k in [1.5, -0.0, f64::NAN] {
            let lengths = shapes(&[128, 301, 2049, 9000]);
            let ins = [In::Row, In::Row, In::Scalar(k)];
            let assembled = exact_matches_interpreter_on(&mut rng, src, dtype, &ins, (&lengths, 1));
            if host_assembles() {
                assert_eq!(assembled, lengths.len(), "{dtype:?} k = {k}");
            }
        }
    }
}

/// A matrix reduced along its rows (one output per row, a pass per row or per piece of a row
/// longer than a leaf) and whole (rows grouped into leaves).
#[test]
fn rows_of_a_matrix_match_the_interpreter() {
    let along = "kernel k {
 %x = input x : {dt}[{S}]
 %q = mul %x, %x : {dt}[{S}]
 %r = sum %q axes [1] : {dt}[3]
 %m = max %x axes [1] : {dt}[3]
 output r = %r
 output m = %m
}";
    let whole = "kernel k {
 %x = input x : {dt}[{S}]
 %q = mul %x, %x : {dt}[{S}]
 %r = sum %q axes [0, 1] : {dt}[]
 output r = %r
}";
    let mut rng = TestRng::new(5);
    for dtype in DTYPES {
        let rows: Vec<Vec<usize>> = [130usize, 1000, 2048, 3001].iter().map(|&c| vec![3, c]).collect();
        let assembled = exact_matches_interpreter_on(&mut rng, along, dtype, &[In::Row], (&rows, 1));
        let grouped: Vec<Vec<usize>> = vec![vec![40, 130], vec![17, 512], vec![5, 4100]];
        let whole_assembled = exact_matches_interpreter_on(&mut rng, whole, dtype, &[In::Row], (&grouped, 1));
        if host_assembles() {
            assert_eq!(assembled, rows.len(), "{dtype:?}");
            assert_eq!(whole_assembled, grouped.len(), "{dtype:?}");
        }
    }
}

/// A long sum on two threads runs in parts of its leaf tree (each part's leaves through the
/// pass), merged in the tree's order: the one-thread bits.
#[test]
fn a_long_sum_on_two_threads_matches_the_interpreter() {
    let src = "kernel k {
 %x = input x : {dt}[{S}]
 %y = input y : {dt}[{S}]
 %p = mul %x, %y : {dt}[{S}]
 %s = sum %p axes [0] : {dt}[]
 output s = %s
}";
    let mut rng = TestRng::new(6);
    for dtype in DTYPES {
        let lengths = shapes(&[300_007, 1 << 20]);
        let ins = [In::Row, In::Row];
        let assembled = exact_matches_interpreter_on(&mut rng, src, dtype, &ins, (&lengths, 2));
        if host_assembles() {
            assert_eq!(assembled, lengths.len(), "{dtype:?}");
        }
    }
}

/// Rows shorter than the threshold keep the inline code; so do reductions of other dtypes
/// beside the float ones, and bodies under fast math (no FMA step in a pass).
#[test]
fn short_rows_mixed_dtypes_and_fast_math_keep_the_inline_code() {
    if !host_assembles() {
        return;
    }
    let sum = |n: usize| {
        lir_of(&format!(
            "kernel k {{\n %x = input x : f32[{n}]\n %q = mul %x, %x : f32[{n}]\n \
             %s = sum %q axes [0] : f32[]\n output s = %s\n}}"
        ))
    };
    assert_eq!(assembled_passes(&sum(127)), 0);
    assert_eq!(assembled_passes(&sum(128)), 1);
    let mixed = lir_of(
        "kernel k {\n %x = input x : f32[1000]\n %s = sum %x axes [0] : f32[]\n \
         %i = cast %x : i32[1000]\n %t = sum %i axes [0] : i32[]\n output s = %s\n output t = %t\n}",
    );
    assert_eq!(assembled_passes(&mixed), 0);
    let fast = rfx_codegen_cpu::dump_with(
        &sum(1000),
        &CompileOptions {
            fast_math: true,
            ..CompileOptions::default()
        },
    )
    .expect("dump");
    assert!(fast.iter().all(|(_, _, asm)| !asm.contains("; assembled pass")));
}

/// More per-call scalars than a plan has registers (17 against 16), folded or stored beside a
/// row: no pass (the constants do not fit), the inline code, the interpreter's bits; never a
/// failed compile.
#[test]
fn more_constants_than_registers_keep_the_inline_code() {
    let mut rng = TestRng::new(7);
    for reduce in [true, false] {
        let mut lines = vec![" %x = input x : {dt}[{S}]".to_string()];
        let mut ins = vec![In::Row];
        lines.push(if reduce {
            " %t = sum %x axes [0] : {dt}[]\n output t = %t".to_string()
        } else {
            " %t = neg %x : {dt}[{S}]\n output t = %t".to_string()
        });
        for i in 0..17 {
            lines.push(format!(" %k{i} = input k{i} : {{dt}}[]"));
            lines.push(format!(" %b{i} = broadcast_to %k{i} : {{dt}}[{{S}}]"));
            lines.push(if reduce {
                format!(" %s{i} = max %b{i} axes [0] : {{dt}}[]\n output s{i} = %s{i}")
            } else {
                format!(" output s{i} = %b{i}")
            });
            ins.push(In::Scalar(f64::from(i) - 8.5));
        }
        let src = format!("kernel k {{\n{}\n}}", lines.join("\n"));
        for dtype in DTYPES {
            let assembled = exact_matches_interpreter_on(&mut rng, &src, dtype, &ins, (&shapes(&[1000]), 1));
            assert_eq!(assembled, 0, "{src}");
        }
    }
}

/// A pass with one routine step lists all its code, the short chunk after the last whole
/// block included (it comes before the epilogue's `ret`, where the listing stops).
#[test]
fn a_block_by_block_pass_lists_its_tail() {
    if !host_assembles() {
        return;
    }
    let lir = lir_of(
        "kernel k {\n %x = input x : f32[1000]\n %y = input y : f32[1000]\n %c = const 2.0 : f32[]\n \
         %m = mul %x, %c : f32[1000]\n %s = sin %m : f32[1000]\n %o = add %s, %y : f32[1000]\n \
         output o = %o\n}",
    );
    let listing: String = rfx_codegen_cpu::dump(&lir)
        .expect("dump")
        .into_iter()
        .map(|(_, _, asm)| asm)
        .collect();
    let pass = listing
        .split("; assembled pass")
        .nth(1)
        .expect("one assembled pass");
    // The block entry's call in the loop and the tile routine's for the short chunk.
    assert_eq!(pass.matches("call").count(), 2, "{pass}");
    assert!(
        pass.matches("vaddss").count() >= 1,
        "the tail's scalar loop is listed: {pass}"
    );
}
