//! The functions of `θ²` whose closed forms are `0/0` at `θ = 0`, each as its Taylor series
//! and its closed form, chosen per element in the kernel.
//!
//! **Threshold.** A series keeps [`TERMS`] terms in `x = θ²`. Below the threshold `x_t` of a
//! dtype, the first omitted term `|c_N| x^N` is at most half the dtype's unit roundoff `u`
//! (`2⁻⁵³` for `f64`, `2⁻²⁴` for `f32`) relative to the leading term `|c_0|`:
//! `x_t = (u |c_0| / (2 |c_N|))^(1/N)`. Every series here alternates with decreasing terms
//! there (or, for [`INV_COT`], grows by the ratio `x / 4π²` per term), so the truncation error is
//! below the rounding of the result; the threshold follows from the coefficients and the dtype
//! alone, never from a test. Above it the closed form is used: where it cancels (`θ - sin θ`),
//! its absolute error is of the order `u` once multiplied by the `θ²` (or `θ³`) it is weighted
//! with in every Jacobian, so matrices stay correct to rounding relative to their norm.
//!
//! **Safe where.** The closed form is evaluated at `θ²` where it is taken and at `1` where the
//! series is taken, so its value and, under reverse-mode differentiation, its derivative are
//! finite in both lanes: the select's zero adjoint for the untaken branch never meets a NaN or
//! an infinity (`0 · ∞`), which would otherwise reach the gradient through the shared input.

use rfx_ir::DType;

use crate::trace::{Tensor, where_};

/// Terms of every series (powers `x⁰ … x⁴` of `x = θ²`).
pub(crate) const TERMS: usize = 5;

/// A function of `x = θ²`: its Taylor coefficients (`coefficient(k)` multiplies `x^k`) and
/// its closed form, given a safe `x > 0`.
pub(crate) struct Series {
    coefficient: fn(usize) -> f64,
    closed: fn(Tensor) -> Tensor,
}

/// The unit roundoff of a float dtype (`f32` for any other, which no float op accepts anyway).
pub(crate) fn unit_roundoff(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::EPSILON / 2.0,
        _ => f64::from(f32::EPSILON) / 2.0,
    }
}

fn factorial(n: usize) -> f64 {
    (1..=n).map(|k| k as f64).product()
}

fn sign(k: usize) -> f64 {
    if k.is_multiple_of(2) { 1.0 } else { -1.0 }
}

impl Series {
    /// The threshold on `θ²` below which the series is taken in `dtype` (see the module docs).
    pub(crate) fn threshold(&self, dtype: DType) -> f64 {
        let lead = (self.coefficient)(0).abs();
        let omitted = (self.coefficient)(TERMS).abs();
        (unit_roundoff(dtype) * lead / (2.0 * omitted)).powf(1.0 / TERMS as f64)
    }

    /// The series at `x` (Horner's rule).
    pub(crate) fn horner(&self, x: Tensor) -> Tensor {
        let mut acc = x * (self.coefficient)(TERMS - 1) + (self.coefficient)(TERMS - 2);
        for k in (0..TERMS - 2).rev() {
            acc = acc * x + (self.coefficient)(k);
        }
        acc
    }

    /// The function at `x = θ² >= 0`: the series below the threshold, the closed form above,
    /// each fed a harmless argument where it is not taken.
    pub(crate) fn eval(&self, x: Tensor) -> Tensor {
        let small = x.lt(self.threshold(x.dtype()));
        let near = self.horner(where_(small, x, 0.0));
        let far = (self.closed)(where_(small, 1.0, x));
        where_(small, near, far)
    }
}

/// `cos(θ/2)`.
pub(crate) const HALF_COS: Series = Series {
    coefficient: |k| sign(k) / (4f64.powi(k as i32) * factorial(2 * k)),
    closed: |x| (x.sqrt() * 0.5).cos(),
};

/// `sin(θ/2) / θ`.
pub(crate) const HALF_SINC: Series = Series {
    coefficient: |k| sign(k) / (2.0 * 4f64.powi(k as i32) * factorial(2 * k + 1)),
    closed: |x| {
        let theta = x.sqrt();
        (theta * 0.5).sin() / theta
    },
};

