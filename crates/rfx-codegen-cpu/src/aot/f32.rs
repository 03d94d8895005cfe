//! The `f32` routines: the scalar formulas (inlined into the AVX2 loops) and one
//! `tile_routine!` per op.

use rfx_lower::coefficients::{ASIN_F32, ATAN_F32, TANH_F32};

/// `1.5 * 2^23`: adding it rounds a float of magnitude below `2^22` to an integer, which then
/// sits in the low mantissa bits.
pub(super) const ROUND_MAGIC: f32 = 12_582_912.0;

pub(super) const FRAC_2_PI: f32 = std::f32::consts::FRAC_2_PI;
/// π/2 in three parts: `PIO2_HI` is π/2 rounded to `f32`, each next part the rounded rest.
pub(super) const PIO2_HI: f32 = 1.570_796_4;
pub(super) const PIO2_MID: f32 = -4.371_139e-8;
pub(super) const PIO2_LO: f32 = -1.716_285_3e-15;
/// `|x|` up to which the three-part reduction keeps `sin`/`cos` within 1 ULP (measured over
/// every `f32` below it).
pub(crate) const TRIG_FAST_MAX: f32 = 32_768.0;

/// `x = j π/2 + r` with `|r| <= π/4`; returns `r` and the bits whose low two are `j mod 4`.
#[inline(always)]
pub(super) fn reduce_pio2(x: f32) -> (f32, u32) {
    let t = x.mul_add(FRAC_2_PI, ROUND_MAGIC);
    let j = t - ROUND_MAGIC;
    let r = j.mul_add(-PIO2_HI, x);
    let r = j.mul_add(-PIO2_MID, r);
    let r = j.mul_add(-PIO2_LO, r);
    // With j = 0 the chain adds +0 products and would turn x = -0 into +0.
    let r = if j == 0.0 { x } else { r };
    (r, t.to_bits())
}

/// `sin r` for `|r| <= π/4` (Cephes `sinf`), with the sign of `r` (so `sin(-0) = -0`).
#[inline(always)]
pub(super) fn sin_poly(r: f32) -> f32 {
    let z = r * r;
    let p = z.mul_add(-1.951_529_6e-4, 8.332_161e-3);
    let p = z.mul_add(p, -1.666_665_5e-1);
    let s = (r * z).mul_add(p, r);
    f32::from_bits(s.to_bits() | (r.to_bits() & 0x8000_0000))
}

/// `cos r` for `|r| <= π/4` (Cephes `cosf`).
#[inline(always)]
pub(super) fn cos_poly(r: f32) -> f32 {
    let z = r * r;
    let p = z.mul_add(2.443_315_7e-5, -1.388_731_6e-3);
    let p = z.mul_add(p, 4.166_664_6e-2);
    (z * z).mul_add(p, z.mul_add(-0.5, 1.0))
}

/// `π` in three parts, each exactly twice the `π/2` part: `x - n π` is then `x - 2n π/2`, the
/// same reduction (and accuracy) as `reduce_pio2` at an even multiple.
pub(super) const PI_PART_HI: f32 = 2.0 * PIO2_HI;
pub(super) const PI_PART_MID: f32 = 2.0 * PIO2_MID;
pub(super) const PI_PART_LO: f32 = 2.0 * PIO2_LO;

/// `x - h π` with `π` in three parts (FMA); `|x - h π| <= π/2` for the `h` the callers pick.
#[inline(always)]
pub(super) fn reduce_pi(x: f32, h: f32) -> f32 {
    let r = h.mul_add(-PI_PART_HI, x);
    let r = h.mul_add(-PI_PART_MID, r);
    h.mul_add(-PI_PART_LO, r)
}

