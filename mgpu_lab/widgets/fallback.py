"""How a viewer reaches the notebook: static outputs first, the live widget after them.

A widget output needs its model, which lives in the kernel: after a restart, on another
machine, in nbconvert or on GitHub it is gone. JupyterLab then shows "Error displaying
widget: model not found" and never falls back to a text/html alternative in the same bundle,
and nbconvert's HTML shows a placeholder that needs the widget manager from a CDN. So a
viewer is displayed as separate outputs:

1. the static rendering alone (`text/html`, inline styles only, no `<style>` or `<script>`),
   small and quick to build, tagged `data-mgl-static="<id>"`;
2. its pictures, if it has any, each an `image/png` output of its own (sanitizers that strip
   `<img>` from HTML keep image outputs whole);
3. the widget (`application/vnd.jupyter.widget-view+json`, empty `text/plain`), its output
   metadata marked (`saved_views.view_metadata`).

Live, the widget's view hides outputs 1 and 2 (`hideStaticTwin` in common.js). Saved, they
are what every reader shows; output 3 is left out of the saved file when the notebook holds no
state for its model (`saved_views`, run by the Jupyter server extension at each save), so a
reader without the kernel finds no dangling widget reference to fail on.
"""

from __future__ import annotations

import base64
import html
import uuid
from pathlib import Path
from typing import Any

import traitlets

from mgpu_lab.widgets.saved_views import view_metadata
from mgpu_lab.widgets.static_html import header_cells_as_data_cells

# Upper bound on the static rendering of one view, in characters (the goal is <= 1 MB per
# output; renderers budget their parts below this).
STATIC_BUDGET = 900_000


class StaticFallback(traitlets.HasTraits):
    """Mixin for an `anywidget.AnyWidget`: subclasses implement `to_html` and `to_figure`."""

    static_title = "mgpu_lab view"
    _static_id = traitlets.Unicode("").tag(sync=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("_static_id", uuid.uuid4().hex[:16])
        super().__init__(*args, **kwargs)

    def to_html(self) -> str:
        """A self-contained HTML fragment (inline styles, images as data URLs)."""
        raise NotImplementedError

    def to_figure(self) -> Any:
        """A `matplotlib.figure.Figure` of the same content."""
        raise NotImplementedError

    def static_pictures(self) -> list[tuple[str, bytes]]:
        """(alt text, PNG) of each picture shown as an output of its own after the HTML."""
        return []

    def notebook_html(self) -> str:
        """The HTML of output 1: `to_html()` less the pictures of `static_pictures()`."""
        return self.to_html()

    def static_bundle(self) -> dict[str, str]:
        """The mime bundle of output 1: the static rendering, and a line of plain text."""
        return self.static_outputs()[0]

    def _html_bundle(self, pictures: int) -> dict[str, str]:
        body = (
            f'<div class="mgl-static" data-mgl-static="{self._static_id}" data-mgl-static-pictures="{pictures}">'
            f"{header_cells_as_data_cells(self.notebook_html())}</div>"
        )
        return {"text/html": body, "text/plain": f"<{self.static_title}>"}

    def static_outputs(self) -> list[dict[str, str]]:
        """The mime bundles shown before the widget: the static rendering, then its pictures."""
        pictures = [
            {"image/png": base64.b64encode(png).decode("ascii"), "text/plain": f"<{alt}>"}
            for alt, png in self.static_pictures()
        ]
        return [self._html_bundle(len(pictures)), *pictures]

    def widget_bundle(self) -> dict[str, Any]:
        """The mime bundle of output 3: the widget view, with no text a reader would show."""
        bundle = super()._repr_mimebundle_()  # type: ignore[misc]
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        return {**data, "text/plain": ""}

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # Only reached when something bypasses `_ipython_display_` (IPython always prefers
        # it): the widget alone, never a bundle in which the widget hides the static view.
        return self.widget_bundle()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        for bundle in self.static_outputs():
            display(bundle, raw=True)
        display(self.widget_bundle(), raw=True, metadata=view_metadata(self._static_id))

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
