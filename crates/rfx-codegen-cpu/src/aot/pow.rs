//! `pow` on tiles, `f32` and `f64`.
//!
//! Both fast paths return NaN exactly where they do not hold (zero, infinite or NaN operands, a
//! negative base with a non-integer exponent, and for `f64` a result outside the normal range),
//! and the routines recompute those elements through `std` (`tile_routine2!`'s `nan_marked`
//! form), which carries C99's special values.

use super::f64::{ROUND_MAGIC_F64, pow2_of_rounded_f64, split_at_sqrt_half_f64};
use super::pow_tables::{self, N, OFF};
use std::mem::MaybeUninit;

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

/// `i` as an `f64`, for `|i| < 2^51`, through the exponent-field trick (AVX2 has no 64-bit
/// integer conversion, so `i as f64` would not vectorise).
#[inline(always)]
fn small_int_to_f64(i: i64) -> f64 {
    f64::from_bits((ROUND_MAGIC_F64.to_bits() as i64).wrapping_add(i) as u64) - ROUND_MAGIC_F64
}

/// The `f64` `pow` routine computes `pow(x, y)` by the table-driven method of glibc's and musl's
/// `pow` (Szabolcs Nagy, Arm optimized routines) with rfx's own tables ([`pow_tables`], built
/// from their definitions), branch-free over the lanes:
///
/// - `|x| = 2^k z` with `z` in `[0.7077, 1.4155)`, in subinterval `i` of 128; `r = z/c - 1`
///   exactly (`z · inv_c - 1` by one FMA, `|r| < 0.0067`); `log|x| = k ln2 + log c + log1p(r)`
///   as a double-double, `log1p(r) - r + r²/2` by its Taylor series to `r¹⁰` (error below
///   `2^-83`, so even `|y| = 10^5` near `x = 1` keeps the result within a hundredth of an ULP);
/// - `y log|x| = e_hi + e_lo` (the product's rounding error from an FMA);
/// - `e^(e_hi + e_lo) = 2^(m/128) e^ρ`, `|ρ| <= ln2/256`, `2^(m/128) = h (1 + t)` from the
///   table, `e^ρ - 1` by its Taylor series to `ρ⁵` (error below `2^-60`); the result
///   `s + s (t + e^ρ - 1)` by one FMA, `s = h 2^⌊m/128⌋` built in the exponent field.
///
/// The sign is `x`'s for an odd integer `y`. NaN where `x` is zero, subnormal, infinite or NaN,
/// `y` is infinite or NaN, `x < 0` with a non-integer `y`, or `|y log|x|| > 708` (results that
/// overflow or are subnormal or zero): the slow path computes those. AVX2 gathers are
/// microcoded on AMD's cores and LLVM does not vectorise the lookups, so the routine runs in
/// stages over blocks of [`POW_BLOCK`] elements: vector passes for the arithmetic, plain loops
/// for the two table lookups in between.
const POW_BLOCK: usize = 64;

/// Calls of fewer elements run in one pass without staging.
const POW_STAGED_MIN: usize = 8;

/// The log-table subinterval of `|x|`.
#[inline(always)]
fn log_index(x: f64) -> u32 {
    let ix = x.to_bits() & 0x7fff_ffff_ffff_ffff;
    ((ix.wrapping_sub(OFF) >> 45) % N as u64) as u32
}

/// `(e_hi, e_lo)` with `e_hi + e_lo = y log|x|` from `|x|`'s table entry.
#[inline(always)]
fn pow_exponent(
    x: f64,
    y: f64,
    inv_c: f64,
    log_c: f64,
    log_c_tail: f64,
    ln2_hi: f64,
    ln2_lo: f64,
) -> (f64, f64) {
    let ix = x.to_bits() & 0x7fff_ffff_ffff_ffff;
    let tmp = ix.wrapping_sub(OFF);
    let k = (tmp as i64) >> 52;
    let z = f64::from_bits(ix.wrapping_sub(tmp & (0xfff << 52)));
    let kd = small_int_to_f64(k);
    let r = z.mul_add(inv_c, -1.0);
    let t1 = kd.mul_add(ln2_hi, log_c);
    let t2 = t1 + r;
    let lo1 = kd.mul_add(ln2_lo, log_c_tail);
    let lo2 = t1 - t2 + r;
    let ar = -0.5 * r;
    let ar2 = r * ar;
    let ar3 = r * ar2;
    let hi = t2 + ar2;
    let lo3 = ar.mul_add(r, -ar2);
    let lo4 = t2 - hi + ar2;
    // log1p(r) - r + r²/2 = ar3 (-2/3 + r/2 + ar2 (4/5 - 2r/3 + ar2 (-8/7 + r + ar2 (16/9 - 8r/5))))
    let inner = ar2.mul_add(r.mul_add(-1.6, 16.0 / 9.0), r - 8.0 / 7.0);
    let inner = ar2.mul_add(inner, r.mul_add(-2.0 / 3.0, 0.8));
    let p = ar3 * ar2.mul_add(inner, r.mul_add(0.5, -2.0 / 3.0));
    let lo = lo1 + lo2 + lo3 + lo4 + p;
    let log_hi = hi + lo;
    let log_lo = hi - log_hi + lo;
    let e_hi = y * log_hi;
    (e_hi, y.mul_add(log_lo, y.mul_add(log_hi, -e_hi)))
}

