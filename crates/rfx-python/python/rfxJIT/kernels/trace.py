"""`trace`: a Python function over NumPy captured as a `Kernel` of the IR.

The function is called once with tracers in place of its arguments; every operator and NumPy
ufunc it applies that the IR has an op for (`+ - * / **`, unary `-`, `abs`, `np.sin`, `np.cos`,
`np.tan`, `np.exp`, `np.log`, `np.sqrt`, `np.tanh`, `np.maximum`, `np.minimum`, and their
`add`/`multiply`/... names) becomes an op, in call order; Python and NumPy scalars become
`Const`s of the dtype NumPy's promotion gives them (`x_f32 * 2.0`: a float32 `Const`). Anything
else raises `rfxjit.TraceError` naming the function.
"""

from __future__ import annotations

import inspect
import numbers

import numpy as np

from rfxjit import TraceError

from .ir import BY_UFUNC, Const, Input, Kernel, Node


class _Recorder:
    def __init__(self):
        self.ops: list[Node] = []

    def add(self, node: Node) -> Node:
        if node not in self.ops:
            self.ops.append(node)
        return node


class KernelTracer:
    """A value being traced: its IR node and its NumPy dtype."""

    __array_priority__ = 1000

    def __init__(self, node: Node, dtype: np.dtype, recorder: _Recorder):
        self.node = node
        self.dtype = np.dtype(dtype)
        self._rec = recorder

    def _apply(self, ufunc: str, *operands):
        cls = BY_UFUNC.get(ufunc)
        if cls is None:
            raise TraceError(f"numpy.{ufunc} has no op in rfxJIT's kernel IR")
        probes = []
        for o in operands:
            if isinstance(o, KernelTracer):
                probes.append(np.empty(0, o.dtype))
            elif isinstance(o, (bool, int, float)):
                probes.append(o)  # weak (NEP 50)
            elif isinstance(o, np.generic) or (isinstance(o, np.ndarray) and o.ndim == 0):
                probes.append(np.empty(0, np.asarray(o).dtype))
            else:
                raise TraceError(f"rfxJIT's trace takes traced values and scalars as operands, got {type(o).__name__}")
        # NumPy's promotion gives the op's dtype; a constant operand is a Const of that dtype.
        result_dtype = getattr(np, ufunc)(*probes).dtype
        nodes = [
            o.node if isinstance(o, KernelTracer) else self._rec.add(Const(np.asarray(o).item(), dtype=result_dtype.name))
            for o in operands
        ]
        return KernelTracer(self._rec.add(cls(*nodes)), result_dtype, self._rec)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or kwargs:
            raise TraceError(f"numpy.{ufunc.__name__}.{method} with {sorted(kwargs)} is not supported by rfxJIT's trace")
        return self._apply(ufunc.__name__, *inputs)

    def __array_function__(self, func, types, args, kwargs):
        raise TraceError(f"numpy.{func.__name__} has no op in rfxJIT's kernel IR")

    def __add__(self, other):
        return self._apply("add", self, other)

    def __radd__(self, other):
        return self._apply("add", other, self)

    def __sub__(self, other):
        return self._apply("subtract", self, other)

    def __rsub__(self, other):
        return self._apply("subtract", other, self)

    def __mul__(self, other):
        return self._apply("multiply", self, other)

    def __rmul__(self, other):
        return self._apply("multiply", other, self)

    def __truediv__(self, other):
        return self._apply("divide", self, other)

    def __rtruediv__(self, other):
        return self._apply("divide", other, self)

    def __pow__(self, other):
        return self._apply("power", self, other)

    def __rpow__(self, other):
        return self._apply("power", other, self)

    def __neg__(self):
        return self._apply("negative", self)

    def __abs__(self):
        return self._apply("absolute", self)

    def _no_comparison(self, other):
        raise TraceError("comparisons have no op in rfxJIT's kernel IR (use np.maximum/np.minimum)")

    __lt__ = __le__ = __gt__ = __ge__ = _no_comparison

    def __bool__(self):
        raise TraceError("a traced value has no truth value while rfxJIT traces (use np.maximum/np.minimum)")


def trace(fn, *example_args, name: str | None = None) -> Kernel:
    """`fn` captured as a `Kernel`: one `Input` per argument, named as `fn`'s parameters, with
    the dtype of the example argument (an array, a NumPy dtype or a dtype name)."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        params = []
    names = [params[i] if i < len(params) else f"arg{i}" for i in range(len(example_args))]
    rec = _Recorder()
    inputs = []
    tracers = []
    for arg_name, example in zip(names, example_args):
        if isinstance(example, (str, np.dtype, type)):
            dtype = np.dtype(example)
        else:
            dtype = np.asarray(example).dtype
        if dtype == np.int64:
            dtype = np.dtype(np.int32)  # rfx's integer dtype (int64 arrays are range-checked to it)
        inputs.append(Input(arg_name, dtype=dtype.name))
        tracers.append(KernelTracer(Input(arg_name), dtype, rec))
    result = fn(*tracers)
    if isinstance(result, KernelTracer):
        output = result.node
    elif isinstance(result, (numbers.Number, np.generic)):
        output = rec.add(Const(np.asarray(result).item(), dtype=np.asarray(result).dtype.name))
    else:
        raise TraceError(f"`{getattr(fn, '__name__', 'fn')}` returned a {type(result).__name__}; rfxJIT's trace captures one array")
    kernel_name = name or getattr(fn, "__name__", "kernel")
    if not kernel_name.isidentifier():
        kernel_name = "kernel"
    return Kernel(inputs=inputs, ops=rec.ops, output=output, name=kernel_name)


__all__ = ["KernelTracer", "trace"]
