"""`ViewerTabs`: the SASS, smem and IR viewers of one kernel as tabs, with their static twin."""

from __future__ import annotations

from typing import Any

import ipywidgets

from mgpu_lab.widgets.fallback import StaticFallback


class ViewerTabs(StaticFallback, ipywidgets.Tab):
    """An ipywidgets Tab of viewers; displayed like each viewer (static output, then the tabs).

    The static output holds each child's static rendering under its own id, so any child's
    live view hides it (the tabs themselves run no code of ours).
    """

    static_title = "mgpu_lab viewers"

    def __init__(self, views: dict[str, Any]) -> None:
        super().__init__(children=list(views.values()))
        self.titles = tuple(views)

    def to_html(self) -> str:
        return "".join(
            f'<div data-mgl-static="{child._static_id}">{child.to_html()}</div>' for child in self.children
        )

    def to_figure(self) -> Any:
        raise NotImplementedError("save the tabs as .html, or save each viewer (tabs.children) on its own")
