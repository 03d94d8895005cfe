//! A thin lane-generic layer over `FunctionBuilder` for the math kernels.
//!
//! Every kernel is written once against [`Vb`], which knows whether it works on `f32x4`
//! (with `i32x4` integer views) or `f64x2` (with `i64x2`). Constants are splatted, masks are the
//! all-ones/all-zeros integer vectors that `fcmp`/`icmp` produce, and [`Vb::sel`] is a
//! `bitselect` on such a mask, so no kernel ever branches per lane.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{ConstantData, Endianness, InstBuilder, MemFlagsData, Type, Value, types};
use cranelift_frontend::FunctionBuilder;

/// The lane precision a kernel is emitted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Prec {
    /// `f32` lanes in an `f32x4`.
    F32,
    /// `f64` lanes in an `f64x2`.
    F64,
}

/// The vector builder: a `FunctionBuilder` and the precision currently emitted.
pub(super) struct Vb<'a, 'f> {
    pub(super) b: &'a mut FunctionBuilder<'f>,
    pub(super) prec: Prec,
}

impl Vb<'_, '_> {
    /// The float vector type of the current precision.
    pub(super) fn fty(&self) -> Type {
        match self.prec {
            Prec::F32 => types::F32X4,
            Prec::F64 => types::F64X2,
        }
    }

    /// The integer vector type with the same lane layout.
    pub(super) fn ity(&self) -> Type {
        match self.prec {
            Prec::F32 => types::I32X4,
            Prec::F64 => types::I64X2,
        }
    }

    /// Mantissa bits of the lane type (23 or 52).
    pub(super) fn mant_bits(&self) -> i64 {
        match self.prec {
            Prec::F32 => 23,
            Prec::F64 => 52,
        }
    }

    /// A splatted float constant (rounded to `f32` for `f32` lanes).
    pub(super) fn c(&mut self, value: f64) -> Value {
        self.k(value as f32, value)
    }

    /// A splatted float constant given separately per precision (coefficient tables that
    /// differ between the `f32` and `f64` approximations).
    pub(super) fn k(&mut self, v32: f32, v64: f64) -> Value {
        match self.prec {
            Prec::F32 => {
                let s = self.b.ins().f32const(v32);
                self.b.ins().splat(types::F32X4, s)
            }
            Prec::F64 => self.pool_f64x2(v64.to_bits(), types::F64X2),
        }
    }

    /// A splatted integer constant in the integer view (`i32x4` or `i64x2`).
    pub(super) fn ci(&mut self, value: i64) -> Value {
        match self.prec {
            Prec::F32 => {
                let lane = (value as u32).to_le_bytes();
                self.pool(&lane, types::I32X4)
            }
            Prec::F64 => self.pool_f64x2(value as u64, types::I64X2),
        }
    }

    /// A 64-bit pattern in both lanes of a `ty` (`f64x2` or `i64x2`).
    fn pool_f64x2(&mut self, bits: u64, ty: Type) -> Value {
        self.pool(&bits.to_le_bytes(), ty)
    }

    /// `lane` (little-endian bytes) in every lane of the 128-bit `ty`, as a constant-pool
    /// vector: one load, where splatting a scalar integer or `f64` constant takes three
    /// instructions on x86-64 (`movabs`, `movq`, `pshufd`).
    fn pool(&mut self, lane: &[u8], ty: Type) -> Value {
        let bytes: Vec<u8> = lane.iter().copied().cycle().take(16).collect();
        let handle = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
        self.b.ins().vconst(ty, handle)
    }

    pub(super) fn add(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fadd(a, b)
    }
    pub(super) fn sub(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fsub(a, b)
    }
    pub(super) fn mul(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fmul(a, b)
    }
    pub(super) fn div(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fdiv(a, b)
    }
    pub(super) fn neg(&mut self, a: Value) -> Value {
        self.b.ins().fneg(a)
    }
    pub(super) fn abs(&mut self, a: Value) -> Value {
        self.b.ins().fabs(a)
    }
    pub(super) fn sqrt(&mut self, a: Value) -> Value {
        self.b.ins().sqrt(a)
    }
    pub(super) fn floor(&mut self, a: Value) -> Value {
        self.b.ins().floor(a)
    }
    pub(super) fn nearest(&mut self, a: Value) -> Value {
        self.b.ins().nearest(a)
    }
    /// NaN-propagating minimum.
    pub(super) fn min(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fmin(a, b)
    }
    /// NaN-propagating maximum.
    pub(super) fn max(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fmax(a, b)
    }
    /// `a + b*c`, rounded twice (no fused multiply-add: not every x86-64 has FMA).
    pub(super) fn mul_add(&mut self, a: Value, b: Value, c: Value) -> Value {
        let p = self.mul(b, c);
        self.add(a, p)
    }
    /// `a * k` with a constant `k`.
    pub(super) fn mul_c(&mut self, a: Value, k: f64) -> Value {
        let kc = self.c(k);
        self.mul(a, kc)
    }
    /// `a + k` with a constant `k`.
    pub(super) fn add_c(&mut self, a: Value, k: f64) -> Value {
        let kc = self.c(k);
        self.add(a, kc)
    }

