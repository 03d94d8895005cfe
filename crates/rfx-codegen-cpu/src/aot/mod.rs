//! Transcendentals compiled ahead of time for the host's widest vectors, applied to tiles.
//!
//! Cranelift's vectors are 128 bits wide on x86-64, so the inline polynomials of [`crate::math`]
//! run four `f32` lanes per instruction where an AVX2 CPU has eight. For kernels whose
//! transcendental ops dominate, the code generator instead runs the elementwise loop in tiles
//! of [`TILE`] elements (see `codegen`), stages each transcendental's argument in a stack
//! buffer and calls one of the routines here on the whole tile. The routines are plain Rust
//! written branch-free over `f32` (and `f64` for `sin`, `cos`, `exp`, `log`, `atan`, `atan2`,
//! `asin`, `acos`, `tanh`, `sigmoid`, `pow`, `tan`, `exp2`, `log2`: every transcendental but
//! `erf`, which the inline code of [`crate::math`] computes on every path), compiled by rustc
//! with `avx2` and `fma` enabled for that function alone (`#[target_feature]`), so LLVM turns
//! each loop into 8-lane (4-lane `f64`) AVX2 code; the JIT links them only when the running CPU
//! has both features ([`available`]). A routine's loop runs whole vectors, and a row's last
//! elements (fewer than a vector's) in one more vector through masked loads and stores
//! ([`PART_BYTES`]). Each routine (`pow` in `f64` aside) is compiled a second time with
//! AVX-512 (F and VL) enabled and runs that way where the CPU has it ([`avx512`]): the same
//! formulas, IEEE operations lane by lane, so the same bits (`fused::tests`).
//!
//! An elementwise body that would stage values between routine calls runs instead as one
//! fused pass per row ([`fused`]): an explicit plan of steps (loads, exact ops, the routines'
//! loops inlined, stores) over chunks of a few hundred elements, at the host's full width.
//!
//! # Methods and accuracy
//!
//! Each routine computes a fast path for the arguments where its range reduction is accurate
//! and recomputes every other element (huge, non-finite, subnormal results, …) afterwards in
//! `f64` through Rust's `std` (correctly rounded to `f32` up to a double rounding), so the whole
//! domain is covered. Max error measured against `std` in `f64` rounded to `f32`, over every
//! `f32` of the fast range (`tests::fast_ranges_swept` with `RFX_EXHAUSTIVE=1`; CI sweeps every 4099th) and over random bit
//! patterns and edge values across the whole domain (`tests::accuracy_within_bounds`):
//!
//! | op | fast path | method | max ULP |
//! |---|---|---|---|
//! | `sin`, `cos` | `|x| <= 2^15` | `x = n π + r` (`cos`: `(n - 1/2) π + r`), three-part Cody–Waite π with FMA; `(-1)^n sin r` by an odd degree-9 polynomial fitted for relative error on `[0, π/2]` | 2 (every `f32` of the fast range) |
//! | `tan` | `|x| <= 2^15` | as `sin`: `sin r / cos r`, or `-cos r / sin r` in odd quadrants | 4 |
//! | `exp` | `-87 <= x <= 88` | `x = n ln2 + r`, two-part ln2 with FMA; Cephes `expf` degree-5 polynomial; `2^n` built in the exponent field | 1 |
//! | `exp2` | `-125 <= x <= 127` | `x = n + f` exactly; `e^(f ln2)` with the `exp` polynomial, `f ln2` in two parts | 1 |
//! | `log` | normal, positive, finite | `x = 2^e m`, `m` in `[√½, √2)`; Cephes `logf` degree-8 polynomial, two-part ln2 | 1 |
//! | `log2` | normal, positive, finite | as `log`; `ln m · log2 e` in two parts, the exponent added last (exact at powers of two) | 2 |
//! | `tanh` | finite | Cephes `tanhf`: odd polynomial below 0.625, else `1 - 2/(e^(2|x|) + 1)`; ±1 from 9 | 1 |
//! | `sigmoid` | `|x| <= 87` | `e = e^-|x|`: `1/(1+e)` for `x >= 0`, `e/(1+e)` below | 2 |
//! | `atan` | finite | Cephes `atanf`: `-1/|x|` above tan(3π/8), `(|x|-1)/(|x|+1)` above tan(π/8); sign restored | 3 |
//! | `asin`, `acos` | `|x| <= 1` | Cephes `asinf`: `t + t z P(z)` up to 1/2, else on `√((1-|x|)/2)` with two-part π/2, π | 2 (`asin`), 1 (`acos`): every 4099th `f32` of [-1, 1] and random |
//! | `atan2` | finite, not both zero | `atan(min/max)` on `[0, 1]` by one degree-17 odd polynomial (Estrin's scheme, fitted at Chebyshev nodes), `π/2 - a` / `π - a` by quadrant with two-part constants, the sign of `y` | 2 (random and edge pairs; 61 of 19.7M random pairs at 2) |
//! | `exp` (`f64`) | `-708 <= x <= 709` | `x = n ln2 + r`, two-part ln2 with FMA; Taylor series to degree 13; `2^n` built in the exponent field | 1 against glibc (`tests::f64_exp_within_bounds`) |
//! | `log` (`f64`) | normal, positive, finite | fdlibm `e_log.c`: `x = 2^k (1 + f)`, `s = f/(2+f)`, degree-14 polynomial in `s`, two-part ln2 | 1 against glibc (`tests::f64_log_within_bounds`) |
//! | `atan` (`f64`) | every input | Cephes `atan.c`: `-1/|x|` above tan(3π/8), `(|x|-1)/(|x|+1)` above 0.66, rational P/Q of degrees 4/5, π/2 in two parts | 1 against glibc (`tests::f64_atan_within_bounds`) |
//! | `asin`, `acos` (`f64`) | `|x| <= 1` (`acos`: `< 1`) | fdlibm `e_asin.c`/`e_acos.c` branch-free: `x + x R(x²)` below 1/2, `π/2 - 2 asin √((1-|x|)/2)` above with the root split so its square is exact | 1 against glibc (`tests::f64_asin_acos_within_bounds`) |
//! | `tanh` (`f64`) | `|x| <= 350` | Cephes `tanh.c`: `x + x z P(z)/Q(z)` below 0.625, else `1 - 2/(e^{2|x|} + 1)` with the `f64` `exp` | 2 against glibc (`tests::f64_tanh_sigmoid_within_bounds`) |
//! | `sigmoid` (`f64`) | `|x| <= 708` | `e = e^{-|x|}` by the `f64` `exp`; `1/(1+e)`, or `e/(1+e)` below 0 | 2 against the same formulas through glibc's `exp` |
//! | `atan2` (`f64`) | finite, not both zero, magnitudes at most 1e307, ratio of magnitudes 0 or ≥ 1e-300 | `atan(min/max)` by the `atan` kernel (the ratio reduced above 1/2, as `(mn - mx)/(mn + mx)`), `π/2 - a` / `π - a` by quadrant with two-part constants, the sign of `y` | 2 against glibc (`tests::f64_atan2_within_bounds`) |
//! | `pow` | `x` finite and not zero, `y` an integer where `x < 0` (an infinite `y` is a limit of the fast path, but NaN for `|x| = 1`) | `2^(y log2|x|)` in `f64`: `log2 m = s P(s²)`, `s = (m-1)/(m+1)`, `m` in `[√½, √2)`, `P` of degree 4; `2^r` on `[-1/2, 1/2]` of degree 7 (both fitted at Chebyshev nodes, Estrin's scheme); the magnitude within `5e-10` relative before its rounding to `f32`; the sign of `x` for odd integer `y` | 1 against `std` in `f64` (`tests::pow_f32_within_bounds`; `tests::pow_f32_nearly_correctly_rounded`: 0.04% of random pairs at 1) |
//! | `pow` (`f64`) | as `pow`, `x` normal, and a normal result (`|y log|x|| <= 708`) | the table-driven method of glibc's `pow` with rfx's own tables (`pow_tables`, built from their definitions in double-double): `log|x| = k ln2 + log c + log1p(z/c - 1)` over 128 subintervals as a double-double, `log1p` by Taylor to degree 10; `y log|x|` with an FMA's error term; `2^(m/128) e^ρ` from a 128-entry table, `e^ρ` by Taylor to degree 5; staged passes with the lookups between them | 1 against glibc (`tests::f64_pow_within_bounds`; `tests::f64_pow_fast_path_nearly_correctly_rounded`: 0.07% of pairs at 1, bases near 1 with `|y log x|` up to 708 included) |
//! | `tan` (`f64`) | `|x| <= 2^29` | as `sin`/`cos` (`f64`): `sin r / cos r`, or `-cos r / sin r` in odd quadrants, both kernels with the tail | 2 against glibc (`tests::f64_tan_within_bounds`) |
//! | `exp2` (`f64`) | `-1021 <= x <= 1023` | `x = n + f` exactly; `f ln2 = r + r_lo` (the product's rounding error from an FMA); `e^r (1 + r_lo)` by the `exp` series; `2^n` in the exponent field | 1 against glibc, exact at integers (`tests::f64_exp2_log2_within_bounds`) |
//! | `log2` (`f64`) | normal, positive, finite | FreeBSD `e_log2.c`: `log`'s decomposition, `ln(1 + f) = hi + lo` with a 21-bit `hi`, times `1/ln2` in two parts, `k` added with its rounding error | 1 against glibc, exact at powers of two |
//! | `sin`, `cos` (`f64`) | `|x| <= 2^29` | `x = n π/2 + (r + y)`, three-part π/2 with FMA (`x - n HI` exact, the other products' rounding errors kept in the tail `y`); fdlibm `__kernel_sin`/`__cos` with the tail, by quadrant | 1 against glibc (`tests::f64_trig_within_bounds`: random bit patterns, uniform to `2^29`, next to 25,000 multiples of π/2) |
//!
//! A `sin` and a `cos` of one value pair into one `sincos` call (`codegen`'s tile plan, and scalar
//! code one element at a time), which writes the bits of both routines: the `f64` one from one
//! reduction and both kernels (the `sin` and `cos` routines compute both and keep one, so the
//! pair costs what one of them does), the
//! `f32` one by both routines' formulas in one pass (their reductions differ; no faster).
//!
//! The results are deterministic (the same input gives the same bits at every position and
//! every size of a tiled kernel), but may differ in the last bit from the inline polynomials
//! that kernels use on CPUs without AVX2 and FMA. Where the routines are linked, every
//! transcendental of every kernel has their bits: reductions run their points in tiles too and
//! fold the staged values in the untiled order (a long row with partial accumulators, a batch
//! of short rows with its outputs in lanes, and a row reduced to one
//! accumulator, one output at a time, which also takes the rows of outputs in lanes that do
//! not fit a tile group), and scalar code calls each routine's one-element entry
//! ([`AotFn::one`]: `fn(x) -> y`, the routine's formulas and slow path on one element, compiled
//! with AVX2 and FMA like the routine, so the same bits, without the array setup), so
//! `sum(f(x))` gives the bits of summing the tiled `f(x)`. `pow` is
//! the exception: where the routines are linked, every `pow` of a kernel calls them, in short
//! loops and reductions on the vector's lanes (`transcendental::binary`), since the inline `pow`
//! costs as much for one lane as for a whole vector. (The `f64` `pow` routine and the inline
//! `f64` `pow`, fdlibm's, are different algorithms; both are within 1 ULP of
//! glibc, and a CPU with the routines uses only the routine.)

