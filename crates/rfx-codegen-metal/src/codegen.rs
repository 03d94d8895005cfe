//! LIR → WGSL text: one compute entry point per kernel, one storage binding per buffer.
//!
//! Every kernel runs one invocation per *unit*: a point of the loop nest for elementwise kernels,
//! a leading point for kernels with reductions (the invocation then walks the reduced points in
//! row-major order, keeping the LIR's `lanes` partial accumulators, so results match the LIR
//! interpreter bit for bit). Invocations are numbered `gid.x + gid.y * GRID_ROW`, so a kernel
//! with more than 65535 workgroups runs as a 2D grid.
//!
//! Where WGSL's own operators differ from rfx's semantics (NaN-propagating `min`/`max`, `sign`,
//! exact `fmod`, C99 `pow`, i32 floor division, saturating float → i32 casts, wrapping i32
//! arithmetic), the code calls small helper functions emitted at the top of the module. NaN
//! tests and the special float constants go through `bitcast`, which neither WGSL's constant
//! evaluator nor a fast-math shader compiler may fold away.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use rfx_ir::lir::{Inst, LirKernel, LirProgram, ScanOrder, SlotId, Storage};
use rfx_ir::semantics::{reduce_finish, reduce_identity};
use rfx_ir::{BinaryOp, CmpOp, DType, ReduceOp, Scalar, UnaryOp};
use rfx_lower::{BackendError, Unsupported};

use crate::BACKEND;

/// Invocations per workgroup (the `@workgroup_size`).
pub(crate) const WORKGROUP_SIZE: u32 = 64;
/// Most workgroups along one grid dimension: WebGPU's guaranteed minimum of
/// `max_compute_workgroups_per_dimension`, so the generated code does not depend on the device.
pub(crate) const MAX_GROUPS_PER_DIM: u64 = 65535;

/// How one kernel is dispatched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelLayout {
    /// The entry point's name.
    pub(crate) entry: String,
    /// Invocations that do work (units); 0 means the kernel is not dispatched.
    pub(crate) units: u64,
    /// Workgroups along x and y.
    pub(crate) groups: (u32, u32),
    /// The buffers (by index, which is also the binding) the entry point uses, ascending.
    pub(crate) bindings: Vec<usize>,
    /// Loop iterations per invocation ([`loop_iterations`]).
    pub(crate) loop_iterations: u64,
}

/// A program's WGSL module and how to dispatch each kernel.
#[derive(Clone, Debug)]
pub(crate) struct Shader {
    pub(crate) source: String,
    pub(crate) kernels: Vec<KernelLayout>,
}

fn unsupported(what: Unsupported) -> BackendError {
    BackendError::Unsupported {
        backend: BACKEND,
        what,
    }
}

/// Rejects what WGSL cannot compute: any `f64` buffer or slot (WGSL has no f64; a silent
/// downcast would change results).
pub(crate) fn check_supported(program: &LirProgram) -> Result<(), BackendError> {
    let uses_f64 = program.buffers().iter().any(|b| b.ty.dtype == DType::F64)
        || program.kernels().iter().any(|k| k.slots.contains(&DType::F64));
    if uses_f64 {
        return Err(unsupported(Unsupported::DType(DType::F64)));
    }
    Ok(())
}

/// Helper functions the generated code may call; each is emitted once, in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Helper {
    Exact,
    IsNan,
    MinF32,
    MaxF32,
    SignF32,
    FmodF32,
    PowF32,
    SigmoidF32,
    TanhF32,
    Atan2F32,
    AtanF32,
    AsinPoly,
    AsinF32,
    AcosF32,
    Scale2,
    ExpF32,
    Exp2F32,
    Exp2Poly,
    DoubleF32,
    Log2Dd,
    Trig,
    SinF32,
    CosF32,
    TanF32,
    LogParts,
    LogF32,
    Log2F32,
    ErfF32,
    F32ToI32,
    DivI32,
    FmodI32,
}

impl Helper {
    fn deps(self) -> &'static [Helper] {
        match self {
            Helper::MinF32 | Helper::MaxF32 | Helper::F32ToI32 => &[Helper::IsNan],
            Helper::Atan2F32 => &[Helper::IsNan, Helper::AtanF32, Helper::Exact],
            Helper::AtanF32 => &[Helper::Exact],
            Helper::AsinF32 | Helper::AcosF32 => &[Helper::AsinPoly, Helper::Exact],
            // Every helper a helper calls, transitively.
            Helper::PowF32 => &[
                Helper::IsNan,
                Helper::Log2Dd,
                Helper::DoubleF32,
                Helper::Scale2,
                Helper::Exp2Poly,
                Helper::Exact,
            ],
            Helper::Log2Dd => &[Helper::DoubleF32, Helper::Exact],
            Helper::DoubleF32 => &[Helper::Exact],
            Helper::SigmoidF32 => &[Helper::Scale2, Helper::ExpF32, Helper::Exact],
            Helper::ExpF32 => &[Helper::Scale2, Helper::Exact],
            Helper::Exp2F32 => &[Helper::Scale2, Helper::Exp2Poly, Helper::Exact],
            Helper::LogF32 | Helper::Log2F32 => &[Helper::LogParts],
            Helper::SinF32 | Helper::CosF32 | Helper::TanF32 => &[Helper::Trig, Helper::Exact],
            Helper::ErfF32 => &[Helper::IsNan, Helper::Scale2, Helper::ExpF32, Helper::Exact],
            _ => &[],
        }
    }

    fn source(self) -> &'static str {
        match self {
            Helper::Exact => {
                "// `x` itself, through a zero the shader compiler cannot see (`gid.z`, always 0 here):
// it keeps every float op a separately rounded IEEE op. Without it, Mesa's NIR fuses `a * b + c`
// into an FMA and folds `x - x` to 0 and `x * 0` to 0, which are wrong for NaN, Inf and -0.
fn rfx_exact(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) | rfx_zero);
}

// The same with another opaque op, for second operands: `rfx_exact(x) - rfx_exact2(x)` is not
// `x - x` to the compiler, so it cannot fold it to 0 (NaN for infinite x). An add, not an xor:
// `rfx_exact2(rfx_exact(0.0))` would be `(0 | z) ^ z`, a zero the compiler can see, and it
// folds `acc + 0.0` to `acc` (wrong for `acc = -0.0`).
fn rfx_exact2(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) + rfx_zero);
}
"
            }
            Helper::IsNan => {
                "// NaN test on the bits: a fast-math compiler may fold `x != x` away.
fn rfx_isnan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}
"
            }
            Helper::MinF32 => {
                "// NumPy minimum: `a` when `a < b` or `a` is NaN, else `b`.
fn rfx_min_f32(a: f32, b: f32) -> f32 {
    return select(b, a, a < b || rfx_isnan(a));
}
"
            }
            Helper::MaxF32 => {
                "// NumPy maximum: `a` when `a > b` or `a` is NaN, else `b`.
fn rfx_max_f32(a: f32, b: f32) -> f32 {
    return select(b, a, a > b || rfx_isnan(a));
}
"
            }
            Helper::SignF32 => {
                "// NumPy sign: -1, +0 or 1; NaN stays NaN; sign(-0) = +0.
fn rfx_sign_f32(x: f32) -> f32 {
    return select(select(select(x, 0.0f, x == 0.0f), -1.0f, x < 0.0f), 1.0f, x > 0.0f);
}
"
            }
            Helper::FmodF32 => FMOD_F32,
            Helper::PowF32 => {
                "// C99 powf: the special values exactly, negative bases with integer exponents,
// otherwise 2^(y log2|x|) with y log2|x| carried as a double-f32 pair (about 2^-33 relative):
// rounding that product to one f32 cost up to 93 ULP where the result is large or tiny.
fn rfx_pow_f32(x: f32, y: f32) -> f32 {
    let inf = bitcast<f32>(0x7f800000u);
    if (y == 0.0f || x == 1.0f) {
        return 1.0f;
    }
    if (rfx_isnan(x) || rfx_isnan(y)) {
        return bitcast<f32>(0x7fc00000u);
    }
    let ax = abs(x);
    let ay = abs(y);
    // |log2|x|| >= 2^-24.5 for |x| != 1, so from |y| = 2^64 on, |y log2|x|| >= 2^39: the
    // limits of the infinite y (and the split below never overflows).
    if (ay == inf || ay >= 0x1p64f) {
        if (ax == 1.0f) {
            return 1.0f;
        }
        return select(0.0f, inf, (ax > 1.0f) == (y > 0.0f));
    }
    let y_int = trunc(y) == y;
    // Every f32 of magnitude 2^24 or more is an even integer.
    let y_odd = y_int && ay < 16777216.0f && (i32(ay) & 1) == 1;
    let neg = bitcast<u32>(x) >= 0x80000000u;
    let sign = select(0u, 0x80000000u, neg && y_odd);
    if (ax == 0.0f) {
        return bitcast<f32>(bitcast<u32>(select(0.0f, inf, y < 0.0f)) | sign);
    }
    if (ax == inf) {
        return bitcast<f32>(bitcast<u32>(select(inf, 0.0f, y < 0.0f)) | sign);
    }
    if (neg && !y_int) {
        return bitcast<f32>(0x7fc00000u);
    }
    let l = rfx_log2_dd(ax);
    let t = rfx_two_prod(y, l.x);
    let tl = rfx_exact(t.y + rfx_exact(y * l.y));
    var v = 0.0f;
    if (t.x > 130.0f) {
        v = inf;
    } else if (t.x >= -152.0f) {
        // 2^t = 2^n 2^r with |r| <= 1/2 (t.x - n is exact).
        let n = floor(t.x + 0.5f);
        v = rfx_scale2(rfx_exp2_poly(rfx_exact(rfx_exact(t.x - n) + tl)), i32(n));
    }
    return bitcast<f32>(bitcast<u32>(v) | sign);
}
"
            }
            Helper::DoubleF32 => {
                "// Error-free transformations on f32 (no FMA: lavapipe splits `fma`), every intermediate
// through `rfx_exact` so that the compiler can neither fold `s - (s - b)` nor contract
// Veltkamp's split into an FMA. `two_sum(a, b)` = (a + b, its rounding error), Knuth's;
// `two_prod(a, b)` = (a * b, its rounding error), Dekker's, for |a|, |b| < 2^115.
fn rfx_two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = rfx_exact(a + b);
    let bb = rfx_exact(s - a);
    return vec2<f32>(s, rfx_exact(a - rfx_exact(s - bb)) + rfx_exact(b - bb));
}