/// `e_hi = m ln2/N + ρ`: the bits holding `m` (low bits) and `ρ` (`e_lo` added).
#[inline(always)]
fn exp_reduce(e_hi: f64, e_lo: f64, neg_ln2_hi_n: f64, neg_ln2_lo_n: f64) -> (u64, f64) {
    let shifted = e_hi.mul_add(N as f64 / std::f64::consts::LN_2, ROUND_MAGIC_F64);
    let md = shifted - ROUND_MAGIC_F64;
    let rho = md.mul_add(neg_ln2_hi_n, e_hi);
    (shifted.to_bits(), md.mul_add(neg_ln2_lo_n, rho) + e_lo)
}

/// The result from the exp table's `t` and `h` bits of `m`'s entry, and NaN where the fast path
/// does not hold.
#[inline(always)]
fn pow_result(x: f64, y: f64, e_hi: f64, m_bits: u64, rho: f64, tail: f64, head_bits: u64) -> f64 {
    let (odd, integer) = odd_integer(y);
    let sign = if x < 0.0 && odd { 1u64 << 63 } else { 0 };
    let scale = f64::from_bits(head_bits.wrapping_add(m_bits << 45).wrapping_add(sign));
    let rho2 = rho * rho;
    let poly = rho2.mul_add(
        rho2.mul_add(rho.mul_add(1.0 / 120.0, 1.0 / 24.0), rho.mul_add(1.0 / 6.0, 0.5)),
        rho,
    );
    let value = scale.mul_add(tail + poly, scale);
    let ix = x.to_bits() & 0x7fff_ffff_ffff_ffff;
    let normal = ix >= f64::MIN_POSITIVE.to_bits() && ix < f64::INFINITY.to_bits();
    let holds = normal && y.is_finite() && (x > 0.0 || integer) && e_hi.abs() <= 708.0;
    if holds { value } else { f64::NAN }
}

/// The `f64` fast path on one pair, its lookups inline (no staging): NaN where it does not hold.
#[inline(always)]
fn pow_unstaged(tables: &pow_tables::PowTables, x: f64, y: f64) -> f64 {
    let (ln2_hi, ln2_lo) = (tables.ln2_hi, tables.ln2_lo);
    let (neg_hi, neg_lo) = (tables.neg_ln2_hi_n, tables.neg_ln2_lo_n);
    let entry = tables.log[log_index(x) as usize % N];
    let (hi, lo) = pow_exponent(x, y, entry.inv_c, entry.log_c, entry.log_c_tail, ln2_hi, ln2_lo);
    let (m, rho) = exp_reduce(hi, lo, neg_hi, neg_lo);
    let idx = 2 * (m as usize % N);
    pow_result(
        x,
        y,
        hi,
        m,
        rho,
        f64::from_bits(tables.exp[idx]),
        tables.exp[idx + 1],
    )
}

/// The `f64` `pow` routine on one pair and its AVX2 compilation.
#[cfg(target_arch = "x86_64")]
pub(super) mod pow_f64_avx2 {
    use super::{pow_tables, pow_unstaged};

    /// The routine on one pair: the bits [`rfx_aot_pow_f64`](super::rfx_aot_pow_f64) writes
    /// for `(x, y)`, without the array setup.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA ([`available`](super::super::available)).
    #[target_feature(enable = "avx2,fma")]
    pub(in super::super) unsafe extern "C" fn one(x: f64, y: f64) -> f64 {
        let value = pow_unstaged(pow_tables::tables(), x, y);
        if value.is_nan() { x.powf(y) } else { value }
    }

    /// The routine on one block of pairs ([`BLOCK_BYTES`](super::super::BLOCK_BYTES) of
    /// elements of `a` and of `b` into `dst`): the bits it writes for them.
    ///
    /// # Safety
    /// `a` and `b` must be valid for the block's reads and `dst` for its writes, `dst` must
    /// overlap neither, and the CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(in super::super) unsafe extern "C" fn block(
        a: &[f64; super::super::BLOCK_BYTES / 8],
        b: &[f64; super::super::BLOCK_BYTES / 8],
        dst: &mut [f64; super::super::BLOCK_BYTES / 8],
    ) {
        // SAFETY: three blocks of `f64`, `dst` apart from the sources.
        unsafe { super::pow_f64_avx2(a.as_ptr(), b.as_ptr(), dst.as_mut_ptr(), a.len()) }
    }

    /// The routine has no AVX-512 compilation: its block entry serves AVX-512 CPUs too.
    pub(in super::super) use block as block_wide;
}

