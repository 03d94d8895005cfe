//! Kernels with more values live across their routine calls than a full tile's staging
//! buffers hold (`TILE_STAGING_MAX`) run their routines on shorter tiles instead of falling back
//! to the untiled code (CPUs with AVX2 and FMA): the tile's length, the routine calls, and every
//! element's value, bit for bit the value a kernel small enough for full tiles computes from the
//! same operands, at lengths around the shortened tile and its boundaries, in `f32` and `f64`,
//! elementwise and reduced.

use crate::common;

use rfx_codegen_cpu::{CpuBackend, dump};
use rfx_ir::interp::{Mode, run_lir};
use rfx_ir::lir::LirProgram;
use rfx_ir::testgen::TestRng;
use rfx_ir::{Array, ArrayData, DType, Scalar};
use rfx_lower::{Backend, CompileOptions, LowerConfig, lower, ulps};
use rfx_opt::{OptConfig, optimize};

/// Routine calls of the wide kernels: a `sincos` and two `sin`s.
const CALLS: usize = 3;

fn tile_routines_linked() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

fn lir_of(src: &str) -> LirProgram {
    let kernel = rfx_ir::hir::parse(src).expect("parse");
    let (mir, _) = optimize(&kernel, &OptConfig::default()).expect("optimize");
    lower(&mir, &LowerConfig::default()).expect("lower").0
}

fn clif_of(lir: &LirProgram) -> String {
    dump(lir).expect("dump").into_iter().map(|(_, c, _)| c).collect()
}

/// The constant factor of operand `i`: exact in both widths.
fn factor(i: usize) -> f64 {
    0.25 + 0.125 * i as f64
}

/// A kernel whose `k` operands `q_i = x * c_i + y` all feed `calls` routine calls (through the
/// chain `a = q_0 + q_0 + q_1 + … + q_{k-1}`: `sin` and `cos` of `a`, `sin (a + c_j)` for
/// `0 < j < calls`) and are all read after them (`o_i = q_i * s_{i mod calls} + cos a`, `s_j`
/// the `j`-th sine): `k` and more values live across the calls. With `reduce`, the rows of `[2,
/// n]` are also summed (`r_i = sum o_i` over the row) for the first `reduce` outputs.
fn wide_kernel(dt: &str, (k, calls): (usize, usize), shape: &str, reduce: usize) -> String {
    let mut s = format!("kernel k {{\n %x = input x : {dt}[{shape}]\n %y = input y : {dt}[{shape}]\n");
    for i in 0..k {
        let c = factor(i);
        s += &format!(
            " %c{i} = const {c} : {dt}[]\n %p{i} = mul %x, %c{i} : {dt}[{shape}]\n \
             %q{i} = add %p{i}, %y : {dt}[{shape}]\n"
        );
    }
    s += &format!(" %a0 = add %q0, %q0 : {dt}[{shape}]\n");
    for i in 1..k {
        s += &format!(" %a{i} = add %a{}, %q{i} : {dt}[{shape}]\n", i - 1);
    }
    let a = format!("%a{}", k - 1);
    s += &format!(" %s0 = sin {a} : {dt}[{shape}]\n %co = cos {a} : {dt}[{shape}]\n");
    for j in 1..calls {
        s += &format!(" %b{j} = add {a}, %c{j} : {dt}[{shape}]\n %s{j} = sin %b{j} : {dt}[{shape}]\n");
    }
    for i in 0..k {
        s += &format!(
            " %m{i} = mul %q{i}, %s{} : {dt}[{shape}]\n %o{i} = add %m{i}, %co : {dt}[{shape}]\n \
             output o{i} = %o{i}\n",
            i % calls
        );
    }
    for i in 0..reduce {
        s += &format!(" %r{i} = sum %o{i} axes [1] : {dt}[2]\n output r{i} = %r{i}\n");
    }
    s + "}\n"
}

