//! The elementwise, reduction and scan op vocabularies shared by HIR, MIR and LIR.
//!
//! Each variant documents its typing rule and its IEEE behaviour; [`crate::semantics`] is the
//! executable definition and the reference interpreter calls nothing else. Where NumPy decides
//! a question, rfx follows NumPy (`round` is half-to-even, `min`/`max` propagate NaN, `fmod`
//! takes the dividend's sign, comparisons with NaN are false except `ne`).

use std::fmt;

use crate::DType;

macro_rules! op_names {
    ($ty:ident { $($variant:ident => $name:literal),* $(,)? }) => {
        impl $ty {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),*];

            /// The op's name in every text format.
            pub fn name(self) -> &'static str {
                match self { $($ty::$variant => $name),* }
            }

            /// Looks an op up by its text-format name.
            pub fn from_name(name: &str) -> Option<$ty> {
                match name { $($name => Some($ty::$variant),)* _ => None }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

/// One-operand elementwise ops. The result has the operand's dtype and shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum UnaryOp {
    /// `-x`. Numeric. Flips the sign bit of floats (`neg(0) = -0`, `neg(NaN)` is NaN); wraps for i32.
    Neg,
    /// `|x|`. Numeric. Clears the sign bit of floats; wraps for `i32::MIN`.
    Abs,
    /// `-1`, `0` or `1` by the sign of `x`. Numeric. As NumPy: `sign(±0) = +0`, `sign(NaN)` is NaN.
    Sign,
    /// Round toward −∞. Float. Exact; keeps −0, NaN, ±Inf.
    Floor,
    /// Round toward +∞. Float. Exact; `ceil(-0.5) = -0`.
    Ceil,
    /// Round to nearest, ties to even (NumPy's `round`). Float. Exact; `round(-0.5) = -0`.
    Round,
    /// Square root. Float. Correctly rounded; `sqrt(-0) = -0`, negative arguments give NaN.
    Sqrt,
    /// `1/sqrt(x)`. Float. `rsqrt(0) = +Inf`, `rsqrt(-0) = -Inf`, `rsqrt(+Inf) = 0`.
    Rsqrt,
    /// `1/x`. Float. Correctly rounded; `recip(±0) = ±Inf`.
    Recip,
    /// `e^x`. Float. Overflows to +Inf, `exp(-Inf) = 0`.
    Exp,
    /// `2^x`. Float.
    Exp2,
    /// Natural logarithm. Float. `log(±0) = -Inf`, negative arguments give NaN.
    Log,
    /// Base-2 logarithm. Float. Same special values as `log`.
    Log2,
    /// Sine (radians). Float. `sin(±Inf)` is NaN; `sin(-0) = -0`.
    Sin,
    /// Cosine (radians). Float. `cos(±Inf)` is NaN.
    Cos,
    /// Tangent (radians). Float.
    Tan,
    /// Hyperbolic tangent. Float. Saturates to ±1.
    Tanh,
    /// Arc tangent. Float. `atan(±Inf) = ±π/2`.
    Atan,
    /// Arc sine. Float. NaN outside [−1, 1].
    Asin,
    /// Arc cosine. Float. NaN outside [−1, 1].
    Acos,
    /// Logistic function `1/(1+exp(-x))`. Float. `sigmoid(-Inf) = 0`, `sigmoid(+Inf) = 1`.
    Sigmoid,
    /// The error function `erf x = 2/√π ∫₀ˣ e^(−t²) dt` (the Gaussian CDF is
    /// `(1 + erf(x/√2))/2`). Float. Odd: `erf(±0) = ±0`; `erf(±Inf) = ±1` (and every `|x| >= 6`
    /// rounds to `±1` in both float dtypes); NaN gives NaN. Reference: the `libm` crate's `erf`
    /// (FreeBSD's `s_erf.c`, under 1 ULP), for `f32` computed in `f64` and rounded.
    /// Derivative `2/√π e^(−x²)`.
    Erf,
    /// Logical not. Bool only.
    Not,
}

