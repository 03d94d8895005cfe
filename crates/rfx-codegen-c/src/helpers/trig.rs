//! Sine, cosine and tangent: exact argument reduction (Payne-Hanek in integer arithmetic for
//! every finite argument, fdlibm's three-part Cody-Waite for moderate f64 ones) and the Cephes
//! (f32) and fdlibm (f64) kernels. The f32 code uses no `double`.

pub(super) const TWO_OVER_PI: &str = r#"/* 2/pi for Payne-Hanek reduction: word k + 2 holds bits [32k, 32k + 32) of its binary fraction
   (most significant first), after two zero words that let a window start before the point.
   Windows start at bit t of the table with 0 <= t <= 1034 (f64) or 167 (f32, both at Inf and
   NaN), and read at most seven words from word t / 32. */
static const uint32_t P_two_over_pi[44] = {
  0x00000000u, 0x00000000u, 0xa2f9836eu, 0x4e441529u,
  0xfc2757d1u, 0xf534ddc0u, 0xdb629599u, 0x3c439041u,
  0xfe5163abu, 0xdebbc561u, 0xb7246e3au, 0x424dd2e0u,
  0x06492eeau, 0x09d1921cu, 0xfe1deb1cu, 0xb129a73eu,
  0xe88235f5u, 0x2ebb4484u, 0xe99c7026u, 0xb45f7e41u,
  0x3991d639u, 0x835339f4u, 0x9c845f8bu, 0xbdf9283bu,
  0x1ff897ffu, 0xde05980fu, 0xef2f118bu, 0x5a0a6d1fu,
  0x6d367ecfu, 0x27cb09b7u, 0x4f463f66u, 0x9e5fea2du,
  0x7527bac7u, 0xebe5f17bu, 0x3d0739f7u, 0x8a5292eau,
  0x6bfb5fb1u, 0x1f8d5d08u, 0x56033046u, 0xfc7b6babu,
  0xf0cfbc20u, 0x9af4361du, 0xa9e39161u, 0x5ee61b08u
};"#;

pub(super) const REM_PIO2_F32: &str = r#"/* Payne-Hanek in integers, f32: |x| = n pi/2 + r with |r| <= pi/4, for finite |x| >= 2^-10.
   With x = m 2^E (m < 2^24), the 96 bits of 2/pi from weight 2^(2-E) down make m times them
   (mod 4) the quadrant in bits 95..94 and 94 fraction bits; the bits above weigh multiples of
   4 and the table's tail less than 2^-70 quadrants. The top 64 bits are kept: 62 fraction
   bits, of which at most 29 cancel (the closest f32 to a multiple of pi/2). The fraction goes
   to float through 23-bit pieces written as float bit patterns: no double, and no integer
   conversion instruction (which gcc would not if-convert). */
