//! Element types and scalar literals.

use std::fmt;

/// The element type of a tensor.
///
/// Every value in every IR level has exactly one `DType`; there are no implicit conversions:
/// mixing dtypes needs an explicit `cast`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum DType {
    /// Boolean, stored as one byte (0 or 1) in host arrays.
    Bool,
    /// 32-bit two's-complement integer; arithmetic wraps.
    I32,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary64.
    F64,
}

impl DType {
    /// All dtypes, in a fixed order.
    pub const ALL: [DType; 4] = [DType::Bool, DType::I32, DType::F32, DType::F64];

    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::I32 | DType::F32 => 4,
            DType::F64 => 8,
        }
    }

    /// `true` for `f32` and `f64`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// `true` for `i32`, `f32` and `f64`: the dtypes arithmetic accepts.
    pub fn is_numeric(self) -> bool {
        !matches!(self, DType::Bool)
    }

    /// The name used in every text format: `bool`, `i32`, `f32`, `f64`.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I32 => "i32",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// Parses a dtype name as printed by [`DType::name`].
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|dt| dt.name() == name)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scalar literal of one dtype.
///
/// Equality and hashing compare float bit patterns, so `NaN == NaN` (same payload), and
/// `0.0 != -0.0`: two IR constants are the same constant exactly when they have the same bits.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub enum Scalar {
    /// A boolean.
    Bool(bool),
    /// A 32-bit integer.
    I32(i32),
    /// A binary32 float.
    F32(f32),
    /// A binary64 float.
    F64(f64),
}

impl Scalar {
    /// The dtype of this scalar.
    pub fn dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::I32(_) => DType::I32,
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
        }
    }

    /// A float scalar of dtype `dtype` holding `value` rounded to that dtype, or the integer or
    /// boolean conversion of `value` with the semantics of [`crate::semantics::cast`].
    pub fn from_f64(dtype: DType, value: f64) -> Scalar {
        crate::semantics::cast(Scalar::F64(value), dtype)
    }

    /// The value widened to `f64` (`true` is 1, `false` is 0).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => f64::from(u8::from(b)),
            Scalar::I32(v) => f64::from(v),
            Scalar::F32(v) => f64::from(v),
            Scalar::F64(v) => v,
        }
    }

    /// The zero (or `false`) of `dtype`.
    pub fn zero(dtype: DType) -> Scalar {
        match dtype {
            DType::Bool => Scalar::Bool(false),
            DType::I32 => Scalar::I32(0),
            DType::F32 => Scalar::F32(0.0),
            DType::F64 => Scalar::F64(0.0),
        }
    }

    /// The raw bits of the value, zero-extended to 64 bits; used for equality and hashing.
    pub fn to_bits(self) -> u64 {
        match self {
            Scalar::Bool(b) => u64::from(b),
            Scalar::I32(v) => u64::from(v as u32),
            Scalar::F32(v) => u64::from(v.to_bits()),
            Scalar::F64(v) => v.to_bits(),
        }
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        self.dtype() == other.dtype() && self.to_bits() == other.to_bits()
    }
}

impl Eq for Scalar {}

impl std::hash::Hash for Scalar {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.dtype().hash(state);
        self.to_bits().hash(state);
    }
}

/// Prints the literal as the text formats write it: `true`, `-3`, `2.5`, `inf`, `-inf`, `nan`.
///
/// Finite floats use Rust's shortest round-trip representation, so parsing the text back in the
/// same dtype gives the same bits. A NaN other than the canonical quiet NaN of its dtype prints
/// its payload as `nan:0x7fc00001`.
impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::I32(v) => write!(f, "{v}"),
            Scalar::F32(v) => write_float(
                f,
                v,
                FloatClass::of(v.is_nan(), v.is_infinite(), v > 0.0),
                (v.to_bits() != f32::NAN.to_bits()).then_some(u64::from(v.to_bits())),
            ),
            Scalar::F64(v) => write_float(
                f,
                v,
                FloatClass::of(v.is_nan(), v.is_infinite(), v > 0.0),
                (v.to_bits() != f64::NAN.to_bits()).then_some(v.to_bits()),
            ),
        }
    }
}

