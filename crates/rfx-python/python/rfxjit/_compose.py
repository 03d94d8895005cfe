"""NumPy ufuncs that rfx has no single op for, traced as compositions of rfx ops.

Each function here builds graph nodes only (as `jax.numpy` over `lax`): the kernel computes
the result with rfx's own ops, in the operands' dtype. The formulas are the IEEE-careful ones
of the C libraries (NumPy's `npy_divmod`, Kahan's `expm1` and `log1p`, glibc's inverse
hyperbolic functions), so that signed zeros, infinities and NaN come out as NumPy's, and
`ACCURACY` records the largest difference from NumPy measured, in units in the last place
(checked by `tests/test_composed.py`, printed in docs/python.md's table).

Under `jit(..., fast_math=True)` the optimiser may rewrite `log(exp(x))` to `x`, which undoes
the cancellation trick of `expm1` (and of `sinh`, `cosh` and `arcsinh` built on it).
"""

from __future__ import annotations

import math

import numpy as np

# The tracer module imports this one; its helpers are looked up when a function runs.
from . import _tracer as T


#: Per composed ufunc: (how it is computed, max ULP from NumPy measured on float32, on float64).
#: 0 means bit for bit equal on every input tried.
ACCURACY = {
    "floor_divide": ("NumPy's `npy_divmod`: `fmod`, the sign fix, `floor` and the snap to the nearest integer; int32: rfx's floor division (`x // 0 = 0`, as NumPy)", 0, 0),
    "remainder": ("NumPy's `npy_divmod`: `fmod`, then `+ b` where the signs differ; `x % 0` is NaN (int32: 0, as NumPy); a zero result has the divisor's sign", 0, 0),
    "divmod": ("`(floor_divide, remainder)` from one `fmod`", 0, 0),
    "sinh": ("`(E + E/(E+1))/2` with `E = expm1(a)`, `a = abs(x)`; `exp(a/2)²/2` beyond 22; the sign restored", 2, 3),
    "cosh": ("`(e + 1/e)/2` with `e = exp(a)`, `a = abs(x)`; `exp(a/2)²/2` beyond 22", 3, 3),
    "arcsinh": ("`log1p(a + a²/(1 + √(1+a²)))`, `a = abs(x)`; `log(a) + ln 2` beyond 2²⁸; the sign restored", 2, 3),
    "arccosh": ("`log1p(t + √(2t + t²))`, `t = x-1`, up to 2; `log(2x - 1/(x + √(x²-1)))` up to 2²⁸; `log(x) + ln 2` beyond", 2, 2),
    "arctanh": ("`log1p(2a + 2a²/(1-a))/2` below 0.5, `log1p(2a/(1-a))/2` above, `a = abs(x)`; the sign restored", 3, 3),
    "log10": ("`log(x) · log10(e)`", 2, 3),
    "log1p": ("`u = 1+x`; `x` where `u = 1`, else `log(u) · (x/(u-1))`", 2, 2),
    "expm1": ("Kahan: `u = eˣ`; `x` where `u = 1`, `-1` where `u-1 = -1`, else `(u-1) · (x/log(u))`", 3, 2),
    "hypot": ("`√(a² + b²)` where that cannot overflow or underflow, else `m·√(1 + (n/m)²)` (`m`, `n` the larger and smaller magnitude); `inf` if either is infinite", 2, 2),
    "deg2rad": ("`x · (π/180)`, as NumPy", 0, 0),
    "radians": ("`x · (π/180)`, as NumPy", 0, 0),
    "rad2deg": ("`x · (180/π)`, the constant divided in the dtype, as NumPy", 0, 0),
    "degrees": ("`x · (180/π)`, the constant divided in the dtype, as NumPy", 0, 0),
    "logaddexp": ("NumPy's: `x + ln 2` where `x = y`, else `max + log1p(exp(-abs(x-y)))`; ULP of the larger of x, y and the result (where eˣ + eʸ ≈ 1 the result is near 0 and the sum cancels, in NumPy too)", 2, 2),
    "logaddexp2": ("NumPy's: `x + 1` where `x = y`, else `max + log2(1 + 2^-abs(x-y))` (through `log1p`); ULP as for `logaddexp`", 2, 2),
}


