"""The static side every viewer widget has: an HTML fallback in its mime bundle, and `save`.

A widget view needs a live kernel (or saved widget state) and a frontend with the widget
manager; nbconvert, GitHub and plain IPython have neither. Putting a self-contained
text/html rendering next to the widget view in the mime bundle lets those show the static
version, while JupyterLab, Notebook 7 and VS Code pick the widget (they rank it first).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any


class StaticFallback:
    """Mixin for an `anywidget.AnyWidget`: subclasses implement `to_html` and `to_figure`."""

    static_title = "mgpu_lab view"

    def to_html(self) -> str:
        """A self-contained HTML fragment (inline styles, images as data URLs)."""
        raise NotImplementedError

    def to_figure(self) -> Any:
        """A `matplotlib.figure.Figure` of the same content."""
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        if bundle is None:
            return None
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        return {**data, "text/html": self.to_html()}, metadata

    def save(self, path: str | Path, dpi: int = 150) -> Path:
        """Write the static rendering: `.html`/`.htm` as a page, anything else via matplotlib
        (PNG, SVG, PDF: the suffix picks the format)."""
        out = Path(path)
        if out.suffix.lower() in (".html", ".htm"):
            out.write_text(html_page(self.static_title, self.to_html()), encoding="utf-8")
            return out
        # Figures are built with matplotlib.figure.Figure, not pyplot: no global figure list
        # to leak into, and no inline backend that would display them a second time.
        self.to_figure().savefig(out, dpi=dpi, bbox_inches="tight")
        return out


def html_page(title: str, body: str) -> str:
    """A standalone HTML document around a fragment."""
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head>\n<body>\n{body}\n</body></html>\n"
    )
