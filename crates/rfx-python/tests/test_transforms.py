"""Derivatives and vmap against closed forms, finite differences and Python loops."""

import numpy as np
import pytest

import rfxjit as rj


def finite_difference(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g


def loss(x):
    return np.sum(np.sin(x) * x**2 + np.exp(-x) * 0.5)


def test_grad_closed_form_and_finite_differences(rng):
    x = rng.uniform(-2, 2, size=(5,))
    g = rj.grad(loss)(x)
    closed = np.cos(x) * x**2 + 2 * x * np.sin(x) - 0.5 * np.exp(-x)
    np.testing.assert_allclose(g, closed, rtol=1e-12)
    np.testing.assert_allclose(g, finite_difference(loss, x), rtol=1e-6, atol=1e-8)


def test_grad_guide_example():
    def loss_fn(x):
        return np.sum(x**2)

    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(rj.grad(loss_fn)(x), [2.0, 4.0, 6.0])
    value, dx = rj.value_and_grad(loss_fn)(x)
    assert value == 14.0
    np.testing.assert_array_equal(dx, [2.0, 4.0, 6.0])


def test_argnums(rng):
    def f(w, x, b):
        return np.sum(np.tanh(x @ w + b) ** 2)

    w = rng.normal(size=(3, 2))
    x = rng.normal(size=(4, 3))
    b = rng.normal(size=(2,))
    gw, gb = rj.grad(f, argnums=(0, 2))(w, x, b)
    np.testing.assert_allclose(gw, finite_difference(lambda w_: f(w_, x, b), w), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, finite_difference(lambda b_: f(w, x, b_), b), rtol=1e-6, atol=1e-8)
    gx = rj.grad(f, argnums=1)(w, x, b)
    assert gx.shape == x.shape
    value, (gw2,) = rj.value_and_grad(f, argnums=(0,))(w, x, b)
    np.testing.assert_allclose(value, f(w, x, b), rtol=1e-13)
    np.testing.assert_allclose(gw2, gw, rtol=1e-13)


def test_grad_float32_stays_float32():
    x = np.array([1.0, 2.0], dtype=np.float32)
    g = rj.grad(lambda a: np.sum(a * a * 3.0))(x)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, [6.0, 12.0])


def test_jit_of_grad_and_grad_of_grad():
    f = rj.jit(rj.grad(lambda x: np.sum(x**3)))
    np.testing.assert_allclose(f(np.array([1.0, 2.0])), [3.0, 12.0])
    second = rj.grad(rj.grad(lambda x: x**3))
    np.testing.assert_allclose(second(np.float64(2.0)), 12.0)


