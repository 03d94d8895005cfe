"""`rfxjit.numpy`: the NumPy functions rfx traces, by name (as `jax.numpy`).

Each function works on traced values inside a jitted function and on ordinary arrays outside
one (where it is NumPy's own function). Names missing here are not supported by the tracer.
"""

import numpy as _np

from ._tracer import FUNCTIONS as _FUNCTIONS
from ._tracer import UFUNCS as _UFUNCS

float32 = _np.float32
float64 = _np.float64
int32 = _np.int32
bool_ = _np.bool_
pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
newaxis = None


_names = []
for _name in sorted(_UFUNCS):
    globals()[_name] = getattr(_np, _name)
    _names.append(_name)
for _alias, _target in {"abs": "absolute", "true_divide": "divide", "pow": "power", "mod": "remainder"}.items():
    globals()[_alias] = getattr(_np, _target)
    _names.append(_alias)
for _func in _FUNCTIONS:
    _name = _func.__name__
    if _func.__module__ and _func.__module__.startswith("numpy.linalg"):
        continue
    globals()[_name] = _func
    _names.append(_name)
# NumPy's aliases of the reductions.
for _name in ("max", "min", "round", "amax", "amin", "around"):
    if hasattr(_np, _name):
        globals()[_name] = getattr(_np, _name)


class linalg:  # noqa: N801 - a namespace, named as NumPy's
    """`rfxjit.numpy.linalg`: `norm`, `inv`, `det`, `solve`."""

    norm = staticmethod(_np.linalg.norm)
    inv = staticmethod(_np.linalg.inv)
    det = staticmethod(_np.linalg.det)
    solve = staticmethod(_np.linalg.solve)


def asarray(a, dtype=None):
    """`a` unchanged when it is traced, else NumPy's `asarray`."""
    from ._tracer import Tracer, astype_impl

    if isinstance(a, Tracer):
        return a if dtype is None else astype_impl(a, dtype)
    return _np.asarray(a, dtype=dtype)


array = asarray

__all__ = sorted(set(_names) | {"linalg", "asarray", "array", "float32", "float64", "int32", "bool_", "pi", "e", "inf", "nan", "newaxis"})
