"""GPU tests of the persistent GEMMs (one block per SM looping over tiles; 'pingpong': the two
consumers alternating whole tiles; cluster_m=2 / cluster_n=2: pairs of blocks sharing B / A tiles by
multicast; both, or 4 on one side: clusters of four; 2 x 4 and 4 x 2: clusters of eight): bf16 on ragged, aligned, decode and small shapes, fused
epilogues, FP8 and block-scaled FP8. A file of its own so that a fault
here cannot take the other GEMM tests' CUDA context down with it (gpu_check_gemm.sh runs it
in its own process and tunes without the persistent kernel when it fails)."""

from __future__ import annotations

import pytest
from test_gemm_epilogues_gpu import _check
from test_gemm_fp8_gpu import _run as _run_fp8
from test_gemm_fp8_gpu import block_scaled_error
from test_gemm_gpu import _run

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m, n, k, tiles", [
    (4000, 4000, 4000, {"tile_m": 128, "tile_n": 256}),
    (4096, 4096, 4096, {"tile_m": 128, "tile_n": 256}),
    (2100, 3000, 1000, {"tile_m": 256, "tile_n": 128}),
    (16, 14336, 4096, {"tile_m": 64, "tile_n": 32}),
    (300, 200, 100, {"tile_m": 128, "tile_n": 128}),  # fewer tiles than SMs
])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_persistent_gemm(m, n, k, tiles, transpose_b, rng):
    assert _run(m, n, k, rng, transpose_b, runs=1, persistent=True, **tiles) <= 1e-2


@pytest.mark.parametrize("m, n, k, tile_n", [
    (1000, 2000, 1000, 144), (1000, 2000, 1000, 176), (1000, 2000, 1000, 208), (1000, 2000, 1000, 240),
    (2048, 5632, 2048, 176),  # the HF prefill's gate / up projection: 512 tiles, 3.9 waves
])
def test_persistent_c_tiles_an_odd_multiple_of_16_wide(m, n, k, tile_n, rng):
    """model.OFFER_N16_TILES: C's own tiles over B (n, k) 144 to 240 wide, stored in 16-column boxes."""
    assert _run(m, n, k, rng, True, runs=1, persistent=True, tile_m=128, tile_n=tile_n) <= 1e-2
    if tile_n == 176:
        assert _check(m, n, k, rng, tiles={"tile_m": 128, "tile_n": 176, "persistent": True},
                      bias="bfloat16", activation="gelu") <= 1e-2


@pytest.mark.parametrize("m, n, k, options", [
    (1000, 280, 2000, {"tile_n": 96}),  # one block a tile; n = 2.9 tiles, B's rows off the 128-byte line
    (1000, 280, 3000, {"tile_n": 96, "split_k": 2}),
    (3604, 592, 1064, {"tile_n": 160, "persistent": True}),
    (3604, 592, 1064, {"tile_n": 160, "persistent": True, "cluster_n": 2}),
    (2000, 600, 4136, {"tile_n": 224, "persistent": "stream_k"}),  # A's rows off the line too
    (2100, 1000, 1000, {"tile_n": 160, "persistent": "pingpong"}),
])
def test_b_k_n_tiles_in_32_column_boxes(m, n, k, options, rng):
    """model.OFFER_B_HALF_BOXES: C's tiles over B (k, n) 96 / 160 / 224 wide, B loaded in 32-column
    boxes with a 64-byte swizzle, on each kind of grid, and with a fused epilogue."""
    assert _run(m, n, k, rng, False, runs=1, tile_m=128, **options) <= 1e-2
    if options == {"tile_n": 160, "persistent": True}:
        assert _check(m, n, k, rng, transpose_b=False, tiles={"tile_m": 128, **options},
                      bias="bfloat16", activation="gelu", residual="bfloat16") <= 1e-2


@pytest.mark.parametrize("m, n, k, tiles", [
    (4000, 4000, 4000, {"tile_m": 128, "tile_n": 128}),
    (4096, 4096, 4096, {"tile_m": 128, "tile_n": 128}),
    (2100, 3000, 1000, {"tile_m": 64, "tile_n": 256}),
    (16, 14336, 4096, {"tile_m": 64, "tile_n": 64}),
    (300, 200, 100, {"tile_m": 128, "tile_n": 64}),  # fewer tiles than SMs: one consumer may get none
    (300, 300, 1000, {"tile_m": 128, "tile_n": 128}),  # 9 tiles on 5 blocks: the last block's consumer 1 gets none
    (2100, 5000, 1000, {"tile_m": 128, "tile_n": 192}),  # MAX_PINGPONG_ACCUMULATOR: 128 x 192 f32 a consumer
])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_pingpong_gemm(m, n, k, tiles, transpose_b, rng):
    assert _run(m, n, k, rng, transpose_b, runs=1, persistent="pingpong", **tiles) <= 1e-2


