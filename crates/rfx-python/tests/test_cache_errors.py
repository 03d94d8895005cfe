"""The jit cache (hits, misses, static arguments, explanations), backends and error classes."""

import inspect
import os

import numpy as np
import pytest

import rfxjit as rj


def test_cache_hits_and_misses():
    @rj.jit
    def f(x, y):
        return np.sin(x * 2.0) + y

    x = np.array([0.0, 1.0, 2.0], dtype=np.float32)
    y = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    np.testing.assert_allclose(f(x, y), [1.0, 2.9092975, 2.2431974], rtol=1e-6)
    assert f.cache_info() == rj.CacheInfo(hits=0, misses=1, currsize=1)
    f(x + 1, y)
    assert f.cache_info() == rj.CacheInfo(hits=1, misses=1, currsize=1)
    f(np.ones(4, np.float32), np.ones(4, np.float32))
    assert f.cache_info().misses == 2
    assert "shape of argument 0: [3] -> [4]" in f.last_miss
    f(x.astype(np.float64), y)
    assert f.cache_info().misses == 3
    assert "dtype of argument 0: float32 -> float64" in f.last_miss
    f.cache_clear()
    assert f.cache_info() == rj.CacheInfo(0, 0, 0)


def test_static_argnums():
    calls = []

    def power_sum(x, n):
        calls.append(n)
        out = x
        for _ in range(n - 1):  # Python control flow on a static value
            out = out * x
        return np.sum(out)

    f = rj.jit(power_sum, static_argnums=1)
    x = np.array([1.0, 2.0])
    assert f(x, 2) == 5.0
    assert f(x, 3) == 9.0
    assert f(x, 2) == 5.0
    assert calls == [2, 3]
    assert f.cache_info().misses == 2
    with pytest.raises(TypeError, match="hashable"):
        f(x, [1])


def test_explain_cache_misses(capsys):
    rj.config.explain_cache_misses = True
    try:
        f = rj.jit(lambda a: a + 1.0)
        f(np.ones(2))
        f(np.ones(3))
    finally:
        rj.config.explain_cache_misses = False
    err = capsys.readouterr().err
    assert "first call" in err and "shape of argument 0: [2] -> [3]" in err


def test_backends():
    assert {"cpu", "interp"} <= set(rj.backends())
    x = np.linspace(-1, 1, 7)
    f = rj.jit(lambda a: np.tanh(a) * 3.0, backend="interp")
    np.testing.assert_allclose(f(x), np.tanh(x) * 3.0, rtol=1e-13)
    assert f.lower(x).backend == "interp"
    with pytest.raises(ValueError, match="unknown backend"):
        rj.jit(lambda a: a, backend="tpu")


@pytest.mark.parametrize("backend", ["cuda", "metal"])
def test_gpu_backends_run_or_raise_backend_unavailable(backend):
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    f = rj.jit(lambda a: a * 2.0 + 1.0, backend=backend)
    try:
        out = f(x)
    except rj.BackendUnavailable as error:
        # Not built in, or no device (no GPU, no Vulkan driver) on this machine.
        assert backend in str(error)
        assert isinstance(error, rj.CompileError) and isinstance(error, rj.RfxError)
    else:
        assert backend in rj.backends()
        np.testing.assert_allclose(out, x * 2.0 + 1.0, rtol=1e-6)
        assert f.lower(x).backend == backend


def test_unsupported_function_names_the_function_and_the_line():
    def uses_fft(x):
        return np.fft.fft(x) * 2

    line = inspect.getsourcelines(uses_fft)[1] + 1
    with pytest.raises(rj.TraceError) as info:
        rj.jit(uses_fft)(np.ones(4))
    message = str(info.value)
    assert "numpy.fft.fft is not supported" in message
    assert f"{__file__}:{line}" in message
    assert "np.fft.fft(x)" in message
    assert info.value.lineno == line


def test_typing_errors_carry_the_line():
    def bad(x, y):
        z = x * 2.0
        return z @ y

    line = inspect.getsourcelines(bad)[1] + 2
    with pytest.raises(rj.TraceError, match="matmul") as info:
        rj.jit(bad)(np.ones(3), np.ones((2, 2)))
    assert f"{__file__}:{line}" in str(info.value)


def test_python_control_flow_on_traced_values_is_a_trace_error():
    def branchy(x):
        if x[0] > 0:
            return x
        return -x

    with pytest.raises(rj.TraceError, match="np.where"):
        rj.jit(branchy)(np.ones(2))
    with pytest.raises(rj.TraceError, match="float()"):
        rj.jit(lambda x: float(x) * 2)(np.ones(()))
    with pytest.raises(rj.TraceError, match="boolean-mask"):
        rj.jit(lambda x: x[x > 0])(np.ones(4))


OUT_FORMS = {
    "numpy.sin": lambda x, buf: np.sin(x, out=buf),
    "numpy.add": lambda x, buf: np.add(x, 1.0, buf),
    "numpy.add.reduce": lambda x, buf: np.add.reduce(x, out=buf[0]),
    "numpy.sum": lambda x, buf: np.sum(x, out=buf[0]),
    "numpy.max": lambda x, buf: x.max(out=buf[0]),
    "numpy.cumsum": lambda x, buf: np.cumsum(x, out=buf),
    "numpy.clip": lambda x, buf: np.clip(x, 0, 1, out=buf),
    "numpy.dot": lambda x, buf: np.dot(x, x, out=buf[0]),
    "numpy.concatenate": lambda x, buf: np.concatenate([x], out=buf),
    "numpy.argmax": lambda x, buf: np.argmax(x, out=buf[0]),
}


