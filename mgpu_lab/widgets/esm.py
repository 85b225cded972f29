"""The JavaScript module of a view: `common.js` (shared helpers) followed by the view's file.

anywidget loads one module per widget and the views must work offline, so the shared helpers
are joined in here instead of being imported from a URL.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

HERE = Path(__file__).parent


@cache
def view_module(name: str) -> str:
    """Source of the ES module for `name`.js with the shared helpers in front."""
    return (HERE / "common.js").read_text(encoding="utf-8") + "\n" + (HERE / f"{name}.js").read_text(encoding="utf-8")
