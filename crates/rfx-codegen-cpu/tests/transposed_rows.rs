//! Reductions with their outputs in vector lanes read each output's row `w` points at a time
//! as one vector and transpose the `w × w` block (`Gen::transposed_rows`) instead of
//! gathering one element per output: every row length (whole chunks, a tail of single points,
//! unrolled and looped rows), dtype, reduction and thread split must give the LIR
//! interpreter's bits, with operands that are not transposed (a weight row shared by every
//! output, a scalar) beside the transposed ones.

use crate::common;

/// Checks the kernel `text` against the interpreter; returns whether it has a reduction with
/// its outputs in lanes.
fn check(text: &str, threads: usize, seed: u64) -> bool {
    let lir = common::assert_bits_match_interpreter(text, threads, seed);
    lir.kernels()
        .iter()
        .any(|k| k.reduce_dims > 0 && k.schedule.reduce_lanes == 1 && k.schedule.vector_width > 1)
}

#[test]
fn row_reductions_with_outputs_in_lanes_keep_the_interpreters_bits() {
    let mut across = 0;
    for dt in ["f32", "f64", "i32"] {
        for row in [1usize, 2, 3, 4, 5, 7, 8, 12, 16, 17, 20, 23, 32] {
            for outputs in [4usize, 5, 9, 67] {
                for (op, body) in [
                    ("sum", format!(" %v = mul %x, %w : {dt}[{outputs}, {row}]\n")),
                    ("max", format!(" %v = sub %x, %w : {dt}[{outputs}, {row}]\n")),
                ] {
                    let text = format!(
                        "kernel k {{\n %x = input x : {dt}[{outputs}, {row}]\n %w = input w : {dt}[{row}]\n\
                         {body} %r = {op} %v axes [1] : {dt}[{outputs}]\n output r = %r\n}}"
                    );
                    across += usize::from(check(&text, 1, (row * 100 + outputs) as u64));
                }
            }
        }
    }
    // Floats only from here: means, products, and rank 3 with an outer kept dim.
    for dt in ["f32", "f64"] {
        for row in [4usize, 6, 9, 18] {
            for op in ["mean", "prod", "min"] {
                let text = format!(
                    "kernel k {{\n %x = input x : {dt}[3, 10, {row}]\n %s = input s : {dt}[]\n \
                     %v = mul %x, %s : {dt}[3, 10, {row}]\n %r = {op} %v axes [2] : {dt}[3, 10]\n output r = %r\n}}"
                );
                across += usize::from(check(&text, 1, row as u64));
            }
        }
    }
    assert!(across >= 250, "only {across} kernels had their outputs in lanes");
}

#[test]
fn transposed_rows_split_across_threads() {
    for (dt, row) in [("f32", 12usize), ("f64", 20), ("f32", 19)] {
        let text = format!(
            "kernel k {{\n %x = input x : {dt}[40000, {row}]\n %v = mul %x, %x : {dt}[40000, {row}]\n \
             %r = sum %v axes [1] : {dt}[40000]\n output r = %r\n}}"
        );
        assert!(
            check(&text, 2, row as u64),
            "{dt} rows of {row}: outputs not in lanes"
        );
    }
}
