"""Does a row pitch off the 128-byte line slow our GEMM's loads, and cuBLAS's? A probe, GPU only.

The random-shape records (seeds 12-14) split by whether the operands' row pitch is a multiple of
128 bytes (k % 64 for A and B (n, k), n % 64 for B (k, n), bf16): on compute-bound problems with
both rows off the line, our time over the model's grows with the tile's bytes per flop (1.1x at
128 x 256, 1.5-1.8x at 128 x 128 and 256 x 96), while aligned ones sit at 0.94-1.0. cuBLAS reads
the same memory. This probe measures the effect directly: each configuration runs on k = K0
(aligned), on K0 + 8 and K0 + 40 (rows off the line) and on K0 + 64 (aligned, the same number of
k-steps as the two before it), B (n, k); and with B (k, n) on n off the line. Every variant of a
shape runs in the same interleaved rounds as cuBLAS (bench_gemm_options.measure: outputs poisoned,
checked against an f32 matmul, then timed). The ratio that answers the question is a config's
time at K0 + 40 over its time at K0 + 64 (same k-steps, same tiles); the record also feeds
`fit_gemm_model.py` (its groups are options groups). The model says all blocks' reads off the
line are capped near 6.9 TB/s (against 16.7 on it), so a multicast pair, reading B once for two
blocks, should lose least off the line: the two cluster_m=2 rows test that. Last, the time of
copying A and B into buffers with padded rows: what padding would pay per call for an aligned
kernel.

Run on a GPU machine:  python benchmarks/probe_gemm_alignment.py [--rounds 4] [--quick]
(`MGPU_LAB_TMA_L2_PROMOTION=NONE|L2_64B|L2_128B|L2_256B` in the environment sets the TMA
descriptors' L2 promotion, recorded in the notes: whether it changes the cost off the line.)
Writes `gemm_options_<time>_<commit>.json` (notes: probe "alignment") and prints a table last.
"""

from __future__ import annotations

import argparse
import time

from bench_gemm_options import measure, name_of
from common import GpuSampler, table, write_record
from gemm_sweep import Problem

from mgpu_lab.runtime.tma_descriptor import l2_promotion

K0 = 4096
N0 = 2816
# (tile_m, tile_n, more): the tiles of the worst drawn shapes and the 128 x 256 that held up
CONFIGS_NT = [
    {"tile_m": 128, "tile_n": 128, "persistent": True},
    {"tile_m": 256, "tile_n": 96, "persistent": True},
    {"tile_m": 128, "tile_n": 192, "persistent": True},
    {"tile_m": 128, "tile_n": 256, "persistent": True},
    {"tile_m": 256, "tile_n": 128, "persistent": True, "cluster_m": 2},
    {"tile_m": 128, "tile_n": 256, "persistent": True, "cluster_m": 2},  # what the model picks off the line
    {"tile_m": 256, "tile_n": 128, "persistent": True, "cluster_n": 2},  # A shared, as cuBLAS's 256x128 1x2
    {"tile_m": 128, "tile_n": 256, "persistent": True, "cluster_n": 2},
    {"tile_m": 128, "tile_n": 128, "persistent": True, "cluster_m": 2, "cluster_n": 2},  # quads: half of A and of B
    {"tile_m": 128, "tile_n": 256, "persistent": True, "cluster_m": 2, "cluster_n": 2},
]
CONFIGS_NN = [c for c in CONFIGS_NT if c["tile_n"] in (128, 192, 256)]


