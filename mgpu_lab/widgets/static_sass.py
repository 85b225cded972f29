"""Static SASS rendering: resource report, instruction mix and the coloured listing with the
source line of every instruction, as HTML; the mix and resources as a matplotlib figure.

The HTML listing also has the live view's source-page basics that need no script: branch
targets are `<a href="#...">` links to their label line's anchor, and a column gives the
registers live at each instruction with the register-pressure peak marked.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from mgpu_lab.widgets.fallback import STATIC_BUDGET
from mgpu_lab.widgets.sass_listing import SassListing
from mgpu_lab.widgets.sass_parse import KEY_CLASSES
from mgpu_lab.widgets.static_html import FONT, code_block, esc, scroll_box, section, table, text_block, tokens_html


def _source_note(listing: SassListing, sass_line: int) -> str:
    src = listing.sass_source[sass_line]
    if src is None:
        return ""
    file_id, line = src
    text = listing.source_text(file_id, line).strip()
    return f'  <span style="color:#8a8a8a">// {esc(listing.file_labels[file_id])}, line {line + 1}  {esc(text[:60])}</span>'


PEAK_COLOR = "#c0392b"


def anchor_prefix(listing: SassListing) -> str:
    """Start of the listing's line anchors (`sass-<kernel>-<line>`), safe as an HTML id."""
    return "sass-" + re.sub(r"[^A-Za-z0-9_-]", "_", listing.name)


def _line_html(listing: SassListing, index: int, prefix: str) -> str:
    """A line's tokens; its branch target (if any) as a link to the label's anchor."""
    target = listing.branch_target[index] if listing.branch_target else -1
    out = []
    for cls, text in listing.lines[index].tokens:
        html = tokens_html([(cls, text)])
        if cls == "label" and target >= 0:
            html = f'<a href="#{prefix}-{target}" title="go to line {target + 1}" style="color:inherit">{html}</a>'
        out.append(html)
    return "".join(out)


def _live_cell(listing: SassListing, index: int, width: int, peak: set[int]) -> str:
    """The live-register count of a line, red and bold with a marker at the peak."""
    if not listing.live_registers:
        return ""
    n = listing.live_registers[index]
    text = f"{n:>{width}}" if n >= 0 else " " * width
    if index in peak:
        return f'<span style="color:{PEAK_COLOR}; font-weight:700" title="register-pressure peak">{text}▲</span> '
    return f'<span style="color:#8a8a8a">{text}</span>  '


def _peak_summary(listing: SassListing, prefix: str) -> str:
    """'register-pressure peak: N live registers at lines ...' with links to the lines."""
    if not listing.live_peak:
        return listing.live_note
    lines = listing.live_peak
    links = ", ".join(f'<a href="#{prefix}-{i}" style="color:{PEAK_COLOR}">{i + 1}</a>' for i in lines[:8])
    more = f" and {len(lines) - 8} more" if len(lines) > 8 else ""
    return (f'<span style="color:{PEAK_COLOR}">▲</span> register-pressure peak: '
            f"{listing.live_registers[lines[0]]} live registers at line{'s' if len(lines) > 1 else ''} {links}{more}")


MIX_BAR_CHARS = 30  # the longest bar of the instruction mix, in characters


def mix_bars(mix: tuple[tuple[str, int], ...]) -> str:
    """The instruction mix as labelled text bars (a sanitizer keeps text; it drops styled divs)."""
    top = max((count for _, count in mix), default=1)
    name_w = max((len(family) for family, _ in mix), default=0)
    count_w = max((len(f"{count:,}") for _, count in mix), default=0)
    lines = [
        f"{esc(family.ljust(name_w))}  {f'{count:,}':>{count_w}}  "
        f'<span style="color:#4e79a7">{"█" * max(1, round(MIX_BAR_CHARS * count / top))}</span>'
        for family, count in mix
    ]
    return text_block(lines)


def sass_html(listing: SassListing, budget: int = STATIC_BUDGET * 2 // 3) -> str:
    """Self-contained HTML of the SASS view: nvdisasm's own lines left out, each instruction
    with the source line it came from (where that changes), capped at `budget` characters."""
    resources = table(("quantity", "value", "note"), listing.resources, numeric_from=1)
    counts = Counter(c for c in listing.line_class if c)
    classes = " · ".join(f"{name} {counts.get(name, 0)}" for name, _ in KEY_CLASSES)
    width = len(str(len(listing.lines)))
    live_width = len(str(max(listing.live_registers, default=0)))
    peak = set(listing.live_peak)
    prefix = anchor_prefix(listing)
    body, used, previous = [], 0, None
    shown = [ln for ln in listing.lines if not listing.scaffolding[ln.index]]
    for k, ln in enumerate(shown):
        src = listing.sass_source[ln.index]
        note = _source_note(listing, ln.index) if src != previous else ""
        previous = src if src is not None else previous
        row = (f'<span id="{prefix}-{ln.index}" style="color:#999">{ln.index + 1:>{width}}</span>  '
               f"{_live_cell(listing, ln.index, live_width, peak)}{_line_html(listing, ln.index, prefix)}{note}")
        used += len(row) + 1
        if used > budget:
            body.append(f"<i>… {len(shown) - k:,} more lines (the live viewer has them all)</i>")
            break
        body.append(row)
    summary = (
        f'<div style="display:flex; gap:24px; flex-wrap:wrap; align-items:flex-start">'
        f"{section('Resources', resources)}{section('Instruction mix', mix_bars(listing.mix))}</div>"
    )
    note = " (line info from the listings)" if listing.line_info_derived else ""
    pressure = _peak_summary(listing, prefix)
    pressure = f'<div style="{FONT} margin:2px 0">{pressure}</div>' if pressure else ""
    return scroll_box(
        section(f"SASS: {listing.name}", summary)
        + section(f"Listing{note}: {classes}", pressure + code_block(body, max_height=600))
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