op_names!(UnaryOp {
    Neg => "neg", Abs => "abs", Sign => "sign", Floor => "floor", Ceil => "ceil", Round => "round",
    Sqrt => "sqrt", Rsqrt => "rsqrt", Recip => "recip", Exp => "exp", Exp2 => "exp2", Log => "log",
    Log2 => "log2", Sin => "sin", Cos => "cos", Tan => "tan", Tanh => "tanh", Atan => "atan",
    Asin => "asin", Acos => "acos", Sigmoid => "sigmoid", Erf => "erf", Not => "not",
});

impl UnaryOp {
    /// Whether the op accepts operands of `dtype` (the result has the same dtype).
    pub fn accepts(self, dtype: DType) -> bool {
        match self {
            UnaryOp::Not => dtype == DType::Bool,
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign => dtype.is_numeric(),
            _ => dtype.is_float(),
        }
    }

    /// `true` for the transcendental functions (computed by approximations on most backends).
    /// Every op is named: a new op does not compile until it is classified here.
    pub fn is_transcendental(self) -> bool {
        match self {
            UnaryOp::Exp
            | UnaryOp::Exp2
            | UnaryOp::Log
            | UnaryOp::Log2
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tan
            | UnaryOp::Tanh
            | UnaryOp::Atan
            | UnaryOp::Asin
            | UnaryOp::Acos
            | UnaryOp::Sigmoid
            | UnaryOp::Erf => true,
            crate::exact_unary_ops!() => false,
        }
    }
}

/// The pattern of the unary ops that are exact or correctly rounded on every backend (no
/// approximation: no routine, no ULP bound), written once for every `match` that treats them
/// alike, as in `match op { UnaryOp::Exp => …, …, rfx_ir::exact_unary_ops!() => None }`. Such a
/// match names each transcendental ([`UnaryOp::is_transcendental`]) on its own, so a new
/// transcendental does not compile until every one of them handles it; a new exact op is added
/// here.
#[macro_export]
macro_rules! exact_unary_ops {
    () => {
        $crate::UnaryOp::Neg
            | $crate::UnaryOp::Abs
            | $crate::UnaryOp::Sign
            | $crate::UnaryOp::Floor
            | $crate::UnaryOp::Ceil
            | $crate::UnaryOp::Round
            | $crate::UnaryOp::Sqrt
            | $crate::UnaryOp::Rsqrt
            | $crate::UnaryOp::Recip
            | $crate::UnaryOp::Not
    };
}

/// Two-operand elementwise ops. Operands have the same dtype and broadcast (NumPy rules) to
/// the result shape; the result has the operands' dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum BinaryOp {
    /// `a + b`. Numeric; i32 wraps. IEEE: `Inf + -Inf` is NaN, `-0 + -0 = -0`, `-0 + 0 = 0`.
    Add,
    /// `a - b`. Numeric; i32 wraps.
    Sub,
    /// `a * b`. Numeric; i32 wraps. IEEE: `0 * Inf` is NaN (so `x * 0` is *not* 0 in general).
    Mul,
    /// `a / b`. Numeric. Floats: IEEE division (`x/0` is ±Inf or NaN). i32: floor division like
    /// NumPy's `//`, and `x / 0 = 0` (NumPy also gives 0), `i32::MIN / -1` wraps.
    Div,
    /// `a^b`. Float. C99 `pow` special values (`pow(x, 0) = 1` even for NaN, `pow(1, y) = 1`).
    Pow,
    /// Minimum, NaN-propagating (NumPy's `minimum`): returns `a` when `a < b` or `a` is NaN,
    /// else `b`. Numeric. On ties (`min(0, -0)`) the second operand wins, as in NumPy.
    Min,
    /// Maximum, NaN-propagating (NumPy's `maximum`): returns `a` when `a > b` or `a` is NaN,
    /// else `b`. Numeric. On ties (`max(0, -0)`) the second operand wins, as in NumPy.
    Max,
    /// `atan2(a, b)`: the angle of the point `(b, a)`. Float. C99 special values.
    Atan2,
    /// Remainder with the sign of the dividend (C `fmod`, NumPy `fmod`). Numeric. Floats are
    /// exact; `fmod(x, 0)` is NaN; i32: truncated remainder, `x fmod 0 = 0`.
    Fmod,
    /// Logical and. Bool only.
    And,
    /// Logical or. Bool only.
    Or,
}

