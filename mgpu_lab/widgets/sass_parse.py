"""Reading nvdisasm's SASS listing: line kinds, syntax tokens, opcode families, line info.

The viewer and the static renderings both use these token lists, so the colours agree and
the browser never re-parses SASS. Token classes (the CSS suffix of `sass-<class>`):
addr, pred, op, reg, ureg, preg, sreg, const, imm, label, kw, comment, dir; "" is plain text.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

Token = tuple[str, str]  # (class, text)

_INSTRUCTION = re.compile(
    r"^(?P<lead>\s*)/\*(?P<addr>[0-9a-fA-F]+)\*/(?P<gap>\s*)"
    r"(?P<pred>@!?U?P(?:T|\d+)\s+)?(?P<op>[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)(?P<rest>.*)$"
)
_LINE_INFO = re.compile(r'^\s*//## File "(?P<file>[^"]*)", line (?P<line>\d+)')
_LABEL = re.compile(r"^\s*(?P<name>[.$A-Za-z_][\w.$]*):\s*$")

# Operand tokens, tried in order at each position of the operand text.
_OPERAND_TOKENS = re.compile(
    r"(?P<comment>//.*$|/\*.*?\*/)"
    r"|(?P<const>c\[0x[0-9a-fA-F]+\]\[[^\]]*\])"
    r"|(?P<sreg>\bSR_[A-Za-z0-9_.]+)"
    r"|(?P<ureg>\bU(?:R\d+|RZ)(?:\.[A-Za-z0-9]+)*\b)"
    r"|(?P<preg>!?\bU?P(?:T|\d+)\b)"
    r"|(?P<reg>\b(?:R\d+|RZ|B\d+)(?:\.[A-Za-z0-9]+)*\b)"
    r"|(?P<label>`?\(?\.L_\w+\)?|\.L_\w+)"
    r"|(?P<imm>[-+]?\b0x[0-9a-fA-F]+\b|[-+]?\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\b|[-+]?\bQNAN\b|[-+]?\bINF\b)"
    r"|(?P<kw>\b[A-Za-z_][A-Za-z0-9_.]*\b)"
)


@dataclass(frozen=True)
class SassLine:
    """One line of the listing.

    kind: "instruction", "lineinfo" (a `//## File` comment), "comment", "label",
    "directive" or "blank". Instructions carry their address, predicate and opcode.
    """

    index: int
    text: str
    kind: str
    tokens: tuple[Token, ...]
    address: int | None = None
    predicate: str = ""
    opcode: str = ""

    @property
    def mnemonic(self) -> str:
        """The opcode without modifiers: `IMAD` for `IMAD.WIDE.U32`."""
        return self.opcode.split(".", 1)[0]


def parse_sass(text: str) -> tuple[SassLine, ...]:
    """Every line of an nvdisasm listing, classified and tokenized (index = 0-based line)."""
    return tuple(parse_line(i, line) for i, line in enumerate(text.splitlines()))


def parse_line(index: int, text: str) -> SassLine:
    """Classify and tokenize one listing line."""
    m = _INSTRUCTION.match(text)
    if m:
        tokens: list[Token] = [("", m["lead"]), ("addr", f"/*{m['addr']}*/"), ("", m["gap"])]
        pred = (m["pred"] or "").strip()
        if pred:
            tokens += [("pred", pred), ("", m["pred"][len(pred) :])]
        tokens.append(("op", m["op"]))
        tokens += tokenize_operands(m["rest"])
        return SassLine(index, text, "instruction", _merge(tokens), int(m["addr"], 16), pred, m["op"])
    stripped = text.strip()
    if not stripped:
        return SassLine(index, text, "blank", (("", text),))
    if _LINE_INFO.match(text):
        return SassLine(index, text, "lineinfo", (("comment", text),))
    if stripped.startswith("//"):
        return SassLine(index, text, "comment", (("comment", text),))
    if _LABEL.match(text):
        return SassLine(index, text, "label", (("label", text),))
    return SassLine(index, text, "directive", (("dir", text),))


def tokenize_operands(text: str) -> list[Token]:
    """Tokens of the operand part of an instruction (after the opcode)."""
    tokens: list[Token] = []
    pos = 0
    for m in _OPERAND_TOKENS.finditer(text):
        if m.start() > pos:
            tokens.append(("", text[pos : m.start()]))
        tokens.append((m.lastgroup or "", m.group()))
        pos = m.end()
    if pos < len(text):
        tokens.append(("", text[pos:]))
    return tokens


def _merge(tokens: list[Token]) -> tuple[Token, ...]:
    """Drop empty tokens and join neighbours of one class (smaller payloads to the browser)."""
    out: list[Token] = []
    for cls, text in tokens:
        if not text:
            continue
        if out and out[-1][0] == cls:
            out[-1] = (cls, out[-1][1] + text)
        else:
            out.append((cls, text))
    return tuple(out)


NamedPatterns = tuple[tuple[str, re.Pattern[str]], ...]


def _named_patterns(*pairs: tuple[str, str]) -> NamedPatterns:
    return tuple((name, re.compile(pattern)) for name, pattern in pairs)


# Opcode families for the instruction-mix chart, first match wins (so UTMALDG is TMA, not
# "uniform", and HGMMA is tensor core, not half precision).
_FAMILIES: NamedPatterns = _named_patterns(
    ("tensor core", r"^(HGMMA|IGMMA|QGMMA|BGMMA|HMMA|IMMA|DMMA|BMMA|WARPGROUP)$"),
    ("TMA / bulk copy", r"^(UTMA\w*|UBLKCP|UBLKRED|UBLKPF|UTMACCTL|UTMACMDFLUSH)$"),
    ("shared memory", r"^(LDS|STS|LDSM|STSM|ATOMS|LDGSTS|LDGDEPBAR)$"),
    ("global memory", r"^(LDG|STG|ATOMG|ATOM|RED|LD|ST|CCTL|CCTLL)$"),
    ("local memory (spills)", r"^(LDL|STL)$"),
    ("constant load", r"^(LDC|ULDC)$"),
    ("sync / barrier", r"^(BAR|SYNCS|MEMBAR|FENCE|DEPBAR|ERRBAR|WARPSYNC|ARRIVES|CGAERRBAR|UCGABAR_\w+)$"),
    ("control flow", r"^(BRA|BRX|JMP|JMX|EXIT|RET|CALL|BSSY|BSYNC|BREAK|KILL|NOP|YIELD|BPT|ACQBULK)$"),
    ("fp32", r"^(FFMA|FADD|FMUL|FMNMX|FSETP|FSET|FSEL|FCHK|FSWZADD|FFMA32I|FADD32I|FMUL32I)$"),
    ("fp16 / bf16", r"^(HFMA2|HADD2|HMUL2|HMNMX2|HSETP2|HSET2|HFMA2\w*)$"),
    ("fp64", r"^(DFMA|DADD|DMUL|DSETP|DMNMX)$"),
    ("special function", r"^MUFU$"),
    ("conversion", r"^(F2F|F2I|I2F|F2FP|I2FP|FRND|I2I|F2IP)$"),
    ("uniform datapath", r"^U\w+$"),
    ("integer", r"^(IMAD|IADD3|IADD|LEA|LOP3|LOP|SHF|SHL|SHR|ISETP|IMNMX|IABS|POPC|FLO|BREV|BMSK|PRMT|SEL|IDP|VIADD|VIMNMX|IMUL|LOP32I|IADD32I|IMAD32I)\w*$"),
    ("data movement", r"^(MOV|MOV32I|S2R|CS2R|S2UR|R2UR|SHFL|P2R|R2P|PLOP3|PSETP|VOTE|VOTEU|ELECT|MATCH|REDUX|NANOSLEEP|PMTRIG)$"),
)


# The instruction classes a Hopper kernel author counts per source line and jumps between.
KEY_CLASSES: NamedPatterns = _named_patterns(
    ("HGMMA", r"^HGMMA$"),
    ("UTMA", r"^(UTMA\w*|UBLKCP)$"),
    ("LDS/STS", r"^(LDS|STS|LDSM|STSM)$"),
    ("LDG/STG", r"^(LDG|STG)$"),
    ("SYNCS", r"^SYNCS$"),
    ("BAR", r"^BAR$"),
)


def key_class(mnemonic: str) -> str:
    """The `KEY_CLASSES` name of a mnemonic (`UTMALDG` -> "UTMA"), or "" for any other."""
    return next((name for name, pattern in KEY_CLASSES if pattern.match(mnemonic)), "")


def is_scaffolding(line: SassLine) -> bool:
    """nvdisasm's own lines: `//##` markers, directives, comments, blanks and section labels.

    The viewers keep them one toggle away; instructions and branch labels (`.L_x_N:`) stay.
    """
    if line.kind in ("lineinfo", "directive", "blank", "comment"):
        return True
    return line.kind == "label" and not line.text.strip().startswith(".L_")


def opcode_family(mnemonic: str) -> str:
    """The instruction-mix family of a mnemonic (`HGMMA` -> "tensor core"), or "other"."""
    for name, pattern in _FAMILIES:
        if pattern.match(mnemonic):
            return name
    return "other"


def code_instructions(lines: tuple[SassLine, ...]) -> list[SassLine]:
    """Instructions, without the NOPs that pad the function after its last real instruction."""
    instructions = [ln for ln in lines if ln.kind == "instruction"]
    end = len(instructions)
    while end and instructions[end - 1].mnemonic == "NOP":
        end -= 1
    return instructions[:end]


def instruction_mix(lines: tuple[SassLine, ...]) -> list[tuple[str, int]]:
    """Instruction count per family, largest first (padding NOPs excluded)."""
    counts = Counter(opcode_family(ln.mnemonic) for ln in code_instructions(lines))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def opcode_counts(lines: tuple[SassLine, ...]) -> list[tuple[str, int]]:
    """Instruction count per mnemonic, largest first (padding NOPs excluded)."""
    counts = Counter(ln.mnemonic for ln in code_instructions(lines))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def sass_line_info(lines: tuple[SassLine, ...]) -> dict[int, tuple[str, int]]:
    """Instruction line index -> (source file, 0-based source line), from `//## File` comments.

    nvdisasm -g writes the comment once before a run of instructions from one source line, so
    each instruction takes the most recent comment; a new function section resets it. The
    padding NOPs after a function's last instruction belong to no line.
    """
    code = {ln.index for ln in code_instructions(lines)}
    current: tuple[str, int] | None = None
    out: dict[int, tuple[str, int]] = {}
    for ln in lines:
        if ln.kind == "lineinfo":
            m = _LINE_INFO.match(ln.text)
            assert m is not None  # kind "lineinfo" means the pattern matched
            current = (m["file"], int(m["line"]) - 1)
        elif ln.kind == "directive" and ln.text.strip().startswith(".section"):
            current = None
        elif ln.index in code and current is not None:
            out[ln.index] = current
    return out


def branch_targets(lines: tuple[SassLine, ...]) -> dict[int, int]:
    """Instruction line -> line of the label it names (`BRA`, `@P0 BRA`, `CALL`, `BSSY` ...).

    nvdisasm names every branch target `.L_x_N` and prints it as a label line of its own;
    an operand spells it `` `(.L_x_N) ``."""
    defined = {label_name(ln): ln.index for ln in lines if ln.kind == "label"}
    out: dict[int, int] = {}
    for ln in lines:
        if ln.kind != "instruction":
            continue
        for cls, text in ln.tokens:
            name = text.strip("`() ")
            if cls == "label" and name in defined:
                out[ln.index] = defined[name]
                break
    return out


def label_name(line: SassLine) -> str:
    """The name a label line defines (`.L_x_3` for `.L_x_3:`), else ""."""
    return line.text.strip()[:-1] if line.kind == "label" else ""
