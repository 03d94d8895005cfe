"""Pytrees as JAX has them: nested tuples, lists, dicts (and None) as arguments and results of
jit, the transforms, vmap and bind; gradients with the argument's structure."""

import pickle
from collections import namedtuple

import numpy as np
import pytest

import rfxjit as rj
from rfxjit import _tree

Point = namedtuple("Point", ["x", "y"])


def test_flatten_and_unflatten_round_trip():
    tree = {"b": (1, None, [2, {"z": 3, "a": 4}]), "a": Point(5, 6)}
    leaves, treedef = _tree.flatten(tree)
    assert leaves == [5, 6, 1, 2, 4, 3]  # dict keys sorted, None is no leaf
    assert _tree.unflatten(treedef, leaves) == tree
    assert hash(treedef) == hash(_tree.flatten({"a": Point(0, 0), "b": (0, None, [0, {"a": 0, "z": 0}])})[1])
    with pytest.raises(ValueError, match="fewer leaves"):
        _tree.unflatten(treedef, leaves[:-1])


def model(params, x):
    h = np.tanh(x @ params["w"] + params["b"])
    return {"y": h.sum(axis=-1), "extra": (h * 2.0, None)}


def test_jit_of_trees_in_and_out(rng):
    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    x = rng.standard_normal((4, 3))
    got = rj.jit(model)(params, x)
    want = model(params, x)
    assert set(got) == {"y", "extra"} and got["extra"][1] is None
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-13)
    np.testing.assert_allclose(got["extra"][0], want["extra"][0], rtol=1e-13)
    # Lists and namedtuples keep their types.
    f = rj.jit(lambda p, xs: [p.x * xs[0], Point(p.y + xs[1], None)])
    out = f(Point(np.ones(2), np.zeros(2)), [np.full(2, 3.0), np.full(2, 4.0)])
    assert isinstance(out, list) and isinstance(out[1], Point)
    np.testing.assert_array_equal(out[0], [3.0, 3.0])
    np.testing.assert_array_equal(out[1].x, [4.0, 4.0])
    assert out[1].y is None


def test_the_cache_key_includes_the_structure():
    f = rj.jit(lambda t: t[0] * 2.0 + t[1] if isinstance(t, tuple) else t["a"] * 2.0 + t["b"])
    a, b = np.ones(3), np.arange(3.0)
    np.testing.assert_array_equal(f((a, b)), a * 2 + b)
    np.testing.assert_array_equal(f({"a": a, "b": b}), a * 2 + b)
    assert f.cache_info().misses == 2
    assert "argument structure" in f.last_miss
    f({"b": b, "a": a})  # the same structure: dict keys are sorted
    f((a, b))
    assert f.cache_info().misses == 2 and f.cache_info().hits == 2


def loss(params, x, target):
    pred = x @ params["w"] + params["b"]
    return np.sum((pred - target) ** 2)


def test_grad_has_the_structure_of_the_argument(rng):
    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    x, target = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    residual = x @ params["w"] + params["b"] - target
    grad = rj.grad(loss)(params, x, target)
    assert set(grad) == {"w", "b"}
    np.testing.assert_allclose(grad["w"], 2 * x.T @ residual, rtol=1e-12)
    np.testing.assert_allclose(grad["b"], 2 * residual.sum(axis=0), rtol=1e-12)
    value, (g_params, g_x) = rj.value_and_grad(loss, argnums=(0, 1))(params, x, target)
    np.testing.assert_allclose(value, np.sum(residual**2), rtol=1e-12)
    np.testing.assert_allclose(g_params["b"], grad["b"], rtol=1e-12)
    np.testing.assert_allclose(g_x, 2 * residual @ params["w"].T, rtol=1e-12)
    # Through jit, and with an aux tree.
    jitted = rj.jit(rj.grad(loss))(params, x, target)
    np.testing.assert_allclose(jitted["w"], grad["w"], rtol=1e-12)
    g, aux = rj.grad(lambda p: (loss(p, x, target), {"norm": np.sum(p["w"] ** 2)}), has_aux=True)(params)
    np.testing.assert_allclose(g["w"], grad["w"], rtol=1e-12)
    np.testing.assert_allclose(aux["norm"], np.sum(params["w"] ** 2), rtol=1e-12)


