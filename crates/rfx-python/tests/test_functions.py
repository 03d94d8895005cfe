"""NumPy functions (reductions, shapes, linear algebra, indexing) against NumPy."""

import numpy as np
import pytest

import rfxjit as rj
import rfxjit.numpy as rnp
from conftest import assert_matches, random_array


def check(fn, *args, rtol=None):
    assert_matches(rj.jit(fn)(*args), fn(*args), rtol=rtol)


AXES = [None, 0, 1, -1, (0, 2), (0, 1, 2)]


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name, dtype, axis, keepdims, rng):
    x = random_array(rng, (2, 3, 4), dtype, -2, 2, special=False)
    if name == "prod" and np.dtype(dtype) == np.int32:
        # Products stay within int32 (NumPy accumulates int32 in int64; rfx in int32).
        x = rng.integers(-1, 3, size=x.shape).astype(np.int32)
    fn = getattr(np, name)
    rtol = 1e-5 if np.dtype(dtype) == np.float32 else None
    check(lambda a: fn(a, axis=axis, keepdims=keepdims), x, rtol=rtol)


def test_reduction_methods_and_bools(rng):
    x = random_array(rng, (3, 4), np.float64, special=False)
    check(lambda a: (a.sum(), a.mean(axis=0), a.max(axis=1, keepdims=True), a.min(), a.prod(axis=-1)), x)
    b = random_array(rng, (3, 4), np.bool_)
    check(lambda a: (np.sum(a), np.sum(a, axis=0)), b)
    i = random_array(rng, (3, 4), np.int32)
    check(lambda a: np.mean(a, axis=1), i)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_arg_reductions(name, dtype, rng):
    x = random_array(rng, (3, 5), dtype, special=False)
    fn = getattr(np, name)
    check(lambda a: (fn(a, axis=0), fn(a, axis=1), fn(a, axis=-1, keepdims=True), fn(a)), x)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_scans(name, dtype, rng):
    x = random_array(rng, (3, 4), dtype, -2, 2, special=False)
    if name == "cumprod" and np.dtype(dtype) == np.int32:
        x = rng.integers(-2, 3, size=x.shape).astype(np.int32)  # products within int32
    fn = getattr(np, name)
    check(lambda a: (fn(a, axis=0), fn(a, axis=1), fn(a)), x)


def test_where_and_clip(rng):
    x = random_array(rng, (4, 5), np.float32)
    y = random_array(rng, (5,), np.float32)
    check(lambda a, b: np.where(a > b, a, b * 2.0), x, y)
    check(lambda a: np.where(a > 0, a, 0.0), x)
    check(lambda a: (np.clip(a, -1.0, 1.0), a.clip(0.5, 2.0), np.clip(a, None, 1.0), np.clip(a, -0.5, None)), x)
    i = random_array(rng, (6,), np.int32)
    check(lambda a: np.clip(a, -5, 5), i)


def test_linear_algebra(rng):
    a = random_array(rng, (3, 3), np.float64, special=False) + 4 * np.eye(3)
    b = random_array(rng, (3,), np.float64, special=False)
    m = random_array(rng, (3, 2), np.float64, special=False)
    rtol = 1e-10
    check(lambda x: np.linalg.inv(x), a, rtol=rtol)
    check(lambda x: np.linalg.det(x), a, rtol=rtol)
    check(lambda x, y: np.linalg.solve(x, y), a, b, rtol=rtol)
    check(lambda x, y: np.linalg.solve(x, y), a, m, rtol=rtol)
    check(lambda x, y: (np.dot(x, y), x.dot(y)), a, b)
    check(lambda x: (np.linalg.norm(x), np.linalg.norm(x, axis=1), np.linalg.norm(x, axis=0, keepdims=True)), a)
    u = random_array(rng, (4, 3), np.float32, special=False)
    v = random_array(rng, (4, 3), np.float32, special=False)
    check(lambda x, y: np.cross(x, y), u, v, rtol=1e-5)
    check(lambda x, y: np.cross(x.T, y.T, axis=0), u, v, rtol=1e-5)


