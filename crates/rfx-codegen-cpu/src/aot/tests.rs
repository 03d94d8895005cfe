//! Accuracy of the tile routines against `std` in `f64`, over random bit patterns, the fast
//! ranges and edge values. The sweep over each fast range takes every 4099th `f32`; with
//! `RFX_EXHAUSTIVE=1` it takes every one (minutes per function: `RFX_EXHAUSTIVE=1 cargo test
//! --release -p rfx-codegen-cpu --lib fast_ranges -- --nocapture`).

use super::f32::*;
use super::f64::*;
use super::*;
use crate::test_rng::Rng;
use rfx_ir::{BinaryOp, DType, UnaryOp};

/// Distance in ULP between two `f32`, as the conformance suite measures it (0 when both are
/// NaN; `u64::MAX` when only one is, and for zeros of opposite signs: `sin(-0)` must be `-0`).
fn ulps(got: f32, want: f32) -> u64 {
    rfx_lower::ulps(f64::from(got), f64::from(want), DType::F32)
}

/// The documented bound of each routine (the module's table; 4 ULP is the backend's).
fn bound(f: AotFn) -> u64 {
    match f {
        AotFn::TanF32 => 4,
        AotFn::AtanF32 | AotFn::Atan2F32 => 3,
        _ => 2,
    }
}

fn reference(f: AotFn, x: f32) -> f32 {
    let x = f64::from(x);
    (match f {
        AotFn::SinF32 => x.sin(),
        AotFn::CosF32 => x.cos(),
        AotFn::TanF32 => x.tan(),
        AotFn::ExpF32 => x.exp(),
        AotFn::Exp2F32 => x.exp2(),
        AotFn::LogF32 => x.ln(),
        AotFn::Log2F32 => x.log2(),
        AotFn::TanhF32 => x.tanh(),
        AotFn::SigmoidF32 => {
            if x < 0.0 {
                x.exp() / (1.0 + x.exp())
            } else {
                1.0 / (1.0 + (-x).exp())
            }
        }
        AotFn::AtanF32 => x.atan(),
        AotFn::AsinF32 => x.asin(),
        AotFn::AcosF32 => x.acos(),
        _ => unreachable!("{f:?}: atan2 and the f64 routines have their own tests"),
    }) as f32
}

/// The unary `f32` routines (`atan2` and the `f64` ones have their own tests).
fn unary_routines() -> impl Iterator<Item = AotFn> {
    AotFn::ALL
        .into_iter()
        .filter(|f| f.arity() == 1 && f.results() == 1 && f.dtype() == DType::F32)
}

fn run(f: AotFn, xs: &[f32]) -> Vec<f32> {
    let mut ys = vec![0.0f32; xs.len()];
    // SAFETY: `available()` was checked by the caller; both buffers hold `xs.len()` floats and
    // are distinct allocations. The address is one of the `TileFn` routines.
    unsafe {
        let routine: TileFn = std::mem::transmute::<*const u8, TileFn>(f.address());
        routine(xs.as_ptr(), ys.as_mut_ptr(), xs.len());
    }
    ys
}

fn edge_values() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        1.0,
        -1.0,
        TRIG_FAST_MAX,
        -TRIG_FAST_MAX,
        TRIG_FAST_MAX * 1.0001,
        EXP_FAST_MIN,
        EXP_FAST_MAX,
        88.72,
        88.73,
        -87.34,
        -103.9,
        -104.0,
        -150.0,
        1e30,
        -1e30,
        std::f32::consts::PI,
        std::f32::consts::FRAC_PI_2,
        std::f32::consts::FRAC_PI_4,
        3.0e5,
        1.0e7,
        SQRT_HALF,
    ];
    for k in -30..30 {
        v.push(k as f32 * std::f32::consts::FRAC_PI_4);
    }
    v
}

fn inputs(f: AotFn, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed | 1);
    let mut xs = edge_values();
    for _ in 0..200_000 {
        xs.push(f32::from_bits(rng.next_u64() as u32));
    }
    let (lo, hi) = match f {
        AotFn::SinF32 | AotFn::CosF32 | AotFn::TanF32 => (-100.0f32, 100.0f32),
        AotFn::ExpF32 => (-104.0, 89.0),
        AotFn::Exp2F32 => (-150.0, 128.0),
        AotFn::LogF32 | AotFn::Log2F32 => (0.0, 10.0),
        AotFn::TanhF32 | AotFn::SigmoidF32 => (-12.0, 12.0),
        AotFn::AtanF32 | AotFn::Atan2F32 => (-5.0, 5.0),
        AotFn::AsinF32 | AotFn::AcosF32 => (-1.0, 1.0),
        _ => unreachable!("{f:?}: f64 routines take f64 inputs"),
    };
    for _ in 0..200_000 {
        xs.push(lo + (hi - lo) * rng.unit());
    }
    xs
}

#[test]
fn accuracy_within_bounds() {
    if !available() {
        eprintln!("skipped: this CPU has no AVX2+FMA, so the tile routines are never linked");
        return;
    }
    for f in unary_routines() {
        let xs = inputs(f, 0x5eed ^ f as u64);
        let ys = run(f, &xs);
        let mut worst = (0u64, 0.0f32);
        for (&x, &y) in xs.iter().zip(&ys) {
            let d = ulps(y, reference(f, x));
            if d > worst.0 {
                worst = (d, x);
            }
        }
        eprintln!("{}: max {} ULP (at x = {:e})", f.symbol(), worst.0, worst.1);
        assert!(
            worst.0 <= bound(f),
            "{}: {} ULP at x = {:e}",
            f.symbol(),
            worst.0,
            worst.1
        );
    }
}

#[test]
fn results_do_not_depend_on_position_or_length() {
    if !available() {
        eprintln!("skipped: this CPU has no AVX2+FMA, so the tile routines are never linked");
        return;
    }
    for f in unary_routines() {
        let xs = inputs(f, 7);
        let all = run(f, &xs[..1000]);
        for (i, &x) in xs[..1000].iter().enumerate() {
            let one = run(f, &[x]);
            assert_eq!(one[0].to_bits(), all[i].to_bits(), "{} at {x:e}", f.symbol());
        }
        // Odd lengths exercise the vector loop's remainder; n = 0 writes nothing.
        for n in [0usize, 1, 3, 7, 9, 17, 511] {
            let part = run(f, &xs[5..5 + n]);
            for (a, b) in part.iter().zip(&all[5..5 + n]) {
                assert_eq!(a.to_bits(), b.to_bits());
            }
        }
    }
}

