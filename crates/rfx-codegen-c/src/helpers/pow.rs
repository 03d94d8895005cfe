//! `pow` (fdlibm e_pow.c and its float version e_powf.c: an extra-precise `log2` as a head
//! and tail, and `exp` of a head and tail), with C99's special values. The f32 code uses
//! float arithmetic only.

pub(super) const POW_F32: &str = r#"/* pow's helpers are larger than GCC's inlining limit for one call: without inlining, a loop
   that calls pow keeps the call and is not vectorised. Conditions combine with & and |, not
   && and ||, so that no branch is left for GCC to thread the selects through. */
#ifndef P_POW_INLINE
#if defined(__GNUC__)
#define P_POW_INLINE static inline __attribute__((always_inline))
#else
#define P_POW_INLINE static inline
#endif
#endif
/* |x|^y for finite positive |x| (fdlibm e_powf.c, in float): log2|x| = t1 + t2 to about 40
   bits from s = (x - bp)/(x + bp), bp in {1, 1.5}, and the L1..L6 series, with heads cut to
   12 significant bits so that their products are exact; y split the same way, y log2|x| =
   p_h + p_l, then 2^(p_h + p_l) by the P1..P5 rational form of e^r and an exact two-step
   scaling. Straight-line code; pow's special values are selected around it. */
P_POW_INLINE float P_pow_core_f32(float ax, float y) {
  int tiny = ax < 1.17549435e-38f;
  float axs = P_sel_f32(tiny, ax * 16777216.0f, ax);
  uint32_t ix = P_f32_to_bits(axs), j = ix & 0x007fffffu, ixn;
  int mid = (j > 0x1cc471u) & (j < 0x5db3d7u), top = j >= 0x5db3d7u;
  float n, axn, bp, dp_h, dp_l, u, v, ss, s_h, s_l, t_h, t_l, s2, r, p_h, p_l, z_h, z_l, t1, t2, y1, nn, t, z, w;
  ixn = (j | 0x3f800000u) - (top ? 0x00800000u : 0u);
  n = (P_f32_from_bits(0x4b000000u | (ix >> 23)) - 8388735.0f) + P_sel_f32(top, 1.0f, 0.0f) + P_sel_f32(tiny, -24.0f, 0.0f);
  axn = P_f32_from_bits(ixn);
  bp = P_sel_f32(mid, 1.5f, 1.0f);
  dp_h = P_sel_f32(mid, 0.5849609375f, 0.0f);
  dp_l = P_sel_f32(mid, 1.56322085e-06f, 0.0f);
  u = axn - bp;
  v = 1.0f / (axn + bp);
  ss = u * v;
  s_h = P_f32_from_bits(P_f32_to_bits(ss) & 0xfffff000u);
  t_h = P_f32_from_bits((((ixn >> 1) & 0xfffff000u) | 0x20000000u) + 0x00400000u + (mid ? 0x00200000u : 0u));
  t_l = axn - (t_h - bp);
  s_l = v * ((u - s_h * t_h) - s_h * t_l);
  s2 = ss * ss;
  r = 0.206975013f;
  r = 0.230660751f + r * s2;
  r = 0.272728115f + r * s2;
  r = 0.333333343f + r * s2;
  r = 0.428571433f + r * s2;
  r = 0.600000024f + r * s2;
  r = (s2 * s2) * r + s_l * (s_h + ss);
  s2 = s_h * s_h;
  t_h = P_f32_from_bits(P_f32_to_bits((3.0f + s2) + r) & 0xfffff000u);
  t_l = r - ((t_h - 3.0f) - s2);
  u = s_h * t_h;
  v = s_l * t_h + t_l * ss;
  p_h = P_f32_from_bits(P_f32_to_bits(u + v) & 0xfffff000u);
  p_l = v - (p_h - u);
  z_h = 0.9619140625f * p_h;
  z_l = -1.17368574e-04f * p_h + p_l * 0.961796701f + dp_l;
  t1 = P_f32_from_bits(P_f32_to_bits(((z_h + z_l) + dp_h) + n) & 0xfffff000u);
  t2 = z_l - (((t1 - n) - dp_h) - z_h);
  y1 = P_f32_from_bits(P_f32_to_bits(y) & 0xfffff000u);
  p_l = (y - y1) * t1 + y * t2;
  p_h = y1 * t1;
  /* Far outside the range the result is 0 or Inf either way: clamp, so that 2^nn is two
     normal powers of two. */
  p_l = P_sel_f32(P_abs_f32(p_h) > 250.0f, 0.0f, p_l);
  p_h = P_sel_f32(p_h > 250.0f, 250.0f, p_h);
  p_h = P_sel_f32(p_h < -250.0f, -250.0f, p_h);
  nn = (p_h + 12582912.0f) - 12582912.0f;
  p_h = p_h - nn;
  t = P_f32_from_bits(P_f32_to_bits(p_l + p_h) & 0xffff8000u);
  u = t * 0.693145752f;
  v = (p_l - (t - p_h)) * 0.693147182f + t * 1.42860654e-06f;
  z = u + v;
  w = v - (z - u);
  t = z * z;
  t1 = 4.13813694e-08f;
  t1 = -1.65339020e-06f + t1 * t;
  t1 = 6.61375598e-05f + t1 * t;
  t1 = -2.77777785e-03f + t1 * t;
  t1 = 0.166666672f + t1 * t;
  t1 = z - t * t1;
  r = (z * t1) / (t1 - 2.0f) - (w + z * w);
  z = 1.0f - (r - z);
  return P_ldexp_f32(z, nn);
}
/* pow with C99's special values: the sign for a negative x and an odd integer y, NaN for a
   finite negative x and a finite non-integer y, 1 for y = +-0, x = 1 and (x, y) = (-1, +-Inf)
   (NaN operands included); zero, infinite or NaN operands through 2^(y log2|x|), whose
   limits are the C99 results. */
