"""Errors caused by user input show the user's frames and the message, not mgpu_lab's insides.

A wrong argument or a body that fails to trace used to come with 17-47 lines of the
library's own traceback above a message that already names the user's line. `user_facing`
wraps the public entry points: when a user-input error leaves one, the frames inside
mgpu_lab (and the MLIR bindings) are cut out of its traceback, as Triton's
`filter_traceback` does. What is left is the user's own frames and the message.

User-input errors are `MgpuLabError`s, and `TypeError`/`ValueError`s raised by mgpu_lab
itself following the "argument: expected ..., got ..." convention. Anything else (a bug
in mgpu_lab) keeps its full traceback. `MGPU_LAB_FULL_TRACEBACK=1` turns filtering off.

`%%mosaic` cells are compiled under the file name "Cell In[N]" (N is the cell's execution
count), so MLIR locations, PTX, SASS and these messages all say `Cell In[N], line L`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from .errors import MgpuLabError

F = TypeVar("F", bound=Callable[..., Any])

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# The package's examples are user-level code: they stay in tracebacks.
_USER_LEVEL_DIRS = (os.path.join(_PACKAGE_DIR, "examples") + os.sep,)
_ARGUMENT_MESSAGE = re.compile(r"^[\w.\[\]'\"%-]+(?: \w+)?: ")
_CELL_LABEL = re.compile(r"^Cell In\[\d+\]$")


def _mlir_dirs() -> tuple[str, ...]:
    """The folders of the `mlir` package. Upstream ships it as a namespace package (no
    `__init__.py`, so no `origin`): its folders are the spec's search locations."""
    import importlib.util

    spec = importlib.util.find_spec("mlir")
    if spec is None:
        return ()
    if spec.submodule_search_locations:
        return tuple(os.path.abspath(d) + os.sep for d in spec.submodule_search_locations)
    return (os.path.dirname(os.path.abspath(spec.origin)) + os.sep,) if spec.origin else ()


_LIBRARY_DIRS = (_PACKAGE_DIR + os.sep, *_mlir_dirs())


def is_library_file(filename: str) -> bool:
    """True for mgpu_lab's own modules (examples excluded) and the MLIR bindings."""
    path = os.path.abspath(filename)
    return path.startswith(_LIBRARY_DIRS) and not path.startswith(_USER_LEVEL_DIRS)


def is_user_input_error(error: BaseException) -> bool:
    """An error the user's input caused (filter it), as opposed to a bug in mgpu_lab (keep it whole)."""
    if isinstance(error, MgpuLabError):
        return True
    if not isinstance(error, (TypeError, ValueError)):
        return False
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    raised_by_us = tb is not None and is_library_file(tb.tb_frame.f_code.co_filename)
    return raised_by_us and bool(_ARGUMENT_MESSAGE.match(str(error)))


def filter_traceback(error: BaseException) -> None:
    """Drop library frames from `error`'s traceback and from those of its cause and context."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        frames: list[TracebackType] = []
        tb = error.__traceback__
        while tb is not None:
            if not is_library_file(tb.tb_frame.f_code.co_filename):
                frames.append(tb)
            tb = tb.tb_next
        for current, following in zip(frames, frames[1:]):
            current.tb_next = following
        if frames:
            frames[-1].tb_next = None
        error.__traceback__ = frames[0] if frames else None
        error = error.__cause__ or error.__context__


def filtering_enabled() -> bool:
    return os.environ.get("MGPU_LAB_FULL_TRACEBACK", "") in ("", "0")


def trim_for_user(error: BaseException) -> None:
    """Cut library frames out of `error` if it is a user-input error (call it, then bare `raise`).

    A bare `raise` re-raises with the trimmed traceback and does not add the current frame
    back, so even the entry point's own frame disappears: the user sees their line, then
    the message."""
    if filtering_enabled() and is_user_input_error(error):
        filter_traceback(error)


def user_facing(fn: F) -> F:
    """Decorate a public entry point: user-input errors leave it with the library frames cut."""

    @functools.wraps(fn)
    def entry_point(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            trim_for_user(error)
            raise

    return entry_point  # type: ignore[return-value]


def warn_at_user(message: str, category: type[Warning]) -> None:
    """`warnings.warn` attributed to the innermost caller outside mgpu_lab's internals."""
    import sys
    import warnings

    level, frame = 2, sys._getframe(1)  # stacklevel 2 is the frame that called this function
    while frame is not None and is_library_file(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def cell_label(execution_count: int) -> str:
    """The file name a %%mosaic cell is compiled under: IPython's own 'Cell In[N]' label."""
    return f"Cell In[{execution_count}]"


def notebook_cell_label(file: str) -> str | None:
    """'Cell In[N]' when `file` is the name IPython compiled a notebook cell under, else None.

    IPython names cells `<ipython-input-N-hash>` (terminal) or `/tmp/ipykernel_PID/HASH.py`
    (ipykernel) and keeps the name -> N map in its caching compiler; `format_code_name` is
    how IPython's own tracebacks print "Cell In[N]", so errors here say the same."""
    import sys

    if _CELL_LABEL.match(file):
        return file
    if "IPython" not in sys.modules:  # no shell in this process: nothing to ask (and no import)
        return None
    try:
        shell = sys.modules["IPython"].get_ipython()
        named = shell.compile.format_code_name(file) if shell is not None else None
    except Exception:  # an IPython without the map (or a stand-in shell): the plain name it is
        return None
    if isinstance(named, tuple) and len(named) == 2:
        return f"{named[0]} {named[1]}"
    return None


def describe_location(file: str, line: int) -> str:
    """'Cell In[5], line 3' for a notebook cell, 'File "x.py", line 3' for a file."""
    label = notebook_cell_label(file)
    if label is not None:
        return f"{label}, line {line}"
    return f'File "{file}", line {line}'
