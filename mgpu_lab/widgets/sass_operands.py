"""Operands of one SASS instruction, parsed into what an evaluator reads.

nvdisasm writes an instruction as `OPCODE dst, src, src, ... ;` where each operand is a
register (`R5`, `R7.reuse`, `-R5`, `|R5|`, `R2.64`), a uniform register (`UR4`), a predicate
(`P0`, `!PT`, `UP1`), an immediate (`0x1f`, `-0x10`, `2.5`), a constant-bank word
(`c[0x0][0x210]`), a special register (`SR_TID.X`), a memory operand (`[R6+UR4+0x10]`,
`desc[UR4][R2.64]`, `gdesc[UR12].tnspB`) or a branch label. Anything else is kept as `other`,
so a line this module cannot read gives operands an evaluator treats as unknown, never an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_REGISTER = re.compile(r"^(?P<name>U?R(?:\d+|Z))(?P<mods>(?:\.[A-Za-z0-9_]+)*)$")
_PREDICATE = re.compile(r"^(?P<name>U?P(?:\d+|T))$")
_IMMEDIATE = re.compile(r"^[-+]?(?:0x[0-9a-fA-F]+|\d+)$")
_CONSTANT = re.compile(r"^c\[(?P<bank>0x[0-9a-fA-F]+)\]\[(?P<offset>[^\]]*)\]$")
_SPECIAL = re.compile(r"^SR_[A-Za-z0-9_.]+$|^SRZ$")
_MEMORY = re.compile(r"^(?P<prefix>[a-z]*desc\[[^\]]*\])?(?:\[(?P<body>[^\]]*)\])?(?P<suffix>\.\S+)?$")
_LABEL = re.compile(r"^`?\(?(?P<name>[.$][\w.$]+)\)?$")
_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


@dataclass(frozen=True)
class Operand:
    """One operand. `kind`: reg, ureg, pred, imm, const, sreg, mem, label, word or other.

    For registers `name` is `R5`/`UR4`/`RZ`, `mods` the dotted suffixes without `.reuse`
    (`("64",)` for a pair); for predicates `name` is `P0`/`PT`/`UP0` and `inverted` a leading
    `!`; for immediates `value`; for constants `name` is the bank and `value` the byte offset
    (None when indexed by a register); for memory operands `terms` are the addends of the
    bracket (operands themselves); `negated` is a leading `-`, `absolute` `|x|`, `inverted` a
    leading `!` or `~`.
    """

    kind: str
    text: str
    name: str = ""
    value: int | None = None
    mods: tuple[str, ...] = ()
    negated: bool = False
    absolute: bool = False
    inverted: bool = False
    terms: tuple[Operand, ...] = ()


def split_operands(text: str) -> list[str]:
    """The comma-separated operands of an instruction's operand text (brackets kept whole)."""
    text = text.strip().rstrip(";").strip()
    out, depth, current = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        out.append("".join(current).strip())
    return out


def parse_operand(text: str) -> Operand:
    """One operand's text -> `Operand` (kind "other" for anything unrecognised)."""
    raw = text.strip()
    s = raw
    negated = absolute = inverted = False
    if s.startswith("|") and s.endswith("|") and len(s) > 2:
        absolute, s = True, s[1:-1]
    if s.startswith("-") and not _IMMEDIATE.match(s):
        negated, s = True, s[1:]
    if s.startswith("~") or (s.startswith("!") and not _PREDICATE.match(s)):
        inverted, s = True, s[1:]
    if s.startswith("!") and _PREDICATE.match(s[1:]):
        return Operand("pred", raw, name=s[1:], inverted=True)
    if _PREDICATE.match(s):
        return Operand("pred", raw, name=s, inverted=inverted)
    m = _REGISTER.match(s)
    if m:
        mods = tuple(x for x in m["mods"].split(".") if x and x != "reuse")
        kind = "ureg" if m["name"].startswith("U") else "reg"
        return Operand(kind, raw, name=m["name"], mods=mods, negated=negated, absolute=absolute, inverted=inverted)
    if _IMMEDIATE.match(s):
        return Operand("imm", raw, value=int(s, 0), negated=negated, inverted=inverted)
    m = _CONSTANT.match(s)
    if m:
        offset = m["offset"]
        value = int(offset, 16) if re.fullmatch(r"0x[0-9a-fA-F]+", offset) else None
        return Operand("const", raw, name=m["bank"], value=value, negated=negated, inverted=inverted)
    if _SPECIAL.match(s):
        return Operand("sreg", raw, name=s)
    m = _MEMORY.match(s)
    if m and (m["prefix"] or m["body"] is not None):
        terms = tuple(parse_operand(t) for t in re.split(r"\+(?=.)", m["body"] or "") if t)
        return Operand("mem", raw, name=m["prefix"] or "", terms=terms, mods=(m["suffix"] or "",))
    m = _LABEL.match(s)
    if m:
        return Operand("label", raw, name=m["name"])
    if _WORD.match(s):
        return Operand("word", raw, name=s)
    return Operand("other", raw)


def parse_operands(text: str) -> tuple[Operand, ...]:
    """All operands of an instruction's operand text."""
    return tuple(parse_operand(t) for t in split_operands(text))