fn rfx_split(a: f32) -> vec2<f32> {
    let c = rfx_exact(a * 4097.0f);
    let hi = rfx_exact(c - rfx_exact(c - a));
    return vec2<f32>(hi, rfx_exact(a - hi));
}

fn rfx_two_prod(a: f32, b: f32) -> vec2<f32> {
    let p = rfx_exact(a * b);
    let x = rfx_split(a);
    let y = rfx_split(b);
    let e = rfx_exact(rfx_exact(rfx_exact(x.x * y.x) - p) + rfx_exact(x.x * y.y));
    return vec2<f32>(p, rfx_exact(e + rfx_exact(x.y * y.x)) + rfx_exact(x.y * y.y));
}
"
            }
            Helper::Log2Dd => {
                "// log2 x for finite x > 0 as a double-f32 pair (hi + lo, about 2^-33 relative): x = 2^e u,
// u in [1, 2), c = 1 + k/8 the nearest eighth, log2 u = log2 c + (2/ln 2) atanh(s) with
// s = (u - c)/(u + c), |s| <= 1/32, carried as sh + sl (u - c is exact, the quotient's error
// is recovered from the residual); the atanh tail s^3/3 + s^5/5 + s^7/7 is under 2^-11 of s, so
// f32 is enough for it; log2 c from a table of pairs.
fn rfx_log2_dd(x: f32) -> vec2<f32> {
    var bits = bitcast<u32>(x);
    var e = -127;
    if (bits < 0x00800000u) {
        bits = bitcast<u32>(f32(bits) * 0x1p-126f);
        e = e - 23;
    }
    e = e + i32(bits >> 23u);
    let u = bitcast<f32>((bits & 0x007fffffu) | 0x3f800000u);
    let k = floor(rfx_exact(u - 1.0f) * 8.0f + 0.5f);
    let c = 1.0f + 0.125f * k;
    let n = rfx_exact(u - c);
    let d = rfx_two_sum(u, c);
    let sh = rfx_exact(n / d.x);
    let p = rfx_two_prod(sh, d.x);
    let r = rfx_exact(rfx_exact(rfx_exact(n - p.x) - p.y) - rfx_exact(sh * d.y));
    let sl = rfx_exact(r / d.x);
    let z = sh * sh;
    let tail = rfx_exact(sh * z) * ((0x1.24924ap-3f * z + 0x1.99999ap-3f) * z + 0x1.555556p-2f);
    // 2/ln 2 = 0x1.715476p+1 + 0x1.4ae0cp-25.
    let a = rfx_two_prod(0x1.715476p+1f, sh);
    let b = rfx_exact(rfx_exact(a.y + rfx_exact(0x1.715476p+1f * rfx_exact(sl + tail)))
        + rfx_exact(0x1.4ae0cp-25f * sh));
    var c_hi = array<f32, 9>(0.0f, 0x1.5c01a4p-3f, 0x1.49a784p-2f, 0x1.d6753ep-2f, 0x1.2b8034p-1f,
        0x1.66a008p-1f, 0x1.9d5dap-1f, 0x1.d053f6p-1f, 1.0f);
    var c_lo = array<f32, 9>(0.0f, -0x1.810a5ep-29f, 0x1.79a372p-27f, 0x1.975078p-33f,
        0x1.cfdeb4p-27f, 0x1.c8f11ap-26f, -0x1.57f7a6p-28f, 0x1.a4c112p-26f, 0.0f);
    let i = u32(k);
    let s1 = rfx_two_sum(f32(e), c_hi[i]);
    let s2 = rfx_two_sum(s1.x, a.x);
    return rfx_two_sum(s2.x, rfx_exact(rfx_exact(s2.y + b) + rfx_exact(s1.y + c_lo[i])));
}
"
            }
            Helper::SigmoidF32 => {
                "// rfx sigmoid: exp(x)/(1+exp(x)) below 0 keeps tiny results; 1/(1+exp(-x)) otherwise.
fn rfx_sigmoid_f32(x: f32) -> f32 {
    if (x < 0.0f) {
        let e = rfx_exp_f32(x);
        return e / (1.0f + e);
    }
    return 1.0f / (1.0f + rfx_exp_f32(-x));
}
"
            }
            Helper::TanhF32 => {
                "// tanh: Cephes tanhf's odd polynomial below 0.625 (GPU built-ins lose accuracy to
// cancellation there), the built-in above.
fn rfx_tanh_f32(x: f32) -> f32 {
    if (abs(x) < 0.625f) {
        let z = x * x;
        let p = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z
            + 1.33314422036e-1f) * z - 3.33332819422e-1f) * z;
        return select(p * x + x, x, abs(x) < 0x1p-12f);
    }
    return tanh(x);
}
"
            }
            Helper::Atan2F32 => {
                "// C99 atan2 at y = ±0 (±0 or ±pi by the sign of x, -0 included), x = ±0 and infinite operands;
// else rfx's atan of y / x, moved by ±pi (in two parts) when x < 0. About 3 ULP.
fn rfx_atan2_f32(y: f32, x: f32) -> f32 {
    if (rfx_isnan(x) || rfx_isnan(y)) {
        return bitcast<f32>(0x7fc00000u);
    }
    if (y == 0.0f) {
        let r = select(0u, 0x40490fdbu, bitcast<u32>(x) >= 0x80000000u);
        return bitcast<f32>(r | (bitcast<u32>(y) & 0x80000000u));
    }
    let sign = bitcast<u32>(y) & 0x80000000u;
    let x_neg = bitcast<u32>(x) >= 0x80000000u;
    if ((bitcast<u32>(y) & 0x7fffffffu) == 0x7f800000u) {
        // pi/4, 3pi/4 or pi/2 by x.
        let x_inf = (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
        let m = select(0x3fc90fdbu, select(0x3f490fdbu, 0x4016cbe4u, x_neg), x_inf);
        return bitcast<f32>(m | sign);
    }
    if ((bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u) {
        return bitcast<f32>(select(0u, 0x40490fdbu, x_neg) | sign);
    }
    if (x == 0.0f) {
        return bitcast<f32>(0x3fc90fdbu | (bitcast<u32>(y) & 0x80000000u));
    }
    let r = rfx_atan_f32(y / x);
    if (x < 0.0f) {
        let pi_hi = select(3.1415927410125732f, -3.1415927410125732f, y < 0.0f);
        let pi_lo = select(-8.742278e-8f, 8.742278e-8f, y < 0.0f);
        return rfx_exact(pi_hi + r) + pi_lo;
    }
    return r;
}
"
            }
            Helper::AtanF32 => {
                "// atan: Cephes atanf (|x| reduced to at most tan(pi/8) through pi/4 and pi/2, a degree-9
// odd polynomial), about 2 ULP; the sign of x (atan(-0) = -0). Built-ins: 343 ULP on lavapipe.
fn rfx_atan_f32(x: f32) -> f32 {
    let a = bitcast<f32>(bitcast<u32>(x) & 0x7fffffffu);
    var t = a;
    var base = 0.0f;
    if (a > 2.414213562373095f) {
        base = 1.5707963267948966f;
        t = -1.0f / a;
    } else if (a > 0.41421356237309505f) {
        base = 0.7853981633974483f;
        t = (a - 1.0f) / (a + 1.0f);
    }
    let z = t * t;
    let p = (((8.05374449538e-2f * z - 1.38776856032e-1f) * z + 1.99777106478e-1f) * z
        - 3.33329491539e-1f) * z * t + t;
    let r = base + rfx_exact(p);
    return bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(x) & 0x80000000u));
}
"
            }
            Helper::AsinPoly => {
                "// asin t for |t| <= 1/2 (z = t * t): Cephes asinf's polynomial.
fn rfx_asin_poly(t: f32, z: f32) -> f32 {
    return ((((4.2163199048e-2f * z + 2.4181311049e-2f) * z + 4.5470025998e-2f) * z
        + 7.4953002686e-2f) * z + 1.6666752422e-1f) * z * t + t;
}
"
            }
            Helper::AsinF32 => {
                "// asin: Cephes asinf (above 1/2, pi/2 - 2 asin(sqrt((1 - |x|) / 2)) with pi/2 in two parts),
// about 2 ULP; NaN outside [-1, 1]. Built-ins: 3825 ULP on lavapipe.
fn rfx_asin_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) > 0x3f800000u) {
        return bitcast<f32>(0x7fc00000u);
    }
    let a = bitcast<f32>(bits & 0x7fffffffu);
    var r: f32;
    if (a > 0.5f) {
        let z = 0.5f * (1.0f - a);
        let s = rfx_asin_poly(sqrt(z), z);
        r = rfx_exact(1.5707963705062866f - rfx_exact(s + s)) - 4.371139e-8f;
    } else {
        r = rfx_asin_poly(a, a * a);
    }
    return bitcast<f32>(bitcast<u32>(r) | (bits & 0x80000000u));
}
"
            }
            Helper::AcosF32 => {
                "// acos: Cephes acosf (pi - 2 asin(sqrt((1 + x) / 2)) below -1/2, 2 asin(sqrt((1 - x) / 2))
// above 1/2, pi/2 - asin(x) between, pi and pi/2 in two parts), about 2 ULP; NaN outside
// [-1, 1]. Built-ins: 3741 ULP on lavapipe.
fn rfx_acos_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) > 0x3f800000u) {
        return bitcast<f32>(0x7fc00000u);
    }
    if (x < -0.5f) {
        let z = 0.5f * (1.0f + x);
        let s = rfx_asin_poly(sqrt(z), z);
        return rfx_exact(3.1415927410125732f - rfx_exact(s + s)) - 8.742278e-8f;
    }
    if (x > 0.5f) {
        let z = 0.5f * (1.0f - x);
        let s = rfx_asin_poly(sqrt(z), z);
        return s + s;
    }
    return rfx_exact(1.5707963705062866f - rfx_asin_poly(x, x * x)) - 4.371139e-8f;
}
"
            }
            Helper::Scale2 => {
                "// z * 2^n for z in [0.5, 2] and n in [-151, 128], as two products by powers of two built
// from the bits: exact unless the result is subnormal, then rounded once (WGSL's `ldexp` may
// flush subnormal results).
fn rfx_scale2(z: f32, n: i32) -> f32 {
    let n1 = n / 2;
    let n2 = n - n1;
    return z * bitcast<f32>(u32(n1 + 127) << 23u) * bitcast<f32>(u32(n2 + 127) << 23u);
}
"
            }
            Helper::ExpF32 => {
                "// exp: Cephes expf (x = n ln2 + r, ln2 in two parts, the first of 9 bits so n * part is
// exact; a degree-6 polynomial), about 1 ULP, subnormal results included. Built-ins: 59 ULP
// on lavapipe.
fn rfx_exp_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return x;
    }
    if (x > 88.72283f) {
        return bitcast<f32>(0x7f800000u);
    }
    if (x < -104.0f) {
        return 0.0f;
    }
    let n = floor(x * 1.44269504088896341f + 0.5f);
    var r = rfx_exact(x) - n * 0.693359375f;
    r = rfx_exact(r) - n * -2.12194440e-4f;
    let p = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r
        + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * (r * r) + r + 1.0f;
    return rfx_scale2(p, i32(n));
}
"
            }
            Helper::Exp2F32 => {
                "// exp2: Cephes exp2f (x = n + r, |r| <= 1/2 exactly; a degree-6 polynomial), about 1 ULP,
// subnormal results included. Built-ins flush subnormal results.
fn rfx_exp2_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return x;
    }
    if (x >= 128.0f) {
        return bitcast<f32>(0x7f800000u);
    }
    if (x < -151.0f) {
        return 0.0f;
    }
    let n = floor(x + 0.5f);
    return rfx_scale2(rfx_exp2_poly(rfx_exact(x) - n), i32(n));
}
"
            }
            Helper::Exp2Poly => {
                "// 2^r for |r| <= 1/2: Cephes exp2f's degree-6 polynomial.
fn rfx_exp2_poly(r: f32) -> f32 {
    return r * (((((1.535336188319500e-4f * r + 1.339887440266574e-3f) * r + 9.618437357674640e-3f) * r
        + 5.550332471162809e-2f) * r + 2.402264791363012e-1f) * r + 6.931472028550421e-1f) + 1.0f;
}
"
            }
            Helper::Trig => {
                "// sin, cos and tan for finite x: x = j pi/2 + r with |r| <= pi/4, then Cephes' polynomials
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
"
            }
            Helper::SinF32 => {
                "fn rfx_sin_f32(x: f32) -> f32 {
    if (rfx_trig_fallback(x)) {
        return sin(x);
    }
    let t = rfx_trig(x);
    let v = select(t.s, t.c, (t.q & 1u) == 1u);
    return select(v, -v, t.q >= 2u);
}
"
            }
            Helper::CosF32 => {
                "fn rfx_cos_f32(x: f32) -> f32 {
    if (rfx_trig_fallback(x)) {
        return cos(x);
    }
    let t = rfx_trig(x);
    let v = select(t.c, t.s, (t.q & 1u) == 1u);
    return select(v, -v, t.q == 1u || t.q == 2u);
}
"
            }
            Helper::TanF32 => {
                "fn rfx_tan_f32(x: f32) -> f32 {
    if (rfx_trig_fallback(x)) {
        return tan(x);
    }
    let t = rfx_trig(x);
    let odd = (t.q & 1u) == 1u;
    return select(t.s, -t.c, odd) / select(t.c, t.s, odd);
}
"
            }
            Helper::LogParts => {
                "// Cephes logf's core for finite x > 0: x = 2^e (1 + m) with 1 + m in [sqrt(1/2), sqrt(2)),
// log(1 + m) = m + y. GPU built-ins compute log with an absolute, not relative, error near 1
// (lavapipe: log(0.99999994) off by 70%), so rfx computes log and log2 itself (about 1 ULP).
struct RfxLogParts {
    e: f32,
    m: f32,
    y: f32,
}

fn rfx_log_parts(x: f32) -> RfxLogParts {
    var bits = bitcast<u32>(x);
    var e = -126;
    // Subnormals scaled by 2^23 on the bits' integer value: exact, and no flush can touch it.
    if (bits < 0x00800000u) {
        bits = bitcast<u32>(f32(bits) * 0x1p-126f);
        e = e - 23;
    }
    e = e + i32(bits >> 23u);
    var m = bitcast<f32>((bits & 0x007fffffu) | 0x3f000000u);
    if (m < 0.70710678118654752f) {
        e = e - 1;
        m = m + m - 1.0f;
    } else {
        m = m - 1.0f;
    }
    let z = m * m;
    let p = (((((((7.0376836292e-2f * m - 1.1514610310e-1f) * m + 1.1676998740e-1f) * m
        - 1.2420140846e-1f) * m + 1.4249322787e-1f) * m - 1.6668057665e-1f) * m
        + 2.0000714765e-1f) * m - 2.4999993993e-1f) * m + 3.3333331174e-1f;
    return RfxLogParts(f32(e), m, m * z * p - 0.5f * z);
}
"
            }
            Helper::LogF32 => {
                "// log: -Inf at ±0, NaN below 0 and for NaN, +Inf at +Inf, else Cephes logf.
fn rfx_log_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) == 0u) {
        return bitcast<f32>(0xff800000u);
    }
    if (bits >= 0x7f800000u) {
        return select(bitcast<f32>(0x7fc00000u), x, bits == 0x7f800000u);
    }
    let p = rfx_log_parts(x);
    return (p.m + (p.y - 2.12194440e-4f * p.e)) + 0.693359375f * p.e;
}
"
            }
            Helper::Log2F32 => {
                "// log2: the special values of log, else Cephes log2f (exact at powers of two).
fn rfx_log2_f32(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if ((bits & 0x7fffffffu) == 0u) {
        return bitcast<f32>(0xff800000u);
    }
    if (bits >= 0x7f800000u) {
        return select(bitcast<f32>(0x7fc00000u), x, bits == 0x7f800000u);
    }
    let p = rfx_log_parts(x);
    let log2ea = 0.44269504088896340736f;
    return (((p.y * log2ea + p.m * log2ea) + p.y) + p.m) + p.e;
}
"
            }
            Helper::ErfF32 => {
                "// erf: musl's erff (FreeBSD's s_erff.c), its four intervals by |x|, rfx's exp from 1.25 on.
fn rfx_erf_f32(x: f32) -> f32 {
    if (rfx_isnan(x)) {
        return x;
    }
    let ax = abs(x);
    if (ax < 0.84375f) {
        if (ax < 0x1p-28f) {
            return 0.125f * (8.0f * x + 1.0270333290e+00f * x);
        }
        let z = x * x;
        let r = 1.2837916613e-01f + z * (-3.2504209876e-01f + z * (-2.8481749818e-02f
            + z * (-5.7702702470e-03f + z * -2.3763017452e-05f)));
        let s = 1.0f + z * (3.9791721106e-01f + z * (6.5022252500e-02f + z * (5.0813062117e-03f
            + z * (1.3249473704e-04f + z * -3.9602282413e-06f))));
        return x + x * (r / s);
    }
    var y = 1.0f;
    if (ax < 1.25f) {
        let s = ax - 1.0f;
        let p = -2.3621185683e-03f + s * (4.1485610604e-01f + s * (-3.7220788002e-01f
            + s * (3.1834661961e-01f + s * (-1.1089469492e-01f + s * (3.5478305072e-02f
            + s * -2.1663755178e-03f)))));
        let q = 1.0f + s * (1.0642088205e-01f + s * (5.4039794207e-01f + s * (7.1828655899e-02f
            + s * (1.2617121637e-01f + s * (1.3637083583e-02f + s * 1.1984500103e-02f)))));
        y = 8.4506291151e-01f + p / q;
    } else if (ax < 6.0f) {
        let s = 1.0f / (ax * ax);
        var r = 0.0f;
        var q = 0.0f;
        if (ax < bitcast<f32>(0x4036db6du)) {
            r = -9.8649440333e-03f + s * (-6.9385856390e-01f + s * (-1.0558626175e+01f
                + s * (-6.2375331879e+01f + s * (-1.6239666748e+02f + s * (-1.8460508728e+02f
                + s * (-8.1287437439e+01f + s * -9.8143291473e+00f))))));
            q = 1.0f + s * (1.9651271820e+01f + s * (1.3765776062e+02f + s * (4.3456588745e+02f
                + s * (6.4538726807e+02f + s * (4.2900814819e+02f + s * (1.0863500214e+02f
                + s * (6.5702495575e+00f + s * -6.0424413532e-02f)))))));
        } else {
            r = -9.8649431020e-03f + s * (-7.9928326607e-01f + s * (-1.7757955551e+01f
                + s * (-1.6063638306e+02f + s * (-6.3756646729e+02f + s * (-1.0250950928e+03f
                + s * -4.8351919556e+02f)))));
            q = 1.0f + s * (3.0338060379e+01f + s * (3.2579251099e+02f + s * (1.5367296143e+03f
                + s * (3.1998581543e+03f + s * (2.5530502930e+03f + s * (4.7452853394e+02f
                + s * -2.2440952301e+01f))))));
        }
        // z: |x| cut to 11 significant bits, so that z * z is exact.
        let z = bitcast<f32>(bitcast<u32>(ax) & 0xffffe000u);
        y = 1.0f - rfx_exp_f32(-z * z - 0.5625f) * rfx_exp_f32((z - ax) * (z + ax) + r / q) / ax;
    }
    return bitcast<f32>(bitcast<u32>(y) | (bitcast<u32>(x) & 0x80000000u));
}
"
            }
            Helper::F32ToI32 => {
                "// Truncation toward zero, saturating, NaN -> 0 (Rust's `as`).
fn rfx_f32_to_i32(x: f32) -> i32 {
    if (rfx_isnan(x)) {
        return 0;
    }
    if (x >= 2147483648.0f) {
        return 2147483647;
    }
    if (x <= -2147483648.0f) {
        return bitcast<i32>(0x80000000u);
    }
    return i32(x);
}
"
            }
            Helper::DivI32 => {
                "// Floor division (NumPy //); x / 0 = 0; i32::MIN / -1 wraps.
fn rfx_div_i32(a: i32, b: i32) -> i32 {
    if (b == 0) {
        return 0;
    }
    if (b == -1) {
        return bitcast<i32>(0u - bitcast<u32>(a));
    }
    let q = a / b;
    let r = a - q * b;
    return select(q, q - 1, r != 0 && ((r < 0) != (b < 0)));
}
"
            }
            Helper::FmodI32 => {
                "// Truncated remainder; x fmod 0 = 0 and x fmod -1 = 0 (no overflow).
fn rfx_fmod_i32(a: i32, b: i32) -> i32 {
    return a % select(b, 1, b == 0 || b == -1);
}
"
            }
        }
    }
}

