//! Transcendentals compiled ahead of time for the host's widest vectors, applied to tiles.
//!
//! Cranelift's vectors are 128 bits wide on x86-64, so the inline polynomials of [`crate::math`]
//! run four `f32` lanes per instruction where an AVX2 CPU has eight. For kernels whose
//! transcendental ops dominate, the code generator instead runs the elementwise loop in tiles
//! of [`TILE`] elements (see `codegen`), stages each transcendental's argument in a stack
//! buffer and calls one of the routines here on the whole tile. The routines are plain Rust
//! written branch-free over `f32` (and `f64` for `sin`, `cos`, `exp`, `log`, `atan`, `atan2`,
//! `asin`, `acos`, `tanh`, `sigmoid`, `pow`, `tan`, `exp2`, `log2`: every transcendental),
//! compiled by rustc with `avx2`
//! and `fma` enabled for that function alone (`#[target_feature]`), so LLVM turns each loop
//! into 8-lane (4-lane `f64`) AVX2 code; the JIT links them only when the running CPU has both
//! features ([`available`]).
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
//! pair costs what one of them does: two-link arm kinematics 12.1 → 6.8 ns per element), the
//! `f32` one by both routines' formulas in one pass (their reductions differ; no faster).
//!
//! The results are deterministic (the same input gives the same bits at every position and
//! every size of a tiled kernel), but may differ in the last bit from the inline polynomials
//! that kernels use on CPUs without AVX2 and FMA. Where the routines are linked, every
//! transcendental of every kernel has their bits: reductions run their points in tiles too and
//! fold the staged values in the untiled order (a long row with partial accumulators, a batch
//! of short rows with its outputs in lanes, and since session 18 a row reduced to one
//! accumulator, one output at a time, which also takes the rows of outputs in lanes that do
//! not fit a tile group), and scalar code calls the routines one element at a time, so
//! `sum(f(x))` gives the bits of summing the tiled `f(x)`. `pow` is
//! the exception: where the routines are linked, every `pow` of a kernel calls them, in short
//! loops and reductions on the vector's lanes (`transcendental::binary`), since the inline `pow`
//! costs as much for one lane as for a whole vector. (The `f64` `pow` routine and the inline
//! `f64` `pow`, fdlibm's, are different algorithms since session 19; both are within 1 ULP of
//! glibc, and a CPU with the routines uses only the routine.)

use rfx_ir::{BinaryOp, DType, UnaryOp};

/// Builds the tables the routines read (the `f64` `pow`'s), so that no kernel call pays for
/// building them; the JIT calls it when it registers the routines.
pub(crate) fn prepare_tables() {
    pow_tables::tables();
}

/// Elements per tile: four `f32` staging buffers of a tile fit in 8 KiB, far inside L1, and a
/// tile is long enough that a call costs a few percent of the work it does.
pub(crate) const TILE: usize = 512;

/// The smallest innermost loop that runs in tiles. From two elements on the routines beat the
/// inline polynomials, staging and call included (`examples/short_transcendentals`: `f64`
/// `tanh` of 2 elements 52 → 26 ns, of 16 206 → 73); one element keeps the inline code.
pub(crate) const MIN_TILED_ELEMS: usize = 2;

/// A routine `fn(src: *const f32, dst: *mut f32, n: usize)` the JIT code may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum AotFn {
    SinF32,
    CosF32,
    TanF32,
    ExpF32,
    Exp2F32,
    LogF32,
    Log2F32,
    TanhF32,
    SigmoidF32,
    AtanF32,
    Atan2F32,
    AsinF32,
    AcosF32,
    SinF64,
    CosF64,
    ExpF64,
    LogF64,
    AtanF64,
    Atan2F64,
    AsinF64,
    AcosF64,
    TanhF64,
    SigmoidF64,
    PowF32,
    PowF64,
    TanF64,
    Exp2F64,
    Log2F64,
    /// `sin` and `cos` of one argument, into two result tiles (`fn(src, sin, cos, n)`).
    SinCosF32,
    /// The `f64` `sin` and `cos` of one argument: one reduction, both polynomials.
    SinCosF64,
}

impl AotFn {
    /// Every routine, in a fixed order (symbol registration and declaration iterate this).
    pub(crate) const ALL: [AotFn; 30] = [
        AotFn::SinF32,
        AotFn::CosF32,
        AotFn::TanF32,
        AotFn::ExpF32,
        AotFn::Exp2F32,
        AotFn::LogF32,
        AotFn::Log2F32,
        AotFn::TanhF32,
        AotFn::SigmoidF32,
        AotFn::AtanF32,
        AotFn::Atan2F32,
        AotFn::AsinF32,
        AotFn::AcosF32,
        AotFn::SinF64,
        AotFn::CosF64,
        AotFn::ExpF64,
        AotFn::LogF64,
        AotFn::AtanF64,
        AotFn::Atan2F64,
        AotFn::AsinF64,
        AotFn::AcosF64,
        AotFn::TanhF64,
        AotFn::SigmoidF64,
        AotFn::PowF32,
        AotFn::PowF64,
        AotFn::TanF64,
        AotFn::Exp2F64,
        AotFn::Log2F64,
        AotFn::SinCosF32,
        AotFn::SinCosF64,
    ];

