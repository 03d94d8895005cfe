"""The elementwise micro-benchmarks: `python -m rfxJIT.runtime.benchmark --size 65536
--iterations 200 --backend cpu --json-out FILE`.

Four kernels of the IR (`add`, `mul`, `sin` and `fused_chain`, a 12-op chain with foldable
constants and dead ops) are lowered and run with `execute_lowered` on float32 arrays of `size`
elements; each line gives the mean time of one call and the calls per second. The optimisation
lines count the ops of `fused_chain` before and after `optimize`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from ..kernels.ir import Add, Const, Cos, Input, Kernel, Mul, Sin, Sub, Tanh
from ..kernels.lowering import lower_kernel
from ..kernels.optimize import optimize
from .executor import BACKENDS, execute_lowered

X, Y = Input("x"), Input("y")
INPUTS = [Input("x", dtype="float32"), Input("y", dtype="float32")]


def fused_chain_kernel() -> Kernel:
    """tanh(sin(x * (0.5 * 4.0) + y) * 0.25 - y * 0.5): 12 ops, two of them foldable and two
    dead."""
    scale = Mul(Const(0.5), Const(4.0))
    a = Mul(X, scale)
    b = Add(a, Y)
    c = Sin(b)
    d = Mul(c, Const(0.25))
    e = Mul(Y, Const(0.5))
    f = Sub(d, e)
    out = Tanh(f)
    dead1 = Cos(Y)
    dead2 = Mul(dead1, Const(3.0))
    ops = [Const(0.5), Const(4.0), scale, a, b, c, d, dead1, dead2, e, f, out]
    return Kernel(inputs=INPUTS, ops=ops, output=out, name="fused_chain")


def kernels() -> dict:
    return {
        "add": Kernel(inputs=INPUTS, ops=[Add(X, Y)], name="add"),
        "mul": Kernel(inputs=INPUTS, ops=[Mul(X, Y)], name="mul"),
        "sin": Kernel(inputs=INPUTS[:1], ops=[Sin(X)], name="sin"),
        "fused_chain": optimize(fused_chain_kernel()),
    }


def count_fused(kernel: Kernel) -> int:
    from ..kernels.ir import Fused

    return sum(isinstance(op, Fused) for op in kernel.ops)


def run(size: int, iterations: int, backend: str, out=sys.stdout) -> dict:
    rng = np.random.default_rng(0)
    data = {"x": rng.standard_normal(size).astype(np.float32), "y": rng.standard_normal(size).astype(np.float32)}
    print(f"Benchmarking elementwise kernels (size={size}, iterations={iterations})", file=out)
    results = {}
    for name, kernel in kernels().items():
        lowered = lower_kernel(kernel)
        inputs = {n: data[n] for n in lowered.input_names}
        execute_lowered(lowered, inputs, backend=backend)  # compiles
        start = time.perf_counter()
        for _ in range(iterations):
            execute_lowered(lowered, inputs, backend=backend)
        avg_s = (time.perf_counter() - start) / iterations
        ops_per_s = 1.0 / avg_s if avg_s > 0 else float("inf")
        results[name] = {"avg_ms": avg_s * 1e3, "ops_per_s": ops_per_s}
        print(f"[{backend}] {name}: {avg_s * 1e3:.3f}ms avg, {ops_per_s:.0f} ops/s", file=out)
    before = fused_chain_kernel()
    after = optimize(before)
    n_before, n_after = len(before.ops), len(after.ops)
    reduction = 100.0 * (n_before - n_after) / n_before
    fused = count_fused(after)
    print("", file=out)
    print("Optimization impact:", file=out)
    print(f"- Reduced ops: {n_before} -> {n_after} ({reduction:.0f}% reduction)", file=out)
    print(f"- Fused chains: {fused}", file=out)
    return {
        "size": size,
        "iterations": iterations,
        "backend": backend,
        "kernels": results,
        "optimization": {"ops_before": n_before, "ops_after": n_after, "reduction_pct": reduction, "fused_chains": fused},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rfxJIT.runtime.benchmark", description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=65536, help="elements per array (default 65536)")
    parser.add_argument("--iterations", type=int, default=200, help="timed calls per kernel (default 200)")
    parser.add_argument("--backend", default="cpu", choices=BACKENDS, help="rfx backend (default cpu)")
    parser.add_argument("--json-out", default=None, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    if args.size < 1 or args.iterations < 1:
        parser.error("--size and --iterations must be at least 1")
    report = run(args.size, args.iterations, args.backend)
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
