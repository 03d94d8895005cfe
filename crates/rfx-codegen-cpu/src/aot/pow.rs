//! `pow` on tiles, `f32` and `f64`.
//!
//! Both fast paths return NaN exactly where they do not hold (zero, infinite or NaN operands, a
//! negative base with a non-integer exponent, and for `f64` a result outside the normal range),
//! and the routines recompute those elements through `std` (`tile_routine2!`'s `nan_marked`
//! form), which carries C99's special values.

#[allow(unused_imports, reason = "the routines' safety sections link it")]
use super::available;
use super::{ROUND_MAGIC_F64, pow2_of_rounded_f64, split_at_sqrt_half_f64};

/// Whether `y` is an odd integer, and whether it is an integer at all (an `f32` `y` converts
/// exactly).
#[inline(always)]
fn odd_integer(y: f64) -> (bool, bool) {
    let integer = y.floor() == y;
    let half = 0.5 * y;
    (integer && half.floor() != half, integer)
}

/// `pow(x, y)` for `f32` as `2^(y log2|x|)` in `f64`, with polynomials just accurate enough for
/// an `f32` result. `|x| = 2^k m` with `m` in `[√½, √2)` (an `f32` subnormal is a normal `f64`);
/// `log2 m = s P(s²)` with `s = (m - 1)/(m + 1)` and `P` of degree 4 (relative error `4.3e-12`;
/// `|y log2 m| <= |y log2|x||`, at most 150 where the result is finite and not zero, so the
/// exponent's error stays below `7e-10`); `2^t` for `t = n + r`, `|r| <= 1/2`, by a degree-7
/// polynomial in `r` (relative error `6e-11`) scaled by `2^n` in the exponent field. The `f64`
/// magnitude is within `5e-10` relative (below a hundredth of an `f32` ULP) before its rounding
/// to `f32`, which overflows to Inf and underflows through the subnormals as a conversion does.
/// The sign is `x`'s for an odd integer `y`.
///
/// NaN where `x` is zero, infinite or NaN, or negative with a non-integer `y`. An infinite `y`
/// needs no test: `y log2|x|` is ±Inf (clamped, so the result is the limit, Inf or 0) except for
/// `|x| = 1`, where it is NaN; a NaN `y` gives NaN.
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "the fitted coefficients as printed")]
fn pow_fast(x: f32, y: f32) -> f32 {
    // A finite non-zero f32 is a normal f64 (-150 <= k <= 128); other x are marked below.
    let (k, m) = split_at_sqrt_half_f64(f64::from(x.abs()));
    // m - 1 is exact (Sterbenz); log2 m = s P(s²), P fitted at Chebyshev nodes on
    // [0, (3 - 2√2)²] to 2 atanh(s)/(s ln 2).
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    let z2 = z * z;
    let p_hi = z2.mul_add(
        3.407_120_415_619_085_982_6e-1,
        z.mul_add(4.116_737_662_377_105_921_8e-1, 5.770_835_660_048_658_612_2e-1),
    );
    let p_lo = z.mul_add(9.617_966_734_515_484_749_3e-1, 2.885_390_081_789_987_049_1);
    let p = z2.mul_add(p_hi, p_lo);
    // Clamped where the f32 result is Inf or zero either way, so 2^n stays a normal f64.
    let t = (f64::from(y) * s.mul_add(p, k)).clamp(-200.0, 200.0);
    let rounded = t + ROUND_MAGIC_F64;
    let r = t - (rounded - ROUND_MAGIC_F64);
    // 2^r on [-1/2, 1/2], fitted at Chebyshev nodes.
    let r2 = r * r;
    let r4 = r2 * r2;
    let q_hi = r2.mul_add(
        r.mul_add(1.530_370_071_136_569_393_9e-5, 1.546_972_921_411_829_709_3e-4),
        r.mul_add(1.333_347_847_368_541_528_1e-3, 9.618_025_613_318_034_249_4e-3),
    );
    let q_lo = r2.mul_add(
        r.mul_add(5.550_410_906_325_866_611_9e-2, 2.402_265_121_349_809_266_1e-1),
        r.mul_add(6.931_471_805_568_324_135_3e-1, 9.999_999_999_595_617_507_4e-1),
    );
    let q = r4.mul_add(q_hi, q_lo);
    let magnitude = (q * pow2_of_rounded_f64(rounded)) as f32;
    // Whether y is an integer, and an odd one, in f32 (0.5 y is exact for every integer y).
    let integer = y.floor() == y;
    let half = 0.5 * y;
    let odd = integer && half.floor() != half;
    let value = if x < 0.0 && odd { -magnitude } else { magnitude };
    // A non-finite y needs no test: 2^(±Inf) is the limit, and y log2|x| is NaN for |x| = 1.
    let finite_nonzero = x.abs().to_bits().wrapping_sub(1) < 0x7f7f_ffff;
    let holds = finite_nonzero && (x > 0.0 || integer);
    if holds { value } else { f32::NAN }
}