@pytest.mark.parametrize("name", sorted(OUT_FORMS))
@pytest.mark.parametrize("buffer", ["numpy", "traced"])
def test_out_inside_a_traced_function_is_a_trace_error_at_the_users_line(name, buffer):
    form = OUT_FORMS[name]

    def f(x, y):
        return form(x, np.zeros(2) if buffer == "numpy" else y)

    with pytest.raises(rj.TraceError, match=r"out= cannot be used inside a traced function") as info:
        rj.jit(f)(np.ones(2), np.ones(2))
    assert name in str(info.value)
    # The line is the user's call with out=, inside OUT_FORMS.
    assert info.value.filename == __file__
    assert "out=" in str(info.value).splitlines()[-1] or ", buf)" in str(info.value).splitlines()[-1]


def test_item_assignment_is_a_trace_error():
    def f(x):
        x[0] = 1.0
        return x

    with pytest.raises(rj.TraceError, match="assigning to an element") as info:
        rj.jit(f)(np.ones(2))
    assert "x[0] = 1.0" in str(info.value)


def test_building_an_array_of_traced_values_is_a_trace_error():
    with pytest.raises(rj.TraceError, match="np.stack"):
        rj.jit(lambda x: np.array([x[0], x[1]]))(np.ones(2))


def test_constant_outputs_and_weak_where():
    f = rj.jit(lambda x: (x + 1.0, np.where(x > 0, 1.0, 0.0)))
    x = np.array([-1.0, 2.0], np.float32)
    a, b = f(x)
    np.testing.assert_array_equal(a, [0.0, 3.0])
    assert b.dtype == np.where(x > 0, 1.0, 0.0).dtype
    np.testing.assert_array_equal(b, [0.0, 1.0])
    g = rj.jit(lambda x: [x * 2.0, x.shape[0] * x])
    out = g(x)
    assert isinstance(out, list) and len(out) == 2
    np.testing.assert_array_equal(out[1], 2 * x)


def test_keyword_arguments_and_defaults():
    def scaled(x, k=2.0, *, unused=None):
        return x * k

    f = rj.jit(lambda x, k=2.0: x * k)
    x = np.array([1.0, 2.0], np.float32)
    np.testing.assert_array_equal(f(x), [2.0, 4.0])
    np.testing.assert_array_equal(f(x, k=3.0), [3.0, 6.0])
    np.testing.assert_array_equal(f(k=0.5, x=x), [0.5, 1.0])
    assert f.cache_info().misses == 1
    with pytest.raises(TypeError, match="unexpected keyword"):
        f(x, gain=1.0)
    with pytest.raises(TypeError, match="keyword-only"):
        rj.jit(scaled)(x, unused=1)


def test_negative_static_argnums():
    f = rj.jit(lambda x, n: x * n, static_argnums=-1)
    x = np.ones(2)
    np.testing.assert_array_equal(f(x, 3), [3.0, 3.0])
    np.testing.assert_array_equal(f(x, 4), [4.0, 4.0])
    assert f.cache_info().misses == 2
    assert "input n" not in f.hir(x, 3)


def test_the_cache_keeps_the_most_recently_used_signatures():
    f = rj.jit(lambda x: x + 1.0, cache_size=2)
    a, b, c = np.ones(1), np.ones(2), np.ones(3)
    f(a)
    f(b)
    f(a)  # a is now the most recently used
    f(c)  # b goes
    assert f.cache_info() == rj.CacheInfo(hits=1, misses=3, currsize=2)
    f(a)
    assert f.cache_info().misses == 3
    f(b)
    assert f.cache_info().misses == 4 and f.cache_info().currsize == 2
    with pytest.raises(ValueError, match="cache_size"):
        rj.jit(lambda x: x, cache_size=0)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads Linux's /proc")
def test_many_compilations_keep_memory_flat():
    def rss_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    f = rj.jit(lambda x: np.sin(x * 2.0) + 1.0, cache_size=8)
    for n in range(1, 101):  # warm up allocator pools
        f(np.ones(n))
    before = rss_mib()
    for n in range(101, 501):
        f(np.ones(n))
    assert f.cache_info().misses == 500 and f.cache_info().currsize == 8
    assert rss_mib() - before < 16, f"RSS grew from {before:.1f} to {rss_mib():.1f} MiB over 400 compiles"


def test_calls_through_the_cache_by_dtypes_and_shapes():
    f = rj.jit(lambda x: x * 2 + 1, cache_size=1)
    a = np.arange(4.0)
    np.testing.assert_array_equal(f(a), a * 2 + 1)
    np.testing.assert_array_equal(f(a + 1), (a + 1) * 2 + 1)
    assert f.cache_info() == (1, 1, 1)
    # The same dtype and shape, not C-contiguous: copied once, same kernel.
    strided = np.arange(8.0)[::2]
    np.testing.assert_array_equal(f(strided), strided * 2 + 1)
    # int64 (converted to int32) and byte-swapped float64 are other keys of the quick path.
    wide = np.arange(4, dtype=np.int64)
    np.testing.assert_array_equal(f(wide), wide * 2 + 1)
    np.testing.assert_array_equal(f(wide), wide * 2 + 1)
    assert f.cache_info().misses == 2  # cache_size=1: the float64 kernel is gone
    swapped = a.astype(">f8")
    np.testing.assert_array_equal(f(swapped), a * 2 + 1)  # compiled again, int32 out
    np.testing.assert_array_equal(f(a), a * 2 + 1)
    assert f.cache_info().misses == 3
    np.testing.assert_array_equal(f(wide), wide * 2 + 1)  # the quick path forgot int64
    assert f.cache_info().misses == 4 and f.cache_info().currsize == 1
