"""Pytrees as JAX has them: nested tuples, lists, dicts and namedtuples whose leaves are
arrays; `None` is an empty subtree (no leaf). Dict keys are visited in sorted order, so
`{"b": .., "a": ..}` and `{"a": .., "b": ..}` have one structure.

A structure (`treedef`) is a hashable nested tuple, so it can be part of a cache key and be
pickled: `LEAF`, `NONE`, `("tuple", children)`, `("list", children)`,
`("dict", keys, children)` or `("namedtuple", type, children)`.
"""

from __future__ import annotations

LEAF = ("leaf",)
NONE = ("none",)


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _sorted_keys(d: dict) -> list:
    try:
        return sorted(d)
    except TypeError:  # keys of mixed types: their insertion order
        return list(d)


def is_container(value) -> bool:
    """Whether `value` is a node of a tree (not a leaf)."""
    return value is None or isinstance(value, (tuple, list, dict))


def flatten(tree) -> tuple[list, tuple]:
    """The leaves of `tree` in order, and its structure."""
    leaves: list = []
    return leaves, _flatten_into(tree, leaves)


def _flatten_into(tree, leaves: list) -> tuple:
    if tree is None:
        return NONE
    if _is_namedtuple(tree):
        return ("namedtuple", type(tree), tuple(_flatten_into(c, leaves) for c in tree))
    if isinstance(tree, tuple):
        return ("tuple", tuple(_flatten_into(c, leaves) for c in tree))
    if isinstance(tree, list):
        return ("list", tuple(_flatten_into(c, leaves) for c in tree))
    if isinstance(tree, dict):
        keys = _sorted_keys(tree)
        return ("dict", tuple(keys), tuple(_flatten_into(tree[k], leaves) for k in keys))
    leaves.append(tree)
    return LEAF


def unflatten(treedef: tuple, leaves) -> object:
    """The tree of structure `treedef` holding `leaves` (an iterable, consumed in order)."""
    iterator = iter(leaves)
    tree = _build(treedef, iterator)
    if next(iterator, _END) is not _END:
        raise ValueError("more leaves than the structure holds")
    return tree


_END = object()


def _build(treedef: tuple, leaves):
    kind = treedef[0]
    if kind == "leaf":
        value = next(leaves, _END)
        if value is _END:
            raise ValueError("fewer leaves than the structure holds")
        return value
    if kind == "none":
        return None
    if kind == "tuple":
        return tuple(_build(c, leaves) for c in treedef[1])
    if kind == "list":
        return [_build(c, leaves) for c in treedef[1]]
    if kind == "dict":
        return {k: _build(c, leaves) for k, c in zip(treedef[1], treedef[2])}
    if kind == "namedtuple":
        return treedef[1](*[_build(c, leaves) for c in treedef[2]])
    raise ValueError(f"not a tree structure: {treedef!r}")


def tree_map(fn, tree):
    """`tree` with `fn` applied to each leaf."""
    leaves, treedef = flatten(tree)
    return unflatten(treedef, [fn(leaf) for leaf in leaves])


def num_leaves(treedef: tuple) -> int:
    kind = treedef[0]
    if kind == "leaf":
        return 1
    if kind == "none":
        return 0
    return sum(num_leaves(c) for c in children(treedef))


def children(treedef: tuple) -> tuple:
    """The structures of the children of a node (empty for a leaf or None)."""
    kind = treedef[0]
    if kind in ("tuple", "list"):
        return treedef[1]
    if kind in ("dict", "namedtuple"):
        return treedef[2]
    return ()


def leaf_paths(treedef: tuple) -> list[tuple]:
    """Per leaf, the keys (tuple/list positions, dict keys, namedtuple fields) leading to it."""
    paths: list[tuple] = []
    _paths_into(treedef, (), paths)
    return paths


def _paths_into(treedef, prefix, paths):
    kind = treedef[0]
    if kind == "leaf":
        paths.append(prefix)
    elif kind in ("tuple", "list"):
        for i, c in enumerate(treedef[1]):
            _paths_into(c, prefix + (i,), paths)
    elif kind == "dict":
        for k, c in zip(treedef[1], treedef[2]):
            _paths_into(c, prefix + (k,), paths)
    elif kind == "namedtuple":
        for field, c in zip(treedef[1]._fields, treedef[2]):
            _paths_into(c, prefix + (field,), paths)


def describe(treedef: tuple) -> str:
    """A short text of a structure, for error messages (`(*, {'a': *, 'b': *})`)."""
    kind = treedef[0]
    if kind == "leaf":
        return "*"
    if kind == "none":
        return "None"
    if kind == "tuple":
        inner = ", ".join(describe(c) for c in treedef[1])
        return f"({inner},)" if len(treedef[1]) == 1 else f"({inner})"
    if kind == "list":
        return "[" + ", ".join(describe(c) for c in treedef[1]) + "]"
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {describe(c)}" for k, c in zip(treedef[1], treedef[2])) + "}"
    return treedef[1].__name__ + "(" + ", ".join(describe(c) for c in treedef[2]) + ")"


def broadcast_prefix(prefix, tree, what: str) -> list:
    """One value of `prefix` per leaf of `tree`: `prefix` is a tree whose structure is a
    prefix of `tree`'s, each of its leaves (an int or None, as `vmap`'s axes) standing for the
    whole subtree at that place."""
    out: list = []
    _broadcast(prefix, tree, what, out)
    return out


def _broadcast(prefix, tree, what, out):
    if prefix is None or not isinstance(prefix, (tuple, list, dict)):
        out.extend([prefix] * len(flatten(tree)[0]))
        return
    if isinstance(prefix, dict):
        if not isinstance(tree, dict) or set(prefix) != set(tree):
            raise ValueError(f"{what}: the dict {sorted(map(str, prefix))} does not match the argument's structure")
        for k in _sorted_keys(tree):
            _broadcast(prefix[k], tree[k], what, out)
        return
    if not isinstance(tree, (tuple, list)) or len(prefix) != len(tree):
        raise ValueError(
            f"{what}: {type(prefix).__name__} of {len(prefix)} entries does not match the argument's structure "
            f"({describe(flatten(tree)[1])})"
        )
    for p, t in zip(prefix, tree):
        _broadcast(p, t, what, out)