/// Builds the tables the routines read (the `f64` `pow`'s), so that no kernel call pays for
/// building them; the JIT calls it when it registers the routines.
pub(crate) fn prepare_tables() {
    pow_tables::tables();
}

/// Elements per tile: four `f32` staging buffers of a tile fit in 8 KiB, far inside L1, and a
/// tile is long enough that a call costs a few percent of the work it does.
pub(crate) const TILE: usize = 512;

/// The smallest innermost loop that runs in tiles. From two elements on the routines beat the
/// inline polynomials, staging and call included (`examples/short_transcendentals` measures
/// it); one element keeps the inline code.
pub(crate) const MIN_TILED_ELEMS: usize = 2;

/// The C ABI of a unary routine.
pub(crate) type TileFn = unsafe extern "C" fn(src: *const f32, dst: *mut f32, n: usize);

/// The C ABI of a unary `f64` routine.
pub(crate) type TileFnF64 = unsafe extern "C" fn(src: *const f64, dst: *mut f64, n: usize);

/// The C ABI of a binary routine (`dst[i] = op(a[i], b[i])`).
pub(crate) type Tile2Fn = unsafe extern "C" fn(a: *const f32, b: *const f32, dst: *mut f32, n: usize);

/// The C ABI of a binary `f64` routine.
pub(crate) type Tile2FnF64 = unsafe extern "C" fn(a: *const f64, b: *const f64, dst: *mut f64, n: usize);

