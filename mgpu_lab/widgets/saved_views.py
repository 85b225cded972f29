"""What a saved notebook keeps of the live views: no widget reference it cannot resolve.

A live view is a widget output, a reference to a model that lives in the kernel. Saved, the
reference outlives the kernel: after a restart, or opened anywhere else, JupyterLab and
Notebook 7 look for the model, do not find it, show "Error displaying widget: model not found"
and log the error to the console, once per view. Each view of ours is displayed after its static
rendering, which stands alone. So when a notebook is saved, a widget output of ours whose model
state the notebook does not hold is left out of the file (JupyterLab saves widget state only
when its "save widget state" setting is on; nbclient always does); the page that saved it keeps
its live view. Where the state is saved the reference stays: the widget manager restores the
model from it.
"""

from __future__ import annotations

from typing import Any

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
# Output metadata key that marks a widget output as one of ours (other widgets are left alone).
VIEW_MARK = "mgpu_lab"


def view_metadata(static_id: str) -> dict[str, Any]:
    """Output metadata of a live view's widget output: the mark, and its static twin's id."""
    return {VIEW_MARK: {"static_twin": static_id}}


def saved_model_ids(notebook: dict[str, Any]) -> set[str]:
    """Ids of the widget models whose state the notebook's metadata holds."""
    widgets = (notebook.get("metadata") or {}).get("widgets") or {}
    return set((widgets.get(WIDGET_STATE_MIME) or {}).get("state") or {})


def _is_dangling_view(output: dict[str, Any], saved: set[str]) -> bool:
    if VIEW_MARK not in (output.get("metadata") or {}):
        return False
    view = (output.get("data") or {}).get(WIDGET_VIEW_MIME)
    return isinstance(view, dict) and view.get("model_id") not in saved


def drop_dangling_views(notebook: dict[str, Any]) -> int:
    """Remove, in place, our widget outputs whose model state `notebook` does not hold.

    `notebook` is the notebook as JSON (nbformat 4). Returns how many outputs were removed.
    """
    saved = saved_model_ids(notebook)
    removed = 0
    for cell in notebook.get("cells") or []:
        outputs = cell.get("outputs")
        if not outputs:
            continue
        kept = [output for output in outputs if not _is_dangling_view(output, saved)]
        removed += len(outputs) - len(kept)
        cell["outputs"] = kept
    return removed
