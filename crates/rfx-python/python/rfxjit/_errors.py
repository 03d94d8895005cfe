"""The exception classes (defined by the native module, one per rfx error family) and the
helper that points a tracing error at the user's line."""

from __future__ import annotations

import os
import traceback

from . import _rfx

RfxError = _rfx.RfxError
TraceError = _rfx.TraceError
CallError = _rfx.CallError
AutodiffError = _rfx.AutodiffError
CompileError = _rfx.CompileError
BackendUnavailable = _rfx.BackendUnavailable
ExprError = _rfx.ExprError
ExportError = _rfx.ExportError

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _is_ours(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep)


def user_location(tb) -> tuple[str, int, str] | None:
    """The innermost frame of `tb` outside this package (and outside NumPy's dispatch): the
    user's line, as `(filename, lineno, source)`."""
    found = None
    for frame in traceback.extract_tb(tb):
        if _is_ours(frame.filename) or "numpy" + os.sep in frame.filename:
            continue
        found = (frame.filename, frame.lineno or 0, (frame.line or "").strip())
    return found


def at_user_line(error: BaseException, tb) -> TraceError:
    """A `TraceError` with `error`'s message and the user's file and line appended."""
    where = user_location(tb)
    message = str(error)
    new = TraceError(message if where is None else f"{message}\n  at {where[0]}:{where[1]}: {where[2]}")
    new.filename = where[0] if where else None
    new.lineno = where[1] if where else None
    return new
