"""NumPy's dtype rules within rfx's dtypes: NEP 50 scalars, promotion, int64, layouts."""

import numpy as np
import pytest

import rfxjit as rj
from conftest import assert_matches


def test_weak_python_scalars_keep_the_array_dtype():
    x = np.array([1.0, 2.0], dtype=np.float32)
    f = rj.jit(lambda a: a * 2.0 + 1)
    assert f(x).dtype == np.float32
    i = np.array([1, 2], dtype=np.int32)
    assert rj.jit(lambda a: a + 1)(i).dtype == np.int32
    # A float scalar with an int array gives float64, as in NumPy.
    assert_matches(rj.jit(lambda a: a * 2.5)(i), i * 2.5)


def test_python_scalar_arguments_are_weak():
    x = np.array([1.0, 2.0], dtype=np.float32)
    f = rj.jit(lambda a, k: a * k)
    out = f(x, 3.0)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([3.0, 6.0], np.float32))
    # A new value of the scalar is not a new signature.
    f(x, 4.0)
    assert f.cache_info().misses == 1
    # On its own a float scalar is float64; an int scalar int32.
    assert rj.jit(lambda k: k * 2)(1.5).dtype == np.float64
    assert rj.jit(lambda k: k * 2)(3).dtype == np.int32


def test_mixed_array_dtypes_promote_as_numpy():
    a32 = np.array([1.5, 2.5], dtype=np.float32)
    a64 = np.array([0.25, 0.5], dtype=np.float64)
    i32 = np.array([1, 2], dtype=np.int32)
    b = np.array([True, False])
    f = rj.jit(lambda p, q: p + q)
    assert_matches(f(a32, a64), a32 + a64)
    assert_matches(f(i32, a32), i32 + a32)
    assert_matches(f(b, i32), b + i32)
    assert_matches(f(a32, np.float64(2.0)), a32 + np.float64(2.0))


def test_int64_arguments_are_converted_with_a_range_check():
    # Python ints beyond int32 too.
    with pytest.raises(rj.CallError, match="does not fit int32"):
        rj.jit(lambda a: a * 2)(2**40)
    x = np.arange(4)  # int64
    out = rj.jit(lambda a: a * 2)(x)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [0, 2, 4, 6])
    with pytest.raises(rj.CallError, match="do not fit int32"):
        rj.jit(lambda a: a * 2)(np.array([2**40]))


def test_unsupported_dtypes_are_rejected():
    with pytest.raises(rj.CallError, match="complex128 is not supported"):
        rj.jit(lambda a: a * 2)(np.array([1j]))
    with pytest.raises(rj.CallError, match="float16 is not supported"):
        rj.jit(lambda a: a * 2)(np.ones(2, np.float16))


def test_zero_dimensional_arrays():
    f = rj.jit(lambda a, b: a * b + 1.0)
    out = f(np.float32(2.0), np.array(3.0, dtype=np.float32))
    assert out.shape == () and out.dtype == np.float32 and out == 7.0
    assert rj.jit(lambda a: np.sum(a))(np.array([1.0, 2.0])).shape == ()


def test_non_contiguous_and_fortran_arrays_are_copied():
    base = np.arange(24.0).reshape(4, 6)
    fortran = np.asfortranarray(base)
    strided = base[:, ::2]
    f = rj.jit(lambda a: a * 2.0 + 1.0)
    assert_matches(f(fortran), fortran * 2.0 + 1.0)
    assert_matches(f(strided), strided * 2.0 + 1.0)
    assert_matches(f(base.T), base.T * 2.0 + 1.0)


def test_astype(rng=None):
    x = np.array([1.7, -2.2, 0.0])
    assert_matches(rj.jit(lambda a: (a.astype(np.int32), a.astype(np.float32), a.astype(bool)))(x),
                   (x.astype(np.int32), x.astype(np.float32), x.astype(bool)))


def test_byte_swapped_arrays():
    x = np.arange(4.0).astype(">f8")
    assert_matches(rj.jit(lambda a: a * 2.0)(x), (x * 2.0).astype(np.float64))
    k = rj.jit(lambda a: a * 2.0).bind(np.zeros(4))
    with pytest.raises(rj.CallError, match="expected dtype float64"):
        k(x)