/// `sin r` for `|r| <= π/2`: `r + r^3 P(r^2)`, `P` of degree 3 fitted for the least relative
/// error on `[0, π/2 + 0.01]` (0.1 ULP before rounding), with the sign of `r` (so `sin(-0) =
/// -0`).
#[inline(always)]
pub(super) fn sin_odd_poly(r: f32) -> f32 {
    let s = odd_poly(
        r,
        [2.605_782_1e-6, -1.980_960_4e-4, 8.333_066_5e-3, -1.666_666e-1],
    );
    f32::from_bits(s.to_bits() | (r.to_bits() & 0x8000_0000))
}

/// `sin x` for `|x| <= TRIG_FAST_MAX`: `x = n π + r`, `sin x = (-1)^n sin r`.
#[inline(always)]
pub(super) fn sin_fast(x: f32) -> f32 {
    let t = x.mul_add(std::f32::consts::FRAC_1_PI, ROUND_MAGIC);
    let n = t - ROUND_MAGIC;
    // With n = 0 the chain adds +0 products and would turn x = -0 into +0.
    let r = if n == 0.0 { x } else { reduce_pi(x, n) };
    let s = sin_odd_poly(r);
    f32::from_bits(s.to_bits() ^ (t.to_bits() << 31))
}

/// `cos x` for `|x| <= TRIG_FAST_MAX`: `x = (n - 1/2) π + r` with `n` the nearest integer to
/// `x/π + 1/2`, `cos x = (-1)^n sin r`.
#[inline(always)]
pub(super) fn cos_fast(x: f32) -> f32 {
    let t = x.mul_add(std::f32::consts::FRAC_1_PI, 0.5) + ROUND_MAGIC;
    let h = (t - ROUND_MAGIC) - 0.5;
    let s = sin_odd_poly(reduce_pi(x, h));
    f32::from_bits(s.to_bits() ^ (t.to_bits() << 31))
}

pub(super) const LOG2E: f32 = std::f32::consts::LOG2_E;
pub(super) const LN2_HI: f32 = 0.693_359_4;
pub(super) const LN2_LO: f32 = -2.121_944_4e-4;
/// The fast path of `exp`: `2^n` stays a normal number and `e^x` neither overflows nor
/// becomes subnormal.
pub(super) const EXP_FAST_MIN: f32 = -87.0;
pub(super) const EXP_FAST_MAX: f32 = 88.0;

/// `e^x` for `EXP_FAST_MIN <= x <= EXP_FAST_MAX` (Cephes `expf`).
#[inline(always)]
pub(super) fn exp_fast(x: f32) -> f32 {
    let t = x.mul_add(LOG2E, ROUND_MAGIC);
    let n = t - ROUND_MAGIC;
    let r = n.mul_add(-LN2_HI, x);
    let r = n.mul_add(-LN2_LO, r);
    exp_poly(r) * pow2_of_rounded(t)
}

/// `e^r` for `|r| <= ln2/2` (Cephes `expf` degree-5 polynomial).
#[inline(always)]
pub(super) fn exp_poly(r: f32) -> f32 {
    let p = r.mul_add(1.987_569_1e-4, 1.398_2e-3);
    let p = r.mul_add(p, 8.333_452e-3);
    let p = r.mul_add(p, 4.166_579_6e-2);
    let p = r.mul_add(p, 1.666_666_5e-1);
    let p = r.mul_add(p, 0.5);
    (r * r).mul_add(p, r) + 1.0
}

/// `2^k` for `t = k + ROUND_MAGIC` (`k` read from the low mantissa bits), `-126 <= k <= 127`.
#[inline(always)]
pub(super) fn pow2_of_rounded(t: f32) -> f32 {
    let k = (t.to_bits() as i32).wrapping_sub(ROUND_MAGIC.to_bits() as i32);
    f32::from_bits((k.wrapping_add(127) as u32) << 23)
}

pub(super) const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;

