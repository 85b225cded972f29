"""Cross references between source, PTX and SASS lines, for the SASS viewer.

The compiler records `CompiledKernel.line_map` (one `SourceSpan` per source line). When a
kernel has none (compiled without line info, or built by other tools), the spans are derived
from the listings themselves: PTX `.loc` directives and nvdisasm's `//## File` comments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from mgpu_lab.compiler.compiled_kernel import SourceSpan
from mgpu_lab.compiler.disassemble import ptx_line_sources
from mgpu_lab.widgets.sass_parse import SassLine, sass_line_info


SourceLine = tuple[str, int]  # (file, 0-based line)
_TEXT_SECTION = re.compile(r"^\s*\.section\s+\.text\.")  # one per function in nvdisasm's listing


@dataclass(frozen=True)
class LineXref:
    """Both directions of the source <-> SASS map, and SASS -> PTX through the source."""

    sass_to_source: dict[int, tuple[SourceLine, ...]] = field(default_factory=dict)
    source_to_sass: dict[SourceLine, tuple[int, ...]] = field(default_factory=dict)
    source_to_ptx: dict[SourceLine, tuple[int, ...]] = field(default_factory=dict)

    def ptx_for_sass(self, sass_line: int) -> tuple[int, ...]:
        """PTX lines generated from the source line(s) a SASS line came from."""
        lines: set[int] = set()
        for src in self.sass_to_source.get(sass_line, ()):
            lines.update(self.source_to_ptx.get(src, ()))
        return tuple(sorted(lines))

    @property
    def files(self) -> tuple[str, ...]:
        """Source files any span names, in first-seen order."""
        return tuple(dict.fromkeys(f for f, _ in self.source_to_sass))


def build_xref(spans: Iterable[SourceSpan]) -> LineXref:
    """Index spans both ways; several spans of one source line are merged."""
    to_sass: dict[SourceLine, set[int]] = {}
    to_ptx: dict[SourceLine, set[int]] = {}
    for span in spans:
        key = (span.file, span.line)
        to_sass.setdefault(key, set()).update(span.sass_lines)
        to_ptx.setdefault(key, set()).update(span.ptx_lines)
    sass_to_source: dict[int, list[SourceLine]] = {}
    for key in sorted(to_sass):
        for s in to_sass[key]:
            sass_to_source.setdefault(s, []).append(key)
    return LineXref(
        sass_to_source={s: tuple(v) for s, v in sorted(sass_to_source.items())},
        source_to_sass={k: tuple(sorted(v)) for k, v in sorted(to_sass.items())},
        source_to_ptx={k: tuple(sorted(v)) for k, v in sorted(to_ptx.items())},
    )


def ptx_line_info(ptx: str) -> dict[int, SourceLine]:
    """PTX instruction line index -> (file, 0-based line), from `.file` / `.loc` directives.

    The compiler's reader, so both agree; it also finds `.file` directives that LLVM writes
    after the code they name."""
    return {i: (f, line - 1) for i, (f, line) in ptx_line_sources(ptx).items()}


def derive_spans(ptx: str, sass_lines: tuple[SassLine, ...]) -> tuple[SourceSpan, ...]:
    """`SourceSpan`s built from the PTX and SASS listings' own line info."""
    ptx_by_src: dict[SourceLine, list[int]] = {}
    for i, src in ptx_line_info(ptx).items():
        ptx_by_src.setdefault(src, []).append(i)
    sass_by_src: dict[SourceLine, list[int]] = {}
    for i, src in sass_line_info(sass_lines).items():
        sass_by_src.setdefault(src, []).append(i)
    keys = sorted(set(ptx_by_src) | set(sass_by_src))
    return tuple(
        SourceSpan(f, line, tuple(ptx_by_src.get((f, line), ())), tuple(sass_by_src.get((f, line), ())))
        for f, line in keys
    )


def match_source_file(name: str, sources: dict[str, str]) -> str | None:
    """The key of `sources` a line-info file name refers to: exact, else the same basename.

    Line info may carry an absolute path while `sources` was keyed by another spelling of it.
    """
    if name in sources:
        return name
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    matches = [k for k in sources if k.replace("\\", "/").rsplit("/", 1)[-1] == base]
    return matches[0] if len(matches) == 1 else None


def _is_wgmma_ptx(line: str) -> bool:
    return line.lstrip().startswith("wgmma.mma_async")


def attribute_hgmma(spans: tuple[SourceSpan, ...], ptx: str,
                    sass_lines: tuple[SassLine, ...]) -> tuple[SourceSpan, ...]:
    """`spans` with every HGMMA moved to the source line of the `wgmma` that issued it.

    ptxas's line table has one row per run of instructions after scheduling, and an HGMMA does
    not start a row of its own: one scheduled among the instructions of another line (the
    accumulator's store, the `wgmma_wait_group`, an index computation) inherits that line.
    The PTX keeps the truth: each `wgmma.mma_async` follows the `.loc` of its `wgmma` call.
    When the PTX has as many of them as the SASS has HGMMAs (one function) they pair up in
    order (ptxas issues them in program order); otherwise each misplaced HGMMA takes the line of the
    nearest earlier WARPGROUP.ARRIVE or HGMMA that sits on a `wgmma` line.
    """
    ptx_text = ptx.splitlines()
    issued = [src for i, src in sorted(ptx_line_info(ptx).items()) if _is_wgmma_ptx(ptx_text[i])]
    wgmma_lines = set(issued)
    hgmma = [ln.index for ln in sass_lines if ln.kind == "instruction" and ln.mnemonic == "HGMMA"]
    if not issued or not hgmma:
        return spans
    current: dict[int, SourceLine] = {s: (span.file, span.line) for span in spans for s in span.sass_lines}
    functions = sum(1 for ln in sass_lines if ln.kind == "directive" and _TEXT_SECTION.match(ln.text))
    if len(issued) == len(hgmma) and functions <= 1:  # several functions may be listed in another order
        wanted = dict(zip(hgmma, issued))
    else:
        wanted = {}
        anchor: SourceLine | None = None
        for ln in sass_lines:
            if ln.kind != "instruction" or not (ln.mnemonic == "HGMMA" or ln.opcode == "WARPGROUP.ARRIVE"):
                continue
            src = current.get(ln.index)
            if src in wgmma_lines:
                anchor = src
            elif ln.mnemonic == "HGMMA" and anchor is not None:
                wanted[ln.index] = anchor
    moved = {s: src for s, src in wanted.items() if current.get(s) != src}
    if not moved:
        return spans
    kept = tuple(
        SourceSpan(span.file, span.line, span.ptx_lines, tuple(s for s in span.sass_lines if s not in moved))
        for span in spans
    )
    added: dict[SourceLine, list[int]] = {}
    for s, src in sorted(moved.items()):
        added.setdefault(src, []).append(s)
    # build_xref merges these with the existing spans of the same source line.
    return kept + tuple(SourceSpan(f, line, (), tuple(v)) for (f, line), v in added.items())
