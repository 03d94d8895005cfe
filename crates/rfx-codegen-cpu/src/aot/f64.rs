//! The `f64` routines: the scalar formulas (inlined into the AVX2 loops) and one
//! `tile_routine!` per op.

/// `1.5 * 2^52`: adding it rounds an `f64` of magnitude below `2^51` to an integer, which then
/// sits in the low mantissa bits.
pub(super) const ROUND_MAGIC_F64: f64 = 6_755_399_441_055_744.0;
/// π/2 in three parts: π/2 rounded to `f64`, each next part the rounded rest (159 bits).
pub(super) const PIO2_HI_F64: f64 = std::f64::consts::FRAC_PI_2;
pub(super) const PIO2_MID_F64: f64 = 6.123_233_995_736_766e-17;
pub(super) const PIO2_LO_F64: f64 = -1.497_384_904_859_169_8e-33;
/// `|x|` up to which the reduction below is exact enough for `sin`/`cos` within 1 ULP
/// (`n < 2^29`; `tests::f64_trig_near_multiples_of_pi_2`).
pub(crate) const TRIG_FAST_MAX_F64: f64 = 536_870_912.0;

/// `x = n π/2 + (r + y)` with `|r| <= π/4` and `y` the tail of `r` (fdlibm's `__rem_pio2`
/// contract, from three fused multiply-adds: `x - n HI` is exact, and the products by the other
/// parts keep their rounding errors in `y`); returns `(r, y, bits whose low two are n mod 4)`.
#[inline(always)]
pub(super) fn reduce_pio2_f64(x: f64) -> (f64, f64, u64) {
    let t = x.mul_add(std::f64::consts::FRAC_2_PI, ROUND_MAGIC_F64);
    let n = t - ROUND_MAGIC_F64;
    let r1 = n.mul_add(-PIO2_HI_F64, x);
    // r1 - n MID as r2 + (its rounding error): w = n MID exactly as w_hi + w_lo.
    let w_hi = n * PIO2_MID_F64;
    let w_lo = n.mul_add(PIO2_MID_F64, -w_hi);
    let r2 = r1 - w_hi;
    let e2 = (r1 - r2) - w_hi;
    let tail = n.mul_add(-PIO2_LO_F64, e2 - w_lo);
    let r = r2 + tail;
    let y = (r2 - r) + tail;
    // With n = 0 the products are +0 and would turn x = -0 into +0.
    let (r, y) = if n == 0.0 { (x, 0.0) } else { (r, y) };
    (r, y, t.to_bits())
}

/// fdlibm `__kernel_sin(r, y)` on `[-π/4, π/4]`.
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "fdlibm's coefficients as published")]
pub(super) fn sin_kernel_f64(x: f64, y: f64) -> f64 {
    let z = x * x;
    let v = z * x;
    let p = z.mul_add(
        1.589_690_995_211_550_102_21e-10,
        -2.505_076_025_340_686_341_95e-08,
    );
    let p = z.mul_add(p, 2.755_731_370_707_006_767_89e-06);
    let p = z.mul_add(p, -1.984_126_982_985_794_931_34e-04);
    let p = z.mul_add(p, 8.333_333_333_322_489_461_24e-03);
    // x - ((z (y/2 - v p) - y) - v S1)
    let t = z * (0.5 * y - v * p) - y;
    x - v.mul_add(1.666_666_666_666_663_243_48e-01, t)
}

/// fdlibm/musl `__cos(r, y)` on `[-π/4, π/4]`.
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "fdlibm's coefficients as published")]
pub(super) fn cos_kernel_f64(x: f64, y: f64) -> f64 {
    let z = x * x;
    let w = z * z;
    let p1 = z.mul_add(
        2.480_158_728_947_672_941_78e-05,
        -1.388_888_888_887_410_957_49e-03,
    );
    let p1 = z.mul_add(p1, 4.166_666_666_666_660_190_37e-02);
    let p2 = z.mul_add(
        -1.135_964_755_778_819_482_65e-11,
        2.087_572_321_298_174_827_90e-09,
    );
    let p2 = z.mul_add(p2, -2.755_731_435_139_066_330_35e-07);
    let r = z * p1 + (w * w) * p2;
    let hz = 0.5 * z;
    let one_minus = 1.0 - hz;
    one_minus + (((1.0 - one_minus) - hz) + (z * r - x * y))
}

