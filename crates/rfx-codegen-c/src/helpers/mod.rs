//! `static inline` C helpers, emitted once each when the program uses them. `P_` in a template
//! is replaced by the function's name and `_`, so that several exported programs can share one
//! translation unit.

mod fmod;
mod inverse_trig;
mod log2_erf;
mod pow;
mod trig;

/// A helper function of the generated source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Helper {
    F32Bits,
    F64Bits,
    AddI32,
    SubI32,
    MulI32,
    NegI32,
    AbsI32,
    DivI32,
    FmodI32,
    MinI32,
    MaxI32,
    SignI32,
    AbsF32,
    AbsF64,
    MinF32,
    MaxF32,
    MinF64,
    MaxF64,
    SignF32,
    SignF64,
    FloorF32,
    CeilF32,
    RoundF32,
    FloorF64,
    CeilF64,
    RoundF64,
    F32ToI32,
    F64ToI32,
    SqrtF32,
    SqrtF64,
    ExpF32,
    ExpF64,
    LogF32,
    LogF64,
    TanhF32,
    TanhF64,
    Exp2F32,
    Exp2F64,
    SigmoidF32,
    SigmoidF64,
    TwoOverPi,
    RemPio2F32,
    SinF32,
    CosF32,
    SinPiPolyF32,
    SinFastF32,
    CosFastF32,
    TanF32,
    RemPio2F64,
    SinF64,
    CosF64,
    TanF64,
    FmodF32,
    FmodF64,
    Log2F32,
    Log2F64,
    AtanNonnegF32,
    AtanF32,
    AtanNonnegF64,
    AtanF64,
    Atan2F32,
    Atan2F64,
    AsinCoreF32,
    AsinF32,
    AcosF32,
    AsinCoreF64,
    AsinF64,
    AcosF64,
    ErfF32,
    ErfF64,
    PowF32,
    PowF64,
    SelF32,
    SelF64,
}

