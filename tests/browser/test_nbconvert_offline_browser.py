"""The stock `jupyter nbconvert --to html --execute`, offline, shows every viewer's static view.

The notebook builds the Hopper GEMM in a `%%mosaic` cell (`--show sass,smem,ir`) and shows a
recorded trace. nbconvert runs without a network where the machine allows it (a network
namespace with only loopback); the HTML is then opened in Chromium with every non-file request
refused, so the widget manager nbconvert points at on a CDN never loads.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ARTIFACTS, REPO

pytestmark = pytest.mark.browser
NOTEBOOK = Path(__file__).parent / "mosaic_gemm_notebook.ipynb"


def _offline_prefix() -> list[str]:
    """A command prefix that runs without a network (loopback only), or [] where not allowed."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if not unshare or not ip:
        return []
    probe = subprocess.run([unshare, "-rn", ip, "link", "set", "lo", "up"], capture_output=True)
    return [unshare, "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"] if probe.returncode == 0 else []


def export_html(out_dir: Path, artifact: str, *options: str) -> Path:
    """The test notebook executed and exported by `jupyter nbconvert --to html` (offline where
    the machine allows) with `options`; a copy lands in the artifacts as `artifact`."""
    notebook = out_dir / NOTEBOOK.name
    shutil.copy(NOTEBOOK, notebook)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "MGPU_LAB_REPO": str(REPO), "MPLBACKEND": "Agg"}
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute", *options, str(notebook)]
    done = subprocess.run(_offline_prefix() + command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    html = notebook.with_suffix(".html")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(html, ARTIFACTS / artifact)
    return html


@pytest.fixture(scope="module")
def exported_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_html(tmp_path_factory.mktemp("nbconvert"), "nbconvert-offline.html")


def test_stock_nbconvert_html_holds_the_static_views(exported_html: Path) -> None:
    text = exported_html.read_text()
    assert "cdn.jsdelivr.net" in text or "unpkg.com" in text  # what the stock exporter links
    statics = re.findall(r'data-mgl-static="[0-9a-f]+"', text)
    assert len(statics) >= 4  # sass, smem, ir (the %%mosaic cell) and the timeline
    assert len(text) < 4 * 1024 * 1024


def test_stock_nbconvert_html_shows_the_views_offline(exported_html: Path, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    blocked: list[str] = []

    def refuse(route: Any) -> None:
        blocked.append(route.request.url)
        route.abort()

    context.route(re.compile(r"^(?!file:|data:).*"), refuse)
    page = context.new_page()
    try:
        page.goto(exported_html.as_uri(), wait_until="load")
        page.wait_for_timeout(1000)
        page.screenshot(path=str(ARTIFACTS / "nbconvert-offline.png"), full_page=True)
        statics = page.locator(".mgl-static")
        shown = [statics.nth(i) for i in range(statics.count()) if statics.nth(i).is_visible()]
        text = " ".join(s.inner_text() for s in shown)
        assert "HGMMA" in text and "UTMALDG" in text  # the SASS listing
        assert "profiler" in text and "barrier" in text and "swizzle" in text  # the smem map
        assert "convert-gpu-to-nvvm" in text and "passes" in text  # the IR pass table
        assert "Regions" in text and "mma" in text  # the timeline's table
        # The timeline's picture is an image output of its own, right after its static rendering.
        image = page.locator(".jp-OutputArea-child:has(.mgl-static) + .jp-OutputArea-child img").first
        assert image.is_visible() and image.evaluate("img => img.complete && img.naturalWidth > 100")
        assert blocked  # the CDN scripts were asked for, and refused
    finally:
        context.close()