/// C fmod, exact and loop-free (llvmpipe budgets loop iterations per invocation): with
/// `|x| = mx 2^(ex-150)` and `|y| = my 2^(ey-150)`, the result is `((mx 2^(ex-ey)) mod my)
/// 2^(ey-150)`, computed by integer remainders 8 bits at a time (`r < my <= 2^24`, so `r << 8`
/// fits a u32), then rebuilt exactly (fmod's result is always representable).
const FMOD_F32: &str = "// C fmod, exact: integer remainders of the significands, 8 exponent bits per step.
fn rfx_fmod_f32(x: f32, y: f32) -> f32 {
    let ux = bitcast<u32>(x);
    let sx = ux & 0x80000000u;
    let ax = ux & 0x7fffffffu;
    let ay = bitcast<u32>(y) & 0x7fffffffu;
    if (ay == 0u || ay > 0x7f800000u || ax >= 0x7f800000u) {
        return bitcast<f32>(0x7fc00000u);
    }
    if (ax < ay) {
        return x;
    }
    if (ax == ay) {
        return bitcast<f32>(sx);
    }
    let ex = max(i32(ax >> 23u), 1);
    let ey = max(i32(ay >> 23u), 1);
    let mx = select(ax, (ax & 0x007fffffu) | 0x00800000u, ax >= 0x00800000u);
    let my = select(ay, (ay & 0x007fffffu) | 0x00800000u, ay >= 0x00800000u);
    let d = u32(ex - ey);
    var r = (mx << (d & 7u)) % my;
    let steps = d >> 3u;
    if (steps > 0u) { r = (r << 8u) % my; }
    if (steps > 1u) { r = (r << 8u) % my; }
    if (steps > 2u) { r = (r << 8u) % my; }
    if (steps > 3u) { r = (r << 8u) % my; }
    if (steps > 4u) { r = (r << 8u) % my; }
    if (steps > 5u) { r = (r << 8u) % my; }
    if (steps > 6u) { r = (r << 8u) % my; }
    if (steps > 7u) { r = (r << 8u) % my; }
    if (steps > 8u) { r = (r << 8u) % my; }
    if (steps > 9u) { r = (r << 8u) % my; }
    if (steps > 10u) { r = (r << 8u) % my; }
    if (steps > 11u) { r = (r << 8u) % my; }
    if (steps > 12u) { r = (r << 8u) % my; }
    if (steps > 13u) { r = (r << 8u) % my; }
    if (steps > 14u) { r = (r << 8u) % my; }
    if (steps > 15u) { r = (r << 8u) % my; }
    if (steps > 16u) { r = (r << 8u) % my; }
    if (steps > 17u) { r = (r << 8u) % my; }
    if (steps > 18u) { r = (r << 8u) % my; }
    if (steps > 19u) { r = (r << 8u) % my; }
    if (steps > 20u) { r = (r << 8u) % my; }
    if (steps > 21u) { r = (r << 8u) % my; }
    if (steps > 22u) { r = (r << 8u) % my; }
    if (steps > 23u) { r = (r << 8u) % my; }
    if (steps > 24u) { r = (r << 8u) % my; }
    if (steps > 25u) { r = (r << 8u) % my; }
    if (steps > 26u) { r = (r << 8u) % my; }
    if (steps > 27u) { r = (r << 8u) % my; }
    if (steps > 28u) { r = (r << 8u) % my; }
    if (steps > 29u) { r = (r << 8u) % my; }
    if (steps > 30u) { r = (r << 8u) % my; }
    if (r == 0u) {
        return bitcast<f32>(sx);
    }
    let shift = i32(countLeadingZeros(r)) - 8;
    let e = ey - shift;
    if (e >= 1) {
        return bitcast<f32>(sx | (u32(e) << 23u) | ((r << u32(shift)) & 0x007fffffu));
    }
    return bitcast<f32>(sx | (r << u32(ey - 1)));
}
";

