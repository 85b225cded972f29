"""How a swapped GEMM tile (swap_ab: the kernel computes C.T) reaches C (CPU: build for sm_90a,
read the PTX). A one-tile block writes its tile transposed into smem and C by TMA, whole lines;
persistent and split swapped tiles, and a C whose rows are not 16-byte aligned (no TMA
descriptor), store each element from the registers. The GPU tests of both paths are in
test_gemm_swap_ab_gpu.py."""

from __future__ import annotations

import re
import warnings

import pytest

from mgpu_lab.kernels.gemm import make_gemm, resolve_tiling

TMA_STORE = re.compile(r"cp\.async\.bulk\.tensor\.2d\.global\.shared")
GLOBAL_STORE = re.compile(r"\bst\.global\.")


def ptx(m, n, k, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kern = make_gemm(m, n, k, target="sm_90a", use_cache=False, swap_ab=True, **kw)
    return resolve_tiling(m, n, k, swap_ab=True, **kw), kern.compiled.ptx


@pytest.mark.parametrize("m, n, k, kw, boxes", [  # boxes: TMA stores in a consumer's code
    (200, 28672, 8192, {"tile_m": 256, "tile_n": 104, "transpose_b": True}, 2),  # 128 rows: 2 boxes of 64 columns
    (16, 8192, 4096, {"tile_m": 64, "tile_n": 16, "transpose_b": True}, 1),
    (300, 6000, 3000, {"tile_m": 128, "tile_n": 152, "transpose_b": False, "out_dtype": "float32"}, 2),  # 32 wide
])
def test_one_tile_blocks_store_c_by_tma(m, n, k, kw, boxes):
    tiling, code = ptx(m, n, k, **kw)
    assert tiling.swap_tma_store
    assert len(TMA_STORE.findall(code)) == boxes
    assert not GLOBAL_STORE.search(code)


@pytest.mark.parametrize("m, n, k, kw", [
    (530, 5920, 3152, {"tile_m": 128, "tile_n": 184, "persistent": True, "transpose_b": True}),
    (16, 8192, 4096, {"tile_m": 64, "tile_n": 16, "split_k": 2, "transpose_b": True}),
])
def test_persistent_and_split_swapped_tiles_store_from_the_registers(m, n, k, kw):
    tiling, code = ptx(m, n, k, **kw)
    assert not tiling.swap_tma_store
    assert GLOBAL_STORE.search(code) and not TMA_STORE.search(code)


def test_the_environment_can_switch_the_tma_store_off_and_names_a_bad_value():
    """MGPU_LAB_GEMM_SWAP_STORE=registers builds the per-element stores (to time both paths side
    by side; records name it); another value is refused naming the variable."""
    import os
    import subprocess
    import sys

    code = ("from mgpu_lab.kernels.gemm import resolve_tiling; "
            "print(resolve_tiling(16, 8192, 4096, transpose_b=True, swap_ab=True, tile_m=64, tile_n=16).swap_tma_store)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "MGPU_LAB_GEMM_SWAP_STORE": "registers"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False"], out.stderr
    env["MGPU_LAB_GEMM_SWAP_STORE"] = "smem"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and ("MGPU_LAB_GEMM_SWAP_STORE must be 'tma' or 'registers' (how a swapped one-tile "
                                    "block writes C), got 'smem'") in out.stderr
