"""Static IR rendering: the pass table, the diff of the first pass that changes the builder's
module, and the last module before the binary (HTML, each part capped so the output stays well
under a megabyte: a GEMM's pipeline is 13 MB of text); the module size along the pipeline
(matplotlib)."""

from __future__ import annotations

from typing import Any

from mgpu_lab.widgets.fallback import STATIC_BUDGET
from mgpu_lab.widgets.ir_diff import DIFF_MARKS, DiffLine, PassStat, PassTexts
from mgpu_lab.widgets.static_html import FONT, code_block, esc, scroll_box, section, table

_DIFF_STYLE = {
    "add": "background-color:rgba(46,160,67,0.2)",
    "del": "background-color:rgba(248,81,73,0.2)",
    "hunk": "color:#1976d2",
    "ctx": "",
}
MAX_LINE = 300  # characters of a line in the static listing


def _capped(lines: list[str], budget: int) -> list[str]:
    """Escaped lines up to `budget` characters, then one line saying how many were left out."""
    out, used = [], 0
    for i, line in enumerate(lines):
        used += len(line) + 1
        if used > budget:
            out.append(f"<i>… {len(lines) - i:,} more lines (the live viewer has them all)</i>")
            break
        out.append(line)
    return out


def _line(text: str) -> str:
    return esc(text if len(text) <= MAX_LINE else text[:MAX_LINE] + " …")


def diff_html(lines: list[DiffLine], budget: int = STATIC_BUDGET // 3) -> str:
    """Classified diff lines as a coloured, scrolling code block."""
    return code_block(
        _capped([f'<span style="{_DIFF_STYLE[kind]}">{_line(DIFF_MARKS[kind] + text)}</span>' for kind, text in lines], budget),
        max_height=400,
    )


def ir_html(passes: PassTexts, stats: list[PassStat], title: str) -> str:
    """Pass table, the first real change as a diff, and the last module before the binary."""
    if not len(passes):
        return scroll_box(section(f"IR: {title}", "<i>no passes recorded: compile with pass dumps enabled</i>"))
    rows = [
        (f"{i}. {s.name}", s.lines, f"+{s.added}" if s.changed else "", f"-{s.removed}" if s.changed else "unchanged")
        for i, s in enumerate(stats)
    ]
    out = section(f"IR: {title}: {len(passes)} passes", table(("pass", "lines", "added", "removed"), rows))
    first = passes.first_change()
    if first:
        s = stats[first]
        out += section(f"Diff of {first}. {s.name} (+{s.added} -{s.removed}), the first pass that changes the module",
                       diff_html(passes.diff(first)))
    else:
        out += f'<div style="{FONT}"><i>no pass changed the module</i></div>'
    # The last textual module: the final pass usually turns the module into a binary blob.
    last = max((i for i in range(len(passes)) if "gpu.binary" not in "".join(passes.lines[i][:8])), default=len(passes) - 1)
    body = code_block(_capped([_line(line) for line in passes.lines[last]], STATIC_BUDGET // 3), max_height=400)
    return scroll_box(out + section(f"Module after {last}. {passes.names[last]} (locations hidden)", body))


def ir_figure(stats: list[PassStat], title: str) -> Any:
    """Module lines after each pass, with lines added and removed."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, max(2.5, 0.3 * len(stats) + 1)))
    ax = fig.add_subplot()
    names = [f"{i}. {s.name}" for i, s in enumerate(stats)][::-1]
    ax.barh(names, [s.lines for s in stats][::-1], color="#bab0ac", label="module lines")
    ax.barh(names, [s.added for s in stats][::-1], color="#59a14f", height=0.35, align="edge", label="added")
    ax.barh(names, [-s.removed for s in stats][::-1], color="#e15759", height=0.35, align="edge", label="removed")
    ax.axvline(0, color="black", linewidth=0.5)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("lines")
    ax.set_title(f"{title}: IR after each pass", fontsize=10)
    ax.legend(fontsize=7)
    return fig
