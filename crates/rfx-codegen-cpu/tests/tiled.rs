//! Kernels whose transcendentals run as ahead-of-time tile routines (CPUs with AVX2 and FMA):
//! values staged across routine calls (floats, booleans, nested calls, several outputs),
//! ragged last tiles, rows of higher-rank kernels and thread splits, plus a check that the
//! tiled code is really emitted.
//!
//! The reference is the interpreter in native precision (each op rounded to `f32`, each
//! transcendental computed in `f64` and rounded). The routines' own accuracy is tested in the
//! crate (`aot::tests`); here a transcendental's last-bit difference may be amplified by the
//! exact ops after it (`sin x + y` cancels), so an element passes within 4 ULP or within an
//! absolute error of `1e-6 (1 + m)^2`, `m` the element's largest input magnitude. A value
//! staged in the wrong cell or at the wrong width is off by far more.

use rfx_codegen_cpu::{CpuBackend, dump};
use rfx_ir::interp::Mode;
use rfx_ir::interp::run_lir;
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::{TestRng, random_inputs};
use rfx_ir::{Array, ArrayViewMut, DType, DataMut, Scalar, Shape};
use rfx_lower::ulps;
use rfx_lower::{Backend, CompileOptions, LowerConfig, Scratch, lower};
use rfx_opt::{OptConfig, optimize};

/// The CPU backend's documented bound for transcendental ops.
const BOUND_ULPS: u64 = 4;

fn tile_routines_linked() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

fn lir_of(src: &str) -> (rfx_ir::hir::Kernel, LirProgram) {
    let kernel = rfx_ir::hir::parse(src).expect("parse");
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    let lir = lower(&mir, &LowerConfig::default()).expect("lower").0;
    (kernel, lir)
}

/// Compiles `src` (with `N` replaced by each size) and compares every output with the
/// native-precision interpreter. Inputs include NaN, ±Inf, ±0, subnormals and huge values
/// unless `moderate` (then every float input is drawn from `[-20, 20]`).
fn check(src: &str, sizes: &[usize], threads: Option<usize>) {
    check_inputs(src, sizes, threads, false);
}

fn check_inputs(src: &str, sizes: &[usize], threads: Option<usize>, moderate: bool) {
    for &n in sizes {
        let text = src.replace("{N}", &n.to_string());
        let (kernel, lir) = lir_of(&text);
        let options = CompileOptions {
            max_threads: threads,
            ..CompileOptions::default()
        };
        let compiled = CpuBackend.compile(&lir, &options).expect("compile");
        for seed in 0..3u64 {
            let mut rng = TestRng::new(seed * 1000 + n as u64);
            let mut inputs = random_inputs(&mut rng, &kernel, if moderate { 0.0 } else { 0.05 });
            if moderate {
                for a in &mut inputs {
                    if let rfx_ir::DataMut::F64(v) = a.data_mut() {
                        for x in v.iter_mut() {
                            *x = (*x).clamp(-20.0, 20.0);
                        }
                    }
                }
            }
            let views: Vec<_> = inputs.iter().map(Array::view).collect();
            let oracle = run_lir(&lir, &views, Mode::Native).expect("interpreter");
            let scale: Vec<f64> = (0..inputs.first().map_or(0, |a| a.data().len()))
                .map(|i| {
                    inputs
                        .iter()
                        .filter(|a| a.data().len() == inputs.first().map_or(0, |a| a.data().len()))
                        .map(|a| a.get(i).map_or(0.0, |s| s.to_f64().abs()))
                        .filter(|m| m.is_finite())
                        .fold(0.0, f64::max)
                })
                .collect();
            // Each output is the front of a longer buffer whose tail holds a canary: a pass that
            // runs past the end of a short row would overwrite it.
            let shapes: Vec<Shape> = lir.outputs().map(|(_, _, ty)| ty.shape.clone()).collect();
            let mut padded: Vec<Array> = lir
                .outputs()
                .map(|(_, _, ty)| Array::filled(canary(ty.dtype), [ty.shape.numel() + PAD]))
                .collect();
            {
                let mut out_views: Vec<_> = padded
                    .iter_mut()
                    .zip(&shapes)
                    .map(|(a, shape)| {
                        ArrayViewMut::from_data(shape, front(a.data_mut(), shape.numel())).expect("view")
                    })
                    .collect();
                compiled
                    .run(&views, &mut out_views, &mut Scratch::new())
                    .expect("run");
            }
            for (a, shape) in padded.iter().zip(&shapes) {
                for i in shape.numel()..shape.numel() + PAD {
                    assert_eq!(
                        a.get(i),
                        Some(canary(a.dtype())),
                        "n = {n}: written past the end of an output\n{text}"
                    );
                }
            }
            let outputs: Vec<Array> = padded
                .iter()
                .zip(&shapes)
                .map(|(a, shape)| {
                    let values = (0..shape.numel()).filter_map(|i| a.get(i));
                    let data = rfx_ir::ArrayData::from_scalars(a.dtype(), values).expect("values");
                    Array::new(shape.clone(), data).expect("output")
                })
                .collect();
            for (o, g) in oracle.iter().zip(&outputs) {
                for i in 0..o.data().len() {
                    let want = o.get(i).map_or(f64::NAN, Scalar::to_f64);
                    let got = g.get(i).map_or(f64::NAN, Scalar::to_f64);
                    let d = ulps(got, want, g.dtype());
                    let m = scale.get(i % scale.len().max(1)).copied().unwrap_or(0.0);
                    let close = (got - want).abs() <= 1e-6 * (1.0 + m) * (1.0 + m);
                    assert!(
                        d <= BOUND_ULPS || close,
                        "n = {n}, seed {seed}, element {i}: oracle {want:e}, got {got:e} ({d} ULP)\n{text}"
                    );
                }
            }
        }
    }
}

