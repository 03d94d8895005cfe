//! Elementwise kernels of a few points (a small matrix, a short vector) are written out
//! without loops, at constant row pointers and vector positions, the points past the last
//! whole vector one by one (`STRAIGHT_BUDGET` in the emitter). Every shape around that limit,
//! with broadcast, transposed and index reads beside the row-major ones, in every dtype, must
//! give the LIR interpreter's bits, as must the looped kernels just past it.

mod common;

fn check(text: &str, seed: u64) {
    common::assert_bits_match_interpreter(text, 1, seed);
}

#[test]
fn small_matrices_written_out_keep_the_interpreters_bits() {
    let mut seed = 0;
    for dt in ["f32", "f64", "i32"] {
        for rows in 1..=9usize {
            for cols in 1..=9usize {
                // `x ∘ yᵀ + c` (a column broadcast along the rows) plus the column index: a
                // row-major, a transposed (strided), a broadcast and an index read per point,
                // and two outputs (the second a plain row-major copy of a product).
                let text = format!(
                    "kernel k {{\n %x = input x : {dt}[{rows},{cols}]\n %y = input y : {dt}[{cols},{rows}]\n \
                     %c = input c : {dt}[{rows},1]\n %yt = transpose %y perm [1,0] : {dt}[{rows},{cols}]\n \
                     %cb = broadcast_to %c : {dt}[{rows},{cols}]\n %i = iota axis 1 : {dt}[{rows},{cols}]\n \
                     %p = mul %x, %yt : {dt}[{rows},{cols}]\n %q = add %p, %cb : {dt}[{rows},{cols}]\n \
                     %o = add %q, %i : {dt}[{rows},{cols}]\n %d = mul %x, %x : {dt}[{rows},{cols}]\n \
                     output o = %o\n output d = %d\n}}"
                );
                seed += 1;
                check(&text, seed);
            }
        }
    }
}

#[test]
fn small_batches_of_rows_written_out_keep_the_interpreters_bits() {
    // Rank 3: the rows span two loop dims, so each row's pointers come from two indices.
    for dt in ["f32", "f64"] {
        for (a, b, cols) in [
            (2usize, 3usize, 3usize),
            (3, 2, 5),
            (2, 2, 2),
            (1, 4, 7),
            (4, 4, 4),
        ] {
            let text = format!(
                "kernel k {{\n %x = input x : {dt}[{a},{b},{cols}]\n %w = input w : {dt}[{a},{cols},{b}]\n \
                 %wt = transpose %w perm [0,2,1] : {dt}[{a},{b},{cols}]\n %i = iota axis 0 : {dt}[{a},{b},{cols}]\n \
                 %s = abs %x : {dt}[{a},{b},{cols}]\n %p = mul %s, %wt : {dt}[{a},{b},{cols}]\n \
                 %o = sub %p, %i : {dt}[{a},{b},{cols}]\n output o = %o\n}}"
            );
            check(&text, (a * 100 + b * 10 + cols) as u64);
        }
    }
}

#[test]
fn short_vectors_written_out_keep_the_interpreters_bits() {
    // One row (rank 1 and scalars): up to and past the written-out limit, with a scalar
    // broadcast and the index beside the row-major reads.
    for dt in ["f32", "f64", "i32"] {
        for n in (1..=20usize).chain([31, 33, 64, 65, 100, 130]) {
            let text = format!(
                "kernel k {{\n %x = input x : {dt}[{n}]\n %y = input y : {dt}[{n}]\n %s = input s : {dt}[]\n \
                 %sb = broadcast_to %s : {dt}[{n}]\n %i = iota axis 0 : {dt}[{n}]\n %p = mul %x, %y : {dt}[{n}]\n \
                 %q = sub %p, %sb : {dt}[{n}]\n %o = add %q, %i : {dt}[{n}]\n output o = %o\n}}"
            );
            check(&text, n as u64);
        }
        let text = format!(
            "kernel k {{\n %x = input x : {dt}[]\n %y = input y : {dt}[]\n %p = mul %x, %y : {dt}[]\n \
             %o = add %p, %x : {dt}[]\n output o = %o\n}}"
        );
        check(&text, 7);
    }
}

