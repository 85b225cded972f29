"""Static IR rendering: the pass table, the final module and each pass's diff (HTML), and the
module size along the pipeline (matplotlib)."""

from __future__ import annotations

from typing import Any

from mgpu_lab.widgets.ir_diff import DIFF_MARKS, PassStat, pass_diff
from mgpu_lab.widgets.static_html import FONT, code_block, esc, section, table

_DIFF_STYLE = {
    "add": "background:rgba(46,160,67,0.2)",
    "del": "background:rgba(248,81,73,0.2)",
    "hunk": "color:#1976d2",
    "ctx": "",
}


def diff_html(lines: list[tuple[str, str]]) -> str:
    """Classified diff lines as a coloured, scrolling code block."""
    return code_block(
        (f'<span style="{_DIFF_STYLE[kind]}">{esc(DIFF_MARKS[kind] + text)}</span>' for kind, text in lines),
        max_height=400,
    )


def ir_html(passes: list[tuple[str, str]] | tuple[tuple[str, str], ...], stats: list[PassStat], title: str) -> str:
    """Pass table, the last module, and a collapsible diff per pass that changed something."""
    if not passes:
        return section(f"IR: {title}", "<i>no passes recorded: compile with pass dumps enabled</i>")
    rows = [
        (f"{i}. {s.name}", s.lines, f"+{s.added}" if s.changed else "", f"-{s.removed}" if s.changed else "unchanged")
        for i, s in enumerate(stats)
    ]
    diffs = "".join(
        f'<details style="{FONT}"><summary>{esc(f"{i}. {s.name}")} (+{s.added} -{s.removed})</summary>'
        f"{diff_html(pass_diff(passes, i))}</details>"
        for i, s in enumerate(stats)
        if s.changed and i > 0
    )
    final = code_block((esc(line) for line in passes[-1][1].splitlines()), max_height=400)
    return (
        section(f"IR: {title}: {len(passes)} passes", table(("pass", "lines", "added", "removed"), rows))
        + section("Diffs", diffs or "<i>no pass changed the module</i>")
        + section(f"Module after {passes[-1][0]}", final)
    )


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
