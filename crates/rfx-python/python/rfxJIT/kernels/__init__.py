"""The kernel IR, its optimisation passes, lowering and the tracer."""

from . import ir, lowering, optimize, trace  # noqa: F401
