"""How many times a GEMM schedule reads A and B from DRAM: the kernel's own tile order
(tile_order.py) and stream-K plan (stream_k_plan.py) replayed on the host against an LRU model
of L2. Pure Python (the configuration model calls it).

Why: the model counted A and B read once wherever tiles run side by side. Stream-K over fewer
tiles than units cuts every tile into pieces that start at different k-steps, so the units
sharing a panel of B (the tiles of one column) read it at different times and, over a long K, the
panel leaves L2 between them: 572x3584x28672 in 128 x 256 tiles replays to 3.1 reads of A and B
(a one-tile grid: 1.0), and on an H100 it ran 0.57 of cuBLAS.

The replay: every unit runs its jobs in the kernel's order, all units in step, one k-step per
tick; a k-step loads the tile's A box (tile_m rows of one 128-byte k-step) and B box (tile_n
rows); a box not in the LRU cache of `l2_bytes` is read from DRAM. K-steps are replayed
CHUNK_STEPS at a time (boxes of CHUNK_STEPS steps): fewer cache events (~25 ms for a long-K
stream-K grid), the same reuse wherever the units sharing a panel are within a chunk of each
other (within 3% of the step-by-step replay on the shapes above). A multicast cluster is one
unit over a cluster-sized tile (its blocks load their shares of one panel together), and so is a
stream-K team (make_gemm's team_m: its blocks run the same k-steps at the same time)."""

from __future__ import annotations

import functools
from collections import OrderedDict

from .stream_k_plan import StreamKPlan
from .tile_order import tile_position

STEP_BYTES = 128  # one row of one k-step: 64 bf16 or 128 fp8 elements (model.SWIZZLE)
CHUNK_STEPS = 4  # k-steps replayed as one (8 misread 1556x3584x28672's stream-K: 4.5 reads against 3.1 step by step)


def unit_jobs(tiles: int, k_steps: int, units: int, stream_k: bool) -> list[list[tuple[int, int, int]]]:
    """Each unit's jobs in the order it runs them, as (tile, first k-step, k-steps): stream-K's
    plan (whole tiles, then its split segments, last tile first), else whole tiles dealt out to
    `units` blocks in waves (a one-tile-per-block grid, or a persistent one)."""
    if not stream_k:
        return [[(tile, 0, k_steps) for tile in range(unit, tiles, units)] for unit in range(min(units, tiles))]
    plan = StreamKPlan(units, tiles, k_steps)
    jobs = []
    for unit in range(units):
        whole = [(unit + r * units, 0, k_steps) for r in range(plan.dp_rounds)]
        split = [(plan.dp_items + item, first, steps) for item, first, steps in plan.segments(unit)]
        jobs.append(whole + split)
    return jobs


def _ticks(jobs: list[tuple[int, int, int]]) -> list[list[tuple[int, int]]]:
    """A unit's (tile, chunk) loads per tick of CHUNK_STEPS k-steps."""
    ticks: list[list[tuple[int, int]]] = []
    current: list[tuple[int, int]] = []
    room = CHUNK_STEPS
    for tile, first, steps in jobs:
        k = first
        while k < first + steps:
            take = min(room, first + steps - k, CHUNK_STEPS - k % CHUNK_STEPS)
            if (tile, k // CHUNK_STEPS) not in current:
                current.append((tile, k // CHUNK_STEPS))
            k += take
            room -= take
            if room == 0:
                ticks.append(current)
                current, room = [], CHUNK_STEPS
    if current:
        ticks.append(current)
    return ticks


@functools.lru_cache(maxsize=4096)
def operand_reads(tiles_m: int, tiles_n: int, k_steps: int, tile_m: int, tile_n: int, group_m: int, units: int,
                  stream_k: bool, l2_bytes: int) -> float:
    """DRAM bytes of A and B the replay reads, over A's and B's (1.0: each box read once)."""
    cache: OrderedDict = OrderedDict()
    held = missed = 0
    a_box, b_box = tile_m * STEP_BYTES * CHUNK_STEPS, tile_n * STEP_BYTES * CHUNK_STEPS

    def load(key: tuple, size: int) -> None:
        nonlocal held, missed
        if key in cache:
            cache.move_to_end(key)
            return
        missed += size
        cache[key] = size
        held += size
        while held > l2_bytes:
            held -= cache.popitem(last=False)[1]

    position = functools.lru_cache(maxsize=None)(lambda tile: tile_position(tile, tiles_m, tiles_n, group_m))
    streams = [_ticks(jobs) for jobs in unit_jobs(tiles_m * tiles_n, k_steps, units, stream_k)]
    for tick in range(max(map(len, streams), default=0)):
        for stream in streams:
            for tile, chunk in stream[tick] if tick < len(stream) else ():
                row, col = position(tile)
                load(("A", row, chunk), a_box)
                load(("B", col, chunk), b_box)
    chunks = -(-k_steps // CHUNK_STEPS)
    return missed / ((tiles_m * tile_m + tiles_n * tile_n) * chunks * CHUNK_STEPS * STEP_BYTES)


__all__ = ["CHUNK_STEPS", "STEP_BYTES", "operand_reads", "unit_jobs"]