const SIZES: [usize; 8] = [64, 65, 100, 511, 512, 513, 1000, 2051];

/// Short rows, which run in tiles from two elements on: shorter than one vector, than one pass
/// of four vectors (`f64` and `f32`), and ragged around them.
const SHORT: [usize; 14] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 33, 63];

/// The short rows and the tiled sizes.
fn sizes() -> Vec<usize> {
    SHORT.iter().chain(&SIZES).copied().collect()
}

/// Elements past each output's end that must stay untouched.
const PAD: usize = 64;

/// What the padding holds.
fn canary(dtype: DType) -> Scalar {
    match dtype {
        DType::F32 => Scalar::F32(-1234.5),
        DType::F64 => Scalar::F64(-1234.5),
        DType::I32 => Scalar::I32(-12345),
        DType::Bool => Scalar::Bool(true),
    }
}

/// The first `n` elements of `data`.
fn front(data: DataMut<'_>, n: usize) -> DataMut<'_> {
    match data {
        DataMut::Bool(v) => DataMut::Bool(&mut v[..n]),
        DataMut::I32(v) => DataMut::I32(&mut v[..n]),
        DataMut::F32(v) => DataMut::F32(&mut v[..n]),
        DataMut::F64(v) => DataMut::F64(&mut v[..n]),
    }
}

#[test]
fn one_routine_between_ops() {
    check(
        "kernel k {\n %x = input x : f32[{N}]\n %y = input y : f32[{N}]\n %two = const 2 : f32[]\n \
         %a = mul %x, %two : f32[{N}]\n %s = sin %a : f32[{N}]\n %o = add %s, %y : f32[{N}]\n output out = %o\n}",
        &sizes(),
        Some(1),
    );
}

#[test]
fn the_ten_op_chain_stages_values_across_three_routines() {
    let src = include_str!("../../rfx-ir/tests/corpus/hir/chain10.rfx").replace("65536", "{N}");
    check(&src, &sizes(), Some(1));
}

#[test]
fn booleans_and_nested_routines_cross_segments() {
    check(
        "kernel k {\n %x = input x : f32[{N}]\n %y = input y : f32[{N}]\n %z = const 0 : f32[]\n \
         %pos = gt %x, %z : bool[{N}]\n %c = cos %x : f32[{N}]\n %s = sin %c : f32[{N}]\n \
         %l = log %y : f32[{N}]\n %e = exp %l : f32[{N}]\n %o = select %pos, %s, %e : f32[{N}]\n \
         output out = %o\n output pos = %pos\n output c = %c\n}",
        &sizes(),
        Some(1),
    );
}

#[test]
fn integer_values_cross_a_routine() {
    check(
        "kernel k {\n %x = input x : f32[{N}]\n %i = input i : i32[{N}]\n %one = const 1 : i32[]\n \
         %j = add %i, %one : i32[{N}]\n %e = exp %x : f32[{N}]\n %f = cast %j : f32[{N}]\n \
         %o = mul %e, %f : f32[{N}]\n output out = %o\n output j = %j\n}",
        &sizes(),
        Some(1),
    );
}

#[test]
fn rows_of_a_broadcast_kernel_run_in_tiles() {
    check(
        "kernel k {\n %x = input x : f32[3, {N}]\n %y = input y : f32[{N}]\n \
         %s = sin %x : f32[3, {N}]\n %o = add %s, %y : f32[3, {N}]\n output out = %o\n}",
        &[64, 100, 700],
        Some(1),
    );
}

#[test]
fn threads_split_tiled_kernels() {
    check(
        "kernel k {\n %x = input x : f32[{N}]\n %y = input y : f32[{N}]\n \
         %s = sin %x : f32[{N}]\n %c = cos %y : f32[{N}]\n %o = mul %s, %c : f32[{N}]\n output out = %o\n}",
        &[300_001],
        Some(2),
    );
}

#[test]
fn short_rows_run_in_tiles_inside_their_outputs() {
    // One routine alone (direct arguments, from two elements on), and between ops (staged
    // values; one-vector passes below four vectors, inline code below one vector), in both
    // widths, in rows of a broadcast kernel too.
    for dtype in ["f32", "f64"] {
        check(
            &format!(
                "kernel k {{\n %x = input x : {dtype}[{{N}}]\n %s = sin %x : {dtype}[{{N}}]\n output out = %s\n}}"
            ),
            &SHORT,
            Some(1),
        );
        check(
            &format!(
                "kernel k {{\n %x = input x : {dtype}[4, {{N}}]\n %y = input y : {dtype}[{{N}}]\n \
                 %a = add %x, %y : {dtype}[4, {{N}}]\n %t = tanh %a : {dtype}[4, {{N}}]\n \
                 %e = exp %y : {dtype}[{{N}}]\n %o = mul %t, %e : {dtype}[4, {{N}}]\n output out = %o\n output a = %a\n}}"
            ),
            &SHORT,
            Some(1),
        );
        // Loop invariants (functions of a scalar input) are computed once, in the preamble,
        // by the routines.
        check(
            &format!(
                "kernel k {{\n %x = input x : {dtype}[{{N}}]\n %w = input w : {dtype}[]\n \
                 %s = sin %w : {dtype}[]\n %t = tanh %w : {dtype}[]\n %l = log %w : {dtype}[]\n \
                 %a = mul %x, %s : {dtype}[{{N}}]\n %b = add %a, %t : {dtype}[{{N}}]\n \
                 %o = sub %b, %l : {dtype}[{{N}}]\n output out = %o\n}}"
            ),
            &[1, 2, 7, 100],
            Some(1),
        );
    }
}

#[test]
fn f32_inverse_sine_and_cosine_run_between_ops() {
    // Two-link inverse kinematics: the elbow angle from the law of cosines, clamped into
    // [-1, 1] (acos of a computed value), and asin of an input (mostly outside [-1, 1]: NaN).
    check(
        "kernel k {\n %x = input x : f32[{N}]\n %y = input y : f32[{N}]\n %xx = mul %x, %x : f32[{N}]\n \
         %yy = mul %y, %y : f32[{N}]\n %r = add %xx, %yy : f32[{N}]\n %k = const 0.1 : f32[]\n \
         %c = mul %r, %k : f32[{N}]\n %lo = const -1 : f32[]\n %hi = const 1 : f32[]\n \
         %cc = clamp %c, %lo, %hi : f32[{N}]\n %q = acos %cc : f32[{N}]\n %a = asin %x : f32[{N}]\n \
         %o = add %q, %a : f32[{N}]\n output out = %o\n}",
        &sizes(),
        Some(1),
    );
}

#[test]
fn f64_routines_run_between_ops() {
    // Two-link planar arm kinematics in f64: staged operands, two routines per angle, direct
    // reads, every argument range (huge and non-finite ones take the routine's slow path).
    let arm = "kernel k {\n %q1 = input q1 : f64[{N}]\n %q2 = input q2 : f64[{N}]\n \
               %l = const 0.7 : f64[]\n %c1 = cos %q1 : f64[{N}]\n %s1 = sin %q1 : f64[{N}]\n \
               %q12 = add %q1, %q2 : f64[{N}]\n %c12 = cos %q12 : f64[{N}]\n %s12 = sin %q12 : f64[{N}]\n \
               %b = mul %l, %c12 : f64[{N}]\n %px = add %c1, %b : f64[{N}]\n %d = mul %l, %s12 : f64[{N}]\n \
               %py = add %s1, %d : f64[{N}]\n output px = %px\n output py = %py\n}";
    check(arm, &sizes(), Some(1));
    check(arm, &[300_001], Some(2));
    // A log barrier: log of a computed value, the result written directly.
    check(
        "kernel k {\n %x = input x : f64[{N}]\n %xx = mul %x, %x : f64[{N}]\n %one = const 1 : f64[]\n \
         %a = add %xx, %one : f64[{N}]\n %l = log %a : f64[{N}]\n output out = %l\n}",
        &sizes(),
        Some(1),
    );
    // A Gaussian cost term: exp of a computed value (staged), times an input.
    check(
        "kernel k {\n %x = input x : f64[{N}]\n %w = input w : f64[{N}]\n %xx = mul %x, %x : f64[{N}]\n \
         %n = neg %xx : f64[{N}]\n %e = exp %n : f64[{N}]\n %o = mul %e, %w : f64[{N}]\n output out = %o\n}",
        &sizes(),
        Some(1),
    );
    // Headings: a binary f64 routine (atan2) on two inputs, then atan of a computed value.
    let heading = "kernel k {\n %x = input x : f64[{N}]\n %w = input w : f64[{N}]\n \
                   %t = atan2 %x, %w : f64[{N}]\n %h = mul %x, %w : f64[{N}]\n %u = atan %h : f64[{N}]\n \
                   %o = add %t, %u : f64[{N}]\n output out = %o\n}";
    check(heading, &sizes(), Some(1));
    // Saturations: tanh and sigmoid of computed values.
    check(
        "kernel k {\n %x = input x : f64[{N}]\n %w = input w : f64[{N}]\n %h = mul %x, %w : f64[{N}]\n \
         %t = tanh %h : f64[{N}]\n %s = sigmoid %x : f64[{N}]\n %o = add %t, %s : f64[{N}]\n output out = %o\n}",
        &sizes(),
        Some(1),
    );
    // Joint angles from cosines and sines (asin, acos; random inputs are mostly outside
    // [-1, 1], so the slow path's NaN is checked too).
    check(
        "kernel k {\n %x = input x : f64[{N}]\n %w = input w : f64[{N}]\n %a = asin %x : f64[{N}]\n \
         %b = acos %w : f64[{N}]\n %o = sub %a, %b : f64[{N}]\n output out = %o\n}",
        &sizes(),
        Some(1),
    );
    // tan, exp2 and log2 of computed values and of inputs (every argument range).
    let bases = "kernel k {\n %x = input x : f64[{N}]\n %w = input w : f64[{N}]\n %k = const 0.3 : f64[]\n \
                 %a = mul %x, %k : f64[{N}]\n %t = tan %a : f64[{N}]\n %e = exp2 %w : f64[{N}]\n \
                 %xx = mul %x, %x : f64[{N}]\n %l = log2 %xx : f64[{N}]\n %s = add %t, %e : f64[{N}]\n \
                 %o = add %s, %l : f64[{N}]\n output out = %o\n}";
    check(bases, &sizes(), Some(1));
    check_inputs(bases, &sizes(), Some(1), true);
    // The tiled code of `bases`, `arm` (one `sincos` call per angle) and `heading` at 4096
    // points is pinned by the file tests (`tests/filetests/{bases_tan_exp2_log2,arm_sincos,
    // heading_atan2}.lir`).
}

#[test]
fn pow_runs_between_ops_in_both_widths() {
    // A cost term |e|^1.5 w on a computed base (staged) with an invariant exponent (broadcast
    // into a buffer before the tiles), and pow of two inputs (read directly;
    // random inputs bring negative bases with non-integer exponents, zeros, Inf and NaN, which
    // take the routine's slow path).
    for dt in ["f32", "f64"] {
        let cost = format!(
            "kernel k {{\n %x = input x : {dt}[{{N}}]\n %w = input w : {dt}[{{N}}]\n %p = const 1.5 : {dt}[]\n \
             %a = abs %x : {dt}[{{N}}]\n %e = pow %a, %p : {dt}[{{N}}]\n %o = mul %e, %w : {dt}[{{N}}]\n output out = %o\n}}"
        );
        check(&cost, &sizes(), Some(1));
        let direct = format!(
            "kernel k {{\n %x = input x : {dt}[{{N}}]\n %y = input y : {dt}[{{N}}]\n \
             %o = pow %x, %y : {dt}[{{N}}]\n output out = %o\n}}"
        );
        check(&direct, &sizes(), Some(1));
        check_inputs(&direct, &[4099], Some(1), true);
        // A discount factor 0.9^t: the invariant argument first, and split across threads.
        let discount = format!(
            "kernel k {{\n %t = input t : {dt}[{{N}}]\n %g = const 0.9 : {dt}[]\n \
             %o = pow %g, %t : {dt}[{{N}}]\n output out = %o\n}}"
        );
        check_inputs(&discount, &sizes(), Some(1), true);
        check_inputs(&discount, &[300_001], Some(2), true);
        // Rows: the invariant buffer is filled once, before the row loop.
        let rows = discount.replace("[{N}]", "[3, {N}]");
        check_inputs(&rows, &[64, 700], Some(1), true);
        // One routine call each at 4096 points: the file tests `pow_cost_*`, `pow_discount_*`.
    }
}

/// The `f64` `pow` routine runs fdlibm's operations in the inline code's order, so a tiled
/// kernel and a short (inline) one give the same bits wherever the routine's fast path holds
/// (results between `2^-1019` and `2^1019` in magnitude).
#[test]
fn f64_pow_tiles_equal_the_inline_code_bit_for_bit() {
    let compile = |n: usize| {
        let text = format!(
            "kernel k {{\n %x = input x : f64[{n}]\n %y = input y : f64[{n}]\n %o = pow %x, %y : f64[{n}]\n output out = %o\n}}"
        );
        let (_, lir) = lir_of(&text);
        let options = CompileOptions {
            max_threads: Some(1),
            ..CompileOptions::default()
        };
        CpuBackend.compile(&lir, &options).expect("compile")
    };
    const SHORT: usize = 32;
    const LONG: usize = SHORT * 128;
    let (short, long) = (compile(SHORT), compile(LONG));
    let mut rng = TestRng::new(0x9077);
    let mut next = move || {
        // Uniform in [0, 1) from the generator's random inputs' bits.
        rng.next_u64() as f64 / 2f64.powi(64)
    };
    let mut xs = Vec::with_capacity(LONG);
    let mut ys = Vec::with_capacity(LONG);
    for i in 0..LONG {
        let (x, y) = match i % 4 {
            0 => (20.0 * next(), 20.0 * next() - 10.0),
            1 => (-(10.0 * next()), (60.0 * next() - 30.0).round()),
            2 => (1.0 + 1e-6 * (next() - 0.5), 2e8 * (next() - 0.5)),
            _ => (1e-300 + 1e300 * next(), 4.0 * next() - 2.0),
        };
        xs.push(x);
        ys.push(y);
    }
    let run = |compiled: &dyn rfx_lower::Compiled, xs: &[f64], ys: &[f64]| {
        let shape = rfx_ir::Shape::new([xs.len()]);
        let mut out = vec![0.0f64; xs.len()];
        let inputs = [
            rfx_ir::ArrayView::new(&shape, xs).expect("view"),
            rfx_ir::ArrayView::new(&shape, ys).expect("view"),
        ];
        let mut outputs = [rfx_ir::ArrayViewMut::new(&shape, &mut out).expect("view")];
        compiled
            .run(&inputs, &mut outputs, &mut Scratch::new())
            .expect("run");
        out
    };
    let tiled = run(long.as_ref(), &xs, &ys);
    let mut compared = 0;
    for (k, chunk) in tiled.chunks(SHORT).enumerate() {
        let at = k * SHORT;
        let inline = run(short.as_ref(), &xs[at..at + SHORT], &ys[at..at + SHORT]);
        for (i, (&t, &s)) in chunk.iter().zip(&inline).enumerate() {
            // The routine hands results beyond 2^±1020 to glibc.
            if (2f64.powi(-1019)..2f64.powi(1019)).contains(&s.abs()) {
                assert_eq!(
                    t.to_bits(),
                    s.to_bits(),
                    "pow({:e}, {:e})",
                    xs[at + i],
                    ys[at + i]
                );
                compared += 1;
            }
        }
    }
    assert!(compared > LONG * 3 / 4, "only {compared} normal results");
}

/// Outside tiles (short loops, reductions) `pow` calls the routine on a vector's lanes, so a
/// short kernel gives a tiled kernel's bits, and a reduction of `pow` is right.
/// `pow` and `atan2` call their routines outside tiles too (one-element kernels, scalar code,
/// reductions), so every loop of every kernel gives the tiles' bits.
#[test]
fn binary_routines_outside_tiles_call_the_routine() {
    for (dt, op) in [("f32", "pow"), ("f64", "pow"), ("f32", "atan2"), ("f64", "atan2")] {
        let elementwise = "kernel k {\n %x = input x : {dt}[{N}]\n %y = input y : {dt}[{N}]\n \
                           %o = {op} %x, %y : {dt}[{N}]\n output out = %o\n}"
            .replace("{dt}", dt)
            .replace("{op}", op);
        check(&elementwise, &[1, 2, 3, 5, 16, 63], Some(1));
        let reduction = "kernel k {\n %x = input x : {dt}[{N}]\n %p = const 2.5 : {dt}[]\n \
                         %a = abs %x : {dt}[{N}]\n %e = {op} %a, %p : {dt}[{N}]\n \
                         %s = sum %e axes [0] : {dt}[]\n output out = %s\n}"
            .replace("{dt}", dt)
            .replace("{op}", op);
        check_inputs(&reduction, &[1, 7, 100, 1000], Some(1), true);
        if !tile_routines_linked() {
            continue;
        }
        // Both call the routine at 16 points: the file tests `short_{op}_{dt}` and
        // `short_sum_{op}_{dt}`.
        // Short and tiled kernels on the same moderate inputs: the same bits.
        let run = |n: usize, xs: &[f64], ys: &[f64]| -> Vec<u64> {
            let (_, lir) = lir_of(&elementwise.replace("{N}", &n.to_string()));
            let options = CompileOptions {
                max_threads: Some(1),
                ..CompileOptions::default()
            };
            let compiled = CpuBackend.compile(&lir, &options).expect("compile");
            let array = |v: &[f64]| {
                if dt == "f32" {
                    Array::from_slice(&v.iter().map(|&e| e as f32).collect::<Vec<_>>())
                } else {
                    Array::from_slice(v)
                }
            };
            let (x, y) = (array(xs), array(ys));
            let mut out = [Array::filled(Scalar::zero(x.dtype()), x.shape().clone())];
            {
                let mut views: Vec<_> = out.iter_mut().map(Array::view_mut).collect();
                compiled
                    .run(&[x.view(), y.view()], &mut views, &mut Scratch::new())
                    .expect("run");
            }
            (0..n)
                .map(|i| out[0].get(i).map_or(0, |v| v.to_f64().to_bits()))
                .collect()
        };
        let mut rng = TestRng::new(0x5407);
        let mut uniform = move || rng.next_u64() as f64 / 2f64.powi(64);
        let xs: Vec<f64> = (0..1024)
            .map(|i| if i % 5 == 0 { -3.0 } else { 10.0 * uniform() })
            .collect();
        let ys: Vec<f64> = (0..1024)
            .map(|i| if i % 5 == 0 { 3.0 } else { 8.0 * uniform() - 4.0 })
            .collect();
        let tiled = run(1024, &xs, &ys);
        for start in (0..1024).step_by(16) {
            let short = run(16, &xs[start..start + 16], &ys[start..start + 16]);
            assert_eq!(short, tiled[start..start + 16], "{dt} {op}, elements {start}..");
        }
        // One-element kernels (scalar code in the preamble).
        for i in 0..64 {
            let one = run(1, &xs[i..=i], &ys[i..=i]);
            assert_eq!(one, tiled[i..=i], "{dt} {op}, element {i} alone");
        }
    }
}

/// Calls without a result in CLIF text: the tile routines.
fn tile_calls(clif: &str) -> usize {
    clif.lines()
        .filter(|line| line.trim_start().starts_with("call fn"))
        .count()
}

// Which kernels call the routines, and how often (chain10's three; short rows from two elements
// on; a lone element in the preamble; a row shorter than a vector with ops around its routine
// as scalar code, a call per point) is pinned by the file tests (`tests/filetests/chain10.lir`,
// `tiny_*.lir`); that the baseline target calls none, by `tests/cpu_target.rs`.

#[test]
fn sin_and_cos_of_one_value_share_a_sincos_call() {
    for dt in ["f32", "f64"] {
        // Both results written straight into outputs.
        let direct = format!(
            "kernel k {{\n %x = input x : {dt}[{{N}}]\n %s = sin %x : {dt}[{{N}}]\n \
             %c = cos %x : {dt}[{{N}}]\n output s = %s\n output c = %c\n}}"
        );
        check(&direct, &sizes(), Some(1));
        // `cos` first, of a computed value; both results staged and read by later ops, one also
        // written out; ops between the two; LIR's schedule moves the `sin` after the first
        // result's last use, so the two staged values share a slot.
        let staged = format!(
            "kernel k {{\n %x = input x : {dt}[{{N}}]\n %y = input y : {dt}[{{N}}]\n \
             %a = add %x, %y : {dt}[{{N}}]\n %c = cos %a : {dt}[{{N}}]\n %k = const 0.7 : {dt}[]\n \
             %p = mul %c, %k : {dt}[{{N}}]\n %q = add %p, %y : {dt}[{{N}}]\n %s = sin %a : {dt}[{{N}}]\n \
             %m = mul %s, %k : {dt}[{{N}}]\n %r = sub %m, %x : {dt}[{{N}}]\n \
             output q = %q\n output r = %r\n output s = %s\n}}"
        );
        check(&staged, &sizes(), Some(1));
        check(&staged, &[300_001], Some(2));
        // A `sin` and a `cos` of different values do not pair.
        let apart = format!(
            "kernel k {{\n %x = input x : {dt}[{{N}}]\n %y = input y : {dt}[{{N}}]\n \
             %s = sin %x : {dt}[{{N}}]\n %c = cos %y : {dt}[{{N}}]\n %o = add %s, %c : {dt}[{{N}}]\n \
             output o = %o\n}}"
        );
        check(&apart, &sizes(), Some(1));
        // One `sincos` call for a pair (two for `apart`), in tiles and in the scalar code of a
        // one-element kernel: the file tests `sincos_{direct,staged,apart}_{f32,f64}_{4096,1}`.
    }
}

#[test]
fn routines_read_inputs_and_write_outputs_directly() {
    // Both direct: the routine reads `x` and writes `out` itself.
    check(
        "kernel k {\n %x = input x : f32[{N}]\n %s = sin %x : f32[{N}]\n output out = %s\n}",
        &sizes(),
        Some(1),
    );
    // The result is also used afterwards, so it is staged as well as stored; the argument is
    // also an operand of a later op.
    check(
        "kernel k {\n %x = input x : f32[{N}]\n %e = exp %x : f32[{N}]\n %o = add %e, %x : f32[{N}]\n \
         output e = %e\n output o = %o\n}",
        &sizes(),
        Some(1),
    );
    // A strided (broadcast) argument cannot be read directly.
    check(
        "kernel k {\n %x = input x : f32[2, 1]\n %z = input z : f32[2, {N}]\n \
         %c = cos %x : f32[2, 1]\n %o = add %c, %z : f32[2, {N}]\n output out = %o\n}",
        &[70, 600],
        Some(1),
    );
}

// A direct routine call (the routine reads `x` and writes `out` itself) leaves no staging
// copy: the file test `direct_sin` (one call, no stack slot).

#[test]
fn a_binary_routine_reads_two_arguments() {
    // atan2 of two inputs (both read directly), of computed values (both staged), and mixed.
    check(
        "kernel k {\n %y = input y : f32[{N}]\n %x = input x : f32[{N}]\n %a = atan2 %y, %x : f32[{N}]\n output out = %a\n}",
        &sizes(),
        Some(1),
    );
    check(
        "kernel k {\n %y = input y : f32[{N}]\n %x = input x : f32[{N}]\n %two = const 2 : f32[]\n \
         %d = mul %x, %two : f32[{N}]\n %s = sin %y : f32[{N}]\n %a = atan2 %s, %d : f32[{N}]\n \
         %b = atan2 %y, %d : f32[{N}]\n %o = add %a, %b : f32[{N}]\n output out = %o\n}",
        &sizes(),
        Some(1),
    );
    check(
        include_str!("../../rfx-ir/tests/corpus/hir/complementary_filter.rfx")
            .replace("[64]", "[{N}]")
            .as_str(),
        &sizes(),
        Some(1),
    );
}

/// Compiles `lir` for one thread and runs it on `inputs`.
fn run_cpu(lir: &LirProgram, inputs: &[Array]) -> Vec<Array> {
    run_cpu_on(lir, inputs, 1)
}

/// Compiles `lir` for up to `threads` threads and runs it on `inputs`.
fn run_cpu_on(lir: &LirProgram, inputs: &[Array], threads: usize) -> Vec<Array> {
    let options = CompileOptions {
        max_threads: Some(threads),
        ..CompileOptions::default()
    };
    let compiled = CpuBackend.compile(lir, &options).expect("compile");
    let mut outputs: Vec<Array> = lir
        .outputs()
        .map(|(_, _, ty)| Array::filled(canary(ty.dtype), ty.shape.clone()))
        .collect();
    {
        let views: Vec<_> = inputs.iter().map(Array::view).collect();
        let mut out_views: Vec<_> = outputs.iter_mut().map(Array::view_mut).collect();
        compiled
            .run(&views, &mut out_views, &mut Scratch::new())
            .expect("run");
    }
    outputs
}

/// `lir` with every reduction kernel's partial lanes set to `lanes`.
fn with_reduce_lanes(lir: &LirProgram, lanes: u32) -> LirProgram {
    let kernels = lir
        .kernels()
        .iter()
        .cloned()
        .map(|mut k| {
            if k.reduce_dims > 0 {
                k.schedule.reduce_lanes = lanes;
            }
            k
        })
        .collect();
    LirProgram::from_parts(
        lir.name(),
        lir.buffers().to_vec(),
        lir.arena_bytes(),
        lir.arena_align(),
        kernels,
    )
}

/// A reduction whose points run in tiles folds them in the untiled order: each output equals,
/// bit for bit, the interpreter's reduction (with the compiled kernel's partial lanes) of the
/// values the elementwise kernel computes with the same routines, at every row length (ragged
/// last tiles, a last tile too short for one pass, which borrows from the one before, rows of
/// rank-2 and rank-3 kernels, outer reduced rows), with elementwise outputs stored beside; and
/// so does a batch of short rows with its outputs in vector lanes (row sums, column sums), at
/// every batch size, and a short row reduced to one accumulator.
#[test]
fn reductions_fold_their_tiled_points_in_order() {
    // The reduced value `%v` of a log barrier (f64) and of a Gaussian term (f32), at shape `S`.
    let barrier = "%xx = mul %x, %x : f64[{S}]\n %k = const 0.25 : f64[]\n %q = mul %xx, %k : f64[{S}]\n \
                   %one = const 1 : f64[]\n %s = sub %one, %q : f64[{S}]\n %v = log %s : f64[{S}]";
    let gaussian = "%xx = mul %x, %x : f32[{S}]\n %k = const -0.5 : f32[]\n %q = mul %xx, %k : f32[{S}]\n \
                    %v = exp %q : f32[{S}]";
    let cases = [
        // A log barrier's cost and its terms, its largest term too.
        (
            "f64",
            "{N}",
            barrier,
            vec![("sum", "[0]", "[]"), ("max", "[0]", "[]")],
        ),
        // Gaussian likelihood rows: their sums and means.
        (
            "f32",
            "3, {N}",
            gaussian,
            vec![("sum", "[1]", "[3]"), ("mean", "[1]", "[3]")],
        ),
        // Two reduced dims (outer reduced rows), a routine reading the input directly.
        (
            "f32",
            "2, 3, {N}",
            "%v = sin %x : f32[{S}]",
            vec![("sum", "[1, 2]", "[2]"), ("min", "[1, 2]", "[2]")],
        ),
        // Batches of short rows, one accumulator per output and the outputs in vector lanes: a
        // group of outputs stages its whole rows.
        (
            "f32",
            "{N}, 12",
            gaussian,
            vec![("sum", "[1]", "[{N}]"), ("max", "[1]", "[{N}]")],
        ),
        ("f64", "{N}, 20", barrier, vec![("sum", "[1]", "[{N}]")]),
        // Rows of outputs under an outer kept dim; tiles of many groups, the last one short.
        (
            "f64",
            "2, {N}, 6",
            barrier,
            vec![("sum", "[2]", "[2, {N}]"), ("mean", "[2]", "[2, {N}]")],
        ),
        // Column sums: the outputs neighbour each other, the points lie a row apart.
        (
            "f32",
            "7, {N}",
            "%a = sin %x : f32[{S}]\n %v = mul %a, %x : f32[{S}]",
            vec![("sum", "[0]", "[{N}]"), ("mean", "[0]", "[{N}]")],
        ),
        // A `sin` and a `cos` of one value, paired into one `sincos` call, in batches of short
        // rows (outputs in lanes).
        (
            "f64",
            "{N}, 12",
            "%s = sin %x : f64[{S}]\n %c = cos %x : f64[{S}]\n %k = const 0.5 : f64[]\n \
             %a = mul %c, %k : f64[{S}]\n %v = add %s, %a : f64[{S}]",
            vec![("sum", "[1]", "[{N}]")],
        ),
        (
            "f32",
            "{N}, 40",
            "%c = cos %x : f32[{S}]\n %s = sin %x : f32[{S}]\n %v = mul %s, %c : f32[{S}]",
            vec![("sum", "[1]", "[{N}]"), ("max", "[1]", "[{N}]")],
        ),
        // Outputs in lanes whose rows do not fit a tile group (columns of 300 points, two
        // reduced dims): one output at a time, in tiles.
        (
            "f64",
            "300, {N}",
            "%v = exp %x : f64[{S}]",
            vec![("sum", "[0]", "[{N}]")],
        ),
        (
            "f32",
            "10, 8, {N}",
            "%s = sin %x : f32[{S}]\n %v = mul %s, %x : f32[{S}]",
            vec![("sum", "[0, 1]", "[{N}]"), ("max", "[0, 1]", "[{N}]")],
        ),
        // One output over a short or long row (a short row runs in tiles too, folding into one
        // accumulator).
        (
            "f32",
            "{N}",
            "%c = cos %x : f32[{S}]\n %s = sin %x : f32[{S}]\n %v = mul %s, %c : f32[{S}]",
            vec![("sum", "[0]", "[]"), ("max", "[0]", "[]")],
        ),
        (
            "f64",
            "3, {N}",
            "%k = const 0.3 : f64[]\n %a = mul %x, %k : f64[{S}]\n %t = tanh %a : f64[{S}]\n %v = add %t, %x : f64[{S}]",
            vec![("sum", "[1]", "[3]"), ("mean", "[1]", "[3]")],
        ),
        // `tanh` in f64 feeding a product of terms near one.
        (
            "f64",
            "{N}",
            "%k = const 0.001 : f64[]\n %a = mul %x, %k : f64[{S}]\n %t = tanh %a : f64[{S}]\n \
             %one = const 1 : f64[]\n %v = add %t, %one : f64[{S}]",
            vec![("prod", "[0]", "[]")],
        ),
    ];
    let sizes = [
        2usize, 3, 5, 8, 9, 17, 63, 64, 100, 511, 512, 513, 515, 1000, 1024, 1025, 1031, 2051, 5000,
    ];
    let mut tiled_kernels = 0;
    for (dt, dims, body, reduces) in &cases {
        for &n in &sizes {
            let shape = dims.replace("{N}", &n.to_string());
            let body = body.replace("{S}", &shape);
            let header = format!("kernel k {{\n %x = input x : {dt}[{shape}]\n {body}\n");
            // The reductions of `%v`, in the kernel and in the fold of its values.
            let reductions: String = reduces
                .iter()
                .enumerate()
                .map(|(i, (op, axes, out))| {
                    let out = out.replace("{N}", &n.to_string());
                    format!(" %r{i} = {op} %v axes {axes} : {dt}{out}\n output r{i} = %r{i}\n")
                })
                .collect();
            let reduced = format!("{header}{reductions} output v = %v\n}}");
            let elementwise = format!("{header} output v = %v\n}}");
            let folded = format!("kernel f {{\n %v = input v : {dt}[{shape}]\n{reductions}}}");
            let (_, lir) = lir_of(&reduced);
            let lanes = lir
                .kernels()
                .iter()
                .find(|k| k.reduce_dims > 0)
                .map(|k| k.schedule.reduce_lanes)
                .expect("a reduction kernel");
            if tile_routines_linked() && n >= 64 {
                let clif: String = dump(&lir).expect("dump").into_iter().map(|(_, c, _)| c).collect();
                assert!(tile_calls(&clif) >= 1, "n = {n}: no tile call\n{clif}");
                tiled_kernels += 1;
            }
            let mut rng = TestRng::new(n as u64 * 31 + reduces.len() as u64);
            let extents: Vec<usize> = shape
                .split(", ")
                .map(|d| d.parse::<usize>().expect("dim"))
                .collect();
            let numel: usize = extents.iter().product();
            let xs: Vec<f64> = (0..numel).map(|_| rng.uniform(-1.9, 1.9)).collect();
            let x = if *dt == "f32" {
                Array::from_slice(&xs.iter().map(|&v| v as f32).collect::<Vec<_>>())
            } else {
                Array::from_slice(&xs)
            };
            let x = Array::new(Shape::new(extents), x.data().clone()).expect("shaped input");
            let got = run_cpu(&lir, std::slice::from_ref(&x));
            let values = run_cpu(&lir_of(&elementwise).1, std::slice::from_ref(&x));
            let (_, fold) = lir_of(&folded);
            let fold = with_reduce_lanes(&fold, lanes);
            let views: Vec<_> = values.iter().map(Array::view).collect();
            let want = run_lir(&fold, &views, Mode::Native).expect("interpreter");
            let bits = |a: &Array| -> Vec<u64> {
                (0..a.data().len())
                    .map(|i| a.get(i).map_or(0, |s| s.to_f64().to_bits()))
                    .collect()
            };
            for (i, w) in want.iter().enumerate() {
                assert_eq!(
                    bits(&got[i]),
                    bits(w),
                    "{dt}[{shape}], r{i} (lanes {lanes})\n{reduced}"
                );
            }
            assert_eq!(bits(&got[reduces.len()]), bits(&values[0]), "{dt}[{shape}], v");
        }
    }
    if tile_routines_linked() {
        assert!(
            tiled_kernels >= 35,
            "only {tiled_kernels} reductions ran in tiles"
        );
    }
}

/// Calls of a tile routine on a tile: its element count is not the constant 1 (scalar code
/// calls the routines one element at a time).
fn tile_pass_calls(clif: &str) -> usize {
    clif.lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with("call fn"))
        .filter(|line| {
            let (call, comment) = line.split_once(';').unwrap_or((line, ""));
            let count = call
                .trim_end()
                .trim_end_matches(')')
                .rsplit([',', '('])
                .next()
                .unwrap_or("")
                .trim();
            !comment.split(',').any(|c| c.trim() == format!("{count} = 1"))
        })
        .count()
}

