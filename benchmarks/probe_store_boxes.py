"""Do mixed-width store boxes speed up the tiles whose tile_n is no multiple of 64? A probe, GPU only.

A persistent 128 x 176 tile writes C in eleven 16-column TMA boxes (the widest power of two that
divides 176); on an H100 its epilogue took 6.9 us a tile against 2.9 for 128 x 192's three
64-column boxes (profile_gemm_2026-12-07T215321Z_271a645), and the picks of such tiles ran
0.67-0.73 of cuBLAS on short-K shapes. `MGPU_LAB_GEMM_STORE_BOXES=mixed` (pieces.store_boxes)
writes it in a 16- and five 32-column boxes instead (pingpong) or 16, 32, 64, 64 (two consumers).
This probe builds each configuration both ways in one process and times them in the same
interleaved rounds as cuBLAS and the library's default pick (bench_gemm_options.measure: outputs
poisoned, checked against an f32 matmul, then timed). cuBLAS runs 176-column tiles in pairs on
the Llama prefill's 2048x5632x2048, where our best ran 0.91-0.94 of it.

`--random N --seed S` instead times the library's own picks on shapes drawn at run time
(`bench_gemm_options.drawn_problems`, bench_gemm.py --random's distribution): each pick whose boxes
mixed would change, both ways, beside cuBLAS (`gemm_store_boxes_drawn_geomean_mixed_vs_uniform`:
what turning it on would do to the picks it touches).

Run on a GPU machine:  python benchmarks/probe_store_boxes.py [--rounds 4] [--shapes 2048x5632x2048,...]
                       python benchmarks/probe_store_boxes.py --random 64 --seed 741-750 [--budget-s 200]
Writes `gemm_options_<time>_<commit>.json` (notes: probe "store_boxes"; a configuration built
with mixed boxes is named with `_store_boxesmixed`) and prints a table last.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import bench_gemm_options
from bench_gemm_options import measure, model_pick, parse_seeds
from common import GpuSampler, parse_shapes, table, write_record
from gemm_sweep import Problem

# The Llama prefill's gate / up projection, then the short-K shapes whose 128 x 176 picks ran
# 0.67-0.73 of cuBLAS (B (n, k)), and a mid-m one.
SHAPES = "2048x5632x2048,5097x10808x264,5925x3832x320,5272x888x288,636x8896x448"
TILES = [
    {"tile_m": 128, "tile_n": 176, "persistent": "pingpong", "cluster_m": 2},
    {"tile_m": 128, "tile_n": 176, "persistent": "pingpong"},
    {"tile_m": 128, "tile_n": 160, "persistent": "pingpong", "cluster_m": 2},
    {"tile_m": 128, "tile_n": 176, "persistent": True},
]


@contextlib.contextmanager
def store_box_policy(policy: str):
    from mgpu_lab.kernels.gemm import pieces

    saved = pieces.STORE_BOXES
    pieces.STORE_BOXES = policy
    try:
        yield
    finally:
        pieces.STORE_BOXES = saved


def build(m: int, n: int, k: int, store_boxes: str | None = None, **options):
    """make_gemm under a store-box policy: how measure builds the candidates that name one."""
    from mgpu_lab.kernels.gemm import make_gemm

    with store_box_policy(store_boxes or "uniform"):
        return make_gemm(m, n, k, **options)


def candidates() -> list[dict]:
    out = []
    for tile in TILES:
        out += [dict(tile), {**tile, "store_boxes": "mixed"}]
    return out


def changed_by_mixed(p: Problem, config: dict) -> bool:
    """Whether mixed boxes change how `config` writes C on `p`."""
    from mgpu_lab.kernels.gemm import resolve_tiling

    with store_box_policy("mixed"):
        return resolve_tiling(p.m, p.n, p.k, transpose_b=p.transpose_b, **config).mixed_store_boxes


def drawn_cases(count: int, seeds: list[int]) -> tuple[list[tuple[Problem, list[dict]]], int]:
    """(problem, [its pick with mixed boxes]) for the drawn problems whose pick mixed changes
    (the pick itself runs as measure's default), and how many were drawn."""
    from bench_gemm_options import drawn_problems

    problems = drawn_problems(count, seeds)
    cases = []
    for p in problems:
        pick = model_pick(p)
        if changed_by_mixed(p, pick):
            cases.append((p, [{**pick, "store_boxes": "mixed"}]))
    return cases, len(problems)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--shapes", default=SHAPES, help="m x n x k, comma-separated (B (n, k) unless :nn)")
    parser.add_argument("--random", type=int, metavar="N", help="N shapes drawn from each --seed: the library's "
                                                                "picks that mixed boxes change, both ways")
    parser.add_argument("--seed", default="741", help="with --random: a seed, a list 741,743 or a range 741-750")
    parser.add_argument("--budget-s", type=float, help="stop starting shapes after this many seconds")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.random is not None:
        cases, drawn = drawn_cases(args.random, parse_seeds(args.seed))
    else:
        cases, drawn = [(Problem(m, n, k, t, "store_boxes"), candidates()) for m, n, k, t in parse_shapes(args.shapes)], 0
    bench_gemm_options.make_gemm = build  # measure builds each candidate through it
    figures: dict = {}
    rows = [("problem", "config", "TFLOP/s", "vs cuBLAS", "vs default")]
    with GpuSampler() as gpu:
        for p, configs in cases:
            if args.budget_s is not None and time.perf_counter() - start > args.budget_s:
                print(f"--budget-s {args.budget_s:g}: {p.key} and later problems not run", flush=True)
                break
            figures[f"gemm_options_bf16_{p.key}_transpose_b"] = p.transpose_b
            default = model_pick(p) if args.random is not None else None
            rows += measure("bf16", p, configs, args.rounds, figures, default)
            for config in configs:  # each configuration's uniform side: itself, or the default pick
                if config.get("store_boxes") != "mixed":
                    continue
                mixed = bench_gemm_options.name_of(config)
                uniform = "default" if args.random is not None else mixed.removesuffix("_store_boxesmixed")
                fast, slow = (figures.get(f"gemm_options_bf16_{p.key}_{name}_tflops") for name in (mixed, uniform))
                if fast and slow:
                    figures[f"gemm_store_boxes_{p.key}_{uniform}_mixed_vs_uniform"] = fast / slow
    ratios = [v for key, v in figures.items() if key.endswith("_mixed_vs_uniform")]
    if args.random is not None:
        figures.update(gemm_store_boxes_drawn=drawn, gemm_store_boxes_drawn_changed=len(cases),
                       gemm_store_boxes_drawn_timed=len(ratios))
        if ratios:
            figures["gemm_store_boxes_drawn_geomean_mixed_vs_uniform"] = statistics.geometric_mean(ratios)
    path = write_record("gemm_options", figures, notes={
        "probe": "store_boxes", "rounds": args.rounds, "shapes": None if args.random else args.shapes,
        "tiles": None if args.random else TILES, "random": args.random,
        "seed": args.seed if args.random is not None else None,
        "wall_s": round(time.perf_counter() - start, 1)}, sampler=gpu)
    print(f"GPU: {gpu.summary()}")
    print(f"record: {path}")
    print(table(rows))
    print(table([("problem / config", "mixed over uniform (speed)")] +
                [(key.removeprefix("gemm_store_boxes_").removesuffix("_mixed_vs_uniform"), f"{value:.3f}")
                 for key, value in figures.items() if key.endswith("_mixed_vs_uniform")]))


if __name__ == "__main__":
    main()
