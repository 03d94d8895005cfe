"""`jit`: a Python function over NumPy traced into an rfx kernel, cached by argument shapes and
dtypes (and static arguments), and replayed; it is `rfxjit.jit` itself."""

from rfxjit import jit

__all__ = ["jit"]