# -- small helpers over tracers of one float dtype ------------------------------------------------


def _add(a, b):
    return T.binary("add", a, b)


def _sub(a, b):
    return T.binary("subtract", a, b)


def _mul(a, b):
    return T.binary("multiply", a, b)


def _div(a, b):
    return T.binary("divide", a, b)


def _un(op, x):
    return T.Tracer(x._t.unary(op))


def _where(cond, a, b):
    return T.where_impl(cond, a, b)


def _lt(a, b):
    return T.compare("less", a, b)


def _gt(a, b):
    return T.compare("greater", a, b)


def _eq(a, b):
    return T.compare("equal", a, b)


def _ne(a, b):
    return T.compare("not_equal", a, b)


def _or(a, b):
    return T.logical("logical_or", a, b)


def _and(a, b):
    return T.logical("logical_and", a, b)


def _const(x, value):
    """A 0-d constant of `x`'s dtype (broadcast by the ops that use it)."""
    return T.lift(np.asarray(value, dtype=x.dtype))


def _signbit(x):
    """Whether `x`'s sign bit is set, for every non-NaN `x` (`-0` included: `1/-0 = -inf`)."""
    return _or(_lt(x, 0.0), _lt(_un("reciprocal", x), 0.0))


def _copysign(magnitude, x):
    """`magnitude` (non-negative, or NaN) with the sign of `x`."""
    return _where(_signbit(x), _un("negative", magnitude), magnitude)


def _float_operand(x):
    x = T.lift(x)
    if x.dtype.kind != "f":
        x = T.Tracer(x._t.cast("float64"))
    return x


def _float_pair(a, b):
    dtype = T.result_dtype(a, b)
    if dtype.kind != "f":
        dtype = np.dtype(np.float64)
    return T.lift(a, dtype), T.lift(b, dtype)


def _weak_as(result, *operands):
    return T.Tracer(result._t, weak=T._both_weak(*operands))


# -- division ----------------------------------------------------------------------------------


def _integer_divmod(a, b):
    """int32: rfx's `/` is NumPy's floor division (`x // 0 = 0`); the remainder is the
    truncated one (`fmod`, 0 for a zero divisor) moved to the divisor's sign."""
    quotient = T.Tracer(a._t.binary("divide", b._t))
    rem = T.Tracer(a._t.binary("fmod", b._t))
    fix = _and(_ne(rem, 0), _ne(_lt(rem, 0), _lt(b, 0)))
    return quotient, _where(fix, _add(rem, b), rem)


def _float_divmod(a, b):
    """NumPy's `npy_divmod`, `npy_floor_divide` and `npy_remainder`, elementwise."""
    mod0 = T.Tracer(a._t.binary("fmod", b._t))
    div = _div(_sub(a, mod0), b)
    # Python's convention: the remainder takes the divisor's sign.
    fix = _and(_ne(mod0, 0.0), _ne(_lt(b, 0.0), _lt(mod0, 0.0)))
    mod = _where(fix, _add(mod0, b), mod0)
    div = _where(fix, _sub(div, 1.0), div)
    signed_zero_of_b = _where(_lt(b, 0.0), _const(a, -0.0), _const(a, 0.0))
    mod = _where(_eq(mod0, 0.0), signed_zero_of_b, mod)
    # The quotient snapped to the nearest integer; a zero one takes the sign of a/b.
    floor = _un("floor", div)
    floor = _where(_gt(_sub(div, floor), 0.5), _add(floor, 1.0), floor)
    quotient = _div(a, b)
    signed_zero_of_q = _where(_signbit(quotient), _const(a, -0.0), _const(a, 0.0))
    floor = _where(_eq(div, 0.0), signed_zero_of_q, floor)
    # A zero divisor: a/b and fmod (NaN).
    by_zero = _eq(b, 0.0)
    return _where(by_zero, quotient, floor), _where(by_zero, mod0, mod)


