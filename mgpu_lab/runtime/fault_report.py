"""Turning a kernel fault into a `KernelFaultError` that names the kernel, the CUDA error and,
where a `compute-sanitizer --tool memcheck` re-run can tell, the faulting SASS instruction and
the user's source line (through `CompiledKernel.line_map`).

The re-run launches the kernel once more in a throw-away process, on host copies of the
arrays (never the caller's memory), under the sanitizer; its report gives the program
counter of the faulting instruction (`at kernel+0x1c0`), which nvdisasm's listing
(`/*01c0*/`) and the line map turn into the user's line.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SANITIZER_TIMEOUT_S = 180.0
MAX_REPRO_BYTES = 1 << 30  # larger launches are not re-run (the host copies would be too big)

_REPORT_PREFIX = re.compile(r"^=+ ?")
_ERROR_HEAD = re.compile(r"^(Invalid __\w+__ (?:read|write|atomic)\b.*|Misaligned .*|Out-of-range .*|"
                         r"Malformed .*|Hardware exception .*|Warp .*|Barrier error.*|.*(?:trap|Trap).*)$")
# "at oob_write+0x90 in /u/k.py:42", "at compress(const unsigned int *, int)+0x4bd0", "at 0x90 in k.py:42"
_AT_PC = re.compile(r"^at (?:(?P<func>.+?)\+)?(?P<pc>0x[0-9a-fA-F]+)(?: in (?P<where>\S+))?")
_SASS_ADDRESS = re.compile(r"/\*([0-9a-fA-F]{4,})\*/")
_FILE_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?::[\w$.]+)?$")


@dataclass(frozen=True)
class SanitizerFinding:
    """The first error of a memcheck report."""

    error: str  # e.g. "Invalid __global__ write of size 4 bytes"
    pc: int | None  # offset of the faulting instruction in the kernel, as nvdisasm numbers it
    where: str | None  # "file:line" when the sanitizer printed one
    details: tuple[str, ...]  # the report's following lines (thread, block, address)


def parse_sanitizer_report(text: str) -> SanitizerFinding | None:
    """The first error block of compute-sanitizer output, or None when it found none."""
    lines = [_REPORT_PREFIX.sub("", ln).strip() for ln in text.splitlines() if ln.startswith("=")]
    for i, line in enumerate(lines):
        if not _ERROR_HEAD.match(line) or line.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY")):
            continue
        pc = where = None
        details = []
        for follow in lines[i + 1: i + 8]:
            if not follow or _ERROR_HEAD.match(follow):
                break
            m = _AT_PC.search(follow)
            if m and pc is None:
                pc = int(m.group("pc"), 16)
                where = _file_line(m.group("where"))
            elif not follow.startswith(("Saved host backtrace", "Host Frame")):
                details.append(follow)
        return SanitizerFinding(line, pc, where, tuple(details))
    return None


def _file_line(where: str | None) -> str | None:
    if not where:
        return None
    m = _FILE_LINE.match(where)
    return f"{m.group('file')}:{m.group('line')}" if m else None


def sass_instruction_at(sass: str, pc: int) -> tuple[int, str] | None:
    """(0-based line of the SASS listing, instruction text) of the instruction at offset `pc`."""
    for i, text in enumerate(sass.splitlines()):
        m = _SASS_ADDRESS.search(text)
        if m and int(m.group(1), 16) == pc:
            instruction = text[m.end():].strip().rstrip("*/ ").strip()
            return i, instruction.split("/*")[0].strip()
    return None


def source_line_of_sass_line(line_map: Any, sass_line: int) -> str | None:
    """The user's "file:line" that produced SASS line `sass_line` (0-based), from the line map."""
    for span in line_map:
        if sass_line in span.sass_lines:
            return f"{span.file}:{span.line + 1}"
    return None


def fault_message(kernel: str, cuda_error: str, detail: str, *, location: str | None = None,
                  sass: str | None = None, finding: SanitizerFinding | None = None, note: str | None = None) -> str:
    """The text of a KernelFaultError: kernel and CUDA error first, then where, then what to do."""
    lines = [f"kernel {kernel} faulted in the isolated worker: {cuda_error}" + (f" ({detail})" if detail else "")]
    if location or sass:
        at = f"  at {location}" if location else "  at an instruction with no source line"
        lines.append(at + (f": {sass}" if sass else ""))
    if finding is not None:
        lines.append(f"  compute-sanitizer: {finding.error}")
        lines += [f"    {d}" for d in finding.details[:4]]
    if note:
        lines.append(f"  ({note})")
    lines.append("The worker was restarted; this process's CUDA context is healthy and the next launch "
                 "runs in a fresh worker. Arrays passed to the kernel may hold partial results.")
    return "\n".join(lines)


def find_sanitizer() -> str | None:
    """Path of compute-sanitizer: $MGPU_LAB_COMPUTE_SANITIZER, else the toolchain lookup (the
    pip wheels, $CUDA_HOME/bin, /usr/local/cuda/bin, PATH); None when there is none."""
    import os

    from ..compiler.toolchain import find_tool
    from ..errors import ToolchainError

    override = os.environ.get("MGPU_LAB_COMPUTE_SANITIZER")
    if override:
        return override if os.access(override, os.X_OK) else None
    try:
        return find_tool("compute-sanitizer")
    except ToolchainError:
        return None


def run_sanitizer(payload: Any, host_arrays: list[Any], device: int, *, sanitizer: str,
                  timeout_s: float = SANITIZER_TIMEOUT_S) -> tuple[SanitizerFinding | None, str]:
    """Re-run one launch under memcheck in a throw-away process: (first finding, raw report)."""
    from .isolated_worker import save_repro
    from .worker_client import worker_env

    with tempfile.TemporaryDirectory(prefix="mgpu_lab_rerun_") as folder:
        save_repro(Path(folder), payload, host_arrays, device)
        # API errors (CuPy probing cuGetProcAddress) would use up the print limit before the
        # kernel's own fault is printed: report only device-side errors.
        command = [sanitizer, "--tool", "memcheck", "--report-api-errors", "no", "--print-limit", "4",
                   "--show-backtrace", "no",
                   sys.executable, "-m", "mgpu_lab.runtime.isolated_worker", "rerun", folder]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                                  env=worker_env())
        except subprocess.TimeoutExpired:
            return None, f"compute-sanitizer did not finish within {timeout_s:g} s"
        except OSError as e:
            return None, f"compute-sanitizer could not run: {e}"
    report = done.stdout + done.stderr
    return parse_sanitizer_report(report), report


def locate(compiled: Any, finding: SanitizerFinding | None) -> tuple[str | None, str | None]:
    """(user "file:line", SASS instruction) of a finding, from the compiled kernel's SASS and line map."""
    if finding is None:
        return None, None
    location, instruction = finding.where, None
    if finding.pc is not None:
        hit = sass_instruction_at(compiled.sass or "", finding.pc)
        if hit is not None:
            sass_line, instruction = hit
            location = source_line_of_sass_line(compiled.line_map, sass_line) or location
    return location, instruction
