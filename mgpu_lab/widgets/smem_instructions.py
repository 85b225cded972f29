"""The kernel's own shared-memory instructions (LDS, STS, LDSM, STSM), as bank-view choices.

From the SASS we know each instruction's width (`LDS.128`: 16 bytes a lane) and kind (LDSM is
`ldmatrix`: 16-byte rows, eight lanes a phase). Which address each lane gives lives in a
register computed by the kernel's index arithmetic, which this view does not evaluate; so an
instruction's lane pattern is "unknown", with the reason, never a pattern guessed from its
opcode (a column read `LDS R9, [R6]` of an unpadded transpose is a 32-way conflict that a
"consecutive lanes" guess would call conflict-free).
"""

from __future__ import annotations

from dataclasses import dataclass

from mgpu_lab.widgets.sass_parse import code_instructions, parse_sass

_WIDTHS = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "32": 4, "64": 8, "128": 16}
SMEM_MNEMONICS = ("LDS", "STS", "LDSM", "STSM")

UNKNOWN = "unknown"
NOT_DERIVED = "lane addresses not derived: the pattern depends on index arithmetic this view does not evaluate"


@dataclass(frozen=True)
class SmemInstruction:
    """One shared-memory instruction of the listing and what is known of its access."""

    line: int  # 0-based SASS line
    text: str
    opcode: str
    width: int  # bytes per lane
    pattern: str = UNKNOWN  # the lane pattern: "unknown" unless derived from the kernel's addresses
    why: str = NOT_DERIVED  # why the pattern is unknown ("" once it is derived)


def smem_instructions(sass: str) -> list[SmemInstruction]:
    """LDS/STS/LDSM/STSM instructions of a listing, in order."""
    out = []
    for ln in code_instructions(parse_sass(sass)):
        if ln.mnemonic in ("LDSM", "STSM"):
            width = 16  # ldmatrix / stmatrix rows are 16 bytes
        elif ln.mnemonic in ("LDS", "STS"):
            mods = ln.opcode.split(".")[1:]
            width = next((_WIDTHS[m] for m in mods if m in _WIDTHS), 4)
        else:
            continue
        text = ln.text.strip()
        out.append(SmemInstruction(ln.index, text[text.index("*/") + 2 :].strip() if "*/" in text else text, ln.opcode, width))
    return out
