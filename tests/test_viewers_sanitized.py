"""Static views survive a sanitizing renderer: inline styles only (no <style>, no <script>),
tables and meaning-carrying colours kept by bleach (nbconvert's sanitizer) once tables are
allowed, and every view's height bounded by a scroll box."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "widgets"))
from widget_fixtures import fixture_kernel, synthetic_trace

TABLE_TAGS = ["div", "span", "pre", "i", "table", "caption", "thead", "tbody", "tr", "th", "td", "img"]


def _views() -> dict[str, object]:
    from mgpu_lab.widgets import IrView, SassView, SmemView, Timeline

    return {
        "sass": SassView(fixture_kernel()),
        "smem": SmemView(fixture_kernel(), buffer="epilogue.acc", pattern="fragment"),
        "ir": IrView(fixture_kernel()),
        "timeline": Timeline(synthetic_trace()),
    }


def _sanitize(html: str) -> str:
    """nbconvert's SanitizeHTML as a renderer that shows tables configures it."""
    sanitize = pytest.importorskip("nbconvert.preprocessors.sanitize")
    from bleach import ALLOWED_TAGS

    cleaner = sanitize.SanitizeHTML(tags=[*ALLOWED_TAGS, *TABLE_TAGS], attributes={"*": ["style", "title", "alt", "src"]})
    return cleaner.sanitize_html_tags(html)


def test_static_views_use_inline_styles_only_and_bounded_height() -> None:
    for name, view in _views().items():
        html = view.to_html()
        assert "<style" not in html and "<script" not in html, name
        assert " class=" not in html, name  # nothing that needs a stylesheet
        assert re.match(r'<div style="max-height:\d+px; overflow:auto">', html), name


def test_static_views_survive_nbconverts_sanitizer() -> None:
    for name, view in _views().items():
        clean = _sanitize(view.to_html())
        assert "&lt;table" not in clean and "&lt;div" not in clean, name  # nothing escaped to text
        assert clean.count("<td") == view.to_html().count("<td"), name
        assert "overflow:auto" in clean.replace(" ", ""), name
    smem = _sanitize(_views()["smem"].to_html())
    assert "background-color" in smem and "8-way bank conflict" in smem  # conflict colours kept


def test_tall_code_blocks_keep_a_height_the_sanitizer_allows() -> None:
    from mgpu_lab.widgets.static_html import code_block

    tall = _sanitize(code_block([f"line {i}" for i in range(500)], max_height=400))
    assert "height:400px" in tall.replace(" ", "") and "overflow:auto" in tall.replace(" ", "")
    assert not re.search(r"(?<![-\w])height:", code_block(["one line"]))  # a short listing: no fixed height