/// `(sin x, cos x)` for `|x| <= TRIG_FAST_MAX_F64` from one reduction: by quadrant, `sin x` is
/// `sin r`, `cos r`, `-sin r`, `-cos r` and `cos x` is `cos r`, `-sin r`, `-cos r`, `sin r`. The
/// `sin` and `cos` routines take their half of it, so `sincos` gives their bits.
#[inline(always)]
pub(super) fn sincos_fast_f64(x: f64) -> (f64, f64) {
    let (r, y, q) = reduce_pio2_f64(x);
    let s = sin_kernel_f64(r, y);
    let c = cos_kernel_f64(r, y);
    let odd = q & 1 == 1;
    let (sin, cos) = if odd { (c, s) } else { (s, c) };
    (
        f64::from_bits(sin.to_bits() ^ ((q & 2) << 62)),
        f64::from_bits(cos.to_bits() ^ ((q.wrapping_add(1) & 2) << 62)),
    )
}

/// `sin x` for `|x| <= TRIG_FAST_MAX_F64`.
#[inline(always)]
pub(super) fn sin_fast_f64(x: f64) -> f64 {
    sincos_fast_f64(x).0
}

/// `cos x` for `|x| <= TRIG_FAST_MAX_F64`.
#[inline(always)]
pub(super) fn cos_fast_f64(x: f64) -> f64 {
    sincos_fast_f64(x).1
}

pub(super) fn in_trig_range_f64(x: f64) -> bool {
    x.abs() <= TRIG_FAST_MAX_F64
}

/// Outside the fast range (huge, ±Inf, NaN): `std` (glibc's libm, < 1 ULP).
pub(super) fn sin_slow_f64(x: f64) -> f64 {
    x.sin()
}

pub(super) fn cos_slow_f64(x: f64) -> f64 {
    x.cos()
}

tile_routine!(
    /// `dst[i] = sin(src[i])` for `i < n`, `f64`.
    rfx_aot_sin_f64, sin_f64_avx2, f64, sin_fast_f64, in_trig_range_f64, sin_slow_f64
);
tile_routine!(
    /// `dst[i] = cos(src[i])` for `i < n`, `f64`.
    rfx_aot_cos_f64, cos_f64_avx2, f64, cos_fast_f64, in_trig_range_f64, cos_slow_f64
);

pub(super) fn sincos_slow_f64(x: f64) -> (f64, f64) {
    (sin_slow_f64(x), cos_slow_f64(x))
}

tile_routine_pair!(
    /// `sin_dst[i], cos_dst[i] = sin(src[i]), cos(src[i])` for `i < n`, `f64`: the bits of the
    /// `sin` and `cos` routines for the time of one.
    rfx_aot_sincos_f64, sincos_f64_avx2, f64, sincos_fast_f64, in_trig_range_f64, sincos_slow_f64
);

/// ln 2 in two parts: rounded to `f64`, and the rounded rest.
pub(super) const LN2_HI_F64: f64 = std::f64::consts::LN_2;
pub(super) const LN2_LO_F64: f64 = 2.319_046_813_846_299_6e-17;
/// The fast path of `f64` `exp`: `2^n` stays normal (`-1021 <= n <= 1023`).
pub(super) const EXP_FAST_MIN_F64: f64 = -708.0;
pub(super) const EXP_FAST_MAX_F64: f64 = 709.0;

