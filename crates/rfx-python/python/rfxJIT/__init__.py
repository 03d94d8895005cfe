"""rfxJIT's API on rfx: code written for rfxJIT (its kernel IR, passes, lowering, executor,
`tinyjit.jit`, transforms, dispatch queue and benchmark) runs unchanged, compiled by rfx.

The modules map onto `rfxjit` (see docs/python.md, "rfxJIT compatibility"):

- `rfxJIT.kernels.ir`: the node classes (`Kernel`, `Input`, `Const`, `Add`, `Mul`, `Sin`, ...).
- `rfxJIT.kernels.optimize`: `constant_fold`, `eliminate_dead_ops`, `fuse_chains`, `optimize`.
- `rfxJIT.kernels.lowering.lower_kernel` and `rfxJIT.runtime.executor.execute_lowered`.
- `rfxJIT.kernels.trace.trace`: a Python function captured as a `Kernel`.
- `rfxJIT.runtime.tinyjit.jit`, `rfxJIT.transforms.grad` / `value_and_grad`: `rfxjit`'s.
- `rfxJIT.runtime.queue.DispatchQueue`: a single-worker dispatch queue.
- `python -m rfxJIT.runtime.benchmark`: the elementwise micro-benchmarks.
"""

from . import kernels, runtime, transforms  # noqa: F401

__all__ = ["kernels", "runtime", "transforms"]
