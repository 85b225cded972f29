"""How a swapped GEMM tile (swap_ab: the kernel computes C.T) reaches C (CPU: build for sm_90a,
read the PTX). A one-tile block writes its tile transposed into smem and C by TMA, whole lines;
a persistent one streams it the same way in pieces through two slots beside the ring; split
swapped tiles, and a C whose rows are not 16-byte aligned (no TMA descriptor), store each
element from the registers. The GPU tests of every path are in test_gemm_swap_ab_gpu.py."""

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
    (530, 5920, 3152, {"tile_m": 128, "tile_n": 184, "transpose_b": True}),  # 64-row consumers, 4 pieces
    (401, 13752, 344, {"tile_m": 128, "tile_n": 208, "cluster_m": 2, "transpose_b": False}),  # 7: an odd count
    (320, 16280, 29064, {"tile_m": 256, "tile_n": 160, "cluster_n": 2, "transpose_b": True}),  # 128 rows: 2 boxes
    (300, 6000, 3000, {"tile_m": 128, "tile_n": 152, "transpose_b": False, "out_dtype": "float32"}),
    (40, 9000, 2048, {"tile_m": 128, "tile_n": 48, "transpose_b": True}),  # one piece, one slot
])
def test_persistent_swapped_tiles_stream_c_by_tma(m, n, k, kw):
    """Every piece of a consumer's C.T tile goes out in consumer_rows / w TMA stores; no element
    is stored from the registers; the pieces cover the tile in multiples of 8 rows of C; the
    slots fit beside the deepest ring that leaves room for 8-row slots (the epilogue takes no
    stage the ring could have)."""
    from mgpu_lab.kernels.gemm.pieces import SMEM_LIMIT

    tiling, code = ptx(m, n, k, persistent=True, **kw)
    assert tiling.swap_tma_store and tiling.epilogue_beside_ring
    pieces = tiling.transposed_pieces
    assert [start for start, _ in pieces] == list(range(0, tiling.tile_n, tiling.transposed_piece))
    assert sum(rows for _, rows in pieces) == tiling.tile_n and all(rows % 8 == 0 for _, rows in pieces)
    assert tiling.transposed_slots == (2 if len(pieces) > 1 else 1)
    stores = len(pieces) * (tiling.consumer_rows // tiling.transposed_width)
    assert len(TMA_STORE.findall(code)) == stores
    assert not GLOBAL_STORE.search(code)
    assert tiling.smem_bytes <= SMEM_LIMIT
    slots_of_8 = tiling.consumers * 2 * tiling.consumer_rows * 8 * (4 if kw.get("out_dtype") == "float32" else 2)
    deeper = tiling.pipeline_bytes + tiling.stage_bytes + 2 * (tiling.stages + 1) * 8 + slots_of_8
    assert deeper > SMEM_LIMIT or tiling.stages == 8


def test_split_swapped_tiles_store_from_the_registers():
    tiling, code = ptx(16, 8192, 4096, tile_m=64, tile_n=16, split_k=2, transpose_b=True)
    assert not tiling.swap_tma_store
    assert GLOBAL_STORE.search(code) and not TMA_STORE.search(code)


def _tma_store_under(value):
    """swap_tma_store of a one-tile and of a persistent swapped tiling under MGPU_LAB_GEMM_SWAP_STORE=value
    (read at import: a fresh interpreter), and its stderr."""
    import os
    import subprocess
    import sys

    code = ("from mgpu_lab.kernels.gemm import resolve_tiling; "
            "print(resolve_tiling(16, 8192, 4096, transpose_b=True, swap_ab=True, tile_m=64, tile_n=16).swap_tma_store, "
            "resolve_tiling(530, 5920, 3152, transpose_b=True, swap_ab=True, tile_m=128, tile_n=184, "
            "persistent=True).swap_tma_store)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "MGPU_LAB_GEMM_SWAP_STORE": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    return out.stdout.split(), out.stderr


def test_the_environment_can_switch_the_tma_stores_off_and_names_a_bad_value():
    """MGPU_LAB_GEMM_SWAP_STORE=one-tile leaves persistent swapped tiles on the per-element stores,
    =registers every swapped tile (to time the paths side by side; records name it); another
    value is refused naming the variable and the values it takes."""
    assert _tma_store_under("tma")[0] == ["True", "True"]
    assert _tma_store_under("one-tile")[0] == ["True", "False"]
    assert _tma_store_under("registers")[0] == ["False", "False"]
    printed, err = _tma_store_under("smem")
    assert not printed and ("MGPU_LAB_GEMM_SWAP_STORE must be 'tma', 'one-tile' or 'registers' (how a swapped tile "
                            "writes C), got 'smem'") in err
