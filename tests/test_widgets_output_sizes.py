"""Viewer outputs stay small: every output of the worked notebooks, and the GEMM's viewers.

A GEMM built with `keep_passes=True` carries 13 MB of pass-by-pass IR; before the static
renderings were capped its IR output alone was 15 MB. The goal is <= 1 MB per output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MB = 1024 * 1024
EXECUTED = sorted((Path(__file__).parent.parent / "notebooks" / "executed").glob("*.ipynb"))


@pytest.mark.parametrize("path", EXECUTED, ids=[p.name for p in EXECUTED])
def test_no_output_of_an_executed_notebook_exceeds_1_mb(path: Path) -> None:
    notebook = json.loads(path.read_text())
    for index, cell in enumerate(notebook["cells"]):
        for output in cell.get("outputs", []):
            size = len(json.dumps(output))
            assert size <= MB, f"{path.name} cell {index}: a {output['output_type']} output of {size / MB:.1f} MB"


def test_the_executed_notebooks_are_there() -> None:
    assert len(EXECUTED) >= 4


def test_gemm_viewers_with_every_pass_stay_under_1_mb() -> None:
    pytest.importorskip("anywidget")
    from mgpu_lab.kernels.gemm import make_gemm
    from mgpu_lab.profiler.trace import Trace
    from mgpu_lab.widgets import IrView, SassView, SmemView, Timeline

    kernel = make_gemm(4096, 4096, 4096, transpose_b=True, keep_passes=True, profile=True).compiled
    assert sum(len(text) for _, text in kernel.passes) > 5 * MB  # the case that used to blow up
    trace = Trace.load(Path(__file__).parent.parent / "benchmarks" / "results" / "gemm_8192_trace_sample.npz")
    for view in (SassView(kernel), SmemView(kernel), IrView(kernel), Timeline(trace)):
        static = json.dumps(view.static_bundle())
        assert len(static) <= MB, f"{type(view).__name__}: static output of {len(static) / MB:.1f} MB"
        state = view.get_state()
        synced = sum(len(v) if isinstance(v, (bytes, memoryview)) else len(json.dumps(v)) for v in state.values())
        assert synced <= MB, f"{type(view).__name__}: widget state of {synced / MB:.1f} MB"


def test_the_executed_notebooks_carry_no_widget_state() -> None:
    """The saved copies keep static outputs only: a live timeline's state is every event (27 MB
    for notebook 05), and a widget view without its state renders as an error."""
    for path in EXECUTED:
        notebook = json.loads(path.read_text())
        assert "widgets" not in notebook["metadata"], path.name
        views = [o for c in notebook["cells"] for o in c.get("outputs", [])
                 if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        assert not views, path.name


def test_execute_notebook_strips_widget_state_and_views_but_keeps_static_outputs() -> None:
    import importlib.util

    nbformat = pytest.importorskip("nbformat")
    script = Path(__file__).parent.parent / "scripts" / "execute_notebook.py"
    spec = importlib.util.spec_from_file_location("execute_notebook", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("show(trace)")
    static = nbformat.v4.new_output("display_data", data={"text/html": "<svg/>", "text/plain": "<Timeline>"})
    view = nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "m1", "version_major": 2, "version_minor": 0},
        "text/plain": "Timeline(...)"})
    cell.outputs = [static, view, nbformat.v4.new_output("stream", name="stdout", text="done\n")]
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), cell]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {"m1": {"state": {}}}}}
    assert module.strip_widgets(nb) == 1
    assert "widgets" not in nb.metadata
    assert [o.get("data", {}).get("text/html") for o in nb.cells[1].outputs] == ["<svg/>", None]
    assert nb.cells[1].outputs[1].text == "done\n"