/// The C ABI of a routine with two results (`first[i], second[i] = op(src[i])`).
pub(crate) type TilePairFn =
    unsafe extern "C" fn(src: *const f32, first: *mut f32, second: *mut f32, n: usize);

/// The C ABI of an `f64` routine with two results.
pub(crate) type TilePairFnF64 =
    unsafe extern "C" fn(src: *const f64, first: *mut f64, second: *mut f64, n: usize);

/// The C ABI of a unary routine's one-element entry.
pub(crate) type OneFn = unsafe extern "C" fn(x: f32) -> f32;

/// The C ABI of a unary `f64` routine's one-element entry.
pub(crate) type OneFnF64 = unsafe extern "C" fn(x: f64) -> f64;

/// The C ABI of a binary routine's one-element entry.
pub(crate) type One2Fn = unsafe extern "C" fn(a: f32, b: f32) -> f32;

/// The C ABI of a binary `f64` routine's one-element entry.
pub(crate) type One2FnF64 = unsafe extern "C" fn(a: f64, b: f64) -> f64;

/// The bytes of a block: what a routine's block entry computes in one call ([`AotFn::block`]):
/// four 256-bit vectors, or two 512-bit ones in the entry's AVX-512 compilation.
/// `sin(x*2)+y` at 1,024 elements in L1 (one binary, 2026-11-29): 408 ns a call with blocks
/// of 64 bytes, 380 ns with 128 through the AVX2 entries, 273 ns through the AVX-512 ones.
pub(crate) const BLOCK_BYTES: usize = 128;

/// The C ABI of a unary routine's block entry (a block of elements from `src` into `dst`).
pub(crate) type VecFn = unsafe extern "C" fn(src: &[f32; BLOCK_BYTES / 4], dst: &mut [f32; BLOCK_BYTES / 4]);

/// The C ABI of a unary `f64` routine's block entry.
pub(crate) type VecFnF64 =
    unsafe extern "C" fn(src: &[f64; BLOCK_BYTES / 8], dst: &mut [f64; BLOCK_BYTES / 8]);

/// The C ABI of a binary routine's block entry.
pub(crate) type Vec2Fn = unsafe extern "C" fn(
    a: &[f32; BLOCK_BYTES / 4],
    b: &[f32; BLOCK_BYTES / 4],
    dst: &mut [f32; BLOCK_BYTES / 4],
);

/// The C ABI of a binary `f64` routine's block entry.
pub(crate) type Vec2FnF64 = unsafe extern "C" fn(
    a: &[f64; BLOCK_BYTES / 8],
    b: &[f64; BLOCK_BYTES / 8],
    dst: &mut [f64; BLOCK_BYTES / 8],
);

