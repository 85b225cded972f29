"""CPU tests of the GEMM epilogue hook: fused epilogues compile without spills at the big
tiles, a hand-written relu(A @ B + bias) is a few lines, bad epilogues get clear errors."""

from __future__ import annotations

import re

import pytest
from test_gemm import assert_clean

from mgpu_lab.kernels.gemm import make_gemm
from mgpu_lab.errors import KernelBuildError
from mgpu_lab.kernels.gemm.epilogues import fused


def bias_relu(acc, tile, bias):
    return (acc + tile.columns(bias)).max(0.0)


def test_bias_relu_in_a_few_lines():
    k = make_gemm(4096, 4096, 4096, transpose_b=True, tile_m=128, tile_n=256, epilogue=bias_relu,
                  epilogue_inputs=[((4096,), "bfloat16")])
    assert_clean(k, r"HGMMA\.64x256x16")
    assert len(k.compiled.inputs) == 3
    assert re.search(r"F2FP\.RELU|FMNMX", k.compiled.sass)  # the relu (folded into the bf16 rounding)


@pytest.mark.parametrize("tiles", [{"tile_m": 128, "tile_n": 256}, {"tile_m": 256, "tile_n": 128},
                                   {"tile_m": 64, "tile_n": 64}])
@pytest.mark.parametrize("options", [
    {"bias": "bfloat16", "activation": "gelu"},
    {"bias": "float32", "activation": "silu", "residual": "bfloat16", "scale": True},
    {"residual": "float32", "scale": True},
])
def test_fused_epilogues_compile_without_spills(options, tiles):
    e = fused(1000, 2048, **options)
    k = make_gemm(1000, 2048, 512, transpose_b=True, epilogue=e.fn, epilogue_inputs=e.inputs, **tiles)
    assert_clean(k, rf"HGMMA\.64x{tiles['tile_n']}x16")
    if options.get("activation") in ("gelu", "silu"):
        assert "MUFU.EX2" in k.compiled.sass and "MUFU.RCP" in k.compiled.sass
    assert not re.search(r"\bCALL\b", k.compiled.sass), "a subroutine call in the epilogue"


def test_fused_unaligned_shape_pads_the_epilogue_arrays():
    e = fused(129, 257, bias="bfloat16", residual="bfloat16")
    k = make_gemm(129, 257, 72, epilogue=e.fn, epilogue_inputs=e.inputs)
    assert [tuple(x.shape) for x in k.compiled.inputs[2:]] == [(264,), (129, 264)]


def test_epilogue_errors():
    with pytest.raises(ValueError, match=r"activation must be one of \('relu', 'gelu', 'silu'\) or None, got 'tanh'"):
        fused(64, 64, activation="tanh")
    with pytest.raises(ValueError, match="epilogue_inputs were given without an epilogue"):
        make_gemm(256, 256, 64, epilogue_inputs=[((256,), "float32")])
    with pytest.raises(TypeError, match=r"epilogue must be a callable f\(acc, tile, \*refs\), got int"):
        make_gemm(256, 256, 64, epilogue=3)
    with pytest.raises(TypeError, match=r"epilogue_inputs\[0\] must be a ShapeDtype or \(shape, dtype\)"):
        make_gemm(256, 256, 64, epilogue=bias_relu, epilogue_inputs=[7])
    with pytest.raises(KernelBuildError, match="must return a FragmentedArray in the accumulator's layout"):
        make_gemm(256, 256, 64, epilogue=lambda acc, tile: None)
