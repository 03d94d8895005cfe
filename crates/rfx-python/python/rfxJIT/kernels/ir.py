"""The kernel IR: explicit, immutable, typed elementwise nodes.

A node is a frozen dataclass compared by structure, so the same expression written twice is the
same node (`Mul(Input("x"), Const(2.0))` in `ops` and inside `Sin(...)` name one value). A
`Kernel` holds its declared inputs, its ops (the named computations, in order) and its output.

The IR only describes a computation: `rfxJIT.kernels.lowering` turns it into a slot program and
`rfxJIT.runtime.executor` traces that program into an rfx kernel and compiles it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

DTYPES = ("float32", "float64", "int32", "bool")


def _check_dtype(dtype):
    if dtype is None:
        return None
    name = np.dtype(dtype).name
    if name not in DTYPES:
        raise TypeError(f"dtype {name} is not one of rfx's ({', '.join(DTYPES)})")
    return name


class Node:
    """An IR node. `children()` are its operands."""

    def children(self) -> tuple[Node, ...]:
        return ()


@dataclass(frozen=True)
class Input(Node):
    """A kernel input, by name. Its dtype is declared once, in `Kernel.inputs`; a reference in an
    op (`Input("x")`) is the same node whatever dtype it spells."""

    name: str
    dtype: str | None = field(default=None, compare=False)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"an input name must be an identifier, got {self.name!r}")
        object.__setattr__(self, "dtype", _check_dtype(self.dtype))


@dataclass(frozen=True)
class Const(Node):
    """A constant of one dtype (float32 unless told)."""

    value: float
    dtype: str = "float32"

    def __post_init__(self):
        dtype = _check_dtype(self.dtype)
        object.__setattr__(self, "dtype", dtype)
        # Stored as the dtype holds it, so Const(0.1) is float32's 0.1 and compares by it.
        object.__setattr__(self, "value", np.asarray(self.value, dtype=dtype).item())


def _operand(value) -> Node:
    if isinstance(value, Node):
        return value
    raise TypeError(f"an operand must be an IR node (Input, Const or an op), got {type(value).__name__}")


@dataclass(frozen=True)
class Unary(Node):
    """An elementwise op of one operand; `ufunc` is the NumPy function it computes."""

    x: Node
    ufunc: ClassVar[str] = ""

    def __post_init__(self):
        _operand(self.x)

    def children(self):
        return (self.x,)


@dataclass(frozen=True)
class Binary(Node):
    """An elementwise op of two operands (shapes broadcast, dtypes promoted as NumPy)."""

    a: Node
    b: Node
    ufunc: ClassVar[str] = ""

    def __post_init__(self):
        _operand(self.a)
        _operand(self.b)

    def children(self):
        return (self.a, self.b)


def _unary(name, ufunc, doc):
    return dataclass(frozen=True)(type(name, (Unary,), {"ufunc": ufunc, "__doc__": doc, "__annotations__": {}}))


def _binary(name, ufunc, doc):
    return dataclass(frozen=True)(type(name, (Binary,), {"ufunc": ufunc, "__doc__": doc, "__annotations__": {}}))


Neg = _unary("Neg", "negative", "-x")
Abs = _unary("Abs", "absolute", "|x|")
Sin = _unary("Sin", "sin", "sin(x)")
Cos = _unary("Cos", "cos", "cos(x)")
Tan = _unary("Tan", "tan", "tan(x)")
Exp = _unary("Exp", "exp", "e**x")
Log = _unary("Log", "log", "the natural logarithm of x")
Sqrt = _unary("Sqrt", "sqrt", "the square root of x")
Tanh = _unary("Tanh", "tanh", "tanh(x)")
Add = _binary("Add", "add", "a + b")
Sub = _binary("Sub", "subtract", "a - b")
Mul = _binary("Mul", "multiply", "a * b")
Div = _binary("Div", "divide", "a / b")
Pow = _binary("Pow", "power", "a ** b")
Max = _binary("Max", "maximum", "the elementwise maximum of a and b")
Min = _binary("Min", "minimum", "the elementwise minimum of a and b")

for _cls in (Neg, Abs, Sin, Cos, Tan, Exp, Log, Sqrt, Tanh, Add, Sub, Mul, Div, Pow, Max, Min):
    _cls.__module__ = __name__

#: The op classes by the NumPy ufunc they compute.
BY_UFUNC = {cls.ufunc: cls for cls in (Neg, Abs, Sin, Cos, Tan, Exp, Log, Sqrt, Tanh, Add, Sub, Mul, Div, Pow, Max, Min)}


@dataclass(frozen=True)
class Fused(Node):
    """A chain of elementwise ops fused into one op (made by `fuse_chains`): `body` is the
    chain's expression, `size` how many ops it replaced, `leaves` the values it reads (inputs,
    constants, other ops' results) that the chain does not compute."""

    body: Node
    size: int
    leaves: tuple = ()

    def children(self):
        return (self.body,)


def subnodes(node: Node):
    """Every node of `node`'s expression (itself included), each distinct node once."""
    seen = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        yield n
        stack.extend(n.children())


@dataclass(frozen=True)
class Kernel:
    """A kernel: declared inputs (`Input(name, dtype=...)`), ops and the output node (the last
    op when not given)."""

    inputs: tuple
    ops: tuple
    output: Node | None = None
    name: str = "kernel"

    def __post_init__(self):
        inputs = tuple(self.inputs)
        ops = tuple(_operand(op) for op in self.ops)
        for i in inputs:
            if not isinstance(i, Input):
                raise TypeError(f"Kernel inputs must be Input nodes, got {type(i).__name__}")
        names = [i.name for i in inputs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate input names in {names}")
        output = self.output
        if output is None:
            if not ops:
                raise ValueError("a kernel needs an output (or at least one op)")
            output = ops[-1]
        _operand(output)
        declared = set(names)
        for root in (*ops, output):
            for n in subnodes(root):
                if isinstance(n, Input) and n.name not in declared:
                    raise ValueError(f"Input({n.name!r}) is used but not declared in the kernel's inputs {names}")
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "ops", ops)
        object.__setattr__(self, "output", output)

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    def replace(self, ops, output) -> Kernel:
        """The same kernel with new ops and output."""
        return Kernel(inputs=self.inputs, ops=ops, output=output, name=self.name)


def evaluate(node: Node, env: dict):
    """`node` computed with NumPy's functions from `env` (node -> value). Called with rfxjit
    tracers as values, this records the node into the rfx kernel being traced."""
    memo = dict(env)

    def go(n):
        if n in memo:
            return memo[n]
        if isinstance(n, Const):
            value = np.asarray(n.value, dtype=n.dtype)
        elif isinstance(n, Input):
            raise KeyError(f"no value for Input({n.name!r})")
        elif isinstance(n, Fused):
            value = go(n.body)
        else:
            value = getattr(np, n.ufunc)(*(go(c) for c in n.children()))
        memo[n] = value
        return value

    return go(node)


__all__ = [
    "Abs", "Add", "Binary", "Const", "Cos", "Div", "Exp", "Fused", "Input", "Kernel", "Log", "Max",
    "Min", "Mul", "Neg", "Node", "Pow", "Sin", "Sqrt", "Sub", "Tan", "Tanh", "Unary", "evaluate",
    "subnodes",
]