    /// The routine computing `op` on `dtype`, if there is one.
    pub(crate) fn for_op(op: UnaryOp, dtype: DType) -> Option<AotFn> {
        match (op, dtype) {
            (UnaryOp::Sin, DType::F32) => Some(AotFn::SinF32),
            (UnaryOp::Cos, DType::F32) => Some(AotFn::CosF32),
            (UnaryOp::Tan, DType::F32) => Some(AotFn::TanF32),
            (UnaryOp::Exp, DType::F32) => Some(AotFn::ExpF32),
            (UnaryOp::Exp2, DType::F32) => Some(AotFn::Exp2F32),
            (UnaryOp::Log, DType::F32) => Some(AotFn::LogF32),
            (UnaryOp::Log2, DType::F32) => Some(AotFn::Log2F32),
            (UnaryOp::Tanh, DType::F32) => Some(AotFn::TanhF32),
            (UnaryOp::Sigmoid, DType::F32) => Some(AotFn::SigmoidF32),
            (UnaryOp::Atan, DType::F32) => Some(AotFn::AtanF32),
            (UnaryOp::Asin, DType::F32) => Some(AotFn::AsinF32),
            (UnaryOp::Acos, DType::F32) => Some(AotFn::AcosF32),
            (UnaryOp::Sin, DType::F64) => Some(AotFn::SinF64),
            (UnaryOp::Cos, DType::F64) => Some(AotFn::CosF64),
            (UnaryOp::Exp, DType::F64) => Some(AotFn::ExpF64),
            (UnaryOp::Log, DType::F64) => Some(AotFn::LogF64),
            (UnaryOp::Atan, DType::F64) => Some(AotFn::AtanF64),
            (UnaryOp::Asin, DType::F64) => Some(AotFn::AsinF64),
            (UnaryOp::Acos, DType::F64) => Some(AotFn::AcosF64),
            (UnaryOp::Tanh, DType::F64) => Some(AotFn::TanhF64),
            (UnaryOp::Sigmoid, DType::F64) => Some(AotFn::SigmoidF64),
            (UnaryOp::Tan, DType::F64) => Some(AotFn::TanF64),
            (UnaryOp::Exp2, DType::F64) => Some(AotFn::Exp2F64),
            (UnaryOp::Log2, DType::F64) => Some(AotFn::Log2F64),
            _ => None,
        }
    }

    /// The routine computing the binary `op` on `dtype`, if there is one.
    pub(crate) fn for_binary(op: BinaryOp, dtype: DType) -> Option<AotFn> {
        match (op, dtype) {
            (BinaryOp::Atan2, DType::F32) => Some(AotFn::Atan2F32),
            (BinaryOp::Atan2, DType::F64) => Some(AotFn::Atan2F64),
            (BinaryOp::Pow, DType::F32) => Some(AotFn::PowF32),
            (BinaryOp::Pow, DType::F64) => Some(AotFn::PowF64),
            _ => None,
        }
    }

    /// The element type of its arguments and result.
    pub(crate) fn dtype(self) -> DType {
        match self {
            AotFn::SinF64
            | AotFn::CosF64
            | AotFn::ExpF64
            | AotFn::LogF64
            | AotFn::AtanF64
            | AotFn::Atan2F64
            | AotFn::AsinF64
            | AotFn::AcosF64
            | AotFn::TanhF64
            | AotFn::SigmoidF64
            | AotFn::PowF64
            | AotFn::TanF64
            | AotFn::Exp2F64
            | AotFn::Log2F64
            | AotFn::SinCosF64 => DType::F64,
            _ => DType::F32,
        }
    }

    /// How many source tiles it reads.
    pub(crate) fn arity(self) -> usize {
        match self {
            AotFn::Atan2F32 | AotFn::Atan2F64 | AotFn::PowF32 | AotFn::PowF64 => 2,
            _ => 1,
        }
    }

    /// How many result tiles it writes: two for `sincos`, one for the others.
    pub(crate) fn results(self) -> usize {
        match self {
            AotFn::SinCosF32 | AotFn::SinCosF64 => 2,
            _ => 1,
        }
    }

    /// The `sincos` routine a `sin` or `cos` routine pairs into, and the result it takes there
    /// (0: `sin`, 1: `cos`).
    pub(crate) fn sincos_part(self) -> Option<(AotFn, usize)> {
        match self {
            AotFn::SinF32 => Some((AotFn::SinCosF32, 0)),
            AotFn::CosF32 => Some((AotFn::SinCosF32, 1)),
            AotFn::SinF64 => Some((AotFn::SinCosF64, 0)),
            AotFn::CosF64 => Some((AotFn::SinCosF64, 1)),
            _ => None,
        }
    }