/// `dst[i] = pow(a[i], b[i])` for `i < n`, `f64` (see [`POW_BLOCK`] for the method), then `std`
/// for the elements the fast path marked NaN.
///
/// # Safety
/// `a` and `b` must be valid for `n` reads and `dst` for `n` writes of `f64`, `dst` must not
/// overlap either source, and the CPU must have AVX2 and FMA ([`available`](super::available)).
pub(crate) unsafe extern "C" fn rfx_aot_pow_f64(a: *const f64, b: *const f64, dst: *mut f64, n: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded from this function's contract.
    unsafe {
        pow_f64_avx2(a, b, dst, n)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (a, b, dst, n);
        unreachable!("ahead-of-time tiles are only linked on x86-64")
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pow_f64_avx2(a: *const f64, b: *const f64, dst: *mut f64, n: usize) {
    // SAFETY: the caller guarantees the three ranges are valid and `dst` overlaps neither
    // source.
    let (xs, ys, out) = unsafe {
        (
            std::slice::from_raw_parts(a, n),
            std::slice::from_raw_parts(b, n),
            std::slice::from_raw_parts_mut(dst, n),
        )
    };
    let tables = pow_tables::tables();
    let (ln2_hi, ln2_lo) = (tables.ln2_hi, tables.ln2_lo);
    let (neg_hi, neg_lo) = (tables.neg_ln2_hi_n, tables.neg_ln2_lo_n);
    let mut outside = 0u32;
    if n < POW_STAGED_MIN {
        // A vector's lanes or fewer (scalar code and short loops call with 1 to 4): one pass,
        // no staging.
        for ((o, &x), &y) in out.iter_mut().zip(xs).zip(ys) {
            let value = pow_unstaged(tables, x, y);
            *o = value;
            outside |= u32::from(value.is_nan());
        }
    } else {
        // Each stage writes elements `0..len` of its arrays before the next stage reads them,
        // so they need no initialisation (zeroing them cost a third of a 64-element call).
        let mut index = [MaybeUninit::<u32>::uninit(); POW_BLOCK];
        let mut inv_c = [MaybeUninit::<f64>::uninit(); POW_BLOCK];
        let mut log_c = [MaybeUninit::<f64>::uninit(); POW_BLOCK];
        let mut log_c_tail = [MaybeUninit::<f64>::uninit(); POW_BLOCK];
        let mut e_hi = [MaybeUninit::<f64>::uninit(); POW_BLOCK];
        let mut m_bits = [MaybeUninit::<u64>::uninit(); POW_BLOCK];
        let mut rho = [MaybeUninit::<f64>::uninit(); POW_BLOCK];
        let mut tail = [MaybeUninit::<f64>::uninit(); POW_BLOCK];
        let mut head = [MaybeUninit::<u64>::uninit(); POW_BLOCK];
        for ((xs, ys), out) in xs
            .chunks(POW_BLOCK)
            .zip(ys.chunks(POW_BLOCK))
            .zip(out.chunks_mut(POW_BLOCK))
        {
            let len = xs.len();
            for (slot, &x) in index.iter_mut().zip(xs) {
                slot.write(log_index(x));
            }
            for j in 0..len {
                // SAFETY (every `assume_init` below): element `j < len` was written by the
                // previous stage of this block.
                let entry = tables.log[unsafe { index[j].assume_init() } as usize % N];
                inv_c[j].write(entry.inv_c);
                log_c[j].write(entry.log_c);
                log_c_tail[j].write(entry.log_c_tail);
            }
            for j in 0..len {
                let (hi, lo) = unsafe {
                    pow_exponent(
                        xs[j],
                        ys[j],
                        inv_c[j].assume_init(),
                        log_c[j].assume_init(),
                        log_c_tail[j].assume_init(),
                        ln2_hi,
                        ln2_lo,
                    )
                };
                e_hi[j].write(hi);
                let (m, r) = exp_reduce(hi, lo, neg_hi, neg_lo);
                m_bits[j].write(m);
                rho[j].write(r);
            }
            for j in 0..len {
                let idx = 2 * (unsafe { m_bits[j].assume_init() } as usize % N);
                tail[j].write(f64::from_bits(tables.exp[idx]));
                head[j].write(tables.exp[idx + 1]);
            }
            for j in 0..len {
                let value = unsafe {
                    pow_result(
                        xs[j],
                        ys[j],
                        e_hi[j].assume_init(),
                        m_bits[j].assume_init(),
                        rho[j].assume_init(),
                        tail[j].assume_init(),
                        head[j].assume_init(),
                    )
                };
                out[j] = value;
                outside |= u32::from(value.is_nan());
            }
        }
    }
    if outside != 0 {
        for ((o, &x), &y) in out.iter_mut().zip(xs).zip(ys) {
            if o.is_nan() {
                *o = x.powf(y);
            }
        }
    }
}