fn run_atan2(ys: &[f32], xs: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; ys.len()];
    // SAFETY: `available()` was checked by the caller; the three buffers hold `ys.len()` floats
    // (`xs` is as long) and are distinct allocations.
    unsafe { rfx_aot_atan2_f32(ys.as_ptr(), xs.as_ptr(), out.as_mut_ptr(), ys.len()) };
    out
}

#[test]
fn atan2_within_bounds() {
    if !available() {
        eprintln!("skipped: this CPU has no AVX2+FMA, so the tile routines are never linked");
        return;
    }
    let mut rng = Rng(0xa7a2);
    let edges = edge_values();
    let (mut ys, mut xs) = (Vec::new(), Vec::new());
    // Every pair of edge values (the C99 special cases among them).
    for &y in &edges {
        for &x in &edges {
            ys.push(y);
            xs.push(x);
        }
    }
    // Random bit patterns, and ordinary magnitudes in every quadrant.
    for _ in 0..200_000 {
        ys.push(f32::from_bits(rng.next_u64() as u32));
        xs.push(f32::from_bits(rng.next_u64() as u32));
        ys.push(20.0 * rng.unit() - 10.0);
        xs.push(20.0 * rng.unit() - 10.0);
    }
    let out = run_atan2(&ys, &xs);
    let mut worst = (0u64, 0.0f32, 0.0f32);
    for ((&y, &x), &o) in ys.iter().zip(&xs).zip(&out) {
        let want = f64::from(y).atan2(f64::from(x)) as f32;
        let d = ulps(o, want);
        if d > worst.0 {
            worst = (d, y, x);
        }
    }
    eprintln!(
        "rfx_aot_atan2_f32: max {} ULP (at y = {:e}, x = {:e})",
        worst.0, worst.1, worst.2
    );
    assert!(
        worst.0 <= 2,
        "atan2: {} ULP at y = {:e}, x = {:e}",
        worst.0,
        worst.1,
        worst.2
    );
    // Position independence: one element at a time gives the same bits.
    for i in 0..1000 {
        let one = run_atan2(&ys[i..=i], &xs[i..=i]);
        assert_eq!(one[0].to_bits(), out[i].to_bits());
    }
}

/// Every `f32` in `[lo, hi]` of one sign: the worst ULP error against the reference.
fn sweep(f: AotFn, lo: f32, hi: f32, stride: u32) -> (u64, f32) {
    let mut worst = (0u64, 0.0f32);
    let mut chunk = Vec::with_capacity(1 << 16);
    let (a, b) = (lo.to_bits(), hi.to_bits());
    let (start, end) = (a.min(b), a.max(b));
    let mut bits = start;
    loop {
        chunk.clear();
        while chunk.len() < chunk.capacity() && bits <= end {
            chunk.push(f32::from_bits(bits));
            bits = bits.saturating_add(stride);
        }
        let ys = run(f, &chunk);
        for (&x, &y) in chunk.iter().zip(&ys) {
            let d = ulps(y, reference(f, x));
            if d > worst.0 {
                worst = (d, x);
            }
        }
        if bits > end {
            return worst;
        }
    }
}

#[test]
fn fast_ranges_swept() {
    if !available() {
        eprintln!("skipped: this CPU has no AVX2+FMA");
        return;
    }
    let exhaustive = std::env::var("RFX_EXHAUSTIVE").is_ok_and(|v| v == "1");
    let stride = if exhaustive { 1 } else { 4099 };
    let ranges = [
        (AotFn::SinF32, 0.0, TRIG_FAST_MAX),
        (AotFn::SinF32, -0.0, -TRIG_FAST_MAX),
        (AotFn::CosF32, 0.0, TRIG_FAST_MAX),
        (AotFn::CosF32, -0.0, -TRIG_FAST_MAX),
        (AotFn::ExpF32, 0.0, EXP_FAST_MAX),
        (AotFn::ExpF32, -0.0, EXP_FAST_MIN),
        (AotFn::LogF32, f32::MIN_POSITIVE, f32::MAX),
        (AotFn::TanF32, 0.0, TRIG_FAST_MAX),
        (AotFn::TanF32, -0.0, -TRIG_FAST_MAX),
        (AotFn::Exp2F32, 0.0, EXP2_FAST_MAX),
        (AotFn::Exp2F32, -0.0, EXP2_FAST_MIN),
        (AotFn::Log2F32, f32::MIN_POSITIVE, f32::MAX),
        (AotFn::TanhF32, 0.0, f32::MAX),
        (AotFn::TanhF32, -0.0, f32::MIN),
        (AotFn::SigmoidF32, 0.0, 87.0),
        (AotFn::SigmoidF32, -0.0, -87.0),
        (AotFn::AtanF32, 0.0, f32::MAX),
        (AotFn::AtanF32, -0.0, f32::MIN),
        (AotFn::AsinF32, 0.0, 1.0),
        (AotFn::AsinF32, -0.0, -1.0),
        (AotFn::AcosF32, 0.0, 1.0),
        (AotFn::AcosF32, -0.0, -1.0),
    ];
    for (f, lo, hi) in ranges {
        let (d, x) = sweep(f, lo, hi, stride);
        eprintln!(
            "{} over [{lo:e}, {hi:e}] (every {stride}th f32): max {d} ULP at {x:e}",
            f.symbol()
        );
        assert!(d <= bound(f), "{}: {d} ULP at {x:e}", f.symbol());
    }
}

/// `f(±0) = ±0`, sign included, for an odd `f64` routine.
fn assert_keeps_zero_sign(f: AotFn) {
    let zeros = [-0.0f64, 0.0];
    let out = run_f64(f, &zeros);
    assert_eq!(
        out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        zeros.map(f64::to_bits),
        "{f:?}"
    );
}

/// Runs the unary `f64` routine `f` over `xs`.
fn run_f64(f: AotFn, xs: &[f64]) -> Vec<f64> {
    let mut ys = vec![0.0f64; xs.len()];
    // SAFETY: the callers checked AVX2 and FMA; both buffers hold `xs.len()` doubles and are
    // distinct allocations. `f` is a unary `f64` routine, so its address is a `TileFnF64`.
    unsafe {
        let routine: TileFnF64 = std::mem::transmute::<*const u8, TileFnF64>(f.address());
        routine(xs.as_ptr(), ys.as_mut_ptr(), xs.len());
    }
    ys
}

