"""Bounded loops with JAX's signatures: `fori_loop` and `while_loop`.

```python
import numpy as np
import rfxjit as rj

@rj.jit
def newton_sqrt(a):
    return rj.lax.fori_loop(0, 8, lambda i, x: 0.5 * (x + a / x), a)
```

The carry (`init_val`) is a pytree of arrays (nested tuples, lists, dicts); the body returns
one of the same structure, dtypes and shapes. The body is traced once into a kernel of its own
and the loop stays a loop in the compiled code (10,000 trips compile to the code of 100).
Traced arrays of the enclosing function that the body uses become invariants of the loop.
Loops work under `jit`, `grad` (and the other derivatives) and `vmap`. Called outside a traced
function, a loop is compiled and run at once.

Unlike JAX, a `while_loop` takes `max_iter`, the most iterations it runs: every rfx loop is
bounded, so that it can be differentiated in reverse mode and run on GPUs.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _rfx
from ._errors import TraceError
from ._tracer import Tracer, lift
from ._tree import flatten, unflatten

__all__ = ["fori_loop", "while_loop"]

_I32_MAX = 2**31 - 1


def _static_int(op: str, what: str, value, low: int = -(2**31)) -> int:
    """`value` as a Python int known when tracing, in `low..=i32::MAX`."""
    if isinstance(value, Tracer):
        raise TraceError(
            f"{op}: {what} must be an integer known when tracing (an rfx loop's trip count is "
            "fixed when it compiles), got a traced array"
        )
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TraceError(f"{op}: {what} must be an integer, got {type(value).__name__}")
    value = int(value)
    if not low <= value <= _I32_MAX:
        raise TraceError(f"{op}: {what} = {value} is out of range ({low} to {_I32_MAX})")
    return value


def _leaf_count(treedef) -> int:
    kind = treedef[0]
    if kind == "leaf":
        return 1
    if kind == "none":
        return 0
    children = treedef[1] if kind in ("tuple", "list") else treedef[2]
    return sum(_leaf_count(c) for c in children)


def _describe(treedef) -> str:
    """A structure, its leaves drawn as `*`."""
    return repr(unflatten(treedef, ["*"] * _leaf_count(treedef))).replace("'*'", "*")


def _type_name(dtype, shape) -> str:
    return f"{np.dtype(dtype).name}{list(shape)}"


def _init_tracers(op: str, init_val):
    """The carry's leaves as tracers of the running trace (arrays become constants)."""
    leaves, tree = flatten(init_val)
    if not leaves:
        raise TraceError(f"{op}: init_val holds no arrays (the carry must have at least one)")
    tracers = []
    for leaf in leaves:
        if isinstance(leaf, Tracer):
            tracers.append(leaf)
        elif isinstance(leaf, (np.ndarray, np.generic, numbers.Number)):
            tracers.append(lift(leaf))
        else:
            raise TraceError(f"{op}: init_val holds a {type(leaf).__name__}; the carry's leaves must be arrays")
    return tracers, tree


def _carry_out(op: str, fun: str, tree, init, result) -> list:
    """The native tensors of `result`, a carry returned by `fun`: the structure, dtypes and
    shapes of the initial carry `init` (Python scalars take the carry's dtype)."""
    leaves, out_tree = flatten(result)
    if out_tree != tree:
        raise TraceError(
            f"{op}: {fun} must return a carry of init_val's structure {_describe(tree)}, "
            f"got {_describe(out_tree)}"
        )
    tensors = []
    for k, (leaf, first) in enumerate(zip(leaves, init)):
        weak = not isinstance(leaf, Tracer) or leaf._weak
        if isinstance(leaf, Tracer) or isinstance(leaf, (np.ndarray, np.generic, numbers.Number)):
            value = lift(leaf, first.dtype) if weak or leaf.dtype == first.dtype else leaf
        else:
            raise TraceError(f"{op}: {fun} returned a {type(leaf).__name__} in its carry; return arrays")
        if value.dtype != first.dtype or value.shape != first.shape:
            raise TraceError(
                f"{op}: {fun} returned {_type_name(value.dtype, value.shape)} for carry leaf {k}, "
                f"which is {_type_name(first.dtype, first.shape)} (a carry keeps its dtype and shape)"
            )
        tensors.append(value._t)
    return tensors


def _run_compiled(loop, init_val):
    """`loop(init_val)` compiled and run (a loop called outside a traced function)."""
    from ._api import jit

    return jit(loop)(init_val)


def fori_loop(lower, upper, body_fun, init_val):
    """`body_fun(i, val)` for `i` from `lower` up to `upper` (excluded), starting from
    `init_val`: JAX's `lax.fori_loop`.

    `lower` and `upper` are integers known when tracing (`upper >= lower`); `i` is an int32
    scalar, weakly typed (`x * i` keeps `x`'s float dtype). `init_val` is an array or a pytree of arrays; `body_fun` returns the next value, of
    the same structure, dtypes and shapes.
    """
    op = "fori_loop"
    lower = _static_int(op, "lower", lower)
    upper = _static_int(op, "upper", upper)
    if upper < lower:
        raise TraceError(f"{op}: upper ({upper}) is below lower ({lower})")
    if not _rfx.tracing():
        return _run_compiled(lambda init: fori_loop(lower, upper, body_fun, init), init_val)
    init, tree = _init_tracers(op, init_val)

    def body(i, tensors):
        carry = unflatten(tree, [Tracer(t) for t in tensors])
        # The counter is weakly typed, as a Python int: `x * i` keeps a float32 carry float32
        # (JAX's promotion of its int32 counter gives the same).
        return _carry_out(op, "body_fun", tree, init, body_fun(Tracer(i, weak=True), carry))

    finals = _rfx.fori_loop(lower, upper, body, [t._t for t in init])
    return unflatten(tree, [Tracer(t) for t in finals])


def while_loop(cond_fun, body_fun, init_val, *, max_iter):
    """`val = body_fun(val)` while `cond_fun(val)`, starting from `init_val`, at most `max_iter`
    times: JAX's `lax.while_loop` with a bound.

    `cond_fun` returns a bool scalar; `body_fun` returns the next value, of `init_val`'s
    structure, dtypes and shapes. When the test still holds after `max_iter` iterations the loop
    ends there. Reverse-mode derivatives differentiate the iterations that ran (not the test).
    """
    op = "while_loop"
    max_iter = _static_int(op, "max_iter", max_iter, low=0)
    if not _rfx.tracing():
        return _run_compiled(lambda init: while_loop(cond_fun, body_fun, init, max_iter=max_iter), init_val)
    init, tree = _init_tracers(op, init_val)

    def cond(tensors):
        keep = cond_fun(unflatten(tree, [Tracer(t) for t in tensors]))
        if isinstance(keep, (bool, np.bool_)) or (isinstance(keep, np.ndarray) and keep.dtype == np.bool_):
            keep = lift(keep)
        if not isinstance(keep, Tracer):
            raise TraceError(f"{op}: cond_fun must return a bool scalar, got a {type(keep).__name__}")
        if keep.dtype != np.bool_ or keep.shape != ():
            raise TraceError(
                f"{op}: cond_fun must return a bool scalar, got {_type_name(keep.dtype, keep.shape)}"
            )
        return keep._t

    def body(tensors):
        carry = unflatten(tree, [Tracer(t) for t in tensors])
        return _carry_out(op, "body_fun", tree, init, body_fun(carry))

    finals = _rfx.while_loop(cond, body, [t._t for t in init], max_iter)
    return unflatten(tree, [Tracer(t) for t in finals])
