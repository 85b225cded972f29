"""GPU tests of the GEMM computed as C.T = B @ A.T (swap_ab: B's n side on the wgmma's 64-row
side, from B (n, k) or, MN-major, from B (k, n); A's few rows as a narrow tile_n; C written
transposed through smem by TMA, all at once from one-tile blocks, piece by piece through two
slots from persistent ones, from the registers from split ones) and of the tile widths that
are not powers of two (B (n, k) takes any multiple of 16), against a float32
matmul on fresh random inputs with C poisoned (NaN) first: a part of C never written, or
written outside the array's edge into a neighbour, shows up. A file of its own so a fault here
cannot take the other GEMM tests' CUDA context down."""

from __future__ import annotations

import pytest
from test_gemm_epilogues_gpu import _check
from test_gemm_gpu import random_operands, reference, relative_error
from test_hopper import host_f32, poison

from mgpu_lab.kernels.gemm import make_gemm

pytestmark = pytest.mark.gpu


def _error(m, n, k, rng, out_dtype="bfloat16", transpose_b=True, **kwargs):
    import cupy

    kern = make_gemm(m, n, k, transpose_b=transpose_b, out_dtype=out_dtype, **kwargs)
    assert kern.compiled.name.endswith("_swapab") == bool(kwargs.get("swap_ab")), kern.compiled.name
    a, b = random_operands(m, n, k, rng, transpose_b=transpose_b)
    out = poison(cupy, (m, n), out_dtype)
    kern(cupy.asarray(a), cupy.asarray(b), out=out)
    err = relative_error(host_f32(out), reference(a, b, transpose_b=transpose_b))
    print(f"gemm {m}x{n}x{k} transpose_b={transpose_b} {kwargs}: relative error {err:.3g}")
    return err


@pytest.mark.parametrize("m, n, k, tile_m, tile_n, split_k", [
    (129, 4096, 4104, 128, 144, 3),  # the sweep's ragged decode shape: one 144-wide tile over m, a K tail
    (129, 4096, 4104, 64, 144, 2),
    (129, 4096, 4104, 128, 136, 3),  # a width of 8s: no store box, C written from the registers
    (129, 4096, 4104, 256, 136, 4),  # 256 rows of B: 136 accumulator registers per consumer thread
    (160, 1000, 1000, 256, 160, 3),  # the widest swapped accumulator, ragged n and K slices
    (5, 1000, 256, 64, 8, 1),  # the narrowest wgmma N
    (16, 6144, 4096, 64, 16, 2),  # decode: A's 16 rows are the whole wgmma N
    (16, 6144, 4096, 128, 16, 4),
    (1, 4096, 4096, 64, 16, 1),  # one row of A
    (64, 4096, 4096, 64, 64, 2),
    (129, 257, 72, 64, 144, 1),  # unaligned n: the padded path; one k-step
    (200, 1000, 520, 64, 208, 1),  # ragged everywhere: tiles over both edges of C
    (37, 777, 3000, 128, 48, 5),  # ragged, five unequal K slices
])
def test_swap_ab(m, n, k, tile_m, tile_n, split_k, rng):
    assert _error(m, n, k, rng, swap_ab=True, tile_m=tile_m, tile_n=tile_n, split_k=split_k) <= 1e-2


@pytest.mark.parametrize("m, n, k, tile_m, tile_n, split_k", [
    (16, 6144, 4096, 128, 16, 1),  # decode with B (k, n): B's columns read MN-major as the wgmma A
    (129, 4096, 4104, 256, 136, 4),  # four 64-column boxes of B per k-step, a K tail, cluster split
    (129, 2048, 1024, 128, 136, 1),
    (5, 1000, 256, 64, 8, 1),  # n ragged: the last box of B's columns hangs over the edge
    (200, 1000, 520, 64, 208, 1),  # ragged everywhere
    (37, 776, 3000, 128, 48, 5),  # five unequal K slices
    (129, 257, 72, 64, 144, 1),  # unaligned n: the padded path
])
def test_swap_ab_with_b_k_n(m, n, k, tile_m, tile_n, split_k, rng):
    assert _error(m, n, k, rng, transpose_b=False, swap_ab=True, tile_m=tile_m, tile_n=tile_n,
                  split_k=split_k) <= 1e-2


