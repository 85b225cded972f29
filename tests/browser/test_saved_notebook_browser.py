"""A saved notebook shows its viewers without their kernel: after a restart, and elsewhere.

Run, save, shut the kernel down, open the notebook again (JupyterLab 4 and Notebook 7): each
viewer shows its static rendering and no widget error, and the browser console has no error
either (the saved file holds no widget reference it cannot resolve: the server extension's
pre-save hook). A copy that this server never signed (what another machine sees: an untrusted
notebook) shows the static renderings as well.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import ARTIFACTS, REPO

from test_widgets_browser import RENDER_TIMEOUT_MS, STEP_TIMEOUT_MS, _open_and_run_all

pytestmark = pytest.mark.browser

NOTEBOOK = "widgets_notebook.ipynb"
# What each static rendering must show, by viewer.
STATIC_TEXT = ("Regions", "HGMMA.64x8x16.F32.BF16", "8-way bank conflict", "gpu.module(convert-gpu-to-nvvm")


def _api(url: str, method: str = "GET", body: dict | None = None) -> Any:
    request = urllib.request.Request(
        url, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read()
    return json.loads(text) if text else None


def _copy(jupyter_url: str, name: str) -> None:
    content = _api(f"{jupyter_url}api/contents/{NOTEBOOK}?content=1")["content"]
    _api(f"{jupyter_url}api/contents/{name}", "PUT", {"type": "notebook", "format": "json", "content": content})


def _shut_down_kernels_of(jupyter_url: str, path: str) -> None:
    for session in _api(f"{jupyter_url}api/sessions"):
        if session["path"] == path:
            _api(f"{jupyter_url}api/sessions/{session['id']}", "DELETE")


def _restart_kernels_of(jupyter_url: str, path: str) -> None:
    sessions = [s for s in _api(f"{jupyter_url}api/sessions") if s["path"] == path]
    assert sessions, f"no kernel runs {path}"
    for session in sessions:
        _api(f"{jupyter_url}api/kernels/{session['kernel']['id']}/restart", "POST", {})


# Errors Notebook 7 (7.6) itself logs opening any notebook, a plain `1+1` one included: not ours.
NOTEBOOK7_OWN_ERRORS = (
    "pageerror: Cannot read properties of undefined (reading 'schema')",
    "pageerror: Command 'filebrowser:open-path' not registered.",
)


def ours(errors: list[str]) -> list[str]:
    """`errors` less those the host application logs on its own."""
    return [e for e in errors if e not in NOTEBOOK7_OWN_ERRORS]


def collect_console_errors(page: Any) -> list[str]:
    """A list that fills with the page's console errors and uncaught exceptions."""
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(f"console.error: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda err: errors.append(f"pageerror: {err}"))
    return errors


def _assert_static_views_readable(page: Any, shot: str) -> None:
    # By class: JupyterLab's sanitizer keeps classes but drops data-* attributes (untrusted).
    try:
        page.wait_for_selector(".mgl-static", timeout=RENDER_TIMEOUT_MS)
        page.wait_for_timeout(3000)  # let the widget manager give up on the models it cannot find
    finally:
        page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)
    statics = page.locator(".mgl-static")
    assert statics.count() == 4
    text = " ".join(statics.all_inner_texts())
    for expected in STATIC_TEXT:
        assert expected in text
    for i in range(4):
        assert statics.nth(i).is_visible()
    # The timeline's picture: an image output of its own, right after its static rendering.
    image = page.locator(".jp-OutputArea-child:has(.mgl-static) + .jp-OutputArea-child .jp-RenderedImage img").first
    assert image.is_visible() and image.evaluate("img => img.complete && img.naturalWidth > 100")
    errors = page.locator(".jp-OutputArea-output:has-text('Error displaying widget')")
    assert all(not errors.nth(i).is_visible() for i in range(errors.count()))
    assert page.locator(".mgl-tl canvas").count() == 0  # no live view without its kernel


