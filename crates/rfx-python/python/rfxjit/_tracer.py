"""The tracer: a stand-in for a NumPy array that records every operation into rfx's HIR.

A `Tracer` wraps a traced tensor of the native module. NumPy calls reach it through
`__array_ufunc__` (ufuncs: `np.sin(x)`, `x + y`) and `__array_function__` (`np.sum`,
`np.where`, ...); each is mapped onto one rfx op (or a few, such as `stack` = reshapes and a
concatenation). Dtypes follow NumPy's rules (NEP 50: a Python scalar takes the array's dtype),
within rfx's dtypes float32, float64, int32 and bool: where NumPy would give int64, the result
is int32. Anything else raises `TraceError` naming the function.
"""

from __future__ import annotations

import builtins
import numbers

import numpy as np

from . import _compose, _rfx
from ._errors import TraceError

#: The dtypes rfx computes in.
SUPPORTED = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.bool_))

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def rfx_dtype(dtype, what: str = "value") -> np.dtype:
    """NumPy's dtype mapped onto rfx's: int64 (and smaller ints) become int32, others must be
    one of rfx's four."""
    dtype = np.dtype(dtype)
    if dtype.byteorder not in "=|":
        dtype = dtype.newbyteorder("=")  # byte-swapped input is converted to native order
    if dtype in SUPPORTED:
        return dtype
    if dtype.kind in "iu" and dtype != np.dtype(np.uint64):
        return np.dtype(np.int32)
    raise TraceError(
        f"{what} of dtype {dtype} is not supported: rfx computes in float32, float64, int32 and bool"
    )


def as_rfx_array(value, what: str = "argument") -> np.ndarray:
    """`value` as a C-contiguous NumPy array of an rfx dtype. Integer arrays (NumPy's default
    int64) are converted to int32 after a range check; a value outside int32 raises."""
    array = np.asarray(value)
    dtype = rfx_dtype(array.dtype, what)
    if array.dtype.kind in "iu" and array.dtype != dtype and array.size:
        lo, hi = array.min(), array.max()
        if lo < _I32_MIN or hi > _I32_MAX:
            raise TraceError(
                f"{what}: integer values from {lo} to {hi} do not fit int32, the integer dtype of rfx "
                "(convert to float64 first)"
            )
    # (`np.ascontiguousarray` would make a 0-d array 1-d.)
    return np.asarray(array, dtype=dtype, order="C")


def out_error(name: str) -> TraceError:
    """The error for `out=` inside a traced function. A traced array is a value of the kernel,
    not memory the function can write into (JAX raises too); the jitted function's or the bound
    kernel's own `out=` writes results into the caller's arrays."""
    return TraceError(
        f"{name}: out= cannot be used inside a traced function: traced arrays are values, not buffers "
        "(return the result; pass out= to the jitted function or bound kernel instead)"
    )


def _is_scalar(value) -> bool:
    return isinstance(value, (bool, int, float, numbers.Integral, numbers.Real)) and not isinstance(
        value, (np.ndarray, np.generic)
    )


def _weak_proxy(value):
    """What stands for a weakly typed operand in `np.result_type` (a Python scalar)."""
    if isinstance(value, Tracer):
        return {np.dtype(np.float64): 0.0, np.dtype(np.int32): 0, np.dtype(np.bool_): False}[value.dtype]
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers.Integral):
        return 0
    return 0.0


def result_dtype(*operands) -> np.dtype:
    """NumPy's result dtype of `operands` (tracers, arrays, scalars), mapped onto rfx's."""
    items = []
    for operand in operands:
        if isinstance(operand, Tracer):
            items.append(_weak_proxy(operand) if operand._weak else operand.dtype)
        elif _is_scalar(operand):
            items.append(_weak_proxy(operand))
        else:
            items.append(np.asarray(operand).dtype)
    return rfx_dtype(np.result_type(*items), "the result")


def lift(value, dtype: np.dtype | None = None) -> "Tracer":
    """`value` (a tracer, array or scalar) as a tracer of `dtype` (cast or made a constant)."""
    if isinstance(value, Tracer):
        if dtype is not None and value.dtype != dtype:
            return Tracer(value._t.cast(dtype.name))
        return value
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tracer) for v in value):
        return stack_impl([lift(v, dtype) for v in value], 0)
    if dtype is None:
        if _is_scalar(value):
            dtype = np.dtype(type(value) if not isinstance(value, bool) else np.bool_)
            dtype = rfx_dtype(dtype)
        else:
            dtype = rfx_dtype(np.asarray(value).dtype, "a constant")
    array = np.asarray(value)
    if array.dtype.kind in "iu" and dtype.kind == "i":
        array = as_rfx_array(array, "a constant")
    return Tracer(_rfx.constant(array.astype(dtype, copy=False)))