    /// Horner evaluation of `coeffs[0] + x*coeffs[1] + x^2*coeffs[2] + ...`.
    pub(super) fn poly(&mut self, x: Value, coeffs: &[f64]) -> Value {
        let (last, rest) = coeffs
            .split_last()
            .expect("invariant: a polynomial has a coefficient");
        let mut acc = self.c(*last);
        for &coeff in rest.iter().rev() {
            let kc = self.c(coeff);
            acc = self.mul_add(kc, acc, x);
        }
        acc
    }

    /// The lanes' bits as integers.
    pub(super) fn bits(&mut self, a: Value) -> Value {
        let ty = self.ity();
        self.b.ins().bitcast(ty, MemFlagsData::new(), a)
    }
    /// Integer lanes reinterpreted as floats.
    pub(super) fn float(&mut self, a: Value) -> Value {
        let ty = self.fty();
        self.b.ins().bitcast(ty, MemFlagsData::new(), a)
    }

    pub(super) fn iadd(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().iadd(a, b)
    }
    pub(super) fn isub(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().isub(a, b)
    }
    pub(super) fn iadd_c(&mut self, a: Value, k: i64) -> Value {
        let kc = self.ci(k);
        self.iadd(a, kc)
    }
    pub(super) fn band(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().band(a, b)
    }
    pub(super) fn band_c(&mut self, a: Value, k: i64) -> Value {
        let kc = self.ci(k);
        self.band(a, kc)
    }
    pub(super) fn bor(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().bor(a, b)
    }
    pub(super) fn bxor(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().bxor(a, b)
    }
    pub(super) fn bnot(&mut self, a: Value) -> Value {
        self.b.ins().bnot(a)
    }
    pub(super) fn ishl(&mut self, a: Value, amount: i64) -> Value {
        self.b.ins().ishl_imm_u(a, amount)
    }
    pub(super) fn ushr(&mut self, a: Value, amount: i64) -> Value {
        self.b.ins().ushr_imm_u(a, amount)
    }

    /// Lane mask of a float comparison.
    pub(super) fn fcmp(&mut self, cc: FloatCC, a: Value, b: Value) -> Value {
        self.b.ins().fcmp(cc, a, b)
    }
    /// Lane mask of a float comparison with a constant.
    pub(super) fn fcmp_c(&mut self, cc: FloatCC, a: Value, k: f64) -> Value {
        let kc = self.c(k);
        self.fcmp(cc, a, kc)
    }
    /// Lane mask of an integer comparison.
    pub(super) fn icmp(&mut self, cc: IntCC, a: Value, b: Value) -> Value {
        self.b.ins().icmp(cc, a, b)
    }
    /// Lanes that are NaN.
    pub(super) fn is_nan(&mut self, a: Value) -> Value {
        self.fcmp(FloatCC::Unordered, a, a)
    }
    /// Lanes whose integer bit `bit` of `int_lanes` is set.
    pub(super) fn bit_set(&mut self, int_lanes: Value, bit: i64) -> Value {
        let m = self.band_c(int_lanes, 1 << bit);
        let zero = self.ci(0);
        self.icmp(IntCC::NotEqual, m, zero)
    }

    /// `mask ? a : b` per lane; `a` and `b` are float (or integer) vectors, `mask` an integer
    /// lane mask.
    pub(super) fn sel(&mut self, mask: Value, a: Value, b: Value) -> Value {
        let ty = self.b.func.dfg.value_type(a);
        let m = if ty == self.b.func.dfg.value_type(mask) {
            mask
        } else {
            self.b.ins().bitcast(ty, MemFlagsData::new(), mask)
        };
        self.b.ins().bitselect(m, a, b)
    }
    /// `mask ? k : b` with a constant `k`.
    pub(super) fn sel_c(&mut self, mask: Value, k: f64, b: Value) -> Value {
        let kc = self.c(k);
        self.sel(mask, kc, b)
    }

    /// The sign bit alone, in the integer view.
    pub(super) fn sign_mask(&mut self) -> Value {
        match self.prec {
            Prec::F32 => self.ci(i64::from(i32::MIN)),
            Prec::F64 => self.ci(i64::MIN),
        }
    }
    /// `|mag|` with the sign of `sign_src` (bitwise, so NaN and −0 behave as `copysign`).
    pub(super) fn copysign(&mut self, mag: Value, sign_src: Value) -> Value {
        let sm = self.sign_mask();
        let sb = self.bits(sign_src);
        let s = self.band(sb, sm);
        let a = self.abs(mag);
        let ab = self.bits(a);
        let r = self.bor(ab, s);
        self.float(r)
    }
    /// Flips the sign of the lanes of `a` whose mask lane is set.
    pub(super) fn neg_where(&mut self, mask: Value, a: Value) -> Value {
        let sm = self.sign_mask();
        let flip = self.band(mask, sm);
        let ab = self.bits(a);
        let r = self.bxor(ab, flip);
        self.float(r)
    }

