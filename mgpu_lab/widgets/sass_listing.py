"""What the SASS viewer shows, computed once from a `CompiledKernel`.

Source files are numbered; a source line is referred to as (file index, 0-based line) so the
browser gets small integer pairs rather than repeated path strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mgpu_lab.widgets.line_xref import (
    LineXref,
    attribute_hgmma,
    build_xref,
    derive_spans,
    match_source_file,
)
from mgpu_lab.compiler.disassemble import LiveCounts, life_ranges
from mgpu_lab.errors import ToolchainError
from mgpu_lab.widgets.region_lines import region_source_lines
from mgpu_lab.widgets.resource_report import resource_rows
from mgpu_lab.widgets.sass_parse import (
    KEY_CLASSES,
    SassLine,
    branch_targets,
    code_instructions,
    instruction_mix,
    is_scaffolding,
    key_class,
    opcode_counts,
    parse_sass,
)
from mgpu_lab.widgets.source_names import display_file_name


@dataclass(frozen=True)
class SassListing:
    """Parsed SASS with its cross references to source and PTX lines."""

    name: str
    lines: tuple[SassLine, ...]
    ptx_lines: tuple[str, ...]
    files: tuple[str, ...]  # source files as the line map names them, index = file id
    file_labels: tuple[str, ...]  # what the viewers print for each file ("Cell In[3]", "gemm.py")
    file_texts: tuple[tuple[str, ...], ...]  # lines of each file ("" list when not available)
    sass_source: tuple[tuple[int, int] | None, ...]  # per SASS line: (file id, line) or None
    source_keys: tuple[tuple[int, int], ...]  # every source line with generated code
    source_sass: tuple[tuple[int, ...], ...]  # per source key: its SASS lines
    source_ptx: tuple[tuple[int, ...], ...]  # per source key: its PTX lines
    mix: tuple[tuple[str, int], ...]
    opcodes: tuple[tuple[str, int], ...]
    resources: tuple[tuple[str, str, str], ...]
    line_info_derived: bool  # True when the map came from the listings, not the compiler
    scaffolding: tuple[bool, ...]  # per SASS line: nvdisasm's own line (hidden by default)
    line_class: tuple[str, ...]  # per SASS line: its KEY_CLASSES name, or ""
    source_class_counts: tuple[tuple[int, ...], ...]  # per source key: count per KEY_CLASSES
    region_sass: dict[str, tuple[int, ...]]  # named region -> SASS lines of its source lines
    ptx_source: tuple[int, ...] = ()  # per PTX line: index into source_keys, -1 for none
    branch_target: tuple[int, ...] = ()  # per SASS line: line of the label it jumps to, -1 for none
    live_registers: tuple[int, ...] = ()  # per SASS line: live GPRs there (nvdisasm), -1 off code
    live_note: str = ""  # why there is no live-register column, when there is none

    @property
    def live_peak(self) -> tuple[int, ...]:
        """SASS lines where the most registers are live (the register-pressure peak)."""
        top = max(self.live_registers, default=-1)
        return tuple(i for i, n in enumerate(self.live_registers) if n == top) if top > 0 else ()

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
    spans = attribute_hgmma(spans, kernel.ptx or "", lines)
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
    code = {ln.index for ln in code_instructions(lines)}
    line_class = tuple(key_class(ln.mnemonic) if ln.index in code else "" for ln in lines)
    class_names = [name for name, _ in KEY_CLASSES]
    class_counts = tuple(
        tuple(sum(1 for s in sass if 0 <= s < len(lines) and line_class[s] == name) for name in class_names)
        for sass in xref.source_to_sass.values()
    )
    sass_source: list[tuple[int, int] | None] = [None] * len(lines)
    for s, srcs in xref.sass_to_source.items():
        if 0 <= s < len(lines):
            f, line = srcs[0]  # an instruction has one line in nvdisasm's table
            sass_source[s] = (file_id[f], line)
    # Line-info file names may spell a sources key differently (see match_source_file).
    spellings: dict[str, list[str]] = {}
    for name in xref.files:
        spellings.setdefault(match_source_file(name, sources) or name, []).append(name)
    region_sass = {
        region: tuple(sorted({
            s for key, line in places for f in spellings.get(key, ()) for s in xref.source_to_sass.get((f, line), ())
        }))
        for region, places in region_source_lines(sources).items()
    }
    ptx_lines = tuple((kernel.ptx or "").splitlines())
    key_index = {key: k for k, key in enumerate(xref.source_to_sass)}
    ptx_key = [-1] * len(ptx_lines)
    for key, ptx in xref.source_to_ptx.items():
        for p in ptx:
            if 0 <= p < len(ptx_key) and key in key_index:
                ptx_key[p] = key_index[key]
    targets = branch_targets(lines)
    live, live_note = live_register_column(kernel, lines)
    return SassListing(
        name=kernel.name,
        lines=lines,
        ptx_lines=ptx_lines,
        files=tuple(files),
        file_labels=tuple(display_file_name(f) for f in files),
        file_texts=tuple(texts),
        sass_source=tuple(sass_source),
        source_keys=keys,
        source_sass=tuple(xref.source_to_sass[k] for k in xref.source_to_sass),
        source_ptx=tuple(xref.source_to_ptx.get(k, ()) for k in xref.source_to_sass),
        mix=tuple(instruction_mix(lines)),
        opcodes=tuple(opcode_counts(lines)),
        resources=tuple(resource_rows(kernel)),
        line_info_derived=derived,
        scaffolding=tuple(is_scaffolding(ln) for ln in lines),
        line_class=line_class,
        source_class_counts=class_counts,
        region_sass=region_sass,
        ptx_source=tuple(ptx_key),
        branch_target=tuple(targets.get(i, -1) for i in range(len(lines))),
        live_registers=live,
        live_note=live_note,
    )


def kernel_life_ranges(kernel: Any) -> dict[tuple[str, int], LiveCounts]:
    """nvdisasm's live register counts of `kernel.cubin`, computed once per disassembly.

    Kept as a plain attribute of the (frozen) `Disassembly` rather than a field of it, so
    compiling never pays for it and saved kernels do not change shape; a new disassembly
    (another compile) starts without one."""
    wait = getattr(kernel, "wait_disassembly", None)
    if wait is None:  # a kernel-like object from elsewhere: nothing to keep it on
        return life_ranges(kernel.cubin)
    disassembly = wait()
    cached = getattr(disassembly, "_mgl_life_ranges", None)
    if cached is None:
        cached = life_ranges(kernel.cubin)
        object.__setattr__(disassembly, "_mgl_life_ranges", cached)
    return cached


def live_register_column(kernel: Any, lines: tuple[SassLine, ...]) -> tuple[tuple[int, ...], str]:
    """Per SASS line: live GPRs at that instruction (-1 elsewhere), and a note when unknown."""
    if not getattr(kernel, "cubin", b""):
        return (), "no cubin: live registers unknown"
    try:
        ranges = kernel_life_ranges(kernel)
    except ToolchainError as err:
        return (), f"live registers unknown ({str(err).splitlines()[0]})"
    section, column = "", []
    for ln in lines:
        if ln.kind == "directive" and ln.text.strip().startswith(".section"):
            section = ln.text.split()[1].split(",")[0]
        counts = ranges.get((section, ln.address)) if ln.address is not None else None
        column.append(counts[0] if counts else -1)
    return tuple(column), ""
