"""Tune the GEMM's tile sizes for every sweep problem on this GPU; write gemm_configs.json.

For each problem of the bf16 and FP8 sweeps (gemm_sweep.py) every (tile_m, tile_n) the kernel
supports, with one-tile blocks, (where the tiles take more than one wave) persistent and
pingpong, (where they fill fewer than the SMs over a long K) split-K, and for skinny C = A @ B.T
(m <= 256) the swapped product C.T = B @ A.T (swap_ab, A's rows as one narrow tile), is compiled in parallel on the CPU (`mgpu_lab.tuning.compile_candidates`, the tuner's compile
step, one process pool for all problems), checked against a float32 matmul,
and timed with the sweep's blocking-kernel timer. (`mgpu_lab.tune`'s own CUDA-event timing
includes the Python launch path, which is as long as a decode GEMM: it would pick at random
among the small shapes' candidates.) The fastest correct configuration of each problem goes
into mgpu_lab/kernels/gemm/configs.json under this device's name, merged with what is
there; `gemm_config` reads it, so make_gemm and the sweep use it from then on. A copy goes to
$OUT when set (commit it from there).

Run on a GPU machine:  python benchmarks/tune_gemm_configs.py [--quick] [--no-persistent] [--no-split-k] [--only MxNxK,...]
(~2 minutes)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import functools
import json
import multiprocessing
import os
import statistics
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
from common import table
from gemm_sweep import Problem, bf16_problems, blocking_timer, cupy_view, fp8_problems, iterations, operand_sets

from mgpu_lab.tuning import compile_candidates
from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.kernels.gemm.kernel import make_gemm
from mgpu_lab.kernels.gemm.tiling import MAX_SWAP_AB_ACCUMULATOR
from mgpu_lab.kernels.gemm.configs import CONFIG_FILE, SMS, device_name, shape_key
from mgpu_lab.kernels.gemm.fp8 import make_fp8_gemm
from mgpu_lab.kernels.gemm.split_k import MAX_CLUSTER_SPLIT, SPLIT_K_MIN_STEPS, even_split_k

TILES = [(128, 256), (128, 128), (256, 128), (128, 64), (256, 64), (64, 256), (64, 128), (64, 64), (64, 32)]
# B (n, k) tiles any multiple of 16 wide: fill 128 SMs with N = 6144, 10240, 28672; 128x192 makes
# 1024x6144 two even waves (cuBLAS's pick there, benchmarks/peer_kernels.py)
NT_TILES = [(64, 96), (64, 160), (64, 224), (128, 192)]
TOLERANCE = {"bfloat16": 1e-2, "float8_e4m3fn": 2e-2}
SPLITS = (2, 3, 4, 6, 8)
# raster groups of tile rows (make_gemm's group_m) where the tiles take GROUP_WAVES waves or more: a
# wave of 128x256 tiles 16 rows high is about square (less of A and B read from DRAM per wave)
GROUPS = (8, 16)
GROUP_WAVES = 4
SPLIT_WAVES = 2.1  # split-K blocks may take up to about two waves (a ragged M wastes a tile's rows anyway)


def split_choices(p: Problem, tile_m: int, tile_n: int, tile_k: int = 64) -> list[int]:
    """split_k values worth trying for these tiles (64 columns or more: the split serves the rows
    of B over K): the tiles fill fewer than the SMs, the slices take at most SPLIT_WAVES waves and keep
    SPLIT_K_MIN_STEPS k-steps each."""
    tiles = -(-p.m // tile_m) * -(-p.n // tile_n)
    k_tiles = -(-p.k // tile_k)
    if tiles >= SMS or tile_n < 64:
        return []
    return sorted({even_split_k(k_tiles, s) for s in SPLITS
                   if tiles * s <= SPLIT_WAVES * SMS and k_tiles // s >= SPLIT_K_MIN_STEPS} - {1})


def swap_choices(p: Problem, split_k: bool = True, tile_k: int = 64) -> list:
    """swap_ab choices of a skinny C = A @ B.T: C.T's tiles are tile_m rows of B by all of A's
    rows (rounded up to 8, and to 16), split over K where the tiles fill fewer than the SMs."""
    if not p.transpose_b or p.m > 256:
        return []
    k_tiles = -(-p.k // tile_k)
    choices = []
    for width in sorted({-(-p.m // 8) * 8, -(-p.m // 16) * 16}):
        for tile_m in (64, 128, 256):
            if tile_m // (2 if tile_m > 64 else 1) * width > MAX_SWAP_AB_ACCUMULATOR:  # a consumer's f32 accumulator
                continue
            tiles = -(-p.n // tile_m)
            splits = {even_split_k(k_tiles, s) for s in SPLITS if split_k and s <= MAX_CLUSTER_SPLIT
                      and tiles * s <= SPLIT_WAVES * SMS and k_tiles // s >= SPLIT_K_MIN_STEPS}
            choices += [Choice(tile_m, width, split_k=s, swap_ab=True) for s in sorted(splits | {1})]
    return choices


def space(p: Problem, persistent: bool = True, split_k: bool = True, dtype: str = "bfloat16") -> dict:
    """`Choice`s as one axis: 256-row tiles only where M has the rows, the persistent kernels (True,
    'pingpong', 'stream_k', and True / 'stream_k' in multicast pairs for 128/256-column tiles;
    unless persistent=False) only where the tiles take more than one wave, with wider raster
    groups (`GROUPS`) where they take many; split-K (unless split_k=False) where they take less,
    its slices summed in a cluster (up to 8) and, for bf16, through a workspace; swap_ab
    (`swap_choices`) for m <= 256."""
    choices = []
    big = -(-p.m // 128) * -(-p.n // 256) >= SMS  # compute-bound: small tiles only lose
    for tile_m, tile_n in TILES + (NT_TILES if p.transpose_b else []):
        if tile_m >= 2 * max(64, p.m) or big and tile_m * tile_n < 128 * 128:  # 256 rows for M = 129
            continue
        choices.append(Choice(tile_m, tile_n))
        tiles = -(-p.m // tile_m) * -(-p.n // tile_n)
        if persistent and tiles > SMS:
            stream_k = tile_m * tile_n >= 128 * 128  # the last waves' tiles split over K (gemm_stream_k.py)
            # pingpong builds where a whole tile fits one consumer
            schemes = [(True, 1), ("pingpong", 1)] + [("stream_k", 1)] * stream_k
            if tile_n in (128, 256):
                schemes += [(True, 2)] + [("stream_k", 2)] * stream_k
            groups = GROUPS if tiles >= GROUP_WAVES * SMS and tile_m * tile_n >= 128 * 192 else (8,)
            choices += [Choice(tile_m, tile_n, scheme, cluster_m=cluster_m, group_m=g)
                        for scheme, cluster_m in schemes for g in groups]
        if split_k:  # FP8: in a cluster only (its scales apply to the sums)
            reduces = ("cluster", "workspace") if dtype == "bfloat16" else ("cluster",)
            for s in split_choices(p, tile_m, tile_n, 64 if dtype == "bfloat16" else 128):
                choices += [Choice(tile_m, tile_n, split_k=s, reduce=reduce) for reduce in reduces
                            if reduce == "workspace" or s <= MAX_CLUSTER_SPLIT]
    choices += swap_choices(p, split_k, 64 if dtype == "bfloat16" else 128)
    return {"choice": choices}


ONE = "cluster"  # split_k_reduce of one-slice choices (unused)


class Choice(NamedTuple):
    """One candidate: make_gemm's tiling keywords (reduce: split_k_reduce)."""

    tile_m: int
    tile_n: int
    persistent: bool | str = False
    split_k: int = 1
    reduce: str = ONE
    cluster_m: int = 1
    swap_ab: bool = False
    group_m: int = 8