/// The one-operand kernel, small enough for full tiles: the wide kernel's `o_i` (`j = i mod
/// calls`) of inputs `a` and `q`, `o = q * sin a + cos a` (`j = 0`) or `o = q * sin (a + c_j) +
/// cos a`, the same ops on the same values.
fn narrow_kernel(dt: &str, n: usize, j: usize) -> String {
    let sine = if j == 0 {
        format!(" %s = sin %a : {dt}[{n}]\n")
    } else {
        let c = factor(j);
        format!(" %c = const {c} : {dt}[]\n %b = add %a, %c : {dt}[{n}]\n %s = sin %b : {dt}[{n}]\n")
    };
    format!(
        "kernel r {{\n %a = input a : {dt}[{n}]\n %q = input q : {dt}[{n}]\n{sine} \
         %co = cos %a : {dt}[{n}]\n %m = mul %q, %s : {dt}[{n}]\n \
         %o = add %m, %co : {dt}[{n}]\n output o = %o\n}}\n"
    )
}

fn dtype_of(dt: &str) -> DType {
    if dt == "f32" { DType::F32 } else { DType::F64 }
}

/// Rounds an `f64` result of one `+` or `*` of two values of `dtype` to `dtype` (for `f32`, the
/// `f64` operation's rounding is innocuous: 53 ≥ 2·24 + 2 bits).
fn round(dtype: DType, v: f64) -> f64 {
    if dtype == DType::F32 {
        f64::from(v as f32)
    } else {
        v
    }
}

fn array(dtype: DType, shape: &[usize], values: &[f64]) -> Array {
    let scalars = values.iter().map(|&v| {
        if dtype == DType::F32 {
            Scalar::F32(v as f32)
        } else {
            Scalar::F64(v)
        }
    });
    Array::new(
        shape.to_vec(),
        ArrayData::from_scalars(dtype, scalars).expect("data"),
    )
    .expect("array")
}

fn values(a: &Array) -> Vec<f64> {
    (0..a.data().len())
        .map(|i| a.get(i).map_or(f64::NAN, Scalar::to_f64))
        .collect()
}

/// Inputs in `[-3, 3]` with zeros, infinities and a NaN among them.
fn inputs(rng: &mut TestRng, len: usize) -> Vec<f64> {
    (0..len)
        .map(|i| match i % 97 {
            13 => 0.0,
            29 => f64::INFINITY,
            41 => f64::NEG_INFINITY,
            53 => f64::NAN,
            _ => rng.uniform(-3.0, 3.0),
        })
        .collect()
}

fn run(lir: &LirProgram, inputs: &[Array]) -> Vec<Array> {
    let options = CompileOptions {
        max_threads: Some(1),
        ..CompileOptions::default()
    };
    let compiled = CpuBackend.compile(lir, &options).expect("compile");
    let views: Vec<_> = inputs.iter().map(Array::view).collect();
    compiled.run_to_new(&views).expect("run")
}

fn same_bits(got: f64, want: f64) -> bool {
    (got.is_nan() && want.is_nan()) || got.to_bits() == want.to_bits()
}

/// Bytes each staging buffer ends after its cells (one cache line, so that buffers laid out
/// one after another do not all start at the same address modulo 4 KiB).
const STAGING_SKEW: usize = 64;

/// The staging buffers' cells in bytes (`explicit_slot N, align = 32`, less the line each ends
/// with) of the CLIF text.
fn staging_slots(clif: &str) -> Vec<usize> {
    common::staging_slot_bytes(clif)
        .into_iter()
        .map(|bytes| {
            assert!(bytes > STAGING_SKEW, "a staging slot of {bytes} bytes");
            bytes - STAGING_SKEW
        })
        .collect()
}

/// Calls of a routine without a result (the tile routines).
fn tile_calls(clif: &str) -> usize {
    clif.lines()
        .filter(|line| line.trim_start().starts_with("call fn"))
        .count()
}

/// The tile length of the wide kernel's code: its staging slots hold `tile` cells each.
fn tile_of(clif: &str, dtype: DType) -> usize {
    let cell = dtype.size_bytes();
    let slots = staging_slots(clif);
    assert!(!slots.is_empty(), "no staging slots\n{clif}");
    let tile = slots[0] / cell;
    assert!(
        slots.iter().all(|&s| s == tile * cell),
        "slots of different lengths: {slots:?}"
    );
    tile
}

