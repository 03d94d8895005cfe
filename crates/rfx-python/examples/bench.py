"""Call overheads from Python, beside NumPy in the same process: a bound call of the PID clip
kernel at n = 1, the jit cache path, a first call (trace, optimise, compile) of a 10-op chain,
and sin(x*2)+y at 65,536 elements. Medians of `time.perf_counter_ns` over many calls (the best
of several rounds). Run with a release build: `pip install ./crates/rfx-python` then
`python crates/rfx-python/examples/bench.py`. `peers.py` beside it measures the same paths
beside numba and JAX, and against the Rust call of the same kernels (docs/performance.md,
"From Python").
"""

import statistics
import time

import numpy as np

import rfxjit as rj


def pid_clip(e, i, d):
    return np.clip(1.2 * e + 0.3 * i + 0.05 * d, -1.0, 1.0)


def chain(x):
    return np.tanh(np.sin(x * 2.0) + np.cos(x) * 0.5 - x * x + np.exp(-x) * 0.1 + np.sqrt(np.abs(x)) - 1.0)


def median_us(fn, calls=20000, rounds=7):
    clock = time.perf_counter_ns
    best = float("inf")
    for _ in range(rounds):
        samples = []
        for _ in range(calls):
            t0 = clock()
            fn()
            samples.append(clock() - t0)
        best = min(best, statistics.median(samples))
    return best / 1000


def main():
    e = np.array([0.5], np.float32)
    i = np.array([0.1], np.float32)
    d = np.array([0.2], np.float32)
    out = np.empty(1, np.float32)
    f = rj.jit(pid_clip)
    bound = f.bind(e, i, d)
    bound(e, i, d, out=out)
    rows = [
        ("clock overhead (empty call)", median_us(lambda: None)),
        ("PID clip n=1: bound call, out=", median_us(lambda: bound(e, i, d, out=out))),
        ("PID clip n=1: jit call (cache hit)", median_us(lambda: f(e, i, d))),
        ("PID clip n=1: NumPy", median_us(lambda: np.clip(1.2 * e + 0.3 * i + 0.05 * d, -1.0, 1.0))),
    ]
    firsts = []
    for k in range(7):
        g = rj.jit(chain)
        x = np.ones(8 + k, np.float32)
        t0 = time.perf_counter_ns()
        g(x)
        firsts.append((time.perf_counter_ns() - t0) / 1000)
    rows.append(("10-op chain: first call (trace+optimise+compile)", statistics.median(firsts)))
    n = 65536
    x = np.random.default_rng(0).normal(size=n).astype(np.float32)
    y = x.copy()
    o = np.empty(n, np.float32)
    big = rj.jit(lambda a, b: np.sin(a * 2.0) + b).bind(x, y)
    big(x, y, out=o)
    two = np.float32(2.0)
    rows.append(("sin(x*2)+y n=65536: bound call, out=", median_us(lambda: big(x, y, out=o), calls=500)))
    rows.append(("sin(x*2)+y n=65536: NumPy", median_us(lambda: np.sin(x * two) + y, calls=500)))
    for name, us in rows:
        print(f"{name:52s} {us:10.3f} us")


if __name__ == "__main__":
    main()
