"""Timeline layout, binary payload, Perfetto messages and static rendering (no browser)."""

from __future__ import annotations

import base64
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "widgets"))
from widget_fixtures import large_trace, synthetic_trace

from mgpu_lab.profiler.trace import FLAG_CLOSED_AT_BLOCK_END, Trace
from mgpu_lab.widgets.static_timeline import rasterize
from mgpu_lab.widgets.timeline_layout import layout_trace


def _trace(**overrides: Any) -> Trace:
    """Two blocks on SM 5 that overlap in time, one warpgroup each, one region apiece."""
    fields: dict[str, Any] = {
        "sm": [5, 5],
        "block": [0, 1],
        "unit": [0, 0],
        "region": [0, 1],
        "start_ns": [10.0, 20.0],
        "end_ns": [50.0, 60.0],
        "depth": [0, 0],
        "region_names": ("a", "b"),
        "unit_kind": "warpgroup",
        "units_per_block": 1,
        "block_ids": [0, 1],
        "block_sm": [5, 5],
        "block_start_ns": [0.0, 15.0],
        "block_end_ns": [55.0, 65.0],
        "kernel_name": "k",
    }
    fields.update(overrides)
    return Trace(**{k: np.asarray(v) if isinstance(v, list) else v for k, v in fields.items()})


def test_layout_rows_lanes_and_order() -> None:
    trace = synthetic_trace(num_sms=4, waves=3, units=2, k_steps=3)
    lay = layout_trace(trace)
    assert lay.row_labels[:3] == ("SM 0 wg 0", "SM 0 wg 1", "SM 1 wg 0")
    assert lay.num_rows == 8  # waves run one after another: one slot per SM
    assert lay.row_levels.tolist() == [2] * 8  # mainloop at level 0, load/mma at level 1
    assert len(lay.start_ns) == trace.num_events
    for lane in range(len(lay.lane_row)):
        sl = lay.lane_slice(lane)
        start, end = lay.start_ns[sl], lay.end_ns[sl]
        assert np.all(np.diff(start) >= 0) and np.all(end[:-1] <= start[1:] + 1e-6)  # sorted, disjoint
        assert lay.lane_max_duration[lane] == pytest.approx((end - start).max())
    # Each block's first row is its SM's band.
    assert lay.block_row.tolist() == [2 * (b % 4) for b in range(12)]


def test_overlapping_blocks_on_one_sm_get_separate_slots() -> None:
    lay = layout_trace(_trace())
    assert lay.row_labels == ("SM 5 #0 wg 0", "SM 5 #1 wg 0")
    assert lay.block_row.tolist() == [0, 1]
    assert lay.lane_row.tolist() == [0, 1]


def test_event_of_an_unknown_block_lands_in_slot_0() -> None:
    lay = layout_trace(_trace(block=[0, 7]))
    assert lay.lane_row.tolist() == [0] and lay.lane_offsets.tolist() == [0, 2]
    assert lay.block.tolist() == [0, 7]


def test_rasterize_marks_covered_and_subpixel_events() -> None:
    trace = _trace(
        sm=[0, 0], block=[0, 0], region=[0, 1], start_ns=[0.0, 73.0], end_ns=[50.0, 73.5],
        block_ids=[0], block_sm=[0], block_start_ns=[0.0], block_end_ns=[100.0],
    )
    image = rasterize(layout_trace(trace), 0.0, 100.0, 10)
    assert image.tolist() == [[0, 0, 0, 0, 0, -1, -1, 1, -1, -1]]
    hidden = rasterize(layout_trace(trace), 0.0, 100.0, 10, hidden=[0])
    assert hidden.tolist() == [[-1] * 7 + [1, -1, -1]]


def test_timeline_sends_columns_as_binary_buffers() -> None:
    from mgpu_lab.widgets import Timeline

    trace = synthetic_trace()
    tl = Timeline(trace)
    lay = tl.lanes
    assert isinstance(tl._start, bytes)
    assert np.array_equal(np.frombuffer(tl._start, "<f8"), lay.start_ns)
    assert np.array_equal(np.frombuffer(tl._region, "<u4"), lay.region)
    assert np.array_equal(np.frombuffer(tl._lane_offsets, "<u4"), lay.lane_offsets)
    assert tl.region_names == list(trace.region_names) and len(tl.region_colors) == 4
    assert tl.view_range == [0.0, pytest.approx(trace.duration_ns)]
    assert [row[0] for row in tl.summary_rows] == [row["region"] for row in trace.summary().rows]
    # ipywidgets moves bytes values out of the JSON state into binary buffers.
    from ipywidgets.widgets.widget import _remove_buffers

    state, paths, buffers = _remove_buffers(tl.get_state())
    assert ["_start"] in paths and "_start" not in state
    assert sum(len(b) for b in buffers) >= len(tl._start) + len(tl._end)


