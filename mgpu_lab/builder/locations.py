"""Records the user's file:line as the MLIR location of every op the kernel body creates.

MLIR's `loc_tracebacks` builds each op's location from the Python stack. We exclude this
package's and MLIR's own files, and keep one frame: the innermost user line. That location
flows through the passes into PTX `.loc` directives and, with `ptxas -lineinfo`, into SASS.
"""

from __future__ import annotations

import contextlib
import functools
import os
import traceback
from collections.abc import Iterator

from .._mlir import ir
from ..user_errors import describe_location

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MLIR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(ir.__file__)))
# Frames of `with` statements and decorators pass through these; they are never the user's line.
_STDLIB_HELPERS = tuple(os.path.abspath(m.__file__) for m in (contextlib, functools))
_INTERNAL_DIRS = ("builder", "compiler", "runtime", "profiler", "widgets")
_registered = False


def _register_exclusions() -> None:
    global _registered
    if _registered:
        return
    from mlir._mlir_libs import _mlir

    # The bindings exclude frames whose file name starts with a registered prefix. The
    # package's internals are excluded; its examples are user code like any other.
    prefixes = [os.path.join(_PACKAGE_DIR, d) + os.sep for d in _INTERNAL_DIRS]
    prefixes += [os.path.join(_PACKAGE_DIR, f) for f in os.listdir(_PACKAGE_DIR) if f.endswith(".py")]
    prefixes += [_MLIR_DIR + os.sep, *_STDLIB_HELPERS]
    for prefix in prefixes:
        _mlir.globals.register_traceback_file_exclusion(prefix)
    _registered = True


@contextlib.contextmanager
def user_locations() -> Iterator[None]:
    """Within this context every new op is located at the innermost user frame."""
    _register_exclusions()
    with ir.loc_tracebacks(max_depth=1):
        yield


def is_user_frame(filename: str) -> bool:
    """True for frames outside mgpu_lab and the MLIR bindings."""
    path = os.path.abspath(filename)
    if path.startswith(_MLIR_DIR + os.sep) or path in _STDLIB_HELPERS:
        return False
    if path.startswith(_PACKAGE_DIR + os.sep):
        rel = path[len(_PACKAGE_DIR) + 1:]
        return rel.split(os.sep)[0] not in _INTERNAL_DIRS and os.sep in rel
    return True


def innermost_user_frame(tb) -> traceback.FrameSummary | None:
    """The deepest traceback frame that belongs to user code, or None."""
    frames = [f for f in traceback.extract_tb(tb) if is_user_frame(f.filename)]
    return frames[-1] if frames else None


def describe_frame(frame: traceback.FrameSummary) -> str:
    """'File "x.py", line 12, in body:  code' for error messages."""
    code = f"\n    {frame.line.strip()}" if frame.line else ""
    return f"{describe_location(frame.filename, frame.lineno)}, in {frame.name}{code}"
