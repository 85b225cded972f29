"""`SmemView`: a kernel's shared-memory address map and, for one buffer, its banks.

The map shows every buffer (Union members on separate lanes, barriers and the profiler
buffer included). Picking a buffer shows which logical element sits in each bank of each
128-byte line under the buffer's swizzle. Picking one of the kernel's own LDS/STS/LDSM/STSM
shows the words its lanes touch and its wavefronts, from the addresses the kernel's own index
arithmetic gives (`smem_instructions`, evaluated from the SASS for block 0), or says that they
are unknown and why, with no made-up answer; a TMA or WGMMA instruction says what its operands
tell (address, descriptor swizzle) and why it has no wavefront count. Picking a hypothetical
access instead (a row, a column, a WGMMA accumulator fragment, an ldmatrix tile; only those
the kernel's SASS and the buffer's dtype allow, `smem_patterns`) shows which words that warp
access would touch, coloured by bank conflict. The bank arithmetic runs here in Python
(`bank_model`); the browser sends the choice and draws the grid it gets back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget
import traitlets

from mgpu_lab.user_errors import user_facing
from mgpu_lab.widgets.bank_grid import (
    BankGrid,
    bank_grid,
    pattern_index_limit,
    vector_choices,
)
from mgpu_lab.widgets.esm import view_module
from mgpu_lab.widgets.fallback import StaticFallback
from mgpu_lab.widgets.palette import CHUNK_COLORS, KIND_COLORS, conflict_color
from mgpu_lab.widgets.smem_instructions import DERIVED, UNKNOWN, SmemInstruction, smem_instructions
from mgpu_lab.widgets.smem_patterns import hypothetical_patterns, hypothetical_widths, kernel_accesses
from mgpu_lab.widgets.smem_map import UNNAMED_NOTE, address_map, total_bytes
from mgpu_lab.widgets.static_smem import smem_figure, smem_html
from mgpu_lab.widgets.view_inputs import compiled_for_view

HERE = Path(__file__).parent


class SmemView(StaticFallback, anywidget.AnyWidget):
    """Shared-memory viewer of a `CompiledKernel`: `SmemView(kernel)`.

    Synced choices (settable from Python too): `buffer` (index into `buffers`), `pattern`
    (one of `patterns`: hypothetical "row", "column", and "fragment" / "ldmatrix" where the
    SASS has WGMMA / ldmatrix; "unknown" while `instruction` picks a kernel instruction),
    `index` (row, column or tile), `vector_bytes` (bytes each thread accesses; fixed for
    "fragment" and "ldmatrix"). `grid` holds the resulting bank grid and `conflict_summary`
    its one-line verdict.
    """

    _esm = view_module("smem_view")
    _css = HERE / "widgets.css"

    title = traitlets.Unicode("").tag(sync=True)
    total_bytes = traitlets.Int(0).tag(sync=True)
    buffers = traitlets.List().tag(sync=True)
    chunk_colors = traitlets.List(traitlets.Unicode(), default_value=list(CHUNK_COLORS)).tag(sync=True)
    conflict_colors = traitlets.List(traitlets.Unicode()).tag(sync=True)  # index: ways - 1, capped
    patterns = traitlets.List(traitlets.Unicode()).tag(sync=True)  # the hypothetical ones offered

    buffer = traitlets.Int(0).tag(sync=True)
    pattern = traitlets.Unicode("column").tag(sync=True)
    index = traitlets.Int(0).tag(sync=True)
    vector_bytes = traitlets.Int(16).tag(sync=True)

    grid = traitlets.Dict().tag(sync=True)
    conflict_summary = traitlets.Unicode("").tag(sync=True)
    # The kernel's LDS/STS/LDSM/STSM, TMA and WGMMA: [{line, text, opcode, width, pattern, why,
    # kind, wavefronts, max_way, detail}]; `instruction` is the one the bank view describes (-1: a
    # hypothetical pattern chosen by hand).
    instructions = traitlets.List().tag(sync=True)
    unnamed_note = traitlets.Unicode("").tag(sync=True)  # set when some buffer has no name
    instruction = traitlets.Int(-1).tag(sync=True)

    @user_facing
    def __init__(self, kernel: Any, buffer: str | int | None = None, pattern: str = "column", **kwargs: Any) -> None:
        kernel = compiled_for_view(kernel, "SmemView")
        self.entries = address_map(kernel.smem_layout)
        self._bank_grid: BankGrid | None = None
        self._instructions = smem_instructions(kernel.sass or "", getattr(kernel, "block", None), getattr(kernel, "grid", None))
        self._kernel_accesses = kernel_accesses(kernel.sass or "", self._instructions)
        buffers = [
            {
                "path": e.buffer.path,
                "named": e.named,
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
                "vector_choices": self._widths(e.buffer),
            }
            for e in self.entries
        ]
        super().__init__(
            title=kernel.name,
            patterns=hypothetical_patterns(self._kernel_accesses),
            unnamed_note=UNNAMED_NOTE if any(not e.named for e in self.entries) else "",
            instructions=[
                {"line": i.line, "text": i.text, "opcode": i.opcode, "width": i.width, "pattern": i.pattern, "why": i.why,
                 "kind": i.kind, "wavefronts": i.wavefronts, "max_way": i.max_way, "detail": i.detail}
                for i in self._instructions
            ],
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

    def _widths(self, buf: Any) -> list[int]:
        """Per-thread widths offered for a buffer (barriers and the profiler buffer: any)."""
        return hypothetical_widths(buf, self._kernel_accesses) if buf.kind == "buffer" else vector_choices(buf)

    @traitlets.observe("buffer", "pattern", "index", "vector_bytes")
    def _on_choice(self, change: Any) -> None:
        if change["name"] == "pattern" and change["new"] not in (UNKNOWN, DERIVED) and self.instruction >= 0:
            self.set_trait("instruction", -1)  # a hand-picked pattern replaces the instruction
        self._update_grid()

    @traitlets.observe("instruction")
    def _on_instruction(self, change: Any) -> None:
        if 0 <= change["new"] < len(self._instructions):
            chosen = self._instructions[change["new"]]
            with self.hold_trait_notifications():
                home = self._buffer_of(chosen)
                if home is not None:
                    self.set_trait("buffer", home)
                self.set_trait("pattern", chosen.pattern)
                self.set_trait("vector_bytes", chosen.width or self.vector_bytes)
        elif self.pattern in (UNKNOWN, DERIVED):
            self.set_trait("pattern", self.patterns[0])
        self._update_grid()

    def _update_grid(self) -> None:
        if not self.entries:
            self.grid, self.conflict_summary, self._bank_grid = {}, "no shared memory", None
            return
        buf = self.entries[min(max(self.buffer, 0), len(self.entries) - 1)].buffer
        if buf.kind != "buffer":
            # mbarriers are 8-byte words driven by the barrier unit, the profiler buffer is
            # written by one thread per unit: no warp-wide access to analyse.
            what = "mbarriers" if buf.kind == "barrier" else f"the {buf.kind} buffer"
            self.conflict_summary = f"{buf.path}: {what}, no bank analysis"
            if self.pattern in (UNKNOWN, DERIVED) and 0 <= self.instruction < len(self._instructions):
                chosen = self._instructions[self.instruction]
                verb = "writes" if chosen.text.startswith("ST") else "reads"
                self.conflict_summary = f"{chosen.text.rstrip(' ;')}: {verb} {self.conflict_summary}"
            self.grid, self._bank_grid = {"path": buf.path, "kind": buf.kind, "summary": self.conflict_summary}, None
            return
        if self.pattern in (UNKNOWN, DERIVED) and 0 <= self.instruction < len(self._instructions):
            chosen = self._instructions[self.instruction]
            if chosen.derived:
                self._show_derived(buf, chosen)
            else:
                self._show_unknown(buf, chosen)
            return
        pattern = self.pattern if self.pattern in self.patterns else ("column" if "column" in self.patterns else self.patterns[0])
        choices = self._widths(buf)
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
        self._publish(bank_grid(buf, pattern, index, width), choices, limit)

    def _show_unknown(self, buf: Any, chosen: SmemInstruction) -> None:
        """The buffer's layout with no touched words, and why the instruction's access is unknown."""
        if chosen.kind == "lsu":
            note = f"{chosen.text.rstrip(' ;')}: {chosen.width} B a lane; access pattern unknown ({chosen.why})"
        else:
            note = f"{chosen.text.rstrip(' ;')}: {chosen.detail}; wavefronts unknown ({chosen.why})"
        self._publish(bank_grid(buf, UNKNOWN, 0, chosen.width or 4, note=note), self._widths(buf), 0)

    def _show_derived(self, buf: Any, chosen: SmemInstruction) -> None:
        """The words the instruction's lanes touch in this buffer, with its wavefronts."""
        note = chosen.text.rstrip(" ;")
        if chosen.varies:
            note += f" (first of {chosen.executions} executions; their mean is {chosen.wavefronts:.2f} wavefronts)"
        inside = [a for a in chosen.accesses() if buf.offset <= a.address < buf.offset + buf.nbytes]
        if not inside:
            self.conflict_summary = f"{note}: touches no element of {buf.path}"
            self._publish(bank_grid(buf, UNKNOWN, 0, chosen.width, note=self.conflict_summary), self._widths(buf), 0)
            return
        # The conflicts are the whole instruction's (all its lanes), drawn on this buffer's lines.
        self._publish(bank_grid(buf, DERIVED, 0, chosen.width, note=note, accesses=chosen.accesses()), self._widths(buf), 0)

    def _buffer_of(self, chosen: SmemInstruction) -> int | None:
        """Index of the buffer (plain first, then barriers and the profiler's) holding the
        instruction's first lane address, if derived."""
        first = next((a for a in chosen.lanes if a is not None), None)
        if first is None:
            return None
        holding = [k for k, e in enumerate(self.entries) if e.buffer.offset <= first < e.buffer.offset + e.buffer.nbytes]
        holding.sort(key=lambda k: self.entries[k].buffer.kind != "buffer")  # a union's plain view first
        return holding[0] if holding else None

    def _publish(self, grid: BankGrid, choices: list[int], limit: int) -> None:
        """Send a grid to the browser (and keep it for the static views)."""
        buf, pattern, width = grid.buffer, grid.pattern, grid.vector_bytes
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