/// A row reduced to one accumulator (`reduce_lanes` 1: a short row, too few outputs to fill a
/// vector's lanes) runs in tiles too, from a vector's worth of points on (two with nothing but
/// the routine), folding its staged values into one partial; a row shorter than a vector with
/// ops around its routine keeps the inline code. The values are checked, bit for bit, in
/// `reductions_fold_their_tiled_points_in_order`.
#[test]
fn rows_reduced_to_one_accumulator_run_in_tiles() {
    let cases = [
        // (dtype, shape, body, axes, output shape, row lengths that run in tiles, that don't)
        (
            "f64",
            "{N}",
            "%v = tanh %x : f64[{S}]",
            "[0]",
            "[]",
            vec![2, 3, 5, 6],
            vec![],
        ),
        (
            "f32",
            "3, {N}",
            "%c = cos %x : f32[{S}]\n %s = sin %x : f32[{S}]\n %v = mul %s, %c : f32[{S}]",
            "[1]",
            "[3]",
            vec![4, 5, 7, 12],
            vec![2, 3],
        ),
    ];
    for (dt, shape, body, axes, out, tiled, inline) in cases {
        for (n, want_tiles) in tiled
            .iter()
            .map(|&n| (n, true))
            .chain(inline.iter().map(|&n| (n, false)))
        {
            let shape = shape.replace("{N}", &n.to_string());
            let text = format!(
                "kernel k {{\n %x = input x : {dt}[{shape}]\n {}\n %r = sum %v axes {axes} : {dt}{out}\n \
                 output r = %r\n}}",
                body.replace("{S}", &shape)
            );
            let (_, lir) = lir_of(&text);
            let lanes: Vec<u32> = lir.kernels().iter().map(|k| k.schedule.reduce_lanes).collect();
            assert_eq!(lanes, [1], "{dt}[{shape}]: one accumulator per output");
            let clif: String = dump(&lir).expect("dump").into_iter().map(|(_, c, _)| c).collect();
            let want = usize::from(want_tiles && tile_routines_linked());
            assert_eq!(tile_pass_calls(&clif), want, "{dt}[{shape}]\n{clif}");
        }
    }
}

