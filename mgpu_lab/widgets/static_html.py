"""Building blocks of the static HTML renderings: tables, embedded figures, code listings.

Everything is inline (styles on elements, images as data URLs) because nbconvert output and
GitHub's notebook view drop external files and `<style>` blocks are stripped by some viewers.
Colours that carry meaning use `background-color` (kept by bleach's CSS allow-list, unlike
the `background` shorthand); each view is a `scroll_box` so its height stays bounded.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

FONT = "font-family: ui-sans-serif, system-ui, sans-serif; font-size: 12px;"
MONO = "font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px;"
CELL = "padding: 2px 8px; border-bottom: 1px solid #ddd;"
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


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric_from: int = 1, caption: str = "") -> str:
    """An HTML table; columns from `numeric_from` on are right-aligned (numbers)."""
    head = "".join(
        f'<th style="{CELL} text-align:{"right" if i >= numeric_from else "left"}">{esc(h)}</th>'
        for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td style="{CELL} text-align:{"right" if i >= numeric_from else "left"}">{esc(v)}</td>'
            for i, v in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    cap = f'<caption style="text-align:left; font-weight:600; padding:4px 0">{esc(caption)}</caption>' if caption else ""
    return f'<table style="border-collapse: collapse; {FONT}">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def tokens_html(tokens: Iterable[tuple[str, str]]) -> str:
    """Syntax-coloured spans for (class, text) tokens."""
    return "".join(
        f'<span style="color:{TOKEN_COLORS[cls]}">{esc(text)}</span>' if cls in TOKEN_COLORS else esc(text)
        for cls, text in tokens
    )


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
        f'padding:6px; border:1px solid #ddd; line-height:1.35">{chr(10).join(lines)}</pre>'
    )


def scroll_box(body: str, max_height: int = VIEW_MAX_HEIGHT) -> str:
    """A whole static view in a box of bounded height that scrolls (inline style only)."""
    return f'<div style="max-height:{max_height}px; overflow:auto">{body}</div>'



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

