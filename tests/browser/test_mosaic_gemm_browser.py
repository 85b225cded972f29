"""A `%%mosaic` cell building the Hopper GEMM in a live JupyterLab shows all four viewers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from test_widgets_browser import RENDER_TIMEOUT_MS, _open_and_run_all

pytestmark = pytest.mark.browser
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"


def test_mosaic_gemm_cell_shows_sass_smem_ir_and_timeline(jupyter_url: str, browser: Any) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        try:
            _open_and_run_all(page, f"{jupyter_url}lab/tree/mosaic_gemm_notebook.ipynb?reset")
        finally:
            page.screenshot(path=str(SHOTS / "mosaic_gemm.png"), full_page=True)
        sass = page.locator(".mgl-sass").first
        page.wait_for_function("el => el.textContent.includes('HGMMA')", arg=sass.element_handle(),
                               timeout=RENDER_TIMEOUT_MS)
        assert "UTMALDG" in sass.inner_text()
        smem = page.locator(".mgl-smem").first
        assert "profiler" in smem.inner_text() and "barrier" in smem.inner_text()
        assert page.locator(".mgl-ir .mgl-ir-pass").count() > 10  # the module after every pass
        assert page.locator(".mgl-tl canvas").count() == 1
        text = page.locator(".jp-OutputArea-output").all_inner_texts()
        assert any("mma" in t and "wait_data" in t and "epilogue" in t for t in text)  # the trace summary

        # The recorded sample keeps 8 of 2,048 blocks: the timeline opens on their tracks only,
        # and its shares are over the warpgroups that recorded (mma about a third), not 0.2%.
        timeline = page.locator(".mgl-tl").first
        assert timeline.locator(".mgl-tl-hide-empty").is_checked()
        assert int(timeline.get_attribute("data-tracks")) <= 40
        mma = timeline.locator(".mgl-tl-summary tr", has_text="mma").first.inner_text()
        assert float(mma.split()[-1].rstrip("%")) > 20

        # SASS: the file is named, the classes that matter are counted, scaffolding is hidden.
        assert "kernel.py, line" in sass.locator(".mgl-sass-listing").inner_text()  # mgpu_lab/kernels/gemm/kernel.py
        # The HGMMA chip counts the listing's HGMMA instructions (their number follows the tile the
        # GEMM's config table picks and how ptxas peels the mainloop, so it is read from the listing).
        hgmma = sass.locator(".mgl-sass-listing .mgl-code-line", has_text=re.compile(r"\bHGMMA\.")).count()
        assert hgmma > 0
        assert sass.locator(".mgl-key-chip[data-key-class='HGMMA']").inner_text().strip() == f"HGMMA {hgmma}"
        assert not sass.locator(".mgl-sass-listing .mgl-code-line", has_text="//## File").first.is_visible()

        # IR: opens on the diff of the first pass that changes the module, not on the binary.
        ir = page.locator(".mgl-ir").first
        assert "canonicalize" in ir.locator(".mgl-ir-status").inner_text()
        assert ir.locator(".mgl-ir-content .mgl-diff-add").count() > 0

        # Smem: buffers carry the names the kernel body gives them; barriers get no bank analysis.
        smem.locator("select.mgl-smem-buffer").select_option(label="full")
        page.wait_for_function("el => el.textContent.includes('no bank analysis')",
                               arg=smem.locator(".mgl-smem-report").element_handle(), timeout=RENDER_TIMEOUT_MS)
        smem.locator("select.mgl-smem-buffer").select_option(index=0)
        # The kernel's own instructions, from their lane addresses: an epilogue STS into the
        # staging buffer gets its wavefronts, and the profiler's own STS moves the view to the
        # profiler's area instead of reporting on a buffer it does not touch.
        instruction = smem.locator("select.mgl-smem-instruction")
        options = instruction.locator("option").all_inner_texts()
        epilogue_sts = next(t for t in options if re.match(r"STS \[R\d+\+0x3[0-7]", t))
        instruction.select_option(label=epilogue_sts)
        page.wait_for_function("el => el.textContent.includes(\"from the kernel's own addresses\")"
                               " && el.textContent.includes('wavefront')",
                               arg=smem.locator(".mgl-smem-report").element_handle(), timeout=RENDER_TIMEOUT_MS)
        # thread 0 zeroes the profiler's finish counter, past the kernel's buffers (0x38040 on)
        profiler_sts = next(t for t in options if re.match(r"STS \[UR\d+\+0x380[4-9a-f][0-9a-f]\]", t))
        instruction.select_option(label=profiler_sts)
        page.wait_for_function("el => el.textContent.startsWith('STS') && el.textContent.includes('writes profiler')",
                               arg=smem.locator(".mgl-smem-report").element_handle(), timeout=RENDER_TIMEOUT_MS)
        for name, locator in (("sass", sass), ("smem", smem), ("ir", page.locator(".mgl-ir").first),
                              ("timeline", page.locator(".mgl-tl").first)):
            locator.screenshot(path=str(SHOTS / f"mosaic_gemm_{name}.png"))
    finally:
        context.close()