static inline float P_rem_pio2_f32(float x, uint32_t *quadrant) {
  uint32_t ix = P_f32_to_bits(x) & 0x7fffffffu;
  uint32_t m = (ix & 0x007fffffu) | 0x00800000u;
  int32_t t = (int32_t)(ix >> 23) - 127 - 23 - 2 + 64;
  uint32_t sh, a0, a1, a2, a3, w0, w1, w2;
  uint64_t hi, n;
  int64_t f;
  uint64_t uf;
  int sf;
  float fh, fl, c2, c1, c0;
  t = t < 0 ? 0 : t;
  /* The 96-bit window at bit t from four table words. */
  sh = (uint32_t)t & 31u;
  a0 = P_two_over_pi[t >> 5];
  a1 = P_two_over_pi[(t >> 5) + 1];
  a2 = P_two_over_pi[(t >> 5) + 2];
  a3 = P_two_over_pi[(t >> 5) + 3];
  w0 = (a0 << sh) | ((a1 >> 1) >> (31u - sh));
  w1 = (a1 << sh) | ((a2 >> 1) >> (31u - sh));
  w2 = (a2 << sh) | ((a3 >> 1) >> (31u - sh));
  hi = ((uint64_t)(m * w0) << 32) + (uint64_t)m * w1 + (((uint64_t)m * w2) >> 32);
  n = (hi + (UINT64_C(1) << 61)) >> 62;
  f = (int64_t)(hi - (n << 62));
  /* |f| < 2^61 to float without an integer conversion instruction: 23-bit chunks as float bits. */
  sf = f < 0;
  uf = sf ? 0u - (uint64_t)f : (uint64_t)f;
  c2 = P_f32_from_bits(0x4b000000u | (uint32_t)(uf >> 46)) - 8388608.0f;
  c1 = P_f32_from_bits(0x4b000000u | ((uint32_t)(uf >> 23) & 0x7fffffu)) - 8388608.0f;
  c0 = P_f32_from_bits(0x4b000000u | ((uint32_t)uf & 0x7fffffu)) - 8388608.0f;
  fh = c2 * 70368744177664.0f;
  fl = c1 * 8388608.0f + c0;
  fh = P_f32_from_bits(P_f32_to_bits(fh) ^ ((uint32_t)sf << 31));
  fl = P_f32_from_bits(P_f32_to_bits(fl) ^ ((uint32_t)sf << 31));
  *quadrant = (uint32_t)n;
  return fh * 3.40612167e-19f + (fl * 3.40612167e-19f + (fh + fl) * -9.47839643e-27f);
}
/* Cephes sinf.c / cosf.c polynomials on [-pi/4, pi/4]; cos summed as w + ((1 - w) - z/2 +
   z^2 P) (fdlibm's order) so that the rounding of 1 - z/2 is recovered. */
static inline float P_sin_kernel_f32(float x) {
  float z = x * x, p;
  p = -1.9515295891e-4f;
  p = 8.3321608736e-3f + p * z;
  p = -1.6666654611e-1f + p * z;
  return x + (z * x) * p;
}
static inline float P_cos_kernel_f32(float x) {
  float z = x * x, p, hz, w;
  p = 2.443315711809948e-5f;
  p = -1.388731625493765e-3f + p * z;
  p = 4.166664568298827e-2f + p * z;
  hz = z * 0.5f;
  w = 1.0f - hz;
  return w + (((1.0f - w) - hz) + (z * z) * p);
}
/* x = q pi/2 + r (q mod 4): r = x below pi/4, Payne-Hanek above; straight-line code with
   selects, so that loops calling it vectorise. */
static inline float P_reduce_f32(float x, uint32_t *q) {
  uint32_t sign = P_f32_to_bits(x) >> 31, n;
  float ax = P_abs_f32(x), r;
  int small = ax < 0.785398163f;
  r = P_rem_pio2_f32(x, &n);
  r = P_sel_f32(small, ax, r);
  n = small ? 0u : n;
  *q = sign ? 0u - n : n;
  return P_f32_from_bits(P_f32_to_bits(r) ^ (sign << 31));
}"#;

pub(super) const SIN_F32: &str = r#"static inline float P_sin_f32(float x) {
  uint32_t q;
  float r = P_reduce_f32(x, &q), s = P_sin_kernel_f32(r), c = P_cos_kernel_f32(r), res;
  res = P_sel_f32(q & 1u, c, s);
  res = P_f32_from_bits(P_f32_to_bits(res) ^ ((q & 2u) << 30));
  res = P_sel_f32(x == 0.0f, x, res);
  return P_sel_f32(P_abs_f32(x) <= 3.40282347e38f, res, x - x);
}"#;

pub(super) const COS_F32: &str = r#"static inline float P_cos_f32(float x) {
  uint32_t q;
  float r = P_reduce_f32(x, &q), s = P_sin_kernel_f32(r), c = P_cos_kernel_f32(r), res;
  res = P_sel_f32(q & 1u, s, c);
  res = P_f32_from_bits(P_f32_to_bits(res) ^ (((q + 1u) & 2u) << 30));
  return P_sel_f32(P_abs_f32(x) <= 3.40282347e38f, res, x - x);
}"#;

