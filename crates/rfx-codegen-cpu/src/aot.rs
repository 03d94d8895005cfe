//! Transcendentals compiled ahead of time for the host's widest vectors, applied to tiles.
//!
//! Cranelift's vectors are 128 bits wide on x86-64, so the inline polynomials of [`crate::math`]
//! run four `f32` lanes per instruction where an AVX2 CPU has eight. For kernels whose
//! transcendental ops dominate, the code generator instead runs the elementwise loop in tiles
//! of [`TILE`] elements (see `codegen`), stages each transcendental's argument in a stack
//! buffer and calls one of the routines here on the whole tile. The routines are plain Rust
//! written branch-free over `f32`, compiled by rustc with `avx2` and `fma` enabled for that
//! function alone (`#[target_feature]`), so LLVM turns each loop into 8-lane AVX2 code; the
//! JIT links them only when the running CPU has both features ([`available`]).
//!
//! # Methods and accuracy
//!
//! Each routine computes a fast path for the arguments where its range reduction is accurate
//! and recomputes every other element (huge, non-finite, subnormal results, …) afterwards in
//! `f64` through Rust's `std` (correctly rounded to `f32` up to a double rounding), so the whole
//! domain is covered. Max error measured against `std` in `f64` rounded to `f32`, over every
//! `f32` of the fast range (`tests::exhaustive_*`, run with `--ignored`) and over random bit
//! patterns and edge values across the whole domain (`tests::accuracy_within_bounds`):
//!
//! | op | fast path | method | max ULP |
//! |---|---|---|---|
//! | `sin`, `cos` | `|x| <= 2^15` | `x = j π/2 + r`, three-part Cody–Waite π/2 with FMA; Cephes `sinf`/`cosf` polynomials, quadrant by select and sign-bit xor | 1 |
//! | `exp` | `-87 <= x <= 88` | `x = n ln2 + r`, two-part ln2 with FMA; Cephes `expf` degree-5 polynomial; `2^n` built in the exponent field | 1 |
//! | `log` | normal, positive, finite | `x = 2^e m`, `m` in `[√½, √2)`; Cephes `logf` degree-8 polynomial, two-part ln2 | 1 |
//!
//! The results are deterministic (the same input gives the same bits at every position and
//! every size of a tiled kernel), but may differ in the last bit from the inline polynomials
//! that kernels use on CPUs without AVX2 and FMA, for reductions and for short loops.

use rfx_ir::{DType, UnaryOp};

/// Elements per tile: four `f32` staging buffers of a tile fit in 8 KiB, far inside L1, and a
/// tile is long enough that a call costs a few percent of the work it does.
pub(crate) const TILE: usize = 512;

/// The smallest innermost loop that is worth running in tiles: below it the inline
/// polynomials are faster than staging plus a call.
pub(crate) const MIN_TILED_ELEMS: usize = 64;

/// A routine `fn(src: *const f32, dst: *mut f32, n: usize)` the JIT code may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum AotFn {
    SinF32,
    CosF32,
    ExpF32,
    LogF32,
}

impl AotFn {
    /// Every routine, in a fixed order (symbol registration and declaration iterate this).
    pub(crate) const ALL: [AotFn; 4] = [AotFn::SinF32, AotFn::CosF32, AotFn::ExpF32, AotFn::LogF32];

    /// The routine computing `op` on `dtype`, if there is one.
    pub(crate) fn for_op(op: UnaryOp, dtype: DType) -> Option<AotFn> {
        match (op, dtype) {
            (UnaryOp::Sin, DType::F32) => Some(AotFn::SinF32),
            (UnaryOp::Cos, DType::F32) => Some(AotFn::CosF32),
            (UnaryOp::Exp, DType::F32) => Some(AotFn::ExpF32),
            (UnaryOp::Log, DType::F32) => Some(AotFn::LogF32),
            _ => None,
        }
    }

    /// The symbol the JIT module imports it as.
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            AotFn::SinF32 => "rfx_aot_sin_f32",
            AotFn::CosF32 => "rfx_aot_cos_f32",
            AotFn::ExpF32 => "rfx_aot_exp_f32",
            AotFn::LogF32 => "rfx_aot_log_f32",
        }
    }

    /// The routine's address (a function of the [`TileFn`] type).
    pub(crate) fn address(self) -> *const u8 {
        let f: TileFn = match self {
            AotFn::SinF32 => rfx_aot_sin_f32,
            AotFn::CosF32 => rfx_aot_cos_f32,
            AotFn::ExpF32 => rfx_aot_exp_f32,
            AotFn::LogF32 => rfx_aot_log_f32,
        };
        f as *const u8
    }
}

