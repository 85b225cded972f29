"""Every kernel maker checks its arguments with mgpu_lab.arguments before it computes with them:
a bool is no size (k=True built a k=8 GEMM through the padding path), "yes" is no flag."""

from __future__ import annotations

import re

import pytest

from mgpu_lab.arguments import ArgumentError
from mgpu_lab.kernels.gemm import make_fp8_block_scaled_gemm, make_fp8_gemm, make_gemm, resolve_tiling


@pytest.mark.parametrize("make, where", [(make_gemm, "gemm"), (make_fp8_gemm, "fp8 gemm"),
                                         (make_fp8_block_scaled_gemm, "fp8 block-scaled gemm")])
@pytest.mark.parametrize("m, n, k, name, shown", [
    (256, 256, True, "k", "True (a bool)"),
    (True, 256, 128, "m", "True (a bool)"),
    (256, "256", 128, "n", "'256' (a str)"),
    (256, 256, 0, "k", "0"),
])
def test_gemm_makers_refuse_bad_sizes_before_padding(make, where, m, n, k, name, shown):
    with pytest.raises(ArgumentError, match="^" + re.escape(f"{where}: {name} must be a positive int, got {shown}")):
        make(m, n, k, transpose_b=True)


def test_gemm_flags_must_be_bools():
    with pytest.raises(ArgumentError, match=r"gemm: transpose_b must be True or False, got 'yes' \(a str\)"):
        make_gemm(256, 256, 128, transpose_b="yes")
    with pytest.raises(ArgumentError, match=r"gemm: swap_ab must be True or False, got 1 \(an int\)"):
        make_gemm(256, 256, 128, transpose_b=True, tile_m=64, tile_n=64, swap_ab=1)
    with pytest.raises(ArgumentError, match=r"gemm: cluster_m must be 1 or 2, got True \(a bool\)"):
        make_gemm(1024, 1024, 1024, tile_m=128, tile_n=256, persistent=True, cluster_m=True)
    with pytest.raises(ArgumentError, match=r"gemm: stages must be an int >= 2, got True \(a bool\)"):
        make_gemm(256, 256, 128, tile_m=128, tile_n=128, stages=True)


def test_resolve_tiling_checks_sizes_before_the_config_lookup():
    with pytest.raises(ArgumentError, match=r"gemm: m must be a positive int, got 2.5 \(a float\)"):
        resolve_tiling(2.5, 256, 128)


def test_fp8_makers_name_the_dtype_and_tile():
    with pytest.raises(ArgumentError, match=r"fp8 gemm: dtype must be 'float8_e4m3fn', got 'bfloat16'"):
        make_fp8_gemm(256, 256, 128, dtype="bfloat16")
    with pytest.raises(ArgumentError, match=r"tile_n must be one of \(32, 64, 128\) .*got True \(a bool\)"):
        make_fp8_block_scaled_gemm(256, 256, 256, tile_n=True)