/// Runs `f` over `xs`, prints its worst ULP error against `reference` and asserts it is within
/// `bound`; returns the outputs.
fn check_f64(f: AotFn, xs: &[f64], reference: fn(f64) -> f64, bound: u64) -> Vec<f64> {
    assert!(f.dtype() == DType::F64 && f.arity() == 1, "{f:?}");
    let ys = run_f64(f, xs);
    let mut worst = (0u64, 0.0f64);
    for (&x, &y) in xs.iter().zip(&ys) {
        let d = rfx_lower::ulps(y, reference(x), DType::F64);
        if d > worst.0 {
            worst = (d, x);
        }
    }
    eprintln!("{f:?}: max {} ULP (at x = {:e})", worst.0, worst.1);
    assert!(worst.0 <= bound, "{f:?}: {} ULP at x = {:e}", worst.0, worst.1);
    ys
}

/// The `f64` `sin`/`cos` routines against `std` (glibc, < 1 ULP): within 2 ULP on random bit
/// patterns, uniform arguments up to the fast range's end, the arguments nearest many
/// multiples of π/2 (where the reduction cancels) and edge values; `sin(-0) = -0`.
#[test]
fn f64_trig_within_bounds() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0x5eed_6464);
    let mut xs: Vec<f64> = vec![
        0.0,
        -0.0,
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        -f64::from_bits(1),
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-300,
        TRIG_FAST_MAX_F64,
        -TRIG_FAST_MAX_F64,
        TRIG_FAST_MAX_F64 * 1.000_000_1,
        1e300,
    ];
    for _ in 0..100_000 {
        xs.push(f64::from_bits(rng.next_u64()));
    }
    for scale in [1.0, 100.0, 1e6, TRIG_FAST_MAX_F64] {
        for _ in 0..100_000 {
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            xs.push(scale * (2.0 * u - 1.0));
        }
    }
    // Next to multiples of π/2: small ones all, larger ones sampled up to the range's end.
    let mut ks: Vec<f64> = (1..5000).map(f64::from).collect();
    for _ in 0..20_000 {
        ks.push(((rng.next_u64() >> 35) % (TRIG_FAST_MAX_F64 as u64 / 2)) as f64);
    }
    for k in ks {
        let near = k * std::f64::consts::FRAC_PI_2;
        for d in -2i64..=2 {
            let x = f64::from_bits(near.to_bits().wrapping_add_signed(d));
            xs.extend([x, -x]);
        }
    }
    for (f, reference) in [
        (AotFn::SinF64, f64::sin as fn(f64) -> f64),
        (AotFn::CosF64, f64::cos),
    ] {
        check_f64(f, &xs, reference, 2);
    }
    assert_keeps_zero_sign(AotFn::SinF64);
}

/// The `f64` `exp` routine against `std` (glibc, < 1 ULP): within 2 ULP on random bit
/// patterns, uniform arguments over the fast range and beyond it (overflow, subnormal and zero
/// results from the slow path), and edge values.
#[test]
fn f64_exp_within_bounds() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0xe4b_0064);
    let mut xs: Vec<f64> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        EXP_FAST_MIN_F64,
        EXP_FAST_MAX_F64,
        709.78,
        709.79,
        -708.4,
        -745.1,
        -745.2,
        std::f64::consts::LN_2,
        0.5 * std::f64::consts::LN_2,
    ];
    for _ in 0..100_000 {
        xs.push(f64::from_bits(rng.next_u64()));
    }
    for (lo, hi) in [(-1.0, 1.0), (-30.0, 30.0), (-750.0, 712.0)] {
        for _ in 0..100_000 {
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            xs.push(lo + (hi - lo) * u);
        }
    }
    check_f64(AotFn::ExpF64, &xs, f64::exp, 2);
}

/// The `f64` `log` routine against `std` (glibc, < 1 ULP): within 2 ULP on random bit patterns
/// (negative, subnormal, non-finite ones through the slow path), uniform arguments near 1 and
/// over wide ranges, powers of two and edge values.
#[test]
fn f64_log_within_bounds() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0x10_9f64);
    let mut xs: Vec<f64> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        std::f64::consts::SQRT_2,
        std::f64::consts::FRAC_1_SQRT_2,
        1.0 - f64::EPSILON,
        1.0 + f64::EPSILON,
    ];
    xs.extend((-1074..1024).map(pow2_f64));
    for _ in 0..100_000 {
        xs.push(f64::from_bits(rng.next_u64()));
    }
    for (lo, hi) in [(0.5, 2.0), (0.999, 1.001), (0.0, 1e6)] {
        for _ in 0..100_000 {
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            xs.push(lo + (hi - lo) * u);
        }
    }
    check_f64(AotFn::LogF64, &xs, f64::ln, 2);
}

/// `2^e` for `-1074 <= e <= 1023`, built in the representation (`powi` underflows to zero
/// before the smallest subnormals).
fn pow2_f64(e: i32) -> f64 {
    if e < -1022 {
        f64::from_bits(1 << (e + 1074))
    } else {
        f64::from_bits(((e + 1023) as u64) << 52)
    }
}

/// `f64` edge values for `atan` and `atan2`: zeros, extremes, non-finite values, the reduction
/// thresholds and their neighbours.
fn atan_edges_f64() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::MIN_POSITIVE,
        -f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-300,
        1e300,
        // Subnormals whose halves round (`atan2`'s reduction test must not halve them), and
        // magnitudes around `atan2`'s overflow guard.
        f64::from_bits(2),
        f64::from_bits(3),
        1e307,
        1.000_000_000_000_1e307,
        9e307,
    ];
    // `atan2` reduces the ratio above 1/2: pairs at ratios 1/2 and 2 and next to them.
    for t in [0.5, 0.66, TAN_3PI_8_F64, 1.0, 2.0] {
        for k in -3i64..=3 {
            v.push(f64::from_bits((t.to_bits() as i64 + k) as u64));
            v.push(-f64::from_bits((t.to_bits() as i64 + k) as u64));
        }
    }
    v
}

/// Uniform in `[lo, hi)`.
fn uniform_f64(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
}

/// The `f64` `atan` routine against `std` (glibc, < 1 ULP): within 2 ULP on random bit patterns,
/// uniform arguments around each reduction threshold and over wide ranges, and edge values;
/// `atan(-0) = -0`.
#[test]
fn f64_atan_within_bounds() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0xa7a_0064);
    let mut xs = atan_edges_f64();
    for _ in 0..100_000 {
        xs.push(f64::from_bits(rng.next_u64()));
    }
    for (lo, hi) in [(-1.0, 1.0), (0.5, 0.8), (2.2, 2.6), (-10.0, 10.0), (-1e6, 1e6)] {
        for _ in 0..100_000 {
            xs.push(uniform_f64(&mut rng, lo, hi));
        }
    }
    let ys = check_f64(AotFn::AtanF64, &xs, f64::atan, 2);
    assert_eq!(ys[1].to_bits(), (-0.0f64).to_bits(), "atan(-0)");
}

