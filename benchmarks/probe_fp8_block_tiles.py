"""Which tilings should the block-scaled FP8 GEMM take on large shapes? A probe, GPU only.

On drawn shapes (seeds 12-13) the block-scaled kernel's large shapes ran 0.58-0.73x
`torch._scaled_mm` with the same float32 block scales, all in one-tile-per-block 128 x 128 tiles
(`block_tiles` offers the model only non-persistent tiles: persistent blocks were never measured
with this mainloop). Here each shape runs its default and the alternatives the kernel can take
(tile_n at most 128: a tile sits inside one 128-column scale block; 256 x 128 would hold two
128 x 128 f32 tiles per consumer and spill): 128 x 128 and 256 x 64 one tile per block and
persistent, 64 x 128 persistent, and 128 x 128 with `overlap_promotion` (each consumer
starts the next k block's wgmmas before it promotes this one's product). Each configuration is
checked against the dequantized f32 product (outputs poisoned), then timed against `_scaled_mm`
in interleaved rounds (gemm_fp8_random.time_fp8_problem), so every ratio has its own peer
timings beside it.

Run on a GPU machine:  python benchmarks/probe_fp8_block_tiles.py [--rounds 3] [--skinny]
Writes `gemm_fp8_block_tiles_<time>_<commit>.json` and prints a table last.
"""

from __future__ import annotations

import argparse
import time

from common import GpuSampler, table, write_record
from gemm_fp8_random import build_fp8, time_fp8_problem
from gemm_random import describe
from gemm_sweep import Problem

SEED = 0  # scales and operands: fresh per shape from this seed (time_fp8_problem's shape seed)
SHAPES = [  # the slowest large drawn shapes (seeds 12-13) and two DeepSeek-V3-like projections
    Problem(2496, 9504, 25728, True, "drawn s13 0.575x"), Problem(8552, 4096, 18944, True, "drawn s13 0.639x"),
    Problem(5596, 3696, 4096, True, "drawn s13 0.694x"), Problem(2200, 2784, 4992, True, "drawn s12 0.646x"),
    Problem(4096, 7168, 2048, True, "dsv3-like"), Problem(4096, 2112, 7168, True, "dsv3-like"),
]
CONFIGS = [
    {},  # the default
    {"tile_m": 128, "tile_n": 128, "persistent": False},
    {"tile_m": 128, "tile_n": 128, "persistent": True},
    {"tile_m": 256, "tile_n": 64, "persistent": False},
    {"tile_m": 256, "tile_n": 64, "persistent": True},
    {"tile_m": 64, "tile_n": 128, "persistent": True},
    # overlap_promotion: the next k block's wgmmas start before this one's product is promoted
    {"tile_m": 128, "tile_n": 128, "persistent": False, "overlap_promotion": True},
    {"tile_m": 128, "tile_n": 128, "persistent": True, "overlap_promotion": True},
]

# --skinny: few rows over a long K, where the drawn runs read 0.54x (4 x 4096 x 28672 in 64 x 32
# tiles): the default against narrower and wider tiles with K split over a cluster, which the
# performance model prefers there (64 x 64 in 2 slices) but which were never timed.
SKINNY_SHAPES = [
    Problem(4, 4096, 28672, True, "drawn s12 0.542x"), Problem(8, 3584, 11008, True, "llama-like"),
    Problem(16, 4096, 7168, True, "dsv3-like"), Problem(8, 912, 24704, True, "split 4 test"),
    Problem(32, 14336, 4096, True, "llama-like"), Problem(64, 7168, 2048, True, "dsv3-like"),
]
SKINNY_CONFIGS = [
    {},
    {"tile_m": 64, "tile_n": 32, "split_k": 1},
    {"tile_m": 64, "tile_n": 32, "split_k": 2},
    {"tile_m": 64, "tile_n": 64, "split_k": 1},
    {"tile_m": 64, "tile_n": 64, "split_k": 2},
    {"tile_m": 64, "tile_n": 128, "split_k": 2},
    {"tile_m": 64, "tile_n": 128, "split_k": 3},
]


def name_of(config: dict) -> str:
    if not config:
        return "default"
    return f"{config['tile_m']}x{config['tile_n']}" + ("_persistent" if config.get("persistent") else "") \
        + ("_overlap" if config.get("overlap_promotion") else "") \
        + (f"_split{config['split_k']}" if "split_k" in config else "")


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skinny", action="store_true", help="few-row shapes against split-K tilings instead")
    args = parser.parse_args()
    shapes, configs = (SKINNY_SHAPES, SKINNY_CONFIGS) if args.skinny else (SHAPES, CONFIGS)
    start = time.perf_counter()
    figures: dict = {}
    rows = [("shape", "label", "ours us", "scaled_mm us", "ratio", "peer", "config", "rel err")]
    for p in shapes:
        for config in configs:
            name = f"gemm_fp8_block_tiles_{p.key}_{name_of(config)}"
            try:
                built = build_fp8("block", p.m, p.n, p.k, True, **config)
            except ValueError as e:  # a tiling the kernel refuses for this shape
                figures[f"{name}_error"] = str(e)
                rows.append((p.key, p.label, "", "", "refused", "", name_of(config), str(e)[:40]))
                continue
            ratio = time_fp8_problem(SEED, "block", p, built, figures, rows, args.rounds, GpuSampler,
                                     options=config, name=name)
            if ratio is not None:
                rows[-1] = (*rows[-1][:6], f"{name_of(config)}: {describe(built[0])}", rows[-1][7])
            torch.cuda.empty_cache()
    notes = {"probe": "fp8 block tiles" + (" (skinny)" if args.skinny else ""), "rounds": args.rounds, "wall_s": round(time.perf_counter() - start, 1)}
    print(f"record: {write_record('gemm_fp8_block_tiles', figures, notes)}")
    print(table(rows))


if __name__ == "__main__":
    main()