/// Tiled reductions split across threads by their outputs: each thread stages its own tiles,
/// and the outputs keep the one-thread bits (long rows with partial lanes, and a batch of
/// short rows with its outputs in lanes).
#[test]
fn tiled_reductions_split_across_threads_keep_their_bits() {
    for (shape, axes, out) in [("64, 4096", "[1]", "[64]"), ("40000, 12", "[1]", "[40000]")] {
        let text = format!(
            "kernel k {{\n %x = input x : f32[{shape}]\n %s = sin %x : f32[{shape}]\n \
             %v = mul %s, %x : f32[{shape}]\n %r = sum %v axes {axes} : f32{out}\n output r = %r\n}}"
        );
        let (_, lir) = lir_of(&text);
        let dims: Vec<usize> = shape.split(", ").map(|d| d.parse().expect("dim")).collect();
        let mut rng = TestRng::new(0x7417);
        let xs: Vec<f32> = (0..dims.iter().product::<usize>())
            .map(|_| rng.uniform(-3.0, 3.0) as f32)
            .collect();
        let x = Array::new(Shape::new(dims.clone()), Array::from_slice(&xs).data().clone()).expect("input");
        let one = run_cpu_on(&lir, std::slice::from_ref(&x), 1);
        let two = run_cpu_on(&lir, std::slice::from_ref(&x), 2);
        let bits = |a: &Array| -> Vec<u64> {
            (0..a.data().len())
                .map(|i| a.get(i).map_or(0, |s| s.to_f64().to_bits()))
                .collect()
        };
        assert_eq!(bits(&one[0]), bits(&two[0]), "{shape}");
        // And the values are the sums (within the routine's 2 ULP per term, in f64).
        let row = *dims.last().unwrap_or(&1);
        for (k, chunk) in xs.chunks(row).enumerate().step_by(997) {
            let want: f64 = chunk.iter().map(|&v| f64::from(v).sin() * f64::from(v)).sum();
            let got = one[0].get(k).map_or(f64::NAN, |s| s.to_f64());
            assert!(
                (got - want).abs() <= 1e-5 * (row as f64),
                "{shape}, row {k}: {got} against {want}"
            );
        }
    }
}

#[test]
fn batches_of_empty_rows_reduce_to_the_identity() {
    // Rows of no points, with their outputs in lanes: a routine body over nothing (`rfx fuzz`
    // found the tile size divided by the empty row's zero cells).
    for (op, dt, want) in [
        ("sum", "f32", 0.0),
        ("prod", "f64", 1.0),
        ("max", "f32", f64::NEG_INFINITY),
        ("min", "f64", f64::INFINITY),
    ] {
        let text = format!(
            "kernel k {{\n %x = input x : {dt}[9, 0]\n %v = exp %x : {dt}[9, 0]\n \
             %r = {op} %v axes [1] : {dt}[9]\n output r = %r\n}}"
        );
        let (_, lir) = lir_of(&text);
        let dtype = if dt == "f32" { DType::F32 } else { DType::F64 };
        let x = Array::filled(canary(dtype), Shape::new(vec![9, 0]));
        let out = run_cpu(&lir, std::slice::from_ref(&x));
        for k in 0..9 {
            assert_eq!(
                out[0].get(k).map(|s| s.to_f64()),
                Some(want),
                "{op} {dt}, output {k}"
            );
        }
    }
}