/// The C ABI of a two-result routine's one-element entry: the first result returned, the
/// second written to `second`.
pub(crate) type OnePairFn = unsafe extern "C" fn(x: f32, second: *mut f32) -> f32;

/// The C ABI of a two-result `f64` routine's one-element entry.
pub(crate) type OnePairFnF64 = unsafe extern "C" fn(x: f64, second: *mut f64) -> f64;

/// The C ABI of a fused pass ([`fused`]): its plan, constants and row pointers, and the row
/// length.
pub(crate) type FusedFn =
    unsafe extern "C" fn(plan: *const u8, consts: *const f32, rows: *const *mut f32, n: usize);

/// The C ABI of an `f64` fused pass.
pub(crate) type FusedFnF64 =
    unsafe extern "C" fn(plan: *const u8, consts: *const f64, rows: *const *mut f64, n: usize);

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

/// Whether the CPU also has AVX-512 (F and VL): the routines and the fused passes then run
/// their AVX-512 compilation (`std` caches the answer, so this is a load and a test).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx512() -> bool {
    #[cfg(test)]
    if NARROW.get() {
        return false;
    }
    std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl")
}

#[cfg(all(test, target_arch = "x86_64"))]
thread_local! {
    /// Set by tests to run the AVX2 compilations on a CPU with AVX-512 ([`avx512`] then
    /// answers `false` on this thread).
    pub(crate) static NARROW: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The element types of blocks.
///
/// # Safety
/// Every bit pattern of the type's size must be a value of it ([`block_by_halves`] builds
/// blocks from bytes).
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe trait BlockElem: Copy {
    /// What the lanes past a row's end hold in its last, partial vector ([`read_part`]): a
    /// value inside every routine's fast range, so that they never send the vector down its
    /// slow path.
    const FILL: Self;
}
// SAFETY: every bit pattern is an `f32`.
#[cfg(target_arch = "x86_64")]
unsafe impl BlockElem for f32 {
    const FILL: f32 = 0.5;
}
// SAFETY: every bit pattern is an `f64`.
#[cfg(target_arch = "x86_64")]
unsafe impl BlockElem for f64 {
    const FILL: f64 = 0.5;
}

/// Bytes of the vector a row's last elements (fewer than a vector's) run in: the routines'
/// loops run whole vectors only, and the rest through masks ([`read_part`], [`write_part`]).
/// LLVM's own remainder after its vector loop is scalar: `sin` at 100 elements ran its last
/// four elements one at a time.
#[cfg(target_arch = "x86_64")]
pub(crate) const PART_BYTES: usize = 32;

/// The 32-bit lanes of a vector that hold the first `dwords` 32-bit words: all ones in those
/// lanes, zero in the others.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn part_mask(dwords: usize) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::{_mm256_cmpgt_epi32, _mm256_set1_epi32, _mm256_setr_epi32};
    // At most a vector's 32-bit words (8), so it fits an `i32`.
    let dwords = dwords.min(8) as i32;
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(dwords),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// A vector ([`PART_BYTES`]) whose first `len` elements are read from `src` and whose others
/// hold [`BlockElem::FILL`], without touching memory past `src + len` (masked-out lanes of
/// AVX's masked loads do not fault).
///
/// # Safety
/// `src` must be valid for `len` reads, and the CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn read_part<T: BlockElem, const M: usize>(src: *const T, len: usize) -> [T; M] {
    use std::arch::x86_64::{
        __m256i, _mm256_blendv_epi8, _mm256_loadu_si256, _mm256_maskload_epi32, _mm256_storeu_si256,
    };
    const { assert!(std::mem::size_of::<[T; M]>() == PART_BYTES && std::mem::size_of::<T>().is_multiple_of(4)) };
    let mask = part_mask(len * std::mem::size_of::<T>() / 4);
    let mut out = [T::FILL; M];
    let to = out.as_mut_ptr().cast::<__m256i>();
    // SAFETY: `out` is one vector; the masked load reads only the lanes of elements below
    // `len`, inside `src`'s range.
    unsafe {
        let part = _mm256_maskload_epi32(src.cast::<i32>(), mask);
        _mm256_storeu_si256(to, _mm256_blendv_epi8(_mm256_loadu_si256(to), part, mask));
    }
    out
}

/// Writes the first `len` elements of `part` (fewer than its `M`) to `dst` and nothing past
/// them (AVX's masked stores leave masked-out lanes' memory untouched).
///
/// # Safety
/// `dst` must be valid for `len` writes, and the CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn write_part<T: BlockElem, const M: usize>(dst: *mut T, len: usize, part: &[T; M]) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_maskstore_epi32};
    const { assert!(std::mem::size_of::<[T; M]>() == PART_BYTES && std::mem::size_of::<T>().is_multiple_of(4)) };
    let mask = part_mask(len * std::mem::size_of::<T>() / 4);
    // SAFETY: `part` is one vector; the masked store writes only the lanes of elements below
    // `len`, inside `dst`'s range.
    unsafe {
        let v = _mm256_loadu_si256(part.as_ptr().cast::<__m256i>());
        _mm256_maskstore_epi32(dst.cast::<i32>(), mask, v);
    }
}