/// The C ABI of every routine.
pub(crate) type TileFn = unsafe extern "C" fn(src: *const f32, dst: *mut f32, n: usize);

/// Whether the running CPU can execute the routines (AVX2 and FMA on x86-64). `std` caches the
/// CPUID answer, so this is a load and a test.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

// ---- the scalar formulas (inlined into the AVX2 loops below) ----

/// `1.5 * 2^23`: adding it rounds a float of magnitude below `2^22` to an integer, which then
/// sits in the low mantissa bits.
const ROUND_MAGIC: f32 = 12_582_912.0;

const FRAC_2_PI: f32 = std::f32::consts::FRAC_2_PI;
/// π/2 in three parts: `PIO2_HI` is π/2 rounded to `f32`, each next part the rounded rest.
const PIO2_HI: f32 = 1.570_796_4;
const PIO2_MID: f32 = -4.371_139e-8;
const PIO2_LO: f32 = -1.716_285_3e-15;
/// `|x|` up to which the three-part reduction keeps `sin`/`cos` within 1 ULP (measured over
/// every `f32` below it).
pub(crate) const TRIG_FAST_MAX: f32 = 32_768.0;

/// `x = j π/2 + r` with `|r| <= π/4`; returns `r` and the bits whose low two are `j mod 4`.
#[inline(always)]
fn reduce_pio2(x: f32) -> (f32, u32) {
    let t = x.mul_add(FRAC_2_PI, ROUND_MAGIC);
    let j = t - ROUND_MAGIC;
    let r = j.mul_add(-PIO2_HI, x);
    let r = j.mul_add(-PIO2_MID, r);
    let r = j.mul_add(-PIO2_LO, r);
    (r, t.to_bits())
}

/// `sin r` for `|r| <= π/4` (Cephes `sinf`), with the sign of `r` (so `sin(-0) = -0`).
#[inline(always)]
fn sin_poly(r: f32) -> f32 {
    let z = r * r;
    let p = z.mul_add(-1.951_529_6e-4, 8.332_161e-3);
    let p = z.mul_add(p, -1.666_665_5e-1);
    let s = (r * z).mul_add(p, r);
    f32::from_bits(s.to_bits() | (r.to_bits() & 0x8000_0000))
}

/// `cos r` for `|r| <= π/4` (Cephes `cosf`).
#[inline(always)]
fn cos_poly(r: f32) -> f32 {
    let z = r * r;
    let p = z.mul_add(2.443_315_7e-5, -1.388_731_6e-3);
    let p = z.mul_add(p, 4.166_664_6e-2);
    (z * z).mul_add(p, z.mul_add(-0.5, 1.0))
}

/// `sin x` when `quarter = 0`, `cos x` when `quarter = 1` (`cos x = sin(x + π/2)`), for
/// `|x| <= TRIG_FAST_MAX`.
#[inline(always)]
fn sin_fast(x: f32, quarter: u32) -> f32 {
    let (r, bits) = reduce_pio2(x);
    let q = bits.wrapping_add(quarter);
    let s = sin_poly(r);
    let c = cos_poly(r);
    let v = if q & 1 == 0 { s } else { c };
    f32::from_bits(v.to_bits() ^ ((q & 2) << 30))
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// The fast path of `exp`: `2^n` stays a normal number and `e^x` neither overflows nor
/// becomes subnormal.
const EXP_FAST_MIN: f32 = -87.0;
const EXP_FAST_MAX: f32 = 88.0;

/// `e^x` for `EXP_FAST_MIN <= x <= EXP_FAST_MAX` (Cephes `expf`).
#[inline(always)]
fn exp_fast(x: f32) -> f32 {
    let t = x.mul_add(LOG2E, ROUND_MAGIC);
    let n = t - ROUND_MAGIC;
    let r = n.mul_add(-LN2_HI, x);
    let r = n.mul_add(-LN2_LO, r);
    let p = r.mul_add(1.987_569_1e-4, 1.398_2e-3);
    let p = r.mul_add(p, 8.333_452e-3);
    let p = r.mul_add(p, 4.166_579_6e-2);
    let p = r.mul_add(p, 1.666_666_5e-1);
    let p = r.mul_add(p, 0.5);
    let e = (r * r).mul_add(p, r) + 1.0;
    let k = (t.to_bits() as i32).wrapping_sub(ROUND_MAGIC.to_bits() as i32);
    let scale = f32::from_bits((k.wrapping_add(127) as u32) << 23);
    e * scale
}

const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;

/// `ln x` for normal, positive, finite `x` (Cephes `logf`).
#[inline(always)]
fn log_fast(x: f32) -> f32 {
    let bits = x.to_bits();
    // x = 2^e * m with m in [0.5, 1).
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000);
    let e = ((bits >> 23) as i32) - 126;
    let small = m < SQRT_HALF;
    let e = if small { e - 1 } else { e };
    let f = if small { m + m - 1.0 } else { m - 1.0 };
    let fe = e as f32;
    let z = f * f;
    let p = f.mul_add(7.037_683_6e-2, -1.151_461e-1);
    let p = f.mul_add(p, 1.167_699_9e-1);
    let p = f.mul_add(p, -1.242_014_1e-1);
    let p = f.mul_add(p, 1.424_932_3e-1);
    let p = f.mul_add(p, -1.666_805_8e-1);
    let p = f.mul_add(p, 2.000_071_4e-1);
    let p = f.mul_add(p, -2.499_999_4e-1);
    let p = f.mul_add(p, 0.333_333_3);
    let y = (f * z) * p;
    let y = fe.mul_add(LN2_LO, y);
    let y = z.mul_add(-0.5, y);
    let r = f + y;
    fe.mul_add(LN2_HI, r)
}

