"""SassView's Nsight-Compute-like source page on real compiled kernels, on CPU: PTX -> source
and SASS selection, branch links, the live-register column and its peak, HGMMA attribution."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("anywidget", reason="the SASS view is an anywidget (pip install -e .)")

from mgpu_lab.compiler.compiled_kernel import CompiledKernel  # noqa: E402
from mgpu_lab.widgets.sass_view import SassView  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_hopper import make_wgmma_tile  # noqa: E402 - the CPU-compiled WGMMA kernel

JS = (Path(__file__).parents[1] / "mgpu_lab" / "widgets" / "sass_view.js").read_text()


@pytest.fixture(scope="module")
def gemm() -> CompiledKernel:
    from mgpu_lab.kernels.gemm import make_gemm

    return make_gemm(256, 512, 384, tile_m=128, tile_n=128).compiled


@pytest.fixture(scope="module")
def view(gemm: CompiledKernel) -> SassView:
    from mgpu_lab.widgets import show

    return show(gemm, "sass")


def _hgmma_lines(view: SassView) -> list[int]:
    return [i for i, cls in enumerate(view.line_class) if cls == "HGMMA"]


def _source_text(view: SassView, key: list[int]) -> str:
    return view.file_texts[key[0]][key[1]]


def test_every_hgmma_maps_to_its_wgmma_line() -> None:
    """ptxas's line table gives one HGMMA of this kernel the `acc.store(out)` line."""
    view = SassView(make_wgmma_tile(128, "k").compiled)
    hgmma = _hgmma_lines(view)
    assert len(hgmma) == 4
    assert {_source_text(view, view.sass_source[i]).strip() for i in hgmma} == {
        "acc = wgmma(init, a_s, b_s, b_major=b_major, accumulate=accumulate)"}


def test_gemm_hgmma_map_to_the_wgmma_call(view: SassView) -> None:
    texts = {_source_text(view, view.sass_source[i]).strip() for i in _hgmma_lines(view)}
    assert len(texts) == 1 and "dsl.wgmma(" in texts.pop()


def test_ptx_line_selects_its_source_and_sass(view: SassView) -> None:
    mma = next(i for i, t in enumerate(view.ptx_lines) if t.lstrip().startswith("wgmma.mma_async"))
    view.select_ptx(mma + 1)
    assert view.selected_ptx == mma and view.selected_sass == -1
    assert "dsl.wgmma(" in _source_text(view, view.selected_source)
    assert set(_hgmma_lines(view)) <= set(view.sass_lines_of_ptx(mma + 1))
    header = next(i for i, t in enumerate(view.ptx_lines) if t.startswith(".version"))
    view.select_ptx(header + 1)  # no source line: nothing related
    assert view.selected_source == [] and view.sass_lines_of_ptx(header + 1) == []
    # the browser side: PTX rows are clickable and the selection is synced
    assert "selectPtx" in JS and 'model.set("selected_ptx"' in JS


def test_branch_targets_point_at_their_labels(view: SassView) -> None:
    branches = [i for i, t in enumerate(view.branch_target) if t >= 0]
    texts = ["".join(t for _, t in view.lines[i]) for i in branches]
    assert any(re.search(r"@!?P\d+ BRA", t) for t in texts) and any(" BRA " in t for t in texts)
    for i, text in zip(branches, texts):
        label = re.search(r"\.L_x_\d+", text)
        assert label is not None
        target_text = "".join(t for _, t in view.lines[view.branch_target[i]]).strip()
        assert target_text == label.group() + ":"
    assert all(t == -1 for i, t in enumerate(view.branch_target) if not view.instruction[i])


def test_static_listing_links_branches_to_anchors(view: SassView) -> None:
    html = view.to_html()
    assert "<style" not in html and "<script" not in html
    links = re.findall(r'<a href="#(sass-[\w-]+)"', html)
    anchors = set(re.findall(r'id="(sass-[\w-]+)"', html))
    assert len(links) >= 10 and set(links) <= anchors


