"""The control-loop path: bound kernels, zero-copy inputs, out= in place, threads, eval, IR."""

import threading

import numpy as np
import pytest

import rfxjit as rj


def pid_clip(e, i, d):
    return np.clip(1.2 * e + 0.3 * i + 0.05 * d, -1.0, 1.0)


def test_bind_validates_once_and_checks_every_call():
    f = rj.jit(pid_clip)
    e, i, d = (np.array([0.5], np.float32) for _ in range(3))
    k = f.bind(e, i, d)
    out = np.empty(1, np.float32)
    result = k(e, i, d, out=out)
    assert result is out
    np.testing.assert_allclose(out, pid_clip(e, i, d), rtol=1e-6)
    with pytest.raises(rj.CallError, match="input `e`: expected dtype float32, got float64"):
        k(e.astype(np.float64), i, d)
    with pytest.raises(rj.CallError, match=r"expected shape \[1\], got \[2\]"):
        k(np.ones(2, np.float32), i, d)
    with pytest.raises(rj.CallError, match="takes 3 input"):
        k(e, i)
    with pytest.raises(rj.CallError, match="expected a numpy.ndarray"):
        k([0.5], i, d)
    with pytest.raises(rj.CallError, match="read-only"):
        ro = np.empty(1, np.float32)
        ro.flags.writeable = False
        k(e, i, d, out=ro)


class Tagged(np.ndarray):
    """An ndarray subclass: not `numpy.ndarray` itself, so the call checks it the long way."""


def test_the_quick_checks_fall_back_to_full_ones():
    k = rj.jit(pid_clip).bind(*(np.zeros(2, np.float32) for _ in range(3)))
    e = np.array([0.5, -2.0], np.float32)
    want = pid_clip(e, e, e)
    # A subclass, and a float32 descriptor that is not NumPy's singleton, are accepted.
    np.testing.assert_allclose(k(e.view(Tagged), e, e), want, rtol=1e-6)
    other = np.dtype(np.float32, metadata={"unit": "rad"})
    assert other is not np.dtype(np.float32)
    np.testing.assert_allclose(k(e.astype(other), e, e), want, rtol=1e-6)
    # A byte-swapped one is not (same type number, other byte order).
    with pytest.raises(rj.CallError, match="expected dtype float32"):
        k(e.astype(">f4"), e, e)
    # out= is the only keyword; out=None is no out.
    with pytest.raises(TypeError, match="out= only, got where="):
        k(e, e, e, where=e)
    with pytest.raises(TypeError, match="got where="):
        k(e, e, e, out=np.empty(2, np.float32), where=e)
    fresh = k(e, e, e, out=None)
    np.testing.assert_allclose(fresh, want, rtol=1e-6)


def test_out_shares_memory_and_inputs_are_read_in_place():
    f = rj.jit(lambda x, y: (x * 2.0 + y, x - y))
    x = np.arange(6.0).reshape(2, 3)
    y = np.ones((2, 3))
    k = f.bind(x, y)
    a, b = np.empty((2, 3)), np.empty((2, 3))
    ra, rb = k(x, y, out=(a, b))
    assert np.shares_memory(ra, a) and np.shares_memory(rb, b)
    np.testing.assert_array_equal(a, x * 2.0 + y)
    # Writing the input in place is seen by the next call (nothing was copied at bind time).
    x[0, 0] = 100.0
    k(x, y, out=(a, b))
    assert a[0, 0] == 201.0
    # The native kernel is the fastest path and shares memory the same way.
    c = np.empty((2, 3))
    k.compiled(x, y, out=(c, b))
    assert c[0, 0] == 201.0


def test_bound_calls_reject_non_contiguous_and_aliased_arrays():
    f = rj.jit(lambda x: x * 2.0)
    x = np.arange(8.0)
    k = f.bind(x[:4])
    with pytest.raises(rj.CallError, match="C-contiguous"):
        k(x[::2])
    with pytest.raises(rj.CallError, match="overlaps input"):
        k(x[:4], out=x[2:6])
    y = x[:4].copy()
    # An output may not alias its own input either.
    with pytest.raises(rj.CallError, match="overlaps"):
        k(y, out=y)