/// `e^x` for `EXP_FAST_MIN_F64 <= x <= EXP_FAST_MAX_F64`: `x = n ln2 + r` (`x - n LN2_HI` is
/// exact in a fused multiply-add), `|r| <= ln2/2`, `e^r` by its Taylor series to degree 13
/// (truncation below `4e-18`) in Horner form, `2^n` built in the exponent field.
#[inline(always)]
pub(super) fn exp_fast_f64(x: f64) -> f64 {
    let t = x.mul_add(std::f64::consts::LOG2_E, ROUND_MAGIC_F64);
    let n = t - ROUND_MAGIC_F64;
    let r = n.mul_add(-LN2_HI_F64, x);
    let r = n.mul_add(-LN2_LO_F64, r);
    exp_reduced_f64(r) * pow2_of_rounded_f64(t)
}

/// `2^n` for `t = n + ROUND_MAGIC_F64` (`n` an integer in `[-1022, 1023]`, kept in `t`'s low
/// mantissa bits in two's complement), built in the exponent field.
#[inline(always)]
pub(super) fn pow2_of_rounded_f64(t: f64) -> f64 {
    let k = (t.to_bits() as i64).wrapping_sub(ROUND_MAGIC_F64.to_bits() as i64);
    f64::from_bits((k.wrapping_add(1023) as u64) << 52)
}

/// `e^r` for `|r| <= ln2/2` by its Taylor series to degree 13 (truncation below `4e-18`) in
/// Horner form.
#[inline(always)]
pub(super) fn exp_reduced_f64(r: f64) -> f64 {
    let mut p = 1.605_904_383_682_161_3e-10;
    for c in [
        2.087_675_698_786_81e-9,
        2.505_210_838_544_172e-8,
        2.755_731_922_398_589e-7,
        2.755_731_922_398_589_3e-6,
        2.480_158_730_158_73e-5,
        1.984_126_984_126_984e-4,
        1.388_888_888_888_889e-3,
        8.333_333_333_333_333e-3,
        4.166_666_666_666_666_4e-2,
        0.166_666_666_666_666_66,
        0.5,
        1.0,
        1.0,
    ] {
        p = r.mul_add(p, c);
    }
    p
}

pub(super) fn in_exp_range_f64(x: f64) -> bool {
    (EXP_FAST_MIN_F64..=EXP_FAST_MAX_F64).contains(&x)
}

/// Outside the fast range (overflow, subnormal and zero results, ±Inf, NaN): `std`.
pub(super) fn exp_slow_f64(x: f64) -> f64 {
    x.exp()
}

tile_routine!(
    /// `dst[i] = exp(src[i])` for `i < n`, `f64`.
    rfx_aot_exp_f64, exp_f64_avx2, f64, exp_fast_f64, in_exp_range_f64, exp_slow_f64
);

/// The representation of √½ rounded to `f64`.
pub(super) const SQRT_HALF_BITS_F64: u64 = 0x3fe6_a09e_667f_3bcd;

/// `(k, m)` with `x = 2^k m` and `m` in `[√½, √2)`, for a normal, positive, finite `x`: the
/// exponent field of `x`'s representation less √½'s, biased by 1024 so that it stays positive
/// (`-1022 <= k <= 1024`), read out of the low bits of a float the way `ROUND_MAGIC_F64`
/// rounds; no compare and blend, and no `i64 → f64` conversion (AVX2 has none).
#[inline(always)]
pub(super) fn split_at_sqrt_half_f64(x: f64) -> (f64, f64) {
    let bits = x.to_bits();
    let tmp = bits.wrapping_sub(SQRT_HALF_BITS_F64.wrapping_sub(1024 << 52));
    let k = f64::from_bits((tmp >> 52) | ROUND_MAGIC_F64.to_bits()) - (ROUND_MAGIC_F64 + 1024.0);
    let m = f64::from_bits(bits.wrapping_sub((tmp & 0xfff0_0000_0000_0000).wrapping_sub(1024 << 52)));
    (k, m)
}

