"""The reference interpreter: a `Kernel` run by rfx's interpreter backend (`interp`), which
evaluates rfx's IR directly, without code generation."""

from __future__ import annotations

from ..kernels.ir import Kernel
from ..kernels.lowering import lower_kernel
from .executor import execute_lowered


def interpret(kernel: Kernel, inputs: dict):
    """`kernel` on `inputs` (name -> array) by rfx's reference interpreter."""
    return execute_lowered(lower_kernel(kernel), inputs, backend="interp")


__all__ = ["interpret"]
