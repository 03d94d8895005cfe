"""The control-loop path's promises that need more than a result to check: a large bound call
lets other Python threads run (the GIL is released), a bound call with `out=` allocates nothing
in Rust, and a million such calls leave the process's memory flat."""

import os
import sys
import threading
import time

import numpy as np
import pytest

import rfxjit as rj


def pid_clip(e, i, d):
    return np.clip(1.2 * e + 0.3 * i + 0.05 * d, -1.0, 1.0)


def heavy(x, y):
    return np.tanh(np.sin(x * 1.5 + y) * np.cos(y) + np.exp(-x * x) + np.sqrt(np.abs(y)))


class Counter:
    """A second Python thread that counts the iterations of a pure-Python loop."""

    def __init__(self):
        self.count = 0
        self.running = True
        self.started = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        self.started.set()
        while self.running:
            self.count += 1

    def __enter__(self):
        self.thread.start()
        self.started.wait()
        return self

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def test_large_bound_calls_let_other_threads_run():
    n = 1 << 20
    assert 3 * n >= rj._rfx.GIL_RELEASE_ELEMS
    rng = np.random.default_rng(5)
    x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    out = np.empty(n)
    k = rj.jit(heavy).bind(x, y)
    k(x, y, out=out)
    np.testing.assert_allclose(out, heavy(x, y), rtol=1e-13, atol=1e-15)
    interval = sys.getswitchinterval()
    # A short switch interval: a thread that holds the GIL hands it over within 0.1 ms at its
    # next bytecode, so outside the call the counter can run only briefly; only a call that
    # releases the GIL lets it run for the call's whole length.
    sys.setswitchinterval(1e-4)
    try:
        with Counter() as counter:
            # The counter's pace alone, while this thread sleeps (sleeping releases the GIL).
            c0, t0 = counter.count, time.perf_counter()
            time.sleep(0.05)
            rate = (counter.count - c0) / (time.perf_counter() - t0)
            seen = []
            for _ in range(8):
                c0, t0 = counter.count, time.perf_counter()
                k(x, y, out=out)
                seconds, progress = time.perf_counter() - t0, counter.count - c0
                seen.append((progress, seconds))
                # With the GIL held through the call, the counter could run only for the
                # switch intervals around it (a fraction of a millisecond, a few on a busy
                # machine); a quarter of the call's length at its own pace is well above that
                # for calls of 10 ms and more. Released, it runs about the whole call.
                if seconds > 0.01 and progress > max(1000, 0.25 * rate * seconds):
                    break
            else:
                pytest.fail(
                    f"the counter thread made no progress during a {n}-element call "
                    f"(its pace alone: {rate:.0f}/s; (iterations, seconds) per call: {seen})"
                )
    finally:
        sys.setswitchinterval(interval)


needs_counter = pytest.mark.skipif(
    not hasattr(rj._rfx, "allocations"),
    reason="the extension was built without the alloc-count feature (cargo xtask test builds it with it)",
)


@needs_counter
def test_bound_calls_with_out_allocate_nothing_in_rust():
    e, i, d = (np.array([v], np.float32) for v in (0.5, 0.25, -0.125))
    out = np.empty(1, np.float32)
    k = rj.jit(pid_clip).bind(e, i, d)
    for _ in range(100):  # the scratch space grows on the first call
        k(e, i, d, out=out)
    # The counter sees this module's allocations (a HIR dump is a Rust string).
    before = rj._rfx.allocations()
    k.hir()
    assert rj._rfx.allocations() > before
    before = rj._rfx.allocations()
    for _ in range(10_000):
        k(e, i, d, out=out)
    assert rj._rfx.allocations() - before == 0
    np.testing.assert_allclose(out, pid_clip(e, i, d), rtol=1e-6)
    # Several outputs, and a call large enough to release the GIL, allocate nothing either.
    n = 1 << 15
    x = np.linspace(-1, 1, n)
    two = rj.jit(lambda a, b: (a * b + 1.0, np.sin(a) - b)).bind(x, x)
    outs = (np.empty(n), np.empty(n))
    two(x, x, out=outs)
    as_list = list(outs)
    before = rj._rfx.allocations()
    for _ in range(200):
        two(x, x, out=outs)
        two(x, x, out=as_list)
    assert rj._rfx.allocations() - before == 0
    np.testing.assert_allclose(outs[1], np.sin(x) - x, rtol=1e-14, atol=1e-15)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads Linux's /proc")
def test_a_million_bound_calls_keep_memory_flat():
    def rss_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    e, i, d = (np.array([v], np.float32) for v in (0.5, 0.25, -0.125))
    out = np.empty(1, np.float32)
    k = rj.jit(pid_clip).bind(e, i, d)
    for _ in range(10_000):
        k(e, i, d, out=out)
    before = rss_mib()
    for _ in range(1_000_000):
        k(e, i, d, out=out)
    # A leak of even 8 bytes a call would be 8 MB here.
    assert rss_mib() - before < 4, f"RSS grew from {before:.1f} to {rss_mib():.1f} MiB over 10^6 calls"
    # Calls that return new arrays give them back too.
    before = rss_mib()
    for _ in range(200_000):
        k(e, i, d)
    assert rss_mib() - before < 4, f"RSS grew from {before:.1f} to {rss_mib():.1f} MiB over 2*10^5 calls"


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads Linux's /proc")
def test_thousands_of_compilations_keep_memory_flat():
    def rss_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    f = rj.jit(lambda x: np.sin(x * 2.0) + 1.0, cache_size=8)
    for n in range(1, 201):  # warm up allocator pools
        f(np.ones(n))
    before = rss_mib()
    for n in range(201, 2701):
        f(np.ones(n))
    info = f.cache_info()
    assert info.misses == 2700 and info.currsize == 8
    # Each compilation makes machine code, IR and a Python entry: a leak of even one page of
    # code per compilation would be 10 MiB here.
    assert rss_mib() - before < 4, f"RSS grew from {before:.1f} to {rss_mib():.1f} MiB over 2,500 compiles"
    np.testing.assert_allclose(f(np.full(2700, 0.25)), np.sin(0.5) + 1.0, rtol=1e-15)


def test_one_output_given_bare_or_in_a_tuple_or_list():
    e, i, d = (np.array([v], np.float32) for v in (0.5, 0.25, -0.125))
    k = rj.jit(pid_clip).bind(e, i, d)
    want = pid_clip(e, i, d)
    for wrap in (lambda a: a, lambda a: (a,), lambda a: [a]):
        out = np.full(1, np.nan, np.float32)
        assert k(e, i, d, out=wrap(out)) is out
        np.testing.assert_allclose(out, want, rtol=1e-6)
    with pytest.raises(rj.CallError, match="output `.*`: expected a numpy.ndarray, got str"):
        k(e, i, d, out="u")
    with pytest.raises(rj.CallError, match="output `out`: expected dtype float32, got float64"):
        k(e, i, d, out=np.empty(1))
    with pytest.raises(rj.CallError, match="overlaps input"):
        k(e, i, d, out=e)