/// fdlibm's decomposition of a normal, positive, finite `x` for `log` and `log2`:
/// `x = 2^k (1 + f)` with `1 + f` in `[√½, √2)`; returns `(k, f, hfsq, s (hfsq + R(s²)))` with
/// `hfsq = f²/2`, `s = f/(2 + f)` and `R` the degree-14 polynomial, so that
/// `ln(1 + f) = f - hfsq + s (hfsq + R)`.
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "fdlibm's coefficients as published")]
pub(super) fn log_parts_f64(x: f64) -> (f64, f64, f64, f64) {
    let (k, m) = split_at_sqrt_half_f64(x);
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    // fdlibm: t1 = w (Lg2 + w (Lg4 + w Lg6)), t2 = z (Lg1 + w (Lg3 + w (Lg5 + w Lg7))).
    let t1 = w * w.mul_add(
        w.mul_add(1.531_383_769_920_937_332e-01, 2.222_219_843_214_978_396e-01),
        3.999_999_999_940_941_908e-01,
    );
    let t2 = z * w.mul_add(
        w.mul_add(
            w.mul_add(1.479_819_860_511_658_591e-01, 1.818_357_216_161_805_012e-01),
            2.857_142_874_366_239_149e-01,
        ),
        6.666_666_666_666_735_130e-01,
    );
    let r = t2 + t1;
    let hfsq = 0.5 * f * f;
    (k, f, hfsq, s * (hfsq + r))
}

/// `ln x` for normal, positive, finite `x` (fdlibm `e_log.c`): [`log_parts_f64`], then
/// `k ln2 + ln(1 + f)` arranged as fdlibm does, ln2 in two parts.
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "fdlibm's coefficients as published")]
pub(super) fn log_fast_f64(x: f64) -> f64 {
    let (k, f, hfsq, sr) = log_parts_f64(x);
    k * 6.931_471_803_691_238_164_90e-01 - ((hfsq - (sr + k * 1.908_214_929_270_587_700_02e-10)) - f)
}

pub(super) fn in_log_range_f64(x: f64) -> bool {
    (f64::MIN_POSITIVE..f64::INFINITY).contains(&x)
}

/// Outside the fast range (zero, negative, subnormal, ±Inf, NaN): `std`.
pub(super) fn log_slow_f64(x: f64) -> f64 {
    x.ln()
}

tile_routine!(
    /// `dst[i] = ln(src[i])` for `i < n`, `f64`.
    rfx_aot_log_f64, log_f64_avx2, f64, log_fast_f64, in_log_range_f64, log_slow_f64
);

/// Cephes `atan.c` (`f64`): `atan r = r + r z P(z)/Q(z)`, `z = r²`, for `|r| <= 0.66`.
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "Cephes' coefficients as published")]
pub(super) fn atan_poly_f64(r: f64) -> f64 {
    let z = r * r;
    let p = z.mul_add(
        -8.750_608_600_031_904_122_785e-1,
        -1.615_753_718_733_365_076_637e1,
    );
    let p = z.mul_add(p, -7.500_855_792_314_704_667_340e1);
    let p = z.mul_add(p, -1.228_866_684_490_136_173_410e2);
    let p = z.mul_add(p, -6.485_021_904_942_025_371_773e1);
    let q = z + 2.485_846_490_142_306_297_962e1;
    let q = z.mul_add(q, 1.650_270_098_316_988_542_046e2);
    let q = z.mul_add(q, 4.328_810_604_912_902_668_951e2);
    let q = z.mul_add(q, 4.853_903_996_359_136_964_868e2);
    let q = z.mul_add(q, 1.945_506_571_482_613_964_425e2);
    r.mul_add(z * p / q, r)
}

/// tan(3π/8), above which Cephes reduces by `-1/x`.
pub(super) const TAN_3PI_8_F64: f64 = 2.414_213_562_373_095;

