//! The functions of the expression language, in one table: the evaluator resolves every call
//! through it (a name missing here is an unknown function, whatever the evaluator could do),
//! and `rfx eval --list-functions` prints it.

use rfx_ir::UnaryOp;

/// One function of the expression language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function {
    /// The function's name.
    pub name: &'static str,
    /// Other names it answers to (NumPy's spellings).
    pub aliases: &'static [&'static str],
    /// Its arguments, `[…]` marking optional ones, e.g. `x[, axis][, keepdims=true]`.
    pub args: &'static str,
    /// What it computes, in one line.
    pub summary: &'static str,
}

/// NumPy's names for unary HIR ops: the op's name, then its aliases.
const UNARY_ALIASES: &[(&str, &[&str])] = &[
    ("atan", &["arctan"]),
    ("asin", &["arcsin"]),
    ("acos", &["arccos"]),
    ("log", &["ln"]),
    ("neg", &["negative"]),
    ("not", &["logical_not"]),
    ("abs", &["absolute"]),
];

/// The functions other than the unary HIR ops (which [`functions`] adds, one per op).
const FUNCTIONS: &[Function] = &[
    f(
        "sum",
        &[],
        "x[, axis][, keepdims=true]",
        "sum over every axis, or over `axis` (an integer or a list)",
    ),
    f("prod", &[], "x[, axis][, keepdims=true]", "product, as `sum`"),
    f(
        "min",
        &["amin"],
        "x[, axis][, keepdims=true]",
        "smallest element (a reduction; NaN propagates), as `sum`",
    ),
    f(
        "max",
        &["amax"],
        "x[, axis][, keepdims=true]",
        "largest element (a reduction; NaN propagates), as `sum`",
    ),
    f(
        "mean",
        &[],
        "x[, axis][, keepdims=true]",
        "arithmetic mean, as `sum`",
    ),
    f("add", &[], "a, b", "a + b"),
    f("sub", &["subtract"], "a, b", "a - b"),
    f("mul", &["multiply"], "a, b", "a * b"),
    f("div", &["divide", "true_divide"], "a, b", "a / b"),
    f("pow", &["power"], "a, b", "a ** b"),
    f("fmod", &[], "a, b", "a % b, with the dividend's sign (C's fmod)"),
    f("logical_and", &["and"], "a, b", "a & b (bool)"),
    f("logical_or", &["or"], "a, b", "a | b (bool)"),
    f("lt", &["less"], "a, b", "a < b"),
    f("le", &["less_equal"], "a, b", "a <= b"),
    f("gt", &["greater"], "a, b", "a > b"),
    f("ge", &["greater_equal"], "a, b", "a >= b"),
    f("eq", &["equal"], "a, b", "a == b"),
    f("ne", &["not_equal"], "a, b", "a != b"),
    f("minimum", &[], "a, b", "elementwise minimum (NaN propagates)"),
    f("maximum", &[], "a, b", "elementwise maximum (NaN propagates)"),
    f("atan2", &["arctan2"], "y, x", "the angle of (x, y), in (-pi, pi]"),
    f("where", &["select"], "cond, a, b", "a where cond is true, else b"),
    f("clip", &["clamp"], "x, lo, hi", "x limited to [lo, hi]"),
    f(
        "cast",
        &["astype"],
        "x, dtype",
        "x converted to f32, f64, i32 or bool",
    ),
    f("reshape", &[], "x, [dims]", "the same elements in another shape"),
    f(
        "broadcast_to",
        &[],
        "x, [dims]",
        "x repeated to a larger shape, NumPy's broadcasting",
    ),
    f("isnan", &[], "x", "whether each element is NaN"),
    f("isinf", &[], "x", "whether each element is infinite"),
    f(
        "isfinite",
        &[],
        "x",
        "whether each element is neither infinite nor NaN",
    ),
    f(
        "argmin",
        &[],
        "x[, axis]",
        "the int32 index of the first smallest element (into the flattened x without an axis)",
    ),
    f(
        "argmax",
        &[],
        "x[, axis]",
        "the int32 index of the first largest element, as `argmin`",
    ),
    f(
        "take",
        &[],
        "table, index[, axis]",
        "table's entries at index (clamped into range; the flattened table without an axis)",
    ),
    f(
        "take_along_axis",
        &[],
        "table, index, axis",
        "NumPy's take_along_axis, indices clamped into range",
    ),
    f(
        "matmul",
        &[],
        "a, b",
        "matrix product, NumPy's matmul (also `a @ b`)",
    ),
    f("dot", &[], "a, b", "NumPy's dot"),
    f(
        "cross",
        &[],
        "a, b[, axis]",
        "cross product of three-component vectors along the last axis, or `axis`",
    ),
    f(
        "norm",
        &[],
        "x[, axis]",
        "Euclidean norm of every element, or along `axis`",
    ),
    f(
        "diff",
        &[],
        "x[, axis]",
        "differences of neighbours along the last axis, or `axis`",
    ),
    f("inv", &[], "a", "matrix inverse"),
    f("det", &[], "a", "determinant"),
    f("solve", &[], "a, b", "x with a @ x = b"),
    f(
        "cumsum",
        &[],
        "x[, axis][, reverse=true]",
        "running sum (of the flattened x without an axis)",
    ),
    f(
        "cumprod",
        &[],
        "x[, axis][, reverse=true]",
        "running product, as `cumsum`",
    ),
    f(
        "cummax",
        &[],
        "x[, axis][, reverse=true]",
        "running maximum, as `cumsum`",
    ),
    f(
        "cummin",
        &[],
        "x[, axis][, reverse=true]",
        "running minimum, as `cumsum`",
    ),
    f(
        "linrec",
        &[],
        "x, a[, axis][, reverse=true]",
        "y[i] = a[i] y[i-1] + x[i] from y[-1] = 0, along the last axis or `axis`",
    ),
];

