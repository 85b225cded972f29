"""Static SASS rendering: resource report, instruction mix and the coloured listing with the
source line of every instruction, as HTML; the mix and resources as a matplotlib figure."""

from __future__ import annotations

from typing import Any

from mgpu_lab.widgets.sass_listing import SassListing
from mgpu_lab.widgets.static_html import code_block, esc, section, table, tokens_html


def _source_note(listing: SassListing, sass_line: int) -> str:
    src = listing.sass_source[sass_line]
    if src is None:
        return ""
    file_id, line = src
    name = listing.files[file_id].replace("\\", "/").rsplit("/", 1)[-1]
    text = listing.source_text(file_id, line).strip()
    return f'  <span style="color:#8a8a8a">// {esc(name)}:{line + 1}  {esc(text[:60])}</span>'


def sass_html(listing: SassListing, max_lines: int = 4000) -> str:
    """Self-contained HTML of the SASS view (listing capped at `max_lines` lines)."""
    resources = table(("quantity", "value", "note"), listing.resources, numeric_from=1)
    mix = table(("family", "instructions"), listing.mix)
    shown = listing.lines[:max_lines]
    width = len(str(len(listing.lines)))
    body = [
        f'<span style="color:#999">{ln.index + 1:>{width}}</span>  {tokens_html(ln.tokens)}{_source_note(listing, ln.index)}'
        for ln in shown
    ]
    if len(listing.lines) > max_lines:
        body.append(f"... {len(listing.lines) - max_lines} more lines")
    summary = (
        f'<div style="display:flex; gap:24px; flex-wrap:wrap; align-items:flex-start">'
        f"{section('Resources', resources)}{section('Instruction mix', mix)}</div>"
    )
    note = " (line info from the listings)" if listing.line_info_derived else ""
    return (
        section(f"SASS: {listing.name}", summary)
        + section(f"Listing{note}", code_block(body, max_height=600))
    )


def sass_figure(listing: SassListing) -> Any:
    """Instruction mix bars beside the resource report."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, max(3.0, 0.28 * len(listing.mix) + 1.2)))
    ax, text_ax = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    names = [name for name, _ in listing.mix][::-1]
    counts = [count for _, count in listing.mix][::-1]
    ax.barh(names, counts, color="#4e79a7")
    for y, count in enumerate(counts):
        ax.text(count, y, f" {count}", va="center", fontsize=8)
    ax.set_xlabel("instructions")
    ax.set_title(f"{listing.name}: instruction mix", fontsize=10)
    text_ax.axis("off")
    report = "\n".join(f"{q:<24}{v}" + (f"  ({n})" if n else "") for q, v, n in listing.resources)
    text_ax.text(0, 1, report, va="top", family="monospace", fontsize=8)
    text_ax.set_title("resources", fontsize=10, loc="left")
    return fig