@pytest.mark.parametrize("ui", ["lab/tree", "notebooks"])
def test_saved_notebook_shows_static_views_after_restart(jupyter_url: str, browser: Any, ui: str) -> None:
    name = f"saved_{ui.split('/')[0]}.ipynb"
    _copy(jupyter_url, name)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors = collect_console_errors(page)
    try:
        _open_and_run_all(page, f"{jupyter_url}{ui}/{name}{'?reset' if ui.startswith('lab') else ''}")
        # Live: the widgets render and hide their static twins.
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-mgl-static]')].every((n) => n.offsetParent === null)",
            timeout=STEP_TIMEOUT_MS,
        )
        # Wait for the save's own answer, then read the file once. Polling the contents API
        # while the server writes the notebook can read a half-written file; the server then
        # takes the file for corrupt, moves it to `.invalid` and restores the copy from before.
        with page.expect_response(
            lambda r: r.request.method == "PUT" and f"api/contents/{name}" in r.url, timeout=STEP_TIMEOUT_MS
        ) as saved:
            page.keyboard.press("Control+s")
        assert saved.value.ok, f"saving {name} answered {saved.value.status}"
        outputs = [o for c in _api(f"{jupyter_url}api/contents/{name}?content=1")["content"]["cells"]
                   for o in c.get("outputs", [])]
        assert any("data-mgl-static" in json.dumps(o) for o in outputs), "the saved notebook holds no static views"
        # No widget reference whose model the file cannot restore (JupyterLab saved no widget state).
        assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
        # ... while the page that saved it keeps its live views.
        assert page.locator(".mgl-tl canvas").count() > 0 and page.locator(".mgl-tl canvas").first.is_visible()
        # Restart the kernel (the live views stay up, disconnected, until the page reloads).
        # Through the server, which answers once the new kernel is up: a restart from the menu
        # could miss its confirmation dialog on a loaded machine, and then the reload below
        # would find the old kernel's widget models and render live views, not static ones.
        _restart_kernels_of(jupyter_url, name)
        page.wait_for_selector(
            ".jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator[data-status='idle'], #notebook-container",
            timeout=RENDER_TIMEOUT_MS,
        )
        errors.clear()  # what the live page logged is test_widgets_browser's business
        page.reload(wait_until="domcontentloaded")
        _assert_static_views_readable(page, f"saved-{ui.split('/')[0]}-restarted")
        assert ours(errors) == [], errors  # no "widget model not found" for the views it saved
        # And a fresh page on the same notebook, once its kernel is gone altogether.
        page.close()
        _shut_down_kernels_of(jupyter_url, name)
        page = context.new_page()
        errors = collect_console_errors(page)
        page.goto(f"{jupyter_url}{ui}/{name}", wait_until="domcontentloaded")
        _assert_static_views_readable(page, f"saved-{ui.split('/')[0]}-reopened")
        assert ours(errors) == [], errors
    finally:
        context.close()
        _shut_down_kernels_of(jupyter_url, name)


def test_notebook_from_another_machine_shows_static_views(jupyter_url: str, browser: Any) -> None:
    """Executed elsewhere (this server never signed it): untrusted, yet readable."""
    pytest.importorskip("nbclient")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "elsewhere.ipynb"
        env = {**os.environ, "PYTHONPATH": str(REPO), "MGPU_LAB_WIDGET_FIXTURES": str(REPO / "tests/fixtures/widgets"),
               "MPLBACKEND": "Agg"}
        subprocess.run(
            [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
             str(Path(__file__).parent / NOTEBOOK), "--output", str(out)],
            check=True, env=env, capture_output=True, timeout=300,
        )
        content = json.loads(out.read_text())
    _api(f"{jupyter_url}api/contents/elsewhere.ipynb", "PUT", {"type": "notebook", "format": "json", "content": content})
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors = collect_console_errors(page)
    try:
        page.goto(f"{jupyter_url}lab/tree/elsewhere.ipynb?reset", wait_until="domcontentloaded")
        _assert_static_views_readable(page, "elsewhere-untrusted")
        assert ours(errors) == [], errors
    finally:
        context.close()
        _shut_down_kernels_of(jupyter_url, "elsewhere.ipynb")
