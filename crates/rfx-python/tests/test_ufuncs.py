"""Every supported ufunc against NumPy, on random inputs of every dtype it takes."""

import warnings

import numpy as np
import pytest

import rfxjit as rj
from conftest import DTYPES, FLOATS, assert_matches, random_array

SAME_DTYPE = ["negative", "absolute", "sign", "floor", "ceil", "square", "positive"]
FLOAT_RESULT = ["sqrt", "exp", "exp2", "log", "log2", "sin", "cos", "tan", "tanh", "arcsin", "arccos", "arctan", "rint"]
PREDICATES = ["isnan", "isinf", "isfinite"]
ARITH = ["add", "subtract", "multiply", "minimum", "maximum"]
FLOAT_BINARY = ["divide", "arctan2", "power", "fmod"]
COMPARE = ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]


def numpy_of(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return fn(*args)


def check(fn, *args, rtol=None):
    expected = numpy_of(fn, *args)
    actual = rj.jit(fn)(*args)
    assert_matches(actual, expected, rtol=rtol)


@pytest.mark.parametrize("name", SAME_DTYPE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_same_dtype_unary(name, dtype, rng):
    x = random_array(rng, (3, 5), dtype)
    ufunc = getattr(np, name)
    check(lambda a: ufunc(a), x)


@pytest.mark.parametrize("name", FLOAT_RESULT)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_float_unary(name, dtype, rng):
    low, high = (-0.99, 0.99) if name in ("arcsin", "arccos") else (-3.0, 3.0)
    if name in ("sqrt", "log", "log2"):
        low = 0.0
    x = random_array(rng, (4, 4), dtype, low, high)
    ufunc = getattr(np, name)
    # Transcendentals: within the CPU backend's documented few-ulp bounds.
    rtol = 2e-5 if np.dtype(dtype) == np.float32 else 1e-12
    check(lambda a: ufunc(a), x, rtol=rtol)


@pytest.mark.parametrize("name", PREDICATES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_predicates(name, dtype, rng):
    x = random_array(rng, (10,), dtype)
    ufunc = getattr(np, name)
    check(lambda a: ufunc(a), x)


@pytest.mark.parametrize("name", ARITH)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_arithmetic(name, dtype, rng):
    x = random_array(rng, (3, 4), dtype)
    y = random_array(rng, (4,), dtype)  # broadcasts
    ufunc = getattr(np, name)
    check(lambda a, b: ufunc(a, b), x, y)


@pytest.mark.parametrize("name", FLOAT_BINARY)
@pytest.mark.parametrize("dtype", FLOATS)
def test_float_binary(name, dtype, rng):
    x = random_array(rng, (12,), dtype, 0.1, 3.0, special=False)
    y = random_array(rng, (12,), dtype, -2.0, 2.0)
    ufunc = getattr(np, name)
    rtol = 2e-5 if np.dtype(dtype) == np.float32 else 1e-12
    check(lambda a, b: ufunc(a, b), x, y, rtol=rtol)


def test_integer_division_and_power(rng):
    x = random_array(rng, (8,), np.int32, 1, 5)
    y = np.array([1, 2, 3, 4, 1, 2, 3, 4], dtype=np.int32)
    check(lambda a, b: a / b, x, y)  # true division of ints is float64
    check(lambda a: a**2, x)  # stays int32


@pytest.mark.parametrize("name", COMPARE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_comparisons(name, dtype, rng):
    x = random_array(rng, (2, 6), dtype)
    y = random_array(rng, (2, 6), dtype)
    y[0, :3] = x[0, :3]
    ufunc = getattr(np, name)
    check(lambda a, b: ufunc(a, b), x, y)


@pytest.mark.parametrize("name", LOGICAL)
def test_logical(name, rng):
    x = random_array(rng, (9,), np.bool_)
    y = random_array(rng, (9,), np.bool_)
    ufunc = getattr(np, name)
    check(lambda a, b: ufunc(a, b), x, y)
    check(lambda a: np.logical_not(a), x)
    check(lambda a, b: (a & b) | ~a ^ b, x, y)


def test_logical_of_numbers(rng):
    x = random_array(rng, (9,), np.float64)
    y = random_array(rng, (9,), np.int32)
    check(lambda a, b: np.logical_and(a, b), x, y)
    check(lambda a: np.logical_not(a), x)


def test_operators(rng):
    x = random_array(rng, (5,), np.float64, special=False)
    y = random_array(rng, (5,), np.float64, 0.5, 2.0, special=False)
    check(lambda a, b: (-a + b * 2.0 - 1.0 / b) ** 2 / (abs(a) + 1.0), x, y)
    check(lambda a, b: (2.0 - a, 3.0 * b, 1.0 / b, 2.0**a, a < b, a >= 1.0, a == b, a != 1.0), x, y)


def test_matmul_ufunc(rng):
    a = random_array(rng, (3, 4), np.float64, special=False)
    b = random_array(rng, (4, 2), np.float64, special=False)
    check(lambda x, y: np.matmul(x, y), a, b)
    check(lambda x, y: x @ y, a, b)
    v = random_array(rng, (4,), np.float32, special=False)
    check(lambda x, y: x @ y, a.astype(np.float32), v)


def test_reduce_method(rng):
    x = random_array(rng, (3, 4), np.float64, special=False)
    check(lambda a: np.add.reduce(a, axis=1), x)
    check(lambda a: np.maximum.reduce(a), x)


@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "minimum"] + COMPARE)
def test_bool_binary(name, rng):
    x = random_array(rng, (10,), np.bool_)
    y = random_array(rng, (10,), np.bool_)
    ufunc = getattr(np, name)
    check(lambda a, b: ufunc(a, b), x, y)


@pytest.mark.parametrize("name", ["absolute", "floor", "ceil"])
def test_bool_unary(name, rng):
    x = random_array(rng, (10,), np.bool_)
    ufunc = getattr(np, name)
    check(lambda a: ufunc(a), x)


@pytest.mark.parametrize("name", ["square", "positive", "negative", "sign"])
def test_bool_unary_without_an_rfx_result(name):
    ufunc = getattr(np, name)
    with pytest.raises(rj.TraceError, match=name):
        rj.jit(lambda a: ufunc(a))(np.array([True, False]))
