//! Coefficients of the approximations that more than one code generator evaluates, one table
//! per approximation, lowest degree first, as their sources publish them. The CPU backend's
//! inline polynomials and tile routines and the WGSL helpers read these tables (the WGSL text
//! is filled in from them), so an approximation's coefficients are written once.

/// Cephes `tanhf.c`: `tanh x = x + x z P(z)` with `z = x²`, for `|x| < 0.625` (`f32`).
pub const TANH_F32: [f64; 5] = [
    -3.333_328_194_22e-1,
    1.333_144_220_36e-1,
    -5.373_971_555_31e-2,
    2.063_908_879_54e-2,
    -5.704_988_727_45e-3,
];

/// Cephes `asinf.c`: `asin t = t + t z P(z)` with `z = t²`, for `|t| <= 1/2` (`f32`).
pub const ASIN_F32: [f64; 5] = [
    1.666_675_242_2e-1,
    7.495_300_268_6e-2,
    4.547_002_599_8e-2,
    2.418_131_104_9e-2,
    4.216_319_904_8e-2,
];

/// Cephes `atanf.c`: `atan t = t + t z P(z)` with `z = t²`, for `|t| <= tan(π/8)` (`f32`).
pub const ATAN_F32: [f64; 4] = [
    -3.333_294_915_39e-1,
    1.997_771_064_78e-1,
    -1.387_768_560_32e-1,
    8.053_744_495_38e-2,
];

/// The tables by name, for text templates: `$NAME[i]` is coefficient `i` of `NAME`.
pub const TABLES: &[(&str, &[f64])] = &[
    ("TANH_F32", &TANH_F32),
    ("ASIN_F32", &ASIN_F32),
    ("ATAN_F32", &ATAN_F32),
];
