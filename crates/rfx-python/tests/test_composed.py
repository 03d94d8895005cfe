"""The ufuncs traced as compositions of rfx ops, against NumPy: bit for bit where signed zeros,
infinities and NaN are expected, and within the ULP bound docs/python.md states elsewhere.

`python tests/test_composed.py` prints the largest difference measured per function and dtype
(the numbers in `rfxjit._compose.ACCURACY`).
"""

import math
import warnings

import numpy as np
import pytest

import rfxjit as rj
from rfxjit._compose import ACCURACY

FLOATS = [np.float32, np.float64]

BINARY = {"floor_divide", "remainder", "divmod", "hypot", "logaddexp", "logaddexp2"}


def special_values(dtype):
    info = np.finfo(dtype)
    return np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, 1e-7, -1e-7,
         info.tiny, -info.tiny, info.smallest_subnormal, info.max, -info.max, 0.99, -0.99, 1.5],
        dtype=dtype,
    )


def inputs(seed, dtype, n=3000):
    """Special values, then values near 0, moderate ones and ones spread over the whole range,
    each with a random sign."""
    rng = np.random.default_rng(seed)
    top = math.log10(np.finfo(dtype).max) - 0.5
    magnitudes = np.concatenate(
        [
            10.0 ** rng.uniform(-12.0, 0.0, n),
            rng.uniform(0.0, 30.0, n),
            rng.uniform(0.5, 3.0, n),
            10.0 ** rng.uniform(-top, top, n),
        ]
    )
    signs = rng.choice([-1.0, 1.0], magnitudes.size)
    values = (magnitudes * signs).astype(dtype)
    specials = special_values(dtype)
    return np.concatenate([specials, values]), rng


def numpy_of(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return fn(*args)


def _ordered(values, dtype):
    """The floats as integers in the order of the floats (adjacent floats differ by 1; ±0 are 0)."""
    wide = np.int32 if np.dtype(dtype) == np.float32 else np.int64
    bits = values.astype(dtype).view(wide).astype(np.int64)
    return np.where(bits < 0, np.iinfo(wide).min - bits, bits)


def ulp_distance(actual, expected, dtype):
    """How many floats of `dtype` lie between `actual` and `expected` (finite, non-NaN)."""
    a, e = _ordered(actual, dtype), _ordered(expected, dtype)
    same_sign = (a >= 0) == (e >= 0)
    # Values of opposite signs are far apart; their difference could overflow int64.
    with np.errstate(over="ignore"):
        return np.where(same_sign, np.abs(a - e), np.iinfo(np.int64).max)


def check_specials_and_ulps(actual, expected, dtype, scale=None):
    """NaN where NumPy has NaN, the same sign on zeros and infinities, and the largest ULP
    difference elsewhere (returned). With `scale` (per element), the difference is counted in
    ULP of `scale` instead of ULP of the result."""
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype}, NumPy gives {expected.dtype}"
    assert actual.shape == expected.shape
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan, err_msg="NaN where NumPy has none, or the reverse")
    exact = (expected == 0) | np.isinf(expected)
    np.testing.assert_array_equal(
        actual[exact].view(actual.dtype), expected[exact], err_msg="a zero or an infinity differs"
    )
    np.testing.assert_array_equal(np.signbit(actual[exact]), np.signbit(expected[exact]), err_msg="the sign of a zero or an infinity")
    rest = ~nan & ~exact
    if not rest.any():
        return 0
    if scale is not None:
        magnitude = np.maximum(np.abs(scale[rest]), np.abs(expected[rest])).astype(dtype)
        error = np.abs(actual[rest].astype(np.float64) - expected[rest].astype(np.float64))
        with np.errstate(over="ignore"):  # the spacing at the largest float is inf
            spacing = np.spacing(magnitude).astype(np.float64)
        return int(np.ceil((error / spacing).max()))
    return int(ulp_distance(actual[rest], expected[rest], dtype).max())


def measure(name, dtype, seed):
    ufunc = getattr(np, name)
    x, rng = inputs(seed, dtype)
    if name in BINARY:
        # Every pair of special values, then random pairs.
        specials = special_values(dtype)
        sa, sb = np.meshgrid(specials, specials)
        y = x[rng.permutation(x.size)]
        if name in ("logaddexp", "logaddexp2", "hypot"):
            with np.errstate(over="ignore"):
                y = (y * rng.uniform(0.5, 2.0, y.size)).astype(dtype)  # close to x, and not
        args = (np.concatenate([sa.ravel(), x]), np.concatenate([sb.ravel(), y]))
    else:
        args = (x,)
    expected = numpy_of(ufunc, *args)
    actual = rj.jit(lambda *a: ufunc(*a))(*args)
    if name == "divmod":
        assert isinstance(actual, tuple) and len(actual) == 2
        return max(check_specials_and_ulps(a, e, dtype) for a, e in zip(actual, expected))
    # logaddexp cancels where x ≈ -y: its error is counted in ULP of the larger operand.
    scale = None
    if name.startswith("logaddexp"):
        finite = [np.where(np.isfinite(a), np.abs(a), 0) for a in args]
        scale = np.maximum(*finite)
    return check_specials_and_ulps(actual, expected, dtype, scale)