/// The shared part of `log` and `log2` for normal, positive, finite `x`: `x = 2^e (1 + f)`
/// with `1 + f` in `[√½, √2)`, and `(e, f, f², f³ P(f))`, `P` the Cephes `logf` polynomial.
#[inline(always)]
pub(super) fn log_parts(x: f32) -> (f32, f32, f32, f32) {
    let bits = x.to_bits();
    // x = 2^e m with m in [√½, √2): the exponent field of x's representation less √½'s (the
    // split Cephes makes with its test `m < √½` on the mantissa in [1/2, 1), without the test).
    let tmp = bits.wrapping_sub(SQRT_HALF.to_bits()) as i32;
    let e = tmp >> 23;
    let m = f32::from_bits(bits.wrapping_sub((tmp as u32) & 0xff80_0000));
    let f = m - 1.0;
    let z = f * f;
    let p = f.mul_add(7.037_683_6e-2, -1.151_461e-1);
    let p = f.mul_add(p, 1.167_699_9e-1);
    let p = f.mul_add(p, -1.242_014_1e-1);
    let p = f.mul_add(p, 1.424_932_3e-1);
    let p = f.mul_add(p, -1.666_805_8e-1);
    let p = f.mul_add(p, 2.000_071_4e-1);
    let p = f.mul_add(p, -2.499_999_4e-1);
    let p = f.mul_add(p, 0.333_333_3);
    (e as f32, f, z, (f * z) * p)
}

/// `ln x` for normal, positive, finite `x` (Cephes `logf`).
#[inline(always)]
pub(super) fn log_fast(x: f32) -> f32 {
    let (fe, f, z, y) = log_parts(x);
    let y = fe.mul_add(LN2_LO, y);
    let y = z.mul_add(-0.5, y);
    let r = f + y;
    fe.mul_add(LN2_HI, r)
}

/// `tan x` for `|x| <= TRIG_FAST_MAX`: `sin r / cos r`, or `-cos r / sin r` in odd quadrants.
#[inline(always)]
pub(super) fn tan_fast(x: f32) -> f32 {
    let (r, bits) = reduce_pio2(x);
    let s = sin_poly(r);
    let c = cos_poly(r);
    let odd = bits & 1 == 1;
    let num = if odd { -c } else { s };
    let den = if odd { s } else { c };
    num / den
}

/// `2^x` for `EXP2_FAST_MIN <= x <= EXP2_FAST_MAX`: `x = n + f`, `|f| <= 1/2`, `2^f = e^(f ln2)`
/// with the `exp` polynomial (its argument split in two parts so `f ln2` keeps its low bits).
#[inline(always)]
pub(super) fn exp2_fast(x: f32) -> f32 {
    let t = x + ROUND_MAGIC;
    let n = t - ROUND_MAGIC;
    let f = x - n;
    // r = f ln2 with its rounding error folded in through FMA.
    let hi = f * std::f32::consts::LN_2;
    let lo = f.mul_add(std::f32::consts::LN_2, -hi) + f * LN2_TAIL;
    exp_poly(hi + lo) * pow2_of_rounded(t)
}

/// `ln 2 - f32(ln 2)`.
pub(super) const LN2_TAIL: f32 = -1.904_654_3e-9;
pub(super) const EXP2_FAST_MIN: f32 = -125.0;
pub(super) const EXP2_FAST_MAX: f32 = 127.0;

/// `log2 x` for normal, positive, finite `x`: `e + log2(m)` with `log2(m) = ln(m) log2(e)`,
/// `ln(m)` from the `log` polynomial and the exponent added last (so `log2` of a power of two
/// is exact).
#[inline(always)]
pub(super) fn log2_fast(x: f32) -> f32 {
    let (fe, f, z, y) = log_parts(x);
    let y = z.mul_add(-0.5, y);
    // ln(1+f) = f + y; times log2(e) in two parts.
    let ln = f + y;
    let hi = ln * std::f32::consts::LOG2_E;
    let lo = ln.mul_add(std::f32::consts::LOG2_E, -hi) + ln * LOG2E_TAIL;
    fe + (hi + lo)
}

/// `log2(e) - f32(log2(e))`.
pub(super) const LOG2E_TAIL: f32 = 1.925_963e-8;

