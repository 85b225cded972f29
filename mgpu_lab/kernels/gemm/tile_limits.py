"""The tile sizes the GEMM kernel takes and the accumulator a consumer keeps in registers: the
limits the tiling's check (tiling.py) refuses a tiling by and the configuration model (model.py)
offers candidates by, in one place so the two cannot drift apart. Pure Python (the model imports
it without MLIR)."""

from __future__ import annotations

from typing import Any

# 192: three consumer warpgroups of 64 rows (what cuBLAS's 192-row tiles fill a wave with: 4822 x 904
# in 192 x 192 tiles is 130 of them on 132 SMs, where 128- and 256-row tiles take 1.5 and 0.8 waves)
TILE_MS = (64, 128, 192, 256)
THREE_CONSUMER_ROWS = 192
# B (k, n) is loaded in 64-column boxes (128-byte swizzle) where tile_n is a multiple of 64, else in
# 32-column boxes (64-byte swizzle): 96 / 160 / 224 fit n = 280, 592, ... with a few % of waste
# where the 64-multiples waste 14-27% (13056x280: 3 x 96 against 3 x 128), but run slower per flop
# (model.OFFER_B_HALF_BOXES)
TILE_NS = (32, 64, 96, 128, 160, 192, 224, 256)
TILE_NS_64_BOXES = (32, 64, 128, 192, 256)  # the widths before 32-column boxes (model switch b_half_boxes)
MAX_ACCUMULATOR = 128 * 128  # f32 accumulator elements per consumer warpgroup (128 registers a thread)
# swap_ab tiles take no epilogue but the FP8 scales: 160 registers of accumulator leave no spills
# there (a fused bias + GELU + residual epilogue spills above 128), and m = 129..160 fits one tile
MAX_SWAP_AB_ACCUMULATOR = 128 * 160
# a pingpong consumer owns whole tiles and 232 registers (the producer keeps 40): 128 x 192 f32 of
# accumulator leaves room for the plain store without spills (what cuBLAS's 176 x 128 pingpong keeps)
MAX_PINGPONG_ACCUMULATOR = 128 * 192
# three consumers (tile_m 192): a block of 512 threads is compiled to 128 registers a thread, and
# ptxas holds each wgmma to that (64 x 208 asked for 130: C7602) whatever setmaxnreg gives later
THREE_CONSUMER_MAX_N = 192


def valid_tile_n(tile_n: Any, transpose_b: bool, swap_ab: bool = False) -> bool:
    """B (k, n) is loaded in 64- or 32-column boxes: TILE_NS; B (n, k) tiles are tile_n rows of k: any
    multiple of 16 up to 256 (the narrowest store box is 16 columns), or of 8 with swap_ab
    (C is written from the registers: no store box; 8 is a wgmma's narrowest N)."""
    if isinstance(tile_n, bool) or not isinstance(tile_n, int):
        return False
    if not transpose_b and swap_ab is not True:  # swapped, tile_n is over A (m, k)'s rows: K-major
        return tile_n in TILE_NS
    step = 8 if swap_ab is True else 16
    return step <= tile_n <= 256 and tile_n % step == 0


def consumer_count(tile_m: int, pingpong: bool = False) -> int:
    """Consumer warpgroups of a block of tile_m rows: two for pingpong (each a whole tile) and for
    128 / 256 rows (64 or 128 each), three of 64 rows for THREE_CONSUMER_ROWS, one for 64."""
    if pingpong:
        return 2
    return 3 if tile_m == THREE_CONSUMER_ROWS else 2 if tile_m > 64 else 1


def accumulator_limit(pingpong: bool = False, swap_ab: bool = False) -> int:
    """f32 accumulator elements a consumer warpgroup may keep: MAX_SWAP_AB_ACCUMULATOR swapped,
    MAX_PINGPONG_ACCUMULATOR for a pingpong consumer's whole tile, else MAX_ACCUMULATOR."""
    return MAX_SWAP_AB_ACCUMULATOR if swap_ab else MAX_PINGPONG_ACCUMULATOR if pingpong else MAX_ACCUMULATOR


__all__ = ["MAX_ACCUMULATOR", "MAX_PINGPONG_ACCUMULATOR", "MAX_SWAP_AB_ACCUMULATOR", "TILE_MS", "TILE_NS",
           "THREE_CONSUMER_MAX_N", "THREE_CONSUMER_ROWS", "TILE_NS_64_BOXES", "accumulator_limit", "consumer_count",
           "valid_tile_n"]
