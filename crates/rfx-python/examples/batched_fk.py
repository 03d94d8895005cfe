"""The UR5's forward kinematics and geometric Jacobian for a batch of configurations, one
`vmap`ped kernel, on every backend this machine runs (`cpu`, and `cuda` where there is a GPU).

    python crates/rfx-python/examples/batched_fk.py [BATCH] [CALLS]

BATCH defaults to 80,000 configurations (float64), CALLS to 20. Each backend's kernel is
called with host arrays (`cuda` copies the configurations in and the poses and Jacobians out
on every call) and pre-bound with `out=` arrays; the table gives the median and the fastest
call in milliseconds, after one warm-up call. Every backend's poses and Jacobians are checked
against the CPU backend's (the largest difference is printed), so a backend that computes
something else fails here rather than reading fast.
"""

import os
import statistics
import sys
import time

import numpy as np

import rfxjit as rj
from rfxjit.control import Chain

URDF = os.path.join(os.path.dirname(__file__), "..", "..", "rfx-control", "tests", "data", "ur5.urdf")


def fk_and_jacobian(chain):
    return lambda q: (chain.fk(q, "tool0"), chain.jacobian(q, "tool0"))


def timed(call, calls):
    call()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3, min(samples) * 1e3


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 80_000
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    chain = Chain.from_urdf(URDF)
    q = np.random.default_rng(7).uniform(-np.pi, np.pi, size=(batch, chain.dof))
    backends = ["cpu"]
    for backend in ("cuda",):
        try:
            rj.jit(lambda x: x + 1.0, backend=backend)(np.zeros(1))
            backends.append(backend)
        except rj.BackendUnavailable as error:
            print(f"{backend}: not run ({error})")

    reference = None
    print(f"UR5 pose [4, 4] and Jacobian [6, 6] of {batch} configurations (float64), {calls} calls")
    print(f"{'backend':<8} {'call':<10} {'p50 ms':>9} {'min ms':>9} {'max |diff| vs cpu':>19}")
    for backend in backends:
        kernel = rj.jit(rj.vmap(fk_and_jacobian(chain)), backend=backend)
        start = time.perf_counter()
        pose, jac = kernel(q)
        compile_ms = (time.perf_counter() - start) * 1e3
        if reference is None:
            reference = (pose, jac)
            # One configuration against the unbatched kernel: vmap computes what it should.
            one = rj.jit(fk_and_jacobian(chain), backend=backend)(q[batch // 2])
            np.testing.assert_allclose(pose[batch // 2], one[0], rtol=0, atol=1e-12)
            np.testing.assert_allclose(jac[batch // 2], one[1], rtol=0, atol=1e-12)
        diff = max(float(np.max(np.abs(pose - reference[0]))), float(np.max(np.abs(jac - reference[1]))))
        assert diff < 1e-9, f"{backend} differs from cpu by {diff}"
        p50, fastest = timed(lambda: kernel(q), calls)
        print(f"{backend:<8} {'host':<10} {p50:9.3f} {fastest:9.3f} {diff:19.2e}   (first call {compile_ms:.0f} ms)")
        out = (np.empty_like(pose), np.empty_like(jac))
        bound = kernel.bind(q)
        p50, fastest = timed(lambda: bound(q, out=out), calls)
        diff = max(float(np.max(np.abs(out[0] - reference[0]))), float(np.max(np.abs(out[1] - reference[1]))))
        assert diff < 1e-9, f"{backend} bound call differs from cpu by {diff}"
        print(f"{backend:<8} {'bound out=':<10} {p50:9.3f} {fastest:9.3f} {diff:19.2e}")


if __name__ == "__main__":
    main()