/// `sin θ / θ`.
pub(crate) const SINC: Series = Series {
    coefficient: |k| sign(k) / factorial(2 * k + 1),
    closed: |x| {
        let theta = x.sqrt();
        theta.sin() / theta
    },
};

/// `(1 - cos θ) / θ²`, in closed form `2 sin²(θ/2) / θ²` (no cancellation).
pub(crate) const ONE_MINUS_COS: Series = Series {
    coefficient: |k| sign(k) / factorial(2 * k + 2),
    closed: |x| {
        let s = (x.sqrt() * 0.5).sin();
        s * s * 2.0 / x
    },
};

/// `(θ - sin θ) / θ³`.
pub(crate) const THETA_MINUS_SIN: Series = Series {
    coefficient: |k| sign(k) / factorial(2 * k + 3),
    closed: |x| {
        let theta = x.sqrt();
        (theta - theta.sin()) / (theta * x)
    },
};

/// `(θ² + 2 cos θ - 2) / (2 θ⁴)`, in closed form `(θ²/2 - 2 sin²(θ/2)) / θ⁴`.
pub(crate) const SE3_C2: Series = Series {
    coefficient: |k| sign(k) / factorial(2 * k + 4),
    closed: |x| {
        let s = (x.sqrt() * 0.5).sin();
        (x * 0.5 - s * s * 2.0) / (x * x)
    },
};

/// `(2θ - 3 sin θ + θ cos θ) / (2 θ⁵)`.
pub(crate) const SE3_C3: Series = Series {
    coefficient: |k| sign(k) * (k as f64 + 1.0) / factorial(2 * k + 5),
    closed: |x| {
        let theta = x.sqrt();
        (theta * 2.0 - theta.sin() * 3.0 + theta * theta.cos()) / (theta * x * x * 2.0)
    },
};

/// `atan(y) / y` as a function of `y²` (the SO(3) logarithm's `θ / ‖v‖` with `y = ‖v‖ / w`).
pub(crate) const ATAN: Series = Series {
    coefficient: |k| sign(k) / (2 * k + 1) as f64,
    closed: |x| {
        let y = x.sqrt();
        y.atan() / y
    },
};

/// The series `so3::exp_parts` takes below one threshold on `θ²`, so that `Exp` comes from one
/// sine and cosine of `θ/2` above it: `cos(θ/2)` and `sin(θ/2)/θ`, neither of whose closed
/// forms cancels.
pub(crate) const EXP: [&Series; 2] = [&HALF_COS, &HALF_SINC];

/// The series `so3::exp_with_jacobians_parts` takes below one threshold on `θ²`, so that
/// `Exp` and both Jacobians of `Exp` come from one sine and cosine of `θ/2` above it:
/// `cos(θ/2)`, `sin(θ/2)/θ` and `(θ - sin θ)/θ³` (with `sin θ = 2 sin(θ/2) cos(θ/2)`); the
/// `[ω]×` coefficient `(1 - cos θ)/θ² = 2 (sin(θ/2)/θ)²` is the square of the second in
/// both regions (no cancellation in either).
pub(crate) const EXP_WITH_JACOBIANS: [&Series; 3] = [&HALF_COS, &HALF_SINC, &THETA_MINUS_SIN];

/// The threshold below which every one of `series` is taken: the smallest of their thresholds,
/// so each truncation error stays below half the unit roundoff relative to its leading term.
/// Above it a closed form is taken where a series alone would have been; only the closed forms
/// that cancel matter there, and for [`EXP_WITH_JACOBIANS`] the smallest threshold is
/// [`THETA_MINUS_SIN`]'s own (a test), so its cancelling closed form is taken exactly where
/// `so3_jr`'s is, while `cos(θ/2)` and `sin(θ/2)/θ` (exact to rounding for any `θ`) replace
/// their series a little below those series' own thresholds.
pub(crate) fn shared_threshold(series: &[&Series], dtype: DType) -> f64 {
    series
        .iter()
        .map(|s| s.threshold(dtype))
        .fold(f64::INFINITY, f64::min)
}