const fn f(
    name: &'static str,
    aliases: &'static [&'static str],
    args: &'static str,
    summary: &'static str,
) -> Function {
    Function {
        name,
        aliases,
        args,
        summary,
    }
}

/// Every function of the expression language: one per unary HIR op (by the op's name, with
/// NumPy's aliases), then the rest, each once, then the Lie group functions of [`crate::lie`].
pub fn functions() -> Vec<Function> {
    let unary = UnaryOp::ALL.iter().map(|op| {
        let name = op.name();
        let aliases = UNARY_ALIASES
            .iter()
            .find(|(canonical, _)| *canonical == name)
            .map_or(&[][..], |(_, aliases)| *aliases);
        Function {
            name,
            aliases,
            args: "x",
            summary: unary_summary(*op),
        }
    });
    let lie = crate::lie::EXPR_FUNCTIONS.iter().map(|f| Function {
        name: f.name,
        aliases: &[],
        args: f.args,
        summary: f.summary,
    });
    unary.chain(FUNCTIONS.iter().copied()).chain(lie).collect()
}

/// What the unary op computes, elementwise.
fn unary_summary(op: UnaryOp) -> &'static str {
    match op.name() {
        "neg" => "-x",
        "abs" => "absolute value",
        "sign" => "-1, 0 or 1 by the sign (NaN stays NaN)",
        "floor" => "rounded down",
        "ceil" => "rounded up",
        "round" => "rounded to the nearest integer, half to even",
        "sqrt" => "square root",
        "rsqrt" => "1 / sqrt(x)",
        "recip" => "1 / x",
        "exp" => "e ** x",
        "exp2" => "2 ** x",
        "log" => "natural logarithm",
        "log2" => "base-2 logarithm",
        "sin" | "cos" | "tan" => "trigonometric function, in radians",
        "tanh" => "hyperbolic tangent",
        "atan" | "asin" | "acos" => "inverse trigonometric function, in radians",
        "sigmoid" => "1 / (1 + exp(-x))",
        "erf" => "the error function",
        "not" => "logical not (bool), also `~x`",
        _ => "elementwise, the HIR op of that name",
    }
}

/// The function `name` (its own name or an alias) calls: the unary op, or else the table's
/// name; `None` for a name that is no function.
pub(crate) fn resolve(name: &str) -> Option<Resolved> {
    let canonical = UNARY_ALIASES
        .iter()
        .find(|(_, aliases)| aliases.contains(&name))
        .map_or(name, |(canonical, _)| *canonical);
    if let Some(op) = UnaryOp::from_name(canonical) {
        return Some(Resolved::Unary(op));
    }
    FUNCTIONS
        .iter()
        .find(|f| f.name == name || f.aliases.contains(&name))
        .map(|f| Resolved::Named(f.name))
        .or_else(|| crate::lie::expr_function(name).map(|f| Resolved::Named(f.name)))
}

/// What a call resolves to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// A unary HIR op.
    Unary(UnaryOp),
    /// The function of this name in the table.
    Named(&'static str),
}
