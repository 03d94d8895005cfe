//! `atan`, `atan2`, `asin` and `acos`: the CPU backend's Cephes (f32) and Cephes/fdlibm (f64)
//! approximations, as straight-line code with selects.

pub(super) const ATAN_NONNEG_F32: &str = r#"/* atan(|x|), Cephes atanf.c: t = -1/|x| above tan(3pi/8) (offset pi/2), (|x|-1)/(|x|+1) above
   tan(pi/8) (offset pi/4), else |x|; atan = offset + (t + (t z P(z) + offset_lo)), z = t^2.
   NaN falls through every comparison and stays NaN. */
static inline float P_atan_nonneg_f32(float ax) {
  int big = ax > 2.41421366f, mid = ax > 0.414213568f;
  float t = P_sel_f32(big, -1.0f / ax, P_sel_f32(mid, (ax - 1.0f) / (ax + 1.0f), ax));
  float y0 = big ? 1.57079637f : (mid ? 0.785398185f : 0.0f);
  float ylo = big ? -4.37113883e-8f : (mid ? -2.18556941e-8f : 0.0f);
  float z = t * t, p;
  p = 0.0805374458f;
  p = -0.138776854f + p * z;
  p = 0.199777111f + p * z;
  p = -0.333329499f + p * z;
  return y0 + (t + (t * (z * p) + ylo));
}"#;

pub(super) const ATAN_F32: &str = r#"static inline float P_atan_f32(float x) {
  return P_f32_from_bits(P_f32_to_bits(P_atan_nonneg_f32(P_abs_f32(x))) | (P_f32_to_bits(x) & 0x80000000u));
}"#;

pub(super) const ATAN_NONNEG_F64: &str = r#"/* atan(|x|), Cephes atan.c: as for f32 with the middle range from 0.66 and
   t + t z P(z) / Q(z). */
static inline double P_atan_nonneg_f64(double ax) {
  int big = ax > 2.41421356237309504880, mid = ax > 0.66;
  double t = P_sel_f64(big, -1.0 / ax, P_sel_f64(mid, (ax - 1.0) / (ax + 1.0), ax));
  double y0 = big ? 1.5707963267948966 : (mid ? 0.7853981633974483 : 0.0);
  double ylo = big ? 6.123233995736766e-17 : (mid ? 3.061616997868383e-17 : 0.0);
  double z = t * t, p, q;
  p = -8.750608600031904122785e-1;
  p = -1.615753718733365076637e1 + p * z;
  p = -7.500855792314704667340e1 + p * z;
  p = -1.228866684490136173410e2 + p * z;
  p = -6.485021904942025371773e1 + p * z;
  q = 1.0;
  q = 2.485846490142306297962e1 + q * z;
  q = 1.650270098316988542046e2 + q * z;
  q = 4.328810604912902668951e2 + q * z;
  q = 4.853903996359136964868e2 + q * z;
  q = 1.945506571482613964425e2 + q * z;
  return y0 + (t + (t * ((z * p) / q) + ylo));
}"#;

pub(super) const ATAN_F64: &str = r#"static inline double P_atan_f64(double x) {
  return P_f64_from_bits(P_f64_to_bits(P_atan_nonneg_f64(P_abs_f64(x))) | (P_f64_to_bits(x) & (UINT64_C(1) << 63)));
}"#;

pub(super) const ATAN2_F32: &str = r#"/* atan2(y, x) with C99's special values: atan(min/max) of the magnitudes (0/0 -> 0,
   Inf/Inf -> 1, NaN kept), reflected about pi/4 when |y| > |x| and about pi/2 when x is
   negative or -0, summed as offset + (+-t + offset_lo), signed by y; NaN if either is. */
static inline float P_atan2_f32(float y, float x) {
  float ax = P_abs_f32(x), ay = P_abs_f32(y);
  float mx = ax > ay ? ax : ay, mn = ax > ay ? ay : ax, ratio = mn / mx, t, off, off_lo, res;
  int swap = ay > ax, xneg = (P_f32_to_bits(x) >> 31) != 0u;
  ratio = P_sel_f32(mx == 0.0f, 0.0f, ratio);
  ratio = P_sel_f32(mn == P_f32_from_bits(0x7f800000u), 1.0f, ratio);
  t = P_atan_nonneg_f32(ratio);
  off = swap ? 1.57079637f : (xneg ? 3.14159274f : 0.0f);
  off_lo = swap ? -4.37113883e-8f : (xneg ? -8.74227766e-8f : 0.0f);
  t = P_f32_from_bits(P_f32_to_bits(t) ^ ((uint32_t)(swap != xneg) << 31));
  res = off + (t + off_lo);
  res = P_f32_from_bits((P_f32_to_bits(res) & 0x7fffffffu) | (P_f32_to_bits(y) & 0x80000000u));
  return P_sel_f32(x != x || y != y, x + y, res);
}"#;

