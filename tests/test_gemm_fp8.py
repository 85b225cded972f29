"""CPU tests of the FP8 (e4m3) GEMM: QGMMA in the SASS, TMA, no spills; B must be K-major."""

from __future__ import annotations

import pytest
from test_gemm import assert_clean

from mgpu_lab.kernels.gemm.epilogues import fused
from mgpu_lab.kernels.gemm.fp8 import make_fp8_gemm


@pytest.mark.parametrize("shape, tiles, qgmma", [
    ((4096, 4096, 4096), {"tile_m": 128, "tile_n": 256}, r"QGMMA\.64x256x32\.F32\.E4M3\.E4M3"),
    ((4096, 4096, 4096), {"tile_m": 256, "tile_n": 128}, r"QGMMA\.64x128x32\.F32\.E4M3\.E4M3"),
    ((1000, 1000, 1000), {}, r"QGMMA\.64x\d+x32"),  # k rows of 1000 bytes: padded to 1008
    ((4096, 4096, 4096), {"tile_m": 256, "tile_n": 128, "persistent": True, "cluster_n": 2},
     r"QGMMA\.64x128x32\.F32\.E4M3\.E4M3"),  # pairs sharing A
])
def test_fp8_gemm_compiles(shape, tiles, qgmma):
    k = make_fp8_gemm(*shape, **tiles)
    assert_clean(k, qgmma)
    assert k.compiled.cluster == ((2, 1, 1) if tiles.get("cluster_n") else (1, 1, 1))
    assert [str(x.dtype) for x in k.compiled.inputs] == ["float8_e4m3fn", "float8_e4m3fn", "float32", "float32"]


def test_fp8_gemm_for_few_rows_takes_the_models_narrow_swapped_tile():
    # 16 rows: the model swaps A and B so the 16 rows become a narrow QGMMA N (C stored from registers).
    k = make_fp8_gemm(16, 4096, 4096)
    tiling = k.config["tiling"]
    assert tiling.swap_ab and tiling.tile_n <= 32
    assert_clean(k, rf"QGMMA\.64x{tiling.tile_n}x32\.F32\.E4M3\.E4M3")
    assert [tuple(x.shape) for x in k.compiled.inputs][:2] == [(16, 4096), (4096, 4096)]


def test_fp8_gemm_with_a_fused_epilogue():
    e = fused(2048, 2048, bias="bfloat16", activation="gelu")
    k = make_fp8_gemm(2048, 2048, 1024, epilogue=e.fn, epilogue_inputs=e.inputs)
    assert_clean(k, r"QGMMA\.64x\d+x32")
    assert len(k.compiled.inputs) == 5


def test_fp8_swap_ab_compiles_and_keeps_its_scales():
    k = make_fp8_gemm(16, 4096, 4096, tile_m=64, tile_n=16, split_k=2, swap_ab=True)
    ops = assert_clean(k, r"QGMMA\.64x16x32")
    assert k.name.endswith("_swapab") and any(op.startswith("STG") for op in ops)
    assert [tuple(x.shape) for x in k.compiled.inputs] == [(16, 4096), (4096, 4096), (1,), (1,)]


@pytest.mark.parametrize("tiles", [{"tile_m": 128, "tile_n": 136, "persistent": True},
                                   {"tile_m": 256, "tile_n": 144, "persistent": True},
                                   {"tile_m": 128, "tile_n": 224, "persistent": "stream_k"}])
def test_fp8_swap_ab_runs_persistent(tiles):
    """FP8 swapped tiles in persistent blocks: m = 572 as four 144-wide (or 136) tiles of C.T,
    the scales applied in each, streamed out by TMA (stores from the registers only in
    stream-K's partial tiles), no spills."""
    k = make_fp8_gemm(572, 7920, 22176, swap_ab=True, **tiles)
    ops = assert_clean(k, rf"QGMMA\.64x{tiles['tile_n']}x32", tma_store=True)
    assert any(op.startswith("STG") for op in ops) == (tiles["persistent"] == "stream_k")
    assert k.compiled.grid[0] <= 132
    assert k.config["tiling"].persistent == tiles["persistent"]