def test_timeline_notes_unbalanced_and_dropped_events() -> None:
    from mgpu_lab.widgets import Timeline

    trace = _trace(flags=np.asarray([0, FLAG_CLOSED_AT_BLOCK_END], np.uint8), dropped_per_unit=np.asarray([[3], [0]]))
    notes = Timeline(trace).notes
    assert any("3 events were dropped" in n for n in notes)
    assert any("1 regions had no recorded end" in n for n in notes)


class _Sent:
    def __init__(self) -> None:
        self.messages: list[tuple[dict[str, Any], list[bytes] | None]] = []

    def __call__(self, content: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        self.messages.append((content, buffers))


def test_perfetto_request_answers_with_the_trace_bytes(tmp_path: Path) -> None:
    from mgpu_lab.widgets import Timeline

    trace = synthetic_trace()
    tl = Timeline(trace)
    sent = _Sent()
    tl.send = sent  # type: ignore[method-assign]
    tl._on_frontend_message(tl, {"kind": "perfetto", "purpose": "download"}, [])
    (content, buffers), = sent.messages
    expected = trace.save_perfetto(tmp_path / "t.perfetto-trace").read_bytes()
    assert content == {"kind": "perfetto", "purpose": "download", "filename": "gemm_tile.perfetto-trace", "title": "gemm_tile"}
    assert buffers == [expected]
    assert tl.save_perfetto(tmp_path / "again.perfetto-trace").read_bytes() == expected


def test_perfetto_failure_is_reported_to_the_browser() -> None:
    from mgpu_lab.widgets import Timeline

    class Broken(Trace):
        def save_perfetto(self, path: str | Path) -> Path:
            raise ImportError("perfetto is not installed")

    base = synthetic_trace()
    broken = Broken(**{k: getattr(base, k) for k in ("sm", "block", "unit", "region", "start_ns", "end_ns", "depth",
                                                     "block_ids", "block_sm", "block_start_ns", "block_end_ns")},
                    region_names=base.region_names, unit_kind="warpgroup", units_per_block=2)
    tl = Timeline(broken)
    sent = _Sent()
    tl.send = sent  # type: ignore[method-assign]
    tl._on_frontend_message(tl, {"kind": "perfetto", "purpose": "open"}, [])
    (content, buffers), = sent.messages
    assert content["kind"] == "error" and "perfetto is not installed" in content["message"] and buffers is None
    tl._on_frontend_message(tl, {"kind": "something else"}, [])
    assert len(sent.messages) == 1


def test_static_outputs(tmp_path: Path) -> None:
    from mgpu_lab.widgets import Timeline

    tl = Timeline(synthetic_trace())
    html_output, picture = tl.static_outputs()
    assert "application/vnd.jupyter.widget-view+json" not in html_output
    # The picture is an image output of its own (sanitizers strip <img> from HTML outputs).
    assert "<img" not in html_output["text/html"] and "mainloop" in html_output["text/html"]
    assert 'data-mgl-static-pictures="1"' in html_output["text/html"]
    assert base64.b64decode(picture["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert tl.to_html().count("<img") == 1  # a saved page keeps it inline
    tl.view_range = [0.0, 500.0]
    tl.hidden_regions = ["load"]
    png = tl.save(tmp_path / "timeline.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = tl.save(tmp_path / "timeline.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<img" in page and "epilogue" in page


def test_a_million_events_stay_binary_and_fast() -> None:
    from mgpu_lab.widgets import Timeline

    trace = large_trace(1_000_000)
    assert trace.num_events >= 1_000_000
    t0 = time.perf_counter()
    tl = Timeline(trace)
    elapsed = time.perf_counter() - t0
    payload = sum(len(getattr(tl, name)) for name in tl.trait_names() if name.startswith("_") and isinstance(getattr(tl, name), bytes))
    assert payload / trace.num_events < 40  # bytes per event, all in binary buffers
    assert len(tl.row_labels) == 264  # 132 SMs x 2 warpgroups
    assert elapsed < 10, f"building the widget took {elapsed:.1f}s"