def divmod_pair(a, b):
    """`(a // b, a % b)` with NumPy's dtype and semantics."""
    dtype = T.result_dtype(a, b)
    if dtype == np.bool_:
        dtype = np.dtype(np.int32)  # NumPy gives int8, which rfx lacks
    ta, tb = T.lift(a, dtype), T.lift(b, dtype)
    if dtype.kind == "i":
        quotient, rem = _integer_divmod(ta, tb)
    else:
        quotient, rem = _float_divmod(ta, tb)
    return _weak_as(quotient, a, b), _weak_as(rem, a, b)


def floor_divide(a, b):
    return divmod_pair(a, b)[0]


def remainder(a, b):
    return divmod_pair(a, b)[1]


def divmod_(a, b):
    return divmod_pair(a, b)


# -- exponentials and logarithms ---------------------------------------------------------------


def _expm1(x):
    u = _un("exp", x)
    um1 = _sub(u, 1.0)
    general = _mul(um1, _div(x, _un("log", u)))
    res = _where(_eq(um1, -1.0), _const(x, -1.0), general)
    res = _where(_eq(u, 1.0), x, res)
    return _where(_eq(u, math.inf), u, res)


def _log1p(x):
    u = _add(x, 1.0)
    general = _mul(_un("log", u), _div(x, _sub(u, 1.0)))
    res = _where(_eq(u, 1.0), x, general)
    return _where(_eq(u, math.inf), u, res)


def expm1(x):
    x = _float_operand(x)
    return _weak_as(_expm1(x), x)


def log1p(x):
    x = _float_operand(x)
    return _weak_as(_log1p(x), x)


def log10(x):
    x = _float_operand(x)
    return _weak_as(_mul(_un("log", x), _const(x, 1.0 / math.log(10.0))), x)


def logaddexp(a, b, base2=False):
    x, y = _float_pair(a, b)
    diff = _sub(x, y)
    if base2:
        same = _add(x, 1.0)
        up = _add(x, _mul(_log1p(_un("exp2", _un("negative", diff))), _const(x, 1.0 / math.log(2.0))))
        down = _add(y, _mul(_log1p(_un("exp2", diff)), _const(x, 1.0 / math.log(2.0))))
    else:
        same = _add(x, math.log(2.0))
        up = _add(x, _log1p(_un("exp", _un("negative", diff))))
        down = _add(y, _log1p(_un("exp", diff)))
    res = _where(_gt(diff, 0.0), up, _where(T.compare("less_equal", diff, 0.0), down, diff))
    return _weak_as(_where(_eq(x, y), same, res), a, b)


# -- hyperbolic functions ----------------------------------------------------------------------

#: Beyond this magnitude `e^-|x|` is below half an ulp of `e^|x|` in float64.
_HYPERBOLIC_LARGE = 22.0


def _half_exp_squared(a):
    """`e^a / 2` as `(e^(a/2) / 2) · e^(a/2)`, finite up to sinh's and cosh's own overflow."""
    h = _un("exp", _mul(a, 0.5))
    return _mul(_mul(h, 0.5), h)


def sinh(x):
    x = _float_operand(x)
    a = _un("absolute", x)
    e = _expm1(a)
    small = _mul(_add(e, _div(e, _add(e, 1.0))), 0.5)
    mag = _where(_gt(a, _HYPERBOLIC_LARGE), _half_exp_squared(a), small)
    return _weak_as(_copysign(mag, x), x)


def cosh(x):
    x = _float_operand(x)
    a = _un("absolute", x)
    e = _un("exp", a)
    small = _add(_mul(e, 0.5), _div(_const(x, 0.5), e))
    return _weak_as(_where(_gt(a, _HYPERBOLIC_LARGE), _half_exp_squared(a), small), x)


_LARGE = 2.0**28
_LN2 = math.log(2.0)