impl Helper {
    /// Helpers this one calls (emitted before it).
    pub(crate) fn needs(self) -> &'static [Helper] {
        match self {
            Helper::AbsF32 => &[Helper::F32Bits],
            Helper::AbsF64 => &[Helper::F64Bits],
            Helper::RoundF32 => &[Helper::AbsF32, Helper::F32Bits, Helper::SelF32],
            Helper::FloorF32 | Helper::CeilF32 => &[Helper::RoundF32],
            Helper::RoundF64 => &[Helper::AbsF64, Helper::F64Bits, Helper::SelF64],
            Helper::FloorF64 | Helper::CeilF64 => &[Helper::RoundF64],
            Helper::SqrtF64 => &[Helper::F64Bits],
            Helper::LogF32 => &[Helper::F32Bits, Helper::SelF32],
            Helper::TanhF32 => &[Helper::ExpF32, Helper::AbsF32, Helper::SelF32],
            Helper::TanhF64 => &[Helper::ExpF64, Helper::AbsF64, Helper::SelF64],
            Helper::LogF64 => &[Helper::F64Bits, Helper::SelF64],
            Helper::SqrtF32 => &[Helper::SqrtF64],
            Helper::ExpF32 => &[Helper::SelF32],
            Helper::ExpF64 => &[Helper::SelF64],
            // exp2 shares exp's polynomial and scaling.
            Helper::Exp2F32 => &[Helper::ExpF32],
            Helper::Exp2F64 => &[Helper::ExpF64],
            Helper::SigmoidF32 => &[Helper::ExpF32, Helper::AbsF32],
            Helper::SigmoidF64 => &[Helper::ExpF64, Helper::AbsF64],
            Helper::RemPio2F32 => &[Helper::TwoOverPi, Helper::AbsF32, Helper::SelF32],
            Helper::RemPio2F64 => &[Helper::TwoOverPi, Helper::AbsF64, Helper::SelF64],
            Helper::SinF32 | Helper::CosF32 | Helper::TanF32 => &[Helper::RemPio2F32],
            Helper::SinPiPolyF32 => &[],
            Helper::SinFastF32 => &[
                Helper::SinPiPolyF32,
                Helper::SinF32,
                Helper::AbsF32,
                Helper::SelF32,
            ],
            Helper::CosFastF32 => &[Helper::SinPiPolyF32, Helper::CosF32, Helper::AbsF32],
            Helper::SinF64 | Helper::CosF64 | Helper::TanF64 => &[Helper::RemPio2F64],
            Helper::FmodF32 => &[Helper::F32Bits],
            Helper::FmodF64 => &[Helper::F64Bits],
            Helper::Log2F32 | Helper::AtanNonnegF32 => &[Helper::SelF32],
            Helper::Log2F64 | Helper::AtanNonnegF64 => &[Helper::SelF64],
            Helper::AtanF32 | Helper::Atan2F32 => &[Helper::AtanNonnegF32, Helper::AbsF32],
            Helper::AtanF64 | Helper::Atan2F64 => &[Helper::AtanNonnegF64, Helper::AbsF64],
            Helper::AsinCoreF32 => &[Helper::SqrtF32, Helper::AbsF32, Helper::SelF32],
            Helper::AsinCoreF64 => &[Helper::SqrtF64, Helper::AbsF64, Helper::SelF64],
            Helper::AsinF32 | Helper::AcosF32 => &[Helper::AsinCoreF32],
            Helper::AsinF64 | Helper::AcosF64 => &[Helper::AsinCoreF64],
            Helper::ErfF32 => &[Helper::ExpF32, Helper::AbsF32, Helper::SelF32],
            Helper::ErfF64 => &[Helper::ExpF64, Helper::AbsF64, Helper::SelF64],
            Helper::PowF32 => &[Helper::Exp2F32, Helper::Log2F32, Helper::AbsF32],
            Helper::PowF64 => &[Helper::Exp2F64, Helper::Log2F64, Helper::AbsF64],
            Helper::SelF32 => &[Helper::F32Bits],
            Helper::SelF64 => &[Helper::F64Bits],
            _ => &[],
        }
    }

    /// The helper's C text (`P_` still to be replaced).
    pub(crate) fn source(self) -> String {
        match self {
            Helper::TanhF32 => {
                // Cephes tanhf.c's polynomial, from the table the other code generators read,
                // each coefficient rounded to f32 as the CPU backend's constants are.
                let mut text = String::from(concat!(
                    "/* tanh: x + x z P(z), z = x^2, for |x| < 0.625 (Cephes tanhf.c); above,\n",
                    "   1 - 2 / (e^(2|x|) + 1) with the sign of x. Straight-line: both are computed and\n",
                    "   selected on bit patterns (x == 0 last, keeping its sign). */\n",
                    "static inline float P_tanh_f32(float x) {\n",
                    "  float ax = P_abs_f32(x), z = x * x, p, e, big, small;\n",
                ));
                let coeffs = rfx_lower::coefficients::TANH_F32;
                let mut first = true;
                for &c in coeffs.iter().rev() {
                    let c = c as f32;
                    if first {
                        text.push_str(&format!("  p = {c:?}f;\n"));
                        first = false;
                    } else {
                        text.push_str(&format!("  p = {c:?}f + p * z;\n"));
                    }
                }
                text.push_str(concat!(
                    "  small = x + x * (z * p);\n",
                    "  e = P_exp_f32(ax + ax);\n",
                    "  big = 1.0f - 2.0f / (e + 1.0f);\n",
                    "  big = P_sel_f32(x < 0.0f, -big, big);\n",
                    "  return P_sel_f32(x == 0.0f, x, P_sel_f32(ax < 0.625f, small, big));\n",
                    "}"
                ));
                text
            }
            other => other.template().to_string(),
        }
    }

    fn template(self) -> &'static str {
        match self {
            Helper::TanhF32 => "",
            Helper::TanhF64 => concat!(
                "/* tanh: x + x z P(z) / Q(z), z = x^2, for |x| < 0.625 (Cephes tanh.c); above,\n",
                "   1 - 2 / (e^(2|x|) + 1) with the sign of x; straight-line as in f32. */\n",
                "static inline double P_tanh_f64(double x) {\n",
                "  double ax = P_abs_f64(x), z = x * x, p, q, e, big, small;\n",
                "  p = -9.64399179425052238628e-1;\n",
                "  p = -9.92877231001918586564e1 + p * z;\n",
                "  p = -1.61468768441708447952e3 + p * z;\n",
                "  q = 1.0;\n",
                "  q = 1.12811678491632931402e2 + q * z;\n",
                "  q = 2.23548839060100583483e3 + q * z;\n",
                "  q = 4.84406305325125486048e3 + q * z;\n",
                "  small = x + x * ((z * p) / q);\n",
                "  e = P_exp_f64(ax + ax);\n",
                "  big = 1.0 - 2.0 / (e + 1.0);\n",
                "  big = P_sel_f64(x < 0.0, -big, big);\n",
                "  return P_sel_f64(x == 0.0, x, P_sel_f64(ax < 0.625, small, big));\n",
                "}"
            ),
            Helper::F32Bits => concat!(
                "/* Bit casts through a union (defined behaviour in C99). */\n",
                "static inline float P_f32_from_bits(uint32_t u) { union { uint32_t u; float f; } v; v.u = u; return v.f; }\n",
                "static inline uint32_t P_f32_to_bits(float f) { union { uint32_t u; float f; } v; v.f = f; return v.u; }"
            ),
            Helper::F64Bits => concat!(
                "static inline double P_f64_from_bits(uint64_t u) { union { uint64_t u; double f; } v; v.u = u; return v.f; }\n",
                "static inline uint64_t P_f64_to_bits(double f) { union { uint64_t u; double f; } v; v.f = f; return v.u; }"
            ),
            Helper::AddI32 => {
                "static inline int32_t P_add_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }"
            }
            Helper::SubI32 => {
                "static inline int32_t P_sub_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }"
            }
            Helper::MulI32 => {
                "static inline int32_t P_mul_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }"
            }
            Helper::NegI32 => {
                "static inline int32_t P_neg_i32(int32_t a) { return (int32_t)(0u - (uint32_t)a); }"
            }
            Helper::AbsI32 => {
                "static inline int32_t P_abs_i32(int32_t a) { return a < 0 ? (int32_t)(0u - (uint32_t)a) : a; }"
            }
            Helper::DivI32 => concat!(
                "/* Floor division: x / 0 = 0, INT32_MIN / -1 wraps to INT32_MIN. */\n",
                "static inline int32_t P_div_i32(int32_t a, int32_t b) {\n",
                "  int32_t q, r;\n",
                "  if (b == 0) return 0;\n",
                "  if (b == -1) return (int32_t)(0u - (uint32_t)a);\n",
                "  q = a / b;\n",
                "  r = a % b;\n",
                "  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;\n",
                "}"
            ),
            Helper::FmodI32 => concat!(
                "/* Truncated remainder with the dividend's sign: x fmod 0 = 0, INT32_MIN fmod -1 = 0. */\n",
                "static inline int32_t P_fmod_i32(int32_t a, int32_t b) { return (b == 0 || b == -1) ? 0 : a % b; }"
            ),
            Helper::MinI32 => {
                "static inline int32_t P_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }"
            }
            Helper::MaxI32 => {
                "static inline int32_t P_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }"
            }
            Helper::SignI32 => {
                "static inline int32_t P_sign_i32(int32_t a) { return (int32_t)((a > 0) - (a < 0)); }"
            }
            Helper::AbsF32 => {
                "static inline float P_abs_f32(float x) { return P_f32_from_bits(P_f32_to_bits(x) & 0x7fffffffu); }"
            }
            Helper::AbsF64 => {
                "static inline double P_abs_f64(double x) { return P_f64_from_bits(P_f64_to_bits(x) & UINT64_C(0x7fffffffffffffff)); }"
            }
            Helper::MinF32 => concat!(
                "/* NumPy minimum/maximum: the first operand when it wins or is NaN, else the second. */\n",
                "static inline float P_min_f32(float a, float b) { return (a < b || a != a) ? a : b; }"
            ),
            Helper::MaxF32 => {
                "static inline float P_max_f32(float a, float b) { return (a > b || a != a) ? a : b; }"
            }
            Helper::MinF64 => {
                "static inline double P_min_f64(double a, double b) { return (a < b || a != a) ? a : b; }"
            }
            Helper::MaxF64 => {
                "static inline double P_max_f64(double a, double b) { return (a > b || a != a) ? a : b; }"
            }
            Helper::SignF32 => concat!(
                "/* sign(+-0) = +0, sign(NaN) = NaN. */\n",
                "static inline float P_sign_f32(float a) { return a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : (a == 0.0f ? 0.0f : a)); }"
            ),
            Helper::SignF64 => {
                "static inline double P_sign_f64(double a) { return a > 0.0 ? 1.0 : (a < 0.0 ? -1.0 : (a == 0.0 ? 0.0 : a)); }"
            }
            Helper::RoundF32 => concat!(
                "/* round (ties to even), floor and ceil without libm, exact, straight-line: below 2^23,\n",
                "   (|x| + 2^23) - 2^23 is |x| rounded to an integer, ties to even, and the sign goes back\n",
                "   on by its bit (-0.3 gives -0); larger magnitudes, Inf and NaN are their own rounding.\n",
                "   floor and ceil step the rounded value by one where it lies on the wrong side of x;\n",
                "   ceil puts x's sign bit on (ceil(-0.5) is -0, and a negative x has a result <= 0). */\n",
                "static inline float P_round_f32(float x) {\n",
                "  float a = P_abs_f32(x);\n",
                "  uint32_t sign = P_f32_to_bits(x) & 0x80000000u;\n",
                "  float t = P_f32_from_bits(P_f32_to_bits((a + 8388608.0f) - 8388608.0f) | sign);\n",
                "  return P_sel_f32(a < 8388608.0f, t, x);\n",
                "}"
            ),
            Helper::FloorF32 => concat!(
                "static inline float P_floor_f32(float x) {\n",
                "  float r = P_round_f32(x);\n",
                "  return P_sel_f32(r > x, r - 1.0f, r);\n",
                "}"
            ),
            Helper::CeilF32 => concat!(
                "static inline float P_ceil_f32(float x) {\n",
                "  float r = P_round_f32(x);\n",
                "  r = P_sel_f32(r < x, r + 1.0f, r);\n",
                "  return P_f32_from_bits(P_f32_to_bits(r) | (P_f32_to_bits(x) & 0x80000000u));\n",
                "}"
            ),
            Helper::RoundF64 => concat!(
                "/* As in f32, with 2^52. */\n",
                "static inline double P_round_f64(double x) {\n",
                "  double a = P_abs_f64(x);\n",
                "  uint64_t sign = P_f64_to_bits(x) & UINT64_C(0x8000000000000000);\n",
                "  double t = P_f64_from_bits(P_f64_to_bits((a + 4503599627370496.0) - 4503599627370496.0) | sign);\n",
                "  return P_sel_f64(a < 4503599627370496.0, t, x);\n",
                "}"
            ),
            Helper::FloorF64 => concat!(
                "static inline double P_floor_f64(double x) {\n",
                "  double r = P_round_f64(x);\n",
                "  return P_sel_f64(r > x, r - 1.0, r);\n",
                "}"
            ),
            Helper::CeilF64 => concat!(
                "static inline double P_ceil_f64(double x) {\n",
                "  double r = P_round_f64(x);\n",
                "  r = P_sel_f64(r < x, r + 1.0, r);\n",
                "  return P_f64_from_bits(P_f64_to_bits(r) | (P_f64_to_bits(x) & UINT64_C(0x8000000000000000)));\n",
                "}"
            ),
            Helper::F32ToI32 => concat!(
                "/* Truncates toward zero and saturates; NaN gives 0. */\n",
                "static inline int32_t P_f32_to_i32(float x) {\n",
                "  if (x != x) return 0;\n",
                "  if (x >= 2147483648.0f) return INT32_MAX;\n",
                "  if (x <= -2147483648.0f) return INT32_MIN;\n",
                "  return (int32_t)x;\n",
                "}"
            ),
            Helper::SqrtF64 => concat!(
                "/* Square root, correctly rounded: the hardware instruction through __builtin_sqrt, or,\n",
                "   on Arm targets without a double-precision FPU (or with RFX_SOFT_SQRT defined), an exact\n",
                "   digit-by-digit integer square root of the significand, so that libm is never called. */\n",
                "#if defined(RFX_SOFT_SQRT) || (defined(__arm__) && !(defined(__ARM_FP) && (__ARM_FP & 8)))\n",
                "static inline double P_sqrt_f64(double x) {\n",
                "  uint64_t bits = P_f64_to_bits(x), m, root = 0, rem = 0;\n",
                "  int32_t e = (int32_t)((bits >> 52) & 0x7ff), k;\n",
                "  if (x != x || x == 0.0 || e == 0x7ff) return (x < 0.0) ? (x - x) / (x - x) : x;\n",
                "  if (x < 0.0) return (x - x) / (x - x);\n",
                "  m = bits & ((UINT64_C(1) << 52) - 1u);\n",
                "  if (e == 0) {\n",
                "    e = 1;\n",
                "    while ((m & (UINT64_C(1) << 52)) == 0u) { m <<= 1; e = e - 1; }\n",
                "  } else {\n",
                "    m |= UINT64_C(1) << 52;\n",
                "  }\n",
                "  e = e - 1075; /* x = m * 2^e */\n",
                "  if (e & 1) { m <<= 1; e = e - 1; }\n",
                "  /* root = isqrt(m * 2^52), two radicand bits per step; rem < 2 root + 1 < 2^54. */\n",
                "  for (k = 52; k >= 0; --k) {\n",
                "    uint64_t pair = (k >= 26) ? ((m >> (2 * k - 52)) & 3u) : 0u;\n",
                "    uint64_t trial;\n",
                "    rem = (rem << 2) | pair;\n",
                "    root <<= 1;\n",
                "    trial = (root << 1) | 1u;\n",
                "    if (rem >= trial) { rem -= trial; root |= 1u; }\n",
                "  }\n",
                "  if (rem > root) root = root + 1u; /* nearest; a tie cannot happen */\n",
                "  return P_f64_from_bits(((uint64_t)((e - 52) / 2 + 1075) << 52) + (root - (UINT64_C(1) << 52)));\n",
                "}\n",
                "#else\n",
                "static inline double P_sqrt_f64(double x) { return __builtin_sqrt(x); }\n",
                "#endif"
            ),
            Helper::SqrtF32 => concat!(
                "/* f32: the hardware instruction, or (without a single-precision FPU, or with\n",
                "   RFX_SOFT_SQRT) the exact f64 root rounded once more, which is correctly rounded for\n",
                "   f32 because double carries more than 2 * 24 + 2 bits. */\n",
                "#if defined(RFX_SOFT_SQRT) || (defined(__arm__) && !(defined(__ARM_FP) && (__ARM_FP & 4)))\n",
                "static inline float P_sqrt_f32(float x) { return (float)P_sqrt_f64((double)x); }\n",
                "#else\n",
                "static inline float P_sqrt_f32(float x) { return __builtin_sqrtf(x); }\n",
                "#endif"
            ),
            Helper::LogF32 => concat!(
                "/* log(x) = k ln2_hi - ((hfsq - (s (hfsq + R(s^2)) + k ln2_lo)) - f) with x = 2^k (1 + f),\n",
                "   1 + f in [sqrt(1/2), sqrt(2)), s = f / (2 + f) (musl logf.c: Lg1..Lg4, two-part ln2);\n",
                "   subnormals are scaled by 2^25 first. Straight-line: the core runs on every x (integer\n",
                "   steps only on bit patterns, no UB), then NaN, 0, negatives and +Inf are selected. */\n",
                "static inline float P_log_f32(float x) {\n",
                "  int sub = x < 1.17549435e-38f;\n",
                "  float xs = P_sel_f32(sub, x * 33554432.0f, x), kadj = P_sel_f32(sub, -25.0f, 0.0f);\n",
                "  float k, f, hfsq, s, z, p, y;\n",
                "  uint32_t ix;\n",
                "  ix = P_f32_to_bits(xs) + (0x3f800000u - 0x3f3504f3u);\n",
                "  k = (float)((int32_t)(ix >> 23) - 127) + kadj;\n",
                "  f = P_f32_from_bits((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;\n",
                "  hfsq = (f * f) * 0.5f;\n",
                "  s = f / (f + 2.0f);\n",
                "  z = s * s;\n",
                "  p = 0.24279078841209412f;\n",
                "  p = 0.2849878668785095f + p * z;\n",
                "  p = 0.40000972151756287f + p * z;\n",
                "  p = 0.6666666269302368f + p * z;\n",
                "  y = k * 0.6931381225585938f - ((hfsq - (s * (hfsq + z * p) + k * 9.05800061445916e-06f)) - f);\n",
                "  y = P_sel_f32(x > 3.40282347e38f, x, y);\n",
                "  y = P_sel_f32(x < 0.0f, (x - x) / (x - x), y);\n",
                "  y = P_sel_f32(x == 0.0f, P_f32_from_bits(0xff800000u), y);\n",
                "  return P_sel_f32(x != x, x, y);\n",
                "}"
            ),
            Helper::LogF64 => concat!(
                "/* log as for f32 with fdlibm e_log.c's Lg1..Lg7 and two-part ln2; subnormals scaled by 2^54;\n",
                "   straight-line as in f32. */\n",
                "static inline double P_log_f64(double x) {\n",
                "  int sub = x < 2.2250738585072014e-308;\n",
                "  double xs = P_sel_f64(sub, x * 18014398509481984.0, x), kadj = P_sel_f64(sub, -54.0, 0.0);\n",
                "  double k, f, hfsq, s, z, p, y;\n",
                "  uint64_t ix;\n",
                "  ix = P_f64_to_bits(xs) + ((UINT64_C(0x3ff00000) - UINT64_C(0x3fe6a09e)) << 32);\n",
                "  k = (double)((int32_t)(ix >> 52) - 1023) + kadj;\n",
                "  f = P_f64_from_bits((ix & UINT64_C(0x000fffffffffffff)) + (UINT64_C(0x3fe6a09e) << 32)) - 1.0;\n",
                "  hfsq = (f * f) * 0.5;\n",
                "  s = f / (f + 2.0);\n",
                "  z = s * s;\n",
                "  p = 1.479819860511658591e-01;\n",
                "  p = 1.531383769920937332e-01 + p * z;\n",
                "  p = 1.818357216161805012e-01 + p * z;\n",
                "  p = 2.222219843214978396e-01 + p * z;\n",
                "  p = 2.857142874366239149e-01 + p * z;\n",
                "  p = 3.999999999940941908e-01 + p * z;\n",
                "  p = 6.666666666666735130e-01 + p * z;\n",
                "  y = k * 6.931471803691238165e-01 - ((hfsq - (s * (hfsq + z * p) + k * 1.908214929270587700e-10)) - f);\n",
                "  y = P_sel_f64(x > 1.7976931348623157e308, x, y);\n",
                "  y = P_sel_f64(x < 0.0, (x - x) / (x - x), y);\n",
                "  y = P_sel_f64(x == 0.0, P_f64_from_bits(UINT64_C(0xfff0000000000000)), y);\n",
                "  return P_sel_f64(x != x, x, y);\n",
                "}"
            ),
            Helper::ExpF32 => concat!(
                "/* e^x: x = n ln2 + r (Cody-Waite, Cephes expf's two-part ln2), e^x = 2^n e^r with\n",
                "   e^r = 1 + (r + r^2 P(r)) (Cephes expf minimax coefficients) and 2^n applied in two\n",
                "   exact power-of-two steps (gradual underflow rounds once). The clamps lie past the\n",
                "   overflow and underflow thresholds. */\n",
                "static inline float P_pow2_f32(int32_t n) { return P_f32_from_bits((uint32_t)(n + 127) << 23); }\n",
                "static inline float P_ldexp_f32(float p, float n) {\n",
                "  int32_t k = (int32_t)n;\n",
                "  /* floor(k / 2) by an unsigned shift (|k| < 512): no division, no signed shift. */\n",
                "  int32_t k1 = (int32_t)((uint32_t)(k + 512) >> 1) - 256;\n",
                "  return (p * P_pow2_f32(k1)) * P_pow2_f32(k - k1);\n",
                "}\n",
                "static inline float P_exp_poly_f32(float r) {\n",
                "  float p = 1.9875691500e-4f;\n",
                "  p = 1.3981999507e-3f + p * r;\n",
                "  p = 8.3334519073e-3f + p * r;\n",
                "  p = 4.1665795894e-2f + p * r;\n",
                "  p = 1.6666665459e-1f + p * r;\n",
                "  p = 5.0000001201e-1f + p * r;\n",
                "  return (r + (r * r) * p) + 1.0f;\n",
                "}\n",
                "/* Straight-line code: NaN is selected last (the core runs on the upper clamp), n is\n",
                "   rounded to nearest even by adding and subtracting 1.5 * 2^23 (|n| < 2^22), as\n",
                "   P_round_f32 would. */\n",
                "static inline float P_exp_f32(float x) {\n",
                "  float xc = P_sel_f32(!(x <= 89.0f), 89.0f, x), n, r;\n",
                "  xc = P_sel_f32(xc < -104.0f, -104.0f, xc);\n",
                "  n = (xc * 1.44269502f + 12582912.0f) - 12582912.0f;\n",
                "  r = (xc - n * 0.693359375f) - n * (-2.12194442e-4f);\n",
                "  return P_sel_f32(x != x, x + x, P_ldexp_f32(P_exp_poly_f32(r), n));\n",
                "}"
            ),
            Helper::Exp2F32 => concat!(
                "/* 2^x: x = n + r exactly, 2^r = e^(r ln2). */\n",
                "static inline float P_exp2_f32(float x) {\n",
                "  float xc = P_sel_f32(!(x <= 129.0f), 129.0f, x), n, r;\n",
                "  xc = P_sel_f32(xc < -152.0f, -152.0f, xc);\n",
                "  n = (xc + 12582912.0f) - 12582912.0f;\n",
                "  r = xc - n;\n",
                "  return P_sel_f32(x != x, x + x, P_ldexp_f32(P_exp_poly_f32(r * 0.693147182f), n));\n",
                "}"
            ),
            Helper::ExpF64 => concat!(
                "/* e^x as for f32, with fdlibm e_exp.c's two-part ln2 and the Taylor series of e^r to\n",
                "   r^13 (exact reciprocals of factorials). */\n",
                "static inline double P_pow2_f64(int32_t n) { return P_f64_from_bits((uint64_t)(n + 1023) << 52); }\n",
                "static inline double P_ldexp_f64(double p, double n) {\n",
                "  int32_t k = (int32_t)n;\n",
                "  /* floor(k / 2) by an unsigned shift (|k| < 4096). */\n",
                "  int32_t k1 = (int32_t)((uint32_t)(k + 4096) >> 1) - 2048;\n",
                "  return (p * P_pow2_f64(k1)) * P_pow2_f64(k - k1);\n",
                "}\n",
                "static inline double P_exp_poly_f64(double r) {\n",
                "  static const double c[12] = {\n",
                "    0.5, 0.16666666666666666, 0.041666666666666664, 0.008333333333333333,\n",
                "    0.001388888888888889, 0.0001984126984126984, 2.48015873015873e-5, 2.7557319223985893e-6,\n",
                "    2.755731922398589e-7, 2.505210838544172e-8, 2.08767569878681e-9, 1.6059043836821613e-10 };\n",
                "  double p = c[11];\n",
                "  int i;\n",
                "  for (i = 10; i >= 0; --i) p = c[i] + p * r;\n",
                "  return (r + (r * r) * p) + 1.0;\n",
                "}\n",
                "static inline double P_exp_f64(double x) {\n",
                "  double xc = P_sel_f64(!(x <= 710.0), 710.0, x), n, r;\n",
                "  xc = P_sel_f64(xc < -746.0, -746.0, xc);\n",
                "  n = (xc * 1.4426950408889634 + 6755399441055744.0) - 6755399441055744.0;\n",
                "  r = (xc - n * 0.6931471803691238) - n * 1.9082149292705877e-10;\n",
                "  return P_sel_f64(x != x, x + x, P_ldexp_f64(P_exp_poly_f64(r), n));\n",
                "}"
            ),
            Helper::Exp2F64 => concat!(
                "static inline double P_exp2_f64(double x) {\n",
                "  double xc = P_sel_f64(!(x <= 1025.0), 1025.0, x), n, r;\n",
                "  xc = P_sel_f64(xc < -1080.0, -1080.0, xc);\n",
                "  n = (xc + 6755399441055744.0) - 6755399441055744.0;\n",
                "  r = xc - n;\n",
                "  return P_sel_f64(x != x, x + x, P_ldexp_f64(P_exp_poly_f64(r * 0.6931471805599453), n));\n",
                "}"
            ),
            Helper::SigmoidF32 => concat!(
                "/* sigmoid(x) = e / (1 + e) below 0 and 1 / (1 + e) above, e = exp(-|x|). */\n",
                "static inline float P_sigmoid_f32(float x) {\n",
                "  float e = P_exp_f32(-P_abs_f32(x));\n",
                "  return (x < 0.0f ? e : 1.0f) / (e + 1.0f);\n",
                "}"
            ),
            Helper::SigmoidF64 => concat!(
                "static inline double P_sigmoid_f64(double x) {\n",
                "  double e = P_exp_f64(-P_abs_f64(x));\n",
                "  return (x < 0.0 ? e : 1.0) / (e + 1.0);\n",
                "}"
            ),
            Helper::TwoOverPi => trig::TWO_OVER_PI,
            Helper::RemPio2F32 => trig::REM_PIO2_F32,
            Helper::SinF32 => trig::SIN_F32,
            Helper::CosF32 => trig::COS_F32,
            Helper::SinPiPolyF32 => trig::SIN_PI_POLY_F32,
            Helper::SinFastF32 => trig::SIN_FAST_F32,
            Helper::CosFastF32 => trig::COS_FAST_F32,
            Helper::TanF32 => trig::TAN_F32,
            Helper::RemPio2F64 => trig::REM_PIO2_F64,
            Helper::SinF64 => trig::SIN_F64,
            Helper::CosF64 => trig::COS_F64,
            Helper::TanF64 => trig::TAN_F64,
            Helper::FmodF32 => fmod::FMOD_F32,
            Helper::FmodF64 => fmod::FMOD_F64,
            Helper::Log2F32 => log2_erf::LOG2_F32,
            Helper::Log2F64 => log2_erf::LOG2_F64,
            Helper::AtanNonnegF32 => inverse_trig::ATAN_NONNEG_F32,
            Helper::AtanF32 => inverse_trig::ATAN_F32,
            Helper::AtanNonnegF64 => inverse_trig::ATAN_NONNEG_F64,
            Helper::AtanF64 => inverse_trig::ATAN_F64,
            Helper::Atan2F32 => inverse_trig::ATAN2_F32,
            Helper::Atan2F64 => inverse_trig::ATAN2_F64,
            Helper::AsinCoreF32 => inverse_trig::ASIN_CORE_F32,
            Helper::AsinF32 => inverse_trig::ASIN_F32,
            Helper::AcosF32 => inverse_trig::ACOS_F32,
            Helper::AsinCoreF64 => inverse_trig::ASIN_CORE_F64,
            Helper::AsinF64 => inverse_trig::ASIN_F64,
            Helper::AcosF64 => inverse_trig::ACOS_F64,
            Helper::ErfF32 => log2_erf::ERF_F32,
            Helper::ErfF64 => log2_erf::ERF_F64,
            Helper::PowF32 => pow::POW_F32,
            Helper::PowF64 => pow::POW_F64,
            Helper::SelF32 => concat!(
                "/* c ? a : b on the bit patterns: both values are computed, so the compiler has no\n",
                "   branch to sink their arithmetic into (floating-point arithmetic in a branch keeps GCC\n",
                "   from if-converting, and so from vectorising, a loop without masked vector\n",
                "   instructions, e.g. for AVX2). */\n",
                "static inline float P_sel_f32(int c, float a, float b) {\n",
                "  uint32_t mask = 0u - (uint32_t)(c != 0);\n",
                "  return P_f32_from_bits((P_f32_to_bits(a) & mask) | (P_f32_to_bits(b) & ~mask));\n",
                "}"
            ),
            Helper::SelF64 => concat!(
                "static inline double P_sel_f64(int c, double a, double b) {\n",
                "  uint64_t mask = UINT64_C(0) - (uint64_t)(c != 0);\n",
                "  return P_f64_from_bits((P_f64_to_bits(a) & mask) | (P_f64_to_bits(b) & ~mask));\n",
                "}"
            ),
            Helper::F64ToI32 => concat!(
                "static inline int32_t P_f64_to_i32(double x) {\n",
                "  if (x != x) return 0;\n",
                "  if (x >= 2147483648.0) return INT32_MAX;\n",
                "  if (x <= -2147483648.0) return INT32_MIN;\n",
                "  return (int32_t)x;\n",
                "}"
            ),
        }
    }
}