/// `pow` in `f64` through `std` (glibc's correctly rounded `pow` is within 1 `f64` ULP, so the
/// `f32` result is correctly rounded up to a double rounding).
fn pow_slow(x: f32, y: f32) -> f32 {
    f64::from(x).powf(f64::from(y)) as f32
}

tile_routine2!(
    /// `dst[i] = pow(a[i], b[i])` for `i < n`.
    rfx_aot_pow_f32, pow_f32_avx2, f32, nan_marked pow_fast, pow_slow
);

/// The low 32 bits of `x`'s representation cleared (fdlibm's `SET_LOW_WORD(x, 0)`).
#[inline(always)]
fn high_word(x: f64) -> f64 {
    f64::from_bits(x.to_bits() & 0xffff_ffff_0000_0000)
}

/// `i` as an `f64`, for `|i| < 2^51`, through the exponent-field trick (AVX2 has no 64-bit
/// integer conversion, so `i as f64` would not vectorise).
#[inline(always)]
fn small_int_to_f64(i: i64) -> f64 {
    f64::from_bits((ROUND_MAGIC_F64.to_bits() as i64).wrapping_add(i) as u64) - ROUND_MAGIC_F64
}

/// `|x|^y` for `f64` by fdlibm `e_pow.c`, branch-free over the lanes, the same operations in the
/// same order as the inline code (`math::kernels::pow_magnitude_f64`, without fused
/// multiply-adds), so both give the same bits wherever this fast path holds:
/// `log2|x| = t1 + t2` to about 64 bits from `s = (x - bp)/(x + bp)` (`bp` in {1, 1.5}) and the
/// series `L1..L6`; `y = y1 + (y - y1)` with a 21-bit head, `y log2|x| = p_h + p_l`; `2^p_l`
/// scaled by `2^round(p_h)` with the `P1..P5` rational form of `e^r`. The sign is `x`'s for an
/// odd integer `y`. NaN where `x` is zero, infinite or NaN, `y` is infinite or NaN, `x < 0` with
/// a non-integer `y`, or `|p_h| > 1020` (results that overflow or are subnormal or zero).
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "fdlibm's coefficients as published")]
fn pow_fast_f64(x: f64, y: f64) -> f64 {
    let ax = x.abs();
    // Subnormal |x|: scaled by 2^53.
    let tiny = ax < f64::MIN_POSITIVE;
    let axs = if tiny { ax * 9_007_199_254_740_992.0 } else { ax };
    let bits = axs.to_bits();
    let hx = bits >> 32; // the high word (the sign is clear)
    let j = hx & 0x000f_ffff;
    // Normalise to [1, 2); bp = 1.5 for j in (0x3988E, 0xBB67A); the top of the range
    // (j >= 0xBB67A, x near 2) moves down to [√3/2, 1) with the exponent one higher.
    let top = j >= 0xbb67a;
    let k1 = j > 0x3988e && !top;
    let hi_norm = (j | 0x3ff0_0000) - if top { 0x0010_0000 } else { 0 };
    let axn = f64::from_bits((hi_norm << 32) | (bits & 0xffff_ffff));
    let exponent = ((hx >> 20) as i64) - 0x3ff;
    let n = small_int_to_f64(exponent) + if top { 1.0 } else { 0.0 } + if tiny { -53.0 } else { 0.0 };
    let bp = if k1 { 1.5 } else { 1.0 };
    let dp_h = if k1 { 5.849_624_872_207_641_601_56e-01 } else { 0.0 };
    let dp_l = if k1 { 1.350_039_202_129_748_971_28e-08 } else { 0.0 };

    // ss = s_h + s_l = (x - bp)/(x + bp)
    let u = axn - bp;
    let vv = 1.0 / (axn + bp);
    let ss = u * vv;
    let s_h = high_word(ss);
    // t_h = x + bp with the low word cleared: high word ((ix>>1)|0x20000000) + 0x80000 + (k<<18).
    let th_hi = ((hi_norm >> 1) | 0x2000_0000) + 0x0008_0000 + if k1 { 1 << 18 } else { 0 };
    let t_h = f64::from_bits(th_hi << 32);
    let t_l = axn - (t_h - bp);
    let s_l = vv * ((u - s_h * t_h) - s_h * t_l);
    // log(ax)
    let s2 = ss * ss;
    let l = horner(
        s2,
        2.069_750_178_003_384_177_84e-01,
        &[
            2.306_607_457_755_617_540_67e-01,
            2.727_281_238_085_340_064_89e-01,
            3.333_333_298_183_774_329_18e-01,
            4.285_714_285_785_501_842_52e-01,
            5.999_999_999_999_946_487_25e-01,
        ],
    );
    let r = (s2 * s2) * l + s_l * (s_h + ss);
    let sh2 = s_h * s_h;
    let t_h = high_word((sh2 + 3.0) + r);
    let t_l = r - ((t_h - 3.0) - sh2);
    // u + v = ss (1 + ...)
    let u = s_h * t_h;
    let w = s_l * t_h + t_l * ss;
    // 2/(3 log2) (ss + ...)
    let p_h = high_word(u + w);
    let p_l = w - (p_h - u);
    let z_h = p_h * 9.617_967_009_544_372_558_59e-01;
    let z_l = (p_h * -7.028_461_650_952_758_265_16e-09 + p_l * 9.617_966_939_259_755_543_29e-01) + dp_l;
    // log2(ax) = (ss + ..) 2/(3 log2) = n + dp_h + z_h + z_l
    let t1 = high_word(((z_h + z_l) + dp_h) + n);
    let t2 = z_l - (((t1 - n) - dp_h) - z_h);
    // (y1 + y2)(t1 + t2)
    let y1 = high_word(y);
    let p_l = (y - y1) * t1 + y * t2;
    let p_h = y1 * t1;

    // 2^(p_h + p_l) = 2^nn 2^(p_h - nn + p_l), p_h - nn exact.
    let normal = p_h.abs() <= 1020.0;
    let p_h = p_h.clamp(-1020.0, 1020.0);
    let rounded = p_h + ROUND_MAGIC_F64;
    let nn = rounded - ROUND_MAGIC_F64;
    let p_h = p_h - nn;
    let t = high_word(p_l + p_h);
    let u = t * 6.931_471_824_645_996_093_75e-01;
    let w = (p_l - (t - p_h)) * std::f64::consts::LN_2 + t * -1.904_654_299_957_768_045_25e-09;
    let z = u + w;
    let w = w - (z - u);
    let t = z * z;
    let p = horner(
        t,
        4.138_136_797_057_238_460_39e-08,
        &[
            -1.653_390_220_546_525_153_90e-06,
            6.613_756_321_437_934_361_17e-05,
            -2.777_777_777_701_559_338_42e-03,
            1.666_666_666_666_660_190_37e-01,
        ],
    );
    let t1 = z - t * p;
    let r = (z * t1) / (t1 - 2.0) - (w + z * w);
    let z = 1.0 - (r - z);
    let k = (rounded.to_bits() as i64).wrapping_sub(ROUND_MAGIC_F64.to_bits() as i64);
    let magnitude = z * f64::from_bits((k.wrapping_add(1023) as u64) << 52);

    let (odd, integer) = odd_integer(y);
    let value = if x < 0.0 && odd { -magnitude } else { magnitude };
    let holds = x.is_finite() && x != 0.0 && y.is_finite() && (x > 0.0 || integer) && normal;
    if holds { value } else { f64::NAN }
}

tile_routine2!(
    /// `dst[i] = pow(a[i], b[i])` for `i < n`, `f64`.
    rfx_aot_pow_f64, pow_f64_avx2, f64, nan_marked pow_fast_f64, f64::powf
);

/// `((lead·x + c0)·x + c1)·x + …` with separate multiplies and adds (fdlibm's order, no FMA).
#[inline(always)]
fn horner(x: f64, lead: f64, coeffs: &[f64]) -> f64 {
    coeffs.iter().fold(lead, |p, &c| p * x + c)
}