@pytest.mark.parametrize("m, n, k, tile_n", [(2048, 5632, 2048, 176), (1000, 1500, 700, 176), (777, 2000, 300, 160)])
def test_pingpong_wide_tiles(m, n, k, tile_n, rng):
    """128 x 160-176 pingpong tiles over B (n, k) (cuBLAS's choice for 2048x5632x2048), ragged m, n
    and K tails, and with a bias, which fits beside the wider accumulator."""
    tiles = {"tile_m": 128, "tile_n": tile_n, "persistent": "pingpong"}
    assert _run(m, n, k, rng, True, runs=1, **tiles) <= 1e-2
    assert _check(m, n, k, rng, tiles=tiles, bias="bfloat16") <= 1e-2


@pytest.mark.parametrize("m, n, k, tiles, transpose_b", [
    (2048, 5632, 2048, {"tile_m": 128, "tile_n": 176, "cluster_m": 2}, True),  # cuBLAS's 176 x 128 in 1 x 2
    (1000, 1500, 700, {"tile_m": 128, "tile_n": 192, "cluster_n": 2}, True),
    (2100, 3000, 1000, {"tile_m": 64, "tile_n": 256, "cluster_m": 2}, False),
    (300, 300, 1000, {"tile_m": 128, "tile_n": 128, "cluster_m": 2}, False),  # 3 x 3 tiles: most pairs idle
    (777, 2000, 300, {"tile_m": 128, "tile_n": 128, "cluster_n": 2}, False),
])
def test_pingpong_in_multicast_pairs(m, n, k, tiles, transpose_b, rng):
    """Pingpong blocks in (2, 1) or (1, 2) clusters: both blocks' consumers take the same turns, and
    the one computing a tile releases each slot in its peer too."""
    assert _run(m, n, k, rng, transpose_b, runs=1, persistent="pingpong", **tiles) <= 1e-2


def test_fused_epilogue_pingpong(rng):
    assert _check(3000, 4104, 1000, rng, tiles={"tile_m": 128, "tile_n": 128, "persistent": "pingpong"},
                  bias="bfloat16", activation="silu", residual="bfloat16", scale=True) <= 1e-2


def test_fp8_gemms_pingpong(rng):
    assert _run_fp8(4000, 4000, 4096, rng, tiles={"tile_m": 128, "tile_n": 128, "persistent": "pingpong"}) <= 2e-2
    assert block_scaled_error(4000, 4000, 4096, {"persistent": "pingpong"}, rng) <= 1e-2


def test_fused_epilogue_persistent(rng):
    assert _check(3000, 4104, 1000, rng, tiles={"tile_m": 128, "tile_n": 256, "persistent": True}, bias="bfloat16",
                  activation="gelu", residual="bfloat16", scale=True) <= 1e-2


def test_fp8_gemm_persistent(rng):
    assert _run_fp8(4000, 4000, 4096, rng, tiles={"tile_m": 128, "tile_n": 256, "persistent": True}) <= 2e-2


def test_fp8_block_scaled_gemm_persistent(rng):
    assert block_scaled_error(4000, 4000, 4096, {"persistent": True}, rng) <= 1e-2


@pytest.mark.parametrize("m, n, k, tiles", [
    (4096, 4096, 4096, {"tile_m": 128, "tile_n": 256}),
    (2944, 4000, 1000, {"tile_m": 128, "tile_n": 256}),  # 23 row tiles: the last pair's lower tile is all past M
    (2100, 3000, 1000, {"tile_m": 256, "tile_n": 128}),
    (300, 200, 100, {"tile_m": 128, "tile_n": 128}),  # one pair per cluster, most clusters idle
])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_multicast_pairs_gemm(m, n, k, tiles, transpose_b, rng):
    """cluster_m=2: the two blocks of a cluster share B tiles by TMA multicast."""
    assert _run(m, n, k, rng, transpose_b, runs=1, persistent=True, cluster_m=2, **tiles) <= 1e-2


