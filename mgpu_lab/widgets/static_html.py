"""Building blocks of the static HTML renderings: tables, embedded figures, code listings.

Everything is inline (styles on elements, images as data URLs) because nbconvert output and
GitHub's notebook view drop external files and `<style>` blocks are stripped by some viewers.
Colours that carry meaning use `background-color` (kept by bleach's CSS allow-list, unlike
the `background` shorthand); each view is a `scroll_box` so its height stays bounded.

The markup keeps to the tags that the strictest notebook sanitizer we know keeps (nbconvert's
`sanitize_html`: div, span, pre, code, b, i, a, table, tr, td and a few more; no th, thead,
tbody, caption or img; no style attributes at all): what it drops is only looks, never text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Any

FONT = "font-family: ui-sans-serif, system-ui, sans-serif; font-size: 12px;"
MONO = "font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px;"
LINE_PX = 17  # one line of a code block: 12px monospace at line-height 1.35, rounded up
VIEW_MAX_HEIGHT = 1200  # px: a static view taller than this scrolls inside its output


# SASS token colours (the widget's CSS uses the same hues).
TOKEN_COLORS = {
    "addr": "#999999",
    "pred": "#b5179e",
    "op": "#1f4e9c; font-weight: 600",
    "reg": "#0b7a75",
    "ureg": "#7a5c00",
    "preg": "#b5179e",
    "sreg": "#8a3ffc",
    "const": "#a0522d",
    "imm": "#c2410c",
    "label": "#2b7a0b",
    "kw": "#555555",
    "comment": "#8a8a8a; font-style: italic",
    "dir": "#8a8a8a",
}


def esc(text: Any) -> str:
    """HTML-escaped text of any value (quotes included, for attributes)."""
    return html.escape(str(text), quote=True)


NUMBER = re.compile(r"[-+]?[\d.,]")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric_from: int = 1, caption: str = "") -> str:
    """A table as aligned monospace text (bold header, a rule under it); columns from
    `numeric_from` on are right-aligned (numbers).

    Text, not `<table>`: nbconvert's sanitizer keeps table, tr and td, but the HTML parser it
    runs adds a tbody to every table, which it then prints as "<tbody>" text. Aligned text reads
    the same under every sanitizer, and the browser's find and copy see plain lines.
    """
    cells = [[str(h) for h in headers], *[[str(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    # A column from `numeric_from` on is right-aligned when its values are numbers (a note is not).
    right = [i >= numeric_from and all(NUMBER.match(row[i]) for row in cells[1:] if row[i]) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if right[i] else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths))).rstrip()

    lines = [f"<b>{esc(line(cells[0]))}</b>", esc("  ".join("-" * w for w in widths)), *(esc(line(r)) for r in cells[1:])]
    cap = f'<div style="{FONT} padding:4px 0"><b>{esc(caption)}</b></div>' if caption else ""
    return cap + text_block(lines)


def tokens_html(tokens: Iterable[tuple[str, str]]) -> str:
    """Syntax-coloured spans for (class, text) tokens."""
    return "".join(
        f'<span style="color:{TOKEN_COLORS[cls]}">{esc(text)}</span>' if cls in TOKEN_COLORS else esc(text)
        for cls, text in tokens
    )


def text_block(lines_html: Iterable[str]) -> str:
    """Lines of monospace text (tables, bars) with no box around them.

    The text sits in a `<code>` inside the `<pre>`: where the style attribute is stripped,
    hosts still set code in a monospace font (nbconvert's lab template gives an output's bare
    `<pre>` the page's proportional font, which would undo the columns' alignment).
    """
    return f'<pre style="{MONO} margin:2px 0; line-height:1.35"><code>{chr(10).join(lines_html)}</code></pre>'


def code_block(lines_html: Iterable[str], max_height: int = 480) -> str:
    """Pre-formatted lines in a scrolling box.

    A listing taller than the box also gets a fixed `height`: sanitizers that keep only a
    list of CSS properties (bleach's default, which nbconvert uses) drop `max-height` but keep
    `height` and `overflow`, so the box stays bounded there too.
    """
    lines = list(lines_html)
    fixed = f"height:{max_height}px; " if len(lines) * LINE_PX > max_height else ""
    return (
        f'<pre style="{MONO} {fixed}max-height:{max_height}px; overflow:auto; margin:4px 0; '
        f'padding:6px; border:1px solid #ddd; line-height:1.35"><code>{chr(10).join(lines)}</code></pre>'
    )


# JupyterLab's own classes for a cell whose outputs scroll: JupyterLab, Notebook 7 and nbconvert's
# lab template style them as a box 24em high that scrolls and can be resized. A sanitizer that
# drops every style attribute (nbconvert's) keeps classes, so the view stays bounded there too;
# where the inline style survives, its max-height wins (the host's rule yields to it).
SCROLLED_OUTPUT_CLASSES = ("jp-CodeCell jp-mod-outputsScrolled", "jp-Cell-outputArea")


def scroll_box(body: str, max_height: int = VIEW_MAX_HEIGHT) -> str:
    """A whole static view in a box of bounded height that scrolls, with or without its style."""
    outer, inner = SCROLLED_OUTPUT_CLASSES
    return f'<div class="{outer}"><div class="{inner}" style="max-height:{max_height}px; overflow:auto">{body}</div></div>'


def header_cells_as_data_cells(html_text: str) -> str:
    """`html_text` with its th cells written as td: sanitizers that know no th print it as text."""
    return re.sub(r"<(/?)th\b", r"<\1td", html_text)



def section(title: str, body: str) -> str:
    """A titled block around an HTML fragment."""
    return f'<div style="{FONT} margin: 6px 0"><div style="font-weight:600; margin-bottom:4px">{esc(title)}</div>{body}</div>'


def format_ns(ns: float) -> str:
    """A duration with a unit that keeps 3-4 significant digits (ns, µs, ms, s)."""
    a = abs(ns)
    if a < 1e3:
        return f"{ns:.0f} ns"
    if a < 1e6:
        return f"{ns / 1e3:.3g} µs" if a < 1e4 else f"{ns / 1e3:.1f} µs"
    if a < 1e9:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e9:.3f} s"