/// A block read for an AVX-512 block entry: `src`'s bytes loaded in 256-bit halves and joined
/// into 512-bit registers. An assembled pass writes a block in 256-bit stores, and a 512-bit
/// load of two of them cannot take its bytes from the store buffer: it waits for both stores
/// to reach the cache (`sin(x*2)+y` at 1,024 elements took 1.8 times as long with the entry's
/// own 512-bit loads). Loads of halves each take one store's bytes.
///
/// Code compiled without AVX-512 F calls it in `unsafe` (the CPU must have it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
#[inline]
pub(crate) fn block_by_halves<T: BlockElem, const N: usize>(src: &[T; N]) -> [T; N] {
    use std::arch::x86_64::{
        __m256i, _mm256_loadu_si256, _mm512_castsi256_si512, _mm512_inserti64x4, _mm512_storeu_si512,
    };
    const { assert!(std::mem::size_of::<[T; N]>() == BLOCK_BYTES && BLOCK_BYTES.is_multiple_of(64)) };
    let mut out = std::mem::MaybeUninit::<[T; N]>::uninit();
    let from = std::ptr::from_ref(src).cast::<__m256i>();
    let to = out.as_mut_ptr().cast::<u8>();
    for k in 0..BLOCK_BYTES / 64 {
        // SAFETY: `src` and `out` are `BLOCK_BYTES` long (checked above), so the halves
        // `2k` and `2k + 1` and the 64 bytes at `64k` are inside them; the loads and the
        // store are unaligned.
        unsafe {
            let mut lo = _mm256_loadu_si256(from.add(2 * k));
            // The low half through an empty `asm!`, or LLVM joins the two loads into one of
            // 512 bits.
            std::arch::asm!("/* {0} */", inout(ymm_reg) lo, options(pure, nomem, nostack, preserves_flags));
            let hi = _mm256_loadu_si256(from.add(2 * k + 1));
            _mm512_storeu_si512(
                to.add(64 * k).cast(),
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi),
            );
        }
    }
    // SAFETY: every byte of `out` was written above, and any bytes are a valid `[T; N]` of
    // a `BlockElem` type.
    unsafe { out.assume_init() }
}

// ---- the scalar formulas (inlined into the AVX2 loops below) ----

