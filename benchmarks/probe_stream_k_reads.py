"""How many times a GEMM schedule reads A and B from DRAM: the library's own tile order and
stream-K plan, replayed on the CPU against an LRU model of L2.

Why: on an H100 (2.97 TB/s of copy bandwidth) stream-K picks of mid-m, long-K shapes ran 0.54-0.77
of cuBLAS where the model (which counts A and B read once when tiles run side by side) expected
parity. When there are fewer tiles than units, every tile is cut into pieces that start at
different k-steps, so the units sharing a panel of B (tiles of one column) read it at different
times, and the panel falls out of L2 between them. A one-tile grid runs its wave in step and reads
each panel once.

The replay: every unit (block) runs its jobs in the kernel's order (`StreamKPlan`: whole tiles
first, then its split segments, last tile first; or one whole tile per block, waves of `sms`
blocks), one k-step per tick, all units in step; each k-step loads the tile's A box (tile_m x 64
elements) and B box (tile_n x 64) through an LRU cache of `--l2-mb`; a miss reads the box from
DRAM. Tiles are numbered as `pieces.tile_origin` numbers them (groups of `group_m` tile rows).
Clusters are not replayed (a multicast pair shares its loads).

Run (CPU only):  python benchmarks/probe_stream_k_reads.py --shapes 572x3584x28672,547x4096x28672 --tile 128x256
Prints per shape the DRAM bytes over A + B (1.0: each read once) of stream-K and of a one-tile
grid; writes `stream_k_reads_<time>_<commit>.json`.
"""

from __future__ import annotations

import argparse
from collections import OrderedDict
from collections.abc import Iterator

from common import table, write_record

from mgpu_lab.kernels.gemm.pieces import GemmTiling, tile_origin
from mgpu_lab.kernels.gemm.stream_k import StreamKPlan

BOX_K = 64  # k elements per step (a 128-byte swizzled row of bf16)


def unit_jobs(t: GemmTiling) -> list[list[tuple[int, int, int]]]:
    """Each unit's jobs in the order it runs them, as (tile, first k-step, k-steps): stream-K's
    plan where t.persistent == "stream_k", else one whole tile per block in waves of t.sms."""
    if t.cluster_size > 1:
        raise ValueError(f"probe_stream_k_reads: clusters are not replayed; got cluster_m={t.cluster_m}, "
                         f"cluster_n={t.cluster_n}")
    if t.persistent != "stream_k":
        tiles = t.tiles_m * t.tiles_n
        return [[(tile, 0, t.k_steps) for tile in range(unit, tiles, t.sms)] for unit in range(min(t.sms, tiles))]
    plan = StreamKPlan.of(t)
    jobs = []
    for unit in range(plan.units):
        whole = [(unit + r * plan.units, 0, plan.k_steps) for r in range(plan.dp_rounds)]
        split = [(plan.dp_items + item, first, steps) for item, first, steps in plan.segments(unit)]
        jobs.append(whole + split)
    return jobs


def _steps(jobs: list[tuple[int, int, int]]) -> Iterator[tuple[int, int]]:
    for tile, first, steps in jobs:
        for k in range(first, first + steps):
            yield tile, k


def dram_reads(t: GemmTiling, l2_bytes: int, itemsize: int = 2) -> float:
    """DRAM bytes the replay of t's schedule reads, over A's and B's bytes (1.0: each once)."""
    origin = {}
    a_box, b_box = t.tile_m * BOX_K * itemsize, t.tile_n * BOX_K * itemsize
    cache: OrderedDict = OrderedDict()
    held = missed = 0

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

    streams = [_steps(jobs) for jobs in unit_jobs(t)]
    while streams:
        running = []
        for stream in streams:
            step = next(stream, None)
            if step is None:
                continue
            tile, k = step
            if tile not in origin:
                origin[tile] = tile_origin(t, tile)
            row, col = origin[tile]
            load(("A", row, k), a_box)
            load(("B", col, k), b_box)
            running.append(stream)
        streams = running
    return missed / ((t.m + t.n) * t.k_steps * BOX_K * itemsize)


def _shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shapes: expected MxNxK (e.g. 572x3584x28672), got {text!r}") from None
    return m, n, k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", required=True, type=lambda s: [_shape(x) for x in s.split(",") if x])
    parser.add_argument("--tile", default="128x256", help="tile_m x tile_n (default %(default)s)")
    parser.add_argument("--group-m", type=int, default=8)
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--l2-mb", type=float, default=50.0, help="L2 size in MiB (H100 and H200: 50)")
    args = parser.parse_args()
    tile_m, tile_n = _shape(args.tile + "x0")[:2]
    l2 = int(args.l2_mb * (1 << 20))
    figures: dict = {}
    rows = [("shape", "tiles", "stream-K: DRAM / (A + B)", "one-tile grid: DRAM / (A + B)")]
    for m, n, k in args.shapes:
        kinds = {}
        for name, persistent in (("stream_k", "stream_k"), ("one_tile", False)):
            t = GemmTiling(m, n, k, tile_m=tile_m, tile_n=tile_n, group_m=args.group_m, persistent=persistent,
                           sms=args.sms)
            kinds[name] = dram_reads(t, l2)
            figures[f"stream_k_reads_{m}x{n}x{k}_{tile_m}x{tile_n}_{name}_dram_over_operands"] = kinds[name]
        rows.append((f"{m}x{n}x{k}", t.tiles_m * t.tiles_n, f"{kinds['stream_k']:.2f}", f"{kinds['one_tile']:.2f}"))
    write_record("stream_k_reads", figures, {"tile": args.tile, "group_m": args.group_m, "sms": args.sms,
                                              "l2_mb": args.l2_mb, "what": __doc__.split("\n\n")[1]})
    print(table(rows))


if __name__ == "__main__":
    main()
