"""Static shared-memory rendering: the address map and one buffer's bank grid with the
conflicts of an access pattern, as a matplotlib figure and as HTML (a table of buffers, the grid
as aligned text)."""

from __future__ import annotations

from typing import Any

from mgpu_lab.widgets.bank_grid import BankGrid
from mgpu_lab.widgets.bank_model import NUM_BANKS
from mgpu_lab.widgets.palette import CHUNK_COLORS, KIND_COLORS, conflict_color
from mgpu_lab.widgets.smem_map import UNNAMED_NOTE, MapEntry
from mgpu_lab.widgets.static_html import MONO, esc, scroll_box, section, table


def buffer_rows(entries: list[MapEntry]) -> list[list[str]]:
    """Table cells describing each buffer of the map."""
    return [
        [
            e.buffer.path,
            e.buffer.kind,
            f"{e.buffer.offset:,}",
            f"{e.end:,}",
            f"{e.buffer.nbytes:,}",
            f"{tuple(e.buffer.shape)} {e.buffer.dtype}",
            f"{e.buffer.swizzle} B" if e.buffer.swizzle else "none",
            str(e.buffer.union) if e.buffer.union >= 0 else "",
            "; ".join(e.warnings),
        ]
        for e in entries
    ]


BUFFER_HEADERS = ("buffer", "kind", "offset", "end", "bytes", "shape", "swizzle", "union", "warnings")


def smem_figure(entries: list[MapEntry], total: int, grid: BankGrid | None, title: str) -> Any:
    """Address map on top, bank grid of `grid` (if any) below."""
    from matplotlib.colors import to_rgb
    from matplotlib.figure import Figure

    lanes = max((e.lane for e in entries), default=0) + 1
    grid_rows = len(grid.labels) if grid else 0
    fig = Figure(figsize=(12, 1.2 + 0.45 * lanes + (0.22 * grid_rows + 1.2 if grid else 0)))
    axes = fig.subplots(2 if grid else 1, 1, gridspec_kw={"height_ratios": [0.6 + 0.4 * lanes, 0.2 * grid_rows + 0.6]} if grid else None)
    ax_map = axes[0] if grid else axes
    for e in entries:
        color = KIND_COLORS.get(e.buffer.kind, "#888888")
        ax_map.broken_barh([(e.buffer.offset, e.buffer.nbytes)], (e.lane, 0.8), facecolors=color, edgecolors="black", linewidth=0.5)
        ax_map.text(e.buffer.offset + e.buffer.nbytes / 2, e.lane + 0.4, e.buffer.path, ha="center", va="center", fontsize=7, color="white", clip_on=True)
    ax_map.set_xlim(0, max(total, 1))
    ax_map.set_ylim(lanes, 0)
    ax_map.set_yticks([])
    ax_map.set_xlabel("shared memory offset (bytes)")
    ax_map.set_title(f"{title}: shared memory, {total:,} B", fontsize=10)
    if grid:
        ax = axes[1]
        image = []
        for line, chunk_row in enumerate(grid.chunks):
            row = []
            for bank, chunk in enumerate(chunk_row):
                if (line, bank) in grid.hits:
                    row.append(to_rgb(conflict_color(grid.hits[(line, bank)][0])))
                else:
                    row.append(to_rgb(CHUNK_COLORS[chunk % 8]) if chunk >= 0 else (0.93, 0.93, 0.93))
            image.append(row)
        ax.imshow(image, aspect="auto", interpolation="nearest", extent=(-0.5, NUM_BANKS - 0.5, grid.first_line + len(image) - 0.5, grid.first_line - 0.5))
        for line, labels in enumerate(grid.labels):
            for bank, label in enumerate(labels):
                if label:
                    ax.text(bank, grid.first_line + line, label, ha="center", va="center", fontsize=4.5)
        ax.set_xticks(range(0, NUM_BANKS, 4))
        ax.set_xlabel("bank")
        ax.set_ylabel("128-byte line")
        ax.set_title(f"{grid.buffer.path} (swizzle {grid.buffer.swizzle} B): {grid.summary()}", fontsize=9)
    return fig


def grid_html(grid: BankGrid) -> str:
    """The bank grid as aligned monospace text: a row per 128-byte line, a column per bank, each
    cell coloured by its chunk (or by its conflict degree, bold, where the access hits it). Text
    and spans rather than a table, so a sanitizing renderer (nbconvert's, GitHub's), which drops
    the colours and prints table markup it does not allow, still shows the grid and its hits."""
    width = max([2, *(len(label) for labels in grid.labels for label in labels)])
    gutter = len(str(grid.first_line + len(grid.labels))) + 1
    lines = [" " * gutter + "".join(f"{b:>{width}} " for b in range(NUM_BANKS))]
    for line, (labels, chunks) in enumerate(zip(grid.labels, grid.chunks)):
        cells = []
        for bank, (label, chunk) in enumerate(zip(labels, chunks)):
            text = esc(f"{label:>{width}}")
            hit = grid.hits.get((line, bank))
            if hit:
                title = f"threads {', '.join(map(str, hit[1]))}; {hit[0]} distinct words in this bank"
                cells.append(f'<b style="background-color:{conflict_color(hit[0])}" title="{esc(title)}">{text}</b> ')
            else:
                color = CHUNK_COLORS[chunk % 8] if chunk >= 0 else "#eeeeee"
                cells.append(f'<span style="background-color:{color}">{text}</span> ')
        lines.append(f'<span style="color:#888">{grid.first_line + line:>{gutter - 1}}</span> ' + "".join(cells))
    return f'<pre style="{MONO} font-size:9px; line-height:1.3; margin:2px 0"><code>{chr(10).join(lines)}</code></pre>'


def smem_html(entries: list[MapEntry], total: int, grid: BankGrid | None, title: str) -> str:
    """Buffer table plus the bank grid of the current selection."""
    note = f'<div style="color:#666">{esc(UNNAMED_NOTE)}</div>' if any(not e.named for e in entries) else ""
    out = section(f"Shared memory: {title} ({total:,} B)", table(BUFFER_HEADERS, buffer_rows(entries), numeric_from=2) + note)
    if grid:
        out += section(f"Banks of {grid.buffer.path} (swizzle {grid.buffer.swizzle} B): {grid.summary()}", grid_html(grid))
    return scroll_box(out)