    /// The symbol the JIT module imports it as.
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            AotFn::SinF32 => "rfx_aot_sin_f32",
            AotFn::CosF32 => "rfx_aot_cos_f32",
            AotFn::TanF32 => "rfx_aot_tan_f32",
            AotFn::ExpF32 => "rfx_aot_exp_f32",
            AotFn::Exp2F32 => "rfx_aot_exp2_f32",
            AotFn::LogF32 => "rfx_aot_log_f32",
            AotFn::Log2F32 => "rfx_aot_log2_f32",
            AotFn::TanhF32 => "rfx_aot_tanh_f32",
            AotFn::SigmoidF32 => "rfx_aot_sigmoid_f32",
            AotFn::AtanF32 => "rfx_aot_atan_f32",
            AotFn::Atan2F32 => "rfx_aot_atan2_f32",
            AotFn::AsinF32 => "rfx_aot_asin_f32",
            AotFn::AcosF32 => "rfx_aot_acos_f32",
            AotFn::SinF64 => "rfx_aot_sin_f64",
            AotFn::CosF64 => "rfx_aot_cos_f64",
            AotFn::ExpF64 => "rfx_aot_exp_f64",
            AotFn::LogF64 => "rfx_aot_log_f64",
            AotFn::AtanF64 => "rfx_aot_atan_f64",
            AotFn::Atan2F64 => "rfx_aot_atan2_f64",
            AotFn::AsinF64 => "rfx_aot_asin_f64",
            AotFn::AcosF64 => "rfx_aot_acos_f64",
            AotFn::TanhF64 => "rfx_aot_tanh_f64",
            AotFn::SigmoidF64 => "rfx_aot_sigmoid_f64",
            AotFn::PowF32 => "rfx_aot_pow_f32",
            AotFn::PowF64 => "rfx_aot_pow_f64",
            AotFn::TanF64 => "rfx_aot_tan_f64",
            AotFn::Exp2F64 => "rfx_aot_exp2_f64",
            AotFn::Log2F64 => "rfx_aot_log2_f64",
            AotFn::SinCosF32 => "rfx_aot_sincos_f32",
            AotFn::SinCosF64 => "rfx_aot_sincos_f64",
        }
    }

    /// The routine's address: a [`Tile2Fn`] / [`Tile2FnF64`] for `atan2` and `pow`, a
    /// [`TilePairFn`] / [`TilePairFnF64`] for `sincos`, a [`TileFnF64`] for the other `f64` ones,
    /// a [`TileFn`] for the others.
    pub(crate) fn address(self) -> *const u8 {
        // One coercion per C ABI, so that each arm is checked against its routine's type.
        let unary = |f: TileFn| f as *const u8;
        let unary_f64 = |f: TileFnF64| f as *const u8;
        let binary = |f: Tile2Fn| f as *const u8;
        let binary_f64 = |f: Tile2FnF64| f as *const u8;
        let pair = |f: TilePairFn| f as *const u8;
        let pair_f64 = |f: TilePairFnF64| f as *const u8;
        match self {
            AotFn::SinF32 => unary(rfx_aot_sin_f32),
            AotFn::CosF32 => unary(rfx_aot_cos_f32),
            AotFn::TanF32 => unary(rfx_aot_tan_f32),
            AotFn::ExpF32 => unary(rfx_aot_exp_f32),
            AotFn::Exp2F32 => unary(rfx_aot_exp2_f32),
            AotFn::LogF32 => unary(rfx_aot_log_f32),
            AotFn::Log2F32 => unary(rfx_aot_log2_f32),
            AotFn::TanhF32 => unary(rfx_aot_tanh_f32),
            AotFn::SigmoidF32 => unary(rfx_aot_sigmoid_f32),
            AotFn::AtanF32 => unary(rfx_aot_atan_f32),
            AotFn::Atan2F32 => binary(rfx_aot_atan2_f32),
            AotFn::AsinF32 => unary(rfx_aot_asin_f32),
            AotFn::AcosF32 => unary(rfx_aot_acos_f32),
            AotFn::SinF64 => unary_f64(rfx_aot_sin_f64),
            AotFn::CosF64 => unary_f64(rfx_aot_cos_f64),
            AotFn::ExpF64 => unary_f64(rfx_aot_exp_f64),
            AotFn::LogF64 => unary_f64(rfx_aot_log_f64),
            AotFn::AtanF64 => unary_f64(rfx_aot_atan_f64),
            AotFn::Atan2F64 => binary_f64(rfx_aot_atan2_f64),
            AotFn::AsinF64 => unary_f64(rfx_aot_asin_f64),
            AotFn::AcosF64 => unary_f64(rfx_aot_acos_f64),
            AotFn::TanhF64 => unary_f64(rfx_aot_tanh_f64),
            AotFn::SigmoidF64 => unary_f64(rfx_aot_sigmoid_f64),
            AotFn::PowF32 => binary(pow::rfx_aot_pow_f32),
            AotFn::PowF64 => binary_f64(pow::rfx_aot_pow_f64),
            AotFn::TanF64 => unary_f64(rfx_aot_tan_f64),
            AotFn::Exp2F64 => unary_f64(rfx_aot_exp2_f64),
            AotFn::Log2F64 => unary_f64(rfx_aot_log2_f64),
            AotFn::SinCosF32 => pair(rfx_aot_sincos_f32),
            AotFn::SinCosF64 => pair_f64(rfx_aot_sincos_f64),
        }
    }
}

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
    // With j = 0 the chain adds +0 products and would turn x = -0 into +0.
    let r = if j == 0.0 { x } else { r };
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

