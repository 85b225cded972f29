"""A saved notebook keeps no widget output of ours whose model it cannot restore: the Jupyter
server extension's pre-save hook drops it (the static rendering before it stays)."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "widgets"))
from widget_fixtures import synthetic_trace

from mgpu_lab.widgets.saved_views import WIDGET_STATE_MIME, WIDGET_VIEW_MIME, drop_dangling_views, view_metadata

REPO = Path(__file__).resolve().parents[1]


def _view(model_id: str, mine: bool = True) -> dict[str, Any]:
    return {"output_type": "display_data", "metadata": view_metadata("abc") if mine else {},
            "data": {WIDGET_VIEW_MIME: {"model_id": model_id, "version_major": 2, "version_minor": 0}, "text/plain": ""}}


STATIC = {"output_type": "display_data", "metadata": {}, "data": {"text/html": "<div class='mgl-static'>x</div>"}}


def test_dangling_views_of_ours_are_dropped_and_nothing_else() -> None:
    notebook = {
        "metadata": {"widgets": {WIDGET_STATE_MIME: {"state": {"saved": {}}}}},
        "cells": [
            {"cell_type": "code", "outputs": [STATIC, _view("gone")]},
            {"cell_type": "code", "outputs": [STATIC, _view("saved")]},  # the manager restores this one
            {"cell_type": "code", "outputs": [_view("other", mine=False)]},  # someone else's widget
            {"cell_type": "markdown", "source": "text"},
        ],
    }
    assert drop_dangling_views(notebook) == 1
    cells = notebook["cells"]
    assert cells[0]["outputs"] == [STATIC]
    assert cells[1]["outputs"][1]["data"][WIDGET_VIEW_MIME]["model_id"] == "saved"
    assert cells[2]["outputs"][0]["data"][WIDGET_VIEW_MIME]["model_id"] == "other"


def test_without_saved_state_every_view_of_ours_goes() -> None:
    notebook = {"metadata": {}, "cells": [{"cell_type": "code", "outputs": [STATIC, _view("a"), _view("b")]}]}
    assert drop_dangling_views(notebook) == 2 and notebook["cells"][0]["outputs"] == [STATIC]


def test_displayed_views_carry_the_mark() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    from mgpu_lab.widgets import Timeline

    published: list[tuple[dict[str, Any], dict[str, Any]]] = []
    shell = InteractiveShell.instance()
    shell.display_pub.publish = lambda data, metadata=None, **_: published.append((data, metadata or {}))
    try:
        Timeline(synthetic_trace())._ipython_display_()
    finally:
        InteractiveShell.clear_instance()
    kinds = [next(k for k in data if k != "text/plain") for data, _ in published]
    assert kinds == ["text/html", "image/png", WIDGET_VIEW_MIME]
    assert "mgpu_lab" in published[2][1] and all("mgpu_lab" not in meta for _, meta in published[:2])


def test_the_server_hook_edits_notebooks_only() -> None:
    from mgpu_lab.jupyter_server_extension import drop_dangling_views_before_save

    model = {"type": "notebook", "content": {"metadata": {}, "cells": [{"cell_type": "code", "outputs": [_view("a")]}]}}
    drop_dangling_views_before_save(model=model, path="x.ipynb", contents_manager=None)
    assert model["content"]["cells"][0]["outputs"] == []
    text = {"type": "file", "content": "not a notebook"}
    drop_dangling_views_before_save(model=text, path="x.txt")
    assert text["content"] == "not a notebook"


def test_pip_installs_the_server_extension_config() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    data_files = project["tool"]["setuptools"]["data-files"]
    config = "jupyter-config/jupyter_server_config.d/mgpu_lab.json"
    assert data_files["etc/jupyter/jupyter_server_config.d"] == [config]
    enabled = json.loads((REPO / config).read_text())["ServerApp"]["jpserver_extensions"]
    assert enabled == {"mgpu_lab.jupyter_server_extension": True}