/// Cephes `tanhf`'s polynomial, the shared table's coefficients rounded to `f32`.
const TANH_POLY: [f32; 5] = [
    TANH_F32[0] as f32,
    TANH_F32[1] as f32,
    TANH_F32[2] as f32,
    TANH_F32[3] as f32,
    TANH_F32[4] as f32,
];

/// `tanh x` for finite `x` (Cephes `tanhf`): an odd polynomial below `|x| = 0.625`, else
/// `1 - 2 / (e^(2|x|) + 1)` with the sign of `x`; `±1` from `|x| = 9` on.
#[inline(always)]
pub(super) fn tanh_fast(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let c = TANH_POLY;
    let p = z.mul_add(c[4], c[3]);
    let p = z.mul_add(p, c[2]);
    let p = z.mul_add(p, c[1]);
    let p = z.mul_add(p, c[0]);
    // The sign restored so that `tanh(-0) = -0`.
    let small = (x * z).mul_add(p, x);
    let small = f32::from_bits(small.to_bits() | (x.to_bits() & 0x8000_0000));
    let e = exp_fast((a + a).min(18.0));
    let big = 1.0 - 2.0 / (e + 1.0);
    let big = if a >= 9.0 { 1.0 } else { big };
    let big = f32::from_bits(big.to_bits() | (x.to_bits() & 0x8000_0000));
    if a < 0.625 { small } else { big }
}

/// `1 / (1 + e^-x)` for `|x| <= 87`: `e = e^-|x|`, then `1 / (1 + e)` or `e / (1 + e)`.
#[inline(always)]
pub(super) fn sigmoid_fast(x: f32) -> f32 {
    let e = exp_fast(-x.abs());
    let d = 1.0 + e;
    if x < 0.0 { e / d } else { 1.0 / d }
}

/// `atan t` for `|t| <= tan(π/8)` (Cephes `atanf` polynomial).
#[inline(always)]
pub(super) fn atan_poly(t: f32) -> f32 {
    // `odd_poly` takes the highest degree first.
    odd_poly(
        t,
        [
            ATAN_F32[3] as f32,
            ATAN_F32[2] as f32,
            ATAN_F32[1] as f32,
            ATAN_F32[0] as f32,
        ],
    )
}

/// `t + t^3 (c[3] + c[2] t^2 + c[1] t^4 + c[0] t^6)` by Horner's rule with FMA (the shared shape
/// of the odd `sin` and `atan` polynomials).
#[inline(always)]
pub(super) fn odd_poly(t: f32, c: [f32; 4]) -> f32 {
    let z = t * t;
    let p = z.mul_add(c[0], c[1]);
    let p = z.mul_add(p, c[2]);
    let p = z.mul_add(p, c[3]);
    (t * z).mul_add(p, t)
}

/// `atan x` for finite `x` (Cephes `atanf`): `x > tan(3π/8)`: `π/2 + atan(-1/x)`;
/// `x > tan(π/8)`: `π/4 + atan((x-1)/(x+1))`; the sign restored last.
#[inline(always)]
pub(super) fn atan_fast(x: f32) -> f32 {
    let a = x.abs();
    let far = a > 2.414_213_6;
    let mid = a > 0.414_213_57;
    let t = if far {
        -1.0 / a
    } else if mid {
        (a - 1.0) / (a + 1.0)
    } else {
        a
    };
    let base = if far {
        std::f32::consts::FRAC_PI_2
    } else if mid {
        std::f32::consts::FRAC_PI_4
    } else {
        0.0
    };
    let y = base + atan_poly(t);
    f32::from_bits(y.to_bits() | (x.to_bits() & 0x8000_0000))
}