/// `π` in three parts, each exactly twice the `π/2` part: `x - n π` is then `x - 2n π/2`, the
/// same reduction (and accuracy) as `reduce_pio2` at an even multiple.
const PI_PART_HI: f32 = 2.0 * PIO2_HI;
const PI_PART_MID: f32 = 2.0 * PIO2_MID;
const PI_PART_LO: f32 = 2.0 * PIO2_LO;

/// `x - h π` with `π` in three parts (FMA); `|x - h π| <= π/2` for the `h` the callers pick.
#[inline(always)]
fn reduce_pi(x: f32, h: f32) -> f32 {
    let r = h.mul_add(-PI_PART_HI, x);
    let r = h.mul_add(-PI_PART_MID, r);
    h.mul_add(-PI_PART_LO, r)
}

/// `sin r` for `|r| <= π/2`: `r + r^3 P(r^2)`, `P` of degree 3 fitted for the least relative
/// error on `[0, π/2 + 0.01]` (0.1 ULP before rounding), with the sign of `r` (so `sin(-0) =
/// -0`).
#[inline(always)]
fn sin_odd_poly(r: f32) -> f32 {
    let s = odd_poly(
        r,
        [2.605_782_1e-6, -1.980_960_4e-4, 8.333_066_5e-3, -1.666_666e-1],
    );
    f32::from_bits(s.to_bits() | (r.to_bits() & 0x8000_0000))
}