/// `atan x` (`f64`, every input: `-1/|x|` is ±0 at infinity, NaN propagates, a subnormal `x`
/// gives `x`): Cephes `atan.c`, `-1/|x|` above tan(3π/8), `(|x|-1)/(|x|+1)` above 0.66, the
/// base angle's low part (`PIO2_MID_F64`, Cephes' `MOREBITS`) added to the small term first;
/// the sign of `x` restored.
#[inline(always)]
pub(super) fn atan_fast_f64(x: f64) -> f64 {
    let a = x.abs();
    let far = a > TAN_3PI_8_F64;
    let mid = a > 0.66;
    let r = if far {
        -1.0 / a
    } else if mid {
        (a - 1.0) / (a + 1.0)
    } else {
        a
    };
    let (base, lo) = if far {
        (std::f64::consts::FRAC_PI_2, PIO2_MID_F64)
    } else if mid {
        (std::f64::consts::FRAC_PI_4, 0.5 * PIO2_MID_F64)
    } else {
        (0.0, 0.0)
    };
    let y = base + (atan_poly_f64(r) + lo);
    f64::from_bits(y.to_bits() | (x.to_bits() & (1 << 63)))
}

pub(super) fn always_f64(_: f64) -> bool {
    true
}

pub(super) fn atan_slow_f64(x: f64) -> f64 {
    x.atan()
}

tile_routine!(
    /// `dst[i] = atan(src[i])` for `i < n`, `f64`.
    rfx_aot_atan_f64, atan_f64_avx2, f64, atan_fast_f64, always_f64, atan_slow_f64
);

/// π in two parts.
pub(super) const PI_LO_F64: f64 = 1.224_646_799_147_353_2e-16;

/// `atan2(y, x)` (`f64`) for finite `y`, `x` not both zero, at most 1e307, with `min/max` of the
/// magnitudes 0 or not subnormal: `a = atan(min/max)` on `[0, 1]` (reduced above 1/2), `π/2 - a`
/// when `|y| > |x|`, `π - a` when `x < 0` (two-part constants, low parts added last), the sign
/// of `y` restored.
#[inline(always)]
pub(super) fn atan2_fast_f64(y: f64, x: f64) -> f64 {
    let (ax, ay) = (x.abs(), y.abs());
    let (mn, mx) = (ax.min(ay), ax.max(ay));
    // `r = t = mn/mx`, or above `t = 1/2` `r = (t - 1)/(t + 1) = (mn - mx)/(mn + mx)`: one
    // division. The numerator and the denominator are chosen by two tests that are equal
    // (`mx - mn` is exact where it decides, by Sterbenz) but that LLVM cannot tell apart: on one
    // condition it would divide once per branch, and copy the polynomial after a second
    // branch on it into each.
    let (num, base, lo) = if mn + mn > mx {
        (mn - mx, std::f64::consts::FRAC_PI_4, 0.5 * PIO2_MID_F64)
    } else {
        (mn, 0.0, 0.0)
    };
    let den = if mx - mn < mn { mn + mx } else { mx };
    let a = base + (atan_poly_f64(num / den) + lo);
    let a = if ay > ax {
        (std::f64::consts::FRAC_PI_2 - a) + PIO2_MID_F64
    } else {
        a
    };
    let a = if x.is_sign_negative() && ax > 0.0 {
        (std::f64::consts::PI - a) + PI_LO_F64
    } else {
        a
    };
    f64::from_bits(a.to_bits() | (y.to_bits() & (1 << 63)))
}

pub(super) fn in_atan2_range_f64(y: f64, x: f64) -> bool {
    let (ax, ay) = (x.abs(), y.abs());
    let (mn, mx) = (ax.min(ay), ax.max(ay));
    ax.is_finite() && ay.is_finite() && mx <= 1.0e307 && mx > 0.0 && (mn == 0.0 || mn >= mx * 1.0e-300)
}

tile_routine2!(
    /// `dst[i] = atan2(a[i], b[i])` for `i < n`, `f64`.
    rfx_aot_atan2_f64, atan2_f64_avx2, f64, atan2_fast_f64, in_atan2_range_f64, f64::atan2
);