/// `atan2(y, x)`: `a = atan(min/max)` of the magnitudes on `[0, 1]`, then `π/2 - a` when
/// `|y| > |x|` and `π - a` when `x < 0` (two-part constants), the sign of `y` last. Right for
/// every finite input but `(±0, ±0)`, and NaN exactly where it is not (NaN or infinite
/// operands, both zero): the slow path recomputes those. A subnormal ratio is right too: the
/// division rounds it once, and `atan t` rounds to `t` there.
#[inline(always)]
pub(super) fn atan2_fast(y: f32, x: f32) -> f32 {
    let (ax, ay) = (x.abs(), y.abs());
    // One division and no reduction: LLVM computes whatever feeds a select once per arm when
    // it can tie the select's condition to its operands, so the ratio is taken through
    // `min`/`max` (not a select on `|y| > |x|`) and reduced by no interval test.
    let a = atan_unit(ax.min(ay) / ax.max(ay));
    let a = if ay > ax {
        (FRAC_PI_2_HI - a) + FRAC_PI_2_LO
    } else {
        a
    };
    let a = if x.is_sign_negative() && ax > 0.0 {
        (PI_HI - a) + PI_LO
    } else {
        a
    };
    // NaN where either magnitude is NaN (`min`/`max` drop one NaN operand) or infinite: the
    // slow path takes those. `(ax - ay) * 0` is ±0 otherwise, and `a` is not −0.
    let a = a + (ax - ay) * 0.0;
    f32::from_bits(a.to_bits() | (y.to_bits() & 0x8000_0000))
}

/// `atan t` for `t` in `[0, 1]`: `t + t u P(u)` with `u = t²` and `P` of degree 8, fitted to
/// `(atan(t)/t - 1)/u` at Chebyshev nodes (relative error 1.1e-8 in exact arithmetic), and
/// evaluated by Estrin's scheme: a dependency chain of five multiply-adds instead of Horner's
/// nine lets the CPU overlap more elements.
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "the fitted coefficients as computed")]
pub(super) fn atan_unit(t: f32) -> f32 {
    let u = t * t;
    let u2 = u * u;
    let u4 = u2 * u2;
    let p01 = u.mul_add(1.999_973_932_983_558e-1, -3.333_333_173_306_352e-1);
    let p23 = u.mul_add(1.103_376_411_531_345_5e-1, -1.427_856_874_821_060_2e-1);
    let p45 = u.mul_add(6.250_169_444_749_563_2e-2, -8.656_880_430_154_521_5e-2);
    let p67 = u.mul_add(1.350_777_142_702_053_5e-2, -3.587_153_898_204_335_8e-2);
    let p03 = u2.mul_add(p23, p01);
    let p47 = u2.mul_add(p67, p45);
    let p48 = u4.mul_add(-2.386_997_316_724_113_2e-3, p47);
    let p = u4.mul_add(p48, p03);
    (t * u).mul_add(p, t)
}

pub(super) const FRAC_PI_2_HI: f32 = std::f32::consts::FRAC_PI_2;
pub(super) const FRAC_PI_2_LO: f32 = -4.371_139e-8;
pub(super) const PI_HI: f32 = std::f32::consts::PI;
pub(super) const PI_LO: f32 = -8.742_278e-8;

/// `atan2` in `f64` through libm.
pub(super) fn atan2_slow(y: f32, x: f32) -> f32 {
    f64::from(y).atan2(f64::from(x)) as f32
}

pub(super) fn in_exp2_range(x: f32) -> bool {
    (EXP2_FAST_MIN..=EXP2_FAST_MAX).contains(&x)
}

pub(super) fn in_sigmoid_range(x: f32) -> bool {
    x.abs() <= 87.0
}

pub(super) fn is_finite(x: f32) -> bool {
    x.is_finite()
}

pub(super) fn in_trig_range(x: f32) -> bool {
    x.abs() <= TRIG_FAST_MAX
}

pub(super) fn in_exp_range(x: f32) -> bool {
    (EXP_FAST_MIN..=EXP_FAST_MAX).contains(&x)
}

