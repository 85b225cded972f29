"""What the SASS viewer shows, computed once from a `CompiledKernel`.

Source files are numbered; a source line is referred to as (file index, 0-based line) so the
browser gets small integer pairs rather than repeated path strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mgpu_lab.widgets.line_xref import (
    LineXref,
    build_xref,
    derive_spans,
    match_source_file,
)
from mgpu_lab.widgets.resource_report import resource_rows
from mgpu_lab.widgets.sass_parse import (
    SassLine,
    instruction_mix,
    opcode_counts,
    parse_sass,
)


@dataclass(frozen=True)
class SassListing:
    """Parsed SASS with its cross references to source and PTX lines."""

    name: str
    lines: tuple[SassLine, ...]
    ptx_lines: tuple[str, ...]
    files: tuple[str, ...]  # display names of source files, index = file id
    file_texts: tuple[tuple[str, ...], ...]  # lines of each file ("" list when not available)
    sass_source: tuple[tuple[int, int] | None, ...]  # per SASS line: (file id, line) or None
    source_keys: tuple[tuple[int, int], ...]  # every source line with generated code
    source_sass: tuple[tuple[int, ...], ...]  # per source key: its SASS lines
    source_ptx: tuple[tuple[int, ...], ...]  # per source key: its PTX lines
    mix: tuple[tuple[str, int], ...]
    opcodes: tuple[tuple[str, int], ...]
    resources: tuple[tuple[str, str, str], ...]
    line_info_derived: bool  # True when the map came from the listings, not the compiler

    def source_text(self, file_id: int, line: int) -> str:
        """Text of 0-based `line` of source file `file_id` ("" when unavailable)."""
        texts = self.file_texts[file_id]
        return texts[line] if 0 <= line < len(texts) else ""


def build_listing(kernel: Any) -> SassListing:
    """Parse `kernel.sass` and index `kernel.line_map` (or derive one when it is empty)."""
    lines = parse_sass(kernel.sass or "")
    spans = tuple(kernel.line_map)
    derived = not spans
    if derived:
        spans = derive_spans(kernel.ptx or "", lines)
    xref: LineXref = build_xref(spans)

    sources: dict[str, str] = dict(kernel.sources or {})
    files: list[str] = []
    texts: list[tuple[str, ...]] = []
    file_id: dict[str, int] = {}
    for name in xref.files:
        key = match_source_file(name, sources)
        shown = key or name
        if shown not in file_id:
            file_id[shown] = len(files)
            files.append(shown)
            texts.append(tuple(sources[key].splitlines()) if key else ())
        file_id[name] = file_id[shown]

    keys = tuple((file_id[f], line) for f, line in xref.source_to_sass)
    sass_source: list[tuple[int, int] | None] = [None] * len(lines)
    for s, srcs in xref.sass_to_source.items():
        if 0 <= s < len(lines):
            f, line = srcs[0]  # an instruction has one line in nvdisasm's table
            sass_source[s] = (file_id[f], line)
    return SassListing(
        name=kernel.name,
        lines=lines,
        ptx_lines=tuple((kernel.ptx or "").splitlines()),
        files=tuple(files),
        file_texts=tuple(texts),
        sass_source=tuple(sass_source),
        source_keys=keys,
        source_sass=tuple(xref.source_to_sass[k] for k in xref.source_to_sass),
        source_ptx=tuple(xref.source_to_ptx.get(k, ()) for k in xref.source_to_sass),
        mix=tuple(instruction_mix(lines)),
        opcodes=tuple(opcode_counts(lines)),
        resources=tuple(resource_rows(kernel)),
        line_info_derived=derived,
    )