#: The random inputs of the measurement: 8 draws of about 12,000 values each.
SEEDS = range(1, 9)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(ACCURACY))
def test_composed_ufunc_against_numpy(name, dtype):
    bound = ACCURACY[name][1 if np.dtype(dtype) == np.float32 else 2]
    ulps = max(measure(name, dtype, seed) for seed in SEEDS)
    assert ulps <= bound, f"{name} ({np.dtype(dtype).name}): {ulps} ULP from NumPy, documented {bound}"


def test_floor_divide_and_remainder_of_int32_match_numpy():
    i32 = np.iinfo(np.int32)
    a = np.array([7, -7, 7, -7, 0, 5, -5, i32.min, i32.min, i32.max, 3, -3, 0], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 3, 0, 0, -1, 1, -1, 7, 7, 0], dtype=np.int32)
    rng = np.random.default_rng(3)
    a = np.concatenate([a, rng.integers(-1000, 1000, 200).astype(np.int32)])
    b = np.concatenate([b, rng.integers(-9, 10, 200).astype(np.int32)])
    for fn in (np.floor_divide, np.remainder, np.divmod, lambda x, y: (x // y, x % y) + divmod(x, y)):
        expected = numpy_of(fn, a, b)
        actual = rj.jit(lambda x, y: fn(x, y))(a, b)
        flat_e = expected if isinstance(expected, tuple) else (expected,)
        flat_a = actual if isinstance(actual, tuple) else (actual,)
        for got, want in zip(flat_a, flat_e, strict=True):
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, want)


def test_operators_and_promotion():
    x = np.array([5.5, -5.5, 0.0, -0.0, 7.0], dtype=np.float32)
    y = np.array([2.0, 2.0, -3.0, 3.0, -2.0], dtype=np.float32)
    def fn(a, b):
        return (a // b, a % b) + divmod(a, b) + (7.0 % b, a // 2, 2 // b)

    for got, want in zip(rj.jit(fn)(x, y), numpy_of(fn, x, y), strict=True):
        assert got.dtype == want.dtype == np.float32  # Python scalars are weak (NEP 50)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("name", ["sinh", "cosh", "arcsinh", "arctanh", "log10", "log1p", "expm1", "deg2rad", "rad2deg"])
def test_float_functions_of_integers_compute_in_float64(name):
    x = np.array([0, 1, -1, 3], dtype=np.int32)
    ufunc = getattr(np, name)
    actual = rj.jit(lambda a: ufunc(a))(x)
    expected = numpy_of(ufunc, x)
    assert actual.dtype == expected.dtype == np.float64
    np.testing.assert_allclose(actual, expected, rtol=1e-15, atol=0, equal_nan=True)


def test_log1p_and_expm1_are_accurate_near_zero():
    # Where log(1+x) and exp(x)-1 lose every digit.
    x = np.array([1e-300, -1e-20, 1e-12, 3e-9, -4e-5], dtype=np.float64)
    np.testing.assert_allclose(rj.jit(lambda v: np.log1p(v))(x), np.log1p(x), rtol=4e-16, atol=0)
    np.testing.assert_allclose(rj.jit(lambda v: np.expm1(v))(x), np.expm1(x), rtol=4e-16, atol=0)


def test_hypot_does_not_overflow_or_underflow():
    a = np.array([1e300, 3e-300, 3e200, 0.0, np.inf, np.nan], dtype=np.float64)
    b = np.array([1e300, 4e-300, 4e200, 0.0, np.nan, np.inf], dtype=np.float64)
    np.testing.assert_allclose(rj.jit(lambda u, v: np.hypot(u, v))(a, b), [math.sqrt(2) * 1e300, 5e-300, 5e200, 0.0, np.inf, np.inf], rtol=4e-16)


def test_gradient_of_a_composition():
    # d/dx sinh = cosh, d/dx log1p = 1/(1+x): autodiff goes through the composed ops.
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(rj.grad(lambda v: np.sum(np.sinh(v)))(x), np.cosh(x), rtol=1e-14)
    np.testing.assert_allclose(rj.grad(lambda v: np.sum(np.log1p(v)))(x[:1]), 1 / (1 + x[:1]), rtol=1e-14)


if __name__ == "__main__":
    for name in sorted(ACCURACY):
        print(name, [max(measure(name, dtype, seed) for seed in SEEDS) for dtype in FLOATS])


def test_jit_of_a_numpy_ufunc_itself():
    # A ufunc's signature has out= and keyword-only parameters; they keep their defaults.
    x = np.array([1e-10, 0.5, -0.3])
    np.testing.assert_array_equal(rj.jit(np.log1p)(x), rj.jit(lambda v: np.log1p(v))(x))
    np.testing.assert_allclose(rj.jit(np.hypot)(x, x), np.hypot(x, x), rtol=4e-16)
    with pytest.raises(TypeError, match="keyword-only"):
        rj.jit(np.log1p)(x, where=x > 0)


def test_the_rfxjit_numpy_namespace_has_the_composed_functions():
    import rfxjit.numpy as rnp

    a = np.array([7.5, -7.5, 0.25], dtype=np.float32)
    b = np.array([2.0, 2.0, -0.5], dtype=np.float32)
    got = rj.jit(lambda u, v: (rnp.mod(u, v), rnp.floor_divide(u, v), rnp.log1p(u * u), rnp.hypot(u, v)))(a, b)
    want = (np.mod(a, b), np.floor_divide(a, b), np.log1p(a * a), np.hypot(a, b))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=3e-7)