def test_jacobian_and_hessian(rng):
    x = rng.uniform(-1, 1, size=(3,))
    j = rj.jacobian(lambda a: np.sin(a) * 2.0)(x)
    np.testing.assert_allclose(j, np.diag(2 * np.cos(x)), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(rj.jacfwd(lambda a: a[:2] * a[1:])(x),
                               [[x[1], x[0], 0], [0, x[2], x[1]]], rtol=1e-13)
    np.testing.assert_allclose(rj.jacrev(lambda a: np.cumsum(a))(x), np.tril(np.ones((3, 3))))
    h = rj.hessian(lambda a: np.sum(a**3))(x)
    np.testing.assert_allclose(h, np.diag(6 * x), rtol=1e-13, atol=1e-15)
    hxy = rj.hessian(lambda a, b: np.sum(a * a * b), argnums=(0, 1))(x, x + 1)
    np.testing.assert_allclose(hxy[0][0], np.diag(2 * (x + 1)), rtol=1e-13)
    np.testing.assert_allclose(hxy[0][1], np.diag(2 * x), rtol=1e-13)


def test_jvp(rng):
    x = rng.uniform(-1, 1, size=(4,))
    t = rng.uniform(-1, 1, size=(4,))
    primal, tangent = rj.jvp(lambda a: np.exp(a) * a, (x,), (t,))
    np.testing.assert_allclose(primal, np.exp(x) * x, rtol=1e-13)
    np.testing.assert_allclose(tangent, (np.exp(x) * x + np.exp(x)) * t, rtol=1e-13)


def test_vmap_against_a_python_loop(rng):
    def f(x, k):
        return np.sum(x * x) * k + np.max(x)

    xs = rng.normal(size=(5, 3))
    k = np.float64(0.5)
    batched = rj.vmap(f, in_axes=(0, None))(xs, k)
    np.testing.assert_allclose(batched, [f(x, k) for x in xs], rtol=1e-13)
    cols = rj.vmap(lambda x: np.cumsum(x), in_axes=1, out_axes=1)(xs)
    np.testing.assert_allclose(cols, np.cumsum(xs, axis=0), rtol=1e-13)
    per_example = rj.vmap(rj.grad(lambda x: np.sum(np.sin(x))))(xs)
    np.testing.assert_allclose(per_example, np.cos(xs), rtol=1e-13)


def test_grad_of_a_non_scalar_is_an_autodiff_error():
    with pytest.raises(rj.AutodiffError):
        rj.grad(lambda x: x * 2.0)(np.array([1.0, 2.0]))


def test_transforms_inside_jit_are_inlined(rng):
    g = rj.grad(lambda x: np.sum(x * x * x))

    @rj.jit
    def outer(x, y):
        return g(x) * 2.0 + rj.vmap(lambda r: np.sum(r * r))(y)

    x = rng.normal(size=(3,))
    y = rng.normal(size=(3, 2))
    np.testing.assert_allclose(outer(x, y), 6 * x**2 + np.sum(y * y, axis=1), rtol=1e-13)
    # One kernel: the gradient's and vmap's ops were recorded into outer's trace.
    assert outer.cache_info().misses == 1 and "input x" in outer.hir(x, y)
    # grad of a function that itself calls grad: the second derivative.
    second = rj.jit(rj.grad(lambda x: np.sum(rj.grad(lambda z: np.sum(np.sin(z)))(x))))
    np.testing.assert_allclose(second(x), -np.sin(x), rtol=1e-13)
    # jvp inside jit.
    @rj.jit
    def bad(x):
        return rj.jvp(lambda a: a, (x,), (x,))[0]

    np.testing.assert_allclose(bad(x), x)


def test_vjp_against_the_jacobian(rng):
    def f(x, w):
        return np.tanh(w @ x) * 2.0

    x = rng.normal(size=(3,))
    w = rng.normal(size=(4, 3))
    ct = rng.normal(size=(4,))
    out, pullback = rj.vjp(f, x, w)
    np.testing.assert_allclose(out, f(x, w), rtol=1e-13)
    gx, gw = pullback(ct)
    jx = rj.jacobian(f, argnums=0)(x, w)
    jw = rj.jacobian(f, argnums=1)(x, w)
    np.testing.assert_allclose(gx, ct @ jx, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gw, np.tensordot(ct, jw, axes=1), rtol=1e-12, atol=1e-14)
    with pytest.raises(rj.AutodiffError, match="cotangent"):
        pullback(np.ones(3))


def test_repeated_jvp_and_vjp_compile_once():
    def f(x):
        return np.sin(x) * 3.0

    x = np.linspace(0, 1, 4)
    for _ in range(3):
        rj.jvp(f, (x,), (x,))
        _, pullback = rj.vjp(f, x)
        pullback(np.ones(4))
    primal, pull = rj._api._cached_vjp(f, 1)
    assert primal.cache_info().misses == 1 and pull.cache_info().misses == 1
    assert rj._api._cached_jvp(f).cache_info().misses == 1


def test_has_aux(rng):
    def loss(w, x):
        prediction = np.tanh(x @ w)
        return np.sum(prediction**2), prediction

    w = rng.normal(size=(3,))
    x = rng.normal(size=(4, 3))
    g, aux = rj.grad(loss, has_aux=True)(w, x)
    np.testing.assert_allclose(aux, np.tanh(x @ w), rtol=1e-13)
    np.testing.assert_allclose(g, finite_difference(lambda w_: loss(w_, x)[0], w), rtol=1e-6, atol=1e-8)
    (value, aux2), (gw, gx) = rj.value_and_grad(loss, argnums=(0, 1), has_aux=True)(w, x)
    np.testing.assert_allclose(value, loss(w, x)[0], rtol=1e-13)
    np.testing.assert_allclose(aux2, aux, rtol=1e-13)
    np.testing.assert_allclose(gw, g, rtol=1e-13)
    assert gx.shape == x.shape
    with pytest.raises(rj.AutodiffError, match="has_aux"):
        rj.grad(lambda w: np.sum(w), has_aux=True)(w)