def test_jvp_and_vjp_of_trees(rng):
    p = (rng.standard_normal(3), {"s": rng.standard_normal(3)})
    t = (rng.standard_normal(3), {"s": rng.standard_normal(3)})

    def f(pair):
        a, d = pair
        return {"prod": a * d["s"], "sin": np.sin(a)}

    primal, tangent = rj.jvp(f, (p,), (t,))
    np.testing.assert_allclose(primal["prod"], p[0] * p[1]["s"], rtol=1e-14)
    np.testing.assert_allclose(tangent["prod"], t[0] * p[1]["s"] + p[0] * t[1]["s"], rtol=1e-13)
    np.testing.assert_allclose(tangent["sin"], np.cos(p[0]) * t[0], rtol=1e-13)

    out, pullback = rj.vjp(f, p)
    cot = {"prod": rng.standard_normal(3), "sin": rng.standard_normal(3)}
    (g,) = pullback(cot)
    np.testing.assert_allclose(g[0], cot["prod"] * p[1]["s"] + cot["sin"] * np.cos(p[0]), rtol=1e-13)
    np.testing.assert_allclose(g[1]["s"], cot["prod"] * p[0], rtol=1e-13)
    with pytest.raises(rj.AutodiffError, match="structure"):
        pullback((cot["prod"], cot["sin"]))
    with pytest.raises(rj.AutodiffError, match="structure"):
        rj.jvp(f, (p,), ((t[0], t[1]["s"]),))


def test_jacobians_of_a_dict_argument(rng):
    params = {"a": rng.standard_normal(2), "k": rng.standard_normal(())}

    def f(p):
        return p["a"] * p["k"]

    for jac in (rj.jacfwd, rj.jacrev):
        j = jac(f)(params)
        np.testing.assert_allclose(j["a"], np.eye(2) * params["k"], rtol=1e-14)
        np.testing.assert_allclose(j["k"], params["a"], rtol=1e-14)


def test_hessian_of_a_dict_argument_nests_as_jax(rng):
    params = {"a": rng.standard_normal(2), "k": rng.standard_normal(())}

    def f(p):
        return np.sum(p["a"] ** 2) * p["k"]  # d²/da² = 2k·I, d²/da dk = 2a, d²/dk² = 0

    h = rj.hessian(f)(params)
    np.testing.assert_allclose(h["a"]["a"], 2 * params["k"] * np.eye(2), rtol=1e-14)
    np.testing.assert_allclose(h["a"]["k"], 2 * params["a"], rtol=1e-14)
    np.testing.assert_allclose(h["k"]["a"], 2 * params["a"], rtol=1e-14)
    np.testing.assert_allclose(h["k"]["k"], 0.0, atol=0)
    # Two arguments: a tuple of tuples of such blocks.
    h2 = rj.hessian(lambda p, s: f(p) * s, argnums=(0, 1))(params, 3.0)
    np.testing.assert_allclose(h2[0][1]["a"], 2 * params["a"] * params["k"], rtol=1e-14)
    np.testing.assert_allclose(h2[1][0]["k"], np.sum(params["a"] ** 2), rtol=1e-14)


def test_vmap_with_tree_in_axes_against_a_loop(rng):
    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal((5, 2))}  # b batched
    xs = rng.standard_normal((5, 3))

    def one(p, x):
        return (x @ p["w"] + p["b"], {"n": np.sum(x**2)})

    batched = rj.vmap(one, in_axes=({"w": None, "b": 0}, 0), out_axes=(1, {"n": 0}))(params, xs)
    for i in range(5):
        y, extra = one({"w": params["w"], "b": params["b"][i]}, xs[i])
        np.testing.assert_allclose(batched[0][:, i], y, rtol=1e-13)
        np.testing.assert_allclose(batched[1]["n"][i], extra["n"], rtol=1e-13)
    with pytest.raises(rj.AutodiffError, match="in_axes"):
        rj.vmap(one, in_axes=({"w": None}, 0))(params, xs)


def test_bind_with_trees_and_pickling(rng):
    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    x = rng.standard_normal((4, 3))
    bound = rj.jit(model).bind(params, x)
    want = model(params, x)
    out = {"y": np.empty(4), "extra": (np.empty((4, 2)), None)}
    got = bound(params, x, out=out)
    assert np.shares_memory(got["y"], out["y"]) and np.shares_memory(got["extra"][0], out["extra"][0])
    np.testing.assert_allclose(out["y"], want["y"], rtol=1e-13)
    with pytest.raises(rj.CallError, match="structure"):
        bound((params["w"], params["b"]), x)
    again = pickle.loads(pickle.dumps(bound))
    np.testing.assert_allclose(again(params, x)["extra"][0], want["extra"][0], rtol=1e-13)


def test_a_transform_of_trees_inside_a_traced_function(rng):
    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    x, target = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))

    @rj.jit
    def step(p):
        g = rj.grad(loss)(p, x, target)  # recorded into this trace, a dict of tracers
        return {k: p[k] - 0.1 * g[k] for k in p}

    new = step(params)
    residual = x @ params["w"] + params["b"] - target
    np.testing.assert_allclose(new["w"], params["w"] - 0.1 * 2 * x.T @ residual, rtol=1e-12)
    np.testing.assert_allclose(new["b"], params["b"] - 0.1 * 2 * residual.sum(axis=0), rtol=1e-12)
    assert step.cache_info().misses == 1