def arcsinh(x):
    x = _float_operand(x)
    a = _un("absolute", x)
    a2 = _mul(a, a)
    small = _log1p(_add(a, _div(a2, _add(_un("sqrt", _add(a2, 1.0)), 1.0))))
    large = _add(_un("log", a), _LN2)
    mag = _where(_gt(a, _LARGE), large, small)
    return _weak_as(_copysign(mag, x), x)


def arccosh(x):
    x = _float_operand(x)
    t = _sub(x, 1.0)
    near_one = _log1p(_add(t, _un("sqrt", _add(_mul(t, 2.0), _mul(t, t)))))
    x2m1 = _sub(_mul(x, x), 1.0)
    middle = _un("log", _sub(_mul(x, 2.0), _div(_const(x, 1.0), _add(x, _un("sqrt", x2m1)))))
    large = _add(_un("log", x), _LN2)
    res = _where(_gt(x, _LARGE), large, _where(_gt(x, 2.0), middle, near_one))
    return _weak_as(_where(_lt(x, 1.0), _const(x, math.nan), res), x)


def arctanh(x):
    x = _float_operand(x)
    a = _un("absolute", x)
    two_a = _add(a, a)
    one_minus = _sub(_const(x, 1.0), a)
    below = _log1p(_add(two_a, _div(_mul(two_a, a), one_minus)))
    above = _log1p(_div(two_a, one_minus))
    mag = _mul(_where(_lt(a, 0.5), below, above), 0.5)
    return _weak_as(_copysign(mag, x), x)


# -- others ----------------------------------------------------------------------------------------

#: (smallest, largest) magnitude whose square neither underflows nor overflows, per dtype.
_SQUARE_SAFE = {np.dtype(np.float32): (2.0**-60, 2.0**60), np.dtype(np.float64): (2.0**-500, 2.0**500)}


def hypot(a, b):
    x, y = _float_pair(a, b)
    ax, ay = _un("absolute", x), _un("absolute", y)
    big = T.binary("maximum", ax, ay)
    small = T.binary("minimum", ax, ay)
    direct = _un("sqrt", _add(_mul(ax, ax), _mul(ay, ay)))
    ratio = _div(small, big)
    scaled = _mul(big, _un("sqrt", _add(_mul(ratio, ratio), 1.0)))
    lo, hi = _SQUARE_SAFE[x.dtype]
    safe = _and(T.compare("greater_equal", big, lo), T.compare("less_equal", big, hi))
    res = _where(safe, direct, _where(_eq(big, 0.0), big, scaled))
    infinite = _or(_eq(ax, math.inf), _eq(ay, math.inf))
    return _weak_as(_where(infinite, _const(x, math.inf), res), a, b)


def _scale(factor):
    """`x · factor(dtype)`: the constant as NumPy rounds it for each dtype."""

    def handler(x):
        x = _float_operand(x)
        return _weak_as(_mul(x, T.lift(factor(x.dtype.type))), x)

    return handler


# NumPy's `NPY_PI/180` rounded to the dtype, and `180/NPY_PI` divided in the dtype.
deg2rad = _scale(lambda real: real(math.pi / 180.0))
rad2deg = _scale(lambda real: real(180.0) / real(math.pi))


#: The composed ufuncs by NumPy's name (merged into the tracer's table).
UFUNCS = {
    "floor_divide": floor_divide,
    "remainder": remainder,
    "divmod": divmod_,
    "sinh": sinh,
    "cosh": cosh,
    "arcsinh": arcsinh,
    "arccosh": arccosh,
    "arctanh": arctanh,
    "log10": log10,
    "log1p": log1p,
    "expm1": expm1,
    "hypot": hypot,
    "deg2rad": deg2rad,
    "radians": deg2rad,
    "rad2deg": rad2deg,
    "degrees": rad2deg,
    "logaddexp": logaddexp,
    "logaddexp2": lambda a, b: logaddexp(a, b, base2=True),
}