def test_bound_kernels_are_thread_safe_and_release_the_gil():
    f = rj.jit(lambda x, y: np.sqrt(x * x + y * y))
    n = 1 << 16  # above the GIL-release threshold
    assert n > rj._rfx.GIL_RELEASE_ELEMS
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=n) for _ in range(4)]
    ys = [rng.normal(size=n) for _ in range(4)]
    k = f.bind(xs[0], ys[0])
    outs = [np.empty(n) for _ in range(4)]
    errors = []

    def worker(j):
        try:
            for _ in range(20):
                k(xs[j], ys[j], out=outs[j])
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(j,)) for j in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for j in range(4):
        np.testing.assert_allclose(outs[j], np.hypot(xs[j], ys[j]), rtol=1e-15)


def test_small_kernels_from_threads():
    f = rj.jit(lambda x: x + 1.0)
    results = {}

    def worker(j):
        x = np.full(3, float(j))
        results[j] = [f(x)[0] for _ in range(50)][-1]

    threads = [threading.Thread(target=worker, args=(j,)) for j in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {j: j + 1.0 for j in range(8)}
    assert f.cache_info().misses == 1


def test_eval_expressions():
    x = np.array([0.0, 1.0, 2.0], dtype=np.float32)
    y = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    out = rj.eval("sin(x*2)+y", x=x, y=y)
    np.testing.assert_array_equal(out, np.sin(x * np.float32(2)) + y)
    assert out[2] == np.float32(2.2431974)
    with pytest.raises(rj.ExprError):
        rj.eval("sin(x*", x=x)


def test_ir_dumps_and_kernel_from_hir():
    f = rj.jit(lambda x, y: np.sin(x * 2.0) + y)
    x = np.ones(3, np.float32)
    hir = f.hir(x, x)
    assert "sin" in hir and "input x : f32[3]" in hir
    assert "kernel" in f.mir(x, x)
    assert f.lir(x, x)
    assert f.report(x, x)
    kernel = rj.Kernel.from_hir(hir)
    compiled = rj.compile(kernel, "cpu")
    np.testing.assert_array_equal(compiled(x, x), f(x, x))
    with pytest.raises(rj.ExprError):
        rj.Kernel.from_hir("kernel broken {")


def test_bound_calls_with_out_do_not_grow_memory():
    import tracemalloc

    f = rj.jit(pid_clip)
    e, i, d = (np.array([0.25], np.float32) for _ in range(3))
    out = np.empty(1, np.float32)
    k = f.bind(e, i, d).compiled
    for _ in range(1000):  # warm up: scratch space grown, caches filled
        k(e, i, d, out=out)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for _ in range(100_000):
            k(e, i, d, out=out)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 4096, f"{after - before} bytes kept after 100,000 calls"
    np.testing.assert_allclose(out, pid_clip(e, i, d), rtol=1e-6)


def test_dot_graphs():
    f = rj.jit(lambda x, y: np.sin(x * 2.0) + y)
    x = np.ones(3)
    hir = f.dot(x, x)
    assert hir.startswith("digraph") and "sin" in hir
    assert f.dot(x, x, stage="mir").startswith("digraph")
    assert f.bind(x, x).dot() == hir
    with pytest.raises(ValueError, match="unknown stage"):
        f.dot(x, x, stage="lir")


def test_bool_views_of_other_bytes_are_rejected():
    f = rj.jit(lambda m, x: np.where(m, x, 0.0))
    m = np.array([True, False, True])
    x = np.ones(3)
    k = f.bind(m, x)
    np.testing.assert_array_equal(k(m, x), [1.0, 0.0, 1.0])
    bad = np.array([1, 0, 2], dtype=np.uint8).view(np.bool_)
    with pytest.raises(rj.CallError, match="bytes other than 0 and 1"):
        k(bad, x)


def test_many_threads_over_many_signatures_with_a_small_cache():
    f = rj.jit(lambda x: x * 2.0, cache_size=3)
    errors = []

    def worker(j):
        try:
            for k in range(200):
                n = 1 + (j + k) % 6
                out = f(np.full(n, float(k)))
                assert out.shape == (n,) and out[0] == 2.0 * k
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(j,)) for j in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert f.cache_info().currsize <= 3


def test_lower_compile_reads_as_jax():
    f = rj.jit(lambda x: np.cos(x) * 2.0)
    x = np.linspace(0, 1, 5)
    k = f.lower(x).compile()
    out = np.empty(5)
    assert k(x, out=out) is out
    np.testing.assert_allclose(out, np.cos(x) * 2.0, rtol=1e-15)