/// The WGSL type a value of `dtype` has in registers.
fn value_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "bool",
        DType::I32 => "i32",
        DType::F32 | DType::F64 => "f32",
    }
}

/// The WGSL element type of a storage buffer of `dtype` (bool is not host-shareable: u32 0/1).
fn storage_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "u32",
        DType::I32 => "i32",
        DType::F32 | DType::F64 => "f32",
    }
}

/// An exact WGSL expression for an `f32`: a decimal literal when the shortest decimal is the
/// value exactly (2.0, 0.5, -3.25), else the bits through `bitcast` (NaN, ±Inf, -0, 0.1, ...).
fn f32_literal(v: f32) -> String {
    let text = format!("{v:?}");
    let exact = v.is_finite()
        && v.to_bits() != 0x8000_0000
        && (v == 0.0 || v.abs() >= f32::MIN_POSITIVE)
        && text.parse::<f64>().is_ok_and(|d| d == f64::from(v))
        && !text.contains('e');
    if exact {
        format!("{text}f")
    } else {
        format!("bitcast<f32>(0x{:08x}u)", v.to_bits())
    }
}

fn i32_literal(v: i32) -> String {
    if v == i32::MIN {
        "bitcast<i32>(0x80000000u)".to_string()
    } else {
        format!("{v}i")
    }
}

fn scalar_literal(value: Scalar) -> String {
    match value {
        Scalar::Bool(b) => b.to_string(),
        Scalar::I32(v) => i32_literal(v),
        Scalar::F32(v) => f32_literal(v),
        // Rejected by `check_supported` before code generation.
        Scalar::F64(v) => f32_literal(v as f32),
    }
}

struct Emitter<'a> {
    program: &'a LirProgram,
    helpers: BTreeSet<Helper>,
}

fn slot(s: SlotId) -> String {
    format!("s{}", s.index())
}

fn compile_error(message: String) -> BackendError {
    BackendError::Compile {
        backend: BACKEND,
        message,
    }
}

