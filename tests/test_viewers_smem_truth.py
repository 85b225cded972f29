"""The shared-memory view never shows a modelled answer for an access the kernel does not
make: the kernel's own LDS/STS get "unknown" and the reason; hand-picked patterns are labelled
hypothetical and offered only where the dtype and the SASS allow them."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "widgets"))
from widget_fixtures import fixture_kernel

from mgpu_lab.compiler.compiled_kernel import Disassembly, SmemBuffer

# An unpadded 32x32 float32 transpose: a row store, then the column read `LDS R9, [R6]`
# (lane t reads tile[t][c]: all 32 lanes in one bank, a 32-way conflict).
TRANSPOSE_SASS = "\n".join([
    "        /*0000*/                   S2R R0, SR_TID.X ;",
    "        /*0010*/                   STS [R4], R5 ;",
    "        /*0020*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;",
    "        /*0030*/                   LDS R9, [R6] ;",
    "        /*0040*/                   EXIT ;",
])


def _transpose_kernel(sass: str = TRANSPOSE_SASS):
    kernel = fixture_kernel()
    tile = SmemBuffer("tile", 0, 32 * 32 * 4, (32, 32), "float32")
    return replace(kernel, disassembly=Disassembly(sass), spec=replace(kernel.spec, smem_layout=(tile,), dynamic_smem_bytes=4096))


def test_the_kernels_column_read_is_unknown_not_conflict_free() -> None:
    from mgpu_lab.widgets import SmemView

    view = SmemView(_transpose_kernel())
    lds = next(k for k, i in enumerate(view.instructions) if i["opcode"] == "LDS")
    view.instruction = lds
    summary = view.conflict_summary
    assert "LDS R9, [R6]" in summary and "unknown" in summary
    assert "lane addresses not derived" in summary
    assert "conflict-free" not in summary and "wavefront" not in summary
    assert view.grid["hits"] == []  # no made-up touched words
    html = view.to_html()
    assert "access pattern unknown" in html and "conflict-free" not in html


def test_hypothetical_patterns_fit_the_dtype_and_the_sass() -> None:
    from mgpu_lab.widgets import SmemView

    view = SmemView(_transpose_kernel())
    assert view.patterns == ["row", "column"]  # no HGMMA, no LDSM/STSM in the SASS
    assert view.buffers[0]["vector_choices"] == [4]  # float32, and the kernel only makes 4-byte accesses
    view.pattern = "column"
    assert view.vector_bytes == 4
    assert view.conflict_summary.startswith("hypothetical column 0")
    assert "32-way bank conflict" in view.conflict_summary
    view.pattern = "fragment"  # not offered: corrected to one that is
    assert view.pattern in view.patterns

    wide = SmemView(_transpose_kernel(TRANSPOSE_SASS.replace("LDS R9, [R6]", "LDS.128 R8, [R6]")))
    assert wide.buffers[0]["vector_choices"] == [4, 16]  # 16-byte accesses exist now


def test_wgmma_and_ldmatrix_patterns_follow_the_sass() -> None:
    from mgpu_lab.widgets import SmemView

    gemm = SmemView(fixture_kernel())  # the GEMM fixture: HGMMA, no LDSM
    assert "fragment" in gemm.patterns and "ldmatrix" not in gemm.patterns
    with_ldsm = _transpose_kernel(TRANSPOSE_SASS.replace("LDS R9, [R6]", "LDSM.16.M88.4 R8, [R6]"))
    assert SmemView(with_ldsm).patterns == ["row", "column", "ldmatrix"]
