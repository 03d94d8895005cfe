"""Shared helpers: random inputs of each dtype (with special values), NumPy comparisons and
the backends the jitted tests run on."""

import functools
import os

import numpy as np
import pytest

DTYPES = [np.float32, np.float64, np.int32, np.bool_]
FLOATS = [np.float32, np.float64]


@functools.cache
def jit_backends():
    """The reference backends (`cpu`, `interp`), the C backend where it is built in and can run
    here (it needs a C compiler), and CUDA where this machine has a GPU and NVRTC.
    `RFXJIT_TEST_REQUIRE_CUDA=1` (set by `cargo xtask gpu-bundle`'s run on a GPU machine) makes
    a CUDA backend that cannot run a failure rather than a smaller list."""

    def unavailable(backend):
        """Why `backend` cannot run here, or `None` when it runs."""
        import rfxjit as rj

        if backend not in rj.backends():
            return f"rfxjit has no {backend} backend built in"
        try:
            rj.jit(lambda x: x + 1.0, backend=backend)(np.zeros(1))
        except rj.BackendUnavailable as error:
            return str(error)
        return None

    why = {backend: unavailable(backend) for backend in ("c", "cuda")}
    if os.environ.get("RFXJIT_TEST_REQUIRE_CUDA") == "1" and why["cuda"] is not None:
        raise RuntimeError(f"RFXJIT_TEST_REQUIRE_CUDA=1 but the CUDA backend cannot run: {why['cuda']}")
    return ["cpu", "interp"] + [backend for backend, reason in why.items() if reason is None]


def random_array(rng, shape, dtype, low=-3.0, high=3.0, special=True):
    """Random values of `dtype`; float arrays of 8+ elements carry 0, -0, inf, -inf and NaN."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "i":
        return rng.integers(int(low) * 10, int(high) * 10 + 1, size=shape).astype(dtype)
    values = rng.uniform(low, high, size=shape).astype(dtype)
    if special and values.size >= 8:
        flat = values.reshape(-1)
        flat[:5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
    return values


def assert_matches(actual, expected, dtype=None, rtol=None):
    """`actual` equals NumPy's `expected`: same dtype (NumPy's int64 is rfx's int32), same
    shape, values within a few float ulps (NaN where NumPy has NaN). Tuples and lists are
    compared item by item."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, type(expected)), f"{type(actual).__name__}, NumPy gives {type(expected).__name__}"
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_matches(a, e, dtype, rtol)
        return
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    want = expected.dtype
    if want == np.int64:
        want = np.dtype(np.int32)
    assert actual.dtype == want, f"dtype {actual.dtype}, NumPy gives {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape}, NumPy gives {expected.shape}"
    if want.kind == "f":
        if rtol is None:
            rtol = 4e-6 if want == np.float32 else 1e-13
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