pub(super) const ATAN2_F64: &str = r#"static inline double P_atan2_f64(double y, double x) {
  double ax = P_abs_f64(x), ay = P_abs_f64(y);
  double mx = ax > ay ? ax : ay, mn = ax > ay ? ay : ax, ratio = mn / mx, t, off, off_lo, res;
  int swap = ay > ax, xneg = (P_f64_to_bits(x) >> 63) != 0u;
  ratio = P_sel_f64(mx == 0.0, 0.0, ratio);
  ratio = P_sel_f64(mn == P_f64_from_bits(UINT64_C(0x7ff0000000000000)), 1.0, ratio);
  t = P_atan_nonneg_f64(ratio);
  off = swap ? 1.5707963267948966 : (xneg ? 3.141592653589793 : 0.0);
  off_lo = swap ? 6.123233995736766e-17 : (xneg ? 1.2246467991473532e-16 : 0.0);
  t = P_f64_from_bits(P_f64_to_bits(t) ^ ((uint64_t)(swap != xneg) << 63));
  res = off + (t + off_lo);
  res = P_f64_from_bits((P_f64_to_bits(res) & UINT64_C(0x7fffffffffffffff)) | (P_f64_to_bits(y) & (UINT64_C(1) << 63)));
  return P_sel_f64(x != x || y != y, x + y, res);
}"#;

pub(super) const ASIN_CORE_F32: &str = r#"/* asin and acos: for |x| <= 1/2 the core t + t z R(z) on t = x, z = x^2 (Cephes asinf.c's
   polynomial), else on t = sqrt((1 - |x|)/2), z = t^2 (NaN for |x| > 1), with
   asin x = +-(pi/2 - 2 core), acos x = 2 core or pi - 2 core. */
static inline float P_asin_core_f32(float x, int *small) {
  float ax = P_abs_f32(x), zb = (1.0f - ax) * 0.5f, t, z, p;
  *small = ax <= 0.5f;
  t = P_sel_f32(*small, x, P_sqrt_f32(zb));
  z = P_sel_f32(*small, x * x, zb);
  p = 0.0421632007f;
  p = 0.0241813120f + p * z;
  p = 0.0454700254f + p * z;
  p = 0.0749530047f + p * z;
  p = 0.166667521f + p * z;
  return t + t * (z * p);
}"#;

pub(super) const ASIN_F32: &str = r#"static inline float P_asin_f32(float x) {
  int small;
  float core = P_asin_core_f32(x, &small);
  float big = 1.57079637f - ((core + core) - -4.37113883e-8f);
  big = P_f32_from_bits((P_f32_to_bits(big) & 0x7fffffffu) | (P_f32_to_bits(x) & 0x80000000u));
  return P_sel_f32(small, core, big);
}"#;

pub(super) const ACOS_F32: &str = r#"static inline float P_acos_f32(float x) {
  int small;
  float core = P_asin_core_f32(x, &small);
  float mid = 1.57079637f - (core - -4.37113883e-8f);
  float two = core + core;
  float big = P_sel_f32(x < 0.0f, 3.14159274f - (two - -8.74227766e-8f), two);
  return P_sel_f32(small, mid, big);
}"#;

pub(super) const ASIN_CORE_F64: &str = r#"/* asin and acos as for f32 with fdlibm e_asin.c's rational pS/qS. */
static inline double P_asin_core_f64(double x, int *small) {
  double ax = P_abs_f64(x), zb = (1.0 - ax) * 0.5, t, z, p, q;
  *small = ax <= 0.5;
  t = P_sel_f64(*small, x, P_sqrt_f64(zb));
  z = P_sel_f64(*small, x * x, zb);
  p = 3.47933107596021167570e-05;
  p = 7.91534994289814532176e-04 + p * z;
  p = -4.00555345006794114027e-02 + p * z;
  p = 2.01212532134862925881e-01 + p * z;
  p = -3.25565818622400915405e-01 + p * z;
  p = 1.66666666666666657415e-01 + p * z;
  q = 7.70381505559019352791e-02;
  q = -6.88283971605453293030e-01 + q * z;
  q = 2.02094576023350569471e+00 + q * z;
  q = -2.40339491173441421878e+00 + q * z;
  q = 1.0 + q * z;
  return t + t * ((z * p) / q);
}"#;

pub(super) const ASIN_F64: &str = r#"static inline double P_asin_f64(double x) {
  int small;
  double core = P_asin_core_f64(x, &small);
  double big = 1.5707963267948966 - ((core + core) - 6.123233995736766e-17);
  big = P_f64_from_bits((P_f64_to_bits(big) & UINT64_C(0x7fffffffffffffff)) | (P_f64_to_bits(x) & (UINT64_C(1) << 63)));
  return P_sel_f64(small, core, big);
}"#;

pub(super) const ACOS_F64: &str = r#"static inline double P_acos_f64(double x) {
  int small;
  double core = P_asin_core_f64(x, &small);
  double mid = 1.5707963267948966 - (core - 6.123233995736766e-17);
  double two = core + core;
  double big = P_sel_f64(x < 0.0, 3.141592653589793 - (two - 1.2246467991473532e-16), two);
  return P_sel_f64(small, mid, big);
}"#;
