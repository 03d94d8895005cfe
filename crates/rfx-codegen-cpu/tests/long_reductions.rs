//! Long float reductions are blocked into leaves combined pairwise
//! (`rfx_ir::lir::ReduceLeaves`): the CPU gives the LIR interpreter's bits at every length
//! around the leaf size and on every loop shape (one row, rows cut into pieces, rows grouped
//! into leaves, strided columns, reductions that are not blocked beside ones that are), and the
//! error of a sum of 10⁷ values stays within the documented `O(log n)·u` bound (a sequential
//! `f32` sum of 10⁷ values of 0.1 is 1.1% off).

use rfx_codegen_cpu::CpuBackend;
use rfx_ir::hir::parse;
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::{LirProgram, REDUCE_LEAF_POINTS, ReduceLeaves};
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayData, Shape};
use rfx_lower::{Backend, LowerConfig, lower};
use rfx_opt::{OptConfig, optimize};

fn lir_of(text: &str, config: &LowerConfig) -> LirProgram {
    let kernel = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, config).expect("lower").0
}

fn run_cpu(lir: &LirProgram, inputs: &[Array]) -> Vec<Array> {
    let compiled = CpuBackend.compile(lir, &Default::default()).expect("compile");
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    compiled.run_to_new(&views).expect("run")
}

fn bits(a: &Array) -> Vec<u64> {
    (0..a.data().len())
        .map(|i| a.get(i).map_or(0, |s| s.to_f64().to_bits()))
        .collect()
}

fn random_input(dtype: &str, extents: &[usize], seed: u64, lo: f64, hi: f64) -> Array {
    let numel: usize = extents.iter().product();
    let mut rng = TestRng::new(seed);
    let xs: Vec<f64> = (0..numel).map(|_| rng.uniform(lo, hi)).collect();
    let data = if dtype == "f32" {
        ArrayData::F32(xs.iter().map(|&v| v as f32).collect())
    } else {
        ArrayData::F64(xs)
    };
    Array::new(Shape::new(extents.to_vec()), data).expect("input")
}

/// Every output of `text` on the CPU has the LIR interpreter's bits.
fn check_bits(text: &str, input: &Array, config: &LowerConfig) -> LirProgram {
    let lir = lir_of(text, config);
    let want = run_lir(&lir, &[input.view()], Mode::Native).expect("interpreter");
    let got = run_cpu(&lir, std::slice::from_ref(input));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(bits(g), bits(w), "output {i}\n{text}\n{lir}");
    }
    lir
}

/// Lengths around the leaf: 1, odd ones, a leaf less and more one, several leaves and a
/// ragged end, and `10⁵ + 7`.
fn lengths() -> Vec<usize> {
    let leaf = REDUCE_LEAF_POINTS;
    vec![
        1,
        7,
        leaf - 1,
        leaf,
        leaf + 1,
        2 * leaf - 1,
        2 * leaf + 3,
        3 * leaf,
        7 * leaf + 5,
        100_007,
    ]
}

#[test]
fn one_row_matches_the_interpreter_bit_for_bit() {
    for dtype in ["f32", "f64"] {
        for n in lengths() {
            // Sums, a mean and a product (of values near one) of one computed row, with a max
            // and an `i32` sum in the same kernel, which are not blocked.
            let text = format!(
                "kernel k {{\n %x = input x : {dtype}[{n}]\n %k = const 1.5 : {dtype}[]\n \
                 %v = mul %x, %k : {dtype}[{n}]\n %s = sum %v axes [0] : {dtype}[]\n \
                 %m = mean %x axes [0] : {dtype}[]\n %h = const 0.001 : {dtype}[]\n \
                 %one = const 1 : {dtype}[]\n %a = mul %x, %h : {dtype}[{n}]\n \
                 %b = add %a, %one : {dtype}[{n}]\n %p = prod %b axes [0] : {dtype}[]\n \
                 %mx = max %v axes [0] : {dtype}[]\n %i = cast %v : i32[{n}]\n \
                 %is = sum %i axes [0] : i32[]\n output s = %s\n output m = %m\n output p = %p\n \
                 output mx = %mx\n output is = %is\n}}"
            );
            let input = random_input(dtype, &[n], n as u64, -2.0, 2.0);
            check_bits(&text, &input, &LowerConfig::default());
        }
    }
}

