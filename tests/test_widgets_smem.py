"""Shared-memory address map, bank grid and SmemView's Python side (no browser)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "widgets"))
from widget_fixtures import fixture_kernel, fixture_smem_layout

from mgpu_lab.compiler.compiled_kernel import SmemBuffer
from mgpu_lab.widgets.bank_grid import bank_grid, pattern_index_limit, vector_choices
from mgpu_lab.widgets.smem_map import address_map, alignment_of, total_bytes


def test_union_members_get_separate_lanes() -> None:
    entries = {e.buffer.path: e for e in address_map(fixture_smem_layout())}
    assert entries["epilogue.acc"].lane != entries["epilogue.acc_f32"].lane
    assert {entries[p].lane for p in ("a_stages", "b_stages", "barriers", "profiler")} == {0}
    assert total_bytes(list(entries.values())) == 32800 + 2016
    assert total_bytes(list(entries.values()), dynamic_smem_bytes=40000) == 40000


def test_warnings_for_misaligned_swizzle_and_bad_shapes() -> None:
    (entry,) = address_map([SmemBuffer("x", 512, 8192, (64, 64), "bfloat16", swizzle=128)])
    assert "not a multiple of 1024" in entry.warnings[0]
    (entry,) = address_map([SmemBuffer("y", 0, 1024, (64, 64), "bfloat16")])
    assert "needs 8192 B" in entry.warnings[0]
    (entry,) = address_map([SmemBuffer("z", 0, 128, (64,), "bfloat16", swizzle=16)])
    assert "not a TMA/WGMMA mode" in entry.warnings[0]
    assert alignment_of(0) == 1024 and alignment_of(96) == 32 and alignment_of(4096) == 1024


def test_bank_grid_labels_follow_the_swizzle() -> None:
    a_stages = fixture_smem_layout()[0]  # 2 x 64 x 64 bf16, 128-byte swizzle at offset 0
    grid = bank_grid(a_stages, "column", 0, 16)
    assert grid.first_line == 0 and len(grid.labels) == 32
    # Line 1 holds row 1; its logical chunk c sits in physical chunk c ^ 1.
    assert grid.labels[1][:4] == ["1,8", "1,10", "1,12", "1,14"]
    assert grid.chunks[1][:8] == [1, 1, 1, 1, 0, 0, 0, 0]
    # Column 0 of rows 0..31: each row's chunk 0 is in a different bank group, 1 thread per word.
    assert len(grid.hits) == 4 * 32 and {ways for ways, _ in grid.hits.values()} == {1}
    assert grid.summary().endswith("conflict-free, 4 wavefronts (the minimum)")


def test_bank_grid_window_follows_the_access() -> None:
    a_stages = fixture_smem_layout()[0]
    grid = bank_grid(a_stages, "row", 100, 16)
    assert grid.first_line == 96  # the 1024-byte atom holding row 100
    assert all(line < 32 for line, _ in grid.hits)
    assert bank_grid(a_stages, "row", 10_000, 16).index == 127  # clamped to the last row


def test_unswizzled_fragment_store_is_8_way() -> None:
    acc = fixture_smem_layout()[2]
    grid = bank_grid(acc, "fragment", 0, 4)
    assert grid.report.max_way == 8 and grid.report.wavefronts == 8
    assert sorted(grid.hits)[:4] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert "8-way bank conflict, 8 wavefronts instead of 1" in grid.summary()


def test_choices_for_a_buffer() -> None:
    layout = fixture_smem_layout()
    assert vector_choices(layout[0]) == [2, 4, 8, 16]
    assert vector_choices(layout[4]) == [8, 16]  # uint64 barriers
    assert pattern_index_limit(layout[0], "fragment") == 16 * 8 - 1  # 128 rows x 64 cols in 8x8 tiles
    with pytest.raises(ValueError, match="unknown access pattern"):
        bank_grid(layout[0], "diagonal", 0, 4)


def test_smem_view_recomputes_on_choice() -> None:
    from mgpu_lab.widgets import SmemView

    view = SmemView(fixture_kernel(), buffer="epilogue.acc", pattern="fragment")
    assert view.buffers[view.buffer]["path"] == "epilogue.acc"
    assert view.grid["max_way"] == 8 and len(view.grid["hits"]) == 32
    view.pattern = "row"
    assert "conflict-free" in view.conflict_summary and view.grid["pattern"] == "row"
    view.buffer = 0
    view.pattern = "fragment"
    assert view.grid["path"] == "a_stages" and view.grid["max_way"] == 1
    view.pattern = "column"
    view.vector_bytes = 3  # not a width bf16 can use: corrected to a valid one
    assert view.vector_bytes in view.grid["vector_choices"] and view.grid["vector_bytes"] == view.vector_bytes
    view.index = 10_000
    assert view.index == view.grid["index_limit"] == 63
    with pytest.raises(KeyError, match="no shared-memory buffer"):
        SmemView(fixture_kernel(), buffer="nope")


def test_smem_static_outputs(tmp_path: Path) -> None:
    from mgpu_lab.widgets import SmemView

    view = SmemView(fixture_kernel(), buffer="epilogue.acc", pattern="fragment")
    html = view.static_bundle()["text/html"]
    assert "epilogue.acc_f32" in html and "8-way bank conflict" in html and "profiler" in html
    assert view.save(tmp_path / "smem.png").read_bytes()[:4] == b"\x89PNG"
    assert "Banks of epilogue.acc" in view.save(tmp_path / "smem.html").read_text()


def test_kernel_without_shared_memory() -> None:
    from dataclasses import replace

    from mgpu_lab.widgets import SmemView

    kernel = fixture_kernel()
    view = SmemView(replace(kernel, spec=replace(kernel.spec, smem_layout=(), dynamic_smem_bytes=0)))
    assert view.grid == {} and view.conflict_summary == "no shared memory"
    assert "Shared memory" in view.to_html()