/// The `f64` `atan2` routine against `std`: within 2 ULP on every pair of edge values (the C99
/// special cases through the slow path), random bit patterns, and ordinary magnitudes in every
/// quadrant, including ratios near the reduction threshold and near 1.
#[test]
fn f64_atan2_within_bounds() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0xa7a2_0064);
    let edges = atan_edges_f64();
    let (mut ys, mut xs) = (Vec::new(), Vec::new());
    for &y in &edges {
        for &x in &edges {
            ys.push(y);
            xs.push(x);
        }
    }
    for _ in 0..100_000 {
        ys.push(f64::from_bits(rng.next_u64()));
        xs.push(f64::from_bits(rng.next_u64()));
        ys.push(uniform_f64(&mut rng, -10.0, 10.0));
        xs.push(uniform_f64(&mut rng, -10.0, 10.0));
        // |y/x| near 0.66 and near 1, either way round.
        let x = uniform_f64(&mut rng, -10.0, 10.0);
        let t = if rng.next_u64() & 1 == 0 { 0.66 } else { 1.0 };
        let y = x * (t + uniform_f64(&mut rng, -0.01, 0.01));
        if rng.next_u64() & 1 == 0 {
            ys.push(y);
            xs.push(x);
        } else {
            ys.push(x);
            xs.push(y);
        }
    }
    let mut out = vec![0.0f64; xs.len()];
    // SAFETY: AVX2 and FMA were checked; the three buffers hold `xs.len()` doubles and are
    // distinct allocations. The address is a `Tile2FnF64` routine.
    unsafe {
        let routine: Tile2FnF64 = std::mem::transmute::<*const u8, Tile2FnF64>(AotFn::Atan2F64.address());
        routine(ys.as_ptr(), xs.as_ptr(), out.as_mut_ptr(), xs.len());
    }
    let mut worst = (0u64, 0.0f64, 0.0f64);
    for ((&y, &x), &o) in ys.iter().zip(&xs).zip(&out) {
        let d = rfx_lower::ulps(o, y.atan2(x), DType::F64);
        if d > worst.0 {
            worst = (d, y, x);
        }
    }
    eprintln!(
        "Atan2F64: max {} ULP (at y = {:e}, x = {:e})",
        worst.0, worst.1, worst.2
    );
    assert!(
        worst.0 <= 2,
        "atan2 f64: {} ULP at y = {:e}, x = {:e}",
        worst.0,
        worst.1,
        worst.2
    );
}

/// The `f64` `asin` and `acos` routines against `std` (glibc): within 2 ULP on uniform arguments
/// over [-1, 1] and near each branch point (±1/2, ±0.975, ±1), random bit patterns (most are
/// outside [-1, 1]: NaN from the slow path) and edge values; `asin(-0) = -0`, `acos(1) = +0`.
#[test]
fn f64_asin_acos_within_bounds() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0xa5c0_0064);
    let mut xs = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        0.975,
        -0.975,
        f64::MIN_POSITIVE,
        f64::NAN,
    ];
    xs.extend([
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.0 + f64::EPSILON,
        1e-300,
        -1e-300,
    ]);
    for t in [0.5f64, 0.975, 1.0] {
        for k in 1i64..=4 {
            xs.push(f64::from_bits((t.to_bits() as i64 - k) as u64));
            xs.push(-f64::from_bits((t.to_bits() as i64 - k) as u64));
            xs.push(f64::from_bits((t.to_bits() as i64 + k) as u64));
        }
    }
    for _ in 0..50_000 {
        xs.push(f64::from_bits(rng.next_u64()));
    }
    for (lo, hi) in [
        (-1.0, 1.0),
        (0.45, 0.55),
        (0.97, 0.98),
        (0.999_999, 1.0),
        (-1.0, -0.999_999),
        (-1e-8, 1e-8),
    ] {
        for _ in 0..100_000 {
            xs.push(uniform_f64(&mut rng, lo, hi));
        }
    }
    for (f, reference) in [
        (AotFn::AsinF64, f64::asin as fn(f64) -> f64),
        (AotFn::AcosF64, f64::acos),
    ] {
        let ys = check_f64(f, &xs, reference, 2);
        if f == AotFn::AsinF64 {
            assert_eq!(ys[1].to_bits(), (-0.0f64).to_bits(), "asin(-0)");
        } else {
            assert_eq!(ys[2].to_bits(), 0.0f64.to_bits(), "acos(1)");
        }
    }
}

/// The `f64` `tanh` and `sigmoid` routines against `std` (`tanh`: glibc, < 1 ULP; `sigmoid`: the
/// same formulas through glibc's `exp`, itself within about 1.5 ULP of the true value): within 2
/// and 4 ULP on random bit patterns, uniform arguments around 0.625 and over wide ranges, and
/// edge values (`tanh(-0) = -0`, ±1 and 0 and 1 far out, NaN).
#[test]
fn f64_tanh_sigmoid_within_bounds() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0x7a4_0064);
    let mut xs = vec![
        0.0, -0.0, 0.625, -0.625, 1.0, -1.0, 350.0, -350.0, 708.0, -708.0, 709.0, -745.0,
    ];
    xs.extend([
        f64::MIN_POSITIVE,
        -1e-300,
        f64::MAX,
        f64::MIN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ]);
    for _ in 0..50_000 {
        xs.push(f64::from_bits(rng.next_u64()));
    }
    for (lo, hi) in [
        (-1.0, 1.0),
        (0.6, 0.65),
        (-0.65, -0.6),
        (-20.0, 20.0),
        (-800.0, 800.0),
        (-1e-8, 1e-8),
    ] {
        for _ in 0..100_000 {
            xs.push(uniform_f64(&mut rng, lo, hi));
        }
    }
    let sigmoid = |x: f64| {
        let e = (-x.abs()).exp();
        if x < 0.0 { e / (1.0 + e) } else { 1.0 / (1.0 + e) }
    };
    for (f, reference, bound) in [
        (AotFn::TanhF64, f64::tanh as fn(f64) -> f64, 2),
        (AotFn::SigmoidF64, sigmoid as fn(f64) -> f64, 4),
    ] {
        check_f64(f, &xs, reference, bound);
    }
}