/// `x ∘ wᵀ + m - i` over `[lead.., rows, cols]`: a row-major read, a transposed (strided) one,
/// a small matrix shared by every unit (stride 0 along the leading dims), the index along the
/// first leading dim and along the columns.
fn batch_of_blocks(dt: &str, lead: &[usize], rows: usize, cols: usize) -> String {
    let dims = |tail: &[usize]| {
        let all: Vec<String> = lead.iter().chain(tail).map(usize::to_string).collect();
        format!("{dt}[{}]", all.join(","))
    };
    let (t, tw) = (dims(&[rows, cols]), dims(&[cols, rows]));
    let r = lead.len();
    let mut perm: Vec<usize> = (0..r).collect();
    perm.extend([r + 1, r]);
    let perm: Vec<String> = perm.iter().map(usize::to_string).collect();
    format!(
        "kernel k {{\n %x = input x : {t}\n %w = input w : {tw}\n %m = input m : {dt}[{rows},{cols}]\n \
         %wt = transpose %w perm [{}] : {t}\n %mb = broadcast_to %m : {t}\n \
         %i = iota axis 0 : {t}\n %j = iota axis {} : {t}\n %p = mul %x, %wt : {t}\n \
         %q = add %p, %mb : {t}\n %o1 = sub %q, %i : {t}\n %o = add %o1, %j : {t}\n \
         %d = mul %x, %x : {t}\n output o = %o\n output d = %d\n}}",
        perm.join(","),
        r + 1
    )
}

#[test]
fn batches_of_small_blocks_written_out_per_unit_keep_the_interpreters_bits() {
    // Many units of a small block (a batch of small matrices): one loop over the units, each
    // block written out. Blocks around the point limit (64) with whole and partial vectors,
    // units of one or two leading dims (the leading dims are the fewest whose block fits),
    // and batches large enough for the pool to split them.
    let mut seed = 1000;
    for dt in ["f32", "f64", "i32"] {
        for (lead, rows, cols) in [
            (&[2usize][..], 4usize, 4usize),
            (&[3], 2, 3),
            (&[17], 4, 2),
            (&[64], 1, 3),
            (&[5], 8, 8),
            (&[5], 9, 7),
            (&[7], 3, 17),
            (&[4, 3], 5, 5),
            (&[6, 5], 13, 5),
            (&[1000], 4, 4),
        ] {
            let text = batch_of_blocks(dt, lead, rows, cols);
            seed += 1;
            common::assert_bits_match_interpreter(&text, 1, seed);
        }
        // Split across threads: 20000 units of 4×4.
        let text = batch_of_blocks(dt, &[20000], 4, 4);
        common::assert_bits_match_interpreter(&text, 4, seed + 7);
    }
}

#[test]
fn a_batch_of_small_blocks_is_one_loop() {
    // 256 units of a 4×4 `f64` block: one loop over the units (one loop test), where a loop
    // over the 1024 rows would hold a loop over each row's positions too.
    let text = batch_of_blocks("f64", &[256], 4, 4);
    let kernel = rfx_ir::hir::parse(&text).expect("parse");
    let (mir, _) = rfx_opt::optimize(&kernel, &rfx_opt::OptConfig::default()).expect("optimize");
    let lir = rfx_lower::lower(&mir, &rfx_lower::LowerConfig::default())
        .expect("lower")
        .0;
    let dumps = rfx_codegen_cpu::dump(&lir).expect("dump");
    assert_eq!(dumps.len(), 1, "one kernel");
    let clif = &dumps[0].1;
    assert_eq!(clif.matches("brif").count(), 1, "one loop test:\n{clif}");
}

#[test]
fn batches_of_small_reductions_written_out_per_unit_keep_the_interpreters_bits() {
    // Many units of a few outputs, each reducing a short row (a batch of small matrix
    // products): each unit's outputs written out at constant columns, whole vectors and a
    // ragged end, the reduced points unrolled. Rows reduced along the last axis (contiguous)
    // and along the middle one (strided), every reduction op, every dtype.
    let mut seed = 5000;
    for dt in ["f32", "f64", "i32"] {
        for (units, rows, cols) in [
            (3usize, 3usize, 3usize),
            (100, 3, 3),
            (64, 5, 2),
            (33, 4, 4),
            (17, 9, 7),
            (50, 2, 16),
        ] {
            for (op, axis) in [
                ("sum", 2),
                ("max", 2),
                ("min", 1),
                ("sum", 1),
                ("prod", 2),
                ("mean", 1),
            ] {
                if op == "mean" && dt == "i32" {
                    continue;
                }
                let kept = if axis == 2 { rows } else { cols };
                let text = format!(
                    "kernel k {{\n %a = input a : {dt}[{units},{rows},{cols}]\n %v = input v : {dt}[{units},1,{cols}]\n \
                     %vb = broadcast_to %v : {dt}[{units},{rows},{cols}]\n %p = mul %a, %vb : {dt}[{units},{rows},{cols}]\n \
                     %s = {op} %p axes [{axis}] : {dt}[{units},{kept}]\n output s = %s\n}}"
                );
                seed += 1;
                common::assert_bits_match_interpreter(&text, 1, seed);
            }
        }
    }
}