/// The pairwise tree over the lanes (`rfx_ir::lir::reduce_lane_levels`) at lane counts whose
/// levels run in whole vectors, partly in vectors and then lane by lane (12 and 24 `f32`, 6
/// `f64`), or lane by lane only (3, 5): the CPU gives the interpreter's bits for sums, means,
/// products, maxima and `i32` sums, on rows shorter than the lanes, ragged and blocked.
#[test]
fn every_lane_count_combines_as_the_interpreter_does() {
    for dtype in ["f32", "f64"] {
        for lanes in [2u32, 3, 5, 6, 8, 12, 16, 24, 32] {
            for n in [1usize, 5, 37, 1000, 3 * REDUCE_LEAF_POINTS + 11] {
                let text = format!(
                    "kernel k {{\n %x = input x : {dtype}[{n}]\n %s = sum %x axes [0] : {dtype}[]\n \
                     %m = mean %x axes [0] : {dtype}[]\n %h = const 0.001 : {dtype}[]\n \
                     %one = const 1 : {dtype}[]\n %a = mul %x, %h : {dtype}[{n}]\n \
                     %b = add %a, %one : {dtype}[{n}]\n %p = prod %b axes [0] : {dtype}[]\n \
                     %mx = max %x axes [0] : {dtype}[]\n %k = const 1000 : {dtype}[]\n \
                     %y = mul %x, %k : {dtype}[{n}]\n %i = cast %y : i32[{n}]\n \
                     %is = sum %i axes [0] : i32[]\n output s = %s\n output m = %m\n output p = %p\n \
                     output mx = %mx\n output is = %is\n}}"
                );
                let input = random_input(dtype, &[n], u64::from(lanes) * 7919 + n as u64, -2.0, 2.0);
                let config = LowerConfig {
                    reduce_lanes: Some(lanes),
                    ..LowerConfig::default()
                };
                let lir = check_bits(&text, &input, &config);
                // (One point is no reduction after lowering: its axis is coalesced away.)
                assert!(
                    n == 1 || lir.kernels().iter().any(|k| k.schedule.reduce_lanes == lanes),
                    "lanes {lanes}\n{lir}"
                );
            }
        }
    }
}

/// A small reduction body runs several steps of its lanes per loop iteration, the steps left
/// one at a time, then the points left one by one: every length around those boundaries, with
/// an elementwise output stored beside the reductions (a value and its gradient) and rows of
/// a 2-D input, gives the interpreter's bits at every lane count.
#[test]
fn unrolled_reduction_steps_match_the_interpreter() {
    for dtype in ["f32", "f64"] {
        for lanes in [4u32, 8, 16, 32] {
            let step = lanes as usize;
            let mut lengths: Vec<usize> = (1..=step + 1).step_by(step.div_ceil(8)).collect();
            for k in [2, 4, 7, 8, 9, 17] {
                lengths.extend([k * step - 1, k * step, k * step + 1, k * step + step / 2]);
            }
            for n in lengths {
                let text = format!(
                    "kernel k {{\n %x = input x : {dtype}[{n}]\n %two = const 2 : {dtype}[]\n \
                     %sq = mul %x, %x : {dtype}[{n}]\n %s = sum %sq axes [0] : {dtype}[]\n \
                     %g = mul %x, %two : {dtype}[{n}]\n %mx = max %x axes [0] : {dtype}[]\n \
                     %h = const 0.001 : {dtype}[]\n %one = const 1 : {dtype}[]\n \
                     %a = mul %x, %h : {dtype}[{n}]\n %b = add %a, %one : {dtype}[{n}]\n \
                     %p = prod %b axes [0] : {dtype}[]\n output s = %s\n output g = %g\n \
                     output mx = %mx\n output p = %p\n}}"
                );
                let input = random_input(dtype, &[n], u64::from(lanes) * 104_729 + n as u64, -2.0, 2.0);
                let config = LowerConfig {
                    reduce_lanes: Some(lanes),
                    ..LowerConfig::default()
                };
                check_bits(&text, &input, &config);
            }
            for cols in [step - 1, 2 * step, 8 * step + 3] {
                let text = format!(
                    "kernel k {{\n %x = input x : {dtype}[3, {cols}]\n \
                     %sq = mul %x, %x : {dtype}[3, {cols}]\n %s = sum %sq axes [1] : {dtype}[3]\n \
                     output s = %s\n}}"
                );
                let input = random_input(dtype, &[3, cols], u64::from(lanes) + cols as u64, -2.0, 2.0);
                let config = LowerConfig {
                    reduce_lanes: Some(lanes),
                    ..LowerConfig::default()
                };
                check_bits(&text, &input, &config);
            }
        }
    }
}

