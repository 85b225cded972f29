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
from mgpu_lab.widgets.sass_parse import SassLine, sass_line_info

_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+")

SourceLine = tuple[str, int]  # (file, 0-based line)


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
    """PTX instruction line index -> (file, 0-based line), from `.file` / `.loc` directives."""
    files: dict[int, str] = {}
    current: SourceLine | None = None
    out: dict[int, SourceLine] = {}
    for i, line in enumerate(ptx.splitlines()):
        if m := _PTX_FILE.match(line):
            files[int(m[1])] = m[2]
        elif m := _PTX_LOC.match(line):
            number = int(m[2])
            # Line 0 is "no location" in DWARF; file ids without a .file are not ours to guess.
            current = (files[int(m[1])], number - 1) if number and int(m[1]) in files else None
        elif current is not None and _is_ptx_instruction(line):
            out[i] = current
        elif line.strip() == "}":
            current = None  # a function ends; the next one starts without a location
    return out


def _is_ptx_instruction(line: str) -> bool:
    s = line.strip()
    return bool(s) and s.endswith(";") and not s.startswith((".", "//", "{", "}"))


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