op_names!(BinaryOp {
    Add => "add", Sub => "sub", Mul => "mul", Div => "div", Pow => "pow", Min => "min",
    Max => "max", Atan2 => "atan2", Fmod => "fmod", And => "and", Or => "or",
});

impl BinaryOp {
    /// Whether the op accepts operands of `dtype` (the result has the same dtype).
    pub fn accepts(self, dtype: DType) -> bool {
        match self {
            BinaryOp::And | BinaryOp::Or => dtype == DType::Bool,
            BinaryOp::Pow | BinaryOp::Atan2 => dtype.is_float(),
            _ => dtype.is_numeric(),
        }
    }

    /// `true` when `op(a, b) == op(b, a)` bit for bit for every input, NaN payloads aside.
    /// `min`/`max` are not: with NaN or `±0` ties the result depends on operand order.
    pub fn is_commutative(self) -> bool {
        matches!(self, BinaryOp::Add | BinaryOp::Mul | BinaryOp::And | BinaryOp::Or)
    }

    /// `true` for the transcendental functions `pow` and `atan2` (computed by approximations on
    /// most backends). Every op is named: a new op does not compile until it is classified here.
    pub fn is_transcendental(self) -> bool {
        match self {
            BinaryOp::Pow | BinaryOp::Atan2 => true,
            crate::exact_binary_ops!() => false,
        }
    }
}

/// The pattern of the binary ops that are exact or correctly rounded on every backend, as
/// [`exact_unary_ops!`] for unary ops: a `match` names each transcendental
/// ([`BinaryOp::is_transcendental`]) on its own and ends with `rfx_ir::exact_binary_ops!()`.
#[macro_export]
macro_rules! exact_binary_ops {
    () => {
        $crate::BinaryOp::Add
            | $crate::BinaryOp::Sub
            | $crate::BinaryOp::Mul
            | $crate::BinaryOp::Div
            | $crate::BinaryOp::Min
            | $crate::BinaryOp::Max
            | $crate::BinaryOp::Fmod
            | $crate::BinaryOp::And
            | $crate::BinaryOp::Or
    };
}

/// Comparisons. Operands have the same dtype (numeric, or bool for `eq`/`ne`) and broadcast to
/// the result shape; the result is bool. Any comparison with NaN is false except `ne`, which is
/// true. `-0 == 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum CmpOp {
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
}

op_names!(CmpOp { Lt => "lt", Le => "le", Gt => "gt", Ge => "ge", Eq => "eq", Ne => "ne" });

impl CmpOp {
    /// Whether the comparison accepts operands of `dtype`.
    pub fn accepts(self, dtype: DType) -> bool {
        dtype.is_numeric() || matches!(self, CmpOp::Eq | CmpOp::Ne)
    }

    /// `a op b` under `T`'s partial order: false for every comparison with a NaN but `Ne`,
    /// and `-0 == 0` for floats, as the op's definition says.
    pub fn holds<T: PartialOrd>(self, a: &T, b: &T) -> bool {
        match self {
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
        }
    }
}

/// Reductions over a set of axes. The result drops the reduced axes (or keeps them as size 1
/// with `keepdims`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum ReduceOp {
    /// Sum; numeric. Empty sum is +0. i32 wraps. Float sums start from −0 (the exact IEEE
    /// identity), so a sum of only −0 elements is −0. The reference interpreter adds in row-major
    /// order of the reduced elements; other paths document their order and error bound.
    Sum,
    /// Product; numeric. Empty product is 1.
    Prod,
    /// Maximum, NaN-propagating; numeric. Empty max is −Inf (floats) or `i32::MIN`. Each step
    /// is `max(acc, x)`, so on a ±0 tie the later element wins.
    Max,
    /// Minimum, NaN-propagating; numeric. Empty min is +Inf (floats) or `i32::MAX`. Each step
    /// is `min(acc, x)`, so on a ±0 tie the later element wins.
    Min,
    /// Arithmetic mean (sum, then divided by the count); float only. Empty mean is NaN.
    Mean,
}

