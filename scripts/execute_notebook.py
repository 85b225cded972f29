"""Execute a notebook end to end with nbclient and write the executed copy.

    python scripts/execute_notebook.py NOTEBOOK.ipynb OUT.ipynb [--keep-widget-state]

Exits non-zero if a cell fails. Prints each cell's text output and the widget views it made,
so a run on a remote GPU machine can be read from its log.

The copy written keeps every static output (the viewers' primary rendering) but, unless
--keep-widget-state, not the live widgets: their saved state holds a profiled kernel's every
event (27 MB for notebook 05's 800k regions), and a widget view without its state would only
show "model not found" where the static rendering already shows the same view.
  python scripts/execute_notebook.py --strip-only EXECUTED.ipynb OUT.ipynb   # strip a copy only
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def strip_widgets(nb: nbformat.NotebookNode) -> int:
    """Drop the saved widget state and the widget-view outputs (static outputs stay); returns how
    many outputs were dropped."""
    nb.metadata.pop("widgets", None)
    dropped = 0
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        kept = [out for out in cell.get("outputs", []) if WIDGET_VIEW not in out.get("data", {})]
        dropped += len(cell.outputs) - len(kept)
        cell.outputs = kept
    return dropped


def execute(source: str, target: str, keep_widget_state: bool = False) -> int:
    import nbclient

    nb = nbformat.read(source, as_version=4)
    os.environ.setdefault("MGPU_LAB_REPO", str(Path(__file__).resolve().parent.parent))
    client = nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                     resources={"metadata": {"path": str(Path(source).parent)}})
    try:
        client.execute()
    finally:
        for i, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []):
                text = out.get("text") or out.get("data", {}).get("text/plain", "")
                widget = out.get("data", {}).get(WIDGET_VIEW)
                print(f"[{i}] {'widget ' + str(text)[:60] if widget else str(text)[:400]}")
        if not keep_widget_state:
            strip_widgets(nb)
        nbformat.write(nb, target)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--keep-widget-state", action="store_true")
    parser.add_argument("--strip-only", action="store_true", help="strip an executed notebook, run nothing")
    args = parser.parse_args(argv)
    if args.strip_only:
        nb = nbformat.read(args.source, as_version=4)
        print(f"dropped {strip_widgets(nb)} widget views and the widget state")
        nbformat.write(nb, args.target)
        return 0
    return execute(args.source, args.target, args.keep_widget_state)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