@pytest.mark.parametrize("m, n, k, tile_m, tile_n, persistent, transpose_b", [
    (530, 5920, 3152, 128, 184, True, False),  # 141 tiles (three 184 wide over m) on 132 blocks; B (k, n) MN-major
    (530, 5920, 3152, 128, 184, True, True),
    (1161, 1424, 11496, 128, 240, True, True),  # 60 tiles, ragged n and m, a K tail
    (1161, 1424, 11496, 256, 160, True, False),  # the widest swapped accumulator in a loop
    (530, 5920, 3152, 128, 192, "stream_k", True),  # split tiles' partials handed over, then stored transposed
    (650, 4096, 28672, 128, 224, "stream_k", False),
    (300, 1000, 520, 128, 152, True, True),  # 16 tiles: a grid of 16, one each
])
def test_swap_ab_persistent(m, n, k, tile_m, tile_n, persistent, transpose_b, rng):
    """Persistent swapped blocks (True or 'stream_k') loop over C.T's tiles and write each from
    the registers; C poisoned first, so a tile skipped or written twice over an edge shows."""
    assert _error(m, n, k, rng, transpose_b=transpose_b, swap_ab=True, tile_m=tile_m, tile_n=tile_n,
                  persistent=persistent) <= 1e-2


@pytest.mark.parametrize("m, n, k, tile_m, tile_n, cluster_m, cluster_n, transpose_b", [
    (325, 3736, 2488, 64, 176, 2, 1, True),  # pairs down C.T's rows sharing A's 176 rows, 88 each
    (325, 3736, 2488, 64, 168, 1, 2, True),  # pairs along m sharing B's 64 rows, 32 each; ragged m
    (325, 3736, 2488, 64, 192, 4, 2, True),  # clusters of eight: A in quarters, B in halves
    (517, 1712, 12104, 128, 96, 2, 2, True),  # quads over six column tiles of m, a K tail
    (550, 11008, 8192, 128, 192, 2, 1, False),  # B (k, n) read MN-major, A shared by the pair
    (235, 2280, 2056, 64, 256, 4, 1, False),  # four down the column, 36 C.T row tiles (not a multiple of 4)
    (300, 1000, 520, 128, 160, 2, 2, True),  # fewer quads than clusters resident: a ragged grid
    # B (k, n) read MN-major shared along m, each block a share of every box's k rows (cuBLAS's
    # 128 x 152 in 1 x 4 clusters on 3604x592x10640; 128 x 88 in 2 x 4 on 1041x1272x2352)
    (3604, 592, 10640, 128, 152, 1, 4, False),
    (1041, 1272, 2352, 128, 96, 2, 4, False),  # clusters of eight
    (1000, 600, 4136, 128, 128, 1, 2, False),  # pairs; A's rows off the 128-byte line, ragged n
    (1000, 600, 1000, 256, 160, 2, 2, False),  # quads, 256 rows of B a tile: four boxes' k rows halved
    (431, 5704, 8968, 64, 112, 2, 4, False),  # 64 rows of B: one box, 16 k rows a block; A's rows off the line
    # what swap_clusters_share_b picks within the swapped rows (cuBLAS's own on these shapes)
    (431, 5704, 8968, 192, 112, 2, 4, False),  # three consumers in clusters of eight
    (203, 19264, 1256, 192, 104, 1, 2, False),  # three consumers in pairs along m, ragged m
    (281, 7976, 20160, 128, 144, 1, 2, False),  # long K
])
def test_swapped_multicast_clusters(m, n, k, tile_m, tile_n, cluster_m, cluster_n, transpose_b, rng):
    """Swapped persistent tiles in multicast clusters (cuBLAS's mid-m kernels in our terms): every
    block loads its share of the shared tiles into its cluster's slots; C poisoned first, so a
    tile skipped, a share never loaded or a slot reused early shows."""
    assert _error(m, n, k, rng, transpose_b=transpose_b, swap_ab=True, tile_m=tile_m, tile_n=tile_n,
                  persistent=True, cluster_m=cluster_m, cluster_n=cluster_n) <= 1e-2


def test_swap_ab_float32_output(rng):
    assert _error(33, 500, 1000, rng, out_dtype="float32", swap_ab=True, tile_m=64, tile_n=48, split_k=2) <= 1e-4


@pytest.mark.parametrize("m, n, k, tile_m, tile_n, out_dtype, transpose_b", [
    (33, 500, 1000, 64, 48, "float32", True),  # f32: 32-column boxes, 4-byte transposed smem writes
    (300, 1000, 512, 256, 104, "bfloat16", True),  # two consumers of 128 rows: two boxes each
    (77, 1096, 700, 128, 80, "bfloat16", False),  # ragged everywhere, B (k, n)
    (8, 72, 64, 64, 8, "bfloat16", True),  # C narrower than one box: the store clipped on both sides
])
def test_swapped_one_tile_blocks_store_c_by_tma(m, n, k, tile_m, tile_n, out_dtype, transpose_b, rng):
    """A swapped one-tile block (no split) writes its C.T tile transposed into smem and C by TMA
    (t.swap_tma_store); edges of C clip the boxes. C poisoned first: a box written past an edge
    or a part never written shows up."""
    tol = 1e-4 if out_dtype == "float32" else 1e-2
    assert _error(m, n, k, rng, out_dtype=out_dtype, transpose_b=transpose_b, swap_ab=True, tile_m=tile_m,
                  tile_n=tile_n, split_k=1) <= tol