// ---- `f64` `asin`, `acos` (fdlibm `e_asin.c`, `e_acos.c`) ----

/// fdlibm's `R(t) = p(t)/q(t)` for `asin x = x + x R(x²)`, `t` in `[0, 1/2]`.
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "fdlibm's coefficients as published")]
pub(super) fn asin_r_f64(t: f64) -> f64 {
    let p = t.mul_add(3.479_331_075_960_211_675_70e-05, 7.915_349_942_898_145_321_76e-04);
    let p = t.mul_add(p, -4.005_553_450_067_941_140_27e-02);
    let p = t.mul_add(p, 2.012_125_321_348_629_258_81e-01);
    let p = t.mul_add(p, -3.255_658_186_224_009_154_05e-01);
    let p = t.mul_add(p, 1.666_666_666_666_666_574_15e-01) * t;
    let q = t.mul_add(
        7.703_815_055_590_193_527_91e-02,
        -6.882_839_716_054_532_930_30e-01,
    );
    let q = t.mul_add(q, 2.020_945_760_233_505_694_71e+00);
    let q = t.mul_add(q, -2.403_394_911_734_414_218_78e+00);
    let q = t.mul_add(q, 1.0);
    p / q
}

/// `s` with the low 32 bits of its significand cleared: `s²` is then exact.
#[inline(always)]
pub(super) fn high_part_f64(s: f64) -> f64 {
    f64::from_bits(s.to_bits() & 0xffff_ffff_0000_0000)
}

/// `asin x` for `|x| <= 1` (fdlibm `e_asin.c`, branch-free): `R` is evaluated once, on `x²`
/// below 1/2 and on `t = (1-|x|)/2` above; below 1/2 `x + x R(x²)`, above `π/2 - 2 asin √t`
/// with `√t` split so that its square is exact (or, from 0.975, plainly); the sign of `x`
/// restored. NaN and `|x| > 1` take the slow path.
#[inline(always)]
pub(super) fn asin_fast_f64(x: f64) -> f64 {
    let a = x.abs();
    let big = a >= 0.5;
    // (1 - |x|)/2 is exact for |x| >= 1/2.
    let t = if big { (1.0 - a) * 0.5 } else { a * a };
    let r = asin_r_f64(t);
    let small = a.mul_add(r, a);
    let s = t.sqrt();
    let near_one = PIO2_HI_F64 - (2.0 * s.mul_add(r, s) - PIO2_MID_F64);
    let w = high_part_f64(s);
    let c = (t - w * w) / (s + w);
    let p = 2.0 * s * r - (PIO2_MID_F64 - 2.0 * c);
    let q = std::f64::consts::FRAC_PI_4 - 2.0 * w;
    let mid = std::f64::consts::FRAC_PI_4 - (p - q);
    let y = if !big {
        small
    } else if a < 0.975 {
        mid
    } else {
        near_one
    };
    f64::from_bits(y.to_bits() | (x.to_bits() & (1 << 63)))
}

/// `acos x` for `|x| < 1` (fdlibm `e_acos.c`, branch-free): `R` evaluated once, on `x²` for
/// `|x| <= 1/2` and on `t = (1-|x|)/2` above; `π/2 - (x + x R(x²))` with π/2's low part in
/// the middle, `2 asin √t` with `√t` split above 1/2, `π - 2 asin √t` below -1/2. `x = 1`
/// (where the split divides 0 by 0), NaN and `|x| > 1` take the slow path.
#[inline(always)]
pub(super) fn acos_fast_f64(x: f64) -> f64 {
    let a = x.abs();
    let big = a > 0.5;
    let t = if big { (1.0 - a) * 0.5 } else { x * x };
    let r = asin_r_f64(t);
    let small = PIO2_HI_F64 - (x - x.mul_add(-r, PIO2_MID_F64));
    let s = t.sqrt();
    let df = high_part_f64(s);
    let c = (t - df * df) / (s + df);
    let pos = 2.0 * (df + s.mul_add(r, c));
    let neg = std::f64::consts::PI - 2.0 * (s + s.mul_add(r, -PIO2_MID_F64));
    if !big {
        small
    } else if x > 0.0 {
        pos
    } else {
        neg
    }
}