/// Defines one routine: the branch-free fast formula over the whole tile (vectorised by LLVM
/// under `avx2,fma`), then a scalar pass over the elements outside the fast range, taken only
/// when the first pass saw one.
macro_rules! tile_routine {
    ($(#[$doc:meta])* $name:ident, $inner:ident, $t:ty, $fast:expr, $in_range:path, $slow:path) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `src` must be valid for `n` reads and `dst` for `n` writes of the element type, the
        /// two ranges must not overlap, and the CPU must have AVX2 and FMA
        /// ([`available`](super::available)).
        pub(crate) unsafe extern "C" fn $name(src: *const $t, dst: *mut $t, n: usize) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: forwarded from this function's contract.
            unsafe {
                let (xs, ys) = (std::slice::from_raw_parts(src, n), std::slice::from_raw_parts_mut(dst, n));
                if super::avx512() {
                    $inner::wide(xs, ys)
                } else {
                    $inner(xs, ys)
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = (src, dst, n);
                unreachable!("ahead-of-time tiles are only linked on x86-64")
            }
        }

        /// The routine on `xs` into `ys`. Taking the rows as references tells LLVM they are
        /// apart: from raw pointers its vector loop tested at run time that `ys` did not
        /// start within one unrolled step after `xs`, and ran every element in scalar code
        /// when it did (two staging buffers 128 bytes apart, `sin(x*2)+y` at 16 elements).
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        #[inline(never)]
        unsafe fn $inner(xs: &[$t], ys: &mut [$t]) {
            // SAFETY: forwarded (AVX2).
            unsafe { $inner::tile(xs, ys) }
        }

        /// The routine's loops, inlined into its target's body and into the fused passes'.
        #[cfg(target_arch = "x86_64")]
        pub(super) mod $inner {
            #[allow(clippy::wildcard_imports, reason = "the formulas of the parent module")]
            use super::*;

            /// The routine compiled for AVX-512 (the same formulas, so the same bits).
            ///
            /// # Safety
            /// As the routine's, and the CPU must have AVX-512 F and VL.
            #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
            #[inline(never)]
            pub(in super::super) unsafe fn wide(xs: &[$t], ys: &mut [$t]) {
                // SAFETY: forwarded (AVX2).
                unsafe { tile(xs, ys) }
            }

            /// The routine on one element: the bits the routine writes for `x` (the same
            /// formulas, the slow path where the routine's second pass takes it), without
            /// the array setup. Scalar code calls it directly ([`AotFn::one`](super::super::AotFn::one)).
            ///
            /// # Safety
            /// The CPU must have AVX2 and FMA ([`available`](super::super::available)).
            #[target_feature(enable = "avx2,fma")]
            pub(in super::super) unsafe extern "C" fn one(x: $t) -> $t {
                let fast = $fast;
                if $in_range(x) { fast(x) } else { $slow(x) }
            }

            /// The routine on one block ([`BLOCK_BYTES`](super::super::BLOCK_BYTES) of
            /// elements from `src` into `dst`): the bits the routine writes for them.
            /// Assembled passes call it once per block ([`AotFn::block`](super::super::AotFn::block)).
            ///
            /// # Safety
            /// `src` must be valid for the block's reads and `dst` for its writes, the two must
            /// not overlap, and the CPU must have AVX2 and FMA.
            #[target_feature(enable = "avx2,fma")]
            pub(in super::super) unsafe extern "C" fn block(
                xs: &[$t; super::super::BLOCK_BYTES / std::mem::size_of::<$t>()],
                ys: &mut [$t; super::super::BLOCK_BYTES / std::mem::size_of::<$t>()],
            ) {
                // By reference: LLVM knows the two apart and the count, so the loop is
                // straight 256-bit code, no aliasing check or remainder.
                rows(xs, ys);
            }

            /// [`block`] compiled for AVX-512 (the same formulas, so the same bits): the
            /// block's elements in 512-bit vectors.
            ///
            /// # Safety
            /// As [`block`]'s, and the CPU must have AVX-512 F and VL.
            #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
            pub(in super::super) unsafe extern "C" fn block_wide(
                xs: &[$t; super::super::BLOCK_BYTES / std::mem::size_of::<$t>()],
                ys: &mut [$t; super::super::BLOCK_BYTES / std::mem::size_of::<$t>()],
            ) {
                rows(&super::super::block_by_halves(xs), ys);
            }

            /// # Safety
            /// As the routine's.
            #[inline(always)]
            pub(in super::super) unsafe fn chunk(src: *const $t, dst: *mut $t, n: usize) {
            // SAFETY: the caller guarantees both ranges are valid and disjoint.
            let (xs, ys) = unsafe {
                (
                    std::slice::from_raw_parts(src, n),
                    std::slice::from_raw_parts_mut(dst, n),
                )
            };
            // SAFETY: forwarded (AVX2).
            unsafe { tile(xs, ys) }
            }

            /// The routine's loops over whole vectors of `xs` into `ys` (as long), then the
            /// elements left (fewer than a vector's) through masks.
            ///
            /// # Safety
            /// The CPU must have AVX2.
            #[inline(always)]
            pub(super) unsafe fn tile(xs: &[$t], ys: &mut [$t]) {
            const M: usize = { super::super::PART_BYTES / std::mem::size_of::<$t>() };
            let n = xs.len().min(ys.len());
            let whole = n - n % M;
            rows(&xs[..whole], &mut ys[..whole]);
            if whole < n {
                let mut out = [<$t as super::super::BlockElem>::FILL; M];
                // SAFETY: elements `whole..n` are inside both rows; the caller guarantees AVX2.
                unsafe {
                    let part: [$t; M] = super::super::read_part(xs.as_ptr().add(whole), n - whole);
                    rows(&part, &mut out);
                    super::super::write_part(ys.as_mut_ptr().add(whole), n - whole, &out);
                }
            }
            }

            /// The routine's loops on `xs` into `ys` (as long).
            #[inline(always)]
            fn rows(xs: &[$t], ys: &mut [$t]) {
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
        }
    };
}

/// `tile_routine!` for an op with two results: `$fast` and `$slow` return a pair, written to
/// `first[i]` and `second[i]`.
macro_rules! tile_routine_pair {
    ($(#[$doc:meta])* $name:ident, $inner:ident, $t:ty, $fast:expr, $in_range:path, $slow:path) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `src` must be valid for `n` reads and `first` and `second` for `n` writes of the
        /// element type, no two of the three ranges may overlap, and the CPU must have AVX2 and
        /// FMA ([`available`](super::available)).
        pub(crate) unsafe extern "C" fn $name(src: *const $t, first: *mut $t, second: *mut $t, n: usize) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: forwarded from this function's contract.
            unsafe {
                let xs = std::slice::from_raw_parts(src, n);
                let (ys, zs) = (std::slice::from_raw_parts_mut(first, n), std::slice::from_raw_parts_mut(second, n));
                if super::avx512() {
                    $inner::wide(xs, ys, zs)
                } else {
                    $inner(xs, ys, zs)
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = (src, first, second, n);
                unreachable!("ahead-of-time tiles are only linked on x86-64")
            }
        }

        /// The routine on `xs` into `ys` and `zs`, the rows as references (as the unary
        /// routines').
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        #[inline(never)]
        unsafe fn $inner(xs: &[$t], ys: &mut [$t], zs: &mut [$t]) {
            // SAFETY: forwarded (AVX2).
            unsafe { $inner::tile(xs, ys, zs) }
        }

        /// The routine's loops, and their AVX-512 compilation.
        #[cfg(target_arch = "x86_64")]
        pub(super) mod $inner {
            #[allow(clippy::wildcard_imports, reason = "the formulas of the parent module")]
            use super::*;

            /// The routine compiled for AVX-512 (the same formulas, so the same bits).
            ///
            /// # Safety
            /// As the routine's, and the CPU must have AVX-512 F and VL.
            #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
            #[inline(never)]
            pub(in super::super) unsafe fn wide(xs: &[$t], ys: &mut [$t], zs: &mut [$t]) {
                // SAFETY: forwarded (AVX2).
                unsafe { tile(xs, ys, zs) }
            }

            /// The routine on one element: returns the first result and writes the second
            /// to `second`, the bits the routine writes for `x`, without the array setup.
            ///
            /// # Safety
            /// `second` must be valid for one write of the element type, and the CPU must have
            /// AVX2 and FMA ([`available`](super::super::available)).
            #[target_feature(enable = "avx2,fma")]
            pub(in super::super) unsafe extern "C" fn one(x: $t, second: *mut $t) -> $t {
                let fast = $fast;
                let (y, z) = if $in_range(x) { fast(x) } else { $slow(x) };
                // SAFETY: the caller guarantees `second` is valid for one write.
                unsafe { second.write(z) };
                y
            }

            /// The routine's loops over whole vectors of `xs` into `ys` and `zs` (all as
            /// long), then the elements left through masks (as the unary routines').
            ///
            /// # Safety
            /// The CPU must have AVX2.
            #[inline(always)]
            pub(super) unsafe fn tile(xs: &[$t], ys: &mut [$t], zs: &mut [$t]) {
            const M: usize = { super::super::PART_BYTES / std::mem::size_of::<$t>() };
            let n = xs.len().min(ys.len()).min(zs.len());
            let whole = n - n % M;
            rows(&xs[..whole], &mut ys[..whole], &mut zs[..whole]);
            if whole < n {
                let mut out = [<$t as super::super::BlockElem>::FILL; M];
                let mut out2 = out;
                // SAFETY: elements `whole..n` are inside every row; the caller guarantees AVX2.
                unsafe {
                    let part: [$t; M] = super::super::read_part(xs.as_ptr().add(whole), n - whole);
                    rows(&part, &mut out, &mut out2);
                    super::super::write_part(ys.as_mut_ptr().add(whole), n - whole, &out);
                    super::super::write_part(zs.as_mut_ptr().add(whole), n - whole, &out2);
                }
            }
            }

            /// The routine's loops on `xs` into `ys` and `zs` (all as long).
            #[inline(always)]
            fn rows(xs: &[$t], ys: &mut [$t], zs: &mut [$t]) {
            let fast = $fast;
            let mut outside = 0u32;
            for ((y, z), &x) in ys.iter_mut().zip(zs.iter_mut()).zip(xs) {
                (*y, *z) = fast(x);
                outside |= u32::from(!$in_range(x));
            }
            if outside != 0 {
                for ((y, z), &x) in ys.iter_mut().zip(zs.iter_mut()).zip(xs) {
                    if !$in_range(x) {
                        (*y, *z) = $slow(x);
                    }
                }
            }
            }
        }
    };
}

/// The binary counterpart of `tile_routine!`: `dst[i] = op(a[i], b[i])`. The second form takes
/// a fast function that returns NaN exactly where it does not hold (and never NaN where it
/// does), for routines whose range test needs the fast path's intermediate values (`pow`: the
/// exponent of the result); the slow pass recomputes the NaN elements.
macro_rules! tile_routine2 {
    ($(#[$doc:meta])* $name:ident, $inner:ident, $t:ty, nan_marked $fast:path, $slow:path) => {
        tile_routine2!(
            @fns $(#[$doc])* $name, $inner, $t,
            |a: $t, b: $t| { let v = $fast(a, b); (v, !v.is_nan()) }, |_: $t, _: $t, v: $t| v.is_nan(),
            $slow
        );
    };
    ($(#[$doc:meta])* $name:ident, $inner:ident, $t:ty, $fast:path, $in_range:path, $slow:path) => {
        tile_routine2!(
            @fns $(#[$doc])* $name, $inner, $t,
            |a: $t, b: $t| ($fast(a, b), $in_range(a, b)), |a: $t, b: $t, _: $t| !$in_range(a, b),
            $slow
        );
    };
    (@fns $(#[$doc:meta])* $name:ident, $inner:ident, $t:ty, $fast:expr, $redo:expr, $slow:path) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `a` and `b` must be valid for `n` reads and `dst` for `n` writes of the element type,
        /// `dst` must not overlap either source, and the CPU must have AVX2 and FMA
        /// ([`available`](super::available)).
        pub(crate) unsafe extern "C" fn $name(a: *const $t, b: *const $t, dst: *mut $t, n: usize) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: forwarded from this function's contract.
            unsafe {
                let (ys, xs) = (std::slice::from_raw_parts(a, n), std::slice::from_raw_parts(b, n));
                let out = std::slice::from_raw_parts_mut(dst, n);
                if super::avx512() {
                    $inner::wide(ys, xs, out)
                } else {
                    $inner(ys, xs, out)
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = (a, b, dst, n);
                unreachable!("ahead-of-time tiles are only linked on x86-64")
            }
        }

        /// The routine on the pairs of `ys` and `xs` into `out`, the rows as references (as
        /// the unary routines').
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        #[inline(never)]
        unsafe fn $inner(ys: &[$t], xs: &[$t], out: &mut [$t]) {
            // SAFETY: forwarded (AVX2).
            unsafe { $inner::tile(ys, xs, out) }
        }

        /// The routine's loops, inlined into its target's body and into the fused passes'.
        #[cfg(target_arch = "x86_64")]
        pub(super) mod $inner {
            #[allow(clippy::wildcard_imports, reason = "the formulas of the parent module")]
            use super::*;

            /// The routine compiled for AVX-512 (the same formulas, so the same bits).
            ///
            /// # Safety
            /// As the routine's, and the CPU must have AVX-512 F and VL.
            #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
            #[inline(never)]
            pub(in super::super) unsafe fn wide(ys: &[$t], xs: &[$t], out: &mut [$t]) {
                // SAFETY: forwarded (AVX2).
                unsafe { tile(ys, xs, out) }
            }

            /// The routine on one pair of elements: the bits the routine writes for
            /// `(a, b)`, without the array setup.
            ///
            /// # Safety
            /// The CPU must have AVX2 and FMA ([`available`](super::super::available)).
            #[target_feature(enable = "avx2,fma")]
            pub(in super::super) unsafe extern "C" fn one(a: $t, b: $t) -> $t {
                let (fast, redo) = ($fast, $redo);
                let (value, _) = fast(a, b);
                if redo(a, b, value) { $slow(a, b) } else { value }
            }

            /// The routine on one block of pairs ([`BLOCK_BYTES`](super::super::BLOCK_BYTES)
            /// of elements of `a` and of `b` into `dst`): the bits the routine writes for them.
            /// Assembled passes call it once per block ([`AotFn::block`](super::super::AotFn::block)).
            ///
            /// # Safety
            /// `a` and `b` must be valid for the block's reads and `dst` for its writes, `dst`
            /// must overlap neither, and the CPU must have AVX2 and FMA.
            #[target_feature(enable = "avx2,fma")]
            pub(in super::super) unsafe extern "C" fn block(
                ys: &[$t; super::super::BLOCK_BYTES / std::mem::size_of::<$t>()],
                xs: &[$t; super::super::BLOCK_BYTES / std::mem::size_of::<$t>()],
                out: &mut [$t; super::super::BLOCK_BYTES / std::mem::size_of::<$t>()],
            ) {
                // By reference, as the unary routines' blocks.
                rows(ys, xs, out);
            }

            /// [`block`] compiled for AVX-512 (the same formulas, so the same bits).
            ///
            /// # Safety
            /// As [`block`]'s, and the CPU must have AVX-512 F and VL.
            #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
            pub(in super::super) unsafe extern "C" fn block_wide(
                ys: &[$t; super::super::BLOCK_BYTES / std::mem::size_of::<$t>()],
                xs: &[$t; super::super::BLOCK_BYTES / std::mem::size_of::<$t>()],
                out: &mut [$t; super::super::BLOCK_BYTES / std::mem::size_of::<$t>()],
            ) {
                rows(&super::super::block_by_halves(ys), &super::super::block_by_halves(xs), out);
            }

            /// # Safety
            /// As the routine's.
            #[inline(always)]
            pub(in super::super) unsafe fn chunk(a: *const $t, b: *const $t, dst: *mut $t, n: usize) {
            // SAFETY: the caller guarantees the three ranges are valid and `dst` overlaps
            // neither source.
            let (ys, xs, out) = unsafe {
                (
                    std::slice::from_raw_parts(a, n),
                    std::slice::from_raw_parts(b, n),
                    std::slice::from_raw_parts_mut(dst, n),
                )
            };
            // SAFETY: forwarded (AVX2).
            unsafe { tile(ys, xs, out) }
            }

            /// The routine's loops over whole vectors of the pairs into `out` (all as long),
            /// then the pairs left through masks (as the unary routines').
            ///
            /// # Safety
            /// The CPU must have AVX2.
            #[inline(always)]
            pub(super) unsafe fn tile(ys: &[$t], xs: &[$t], out: &mut [$t]) {
            const M: usize = { super::super::PART_BYTES / std::mem::size_of::<$t>() };
            let n = ys.len().min(xs.len()).min(out.len());
            let whole = n - n % M;
            rows(&ys[..whole], &xs[..whole], &mut out[..whole]);
            if whole < n {
                let mut part_out = [<$t as super::super::BlockElem>::FILL; M];
                // SAFETY: elements `whole..n` are inside every row; the caller guarantees AVX2.
                unsafe {
                    let part_y: [$t; M] = super::super::read_part(ys.as_ptr().add(whole), n - whole);
                    let part_x: [$t; M] = super::super::read_part(xs.as_ptr().add(whole), n - whole);
                    rows(&part_y, &part_x, &mut part_out);
                    super::super::write_part(out.as_mut_ptr().add(whole), n - whole, &part_out);
                }
            }
            }

            /// The routine's loops on the pairs of `ys` and `xs` into `out` (all as long).
            #[inline(always)]
            fn rows(ys: &[$t], xs: &[$t], out: &mut [$t]) {
            let (fast, redo) = ($fast, $redo);
            let mut outside = 0u32;
            for ((o, &y), &x) in out.iter_mut().zip(ys).zip(xs) {
                let (value, in_range) = fast(y, x);
                *o = value;
                outside |= u32::from(!in_range);
            }
            if outside != 0 {
                for ((o, &y), &x) in out.iter_mut().zip(ys).zip(xs) {
                    if redo(y, x, *o) {
                        *o = $slow(y, x);
                    }
                }
            }
            }
        }
    };
}

mod f32;
mod f64;
pub(crate) mod fused;
mod pow;
mod pow_tables;
mod table;

pub(crate) use table::{AotFn, Computes};

#[cfg(test)]
mod one_tests;
#[cfg(all(test, target_arch = "x86_64"))]
mod tail_tests;
#[cfg(test)]
mod tests;
