"""cubin -> SASS with nvdisasm, and the map from user source lines to PTX and SASS lines."""

from __future__ import annotations

import linecache
import re
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

from ..errors import ToolchainError
from .compiled_kernel import SourceSpan
from .toolchain import find_tool


def disassemble(cubin: bytes) -> str:
    """nvdisasm's SASS of the code sections, with `//## File "...", line N` line info."""
    return _nvdisasm(cubin, "-c", "-g")


def _nvdisasm(cubin: bytes, *flags: str) -> str:
    """stdout of `nvdisasm <flags> kernel.cubin` (the tool reads files, not stdin)."""
    with tempfile.TemporaryDirectory(prefix="mgpu_lab_nvdisasm_") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        proc = subprocess.run([find_tool("nvdisasm"), *flags, str(path)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ToolchainError(f"nvdisasm {' '.join(flags)} failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
        return proc.stdout


# A quoted name may hold spaces (a %%mosaic cell is compiled as "Cell In[5]").
_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+(?:"([^"]*)"|([^"\s,]+))')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_SASS_LINE_INFO = re.compile(r'//## File "([^"]+)", line (\d+)')
_SASS_INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/")


def ptx_line_sources(ptx: str) -> dict[int, tuple[str, int]]:
    """0-based PTX instruction line -> (file, 1-based source line), from .loc directives."""
    lines = ptx.splitlines()
    files = {}
    for text in lines:
        m = _PTX_FILE.match(text)
        if m:
            files[m.group(1)] = m.group(2) if m.group(2) is not None else m.group(3)
    result, current = {}, None
    for i, text in enumerate(lines):
        m = _PTX_LOC.match(text)
        if m:
            file = files.get(m.group(1))
            line = int(m.group(2))
            current = (file, line) if file and line > 0 else None
            continue
        stripped = text.strip()
        if current and stripped and not stripped.startswith((".", "//", "$", "{", "}")):
            result[i] = current
        if stripped == "}":
            current = None
    return result


def sass_line_sources(sass: str) -> dict[int, tuple[str, int]]:
    """0-based SASS instruction line -> (file, 1-based source line), from nvdisasm -g comments."""
    result, current = {}, None
    for i, text in enumerate(sass.splitlines()):
        m = _SASS_LINE_INFO.search(text)
        if m:
            current = (m.group(1), int(m.group(2)))
        elif current and _SASS_INSTR.search(text):
            result[i] = current
    return result


def build_line_map(ptx: str, sass: str) -> tuple[tuple[SourceSpan, ...], dict[str, str]]:
    """SourceSpans (0-based lines) for every user line that produced code, and the sources."""
    ptx_by_src: dict[tuple[str, int], list[int]] = defaultdict(list)
    sass_by_src: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, src in ptx_line_sources(ptx).items():
        ptx_by_src[src].append(i)
    for i, src in sass_line_sources(sass).items():
        sass_by_src[src].append(i)
    spans = tuple(
        SourceSpan(file, line - 1, tuple(ptx_by_src.get((file, line), ())),
                   tuple(sass_by_src.get((file, line), ())))
        for file, line in sorted(set(ptx_by_src) | set(sass_by_src))
    )
    sources = {}
    for span in spans:
        if span.file not in sources:
            text = "".join(linecache.getlines(span.file))
            if text:
                sources[span.file] = text
    return spans, sources


# nvdisasm -lrm count: "/*0b80*/  HGMMA ... ;  // |  67   |        |   14   |         |"
_LIFE_ROW = re.compile(r"/\*([0-9a-fA-F]+)\*/.*//\s*\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|\s*$")
_TEXT_SECTION = re.compile(r"^\s*\.section\s+(\.text\.[^\s,]+)")

LiveCounts = tuple[int, int, int, int]  # live GPR, predicate, uniform GPR, uniform predicate registers


def parse_life_ranges(text: str) -> dict[tuple[str, int], LiveCounts]:
    """(code section, instruction address) -> live register counts, from `nvdisasm -lrm count`.

    A blank column is zero live registers of that kind."""
    out: dict[tuple[str, int], LiveCounts] = {}
    section = ""
    for line in text.splitlines():
        if m := _TEXT_SECTION.match(line):
            section = m.group(1)
        elif m := _LIFE_ROW.search(line):
            counts = tuple(int(c) if c.strip().isdigit() else 0 for c in m.groups()[1:])
            out[(section, int(m.group(1), 16))] = counts  # type: ignore[assignment]
    return out


def life_ranges(cubin: bytes) -> dict[tuple[str, int], LiveCounts]:
    """Live register counts per instruction of `cubin` (nvdisasm's register life ranges).

    A separate nvdisasm run (life ranges and line info do not mix in one listing), so it is
    asked for only when a viewer needs it, never during a compile."""
    return parse_life_ranges(_nvdisasm(cubin, "-c", "-lrm", "count"))
