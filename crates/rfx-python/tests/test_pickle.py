"""Pickling: jitted functions by reference, kernels and bound kernels as HIR text, and a bound
kernel mapped over chunks in worker processes."""

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import rfxjit as rj


def pid_clip(e, i, d):
    return np.clip(1.2 * e + 0.3 * i + 0.05 * d, -1.0, 1.0)


def loss(x):
    return np.sum(np.sin(x) * x)


def test_jitted_functions_and_transforms_round_trip():
    x = np.linspace(-1, 1, 5)
    for f in (rj.jit(pid_clip), rj.jit(rj.grad(loss)), rj.vmap(rj.grad(loss)), rj.jit(loss, backend="interp")):
        args = (x, x, x) if f.__name__ == "pid_clip" else ((x.reshape(5, 1),) if "vmap" in f.__name__ else (x,))
        expected = f(*args)
        g = pickle.loads(pickle.dumps(f))
        assert g.cache_info().currsize == 0
        np.testing.assert_array_equal(g(*args), expected)
        assert g.cache_info().misses == 1


def test_kernels_and_bound_kernels_round_trip():
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    k = rj.jit(pid_clip).bind(x, x, x)
    k2 = pickle.loads(pickle.dumps(k))
    np.testing.assert_array_equal(k2(x, x, x), k(x, x, x))
    assert k2.hir() == k.hir()
    kernel = rj.Kernel.from_hir(k.hir())
    assert pickle.loads(pickle.dumps(kernel)).hir() == kernel.hir()
    compiled = pickle.loads(pickle.dumps(k.compiled))
    out = np.empty(4, np.float32)
    compiled(x, x, x, out=out)
    np.testing.assert_array_equal(out, k(x, x, x))


def _run_chunk(args):
    kernel, e, i, d = args
    return kernel(e, i, d)


def test_a_bound_kernel_runs_in_worker_processes():
    rng = np.random.default_rng(7)
    n, chunks = 4096, 4
    e, i, d = (rng.normal(size=(chunks, n)).astype(np.float32) for _ in range(3))
    kernel = rj.jit(pid_clip).bind(e[0], i[0], d[0])
    try:
        context = multiprocessing.get_context("spawn")
    except ValueError:
        pytest.skip("no spawn start method")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        results = list(pool.map(_run_chunk, [(kernel, e[c], i[c], d[c]) for c in range(chunks)]))
    for c in range(chunks):
        np.testing.assert_allclose(results[c], pid_clip(e[c], i[c], d[c]), rtol=1e-6)
