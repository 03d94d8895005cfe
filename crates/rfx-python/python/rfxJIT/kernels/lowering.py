"""Lowering: a `Kernel` as a slot program, the executable form `execute_lowered` runs.

Every distinct value gets a slot: the inputs first, then the constants, then one instruction per
op (in the kernel's op order, then what the output still needs), each reading earlier slots. A
`Fused` op is one instruction that computes its whole chain. Dead ops are lowered too (they are
in `ops`): `eliminate_dead_ops` is what removes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Const, Fused, Input, Kernel, Node


@dataclass(frozen=True)
class Instr:
    """`slots[dst] = op(slots[srcs...])`; for `fused`, `node` is the chain and `leaves` the
    nodes its `srcs` hold."""

    op: str
    dst: int
    srcs: tuple
    node: Node
    leaves: tuple = ()


@dataclass(frozen=True)
class LoweredKernel:
    """A slot program: `input_slots` (name -> slot), `consts` ((slot, value, dtype) each),
    `instrs` and the `output_slot`."""

    name: str
    input_slots: dict
    input_dtypes: dict
    consts: tuple
    instrs: tuple
    output_slot: int
    n_slots: int

    def __post_init__(self):
        # Compiled rfx functions, one per backend, made by the executor on first use.
        object.__setattr__(self, "_compiled", {})

    def __getstate__(self):
        # Compiled code belongs to the process that made it; an unpickled kernel compiles again.
        return {k: v for k, v in self.__dict__.items() if k != "_compiled"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        object.__setattr__(self, "_compiled", {})

    @property
    def input_names(self) -> list[str]:
        return list(self.input_slots)

    def __str__(self) -> str:
        lines = [f"lowered {self.name}: {self.n_slots} slots"]
        for name, slot in self.input_slots.items():
            lines.append(f"  s{slot} = input {name}: {self.input_dtypes[name] or 'any'}")
        for slot, value, dtype in self.consts:
            lines.append(f"  s{slot} = const {value!r}: {dtype}")
        for ins in self.instrs:
            args = ", ".join(f"s{s}" for s in ins.srcs)
            lines.append(f"  s{ins.dst} = {ins.op}({args})")
        lines.append(f"  return s{self.output_slot}")
        return "\n".join(lines)


def lower_kernel(kernel: Kernel) -> LoweredKernel:
    """`kernel` as a slot program."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"lower_kernel takes a Kernel, got {type(kernel).__name__}")
    slots: dict = {}
    input_slots = {}
    input_dtypes = {}
    for i in kernel.inputs:
        slots[Input(i.name)] = len(slots)
        input_slots[i.name] = slots[Input(i.name)]
        input_dtypes[i.name] = i.dtype
    consts = []
    instrs = []

    def slot_of(n: Node) -> int:
        if n in slots:
            return slots[n]
        if isinstance(n, Const):
            slots[n] = len(slots)
            consts.append((slots[n], n.value, n.dtype))
            return slots[n]
        if isinstance(n, Fused):
            leaves = tuple(n.leaves)
            srcs = tuple(slot_of(leaf) for leaf in leaves)
            slots[n] = len(slots)
            instrs.append(Instr("fused", slots[n], srcs, n, leaves))
            return slots[n]
        srcs = tuple(slot_of(c) for c in n.children())
        slots[n] = len(slots)
        instrs.append(Instr(type(n).__name__.lower(), slots[n], srcs, n))
        return slots[n]

    for op in kernel.ops:
        slot_of(op)
    output_slot = slot_of(kernel.output)
    return LoweredKernel(
        name=kernel.name,
        input_slots=input_slots,
        input_dtypes=input_dtypes,
        consts=tuple(consts),
        instrs=tuple(instrs),
        output_slot=output_slot,
        n_slots=len(slots),
    )


__all__ = ["Instr", "LoweredKernel", "lower_kernel"]