#[test]
fn a_kernel_too_wide_for_full_tiles_calls_its_routines_on_shorter_tiles() {
    if !tile_routines_linked() {
        return;
    }
    for (dt, k) in [("f32", 40), ("f32", 80), ("f64", 20), ("f64", 40)] {
        let dtype = dtype_of(dt);
        let cell = dtype.size_bytes();
        let clif = clif_of(&lir_of(&wide_kernel(dt, (k, CALLS), "1024", 0)));
        // 512 elements of the `k` operands alone would exceed 64 KiB.
        assert!(k * cell * 512 > 64 * 1024);
        let tile = tile_of(&clif, dtype);
        let staged: usize = staging_slots(&clif).iter().sum();
        assert!(
            (64..512).contains(&tile) && tile.is_multiple_of(64),
            "{dt} k = {k}: tile {tile}"
        );
        assert!(staged <= 64 * 1024, "{dt} k = {k}: {staged} bytes staged");
        // The longest tile of 64-element granules that fits.
        assert!(
            staged + staging_slots(&clif).len() * cell * 64 > 64 * 1024,
            "{dt}: tile {tile} too short"
        );
        assert_eq!(
            tile_calls(&clif),
            CALLS,
            "{dt} k = {k}: {CALLS} calls per tile\n{clif}"
        );
    }
    // A kernel whose full tiles fit keeps them.
    let clif = clif_of(&lir_of(&wide_kernel("f32", (8, CALLS), "1024", 0)));
    assert_eq!(tile_of(&clif, DType::F32), 512);
    // More staged values than the calls repay (more than a full tile's 128 bytes an element
    // per call): the untiled code, inline transcendentals without staging.
    for (dt, k, calls) in [("f32", 40, 1), ("f64", 20, 1), ("f64", 60, CALLS)] {
        let clif = clif_of(&lir_of(&wide_kernel(dt, (k, calls), "1024", 0)));
        assert!(
            staging_slots(&clif).is_empty() && tile_calls(&clif) == 0,
            "{dt} k = {k}: tiled\n{clif}"
        );
    }
}

/// Every output of the wide kernel equals, bit for bit, the narrow kernel's (full tiles) on the
/// same operands, and the interpreter's within the routines' bound, at lengths around the
/// shortened tile: one pass of the segments (a vector of four), ragged last tiles, a last tile
/// shorter than a pass, several tiles.
#[test]
fn shorter_tiles_compute_every_element_as_full_tiles_do() {
    for (dt, k) in [("f32", 40), ("f64", 20)] {
        let dtype = dtype_of(dt);
        let tile = if tile_routines_linked() {
            tile_of(&clif_of(&lir_of(&wide_kernel(dt, (k, CALLS), "1024", 0))), dtype)
        } else {
            256
        };
        let pass = if dtype == DType::F32 { 16 } else { 8 };
        let mut sizes = vec![64, 65, 100];
        for t in [tile, 2 * tile] {
            sizes.extend([t - 1, t, t + 1, t + pass - 1, t + pass, t + pass + 1]);
        }
        sizes.extend([3 * tile + 7, 1024]);
        for n in sizes {
            check_wide(dtype, dt, k, n);
        }
    }
}