/// The Bernoulli numbers `B_2, B_4, …, B_12`.
const BERNOULLI: [f64; TERMS + 1] = [
    1.0 / 6.0,
    -1.0 / 30.0,
    1.0 / 42.0,
    -1.0 / 30.0,
    5.0 / 66.0,
    -691.0 / 2730.0,
];

/// `1/θ² - cot(θ/2) / (2θ)` (= `1/θ² - (1 + cos θ) / (2θ sin θ)`), the `[ω]×²` coefficient of
/// the inverse SO(3) Jacobians; finite for `θ < 2π`. Its series `Σ (-1)^k B_{2k+2} θ^{2k} /
/// (2k+2)!` has positive terms growing by about `θ² / 4π²`.
pub(crate) const INV_COT: Series = Series {
    coefficient: |k| sign(k) * BERNOULLI[k.min(TERMS)] / factorial(2 * k + 2),
    closed: |x| {
        let half = x.sqrt() * 0.5;
        x.recip() - half.cos() / (half.sin() * x.sqrt() * 2.0)
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The coefficients against the functions in `f64` at a moderate angle, where the closed
    /// forms lose at most a few digits, and the thresholds' order of magnitude.
    #[test]
    fn series_match_closed_forms() {
        let theta: f64 = 0.05;
        let x = theta * theta;
        let cases: [(&Series, f64); 8] = [
            (&HALF_COS, (theta / 2.0).cos()),
            (&HALF_SINC, (theta / 2.0).sin() / theta),
            (&SINC, theta.sin() / theta),
            (&ONE_MINUS_COS, (1.0 - theta.cos()) / x),
            (&THETA_MINUS_SIN, (theta - theta.sin()) / (theta * x)),
            (&SE3_C2, (x + 2.0 * theta.cos() - 2.0) / (2.0 * x * x)),
            (
                &SE3_C3,
                (2.0 * theta - 3.0 * theta.sin() + theta * theta.cos()) / (2.0 * x * x * theta),
            ),
            (
                &INV_COT,
                1.0 / x - (1.0 + theta.cos()) / (2.0 * theta * theta.sin()),
            ),
        ];
        for (i, (series, want)) in cases.iter().enumerate() {
            let sum: f64 = (0..TERMS)
                .map(|k| (series.coefficient)(k) * x.powi(k as i32))
                .sum();
            // The closed forms cancel here by up to θ⁻⁴ ≈ 1.6e5 ulps.
            assert!(
                (sum - want).abs() <= 1e-9 * want.abs(),
                "series {i}: {sum} vs {want}"
            );
            let (t64, t32) = (series.threshold(DType::F64), series.threshold(DType::F32));
            assert!(t64 > 1e-4 && t64 < t32, "series {i}: thresholds {t64}, {t32}");
        }
    }

    /// `so3::log_with_jacobians_parts` takes the closed form of [`INV_COT`] only where `Log`
    /// takes its own (`θ² <= 4 y²`, `y = ‖v‖ / w`), and reuses `Log`'s `θ` and `‖v‖` there.
    #[test]
    fn log_series_region_is_inside_the_inverse_jacobian_series_region() {
        for dtype in [DType::F64, DType::F32] {
            let (atan, inv_cot) = (ATAN.threshold(dtype), INV_COT.threshold(dtype));
            assert!(4.0 * atan < inv_cot, "{dtype}: 4 × {atan} against {inv_cot}");
        }
    }

    /// `so3::exp_with_jacobians_parts` shares [`THETA_MINUS_SIN`]'s threshold, below each of
    /// its other series' own.
    #[test]
    fn exp_with_jacobians_shares_the_smallest_threshold() {
        for dtype in [DType::F64, DType::F32] {
            let shared = shared_threshold(&EXP_WITH_JACOBIANS, dtype);
            assert_eq!(shared, THETA_MINUS_SIN.threshold(dtype), "{dtype}");
            for series in [&HALF_COS, &HALF_SINC] {
                assert!(shared < series.threshold(dtype), "{dtype}");
            }
        }
    }
}
