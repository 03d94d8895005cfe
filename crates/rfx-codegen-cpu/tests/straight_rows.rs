//! Elementwise kernels of a few points (a small matrix, a short vector) are written out
//! without loops, at constant row pointers and vector positions, the points past the last
//! whole vector one by one (`STRAIGHT_BUDGET` in the emitter). Every shape around that limit,
//! with broadcast, transposed and index reads beside the row-major ones, in every dtype, must
//! give the LIR interpreter's bits, as must the looped kernels just past it.

use crate::common;

fn check(text: &str, seed: u64) {
    common::assert_bits_match_interpreter(text, 1, seed);
}

/// The LIR of `text`'s kernel, and the Cranelift IR of each of its kernels.
fn lir_and_clif(text: &str) -> (rfx_ir::lir::LirProgram, Vec<String>) {
    let kernel = rfx_ir::hir::parse(text).expect("parse");
    let (mir, _) = rfx_opt::optimize(&kernel, &rfx_opt::OptConfig::default()).expect("optimize");
    let lir = rfx_lower::lower(&mir, &rfx_lower::LowerConfig::default())
        .expect("lower")
        .0;
    let clif = rfx_codegen_cpu::dump(&lir)
        .expect("dump")
        .into_iter()
        .map(|(_, clif, _)| clif)
        .collect();
    (lir, clif)
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
    let (_, dumps) = lir_and_clif(&text);
    assert_eq!(dumps.len(), 1, "one kernel");
    let clif = &dumps[0];
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

/// A row of three built from computed parts, as `cross` and a state vector's concatenation
/// make it: `concat(a1·w2 - a2·w1, a0 / w0, a0·w1)` by pads, plus masks of the column index
/// (`i32`: `2i + 1 > 2`, `i >= 1 and i < 2`, `i == 0 or i == 2`) selecting among parts
/// whose unselected arms would give NaN (`sqrt` of negatives). Exactly rounded ops only, so
/// the bits must be the interpreter's.
fn built_rows(dt: &str, lead: &[usize]) -> String {
    let dims = |last: usize| {
        let all: Vec<String> = lead.iter().chain(&[last]).map(usize::to_string).collect();
        format!("[{}]", all.join(","))
    };
    let (d1, d3) = (dims(1), dims(3));
    let r = lead.len();
    let zeros = |last: usize| {
        let mut v = vec!["0".to_owned(); r];
        v.push(last.to_string());
        format!("[{}]", v.join(","))
    };
    let starts = |c: usize| zeros(c);
    let float = dt != "i32";
    let part2 = if float {
        format!("%p1 = div %a0, %w0 : {dt}{d1}\n")
    } else {
        format!("%p1 = mul %a0, %w0 : {dt}{d1}\n")
    };
    let masked = if float {
        format!("%q = sqrt %x : {dt}{d3}\n")
    } else {
        format!("%q = neg %x : {dt}{d3}\n")
    };
    format!(
        "kernel k {{\n %a = input a : {dt}{d3}\n %w = input w : {dt}{d3}\n \
         %a0 = slice %a starts {} : {dt}{d1}\n %a1 = slice %a starts {} : {dt}{d1}\n %a2 = slice %a starts {} : {dt}{d1}\n \
         %w0 = slice %w starts {} : {dt}{d1}\n %w1 = slice %w starts {} : {dt}{d1}\n %w2 = slice %w starts {} : {dt}{d1}\n \
         %m1 = mul %a1, %w2 : {dt}{d1}\n %m2 = mul %a2, %w1 : {dt}{d1}\n %p0 = sub %m1, %m2 : {dt}{d1}\n {part2} \
         %p2 = mul %a0, %w1 : {dt}{d1}\n \
         %x0 = pad %p0 low {} : {dt}{d3}\n %x1 = pad %p1 low {} : {dt}{d3}\n %x2 = pad %p2 low {} : {dt}{d3}\n \
         %s01 = add %x0, %x1 : {dt}{d3}\n %x = add %s01, %x2 : {dt}{d3}\n {masked} \
         %i = iota axis {r} : i32{d3}\n %one = const 1 : i32[]\n %two = const 2 : i32[]\n %zero = const 0 : i32[]\n \
         %i2 = mul %i, %two : i32{d3}\n %i21 = add %i2, %one : i32{d3}\n %c1 = gt %i21, %two : bool{d3}\n \
         %ge = ge %i, %one : bool{d3}\n %lt = lt %i, %two : bool{d3}\n %mid = and %ge, %lt : bool{d3}\n \
         %e0 = eq %i, %zero : bool{d3}\n %e2 = eq %i, %two : bool{d3}\n %ends = or %e0, %e2 : bool{d3}\n \
         %s1 = select %c1, %q, %x : {dt}{d3}\n %s2 = select %mid, %a, %s1 : {dt}{d3}\n %o = select %ends, %s2, %w : {dt}{d3}\n \
         output x = %x\n output o = %o\n}}",
        starts(0),
        starts(1),
        starts(2),
        starts(0),
        starts(1),
        starts(2),
        zeros(0),
        zeros(1),
        zeros(2),
    )
}

#[test]
fn written_out_positions_fold_their_index_masks_and_keep_the_interpreters_bits() {
    // Rows of three built from parts, one row (written out whole), a few (written out whole)
    // and many (one loop over the rows, each written out); rank 3 too.
    let mut seed = 7000;
    for dt in ["f32", "f64", "i32"] {
        for lead in [&[1usize][..], &[4], &[1024], &[7, 9], &[300, 2]] {
            let text = built_rows(dt, lead);
            seed += 1;
            common::assert_bits_match_interpreter(&text, 1, seed);
        }
    }
}

#[test]
fn a_written_out_position_loads_only_what_its_selected_arm_reads() {
    // Rows of three choosing `x` in column 0 and `y` elsewhere: at each (scalar) position
    // the select is decided, so a row loads three elements, not six.
    let text = "kernel k {\n %x = input x : f32[1024,3]\n %y = input y : f32[1024,3]\n \
                %i = iota axis 1 : i32[1024,3]\n %zero = const 0 : i32[]\n %c = eq %i, %zero : bool[1024,3]\n \
                %o = select %c, %x, %y : f32[1024,3]\n output o = %o\n}";
    common::assert_bits_match_interpreter(text, 1, 77);
    let (_, dumps) = lir_and_clif(text);
    assert_eq!(dumps.len(), 1, "one kernel");
    let clif = &dumps[0];
    assert_eq!(
        clif.matches("= load.f32").count(),
        3,
        "three loads per row:\n{clif}"
    );
    assert!(!clif.contains("select"), "no select left:\n{clif}");
}

/// Lookups by literal tables, as the closed-form inverses make them:
/// `x[t1] * x[t2] - x[t3] * x[t4]` along the last axis (flattened `[.., 9]` rows, `t*` literal index tables, one
/// index out of range on each side so the clamp shows), plus a literal scale read directly,
/// an identity mask (`i == j` of two indices, which differs between the lanes of a vector
/// position) and a lookup in a literal table by a literal index (a constant). With `clamped`
/// one table reads out of its row on each side.
fn lookups(dt: &str, lead: &[usize], clamped: bool) -> String {
    let dims = |tail: &[usize]| {
        let all: Vec<String> = lead.iter().chain(tail).map(usize::to_string).collect();
        format!("{dt}[{}]", all.join(","))
    };
    let (t9, t33) = (dims(&[9]), dims(&[3, 3]));
    let r = lead.len();
    let idx = if dt == "i32" { "i32" } else { dt };
    let table = |values: &[i32]| {
        let v: Vec<String> = values
            .iter()
            .map(|v| {
                if idx == "i32" {
                    v.to_string()
                } else {
                    format!("{v}.0")
                }
            })
            .collect();
        format!("literal [{}] : {idx}[9]", v.join(", "))
    };
    let scale = if dt == "i32" {
        "literal [1, -2, 3, 4, -5, 6, 7, 8, -9]".to_owned()
    } else {
        "literal [0.5, -1.25, 2.0, 4.0, -0.75, 1.5, 3.0, 0.25, -2.0]".to_owned()
    };
    format!(
        "kernel k {{\n %x = input x : {t9}\n \
         %t1 = {}\n %t2 = {}\n %t3 = {}\n %t4 = {}\n %s = {scale} : {dt}[9]\n \
         %b1 = broadcast_to %t1 : {idx}{}\n %b2 = broadcast_to %t2 : {idx}{}\n \
         %b3 = broadcast_to %t3 : {idx}{}\n %b4 = broadcast_to %t4 : {idx}{}\n %sb = broadcast_to %s : {t9}\n \
         %g1 = gather %x, %b1 axis {r} : {t9}\n %g2 = gather %x, %b2 axis {r} : {t9}\n \
         %g3 = gather %x, %b3 axis {r} : {t9}\n %g4 = gather %x, %b4 axis {r} : {t9}\n \
         %p = mul %g1, %g2 : {t9}\n %q = mul %g3, %g4 : {t9}\n %d = sub %p, %q : {t9}\n \
         %c = gather %sb, %b2 axis {r} : {t9}\n %o9 = mul %d, %c : {t9}\n %o = reshape %o9 : {t33}\n \
         %i = iota axis {r} : {t33}\n %j = iota axis {} : {t33}\n %e = eq %i, %j : bool{}\n \
         %xr = reshape %x : {t33}\n %one = const 1 : {dt}[]\n %zero = const 0 : {dt}[]\n \
         %eye = select %e, %one, %zero : {t33}\n %m = sub %eye, %xr : {t33}\n \
         output o = %o\n output m = %m\n}}",
        table(&[4, 7, 1, 5, 8, 2, 3, 6, 0]),
        table(&[8, 2, 5, 6, 0, 3, 7, 1, 4]),
        table(&[5, 8, 2, 3, 6, 0, 4, 7, 1]),
        table(&if clamped {
            [7, 1, 4, 8, 2, 5, 6, -3, 12]
        } else {
            [7, 1, 4, 8, 2, 5, 6, 0, 3]
        }),
        &dims(&[9])[dt.len()..],
        &dims(&[9])[dt.len()..],
        &dims(&[9])[dt.len()..],
        &dims(&[9])[dt.len()..],
        r + 1,
        &dims(&[3, 3])[dt.len()..],
    )
}

#[test]
fn literal_lookups_and_lane_masks_fold_and_keep_the_interpreters_bits() {
    // One row (written out whole: every index known, the gathers become loads at known
    // elements), a few, and many (one loop over the rows: the row's index is not known).
    let mut seed = 8000;
    for dt in ["f32", "f64", "i32"] {
        for lead in [&[1usize][..], &[2], &[700], &[3, 5]] {
            let text = lookups(dt, lead, true);
            seed += 1;
            common::assert_bits_match_interpreter(&text, 1, seed);
        }
    }
}

#[test]
fn a_written_out_lookup_at_known_elements_is_a_load() {
    // One 3×3 inverse's adjugate by literal tables: no index is computed at run time (no
    // conversion to an integer, no clamp), every gather reads a known element.
    let text = lookups("f32", &[1], true);
    let (lir, dumps) = lir_and_clif(&text);
    assert!(lir.to_string().contains("gather"), "the LIR gathers:\n{lir}");
    for clif in dumps {
        // Neither index conversions, clamps nor the identity's comparison: one `icmp`, the
        // test of the loop that runs the written-out code once.
        for op in ["fcvt_to_sint", "select", "fcmp", "bitselect"] {
            assert!(!clif.contains(op), "`{op}` left:\n{clif}");
        }
        assert_eq!(clif.matches("icmp").count(), 1, "{clif}");
    }
}

#[test]
fn a_batch_of_lookups_inside_their_rows_loads_past_each_rows_offset() {
    // 700 rows of 9 by in-range literal tables, `i32` and `f64` indices: at each written-out
    // position the index is the row's offset plus a known constant per lane, inside the
    // buffer at every row, so the gathers are loads at known displacements from the row's
    // pointer: no index conversion, no clamp, one comparison (the loop's test).
    for (seed, dt) in [(1, "i32"), (2, "f64")] {
        let text = lookups(dt, &[700], false);
        common::assert_bits_match_interpreter(&text, 1, seed);
        let (lir, dumps) = lir_and_clif(&text);
        let program = lir.to_string();
        let gathering: Vec<_> = program
            .split("  kernel ")
            .skip(1)
            .zip(&dumps)
            .filter(|(kernel, _)| kernel.contains("gather"))
            .map(|(_, clif)| clif)
            .collect();
        assert!(!gathering.is_empty(), "the LIR gathers:\n{program}");
        for clif in gathering {
            for op in ["fcvt_to_sint", "select"] {
                assert!(!clif.contains(op), "{dt}: `{op}` left:\n{clif}");
            }
            assert_eq!(clif.matches("icmp").count(), 1, "{dt}:\n{clif}");
        }
    }
}

/// A concatenation of `parts` scalars (`(k + 1) x - y` each), read as a value (multiplied by
/// the position, which differs from part to part, so the product is not stored part by part),
/// as tracing makes it: a chain of selects by position over pads.
fn concatenation_read_as_value(dt: &str, parts: usize) -> String {
    let mut text = format!(
        "kernel cat {{\n %x = input x : {dt}[1]\n %y = input y : {dt}[1]\n %i = iota axis 0 : {dt}[{parts}]\n"
    );
    for k in 0..parts {
        text += &format!(
            " %c{k} = const {}.0 : {dt}[]\n %m{k} = mul %x, %c{k} : {dt}[1]\n %s{k} = sub %m{k}, %y : {dt}[1]\n \
             %p{k} = pad %s{k} low [{k}] : {dt}[{parts}]\n",
            k + 1
        );
    }
    let mut chain = String::from("p0");
    for k in 1..parts {
        text += &format!(
            " %b{k} = const {k}.0 : {dt}[]\n %g{k} = ge %i, %b{k} : bool[{parts}]\n \
             %q{k} = select %g{k}, %p{k}, %{chain} : {dt}[{parts}]\n"
        );
        chain = format!("q{k}");
    }
    text += &format!(" %o = mul %{chain}, %i : {dt}[{parts}]\n output o = %o\n}}");
    text
}

#[test]
fn a_concatenation_read_as_a_value_is_written_out() {
    // Its comparisons of the position with each part's bound are decided where the position
    // is a constant, so they do not count against the written-out budget: nine parts of a
    // long select chain are written out (no loop beyond the one that runs the code once, no
    // float comparison left), with the interpreter's bits.
    for (seed, dt) in [(7100, "f64"), (7101, "f32")] {
        for parts in [2usize, 5, 9, 12] {
            let text = concatenation_read_as_value(dt, parts);
            common::assert_bits_match_interpreter(&text, 1, seed);
        }
        let text = concatenation_read_as_value(dt, 9);
        let (lir, dumps) = lir_and_clif(&text);
        assert_eq!(dumps.len(), 1, "one kernel:\n{lir}");
        let clif = &dumps[0];
        assert!(lir.to_string().contains("select"), "the LIR selects:\n{lir}");
        assert_eq!(clif.matches("brif").count(), 1, "one loop test:\n{clif}");
        assert!(!clif.contains("fcmp"), "a comparison left:\n{clif}");
    }
}