/// Pairs `(x, y)` for `pow`: every pair of edge values (the C99 special cases through the slow
/// path), random bit patterns, ordinary bases and exponents, negative bases with integer
/// exponents, bases near 1 with large exponents, and products `y log2|x|` near the overflow,
/// underflow and subnormal thresholds (the fast path's edge for `f64`).
fn pow_pairs(rng: &mut Rng, edges: &[f64], bits: fn(&mut Rng) -> f64) -> (Vec<f64>, Vec<f64>) {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for &x in edges {
        for &y in edges {
            xs.push(x);
            ys.push(y);
        }
    }
    for i in 0..100_000 {
        xs.push(bits(rng));
        ys.push(bits(rng));
        xs.push(uniform_f64(rng, 0.0, 10.0));
        ys.push(uniform_f64(rng, -10.0, 10.0));
        // Negative bases with integer exponents, odd and even.
        xs.push(uniform_f64(rng, -10.0, 0.0));
        ys.push((uniform_f64(rng, -40.0, 40.0)).round());
        // Bases near 1 with large exponents.
        xs.push(1.0 + uniform_f64(rng, -1e-6, 1e-6));
        ys.push(uniform_f64(rng, -1e8, 1e8));
        // y log2|x| near a threshold: 128 and -149 (f32), 1020, 1024, -1022 and -1074 (f64).
        let target = [128.0, -126.0, -149.0, 1020.0, 1024.0, -1020.0, -1022.0, -1074.0][i % 8];
        let x = uniform_f64(rng, 0.05, 20.0);
        let y = (target + uniform_f64(rng, -2.0, 2.0)) / x.log2();
        xs.push(if i % 16 < 8 { x } else { -x });
        ys.push(if i % 16 < 8 { y } else { y.round() });
    }
    (xs, ys)
}

fn pow_edges() -> Vec<f64> {
    let mut v = vec![
        0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, 1e-3, 1e3, -1e3, 1e30, -1e30,
        1e-30, 1e300, 1e-300,
    ];
    v.extend([
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::MAX,
        f64::INFINITY,
        f64::NAN,
    ]);
    v.extend([
        f64::from(f32::MIN_POSITIVE),
        f64::from(f32::from_bits(1)),
        f64::from(f32::MAX),
    ]);
    let negatives: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(negatives);
    v
}

/// Runs the binary routine `f` on `xs`, `ys` (given as `f64`, converted to the routine's dtype),
/// asserts its worst ULP error against `reference` is within `bound`, and that every 97th
/// element gives the same bits alone as in the long call.
/// Runs the binary routine `f` (AVX2 and FMA checked by the caller) on `xs`, `ys`, given as
/// `f64` and converted to the routine's dtype; its results as `f64`.
fn run_binary(f: AotFn, xs: &[f64], ys: &[f64]) -> Vec<f64> {
    assert!(f.arity() == 2 && xs.len() == ys.len(), "{f:?}");
    // SAFETY (both arms): the callers checked AVX2 and FMA; the three buffers hold
    // `xs.len()` elements and are distinct allocations; `f` is a binary routine of the
    // dtype, so its address is a `Tile2Fn` (`f32`) or a `Tile2FnF64` (`f64`).
    if f.dtype() == DType::F32 {
        let (a, b): (Vec<f32>, Vec<f32>) = xs.iter().zip(ys).map(|(&x, &y)| (x as f32, y as f32)).unzip();
        let mut out = vec![0.0f32; a.len()];
        unsafe {
            let routine = std::mem::transmute::<*const u8, Tile2Fn>(f.address());
            routine(a.as_ptr(), b.as_ptr(), out.as_mut_ptr(), a.len());
        }
        out.into_iter().map(f64::from).collect()
    } else {
        let mut out = vec![0.0f64; xs.len()];
        unsafe {
            let routine = std::mem::transmute::<*const u8, Tile2FnF64>(f.address());
            routine(xs.as_ptr(), ys.as_ptr(), out.as_mut_ptr(), xs.len());
        }
        out
    }
}

fn check_binary(f: AotFn, xs: &[f64], ys: &[f64], reference: fn(f64, f64) -> f64, bound: u64) {
    let dtype = f.dtype();
    let run = |xs: &[f64], ys: &[f64]| run_binary(f, xs, ys);
    // The arguments as the routine sees them, for the reference.
    let narrow = |v: f64| {
        if dtype == DType::F32 {
            f64::from(v as f32)
        } else {
            v
        }
    };
    let out = run(xs, ys);
    let mut worst = (0u64, 0.0f64, 0.0f64);
    for ((&x, &y), &o) in xs.iter().zip(ys).zip(&out) {
        let (x, y) = (narrow(x), narrow(y));
        let d = rfx_lower::ulps(o, reference(x, y), dtype);
        if d > worst.0 {
            worst = (d, x, y);
        }
    }
    eprintln!(
        "{f:?}: max {} ULP (at x = {:e}, y = {:e})",
        worst.0, worst.1, worst.2
    );
    assert!(
        worst.0 <= bound,
        "{f:?}: {} ULP at x = {:e}, y = {:e}",
        worst.0,
        worst.1,
        worst.2
    );
    for i in (0..xs.len()).step_by(97) {
        let one = run(&xs[i..=i], &ys[i..=i]);
        assert_eq!(
            one[0].to_bits(),
            out[i].to_bits(),
            "{f:?}({:e}, {:e})",
            xs[i],
            ys[i]
        );
    }
}

/// The `f32` `pow` routine against `std` in `f64` rounded to `f32`: within 1 ULP on the pairs of
/// [`pow_pairs`] (the C99 special values bit for bit, through the slow path), and the same bits
/// one element at a time as in a long tile.
#[test]
fn pow_f32_within_bounds() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0x9077_0032);
    let (xs, ys) = pow_pairs(&mut rng, &pow_edges(), |rng| {
        f64::from(f32::from_bits(rng.next_u64() as u32))
    });
    check_binary(AotFn::PowF32, &xs, &ys, |x, y| f64::from(x.powf(y) as f32), 1);
}

