"""Which source lines belong to each named region: the body of `with ctx.named_region("x"):`.

Read from the kernel's source text (the profiler records names, not locations), so a slice
selected on the timeline can light up its region's lines in the SASS view. Only literal
region names are found.
"""

from __future__ import annotations

import re

_NAMED_REGION = re.compile(r"""^\s*with\b.*\bnamed_region\(\s*(?P<q>['"])(?P<name>[^'"]+)(?P=q)""")


def region_source_lines(sources: dict[str, str]) -> dict[str, list[tuple[str, int]]]:
    """Region name -> [(file, 0-based line)]: the `with` line and its indented body."""
    out: dict[str, list[tuple[str, int]]] = {}
    for file, text in sources.items():
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = _NAMED_REGION.match(line)
            if not m:
                continue
            indent = len(line) - len(line.lstrip())
            body = [i]
            for j in range(i + 1, len(lines)):
                if not lines[j].strip():
                    continue
                if len(lines[j]) - len(lines[j].lstrip()) <= indent:
                    break
                body.append(j)
            out.setdefault(m["name"], []).extend((file, j) for j in body)
    return out
