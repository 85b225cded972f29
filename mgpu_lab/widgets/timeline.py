"""`Timeline`: the on-device trace of one launch as a zoomable notebook widget.

One row per (SM, slot, warpgroup or warp), see `timeline_layout`. The browser draws on a
canvas: wheel zooms around the pointer, drag pans, hover shows a region's name, block, start
and duration, checkboxes hide regions, and a table summarizes each region. The event columns
travel as binary buffers (`traitlets.Bytes`), not JSON lists: a million events are ~30 MB of
buffers instead of ~100 MB of JSON text, and the browser reads them as typed arrays directly.

Perfetto: "Save" builds a `.perfetto-trace` on the Python side on request and sends its
bytes to the browser as a download; "Open in Perfetto" opens ui.perfetto.dev and hands it
the same bytes with the postMessage handshake the Perfetto UI documents.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import anywidget
import numpy as np
import traitlets

from mgpu_lab.user_errors import user_facing
from mgpu_lab.widgets.esm import view_module
from mgpu_lab.widgets.fallback import StaticFallback
from mgpu_lab.widgets.palette import categorical
from mgpu_lab.widgets.static_timeline import (
    SUMMARY_HEADERS,
    summary_table_rows,
    timeline_figure,
    timeline_html,
    timeline_picture,
)
from mgpu_lab.widgets.timeline_layout import layout_trace, unit_abbreviation
from mgpu_lab.widgets.timeline_stats import event_span_ns
from mgpu_lab.widgets.view_inputs import trace_for_view

HERE = Path(__file__).parent


def _column(array: np.ndarray, dtype: str) -> bytes:
    """Little-endian bytes of a column, the layout JavaScript typed arrays read."""
    return np.ascontiguousarray(array, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


class Timeline(StaticFallback, anywidget.AnyWidget):
    """Zoomable timeline of a `mgpu_lab.profiler.trace.Trace`.

    `Timeline(trace)`; `view_range` ([t0, t1] ns, synced both ways) is the visible time
    range (it opens on the span that has events), `hidden_regions` the region names filtered
    out. Shares in the table are `Trace.summary()`'s (`profiler.summary`, which says over what). `save("t.png")` / `save("t.html")`
    write the static rendering of the current view, `save_perfetto(path)` a Perfetto trace.
    """

    _esm = view_module("timeline")
    _css = HERE / "widgets.css"

    title = traitlets.Unicode("").tag(sync=True)
    unit_kind = traitlets.Unicode("wg").tag(sync=True)
    region_names = traitlets.List(traitlets.Unicode()).tag(sync=True)
    region_colors = traitlets.List(traitlets.Unicode()).tag(sync=True)
    row_labels = traitlets.List(traitlets.Unicode()).tag(sync=True)
    units_per_block = traitlets.Int(1).tag(sync=True)
    duration_ns = traitlets.Float(0.0).tag(sync=True)
    height = traitlets.Int(420).tag(sync=True)
    view_range = traitlets.List(traitlets.Float(), default_value=[0.0, 0.0], minlen=2, maxlen=2).tag(sync=True)
    hidden_regions = traitlets.List(traitlets.Unicode()).tag(sync=True)
    summary_headers = traitlets.List(traitlets.Unicode(), default_value=list(SUMMARY_HEADERS)).tag(sync=True)
    summary_rows = traitlets.List(traitlets.List(traitlets.Unicode())).tag(sync=True)
    summary_shares = traitlets.List(traitlets.Float()).tag(sync=True)
    summary_note = traitlets.Unicode("").tag(sync=True)  # what the shares divide by
    notes = traitlets.List(traitlets.Unicode()).tag(sync=True)

    # Binary columns; see TimelineLayout for what each holds.
    _row_levels = traitlets.Bytes(b"").tag(sync=True)
    _row_sm = traitlets.Bytes(b"").tag(sync=True)
    _lane_row = traitlets.Bytes(b"").tag(sync=True)
    _lane_level = traitlets.Bytes(b"").tag(sync=True)
    _lane_offsets = traitlets.Bytes(b"").tag(sync=True)
    _lane_max_duration = traitlets.Bytes(b"").tag(sync=True)
    _start = traitlets.Bytes(b"").tag(sync=True)
    _end = traitlets.Bytes(b"").tag(sync=True)
    _region = traitlets.Bytes(b"").tag(sync=True)
    _block = traitlets.Bytes(b"").tag(sync=True)
    _flags = traitlets.Bytes(b"").tag(sync=True)
    _block_row = traitlets.Bytes(b"").tag(sync=True)
    _block_start = traitlets.Bytes(b"").tag(sync=True)
    _block_end = traitlets.Bytes(b"").tag(sync=True)
    _block_id = traitlets.Bytes(b"").tag(sync=True)

    @user_facing
    def __init__(self, trace: Any, title: str | None = None, height: int = 420, **kwargs: Any) -> None:
        trace = trace_for_view(trace, "Timeline")
        self.trace = trace
        self.lanes = layout_trace(trace)
        lay = self.lanes
        max_region = int(lay.region.max()) + 1 if len(lay.region) else 0
        names = [trace.region_name(i) for i in range(max(len(trace.region_names), max_region))]
        self._summary = trace.summary()
        # The bars' widths; NaN (no recorded unit time) is not JSON, so it draws as 0.
        self._shares = [0.0 if math.isnan(row["share"]) else float(row["share"]) for row in self._summary.rows]
        self._initial_view = event_span_ns(trace)
        notes = []
        if getattr(trace, "dropped", 0):
            notes.append(f"{trace.dropped} events were dropped: the profiler buffer was full")
        unbalanced = int(np.count_nonzero(lay.flags))
        if unbalanced:
            notes.append(f"{unbalanced} regions had no recorded end (drawn faded)")
        super().__init__(
            title=title if title is not None else (trace.kernel_name or "kernel"),
            unit_kind=unit_abbreviation(trace.unit_kind),
            region_names=names,
            region_colors=[categorical(i) for i in range(len(names))],
            row_labels=list(lay.row_labels),
            units_per_block=lay.units_per_block,
            duration_ns=lay.duration_ns,
            height=height,
            view_range=list(self._initial_view),
            summary_rows=summary_table_rows(self._summary),
            summary_shares=self._shares,
            summary_note=self._summary.share_note(),
            notes=notes,
            _row_levels=_column(lay.row_levels, "u4"),
            _row_sm=_column(lay.row_sm, "u4"),
            _lane_row=_column(lay.lane_row, "u4"),
            _lane_level=_column(lay.lane_level, "u4"),
            _lane_offsets=_column(lay.lane_offsets, "u4"),
            _lane_max_duration=_column(lay.lane_max_duration, "f8"),
            _start=_column(lay.start_ns, "f8"),
            _end=_column(lay.end_ns, "f8"),
            _region=_column(lay.region, "u4"),
            _block=_column(lay.block, "u4"),
            _flags=_column(lay.flags, "u1"),
            _block_row=_column(lay.block_row, "u4"),
            _block_start=_column(lay.block_start_ns, "f8"),
            _block_end=_column(lay.block_end_ns, "f8"),
            _block_id=_column(lay.block_id, "u4"),
            **kwargs,
        )
        self.on_msg(self._on_frontend_message)

    @property
    def static_title(self) -> str:  # type: ignore[override]
        return f"Timeline: {self.title}"

    # ---- Perfetto ----------------------------------------------------------------------

    def perfetto_bytes(self) -> bytes:
        """The trace as a Perfetto protobuf (what `Trace.save_perfetto` writes)."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.perfetto-trace"
            written = self.trace.save_perfetto(path)
            return Path(written or path).read_bytes()

    def save_perfetto(self, path: str | Path) -> Path:
        """Write the Perfetto trace to `path`."""
        return Path(self.trace.save_perfetto(Path(path)) or path)

    def _on_frontend_message(self, _widget: Any, content: dict[str, Any], _buffers: list[bytes]) -> None:
        if content.get("kind") != "perfetto":
            return
        purpose = content.get("purpose", "download")
        try:
            data = self.perfetto_bytes()
        except Exception as err:  # noqa: BLE001 - shown in the widget: a click, not code, asked for it
            self.send({"kind": "error", "purpose": purpose, "message": f"{type(err).__name__}: {err}"})
            return
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.title) or "trace"
        self.send(
            {"kind": "perfetto", "purpose": purpose, "filename": f"{name}.perfetto-trace", "title": self.title},
            buffers=[data],
        )

    # ---- static rendering --------------------------------------------------------------

    def _hidden_ids(self) -> list[int]:
        hidden = set(self.hidden_regions)
        return [i for i, n in enumerate(self.region_names) if n in hidden]

    def to_figure(self) -> Any:
        """The current view (zoom and region filter) as a matplotlib Figure."""
        t0, t1 = self.view_range
        return timeline_figure(self.lanes, self.region_names, self.title, self._hidden_ids(), (t0, t1))

    def to_html(self) -> str:
        """The rows with events over the span with events, and the region summary."""
        picture = timeline_picture(self.lanes, self.region_names, self._initial_view)
        return timeline_html(self.lanes, self.region_names, self._summary, self.title, self._initial_view, picture)

    def notebook_html(self) -> str:
        """`to_html()` without its picture, which the notebook shows as an image output."""
        return timeline_html(self.lanes, self.region_names, self._summary, self.title, self._initial_view)

    def static_pictures(self) -> list[tuple[str, bytes]]:
        """The timeline PNG (rows with events, legend drawn in), as an output of its own."""
        return [(f"timeline of {self.title}", timeline_picture(self.lanes, self.region_names, self._initial_view))]