pub(super) fn in_unit_range_f64(x: f64) -> bool {
    x.abs() <= 1.0
}

pub(super) fn in_acos_range_f64(x: f64) -> bool {
    x.abs() < 1.0
}

pub(super) fn asin_slow_f64(x: f64) -> f64 {
    x.asin()
}

pub(super) fn acos_slow_f64(x: f64) -> f64 {
    x.acos()
}

tile_routine!(
    /// `dst[i] = asin(src[i])` for `i < n`, `f64`.
    rfx_aot_asin_f64, asin_f64_avx2, f64, asin_fast_f64, in_unit_range_f64, asin_slow_f64
);
tile_routine!(
    /// `dst[i] = acos(src[i])` for `i < n`, `f64`.
    rfx_aot_acos_f64, acos_f64_avx2, f64, acos_fast_f64, in_acos_range_f64, acos_slow_f64
);

/// `tanh x` (`f64`) for `|x| <= 350`: Cephes `tanh.c`, `x + x z P(z)/Q(z)` (`z = x²`) below
/// 0.625, else `1 - 2/(e^{2|x|} + 1)` with the `exp` routine's fast path; computed on `|x|`
/// and the sign of `x` restored (`tanh(-0) = -0`). NaN and larger `|x|` (±1) take the slow path.
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "Cephes' coefficients as published")]
pub(super) fn tanh_fast_f64(x: f64) -> f64 {
    let a = x.abs();
    let z = a * a;
    let p = z.mul_add(
        z.mul_add(-9.643_991_794_250_522_386_28e-1, -9.928_772_310_019_185_865_64e1),
        -1.614_687_684_417_084_479_52e3,
    );
    let q = z.mul_add(
        z.mul_add(z + 1.128_116_784_916_329_314_02e2, 2.235_488_390_601_005_834_83e3),
        4.844_063_053_251_254_860_48e3,
    );
    let small = a.mul_add(z * p / q, a);
    let big = 1.0 - 2.0 / (exp_fast_f64(a + a) + 1.0);
    let y = if a < 0.625 { small } else { big };
    f64::from_bits(y.to_bits() | (x.to_bits() & (1 << 63)))
}

pub(super) fn in_tanh_range_f64(x: f64) -> bool {
    x.abs() <= 350.0
}

pub(super) fn tanh_slow_f64(x: f64) -> f64 {
    x.tanh()
}

tile_routine!(
    /// `dst[i] = tanh(src[i])` for `i < n`, `f64`.
    rfx_aot_tanh_f64, tanh_f64_avx2, f64, tanh_fast_f64, in_tanh_range_f64, tanh_slow_f64
);

/// `sigmoid x` (`f64`) for `|x| <= 708`: `e = e^{-|x|}` by the `exp` routine's fast path, then
/// `1/(1+e)` for `x >= 0` and `e/(1+e)` below (no overflow, tiny results kept). NaN and larger
/// `|x|` (subnormal results or 1) take the slow path, the same formulas through `std`.
#[inline(always)]
pub(super) fn sigmoid_fast_f64(x: f64) -> f64 {
    let e = exp_fast_f64(-x.abs());
    let num = if x < 0.0 { e } else { 1.0 };
    num / (1.0 + e)
}

pub(super) fn in_sigmoid_range_f64(x: f64) -> bool {
    x.abs() <= 708.0
}

pub(super) fn sigmoid_slow_f64(x: f64) -> f64 {
    let e = (-x.abs()).exp();
    if x < 0.0 { e / (1.0 + e) } else { 1.0 / (1.0 + e) }
}

