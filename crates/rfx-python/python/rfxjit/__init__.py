"""rfxjit: `@jit`, `grad`, `vmap` and friends over plain NumPy code, compiled by rfx.

```python
import numpy as np
import rfxjit as rj

@rj.jit
def compute(x, y):
    return np.sin(x * 2.0) + y
```

The function body is ordinary NumPy: while it is traced, its parameters are `Tracer`s that
record every NumPy call into rfx's HIR (see `docs/python.md` for what is supported).
"""

from . import _rfx
from ._api import (
    Bound,
    CacheInfo,
    Function,
    config,
    eval,
    grad,
    hessian,
    jacfwd,
    jacobian,
    jacrev,
    jit,
    jvp,
    value_and_grad,
    vjp,
    vmap,
)
from ._errors import (
    AutodiffError,
    BackendUnavailable,
    CallError,
    CompileError,
    ExportError,
    ExprError,
    RfxError,
    TraceError,
)
from ._export import export
from ._tracer import Tracer
from . import numpy  # noqa: E402 - the namespace imports the tracer
from . import lie  # noqa: E402 - Lie groups written with the traced NumPy functions
from . import control  # noqa: E402 - URDF kinematic chains written with the traced NumPy functions
from . import lax  # noqa: E402 - bounded loops over the tracer

Kernel = _rfx.Kernel
#: Optimises, lowers and compiles a `Kernel`: `compile(kernel, backend="cpu", fast_math=False)`
#: returns the native kernel, callable on NumPy arrays (as a bound kernel).
compile = _rfx.compile  # noqa: A001 - the name rfx uses
__version__ = _rfx.__version__


def backends():
    """The backends built into this installation (`cpu` and `interp` always)."""
    return list(_rfx.backends())


__all__ = [
    "AutodiffError",
    "BackendUnavailable",
    "Bound",
    "CacheInfo",
    "CallError",
    "CompileError",
    "ExportError",
    "ExprError",
    "Function",
    "Kernel",
    "RfxError",
    "TraceError",
    "Tracer",
    "backends",
    "compile",
    "config",
    "eval",
    "export",
    "grad",
    "hessian",
    "jacfwd",
    "jacobian",
    "jacrev",
    "jit",
    "jvp",
    "lax",
    "numpy",
    "value_and_grad",
    "vjp",
    "vmap",
]