@pytest.mark.parametrize("m, n, k, tile_n, transpose_b", [
    (5286, 536, 2168, 192, False),  # three 64-column boxes of B (k, n): the first block loads two
    (5286, 536, 2168, 176, True),  # B (n, k) in two 88-row halves
    (2944, 848, 1000, 208, True),  # 23 row tiles: the last pair's lower tile is all past M
    (2944, 952, 4136, 192, False),  # rows of A off the 128-byte line
])
def test_multicast_pairs_share_b_tiles_of_any_width_they_split(m, n, k, tile_n, transpose_b, rng):
    assert _run(m, n, k, rng, transpose_b, runs=1, persistent=True, cluster_m=2, tile_m=128,
                tile_n=tile_n) <= 1e-2


def test_multicast_pairs_fused_epilogue_and_fp8(rng):
    assert _check(3000, 4104, 1000, rng, tiles={"tile_m": 128, "tile_n": 256, "persistent": True, "cluster_m": 2},
                  bias="bfloat16", activation="gelu", residual="bfloat16", scale=True) <= 1e-2
    assert _run_fp8(4000, 4000, 4096, rng, tiles={"tile_m": 128, "tile_n": 256, "persistent": True,
                                                  "cluster_m": 2}) <= 2e-2
    assert _run_fp8(4000, 848, 4096, rng, tiles={"tile_m": 128, "tile_n": 208, "persistent": True,
                                                 "cluster_m": 2}) <= 2e-2


@pytest.mark.parametrize("m, n, k, tiles", [
    (4096, 4096, 4096, {"tile_m": 256, "tile_n": 128}),
    (1000, 2816, 1000, {"tile_m": 128, "tile_n": 256}),  # 11 column tiles: the last pair's right tile is all past N
    (2048, 2816, 4136, {"tile_m": 128, "tile_n": 256}),  # rows off the 128-byte line, where A's multicast pays
    (2100, 3000, 1000, {"tile_m": 256, "tile_n": 128}),
    (300, 200, 100, {"tile_m": 128, "tile_n": 128}),  # one pair per cluster, most clusters idle
])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_multicast_a_pairs_gemm(m, n, k, tiles, transpose_b, rng):
    """cluster_n=2: the two blocks of a cluster take horizontally adjacent tiles and share their A
    tile by TMA multicast, each loading half of its rows."""
    assert _run(m, n, k, rng, transpose_b, runs=1, persistent=True, cluster_n=2, **tiles) <= 1e-2


def test_multicast_a_pairs_fused_epilogue_and_fp8(rng):
    assert _check(3000, 4104, 1000, rng, tiles={"tile_m": 256, "tile_n": 128, "persistent": True, "cluster_n": 2},
                  bias="bfloat16", activation="gelu", residual="bfloat16", scale=True) <= 1e-2
    assert _run_fp8(4000, 4000, 4096, rng, tiles={"tile_m": 256, "tile_n": 128, "persistent": True,
                                                  "cluster_n": 2}) <= 2e-2


@pytest.mark.parametrize("m, n, k, tiles", [
    (4096, 4096, 4096, {"tile_m": 128, "tile_n": 256}),  # 128 quads on 30 clusters: four rounds and a tail
    (1161, 1424, 11496, {"tile_m": 128, "tile_n": 128}),  # both operands off the line, 30 quads in one round
    (1000, 2816, 1000, {"tile_m": 128, "tile_n": 256}),  # 11 column tiles: the last quads' right tiles past N
    (1100, 700, 520, {"tile_m": 256, "tile_n": 128}),  # 5 x 6 tiles: the last quads' lower tiles past M too
    (700, 900, 520, {"tile_m": 128, "tile_n": 192}),  # B (k, n): three boxes, the odd one from the upper row
    (300, 200, 100, {"tile_m": 128, "tile_n": 128}),  # one quad, one of its tiles past both edges
])
@pytest.mark.parametrize("transpose_b", [False, True], ids=["nn", "nt"])
def test_multicast_quads_gemm(m, n, k, tiles, transpose_b, rng):
    """cluster_m=2 with cluster_n=2: the four blocks of a cluster take a 2 x 2 quad of tiles, each
    loading half of its row's A tile and half of its column's B tile, multicast to the two
    blocks that share each; every slot is released in the block and the two whose loads land in it."""
    if transpose_b and tiles["tile_n"] == 192:
        tiles = {**tiles, "tile_n": 160}  # B (n, k) halves: 80 rows each
    assert _run(m, n, k, rng, transpose_b, runs=2, persistent=True, cluster_m=2, cluster_n=2, **tiles) <= 1e-2


