"""How the viewers name a source file: `Cell In[N]` for notebook cells, else the file name.

IPython compiles each cell into a temp file (`.../ipykernel_<pid>/<hash>.py`) and keeps the
map from those names to execution counts; its tracebacks print `Cell In[N], line L`, and so
do the viewers. A line map whose file label already reads `Cell In[N]` is shown as it is.
"""

from __future__ import annotations

import re
from typing import Any

_CELL_LABEL = re.compile(r"^Cell In\[\d+\]")
_IPYKERNEL_TEMP = re.compile(r"ipykernel_\d+[\\/][0-9]+\.py$")


def _shell_filename_map() -> dict[str, int]:
    try:
        from IPython import get_ipython
    except ImportError:
        return {}
    shell: Any = get_ipython()
    compiler = getattr(shell, "compile", None)
    return dict(getattr(compiler, "_filename_map", {}) or {})


def display_file_name(path: str) -> str:
    """`Cell In[N]` for a notebook cell's file, else the base name of `path`."""
    if _CELL_LABEL.match(path):
        return path
    count = _shell_filename_map().get(path)
    if count:  # 0: registered without its execution count (`compile.cache(cell)`)
        return f"Cell In[{count}]"
    base = path.replace("\\", "/").rsplit("/", 1)[-1]
    return "Cell In[?]" if count == 0 or _IPYKERNEL_TEMP.search(path) else base