impl Emitter<'_> {
    fn use_helper(&mut self, helper: Helper) -> &'static str {
        for dep in helper.deps() {
            self.helpers.insert(*dep);
        }
        self.helpers.insert(helper);
        match helper {
            Helper::Exact => "rfx_exact",
            Helper::IsNan => "rfx_isnan",
            Helper::MinF32 => "rfx_min_f32",
            Helper::MaxF32 => "rfx_max_f32",
            Helper::SignF32 => "rfx_sign_f32",
            Helper::FmodF32 => "rfx_fmod_f32",
            Helper::PowF32 => "rfx_pow_f32",
            Helper::SigmoidF32 => "rfx_sigmoid_f32",
            Helper::Atan2F32 => "rfx_atan2_f32",
            Helper::TanhF32 => "rfx_tanh_f32",
            Helper::AtanF32 => "rfx_atan_f32",
            Helper::AsinPoly => "rfx_asin_poly",
            Helper::AsinF32 => "rfx_asin_f32",
            Helper::AcosF32 => "rfx_acos_f32",
            Helper::Scale2 => "rfx_scale2",
            Helper::ExpF32 => "rfx_exp_f32",
            Helper::Exp2F32 => "rfx_exp2_f32",
            Helper::Exp2Poly => "rfx_exp2_poly",
            Helper::DoubleF32 => "rfx_two_prod",
            Helper::Log2Dd => "rfx_log2_dd",
            Helper::Trig => "rfx_trig",
            Helper::SinF32 => "rfx_sin_f32",
            Helper::CosF32 => "rfx_cos_f32",
            Helper::TanF32 => "rfx_tan_f32",
            Helper::LogParts => "rfx_log_parts",
            Helper::LogF32 => "rfx_log_f32",
            Helper::Log2F32 => "rfx_log2_f32",
            Helper::ErfF32 => "rfx_erf_f32",
            Helper::F32ToI32 => "rfx_f32_to_i32",
            Helper::DivI32 => "rfx_div_i32",
            Helper::FmodI32 => "rfx_fmod_i32",
        }
    }

    fn buffer_dtype(&self, buf: rfx_ir::BufId) -> Result<DType, BackendError> {
        self.program
            .buffer(buf)
            .map(|b| b.ty.dtype)
            .ok_or_else(|| compile_error(format!("unknown buffer {buf}")))
    }

    /// The expression of a unary op on `x` of `dtype`.
    fn unary(&mut self, op: UnaryOp, dtype: DType, x: &str) -> String {
        if dtype == DType::I32 {
            return match op {
                UnaryOp::Neg => format!("bitcast<i32>(0u - bitcast<u32>({x}))"),
                UnaryOp::Abs => format!("select({x}, bitcast<i32>(0u - bitcast<u32>({x})), {x} < 0i)"),
                _ => format!("sign({x})"),
            };
        }
        if dtype == DType::Bool {
            return format!("!{x}");
        }
        // The operand of a rounding op goes through `rfx_exact`, so the driver cannot see which
        // op produced it: NIR rewrites `sqrt(exp2(a))` to `exp2(0.5 * a)` and `exp2(log2(a))`
        // to `a` (found by `rfx fuzz` on lavapipe), which are neither exact nor NaN-correct.
        let opaque;
        let x = if op.is_transcendental() || matches!(op, UnaryOp::Sqrt | UnaryOp::Rsqrt) {
            opaque = format!("{}({x})", self.use_helper(Helper::Exact));
            opaque.as_str()
        } else {
            x
        };
        match op {
            UnaryOp::Neg => format!("-{x}"),
            // The sign bit cleared, not `abs`: Mesa folds `abs(sqrt(x))` to `sqrt(x)`, wrong
            // for x = -0 (sqrt(-0) = -0, abs must give +0; found by `rfx fuzz` on lavapipe).
            UnaryOp::Abs => format!("bitcast<f32>(bitcast<u32>({x}) & 0x7fffffffu)"),
            UnaryOp::Sign => format!("{}({x})", self.use_helper(Helper::SignF32)),
            UnaryOp::Floor => format!("floor({x})"),
            UnaryOp::Ceil => format!("ceil({x})"),
            // WGSL's `round` rounds half to even.
            UnaryOp::Round => format!("round({x})"),
            UnaryOp::Sqrt => format!("sqrt({x})"),
            // Kept as divisions (NIR would make them approximate `frsq`/`frcp`).
            UnaryOp::Rsqrt => format!("1.0f / {}(sqrt({x}))", self.use_helper(Helper::Exact)),
            UnaryOp::Recip => format!("1.0f / {}({x})", self.use_helper(Helper::Exact)),
            UnaryOp::Exp => format!("{}({x})", self.use_helper(Helper::ExpF32)),
            UnaryOp::Exp2 => format!("{}({x})", self.use_helper(Helper::Exp2F32)),
            UnaryOp::Log => format!("{}({x})", self.use_helper(Helper::LogF32)),
            UnaryOp::Log2 => format!("{}({x})", self.use_helper(Helper::Log2F32)),
            // Odd functions are `x` itself, correctly rounded, below 2^-12: this keeps -0 and
            // subnormal arguments, which GPU built-ins may flush or lose the sign of.
            UnaryOp::Sin => small_odd(self.use_helper(Helper::SinF32), x),
            UnaryOp::Cos => format!("{}({x})", self.use_helper(Helper::CosF32)),
            UnaryOp::Tan => small_odd(self.use_helper(Helper::TanF32), x),
            UnaryOp::Tanh => format!("{}({x})", self.use_helper(Helper::TanhF32)),
            UnaryOp::Atan => format!(
                "select({}, {x}, {}({x}))",
                small_odd(self.use_helper(Helper::AtanF32), x),
                self.use_helper(Helper::IsNan)
            ),
            UnaryOp::Asin => small_odd(self.use_helper(Helper::AsinF32), x),
            UnaryOp::Acos => format!("{}({x})", self.use_helper(Helper::AcosF32)),
            UnaryOp::Sigmoid => format!("{}({x})", self.use_helper(Helper::SigmoidF32)),
            UnaryOp::Erf => format!("{}({x})", self.use_helper(Helper::ErfF32)),
            UnaryOp::Not => format!("!{x}"),
        }
    }

    /// The expression of a binary op on `a`, `b` of `dtype`.
    fn binary(&mut self, op: BinaryOp, dtype: DType, a: &str, b: &str) -> String {
        match dtype {
            DType::Bool => match op {
                BinaryOp::Or => format!("{a} || {b}"),
                _ => format!("{a} && {b}"),
            },
            // i32 arithmetic wraps; done on u32 so that no backend sees signed overflow (UB in MSL).
            DType::I32 => match op {
                BinaryOp::Add => format!("bitcast<i32>(bitcast<u32>({a}) + bitcast<u32>({b}))"),
                BinaryOp::Sub => format!("bitcast<i32>(bitcast<u32>({a}) - bitcast<u32>({b}))"),
                BinaryOp::Mul => format!("bitcast<i32>(bitcast<u32>({a}) * bitcast<u32>({b}))"),
                BinaryOp::Div => format!("{}({a}, {b})", self.use_helper(Helper::DivI32)),
                BinaryOp::Fmod => format!("{}({a}, {b})", self.use_helper(Helper::FmodI32)),
                BinaryOp::Min => format!("min({a}, {b})"),
                _ => format!("max({a}, {b})"),
            },
            DType::F32 | DType::F64 => match op {
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
                    let sym = match op {
                        BinaryOp::Add => "+",
                        BinaryOp::Sub => "-",
                        BinaryOp::Mul => "*",
                        _ => "/",
                    };
                    self.use_helper(Helper::Exact);
                    format!("rfx_exact({a}) {sym} rfx_exact2({b})")
                }
                BinaryOp::Pow => {
                    self.use_helper(Helper::Exact);
                    format!(
                        "{}(rfx_exact({a}), rfx_exact2({b}))",
                        self.use_helper(Helper::PowF32)
                    )
                }
                BinaryOp::Min => format!("{}({a}, {b})", self.use_helper(Helper::MinF32)),
                BinaryOp::Max => format!("{}({a}, {b})", self.use_helper(Helper::MaxF32)),
                BinaryOp::Atan2 => {
                    self.use_helper(Helper::Exact);
                    format!(
                        "{}(rfx_exact({a}), rfx_exact2({b}))",
                        self.use_helper(Helper::Atan2F32)
                    )
                }
                BinaryOp::Fmod => format!("{}({a}, {b})", self.use_helper(Helper::FmodF32)),
                BinaryOp::And => format!("{a} && {b}"),
                BinaryOp::Or => format!("{a} || {b}"),
            },
        }
    }

    fn compare(op: CmpOp, dtype: DType, a: &str, b: &str) -> String {
        match op {
            CmpOp::Lt => format!("{a} < {b}"),
            CmpOp::Le => format!("{a} <= {b}"),
            CmpOp::Gt => format!("{a} > {b}"),
            CmpOp::Ge => format!("{a} >= {b}"),
            CmpOp::Eq => format!("{a} == {b}"),
            // `!(a == b)` is true for NaN whichever way the target orders `!=`.
            CmpOp::Ne if dtype.is_float() => format!("!({a} == {b})"),
            CmpOp::Ne => format!("{a} != {b}"),
        }
    }

    fn cast(&mut self, from: DType, to: DType, x: &str) -> String {
        match (from, to) {
            _ if from == to => x.to_string(),
            (DType::Bool, DType::I32) => format!("select(0i, 1i, {x})"),
            (DType::Bool, _) => format!("select(0.0f, 1.0f, {x})"),
            (DType::I32, DType::Bool) => format!("{x} != 0i"),
            (DType::I32, _) => format!("f32({x})"),
            // NaN → true, ±0 → false.
            (_, DType::Bool) => format!("(bitcast<u32>({x}) & 0x7fffffffu) != 0u"),
            (_, DType::I32) => format!("{}({x})", self.use_helper(Helper::F32ToI32)),
            _ => x.to_string(),
        }
    }

    fn combine(&mut self, op: ReduceOp, dtype: DType, acc: &str, x: &str) -> String {
        let binary_op = match op {
            ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        };
        self.binary(binary_op, dtype, acc, x)
    }
}