pub(super) const TAN_F32: &str = r#"static inline float P_tan_f32(float x) {
  uint32_t q;
  float r = P_reduce_f32(x, &q), s = P_sin_kernel_f32(r), c = P_cos_kernel_f32(r), res;
  res = P_sel_f32(q & 1u, -c, s) / P_sel_f32(q & 1u, s, c);
  res = P_sel_f32(x == 0.0f, x, res);
  return P_sel_f32(P_abs_f32(x) <= 3.40282347e38f, res, x - x);
}"#;

pub(super) const REM_PIO2_F64: &str = r#"/* Payne-Hanek in integers, f64, for finite |x| >= 2^-10: x = m 2^E (m < 2^53) times the 192
   bits of 2/pi from weight 2^(2-E) down, in 32-bit limbs; bits 191..190 of the product are the
   quadrant (mod 4), bits 189..64 the fraction (at most 61 of them cancel; the table's tail is
   below 2^-137 quadrants). The fraction goes to a double pair through exact 32-bit pieces and
   is multiplied by pi/2 2^-62 in double-double (Veltkamp's split). */
static inline double P_rem_pio2_big_f64(double x, double *tail, uint32_t *quadrant) {
  uint64_t ix = P_f64_to_bits(x) & UINT64_C(0x7fffffffffffffff);
  uint64_t m = (ix & UINT64_C(0x000fffffffffffff)) | (UINT64_C(1) << 52);
  uint64_t ml = m & 0xffffffffu, mh = m >> 32, acc, hi, lo, n, pl0, pl1, pl2, pl3, pl4, pl5, ph0, ph1, ph2, ph3, ph4;
  int32_t t = (int32_t)(ix >> 52) - 1023 - 52 - 2 + 64, k;
  uint32_t sb, a0, a1, a2, a3, a4, a5, a6, w0, w1, w2, w3, w4, w5;
  int64_t h;
  uint64_t uh;
  int sh;
  uint32_t l2, l3, l4;
  double a, b, vh, vl, s, c, vhh, vhl, p, err, y0, y1;
  t = t < 0 ? 0 : t;
  /* The 192-bit window at bit t, w0 (most significant) .. w5, from seven table words. */
  sb = (uint32_t)t & 31u;
  k = t >> 5;
  a0 = P_two_over_pi[k];
  a1 = P_two_over_pi[k + 1];
  a2 = P_two_over_pi[k + 2];
  a3 = P_two_over_pi[k + 3];
  a4 = P_two_over_pi[k + 4];
  a5 = P_two_over_pi[k + 5];
  a6 = P_two_over_pi[k + 6];
  w0 = (a0 << sb) | ((a1 >> 1) >> (31u - sb));
  w1 = (a1 << sb) | ((a2 >> 1) >> (31u - sb));
  w2 = (a2 << sb) | ((a3 >> 1) >> (31u - sb));
  w3 = (a3 << sb) | ((a4 >> 1) >> (31u - sb));
  w4 = (a4 << sb) | ((a5 >> 1) >> (31u - sb));
  w5 = (a5 << sb) | ((a6 >> 1) >> (31u - sb));
  pl0 = ml * w5; ph0 = mh * w5;
  pl1 = ml * w4; ph1 = mh * w4;
  pl2 = ml * w3; ph2 = mh * w3;
  pl3 = ml * w2; ph3 = mh * w2;
  pl4 = ml * w1; ph4 = mh * w1;
  pl5 = ml * w0;
  /* limbs 0..5 of m * window; limb i gathers lo(pl_i), hi(pl_{i-1}), lo(ph_{i-1}), hi(ph_{i-2}) */
  acc = (pl0 >> 32) + (pl1 & 0xffffffffu) + (ph0 & 0xffffffffu);
  acc = (acc >> 32) + (pl1 >> 32) + (pl2 & 0xffffffffu) + (ph1 & 0xffffffffu) + (ph0 >> 32);
  l2 = (uint32_t)acc;
  acc = (acc >> 32) + (pl2 >> 32) + (pl3 & 0xffffffffu) + (ph2 & 0xffffffffu) + (ph1 >> 32);
  l3 = (uint32_t)acc;
  acc = (acc >> 32) + (pl3 >> 32) + (pl4 & 0xffffffffu) + (ph3 & 0xffffffffu) + (ph2 >> 32);
  l4 = (uint32_t)acc;
  acc = (acc >> 32) + (pl4 >> 32) + (pl5 & 0xffffffffu) + (ph4 & 0xffffffffu) + (ph3 >> 32);
  hi = (acc << 32) | l4;
  lo = ((uint64_t)l3 << 32) | l2;
  n = (hi + (UINT64_C(1) << 61)) >> 62;
  h = (int64_t)(hi - (n << 62));
  /* |h| < 2^61 and the low word to double through exact 32-bit pieces (bit patterns, no
     conversion instruction, which would keep gcc from if-converting the loop). */
  sh = h < 0;
  uh = sh ? 0u - (uint64_t)h : (uint64_t)h;
  a = (P_f64_from_bits(UINT64_C(0x4330000000000000) | (uh >> 32)) - 4503599627370496.0) * 4294967296.0;
  b = P_f64_from_bits(UINT64_C(0x4330000000000000) | (uh & 0xffffffffu)) - 4503599627370496.0;
  vh = a + b;
  vl = b - (vh - a);
  vh = P_f64_from_bits(P_f64_to_bits(vh) ^ ((uint64_t)sh << 63));
  vl = P_f64_from_bits(P_f64_to_bits(vl) ^ ((uint64_t)sh << 63));
  vl = vl + ((P_f64_from_bits(UINT64_C(0x4330000000000000) | (lo >> 32)) - 4503599627370496.0) * 2.3283064365386963e-10
             + (P_f64_from_bits(UINT64_C(0x4330000000000000) | (lo & 0xffffffffu)) - 4503599627370496.0) * 5.421010862427522e-20);
  s = vh + vl;
  vl = vl - (s - vh);
  vh = s;
  /* (vh + vl) (c1 + c2), c1 = pi 2^-63 split in halves for an exact vh c1 */
  c = 134217729.0 * vh;
  vhh = c - (c - vh);
  vhl = vh - vhh;
  p = vh * 3.4061215800865545e-19;
  err = ((vhh * 3.406121610247037e-19 - p) + vhh * -3.016048278183199e-27 + vhl * 3.406121610247037e-19) + vhl * -3.016048278183199e-27;
  err = err + (vh * 1.3277647201629795e-35 + vl * 3.4061215800865545e-19);
  y0 = p + err;
  y1 = (p - y0) + err;
  *tail = y1;
  *quadrant = (uint32_t)n;
  return y0;
}
/* fdlibm __kernel_sin and __kernel_cos on [-pi/4, pi/4] with tail y. */
static inline double P_sin_kernel_f64(double x, double y) {
  double z = x * x, v = z * x, r;
  r = 1.58969099521155010221e-10;
  r = -2.50507602534068634195e-08 + r * z;
  r = 2.75573137070700676789e-06 + r * z;
  r = -1.98412698298579493134e-04 + r * z;
  r = 8.33333333332248946124e-03 + r * z;
  return x - ((z * (0.5 * y - v * r) - y) - v * -1.66666666666666324348e-01);
}
static inline double P_cos_kernel_f64(double x, double y) {
  double z = x * x, w = z * z, p1, p2, r, hz, a;
  p1 = 2.48015872894767294178e-05;
  p1 = -1.38888888888741095749e-03 + p1 * z;
  p1 = 4.16666666666666019037e-02 + p1 * z;
  p2 = -1.13596475577881948265e-11;
  p2 = 2.08757232129817482790e-09 + p2 * z;
  p2 = -2.75573143513906633035e-07 + p2 * z;
  r = z * p1 + (w * w) * p2;
  hz = 0.5 * z;
  a = 1.0 - hz;
  return a + (((1.0 - a) - hz) + (z * r - x * y));
}
/* fdlibm __rem_pio2, medium case, for |x| < 2^20 pi/2: pi/2 in three 33-bit parts, q in the
   low bits of the rounding constant's sum, all three rounds. */
static inline double P_rem_pio2_medium_f64(double x, double *tail, uint32_t *quadrant) {
  double shifted = x * 6.36619772367581382433e-01 + 6755399441055744.0;
  double q = shifted - 6755399441055744.0;
  double r = x - q * 1.57079632673412561417e+00, w, t, d, y0;
  w = q * 6.07710050630396597660e-11;
  t = r - w;
  w = q * 2.02226624871116645580e-21;
  r = t - w;
  d = (t - r) - w;
  w = q * 8.47842766036889956997e-32 - d;
  y0 = r - w;
  *tail = (r - y0) - w;
  *quadrant = (uint32_t)P_f64_to_bits(shifted);
  return y0;
}
/* x = q pi/2 + (y0 + y1): the medium reduction below 2^20 pi/2, Payne-Hanek above, both
   computed and one selected (straight-line code, so that loops calling it vectorise). */
static inline double P_reduce_f64(double x, double *tail, uint32_t *q) {
  double ax = P_abs_f64(x), mt, bt, my, by, y0, y1;
  uint32_t mq, bq, n;
  int big = !(ax < 1647099.0);
  uint64_t sign = P_f64_to_bits(x) >> 63;
  my = P_rem_pio2_medium_f64(P_sel_f64(big, 0.0, ax), &mt, &mq);
  by = P_rem_pio2_big_f64(ax, &bt, &bq);
  y0 = P_sel_f64(big, by, my);
  y1 = P_sel_f64(big, bt, mt);
  n = big ? bq : mq;
  *q = sign ? 0u - n : n;
  *tail = P_f64_from_bits(P_f64_to_bits(y1) ^ (sign << 63));
  return P_f64_from_bits(P_f64_to_bits(y0) ^ (sign << 63));
}"#;

pub(super) const SIN_F64: &str = r#"static inline double P_sin_f64(double x) {
  uint32_t q; double y1, y0 = P_reduce_f64(x, &y1, &q), res;
  res = P_sel_f64(q & 1u, P_cos_kernel_f64(y0, y1), P_sin_kernel_f64(y0, y1));
  res = P_f64_from_bits(P_f64_to_bits(res) ^ ((uint64_t)(q & 2u) << 62));
  res = P_sel_f64(x == 0.0, x, res);
  return P_sel_f64(P_abs_f64(x) <= 1.7976931348623157e308, res, x - x);
}"#;

