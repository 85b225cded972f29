"""PTX -> cubin with ptxas, and ptxas's resource report parsed into data."""

from __future__ import annotations

import linecache
import re
import subprocess
import tempfile
from pathlib import Path

from ..errors import PtxasError
from ..user_errors import describe_location
from .compiled_kernel import Resources
from .toolchain import find_tool


def assemble(ptx: str, target: str, opt_level: int, line_info: bool,
             extra_args: tuple[str, ...] = ()) -> tuple[bytes, str]:
    """Returns (cubin, ptxas -v log). Raises PtxasError with ptxas's own message on failure."""
    with tempfile.TemporaryDirectory(prefix="mgpu_lab_ptxas_") as tmp:
        src, out = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        cmd = [find_tool("ptxas"), f"-arch={target}", f"-O{opt_level}", "-v",
               "--warn-on-spills", *extra_args, str(src), "-o", str(out)]
        if line_info:
            cmd.insert(-3, "-lineinfo")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        log = (proc.stdout + proc.stderr).replace(str(src), "kernel.ptx")
        if proc.returncode != 0 or not out.exists():
            raise PtxasError(f"ptxas failed (exit {proc.returncode}) for {target}:\n{log.strip()}"
                             + _user_lines_of(log, ptx))
        return out.read_bytes(), log


_PTX_ERROR_LINE = re.compile(r"kernel\.ptx, line (\d+)")


def _user_lines_of(log: str, ptx: str) -> str:
    """The user source lines behind the PTX lines ptxas complains about."""
    from .disassemble import ptx_line_sources

    sources = ptx_line_sources(ptx)
    found = []
    for n in dict.fromkeys(int(m) for m in _PTX_ERROR_LINE.findall(log)):
        src = sources.get(n - 1)
        if src:
            text = linecache.getline(*src).strip()
            found.append(f"  PTX line {n} comes from {describe_location(*src)}" + (f"\n    {text}" if text else ""))
    return ("\n" + "\n".join(found)) if found else ""


_SERIALIZED = re.compile(r"\((C\d+)\) Potential Performance Loss: wgmma\.mma_async instructions are serialized "
                         r"due to (.*?) (?:in|for) the function '([^']*)'(?: in line (\d+))?\s*$", re.M)
_WGMMA = re.compile(r"^\s*wgmma\.mma_async\b")


def serialization_warnings(log: str, ptx: str) -> list[str]:
    """ptxas's 'wgmma serialized' notes (C75xx), each with the user line behind it.

    ptxas reports them as `info`, buried in the -v log; serialized WGMMAs can cost half of a
    GEMM's speed. The PTX line ptxas names (or, when it names none, the first wgmma) is
    mapped back to the user's source line through the PTX `.loc` directives."""
    from .disassemble import ptx_line_sources

    found = []
    sources = None
    for code, reason, function, line in _SERIALIZED.findall(log):
        sources = sources if sources is not None else ptx_line_sources(ptx)
        if line:
            src = sources.get(int(line) - 1)
        else:
            wgmma_lines = [i for i, text in enumerate(ptx.splitlines()) if _WGMMA.match(text)]
            src = next((sources[i] for i in wgmma_lines if i in sources), None)
        where = f" at {describe_location(*src)}" if src else ""
        text = linecache.getline(*src).strip() if src else ""
        found.append(f"ptxas serialized the wgmma instructions of kernel {function!r}{where} ({code}: {reason})"
                     + (f"\n    {text}" if text else ""))
    return found


_USED = re.compile(r"Used (\d+) registers")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_BARRIERS = re.compile(r"used (\d+) barriers")


def parse_resources(log: str, dynamic_smem_bytes: int) -> Resources:
    """Registers, smem, spills and stack frame from `ptxas -v` output."""
    def first(pattern: re.Pattern, default: tuple[int, ...]) -> tuple[int, ...]:
        m = pattern.search(log)
        return tuple(int(g) for g in m.groups()) if m else default

    (registers,) = first(_USED, (0,))
    frame, spill_st, spill_ld = first(_FRAME, (0, 0, 0))
    (smem,) = first(_SMEM, (0,))
    (cmem,) = first(_CMEM, (0,))
    (barriers,) = first(_BARRIERS, (0,))
    return Resources(registers=registers, static_smem_bytes=smem, dynamic_smem_bytes=dynamic_smem_bytes,
                     spill_stores_bytes=spill_st, spill_loads_bytes=spill_ld, stack_frame_bytes=frame,
                     const_bytes=cmem, barriers=barriers)
