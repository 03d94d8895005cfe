"""`execute_lowered`: a lowered kernel run on NumPy arrays by rfx.

The slot program is traced into an rfx kernel (each instruction one NumPy call on rfxjit's
tracers), which rfx optimises and compiles for the backend; that compiled function is kept on the
lowered kernel and cached by the inputs' shapes and dtypes, so later calls only check and run.
"""

from __future__ import annotations

import inspect
import threading

import numpy as np

import rfxjit

from ..kernels.ir import evaluate
from ..kernels.lowering import LoweredKernel

BACKENDS = ("cpu", "cuda", "metal", "interp", "c")

_lock = threading.Lock()


def _run_program(lowered: LoweredKernel, args):
    slots = [None] * lowered.n_slots
    for (name, slot), value in zip(lowered.input_slots.items(), args):
        slots[slot] = value
    for slot, value, dtype in lowered.consts:
        slots[slot] = np.asarray(value, dtype=dtype)
    for ins in lowered.instrs:
        if ins.op == "fused":
            env = {leaf: slots[s] for leaf, s in zip(ins.leaves, ins.srcs)}
            slots[ins.dst] = evaluate(ins.node.body, env)
        else:
            slots[ins.dst] = getattr(np, ins.node.ufunc)(*(slots[s] for s in ins.srcs))
    return slots[lowered.output_slot]


def _function(lowered: LoweredKernel, backend: str):
    with _lock:
        fun = lowered._compiled.get(backend)
        if fun is None:

            def program(*args):
                return _run_program(lowered, args)

            # The kernel's inputs keep their names in rfx's IR.
            program.__signature__ = inspect.Signature(
                [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in lowered.input_names]
            )
            program.__name__ = lowered.name if lowered.name.isidentifier() else "kernel"
            fun = rfxjit.jit(program, backend=backend)
            lowered._compiled[backend] = fun
        return fun


def execute_lowered(lowered: LoweredKernel, inputs: dict, backend: str = "cpu"):
    """Runs `lowered` on `inputs` (input name -> array or scalar) on `backend` (`cpu`, `cuda`,
    `metal`, `c`, the exported C compiled by the system C compiler, or `interp`, rfx's reference
    interpreter) and returns the output array. Inputs are
    converted to their declared dtypes. A backend without a device raises
    `rfxjit.BackendUnavailable`."""
    if not isinstance(lowered, LoweredKernel):
        raise TypeError(f"execute_lowered takes a lowered kernel (from lower_kernel), got {type(lowered).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    names = lowered.input_names
    missing = [n for n in names if n not in inputs]
    extra = [n for n in inputs if n not in lowered.input_slots]
    if missing or extra:
        raise KeyError(f"kernel `{lowered.name}` takes inputs {names}; missing {missing}, unexpected {extra}")
    args = []
    for n in names:
        value = inputs[n]
        dtype = lowered.input_dtypes[n]
        args.append(np.asarray(value, dtype=dtype) if dtype is not None else value)
    return _function(lowered, backend)(*args)


__all__ = ["BACKENDS", "execute_lowered"]