pub(super) const COS_F64: &str = r#"static inline double P_cos_f64(double x) {
  uint32_t q; double y1, y0 = P_reduce_f64(x, &y1, &q), res;
  res = P_sel_f64(q & 1u, P_sin_kernel_f64(y0, y1), P_cos_kernel_f64(y0, y1));
  res = P_f64_from_bits(P_f64_to_bits(res) ^ ((uint64_t)((q + 1u) & 2u) << 62));
  return P_sel_f64(P_abs_f64(x) <= 1.7976931348623157e308, res, x - x);
}"#;

pub(super) const TAN_F64: &str = r#"static inline double P_tan_f64(double x) {
  uint32_t q; double y1, y0 = P_reduce_f64(x, &y1, &q), s, c, res;
  s = P_sin_kernel_f64(y0, y1); c = P_cos_kernel_f64(y0, y1);
  res = P_sel_f64(q & 1u, -c, s) / P_sel_f64(q & 1u, s, c);
  res = P_sel_f64(x == 0.0, x, res);
  return P_sel_f64(P_abs_f64(x) <= 1.7976931348623157e308, res, x - x);
}"#;

pub(super) const SIN_PI_POLY_F32: &str = r#"/* Fast path of sin and cos, for |x| <= 4096: x = m pi/2 + r with m even (sin) or odd (cos)
   and |r| <= pi/2, by a float Cody-Waite reduction with pi/2 in four parts, the first three of
   12 bits (m c_k is exact for |m| < 2^12); then the degree-9 odd polynomial of sin on
   [-pi/2, pi/2] (Arm optimized-routines' vector sinf). Where GCC or Clang targets a fast
   single-precision fused multiply-add (__FP_FAST_FMAF, or x86's __FMA__ and Arm's
   __ARM_FEATURE_FMA for Clang), the steps are fused; elsewhere they are separate roundings. Either way within 2.4 ULP of the f64 sine and
   cosine on every float in [-4096, 4096]; the two may differ in the last bits. */
#if defined(__GNUC__) && (defined(__FP_FAST_FMAF) || defined(__FMA__) || defined(__ARM_FEATURE_FMA))
static inline float P_sin_pi_poly_f32(float r) {
  float z = r * r, p = 0x1.5b2e76p-19f;
  p = __builtin_fmaf(p, z, -0x1.9f42eap-13f);
  p = __builtin_fmaf(p, z, 0x1.110df4p-7f);
  p = __builtin_fmaf(p, z, -0x1.555548p-3f);
  return __builtin_fmaf(r * z, p, r);
}
static inline float P_sub_pio2_f32(float x, float m) {
  float r = __builtin_fmaf(-m, 1.5703125f, x);
  r = __builtin_fmaf(-m, 0x1.fb4p-12f, r);
  r = __builtin_fmaf(-m, 0x1.444p-24f, r);
  return __builtin_fmaf(-m, 0x1.68c234p-39f, r);
}
#else
static inline float P_sin_pi_poly_f32(float r) {
  float z = r * r, p = 0x1.5b2e76p-19f;
  p = -0x1.9f42eap-13f + p * z;
  p = 0x1.110df4p-7f + p * z;
  p = -0x1.555548p-3f + p * z;
  return r + (r * z) * p;
}
static inline float P_sub_pio2_f32(float x, float m) {
  return (((x - m * 1.5703125f) - m * 0x1.fb4p-12f) - m * 0x1.444p-24f) - m * 0x1.68c234p-39f;
}
#endif"#;

pub(super) const SIN_FAST_F32: &str = r#"/* sin on the fast path; sets *slow when |x| > 4096 (or Inf, NaN), whose result the caller
   recomputes with P_sin_full_f32. n = nearest(x / pi) by the 1.5 2^23 shift, m = 2n; the sign
   flips with n's parity. */
static inline float P_sin_fast_f32(float x, uint32_t *slow) {
  float shifted = x * 0.318309886f + 12582912.0f;
  float n = shifted - 12582912.0f;
  uint32_t odd = P_f32_to_bits(shifted) << 31;
  float y = P_f32_from_bits(P_f32_to_bits(P_sin_pi_poly_f32(P_sub_pio2_f32(x, n + n))) ^ odd);
  *slow |= (uint32_t)!(P_abs_f32(x) <= 4096.0f);
  return P_sel_f32(x == 0.0f, x, y);
}
/* sin: the fast path where it applies, else the exact reduction (a branch, expected not
   taken where the compiler takes the hint). */
static inline float P_sin_full_f32(float x) {
  uint32_t slow = 0u;
  float y = P_sin_fast_f32(x, &slow);
#if defined(__GNUC__)
  if (__builtin_expect(slow != 0u, 0)) return P_sin_f32(x);
#else
  if (slow != 0u) return P_sin_f32(x);
#endif
  return y;
}"#;

pub(super) const COS_FAST_F32: &str = r#"/* cos on the fast path; sets *slow as P_sin_fast_f32 does. n = nearest(x / pi + 1/2),
   m = 2n - 1 (odd), cos x = sin r with the sign of (-1)^n. */
static inline float P_cos_fast_f32(float x, uint32_t *slow) {
  float shifted = (x * 0.318309886f + 0.5f) + 12582912.0f;
  float n = shifted - 12582912.0f;
  uint32_t sign = P_f32_to_bits(shifted) << 31;
  *slow |= (uint32_t)!(P_abs_f32(x) <= 4096.0f);
  return P_f32_from_bits(P_f32_to_bits(P_sin_pi_poly_f32(P_sub_pio2_f32(x, (n + n) - 1.0f))) ^ sign);
}
/* cos: the fast path where it applies, else the exact reduction (a branch, expected not
   taken where the compiler takes the hint). */
static inline float P_cos_full_f32(float x) {
  uint32_t slow = 0u;
  float y = P_cos_fast_f32(x, &slow);
#if defined(__GNUC__)
  if (__builtin_expect(slow != 0u, 0)) return P_cos_f32(x);
#else
  if (slow != 0u) return P_cos_f32(x);
#endif
  return y;
}"#;
