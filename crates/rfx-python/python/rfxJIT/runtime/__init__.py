"""Execution: the lowered-kernel executor, the reference interpreter, `tinyjit.jit`, the
dispatch queue and the benchmark harness (`python -m rfxJIT.runtime.benchmark`)."""

from . import executor, interpreter, queue, tinyjit  # noqa: F401
