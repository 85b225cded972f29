"""`SmemView`: a kernel's shared-memory address map and, for one buffer, its banks.

The map shows every buffer (Union members on separate lanes, barriers and the profiler
buffer included). Picking a buffer, an access pattern (a row, a column, or a WGMMA
accumulator fragment), its index and the bytes per thread shows which logical element sits
in each bank of each 128-byte line under the buffer's swizzle, and which words the warp
touches, coloured by bank conflict. The bank arithmetic runs here in Python (`bank_model`);
the browser sends the choice and draws the grid it gets back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget
import traitlets

from mgpu_lab.widgets.bank_grid import (
    BankGrid,
    bank_grid,
    pattern_index_limit,
    vector_choices,
)
from mgpu_lab.widgets.bank_model import ACCESS_PATTERNS
from mgpu_lab.widgets.esm import view_module
from mgpu_lab.widgets.fallback import StaticFallback
from mgpu_lab.widgets.palette import CHUNK_COLORS, KIND_COLORS, conflict_color
from mgpu_lab.widgets.smem_map import address_map, total_bytes
from mgpu_lab.widgets.static_smem import smem_figure, smem_html

HERE = Path(__file__).parent


class SmemView(StaticFallback, anywidget.AnyWidget):
    """Shared-memory viewer of a `CompiledKernel`: `SmemView(kernel)`.

    Synced choices (settable from Python too): `buffer` (index into `buffers`), `pattern`
    ("row", "column" or "fragment"), `index` (row, column or 8x8 tile), `vector_bytes`
    (bytes each thread accesses; fixed at two elements for "fragment"). `grid` holds the
    resulting bank grid and `conflict_summary` its one-line verdict.
    """

    _esm = view_module("smem_view")
    _css = HERE / "widgets.css"

    title = traitlets.Unicode("").tag(sync=True)
    total_bytes = traitlets.Int(0).tag(sync=True)
    buffers = traitlets.List().tag(sync=True)
    chunk_colors = traitlets.List(traitlets.Unicode(), default_value=list(CHUNK_COLORS)).tag(sync=True)
    conflict_colors = traitlets.List(traitlets.Unicode()).tag(sync=True)  # index: ways - 1, capped
    patterns = traitlets.List(traitlets.Unicode(), default_value=list(ACCESS_PATTERNS)).tag(sync=True)

    buffer = traitlets.Int(0).tag(sync=True)
    pattern = traitlets.Unicode("column").tag(sync=True)
    index = traitlets.Int(0).tag(sync=True)
    vector_bytes = traitlets.Int(16).tag(sync=True)

    grid = traitlets.Dict().tag(sync=True)
    conflict_summary = traitlets.Unicode("").tag(sync=True)

    def __init__(self, kernel: Any, buffer: str | int | None = None, pattern: str = "column", **kwargs: Any) -> None:
        self.entries = address_map(kernel.smem_layout)
        self._bank_grid: BankGrid | None = None
        buffers = [
            {
                "path": e.buffer.path,
                "offset": e.buffer.offset,
                "nbytes": e.buffer.nbytes,
                "lane": e.lane,
                "kind": e.buffer.kind,
                "union": e.buffer.union,
                "swizzle": e.buffer.swizzle,
                "shape": list(e.buffer.shape),
                "dtype": e.buffer.dtype,
                "alignment": e.alignment,
                "color": KIND_COLORS.get(e.buffer.kind, "#888888"),
                "warnings": list(e.warnings),
                "vector_choices": vector_choices(e.buffer),
            }
            for e in self.entries
        ]
        super().__init__(
            title=kernel.name,
            total_bytes=total_bytes(self.entries, kernel.dynamic_smem_bytes),
            buffers=buffers,
            conflict_colors=[conflict_color(w) for w in range(1, 33)],
            pattern=pattern,
            buffer=self._buffer_index(buffer),
            **kwargs,
        )
        self._update_grid()

    def _buffer_index(self, buffer: str | int | None) -> int:
        """Index of a buffer named or numbered; by default the first plain buffer."""
        if isinstance(buffer, int):
            return buffer
        paths = [e.buffer.path for e in self.entries]
        if buffer is not None:
            if buffer not in paths:
                raise KeyError(f"no shared-memory buffer {buffer!r} (have: {', '.join(paths)})")
            return paths.index(buffer)
        kinds = [e.buffer.kind for e in self.entries]
        return kinds.index("buffer") if "buffer" in kinds else 0

    @traitlets.observe("buffer", "pattern", "index", "vector_bytes")
    def _on_choice(self, _change: Any) -> None:
        self._update_grid()

    def _update_grid(self) -> None:
        if not self.entries:
            self.grid, self.conflict_summary, self._bank_grid = {}, "no shared memory", None
            return
        buf = self.entries[min(max(self.buffer, 0), len(self.entries) - 1)].buffer
        pattern = self.pattern if self.pattern in ACCESS_PATTERNS else "column"
        choices = vector_choices(buf)
        # A width the dtype cannot use falls back to the nearest one it can.
        width = self.vector_bytes if self.vector_bytes in choices else min(choices, key=lambda w: abs(w - self.vector_bytes))
        limit = pattern_index_limit(buf, pattern)
        index = min(max(self.index, 0), limit)
        if (width, index, pattern) != (self.vector_bytes, self.index, self.pattern):
            # Show the corrected choice; the change re-enters here once with valid values.
            self.set_trait("vector_bytes", width)
            self.set_trait("index", index)
            self.set_trait("pattern", pattern)
            return
        grid = bank_grid(buf, pattern, index, width)
        self._bank_grid = grid
        self.grid = {
            "path": buf.path,
            "swizzle": buf.swizzle,
            "aligned": grid.geometry.aligned,
            "rows": grid.geometry.rows,
            "cols": grid.geometry.cols,
            "pattern": pattern,
            "index": grid.index,
            "index_limit": limit,
            "vector_bytes": grid.report.accesses[0].nbytes if grid.report.accesses else width,
            "vector_choices": choices,
            "first_line": grid.first_line,
            "labels": grid.labels,
            "chunks": grid.chunks,
            "hits": [[line, bank, ways, list(threads)] for (line, bank), (ways, threads) in sorted(grid.hits.items())],
            "wavefronts": grid.report.wavefronts,
            "ideal_wavefronts": grid.report.ideal_wavefronts,
            "max_way": grid.report.max_way,
            "summary": grid.summary(),
        }
        self.conflict_summary = grid.summary()

    @property
    def static_title(self) -> str:  # type: ignore[override]
        return f"Shared memory: {self.title}"

    def to_html(self) -> str:
        return smem_html(self.entries, self.total_bytes, self._bank_grid, self.title)

    def to_figure(self) -> Any:
        return smem_figure(self.entries, self.total_bytes, self._bank_grid, self.title)