tile_routine!(
    /// `dst[i] = sigmoid(src[i])` for `i < n`, `f64`.
    rfx_aot_sigmoid_f64, sigmoid_f64_avx2, f64, sigmoid_fast_f64, in_sigmoid_range_f64, sigmoid_slow_f64
);

// ---- `f64` `tan`, `exp2`, `log2` ----

/// `tan x` for `|x| <= TRIG_FAST_MAX_F64`: `x = n π/2 + (r + y)`, then `sin r / cos r` for even
/// `n` and `-cos r / sin r` for odd `n`, each from the fdlibm kernels with the tail `y`.
#[inline(always)]
pub(super) fn tan_fast_f64(x: f64) -> f64 {
    let (r, y, q) = reduce_pio2_f64(x);
    let s = sin_kernel_f64(r, y);
    let c = cos_kernel_f64(r, y);
    if q & 1 == 1 { -c / s } else { s / c }
}

pub(super) fn tan_slow_f64(x: f64) -> f64 {
    x.tan()
}

tile_routine!(
    /// `dst[i] = tan(src[i])` for `i < n`, `f64`.
    rfx_aot_tan_f64, tan_f64_avx2, f64, tan_fast_f64, in_trig_range_f64, tan_slow_f64
);

/// `2^x` for `-1021 <= x <= 1023` (normal results): `x = n + f` exactly (`|f| <= 1/2`),
/// `f ln2 = r + r_lo` with the rounding error of `f LN2_HI` from a fused multiply-add and the
/// rest of ln2 in `r_lo`, then `e^r (1 + r_lo)` by the `exp` polynomial, scaled by `2^n`.
#[inline(always)]
pub(super) fn exp2_fast_f64(x: f64) -> f64 {
    let t = x + ROUND_MAGIC_F64;
    let n = t - ROUND_MAGIC_F64;
    let f = x - n;
    let r = f * LN2_HI_F64;
    let r_lo = f.mul_add(LN2_HI_F64, -r) + f * LN2_LO_F64;
    let p = exp_reduced_f64(r);
    p.mul_add(r_lo, p) * pow2_of_rounded_f64(t)
}

pub(super) fn in_exp2_range_f64(x: f64) -> bool {
    (-1021.0..=1023.0).contains(&x)
}

pub(super) fn exp2_slow_f64(x: f64) -> f64 {
    x.exp2()
}

tile_routine!(
    /// `dst[i] = 2^src[i]` for `i < n`, `f64`.
    rfx_aot_exp2_f64, exp2_f64_avx2, f64, exp2_fast_f64, in_exp2_range_f64, exp2_slow_f64
);

/// `log2 x` for normal, positive, finite `x` (FreeBSD `e_log2.c`): [`log_parts_f64`], then
/// `ln(1 + f) = hi + lo` with `hi = f - hfsq` cut to its high word, each part times `1/ln2` in
/// two parts, and `k` added with its rounding error carried (exact at powers of two).
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "FreeBSD's coefficients as published")]
pub(super) fn log2_fast_f64(x: f64) -> f64 {
    const IVLN2_HI: f64 = 1.442_695_040_721_446_275_71e+00;
    const IVLN2_LO: f64 = 1.675_171_316_488_651_183_53e-10;
    let (k, f, hfsq, sr) = log_parts_f64(x);
    let hi = f64::from_bits((f - hfsq).to_bits() & 0xffff_ffff_0000_0000);
    let lo = ((f - hi) - hfsq) + sr;
    let val_hi = hi * IVLN2_HI;
    let val_lo = (lo + hi) * IVLN2_LO + lo * IVLN2_HI;
    let w = k + val_hi;
    let val_lo = val_lo + ((k - w) + val_hi);
    val_lo + w
}

pub(super) fn log2_slow_f64(x: f64) -> f64 {
    x.log2()
}

tile_routine!(
    /// `dst[i] = log2(src[i])` for `i < n`, `f64`.
    rfx_aot_log2_f64, log2_f64_avx2, f64, log2_fast_f64, in_log_range_f64, log2_slow_f64
);
