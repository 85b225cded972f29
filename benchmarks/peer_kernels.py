"""Which kernels the peers run for each sweep problem: cuBLAS's torch.matmul (bf16) and cuBLASLt's
torch._scaled_mm (FP8), named as torch's profiler sees them, with their duration.

On the H200 these are nvjet kernels whose names carry the tile and k-step with the ring depth,
the cluster and the variant, e.g. `nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT` (256x128 tiles,
k-step 64 in 4 stages, 1x2 clusters), with `splitK` and a separate reduce kernel where K is
split: what to try first when a shape runs slower than the peer. Names only; nothing here is
timed against anything.

Run on a GPU machine:  python benchmarks/peer_kernels.py [--only 4096x4096x4096,...]
Writes `peer_kernels_<time>_<commit>.json` (under $OUT when set) and prints a table last.
"""

from __future__ import annotations

import argparse

from common import table, write_record
from gemm_sweep import Problem, bf16_problems, fp8_problems, operand_sets

FP8_SCALES = (0.05, 0.02)


def _kernels(run, torch) -> list[tuple[str, float]]:
    """(name, microseconds) of each GPU kernel one call of `run` launches (after a warm-up)."""
    from torch.profiler import ProfilerActivity, profile

    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return [(event.name, event.device_time) for event in prof.events()
            if event.device_type == torch.autograd.DeviceType.CUDA]


def _peer_call(dtype: str, p: Problem, torch):
    a, b = operand_sets(p, torch, torch.float8_e4m3fn if dtype == "fp8" else torch.bfloat16)[0]
    if dtype == "fp8":
        scales = tuple(torch.tensor(s, device="cuda") for s in FP8_SCALES)
        return lambda: torch._scaled_mm(a, b.t(), scale_a=scales[0], scale_b=scales[1], out_dtype=torch.bfloat16,
                                        use_fast_accum=True)
    return lambda: torch.matmul(a, b.T if p.transpose_b else b)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated problem keys, e.g. 4096x4096x4096,16x28672x4096")
    args = parser.parse_args()
    wanted = set(args.only.split(",")) if args.only else None
    figures: dict = {}
    rows = [("problem", "peer kernel", "us")]
    for dtype, problems in (("bf16", bf16_problems()), ("fp8", fp8_problems())):
        for p in problems:
            if wanted is not None and p.key not in wanted:
                continue
            tag = f"{dtype}_{p.key}{'_nt' if p.transpose_b and p.m == p.n == p.k else ''}"
            kernels = _kernels(_peer_call(dtype, p, torch), torch)
            figures[f"peer_kernels_{tag}"] = [{"name": n, "us": us} for n, us in kernels]
            rows += [(tag, n[:110], f"{us:.1f}") for n, us in kernels]
            torch.cuda.empty_cache()
    print(f"record: {write_record('peer_kernels', figures)}")
    print(table(rows))


if __name__ == "__main__":
    main()