pub(super) fn in_log_range(x: f32) -> bool {
    (f32::MIN_POSITIVE..f32::INFINITY).contains(&x)
}

/// The results outside the fast ranges, from `std` in `f64` (glibc's libm: < 1 ULP of `f64`,
/// so at most a double rounding off the correctly rounded `f32`).
pub(super) fn sin_slow(x: f32) -> f32 {
    f64::from(x).sin() as f32
}

pub(super) fn cos_slow(x: f32) -> f32 {
    f64::from(x).cos() as f32
}

pub(super) fn tan_slow(x: f32) -> f32 {
    f64::from(x).tan() as f32
}

pub(super) fn exp2_slow(x: f32) -> f32 {
    f64::from(x).exp2() as f32
}

pub(super) fn log2_slow(x: f32) -> f32 {
    f64::from(x).log2() as f32
}

pub(super) fn tanh_slow(x: f32) -> f32 {
    f64::from(x).tanh() as f32
}

/// As the interpreter computes it (`rfx_ir::semantics`), in `f64`.
pub(super) fn sigmoid_slow(x: f32) -> f32 {
    let x = f64::from(x);
    (if x < 0.0 {
        let e = x.exp();
        e / (1.0 + e)
    } else {
        1.0 / (1.0 + (-x).exp())
    }) as f32
}

pub(super) fn atan_slow(x: f32) -> f32 {
    f64::from(x).atan() as f32
}

pub(super) fn exp_slow(x: f32) -> f32 {
    f64::from(x).exp() as f32
}

pub(super) fn log_slow(x: f32) -> f32 {
    f64::from(x).ln() as f32
}

tile_routine!(
    /// `dst[i] = sin(src[i])` for `i < n`.
    rfx_aot_sin_f32, sin_f32_avx2, f32, sin_fast, in_trig_range, sin_slow
);
tile_routine!(
    /// `dst[i] = cos(src[i])` for `i < n`.
    rfx_aot_cos_f32, cos_f32_avx2, f32, cos_fast, in_trig_range, cos_slow
);
/// `(sin x, cos x)` for `|x| <= TRIG_FAST_MAX`, each by its own routine's formula (their
/// reductions differ), in one pass.
#[inline(always)]
pub(super) fn sincos_fast(x: f32) -> (f32, f32) {
    (sin_fast(x), cos_fast(x))
}

pub(super) fn sincos_slow(x: f32) -> (f32, f32) {
    (sin_slow(x), cos_slow(x))
}

tile_routine_pair!(
    /// `sin_dst[i], cos_dst[i] = sin(src[i]), cos(src[i])` for `i < n`: the bits of the `sin`
    /// and `cos` routines in one pass.
    rfx_aot_sincos_f32, sincos_f32_avx2, f32, sincos_fast, in_trig_range, sincos_slow
);
tile_routine!(
    /// `dst[i] = tan(src[i])` for `i < n`.
    rfx_aot_tan_f32, tan_f32_avx2, f32, tan_fast, in_trig_range, tan_slow
);
tile_routine!(
    /// `dst[i] = 2^src[i]` for `i < n`.
    rfx_aot_exp2_f32, exp2_f32_avx2, f32, exp2_fast, in_exp2_range, exp2_slow
);
tile_routine!(
    /// `dst[i] = log2(src[i])` for `i < n`.
    rfx_aot_log2_f32, log2_f32_avx2, f32, log2_fast, in_log_range, log2_slow
);
tile_routine!(
    /// `dst[i] = tanh(src[i])` for `i < n`.
    rfx_aot_tanh_f32, tanh_f32_avx2, f32, tanh_fast, is_finite, tanh_slow
);
tile_routine!(
    /// `dst[i] = sigmoid(src[i])` for `i < n`.
    rfx_aot_sigmoid_f32, sigmoid_f32_avx2, f32, sigmoid_fast, in_sigmoid_range, sigmoid_slow
);
tile_routine!(
    /// `dst[i] = atan(src[i])` for `i < n`.
    rfx_aot_atan_f32, atan_f32_avx2, f32, atan_fast, is_finite, atan_slow
);
tile_routine!(
    /// `dst[i] = exp(src[i])` for `i < n`.
    rfx_aot_exp_f32, exp_f32_avx2, f32, exp_fast, in_exp_range, exp_slow
);
tile_routine!(
    /// `dst[i] = ln(src[i])` for `i < n`.
    rfx_aot_log_f32, log_f32_avx2, f32, log_fast, in_log_range, log_slow
);

