"""The viewers in a real JupyterLab + Chromium: each renders and answers an interaction.

Run: python -m pytest tests/browser -q  (skipped with a reason without Chromium/JupyterLab).
Screenshots and the browser console land in test-artifacts/browser/.
"""

from __future__ import annotations

import importlib.util
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import ARTIFACTS

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
except ImportError:  # without Playwright every test here is skipped (conftest says why)
    PlaywrightTimeoutError = TimeoutError

pytestmark = pytest.mark.browser

# Generous: the first kernel start and widget bundle load are slow on a cold machine.
RENDER_TIMEOUT_MS = 120_000
RUN_ALL_ATTEMPTS = 3
RUN_ALL_TIMEOUT_MS = 30_000  # the cells take a few seconds; a lost run never finishes
ALL_CELLS_RAN_JS = """() => {
  const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];
  return prompts.length > 0 && prompts.every((p) => /\\[\\d+\\]/.test(p.textContent));
}"""
STEP_TIMEOUT_MS = 20_000
LABEL_W, AXIS_H, HEADER_H = 170, 24, 16  # timeline.js geometry: label gutter, time axis, group header
CELLS = 8  # cells of widgets_notebook.ipynb

# Stands in for ui.perfetto.dev (the tests run offline): it answers the PING/PONG handshake
# and puts what it received into its title.
FAKE_PERFETTO = """<!DOCTYPE html><html><head><title>fake perfetto</title></head><body><script>
window.addEventListener("message", (e) => {
  if (e.data === "PING") { e.source.postMessage("PONG", e.origin); return; }
  if (e.data && e.data.perfetto) {
    document.title = "got " + e.data.perfetto.buffer.byteLength + " bytes: " + e.data.perfetto.title;
  }
});
</script></body></html>"""