P_POW_INLINE float P_pow_f32(float x, float y) {
  float ax = P_abs_f32(x), ay = P_abs_f32(y), hy = ay * 0.5f, mag, res;
  int y_finite = ay < P_f32_from_bits(0x7f800000u);
  /* |y| and |y|/2 rounded to integers by adding and subtracting 2^23 (exact below 2^23; every
     float from 2^23 up is an integer). */
  float ry = P_sel_f32(ay < 8388608.0f, (ay + 8388608.0f) - 8388608.0f, ay);
  float rhy = P_sel_f32(hy < 8388608.0f, (hy + 8388608.0f) - 8388608.0f, hy);
  int y_int = (ry == ay) & y_finite;
  int y_odd = (rhy != hy) & y_int;
  int special = (ax == 0.0f) | !(ax < P_f32_from_bits(0x7f800000u)) | !y_finite;
  /* The core runs on 1 where the limit form is taken, so that it converts no NaN to an integer. */
  mag = P_sel_f32(special, P_exp2_f32(y * P_log2_f32(ax)), P_pow_core_f32(P_sel_f32(special, 1.0f, ax), P_sel_f32(special, 1.0f, y)));
  res = P_f32_from_bits(P_f32_to_bits(mag) ^ (((P_f32_to_bits(x) >> 31) & (uint32_t)y_odd) << 31));
  res = P_sel_f32((x < 0.0f) & (x > -P_f32_from_bits(0x7f800000u)) & !y_int & y_finite, (x - x) / (x - x), res);
  return P_sel_f32((y == 0.0f) | (x == 1.0f) | ((x == -1.0f) & !y_finite & (y == y)), 1.0f, res);
}"#;

pub(super) const POW_F64: &str = r#"#ifndef P_POW_INLINE
#if defined(__GNUC__)
#define P_POW_INLINE static inline __attribute__((always_inline))
#else
#define P_POW_INLINE static inline
#endif
#endif
/* |x|^y for finite positive |x| (fdlibm e_pow.c): log2|x| = t1 + t2 (about 64 bits) from
   s = (x - bp)/(x + bp), bp in {1, 1.5}, and the L1..L6 series, heads cut to their high
   word; y split the same way, y log2|x| = p_h + p_l, then 2^(p_h + p_l) by the P1..P5
   rational form of e^r and an exact two-step scaling. Straight-line code. */