def test_fp8_swap_ab_takes_a_swap_safe_user_epilogue_only():
    """After the scales, a user epilogue on C.T's tiles: `fused`'s (swap_safe) builds, an
    unmarked one is refused."""
    e = fused(16, 4096, bias="bfloat16")
    k = make_fp8_gemm(16, 4096, 4096, tile_m=64, tile_n=16, swap_ab=True, epilogue=e.fn, epilogue_inputs=e.inputs)
    assert k.name.endswith("_swapab")
    assert_clean(k, r"QGMMA\.64x16x32")
    with pytest.raises(ValueError, match=r"gemm: swap_ab=True holds C.T's tiles and applies only an epilogue marked "
                                         r"swap_safe"):
        make_fp8_gemm(16, 4096, 4096, tile_m=64, tile_n=16, swap_ab=True, epilogue=lambda acc, tile, bias: acc,
                      epilogue_inputs=e.inputs)


def test_fp8_gemm_errors():
    with pytest.raises(ValueError, match=r"B must be \(n, k\) \(transpose_b=True\)"):
        make_fp8_gemm(256, 256, 128, transpose_b=False)
    with pytest.raises(ValueError, match="dtype must be 'float8_e4m3fn', got 'bfloat16'"):
        make_fp8_gemm(256, 256, 128, dtype="bfloat16")
    with pytest.raises(ValueError, match=r"tile_m=192 \(three consumer warpgroups\) runs 16-bit inputs only .*got "
                                         r"dtype 'float8_e4m3fn'; use tile_m=128 or 256"):
        make_fp8_gemm(256, 256, 128, tile_m=192, tile_n=128)


@pytest.mark.parametrize("shape, tiles", [((4096, 4096, 4096), {}), ((4096, 4096, 4096), {"tile_m": 256, "tile_n": 64}),
                                          ((1000, 1000, 1000), {"tile_m": 64}),
                                          ((4000, 4000, 4096), {"persistent": True})])
def test_fp8_block_scaled_gemm_compiles(shape, tiles):
    from mgpu_lab.kernels.gemm.fp8_block import make_fp8_block_scaled_gemm, scale_shapes

    k = make_fp8_block_scaled_gemm(*shape, **tiles)
    assert_clean(k, r"QGMMA\.64x\d+x32\.F32\.E4M3\.E4M3")
    inner = getattr(k, "inner", k)
    assert [tuple(x.shape) for x in inner.compiled.inputs[2:]] == list(scale_shapes(*shape))
    assert "FFMA" in inner.compiled.sass or "FMUL" in inner.compiled.sass  # the promotion


@pytest.mark.parametrize("shape, tiles", [((4096, 4096, 4096), {}), ((4096, 4096, 4096), {"tile_m": 64}),
                                          ((40, 640, 5000), {"tile_m": 64, "tile_n": 64, "split_k": 3}),
                                          ((2048, 2304, 1024), {"persistent": True})])
def test_fp8_block_scaled_overlap_keeps_one_group_in_flight(shape, tiles):
    """overlap_promotion: the next k block's QGMMAs go out before this block's product is read,
    so the SASS waits with one group left in flight (DEPBAR 0x1) three times in four; without it
    every wait drains all groups. ptxas must not serialize the wgmmas (a group carried in flight
    across the loop's back-edge made it), nor spill the second product."""
    import re

    from mgpu_lab.kernels.gemm.fp8_block import OVERLAP_BLOCKS, make_fp8_block_scaled_gemm

    def waits(kern):
        sass = getattr(kern, "inner", kern).compiled.sass
        return re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\d+)", sass)

    overlapped = make_fp8_block_scaled_gemm(*shape, overlap_promotion=True, **tiles)
    assert_clean(overlapped, r"QGMMA\.64x\d+x32\.F32\.E4M3\.E4M3")
    assert waits(overlapped).count("0x1") >= OVERLAP_BLOCKS - 1
    assert "0x1" not in waits(make_fp8_block_scaled_gemm(*shape, overlap_promotion=False, **tiles))
    assert waits(make_fp8_block_scaled_gemm(*shape, **tiles)).count("0x1") >= OVERLAP_BLOCKS - 1  # the default