@pytest.fixture(scope="module")
def page(jupyter_url: str, browser: Any) -> Iterator[Any]:
    """The test notebook, opened in JupyterLab with all its cells run."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    context.route(
        "https://ui.perfetto.dev/**",
        lambda route: route.fulfill(status=200, content_type="text/html", body=FAKE_PERFETTO),
    )
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
    page.on("pageerror", lambda err: console.append(f"pageerror: {err}"))
    try:
        try:
            _open_and_run_all(page, f"{jupyter_url}lab/tree/widgets_notebook.ipynb?reset")
        finally:
            page.screenshot(path=str(ARTIFACTS / "notebook.png"), full_page=True)
            console.append("cell prompts: " + " ".join(page.locator(".jp-InputArea-prompt").all_inner_texts()))
        yield page
    finally:
        (ARTIFACTS / "console.txt").write_text("\n".join(console))
        context.close()


def _open_and_run_all(
    page: Any, url: str, widgets: tuple[str, ...] = (".mgl-tl canvas", ".mgl-sass", ".mgl-smem .mgl-banks", ".mgl-ir")
) -> None:
    """Open a notebook, run all its cells, wait for the `widgets` selectors to render.

    On a loaded machine JupyterLab sometimes replaces the notebook's first kernel connection
    after the widget manager attached to it: the cells run, the static renderings show, but
    every widget model is "not found". A reload gives the page a working manager.
    """
    for attempt in range(2):
        if attempt:
            page.once("dialog", lambda dialog: dialog.accept())  # "leave the page?" (unsaved outputs)
            page.reload(wait_until="domcontentloaded")
        _run_all(page, url if not attempt else None)
        try:
            for selector in widgets:
                page.wait_for_selector(selector, state="attached", timeout=RENDER_TIMEOUT_MS // (3 - 2 * attempt))
            return
        except PlaywrightTimeoutError:
            if attempt:
                raise


def _run_all(page: Any, url: str | None) -> None:
    """Open `url` (unless None: the page is already there) and Run All until every cell ran."""
    if url:
        page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector(
        ".jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator[data-status='idle']",
        timeout=RENDER_TIMEOUT_MS,
    )
    dialog_select = page.locator(".jp-Dialog").get_by_role("button", name="Select", exact=True)
    # JupyterLab may still replace its first kernel connection right after the kernel reports
    # idle; requests sent on the replaced one are lost. So: Run All, and run again if the
    # cells did not all get an execution count.
    for attempt in range(RUN_ALL_ATTEMPTS):
        if dialog_select.is_visible():
            dialog_select.click()  # a kernel dialog despite autoStartDefaultKernel: take the default
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            page.wait_for_function(ALL_CELLS_RAN_JS, timeout=RUN_ALL_TIMEOUT_MS)
            break
        except PlaywrightTimeoutError:
            if attempt == RUN_ALL_ATTEMPTS - 1:
                raise


def _shot(locator: Any, name: str) -> None:
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def _span(timeline: Any) -> float:
    return float(timeline.get_attribute("data-t1")) - float(timeline.get_attribute("data-t0"))


def test_no_errors_while_rendering(page: Any) -> None:
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert errors.count() == 0, errors.all_inner_texts()
    assert page.locator(".jp-OutputArea-output:has-text('Error displaying widget')").count() == 0


def test_timeline_hover_shows_region_and_ctrl_wheel_zooms(page: Any) -> None:
    timeline = page.locator(".mgl-tl").first
    canvas = timeline.locator("canvas")
    canvas.scroll_into_view_if_needed()
    _shot(timeline, "timeline-before")
    box = canvas.bounding_box()
    plot_w = box["width"] - LABEL_W

    # The first warpgroup track (under SM 0's header) early in the kernel: the first block's
    # outermost region (mainloop).
    page.mouse.move(box["x"] + LABEL_W + 0.12 * plot_w, box["y"] + AXIS_H + HEADER_H + 5)
    tooltip = timeline.locator(".mgl-tooltip")
    tooltip.wait_for(state="visible", timeout=STEP_TIMEOUT_MS)
    assert "mainloop" in tooltip.inner_text() and "duration" in tooltip.inner_text()

    span_before = _span(timeline)
    range_before = timeline.locator(".mgl-tl-range").inner_text()
    page.mouse.move(box["x"] + LABEL_W + 0.5 * plot_w, box["y"] + box["height"] * 0.5)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -600)  # Ctrl+wheel up: zoom in around the pointer
    page.keyboard.up("Control")
    page.wait_for_function(
        "([el, span]) => el.dataset.t1 - el.dataset.t0 < span * 0.8",
        arg=[timeline.element_handle(), span_before],
        timeout=STEP_TIMEOUT_MS,
    )
    assert timeline.locator(".mgl-tl-range").inner_text() != range_before
    _shot(timeline, "timeline-zoomed")

    # Shift+drag pans: the span stays, the start moves.
    t0 = float(timeline.get_attribute("data-t0"))
    span = _span(timeline)
    page.mouse.move(box["x"] + LABEL_W + 0.5 * plot_w, box["y"] + 60)
    page.keyboard.down("Shift")
    page.mouse.down()
    page.mouse.move(box["x"] + LABEL_W + 0.3 * plot_w, box["y"] + 60, steps=5)
    page.mouse.up()
    page.keyboard.up("Shift")
    assert float(timeline.get_attribute("data-t0")) > t0
    assert _span(timeline) == pytest.approx(span, rel=1e-6)


def test_timeline_keys_zoom_and_pan_and_never_go_below_zero(page: Any) -> None:
    timeline = page.locator(".mgl-tl").first
    canvas = timeline.locator("canvas")
    timeline.locator("button", has_text="Reset zoom").click()
    box = canvas.bounding_box()
    page.mouse.click(box["x"] + 5, box["y"] + box["height"] - 5)  # focus: a click in the labels
    span = _span(timeline)
    for _ in range(3):
        page.keyboard.press("w")
    page.wait_for_function("([el, s]) => el.dataset.t1 - el.dataset.t0 < s * 0.6", arg=[timeline.element_handle(), span],
                           timeout=STEP_TIMEOUT_MS)
    zoomed = _span(timeline)
    page.keyboard.press("d")
    page.wait_for_function("el => Number(el.dataset.t0) > 0", arg=timeline.element_handle(), timeout=STEP_TIMEOUT_MS)
    t0 = float(timeline.get_attribute("data-t0"))
    for _ in range(40):
        page.keyboard.press("a")
    # Views are drawn on the next animation frame: wait for it.
    page.wait_for_function("el => Number(el.dataset.t0) === 0", arg=timeline.element_handle(), timeout=STEP_TIMEOUT_MS)
    assert 0.0 < t0  # it stopped at the kernel start, not below
    assert _span(timeline) == pytest.approx(zoomed, rel=1e-6)
    page.keyboard.press("s")
    page.wait_for_function("([el, s]) => el.dataset.t1 - el.dataset.t0 > s * 1.1", arg=[timeline.element_handle(), zoomed],
                           timeout=STEP_TIMEOUT_MS)
    # The notebook's cells did not get A/D (insert cell above, delete) from those keys.
    assert page.locator(".jp-Cell").count() == CELLS


def test_timeline_click_selects_a_slice_and_drag_summarizes_an_area(page: Any) -> None:
    timeline = page.locator(".mgl-tl").first
    timeline.locator("button", has_text="Reset zoom").click()
    canvas = timeline.locator("canvas")
    box = canvas.bounding_box()
    plot_w = box["width"] - LABEL_W
    page.mouse.click(box["x"] + LABEL_W + 0.12 * plot_w, box["y"] + AXIS_H + HEADER_H + 5)
    details = timeline.locator(".mgl-tl-details")
    page.wait_for_function("el => el.dataset.kind === 'slice'", arg=details.element_handle(), timeout=STEP_TIMEOUT_MS)
    text = details.inner_text()
    assert "Slice: mainloop" in text and "duration" in text and "block" in text

    page.mouse.move(box["x"] + LABEL_W + 0.1 * plot_w, box["y"] + AXIS_H + 2)
    page.mouse.down()
    page.mouse.move(box["x"] + LABEL_W + 0.6 * plot_w, box["y"] + box["height"] - 4, steps=6)
    page.mouse.up()
    page.wait_for_function("el => el.dataset.kind === 'area'", arg=details.element_handle(), timeout=STEP_TIMEOUT_MS)
    text = details.inner_text()
    assert text.startswith("Area:") and "mma" in text and "load" in text and "time in area" in text
    _shot(timeline, "timeline-area")
    page.keyboard.press("Escape")


def test_timeline_groups_collapse_and_search_finds_regions(page: Any) -> None:
    timeline = page.locator(".mgl-tl").first
    canvas = timeline.locator("canvas")
    tracks = int(timeline.get_attribute("data-tracks"))
    box = canvas.bounding_box()
    page.mouse.click(box["x"] + 10, box["y"] + AXIS_H + 4)  # SM 0's header: collapse it
    page.wait_for_function("([el, n]) => Number(el.dataset.tracks) < n", arg=[timeline.element_handle(), tracks],
                           timeout=STEP_TIMEOUT_MS)
    # The buttons redraw on the next frame: wait for the track count (a loaded machine lags).
    timeline.locator(".mgl-tl-collapse").click()
    page.wait_for_function("el => Number(el.dataset.tracks) === 8", arg=timeline.element_handle(),
                           timeout=STEP_TIMEOUT_MS)  # one squashed track per SM
    timeline.locator(".mgl-tl-expand").click()
    page.wait_for_function("([el, n]) => Number(el.dataset.tracks) === n", arg=[timeline.element_handle(), tracks],
                           timeout=STEP_TIMEOUT_MS)

    search = timeline.locator(".mgl-tl-search")
    search.fill("epilo")
    search.press("Enter")
    page.wait_for_function("el => el.dataset.kind === 'slice'", arg=timeline.locator(".mgl-tl-details").element_handle(),
                           timeout=STEP_TIMEOUT_MS)
    assert "Slice: epilogue" in timeline.locator(".mgl-tl-details").inner_text()
    assert timeline.locator(".mgl-tl-search-count").inner_text() == "48 slices"  # 24 blocks x 2 warpgroups
    search.fill("")
    search.press("Escape")


def test_timeline_slice_highlights_its_region_in_the_sass_view(page: Any) -> None:
    timeline = page.locator(".mgl-tl").first
    search = timeline.locator(".mgl-tl-search")
    search.fill("mma")
    search.press("Enter")
    sass = page.locator(".mgl-sass").first
    page.wait_for_function("el => el.textContent.startsWith('region mma')",
                           arg=sass.locator(".mgl-sass-region").element_handle(), timeout=STEP_TIMEOUT_MS)
    region_rows = sass.locator(".mgl-sass-listing .mgl-region")
    assert region_rows.count() > 0
    assert "HGMMA" in " ".join(region_rows.all_inner_texts())
    search.fill("")
    _shot(sass, "sass-region")


def test_timeline_region_filter_hides_a_region(page: Any) -> None:
    timeline = page.locator(".mgl-tl").first
    box = timeline.locator("canvas").first
    before = box.screenshot()
    timeline.locator("input[data-region='mainloop']").uncheck()
    page.wait_for_timeout(300)
    assert box.screenshot() != before
    timeline.locator("input[data-region='mainloop']").check()


def test_timeline_perfetto_download_and_open(page: Any) -> None:
    timeline = page.locator(".mgl-tl").first
    with page.expect_download(timeout=STEP_TIMEOUT_MS) as download_info:
        timeline.locator(".mgl-tl-save").click()
    download = download_info.value
    assert download.suggested_filename == "gemm_tile.perfetto-trace"
    path = ARTIFACTS / download.suggested_filename
    download.save_as(str(path))
    data = path.read_bytes()
    assert len(data) > 100 and data[0] == 0x0A  # field 1 (packet), length-delimited

    with page.context.expect_page(timeout=STEP_TIMEOUT_MS) as popup_info:
        timeline.locator(".mgl-tl-open").click()
    popup = popup_info.value
    popup.wait_for_function("() => document.title.startsWith('got ')", timeout=STEP_TIMEOUT_MS)
    assert popup.title() == f"got {len(data)} bytes: gemm_tile"
    popup.close()


def test_sass_click_shows_source_and_ptx_and_back(page: Any) -> None:
    sass = page.locator(".mgl-sass").first
    # nvdisasm's line table puts WARPGROUP.ARRIVE (the wgmma fence) on the wgmma line, 39.
    sass.locator(".mgl-sass-listing .mgl-code-line", has_text="WARPGROUP.ARRIVE").click()
    selected_source = sass.locator(".mgl-sass-source .mgl-selected")
    selected_source.wait_for(timeout=STEP_TIMEOUT_MS)
    assert "mgl.wgmma(acc, smem.a, smem.b.T)" in selected_source.inner_text()
    assert "gemm_tile.py, line 39" in sass.locator(".mgl-sass-source-title").inner_text()
    assert "wgmma.mma_async" in " ".join(sass.locator(".mgl-sass-ptx .mgl-related").all_inner_texts())
    _shot(sass, "sass-selected")

    # Selecting a source line highlights its SASS instructions.
    sass.locator(".mgl-sass-source .mgl-code-line", has_text="acc.store(out, row=tid)").click()
    related = sass.locator(".mgl-sass-listing .mgl-related")
    related.first.wait_for(timeout=STEP_TIMEOUT_MS)
    assert "STG.E.128" in " ".join(related.all_inner_texts())


def test_sass_ptx_click_keys_and_branch_links(page: Any) -> None:
    """A PTX line selects its source line and SASS; in the listing up/down move the selection,
    Enter follows a branch, n steps to the next search hit; a branch target is a link."""
    sass = page.locator(".mgl-sass").first
    listing = sass.locator(".mgl-sass-listing")
    selected = listing.locator(".mgl-selected")
    sass.locator(".mgl-sass-ptx .mgl-code-line", has_text="wgmma.mma_async").first.click()
    sass.locator(".mgl-sass-ptx .mgl-selected").wait_for(timeout=STEP_TIMEOUT_MS)
    assert "mgl.wgmma(acc, smem.a, smem.b.T)" in sass.locator(".mgl-sass-source .mgl-selected").inner_text()
    assert "HGMMA" in " ".join(listing.locator(".mgl-related").all_inner_texts())

    listing.locator(".mgl-code-line", has_text="@P0 BRA").click()
    page.wait_for_function("(el) => el && el.textContent.includes('@P0 BRA')",
                           arg=selected.element_handle(), timeout=STEP_TIMEOUT_MS)
    listing.press("Enter")  # follow the branch to its label line
    page.wait_for_function("(el) => el.querySelector('.mgl-selected')?.textContent.trim().endsWith('.L_x_1:')",
                           arg=listing.element_handle(), timeout=STEP_TIMEOUT_MS)
    listing.press("ArrowDown")  # the next line: BSYNC at 0x0110
    page.wait_for_function("(el) => (el.querySelector('.mgl-selected')?.textContent || '').includes('/*0110*/')",
                           arg=listing.element_handle(), timeout=STEP_TIMEOUT_MS)
    listing.locator("a.mgl-sass-branch", has_text=".L_x_5").click()
    page.wait_for_function("(el) => el.querySelector('.mgl-selected')?.textContent.trim().endsWith('.L_x_5:')",
                           arg=listing.element_handle(), timeout=STEP_TIMEOUT_MS)
    sass.locator(".mgl-sass-search").fill("UTMALDG")
    sass.locator(".mgl-sass-search").press("Enter")
    listing.press("n")
    page.wait_for_function("(el) => (el.querySelector('.mgl-selected')?.textContent || '').includes('UTMALDG')",
                           arg=listing.element_handle(), timeout=STEP_TIMEOUT_MS)
    sass.locator(".mgl-sass-search").fill("")
    _shot(sass, "sass-keys")


def test_sass_hides_nvdisasm_scaffolding_shows_source_and_jumps_between_classes(page: Any) -> None:
    sass = page.locator(".mgl-sass").first
    listing = sass.locator(".mgl-sass-listing")
    marker = listing.locator(".mgl-code-line", has_text="//## File").first
    assert not marker.is_visible() and not listing.locator(".mgl-code-line", has_text=".elftype").first.is_visible()
    sass.locator(".mgl-sass-scaffolding").check()
    assert marker.is_visible()
    sass.locator(".mgl-sass-scaffolding").uncheck()
    # The DSL line beside the instructions it became.
    assert "gemm_tile.py, line 39  acc = mgl.wgmma(acc, smem.a, smem.b.T)" in listing.inner_text()
    # Jump through the UTMA instructions: two, in order, then around.
    chip = sass.locator(".mgl-key-chip[data-key-class='UTMA']")
    assert chip.inner_text().strip() == "UTMA 2"
    chip.click()
    first = listing.locator(".mgl-selected").inner_text()
    chip.click()
    second = listing.locator(".mgl-selected").inner_text()
    assert "UTMALDG" in first and "UTMALDG" in second and first != second
    assert chip.inner_text().strip() == "UTMA 2/2"
    # Per source line, the counts of the classes that matter.
    assert "HGMMA 1" in " ".join(sass.locator(".mgl-sass-source .mgl-badge").all_inner_texts())
    _shot(sass, "sass-classes")


def test_sass_search_counts_matches(page: Any) -> None:
    sass = page.locator(".mgl-sass").first
    sass.locator(".mgl-sass-search").fill("UTMALDG")
    sass.locator(".mgl-sass-search").press("Enter")
    page.wait_for_function(
        "el => el.textContent.trim() === '1 / 2' || el.textContent.trim() === '2 / 2'",
        arg=sass.locator(".mgl-sass-matches").element_handle(),
        timeout=STEP_TIMEOUT_MS,
    )
    assert sass.locator(".mgl-sass-listing .mgl-match").count() == 2


def test_smem_switching_pattern_and_buffer_changes_highlighted_conflicts(page: Any) -> None:
    smem = page.locator(".mgl-smem").first
    report = smem.locator(".mgl-smem-report")
    # The notebook opens the unswizzled epilogue buffer with a WGMMA fragment store: 8-way.
    assert "8-way bank conflict" in report.inner_text()
    assert smem.locator("td.mgl-hit[data-ways='8']").count() == 32
    _shot(smem, "smem-fragment-unswizzled")

    smem.locator("select.mgl-smem-pattern").select_option("row")
    page.wait_for_function("el => el.textContent.includes('conflict-free')", arg=report.element_handle(), timeout=STEP_TIMEOUT_MS)
    assert smem.locator("td.mgl-hit[data-ways='8']").count() == 0
    assert smem.locator("td.mgl-hit[data-ways='1']").count() > 0

    # Back to the fragment, on the 128-byte-swizzled buffer: the swizzle removes the conflict.
    smem.locator("select.mgl-smem-pattern").select_option("fragment")
    page.wait_for_function("el => el.textContent.includes('8-way')", arg=report.element_handle(), timeout=STEP_TIMEOUT_MS)
    smem.locator(".mgl-smem-buf[data-buffer='a_stages']").click()
    page.wait_for_function(
        "el => el.textContent.includes('conflict-free') && el.textContent.includes('WGMMA')",
        arg=report.element_handle(),
        timeout=STEP_TIMEOUT_MS,
    )
    assert smem.locator("td.mgl-hit[data-ways='1']").count() == 32
    _shot(smem, "smem-fragment-swizzled")


def test_ir_pass_diff_shows_added_and_removed_lines(page: Any) -> None:
    ir = page.locator(".mgl-ir").first
    ir.locator(".mgl-ir-pass", has_text="convert-gpu-to-nvvm").click()
    ir.locator(".mgl-ir-diff").click()
    added = ir.locator(".mgl-ir-content .mgl-diff-add")
    added.first.wait_for(timeout=STEP_TIMEOUT_MS)
    assert "llvm.func @scale" in " ".join(added.all_inner_texts())
    assert "gpu.func @scale" in " ".join(ir.locator(".mgl-ir-content .mgl-diff-del").all_inner_texts())
    _shot(ir, "ir-diff")

    # An unchanged pass says so.
    ir.locator(".mgl-ir-pass", has_text="gpu.module(cse)").click()
    page.wait_for_function(
        "el => el.textContent.includes('changed nothing')",
        arg=ir.locator(".mgl-ir-status").element_handle(),
        timeout=STEP_TIMEOUT_MS,
    )


def test_choices_made_in_the_browser_reach_python(page: Any) -> None:
    """Zoom, an smem pattern and an IR pass chosen in the page are visible to the kernel."""
    timeline = page.locator(".mgl-tl").first
    canvas = timeline.locator("canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    timeline.locator("button", has_text="Reset zoom").click()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -800)
    page.keyboard.up("Control")
    smem = page.locator(".mgl-smem").first
    smem.locator(".mgl-smem-buf[data-buffer='a_stages']").click()
    smem.locator("select.mgl-smem-pattern").select_option("column")
    page.wait_for_function(
        "el => el.textContent.startsWith('hypothetical column')", arg=smem.locator(".mgl-smem-report").element_handle(),
        timeout=STEP_TIMEOUT_MS,
    )
    ir = page.locator(".mgl-ir").first
    ir.locator(".mgl-ir-pass", has_text="canonicalize").click()
    ir.locator(".mgl-ir-diff").click()
    page.wait_for_timeout(500)  # the timeline tells Python after the gesture settles (150 ms)

    probe = page.locator(".jp-CodeCell", has_text="timeline span")
    probe.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    output = probe.locator(".jp-OutputArea-output")
    output.filter(has_text="ir 3 diff").wait_for(timeout=STEP_TIMEOUT_MS)
    text = output.inner_text()
    span, total = (int(v) for v in text.split("timeline span ")[1].split("\n")[0].split(" of "))
    assert span < 0.5 * total
    assert "smem column a_stages | hypothetical column 0" in text



@pytest.mark.skipif(importlib.util.find_spec("notebook") is None, reason="Notebook 7 is not installed (pip install notebook)")
def test_viewers_render_in_notebook_7(jupyter_url: str, browser: Any) -> None:
    """The same notebook in the Notebook 7 interface: all four viewers render and answer."""
    # A copy of the notebook, so this page gets its own kernel session.
    request = urllib.request.Request(
        f"{jupyter_url}api/contents",
        data=json.dumps({"copy_from": "widgets_notebook.ipynb"}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        copy = json.load(response)["path"]
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        try:
            _open_and_run_all(page, f"{jupyter_url}notebooks/{copy}")
        finally:
            page.screenshot(path=str(ARTIFACTS / "notebook7.png"), full_page=True)
        smem = page.locator(".mgl-smem").first
        smem.locator(".mgl-smem-buf[data-buffer='epilogue.acc']").click()
        smem.locator("select.mgl-smem-pattern").select_option("fragment")
        page.wait_for_function(
            "el => el.textContent.includes('8-way')", arg=smem.locator(".mgl-smem-report").element_handle(),
            timeout=STEP_TIMEOUT_MS,
        )
        assert page.locator(".mgl-tl canvas").count() == 1 and page.locator(".mgl-ir-pass").count() == 6
        # The live views hid their static twins; the timeline answers Perfetto's keys and a click.
        assert all(not n.is_visible() for n in page.locator("[data-mgl-static]").all())
        timeline = page.locator(".mgl-tl").first
        canvas = timeline.locator("canvas")
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        span = _span(timeline)
        page.mouse.click(box["x"] + LABEL_W + 0.12 * (box["width"] - LABEL_W), box["y"] + AXIS_H + HEADER_H + 5)
        page.keyboard.press("w")
        page.wait_for_function("([el, s]) => el.dataset.t1 - el.dataset.t0 < s", arg=[timeline.element_handle(), span],
                               timeout=STEP_TIMEOUT_MS)
        assert "Slice: mainloop" in timeline.locator(".mgl-tl-details").inner_text()
        # ... and selecting it lit up the region in the SASS view of the same kernel.
        assert page.locator(".mgl-sass .mgl-sass-region").first.inner_text().startswith("region mainloop")
    finally:
        context.close()


def test_a_million_event_timeline_renders_and_zooms(jupyter_url: str, browser: Any) -> None:
    """The binary columns of a ~1M-event trace reach the browser, which draws and zooms it."""
    source = (
        "import os, sys\n"
        "sys.path.insert(0, os.environ['MGPU_LAB_WIDGET_FIXTURES'])\n"
        "from widget_fixtures import large_trace\n"
        "from mgpu_lab.widgets import Timeline\n"
        "big = Timeline(large_trace(1_000_000))\n"
        "big"
    )
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": "big", "metadata": {}, "outputs": [], "source": source}],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    request = urllib.request.Request(
        f"{jupyter_url}api/contents/million_events.ipynb",
        data=json.dumps({"type": "notebook", "format": "json", "content": notebook}).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=30).close()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        try:
            _open_and_run_all(page, f"{jupyter_url}lab/tree/million_events.ipynb?reset", (".mgl-tl canvas",))
        finally:
            page.screenshot(path=str(ARTIFACTS / "million-events.png"))
        timeline = page.locator(".mgl-tl").first
        # large_trace is deterministic: 445,632 mma regions (8 per unit, 2 units, 27,852 blocks).
        assert "445,632" in timeline.locator(".mgl-tl-summary").inner_text()
        span = _span(timeline)
        box = timeline.locator("canvas").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
        page.keyboard.down("Control")
        page.mouse.wheel(0, -600)
        page.keyboard.up("Control")
        page.wait_for_function(
            "([el, span]) => el.dataset.t1 - el.dataset.t0 < span * 0.8",
            arg=[timeline.element_handle(), span],
            timeout=STEP_TIMEOUT_MS,
        )
        # Drawing the visible rows stays interactive (generous bound for slow CI machines).
        assert float(timeline.get_attribute("data-draw-ms")) < 1000
        _shot(timeline, "million-events-zoomed")
    finally:
        context.close()