    /// `1.5 * 2^mant_bits`: adding it to a float of magnitude below `2^(mant_bits-1)` rounds that
    /// float to an integer held in the low mantissa bits.
    fn magic(&self) -> f64 {
        match self.prec {
            Prec::F32 => 12_582_912.0,
            Prec::F64 => 6_755_399_441_055_744.0,
        }
    }
    /// `2^n` for an integral float `n` inside the normal exponent range, built in the exponent
    /// field: `(n + bias) << mant_bits`, reading `n` out of `n + magic`.
    pub(super) fn pow2(&mut self, n: Value) -> Value {
        let magic = self.magic();
        let shifted = self.add_c(n, magic);
        let sb = self.bits(shifted);
        let (bias, magic_bits) = match self.prec {
            Prec::F32 => (127_i64, i64::from((magic as f32).to_bits())),
            Prec::F64 => (1023_i64, magic.to_bits() as i64),
        };
        let biased = self.iadd_c(sb, bias.wrapping_sub(magic_bits));
        let mb = self.mant_bits();
        let e = self.ishl(biased, mb);
        self.float(e)
    }
    /// `p * 2^n` for an integral float `n` with `|n|` up to about twice the exponent range,
    /// in two steps so that results in the subnormal range are rounded once, correctly
    /// (gradual underflow), and results past the largest float overflow to ±Inf.
    pub(super) fn ldexp(&mut self, p: Value, n: Value) -> Value {
        let half = self.mul_c(n, 0.5);
        let n1 = self.floor(half);
        let n2 = self.sub(n, n1);
        let s1 = self.pow2(n1);
        let s2 = self.pow2(n2);
        let t = self.mul(p, s1);
        self.mul(t, s2)
    }
    /// The low integer bits of an integral float `n` (`|n| < 2^(mant_bits-1)`), two's complement.
    pub(super) fn int_bits_of(&mut self, n: Value) -> Value {
        let magic = self.magic();
        let shifted = self.add_c(n, magic);
        self.bits(shifted)
    }
    /// A small integer lane (`|i| < 2^(mant_bits-1)`) converted to float.
    pub(super) fn int_to_float(&mut self, i: Value) -> Value {
        let magic = self.magic();
        let magic_bits = match self.prec {
            Prec::F32 => i64::from((magic as f32).to_bits()),
            Prec::F64 => magic.to_bits() as i64,
        };
        let sb = self.iadd_c(i, magic_bits);
        let f = self.float(sb);
        self.add_c(f, -magic)
    }
    /// Clears the low `n_bits` bits of each lane (a "head" of fewer significant bits, so
    /// products with it are exact).
    pub(super) fn trunc_low_bits(&mut self, a: Value, n_bits: i64) -> Value {
        let ab = self.bits(a);
        let masked = self.band_c(ab, !((1_i64 << n_bits) - 1));
        self.float(masked)
    }

    /// Splits an `f32x4` into its low and high halves promoted to `f64x2`.
    pub(super) fn split_f32x4(&mut self, x: Value) -> (Value, Value) {
        let lo = self.b.ins().fvpromote_low(x);
        let bytes = self.b.ins().bitcast(types::I8X16, little(), x);
        let mask: Vec<u8> = (8..16).chain(8..16).collect();
        let imm = self.b.func.dfg.immediates.push(ConstantData::from(mask));
        let hi_bytes = self.b.ins().shuffle(bytes, bytes, imm);
        let hi_f32 = self.b.ins().bitcast(types::F32X4, little(), hi_bytes);
        let hi = self.b.ins().fvpromote_low(hi_f32);
        (lo, hi)
    }
    /// Joins two `f64x2` halves, rounded to `f32`, into one `f32x4` (the inverse of
    /// [`Vb::split_f32x4`]).
    pub(super) fn join_f32x4(&mut self, lo: Value, hi: Value) -> Value {
        let lo32 = self.b.ins().fvdemote(lo);
        let hi32 = self.b.ins().fvdemote(hi);
        let lo_bytes = self.b.ins().bitcast(types::I8X16, little(), lo32);
        let hi_bytes = self.b.ins().bitcast(types::I8X16, little(), hi32);
        let mask: Vec<u8> = (0..8).chain(16..24).collect();
        let imm = self.b.func.dfg.immediates.push(ConstantData::from(mask));
        let joined = self.b.ins().shuffle(lo_bytes, hi_bytes, imm);
        self.b.ins().bitcast(types::F32X4, little(), joined)
    }
}

/// Bitcast flags for casts that change the lane count (the byte order must be explicit).
fn little() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}