def test_live_register_column_and_peak(view: SassView, gemm: CompiledKernel) -> None:
    live = view.live_registers
    assert len(live) == len(view.lines)
    hgmma = _hgmma_lines(view)
    assert all(live[i] >= 64 for i in hgmma)  # the 64-register accumulator is live
    assert all(n == -1 for i, n in enumerate(live) if not view.instruction[i])
    top = max(live)
    assert view.live_peak == [i for i, n in enumerate(live) if n == top]
    assert top <= gemm.resources.registers  # never more than ptxas allocated
    html = view.to_html()
    assert f"register-pressure peak: {top} live registers" in html
    assert html.count("▲</span>") >= len(view.live_peak)
    assert "peakBtn" in JS and "live_registers" in JS


def test_life_ranges_run_once_per_disassembly(gemm: CompiledKernel, monkeypatch: pytest.MonkeyPatch) -> None:
    from mgpu_lab.widgets import sass_listing

    first = sass_listing.build_listing(gemm).live_registers

    def fail(cubin: bytes) -> None:
        raise AssertionError("nvdisasm ran again")

    monkeypatch.setattr(sass_listing, "life_ranges", fail)
    assert sass_listing.build_listing(gemm).live_registers == first
    assert "_mgl_life_ranges" not in gemm.to_json()["disassembly"]  # saved kernels keep their shape


def test_parse_life_ranges() -> None:
    from mgpu_lab.compiler.disassemble import parse_life_ranges

    text = """\t.section\t.text.k,"ax",@progbits
        .global         k                                   // |       |        |        |         |
        /*0000*/                   LDC R1, c[0x0][0x28] ;   // |   1   |        |        |         |
        /*0b80*/    HGMMA.64x128x16.F32.BF16 R24, gdesc[UR12].tnspB, RZ, !UPT ;  // |  67   |   2    |   14   |    1    |
"""
    assert parse_life_ranges(text) == {(".text.k", 0): (1, 0, 0, 0), (".text.k", 0xB80): (67, 2, 14, 1)}


def test_keyboard_navigation_keys_are_handled() -> None:
    """The listing takes focus and handles up/down, n/N and Enter (a browser test drives them)."""
    assert 'tabindex: "0"' in JS
    for key in ('"ArrowDown"', '"ArrowUp"', '"n"', '"N"', '"Enter"'):
        assert key in JS
    assert "branchTarget[sel]" in JS


def test_saved_kernel_keeps_the_source_page(gemm: CompiledKernel, view: SassView, tmp_path: Path) -> None:
    """A kernel written to disk and read back (no compiler) gives the same view, and its
    static fallback links and marks the same lines."""
    loaded = CompiledKernel.load(gemm.save(tmp_path / "k"))
    again = SassView(loaded)
    assert again.live_registers == view.live_registers and again.live_peak == view.live_peak
    assert again.branch_target == view.branch_target and again.ptx_source == view.ptx_source
    assert [again.sass_source[i] for i in _hgmma_lines(again)] == [view.sass_source[i] for i in _hgmma_lines(view)]
    assert again.to_html() == view.to_html()


def test_hgmma_fallback_follows_the_warpgroup_arrive() -> None:
    """When PTX and SASS counts differ (unrolled or peeled loops), a misplaced HGMMA takes
    the wgmma line of the WARPGROUP.ARRIVE before it."""
    from mgpu_lab.widgets.line_xref import attribute_hgmma, build_xref
    from mgpu_lab.widgets.sass_parse import parse_sass

    ck = make_wgmma_tile(128, "k").compiled
    ptx = ck.ptx.splitlines()
    first = next(i for i, t in enumerate(ptx) if t.startswith("wgmma.mma_async"))
    ptx.insert(first + 1, ptx[first])  # five wgmma.mma_async for four HGMMA: no pairing in order
    lines = parse_sass(ck.sass)
    xref = build_xref(attribute_hgmma(tuple(ck.line_map), "\n".join(ptx), lines))
    wgmma_line = next(src for src, sass in xref.source_to_sass.items()
                      if any(lines[s].opcode == "WARPGROUP.ARRIVE" for s in sass))
    assert [xref.sass_to_source[ln.index] for ln in lines if ln.mnemonic == "HGMMA"] == [(wgmma_line,)] * 4
