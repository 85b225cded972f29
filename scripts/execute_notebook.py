"""Execute a notebook end to end with nbclient and write the executed copy.

    python scripts/execute_notebook.py NOTEBOOK.ipynb OUT.ipynb

Exits non-zero if a cell fails. Prints each cell's text output and the widget views it made,
so a run on a remote GPU machine can be read from its log.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbclient
import nbformat


def main(source: str, target: str) -> int:
    nb = nbformat.read(source, as_version=4)
    os.environ.setdefault("MGPU_LAB_REPO", str(Path(__file__).resolve().parent.parent))
    client = nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                     resources={"metadata": {"path": str(Path(source).parent)}})
    try:
        client.execute()
    finally:
        nbformat.write(nb, target)
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            widget = out.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            print(f"[{i}] {'widget ' + str(text)[:60] if widget else str(text)[:400]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
