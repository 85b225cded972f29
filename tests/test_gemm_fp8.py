"""CPU tests of the FP8 (e4m3) GEMM: QGMMA in the SASS, TMA, no spills; B must be K-major."""

from __future__ import annotations

import pytest
from test_gemm import assert_clean

from mgpu_lab.examples.gemm_epilogues import fused
from mgpu_lab.examples.gemm_fp8 import make_fp8_gemm


@pytest.mark.parametrize("shape, tiles, qgmma", [
    ((4096, 4096, 4096), {"tile_m": 128, "tile_n": 256}, r"QGMMA\.64x256x32\.F32\.E4M3\.E4M3"),
    ((4096, 4096, 4096), {"tile_m": 256, "tile_n": 128}, r"QGMMA\.64x128x32\.F32\.E4M3\.E4M3"),
    ((16, 4096, 4096), {}, r"QGMMA\.64x32x32"),
    ((1000, 1000, 1000), {}, r"QGMMA\.64x\d+x32"),  # k rows of 1000 bytes: padded to 1008
])
def test_fp8_gemm_compiles(shape, tiles, qgmma):
    k = make_fp8_gemm(*shape, **tiles)
    assert_clean(k, qgmma)
    assert [str(x.dtype) for x in k.compiled.inputs] == ["float8_e4m3fn", "float8_e4m3fn", "float32", "float32"]


def test_fp8_gemm_with_a_fused_epilogue():
    e = fused(2048, 2048, bias="bfloat16", activation="gelu")
    k = make_fp8_gemm(2048, 2048, 1024, epilogue=e.fn, epilogue_inputs=e.inputs)
    assert_clean(k, r"QGMMA\.64x\d+x32")
    assert len(k.compiled.inputs) == 5


def test_fp8_gemm_errors():
    with pytest.raises(ValueError, match=r"B must be \(n, k\) \(transpose_b=True\)"):
        make_fp8_gemm(256, 256, 128, transpose_b=False)
    with pytest.raises(ValueError, match="dtype must be 'float8_e4m3fn', got 'bfloat16'"):
        make_fp8_gemm(256, 256, 128, dtype="bfloat16")