fn in_trig_range(x: f32) -> bool {
    x.abs() <= TRIG_FAST_MAX
}

fn in_exp_range(x: f32) -> bool {
    (EXP_FAST_MIN..=EXP_FAST_MAX).contains(&x)
}

fn in_log_range(x: f32) -> bool {
    (f32::MIN_POSITIVE..f32::INFINITY).contains(&x)
}

/// The results outside the fast ranges, from `std` in `f64` (glibc's libm: < 1 ULP of `f64`,
/// so at most a double rounding off the correctly rounded `f32`).
fn sin_slow(x: f32) -> f32 {
    f64::from(x).sin() as f32
}

fn cos_slow(x: f32) -> f32 {
    f64::from(x).cos() as f32
}

fn exp_slow(x: f32) -> f32 {
    f64::from(x).exp() as f32
}

fn log_slow(x: f32) -> f32 {
    f64::from(x).ln() as f32
}

/// Defines one routine: the branch-free fast formula over the whole tile (vectorised by LLVM
/// under `avx2,fma`), then a scalar pass over the elements outside the fast range, taken only
/// when the first pass saw one.
macro_rules! tile_routine {
    ($(#[$doc:meta])* $name:ident, $inner:ident, $fast:expr, $in_range:path, $slow:path) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `src` must be valid for `n` reads and `dst` for `n` writes of `f32`, the two ranges
        /// must not overlap, and the CPU must have AVX2 and FMA ([`available`]).
        pub(crate) unsafe extern "C" fn $name(src: *const f32, dst: *mut f32, n: usize) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: forwarded from this function's contract.
            unsafe {
                $inner(src, dst, n)
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = (src, dst, n);
                unreachable!("ahead-of-time tiles are only linked on x86-64")
            }
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $inner(src: *const f32, dst: *mut f32, n: usize) {
            // SAFETY: the caller guarantees both ranges are valid and disjoint.
            let (xs, ys) = unsafe {
                (
                    std::slice::from_raw_parts(src, n),
                    std::slice::from_raw_parts_mut(dst, n),
                )
            };
            let fast = $fast;
            let mut outside = 0u32;
            for (y, &x) in ys.iter_mut().zip(xs) {
                *y = fast(x);
                outside |= u32::from(!$in_range(x));
            }
            if outside != 0 {
                for (y, &x) in ys.iter_mut().zip(xs) {
                    if !$in_range(x) {
                        *y = $slow(x);
                    }
                }
            }
        }
    };
}

tile_routine!(
    /// `dst[i] = sin(src[i])` for `i < n`.
    rfx_aot_sin_f32, sin_f32_avx2, |x| sin_fast(x, 0), in_trig_range, sin_slow
);
tile_routine!(
    /// `dst[i] = cos(src[i])` for `i < n`.
    rfx_aot_cos_f32, cos_f32_avx2, |x| sin_fast(x, 1), in_trig_range, cos_slow
);
tile_routine!(
    /// `dst[i] = exp(src[i])` for `i < n`.
    rfx_aot_exp_f32, exp_f32_avx2, exp_fast, in_exp_range, exp_slow
);
tile_routine!(
    /// `dst[i] = ln(src[i])` for `i < n`.
    rfx_aot_log_f32, log_f32_avx2, log_fast, in_log_range, log_slow
);

#[cfg(test)]
mod tests;