def variants(quick: bool = False) -> list[tuple[str, Problem, list[dict]]]:
    """(label, problem, configs): B (n, k) with k on and off the line; B (k, n) with k, then n.
    quick: only B (n, k) at k + 40 and k + 64 (both rows off the line, then on it)."""
    if quick:
        return [(f"nt k+{dk}", Problem(2048, N0, K0 + dk, True, "alignment"), CONFIGS_NT) for dk in (40, 64)]
    out = []
    for dk in (0, 8, 40, 64):
        out.append((f"nt k+{dk}", Problem(2048, N0, K0 + dk, True, "alignment"), CONFIGS_NT))
    for dk in (0, 40, 64):  # A's rows off the line (m 2056 keeps the keys apart from the nt ones)
        out.append((f"nn k+{dk}", Problem(2056, N0, K0 + dk, False, "alignment"), CONFIGS_NN))
    for dn in (8, 40, 64):  # B's rows off the line
        out.append((f"nn n+{dn}", Problem(2056, N0 + dn, K0, False, "alignment"), CONFIGS_NN))
    return out


def pad_copy_us(p: Problem, iters: int = 20) -> float:
    """Median GPU time of copying A and B into buffers whose rows are padded to the 128-byte line
    (what a padding remedy would pay per call before an aligned kernel)."""
    import statistics

    import torch

    k_pad = -(-p.k // 64) * 64
    a = torch.randn(p.m, p.k, device="cuda").to(torch.bfloat16)
    b = torch.randn(p.n, p.k, device="cuda").to(torch.bfloat16)
    a_pad = torch.zeros(p.m, k_pad, device="cuda", dtype=torch.bfloat16)
    b_pad = torch.zeros(p.n, k_pad, device="cuda", dtype=torch.bfloat16)
    times = []
    for i in range(iters + 3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a_pad[:, :p.k].copy_(a)
        b_pad[:, :p.k].copy_(b)
        end.record()
        end.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="only B (n, k) with k off the line and on it")
    args = parser.parse_args()
    start = time.perf_counter()
    figures: dict = {}
    times: dict[tuple[str, str], float] = {}
    with GpuSampler() as gpu:
        for label, p, configs in variants(args.quick):
            figures[f"gemm_options_bf16_{p.key}_transpose_b"] = p.transpose_b
            measure("bf16", p, configs, args.rounds, figures)
            for config in [{}] + configs:
                tflops = figures.get(f"gemm_options_bf16_{p.key}_{name_of(config)}_tflops")
                if tflops:
                    times[(label, name_of(config))] = p.flops / tflops / 1e9
            times[(label, "cublas")] = p.flops / figures[f"gemm_options_bf16_{p.key}_cublas_tflops"] / 1e9
            torch.cuda.empty_cache()
    # off the line over on it, the same k-steps (K0 + 64 has as many as K0 + 8 and K0 + 40)
    rows = [("config", "nt k+8 / k+64", "nt k+40 / k+64", "nn k+40 / k+64", "nn n+8 / n+64", "nn n+40 / n+64")]
    for name in ["cublas"] + [name_of(c) for c in CONFIGS_NT]:
        cells = []
        for off, on in (("nt k+8", "nt k+64"), ("nt k+40", "nt k+64"), ("nn k+40", "nn k+64"),
                        ("nn n+8", "nn n+64"), ("nn n+40", "nn n+64")):
            if (off, name) in times and (on, name) in times:
                ratio = times[(off, name)] / times[(on, name)]
                figures[f"gemm_alignment_{name}_{off.replace(' ', '_').replace('+', 'p')}_over_aligned"] = ratio
                cells.append(f"{ratio:.3f}")
            else:
                cells.append("-")
        rows.append((name, *cells))
    if not args.quick:
        pad = pad_copy_us(Problem(2048, N0, K0 + 40, True, "alignment"))
        figures["gemm_alignment_pad_copy_us_2048x2816x4136"] = pad
        rows.append(("copy A, B to padded rows", f"{pad:.1f} us", "", "", "", ""))
    notes = {"probe": "alignment", "rounds": args.rounds, "quick": args.quick,
             "l2_promotion": l2_promotion(), "k0": K0, "n0": N0,
             "wall_s": round(time.perf_counter() - start, 1)}
    print(f"record: {write_record('gemm_options', figures, notes, sampler=gpu)}")
    print(table(rows))


if __name__ == "__main__":
    main()
