"""The pass-by-pass view of a compilation: per-pass statistics and diffs between passes.

`CompiledKernel.passes` holds (pass name, module text after it); the diff of pass i is the
unified diff from the module after pass i-1 (for the first entry there is nothing before it,
so its diff is the whole module as added lines).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

DiffLine = tuple[str, str]  # (kind, text): kind is "hunk", "add", "del" or "ctx"
DIFF_MARKS = {"add": "+", "del": "-", "ctx": " ", "hunk": ""}  # unified-diff line prefixes


@dataclass(frozen=True)
class PassStat:
    """Size of the module after a pass, and how much the pass changed."""

    name: str
    lines: int
    added: int
    removed: int

    @property
    def changed(self) -> bool:
        """Whether the pass changed any line of the module."""
        return bool(self.added or self.removed)


def _lines(text: str) -> list[str]:
    return text.splitlines()


def pass_stats(passes: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> list[PassStat]:
    """One `PassStat` per pass; added/removed count lines against the previous module."""
    out = []
    previous: list[str] = []
    for name, text in passes:
        current = _lines(text)
        added = removed = 0
        if current != previous:
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, previous, current, autojunk=False).get_opcodes():
                if tag != "equal":
                    removed += i2 - i1
                    added += j2 - j1
        out.append(PassStat(name, len(current), added, removed))
        previous = current
    return out


def pass_diff(passes: tuple[tuple[str, str], ...] | list[tuple[str, str]], index: int, context: int = 3) -> list[DiffLine]:
    """Unified diff of the module before and after pass `index`, as classified lines."""
    before = _lines(passes[index - 1][1]) if index > 0 else []
    after = _lines(passes[index][1])
    out: list[DiffLine] = []
    diff = difflib.unified_diff(before, after, lineterm="", n=context)
    for line in diff:
        if line.startswith(("---", "+++")):
            continue  # file headers: the pass names say which modules these are
        if line.startswith("@@"):
            out.append(("hunk", line))
        elif line.startswith("+"):
            out.append(("add", line[1:]))
        elif line.startswith("-"):
            out.append(("del", line[1:]))
        else:
            out.append(("ctx", line[1:]))
    return out


def diff_text(lines: list[DiffLine]) -> str:
    """Classified diff lines back to unified-diff text."""
    return "\n".join(DIFF_MARKS[kind] + text for kind, text in lines)
