"""The order a GEMM grid numbers its tiles in: down groups of `group_m` tile rows, column by
column, so that tiles running together share panels of A and B in L2. One function for the
kernel (pieces.tile_origin, on index values) and for the host's replay of a schedule
(l2_replay.py, on ints). Pure Python."""

from __future__ import annotations

from typing import Any, Callable


def tile_position(tile: Any, tiles_m: int, tiles_n: int, group_m: int,
                  minimum: Callable[[Any, Any], Any] = min) -> tuple[Any, Any]:
    """(tile row, tile column) of tile number `tile` (an int, or an index value with `minimum`
    dsl.min). The last group of rows is shorter where group_m does not divide tiles_m."""
    group_m = max(1, min(group_m, tiles_m))
    per_group = group_m * tiles_n
    first_m = tile // per_group * group_m
    size = minimum(tiles_m - first_m, group_m) if tiles_m % group_m else group_m
    in_group = tile % per_group
    return first_m + in_group % size, in_group // size


__all__ = ["tile_position"]
