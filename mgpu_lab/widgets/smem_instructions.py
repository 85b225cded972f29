"""The kernel's own shared-memory instructions, with the bank conflicts of the addresses they make.

LDS/STS/LDSM/STSM: `sass_lanes` evaluates the kernel's index arithmetic for the warps of block 0
(real control flow, loop iterations up to a step budget) and gives each execution's 32 lane byte
addresses; `bank_model.bank_conflicts` turns them into wavefronts (LDS.64: half-warp phases,
LDS.128 and ldmatrix rows: quarter-warp phases). An instruction whose addresses cannot be derived
(loaded or parameter-dependent indices, a data-dependent path, a predicate that is not known, an
opcode not modelled on the way) says "unknown" and why: never a pattern guessed from its opcode (a
column read `LDS R9, [R6]` of an unpadded transpose is a 32-way conflict that a "consecutive
lanes" guess would call conflict-free).

TMA (UTMALDG/UTMASTG) and WGMMA (HGMMA) operands are listed with what their registers tell (the
shared-memory address; for WGMMA the descriptor's start, strides and swizzle) but no wavefront
count: they are not lane accesses through the LSU that the bank-conflict counters count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mgpu_lab.widgets.bank_model import Access, bank_conflicts
from mgpu_lab.widgets.sass_lanes import Execution, Instruction, LaunchShape, Trace, evaluate
from mgpu_lab.widgets.sass_parse import code_instructions, parse_sass

_WIDTHS = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "32": 4, "64": 8, "128": 16}
SMEM_MNEMONICS = ("LDS", "STS", "LDSM", "STSM")
ASYNC_MNEMONICS = ("UTMALDG", "UTMASTG", "HGMMA")

UNKNOWN = "unknown"
DERIVED = "kernel"  # the pattern of an instruction whose lane addresses were derived
WINDOW_MASK = 0xFFFFFF  # shared-window offset; higher bits name the CTA of the cluster
RESERVED_SMEM = 0x400  # sm_90 reserves the first 1 KiB of a block's shared memory: dynamic smem starts here
NOT_DERIVED = "lane addresses not derived"
WGMMA_SWIZZLE = {0: "none", 1: "128 B", 2: "64 B", 3: "32 B"}


@dataclass(frozen=True)
class SmemInstruction:
    """One shared-memory instruction of the listing and what is known of its access.

    `pattern` is DERIVED when every execution the evaluation saw has known lane addresses (then
    `wavefronts` is the mean wavefronts per execution, `lanes` the byte offsets, from the start
    of dynamic shared memory, of the first execution (None: lane inactive), `ideal_wavefronts` and
    `max_way` that execution's minimum and worst bank), else UNKNOWN with `why`.
    """

    line: int  # 0-based SASS line
    text: str
    opcode: str
    width: int  # bytes per lane
    pattern: str = UNKNOWN
    why: str = NOT_DERIVED
    address: int = 0  # the instruction's address in the listing
    kind: str = "lsu"  # "lsu" (LDS/STS/LDSM/STSM), "tma" or "wgmma"
    lanes: tuple[int | None, ...] = ()
    wavefronts: float | None = None
    ideal_wavefronts: int | None = None
    max_way: int | None = None
    executions: int = 0
    varies: bool = False  # executions differ in wavefronts (then `wavefronts` is their mean)
    detail: str = ""  # what the operands tell of a TMA / WGMMA access

    @property
    def derived(self) -> bool:
        """Whether the lane addresses (and so the wavefronts) come from the kernel's arithmetic."""
        return self.pattern == DERIVED

    def accesses(self) -> list[Access]:
        """The first derived execution's lane accesses (offsets into dynamic shared memory)."""
        return [Access(lane, a, self.width) for lane, a in enumerate(self.lanes) if a is not None] if self.derived else []


def access_width(opcode: str) -> int:
    """Bytes per lane of an LDS/STS (from `.U8`...`.128`) or ldmatrix row (16)."""
    mnemonic, *mods = opcode.split(".")
    if mnemonic in ("LDSM", "STSM"):
        return 16
    return next((_WIDTHS[m] for m in mods if m in _WIDTHS), 4)


def ldmatrix_count(opcode: str) -> int | None:
    """Matrices of an LDSM/STSM (`.x1`/`.x2`/`.x4`, spelled `.M88`, `.M88.2`, `.M88.4`), or None."""
    mods = opcode.split(".")[1:]
    if not any(m in ("M88", "MT88") for m in mods):
        return None
    last = mods[-1]
    return {"2": 2, "4": 4}.get(last, 1)


def _record(ins: Instruction) -> bool:
    return ins.mnemonic in SMEM_MNEMONICS or ins.mnemonic in ASYNC_MNEMONICS


def smem_instructions(sass: str, block: tuple[int, int, int] | None = None,
                      grid: tuple[int, int, int] | None = None) -> list[SmemInstruction]:
    """LDS/STS/LDSM/STSM, TMA and WGMMA instructions of a listing, in order, each with its derived
    bank answer or "unknown" and why. `block`/`grid`: the launch shape (the evaluation needs the
    block shape to know each lane's thread index; without it nothing is derived)."""
    lines = [ln for ln in code_instructions(parse_sass(sass))
             if ln.mnemonic in SMEM_MNEMONICS or ln.mnemonic in ASYNC_MNEMONICS]
    if not lines:
        return []
    trace = evaluate(sass, LaunchShape(tuple(block), tuple(grid) if grid else None), _record) if block else None
    out = []
    for ln in lines:
        text = ln.text.strip()
        text = text[text.index("*/") + 2 :].strip() if "*/" in text else text
        base = SmemInstruction(ln.index, text, ln.opcode, access_width(ln.opcode) if ln.mnemonic in SMEM_MNEMONICS else 0,
                               address=ln.address or 0,
                               kind="lsu" if ln.mnemonic in SMEM_MNEMONICS else ("wgmma" if ln.mnemonic == "HGMMA" else "tma"))
        if trace is None:
            out.append(_replace(base, why=f"{NOT_DERIVED}: the launch's block shape is not known"))
            continue
        executions = trace.executions.get(ln.index, [])
        if not executions:
            out.append(_replace(base, why=f"{NOT_DERIVED}: {_not_reached(trace)}"))
        elif base.kind == "lsu":
            out.append(_lsu(base, executions))
        else:
            out.append(_async(base, executions))
    return out


def _replace(base: SmemInstruction, **changes: object) -> SmemInstruction:
    from dataclasses import replace

    return replace(base, **changes)


def _not_reached(trace: Trace) -> str:
    stops = sorted({why for why in trace.stopped.values() if why})
    if not stops:
        return "block 0's warps never run it (other blocks may, on paths that depend on the block index)"
    return "the evaluation did not reach it: " + "; ".join(stops[:3])


def _lane_offsets(execution: Execution, lanes: np.ndarray) -> list[int | None]:
    """Byte offsets into dynamic shared memory (None for lanes not in `lanes`)."""
    assert execution.address is not None
    window = execution.address.values.astype(np.int64) & WINDOW_MASK
    return [int(a) - RESERVED_SMEM if on else None for a, on in zip(window, lanes)]


def _lsu(base: SmemInstruction, executions: list[Execution]) -> SmemInstruction:
    matrices = ldmatrix_count(base.opcode) if base.opcode.startswith(("LDSM", "STSM")) else None
    if base.opcode.startswith(("LDSM", "STSM")) and matrices is None:
        return _replace(base, executions=len(executions), why=f"{NOT_DERIVED}: the {base.opcode} form is not modelled")
    counts, first = [], None
    for ex in executions:
        why = _why_unknown(ex)
        if why:
            return _replace(base, executions=len(executions), why=f"{NOT_DERIVED}: {why}")
        lanes = ex.active.copy()
        if matrices is not None:
            # ldmatrix: lanes 8i..8i+7 give the 16-byte rows of matrix i; other lanes' addresses are unused.
            lanes &= np.arange(32) < 8 * matrices
        offsets = _lane_offsets(ex, lanes)
        report = bank_conflicts([Access(lane, a, base.width) for lane, a in enumerate(offsets) if a is not None])
        counts.append(report.wavefronts)
        if first is None:
            first = (offsets, report)
    assert first is not None
    offsets, report = first
    mean = float(np.mean(counts))
    return _replace(base, pattern=DERIVED, why="", lanes=tuple(offsets), wavefronts=mean,
                    ideal_wavefronts=report.ideal_wavefronts, max_way=report.max_way,
                    executions=len(executions), varies=len(set(counts)) > 1)


def _why_unknown(ex: Execution) -> str:
    if ex.why:
        return ex.why
    if ex.address is None:
        return "no memory operand"
    if not ex.active.any():
        return ""
    if not ex.address.known_on(ex.active):
        return ex.address.why or "an address register is not known"
    return ""


def _async(base: SmemInstruction, executions: list[Execution]) -> SmemInstruction:
    """TMA / WGMMA: what the registers say, and why there is no wavefront count."""
    ex = executions[0]
    lead = int(np.argmax(ex.active)) if ex.active.any() else 0
    if base.kind == "wgmma":
        parts = []
        operands = base.text.replace(",", " ").split()
        a_in_registers = len(operands) > 2 and operands[2].startswith("R")  # `HGMMA ... R24, R56, gdesc[...]`
        for op in operands:
            if op.startswith("gdesc[") and "]" in op:
                first = op[len("gdesc[") : op.index("]")]
                # gdesc[URn]: URn:URn+1 describe A (unused when A is in registers), URn+2:URn+3 B.
                names = [("B", _next(_next(first)))] if a_in_registers else [("A", first), ("B", _next(_next(first)))]
                parts += [_descriptor(operand, name, ex, lead) for operand, name in names]
        detail = "; ".join(parts) if parts else "operands from registers only"
        why = ("WGMMA reads shared memory through its descriptor, not through lane addresses; the tensor core's "
               "bank schedule is not documented, so no wavefront count")
        if ex.why:
            detail += f" (seen on a path that is not certain: {ex.why})"
        return _replace(base, detail=detail, why=why, executions=len(executions))
    address = ex.address
    if address is not None and address.known[lead]:
        offset = (int(address.values[lead]) & WINDOW_MASK) - RESERVED_SMEM
        detail = f"shared memory at offset {offset:#x}"
    else:
        detail = f"shared-memory address not known ({address.why if address is not None else 'no operand'})"
    why = ("TMA copies between global and shared memory in the copy engine (its swizzle is in the tensor map, a "
           "kernel parameter); it makes no lane accesses, so no wavefront count")
    return _replace(base, detail=detail, why=why, executions=len(executions))


def _descriptor(operand: str, name: str, ex: Execution, lead: int) -> str:
    """A WGMMA matrix descriptor in `name`:`name`+1, decoded (start, strides, swizzle)."""
    low, high = ex.reads.get(name), ex.reads.get(_next(name))
    if low is None or high is None or not (low.known[lead] and high.known[lead]):
        why = (low.why if low is not None and low.why else "") or (high.why if high is not None else "")
        return f"{operand} descriptor ({name}) not known: {why or 'not evaluated'}"
    desc = int(low.values[lead]) | (int(high.values[lead]) << 32)
    start = ((desc & 0x3FFF) << 4) - RESERVED_SMEM
    return (f"{operand} at offset {start:#x} (swizzle {WGMMA_SWIZZLE[(desc >> 62) & 3]}, leading byte offset "
            f"{((desc >> 16) & 0x3FFF) << 4}, stride byte offset {((desc >> 32) & 0x3FFF) << 4})")


def _next(name: str) -> str:
    prefix = name.rstrip("0123456789")
    return f"{prefix}{int(name[len(prefix):]) + 1}" if name[len(prefix):].isdigit() else name