def test_multicast_quads_fused_epilogue_and_fp8(rng):
    assert _check(3000, 4104, 1000, rng, tiles={"tile_m": 128, "tile_n": 256, "persistent": True, "cluster_m": 2,
                                                "cluster_n": 2},
                  bias="bfloat16", activation="gelu", residual="bfloat16", scale=True) <= 1e-2
    assert _run_fp8(4000, 4000, 4096, rng, tiles={"tile_m": 128, "tile_n": 256, "persistent": True,
                                                  "cluster_m": 2, "cluster_n": 2}) <= 2e-2


@pytest.mark.parametrize("clusters, m, n, k, tiles, transpose_b", [
    ({"cluster_m": 4}, 5286, 536, 8656, {"tile_m": 128, "tile_n": 128}, True),  # 42 row tiles: the last four's last two past M
    ({"cluster_m": 4}, 3000, 1000, 1000, {"tile_m": 128, "tile_n": 256}, False),  # B (k, n): one 64-column box a block
    ({"cluster_m": 4}, 2048, 2816, 4136, {"tile_m": 128, "tile_n": 96}, True),  # 24-row quarters of B, rows off the line
    ({"cluster_n": 4}, 700, 9000, 1000, {"tile_m": 128, "tile_n": 128}, True),  # 71 column tiles: the last four's last past N
    ({"cluster_n": 4}, 600, 6000, 520, {"tile_m": 64, "tile_n": 256}, False),  # 16-row quarters of A, one consumer
], ids=["4x1-nt", "4x1-nn", "4x1-nt-offline", "1x4-nt", "1x4-nn"])
def test_multicast_clusters_of_four_in_a_line_gemm(clusters, m, n, k, tiles, transpose_b, rng):
    """cluster_m=4 / cluster_n=4: four tiles in a column (row) share B (A) by TMA multicast, each
    block loading a quarter of it; every slot is released in all four blocks."""
    assert _run(m, n, k, rng, transpose_b, runs=2, persistent=True, **clusters, **tiles) <= 1e-2


@pytest.mark.parametrize("clusters, m, n, k, tiles, transpose_b", [
    ({"cluster_m": 2, "cluster_n": 4}, 325, 3736, 2488, {"tile_m": 128, "tile_n": 128}, True),  # 3 row tiles: the lower pair half past M; rows off the line
    ({"cluster_m": 2, "cluster_n": 4}, 700, 9000, 1000, {"tile_m": 128, "tile_n": 128}, False),  # 71 column tiles: the last eight's last past N
    ({"cluster_m": 2, "cluster_n": 4}, 4096, 4096, 4096, {"tile_m": 128, "tile_n": 256}, True),  # 128 clusters' worth on 15: rounds and a tail
    ({"cluster_m": 4, "cluster_n": 2}, 5286, 1000, 1000, {"tile_m": 128, "tile_n": 256}, False),  # B (k, n): one box a block
    ({"cluster_m": 4, "cluster_n": 2}, 1161, 1424, 11496, {"tile_m": 128, "tile_n": 128}, True),  # both operands off the line
    ({"cluster_m": 4, "cluster_n": 2}, 300, 200, 100, {"tile_m": 128, "tile_n": 64}, True),  # one cluster, most tiles past the edges
], ids=["2x4-nt-ragged", "2x4-nn", "2x4-rounds", "4x2-nn", "4x2-nt-offline", "4x2-one"])
def test_multicast_clusters_of_eight_gemm(clusters, m, n, k, tiles, transpose_b, rng):
    """2 x 4 / 4 x 2 clusters of eight blocks: each block loads a quarter of one operand's shared
    tile and half of the other's, multicast to the blocks of its cluster row (A) and column (B);
    every slot is released in the block and the 4 + 2 - 2 others whose loads land in it."""
    assert _run(m, n, k, rng, transpose_b, runs=2, persistent=True, **clusters, **tiles) <= 1e-2


def test_multicast_clusters_of_eight_fused_epilogue(rng):
    assert _check(3000, 4104, 1000, rng, tiles={"tile_m": 128, "tile_n": 256, "persistent": True, "cluster_m": 4,
                                                "cluster_n": 2},
                  bias="bfloat16", activation="gelu", residual="bfloat16", scale=True) <= 1e-2
