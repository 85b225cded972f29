"""Per-pass IR statistics, diffs and IrView's Python side (no browser)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

traitlets = pytest.importorskip("traitlets", reason="the widgets need the [notebook] extra")

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "widgets"))
from widget_fixtures import fixture_kernel

from mgpu_lab.widgets.ir_diff import pass_diff, pass_stats

PASSES = [("a", "x\ny\nz"), ("b", "x\nY\nz"), ("c", "x\nY\nz")]


def test_pass_stats_count_changed_lines() -> None:
    stats = pass_stats(PASSES)
    assert [(s.name, s.lines, s.added, s.removed, s.changed) for s in stats] == [
        ("a", 3, 3, 0, True),
        ("b", 3, 1, 1, True),
        ("c", 3, 0, 0, False),
    ]


def test_pass_diff_classifies_lines() -> None:
    assert pass_diff(PASSES, 1) == [("hunk", "@@ -1,3 +1,3 @@"), ("ctx", "x"), ("del", "y"), ("add", "Y"), ("ctx", "z")]
    assert pass_diff(PASSES, 2) == []
    assert [kind for kind, _ in pass_diff(PASSES, 0)] == ["hunk", "add", "add", "add"]


def test_real_pipeline_fixture() -> None:
    kernel = fixture_kernel()
    stats = pass_stats(kernel.passes)
    by_name = {s.name: s for s in stats}
    assert by_name["gpu.module(convert-gpu-to-nvvm)"].added > 10
    assert not by_name["gpu.module(cse)"].changed
    diff = pass_diff(kernel.passes, 2)
    assert any(kind == "add" and "llvm.func @scale" in text for kind, text in diff)
    assert any(kind == "del" and "gpu.func @scale" in text for kind, text in diff)


def test_ir_view_modes() -> None:
    from mgpu_lab.widgets import IrView

    view = IrView(fixture_kernel())
    assert view.selected == len(view.passes) - 1 and view.mode == "module"
    assert view.content[0] == ["text", "module attributes {gpu.container_module} {"]
    view.selected = 2
    view.mode = "diff"
    assert ["del", "    gpu.func @scale(%arg0: memref<128xf32>, %arg1: memref<128xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {"] in view.content
    assert view.diff(2).splitlines()[0].startswith("@@")
    view.selected = 4
    assert view.content == []  # cse changed nothing
    with pytest.raises(traitlets.TraitError, match="mode must be one of"):
        view.mode = "side-by-side"


def test_ir_static_outputs(tmp_path: Path) -> None:
    from mgpu_lab.widgets import IrView

    view = IrView(fixture_kernel())
    html = view.static_bundle()["text/html"]
    assert "gpu.module(convert-gpu-to-nvvm)" in html and "<details" in html and "unchanged" in html
    assert view.save(tmp_path / "ir.png").read_bytes()[:4] == b"\x89PNG"
    empty = IrView(replace(fixture_kernel(), passes=()))
    assert empty.content == [] and "no passes recorded" in empty.to_html()