/// `f(x)`, or `x` where `|x| < 2^-12` (where `f(x) = x + O(x^3)` rounds to `x`).
fn small_odd(f: &str, x: &str) -> String {
    format!("select({f}({x}), {x}, abs({x}) < 0x1p-12f)")
}

/// The element index `sum(i_d * stride_d)` as WGSL.
fn index_expr(strides: &[usize]) -> String {
    let terms: Vec<String> = strides
        .iter()
        .enumerate()
        .filter(|(_, s)| **s != 0)
        .map(|(d, s)| {
            if *s == 1 {
                format!("i{d}")
            } else {
                format!("i{d} * {s}u")
            }
        })
        .collect();
    if terms.is_empty() {
        "0u".to_string()
    } else {
        terms.join(" + ")
    }
}

fn product(dims: &[usize]) -> u64 {
    dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d as u64))
}

/// Generates the WGSL module of `program`. The program must verify and use no `f64`.
pub(crate) fn generate(program: &LirProgram) -> Result<Shader, BackendError> {
    check_supported(program)?;
    let mut emitter = Emitter {
        program,
        helpers: BTreeSet::new(),
    };
    let mut kernels_text = String::new();
    let mut layouts = Vec::new();
    let mut used_names = BTreeSet::new();
    for (index, kernel) in program.kernels().iter().enumerate() {
        let mut entry = format!("rfx_{}", kernel.name);
        if !used_names.insert(entry.clone()) {
            entry = format!("rfx_{}_{index}", kernel.name);
            used_names.insert(entry.clone());
        }
        let layout = emit_kernel(&mut emitter, kernel, &entry, &mut kernels_text)?;
        layouts.push(layout);
    }
    let mut source = String::new();
    let w = &mut source;
    let _ = writeln!(
        w,
        "// rfx program `{}`: WGSL from rfx-codegen-metal.",
        program.name()
    );
    let _ = writeln!(w, "var<private> rfx_zero: u32;");
    let used: BTreeSet<usize> = layouts.iter().flat_map(|l| l.bindings.iter().copied()).collect();
    for (i, buffer) in program.buffers().iter().enumerate() {
        if !used.contains(&i) {
            continue;
        }
        let (access, what) = match &buffer.storage {
            Storage::Input { name } => ("read", format!("input `{name}`")),
            Storage::Output { name } => ("read_write", format!("output `{name}`")),
            Storage::Arena { offset } => ("read_write", format!("temporary (arena offset {offset})")),
            Storage::Literal { .. } => ("read", "literal data".to_string()),
        };
        // Fixed-size arrays: shapes are static, so neither wgpu's bounds checks nor the MSL need
        // a buffer-sizes table.
        let _ = writeln!(
            w,
            "@group(0) @binding({i}) var<storage, {access}> buf{i}: array<{}, {}>; // {what}: {}",
            storage_type(buffer.ty.dtype),
            buffer.ty.shape.numel().max(1),
            buffer.ty,
        );
    }
    let mut all_helpers = emitter.helpers.clone();
    for h in &emitter.helpers {
        all_helpers.extend(h.deps().iter().copied());
    }
    for helper in all_helpers {
        let _ = writeln!(w);
        w.push_str(helper.source());
    }
    source.push_str(&kernels_text);
    Ok(Shader {
        source,
        kernels: layouts,
    })
}

fn emit_kernel(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    entry: &str,
    out: &mut String,
) -> Result<KernelLayout, BackendError> {
    let rank = kernel.dims.len();
    // A kernel with scans has one unit per row of its innermost (scanned) dim.
    let split = match kernel.scan {
        Some(_) => rank.saturating_sub(1),
        None => rank.saturating_sub(kernel.reduce_dims),
    };
    let (leading, reduced) = kernel.dims.split_at(split);
    let units = product(leading);
    let reduced_numel = product(reduced);
    // Elementwise kernels without reduced dims: one unit per point.
    let runs_body = units > 0 && reduced_numel > 0;
    if units > u64::from(u32::MAX) {
        return Err(unsupported(Unsupported::Size {
            what: "points of a kernel's leading dims",
            size: usize::try_from(units).unwrap_or(usize::MAX),
            limit: u32::MAX as usize,
        }));
    }
    let total_groups = units.div_ceil(u64::from(WORKGROUP_SIZE));
    let groups_x = total_groups.min(MAX_GROUPS_PER_DIM);
    let groups_y = if groups_x == 0 {
        0
    } else {
        total_groups.div_ceil(groups_x)
    };
    let grid_row = groups_x * u64::from(WORKGROUP_SIZE);
    let has_reduce = kernel.body.iter().any(|i| matches!(i, Inst::Reduce { .. }));
    // Lowering decides which reductions run as workgroup trees (`Schedule::gpu_tree`); smaller
    // ones are folded by one invocation in the LIR `lanes` order.
    if has_reduce && units > 0 && kernel.schedule.gpu_tree && split < rank {
        return emit_tree_kernel(em, kernel, entry, out);
    }
    let mut bindings = BTreeSet::new();

    let mut body = String::new();
    let b = &mut body;
    let _ = writeln!(b);
    let _ = writeln!(
        b,
        "// kernel `{}`: dims {:?}, {} reduced, lanes {}.",
        kernel.name, kernel.dims, kernel.reduce_dims, kernel.schedule.reduce_lanes
    );
    let _ = writeln!(b, "@compute @workgroup_size({WORKGROUP_SIZE})");
    let _ = writeln!(b, "fn {entry}(@builtin(global_invocation_id) gid: vec3<u32>) {{");
    if groups_y > 1 {
        let _ = writeln!(b, "    let unit = gid.x + gid.y * {grid_row}u;");
    } else {
        let _ = writeln!(b, "    let unit = gid.x;");
    }
    let _ = writeln!(b, "    rfx_zero = gid.z;");
    let _ = writeln!(b, "    if (unit >= {units}u) {{");
    let _ = writeln!(b, "        return;");
    let _ = writeln!(b, "    }}");

    if !runs_body {
        // An empty reduction: every reduce writes its finished identity; nothing else runs.
        if units > 0 {
            for inst in &kernel.body {
                if let Inst::Reduce { op, buf, .. } = inst {
                    let dtype = em.buffer_dtype(*buf)?;
                    let value = reduce_identity(*op, dtype)
                        .and_then(|id| reduce_finish(*op, id, 0))
                        .ok_or_else(|| compile_error(format!("reduce {op} on {dtype}")))?;
                    bindings.insert(buf.index());
                    let _ = writeln!(
                        b,
                        "    buf{}[unit] = {};",
                        buf.index(),
                        store_value(dtype, &scalar_literal(value))
                    );
                }
            }
        }
        let _ = writeln!(b, "}}");
        out.push_str(&body);
        return Ok(KernelLayout {
            entry: entry.to_string(),
            units,
            groups: (groups_x as u32, groups_y as u32),
            bindings: bindings.into_iter().collect(),
            loop_iterations: 0,
        });
    }

    emit_unit_prologue(em, kernel, split, &mut bindings, b)?;
    if let Some(order) = kernel.scan {
        emit_scan_loop(em, kernel, order, &mut bindings, b)?;
    } else if !has_reduce {
        // Elementwise: the unit is the point.
        emit_body(em, kernel, "    ", None, &mut bindings, b)?;
    } else {
        emit_reduction_loops(em, kernel, split, reduced_numel, &mut bindings, b)?;
    }
    let _ = writeln!(b, "}}");
    out.push_str(&body);
    Ok(KernelLayout {
        entry: entry.to_string(),
        units,
        groups: (groups_x as u32, groups_y as u32),
        bindings: bindings.into_iter().collect(),
        loop_iterations: loop_iterations(kernel),
    })
}

/// The slot declarations, the preamble, and the leading indices `i0..i{split}` unravelled from
/// `unit` (innermost first): the start of every entry point after its `unit` guard.
fn emit_unit_prologue(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    split: usize,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
) -> Result<(), BackendError> {
    for (i, dtype) in kernel.slots.iter().enumerate() {
        let _ = writeln!(b, "    var s{i}: {};", value_type(*dtype));
    }
    if !kernel.preamble.is_empty() {
        let _ = writeln!(b, "    // preamble");
        for inst in &kernel.preamble {
            emit_inst(em, kernel, inst, "    ", bindings, b)?;
        }
    }
    if split > 0 {
        let _ = writeln!(b, "    var rest = unit;");
        for d in (0..split).rev() {
            let size = kernel.dims[d];
            if d == 0 {
                let _ = writeln!(b, "    let i0 = rest;");
            } else if size == 1 {
                let _ = writeln!(b, "    let i{d} = 0u;");
            } else {
                let _ = writeln!(b, "    let i{d} = rest % {size}u;");
                let _ = writeln!(b, "    rest = rest / {size}u;");
            }
        }
    }
    Ok(())
}

