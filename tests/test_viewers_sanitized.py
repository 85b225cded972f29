"""Static views survive a sanitizing renderer: inline styles only (no <style>, no <script>),
and what nbconvert's sanitizer (`HTMLExporter.sanitize_html`, the `clean_html` filter: no style
attributes, no th/thead/caption/img) leaves is still readable: tables as tables, nothing
escaped to text, pictures as image outputs of their own, every view in a bounded scroll box."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "widgets"))
from widget_fixtures import fixture_kernel, synthetic_trace

TABLE_TAGS = ["div", "span", "pre", "i", "b", "a", "table", "tr", "td", "img"]
# Tags a view may use: those nbconvert's sanitize_html keeps (bleach's defaults + its own few).
KEPT_BY_NBCONVERT = {"a", "b", "blockquote", "code", "acronym", "i", "ol", "abbr", "li", "ul", "strong", "em",
                     "div", "pre", "span", "table", "tr", "td"}


def _views() -> dict[str, object]:
    from mgpu_lab.widgets import IrView, SassView, SmemView, Timeline

    return {
        "sass": SassView(fixture_kernel()),
        "smem": SmemView(fixture_kernel(), buffer="epilogue.acc", pattern="fragment"),
        "ir": IrView(fixture_kernel()),
        "timeline": Timeline(synthetic_trace()),
    }


def _sanitize(html: str) -> str:
    """nbconvert's SanitizeHTML as a renderer that keeps inline styles configures it."""
    sanitize = pytest.importorskip("nbconvert.preprocessors.sanitize")
    from bleach import ALLOWED_TAGS

    cleaner = sanitize.SanitizeHTML(tags=[*ALLOWED_TAGS, *TABLE_TAGS], attributes={"*": ["style", "title", "alt", "src"]})
    return cleaner.sanitize_html_tags(html)


def _nbconvert_clean_html(html: str) -> str:
    """What `jupyter nbconvert --to html --HTMLExporter.sanitize_html=True` does to a text/html output."""
    strings = pytest.importorskip("nbconvert.filters.strings")
    return strings.clean_html(html)


def test_static_views_use_inline_styles_only_and_bounded_height() -> None:
    from mgpu_lab.widgets.static_html import SCROLLED_OUTPUT_CLASSES

    for name, view in _views().items():
        html = view.static_bundle()["text/html"]
        assert "<style" not in html and "<script" not in html, name
        # No stylesheet of ours: the only classes are our marker and the host's scroll box.
        allowed = {"mgl-static", *" ".join(SCROLLED_OUTPUT_CLASSES).split()}
        used = {c for attr in re.findall(r' class="([^"]*)"', html) for c in attr.split()}
        assert used <= allowed, (name, used - allowed)
        assert re.search(r'<div class="jp-Cell-outputArea" style="max-height:\d+px; overflow:auto">', html), name
        tags = set(re.findall(r"<([a-z][a-z0-9]*)\b", html))
        assert tags <= KEPT_BY_NBCONVERT, (name, tags - KEPT_BY_NBCONVERT)


def test_static_views_survive_a_sanitizer_that_keeps_styles() -> None:
    for name, view in _views().items():
        html = view.static_bundle()["text/html"]
        clean = _sanitize(html)
        assert "&lt;table" not in clean and "&lt;div" not in clean, name  # nothing escaped to text
        assert clean.count("<pre") == html.count("<pre"), name
        assert "overflow:auto" in clean.replace(" ", ""), name
    smem = _sanitize(_views()["smem"].static_bundle()["text/html"])
    assert "background-color" in smem and "8-way bank conflict" in smem  # conflict colours kept


# Text each view's tables and listings must still show once nbconvert has sanitized them.
READABLE = {
    "sass": ("registers / thread", "HGMMA.64x8x16.F32.BF16", "█"),
    "smem": ("8-way bank conflict",),
    "ir": ("gpu.module(convert-gpu-to-nvvm)", "unchanged"),
    "timeline": ("mainloop", "p95", "share"),
}


@pytest.mark.parametrize("name", [
    "sass", "ir", "timeline",
    "smem",
])
def test_static_views_survive_nbconverts_sanitize_html(name: str) -> None:
    view = _views()[name]
    html = view.static_bundle()["text/html"]
    clean = _nbconvert_clean_html(html)
    escaped = re.findall(r"&lt;/?(?:div|span|pre|table|tbody|tr|td|th|thead|caption|img|style|b|i|a)(?:\s|&gt;)", clean)
    assert not escaped, escaped[:3]  # no markup of ours printed as text
    text = re.sub(r"<[^>]+>", "", clean)
    assert all(expected in text for expected in READABLE[name])
    assert "jp-mod-outputsScrolled" in clean and "jp-Cell-outputArea" in clean  # the bounded box


def test_the_timeline_picture_is_an_image_output() -> None:
    outputs = _views()["timeline"].static_outputs()
    assert [list(bundle) for bundle in outputs] == [["text/html", "text/plain"], ["image/png", "text/plain"]]
    assert "<img" not in outputs[0]["text/html"]  # sanitizers escape <img>; they pass image outputs whole


def test_tall_code_blocks_keep_a_height_the_sanitizer_allows() -> None:
    from mgpu_lab.widgets.static_html import code_block

    tall = _sanitize(code_block([f"line {i}" for i in range(500)], max_height=400))
    assert "height:400px" in tall.replace(" ", "") and "overflow:auto" in tall.replace(" ", "")
    assert not re.search(r"(?<![-\w])height:", code_block(["one line"]))  # a short listing: no fixed height
