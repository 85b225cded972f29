"""How many times a GEMM schedule reads A and B from DRAM: the library's own tile order and
stream-K plan, replayed on the CPU against an LRU model of L2 (`mgpu_lab.kernels.gemm.l2_replay`,
which the model's `stream_k_reads` switch reads too).

Why: on an H100 (2.97 TB/s of copy bandwidth) stream-K picks of mid-m, long-K shapes ran 0.54-0.77
of cuBLAS where the model (which counts A and B read once when tiles run side by side) expected
parity. When there are fewer tiles than units, every tile is cut into pieces that start at
different k-steps, so the units sharing a panel of B (tiles of one column) read it at different
times, and the panel falls out of L2 between them. A one-tile grid runs its wave in step and reads
each panel once.

The replay (l2_replay.py): every unit runs its jobs in the kernel's order (the stream-K plan:
whole tiles first, then its split segments, last tile first; or one whole tile per block, in waves
of `--sms` blocks), all units in step; each k-step loads the tile's A box and B box through an LRU
cache of `--l2-mb`; a miss reads the box from DRAM. Tiles are numbered as the kernel numbers them
(groups of `--group-m` tile rows).

Run (CPU only):  python benchmarks/probe_stream_k_reads.py --shapes 572x3584x28672,547x4096x28672 --tile 128x256
Prints per shape the DRAM bytes over A + B (1.0: each read once) of stream-K and of a one-tile
grid; writes `stream_k_reads_<time>_<commit>.json`.
"""

from __future__ import annotations

import argparse

from common import table, write_record

from mgpu_lab.kernels.gemm.l2_replay import operand_reads

BOX_K = 64  # bf16 elements of K per k-step (128 bytes)


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
        tiles_m, tiles_n, k_steps = -(-m // tile_m), -(-n // tile_n), -(-k // BOX_K)
        kinds = {}
        for name, stream_k in (("stream_k", True), ("one_tile", False)):
            kinds[name] = operand_reads(tiles_m, tiles_n, k_steps, tile_m, tile_n, args.group_m, args.sms, stream_k, l2)
            figures[f"stream_k_reads_{m}x{n}x{k}_{tile_m}x{tile_n}_{name}_dram_over_operands"] = kinds[name]
        rows.append((f"{m}x{n}x{k}", tiles_m * tiles_n, f"{kinds['stream_k']:.2f}", f"{kinds['one_tile']:.2f}"))
    write_record("stream_k_reads", figures, {"tile": args.tile, "group_m": args.group_m, "sms": args.sms,
                                              "l2_mb": args.l2_mb, "what": __doc__.split("\n\n")[1]})
    print(table(rows))


if __name__ == "__main__":
    main()