def test_shapes(rng):
    x = random_array(rng, (2, 3, 4), np.float64, special=False)
    check(lambda a: (a.reshape(6, 4), np.reshape(a, (4, -1)), a.reshape(-1)), x)
    check(lambda a: (a.T, np.transpose(a, (1, 0, 2)), a.transpose(2, 0, 1)), x)
    check(lambda a: np.broadcast_to(a[0, 0], (5, 4)), x)
    check(lambda a: (np.expand_dims(a, 1), np.squeeze(a[:, :1, :], axis=1), a.ravel()), x)
    y = random_array(rng, (2, 3, 4), np.float64, special=False)
    check(lambda a, b: (np.concatenate([a, b], axis=1), np.concatenate([a, b]), np.concatenate([a, b], axis=-1)), x, y)
    check(lambda a, b: (np.stack([a, b]), np.stack([a, b], axis=2), np.stack([a, b], axis=-1)), x, y)


def test_indexing(rng):
    x = random_array(rng, (4, 5, 3), np.float32, special=False)
    check(lambda a: (a[1], a[-1], a[1:3], a[:, 2], a[..., 0], a[1, 2:, :2], a[None, 0], a[:, None, 1]), x)
    check(lambda a: (a[[0, 3, 1]], a[:, [4, 0]], np.take(a, [2, 0], axis=2), a.take([1, 1], axis=0)), x)
    check(lambda a: (a[2:2], a[3:1], a[-2:]), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_])
def test_slices_with_a_step(dtype, rng):
    x = random_array(rng, (9, 5, 3), dtype)
    check(lambda a: (a[::2], a[::-1], a[1:7:3], a[-1::-3], a[7:1:-2], a[::-2, 1::2], a[..., ::-1]), x)
    check(lambda a: (a[::3, -1, ::2], a[None, ::-4], a[8:0:-1, ::-1, 0], a[1:1:2], a[5:1:3], a[::-1][::-1]), x)


def test_gradient_through_a_strided_slice():
    x = np.arange(1.0, 8.0)
    w = np.array([1.0, 10.0, 100.0])
    # x[5:0:-2] is x[5], x[3], x[1]: d/dx sum(x[5:0:-2]**2 * w) puts 2·x·w there.
    grad = rj.grad(lambda v: np.sum(v[5:0:-2] ** 2 * w))(x)
    expected = np.zeros(7)
    expected[[5, 3, 1]] = 2 * x[[5, 3, 1]] * w
    np.testing.assert_allclose(grad, expected, rtol=1e-15)


def test_indexing_by_traced_integers(rng):
    table = random_array(rng, (6, 2), np.float64, special=False)
    idx = np.array([5, 0, 3], dtype=np.int32)
    check(lambda t, i: (t[i], np.take(t, i, axis=0)), table, idx)


def test_like_constructors(rng):
    x = random_array(rng, (2, 3), np.float32, special=False)
    check(lambda a: (np.zeros_like(a) + a, np.ones_like(a), np.full_like(a, 2.5)), x)


def test_round(rng):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1.2, -2.7], dtype=np.float64)
    check(lambda a: (np.round(a), np.around(a), np.rint(a)), x)


def test_captured_constants(rng):
    gains = np.array([1.0, 2.0, 3.0])
    offsets = np.arange(3)  # NumPy's int64, range-checked into int32
    x = random_array(rng, (3,), np.float64, special=False)
    check(lambda a: a * gains + offsets, x)


def test_rfxjit_numpy_namespace(rng):
    x = random_array(rng, (3, 4), np.float64, special=False)

    def f(a):
        return rnp.sum(rnp.sin(a) * rnp.abs(a), axis=0) + rnp.linalg.norm(a) + rnp.clip(a, -1, 1).mean()

    assert_matches(rj.jit(f)(x), f(x))
    # Outside a trace the names are NumPy's functions.
    assert rnp.sin is np.sin and rnp.where is np.where
    for name in ("sum", "mean", "where", "clip", "matmul", "concatenate", "stack", "arctan2", "argmax", "cumsum"):
        assert hasattr(rnp, name), name


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.float64])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_any_all_and_bool_extrema(dtype, axis, rng):
    x = random_array(rng, (3, 4), dtype, -1, 1)
    if np.dtype(dtype) != np.bool_:
        x[0] = 0
    check(lambda a: (np.any(a, axis=axis), np.all(a, axis=axis), a.any(axis=axis, keepdims=True), a.all()), x)
    if np.dtype(dtype) == np.bool_:
        check(lambda a: (np.max(a, axis=axis), np.min(a, axis=axis)), x)
