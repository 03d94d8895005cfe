//! What backends promise about the ops they compute approximately.
//!
//! Exactly rounded ops (arithmetic, `sqrt`, comparisons, casts, ...) have one right answer, and
//! every backend must give the LIR interpreter's bits for them. The transcendental ops are
//! computed by approximations whose accuracy each backend documents as a ULP bound:
//! [`Backend::ulp_bound`](crate::Backend::ulp_bound) states it, [`Transcendental::oracle`] gives
//! the value it is measured against and [`ulps`] the distance.

use rfx_ir::semantics;
use rfx_ir::{BinaryOp, DType, Scalar, UnaryOp};

/// An op backends compute approximately: a transcendental unary op
/// ([`UnaryOp::is_transcendental`]), `pow` or `atan2`. Operands and result are floats of one
/// dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transcendental {
    /// `exp`, `log`, `sin`, ... on one operand.
    Unary(UnaryOp),
    /// `pow` or `atan2` on two operands.
    Binary(BinaryOp),
}

impl Transcendental {
    /// `Some` when `op` is transcendental.
    pub fn unary(op: UnaryOp) -> Option<Transcendental> {
        op.is_transcendental().then_some(Transcendental::Unary(op))
    }

    /// `Some` for `pow` and `atan2`.
    pub fn binary(op: BinaryOp) -> Option<Transcendental> {
        op.is_transcendental().then_some(Transcendental::Binary(op))
    }

    /// Operands taken: 1 or 2.
    pub fn arity(self) -> usize {
        match self {
            Transcendental::Unary(_) => 1,
            Transcendental::Binary(_) => 2,
        }
    }

    /// The op's IR name (`sin`, `pow`).
    pub fn name(self) -> &'static str {
        match self {
            Transcendental::Unary(op) => op.name(),
            Transcendental::Binary(op) => op.name(),
        }
    }

    /// The reference value at `args` computed in `f64` (the reference interpreter's
    /// [`Mode::Oracle`](rfx_ir::interp::Mode::Oracle)): for `f32` operands it is far more
    /// accurate than any `f32` result, so rounding it to `f32` gives the value bounds are
    /// measured from. NaN when `args` has the wrong length.
    pub fn oracle(self, args: &[f64]) -> f64 {
        let value = match (self, args) {
            (Transcendental::Unary(op), [x]) => semantics::unary(op, Scalar::F64(*x)),
            (Transcendental::Binary(op), [a, b]) => semantics::binary(op, Scalar::F64(*a), Scalar::F64(*b)),
            _ => None,
        };
        value.map_or(f64::NAN, Scalar::to_f64)
    }
}

/// Distance in units in the last place of `dtype` between `got` and the oracle value `want`
/// (rounded to `dtype`): 0 when both are NaN; `u64::MAX` when only one is NaN, and for zeros of
/// opposite signs (`sin(-0)` must be `-0`). Infinities are one ULP beyond the largest finite
/// value.
pub fn ulps(got: f64, want: f64, dtype: DType) -> u64 {
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    if got == 0.0 && want == 0.0 && got.is_sign_negative() != want.is_sign_negative() {
        return u64::MAX;
    }
    let ordered32 = |x: f32| {
        let b = x.to_bits();
        i64::from(if b >> 31 == 1 {
            -((b & 0x7fff_ffff) as i32)
        } else {
            b as i32
        })
    };
    let ordered64 = |x: f64| {
        let b = x.to_bits();
        if b >> 63 == 1 {
            -((b & 0x7fff_ffff_ffff_ffff) as i64)
        } else {
            b as i64
        }
    };
    match dtype {
        DType::F32 => ordered32(got as f32).abs_diff(ordered32(want as f32)),
        _ => ordered64(got).abs_diff(ordered64(want)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transcendental_ops_are_transcendental() {
        assert_eq!(
            Transcendental::unary(UnaryOp::Sin),
            Some(Transcendental::Unary(UnaryOp::Sin))
        );
        assert_eq!(Transcendental::unary(UnaryOp::Sqrt), None);
        assert_eq!(
            Transcendental::binary(BinaryOp::Atan2).map(Transcendental::arity),
            Some(2)
        );
        assert_eq!(Transcendental::binary(BinaryOp::Div), None);
    }

    #[test]
    fn the_oracle_is_the_f64_semantics() {
        let sin = Transcendental::Unary(UnaryOp::Sin);
        assert_eq!(sin.oracle(&[0.5]), 0.5f64.sin());
        assert!(sin.oracle(&[0.5, 1.0]).is_nan());
        let pow = Transcendental::Binary(BinaryOp::Pow);
        assert_eq!(pow.oracle(&[2.0, 10.0]), 1024.0);
        // C99: pow(x, 0) is 1 even for NaN.
        assert_eq!(pow.oracle(&[f64::NAN, 0.0]), 1.0);
    }

    #[test]
    fn ulps_counts_representable_values_between() {
        let one = 1.0f32;
        let next = f32::from_bits(one.to_bits() + 3);
        assert_eq!(ulps(f64::from(next), 1.0, DType::F32), 3);
        assert_eq!(ulps(1.0 + f64::EPSILON, 1.0, DType::F64), 1);
        // Across zero: the smallest subnormals of both signs are two apart.
        let tiny = f64::from(f32::from_bits(1));
        assert_eq!(ulps(tiny, -tiny, DType::F32), 2);
        assert_eq!(ulps(0.0, -0.0, DType::F32), u64::MAX);
        assert_eq!(ulps(f64::NAN, f64::NAN, DType::F64), 0);
        assert_eq!(ulps(f64::NAN, 1.0, DType::F64), u64::MAX);
        assert_eq!(ulps(f64::INFINITY, f64::from(f32::MAX), DType::F32), 1);
    }
}
