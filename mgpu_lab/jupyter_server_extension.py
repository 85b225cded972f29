"""The Jupyter server extension: saved notebooks hold no widget reference they cannot resolve.

Enabled by `jupyter-config/jupyter_server_config.d/mgpu_lab.json`, which pip installs into
`etc/jupyter/jupyter_server_config.d/` (or by hand: `jupyter server extension enable
mgpu_lab.jupyter_server_extension`). It adds one pre-save hook to the server's contents
manager: `widgets.saved_views.drop_dangling_views` on every notebook JupyterLab or Notebook 7
saves. Why: `mgpu_lab/widgets/saved_views.py`.
"""

from __future__ import annotations

from typing import Any

from mgpu_lab.widgets.saved_views import drop_dangling_views


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "mgpu_lab.jupyter_server_extension"}]


def drop_dangling_views_before_save(model: dict[str, Any], **_kwargs: Any) -> None:
    """Pre-save hook: a notebook's content loses its widget outputs that have no saved state."""
    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        drop_dangling_views(model["content"])


def _load_jupyter_server_extension(serverapp: Any) -> None:
    serverapp.contents_manager.register_pre_save_hook(drop_dangling_views_before_save)
