"""Lane values of a warp, evaluated from the SASS listing: the addresses the kernel really makes.

The evaluator runs the integer arithmetic of one warp of block 0 (SR_TID from the block shape,
SR_CTAID = 0, SR_CgaCtaId = 0, SR_LANEID = lane), all 32 lanes at once, following the control
flow: branches whose predicate is known go where the lanes go (divergent lanes run as separate
groups, lowest address first, and merge when they meet, so loops run their real iterations up
to a step budget). Every value is a `Lanes`: 32 values and which of them are known, with the
reason for the unknown ones, which propagates through the arithmetic. Loads from memory, kernel
parameters, shuffles of unknown lanes, opcodes not modelled here: unknown, with that reason.

A branch whose predicate is not known (data-dependent) forks: both sides run as *uncertain*
groups, whose writes make registers unknown ("may or may not run") until the two halves meet
again; a loop whose exit is not known stops after its first uncertain pass. An instruction
run by an uncertain group, or under a predicate that is not known, is recorded as such, so a
consumer never mistakes "maybe" for what the kernel does.

A loop is followed for its first LOOP_ITERATIONS + 2 iterations: then the evaluation
leaves it, joining the state of the last two iterations, so a register that changes from one
iteration to the next is unknown after the loop ("changes between iterations") and one that did
not change keeps its value. This is the one heuristic step: a value that is the same in two
consecutive iterations is taken as the value after the loop. Accesses inside the loop are
recorded for the iterations followed.

A `SYNCS.PHASECHK...TRYWAIT` (an mbarrier wait) and a `USETMAXREG.TRY_ALLOC` are taken as
succeeding: their retry loops only repeat the attempt, and what follows is the same whatever the
number of tries.

It reads SASS text only (the hinge: widgets read CompiledKernel data, never the compiler).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from mgpu_lab.widgets.sass_operands import Operand, parse_operands
from mgpu_lab.widgets.sass_parse import SassLine, code_instructions, label_name, parse_sass

LANES = 32
MASK32 = 0xFFFFFFFF
ALL = np.ones(LANES, dtype=bool)
LANE_IDS = np.arange(LANES, dtype=np.uint64)
DEFAULT_STEP_BUDGET = 25_000  # instructions run, over all warps: a few seconds at most
LOOP_ITERATIONS = 2  # iterations of a loop followed before the evaluation leaves it (see the docstring)


@dataclass(frozen=True)
class Lanes:
    """A 32-bit register (or predicate: 0/1) in each of the 32 lanes, and which lanes are known."""

    values: np.ndarray  # uint64, each < 2**32
    known: np.ndarray  # bool
    why: str = ""  # why some lane is unknown ("" when all are known)

    @classmethod
    def const(cls, value: int) -> Lanes:
        """The same known value in every lane (shared: nothing writes a Lanes' arrays in place)."""
        value &= MASK32
        found = _CONSTANTS.get(value)
        if found is None:
            found = cls(np.full(LANES, value, dtype=np.uint64), ALL)
            if len(_CONSTANTS) < 4096:
                _CONSTANTS[value] = found
        return found

    @classmethod
    def of(cls, values: np.ndarray) -> Lanes:
        """Known per-lane values (reduced to 32 bits)."""
        return cls(np.asarray(values, dtype=np.uint64) & np.uint64(MASK32), ALL.copy())

    @classmethod
    def unknown(cls, why: str) -> Lanes:
        """No lane known, for `why`."""
        return cls(np.zeros(LANES, dtype=np.uint64), np.zeros(LANES, dtype=bool), why)

    def known_on(self, mask: np.ndarray) -> bool:
        """Whether every lane of `mask` is known."""
        return bool(self.known[mask].all())

    def signed(self) -> np.ndarray:
        """The values as signed 32-bit integers (int64 array)."""
        v = self.values.astype(np.int64)
        return np.where(v >= 1 << 31, v - (1 << 32), v)


_CONSTANTS: dict[int, Lanes] = {}


def _combine(values: np.ndarray, *sources: Lanes) -> Lanes:
    """A result: known where every source is known; the first unknown source's reason."""
    known = ALL.copy()
    why = ""
    for s in sources:
        known &= s.known
        if not why and not s.known.all():
            why = s.why
    return Lanes(np.asarray(values, dtype=np.uint64) & np.uint64(MASK32), known, why)


def _u(x: int | np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.uint64)


def lop3(a: np.ndarray, b: np.ndarray, c: np.ndarray, lut: int) -> np.ndarray:
    """Bitwise `LOP3.LUT`: bit i of `lut` is the result for (a, b, c) bits = (i>>2&1, i>>1&1, i&1)."""
    m = np.uint64(MASK32)
    out = np.zeros_like(a)
    for i in range(8):
        if lut >> i & 1:
            term = (a if i & 4 else ~a & m) & (b if i & 2 else ~b & m) & (c if i & 1 else ~c & m)
            out |= term
    return out & m


@dataclass(frozen=True)
class Instruction:
    """One instruction of the listing, parsed for evaluation."""

    line: int  # 0-based listing line
    address: int
    guard: Operand | None  # `@P0` / `@!UP1`
    opcode: str
    operands: tuple[Operand, ...]

    @property
    def mnemonic(self) -> str:
        """The opcode without modifiers."""
        return self.opcode.split(".", 1)[0]

    @property
    def mods(self) -> tuple[str, ...]:
        """The opcode's dotted modifiers."""
        return tuple(self.opcode.split(".")[1:])


def parse_program(sass: str) -> tuple[list[Instruction], dict[str, int]]:
    """The listing's instructions (padding NOPs dropped) and label name -> instruction index."""
    lines = parse_sass(sass)
    code = code_instructions(lines)
    code_lines = {ln.index for ln in code}
    program: list[Instruction] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    for ln in lines:
        if ln.kind == "label":
            pending.append(label_name(ln))
            continue
        if ln.index not in code_lines:
            continue
        for name in pending:
            labels[name] = len(program)
        pending = []
        program.append(_instruction(ln))
    for name in pending:
        labels[name] = len(program)
    return program, labels


def _instruction(ln: SassLine) -> Instruction:
    text = ln.text.split("*/", 1)[1] if "*/" in ln.text else ln.text
    text = text.strip()
    if ln.predicate:
        text = text[len(ln.predicate) :].strip()
    rest = text[len(ln.opcode) :]
    guard = parse_operands(ln.predicate.lstrip("@"))[0] if ln.predicate else None
    return Instruction(ln.index, ln.address or 0, guard, ln.opcode, parse_operands(rest))


@dataclass(frozen=True)
class LaunchShape:
    """What the evaluator assumes of the launch: the block shape (threads) and the grid."""

    block: tuple[int, int, int] = (32, 1, 1)
    grid: tuple[int, int, int] | None = None


@dataclass(frozen=True)
class Execution:
    """One execution of a recorded instruction by one warp (or group of its lanes).

    `active`: the lanes that ran it; `address`: the byte address each lane gives in its memory
    operand (the sum of the bracket's terms), or None if it has none; `reads`: the values of
    the registers it names (a `.64` or `gdesc[URn]` operand adds URn+1); `why`: "" when what
    ran is certain, else why not (a data-dependent branch or predicate).
    """

    warp: int
    active: np.ndarray
    address: Lanes | None
    reads: dict[str, Lanes]
    why: str = ""


@dataclass
class Trace:
    """What the evaluation saw: executions per recorded listing line, and why warps stopped."""

    executions: dict[int, list[Execution]] = field(default_factory=dict)
    stopped: dict[int, str] = field(default_factory=dict)  # warp -> why it stopped before EXIT ("" if not)
    warps: int = 0
    steps: int = 0


@dataclass
class _Group:
    """Lanes at one point of the program, with their own register file."""

    mask: np.ndarray
    regs: dict[str, Lanes]
    # The outcomes of data-dependent branches under which it runs: a union of cubes, each a set
    # of (fork, side); {frozenset()} (always) when its path is certain.
    forks: frozenset[frozenset[tuple[int, int]]] = frozenset({frozenset()})
    calls: tuple[int, ...] = ()  # return indices of the calls it is inside
    reason: str = ""  # why a value that differs where it meets another group is unknown

    def split(self, mask: np.ndarray, forks: frozenset[frozenset[tuple[int, int]]] | None = None) -> _Group:
        """The same point for `mask` only, with a register file of its own."""
        return _Group(mask, dict(self.regs), self.forks if forks is None else forks, self.calls, self.reason)


def _join(a: _Group, b: _Group) -> _Group:
    """Two groups meeting at one point: each lane keeps its group's values; a lane in both (the
    two sides of a data-dependent branch) keeps a value only where both sides agree."""
    only_a, only_b = a.mask & ~b.mask, b.mask & ~a.mask
    regs: dict[str, Lanes] = {}
    for name in a.regs.keys() | b.regs.keys():
        x, y = a.regs.get(name), b.regs.get(name)
        if x is y and x is not None:
            regs[name] = x
            continue
        x = x or Lanes.unknown(f"{name} is written on one path only")
        y = y or Lanes.unknown(f"{name} is written on one path only")
        values = np.where(only_b, y.values, x.values)
        agree = x.known & y.known & (x.values == y.values)
        known = np.where(only_a, x.known, np.where(only_b, y.known, agree))
        differs = a.reason or b.reason or "differs between the paths of a data-dependent branch"
        why = "" if known.all() else (x.why or y.why or f"{name} {differs}")
        regs[name] = Lanes(values.astype(np.uint64), known, why)
    return _Group(a.mask | b.mask, regs, _simplify(a.forks | b.forks), a.calls)


def _simplify(cubes: frozenset[frozenset[tuple[int, int]]]) -> frozenset[frozenset[tuple[int, int]]]:
    """Merge cubes that differ in one branch's side only, and drop cubes another one covers, so
    the sides of a data-dependent branch that have all met again leave no trace."""
    current = set(cubes)
    changed = True
    while changed:
        changed = False
        for x in list(current):
            for y in list(current):
                if x is y or x not in current or y not in current:
                    continue
                diff = x ^ y
                if len(diff) == 2 and len({f for f, _ in diff}) == 1:
                    current -= {x, y}
                    current.add(x & y)
                    changed = True
                elif x < y:
                    current.discard(y)
                    changed = True
    return frozenset(current)


def _extend(cubes: frozenset[frozenset[tuple[int, int]]], fork: int, side: int) -> frozenset[frozenset[tuple[int, int]]]:
    return frozenset(c | {(fork, side)} for c in cubes)


class _Halt(Exception):
    """The group cannot go on: its control flow is not known."""


_NO_DESTINATION = {
    "BAR", "BRA", "EXIT", "BSSY", "BSYNC", "WARPSYNC", "STS", "STG", "ST", "STL", "STSM", "RED", "REDG",
    "MEMBAR", "FENCE", "DEPBAR", "NOP", "YIELD", "NANOSLEEP", "UTMALDG", "UTMASTG", "UTMAPF", "UBLKCP",
    "UTMACMDFLUSH", "UTMACCTL", "ERRBAR", "CCTL", "WARPGROUP", "BPT", "KILL", "PMTRIG", "ACQBULK",
    "CGAERRBAR", "UCGABAR_ARV", "UCGABAR_WAIT", "CALL", "RET", "BREAK", "STAS",
}

# Uniform-datapath twins of the integer ops: same arithmetic on uniform registers.
_UNIFORM = {"UMOV": "MOV", "UIADD3": "IADD3", "UIMAD": "IMAD", "ULEA": "LEA", "ULOP3": "LOP3", "USHF": "SHF",
            "USEL": "SEL", "UPRMT": "PRMT", "USGXT": "SGXT", "UISETP": "ISETP", "UPLOP3": "PLOP3",
            "ULDC": "LDC", "UFLO": "FLO", "UPOPC": "POPC", "UBREV": "BREV", "UBMSK": "BMSK", "UIMNMX": "IMNMX"}

_SPECIAL_LANE_MASKS = {
    "SR_EQMASK": lambda l: _u(1) << l, "SR_LTMASK": lambda l: (_u(1) << l) - _u(1),
    "SR_LEMASK": lambda l: (_u(2) << l) - _u(1), "SR_GTMASK": lambda l: _u(MASK32) ^ ((_u(2) << l) - _u(1)),
    "SR_GEMASK": lambda l: _u(MASK32) ^ ((_u(1) << l) - _u(1)),
}


class WarpEvaluator:
    """Evaluates one warp of block 0 over a parsed program (see the module docstring)."""

    def __init__(self, program: list[Instruction], labels: dict[str, int], shape: LaunchShape, warp: int,
                 record: Callable[[Instruction], bool], trace: Trace) -> None:
        self.program, self.labels, self.shape, self.warp = program, labels, shape, warp
        self.record, self.trace = record, trace
        self.regs: dict[str, Lanes] = {}  # the register file of the group being run
        self.by_address = {ins.address: k for k, ins in enumerate(program)}
        bx, by, bz = shape.block
        linear = warp * LANES + LANE_IDS.astype(np.int64)
        self.present = linear < bx * by * bz  # lanes of a partial last warp do not exist
        self.tid = (linear % bx, linear // bx % by, linear // (bx * by) % bz)
        self.next_fork = 0
        self.fork_names: dict[int, int] = {}  # fork id -> address of its branch
        self.looping_forks: set[int] = set()
        self.iterations: dict[int, int] = {}  # back-edge index -> times every lane took it
        self.left_loops: set[int] = set()  # back-edges the evaluation stopped following

    # ---- reading operands ---------------------------------------------------------------
    def reg(self, name: str) -> Lanes:
        """A register's value (RZ/URZ: zero; PT/UPT: true; never written: unknown)."""
        if name in ("RZ", "URZ"):
            return Lanes.const(0)
        if name in ("PT", "UPT"):
            return Lanes.const(1)
        return self.regs.get(name) or Lanes.unknown(f"{name} is read before the evaluation saw it written")

    def read(self, op: Operand, carry: bool = False) -> Lanes:
        """An operand's 32-bit value; `-x` negates (two's complement, or `~x` with `carry`)."""
        if op.kind in ("reg", "ureg"):
            value = self.reg(op.name)
            if any(m in ("H0", "H1", "B0", "B1", "B2", "B3", "H1_H1", "F16", "F32") for m in op.mods):
                return Lanes.unknown(f"sub-register operand {op.text} is not modelled")
        elif op.kind == "pred":
            value = self.reg(op.name)
            return Lanes(value.values ^ _u(1) if op.inverted else value.values, value.known, value.why)
        elif op.kind == "imm":
            value = Lanes.const(op.value or 0)
        elif op.kind == "const":
            value = self.constant(op)
        elif op.kind == "sreg":
            value = self.special(op.name)
        else:
            return Lanes.unknown(f"operand {op.text} is not an integer this evaluator reads")
        v = value.values
        if op.absolute:
            s = value.signed()
            v = _u(np.abs(s))
        if op.inverted:
            v = ~v
        if op.negated:
            v = ~v if carry else (_u(0) - v)
        return Lanes(v & _u(MASK32), value.known, value.why)

    def read_pair(self, op: Operand) -> tuple[Lanes, Lanes]:
        """A 64-bit operand (register pair Rn:Rn+1, or an immediate, sign-extended)."""
        if op.kind in ("reg", "ureg"):
            if op.name in ("RZ", "URZ"):
                return Lanes.const(0), Lanes.const(0)
            return self.reg(op.name), self.reg(_next_register(op.name))
        low = self.read(op)
        high = Lanes(np.where(low.values >= 1 << 31, _u(MASK32), _u(0)), low.known, low.why) \
            if op.kind == "imm" and (op.value or 0) < 0 else Lanes.const(0)
        return low, high

    def constant(self, op: Operand) -> Lanes:
        """c[0x0][0x0..0x14] are the block and grid shape; any other constant word is unknown."""
        if op.name == "0x0" and op.value is not None:
            dims = {0x0: self.shape.block[0], 0x4: self.shape.block[1], 0x8: self.shape.block[2]}
            if self.shape.grid:
                dims.update({0xC: self.shape.grid[0], 0x10: self.shape.grid[1], 0x14: self.shape.grid[2]})
            if op.value in dims:
                return Lanes.const(dims[op.value])
        return Lanes.unknown(f"{op.text} is a kernel parameter or driver constant, not known on the host")

    def special(self, name: str) -> Lanes:
        """Special registers of warp `self.warp` in block 0."""
        simple = {"SR_TID.X": self.tid[0], "SR_TID.Y": self.tid[1], "SR_TID.Z": self.tid[2],
                  "SR_LANEID": LANE_IDS, "SRZ": 0}
        for axis in "XYZ":
            simple[f"SR_CTAID.{axis}"] = 0  # block 0
        # Block 0 is rank 0 of its cluster; these also only feed address bits >= 24.
        simple.update({"SR_CgaCtaId": 0, "SR_CTARANK": 0, "SR_CLUSTERID.X": 0, "SR_CLUSTERID.Y": 0,
                       "SR_CLUSTERID.Z": 0, "SR_CLUSTER_CTARANK": 0})
        if name in simple:
            return Lanes.of(np.broadcast_to(_u(simple[name]), (LANES,)).copy())
        if name in _SPECIAL_LANE_MASKS:
            return Lanes.of(_SPECIAL_LANE_MASKS[name](LANE_IDS))
        return Lanes.unknown(f"special register {name} is not modelled")

    # ---- writing ------------------------------------------------------------------------
    def write(self, op: Operand | str, value: Lanes, exec_mask: np.ndarray, maybe: np.ndarray, why_maybe: str) -> None:
        """Write lanes of `exec_mask`; lanes of `maybe` (may or may not run) become unknown.

        Uniform registers hold one value per warp, so they are written whole.
        """
        name = op if isinstance(op, str) else op.name
        if name in ("RZ", "URZ", "PT", "UPT", "") or (not isinstance(op, str) and op.kind not in ("reg", "ureg", "pred")):
            return
        uniform = name.startswith("U")
        old = self.reg(name)
        if uniform:
            lanes_set = exec_mask | maybe
            if not lanes_set.any():
                return
            src = int(np.argmax(lanes_set))
            values = np.full(LANES, value.values[src], dtype=np.uint64)
            known = np.full(LANES, bool(value.known[src]) and not maybe.any(), dtype=bool)
            why = value.why if not value.known[src] else (why_maybe if maybe.any() else "")
            self.regs[name] = Lanes(values, known, why)
            return
        values = np.where(exec_mask, value.values, old.values)
        known = np.where(exec_mask, value.known, old.known) & ~maybe
        why = ""
        if not known.all():
            why = (value.why if (exec_mask & ~value.known).any() else "") or (why_maybe if maybe.any() else "") or old.why
        self.regs[name] = Lanes(values.astype(np.uint64), known, why)

    def invalidate(self, ins: Instruction, exec_mask: np.ndarray, why: str) -> None:
        """An instruction not modelled: its destination registers become unknown."""
        if ins.mnemonic in _NO_DESTINATION or ins.opcode.startswith("SYNCS.ARRIVE") or ins.opcode.startswith("SYNCS.EXCH"):
            return
        ops = list(ins.operands)
        if not ops:
            return
        count = _destination_width(ins)
        first = ops[0]
        unknown = Lanes.unknown(why)
        none = np.zeros(LANES, dtype=bool)
        if first.kind in ("reg", "ureg"):
            name = first.name
            for _ in range(count):
                self.write(name, unknown, exec_mask, none, "")
                name = _next_register(name)
        elif first.kind == "pred":
            self.write(first, unknown, exec_mask, none, "")
        for op in ops[1:]:  # predicate outputs follow the first destination
            if op.kind != "pred":
                break
            self.write(op, unknown, exec_mask, none, "")

    # ---- running ------------------------------------------------------------------------
    def run(self, budget: int) -> str:
        """Run the warp from the entry; '' if every lane exited, else why it stopped.

        Groups run innermost call first, then lowest address first, so the two sides of a
        branch meet where they rejoin (and a called function returns before its caller goes on).
        """
        groups: dict[tuple[int, tuple[int, ...]], _Group] = {(0, ()): _Group(self.present.copy(), {})}
        stops: list[str] = []
        while groups:
            if self.trace.steps >= budget:
                return "the evaluation's step budget ran out (results are for the first iterations)"
            key = min(groups, key=lambda k: (-len(k[1]), k[0]))
            group = groups.pop(key)
            pc = key[0]
            if pc >= len(self.program):
                stops.append("ran past the end of the listing")
                continue
            self.trace.steps += 1
            self.regs = group.regs
            try:
                for nxt, g in self.step(pc, group):
                    if not g.mask.any():
                        continue
                    k = (nxt, g.calls)
                    groups[k] = _join(groups[k], g) if k in groups else g
            except _Halt as stop:
                stops.append(str(stop))
        return stops[0] if stops else ""

    def step(self, pc: int, group: _Group) -> list[tuple[int, _Group]]:
        """Run one instruction for a group: the groups that come out, with their next index."""
        ins = self.program[pc]
        mask = group.mask
        certain = group.forks == frozenset({frozenset()})
        uncertain = "" if certain else f"run only on a data-dependent path (branch at {self.fork_text(group.forks)})"
        guard = self.read(ins.guard) if ins.guard is not None else Lanes.const(1)
        guard_known = guard.known | ~mask
        on = mask & guard.known & (guard.values == 1)
        maybe = mask & ~guard.known
        why_maybe = f"under predicate {ins.guard.text if ins.guard else ''} that is not known ({guard.why})"
        m = ins.mnemonic
        if m in ("BRA", "EXIT", "CALL", "RET", "BRX", "JMX", "JMP", "BREAK"):
            return self.control(pc, ins, group, guard, guard_known)
        if self.record(ins):
            why = "; ".join(x for x in (uncertain, why_maybe if maybe.any() else "") if x)
            self.trace.executions.setdefault(ins.line, []).append(self.execution(ins, on | maybe, why))
        try:
            self.execute(ins, on, maybe, why_maybe)
        except _NotModelled as why:
            self.invalidate(ins, on | maybe, str(why))
        return [(pc + 1, group)]

    def fork_text(self, forks: frozenset[frozenset[tuple[int, int]]]) -> str:
        """The addresses of the data-dependent branches a group's path depends on."""
        return ", ".join(sorted({f"{self.fork_names.get(f, 0):#x}" for cube in forks for f, _ in cube}))

    def execution(self, ins: Instruction, active: np.ndarray, why: str) -> Execution:
        """What a recorded instruction gave: its memory operand's lane addresses and its reads."""
        address = None
        reads: dict[str, Lanes] = {}
        for op in ins.operands:
            if op.kind == "mem" and address is None:  # the first one: the shared-memory side of a TMA
                total = Lanes.const(0)
                for term in op.terms:
                    part = self.read(term)
                    scale = next((int(x[1:]) for x in term.mods if re.fullmatch(r"X\d+", x)), 1)
                    total = _combine(total.values + part.values * _u(scale), total, part)
                address = total
            if op.kind == "mem":
                for name in re.findall(r"U?R\d+", op.name):
                    for _ in range(4):  # a WGMMA's gdesc[URn] names URn..URn+3 (A's and B's descriptors)
                        reads[name] = self.reg(name)
                        name = _next_register(name)
            elif op.kind in ("reg", "ureg"):
                reads[op.name] = self.reg(op.name)
        return Execution(self.warp, active.copy(), address, reads, why)

    def control(self, pc: int, ins: Instruction, group: _Group, guard: Lanes, guard_known: np.ndarray) -> list[tuple[int, _Group]]:
        """Branches, exits, calls and returns."""
        mask = group.mask
        m = ins.mnemonic
        if m in ("BRX", "JMX", "JMP", "BREAK"):
            raise _Halt(f"{ins.opcode} at {ins.address:#x} (an indirect jump) is not followed")
        cond = guard.values.astype(bool) & guard.known
        known = guard_known.copy()
        for op in ins.operands:  # `BRA.U !UP0, target`: a predicate operand also guards the branch
            if op.kind == "pred":
                extra = self.read(op)
                cond &= extra.values.astype(bool)
                known &= extra.known | ~mask
        if m == "EXIT":
            if not known.all():
                raise _Halt(f"EXIT at {ins.address:#x} under a predicate that is not known")
            group.mask = mask & ~cond
            return [(pc + 1, group)]
        if m == "RET":
            if not group.calls:
                raise _Halt(f"RET at {ins.address:#x} outside a call the evaluation followed")
            group.calls, back = group.calls[:-1], group.calls[-1]
            return [(back, group)]
        label = next((op.name for op in ins.operands if op.kind == "label"), None)
        if label not in self.labels:
            raise _Halt(f"{ins.opcode} at {ins.address:#x}: branch target {label} not found in the listing")
        target = self.labels[label]
        if m == "CALL":
            group.calls = group.calls + (pc + 1,)
            return [(target, group)]
        if known[mask].all():
            taken = mask & cond
            if target <= pc and (taken == mask).all():
                return self.loop_back(pc, target, group)
            if target <= pc and not taken.any():
                self.iterations.pop(pc, None)  # the loop ended: its next entry counts afresh
            if not taken.any() or taken.all() == mask.all() and (taken == mask).all():
                return [(target if taken.any() else pc + 1, group)]
            return [(target, group.split(taken)), (pc + 1, group.split(mask & ~cond))]
        # A data-dependent branch: both sides may run; a loop back-edge is taken only once.
        fork = self.next_fork
        self.next_fork += 1
        self.fork_names[fork] = ins.address
        if target <= pc:
            if pc in self.looping_forks:
                return [(pc + 1, group.split(mask, _extend(group.forks, fork, 0)))]
            self.looping_forks.add(pc)
        return [(target, group.split(mask, _extend(group.forks, fork, 1))), (pc + 1, group.split(mask, _extend(group.forks, fork, 0)))]

    def loop_back(self, pc: int, target: int, group: _Group) -> list[tuple[int, _Group]]:
        """A back-edge every lane takes: follow it LOOP_ITERATIONS times, then once more beside a
        copy that leaves the loop, the two joined after it (registers that changed: unknown). An
        endless loop is left the same way, its copy going on past it."""
        if pc in self.left_loops:  # the extra iteration's end: out, to meet the copy that left
            self.left_loops.discard(pc)
            self.iterations.pop(pc, None)
            return [(pc + 1, group)]
        self.iterations[pc] = self.iterations.get(pc, 0) + 1
        if self.iterations[pc] <= LOOP_ITERATIONS:
            return [(target, group)]
        self.left_loops.add(pc)
        leaving = group.split(group.mask)
        leaving.reason = (f"changes between iterations of the loop at {self.program[pc].address:#x} (the evaluation "
                          f"follows its first {LOOP_ITERATIONS + 2} iterations)")
        return [(target, group), (pc + 1, leaving)]

    def execute(self, ins: Instruction, on: np.ndarray, maybe: np.ndarray, why_maybe: str) -> None:
        """The integer semantics of one instruction (raises `_NotModelled` for others)."""
        m = _UNIFORM.get(ins.mnemonic, ins.mnemonic)
        mods = ins.mods
        ops = ins.operands
        w = lambda op, value: self.write(op, value, on, maybe, why_maybe)  # noqa: E731
        if m in ("MOV", "MOV32I"):
            w(ops[0], self.read(ops[1]))
        elif m == "IMAD":
            self.imad(ins, w)
        elif m == "IADD3":
            self.iadd3(ins, w)
        elif m == "VIADD":
            a, b = self.read(ops[1]), self.read(ops[2])
            w(ops[0], _combine(a.values + b.values, a, b))
        elif m == "LEA":
            self.lea(ins, w)
        elif m == "LOP3":
            outs = [op for op in ops if op.kind == "pred"][:-1] if ops[0].kind == "pred" else []
            d, a, b, c, lut, pin = ops[len(outs):len(outs) + 6]
            x, y, z = self.read(a), self.read(b), self.read(c)
            r = _combine(lop3(x.values, y.values, z.values, lut.value or 0), x, y, z)
            w(d, r)
            if outs:
                p = self.read(pin)
                if not (pin.name in ("PT", "UPT") and pin.inverted):
                    raise _NotModelled(f"{ins.opcode} with a predicate input is not modelled")
                w(outs[0], _combine((r.values != 0).astype(np.uint64), r, p))
        elif m == "SHF":
            self.shf(ins, w)
        elif m == "SGXT":
            a, bits = self.read(ops[1]), self.read(ops[2])
            n = bits.values.astype(np.int64).clip(0, 32)
            low = a.values & ((_u(1) << _u(n)) - _u(1))
            if "U32" not in mods:
                sign = (low >> _u(np.maximum(n - 1, 0))) & _u(1)
                low = np.where((sign == 1) & (n > 0), low | (_u(MASK32) ^ ((_u(1) << _u(n)) - _u(1))), low)
            w(ops[0], _combine(low, a, bits))
        elif m == "PRMT":
            a, sel, b = self.read(ops[1]), self.read(ops[2]), self.read(ops[3])
            if mods:
                raise _NotModelled(f"{ins.opcode} modes are not modelled")
            both = a.values | (b.values << _u(32))
            out = np.zeros(LANES, dtype=np.uint64)
            for k in range(4):
                nib = (sel.values >> _u(4 * k)) & _u(0xF)
                byte = (both >> (_u(8) * (nib & _u(7)))) & _u(0xFF)
                byte = np.where(nib & _u(8), np.where(byte & _u(0x80), _u(0xFF), _u(0)), byte)
                out |= byte << _u(8 * k)
            w(ops[0], _combine(out, a, sel, b))
        elif m in ("IMNMX", "VIMNMX"):
            a, b, p = self.read(ops[1]), self.read(ops[2]), self.read(ops[3])
            x, y = (a.values, b.values) if "U32" in mods else (a.signed(), b.signed())
            r = np.where(p.values == 1, np.minimum(x, y), np.maximum(x, y))
            w(ops[0], _combine(_u(r.astype(np.int64) & MASK32), a, b, p))
        elif m == "SEL":
            a, b, p = self.read(ops[1]), self.read(ops[2]), self.read(ops[3])
            r = np.where(p.values == 1, a.values, b.values)
            known = p.known & np.where(p.values == 1, a.known, b.known)
            w(ops[0], Lanes(r, known, p.why or a.why or b.why))
        elif m == "ISETP":
            self.isetp(ins, w)
        elif m == "PLOP3":
            a, b, c = (self.read(op) for op in ops[2:5])
            r = lop3(a.values, b.values, c.values, ops[5].value or 0) & _u(1)
            w(ops[0], _combine(r, a, b, c))
            self.write(ops[1], Lanes.unknown(f"second output of {ins.opcode} is not modelled"), on, maybe, why_maybe)
        elif m in ("S2R", "S2UR", "CS2R"):
            src = self.read(ops[1])
            w(ops[0], src)
            if m == "CS2R" and "32" not in mods:
                w(_next_register(ops[0].name), src if ops[1].name == "SRZ" else Lanes.unknown(f"{ops[1].text} high word"))
        elif m == "LDC":
            if ops[1].kind != "const":
                raise _NotModelled(f"{ins.opcode} of {ops[1].text} is not modelled")
            w(ops[0], self.constant(ops[1]))
            if "64" in mods:
                nxt = Operand("const", ops[1].text, name=ops[1].name, value=(ops[1].value + 4) if ops[1].value is not None else None)
                w(_next_register(ops[0].name), self.constant(nxt))
        elif m == "R2UR":
            a = self.read(ops[-1])
            lanes = on | maybe
            vals = np.unique(a.values[lanes & a.known])
            if lanes.any() and a.known_on(lanes) and len(vals) == 1:
                w(ops[0], Lanes.const(int(vals[0])))
            else:
                w(ops[0], Lanes.unknown(a.why or f"R2UR of {ops[-1].text}: its lanes differ"))
        elif m == "SHFL":
            self.shfl(ins, on, maybe, why_maybe)
        elif m == "ELECT":
            leader = np.zeros(LANES, dtype=bool)
            if on.any():
                leader[int(np.argmax(on))] = True
            p = Lanes(leader.astype(np.uint64), ALL.copy())
            w(ops[0], p if not maybe.any() else Lanes.unknown(why_maybe))
            if len(ops) > 1 and ops[1].kind == "ureg":
                w(ops[1], Lanes.const(int(np.argmax(on))) if on.any() else Lanes.unknown("no lane ran ELECT"))
        elif m in ("VOTE", "VOTEU"):
            if maybe.any():
                raise _NotModelled(why_maybe)
            p = self.read(ops[-1])
            if not p.known_on(on) or not {"ANY", "ALL"} & set(mods):
                raise _NotModelled(p.why or f"{ins.opcode} is not modelled")
            bits = on & (p.values == 1)
            ballot = int(sum(1 << i for i in range(LANES) if bits[i]))
            w(ops[0], Lanes.const(ballot))
            if len(ops) > 2:
                verdict = bits.any() if "ANY" in mods else bool(bits[on].all())
                w(ops[1], Lanes.const(int(verdict)))
        elif m == "POPC":
            a = self.read(ops[1])
            w(ops[0], _combine(np.array([bin(int(v)).count("1") for v in a.values], dtype=np.uint64), a))
        elif m == "FLO":
            a = self.read(ops[1])
            r = np.array([int(v).bit_length() - 1 if v else MASK32 for v in a.values], dtype=np.uint64)
            if "SH" in mods:
                raise _NotModelled(f"{ins.opcode} is not modelled")
            w(ops[0], _combine(r, a))
        elif m == "BREV":
            a = self.read(ops[1])
            w(ops[0], _combine(np.array([int(f"{int(v):032b}"[::-1], 2) for v in a.values], dtype=np.uint64), a))
        elif m == "IABS":
            a = self.read(ops[1])
            w(ops[0], _combine(_u(np.abs(a.signed())), a))
        elif m == "BMSK":
            a, b = self.read(ops[1]), self.read(ops[2])
            width = np.minimum(b.values, 32)
            r = (((_u(1) << width) - _u(1)) << np.minimum(a.values, 63)) & _u(MASK32)
            w(ops[0], _combine(r, a, b))
        elif (ins.opcode.startswith("SYNCS.PHASECHK") or ins.opcode.startswith("USETMAXREG.TRY_ALLOC")) \
                and ops and ops[0].kind == "pred":
            w(ops[0], Lanes.const(1))  # the wait / allocation succeeds (see the module docstring)
        elif m in ("BSSY", "BSYNC", "WARPSYNC", "NOP", "BAR", "DEPBAR", "MEMBAR", "FENCE"):
            pass
        else:
            raise _NotModelled(f"{ins.opcode} at {ins.address:#x} is not evaluated (its result is data or not modelled)")

    def imad(self, ins: Instruction, w: Callable[[Operand | str, Lanes], None]) -> None:
        ops, mods = list(ins.operands), ins.mods
        # `IMAD.WIDE.U32 R8, P0, R2, R3, R8` writes the 64-bit sum's carry to P0 (the low half of a
        # 64 x 64-bit product, as ptxas divides 64-bit indices by a constant); `.X` adds a carry-in.
        carry_out = ops.pop(1) if len(ops) > 4 and ops[1].kind == "pred" else None
        d, a, b, c = ops[0], self.read(ops[1]), self.read(ops[2]), ops[3]
        carry_in = self.read(ops[4]) if "X" in mods and len(ops) > 4 else Lanes.const(0)
        signed = "U32" not in mods
        x, y = (a.signed(), b.signed()) if signed else (a.values.astype(np.int64), b.values.astype(np.int64))
        if "WIDE" in mods:
            lo, hi = self.read_pair(c)
            product = _u(x.astype(np.int64) * y.astype(np.int64))  # wraps mod 2**64
            addend = lo.values | (hi.values << _u(32))
            total = product + addend  # wraps mod 2**64
            overflow = total < addend
            total = total + carry_in.values
            overflow |= total < carry_in.values
            sources = (a, b, lo, hi, carry_in)
            w(d, _combine(total & _u(MASK32), *sources))
            w(_next_register(d.name), _combine(total >> _u(32), *sources))
            if carry_out is not None:
                w(carry_out, _combine(overflow.astype(np.uint64), *sources) if not signed else
                  Lanes.unknown(f"carry of the signed {ins.opcode} is not modelled"))
            return
        cv = self.read(c, carry="X" in mods)
        if "HI" in mods:
            product = x.astype(object) * y.astype(object)
            high = np.array([(int(p) >> 32) & MASK32 for p in product], dtype=np.uint64)
            w(d, _combine(high + cv.values + carry_in.values, a, b, cv, carry_in))
            if carry_out is not None:
                w(carry_out, Lanes.unknown(f"carry of {ins.opcode} is not modelled"))
            return
        total = _u((x * y) & MASK32) + cv.values + carry_in.values
        w(d, _combine(total, a, b, cv, carry_in))
        if carry_out is not None:
            w(carry_out, _combine((total >> _u(32)) & _u(1), a, b, cv, carry_in))

    def iadd3(self, ins: Instruction, w: Callable[[Operand | str, Lanes], None]) -> None:
        ops, mods = list(ins.operands), ins.mods
        extended = "X" in mods
        carry_in = [self.read(op) for op in ops[-2:] if op.kind == "pred"] if extended else []
        if extended:
            ops = ops[: len(ops) - len(carry_in)]
        d, outs, srcs = ops[0], [op for op in ops[1:-3] if op.kind == "pred"], ops[-3:]
        if "64" in mods:
            pairs = [self.read_pair(op) for op in srcs]
            neg = [op.negated for op in srcs]
            if any(neg):
                raise _NotModelled(f"negated operands of {ins.opcode} are not modelled")
            total = sum(((lo.values | (hi.values << _u(32))) for lo, hi in pairs), _u(0))
            parts = [x for pair in pairs for x in pair]
            w(d, _combine(total, *parts))
            w(_next_register(d.name), _combine(total >> _u(32), *parts))
            return
        vals = [self.read(op, carry=extended) for op in srcs]
        total = sum((v.values for v in vals), _u(0)) + sum((c.values for c in carry_in), _u(0))
        result = _combine(total, *vals, *carry_in)
        w(d, result)
        for k, out in enumerate(outs):
            if any(op.negated for op in srcs):
                w(out, Lanes.unknown(f"carry of {ins.opcode} with negated operands is not modelled"))
            else:
                w(out, _combine((total >> _u(32 + k)) & _u(1), *vals, *carry_in))

    def lea(self, ins: Instruction, w: Callable[[Operand | str, Lanes], None]) -> None:
        ops, mods = list(ins.operands), ins.mods
        d = ops[0]
        outs = []
        k = 1
        while k < len(ops) and ops[k].kind == "pred" and k < len(ops) - 3:
            outs.append(ops[k])
            k += 1
        rest = ops[k:]
        carry_in = Lanes.const(0)
        if "X" in mods and rest and rest[-1].kind == "pred":
            carry_in, rest = self.read(rest[-1]), rest[:-1]
        if "HI" in mods:
            a, b = self.read(rest[0]), self.read(rest[1], carry="X" in mods)
            if len(rest) == 4:
                c = self.read(rest[2])
            elif "SX32" in mods:
                c = Lanes(np.where(a.values >= 1 << 31, _u(MASK32), _u(0)), a.known, a.why)
            else:
                c = Lanes.const(0)
            sh = self.read(rest[-1])
            wide = a.values | (c.values << _u(32))
            high = (wide << (sh.values & _u(63))) >> _u(32)
            total = b.values + (high & _u(MASK32)) + carry_in.values
            w(d, _combine(total, a, b, c, sh, carry_in))
            for out in outs:
                w(out, Lanes.unknown(f"carry of {ins.opcode} is not modelled"))
            return
        a, b, sh = self.read(rest[0]), self.read(rest[1], carry="X" in mods), self.read(rest[2])
        shifted = (a.values << (sh.values & _u(31))) & _u(MASK32)
        total = shifted + b.values + carry_in.values
        result = _combine(total, a, b, sh, carry_in)
        w(d, result)
        for out in outs:
            w(out, _combine((total >> _u(32)) & _u(1), a, b, sh, carry_in))

    def shf(self, ins: Instruction, w: Callable[[Operand | str, Lanes], None]) -> None:
        ops, mods = ins.operands, ins.mods
        a, sh, b = self.read(ops[1]), self.read(ops[2]), self.read(ops[3])
        signed = "S32" in mods or "S64" in mods
        limit = 64 if ("U64" in mods or "S64" in mods) else 32
        n = sh.values & _u(limit - 1) if "W" in mods else np.minimum(sh.values, _u(limit))
        high = b.values
        if signed:
            wide = (b.signed() << 32) | a.values.astype(np.int64)  # sign-extended 64-bit pair
        else:
            wide = (high << _u(32)) | a.values
        if "L" in mods:
            wide_u = _u(wide) if not signed else _u(wide.astype(np.int64))
            out = np.where(n >= 64, _u(0), wide_u << np.minimum(n, _u(63)))
            result = out >> _u(32) if "HI" in mods else out
        elif "R" in mods:
            if signed:
                wide_s = np.asarray(wide, dtype=np.int64)
                out = _u(wide_s >> np.minimum(n, _u(63)).astype(np.int64))
            else:
                out = np.where(n >= 64, _u(0), _u(wide) >> np.minimum(n, _u(63)))
            result = out >> _u(32) if "HI" in mods else out
        else:
            raise _NotModelled(f"{ins.opcode}: no direction")
        w(ops[0], _combine(result & _u(MASK32), a, sh, b))

    def isetp(self, ins: Instruction, w: Callable[[Operand | str, Lanes], None]) -> None:
        ops, mods = ins.operands, ins.mods
        a, b, c = self.read(ops[2]), self.read(ops[3]), self.read(ops[4])
        x, y = (a.values.astype(np.int64), b.values.astype(np.int64)) if "U32" in mods else (a.signed(), b.signed())
        cmp = next((mm for mm in mods if mm in ("LT", "LE", "GT", "GE", "EQ", "NE")), None)
        bop = next((mm for mm in mods if mm in ("AND", "OR", "XOR")), "AND")
        if cmp is None:
            raise _NotModelled(f"{ins.opcode}: comparison not modelled")
        r = {"LT": x < y, "LE": x <= y, "GT": x > y, "GE": x >= y, "EQ": x == y, "NE": x != y}[cmp]
        sources = [a, b, c]
        if "EX" in mods:
            # The high words of a 64-bit compare; the low words' result comes in the last operand.
            low = self.read(ops[5])
            sources.append(low)
            lv = low.values.astype(bool)
            r = {"LT": (x < y) | ((x == y) & lv), "LE": (x < y) | ((x == y) & lv), "GT": (x > y) | ((x == y) & lv),
                 "GE": (x > y) | ((x == y) & lv), "EQ": (x == y) & lv, "NE": (x != y) | lv}[cmp]
        cv = c.values.astype(bool)
        combine = {"AND": np.logical_and, "OR": np.logical_or, "XOR": np.logical_xor}[bop]
        w(ops[0], _combine(combine(r, cv).astype(np.uint64), *sources))
        w(ops[1], _combine(combine(~r, cv).astype(np.uint64), *sources))

    def shfl(self, ins: Instruction, on: np.ndarray, maybe: np.ndarray, why_maybe: str) -> None:
        ops, mods = ins.operands, ins.mods
        pd, d, a, b, c = ops[:5]
        val, lane_arg, ctl = self.read(a), self.read(b), self.read(c)
        mode = next((mm for mm in mods if mm in ("IDX", "BFLY", "DOWN", "UP")), None)
        expected = 0 if mode == "UP" else 0x1F
        if mode is None or maybe.any() or not ctl.known.all() or int(ctl.values[0]) != expected:
            raise _NotModelled(why_maybe if maybe.any() else f"{ins.opcode} with this lane control is not modelled")
        lanes = LANE_IDS.astype(np.int64)
        k = lane_arg.values.astype(np.int64) & 31
        src = {"IDX": k, "BFLY": lanes ^ k, "DOWN": lanes + k, "UP": lanes - k}[mode]
        in_range = (src >= 0) & (src < LANES)
        src = np.where(in_range, src, lanes)
        result = Lanes(val.values[src], val.known[src] & on[src] & lane_arg.known, val.why or lane_arg.why or "SHFL from a lane that did not run it")
        self.write(d, result, on, maybe, why_maybe)
        self.write(pd, Lanes.of(in_range.astype(np.uint64)), on, maybe, why_maybe)


class _NotModelled(Exception):
    """The instruction's result is not evaluated; its destinations become unknown with this reason."""


def _next_register(name: str) -> str:
    m = re.fullmatch(r"(U?R)(\d+)", name)
    return f"{m[1]}{int(m[2]) + 1}" if m else name


def _destination_width(ins: Instruction) -> int:
    """How many consecutive registers an instruction not modelled writes (a conservative count)."""
    mods = ins.mods
    if ins.mnemonic == "HGMMA":
        shape = next((x for x in mods if re.fullmatch(r"64x\d+x\d+", x)), "64x256x16")
        n = int(shape.split("x")[1])
        return n // 2 if "F32" in mods else n // 4
    if ins.mnemonic in ("LDSM",):
        return {"4": 4, "2": 2}.get(mods[-1] if mods else "", 1)
    if "128" in mods:
        return 4
    if "64" in mods or ins.mnemonic.startswith("D") or (mods and mods[0] == "F64"):
        return 2
    return 1


def evaluate(sass: str, shape: LaunchShape, record: Callable[[Instruction], bool],
             budget: int = DEFAULT_STEP_BUDGET) -> Trace:
    """Run every warp of block 0 (in order, sharing one step budget) and record the executions
    of the instructions `record` picks. Never raises on odd input: a warp that cannot go on
    stops, and `Trace.stopped` says why."""
    trace = Trace()
    try:
        program, labels = parse_program(sass)
    except Exception as err:  # noqa: BLE001 - a listing this module cannot read is "unknown", not a crash
        trace.stopped[0] = f"the listing could not be read: {err}"
        return trace
    bx, by, bz = shape.block
    warps = -(-(bx * by * bz) // LANES)
    trace.warps = warps
    for warp in range(warps):
        if trace.steps >= budget:
            trace.stopped[warp] = "not evaluated: the step budget ran out on earlier warps"
            continue
        evaluator = WarpEvaluator(program, labels, shape, warp, record, trace)
        try:
            trace.stopped[warp] = evaluator.run(budget)
        except Exception as err:  # noqa: BLE001 - never crash a viewer on an odd listing
            trace.stopped[warp] = f"evaluation error at warp {warp}: {type(err).__name__}: {err}"
    return trace