#[test]
fn rows_pieces_groups_and_columns_match_the_interpreter() {
    let leaf = REDUCE_LEAF_POINTS;
    // (shape, axes, output shape): rows longer than a leaf beside leading points (pieces),
    // short rows grouped into leaves (two reduced dims that do not coalesce), and column sums
    // read with a stride (blocked with fewer columns than a vector; with more, the outputs fill
    // vector lanes and keep one sequential accumulator each).
    let mut blocked = 0;
    let cases: Vec<(Vec<usize>, &str, &str)> = vec![
        (vec![3, 2 * leaf + 5], "[1]", "[3]"),
        (vec![3, leaf + 1], "[1]", "[3]"),
        (vec![40, 3, 70], "[0, 2]", "[3]"),
        (vec![70, 3, 31], "[0, 2]", "[3]"),
        (vec![5, 7, 3, 300], "[0, 1, 3]", "[3]"),
        (vec![leaf + 9, 3], "[0]", "[3]"),
        (vec![3 * leaf, 5], "[0]", "[5]"),
    ];
    for dtype in ["f32", "f64"] {
        for (shape, axes, out) in &cases {
            let dims = shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
            let text = format!(
                "kernel k {{\n %x = input x : {dtype}[{dims}]\n %s = sum %x axes {axes} : {dtype}{out}\n \
                 %m = mean %x axes {axes} : {dtype}{out}\n %mx = min %x axes {axes} : {dtype}{out}\n \
                 output s = %s\n output m = %m\n output mx = %mx\n}}"
            );
            let input = random_input(dtype, shape, shape.iter().sum::<usize>() as u64, -1e3, 1e3);
            let lir = check_bits(&text, &input, &LowerConfig::default());
            // Every case is long enough to be blocked where it has partials.
            let k = lir
                .kernels()
                .iter()
                .find(|k| k.reduce_dims > 0)
                .expect("a reduction");
            let reduced: usize = k.dims[k.dims.len() - k.reduce_dims..].iter().product();
            assert!(reduced > leaf, "{text}");
            if k.schedule.reduce_lanes > 1 {
                let row = *k.dims.last().expect("dims");
                let leaves = ReduceLeaves::of(k.schedule.reduce_lanes, reduced / row, row);
                assert_ne!(leaves, ReduceLeaves::One, "{text}");
                blocked += 1;
            }
        }
    }
    // All but those whose outputs fill vector lanes: the column sums of 5 `f32` or 3 and 5 `f64`
    // columns, and the `f64` rows of 31 points beside 3 outputs (a matrix-vector shape).
    assert_eq!(blocked, 10);
}

/// The order depends on the LIR only: other vector widths (and so other lane counts) and
/// explicit lane counts that do not fill a vector still give the interpreter's bits.
#[test]
fn every_lane_count_matches_the_interpreter() {
    let n = 5 * REDUCE_LEAF_POINTS + 3;
    for dtype in ["f32", "f64"] {
        let text = format!(
            "kernel k {{\n %x = input x : {dtype}[{n}]\n %s = sum %x axes [0] : {dtype}[]\n output s = %s\n}}"
        );
        let input = random_input(dtype, &[n], 7, 0.0, 1.0);
        for lanes in [None, Some(2), Some(3), Some(4), Some(16), Some(32)] {
            for vector_bytes in [8, 16] {
                let config = LowerConfig {
                    reduce_lanes: lanes,
                    vector_bytes,
                    ..LowerConfig::default()
                };
                check_bits(&text, &input, &config);
            }
        }
    }
}

/// `u · (leaf / lanes + lanes + bit_length(leaves))`: the documented relative bound of a
/// blocked sum of non-negative values (first order in `u`).
fn blocked_bound(unit_roundoff: f64, lanes: usize, n: usize) -> f64 {
    let leaf = REDUCE_LEAF_POINTS.next_multiple_of(lanes);
    let leaves = n.div_ceil(leaf);
    let depth = rfx_ir::lir::reduce_stack_depth(leaves);
    unit_roundoff * (leaf / lanes + lanes + depth) as f64
}

/// `sum` and `mean` of 10⁷ `f32` values of 0.1 against the closed form in `f64`.
#[test]
fn ten_million_tenths_within_the_bound() {
    let n = 10_000_000usize;
    let tenth = 0.1f32;
    let text = format!(
        "kernel k {{\n %x = input x : f32[{n}]\n %s = sum %x axes [0] : f32[]\n \
         %m = mean %x axes [0] : f32[]\n output s = %s\n output m = %m\n}}"
    );
    let lir = lir_of(&text, &LowerConfig::default());
    let lanes = lir.kernels()[0].schedule.reduce_lanes as usize;
    let input = Array::new(Shape::new(vec![n]), ArrayData::F32(vec![tenth; n])).expect("input");
    let got = run_cpu(&lir, &[input]);
    let exact = f64::from(tenth) * n as f64;
    let bound = blocked_bound(f64::from(f32::EPSILON) / 2.0, lanes, n);
    let sum = got[0].get(0).expect("sum").to_f64();
    let mean = got[1].get(0).expect("mean").to_f64();
    let sum_error = (sum - exact).abs() / exact;
    let mean_error = (mean - f64::from(tenth)).abs() / f64::from(tenth);
    assert!(
        sum_error <= bound,
        "sum {sum}: relative error {sum_error:e} > {bound:e}"
    );
    // The mean divides the sum once more: one more rounding.
    let mean_bound = bound + f64::from(f32::EPSILON);
    assert!(
        mean_error <= mean_bound,
        "mean {mean}: relative error {mean_error:e} > {mean_bound:e}"
    );
    // The bound is about 10⁻⁵; a sequential sum is 1% off and a sum of one leaf's lanes only
    // (no tree) 0.1%: the tree is what keeps it small.
    assert!(bound < 2e-5, "{bound:e}");
    eprintln!(
        "sum {sum} (relative error {sum_error:.2e}), mean {mean} ({mean_error:.2e}), bound {bound:.2e}"
    );
}