def _norm_axis(axis: int, ndim: int, what: str = "axis") -> int:
    if not isinstance(axis, (int, np.integer)):
        raise TraceError(f"{what} must be a constant integer, got {type(axis).__name__}")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise TraceError(f"{what} {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


def _norm_axes(axis, ndim: int) -> list[int]:
    if axis is None:
        return list(range(ndim))
    if isinstance(axis, (tuple, list)):
        return sorted({_norm_axis(a, ndim) for a in axis})
    return [_norm_axis(axis, ndim)]


class Tracer:
    """A traced array: what a jitted function's parameters are while it is traced."""

    __slots__ = ("_t", "_weak", "_shape", "_dtype")
    __array_priority__ = 1000

    def __init__(self, t, weak: bool = False):
        self._t = t
        self._weak = weak
        self._shape = tuple(t.shape)
        self._dtype = np.dtype(t.dtype)

    # -- array attributes ---------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def T(self) -> "Tracer":
        return transpose_impl(self)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d traced array")
        return self._shape[0]

    def __repr__(self) -> str:
        return f"Tracer(shape={self._shape}, dtype={self._dtype})"

    # -- what cannot be traced ------------------------------------------------------------------
    def _concrete(self, what: str):
        raise TraceError(
            f"{what} needs the value of a traced array, which is only known when the kernel runs "
            "(Python control flow on traced values is not traced: use np.where, or pass the value "
            "as a static argument with static_argnums)"
        )

    def __bool__(self):
        self._concrete("bool()")

    def __float__(self):
        self._concrete("float()")

    def __int__(self):
        self._concrete("int()")

    def __index__(self):
        self._concrete("using a traced array as an index or size")

    def __array__(self, dtype=None, copy=None):
        self._concrete("converting to a NumPy array (np.asarray, np.array; build arrays of traced values with np.stack)")

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self._shape[0]))

    def tolist(self):
        self._concrete("tolist()")

    def item(self):
        self._concrete("item()")

    # -- NumPy protocols ------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        if kwargs.get("out") is not None:
            raise out_error(name)
        if method == "reduce" and ufunc.__name__ in _UFUNC_REDUCE and not kwargs.keys() - {"axis", "keepdims"}:
            return reduce_impl(_UFUNC_REDUCE[ufunc.__name__], inputs[0], kwargs.get("axis", 0), kwargs.get("keepdims", False))
        if method != "__call__":
            raise TraceError(f"{name} is not supported by rfx's tracer")
        handler = UFUNCS.get(ufunc.__name__)
        if handler is None:
            raise TraceError(f"{name} is not supported by rfx's tracer")
        extra = {k: v for k, v in kwargs.items() if v is not None and k != "casting"}
        if "out" in extra:
            raise out_error(name)
        if "dtype" in extra:
            result = handler(*inputs)
            return astype_impl(result, extra.pop("dtype"))
        if extra:
            raise TraceError(f"{name}: the argument(s) {', '.join(sorted(extra))} are not supported")
        return handler(*inputs)

    def __array_function__(self, func, types, args, kwargs):
        handler = FUNCTIONS.get(func)
        if handler is None:
            module = getattr(func, "__module__", "numpy") or "numpy"
            module = "numpy" if module.startswith("numpy") and module.count(".") == 0 else module
            raise TraceError(f"{module}.{func.__name__} is not supported by rfx's tracer")
        return handler(*args, **kwargs)

    # -- operators ------------------------------------------------------------------------------
    def __add__(self, other):
        return binary("add", self, other)

    def __radd__(self, other):
        return binary("add", other, self)

    def __sub__(self, other):
        return binary("subtract", self, other)

    def __rsub__(self, other):
        return binary("subtract", other, self)

    def __mul__(self, other):
        return binary("multiply", self, other)

    def __rmul__(self, other):
        return binary("multiply", other, self)

    def __truediv__(self, other):
        return divide(self, other)

    def __rtruediv__(self, other):
        return divide(other, self)

    def __pow__(self, other):
        return power(self, other)

    def __rpow__(self, other):
        return power(other, self)

    def __floordiv__(self, other):
        return _compose.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return _compose.floor_divide(other, self)

    def __mod__(self, other):
        return _compose.remainder(self, other)

    def __rmod__(self, other):
        return _compose.remainder(other, self)

    def __divmod__(self, other):
        return _compose.divmod_pair(self, other)

    def __rdivmod__(self, other):
        return _compose.divmod_pair(other, self)

    def __matmul__(self, other):
        return matmul_impl(self, other)

    def __rmatmul__(self, other):
        return matmul_impl(other, self)

    def __neg__(self):
        return unary_same("negative", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return unary_same("absolute", self)

    def __invert__(self):
        if self.dtype != np.bool_:
            raise TraceError("~ (bitwise not) is supported on bool arrays only")
        return Tracer(self._t.unary("logical_not"))

    def __and__(self, other):
        return logical("logical_and", self, other, bitwise="&")

    def __rand__(self, other):
        return logical("logical_and", other, self, bitwise="&")

    def __or__(self, other):
        return logical("logical_or", self, other, bitwise="|")

    def __ror__(self, other):
        return logical("logical_or", other, self, bitwise="|")

    def __xor__(self, other):
        return logical("logical_xor", self, other, bitwise="^")

    def __rxor__(self, other):
        return logical("logical_xor", other, self, bitwise="^")

    def __lt__(self, other):
        return compare("less", self, other)

    def __le__(self, other):
        return compare("less_equal", self, other)

    def __gt__(self, other):
        return compare("greater", self, other)

    def __ge__(self, other):
        return compare("greater_equal", self, other)

    def __eq__(self, other):
        return compare("equal", self, other)

    def __ne__(self, other):
        return compare("not_equal", self, other)

    __hash__ = None

    def __getitem__(self, index):
        return getitem_impl(self, index)

    def __setitem__(self, index, value):
        raise TraceError(
            "assigning to an element or slice of a traced array is not supported: traced arrays are "
            "values (build the result with np.where or np.concatenate and return it)"
        )

    # -- methods --------------------------------------------------------------------------------
    def astype(self, dtype):
        return astype_impl(self, dtype)

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return reshape_impl(self, shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return transpose_impl(self, axes or None)

    def ravel(self):
        return reshape_impl(self, (-1,))

    flatten = ravel

    def squeeze(self, axis=None):
        return squeeze_impl(self, axis)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        return reduce_impl("sum", self, axis, keepdims, dtype, out)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return reduce_impl("mean", self, axis, keepdims, dtype, out)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        return reduce_impl("prod", self, axis, keepdims, dtype, out)

    def max(self, axis=None, out=None, keepdims=False):
        return reduce_impl("max", self, axis, keepdims, None, out)

    def min(self, axis=None, out=None, keepdims=False):
        return reduce_impl("min", self, axis, keepdims, None, out)

    def any(self, axis=None, out=None, keepdims=False):
        return any_all_impl("any", self, axis, out, keepdims)

    def all(self, axis=None, out=None, keepdims=False):
        return any_all_impl("all", self, axis, out, keepdims)

    def argmax(self, axis=None, out=None, keepdims=False):
        return arg_impl("argmax", self, axis, out, keepdims)

    def argmin(self, axis=None, out=None, keepdims=False):
        return arg_impl("argmin", self, axis, out, keepdims)

    def cumsum(self, axis=None, dtype=None, out=None):
        return cum_impl("cumsum", self, axis, dtype, out)

    def cumprod(self, axis=None, dtype=None, out=None):
        return cum_impl("cumprod", self, axis, dtype, out)

    def clip(self, min=None, max=None):
        return clip_impl(self, min, max)

    def dot(self, other):
        return dot_impl(self, other)

    def take(self, indices, axis=None):
        return take_impl(self, indices, axis)


# -- elementwise ops ------------------------------------------------------------------------------


def _pair(op: str, a, b, dtype: np.dtype):
    ta, tb = lift(a, dtype), lift(b, dtype)
    return Tracer(ta._t.binary(op, tb._t), weak=_both_weak(a, b))


def _both_weak(*operands) -> bool:
    return all((isinstance(o, Tracer) and o._weak) or _is_scalar(o) for o in operands)


def binary(op: str, a, b):
    """An arithmetic ufunc with NumPy's promotion."""
    return _pair(op, a, b, result_dtype(a, b))


def compare(op: str, a, b):
    dtype = result_dtype(a, b)
    if dtype == np.bool_ and op not in ("equal", "not_equal"):
        dtype = np.dtype(np.int32)  # rfx orders numbers: False < True as 0 < 1
    return Tracer(lift(a, dtype)._t.binary(op, lift(b, dtype)._t))


def divide(a, b):
    dtype = result_dtype(a, b)
    if dtype.kind != "f":
        dtype = np.dtype(np.float64)
    return _pair("divide", a, b, dtype)


def power(a, b):
    dtype = result_dtype(a, b)
    if dtype.kind == "f":
        return _pair("power", a, b, dtype)
    if dtype == np.bool_:
        raise TraceError("numpy.power on bool arrays is not supported")
    # Integer powers are computed in float64 (exact for results within int32) and cast back.
    return astype_impl(_pair("power", a, b, np.dtype(np.float64)), dtype)


def float_binary(op: str):
    def handler(a, b):
        dtype = result_dtype(a, b)
        if dtype.kind != "f":
            dtype = np.dtype(np.float64)
        return _pair(op, a, b, dtype)

    return handler


def logical(op: str, a, b, bitwise: str | None = None):
    if bitwise is not None and (result_dtype(a, b) != np.bool_):
        raise TraceError(f"{bitwise} (bitwise) is supported on bool arrays only")
    ta = _truth(a)
    tb = _truth(b)
    if op == "logical_xor":
        return Tracer(ta._t.binary("not_equal", tb._t))
    return Tracer(ta._t.binary(op, tb._t))


def _truth(value) -> Tracer:
    """`value != 0` as a bool tracer (NumPy's truth of a number)."""
    if isinstance(value, Tracer):
        if value.dtype == np.bool_:
            return value
        return compare("not_equal", value, 0)
    return lift(np.asarray(value).astype(bool))


def unary_same(op: str, x):
    """A ufunc whose result has the operand's dtype (`negative`, `absolute`, `sign`, ...)."""
    x = lift(x)
    if x.dtype == np.bool_ and op in ("negative", "sign"):
        raise TraceError(f"numpy.{op} on bool arrays is not supported")
    if x.dtype == np.bool_ and op in ("absolute", "floor", "ceil"):
        return x
    if x.dtype.kind == "i" and op in ("floor", "ceil"):
        return x
    return Tracer(x._t.unary(op), weak=x._weak)


def unary_float(op: str):
    """A ufunc computed in floating point: ints and bools are converted to float64 (NumPy
    gives float16 for bool; rfx has no float16)."""

    def handler(x):
        x = lift(x)
        if x.dtype.kind != "f":
            x = Tracer(x._t.cast("float64"))
        return Tracer(x._t.unary(op), weak=x._weak)

    return handler


def _predicate(op: str):
    def handler(x):
        x = lift(x)
        if x.dtype.kind != "f":
            # Integers and bools are always finite and never NaN.
            return _const_like(x, op == "isfinite")
        return Tracer(x._t.unary(op))

    return handler


def _const_like(x: Tracer, value: bool) -> Tracer:
    return broadcast_to_impl(lift(np.array(value)), x.shape)


def _square(x):
    x = lift(x)
    if x.dtype == np.bool_:
        raise TraceError("numpy.square of a bool array is int8 in NumPy, a dtype rfx does not have")
    return binary("multiply", x, x)


def _logical_not(x):
    return Tracer(_truth(x)._t.unary("logical_not"))


def _rint(x):
    x = lift(x)
    if x.dtype.kind != "f":
        x = Tracer(x._t.cast("float64"))
    return Tracer(x._t.unary("rint"))


def _positive(x):
    x = lift(x)
    if x.dtype == np.bool_:
        raise TraceError("numpy.positive is not defined for bool arrays")
    return x


def _reciprocal(x):
    x = lift(x)
    if x.dtype.kind != "f":
        raise TraceError("numpy.reciprocal of an integer array is not supported (NumPy truncates it to 0)")
    return Tracer(x._t.unary("reciprocal"), weak=x._weak)


UFUNCS = {
    "add": lambda a, b: binary("add", a, b) if result_dtype(a, b) != np.bool_ else logical("logical_or", a, b),
    "subtract": lambda a, b: binary("subtract", a, b),
    "multiply": lambda a, b: binary("multiply", a, b) if result_dtype(a, b) != np.bool_ else logical("logical_and", a, b),
    "divide": divide,
    "power": power,
    "float_power": lambda a, b: _pair("power", a, b, np.dtype(np.float64)),
    "arctan2": float_binary("arctan2"),
    "fmod": lambda a, b: binary("fmod", a, b),
    "minimum": lambda a, b: binary("minimum", a, b) if result_dtype(a, b) != np.bool_ else logical("logical_and", a, b),
    "maximum": lambda a, b: binary("maximum", a, b) if result_dtype(a, b) != np.bool_ else logical("logical_or", a, b),
    "less": lambda a, b: compare("less", a, b),
    "less_equal": lambda a, b: compare("less_equal", a, b),
    "greater": lambda a, b: compare("greater", a, b),
    "greater_equal": lambda a, b: compare("greater_equal", a, b),
    "equal": lambda a, b: compare("equal", a, b),
    "not_equal": lambda a, b: compare("not_equal", a, b),
    "logical_and": lambda a, b: logical("logical_and", a, b),
    "logical_or": lambda a, b: logical("logical_or", a, b),
    "logical_xor": lambda a, b: logical("logical_xor", a, b),
    "logical_not": _logical_not,
    "bitwise_and": lambda a, b: logical("logical_and", a, b, bitwise="&"),
    "bitwise_or": lambda a, b: logical("logical_or", a, b, bitwise="|"),
    "bitwise_xor": lambda a, b: logical("logical_xor", a, b, bitwise="^"),
    "invert": lambda x: lift(x).__invert__(),
    "negative": lambda x: unary_same("negative", x),
    "positive": _positive,
    "absolute": lambda x: unary_same("absolute", x),
    "sign": lambda x: unary_same("sign", x),
    "floor": lambda x: unary_same("floor", x),
    "ceil": lambda x: unary_same("ceil", x),
    "rint": _rint,
    "square": _square,
    "reciprocal": _reciprocal,
    "sqrt": unary_float("sqrt"),
    "exp": unary_float("exp"),
    "exp2": unary_float("exp2"),
    "log": unary_float("log"),
    "log2": unary_float("log2"),
    "sin": unary_float("sin"),
    "cos": unary_float("cos"),
    "tan": unary_float("tan"),
    "tanh": unary_float("tanh"),
    "arcsin": unary_float("arcsin"),
    "arccos": unary_float("arccos"),
    "arctan": unary_float("arctan"),
    "isnan": _predicate("isnan"),
    "isinf": _predicate("isinf"),
    "isfinite": _predicate("isfinite"),
    "matmul": lambda a, b: matmul_impl(a, b),
}

UFUNCS.update(_compose.UFUNCS)

_UFUNC_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}


# -- shapes ---------------------------------------------------------------------------------------


def astype_impl(x, dtype):
    x = lift(x)
    target = rfx_dtype(dtype, "astype")
    if target == x.dtype:
        return x
    return Tracer(x._t.cast(target.name))


def reshape_impl(x, shape, order="C"):
    x = lift(x)
    if order != "C":
        raise TraceError("reshape: only order='C' is supported")
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = [int(s) for s in shape]
    if shape.count(-1) > 1:
        raise TraceError("reshape: can only specify one unknown dimension")
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if known == 0 or x.size % known:
            raise TraceError(f"reshape: cannot reshape array of size {x.size} into shape {tuple(shape)}")
        shape[shape.index(-1)] = x.size // known
    if list(shape) == list(x.shape):
        return x
    return Tracer(x._t.reshape(shape), weak=x._weak)


def transpose_impl(x, axes=None):
    x = lift(x)
    if axes is None:
        perm = list(range(x.ndim))[::-1]
    else:
        perm = [_norm_axis(a, x.ndim) for a in axes]
    if perm == list(range(x.ndim)):
        return x
    return Tracer(x._t.transpose(perm))


def broadcast_to_impl(x, shape):
    x = lift(x)
    shape = [shape] if isinstance(shape, (int, np.integer)) else [int(s) for s in shape]
    if list(shape) == list(x.shape):
        return x
    return Tracer(x._t.broadcast_to(shape))


def squeeze_impl(x, axis=None):
    x = lift(x)
    if axis is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    else:
        axes = _norm_axes(axis, x.ndim)
        for a in axes:
            if x.shape[a] != 1:
                raise TraceError("squeeze: cannot select an axis to squeeze out which has size not equal to one")
    return reshape_impl(x, [d for i, d in enumerate(x.shape) if i not in axes])


def expand_dims_impl(x, axis):
    x = lift(x)
    axes = axis if isinstance(axis, (tuple, list)) else [axis]
    ndim = x.ndim + len(axes)
    axes = sorted(_norm_axis(a, ndim) for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return reshape_impl(x, shape)


def concatenate_impl(arrays, axis=0, out=None, dtype=None, casting=None):
    if out is not None:
        raise out_error("numpy.concatenate")
    arrays = list(arrays)
    if not arrays:
        raise TraceError("numpy.concatenate: need at least one array to concatenate")
    target = rfx_dtype(dtype) if dtype is not None else result_dtype(*arrays)
    parts = [lift(a, target) for a in arrays]
    if axis is None:
        parts = [reshape_impl(p, (-1,)) for p in parts]
        axis = 0
    axis = _norm_axis(axis, parts[0].ndim)
    if len(parts) == 1:
        return parts[0]
    return Tracer(_rfx.concat([p._t for p in parts], axis))


def stack_impl(arrays, axis=0, out=None, dtype=None, casting=None):
    if out is not None:
        raise out_error("numpy.stack")
    arrays = list(arrays)
    if not arrays:
        raise TraceError("numpy.stack: need at least one array to stack")
    target = rfx_dtype(dtype) if dtype is not None else result_dtype(*arrays)
    parts = [lift(a, target) for a in arrays]
    ndim = parts[0].ndim + 1
    axis = _norm_axis(axis, ndim)
    parts = [expand_dims_impl(p, axis) for p in parts]
    return concatenate_impl(parts, axis)


def getitem_impl(x: Tracer, index):
    """Indexing by constants: integers, slices (any step), None, Ellipsis, and constant
    integer arrays (NumPy's `take` along one axis)."""
    if not isinstance(index, tuple):
        index = (index,)
    if any(isinstance(i, Tracer) for i in index):
        if len(index) == 1 and isinstance(index[0], Tracer) and index[0].dtype.kind == "i":
            return take_impl(x, index[0], 0)
        if len(index) == 1 and isinstance(index[0], Tracer) and index[0].dtype == np.bool_:
            raise TraceError("boolean-mask indexing has a data-dependent shape and cannot be traced (use np.where)")
        raise TraceError("indexing by a traced array is supported only as x[i] with an integer array i (take along axis 0)")
    n_ellipsis = sum(1 for i in index if i is Ellipsis)
    if n_ellipsis > 1:
        raise TraceError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > x.ndim:
        raise TraceError(f"too many indices for array: array is {x.ndim}-dimensional, but {used} were indexed")
    if n_ellipsis:
        at = next(k for k, i in enumerate(index) if i is Ellipsis)
        index = index[:at] + (slice(None),) * (x.ndim - used) + index[at + 1 :]
    else:
        index = index + (slice(None),) * (x.ndim - used)
    out = x
    axis = 0
    new_axes = []
    position = 0
    for item in index:
        if item is None:
            new_axes.append(position)
            position += 1
            continue
        extent = out.shape[axis]
        if isinstance(item, slice):
            out = _slice_axis(out, axis, item)
            axis += 1
            position += 1
        elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            i = int(item)
            if not -extent <= i < extent:
                raise TraceError(f"index {i} is out of bounds for axis {axis} with size {extent}")
            out = Tracer(out._t.index_axis(axis, i % extent))
        elif isinstance(item, (list, np.ndarray)):
            idx = np.asarray(item)
            if idx.dtype == np.bool_:
                raise TraceError("boolean-mask indexing has a data-dependent shape and cannot be traced (use np.where)")
            if idx.dtype.kind not in "iu":
                raise TraceError(f"arrays used as indices must be of integer type, got {idx.dtype}")
            if ((idx < -extent) | (idx >= extent)).any():
                raise TraceError(f"an index is out of bounds for axis {axis} with size {extent}")
            idx = np.where(idx < 0, idx + extent, idx)
            out = take_impl(out, idx, axis)
            axis += idx.ndim
            position += idx.ndim
        else:
            raise TraceError(f"only integers, slices, None, ... and integer arrays are valid indices (got {type(item).__name__})")
    if new_axes:
        shape = list(out.shape)
        for p in new_axes:
            shape.insert(p, 1)
        out = reshape_impl(out, shape)
    return out


def _slice_axis(x: Tracer, axis: int, item: slice) -> Tracer:
    """`x[..., item, ...]` along `axis`: a contiguous slice for step 1, else a gather of the
    constant indices the slice selects (`x[::-1]`, `x[1:7:3]`)."""
    extent = x.shape[axis]
    start, stop, step = item.indices(extent)
    if step == 1:
        stop = builtins.max(start, stop)
        if (start, stop) == (0, extent):
            return x
        return Tracer(x._t.slice_axis(axis, start, stop), weak=x._weak)
    positions = np.arange(start, stop, step, dtype=np.int32)
    if positions.size == 0:
        return Tracer(x._t.slice_axis(axis, 0, 0), weak=x._weak)
    return Tracer(x._t.take(lift(positions)._t, axis), weak=x._weak)


def take_impl(a, indices, axis=None, out=None, mode=None):
    if out is not None:
        raise out_error("numpy.take")
    a = lift(a)
    if axis is None:
        a = reshape_impl(a, (-1,))
        axis = 0
    axis = _norm_axis(axis, a.ndim)
    if isinstance(indices, Tracer):
        index = indices if indices.dtype == np.int32 else astype_impl(indices, np.int32)
    else:
        idx = np.asarray(indices)
        if idx.dtype.kind not in "iu":
            raise TraceError(f"numpy.take: indices must be integers, got {idx.dtype}")
        extent = a.shape[axis]
        if mode in (None, "raise") and ((idx < -extent) | (idx >= extent)).any():
            raise TraceError(f"numpy.take: an index is out of bounds for axis {axis} with size {extent}")
        idx = np.where(idx < 0, idx + extent, idx)
        index = lift(idx.astype(np.int32))
    return Tracer(a._t.take(index._t, axis))


# -- reductions -----------------------------------------------------------------------------------


def reduce_impl(op, a, axis=None, keepdims=False, dtype=None, out=None, **kwargs):
    if out is not None:
        raise out_error(f"numpy.{op}")
    extra = {k for k, v in kwargs.items() if v is not None and v is not np._NoValue}
    if extra:
        raise TraceError(f"numpy.{op}: the argument(s) {', '.join(sorted(extra))} are not supported")
    a = lift(a)
    if dtype is not None:
        a = astype_impl(a, dtype)
    elif op == "mean" and a.dtype.kind != "f":
        a = astype_impl(a, np.float64)
    elif op in ("sum", "prod") and a.dtype == np.bool_:
        a = astype_impl(a, np.int32)
    axes = _norm_axes(axis, a.ndim)
    if not axes:
        return a
    if a.dtype == np.bool_ and op in ("max", "min"):
        # rfx reduces numbers: a bool maximum is an int32 one, converted back.
        counted = Tracer(a._t.cast("int32"))
        return Tracer(Tracer(counted._t.reduce(op, axes, bool(keepdims)))._t.cast("bool"))
    return Tracer(a._t.reduce(op, axes, bool(keepdims)))


def any_all_impl(op, a, axis=None, out=None, keepdims=False, **kwargs):
    """`np.any` (a maximum of truth values) and `np.all` (a minimum)."""
    if out is not None:
        raise out_error(f"numpy.{op}")
    return reduce_impl("max" if op == "any" else "min", _truth(lift(a)), axis, keepdims, **kwargs)


def arg_impl(op, a, axis=None, out=None, keepdims=False):
    if out is not None:
        raise out_error(f"numpy.{op}")
    a = lift(a)
    if axis is None:
        flat = reshape_impl(a, (-1,))
        result = Tracer(getattr(flat._t, op)(0))
        return reshape_impl(result, (1,) * a.ndim) if keepdims else result
    axis = _norm_axis(axis, a.ndim)
    result = Tracer(getattr(a._t, op)(axis))
    return expand_dims_impl(result, axis) if keepdims else result


def cum_impl(op, a, axis=None, dtype=None, out=None):
    if out is not None:
        raise out_error(f"numpy.{op}")
    a = lift(a)
    if dtype is not None:
        a = astype_impl(a, dtype)
    elif a.dtype == np.bool_:
        a = astype_impl(a, np.int32)
    if axis is None:
        a = reshape_impl(a, (-1,))
        axis = 0
    return Tracer(getattr(a._t, op)(_norm_axis(axis, a.ndim)))


# -- other functions ------------------------------------------------------------------------------


def where_impl(condition, x=None, y=None):
    if x is None or y is None:
        raise TraceError("numpy.where with one argument (nonzero) has a data-dependent shape and cannot be traced")
    dtype = result_dtype(x, y)
    cond = _truth(condition)
    return Tracer(cond._t.select(lift(x, dtype)._t, lift(y, dtype)._t))


def clip_impl(a, a_min=np._NoValue, a_max=np._NoValue, out=None, min=np._NoValue, max=np._NoValue, **kwargs):
    if out is not None:
        raise out_error("numpy.clip")
    lo = min if a_min is np._NoValue else a_min
    hi = max if a_max is np._NoValue else a_max
    lo = None if lo is np._NoValue else lo
    hi = None if hi is np._NoValue else hi
    operands = [o for o in (a, lo, hi) if o is not None]
    dtype = result_dtype(*operands)
    x = lift(a, dtype)
    if lo is not None and hi is not None:
        return Tracer(x._t.clip(lift(lo, dtype)._t, lift(hi, dtype)._t), weak=x._weak)
    if lo is not None:
        return binary("maximum", x, lift(lo, dtype))
    if hi is not None:
        return binary("minimum", x, lift(hi, dtype))
    raise TraceError("numpy.clip: one of max or min must be given")


def matmul_impl(a, b):
    dtype = result_dtype(a, b)
    ta, tb = lift(a, dtype), lift(b, dtype)
    if ta.ndim == 0 or tb.ndim == 0:
        raise TraceError("matmul: input operand does not have enough dimensions")
    return Tracer(ta._t.matmul(tb._t))


def dot_impl(a, b, out=None):
    if out is not None:
        raise out_error("numpy.dot")
    dtype = result_dtype(a, b)
    ta, tb = lift(a, dtype), lift(b, dtype)
    if ta.ndim == 0 or tb.ndim == 0:
        return binary("multiply", ta, tb)
    return Tracer(ta._t.dot(tb._t))


def cross_impl(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    dtype = result_dtype(a, b)
    ta, tb = lift(a, dtype), lift(b, dtype)
    if axis is None and (axisa, axisb, axisc) != (-1, -1, -1):
        raise TraceError("numpy.cross: axisa/axisb/axisc are not supported (use axis)")
    axis = -1 if axis is None else axis
    if ta.shape != tb.shape:
        shape = np.broadcast_shapes(ta.shape, tb.shape)
        ta, tb = broadcast_to_impl(ta, shape), broadcast_to_impl(tb, shape)
    return Tracer(ta._t.cross(tb._t, _norm_axis(axis, ta.ndim)))


def norm_impl(x, ord=None, axis=None, keepdims=False):
    if ord not in (None, 2, "fro") or (ord == 2 and (axis is None or isinstance(axis, (tuple, list)))):
        raise TraceError(f"numpy.linalg.norm: ord={ord!r} is not supported (the Euclidean/Frobenius norm only)")
    x = lift(x)
    if x.dtype.kind != "f":
        x = astype_impl(x, np.float64)
    axes = _norm_axes(axis, x.ndim)
    result = Tracer(x._t.norm(axes))
    if keepdims:
        shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
        result = reshape_impl(result, shape)
    return result


def _float_matrix(a):
    a = lift(a)
    return a if a.dtype.kind == "f" else astype_impl(a, np.float64)


def inv_impl(a):
    return Tracer(_float_matrix(a)._t.inv())


def det_impl(a):
    return Tracer(_float_matrix(a)._t.det())


def solve_impl(a, b):
    dtype = result_dtype(a, b)
    if dtype.kind != "f":
        dtype = np.dtype(np.float64)
    return Tracer(lift(a, dtype)._t.solve(lift(b, dtype)._t))


def full_like_impl(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kwargs):
    a = lift(a)
    target = rfx_dtype(dtype) if dtype is not None else a.dtype
    shape = a.shape if shape is None else tuple(np.atleast_1d(shape))
    return broadcast_to_impl(lift(np.asarray(fill_value).astype(target)), shape)


def round_impl(a, decimals=0, out=None):
    if decimals != 0 or out is not None:
        raise TraceError("numpy.round: only decimals=0 and no out= are supported")
    a = lift(a)
    if a.dtype.kind != "f":
        return a
    return Tracer(a._t.unary("rint"))


def _reduction(op):
    def handler(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        return reduce_impl(op, a, axis, keepdims, dtype, out, **kwargs)

    return handler


def _extremum(op):
    def handler(a, axis=None, out=None, keepdims=False, **kwargs):
        return reduce_impl(op, a, axis, keepdims, None, out, **kwargs)

    return handler


FUNCTIONS = {
    np.sum: _reduction("sum"),
    np.mean: _reduction("mean"),
    np.prod: _reduction("prod"),
    np.max: _extremum("max"),
    np.min: _extremum("min"),
    np.amax: _extremum("max"),
    np.amin: _extremum("min"),
    np.any: lambda a, axis=None, out=None, keepdims=False, **kw: any_all_impl("any", a, axis, out, keepdims, **kw),
    np.all: lambda a, axis=None, out=None, keepdims=False, **kw: any_all_impl("all", a, axis, out, keepdims, **kw),
    np.argmax: lambda a, axis=None, out=None, keepdims=False: arg_impl("argmax", a, axis, out, keepdims),
    np.argmin: lambda a, axis=None, out=None, keepdims=False: arg_impl("argmin", a, axis, out, keepdims),
    np.cumsum: lambda a, axis=None, dtype=None, out=None: cum_impl("cumsum", a, axis, dtype, out),
    np.cumprod: lambda a, axis=None, dtype=None, out=None: cum_impl("cumprod", a, axis, dtype, out),
    np.where: where_impl,
    np.clip: clip_impl,
    np.dot: dot_impl,
    np.cross: cross_impl,
    np.linalg.norm: norm_impl,
    np.linalg.inv: inv_impl,
    np.linalg.det: det_impl,
    np.linalg.solve: solve_impl,
    np.reshape: lambda a, shape=None, order="C", **kw: reshape_impl(a, shape if shape is not None else kw.get("newshape"), order),
    np.transpose: lambda a, axes=None: transpose_impl(a, axes),
    np.broadcast_to: lambda array, shape, subok=False: broadcast_to_impl(array, shape),
    np.concatenate: concatenate_impl,
    np.stack: stack_impl,
    np.take: take_impl,
    np.squeeze: lambda a, axis=None: squeeze_impl(a, axis),
    np.expand_dims: expand_dims_impl,
    np.ravel: lambda a, order="C": reshape_impl(a, (-1,), order),
    np.round: round_impl,
    np.around: round_impl,
    np.full_like: full_like_impl,
    np.zeros_like: lambda a, dtype=None, order="K", subok=True, shape=None, **kw: full_like_impl(a, 0, dtype, shape=shape),
    np.ones_like: lambda a, dtype=None, order="K", subok=True, shape=None, **kw: full_like_impl(a, 1, dtype, shape=shape),
    np.shape: lambda a: lift(a).shape,
    np.ndim: lambda a: lift(a).ndim,
    np.size: lambda a, axis=None: lift(a).size if axis is None else lift(a).shape[axis],
    np.result_type: lambda *arrays_and_dtypes: result_dtype(*arrays_and_dtypes),
}