/// `sin x` for `|x| <= TRIG_FAST_MAX`: `x = n π + r`, `sin x = (-1)^n sin r`.
#[inline(always)]
fn sin_fast(x: f32) -> f32 {
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
fn cos_fast(x: f32) -> f32 {
    let t = x.mul_add(std::f32::consts::FRAC_1_PI, 0.5) + ROUND_MAGIC;
    let h = (t - ROUND_MAGIC) - 0.5;
    let s = sin_odd_poly(reduce_pi(x, h));
    f32::from_bits(s.to_bits() ^ (t.to_bits() << 31))
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
    exp_poly(r) * pow2_of_rounded(t)
}

/// `e^r` for `|r| <= ln2/2` (Cephes `expf` degree-5 polynomial).
#[inline(always)]
fn exp_poly(r: f32) -> f32 {
    let p = r.mul_add(1.987_569_1e-4, 1.398_2e-3);
    let p = r.mul_add(p, 8.333_452e-3);
    let p = r.mul_add(p, 4.166_579_6e-2);
    let p = r.mul_add(p, 1.666_666_5e-1);
    let p = r.mul_add(p, 0.5);
    (r * r).mul_add(p, r) + 1.0
}

/// `2^k` for `t = k + ROUND_MAGIC` (`k` read from the low mantissa bits), `-126 <= k <= 127`.
#[inline(always)]
fn pow2_of_rounded(t: f32) -> f32 {
    let k = (t.to_bits() as i32).wrapping_sub(ROUND_MAGIC.to_bits() as i32);
    f32::from_bits((k.wrapping_add(127) as u32) << 23)
}

const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;

/// The shared part of `log` and `log2` for normal, positive, finite `x`: `x = 2^e (1 + f)`
/// with `1 + f` in `[√½, √2)`, and `(e, f, f², f³ P(f))`, `P` the Cephes `logf` polynomial.
#[inline(always)]
fn log_parts(x: f32) -> (f32, f32, f32, f32) {
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
fn log_fast(x: f32) -> f32 {
    let (fe, f, z, y) = log_parts(x);
    let y = fe.mul_add(LN2_LO, y);
    let y = z.mul_add(-0.5, y);
    let r = f + y;
    fe.mul_add(LN2_HI, r)
}

/// `tan x` for `|x| <= TRIG_FAST_MAX`: `sin r / cos r`, or `-cos r / sin r` in odd quadrants.
#[inline(always)]
fn tan_fast(x: f32) -> f32 {
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
fn exp2_fast(x: f32) -> f32 {
    let t = x + ROUND_MAGIC;
    let n = t - ROUND_MAGIC;
    let f = x - n;
    // r = f ln2 with its rounding error folded in through FMA.
    let hi = f * std::f32::consts::LN_2;
    let lo = f.mul_add(std::f32::consts::LN_2, -hi) + f * LN2_TAIL;
    exp_poly(hi + lo) * pow2_of_rounded(t)
}

/// `ln 2 - f32(ln 2)`.
const LN2_TAIL: f32 = -1.904_654_3e-9;
const EXP2_FAST_MIN: f32 = -125.0;
const EXP2_FAST_MAX: f32 = 127.0;

/// `log2 x` for normal, positive, finite `x`: `e + log2(m)` with `log2(m) = ln(m) log2(e)`,
/// `ln(m)` from the `log` polynomial and the exponent added last (so `log2` of a power of two
/// is exact).
#[inline(always)]
fn log2_fast(x: f32) -> f32 {
    let (fe, f, z, y) = log_parts(x);
    let y = z.mul_add(-0.5, y);
    // ln(1+f) = f + y; times log2(e) in two parts.
    let ln = f + y;
    let hi = ln * std::f32::consts::LOG2_E;
    let lo = ln.mul_add(std::f32::consts::LOG2_E, -hi) + ln * LOG2E_TAIL;
    fe + (hi + lo)
}

/// `log2(e) - f32(log2(e))`.
const LOG2E_TAIL: f32 = 1.925_963e-8;

/// `tanh x` for finite `x` (Cephes `tanhf`): an odd polynomial below `|x| = 0.625`, else
/// `1 - 2 / (e^(2|x|) + 1)` with the sign of `x`; `±1` from `|x| = 9` on.
#[inline(always)]
fn tanh_fast(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let p = z.mul_add(-5.704_988_7e-3, 2.063_909e-2);
    let p = z.mul_add(p, -5.373_971_6e-2);
    let p = z.mul_add(p, 1.333_144_2e-1);
    let p = z.mul_add(p, -3.333_328e-1);
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
fn sigmoid_fast(x: f32) -> f32 {
    let e = exp_fast(-x.abs());
    let d = 1.0 + e;
    if x < 0.0 { e / d } else { 1.0 / d }
}

/// `atan t` for `|t| <= tan(π/8)` (Cephes `atanf` polynomial).
#[inline(always)]
fn atan_poly(t: f32) -> f32 {
    odd_poly(
        t,
        [8.053_744_5e-2, -1.387_768_6e-1, 1.997_771_1e-1, -3.333_295e-1],
    )
}

/// `t + t^3 (c[3] + c[2] t^2 + c[1] t^4 + c[0] t^6)` by Horner's rule with FMA (the shared shape
/// of the odd `sin` and `atan` polynomials).
#[inline(always)]
fn odd_poly(t: f32, c: [f32; 4]) -> f32 {
    let z = t * t;
    let p = z.mul_add(c[0], c[1]);
    let p = z.mul_add(p, c[2]);
    let p = z.mul_add(p, c[3]);
    (t * z).mul_add(p, t)
}

/// `atan x` for finite `x` (Cephes `atanf`): `x > tan(3π/8)`: `π/2 + atan(-1/x)`;
/// `x > tan(π/8)`: `π/4 + atan((x-1)/(x+1))`; the sign restored last.
#[inline(always)]
fn atan_fast(x: f32) -> f32 {
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
fn atan2_fast(y: f32, x: f32) -> f32 {
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
fn atan_unit(t: f32) -> f32 {
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

const FRAC_PI_2_HI: f32 = std::f32::consts::FRAC_PI_2;
const FRAC_PI_2_LO: f32 = -4.371_139e-8;
const PI_HI: f32 = std::f32::consts::PI;
const PI_LO: f32 = -8.742_278e-8;

/// `atan2` in `f64` through libm.
fn atan2_slow(y: f32, x: f32) -> f32 {
    f64::from(y).atan2(f64::from(x)) as f32
}

fn in_exp2_range(x: f32) -> bool {
    (EXP2_FAST_MIN..=EXP2_FAST_MAX).contains(&x)
}

fn in_sigmoid_range(x: f32) -> bool {
    x.abs() <= 87.0
}

fn is_finite(x: f32) -> bool {
    x.is_finite()
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

fn tan_slow(x: f32) -> f32 {
    f64::from(x).tan() as f32
}

fn exp2_slow(x: f32) -> f32 {
    f64::from(x).exp2() as f32
}

fn log2_slow(x: f32) -> f32 {
    f64::from(x).log2() as f32
}

fn tanh_slow(x: f32) -> f32 {
    f64::from(x).tanh() as f32
}

/// As the interpreter computes it (`rfx_ir::semantics`), in `f64`.
fn sigmoid_slow(x: f32) -> f32 {
    let x = f64::from(x);
    (if x < 0.0 {
        let e = x.exp();
        e / (1.0 + e)
    } else {
        1.0 / (1.0 + (-x).exp())
    }) as f32
}

fn atan_slow(x: f32) -> f32 {
    f64::from(x).atan() as f32
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
    ($(#[$doc:meta])* $name:ident, $inner:ident, $t:ty, $fast:expr, $in_range:path, $slow:path) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `src` must be valid for `n` reads and `dst` for `n` writes of the element type, the
        /// two ranges must not overlap, and the CPU must have AVX2 and FMA ([`available`]).
        pub(crate) unsafe extern "C" fn $name(src: *const $t, dst: *mut $t, n: usize) {
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
        unsafe fn $inner(src: *const $t, dst: *mut $t, n: usize) {
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

/// `tile_routine!` for an op with two results: `$fast` and `$slow` return a pair, written to
/// `first[i]` and `second[i]`.
macro_rules! tile_routine_pair {
    ($(#[$doc:meta])* $name:ident, $inner:ident, $t:ty, $fast:expr, $in_range:path, $slow:path) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `src` must be valid for `n` reads and `first` and `second` for `n` writes of the
        /// element type, no two of the three ranges may overlap, and the CPU must have AVX2 and
        /// FMA ([`available`]).
        pub(crate) unsafe extern "C" fn $name(src: *const $t, first: *mut $t, second: *mut $t, n: usize) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: forwarded from this function's contract.
            unsafe {
                $inner(src, first, second, n)
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = (src, first, second, n);
                unreachable!("ahead-of-time tiles are only linked on x86-64")
            }
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $inner(src: *const $t, first: *mut $t, second: *mut $t, n: usize) {
            // SAFETY: the caller guarantees the three ranges are valid and disjoint.
            let (xs, ys, zs) = unsafe {
                (
                    std::slice::from_raw_parts(src, n),
                    std::slice::from_raw_parts_mut(first, n),
                    std::slice::from_raw_parts_mut(second, n),
                )
            };
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
        /// ([`available`]).
        pub(crate) unsafe extern "C" fn $name(a: *const $t, b: *const $t, dst: *mut $t, n: usize) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: forwarded from this function's contract.
            unsafe {
                $inner(a, b, dst, n)
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = (a, b, dst, n);
                unreachable!("ahead-of-time tiles are only linked on x86-64")
            }
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn $inner(a: *const $t, b: *const $t, dst: *mut $t, n: usize) {
            // SAFETY: the caller guarantees the three ranges are valid and `dst` overlaps
            // neither source.
            let (ys, xs, out) = unsafe {
                (
                    std::slice::from_raw_parts(a, n),
                    std::slice::from_raw_parts(b, n),
                    std::slice::from_raw_parts_mut(dst, n),
                )
            };
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
    };
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
fn sincos_fast(x: f32) -> (f32, f32) {
    (sin_fast(x), cos_fast(x))
}

fn sincos_slow(x: f32) -> (f32, f32) {
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

/// Cephes `asinf.c`: `asin t = t + t z P(z)` for `|t| <= 1/2`, given `z = t²`.
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "Cephes' coefficients as published")]
fn asin_core(t: f32, z: f32) -> f32 {
    let p = z.mul_add(4.216_319_904_8e-2, 2.418_131_104_9e-2);
    let p = z.mul_add(p, 4.547_002_599_8e-2);
    let p = z.mul_add(p, 7.495_300_268_6e-2);
    let p = z.mul_add(p, 1.666_675_242_2e-1);
    t.mul_add(z * p, t)
}

/// `asin x` for `|x| <= 1`: the core on `|x|` up to 1/2, else `π/2 - 2 asin √((1-|x|)/2)`
/// (two-part π/2); the sign of `x` restored. NaN and `|x| > 1` take the slow path.
#[inline(always)]
fn asin_fast(x: f32) -> f32 {
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
fn acos_fast(x: f32) -> f32 {
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

fn in_unit_range(x: f32) -> bool {
    x.abs() <= 1.0
}

fn asin_slow(x: f32) -> f32 {
    f64::from(x).asin() as f32
}

fn acos_slow(x: f32) -> f32 {
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

// ---- `f64` ----

/// `1.5 * 2^52`: adding it rounds an `f64` of magnitude below `2^51` to an integer, which then
/// sits in the low mantissa bits.
const ROUND_MAGIC_F64: f64 = 6_755_399_441_055_744.0;
/// π/2 in three parts: π/2 rounded to `f64`, each next part the rounded rest (159 bits).
const PIO2_HI_F64: f64 = std::f64::consts::FRAC_PI_2;
const PIO2_MID_F64: f64 = 6.123_233_995_736_766e-17;
const PIO2_LO_F64: f64 = -1.497_384_904_859_169_8e-33;
/// `|x|` up to which the reduction below is exact enough for `sin`/`cos` within 1 ULP
/// (`n < 2^29`; `tests::f64_trig_near_multiples_of_pi_2`).
pub(crate) const TRIG_FAST_MAX_F64: f64 = 536_870_912.0;

/// `x = n π/2 + (r + y)` with `|r| <= π/4` and `y` the tail of `r` (fdlibm's `__rem_pio2`
/// contract, from three fused multiply-adds: `x - n HI` is exact, and the products by the other
/// parts keep their rounding errors in `y`); returns `(r, y, bits whose low two are n mod 4)`.
#[inline(always)]
fn reduce_pio2_f64(x: f64) -> (f64, f64, u64) {
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
fn sin_kernel_f64(x: f64, y: f64) -> f64 {
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
fn cos_kernel_f64(x: f64, y: f64) -> f64 {
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
fn sincos_fast_f64(x: f64) -> (f64, f64) {
    let (r, y, q) = reduce_pio2_f64(x);
    let s = sin_kernel_f64(r, y);
    let c = cos_kernel_f64(r, y);
    let odd = q & 1 == 1;
    let (sin, cos) = if odd { (c, s) } else { (s, c) };
    (
        f64::from_bits(sin.to_bits() ^ ((q & 2) << 62)),
        f64::from_bits(cos.to_bits() ^ (((q + 1) & 2) << 62)),
    )
}

/// `sin x` for `|x| <= TRIG_FAST_MAX_F64`.
#[inline(always)]
fn sin_fast_f64(x: f64) -> f64 {
    sincos_fast_f64(x).0
}

/// `cos x` for `|x| <= TRIG_FAST_MAX_F64`.
#[inline(always)]
fn cos_fast_f64(x: f64) -> f64 {
    sincos_fast_f64(x).1
}

fn in_trig_range_f64(x: f64) -> bool {
    x.abs() <= TRIG_FAST_MAX_F64
}

/// Outside the fast range (huge, ±Inf, NaN): `std` (glibc's libm, < 1 ULP).
fn sin_slow_f64(x: f64) -> f64 {
    x.sin()
}

fn cos_slow_f64(x: f64) -> f64 {
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

fn sincos_slow_f64(x: f64) -> (f64, f64) {
    (sin_slow_f64(x), cos_slow_f64(x))
}

tile_routine_pair!(
    /// `sin_dst[i], cos_dst[i] = sin(src[i]), cos(src[i])` for `i < n`, `f64`: the bits of the
    /// `sin` and `cos` routines for the time of one.
    rfx_aot_sincos_f64, sincos_f64_avx2, f64, sincos_fast_f64, in_trig_range_f64, sincos_slow_f64
);

/// ln 2 in two parts: rounded to `f64`, and the rounded rest.
const LN2_HI_F64: f64 = std::f64::consts::LN_2;
const LN2_LO_F64: f64 = 2.319_046_813_846_299_6e-17;
/// The fast path of `f64` `exp`: `2^n` stays normal (`-1021 <= n <= 1023`).
const EXP_FAST_MIN_F64: f64 = -708.0;
const EXP_FAST_MAX_F64: f64 = 709.0;

/// `e^x` for `EXP_FAST_MIN_F64 <= x <= EXP_FAST_MAX_F64`: `x = n ln2 + r` (`x - n LN2_HI` is
/// exact in a fused multiply-add), `|r| <= ln2/2`, `e^r` by its Taylor series to degree 13
/// (truncation below `4e-18`) in Horner form, `2^n` built in the exponent field.
#[inline(always)]
fn exp_fast_f64(x: f64) -> f64 {
    let t = x.mul_add(std::f64::consts::LOG2_E, ROUND_MAGIC_F64);
    let n = t - ROUND_MAGIC_F64;
    let r = n.mul_add(-LN2_HI_F64, x);
    let r = n.mul_add(-LN2_LO_F64, r);
    exp_reduced_f64(r) * pow2_of_rounded_f64(t)
}

/// `2^n` for `t = n + ROUND_MAGIC_F64` (`n` an integer in `[-1022, 1023]`, kept in `t`'s low
/// mantissa bits in two's complement), built in the exponent field.
#[inline(always)]
fn pow2_of_rounded_f64(t: f64) -> f64 {
    let k = (t.to_bits() as i64).wrapping_sub(ROUND_MAGIC_F64.to_bits() as i64);
    f64::from_bits((k.wrapping_add(1023) as u64) << 52)
}

/// `e^r` for `|r| <= ln2/2` by its Taylor series to degree 13 (truncation below `4e-18`) in
/// Horner form.
#[inline(always)]
fn exp_reduced_f64(r: f64) -> f64 {
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

fn in_exp_range_f64(x: f64) -> bool {
    (EXP_FAST_MIN_F64..=EXP_FAST_MAX_F64).contains(&x)
}

/// Outside the fast range (overflow, subnormal and zero results, ±Inf, NaN): `std`.
fn exp_slow_f64(x: f64) -> f64 {
    x.exp()
}

tile_routine!(
    /// `dst[i] = exp(src[i])` for `i < n`, `f64`.
    rfx_aot_exp_f64, exp_f64_avx2, f64, exp_fast_f64, in_exp_range_f64, exp_slow_f64
);

/// The representation of √½ rounded to `f64`.
const SQRT_HALF_BITS_F64: u64 = 0x3fe6_a09e_667f_3bcd;

/// `(k, m)` with `x = 2^k m` and `m` in `[√½, √2)`, for a normal, positive, finite `x`: the
/// exponent field of `x`'s representation less √½'s, biased by 1024 so that it stays positive
/// (`-1022 <= k <= 1024`), read out of the low bits of a float the way `ROUND_MAGIC_F64`
/// rounds; no compare and blend, and no `i64 → f64` conversion (AVX2 has none).
#[inline(always)]
fn split_at_sqrt_half_f64(x: f64) -> (f64, f64) {
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
fn log_parts_f64(x: f64) -> (f64, f64, f64, f64) {
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
fn log_fast_f64(x: f64) -> f64 {
    let (k, f, hfsq, sr) = log_parts_f64(x);
    k * 6.931_471_803_691_238_164_90e-01 - ((hfsq - (sr + k * 1.908_214_929_270_587_700_02e-10)) - f)
}

fn in_log_range_f64(x: f64) -> bool {
    (f64::MIN_POSITIVE..f64::INFINITY).contains(&x)
}

/// Outside the fast range (zero, negative, subnormal, ±Inf, NaN): `std`.
fn log_slow_f64(x: f64) -> f64 {
    x.ln()
}

tile_routine!(
    /// `dst[i] = ln(src[i])` for `i < n`, `f64`.
    rfx_aot_log_f64, log_f64_avx2, f64, log_fast_f64, in_log_range_f64, log_slow_f64
);

/// Cephes `atan.c` (`f64`): `atan r = r + r z P(z)/Q(z)`, `z = r²`, for `|r| <= 0.66`.
#[inline(always)]
#[allow(clippy::excessive_precision, reason = "Cephes' coefficients as published")]
fn atan_poly_f64(r: f64) -> f64 {
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
const TAN_3PI_8_F64: f64 = 2.414_213_562_373_095;

/// `atan x` (`f64`, every input: `-1/|x|` is ±0 at infinity, NaN propagates, a subnormal `x`
/// gives `x`): Cephes `atan.c`, `-1/|x|` above tan(3π/8), `(|x|-1)/(|x|+1)` above 0.66, the
/// base angle's low part (`PIO2_MID_F64`, Cephes' `MOREBITS`) added to the small term first;
/// the sign of `x` restored.
#[inline(always)]
fn atan_fast_f64(x: f64) -> f64 {
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

fn always_f64(_: f64) -> bool {
    true
}

fn atan_slow_f64(x: f64) -> f64 {
    x.atan()
}

tile_routine!(
    /// `dst[i] = atan(src[i])` for `i < n`, `f64`.
    rfx_aot_atan_f64, atan_f64_avx2, f64, atan_fast_f64, always_f64, atan_slow_f64
);

/// π in two parts.
const PI_LO_F64: f64 = 1.224_646_799_147_353_2e-16;

/// `atan2(y, x)` (`f64`) for finite `y`, `x` not both zero, at most 1e307, with `min/max` of the
/// magnitudes 0 or not subnormal: `a = atan(min/max)` on `[0, 1]` (reduced above 1/2), `π/2 - a`
/// when `|y| > |x|`, `π - a` when `x < 0` (two-part constants, low parts added last), the sign
/// of `y` restored.
#[inline(always)]
fn atan2_fast_f64(y: f64, x: f64) -> f64 {
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

fn in_atan2_range_f64(y: f64, x: f64) -> bool {
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
fn asin_r_f64(t: f64) -> f64 {
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
fn high_part_f64(s: f64) -> f64 {
    f64::from_bits(s.to_bits() & 0xffff_ffff_0000_0000)
}

/// `asin x` for `|x| <= 1` (fdlibm `e_asin.c`, branch-free): `R` is evaluated once, on `x²`
/// below 1/2 and on `t = (1-|x|)/2` above; below 1/2 `x + x R(x²)`, above `π/2 - 2 asin √t`
/// with `√t` split so that its square is exact (or, from 0.975, plainly); the sign of `x`
/// restored. NaN and `|x| > 1` take the slow path.
#[inline(always)]
fn asin_fast_f64(x: f64) -> f64 {
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
fn acos_fast_f64(x: f64) -> f64 {
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

fn in_unit_range_f64(x: f64) -> bool {
    x.abs() <= 1.0
}

fn in_acos_range_f64(x: f64) -> bool {
    x.abs() < 1.0
}

fn asin_slow_f64(x: f64) -> f64 {
    x.asin()
}

fn acos_slow_f64(x: f64) -> f64 {
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
fn tanh_fast_f64(x: f64) -> f64 {
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

fn in_tanh_range_f64(x: f64) -> bool {
    x.abs() <= 350.0
}

fn tanh_slow_f64(x: f64) -> f64 {
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
fn sigmoid_fast_f64(x: f64) -> f64 {
    let e = exp_fast_f64(-x.abs());
    let num = if x < 0.0 { e } else { 1.0 };
    num / (1.0 + e)
}

fn in_sigmoid_range_f64(x: f64) -> bool {
    x.abs() <= 708.0
}

fn sigmoid_slow_f64(x: f64) -> f64 {
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
fn tan_fast_f64(x: f64) -> f64 {
    let (r, y, q) = reduce_pio2_f64(x);
    let s = sin_kernel_f64(r, y);
    let c = cos_kernel_f64(r, y);
    if q & 1 == 1 { -c / s } else { s / c }
}

fn tan_slow_f64(x: f64) -> f64 {
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
fn exp2_fast_f64(x: f64) -> f64 {
    let t = x + ROUND_MAGIC_F64;
    let n = t - ROUND_MAGIC_F64;
    let f = x - n;
    let r = f * LN2_HI_F64;
    let r_lo = f.mul_add(LN2_HI_F64, -r) + f * LN2_LO_F64;
    let p = exp_reduced_f64(r);
    p.mul_add(r_lo, p) * pow2_of_rounded_f64(t)
}

fn in_exp2_range_f64(x: f64) -> bool {
    (-1021.0..=1023.0).contains(&x)
}

fn exp2_slow_f64(x: f64) -> f64 {
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
fn log2_fast_f64(x: f64) -> f64 {
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

fn log2_slow_f64(x: f64) -> f64 {
    x.log2()
}

tile_routine!(
    /// `dst[i] = log2(src[i])` for `i < n`, `f64`.
    rfx_aot_log2_f64, log2_f64_avx2, f64, log2_fast_f64, in_log_range_f64, log2_slow_f64
);

tile_routine2!(
    /// `dst[i] = atan2(a[i], b[i])` for `i < n`.
    rfx_aot_atan2_f32, atan2_f32_avx2, f32, nan_marked atan2_fast, atan2_slow
);

mod pow;
mod pow_tables;

#[cfg(test)]
mod tests;
