"""Functional transforms: rfxjit's `grad` and `value_and_grad` (rfx's IR-level reverse mode)."""

from rfxjit import grad, value_and_grad

__all__ = ["grad", "value_and_grad"]
