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
    from mgpu_lab.examples.gemm import make_gemm
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