/// A kernel whose reductions run as workgroup trees: one workgroup of [`WORKGROUP_SIZE`]
/// invocations per unit (leading point). Invocation `l` folds, in increasing order, the reduced
/// points `r ≡ l (mod 64)` (row-major over the reduced dims, so neighbouring invocations read
/// neighbouring addresses); the 64 totals are then combined in workgroup memory by a fixed
/// tree (`v[l] ⊕= v[l + s]` for s = 32, 16, ..., 1, lower index on the left) and invocation 0
/// stores the result. The order depends only on the shape: results are deterministic, float
/// sums are within `(ceil(points / 64) + 6) · u · Σ|x|` of the exact sum, i32 reductions and
/// `max`/`min` give the interpreter's bits (a ±0 tie may keep either zero).
fn emit_tree_kernel(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    entry: &str,
    out: &mut String,
) -> Result<KernelLayout, BackendError> {
    let rank = kernel.dims.len();
    let split = rank.saturating_sub(kernel.reduce_dims);
    let (leading, reduced) = kernel.dims.split_at(split);
    let units = product(leading);
    let points = product(reduced);
    let groups_x = units.min(MAX_GROUPS_PER_DIM);
    let groups_y = units.div_ceil(groups_x.max(1));
    let mut bindings = BTreeSet::new();
    let mut b = String::new();
    let wg = WORKGROUP_SIZE;
    let _ = writeln!(b);
    let mut reduces = Vec::new();
    for (k, inst) in kernel.body.iter().enumerate() {
        if let Inst::Reduce { op, buf, .. } = inst {
            let dtype = em.buffer_dtype(*buf)?;
            let identity = reduce_identity(*op, dtype)
                .ok_or_else(|| compile_error(format!("reduce {op} on {dtype}")))?;
            let _ = writeln!(
                b,
                "var<workgroup> {entry}_wg{k}: array<{}, {wg}>;",
                value_type(dtype)
            );
            reduces.push((k, *op, *buf, dtype, identity));
        }
    }
    let _ = writeln!(
        b,
        "// kernel `{}`: dims {:?}, {} reduced; a workgroup tree per unit ({units} unit(s) of {points} point(s)).",
        kernel.name, kernel.dims, kernel.reduce_dims
    );
    let _ = writeln!(b, "@compute @workgroup_size({wg})");
    let _ = writeln!(
        b,
        "fn {entry}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{"
    );
    if groups_y > 1 {
        let _ = writeln!(b, "    let unit = wid.x + wid.y * {groups_x}u;");
    } else {
        let _ = writeln!(b, "    let unit = wid.x;");
    }
    let _ = writeln!(b, "    rfx_zero = wid.z;");
    // `unit` is the same for the whole workgroup, so the barriers below stay in uniform
    // control flow.
    let _ = writeln!(b, "    if (unit >= {units}u) {{");
    let _ = writeln!(b, "        return;");
    let _ = writeln!(b, "    }}");
    emit_unit_prologue(em, kernel, split, &mut bindings, &mut b)?;
    for &(k, _, _, dtype, identity) in &reduces {
        let _ = writeln!(
            b,
            "    var acc{k}_0: {} = {};",
            value_type(dtype),
            scalar_literal(identity)
        );
    }
    let _ = writeln!(b, "    for (var r = lid; r < {points}u; r += {wg}u) {{");
    let _ = writeln!(b, "        var rr = r;");
    for d in (split..rank).rev() {
        let size = kernel.dims[d];
        if d == split {
            let _ = writeln!(b, "        let i{d} = rr;");
        } else {
            let _ = writeln!(b, "        let i{d} = rr % {size}u;");
            let _ = writeln!(b, "        rr = rr / {size}u;");
        }
    }
    emit_body(em, kernel, "        ", Some(0), &mut bindings, &mut b)?;
    let _ = writeln!(b, "    }}");
    for &(k, _, _, _, _) in &reduces {
        let _ = writeln!(b, "    {entry}_wg{k}[lid] = acc{k}_0;");
    }
    let _ = writeln!(b, "    workgroupBarrier();");
    let mut step = wg / 2;
    while step > 0 {
        let _ = writeln!(b, "    if (lid < {step}u) {{");
        for &(k, op, _, dtype, _) in &reduces {
            let value = em.combine(
                op,
                dtype,
                &format!("{entry}_wg{k}[lid]"),
                &format!("{entry}_wg{k}[lid + {step}u]"),
            );
            let _ = writeln!(b, "        {entry}_wg{k}[lid] = {value};");
        }
        let _ = writeln!(b, "    }}");
        let _ = writeln!(b, "    workgroupBarrier();");
        step /= 2;
    }
    let _ = writeln!(b, "    if (lid == 0u) {{");
    for &(k, op, buf, dtype, _) in &reduces {
        let mut total = format!("{entry}_wg{k}[0]");
        if op == ReduceOp::Mean {
            total = format!("{total} / {}", f32_literal(points as f32));
        }
        bindings.insert(buf.index());
        let _ = writeln!(
            b,
            "        buf{}[unit] = {};",
            buf.index(),
            store_value(dtype, &total)
        );
    }
    let _ = writeln!(b, "    }}");
    let _ = writeln!(b, "}}");
    out.push_str(&b);
    Ok(KernelLayout {
        entry: entry.to_string(),
        units,
        groups: (groups_x as u32, groups_y as u32),
        bindings: bindings.into_iter().collect(),
        loop_iterations: loop_iterations(kernel),
    })
}

/// The reduced points of one unit: loops over the outer reduced dims and, along the innermost
/// dim, blocks of `unroll` points written out one after the other (then the tail, also written
/// out). `unroll` is a multiple of the LIR's `lanes`, so each copy's partial accumulator is
/// known statically: a scalar variable `acc{inst}_{lane}`, no dynamically indexed array.
/// Unrolling also keeps the loop count per invocation low (llvmpipe ends an invocation's loops
/// after 65535 iterations in total; see [`loop_iterations`]).
fn emit_reduction_loops(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    split: usize,
    reduced_numel: u64,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
) -> Result<(), BackendError> {
    let rank = kernel.dims.len();
    let lanes = kernel.schedule.reduce_lanes.max(1);
    for (k, inst) in kernel.body.iter().enumerate() {
        if let Inst::Reduce { op, buf, .. } = inst {
            let dtype = em.buffer_dtype(*buf)?;
            let identity = reduce_identity(*op, dtype)
                .ok_or_else(|| compile_error(format!("reduce {op} on {dtype}")))?;
            let lit = scalar_literal(identity);
            let ty = value_type(dtype);
            for lane in 0..lanes {
                let _ = writeln!(b, "    var acc{k}_{lane}: {ty} = {lit};");
            }
        }
    }
    let mut indent = "    ".to_string();
    if split == rank {
        // A reduction over no dims (an axis of size 1 coalesced away): one point, lane 0.
        emit_body(em, kernel, "    ", Some(0), bindings, b)?;
    } else {
        emit_innermost(em, kernel, split, bindings, b, &mut indent)?;
    }
    for (k, inst) in kernel.body.iter().enumerate() {
        if let Inst::Reduce { op, buf, .. } = inst {
            let dtype = em.buffer_dtype(*buf)?;
            let _ = writeln!(b, "    var total{k} = acc{k}_0;");
            for lane in 1..lanes {
                let value = em.combine(*op, dtype, &format!("total{k}"), &format!("acc{k}_{lane}"));
                let _ = writeln!(b, "    total{k} = {value};");
            }
            let mut total = format!("total{k}");
            if *op == ReduceOp::Mean {
                total = format!("{total} / {}", f32_literal(reduced_numel as f32));
            }
            let _ = writeln!(
                b,
                "    buf{}[unit] = {};",
                buf.index(),
                store_value(dtype, &total)
            );
        }
    }
    Ok(())
}

/// Points per pass of a scan's loop (the copies of the body in one iteration): fewer loop
/// iterations per invocation (see [`loop_iterations`]).
const SCAN_UNROLL: u64 = 16;

/// The row of a kernel with scans (its innermost dim) run point by point in the kernel's scan
/// order, in blocks of [`SCAN_UNROLL`] points then the tail, each scan folding into a running
/// accumulator `scan{inst}` that starts at its op's identity: the interpreter's sequential
/// order, so its bits.
fn emit_scan_loop(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    order: ScanOrder,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
) -> Result<(), BackendError> {
    for (k, inst) in kernel.body.iter().enumerate() {
        if let Inst::Scan { op, dst, .. } = inst {
            let dtype = slot_dtype(kernel, *dst)?;
            let identity = reduce_identity(op.reduce_op(), dtype)
                .ok_or_else(|| compile_error(format!("{op} on {dtype}")))?;
            let _ = writeln!(
                b,
                "    var scan{k}: {} = {};",
                value_type(dtype),
                scalar_literal(identity)
            );
        }
    }
    let last = kernel.dims.len().saturating_sub(1);
    let size = kernel.dims.get(last).copied().unwrap_or(1) as u64;
    // The position of the row's step `step` in the scan's order.
    let position = |step: &str| match order {
        ScanOrder::Forward => step.to_string(),
        ScanOrder::Reverse => format!("{}u - ({step})", size.saturating_sub(1)),
    };
    let blocks = size / SCAN_UNROLL;
    if blocks > 0 {
        let _ = writeln!(b, "    for (var blk = 0u; blk < {blocks}u; blk += 1u) {{");
        for u in 0..SCAN_UNROLL {
            let _ = writeln!(b, "        {{");
            let _ = writeln!(
                b,
                "            let i{last} = {};",
                position(&format!("blk * {SCAN_UNROLL}u + {u}u"))
            );
            emit_body(em, kernel, "            ", None, bindings, b)?;
            let _ = writeln!(b, "        }}");
        }
        let _ = writeln!(b, "    }}");
    }
    for step in blocks * SCAN_UNROLL..size {
        let _ = writeln!(b, "    {{");
        let _ = writeln!(b, "        let i{last} = {};", position(&format!("{step}u")));
        emit_body(em, kernel, "        ", None, bindings, b)?;
        let _ = writeln!(b, "    }}");
    }
    Ok(())
}