/// What a float's text depends on besides its digits.
#[derive(Clone, Copy)]
enum FloatClass {
    Nan,
    PosInf,
    NegInf,
    Finite,
}

impl FloatClass {
    fn of(nan: bool, infinite: bool, positive: bool) -> FloatClass {
        match (nan, infinite, positive) {
            (true, _, _) => FloatClass::Nan,
            (false, true, true) => FloatClass::PosInf,
            (false, true, false) => FloatClass::NegInf,
            (false, false, _) => FloatClass::Finite,
        }
    }
}

/// One float as [`Scalar`]'s `Display` writes it: `nan` (or `nan:0x…` with the bits of a
/// non-canonical NaN, `payload`), `inf`, `-inf`, or the shortest round-trip digits.
fn write_float(
    f: &mut fmt::Formatter<'_>,
    v: impl fmt::Debug,
    class: FloatClass,
    payload: Option<u64>,
) -> fmt::Result {
    match (class, payload) {
        (FloatClass::Nan, None) => f.write_str("nan"),
        (FloatClass::Nan, Some(bits)) => write!(f, "nan:{bits:#x}"),
        (FloatClass::PosInf, _) => f.write_str("inf"),
        (FloatClass::NegInf, _) => f.write_str("-inf"),
        (FloatClass::Finite, _) => write!(f, "{v:?}"),
    }
}

/// Parses a literal as printed by `Scalar`'s `Display`, in the given dtype.
///
/// Floats are parsed directly in their own dtype (never through `f64` for `f32`, which could
/// round twice). Returns `None` when the text is not a literal of that dtype.
pub fn parse_scalar(text: &str, dtype: DType) -> Option<Scalar> {
    match dtype {
        DType::Bool => match text {
            "true" => Some(Scalar::Bool(true)),
            "false" => Some(Scalar::Bool(false)),
            _ => None,
        },
        DType::I32 => text.parse::<i32>().ok().map(Scalar::I32),
        DType::F32 => parse_float_special(text, 32)
            .map(|bits| Scalar::F32(f32::from_bits(bits as u32)))
            .or_else(|| {
                plain_float(text)
                    .and_then(|t| t.parse::<f32>().ok())
                    .map(Scalar::F32)
            }),
        DType::F64 => parse_float_special(text, 64)
            .map(|bits| Scalar::F64(f64::from_bits(bits)))
            .or_else(|| {
                plain_float(text)
                    .and_then(|t| t.parse::<f64>().ok())
                    .map(Scalar::F64)
            }),
    }
}

/// Accepts only decimal float syntax (Rust's parser also takes "infinity", "NaN" and similar
/// words, which the text formats spell differently).
fn plain_float(text: &str) -> Option<&str> {
    let ok = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
        && text.chars().any(|c| c.is_ascii_digit());
    ok.then_some(text)
}

fn parse_float_special(text: &str, width: u32) -> Option<u64> {
    let (canonical_nan, inf) = if width == 32 {
        (u64::from(f32::NAN.to_bits()), u64::from(f32::INFINITY.to_bits()))
    } else {
        (f64::NAN.to_bits(), f64::INFINITY.to_bits())
    };
    let sign_bit = 1u64 << (width - 1);
    match text {
        "nan" => Some(canonical_nan),
        "inf" | "+inf" => Some(inf),
        "-inf" => Some(inf | sign_bit),
        _ => {
            let hex = text.strip_prefix("nan:0x")?;
            let bits = u64::from_str_radix(hex, 16).ok()?;
            let is_nan = if width == 32 {
                u32::try_from(bits).is_ok_and(|b| f32::from_bits(b).is_nan())
            } else {
                f64::from_bits(bits).is_nan()
            };
            is_nan.then_some(bits)
        }
    }
}