P_POW_INLINE double P_pow_core_f64(double ax, double y) {
  int tiny = ax < 2.2250738585072014e-308;
  double axs = P_sel_f64(tiny, ax * 9007199254740992.0, ax);
  uint64_t ix = P_f64_to_bits(axs), hx = ix >> 32, j = hx & 0x000fffffu, hn;
  int mid = (j > 0x3988eu) & (j < 0xbb67au), top = j >= 0xbb67au;
  double n, axn, bp, dp_h, dp_l, u, v, ss, s_h, s_l, t_h, t_l, s2, s4, r, l, p_h, p_l, z_h, z_l, t1, t2, y1, nn, t, z, w;
  hn = (j | 0x3ff00000u) - (top ? 0x00100000u : 0u);
  n = (P_f64_from_bits(UINT64_C(0x4330000000000000) | (hx >> 20)) - 4503599627371519.0) + P_sel_f64(top, 1.0, 0.0) + P_sel_f64(tiny, -53.0, 0.0);
  axn = P_f64_from_bits((hn << 32) | (ix & 0xffffffffu));
  bp = P_sel_f64(mid, 1.5, 1.0);
  dp_h = P_sel_f64(mid, 5.84962487220764160156e-01, 0.0);
  dp_l = P_sel_f64(mid, 1.35003920212974897128e-08, 0.0);
  u = axn - bp;
  v = 1.0 / (axn + bp);
  ss = u * v;
  s_h = P_f64_from_bits(P_f64_to_bits(ss) & UINT64_C(0xffffffff00000000));
  t_h = P_f64_from_bits(((((hn >> 1) | 0x20000000u) + 0x00080000u + (mid ? 0x00040000u : 0u))) << 32);
  t_l = axn - (t_h - bp);
  s_l = v * ((u - s_h * t_h) - s_h * t_l);
  s2 = ss * ss;
  s4 = s2 * s2;
  l = 2.06975017800338417784e-01;
  l = 2.30660745775561754067e-01 + l * s2;
  l = 2.72728123808534006489e-01 + l * s2;
  l = 3.33333329818377432918e-01 + l * s2;
  l = 4.28571428578550184252e-01 + l * s2;
  l = 5.99999999999994648725e-01 + l * s2;
  r = s4 * l + s_l * (s_h + ss);
  s2 = s_h * s_h;
  t_h = P_f64_from_bits(P_f64_to_bits((s2 + 3.0) + r) & UINT64_C(0xffffffff00000000));
  t_l = r - ((t_h - 3.0) - s2);
  u = s_h * t_h;
  v = s_l * t_h + t_l * ss;
  p_h = P_f64_from_bits(P_f64_to_bits(u + v) & UINT64_C(0xffffffff00000000));
  p_l = v - (p_h - u);
  z_h = p_h * 9.61796700954437255859e-01;
  z_l = (p_h * -7.02846165095275826516e-09 + p_l * 9.61796693925975554329e-01) + dp_l;
  t1 = P_f64_from_bits(P_f64_to_bits(((z_h + z_l) + dp_h) + n) & UINT64_C(0xffffffff00000000));
  t2 = z_l - (((t1 - n) - dp_h) - z_h);
  y1 = P_f64_from_bits(P_f64_to_bits(y) & UINT64_C(0xffffffff00000000));
  p_l = (y - y1) * t1 + y * t2;
  p_h = y1 * t1;
  p_l = P_sel_f64(P_abs_f64(p_h) > 1100.0, 0.0, p_l);
  p_h = P_sel_f64(p_h > 1100.0, 1100.0, p_h);
  p_h = P_sel_f64(p_h < -1100.0, -1100.0, p_h);
  nn = (p_h + 6755399441055744.0) - 6755399441055744.0;
  p_h = p_h - nn;
  t = P_f64_from_bits(P_f64_to_bits(p_l + p_h) & UINT64_C(0xffffffff00000000));
  u = t * 6.93147182464599609375e-01;
  v = (p_l - (t - p_h)) * 6.93147180559945286227e-01 + t * -1.90465429995776804525e-09;
  z = u + v;
  w = v - (z - u);
  t = z * z;
  t1 = 4.13813679705723846039e-08;
  t1 = -1.65339022054652515390e-06 + t1 * t;
  t1 = 6.61375632143793436117e-05 + t1 * t;
  t1 = -2.77777777770155933842e-03 + t1 * t;
  t1 = 1.66666666666666019037e-01 + t1 * t;
  t1 = z - t * t1;
  r = (z * t1) / (t1 - 2.0) - (w + z * w);
  z = 1.0 - (r - z);
  return P_ldexp_f64(z, nn);
}
P_POW_INLINE double P_pow_f64(double x, double y) {
  double ax = P_abs_f64(x), ay = P_abs_f64(y), hy = ay * 0.5, mag, res;
  int y_finite = ay < P_f64_from_bits(UINT64_C(0x7ff0000000000000));
  double ry = P_sel_f64(ay < 4503599627370496.0, (ay + 4503599627370496.0) - 4503599627370496.0, ay);
  double rhy = P_sel_f64(hy < 4503599627370496.0, (hy + 4503599627370496.0) - 4503599627370496.0, hy);
  int y_int = (ry == ay) & y_finite;
  int y_odd = (rhy != hy) & y_int;
  int special = (ax == 0.0) | !(ax < P_f64_from_bits(UINT64_C(0x7ff0000000000000))) | !y_finite;
  mag = P_sel_f64(special, P_exp2_f64(y * P_log2_f64(ax)), P_pow_core_f64(P_sel_f64(special, 1.0, ax), P_sel_f64(special, 1.0, y)));
  res = P_f64_from_bits(P_f64_to_bits(mag) ^ (((P_f64_to_bits(x) >> 63) & (uint64_t)y_odd) << 63));
  res = P_sel_f64((x < 0.0) & (x > -P_f64_from_bits(UINT64_C(0x7ff0000000000000))) & !y_int & y_finite, (x - x) / (x - x), res);
  return P_sel_f64((y == 0.0) | (x == 1.0) | ((x == -1.0) & !y_finite & (y == y)), 1.0, res);
}"#;
