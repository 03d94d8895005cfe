// sin, cos and tan for finite x: x = j pi/2 + r with |r| <= pi/4, then Cephes' polynomials
// on r, as on the CPU backend. For |x| <= 32768 Cody and Waite's reduction with pi/2 in six
// parts, the first five of 9 significant bits (j < 2^15, so every product j * part is exact,
// and so is each step while r is small; no fused multiply-add needed: lavapipe splits `fma`),
// each step's operand made opaque so the compiler cannot fold the parts together. Beyond,
// Payne and Hanek's reduction on the bits (`rfx_trig_big`). GPU built-ins lose the relative
// accuracy near the zeros (lavapipe: 6 ULP next to 3 pi) and all accuracy beyond a few periods
// on some drivers (NVIDIA's Vulkan; lavapipe gives +-1 at 1e30).
struct RfxTrig {
    s: f32,
    c: f32,
    q: u32,
}

fn rfx_trig_poly(r: f32, q: u32) -> RfxTrig {
    let z = r * r;
    let s = r + r * z * ((-1.9515296e-4f * z + 8.332161e-3f) * z - 1.6666655e-1f);
    let c = z * z * ((2.4433157e-5f * z - 1.3887316e-3f) * z + 4.1666646e-2f) + (1.0f - 0.5f * z);
    return RfxTrig(s, c, q);
}

fn rfx_trig(x: f32) -> RfxTrig {
    if ((bitcast<u32>(x) & 0x7fffffffu) > 0x47000000u) {
        return rfx_trig_big(x);
    }
    let j = round(x * 0.63661977236758134f);
    var r = rfx_exact(x) - j * 1.5703125f;
    r = rfx_exact(r) - j * 0x1.fbp-12f;
    r = rfx_exact(r) - j * 0x1.51p-22f;
    r = rfx_exact(r) - j * 0x1.0bp-34f;
    r = rfx_exact(r) - j * 0x1.18p-44f;
    r = rfx_exact(r) - j * 0x1.1a6264p-54f;
    // With j = 0 the products are +0 and would turn x = -0 into +0.
    r = select(r, x, j == 0.0f);
    return rfx_trig_poly(r, bitcast<u32>(i32(j)) & 3u);
}

// The high and low words of the 64-bit product a * b, from 16-bit halves (WGSL has no 64-bit
// integers).
fn rfx_mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>(a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u), (mid << 16u) | (p00 & 0xffffu));
}

// Payne and Hanek's reduction for finite |x| > 32768 (CUDA's slow path for sinf): the 32-bit
// significand times 192 bits of 2/pi, of which the two bits above the binary point at x's
// exponent give the quadrant and the 62 below it the fraction, which is folded to [0, 1/2],
// normalised and multiplied by pi/2 in 32-bit fixed point. The words of 2/pi beyond those that
// reach the quadrant bits are never needed (their products are multiples of 4). About 2^-30
// relative on r, so the polynomials' bounds hold up to FLT_MAX.
fn rfx_trig_big(x: f32) -> RfxTrig {
    var two_over_pi = array<u32, 6>(0x3c439041u, 0xdb629599u, 0xf534ddc0u, 0xfc2757d1u, 0x4e441529u, 0xa2f9836eu);
    let bits = bitcast<u32>(x);
    var sign = bits & 0x80000000u;
    var e = ((bits >> 23u) & 0xffu) - 128u;
    let m = (bits << 8u) | 0x80000000u;
    var product: array<u32, 7>;
    var carry = 0u;
    for (var k = 0u; k < 6u; k++) {
        let p = rfx_mul_wide(two_over_pi[k], m);
        let low = carry + p.y;
        carry = p.x + select(0u, 1u, low < p.y);
        product[k] = low;
    }
    product[6] = carry;
    let idx = 4u - (e >> 5u);
    e = e & 31u;
    var hi = product[idx + 2u];
    var lo = product[idx + 1u];
    if (e != 0u) {
        hi = (hi << e) | (lo >> (32u - e));
        lo = (lo << e) | (product[idx] >> (32u - e));
    }
    var q = i32(hi >> 30u);
    hi = (hi << 2u) | (lo >> 30u);
    lo = lo << 2u;
    // A fraction of one half or more: the next quadrant, from below.
    let upper = hi >> 31u;
    q = q + i32(upper);
    if (sign != 0u) {
        q = -q;
    }
    if (upper != 0u) {
        hi = ~hi;
        lo = 0u - lo;
        hi = hi + select(0u, 1u, lo == 0u);
        sign = sign ^ 0x80000000u;
    }
    var z = countLeadingZeros(hi);
    if (z == 32u) {
        hi = lo;
        lo = 0u;
        z = 32u + countLeadingZeros(hi);
    }
    let shift = z & 31u;
    if (shift != 0u) {
        hi = (hi << shift) | (lo >> (32u - shift));
    }
    let p = rfx_mul_wide(hi, 0xc90fdaa2u);
    hi = p.x;
    if (hi < 0x80000000u) {
        hi = (hi << 1u) | (p.y >> 31u);
        z = z + 1u;
    }
    let r = bitcast<f32>(sign | (((126u - z) << 23u) + (((hi >> 7u) + 1u) >> 1u)));
    return rfx_trig_poly(r, bitcast<u32>(q) & 3u);
}

// NaN and the infinities: the device's built-in (NaN).
fn rfx_trig_fallback(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u;
}
