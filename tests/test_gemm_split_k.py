"""CPU tests of the split-K GEMM (gemm_split_k.py): summed in a cluster, one clean kernel (tensor
cores, TMA, no spills) on a (tiles, split_k) grid in (1, split_k) clusters whose blocks read each
other's partials (distributed shared memory) and write C; summed through a workspace, the K-slice
kernel writes an f32 (split_k, m, n) workspace and a reduce kernel without spills sums it; the
heuristic splits K only where tiles fill few SMs over a long K, and bad arguments are refused
with errors that name them."""

from __future__ import annotations

import re

import pytest
from test_gemm import assert_clean

from mgpu_lab.kernels.gemm import make_gemm, resolve_tiling
from mgpu_lab.kernels.gemm.configs import heuristic_config
from mgpu_lab.kernels.gemm.split_k import choose_split_k, even_split_k

SHAPES = pytest.mark.parametrize("m, n, k, tiles, split_k, transpose_b", [
    (16, 4096, 14336, (64, 128), 4, True),
    (129, 4096, 4104, (128, 256), 4, True),  # two consumer warpgroups, a K tail
    (16, 6144, 4096, (64, 64), 2, False),
])


@SHAPES
def test_split_k_in_a_cluster_builds_clean(m, n, k, tiles, split_k, transpose_b):
    tile_m, tile_n = tiles
    kern = make_gemm(m, n, k, transpose_b=transpose_b, tile_m=tile_m, tile_n=tile_n, split_k=split_k)
    assert kern.program.is_single  # the default up to 8 slices: one kernel
    assert_clean(kern, rf"HGMMA\.64x{tile_n}x16\.F32\.BF16")
    compiled = kern.compiled
    assert compiled.grid == (-(-m // tile_m) * -(-n // tile_n), split_k, 1)
    assert compiled.cluster == (1, split_k, 1)
    assert [tuple(o.shape) for o in compiled.outputs] == [(m, n)]
    sass = compiled.sass
    # every consumer thread parks 16 f32 pairs per 64-row x 64-column piece, then reads each
    # piece it sums from its own smem and from every other block of the cluster (generic 64-bit
    # loads of the cluster window)
    parked = tile_n // 64 * 16  # per consumer thread: 64 rows each here
    assert len(re.findall(r"\bSTS\.64\b", sass)) == parked
    assert len(re.findall(r"\bLDS\.64\b", sass)) == parked
    assert len(re.findall(r"\bLD\.E\.64\b", sass)) == parked * (split_k - 1)
    assert len(re.findall(r"\bUCGABAR_ARV\b", sass)) == 4  # two cluster barriers, producer and consumer paths


@SHAPES
def test_split_k_through_a_workspace_builds_clean(m, n, k, tiles, split_k, transpose_b):
    tile_m, tile_n = tiles
    kern = make_gemm(m, n, k, transpose_b=transpose_b, tile_m=tile_m, tile_n=tile_n, split_k=split_k,
                     split_k_reduce="workspace")
    partial, reduce = kern.launches  # two launches through one f32 scratch buffer
    assert [(s.shape, s.dtype) for s in kern.program.scratch] == [((split_k, m, n), "float32")]
    assert_clean(kern, rf"HGMMA\.64x{tile_n}x16\.F32\.BF16")  # the main launch: the partial GEMM
    grid = (-(-m // tile_m) * -(-n // tile_n), split_k, 1)
    assert partial.grid == grid
    assert [tuple(o.shape) for o in partial.outputs] == [(split_k, m, n)]
    r = reduce.resources
    assert r.spill_stores_bytes == r.spill_loads_bytes == r.stack_frame_bytes == 0
    assert [tuple(o.shape) for o in reduce.outputs] == [(m, n)] == [tuple(o.shape) for o in kern.outputs]
    assert reduce.grid[0] * 256 * 4 >= m * n


def test_split_k_ragged_shape_goes_through_the_padded_path():
    kern = make_gemm(129, 257, 1000, tile_m=64, tile_n=64, split_k=3, split_k_reduce="workspace")
    assert len(kern.launches) == 2 and any(type(s).__name__ == "Copy" for s in kern.program.steps)
    tiling = kern.config["tiling"]
    assert tiling.split_k == 3 and tiling.k_steps == 6  # 16 k-steps: 6, 6, 4
    kern = make_gemm(129, 257, 1000, tile_m=64, tile_n=64, split_k=3)
    assert len(kern.launches) == 1 and kern.compiled.cluster == (1, 3, 1) and kern.program.scratch


def test_split_k_leaves_no_slice_empty():
    # 9 k-steps in 4 slices of 3 would leave the last empty: 3 slices
    assert resolve_tiling(16, 512, 576, tile_m=64, tile_n=64, split_k=4).split_k == 3
    assert make_gemm(16, 512, 576, tile_m=64, tile_n=64, split_k=4).compiled.cluster == (1, 3, 1)
    assert even_split_k(9, 4) == 3 and even_split_k(224, 4) == 4 and even_split_k(65, 3) == 3


def test_heuristic_splits_k_only_for_few_tiles_over_a_long_k():
    # even 64 x 32 tiles give 16 x 1024 only 32 blocks: 4 K slices of 32 k-steps
    assert heuristic_config(16, 1024, 8192, dtype="bfloat16") == {
        "tile_m": 64, "tile_n": 32, "group_m": 8, "split_k": 4, "source": "heuristic"}
    assert "split_k" not in heuristic_config(16, 4096, 14336, dtype="bfloat16")  # 64 x 32 tiles fill the SMs
    assert "split_k" not in heuristic_config(4096, 4096, 4096, dtype="bfloat16")  # tiles fill the SMs
    assert "split_k" not in heuristic_config(16, 256, 256, dtype="bfloat16")  # K too short to split
    assert "split_k" not in heuristic_config(16, 4096, 14336, dtype="float8_e4m3fn")  # bf16/f16 only
    assert choose_split_k(16, 4096, 14336, 64, 128, 132) == 4  # 32 tiles x 4 slices of 56 k-steps
    assert choose_split_k(16, 8192, 28672, 64, 128, 132) == 2
    assert choose_split_k(2048, 2048, 8192, 128, 256, 132) == 1


def test_split_k_with_an_epilogue_from_the_config_sums_in_a_cluster():
    """With an epilogue the configuration's K slices are summed in a cluster, which applies it to
    the sums: one launch, never a workspace's second kernel (which applies none)."""
    from mgpu_lab.kernels.gemm.epilogues import relu

    assert resolve_tiling(16, 4096, 14336, transpose_b=True, split_k=None).split_k > 1  # what the config picks
    kern = make_gemm(16, 4096, 14336, transpose_b=True, epilogue=lambda acc, tile: relu(acc))
    split = kern.compiled.grid[1]
    assert len(kern.launches) == 1 and split > 1 and kern.compiled.cluster == (1, split, 1)
    for m, n, k in [(64, 1024, 32768), (8, 512, 65536), (200, 1072, 27360)]:  # workspace splits without one
        kern = make_gemm(m, n, k, transpose_b=True, epilogue=lambda acc, tile: relu(acc))
        assert len(kern.launches) == 1 and kern.compiled.cluster == (1, kern.compiled.grid[1], 1)


@pytest.mark.parametrize("kwargs, message", [
    ({"split_k": 0}, r"split_k must be an int from 1 to the 16 k-steps of k=1024, got 0"),
    ({"split_k": 17}, r"split_k must be an int from 1 to the 16 k-steps of k=1024, got 17"),
    ({"split_k": True}, r"split_k must be an int from 1 to the 16 k-steps of k=1024, got True"),
    ({"split_k": 2, "persistent": True}, r"split_k=2 runs one tile slice per block; it cannot be combined with "
                                         r"persistent=True"),
    ({"split_k": 2, "split_k_reduce": "atomic"}, r"split_k_reduce must be 'cluster' or 'workspace', got 'atomic'"),
    ({"split_k": 12, "split_k_reduce": "cluster"}, r"split_k_reduce='cluster' sums the K slices in one cluster of at "
                                                   r"most 8 blocks, got split_k=12; use split_k_reduce='workspace'"),
])
def test_split_k_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_gemm(64, 1024, 1024, tile_m=64, tile_n=64, **kwargs)


def test_split_k_through_a_workspace_refuses_an_epilogue():
    from mgpu_lab.kernels.gemm.epilogues import relu

    with pytest.raises(ValueError, match=r"split_k=2 with split_k_reduce='workspace' sums the K slices in a second "
                                         r"kernel and cannot apply an epilogue; use split_k_reduce='cluster'"):
        make_gemm(64, 1024, 1024, tile_m=64, tile_n=64, split_k=2, split_k_reduce="workspace",
                  epilogue=lambda acc, tile: relu(acc))


def test_split_k_in_a_cluster_applies_the_epilogue_to_the_sums():
    from mgpu_lab.kernels.gemm.epilogues import fused

    e = fused(16, 6144, bias="bfloat16", activation="gelu", residual="bfloat16", scale=True)
    kern = make_gemm(16, 6144, 4096, transpose_b=True, tile_m=64, tile_n=128, split_k=2, epilogue=e.fn,
                     epilogue_inputs=e.inputs)
    assert kern.compiled.cluster == (1, 2, 1) and len(kern.compiled.inputs) == 2 + len(e.inputs)
    assert_clean(kern, r"HGMMA\.64x128x16\.F32\.BF16")


def test_fp8_split_k_sums_in_a_cluster_only():
    from mgpu_lab.kernels.gemm.fp8 import make_fp8_gemm

    kern = make_fp8_gemm(16, 6144, 4096, tile_m=64, tile_n=128, split_k=2)
    assert kern.compiled.cluster == (1, 2, 1) and kern.compiled.grid == (48, 2, 1)
    assert_clean(kern, r"QGMMA\.64x128x32\.F32\.E4M3\.E4M3")
    with pytest.raises(ValueError, match=r"split_k with dtype 'float8_e4m3fn' needs split_k_reduce='cluster' \(its "
                                         r"scales apply to the sums\), got 'workspace'"):
        make_fp8_gemm(16, 6144, 4096, tile_m=64, tile_n=128, split_k=2, split_k_reduce="workspace")
