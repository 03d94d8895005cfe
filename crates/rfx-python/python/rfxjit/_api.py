"""`jit`, the transforms and `eval`: Python functions traced into rfx kernels, compiled once
per signature (argument shapes and dtypes, static arguments, backend) and cached."""

from __future__ import annotations

import functools
import inspect
import numbers
import sys
import threading
from collections import namedtuple

import numpy as np

from . import _rfx
from . import _tree
from ._errors import AutodiffError, CallError, TraceError, at_user_line
from ._tracer import Tracer, as_rfx_array
from ._tree import LEAF, children, describe, flatten, is_container, num_leaves, unflatten

BACKENDS = ("cpu", "interp", "cuda", "metal", "c")


#: How many signatures a jitted function keeps compiled by default (least recently used out).
DEFAULT_CACHE_SIZE = 256

CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "currsize"])


class _Config:
    """Process-wide settings: `explain_cache_misses` prints why each compile happened."""

    explain_cache_misses = False


config = _Config()


# -- argument signatures --------------------------------------------------------------------------

# One entry per traced argument: (dtype name, shape, weak). `weak` marks a Python scalar, which
# takes the dtype of the arrays it meets (NEP 50), as in JAX.


def _scalar_dtype(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, numbers.Integral):
        return "int32"
    return "float64"


def _prepare(value, position: int):
    """The array passed to the kernel for argument `value`, and its signature entry."""
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**31) <= value < 2**31:
            raise CallError(f"argument {position}: the integer {value} does not fit int32, the integer dtype of rfx")
        dtype = _scalar_dtype(value)
        return np.asarray(value, dtype=dtype), (dtype, (), True)
    if isinstance(value, Tracer):
        raise TraceError("internal: a traced value reached the call path")
    try:
        array = as_rfx_array(value, f"argument {position}")
    except TraceError as error:  # an argument rfx cannot take: the caller's arguments are wrong
        raise CallError(str(error)) from None
    except Exception as error:  # noqa: BLE001 - any failure to make an array is the caller's
        raise TypeError(f"argument {position}: expected an array or a scalar, got {type(value).__name__} ({error})") from None
    return array, (array.dtype.name, array.shape, False)