def test_fp8_block_scaled_gemm_errors():
    from mgpu_lab.kernels.gemm.fp8_block import make_fp8_block_scaled_gemm

    with pytest.raises(ValueError, match=r"tile_n must be one of \(32, 64, 128\)"):
        make_fp8_block_scaled_gemm(256, 256, 256, tile_n=256)
    with pytest.raises(ValueError, match=r"B must be \(n, k\)"):
        make_fp8_block_scaled_gemm(256, 256, 256, transpose_b=False)
    with pytest.raises(TypeError, match=r"overlap_promotion must be True or False, got 'yes'"):
        make_fp8_block_scaled_gemm(256, 256, 256, overlap_promotion="yes")


@pytest.mark.parametrize("shape, tiles", [((8, 912, 4096), (64, 32)), ((64, 7168, 2048), (64, 64)),
                                          ((4096, 4096, 4096), (128, 128))])
def test_fp8_block_scaled_tiles_follow_the_grid(shape, tiles):
    # Few rows, too few columns or too short a K to split: n / 128 blocks of 128 x 128 tiles leave
    # most of the 132 SMs idle; the model's pick has several times the blocks. A big problem keeps
    # the 128 x 128 tile.
    from mgpu_lab.kernels.gemm.fp8_block import block_config, block_tiles, make_fp8_block_scaled_gemm

    assert block_tiles(*shape) == tiles and block_config(*shape) == (*tiles, None)
    k = make_fp8_block_scaled_gemm(*shape)
    tiling = k.config["tiling"]
    assert (tiling.tile_m, tiling.tile_n) == tiles
    assert_clean(k, rf"QGMMA\.64x{tiles[1]}x32\.F32\.E4M3\.E4M3")
    # one of the two given: the other is the kernel's 128
    t = make_fp8_block_scaled_gemm(*shape, tile_n=64).config["tiling"]
    assert (t.tile_m, t.tile_n) == (128, 64)


@pytest.mark.parametrize("shape, split, tile_n", [((8, 912, 24704), 4, 32), ((32, 14336, 4096), 1, 128),
                                                  ((4096, 4096, 4096), 1, 128), ((4, 4096, 28672), 3, 128),
                                                  ((8, 3584, 11008), 4, 128), ((16, 4096, 7168), 3, 128)])
def test_fp8_block_scaled_splits_k_where_tiles_leave_sms_idle(shape, split, tile_n):
    # 8 x 912: 29 tiles of 64 x 32 on 132 SMs over 193 k blocks ran at 0.26x torch._scaled_mm unsplit;
    # 4 slices fill 116 SMs, summed in a (1, 4) cluster. 32 x 14336 has 112 tiles of 64 x 128: no split.
    # Few rows over many columns: 64 x 128 tiles, as many slices as keep the clusters in one wave
    # (4 x 4096: 32 tiles, 3 slices, not 4: an H200 holds 30 clusters of 4; 28 tiles take 4).
    from mgpu_lab.kernels.gemm.fp8_block import make_fp8_block_scaled_gemm

    k = make_fp8_block_scaled_gemm(*shape)
    t = k.config["tiling"]
    assert t.split_k == split and t.split_k_reduce == "cluster" and t.tile_n == tile_n
    inner = getattr(k, "inner", k).compiled
    assert inner.cluster == (1, split, 1) and inner.grid[1] == split
    assert_clean(k, rf"QGMMA\.64x{t.tile_n}x32\.F32\.E4M3\.E4M3")


def test_fp8_block_scaled_split_k_errors():
    from mgpu_lab.arguments import ArgumentError
    from mgpu_lab.kernels.gemm.fp8_block import make_fp8_block_scaled_gemm

    with pytest.raises(ArgumentError, match=r"fp8 block-scaled gemm: split_k must be an int from 1 to 8 \(K slices "
                                            r"summed in one cluster\), got 9"):
        make_fp8_block_scaled_gemm(64, 256, 8192, split_k=9)
    with pytest.raises(ValueError, match=r"split_k=2 runs one tile slice per block; it cannot be combined with"):
        make_fp8_block_scaled_gemm(256, 256, 8192, split_k=2, persistent=True)
