"""`show()`, the offline-only front-end files, and the notebook outputs nbconvert/GitHub see."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "widgets"
sys.path.insert(0, str(FIXTURES))
from widget_fixtures import fixture_kernel, synthetic_trace

from mgpu_lab import widgets

WIDGET_DIR = Path(widgets.__file__).parent
NOTEBOOK = Path(__file__).parent / "browser" / "widgets_notebook.ipynb"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def test_show_picks_the_viewer() -> None:
    kernel = fixture_kernel()
    assert isinstance(widgets.show(synthetic_trace()), widgets.Timeline)
    assert isinstance(widgets.show(kernel, "sass"), widgets.SassView)
    assert isinstance(widgets.show(kernel, "smem"), widgets.SmemView)
    assert isinstance(widgets.show(kernel, "ir"), widgets.IrView)
    tab = widgets.show(kernel)
    assert tab.titles == ("sass", "smem", "ir") and len(tab.children) == 3


def test_show_takes_a_kernel_and_shows_every_launch_of_its_program() -> None:
    """A Kernel shows its launches' views: one launch as that launch's viewer, several (a workspace
    split-K GEMM: the GEMM and the reduce) as a tab per launch, for every view name."""
    from mgpu_lab.examples.vector_add import make_vector_add
    from mgpu_lab.kernels.gemm import make_gemm

    assert isinstance(widgets.show(make_vector_add(1024), "sass"), widgets.SassView)
    split = make_gemm(64, 256, 8192, tile_m=64, tile_n=64, split_k=4, split_k_reduce="workspace")
    for what, view in (("sass", widgets.SassView), ("smem", widgets.SmemView), ("ir", widgets.IrView)):
        tabs = widgets.show(split, what)
        assert len(tabs.children) == 2 and all(isinstance(child, view) for child in tabs.children), what
        assert tabs.titles == tuple(f"{i}: {ck.name}" for i, ck in enumerate(split.launches))
        assert "gemm_split_k_reduce_64x256" in tabs.to_html()
    assert all(len(child.children) == 3 for child in widgets.show(split).children)


def test_show_rejects_what_it_cannot_view() -> None:
    with pytest.raises(ValueError, match="what: expected one of"):
        widgets.show(fixture_kernel(), "ptx")
    with pytest.raises(TypeError, match="obj: expected a Trace, a Kernel or a CompiledKernel, got int"):
        widgets.show(42)
    with pytest.raises(AttributeError):
        widgets.NoSuchView  # noqa: B018


@pytest.mark.parametrize("name", ["timeline", "sass_view", "smem_view", "ir_view"])
def test_front_end_files_are_self_contained(name: str) -> None:
    """No imports, no fetched URLs: the views must work offline in any frontend."""
    from mgpu_lab.widgets.esm import view_module

    source = view_module(name)  # the view with the shared helpers, as anywidget loads it
    assert "export default" in source
    assert not re.search(r"^\s*import\s", source, re.MULTILINE)
    assert not re.search(r"\bimport\(", source) and "fetch(" not in source
    urls = set(re.findall(r"https?://[^\s\"'`)]+", source))
    assert urls <= {"https://ui.perfetto.dev"}, urls  # opened only when the user asks
    css = (WIDGET_DIR / "widgets.css").read_text()
    assert "url(" not in css and "@import" not in css


@pytest.mark.skipif(
    importlib.util.find_spec("nbclient") is None or importlib.util.find_spec("ipykernel") is None,
    reason="executing the notebook needs nbclient and ipykernel (pip install 'mgpu_lab[dev]')",
)
def test_executed_notebook_carries_static_html_beside_each_widget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What nbconvert and GitHub render: every widget output also has a text/html fallback."""
    import os

    import nbformat
    from nbclient import NotebookClient

    # The kernel imports this checkout and the fixtures, wherever pytest was started from.
    repo = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH", "")])))
    monkeypatch.setenv("MGPU_LAB_WIDGET_FIXTURES", str(FIXTURES))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    widget_cells = [cell for cell in nb.cells if cell.cell_type == "code" and any(
        WIDGET_MIME in o.get("data", {}) for o in cell.outputs)]
    assert len(widget_cells) == 4
    for cell in widget_cells:
        # Static rendering first, on its own (the timeline's picture after it, an image output);
        # the widget last, with nothing a reader shows.
        static, *pictures, widget = cell.outputs
        assert WIDGET_MIME not in static.data and static.data["text/html"].strip()
        assert 'data-mgl-static="' in static.data["text/html"]
        assert all(set(p.data) == {"image/png", "text/plain"} for p in pictures)
        assert f'data-mgl-static-pictures="{len(pictures)}"' in static.data["text/html"]
        assert set(widget.data) == {WIDGET_MIME, "text/plain"} and widget.data["text/plain"] == ""
        assert "mgpu_lab" in widget.metadata  # the mark the server extension's pre-save hook reads
    assert sum(len(cell.outputs) == 3 for cell in widget_cells) == 1  # the timeline has its picture
    html = "".join(cell.outputs[0].data["text/html"] for cell in widget_cells)
    for expected in ("mainloop", "HGMMA.64x8x16.F32.BF16", "8-way bank conflict", "convert-gpu-to-nvvm"):
        assert expected in html