fn check_wide(dtype: DType, dt: &str, k: usize, n: usize) {
    let mut rng = TestRng::new(n as u64 * 7 + k as u64);
    let x = inputs(&mut rng, n);
    let y = inputs(&mut rng, n);
    let wide = lir_of(&wide_kernel(dt, (k, CALLS), &n.to_string(), 0));
    let ins = [array(dtype, &[n], &x), array(dtype, &[n], &y)];
    let got = run(&wide, &ins);
    let views: Vec<_> = ins.iter().map(Array::view).collect();
    let oracle = run_lir(&wide, &views, Mode::Native).expect("interpreter");
    // The operands, rounded as the kernel rounds them.
    let x: Vec<f64> = x.iter().map(|&v| round(dtype, v)).collect();
    let y: Vec<f64> = y.iter().map(|&v| round(dtype, v)).collect();
    let q: Vec<Vec<f64>> = (0..k)
        .map(|i| {
            (0..n)
                .map(|j| round(dtype, round(dtype, x[j] * factor(i)) + y[j]))
                .collect()
        })
        .collect();
    let a: Vec<f64> = (0..n)
        .map(|j| {
            (1..k).fold(round(dtype, q[0][j] + q[0][j]), |acc, i| {
                round(dtype, acc + q[i][j])
            })
        })
        .collect();
    let narrow: Vec<LirProgram> = (0..CALLS).map(|j| lir_of(&narrow_kernel(dt, n, j))).collect();
    let eps = if dtype == DType::F32 {
        f64::from(f32::EPSILON)
    } else {
        f64::EPSILON
    };
    for i in 0..k {
        let want = run(
            &narrow[i % CALLS],
            &[array(dtype, &[n], &a), array(dtype, &[n], &q[i])],
        );
        let (got, want, oracle) = (values(&got[i]), values(&want[0]), values(&oracle[i]));
        for j in 0..n {
            assert!(
                same_bits(got[j], want[j]),
                "{dt} n = {n}, o{i}[{j}]: {} against full tiles' {}",
                got[j],
                want[j]
            );
            // The routines are within 4 ULP of the interpreter's sin and cos, so `q sin a + cos
            // a` is within a few ULP of `|q| + 1`.
            let close = (got[j] - oracle[j]).abs() <= 8.0 * eps * (q[i][j].abs() + 1.0);
            assert!(
                ulps(got[j], oracle[j], dtype) <= 4 || close,
                "{dt} n = {n}, o{i}[{j}]: {} against the interpreter's {}",
                got[j],
                oracle[j]
            );
        }
    }
}

/// A reduction over rows of the wide kernel's values runs them in shorter tiles too (each tile
/// a whole number of the partials' lanes), and sums every row as the interpreter does, within
/// the rounding of the sum's order.
#[test]
fn reduced_rows_of_shorter_tiles_sum_every_point() {
    for (dt, k) in [("f32", 40), ("f64", 20)] {
        let dtype = dtype_of(dt);
        let eps = if dtype == DType::F32 {
            f64::from(f32::EPSILON)
        } else {
            f64::EPSILON
        };
        for n in [64, 100, 319, 320, 321, 700, 1030] {
            let shape = format!("2, {n}");
            let lir = lir_of(&wide_kernel(dt, (k, CALLS), &shape, 2));
            if tile_routines_linked() && n >= 256 {
                let clif = clif_of(&lir);
                let tile = tile_of(&clif, dtype);
                assert!(
                    tile < 512 && tile_calls(&clif) >= 1,
                    "{dt} n = {n}: tile {tile}\n{clif}"
                );
            }
            let mut rng = TestRng::new(n as u64 + 5);
            // Finite inputs: a sum with an infinity or a NaN hides a missed point.
            let x: Vec<f64> = (0..2 * n).map(|_| rng.uniform(-3.0, 3.0)).collect();
            let y: Vec<f64> = (0..2 * n).map(|_| rng.uniform(-3.0, 3.0)).collect();
            let ins = [array(dtype, &[2, n], &x), array(dtype, &[2, n], &y)];
            let got = run(&lir, &ins);
            let views: Vec<_> = ins.iter().map(Array::view).collect();
            let oracle = run_lir(&lir, &views, Mode::Native).expect("interpreter");
            for r in 0..2 {
                let index = lir
                    .outputs()
                    .position(|(_, name, _)| name == format!("r{r}"))
                    .expect("output");
                let o = lir
                    .outputs()
                    .position(|(_, name, _)| name == format!("o{r}"))
                    .expect("output");
                let terms = values(&oracle[o]);
                let (got, want) = (values(&got[index]), values(&oracle[index]));
                for row in 0..2 {
                    let magnitude: f64 = terms[row * n..(row + 1) * n].iter().map(|t| t.abs()).sum();
                    let bound = 2.0 * n as f64 * eps * magnitude;
                    assert!(
                        (got[row] - want[row]).abs() <= bound,
                        "{dt} n = {n}, r{r}[{row}]: {} against the interpreter's {} (bound {bound:e})",
                        got[row],
                        want[row]
                    );
                }
            }
        }
    }
}
