"""CPU tests of the warp-specialized WGMMA GEMM: the SASS has tensor-core and TMA instructions,
no local memory and no spills; shapes it cannot tile are refused with a clear error."""

from __future__ import annotations

import re

import pytest

from mgpu_lab.examples.gemm import default_stages, make_gemm


def opcodes(sass: str) -> list[str]:
    return re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass)


@pytest.mark.parametrize("transpose_b", [False, True])
def test_gemm_4096_sass(transpose_b):
    k = make_gemm(4096, 4096, 4096, transpose_b=transpose_b)
    sass = k.compiled.sass
    ops = opcodes(sass)
    hgmma = re.findall(r"HGMMA\.64x256x16\.F32\.BF16", sass)
    assert hgmma, "no 64x256x16 tensor-core instructions"
    assert any(op.startswith("UTMALDG") for op in ops) and any(op.startswith("UTMASTG") for op in ops)
    assert not any(op.startswith(("LDL", "STL")) for op in ops), "local memory in the GEMM"
    assert "USETMAXREG.DEALLOC.CTAPOOL" in ops and "USETMAXREG.TRY_ALLOC.CTAPOOL" in ops
    r = k.compiled.resources
    assert r.spill_stores_bytes == r.spill_loads_bytes == r.stack_frame_bytes == 0
    assert r.registers <= 168  # 384 threads: the launch register budget
    assert "serialized" not in k.compiled.ptxas_log
    assert k.compiled.block == (384, 1, 1) and k.compiled.grid == (32 * 16, 1, 1)
    # the main loop keeps one wgmma group in flight
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in re.sub(r"\s+", " ", sass)


@pytest.mark.parametrize("kwargs", [{"tile_n": 128}, {"out_dtype": "float32"}, {"dtype": "float16", "out_dtype": "float16"}])
def test_gemm_variants_compile_without_spills(kwargs):
    k = make_gemm(512, 512, 256, **kwargs)
    r = k.compiled.resources
    assert r.spill_stores_bytes == r.spill_loads_bytes == 0
    assert re.search(r"HGMMA\.64x\d+x16\.F32\b", k.compiled.sass)


@pytest.mark.parametrize("shape, message", [
    ((1000, 4096, 4096), r"m must be a positive multiple of the tile's 128, got 1000"),
    ((4096, 4000, 4096), r"n must be a positive multiple of the tile's 256, got 4000"),
    ((4096, 4096, 100), r"k must be a positive multiple of the tile's 64, got 100"),
])
def test_gemm_rejects_untileable_shapes(shape, message):
    with pytest.raises(ValueError, match=message):
        make_gemm(*shape)


def test_gemm_rejects_bad_options():
    with pytest.raises(ValueError, match="tile_n must be 64, 128, 192 or 256"):
        make_gemm(256, 320, 64, tile_n=320)
    with pytest.raises(ValueError, match="need .* bytes of smem"):
        make_gemm(256, 256, 64, stages=8)
    with pytest.raises(ValueError, match="dtype must be 'bfloat16' or 'float16'"):
        make_gemm(256, 256, 64, dtype="float32")
    assert default_stages(256) == 4 and default_stages(128) == 7
