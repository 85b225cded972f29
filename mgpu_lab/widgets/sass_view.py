"""`SassView`: a kernel's SASS, coloured and searchable, tied to its source and PTX lines.

Clicking a SASS instruction selects the DSL source line it came from (and shows the PTX
generated from that line); clicking a source line highlights all its SASS instructions;
clicking a PTX line highlights its source line and that line's SASS. Keys in the listing:
up/down move the selection, n/N step through search hits, Enter follows a branch. Branch
targets are links, and a column shows the registers live at each instruction (nvdisasm's
life ranges) with the peak marked.
Beside the listing: the instruction mix by opcode family and the resource report.
The cross references are computed here and sent once; selection runs in the browser.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget
import traitlets

from mgpu_lab.user_errors import user_facing
from mgpu_lab.widgets.esm import view_module
from mgpu_lab.widgets.fallback import StaticFallback
from mgpu_lab.widgets.sass_listing import SassListing, build_listing
from mgpu_lab.widgets.sass_parse import KEY_CLASSES
from mgpu_lab.widgets.static_sass import sass_figure, sass_html
from mgpu_lab.widgets.view_inputs import compiled_for_view

HERE = Path(__file__).parent


class SassView(StaticFallback, anywidget.AnyWidget):
    """SASS viewer of a `CompiledKernel`: `SassView(kernel)`.

    Synced state: `selected_sass` (0-based SASS line, -1 for none), `selected_source`
    ([file id, 0-based line] or []), `search` (the search box text), `show_scaffolding`
    (nvdisasm's `//##` markers and directives, hidden by default), `selected_region` (a named
    region whose lines are highlighted; a slice clicked on a timeline of the kernel sets it). `select_source(line)`
    selects a 1-based line of the kernel's (first) source file from Python.
    """

    _esm = view_module("sass_view")
    _css = HERE / "widgets.css"

    title = traitlets.Unicode("").tag(sync=True)
    lines = traitlets.List().tag(sync=True)  # per SASS line: [[token class, text], ...]
    instruction = traitlets.List(traitlets.Bool()).tag(sync=True)  # per SASS line
    ptx_lines = traitlets.List(traitlets.Unicode()).tag(sync=True)
    files = traitlets.List(traitlets.Unicode()).tag(sync=True)
    file_texts = traitlets.List(traitlets.List(traitlets.Unicode())).tag(sync=True)
    sass_source = traitlets.List().tag(sync=True)  # per SASS line: [file, line] or None
    source_keys = traitlets.List().tag(sync=True)  # [[file, line], ...]
    source_sass = traitlets.List().tag(sync=True)  # per key: [SASS lines]
    source_ptx = traitlets.List().tag(sync=True)  # per key: [PTX lines]
    mix = traitlets.List().tag(sync=True)  # [[family, count], ...]
    opcodes = traitlets.List().tag(sync=True)  # [[mnemonic, count], ...]
    resources = traitlets.List().tag(sync=True)  # [[quantity, value, note], ...]
    notes = traitlets.List(traitlets.Unicode()).tag(sync=True)
    file_labels = traitlets.List(traitlets.Unicode()).tag(sync=True)  # "Cell In[3]", "gemm.py"
    scaffolding = traitlets.List(traitlets.Bool()).tag(sync=True)  # per SASS line: nvdisasm's own
    line_class = traitlets.List(traitlets.Unicode()).tag(sync=True)  # per SASS line: key class or ""
    key_classes = traitlets.List(traitlets.Unicode()).tag(sync=True)
    source_class_counts = traitlets.List().tag(sync=True)  # per source key: count per key class
    region_sass = traitlets.Dict().tag(sync=True)  # region name -> SASS lines
    ptx_source = traitlets.List(traitlets.Int()).tag(sync=True)  # per PTX line: source key or -1
    branch_target = traitlets.List(traitlets.Int()).tag(sync=True)  # per SASS line: label line or -1
    live_registers = traitlets.List(traitlets.Int()).tag(sync=True)  # per SASS line: live GPRs or -1
    live_peak = traitlets.List(traitlets.Int()).tag(sync=True)  # SASS lines at the most live GPRs
    show_scaffolding = traitlets.Bool(False).tag(sync=True)
    selected_region = traitlets.Unicode("").tag(sync=True)
    height = traitlets.Int(460).tag(sync=True)

    selected_sass = traitlets.Int(-1).tag(sync=True)
    selected_source = traitlets.List(traitlets.Int()).tag(sync=True)
    selected_ptx = traitlets.Int(-1).tag(sync=True)
    search = traitlets.Unicode("").tag(sync=True)

    @user_facing
    def __init__(self, kernel: Any, height: int = 460, **kwargs: Any) -> None:
        kernel = compiled_for_view(kernel, "SassView")
        self.listing: SassListing = build_listing(kernel)
        lst = self.listing
        notes = []
        if not lst.source_keys:
            notes.append("no line info: compile with line info to map SASS back to source")
        elif lst.line_info_derived:
            notes.append("line map derived from the PTX .loc and SASS line-info comments")
        missing = [f for f, text in zip(lst.files, lst.file_texts) if not text]
        if missing:
            notes.append("source text not available for: " + ", ".join(missing))
        if lst.live_note:
            notes.append(lst.live_note)
        super().__init__(
            title=lst.name,
            lines=[[list(tok) for tok in ln.tokens] for ln in lst.lines],
            instruction=[ln.kind == "instruction" for ln in lst.lines],
            ptx_lines=list(lst.ptx_lines),
            files=list(lst.files),
            file_texts=[list(t) for t in lst.file_texts],
            sass_source=[list(s) if s else None for s in lst.sass_source],
            source_keys=[list(k) for k in lst.source_keys],
            source_sass=[list(v) for v in lst.source_sass],
            source_ptx=[list(v) for v in lst.source_ptx],
            mix=[list(m) for m in lst.mix],
            opcodes=[list(m) for m in lst.opcodes],
            resources=[list(r) for r in lst.resources],
            notes=notes,
            file_labels=list(lst.file_labels),
            scaffolding=list(lst.scaffolding),
            line_class=list(lst.line_class),
            key_classes=[name for name, _ in KEY_CLASSES],
            source_class_counts=[list(c) for c in lst.source_class_counts],
            region_sass={k: list(v) for k, v in lst.region_sass.items()},
            ptx_source=list(lst.ptx_source),
            branch_target=list(lst.branch_target),
            live_registers=list(lst.live_registers),
            live_peak=list(lst.live_peak),
            height=height,
            **kwargs,
        )

    @property
    def static_title(self) -> str:  # type: ignore[override]
        return f"SASS: {self.title}"

    def select_source(self, line: int, file: int = 0) -> None:
        """Select 1-based `line` of source file `file` (highlights its SASS and PTX)."""
        self.selected_source = [file, line - 1]

    def select_ptx(self, line: int) -> None:
        """Select 1-based PTX `line`: its source line and that line's SASS light up."""
        k = self.ptx_source[line - 1] if 0 < line <= len(self.ptx_source) else -1
        self.selected_sass = -1
        self.selected_ptx = line - 1
        self.selected_source = list(self.source_keys[k]) if k >= 0 else []

    def sass_lines_of_ptx(self, line: int) -> list[int]:
        """0-based SASS lines from the source line that 1-based PTX `line` came from."""
        k = self.ptx_source[line - 1] if 0 < line <= len(self.ptx_source) else -1
        return list(self.source_sass[k]) if k >= 0 else []

    def sass_lines_of(self, line: int, file: int = 0) -> list[int]:
        """0-based SASS lines generated from 1-based source `line`."""
        key = (file, line - 1)
        return sorted({s for k, v in zip(self.listing.source_keys, self.listing.source_sass) if k == key for s in v})

    def to_html(self) -> str:
        return sass_html(self.listing)

    def to_figure(self) -> Any:
        return sass_figure(self.listing)