/// The `f32` `pow` routine rounds like `std` in `f64` for all but a few pairs: its `f64`
/// magnitude is within `5e-10` relative, so a result differs from the correctly rounded one only
/// next to a rounding boundary (0.04% of these pairs; a degree-6 `2^r`, `2.8e-9` relative, gave
/// 1.3%).
#[test]
fn pow_f32_nearly_correctly_rounded() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0x9077_0033);
    let narrow = |v: f64| f64::from(v as f32);
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for i in 0..200_000 {
        xs.push(narrow(uniform_f64(&mut rng, 0.0, 10.0)));
        ys.push(narrow(uniform_f64(&mut rng, -10.0, 10.0)));
        // Large exponents |y log2 x| (up to the overflow and subnormal thresholds).
        let target = [127.0, -125.0, -148.0, 60.0][i % 4];
        let x = uniform_f64(&mut rng, 0.05, 20.0);
        xs.push(narrow(x));
        ys.push(narrow((target + uniform_f64(&mut rng, -1.0, 1.0)) / x.log2()));
    }
    let out = run_binary(AotFn::PowF32, &xs, &ys);
    let mut off = 0usize;
    for ((&x, &y), &o) in xs.iter().zip(&ys).zip(&out) {
        let reference = f64::from(x.powf(y) as f32);
        let d = rfx_lower::ulps(o, reference, DType::F32);
        assert!(d <= 1, "pow({x:e}, {y:e}) = {o:e}, {reference:e} rounded");
        off += usize::from(d == 1);
    }
    eprintln!(
        "pow f32: {off} of {} pairs 1 ULP from the correctly rounded result",
        xs.len()
    );
    assert!(off * 1000 <= xs.len(), "{off} of {} pairs at 1 ULP", xs.len());
}

/// The `f64` `pow` routine against `std` (glibc, correctly rounded in practice): within 1 ULP on
/// the pairs of [`pow_pairs`], including results next to the overflow and subnormal thresholds
/// where the fast path hands over to `std`, and the C99 special values bit for bit.
#[test]
fn f64_pow_within_bounds() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0x9077_0064);
    let (xs, ys) = pow_pairs(&mut rng, &pow_edges(), |rng| f64::from_bits(rng.next_u64()));
    check_binary(AotFn::PowF64, &xs, &ys, f64::powf, 1);
}

/// The `f64` `pow` tables hold what the routine relies on, checked against `std` (glibc's
/// `log` and `exp2`, independent of the double-double arithmetic that built them):
/// `r = z inv_c - 1` stays below `0.0067` over every subinterval and is exact (`inv_c` has at
/// most 9 significant bits and `|r| < 2^-7`); the subintervals within `0.0059` of 1 take `c = 1`;
/// `log_c` is a multiple of `2^-43` and `log_c + log_c_tail = log c` to `f64` precision;
/// `ln2_hi` is a multiple of `2^-42`; `h_j (1 + t_j) = 2^(j/128)` to `f64` precision with
/// `|t_j| <= 2^-53`.
#[test]
fn pow_tables_hold_their_invariants() {
    use super::pow_tables::{N, OFF, tables};
    let t = tables();
    assert_eq!((t.ln2_hi * 2f64.powi(42)).fract(), 0.0);
    assert!((t.ln2_hi + t.ln2_lo - std::f64::consts::LN_2).abs() <= f64::EPSILON * 0.5);
    for (i, entry) in t.log.iter().enumerate() {
        let lo = f64::from_bits(OFF + ((i as u64) << 45));
        let hi = f64::from_bits(OFF + ((i as u64 + 1) << 45));
        for z in [lo, f64::from_bits(f64::to_bits(hi) - 1)] {
            let r = z.mul_add(entry.inv_c, -1.0);
            assert!(r.abs() < 0.0067, "subinterval {i}: r = {r} at z = {z}");
        }
        assert_eq!((entry.inv_c * 512.0).fract(), 0.0, "subinterval {i}");
        assert!(
            entry.inv_c * 512.0 < 1024.0,
            "subinterval {i}: at most 9 significant bits"
        );
        assert_eq!((entry.log_c * 2f64.powi(43)).fract(), 0.0, "subinterval {i}");
        let log_c = -entry.inv_c.ln();
        assert!(
            (entry.log_c + entry.log_c_tail - log_c).abs() <= f64::EPSILON * log_c.abs().max(1e-300),
            "subinterval {i}: {} + {} against {log_c}",
            entry.log_c,
            entry.log_c_tail
        );
        if (lo - 1.0).abs().max((hi - 1.0).abs()) < 0.0059 {
            assert_eq!((entry.inv_c, entry.log_c, entry.log_c_tail), (1.0, 0.0, 0.0));
        }
    }
    for j in 0..N {
        let tail = f64::from_bits(t.exp[2 * j]);
        let head = f64::from_bits(t.exp[2 * j + 1].wrapping_add((j as u64) << 45));
        let want = (j as f64 / N as f64).exp2();
        assert!(tail.abs() <= f64::EPSILON / 2.0, "entry {j}: tail {tail}");
        assert!(
            (head * (1.0 + tail) - want).abs() <= f64::EPSILON * want,
            "entry {j}: {head} (1 + {tail}) against {want}"
        );
    }
}

/// The `f64` `pow` fast path against `std` (glibc's `pow`, within 0.52 ULP): within 1 ULP, and
/// correctly rounded (as far as glibc is) for all but 8 in ten thousand, on pairs where it
/// holds: bases over 20 orders of magnitude with exponents up to ±60, negative bases with
/// integer exponents, bases within `2^-20` of 1 with exponents up to `10^8` and bases within
/// 0.1 of 1 with `|y log x|` up to 708 (where the log's error is multiplied by `y`), and results
/// next to the `|y log|x|| = 708` hand-over.
#[test]
fn f64_pow_fast_path_nearly_correctly_rounded() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0x9077_0065);
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for _ in 0..200_000 {
        xs.push(10f64.powf(uniform_f64(&mut rng, -10.0, 10.0)));
        ys.push(uniform_f64(&mut rng, -60.0, 60.0));
    }
    for _ in 0..50_000 {
        xs.push(-10f64.powf(uniform_f64(&mut rng, -5.0, 5.0)));
        ys.push((uniform_f64(&mut rng, -40.0, 40.0)).round());
    }
    for _ in 0..100_000 {
        xs.push(1.0 + uniform_f64(&mut rng, -1.0, 1.0) * 2f64.powi(-20));
        ys.push(uniform_f64(&mut rng, -1e8, 1e8));
    }
    for _ in 0..50_000 {
        let x = 10f64.powf(uniform_f64(&mut rng, -3.0, 3.0));
        xs.push(x);
        ys.push(uniform_f64(&mut rng, 707.0, 708.0) / x.ln());
    }
    // Bases near 1 but away from the subintervals around it (the largest |r|), with exponents
    // that make |y log x| several hundred: the log's truncation error, times y, shows here.
    for _ in 0..100_000 {
        let x = uniform_f64(&mut rng, 0.9, 1.1);
        xs.push(x);
        ys.push(uniform_f64(&mut rng, -708.0, 708.0) / x.ln());
    }
    let out = run_binary(AotFn::PowF64, &xs, &ys);
    let mut off = 0;
    for ((&x, &y), &o) in xs.iter().zip(&ys).zip(&out) {
        let d = rfx_lower::ulps(o, x.powf(y), DType::F64);
        assert!(
            d <= 1,
            "pow({x:e}, {y:e}) = {o:e}, glibc {:e}: {d} ULP",
            x.powf(y)
        );
        off += usize::from(d == 1);
    }
    eprintln!("pow f64: {off} of {} pairs 1 ULP from glibc", xs.len());
    // 338 of the 500,000 pairs; without the log's r⁹ and r¹⁰ terms 497.
    assert!(off * 1250 <= xs.len(), "{off} of {} pairs at 1 ULP", xs.len());
}

