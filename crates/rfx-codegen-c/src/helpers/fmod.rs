//! Float remainder (C's `fmod`), exact: musl's integer long division of the significands.
//! Loops of up to 277 (f32) or 2,100 (f64) one-bit steps, by the exponents' difference; not
//! vectorisable, but exact under any compiler flags.

pub(super) const FMOD_F32: &str = r#"/* Exact remainder x - trunc(x / y) y with x's sign (C's fmodf), by musl's integer
   long division of the significands, one bit per step. */
static inline float P_fmod_f32(float x, float y) {
  uint32_t ux = P_f32_to_bits(x), uy = P_f32_to_bits(y), sx = ux & 0x80000000u, i;
  int32_t ex = (int32_t)(ux >> 23 & 0xffu), ey = (int32_t)(uy >> 23 & 0xffu);
  if ((uy << 1) == 0u || y != y || ex == 0xff) return (x * y) / (x * y);
  if ((ux << 1) <= (uy << 1)) return (ux << 1) == (uy << 1) ? 0.0f * x : x;
  if (ex == 0) {
    for (i = ux << 9; (i >> 31) == 0u; ex--, i <<= 1) {}
    ux <<= -ex + 1;
  } else {
    ux &= 0x007fffffu;
    ux |= 0x00800000u;
  }
  if (ey == 0) {
    for (i = uy << 9; (i >> 31) == 0u; ey--, i <<= 1) {}
    uy <<= -ey + 1;
  } else {
    uy &= 0x007fffffu;
    uy |= 0x00800000u;
  }
  for (; ex > ey; ex--) {
    i = ux - uy;
    if ((i >> 31) == 0u) {
      if (i == 0u) return 0.0f * x;
      ux = i;
    }
    ux <<= 1;
  }
  i = ux - uy;
  if ((i >> 31) == 0u) {
    if (i == 0u) return 0.0f * x;
    ux = i;
  }
  for (; (ux >> 23) == 0u; ux <<= 1, ex--) {}
  if (ex > 0) {
    ux -= 0x00800000u;
    ux |= (uint32_t)ex << 23;
  } else {
    ux >>= -ex + 1;
  }
  return P_f32_from_bits(ux | sx);
}"#;

pub(super) const FMOD_F64: &str = r#"/* f64: as f32, with 64-bit significands. */
static inline double P_fmod_f64(double x, double y) {
  uint64_t ux = P_f64_to_bits(x), uy = P_f64_to_bits(y), sx = ux & (UINT64_C(1) << 63), i;
  int32_t ex = (int32_t)(ux >> 52 & 0x7ffu), ey = (int32_t)(uy >> 52 & 0x7ffu);
  if ((uy << 1) == 0u || y != y || ex == 0x7ff) return (x * y) / (x * y);
  if ((ux << 1) <= (uy << 1)) return (ux << 1) == (uy << 1) ? 0.0 * x : x;
  if (ex == 0) {
    for (i = ux << 12; (i >> 63) == 0u; ex--, i <<= 1) {}
    ux <<= -ex + 1;
  } else {
    ux &= UINT64_C(0x000fffffffffffff);
    ux |= UINT64_C(1) << 52;
  }
  if (ey == 0) {
    for (i = uy << 12; (i >> 63) == 0u; ey--, i <<= 1) {}
    uy <<= -ey + 1;
  } else {
    uy &= UINT64_C(0x000fffffffffffff);
    uy |= UINT64_C(1) << 52;
  }
  for (; ex > ey; ex--) {
    i = ux - uy;
    if ((i >> 63) == 0u) {
      if (i == 0u) return 0.0 * x;
      ux = i;
    }
    ux <<= 1;
  }
  i = ux - uy;
  if ((i >> 63) == 0u) {
    if (i == 0u) return 0.0 * x;
    ux = i;
  }
  for (; (ux >> 52) == 0u; ux <<= 1, ex--) {}
  if (ex > 0) {
    ux -= UINT64_C(1) << 52;
    ux |= (uint64_t)ex << 52;
  } else {
    ux >>= -ex + 1;
  }
  return P_f64_from_bits(ux | sx);
}"#;