op_names!(ReduceOp { Sum => "sum", Prod => "prod", Max => "max", Min => "min", Mean => "mean" });

impl ReduceOp {
    /// Whether the reduction accepts operands of `dtype` (the result has the same dtype).
    pub fn accepts(self, dtype: DType) -> bool {
        match self {
            ReduceOp::Mean => dtype.is_float(),
            _ => dtype.is_numeric(),
        }
    }
}

/// Running folds along one axis (inclusive scans: NumPy's `cumsum`, `cumprod`,
/// `maximum.accumulate`, `minimum.accumulate`; JAX's `lax.cumsum` and friends). Element `i`
/// along the axis is the fold of elements `0..=i` (or `i..` for a reverse scan) in that order,
/// starting from the matching [`ReduceOp`]'s identity, whose first step is exact (`-0 + x`,
/// `1 * x`, `max(-inf, x)`, NaN kept), so element 0 is the operand's element 0 bit for bit and
/// each later one is one more sequential step: NumPy's bits. The result has the operand's dtype
/// and shape.
///
/// [`ScanOp::Linear`] is the one scan of two operands: a first-order linear recurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum ScanOp {
    /// Running sum; numeric, i32 wraps.
    Sum,
    /// Running product; numeric, i32 wraps.
    Prod,
    /// Running maximum, NaN-propagating (once a NaN is reached every later element is NaN);
    /// numeric. Each step is `max(acc, x)`, so on a ±0 tie the later element wins.
    Max,
    /// Running minimum, NaN-propagating; numeric. Each step is `min(acc, x)`.
    Min,
    /// The first-order linear recurrence `y[i] = a[i] * y[i-1] + x[i]` of an operand `x` and a
    /// coefficient `a` of its dtype and shape (a discrete low-pass filter run over a signal, a
    /// discounted cost-to-go with `reverse`); numeric, i32 wraps. It starts from the running
    /// sum's identity (`y[-1] = -0`, so `y[0] = x[0]` bit for bit whenever `a[0] >= +0`) and
    /// each step rounds the product and then the sum (never one fused multiply-add): the bits of
    /// the loop `y = a[i] * y + x[i]`. With every `a[i] = 1` it is the running sum, bit for bit.
    Linear,
}

op_names!(ScanOp { Sum => "cumsum", Prod => "cumprod", Max => "cummax", Min => "cummin", Linear => "linrec" });

impl ScanOp {
    /// The running folds of one operand, every scan but [`ScanOp::Linear`].
    pub const FOLDS: &'static [ScanOp] = &[ScanOp::Sum, ScanOp::Prod, ScanOp::Max, ScanOp::Min];

    /// Whether the scan accepts operands of `dtype` (the result has the same dtype).
    pub fn accepts(self, dtype: DType) -> bool {
        dtype.is_numeric()
    }

    /// The number of operands: 2 for [`ScanOp::Linear`] (the operand, then the coefficient),
    /// 1 for the folds.
    pub fn arity(self) -> usize {
        if self == ScanOp::Linear { 2 } else { 1 }
    }

    /// The reduction whose identity starts the scan and, for a fold, whose combining step it
    /// uses: a fold's last element is that reduction of the whole axis, bit for bit.
    /// [`ScanOp::Linear`] starts from the running sum's identity, and its step (see
    /// [`crate::semantics::scan_step`]) adds the operand to the scaled accumulator with the
    /// sum's step.
    pub fn reduce_op(self) -> ReduceOp {
        match self {
            ScanOp::Sum | ScanOp::Linear => ReduceOp::Sum,
            ScanOp::Prod => ReduceOp::Prod,
            ScanOp::Max => ReduceOp::Max,
            ScanOp::Min => ReduceOp::Min,
        }
    }
}