/// The `f64` `tan` routine against `std` (glibc, < 1 ULP): within 2 ULP on random bit patterns,
/// uniform arguments up to the fast range's end, the arguments nearest many multiples of π/2
/// (zeros and poles) and edge values; `tan(-0) = -0`.
#[test]
fn f64_tan_within_bounds() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0x7a9_0064);
    let mut xs: Vec<f64> = vec![
        0.0,
        -0.0,
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        TRIG_FAST_MAX_F64,
        -TRIG_FAST_MAX_F64,
        TRIG_FAST_MAX_F64 * 1.000_000_1,
        std::f64::consts::FRAC_PI_4,
        -std::f64::consts::FRAC_PI_4,
    ];
    for _ in 0..100_000 {
        xs.push(f64::from_bits(rng.next_u64()));
    }
    for scale in [1.0, 100.0, 1e6, TRIG_FAST_MAX_F64] {
        for _ in 0..100_000 {
            xs.push(uniform_f64(&mut rng, -scale, scale));
        }
    }
    let mut ks: Vec<f64> = (1..3000).map(f64::from).collect();
    for _ in 0..10_000 {
        ks.push(((rng.next_u64() >> 35) % (TRIG_FAST_MAX_F64 as u64 / 2)) as f64);
    }
    for k in ks {
        let near = k * std::f64::consts::FRAC_PI_2;
        for d in -2i64..=2 {
            let x = f64::from_bits(near.to_bits().wrapping_add_signed(d));
            xs.extend([x, -x]);
        }
    }
    check_f64(AotFn::TanF64, &xs, f64::tan, 2);
    assert_keeps_zero_sign(AotFn::TanF64);
}

/// The `f64` `exp2` and `log2` routines against `std` (glibc): within 1 ULP on random bit
/// patterns, uniform arguments over and beyond the fast ranges (overflow, subnormal and zero
/// results, negative and subnormal arguments through the slow path), integers and powers of
/// two (exact both ways) and edge values.
#[test]
fn f64_exp2_log2_within_bounds() {
    if !available() {
        eprintln!("skipped: no AVX2 and FMA");
        return;
    }
    let mut rng = Rng(0xe2_1264);
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -1021.0,
        -1021.5,
        -1022.0,
        -1074.0,
        -1075.0,
        1023.0,
        1023.5,
        1024.0,
        std::f64::consts::SQRT_2,
        1.0 - f64::EPSILON,
        1.0 + f64::EPSILON,
    ];
    let mut xs: Vec<f64> = specials.to_vec();
    for _ in 0..100_000 {
        xs.push(f64::from_bits(rng.next_u64()));
    }
    for (lo, hi) in [(-1.0, 1.0), (-60.0, 60.0), (-1080.0, 1030.0)] {
        for _ in 0..100_000 {
            xs.push(uniform_f64(&mut rng, lo, hi));
        }
    }
    let integers: Vec<f64> = (-1100..1100).map(f64::from).collect();
    xs.extend(&integers);
    let out = check_f64(AotFn::Exp2F64, &xs, f64::exp2, 1);
    for (&x, &y) in integers.iter().zip(&out[out.len() - integers.len()..]) {
        assert_eq!(y, x.exp2(), "exp2({x}) is exact");
    }

    let mut xs: Vec<f64> = specials.to_vec();
    for _ in 0..100_000 {
        xs.push(f64::from_bits(rng.next_u64()));
    }
    for (lo, hi) in [(0.5, 2.0), (0.999, 1.001), (0.0, 1e6), (-1.0, 1.0)] {
        for _ in 0..100_000 {
            xs.push(uniform_f64(&mut rng, lo, hi));
        }
    }
    let powers: Vec<f64> = (-1074..1024).map(pow2_f64).collect();
    xs.extend(&powers);
    let out = check_f64(AotFn::Log2F64, &xs, f64::log2, 1);
    for (e, &y) in (-1074..1024).zip(&out[out.len() - powers.len()..]) {
        assert_eq!(y, f64::from(e), "log2(2^{e}) is exact");
    }
}

/// `sincos` on `xs` by the routine `f` (an `f64` one; an `f32` one runs on `xs` rounded to
/// `f32`), as the bits of its two results widened to `f64`.
fn run_sincos(f: AotFn, xs: &[f64]) -> (Vec<u64>, Vec<u64>) {
    assert!(f.results() == 2, "{f:?}");
    // SAFETY (both arms): the callers checked AVX2 and FMA; the three buffers hold `xs.len()`
    // elements and are distinct allocations; `f` is a `sincos` routine of the dtype, so its
    // address is a `TilePairFn` (`f32`) or a `TilePairFnF64` (`f64`).
    if f.dtype() == DType::F32 {
        let a: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
        let (mut s, mut c) = (vec![0.0f32; a.len()], vec![0.0f32; a.len()]);
        unsafe {
            let routine = std::mem::transmute::<*const u8, TilePairFn>(f.address());
            routine(a.as_ptr(), s.as_mut_ptr(), c.as_mut_ptr(), a.len());
        }
        let bits = |v: Vec<f32>| v.into_iter().map(|y| u64::from(y.to_bits())).collect();
        (bits(s), bits(c))
    } else {
        let (mut s, mut c) = (vec![0.0f64; xs.len()], vec![0.0f64; xs.len()]);
        unsafe {
            let routine = std::mem::transmute::<*const u8, TilePairFnF64>(f.address());
            routine(xs.as_ptr(), s.as_mut_ptr(), c.as_mut_ptr(), xs.len());
        }
        let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect();
        (bits(s), bits(c))
    }
}

