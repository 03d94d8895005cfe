"""Random NumPy programs (trees of supported ufuncs, reductions and shape ops over mixed dtypes
and Python scalars), traced and compiled, against NumPy running the same code."""

import warnings

import numpy as np
import pytest

import rfxjit as rj
from conftest import assert_matches

UNARY = [np.sin, np.cos, np.tanh, np.exp, np.abs, np.negative, np.floor, np.sqrt, np.arctan]
BINARY = [np.add, np.subtract, np.multiply, np.maximum, np.minimum, np.divide]
SCALARS = [2.0, -1, 3, 0.5]


def make_program(rng, depth):
    """A function of (x, y) and a description of it."""
    if depth == 0:
        leaf = rng.integers(0, 3)
        if leaf == 0:
            return (lambda x, y: x), "x"
        if leaf == 1:
            return (lambda x, y: y), "y"
        s = SCALARS[rng.integers(len(SCALARS))]
        return (lambda x, y: x * s), f"x*{s}"
    kind = rng.integers(0, 6)
    if kind == 4:
        f, d = make_program(rng, depth - 1)
        op = int(rng.integers(0, 4))
        if op == 0:
            return (lambda x, y: np.clip(f(x, y), -1.5, 1.5)), f"clip({d})"
        if op == 1:
            return (lambda x, y: f(x, y) ** 2), f"({d})**2"
        if op == 2:
            return (lambda x, y: f(x, y) - np.max(f(x, y), axis=-1, keepdims=True)), f"{d} - max({d})"
        return (lambda x, y: f(x, y) * np.mean(f(x, y), axis=0, keepdims=True)), f"{d} * mean({d})"
    if kind == 5:
        f, d = make_program(rng, depth - 1)
        g, e = make_program(rng, depth - 1)
        return (lambda x, y: np.where(f(x, y) < g(x, y), f(x, y), g(x, y) * 2)), f"where({d} < {e})"
    if kind == 0:
        u = UNARY[rng.integers(len(UNARY))]
        f, d = make_program(rng, depth - 1)
        if u is np.sqrt:
            return (lambda x, y: u(np.abs(f(x, y)))), f"sqrt(|{d}|)"
        return (lambda x, y: u(f(x, y))), f"{u.__name__}({d})"
    if kind in (1, 2):
        b = BINARY[rng.integers(len(BINARY))]
        f, d = make_program(rng, depth - 1)
        g, e = make_program(rng, depth - 1)
        return (lambda x, y: b(f(x, y), g(x, y))), f"{b.__name__}({d}, {e})"
    f, d = make_program(rng, depth - 1)
    axis = [0, -1][int(rng.integers(0, 2))]
    return (lambda x, y: np.where(f(x, y) > 0, f(x, y), 0.5) + np.sum(f(x, y), axis=axis, keepdims=True)), (
        f"where/sum axis {axis} ({d})"
    )


@pytest.mark.parametrize("seed", range(200))
def test_random_program(seed):
    rng = np.random.default_rng(seed)
    program, description = make_program(rng, 3)
    dtypes = [np.float32, np.float64, np.int32]
    x = (rng.uniform(-2, 2, size=(3, 4)) * (10 if seed % 3 == 2 else 1)).astype(dtypes[seed % 3])
    y = rng.uniform(0.5, 2, size=(4,)).astype(dtypes[(seed // 3) % 2])
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        expected = program(x, y)
    actual = rj.jit(program)(x, y)
    # A float32 value anywhere carries float32 rounding (a transcendental within a few ulps of
    # NumPy's) into the result, even a float64 one.
    rtol = 1e-4 if np.float32 in (x.dtype, y.dtype) else 1e-11
    try:
        assert_matches(actual, expected, rtol=rtol)
    except AssertionError as error:
        raise AssertionError(f"{description}: {error}") from None
