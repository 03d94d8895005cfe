"""Optimisation passes over the kernel IR. Each returns a new `Kernel` computing the same
output:

- `constant_fold`: every op whose operands are all constants becomes the `Const` of its value
  (computed by rfx, in the op's dtype), so `Add(Const(1.0), Const(2.0))` becomes `Const(3.0)`.
- `eliminate_dead_ops`: the ops the output does not read are dropped.
- `fuse_chains`: each chain of elementwise ops whose intermediate values have one use becomes
  one `Fused` op (the constants only the chain reads go into it).
- `optimize`: the three in that order.
"""

from __future__ import annotations

import functools

import numpy as np

import rfxjit

from .ir import Const, Fused, Input, Kernel, Node, evaluate, subnodes


def _rebuild(node: Node, children) -> Node:
    if isinstance(node, Fused):
        return Fused(children[0], node.size, node.leaves)
    return type(node)(*children)


@functools.lru_cache(maxsize=1024)
def _fold_value(node: Node) -> Const:
    """The value of `node` (all its operands constants), computed by rfx."""
    fun = rfxjit.jit(lambda: evaluate(node, {}))
    value = np.asarray(fun())
    return Const(value.item(), dtype=value.dtype.name)


def constant_fold(kernel: Kernel) -> Kernel:
    """`kernel` with every all-constant op replaced by its value."""
    memo: dict = {}

    def fold(n: Node) -> Node:
        if n in memo:
            return memo[n]
        if isinstance(n, (Input, Const)):
            out = n
        elif isinstance(n, Fused):
            body = fold(n.body)
            leaves = tuple(fold(leaf) for leaf in n.leaves)
            out = body if isinstance(body, Const) else Fused(body, n.size, leaves)
        else:
            children = tuple(fold(c) for c in n.children())
            out = _rebuild(n, children)
            if all(isinstance(c, Const) for c in children):
                out = _fold_value(out)
        memo[n] = out
        return out

    return kernel.replace(ops=[fold(op) for op in kernel.ops], output=fold(kernel.output))


def eliminate_dead_ops(kernel: Kernel) -> Kernel:
    """`kernel` without the ops its output does not read (the output itself stays)."""
    live = set(subnodes(kernel.output))
    return kernel.replace(ops=[op for op in kernel.ops if op in live], output=kernel.output)


def _fusable(n: Node) -> bool:
    return not isinstance(n, (Input, Const, Fused))


def fuse_chains(kernel: Kernel) -> Kernel:
    """`kernel` with each chain of single-use elementwise ops fused into one `Fused` op."""
    # The kernel as a graph of distinct nodes: who reads each node.
    roots = [*kernel.ops, kernel.output]
    nodes = {n: None for root in roots for n in subnodes(root)}
    readers: dict = {}
    for n in nodes:
        for c in n.children():
            readers.setdefault(c, []).append(n)
    uses = {n: len(r) for n, r in readers.items()}
    uses[kernel.output] = uses.get(kernel.output, 0) + 1

    def member(n: Node) -> bool:
        """`n` is computed inside its one reader's chain (not a chain's end)."""
        return _fusable(n) and uses.get(n, 0) == 1 and _fusable(readers[n][0])

    def chain(end: Node) -> tuple[list, list]:
        """The ops of the chain ending at `end` and the values it reads."""
        ops, leaves = [end], []

        def go(n):
            for c in n.children():
                if member(c):
                    ops.append(c)
                    go(c)
                elif isinstance(c, Const) and uses.get(c, 0) == 1:
                    ops.append(c)
                elif c not in leaves:
                    leaves.append(c)

        go(end)
        return ops, leaves

    memo: dict = {}
    absorbed: set = set()

    def rewrite(n: Node) -> Node:
        """`n` with every chain below it (and ending at it) fused."""
        if n in memo:
            return memo[n]
        if not _fusable(n):
            out = n
        else:
            ops, leaves = chain(n)
            new_leaves = {leaf: rewrite(leaf) for leaf in leaves}
            body = _substitute(n, new_leaves, set(ops))
            computed = [o for o in ops if not isinstance(o, Const)]
            if len(computed) >= 2:
                absorbed.update(o for o in ops if o != n)
                out = Fused(body, len(computed), tuple(new_leaves.values()))
            else:
                out = body
        memo[n] = out
        return out

    output = rewrite(kernel.output)
    # Every op first (a chain may end at a dead op listed after its members), then the ops
    # that are not inside another op's chain.
    rewritten = [rewrite(op) for op in kernel.ops]
    new_ops = []
    for op, new in zip(kernel.ops, rewritten):
        if op not in absorbed and new not in new_ops:
            new_ops.append(new)
    return kernel.replace(ops=new_ops, output=output)


def _substitute(n: Node, leaves: dict, inside: set) -> Node:
    """`n`'s expression with its leaves replaced by their rewritten nodes."""
    if n in leaves:
        return leaves[n]
    if n not in inside or not n.children():
        return n
    return _rebuild(n, tuple(_substitute(c, leaves, inside) for c in n.children()))


def optimize(kernel: Kernel) -> Kernel:
    """`constant_fold`, then `eliminate_dead_ops`, then `fuse_chains`."""
    return fuse_chains(eliminate_dead_ops(constant_fold(kernel)))


__all__ = ["constant_fold", "eliminate_dead_ops", "fuse_chains", "optimize"]
