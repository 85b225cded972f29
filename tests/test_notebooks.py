"""The worked notebooks execute end to end; cells tagged "gpu" run only where there is a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def _has_gpu() -> bool:
    from mgpu_lab.compiler.target import device_capability

    return device_capability() is not None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    gpu = _has_gpu()
    if not gpu:
        nb.cells = [c for c in nb.cells if "gpu" not in c.get("metadata", {}).get("tags", [])]
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")
    if gpu:
        out_dir = Path(__file__).parent.parent / "test-artifacts" / "notebooks"
        out_dir.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out_dir / path.name)
