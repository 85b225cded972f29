"""The kernel's own shared-memory instructions (LDS, STS, LDSM, STSM), as bank-view access choices.

From the SASS we know each instruction's width (`LDS.128`: 16 bytes a lane) and kind (LDSM is
`ldmatrix`: 16-byte rows, eight lanes a phase). The per-lane addresses live in registers, so
the lane pattern is the one such an instruction is emitted for: consecutive lanes for
LDS/STS (a vectorized row-major access), the ldmatrix row order for LDSM/STSM.
"""

from __future__ import annotations

from dataclasses import dataclass

from mgpu_lab.widgets.sass_parse import code_instructions, parse_sass

_WIDTHS = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "32": 4, "64": 8, "128": 16}


@dataclass(frozen=True)
class SmemInstruction:
    """One shared-memory instruction of the listing and the access it stands for."""

    line: int  # 0-based SASS line
    text: str
    opcode: str
    width: int  # bytes per lane
    pattern: str  # bank-view access pattern: "row" (consecutive lanes) or "ldmatrix"


def smem_instructions(sass: str) -> list[SmemInstruction]:
    """LDS/STS/LDSM/STSM instructions of a listing, in order."""
    out = []
    for ln in code_instructions(parse_sass(sass)):
        if ln.mnemonic in ("LDSM", "STSM"):
            width, pattern = 16, "ldmatrix"
        elif ln.mnemonic in ("LDS", "STS"):
            mods = ln.opcode.split(".")[1:]
            width = next((_WIDTHS[m] for m in mods if m in _WIDTHS), 4)
            pattern = "row"
        else:
            continue
        text = ln.text.strip()
        out.append(SmemInstruction(ln.index, text[text.index("*/") + 2 :].strip() if "*/" in text else text, ln.opcode, width, pattern))
    return out