@pytest.mark.parametrize("m, n, k, tile_m, tile_n, out_dtype, transpose_b, clusters", [
    (300, 20000, 256, 128, 208, "bfloat16", True, {}),  # 7 pieces (odd): a tile's first reuses the last's slot
    (530, 5920, 3152, 128, 184, "bfloat16", True, {}),  # 4 pieces, the last 16 rows of C
    (401, 13752, 344, 128, 208, "bfloat16", False, {"cluster_m": 2}),  # B (k, n), pairs, a 344-deep K tail
    (250, 20000, 1000, 256, 160, "bfloat16", True, {"cluster_n": 2}),  # 128-row consumers: 2 boxes a piece
    (301, 6001, 1000, 128, 152, "float32", False, {}),  # f32: 32-column boxes; ragged everywhere
    (40, 20000, 2048, 128, 48, "bfloat16", True, {}),  # one piece per tile, one slot
    (325, 3736, 2488, 64, 176, "bfloat16", True, {"cluster_m": 2, "cluster_n": 2}),  # quads
])
def test_persistent_swapped_tiles_stream_c_by_tma(m, n, k, tile_m, tile_n, out_dtype, transpose_b, clusters, rng):
    """A persistent swapped block streams each C.T tile out piece by piece (transposed into one of
    two slots, then TMA-stored) while its producer loads the next tile; most blocks take two or
    more tiles, so a slot reused before its store has read it shows. C poisoned first."""
    tol = 1e-4 if out_dtype == "float32" else 1e-2
    assert _error(m, n, k, rng, out_dtype=out_dtype, transpose_b=transpose_b, swap_ab=True, tile_m=tile_m,
                  tile_n=tile_n, persistent=True, **clusters) <= tol


@pytest.mark.parametrize("m, n, k, tile_m, tile_n, split_k", [
    (16, 6144, 4096, 64, 96, 2),  # 64 tiles x 2 slices: 128 blocks
    (16, 1000, 2048, 64, 160, 2),  # 160 = 5 boxes of 32 columns, a ragged last tile
    (300, 1000, 512, 128, 224, 1),
    (100, 520, 256, 64, 48, 1),  # 16-column store boxes
])
def test_tile_widths_of_any_multiple_of_16(m, n, k, tile_m, tile_n, split_k, rng):
    assert _error(m, n, k, rng, tile_m=tile_m, tile_n=tile_n, split_k=split_k) <= 1e-2


def test_epilogue_on_a_96_wide_tile(rng):
    """Bias and activation on a split-K tile whose store boxes are 32 columns."""
    assert _check(16, 6144, 4096, rng, bias="bfloat16", activation="gelu",
                  tiles={"tile_m": 64, "tile_n": 96, "split_k": 2}) <= 1e-2


@pytest.mark.parametrize("m, n, k, transpose_b, options, tiles", [
    (129, 4096, 1024, True, {"bias": "bfloat16", "activation": "gelu", "residual": "bfloat16", "scale": True},
     {"tile_m": 128, "tile_n": 136}),
    (7, 6144, 4096, True, {"bias": "bfloat16"}, {"tile_m": 128, "tile_n": 8, "split_k": 4}),  # cluster split-K sums
    (301, 3584, 2048, False, {"residual": "bfloat16", "activation": "silu"}, {"tile_m": 128, "tile_n": 152}),  # odd m
    (530, 5920, 3152, False, {"bias": "float32", "scale": True}, {"tile_m": 128, "tile_n": 184, "persistent": True}),
    (33, 4104, 2048, True, {"bias": "bfloat16", "residual": "bfloat16"},
     {"tile_m": 64, "tile_n": 48, "persistent": "stream_k"}),
    (325, 3736, 2488, True, {"bias": "bfloat16", "activation": "gelu", "residual": "bfloat16"},
     {"tile_m": 64, "tile_n": 176, "persistent": True, "cluster_m": 2, "cluster_n": 2}),
    (550, 4096, 1024, False, {"bias": "bfloat16"}, {"tile_m": 128, "tile_n": 96, "persistent": True, "cluster_m": 4}),
], ids=["gelu-all", "bias-split", "residual-odd-m", "bias-f32-persistent", "stream-k", "quads", "fours-b-k-n"])
def test_fused_epilogue_on_swapped_tiles(m, n, k, transpose_b, options, tiles, rng):
    """`fused` epilogues on C.T's tiles (swap_ab): the bias along the accumulator's rows, the
    residual's tile read transposed, against the f64 reference on C; outputs poisoned first."""
    assert _check(m, n, k, rng, transpose_b=transpose_b, tiles={"swap_ab": True, **tiles}, **options) <= 1e-2
