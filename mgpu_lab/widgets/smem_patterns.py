"""Which hand-picked (hypothetical) warp accesses the shared-memory view offers for a kernel.

A hand-picked pattern is a "what if", not the kernel's access, so the view labels it
hypothetical and offers only the ones the kernel could make: row and column accesses of one
element a lane, or of a width the kernel's LDS/STS use (no 16-byte column of a float32 tile
unless the SASS has 16-byte shared accesses); the WGMMA accumulator fragment only when the
SASS has WGMMA (HGMMA); ldmatrix only when it has LDSM/STSM.
"""

from __future__ import annotations

from dataclasses import dataclass

from mgpu_lab.compiler.compiled_kernel import SmemBuffer, dtype_itemsize
from mgpu_lab.widgets.bank_grid import vector_choices
from mgpu_lab.widgets.sass_parse import code_instructions, parse_sass
from mgpu_lab.widgets.smem_instructions import SmemInstruction


@dataclass(frozen=True)
class KernelAccesses:
    """What the SASS says about the kind of shared-memory accesses the kernel makes."""

    widths: frozenset[int]  # bytes a lane of the kernel's LDS/STS
    wgmma: bool  # HGMMA present
    ldmatrix: bool  # LDSM/STSM present


def kernel_accesses(sass: str, instructions: list[SmemInstruction]) -> KernelAccesses:
    """Widths of the LDS/STS, and whether WGMMA and ldmatrix appear in the listing."""
    mnemonics = {ln.mnemonic for ln in code_instructions(parse_sass(sass))}
    return KernelAccesses(
        widths=frozenset(i.width for i in instructions if i.opcode.split(".")[0] in ("LDS", "STS")),
        wgmma="HGMMA" in mnemonics,
        ldmatrix=bool(mnemonics & {"LDSM", "STSM"}),
    )


def hypothetical_patterns(kernel: KernelAccesses) -> list[str]:
    """Patterns worth offering: row and column always, fragment and ldmatrix as the SASS allows."""
    out = ["row", "column"]
    if kernel.wgmma:
        out.append("fragment")
    if kernel.ldmatrix:
        out.append("ldmatrix")
    return out


def hypothetical_widths(buf: SmemBuffer, kernel: KernelAccesses) -> list[int]:
    """Bytes a lane for a row/column access: one element, or a width the kernel's LDS/STS use."""
    size = dtype_itemsize(buf.dtype)
    return [w for w in vector_choices(buf) if w == size or w in kernel.widths]