/// Cephes `asinf.c`'s polynomial, the shared table's coefficients rounded to `f32`.
const ASIN_POLY: [f32; 5] = [
    ASIN_F32[0] as f32,
    ASIN_F32[1] as f32,
    ASIN_F32[2] as f32,
    ASIN_F32[3] as f32,
    ASIN_F32[4] as f32,
];

/// Cephes `asinf.c`: `asin t = t + t z P(z)` for `|t| <= 1/2`, given `z = t²`.
#[inline(always)]
pub(super) fn asin_core(t: f32, z: f32) -> f32 {
    let c = ASIN_POLY;
    let p = z.mul_add(c[4], c[3]);
    let p = z.mul_add(p, c[2]);
    let p = z.mul_add(p, c[1]);
    let p = z.mul_add(p, c[0]);
    t.mul_add(z * p, t)
}

/// `asin x` for `|x| <= 1`: the core on `|x|` up to 1/2, else `π/2 - 2 asin √((1-|x|)/2)`
/// (two-part π/2); the sign of `x` restored. NaN and `|x| > 1` take the slow path.
#[inline(always)]
pub(super) fn asin_fast(x: f32) -> f32 {
    let a = x.abs();
    let small = a <= 0.5;
    let zb = (1.0 - a) * 0.5;
    let (t, z) = if small { (a, a * a) } else { (zb.sqrt(), zb) };
    let core = asin_core(t, z);
    let y = if small {
        core
    } else {
        FRAC_PI_2_HI - ((core + core) - FRAC_PI_2_LO)
    };
    f32::from_bits(y.to_bits() | (x.to_bits() & 0x8000_0000))
}

/// `acos x` for `|x| <= 1`: `π/2 - asin x` up to 1/2, `2 asin s` above, `π - 2 asin s` below
/// -1/2 (`s = √((1-|x|)/2)`, two-part constants). NaN and `|x| > 1` take the slow path.
#[inline(always)]
pub(super) fn acos_fast(x: f32) -> f32 {
    let a = x.abs();
    let small = a <= 0.5;
    let zb = (1.0 - a) * 0.5;
    let (t, z) = if small { (x, x * x) } else { (zb.sqrt(), zb) };
    let core = asin_core(t, z);
    if small {
        FRAC_PI_2_HI - (core - FRAC_PI_2_LO)
    } else if x < 0.0 {
        PI_HI - ((core + core) - PI_LO)
    } else {
        core + core
    }
}

pub(super) fn in_unit_range(x: f32) -> bool {
    x.abs() <= 1.0
}

pub(super) fn asin_slow(x: f32) -> f32 {
    f64::from(x).asin() as f32
}

pub(super) fn acos_slow(x: f32) -> f32 {
    f64::from(x).acos() as f32
}

tile_routine!(
    /// `dst[i] = asin(src[i])` for `i < n`.
    rfx_aot_asin_f32, asin_f32_avx2, f32, asin_fast, in_unit_range, asin_slow
);
tile_routine!(
    /// `dst[i] = acos(src[i])` for `i < n`.
    rfx_aot_acos_f32, acos_f32_avx2, f32, acos_fast, in_unit_range, acos_slow
);

tile_routine2!(
    /// `dst[i] = atan2(a[i], b[i])` for `i < n`.
    rfx_aot_atan2_f32, atan2_f32_avx2, f32, nan_marked atan2_fast, atan2_slow
);
