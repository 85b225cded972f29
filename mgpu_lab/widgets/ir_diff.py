"""The pass-by-pass view of a compilation: per-pass statistics and diffs between passes.

`CompiledKernel.passes` holds (pass name, module text after it); the diff of pass i is the
diff from the module after pass i-1 (for the first entry there is nothing before it, so its
diff is the whole module as added lines).

Modules are shown without their locations (`loc(...)` and the `#loc` alias lines, which make
up most of a module printed with tracebacks), and lines are compared with SSA value and
block numbers blanked out, so a pass that only renumbers values changes nothing and a diff
shows what a pass really did. The final `gpu.binary`'s PTX is shown as text (`ir_binary`).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from mgpu_lab.widgets.ir_binary import expand_binary

DiffLine = tuple[str, str]  # (kind, text): kind is "hunk", "add", "del" or "ctx"
DIFF_MARKS = {"add": "+", "del": "-", "ctx": " ", "hunk": ""}  # unified-diff line prefixes
Passes = Sequence[tuple[str, str]]

# ` loc(...)` with up to four levels of nested parentheses and quoted strings (callsite and
# fused locations nest); one regex over the whole module runs in C, ~20x faster than a loop.
_PAREN = r'(?:[^()"]|"(?:[^"\\]|\\.)*"|\(X\))*'
for _ in range(3):
    _PAREN = _PAREN.replace("X", r'(?:[^()"]|"(?:[^"\\]|\\.)*"|\(X\))*', 1)
_LOC = re.compile(r" loc\(" + _PAREN.replace(r"|\(X\)", "") + r"\)")
_SSA_BLANKS = (
    (re.compile(r"%\d+\b"), "%"),
    (re.compile(r"(%[A-Za-z_][\w$.]*?)_\d+\b"), r"\1"),
    (re.compile(r"\^bb\d+"), "^bb"),
)


def strip_locations(text: str) -> list[str]:
    """Lines of a module without `loc(...)` suffixes and `#loc` alias definitions."""
    return [line for line in _LOC.sub("", text).splitlines() if not line.startswith("#loc")]


def comparison_key(line: str) -> str:
    """A line with SSA value numbers and block numbers blanked (`%12` -> `%`, `%c4_3` -> `%c4`)."""
    return _comparison_keys(line)[0] if line else ""


def _comparison_keys(text: str) -> list[str]:
    for pattern, blank in _SSA_BLANKS:
        text = pattern.sub(blank, text)
    return [line.strip() for line in text.splitlines()]


@dataclass(frozen=True)
class PassStat:
    """Size of the module after a pass, and how much the pass changed."""

    name: str
    lines: int
    added: int
    removed: int

    @property
    def changed(self) -> bool:
        """Whether the pass changed any line of the module (beyond renumbering)."""
        return bool(self.added or self.removed)


class PassTexts:
    """The modules of a pipeline, location-stripped and keyed for comparison, computed once."""

    def __init__(self, passes: Passes) -> None:
        self.names = tuple(str(name) for name, _ in passes)
        # The binary's PTX as text lines, not one escaped string (`ir_binary`).
        self.lines = tuple(expand_binary(strip_locations(str(text))) for _, text in passes)
        self.keys = tuple(_comparison_keys("\n".join(lines)) for lines in self.lines)

    def __len__(self) -> int:
        return len(self.names)

    def stats(self) -> list[PassStat]:
        """One `PassStat` per pass: lines added and removed against the previous module,
        counted as multisets of lines (a moved line counts as neither; fast for any size)."""
        out = []
        previous: Counter[str] = Counter()
        for i, name in enumerate(self.names):
            current = Counter(self.keys[i])
            added = sum((current - previous).values())
            removed = sum((previous - current).values())
            out.append(PassStat(name, len(self.lines[i]), added, removed))
            previous = current
        return out

    def diff(self, index: int, context: int = 3) -> list[DiffLine]:
        """Unified diff of the module before and after pass `index`, as classified lines."""
        before = self.lines[index - 1] if index > 0 else []
        after = self.lines[index]
        if index > 0 and self.keys[index] == self.keys[index - 1]:
            return []
        # autojunk: lines as common as "}" do not anchor matches, which keeps a 3,000-line
        # module's diff in milliseconds instead of a second.
        matcher = difflib.SequenceMatcher(None, self.keys[index - 1] if index > 0 else [], self.keys[index])
        out: list[DiffLine] = []
        for group in matcher.get_grouped_opcodes(context):
            i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
            out.append(("hunk", f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@"))
            for tag, a1, a2, b1, b2 in group:
                if tag == "equal":
                    out += [("ctx", line) for line in after[b1:b2]]
                    continue
                out += [("del", line) for line in before[a1:a2]]
                out += [("add", line) for line in after[b1:b2]]
        return out

    def first_change(self) -> int:
        """The first pass after the builder's module that changes it (0 when none does)."""
        stats = self.stats()
        return next((i for i in range(1, len(stats)) if stats[i].changed), 0)


def _range(start: int, stop: int) -> str:
    """A unified-diff hunk range (1-based start, length)."""
    length = stop - start
    return f"{start + 1 if length else start},{length}"


def pass_stats(passes: Passes) -> list[PassStat]:
    """One `PassStat` per pass (see `PassTexts.stats`)."""
    return PassTexts(passes).stats()


def pass_diff(passes: Passes, index: int, context: int = 3) -> list[DiffLine]:
    """Unified diff of pass `index` (see `PassTexts.diff`)."""
    return PassTexts(passes).diff(index, context)


def diff_text(lines: list[DiffLine]) -> str:
    """Classified diff lines back to unified-diff text."""
    return "\n".join(DIFF_MARKS[kind] + text for kind, text in lines)
