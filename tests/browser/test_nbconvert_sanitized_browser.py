"""`jupyter nbconvert --to html --execute --HTMLExporter.sanitize_html=True` (the sanitizer a
public preview runs: no style attributes, no <style>, no th/thead/caption/img in HTML outputs):
every viewer's static view still reads right in Chromium.

Its tables read as tables and no markup shows as text; the timeline picture shows; each view
stays in a bounded box, so the page stays short; the SASS listing is whole, the browser's find
reaches it and its branch links work from the keyboard; and the console has no error. The
template's CDN scripts are answered with empty scripts (the test runs offline), the way
test_widgets_browser stands in for ui.perfetto.dev.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from conftest import ARTIFACTS

from test_nbconvert_offline_browser import export_html
from test_saved_notebook_browser import collect_console_errors

pytestmark = pytest.mark.browser

# document.body.scrollHeight of the page, at most. The notebook's cells, the trace summary, the
# four views in boxes of 24em (~340 px) and the timeline picture measured 2,400 px; one view
# without its bound adds 19,000 px (the GEMM's SASS listing) to 110,000 px (its IR passes), and
# before these boxes the page was 133,000 px.
MAX_PAGE_HEIGHT_PX = 8_000
MAX_VIEW_BOX_PX = 600  # a view's scroll box under the sanitizer: JupyterLab's 24em "scrolled output"
MARKUP_AS_TEXT = re.compile(r"</?(?:style|script|div|span|pre|table|thead|tbody|tr|td|th|caption|img)\b[^>]*>")


@pytest.fixture(scope="module")
def sanitized_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_html(tmp_path_factory.mktemp("nbconvert-sanitized"), "nbconvert-sanitized.html",
                       "--HTMLExporter.sanitize_html=True")


def test_sanitized_nbconvert_page_reads_right(sanitized_html: Path, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    stood_in: list[str] = []

    def empty_script(route: Any) -> None:
        stood_in.append(route.request.url)
        route.fulfill(status=200, content_type="application/javascript", body="")

    context.route(re.compile(r"^(?!file:|data:).*"), empty_script)
    page = context.new_page()
    errors = collect_console_errors(page)
    try:
        page.goto(sanitized_html.as_uri(), wait_until="load")
        page.wait_for_timeout(1000)
        page.screenshot(path=str(ARTIFACTS / "nbconvert-sanitized.png"), full_page=True)
        outputs = " ".join(page.locator(".jp-OutputArea").all_inner_texts())
        assert MARKUP_AS_TEXT.findall(outputs) == []  # the bank grid is text too, not a table
        statics = page.locator(".mgl-static")
        assert statics.count() == 4  # the %%mosaic cell's sass, smem and ir views, and the timeline
        text = " ".join(statics.all_inner_texts())
        assert "registers / thread" in text and "HGMMA" in text and "UTMALDG" in text  # the SASS view
        assert "swizzle" in text and "barrier" in text  # the smem map
        assert "convert-gpu-to-nvvm" in text and "passes" in text  # the IR pass table
        assert re.search(r"epilogue +[\d,]+ +[\d.]+ [µnm]?s", text) and "p95" in text  # the region table, aligned
        sass = statics.nth(0).inner_text()
        assert sass.startswith("SASS:") and "EXIT" in sass  # the listing to its end,
        assert "the live viewer has them all" not in sass  # not cut
        fonts = page.locator(".mgl-static pre").evaluate_all(
            "pres => pres.map((p) => getComputedStyle(p.querySelector('code') || p).fontFamily)")
        assert fonts and all("mono" in f.lower() for f in fonts), set(fonts)  # the columns line up
        image = page.locator(".jp-OutputArea-child:has(.mgl-static) + .jp-OutputArea-child img").first
        assert image.is_visible() and image.evaluate("img => img.complete && img.naturalWidth > 100")
        # Every view in a box of bounded height (its style is gone: the host's classes bound it).
        boxes = page.locator(".mgl-static .jp-Cell-outputArea")
        assert boxes.count() == 4
        heights = [boxes.nth(i).evaluate("b => [b.clientHeight, b.scrollHeight]") for i in range(4)]
        assert all(0 < shown <= MAX_VIEW_BOX_PX for shown, _ in heights), heights
        assert any(whole > 5 * shown for shown, whole in heights), heights  # the listings scroll inside
        height = page.evaluate("document.body.scrollHeight")
        assert height <= MAX_PAGE_HEIGHT_PX, height
        # Search: the browser's find reaches text inside the boxes.
        assert page.evaluate("() => window.find('UTMALDG')")
        # Keyboard: a branch link of the SASS listing, focused and followed with Enter, brings
        # its target line into the listing's view (no script: an in-page anchor).
        link = page.locator(".mgl-static a[href^='#sass-']").first
        target = link.get_attribute("href")
        link.focus()
        page.keyboard.press("Enter")
        page.wait_for_function("(h) => location.hash === h", arg=target)
        assert page.locator(f"[id='{target[1:]}']").evaluate(
            """(line) => { const box = line.closest('.jp-Cell-outputArea').getBoundingClientRect();
                           const r = line.getBoundingClientRect();
                           return r.top >= box.top - 1 && r.bottom <= box.bottom + 1; }""")
        assert stood_in  # the template's CDN scripts were asked for (and answered empty)
        assert errors == [], errors
    finally:
        context.close()


def test_sanitized_nbconvert_page_shows_no_markup_as_text(sanitized_html: Path, browser: Any) -> None:
    context = browser.new_context()
    context.route(re.compile(r"^(?!file:|data:).*"), lambda route: route.fulfill(status=200, body=""))
    page = context.new_page()
    try:
        page.goto(sanitized_html.as_uri(), wait_until="load")
        outputs = " ".join(page.locator(".jp-OutputArea").all_inner_texts())
        assert MARKUP_AS_TEXT.findall(outputs) == []
    finally:
        context.close()
