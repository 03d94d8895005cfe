"""The cost of one bound call at n = 1, for profiling the per-call path of the native kernel.

    python crates/rfx-python/examples/call_overhead.py time            # median ns per call
    valgrind --tool=callgrind python crates/rfx-python/examples/call_overhead.py count 100000
    valgrind --tool=callgrind python crates/rfx-python/examples/call_overhead.py count 0

The `count` mode makes the calls in a plain loop; the instructions of one call are the
difference between a run with N calls and one with none, divided by N (callgrind's total `Ir`
for the whole process, so interpreter start-up and compilation cancel out). The kernels are
docs/performance.md's: the 10-op chain (two inputs) and the PID clip (three), float32,
called as `k(x, y, out=u)`.
"""

import statistics
import sys
import time

import numpy as np

import rfxjit as rj


def chain(x, y):
    return ((x * 1.5 + y) * 0.5 - np.sin(x)) * np.cos(y) + np.exp(-(x * x))


def pid_clip(e, i, d):
    return np.clip(1.2 * e + 0.3 * i + 0.05 * d, -1.0, 1.0)


def kernels():
    a, b, c = (np.full(1, v, np.float32) for v in (0.5, 0.25, 0.125))
    out = np.empty(1, np.float32)
    return {
        "chain": (rj.jit(chain).bind(a, b), (a, b), out),
        "pid_clip": (rj.jit(pid_clip).bind(a, b, c), (a, b, c), out),
    }


def count(name, calls):
    kernel, args, out = kernels()[name]
    if len(args) == 2:
        x, y = args
        for _ in range(calls):
            kernel(x, y, out=out)
    else:
        e, i, d = args
        for _ in range(calls):
            kernel(e, i, d, out=out)


def median_ns(kernel, args, out, calls=20_000, rounds=5):
    best = []
    for _ in range(rounds):
        times = []
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            kernel(*args, out=out)
            times.append(time.perf_counter_ns() - t0)
        best.append(statistics.median(times))
    return min(best)


def main(argv):
    mode = argv[0] if argv else "time"
    if mode == "count":
        calls = int(argv[1]) if len(argv) > 1 else 100_000
        name = argv[2] if len(argv) > 2 else "chain"
        count(name, calls)
        return
    for name, (kernel, args, out) in kernels().items():
        print(f"{name}: {median_ns(kernel, args, out):.0f} ns per bound call (median, timer included)")


if __name__ == "__main__":
    main(sys.argv[1:])
