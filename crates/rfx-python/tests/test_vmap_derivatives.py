"""vmap over every derivative transform (grad, value_and_grad, jacobian/jacfwd/jacrev,
hessian), against closed forms and a Python loop of the unbatched transform."""

import numpy as np
import pytest

import rfxjit as rj


def elementwise(x):
    return np.sin(x) * x


def elementwise_derivative(x):
    return np.cos(x) * x + np.sin(x)


def scalar(x):
    return np.sum(np.sin(x) * x**2)


def scalar_gradient(x):
    return np.cos(x) * x**2 + 2 * x * np.sin(x)


def scalar_second_derivative(x):
    return -np.sin(x) * x**2 + 4 * x * np.cos(x) + 2 * np.sin(x)


@pytest.fixture
def xs(rng):
    return rng.uniform(-2, 2, size=(4, 3))


@pytest.mark.parametrize("transform", [rj.jacobian, rj.jacfwd, rj.jacrev])
def test_vmap_of_the_jacobian_of_a_one_output_function(transform, xs):
    batched = rj.vmap(transform(elementwise))(xs)
    assert batched.shape == (4, 3, 3)
    for x, jac in zip(xs, batched):
        np.testing.assert_allclose(jac, np.diag(elementwise_derivative(x)), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(jac, transform(elementwise)(x), rtol=1e-12, atol=1e-15)


def test_vmap_of_the_jacobian_of_two_outputs_and_two_arguments(xs, rng):
    ks = rng.uniform(0.5, 2.0, size=(4,))

    def f(x, k):
        return np.sin(x) * k, np.sum(x * x) * k

    jacs = rj.vmap(rj.jacobian(f, argnums=(0, 1)))(xs, ks)
    (d_sin_dx, d_sin_dk), (d_sum_dx, d_sum_dk) = jacs
    assert d_sin_dx.shape == (4, 3, 3) and d_sin_dk.shape == (4, 3)
    assert d_sum_dx.shape == (4, 3) and d_sum_dk.shape == (4,)
    for i, (x, k) in enumerate(zip(xs, ks)):
        np.testing.assert_allclose(d_sin_dx[i], np.diag(np.cos(x) * k), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(d_sin_dk[i], np.sin(x), rtol=1e-12)
        np.testing.assert_allclose(d_sum_dx[i], 2 * x * k, rtol=1e-12)
        np.testing.assert_allclose(d_sum_dk[i], np.sum(x * x), rtol=1e-12)


def test_vmap_of_the_jacobian_with_out_axes_and_a_shared_argument(xs):
    # The batch as the last axis of the Jacobian, and one gain for the whole batch.
    jac = rj.vmap(rj.jacobian(lambda x, k: np.sin(x) * k), in_axes=(0, None), out_axes=2)(xs, 1.5)
    assert jac.shape == (3, 3, 4)
    for i, x in enumerate(xs):
        np.testing.assert_allclose(jac[:, :, i], np.diag(1.5 * np.cos(x)), rtol=1e-12, atol=1e-15)


def test_vmap_of_grad_and_value_and_grad(xs):
    np.testing.assert_allclose(rj.vmap(rj.grad(scalar))(xs), scalar_gradient(xs), rtol=1e-12)
    values, grads = rj.vmap(rj.value_and_grad(scalar))(xs)
    np.testing.assert_allclose(values, np.sum(np.sin(xs) * xs**2, axis=1), rtol=1e-12)
    np.testing.assert_allclose(grads, scalar_gradient(xs), rtol=1e-12)


def test_vmap_of_the_hessian(xs):
    hess = rj.vmap(rj.hessian(scalar))(xs)
    assert hess.shape == (4, 3, 3)
    for x, h in zip(xs, hess):
        np.testing.assert_allclose(h, np.diag(scalar_second_derivative(x)), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(h, rj.hessian(scalar)(x), rtol=1e-12, atol=1e-15)


def test_vmap_of_a_jacobian_under_jit_is_one_compile(xs):
    f = rj.jit(rj.vmap(rj.jacobian(elementwise)))
    first = f(xs)
    second = f(xs + 1.0)
    np.testing.assert_allclose(second[0], np.diag(elementwise_derivative(xs[0] + 1.0)), rtol=1e-12, atol=1e-15)
    assert first.shape == second.shape == (4, 3, 3)
    assert f.cache_info().misses == 1 and f.cache_info().hits == 1
