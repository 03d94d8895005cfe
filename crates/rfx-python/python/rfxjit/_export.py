"""`export`: a function traced at example arguments and exported as portable C99 or Rust source
(the `rfx export` command's code path, `rfx::export`), returned as text and optionally written to
a directory, every file or none."""

from __future__ import annotations

import os
import secrets
import shutil

from . import _rfx
from ._api import Function, _arg_trees, _source_of, _split_trees
from ._errors import AutodiffError

LANGS = ("c", "rust")


def _argnum_leaves(argnums, statics, in_tree, spec, n_args: int, what: str) -> list[int]:
    """The kernel inputs (leaf indices) of the positional arguments `argnums`."""
    static_positions = {i for i, _ in statics}
    items = [argnums] if isinstance(argnums, int) else list(argnums)
    if not items:
        raise AutodiffError(f"{what}: no argument to differentiate with respect to")
    traced_positions = [i for i in range(n_args) if i not in static_positions]
    ranges = _split_trees(_arg_trees(in_tree, spec), spec)
    leaves = []
    for a in items:
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"{what}: argnums must be ints, got {type(a).__name__}")
        if not -n_args <= a < n_args:
            raise AutodiffError(f"{what}: argnums {a} is out of range for a function of {n_args} argument(s)")
        a %= n_args
        if a in static_positions:
            raise AutodiffError(f"{what}: argument {a} is static and cannot be differentiated")
        leaves.extend(ranges[traced_positions.index(a)])
    return leaves


def _write_all(out_dir: str, files: dict) -> None:
    """Writes `files` (name -> text) into `out_dir` (created if missing), every file or none:
    each is written to a temporary file beside its destination, then all are renamed into
    place; a failed rename puts back the files already replaced. Links and non-files in the
    way are refused before anything is written."""
    created = not os.path.lexists(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    dests = [os.path.join(out_dir, name) for name in files]
    for dest in dests:
        if os.path.islink(dest) or (os.path.lexists(dest) and not os.path.isfile(dest)):
            if created:
                os.rmdir(out_dir)
            raise OSError(f"{dest} exists and is not a regular file; it is not replaced")
    staged: list[tuple[str, str]] = []  # (temporary, destination)
    backups: list[tuple[str, str]] = []  # (the earlier file's second name, destination)
    replaced: list[str] = []
    try:
        for dest, text in zip(dests, files.values()):
            tmp = os.path.join(out_dir, f".{os.path.basename(dest)}.{secrets.token_hex(6)}.tmp")
            # O_EXCL: never write through a file or link someone put there; 0o666 less the umask,
            # the permissions a plainly created file gets.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            staged.append((tmp, dest))
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
        for tmp, dest in staged:
            if os.path.exists(dest):
                backup = f"{tmp}.old"
                try:
                    os.link(dest, backup)
                except OSError:  # a file system without hard links
                    shutil.copy2(dest, backup)
                backups.append((backup, dest))
        for tmp, dest in staged:
            os.replace(tmp, dest)
            replaced.append(dest)
    except BaseException:
        old = {dest: backup for backup, dest in backups}
        for dest in replaced:
            if dest in old:
                os.replace(old.pop(dest), dest)
            else:
                os.remove(dest)
        raise
    finally:
        for path in [tmp for tmp, _ in staged] + [backup for backup, _ in backups]:
            if os.path.lexists(path):
                os.remove(path)
        if created and not replaced and os.path.isdir(out_dir) and not os.listdir(out_dir):
            os.rmdir(out_dir)


def export(fun, *example_args, lang="c", name=None, grad=None, jacobian=None, fast_math=None, out_dir=None):
    """`fun` (a jitted function, a transform of one, or plain NumPy code) traced at the dtypes
    and shapes of `example_args` and exported as portable C99 (see docs/export.md for the ABI):
    returns `{"NAME.h": text, "NAME.c": text}`, or with `lang="rust"` a `no_std` Rust module,
    `{"NAME.rs": text}`.

    - `name`: the function's name and the files' names (default: the function's name); an
      identifier of the language, else `rfxjit.ExportError`.
    - `grad`: an argument index or a tuple of them: export the value (one single-element float
      output) and its gradients with respect to every array of those arguments, in order.
    - `jacobian`: an argument index: export the outputs, then the Jacobian of each float output
      with respect to that argument (shape `output.shape + argument.shape`). Not with `grad`.
    - `fast_math`: apply the optimiser's fast-math rewrites (default: the jitted function's
      setting).
    - `out_dir`: also write the files there (created if missing), every file or none.
    """
    if lang not in LANGS:
        raise ValueError(f"unknown export language {lang!r} (one of: {', '.join(map(repr, LANGS))})")
    if grad is not None and jacobian is not None:
        raise ValueError("export takes grad or jacobian, not both")
    function = fun if isinstance(fun, Function) else Function(_source_of(fun))
    source = function._source
    if name is None:
        # The function's own name (a lambda's `<lambda>` is refused as a C name).
        name = getattr(fun, "__name__", None)
        if name is None:
            raise TypeError("export needs name= for a function without a __name__")
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if fast_math is None:
        fast_math = function._fast_math
    args = example_args
    if len(args) < source.n_params:
        args = source.positional(args, {})
    spec, statics, _, in_tree = function._split(args)
    kernel, _ = source.kernel(spec, statics, in_tree)
    input_names = [input_name for input_name, _, _ in kernel.inputs()]
    grad_names = None
    jacobian_name = None
    if grad is not None:
        leaves = _argnum_leaves(grad, statics, in_tree, spec, len(args), "export(grad=...)")
        grad_names = [input_names[leaf] for leaf in leaves]
    if jacobian is not None:
        if not isinstance(jacobian, int) or isinstance(jacobian, bool):
            raise TypeError(f"jacobian must be one argument index, got {jacobian!r}")
        leaves = _argnum_leaves(jacobian, statics, in_tree, spec, len(args), "export(jacobian=...)")
        if len(leaves) != 1:
            raise AutodiffError(
                f"export(jacobian={jacobian}): the argument holds {len(leaves)} arrays; pass one array"
            )
        jacobian_name = input_names[leaves[0]]
    files = dict(_rfx.export(kernel, name, lang, grad_names, jacobian_name, bool(fast_math)))
    if out_dir is not None:
        _write_all(os.fspath(out_dir), files)
    return files