/// The innermost reduced dim (blocks of `unroll` points, then the tail) inside loops over the
/// outer reduced dims.
fn emit_innermost(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    split: usize,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
    indent: &mut String,
) -> Result<(), BackendError> {
    let rank = kernel.dims.len();
    let lanes = kernel.schedule.reduce_lanes.max(1);
    let unroll = unroll_factor(lanes);
    for d in split..rank - 1 {
        let size = kernel.dims[d];
        let _ = writeln!(b, "{indent}for (var i{d} = 0u; i{d} < {size}u; i{d} += 1u) {{");
        indent.push_str("    ");
    }
    let last = rank - 1;
    let size = kernel.dims[last] as u64;
    let blocks = size / u64::from(unroll);
    if blocks > 0 {
        let _ = writeln!(b, "{indent}for (var blk = 0u; blk < {blocks}u; blk += 1u) {{");
        for u in 0..unroll {
            let inner = format!("{indent}    ");
            let _ = writeln!(b, "{inner}{{");
            let _ = writeln!(b, "{inner}    let i{last} = blk * {unroll}u + {u}u;");
            emit_body(em, kernel, &format!("{inner}    "), Some(u % lanes), bindings, b)?;
            let _ = writeln!(b, "{inner}}}");
        }
        let _ = writeln!(b, "{indent}}}");
    }
    for point in blocks * u64::from(unroll)..size {
        let _ = writeln!(b, "{indent}{{");
        let _ = writeln!(b, "{indent}    let i{last} = {point}u;");
        let lane = (point % u64::from(lanes)) as u32;
        emit_body(em, kernel, &format!("{indent}    "), Some(lane), bindings, b)?;
        let _ = writeln!(b, "{indent}}}");
    }
    for _ in split..rank - 1 {
        indent.truncate(indent.len() - 4);
        let _ = writeln!(b, "{indent}}}");
    }
    Ok(())
}

/// Points of the innermost reduced dim per loop iteration: a multiple of `lanes`, at least 16.
fn unroll_factor(lanes: u32) -> u32 {
    lanes * 16u32.div_ceil(lanes).max(1)
}

/// Loop iterations one invocation of `kernel` runs (the generated code's only loops are the
/// reduction loops). llvmpipe stops an invocation's loops after 65535 iterations in total, so
/// the runtime rejects kernels above that on llvmpipe rather than return wrong results.
pub(crate) fn loop_iterations(kernel: &LirKernel) -> u64 {
    if kernel.scan.is_some() {
        return kernel.dims.last().map_or(0, |&n| n as u64 / SCAN_UNROLL);
    }
    if kernel.reduce_dims == 0 {
        return 0;
    }
    let rank = kernel.dims.len();
    let split = rank - kernel.reduce_dims.min(rank);
    let points = product(&kernel.dims[split..]);
    if kernel.schedule.gpu_tree && product(&kernel.dims[..split]) > 0 && split < rank {
        // A workgroup tree: each invocation's one loop steps by the workgroup size.
        return points.div_ceil(u64::from(WORKGROUP_SIZE));
    }
    let unroll = u64::from(unroll_factor(kernel.schedule.reduce_lanes.max(1)));
    let mut outer = 1u64;
    let mut total = 0u64;
    for (d, &size) in kernel.dims.iter().enumerate().skip(split) {
        let iterations = if d == rank - 1 {
            size as u64 / unroll
        } else {
            size as u64
        };
        outer = outer.saturating_mul(iterations);
        total = total.saturating_add(outer);
    }
    total
}

/// The body at one point; `lane` is the partial accumulator its reductions combine into.
fn emit_body(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    indent: &str,
    lane: Option<u32>,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
) -> Result<(), BackendError> {
    for (k, inst) in kernel.body.iter().enumerate() {
        if let Inst::Reduce { op, buf, src } = inst {
            let dtype = em.buffer_dtype(*buf)?;
            bindings.insert(buf.index());
            let acc = format!("acc{k}_{}", lane.unwrap_or(0));
            let value = em.combine(*op, dtype, &acc, &slot(*src));
            let _ = writeln!(b, "{indent}{acc} = {value};");
        } else if let Inst::Scan { dst, op, src, coef } = inst {
            let dtype = slot_dtype(kernel, *src)?;
            let acc = format!("scan{k}");
            // A linear recurrence scales the accumulator first: `coef * acc + src`.
            let scaled = match coef {
                Some(coef) => format!("({})", em.binary(BinaryOp::Mul, dtype, &slot(*coef), &acc)),
                None => acc.clone(),
            };
            let value = em.combine(op.reduce_op(), dtype, &scaled, &slot(*src));
            let _ = writeln!(b, "{indent}{acc} = {value};");
            let _ = writeln!(b, "{indent}{} = {acc};", slot(*dst));
        } else {
            emit_inst(em, kernel, inst, indent, bindings, b)?;
        }
    }
    Ok(())
}

/// The declared dtype of `slot`, or the error for a slot the kernel does not declare.
fn slot_dtype(kernel: &LirKernel, slot: SlotId) -> Result<DType, BackendError> {
    kernel
        .slot_dtype(slot)
        .ok_or_else(|| compile_error(format!("kernel `{}`: unknown slot {slot}", kernel.name)))
}

/// Element `element` of buffer `buf` (of `dtype`) as a value: bools are stored as `u32`.
fn read_buffer(dtype: DType, buf: usize, element: &str) -> String {
    let load = format!("buf{buf}[{element}]");
    if dtype == DType::Bool {
        format!("{load} != 0u")
    } else {
        load
    }
}

/// `value` converted to the buffer's storage type.
fn store_value(dtype: DType, value: &str) -> String {
    if dtype == DType::Bool {
        format!("select(0u, 1u, {value})")
    } else {
        value.to_string()
    }
}

fn emit_inst(
    em: &mut Emitter<'_>,
    kernel: &LirKernel,
    inst: &Inst,
    indent: &str,
    bindings: &mut BTreeSet<usize>,
    b: &mut String,
) -> Result<(), BackendError> {
    let dtype_of = |s: SlotId| slot_dtype(kernel, s);
    let expr = match inst {
        Inst::Load {
            buf, strides, offset, ..
        } => {
            bindings.insert(buf.index());
            let element = match offset {
                0 => index_expr(strides),
                at => format!("{at}u + {}", index_expr(strides)),
            };
            read_buffer(em.buffer_dtype(*buf)?, buf.index(), &element)
        }
        // The verifier guarantees at least one element; the index is clamped into them.
        Inst::Gather { buf, index, .. } => {
            bindings.insert(buf.index());
            let last = em
                .program
                .buffer(*buf)
                .map_or(0, |b| b.ty.shape.numel().saturating_sub(1))
                .min(i32::MAX as usize);
            let element = format!("u32(clamp({}, 0i, {last}i))", slot(*index));
            read_buffer(em.buffer_dtype(*buf)?, buf.index(), &element)
        }
        // Exact: the verifier bounds every value by what the dtype holds (2^24 for `f32`).
        Inst::Index { dst, strides } => match dtype_of(*dst)? {
            DType::F32 => format!("f32({})", index_expr(strides)),
            DType::I32 => format!("i32({})", index_expr(strides)),
            dtype => {
                return Err(compile_error(format!(
                    "kernel `{}`: index of dtype {dtype}",
                    kernel.name
                )));
            }
        },
        Inst::Const { value, .. } => scalar_literal(*value),
        Inst::Unary { op, src, .. } => em.unary(*op, dtype_of(*src)?, &slot(*src)),
        Inst::Binary { op, lhs, rhs, .. } => em.binary(*op, dtype_of(*lhs)?, &slot(*lhs), &slot(*rhs)),
        Inst::Compare { op, lhs, rhs, .. } => {
            Emitter::compare(*op, dtype_of(*lhs)?, &slot(*lhs), &slot(*rhs))
        }
        // A float select passes its operands through `rfx_exact`: Mesa turns a select between
        // known constants into arithmetic on the condition (`select(-1, 0, c)` gave -0 for a
        // true `c`; found by `rfx fuzz` on lavapipe).
        Inst::Select {
            cond,
            on_true,
            on_false,
            ..
        } if dtype_of(*on_true)? == DType::F32 => {
            let exact = em.use_helper(Helper::Exact);
            format!(
                "select({exact}({}), {exact}({}), {})",
                slot(*on_false),
                slot(*on_true),
                slot(*cond)
            )
        }
        Inst::Select {
            cond,
            on_true,
            on_false,
            ..
        } => format!("select({}, {}, {})", slot(*on_false), slot(*on_true), slot(*cond)),
        Inst::Cast { dst, src } => em.cast(dtype_of(*src)?, dtype_of(*dst)?, &slot(*src)),
        Inst::Store { buf, strides, src } => {
            bindings.insert(buf.index());
            let dtype = em.buffer_dtype(*buf)?;
            let _ = writeln!(
                b,
                "{indent}buf{}[{}] = {};",
                buf.index(),
                index_expr(strides),
                store_value(dtype, &slot(*src))
            );
            return Ok(());
        }
        Inst::Reduce { .. } | Inst::Scan { .. } => {
            return Err(compile_error(format!(
                "kernel `{}`: `{}` outside the body",
                kernel.name,
                inst.name()
            )));
        }
    };
    if let Some(dst) = inst.dst() {
        let _ = writeln!(b, "{indent}{} = {expr};", slot(dst));
    }
    Ok(())
}