def build(dtype: str, m: int, n: int, k: int, transpose_b: bool, choice: Choice):
    """make_gemm / make_fp8_gemm with one `Choice` (picklable for the process pool; a split-K GEMM's
    worker compiles both kernels into the compile cache)."""
    tiling = choice._asdict()
    reduce = tiling.pop("reduce")
    if dtype == "float8_e4m3fn":
        return make_fp8_gemm(m, n, k, **tiling)
    return make_gemm(m, n, k, transpose_b=transpose_b, split_k_reduce=reduce, **tiling)


def time_candidates(p: Problem, dtype: str, candidates: list, torch) -> list[tuple[float, Choice, float]]:
    """(median ms, Choice, relative error) of every candidate that built and is correct, fastest first."""
    import cupy

    fp8 = dtype == "float8_e4m3fn"
    sets = operand_sets(p, torch, torch.float8_e4m3fn if fp8 else torch.bfloat16, seed=p.k)
    view_dtype = np.uint8 if fp8 else numpy_dtype("bfloat16")
    views = [(cupy_view(a, view_dtype), cupy_view(b, view_dtype)) for a, b in sets]
    scales = (cupy.asarray([1.0], np.float32), cupy.asarray([1.0], np.float32)) if fp8 else ()
    out = torch.empty((p.m, p.n), dtype=torch.bfloat16, device="cuda")
    out_view = cupy_view(out, numpy_dtype("bfloat16"))
    a0, b0 = sets[0]
    want = a0.float() @ (b0.float().T if p.transpose_b else b0.float())
    results = []
    for cand in candidates:
        if cand.status != "built":
            continue
        kern = cand.kernel  # every candidate is a Kernel, whatever its program holds
        out.fill_(float("nan"))
        kern(*views[0], *scales, out=out_view)
        err = float((out.float() - want).norm() / want.norm())
        if not err <= TOLERANCE[dtype]:
            print(f"  {p.key} {cand.config}: relative error {err:.3g}, skipped")
            continue
        n = len(views)
        runs = blocking_timer(max(3, iterations(p, 1 if fp8 else 2) // 2))(
            lambda i, kern=kern: kern.launch_unchecked(*views[i % n], *scales, out_view)).runs_ms
        results.append((statistics.median(runs), cand.config["choice"], err))
    del sets, views, want
    torch.cuda.empty_cache()
    return sorted(results, key=lambda result: result[0])  # by time only: choices mix bools and strings


SCHEMES = {False: "", True: " persistent", "pingpong": " pingpong", "stream_k": " stream-K"}


def scheme(choice: Choice) -> str:
    """' swap-AB', ' persistent', ' pingpong', ' stream-K', ' multicast', ' split-K' or '' (one-tile blocks)."""
    if choice.swap_ab:
        return " swap-AB"
    return " split-K" if choice.split_k > 1 else " multicast" if choice.cluster_m > 1 else SCHEMES[choice.persistent]


def describe(choice: Choice) -> str:
    c = choice
    return (f"{c.tile_m}x{c.tile_n}{SCHEMES[c.persistent]}" + (" swap_ab" if c.swap_ab else "")
            + (" multicast" if c.cluster_m > 1 else "") + (f" split_k={c.split_k} {c.reduce}" if c.split_k > 1 else "")
            + (f" group_m={c.group_m}" if c.group_m != 8 else ""))


def save(data: dict) -> None:
    """Write the table into the package, and a copy to $OUT when set."""
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    CONFIG_FILE.write_text(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], CONFIG_FILE.name).write_text(text)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the quick sweep's problems only")
    parser.add_argument("--no-persistent", action="store_true", help="no persistent or pingpong kernels")
    parser.add_argument("--no-split-k", action="store_true", help="no split-K GEMMs")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="time no new problem after this many seconds (what is tuned by then is kept)")
    parser.add_argument("--only", default=None, metavar="MxNxK[,MxNxK...]",
                        help="tune only these problems of the sweep (the others keep their entries)")
    args = parser.parse_args()
    device = device_name()
    work = [("bfloat16", p) for p in bf16_problems(args.quick)] + \
        [("float8_e4m3fn", p) for p in fp8_problems(args.quick)]
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {p.key for _, p in work}
        if unknown:
            parser.error(f"--only: {sorted(unknown)} are not sweep problems (see gemm_sweep.py)")
        work = [(dtype, p) for dtype, p in work if p.key in wanted]
    t0 = time.perf_counter()
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1,
                                                  mp_context=multiprocessing.get_context("spawn"))
    try:
        compiled = {(dtype, p): compile_candidates(functools.partial(build, dtype, p.m, p.n, p.k, p.transpose_b),
                                                   space(p, not args.no_persistent, not args.no_split_k, dtype),
                                                   pool) for dtype, p in work}
    finally:
        pool.shutdown()
    print(f"compiled {sum(len(c) for c in compiled.values())} candidates in {time.perf_counter() - t0:.0f} s")
    data = json.loads(CONFIG_FILE.read_text()) if CONFIG_FILE.exists() else {}
    table_for_device = data.setdefault("devices", {}).setdefault(device, {})
    data["note"] = ("GEMM tile sizes picked per device and problem by benchmarks/tune_gemm_configs.py "
                    "(fastest correct candidate, blocking-kernel CUDA-event timing); read by gemm_configs.py")
    names = [*SCHEMES.values(), " multicast", " split-K", " swap-AB"]
    rows = [("dtype", "problem", "best", "ms", "runner-up", "ms", "one-tile ms", "persistent ms", "pingpong ms",
             "stream-K ms", "multicast ms", "split-K ms", "swap-AB ms", "tried")]
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    for dtype, p in work:
        if args.budget_s is not None and time.perf_counter() - t0 > args.budget_s:
            rows.append((dtype, p.key, "skipped (time)", "", "", "", "", "", "", "", "", "", "", "0"))
            continue
        results = time_candidates(p, dtype, compiled[(dtype, p)], torch)
        if not results:
            rows.append((dtype, p.key, "none correct", "", "", "", "", "", "", "", "", "", "", "0"))
            continue
        (best_ms, best, _), *rest = results
        table_for_device[shape_key(p.m, p.n, p.k, transpose_b=p.transpose_b, dtype=dtype)] = {
            "tile_m": best.tile_m, "tile_n": best.tile_n, "group_m": best.group_m, "persistent": best.persistent,
            "split_k": best.split_k,
            **({"split_k_reduce": best.reduce} if best.split_k > 1 else {}),
            **({"cluster_m": best.cluster_m} if best.cluster_m > 1 else {}),
            **({"swap_ab": True} if best.swap_ab else {}),
            "median_ms": round(best_ms, 5), "candidates": len(results), "tuned_utc": stamp}
        runner = rest[0] if rest else None
        by_scheme = [min((ms for ms, choice, _ in results if scheme(choice) == name), default=None)
                     for name in names]
        rows.append((dtype, p.key, describe(results[0][1]), f"{best_ms:.4f}", describe(runner[1]) if runner else "",
                     f"{runner[0]:.4f}" if runner else "", *(f"{ms:.4f}" if ms else "-" for ms in by_scheme),
                     str(len(results))))
        save(data)  # after every problem: a run cut short keeps what it found
        print("  ".join(rows[-1]), flush=True)
    print(f"tuned {len(work)} problems in {time.perf_counter() - t0:.0f} s; wrote {CONFIG_FILE}")
    print(table(rows))


if __name__ == "__main__":
    main()