/// The `sin` and `cos` routines on `xs` (as `run_sincos` gives them).
fn run_sin_and_cos(sin: AotFn, cos: AotFn, xs: &[f64]) -> (Vec<u64>, Vec<u64>) {
    if sin.dtype() == DType::F32 {
        let a: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
        let bits = |v: Vec<f32>| v.into_iter().map(|y| u64::from(y.to_bits())).collect();
        (bits(run(sin, &a)), bits(run(cos, &a)))
    } else {
        let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect();
        (bits(run_f64(sin, xs)), bits(run_f64(cos, xs)))
    }
}

/// A `sin` and a `cos` of one value are computed by one `sincos` call in tiles (and one element
/// at a time in scalar code) and by the `sin` and `cos` routines where they do not pair, so the
/// three must give the same bits: over ordinary and huge arguments, multiples of π/4, zeros of
/// both signs, ±Inf and NaN, at every length up to a few vectors (the loop's remainder).
#[test]
fn sincos_gives_the_bits_of_sin_and_cos() {
    if !available() {
        eprintln!("skipped: this CPU has no AVX2+FMA, so the tile routines are never linked");
        return;
    }
    let mut rng = Rng(0x51c0);
    let mut xs: Vec<f64> = edge_values().into_iter().map(f64::from).collect();
    xs.extend([
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e300,
        -1e22,
        5.4e8,
        -5.4e8,
    ]);
    for k in -40..40 {
        xs.push(f64::from(k) * std::f64::consts::FRAC_PI_4);
    }
    for _ in 0..50_000 {
        xs.push(f64::from_bits(rng.next_u64()));
        xs.push(200.0 * f64::from(rng.unit()) - 100.0);
        xs.push(2e9 * f64::from(rng.unit()) - 1e9);
    }
    for (pair, sin, cos) in [
        (AotFn::SinCosF32, AotFn::SinF32, AotFn::CosF32),
        (AotFn::SinCosF64, AotFn::SinF64, AotFn::CosF64),
    ] {
        assert_eq!(pair.dtype(), sin.dtype());
        assert_eq!(sin.sincos_part(), Some((pair, 0)));
        assert_eq!(cos.sincos_part(), Some((pair, 1)));
        let (s, c) = run_sincos(pair, &xs);
        let (want_s, want_c) = run_sin_and_cos(sin, cos, &xs);
        for (i, &x) in xs.iter().enumerate() {
            assert_eq!(s[i], want_s[i], "{pair:?} sin at {x:e}");
            assert_eq!(c[i], want_c[i], "{pair:?} cos at {x:e}");
        }
        for n in 0..=20 {
            let (s, c) = run_sincos(pair, &xs[3..3 + n]);
            assert_eq!(s[..], want_s[3..3 + n], "{pair:?} over {n} elements");
            assert_eq!(c[..], want_c[3..3 + n], "{pair:?} over {n} elements");
        }
    }
}

/// The table's order is the JIT module's import order (and so the numbering of the routines'
/// function references in every tiled kernel's CLIF); each symbol names its op and dtype.
#[test]
fn the_table_keeps_the_import_order_and_names() {
    let symbols: Vec<&str> = AotFn::ALL.iter().map(|r| r.symbol()).collect();
    let expected = [
        "sin_f32",
        "cos_f32",
        "tan_f32",
        "exp_f32",
        "exp2_f32",
        "log_f32",
        "log2_f32",
        "tanh_f32",
        "sigmoid_f32",
        "atan_f32",
        "atan2_f32",
        "asin_f32",
        "acos_f32",
        "sin_f64",
        "cos_f64",
        "exp_f64",
        "log_f64",
        "atan_f64",
        "atan2_f64",
        "asin_f64",
        "acos_f64",
        "tanh_f64",
        "sigmoid_f64",
        "pow_f32",
        "pow_f64",
        "tan_f64",
        "exp2_f64",
        "log2_f64",
        "sincos_f32",
        "sincos_f64",
        "add_f32",
        "sub_f32",
        "mul_f32",
        "div_f32",
        "min_f32",
        "max_f32",
        "add_f64",
        "sub_f64",
        "mul_f64",
        "div_f64",
        "min_f64",
        "max_f64",
        "fused_f32",
        "fused_f64",
    ]
    .map(|s| format!("rfx_aot_{s}"));
    assert_eq!(symbols, expected);
    for routine in AotFn::ALL {
        let (name, dtype) = match routine.computes() {
            table::Computes::Unary(op) => (op.name(), routine.dtype()),
            table::Computes::Binary(op) => (op.name(), routine.dtype()),
            table::Computes::SinCos => ("sincos", routine.dtype()),
            table::Computes::Fused => ("fused", routine.dtype()),
        };
        assert_eq!(routine.symbol(), format!("rfx_aot_{name}_{dtype}"));
        assert!(!routine.address().is_null());
    }
}

/// Every transcendental but `erf` has a routine in both float dtypes, found by `for_op`, and
/// only transcendentals do; `atan2` and `pow` are the binary ones; `sin` and `cos` pair.
#[test]
fn for_op_finds_the_routine_of_every_transcendental() {
    for &op in UnaryOp::ALL {
        for dtype in [DType::F32, DType::F64] {
            let routine = AotFn::for_op(op, dtype);
            // `erf` has no routine: the inline code computes it everywhere.
            let has = op.is_transcendental() && op != UnaryOp::Erf;
            assert_eq!(routine.is_some(), has, "{op} {dtype}");
            if let Some(routine) = routine {
                assert_eq!(routine.computes(), table::Computes::Unary(op));
                assert_eq!(
                    (routine.dtype(), routine.arity(), routine.results()),
                    (dtype, 1, 1)
                );
            }
        }
        assert_eq!(AotFn::for_op(op, DType::I32), None);
    }
    for &op in BinaryOp::ALL {
        let routine = AotFn::for_binary(op, DType::F64);
        assert_eq!(
            routine.is_some(),
            matches!(op, BinaryOp::Pow | BinaryOp::Atan2),
            "{op}"
        );
        assert!(routine.is_none_or(|r| r.arity() == 2 && r.dtype() == DType::F64));
    }
    for (op, part) in [(UnaryOp::Sin, 0), (UnaryOp::Cos, 1)] {
        for dtype in [DType::F32, DType::F64] {
            let pair = AotFn::for_op(op, dtype).and_then(AotFn::sincos_part);
            let (routine, got) = pair.expect("sin and cos pair into sincos");
            assert_eq!(
                (routine.computes(), routine.dtype(), routine.results(), got),
                (table::Computes::SinCos, dtype, 2, part)
            );
        }
    }
    assert_eq!(AotFn::ExpF32.sincos_part(), None);
}