def _input_names(fun, count: int) -> list[str]:
    try:
        params = [
            p.name
            for p in inspect.signature(fun).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(count):
        name = params[i] if i < len(params) else f"arg{i}"
        if not name.isidentifier() or name in names or name.startswith(("grad_", "tangent_")):
            name = f"arg{i}"
        names.append(name)
    return names


def _leaf_names(arg_names: list[str], in_tree) -> list[str]:
    """Input names for the leaves of tree arguments: the parameter's name and the path
    (`params_w`, `state_0`), or `argN` where that is not an identifier or not unique."""
    names: list[str] = []
    taken = set(arg_names)
    for base, tree in zip(arg_names, children(in_tree)):
        for path in _tree.leaf_paths(tree):
            name = "_".join([base, *map(str, path)])
            if not name.isidentifier() or name in names or (path and name in taken):
                name = f"arg{len(names)}"
                while name in names or name in taken:
                    name += "_"
            names.append(name)
    return names


def _split_trees(arg_trees: list, spec) -> list[range]:
    """The range of leaves (indices into `spec`) of each argument."""
    ranges, start = [], 0
    for tree in arg_trees:
        count = num_leaves(tree)
        ranges.append(range(start, start + count))
        start += count
    if start != len(spec):
        raise TraceError(f"internal: {len(spec)} leaves for argument structures holding {start}")
    return ranges


def _arg_trees(in_tree, spec) -> list:
    """The structure of each traced argument (all leaves without a tree)."""
    return [LEAF] * len(spec) if in_tree is None else list(children(in_tree))


def _index_structure(rebuild, n_out: int):
    """The output structure of a kernel with each leaf replaced by its output index."""
    return rebuild(list(range(n_out)))


def _has_tracer(args) -> bool:
    if any(isinstance(a, Tracer) for a in args):
        return True
    return any(is_container(a) and any(isinstance(leaf, Tracer) for leaf in flatten(a)[0]) for a in args)


# -- kernel sources: what turns a signature into a HIR kernel ------------------------------------


def _flatten_outputs(result, what: str):
    """The output tracers of a traced function (the leaves of what it returned: an array, or
    nested tuples, lists, dicts of arrays) and how to rebuild its structure."""
    from ._tracer import lift

    items, out_tree = flatten(result)
    tracers = []
    for item in items:
        if isinstance(item, Tracer):
            tracers.append(item)
        elif isinstance(item, (np.ndarray, np.generic, numbers.Number)):
            tracers.append(lift(item))
        else:
            raise TraceError(
                f"{what} returned a {type(item).__name__}; return arrays, or tuples, lists and dicts of arrays"
            )
    if not tracers:
        raise TraceError(f"{what} returned no arrays")

    flat_tuple = out_tree[0] == "tuple" and all(c == LEAF for c in out_tree[1])
    # One array and a flat tuple, the common cases, are rebuilt without walking the structure
    # (this runs on every call through the cache).
    if out_tree == LEAF:

        def rebuild(outputs):
            return outputs[0]

    elif flat_tuple:

        def rebuild(outputs):
            return tuple(outputs)

    else:

        def rebuild(outputs):
            return unflatten(out_tree, outputs)

    # One array, or a flat tuple: what the native kernel returns by itself.
    rebuild.plain = out_tree == LEAF or flat_tuple
    return tracers, rebuild


class _PySource:
    """A Python function, traced with tracers for its non-static arguments."""

    def __init__(self, fun, static_argnums=()):
        self.fun = fun
        self.static_argnums = tuple(sorted(static_argnums))
        self.name = getattr(fun, "__name__", "fn")
        if not self.name.isidentifier():
            self.name = "fn"
        # Positional parameters, so that omitted ones with defaults are filled in.
        try:
            params = inspect.signature(fun).parameters.values()
            self.n_params = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        except (TypeError, ValueError):
            self.n_params = 0

    def kernel(self, spec, statics, in_tree=None):
        n_traced = len(spec) if in_tree is None else len(children(in_tree))
        n = n_traced + len(statics)
        names = _input_names(self.fun, n)
        static = dict(statics)
        traced_names = [names[i] for i in range(n) if i not in static]
        if in_tree is not None:
            traced_names = _leaf_names(traced_names, in_tree)
        inputs = [(name, dtype, list(shape)) for name, (dtype, shape, _) in zip(traced_names, spec)]
        rebuild = [None]

        def body(tensors):
            leaves = [Tracer(t, weak=weak) for t, (_, _, weak) in zip(tensors, spec)]
            tracers = iter(leaves if in_tree is None else unflatten(in_tree, leaves))
            args = [static[i] if i in static else next(tracers) for i in range(n)]
            try:
                result = self.fun(*args)
            except TraceError as error:
                raise at_user_line(error, sys.exc_info()[2]) from None
            outputs, rebuild[0] = _flatten_outputs(result, f"`{self.name}`")
            return [o._t for o in outputs]

        kernel = _rfx.trace(self.name, inputs, body)
        return kernel, rebuild[0]

    def inline(self, *args):
        return self.fun(*args)

    def positional(self, args, kwargs):
        """`args` and `kwargs` as positional arguments (defaults filled in)."""
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except (TypeError, ValueError) as error:
            raise TypeError(f"`{self.name}`: {error}") from None
        bound.apply_defaults()
        # Keyword-only parameters keep their defaults (the function applies them itself);
        # values passed for them cannot be traced.
        passed = [name for name in bound.kwargs if name in kwargs]
        if passed:
            raise TypeError(f"`{self.name}`: keyword-only arguments are not supported ({', '.join(passed)})")
        return bound.args


def _inline_source(source, args):
    """A transform or vmap called inside a traced function: its kernel, made for the traced
    arguments' types, is recorded into the running trace."""
    from ._tracer import lift

    leaves, in_tree = flatten(tuple(args))
    if not any(is_container(a) for a in args):
        in_tree = None
    tracers = [a if isinstance(a, Tracer) else lift(a) for a in leaves]
    spec = [(t.dtype.name, t.shape, t._weak) for t in tracers]
    kernel, rebuild = source.kernel(spec, (), in_tree)
    outputs = _rfx.inline(kernel, [t._t for t in tracers])
    return rebuild([Tracer(o) for o in outputs])


def _argnums_list(argnums, n: int) -> list[int]:
    items = [argnums] if isinstance(argnums, int) else list(argnums)
    out = []
    for a in items:
        if not -n <= a < n:
            raise AutodiffError(f"argnums {a} is out of range for a function of {n} argument(s)")
        out.append(a % n)
    return out


def _types(spec):
    return [(dtype, list(shape)) for dtype, shape, _ in spec]


def _float_outputs(kernel):
    return [name for name, dtype, _ in kernel.outputs() if dtype.startswith("float")]


class _TransformSource:
    """A derivative of another source, computed by rfx's autodiff on the kernel."""

    def __init__(self, inner, kind: str, argnums, has_aux: bool = False):
        self.inner = inner
        self.kind = kind
        self.argnums = argnums
        self.has_aux = has_aux
        self.name = f"{kind}_{inner.name}"
        self.static_argnums = ()

    def kernel(self, spec, statics, in_tree=None):
        arg_trees = _arg_trees(in_tree, spec)
        ranges = _split_trees(arg_trees, spec)
        n = len(arg_trees)
        if self.kind == "jvp":
            n = len(arg_trees) // 2
            if arg_trees[:n] != arg_trees[n:]:
                raise AutodiffError(
                    f"jvp: the tangents' structure {describe(('tuple', tuple(arg_trees[n:])))} is not the "
                    f"primals' {describe(('tuple', tuple(arg_trees[:n])))}"
                )
        primal_tree = None if in_tree is None else ("tuple", tuple(arg_trees[:n]))
        n_primal_leaves = sum(len(r) for r in ranges[:n])
        wrt = _argnums_list(self.argnums, n) if self.argnums is not None else list(range(n))
        wrt_leaves = [leaf for w in wrt for leaf in ranges[w]]
        if self.has_aux:
            return self._kernel_with_aux(spec, statics, primal_tree, wrt, wrt_leaves, arg_trees, ranges)
        inner_kernel, inner_rebuild = self.inner.kernel(spec[:n_primal_leaves], statics, primal_tree)
        kernel = inner_kernel.transform(self.kind, wrt_leaves, _types(spec))
        single = isinstance(self.argnums, int)
        in_names = [name for name, _, _ in inner_kernel.inputs()]
        out_names = [name for name, _, _ in inner_kernel.outputs()]
        names = [name for name, _, _ in kernel.outputs()]
        index = {name: i for i, name in enumerate(names)}
        n_inner_out = len(out_names)
        kind = self.kind

        def pick(outputs, name):
            return outputs[index[name]]

        def per_argument(outputs, pattern):
            """One tree per argument in `wrt`, of the outputs named `pattern` of each leaf."""
            trees = [unflatten(arg_trees[w], [pick(outputs, pattern.format(in_names[leaf])) for leaf in ranges[w]]) for w in wrt]
            return trees[0] if single else tuple(trees)

        if kind == "grad":

            def rebuild(outputs):
                return per_argument(outputs, "grad_{}")

        elif kind == "value_and_grad":

            def rebuild(outputs):
                value = inner_rebuild(list(outputs[:n_inner_out]))
                return value, per_argument(outputs, "grad_{}")

        elif kind == "jvp":
            float_outs = _float_outputs(inner_kernel)

            def rebuild(outputs):
                primal = inner_rebuild(list(outputs[:n_inner_out]))
                tangents = [
                    pick(outputs, f"tangent_{o}") if o in float_outs else np.zeros_like(outputs[i])
                    for i, o in enumerate(out_names)
                ]
                return primal, inner_rebuild(tangents)

        elif kind == "jacobian":

            def rebuild(outputs):
                return inner_rebuild([per_argument(outputs, f"jac_{o}_{{}}") for o in out_names])

        elif kind == "hessian":

            def block(outputs, o, x, y):
                """The second derivatives of output `o` by arguments `x` and `y`: a tree of
                `x`'s structure whose leaves are trees of `y`'s (JAX's nesting)."""
                return unflatten(
                    arg_trees[x],
                    [
                        unflatten(arg_trees[y], [pick(outputs, f"hess_{o}_{in_names[lx]}_{in_names[ly]}") for ly in ranges[y]])
                        for lx in ranges[x]
                    ],
                )

            def rebuild(outputs):
                per_output = []
                for o in out_names:
                    rows = []
                    for x in wrt:
                        row = [block(outputs, o, x, y) for y in wrt]
                        rows.append(row[0] if single else tuple(row))
                    per_output.append(rows[0] if single else tuple(rows))
                return inner_rebuild(per_output)

        else:  # pragma: no cover - every kind above
            raise AutodiffError(f"unknown transform {kind}")
        return kernel, rebuild

    def _kernel_with_aux(self, spec, statics, in_tree, wrt, wrt_leaves, arg_trees, ranges):
        """`grad`/`value_and_grad` of a function returning `(value, aux)` (aux any tree of
        arrays): the derivative of the value, and aux, from one kernel (the shared forward work
        merged by the optimiser)."""
        inner_kernel, inner_rebuild = self.inner.kernel(spec, statics, in_tree)
        n_inner = len(inner_kernel.outputs())
        structure = _index_structure(inner_rebuild, n_inner)
        if not (isinstance(structure, tuple) and len(structure) == 2 and structure[0] == 0):
            raise AutodiffError(
                f"{self.kind}(has_aux=True): the function must return (value, aux) with value one array"
            )
        inputs = [(name, dtype, list(shape)) for name, dtype, shape in inner_kernel.inputs()]
        value_kernel = _rfx.trace(f"{self.inner.name}_value", inputs, lambda ts: _rfx.inline(inner_kernel, ts)[:1])
        derivative = value_kernel.transform(self.kind, wrt_leaves, _types(spec))
        kernel = _rfx.trace(
            self.name,
            inputs,
            lambda ts: _rfx.inline(derivative, ts) + _rfx.inline(inner_kernel, ts)[1:],
        )
        names = [name for name, _, _ in derivative.outputs()]
        index = {name: i for i, name in enumerate(names)}
        in_names = [name for name, _, _ in inner_kernel.inputs()]
        n_derivative = len(names)
        single = isinstance(self.argnums, int)
        kind = self.kind

        def rebuild(outs):
            # Inner output i (i >= 1, the leaves of aux) follows the derivative's outputs.
            aux = _tree.tree_map(lambda i: outs[n_derivative + i - 1], structure[1])
            trees = [unflatten(arg_trees[w], [outs[index[f"grad_{in_names[leaf]}"]] for leaf in ranges[w]]) for w in wrt]
            grads = trees[0] if single else tuple(trees)
            if kind == "grad":
                return grads, aux
            return (outs[0], aux), grads

        return kernel, rebuild

    def positional(self, args, kwargs):
        return self.inner.positional(args, kwargs)

    @property
    def n_params(self):
        return 0 if self.kind == "jvp" else self.inner.n_params

    def inline(self, *args):
        return _inline_source(self, args)


class _VmapSource:
    """Another source mapped over a batch axis, as one kernel."""

    def __init__(self, inner, in_axes, out_axes):
        self.inner = inner
        self.in_axes = in_axes
        self.out_axes = out_axes
        self.name = f"vmap_{inner.name}"
        self.static_argnums = ()

    def kernel(self, spec, statics, in_tree=None):
        arg_trees = _arg_trees(in_tree, spec)
        n = len(arg_trees)
        prefix = tuple(self.in_axes) if isinstance(self.in_axes, list) else self.in_axes
        if isinstance(prefix, tuple) and len(prefix) != n:
            raise AutodiffError(f"vmap: in_axes has {len(prefix)} entries for {n} argument(s)")
        args = unflatten(("tuple", tuple(arg_trees)), range(len(spec)))
        try:
            in_axes = _tree.broadcast_prefix(prefix, args, "vmap in_axes")
        except ValueError as error:
            raise AutodiffError(str(error)) from None
        example = []
        axes = []
        for (dtype, shape, weak), axis in zip(spec, in_axes):
            if axis is None:
                example.append((dtype, shape, weak))
                axes.append(None)
                continue
            if not -len(shape) <= axis < len(shape):
                raise AutodiffError(f"vmap: in_axes {axis} is out of range for an argument of shape {shape}")
            axis %= len(shape)
            axes.append(axis)
            example.append((dtype, tuple(d for i, d in enumerate(shape) if i != axis), weak))
        inner_kernel, inner_rebuild = self.inner.kernel(example, statics, in_tree)
        n_out = len(inner_kernel.outputs())
        structure = _index_structure(inner_rebuild, n_out)
        prefix = tuple(self.out_axes) if isinstance(self.out_axes, list) else self.out_axes
        if isinstance(prefix, tuple) and len(prefix) == 1 and not isinstance(structure, (tuple, list)):
            prefix = prefix[0]  # one output: out_axes=(0,) as well as 0
        if isinstance(prefix, tuple) and isinstance(structure, (tuple, list)) and len(prefix) != len(structure):
            raise AutodiffError(f"vmap: out_axes has {len(prefix)} entries for {len(structure)} output(s)")
        try:
            per_leaf = _tree.broadcast_prefix(prefix, structure, "vmap out_axes")
        except ValueError as error:
            raise AutodiffError(str(error)) from None
        # A transform's rebuild may leave kernel outputs out of what it returns (a `jacobian`
        # returns the Jacobians, not the values computed beside them) or put arrays of its own
        # in (`jvp`'s zero tangents of integer outputs): only the leaves that are output
        # indices carry an axis, and the outputs nobody returns are batched on axis 0.
        by_index = {
            leaf: axis
            for leaf, axis in zip(flatten(structure)[0], per_leaf)
            if isinstance(leaf, int) and not isinstance(leaf, bool)
        }
        out_axes = [by_index.get(i, 0) for i in range(n_out)]
        kernel = inner_kernel.vmap(axes, out_axes, _types(spec))
        return kernel, lambda outputs: inner_rebuild(list(outputs))

    def positional(self, args, kwargs):
        return self.inner.positional(args, kwargs)

    @property
    def n_params(self):
        return self.inner.n_params

    def inline(self, *args):
        return _inline_source(self, args)


# -- the callable -----------------------------------------------------------------------------


class _Entry:
    __slots__ = ("compiled", "rebuild", "single")

    def __init__(self, compiled, rebuild, n_out):
        self.compiled = compiled
        self.rebuild = rebuild
        self.single = n_out == 1


class Function:
    """A traced, compiled and cached function: what `jit` and the transforms return.

    Calling it with NumPy arrays (or Python scalars) traces the function for that signature
    (argument dtypes and shapes, static argument values, backend) the first time, compiles it
    with rfx, and replays the compiled kernel on every later call with the same signature.
    """

    def __init__(self, source, backend="cpu", fast_math=False, cache_size=DEFAULT_CACHE_SIZE):
        if cache_size is not None and cache_size < 1:
            raise ValueError(f"cache_size must be at least 1 (or None, unbounded), got {cache_size}")
        self._cache_size = cache_size
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r} (one of {', '.join(BACKENDS)})")
        self._source = source
        self._backend = backend
        self._fast_math = bool(fast_math)
        self._cache: dict = {}
        # The entries of calls whose arguments were all arrays used as they are, by the
        # arguments' dtypes and shapes (a key cheaper to build than the signature): the path
        # of a call through the cache. Emptied whenever an entry leaves `_cache`.
        self._fast: dict = {}
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._last_key = None
        self._last_miss: str | None = None
        self.__name__ = source.name
        self.__wrapped__ = getattr(source, "fun", None)

    # -- the signature of a call --------------------------------------------------------------
    def _split(self, args):
        """The signature of a call: one `(dtype, shape, weak)` per array (the leaves of tree
        arguments), the static arguments, the arrays, and the traced arguments' structure
        (None when every one is an array or scalar)."""
        statics = []
        traced = []
        positions = []
        static_argnums = {a % len(args) if a < 0 else a for a in self._source.static_argnums} if args else set()
        for i, value in enumerate(args):
            if i in static_argnums:
                try:
                    hash(value)
                except TypeError:
                    raise TypeError(f"static argument {i} must be hashable, got {type(value).__name__}") from None
                statics.append((i, value))
                continue
            traced.append(value)
            positions.append(i)
        in_tree = None
        if any(is_container(v) for v in traced):
            leaves, in_tree = flatten(tuple(traced))
            labels = [
                f"{positions[path[0]]} at {list(path[1:])}" if len(path) > 1 else str(positions[path[0]])
                for path in _tree.leaf_paths(in_tree)
            ]
        else:
            leaves, labels = traced, positions
        arrays = []
        spec = []
        for value, label in zip(leaves, labels):
            array, entry = _prepare(value, label)
            arrays.append(array)
            spec.append(entry)
        return tuple(spec), tuple(statics), arrays, in_tree

    def _touch(self, key):
        """Marks `key` most recently used (the cache dict is kept in order of use)."""
        try:
            self._cache[key] = self._cache.pop(key)
        except KeyError:  # dropped meanwhile by another thread
            pass

    def _entry(self, spec, statics, in_tree=None):
        key = (spec, statics, in_tree)
        entry = self._cache.get(key)
        if entry is not None:
            self._hits += 1
            if len(self._cache) > 1:
                self._touch(key)
            return entry
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None:
                self._hits += 1
                return entry
            self._last_miss = self._explain(key)
            if config.explain_cache_misses:
                print(f"rfxjit: compiling `{self.__name__}`: {self._last_miss}", file=sys.stderr)
            kernel, rebuild = self._source.kernel(list(spec), statics, in_tree)
            compiled = _rfx.compile(kernel, self._backend, self._fast_math)
            entry = _Entry(compiled, rebuild, len(compiled.outputs()))
            self._cache[key] = entry
            if self._cache_size is not None:
                while len(self._cache) > self._cache_size:
                    # The least recently used signature goes (the first in the dict's order).
                    try:
                        self._cache.pop(next(iter(self._cache)), None)
                    except RuntimeError:  # another thread's hit reordered the dict meanwhile
                        continue
                    self._fast.clear()
            self._misses += 1
            self._last_key = key
            return entry

    def _explain(self, key) -> str:
        old = self._last_key
        if old is None:
            return "first call"
        (spec, statics, tree), (old_spec, old_statics, old_tree) = key, old
        reasons = []
        if len(spec) != len(old_spec):
            reasons.append(f"{len(old_spec)} traced argument(s) -> {len(spec)}")
        for i, (new, prev) in enumerate(zip(spec, old_spec)):
            if new[0] != prev[0]:
                reasons.append(f"dtype of argument {i}: {prev[0]} -> {new[0]}")
            if new[1] != prev[1]:
                reasons.append(f"shape of argument {i}: {list(prev[1])} -> {list(new[1])}")
            if new[2] != prev[2]:
                reasons.append(f"argument {i}: {'Python scalar' if prev[2] else 'array'} -> {'Python scalar' if new[2] else 'array'}")
        if tree != old_tree:
            flat = "arrays and scalars"
            reasons.append(
                f"argument structure: {describe(old_tree) if old_tree else flat} -> {describe(tree) if tree else flat}"
            )
        if statics != old_statics:
            reasons.append(f"static arguments: {dict(old_statics)} -> {dict(statics)}")
        return "; ".join(reasons) or "a signature seen before was dropped from the cache"

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) < self._source.n_params:
            args = self._source.positional(args, kwargs)
        # The fast path: every argument an ndarray, dtypes and shapes seen before. (The kernel
        # checks layout; a non-contiguous array takes the slow path, which copies.)
        fast_key = None
        if not self._source.static_argnums:
            parts = []
            for a in args:
                if type(a) is not np.ndarray:
                    break
                parts.append(a.dtype)
                parts.append(a.shape)
            else:
                fast_key = tuple(parts)
                hit = self._fast.get(fast_key)
                if hit is not None:
                    entry, key = hit
                    if len(self._cache) > 1:
                        self._touch(key)
                    try:
                        result = entry.compiled(*args)
                    except CallError:
                        pass
                    else:
                        self._hits += 1
                        return entry.rebuild([result] if entry.single else list(result))
        if _has_tracer(args):
            return self._source.inline(*args)
        spec, statics, arrays, in_tree = self._split(args)
        entry = self._entry(spec, statics, in_tree)
        if fast_key is not None and all(array is arg for array, arg in zip(arrays, args)):
            self._fast[fast_key] = (entry, (spec, statics, in_tree))
        result = entry.compiled(*arrays)
        return entry.rebuild([result] if entry.single else list(result))

    # -- inspection -----------------------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        """Hits, misses (compiles) and the number of cached signatures."""
        return CacheInfo(self._hits, self._misses, len(self._cache))

    def cache_clear(self) -> None:
        """Drops every compiled kernel."""
        with self._lock:
            self._cache.clear()
            self._fast.clear()
            self._hits = self._misses = 0
            self._last_key = None

    @property
    def last_miss(self) -> str | None:
        """Why the last compile happened (what changed in the signature)."""
        return self._last_miss

    def lower(self, *args, **kwargs):
        """The compiled kernel for these example arguments (`.hir()`, `.mir()`, `.lir()`,
        `.report()`, and callable on arrays)."""
        if kwargs or len(args) < self._source.n_params:
            args = self._source.positional(args, kwargs)
        spec, statics, _, in_tree = self._split(args)
        return self._entry(spec, statics, in_tree).compiled

    def hir(self, *args) -> str:
        return self.lower(*args).hir()

    def mir(self, *args) -> str:
        return self.lower(*args).mir()

    def lir(self, *args) -> str:
        return self.lower(*args).lir()

    def report(self, *args) -> str:
        return self.lower(*args).report()

    def dot(self, *args, stage: str = "hir") -> str:
        """The kernel for these arguments as a Graphviz DOT graph (`stage="hir"` or `"mir"`)."""
        return self.lower(*args).dot(stage)

    def bind(self, *example_args, **kwargs):
        """A kernel bound to the signature of `example_args`, for control loops: call it with
        arrays of exactly those dtypes and shapes (0-d arrays for scalars; static arguments are
        fixed at bind time and not passed again), optionally with `out=` arrays written in
        place. Inputs are read without copying; every call checks each array's dtype, shape,
        layout and address. For a function returning one array or a tuple this is the native
        kernel (`rfxjit._rfx.Compiled`); otherwise a `Bound` that rebuilds the outputs."""
        if kwargs or len(example_args) < self._source.n_params:
            example_args = self._source.positional(example_args, kwargs)
        spec, statics, _, in_tree = self._split(example_args)
        entry = self._entry(spec, statics, in_tree)
        if in_tree is None and getattr(entry.rebuild, "plain", False):
            # The function returns one array or a tuple, as the native kernel does: hand out
            # the native kernel itself (no Python frame per call).
            return entry.compiled
        return Bound(entry, self.__name__, in_tree)

    def export(self, *example_args, **options):
        """This function exported as C (or Rust) at the example arguments' dtypes and shapes:
        `rfxjit.export(self, *example_args, **options)`, which see."""
        from ._export import export

        return export(self, *example_args, **options)

    def __getstate__(self):
        # Pickled as the function (by reference, as pickle does for functions), the transforms
        # around it and the options; compiled kernels are made again where it is unpickled.
        state = self.__dict__.copy()
        state["_cache"] = {}
        state["_fast"] = {}
        state["_lock"] = None
        state["_hits"] = state["_misses"] = 0
        state["_last_key"] = state["_last_miss"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<rfxjit.Function {self.__name__} backend={self._backend}>"


class Bound:
    """A compiled kernel bound to one signature (see `Function.bind`)."""

    __slots__ = ("_compiled", "_rebuild", "_single", "_in_tree", "name")

    def __init__(self, entry: _Entry, name: str, in_tree=None):
        self._compiled = entry.compiled
        self._rebuild = entry.rebuild
        self._single = entry.single
        self._in_tree = in_tree
        self.name = name

    def __call__(self, *arrays, out=None):
        if self._in_tree is not None:
            leaves, tree = flatten(arrays)
            if tree != self._in_tree:
                raise CallError(
                    f"`{self.name}`: arguments of structure {describe(tree)}, bound to {describe(self._in_tree)}"
                )
            arrays = leaves
        if isinstance(out, dict) or (isinstance(out, (tuple, list)) and any(is_container(o) for o in out)):
            out = tuple(flatten(out)[0])  # out= arrays in the outputs' structure
        result = self._compiled(*arrays, out=out)
        return self._rebuild([result] if self._single else list(result))

    @property
    def compiled(self):
        """The native kernel: callable as `compiled(*arrays, out=...)`, the fastest path (it
        returns one array for one output, else a tuple)."""
        return self._compiled

    def inputs(self):
        return self._compiled.inputs()

    def outputs(self):
        return self._compiled.outputs()

    def hir(self) -> str:
        return self._compiled.hir()

    def mir(self) -> str:
        return self._compiled.mir()

    def lir(self) -> str:
        return self._compiled.lir()

    def report(self) -> str:
        return self._compiled.report()

    def dot(self, stage: str = "hir") -> str:
        return self._compiled.dot(stage)

    def __reduce__(self):
        # The kernel pickles as its HIR text and options (compiled again when unpickled), with
        # the structures of the arguments and the outputs.
        structure = _index_structure(self._rebuild, len(self._compiled.outputs()))
        return (_bound_from_compiled, (self._compiled, self.name, self._in_tree, structure))

    def __repr__(self) -> str:
        return f"<rfxjit.Bound {self.name} {self._compiled.inputs()}>"


def _bound_from_compiled(compiled, name, in_tree=None, structure=None):
    n_out = len(compiled.outputs())
    if structure is None:
        rebuild = (lambda outputs: outputs[0]) if n_out == 1 else tuple
    else:

        def rebuild(outputs):
            return _tree.tree_map(lambda i: outputs[i], structure)

    return Bound(_Entry(compiled, rebuild, n_out), name, in_tree)


def _source_of(fun, static_argnums=()):
    if isinstance(fun, Function):
        if static_argnums:
            raise TypeError("static_argnums can only be given for a plain Python function")
        return fun._source
    if not callable(fun):
        raise TypeError(f"expected a function, got {type(fun).__name__}")
    return _PySource(fun, static_argnums)


def jit(fun=None, *, static_argnums=(), backend="cpu", fast_math=False, cache_size=DEFAULT_CACHE_SIZE):
    """Compiles `fun` (plain NumPy code) with rfx: traced once per signature, then cached
    (`cache_size` signatures, least recently used out; None: unbounded).

    Usable as `@jit`, `@jit(backend="interp")` or `jit(f, static_argnums=(1,))`.
    """
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if fun is None:
        return functools.partial(
            jit, static_argnums=static_argnums, backend=backend, fast_math=fast_math, cache_size=cache_size
        )
    function = Function(
        _source_of(fun, static_argnums), backend=backend, fast_math=fast_math, cache_size=cache_size
    )
    functools.update_wrapper(function, fun if not isinstance(fun, Function) else fun.__wrapped__ or fun, updated=())
    return function


def _transform(kind, fun, argnums, has_aux=False):
    source = _source_of(fun)
    backend = fun._backend if isinstance(fun, Function) else "cpu"
    return Function(_TransformSource(source, kind, argnums, has_aux), backend=backend)


def grad(fun, argnums=0, has_aux=False):
    """The gradient of `fun` (a scalar float output) with respect to argument `argnums` (an int,
    or a tuple for a tuple of gradients)."""
    return _transform("grad", fun, argnums, has_aux)


def value_and_grad(fun, argnums=0, has_aux=False):
    """`(fun(*args), grad(fun)(*args))` from one kernel."""
    return _transform("value_and_grad", fun, argnums, has_aux)


def jacobian(fun, argnums=0):
    """The Jacobian of every float output: shape `output.shape + input.shape` (forward or
    reverse mode chosen by shape)."""
    return _transform("jacobian", fun, argnums)


jacfwd = jacobian
jacrev = jacobian


def hessian(fun, argnums=0):
    """The Hessian of a scalar function: shape `x.shape + x.shape` (nested tuples for a tuple
    of argnums)."""
    return _transform("hessian", fun, argnums)


# The compiled functions made for `jvp` and `vjp`, kept for the last 128 functions passed.
_TRANSFORM_CACHE_SIZE = 128


def _uncached_jvp(fun):
    return _transform("jvp", fun, None)


def _uncached_vjp(fun, n):
    def weighted(*args):
        outs, out_tree = flatten(fun(*args[:n]))
        cotangents, cot_tree = flatten(args[n])
        if cot_tree != out_tree:
            raise AutodiffError(f"vjp: the cotangent's structure {describe(cot_tree)} is not the output's {describe(out_tree)}")
        total = None
        for out, cotangent in zip(outs, cotangents):
            term = (out * cotangent).sum()
            total = term if total is None else total + term
        return total

    name = f"vjp_{getattr(fun, '__name__', 'fn')}"
    weighted.__name__ = name if name.isidentifier() else "vjp_fn"
    primal = fun if isinstance(fun, Function) else jit(fun)
    return primal, _transform("grad", weighted, tuple(range(n)))


_cached_jvp = functools.lru_cache(maxsize=_TRANSFORM_CACHE_SIZE)(_uncached_jvp)
_cached_vjp = functools.lru_cache(maxsize=_TRANSFORM_CACHE_SIZE)(_uncached_vjp)


def jvp(fun, primals, tangents):
    """Forward mode: `(fun(*primals), the directional derivative along tangents)`."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise AutodiffError(f"jvp: {len(primals)} primal(s) but {len(tangents)} tangent(s)")
    try:
        function = _cached_jvp(fun)
    except TypeError:  # an unhashable callable
        function = _uncached_jvp(fun)
    return function(*primals, *tangents)


def vjp(fun, *primals):
    """Reverse mode: `(fun(*primals), pullback)`, where `pullback(cotangent)` returns the
    tuple of `cotangent`-weighted gradients with respect to each primal, each of that
    primal's structure (`fun` returns float arrays, or a tree of them; `cotangent` has the
    output's structure, shapes and dtypes). The pullback is the gradient of the sum over the
    output's leaves of `sum(out * cotangent)`, traced and compiled once per signature."""
    n = len(primals)
    try:
        primal, pull = _cached_vjp(fun, n)
    except TypeError:  # an unhashable callable
        primal, pull = _uncached_vjp(fun, n)
    primal_out = primal(*primals)

    outs, out_tree = flatten(primal_out)

    def pullback(cotangent):
        cotangents, cot_tree = flatten(cotangent)
        if cot_tree != out_tree:
            raise AutodiffError(f"vjp: the cotangent's structure {describe(cot_tree)} is not the output's {describe(out_tree)}")
        converted = []
        for out, cot in zip(outs, cotangents):
            cot = np.asarray(cot, dtype=np.asarray(out).dtype)
            if cot.shape != np.shape(out):
                raise AutodiffError(f"vjp: the cotangent has shape {cot.shape}, the output {np.shape(out)}")
            converted.append(cot)
        return pull(*primals, unflatten(out_tree, converted))

    return primal_out, pullback


def vmap(fun, in_axes=0, out_axes=0):
    """`fun` (written for one example) mapped over a batch axis of its arguments, as one
    kernel. `in_axes`: an int, None (shared) or one per argument; `out_axes` likewise per
    output."""
    source = _source_of(fun)
    backend = fun._backend if isinstance(fun, Function) else "cpu"
    return Function(_VmapSource(source, in_axes, out_axes), backend=backend)


# -- expressions ----------------------------------------------------------------------------------

_expr_cache: dict = {}


def eval(expression: str, backend: str = "cpu", **inputs):  # noqa: A001 - JAX-style name
    """Evaluates an rfx expression string (`"sin(x*2)+y"`) on the named NumPy arrays."""
    arrays = {name: as_rfx_array(value, f"input `{name}`") for name, value in inputs.items()}
    signature = tuple((name, a.dtype.name, a.shape) for name, a in arrays.items())
    key = (expression, signature, backend)
    compiled = _expr_cache.get(key)
    if compiled is None:
        kernel = _rfx.Kernel.from_expr(expression, [(n, d, list(s)) for n, d, s in signature])
        compiled = _rfx.compile(kernel, backend)
        _expr_cache[key] = compiled
    order = [name for name, _, _ in compiled.inputs()]
    return compiled(*[arrays[name] for name in order])
