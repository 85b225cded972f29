"""Profiler overhead on the warp-specialized bf16 GEMM (either B layout) or on attention, in one run.

The same kernel is built twice, with and without profiling (GEMM: regions around each producer
load, each consumer wait and MMA, and the epilogue; attention: its own regions); both are timed
in alternating rounds (A B B A ...) with CUDA events (median after warm-up, rotated inputs), the
SM clock and power sampled throughout. Key: profiler_overhead_ratio = profiled / plain, also
recorded under a key naming the kernel (e.g. `gemm_8192_nt_profiled_vs_plain`).
Also records the per-region summary and writes a sample of the trace (the first 8 blocks) as a
Trace file next to the record (`mgpu-lab trace convert` turns it into Perfetto or Chrome JSON).

Run on a GPU machine:
    python benchmarks/bench_profiler.py [--size 8192] [--no-transpose-b] [--buffer auto|smem|global]
    python benchmarks/bench_profiler.py --kernel attention [--seq 8192] [--head-dim 128] [--profile-tiles N|all]
                                        [--profile-blocks N]

Attention's one-block-per-item kernel records every tile in every 16th block by default
(make_attention's profile_blocks); `--profile-blocks 1 --profile-tiles 8` records a window of 8
K/V tiles in every block, `--profile-blocks 1 --profile-tiles all` every tile of every block.
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

from common import GpuSampler, interleaved_rounds, table, write_record
from gemm_sweep import cupy_view as _cupy_view

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.kernels.attention import make_attention
from mgpu_lab.kernels.gemm import make_gemm

ROTATE = 3  # input sets rotated between runs: 3 x 2 x 128 MiB at 8192^2 bf16 miss L2
ATTENTION_TOKENS = 16384  # batch x seq for attention: batch = tokens / seq, 16 heads


def _gemm(args, torch, gen):
    """(plain, profiled, run-maker, label, flops) for the GEMM of `args`."""
    size, bf16 = args.size, numpy_dtype("bfloat16")
    ta = [torch.randn((size, size), device="cuda", generator=gen).to(torch.bfloat16) for _ in range(ROTATE)]
    tb = [torch.randn((size, size), device="cuda", generator=gen).to(torch.bfloat16) for _ in range(ROTATE)]
    a_sets, b_sets = [_cupy_view(t, bf16) for t in ta], [_cupy_view(t, bf16) for t in tb]
    out = _cupy_view(torch.full((size, size), float("nan"), dtype=torch.bfloat16, device="cuda"), bf16)
    plain = make_gemm(size, size, size, transpose_b=args.transpose_b)
    profiled = make_gemm(size, size, size, transpose_b=args.transpose_b, profile=True, profile_buffer=args.buffer)

    def run(kernel):
        return lambda i: kernel(a_sets[i % ROTATE], b_sets[i % ROTATE], out=out)

    label = f"gemm_{size}_{'nt' if args.transpose_b else 'nn'}"
    return plain, profiled, run, label, 2.0 * size ** 3


def attention_arrays(torch, gen, batch: int, heads: int, seq: int, d: int):
    """(two sets of (q, k, v), out, lse) for attention: random bf16 inputs, NaN-poisoned outputs."""
    bf16 = numpy_dtype("bfloat16")
    sets = [[_cupy_view(torch.randn((batch, heads, seq, d), device="cuda", generator=gen).to(torch.bfloat16), bf16)
             for _ in range(3)] for _ in range(2)]
    out = _cupy_view(torch.full((batch, heads, seq, d), float("nan"), dtype=torch.bfloat16, device="cuda"), bf16)
    lse = _cupy_view(torch.full((batch, heads, seq), float("nan"), dtype=torch.float32, device="cuda"),
                     numpy_dtype("float32"))
    return sets, out, lse


def _attention(args, torch, gen):
    """(plain, profiled, run-maker, label, flops) for attention, d `args.head_dim`, seq `args.seq`."""
    seq, d, heads = args.seq, args.head_dim, 16
    batch = max(1, ATTENTION_TOKENS // seq)
    sets, out, lse = attention_arrays(torch, gen, batch, heads, seq, d)
    plain = make_attention(batch, heads, seq, seq, d)
    tiles = {} if args.profile_tiles is None else {"profile_tiles": None if args.profile_tiles == "all"
                                                   else int(args.profile_tiles)}
    if args.profile_blocks is not None:
        tiles["profile_blocks"] = args.profile_blocks
    profiled = make_attention(batch, heads, seq, seq, d, profile=True, profile_buffer=args.buffer, **tiles)

    def run(kernel):
        return lambda i: kernel(*sets[i % 2], out=(out, lse))

    return plain, profiled, run, f"attention_d{d}_s{seq}_b{batch}", 4.0 * batch * heads * seq * seq * d


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernel", choices=("gemm", "attention"), default="gemm")
    parser.add_argument("--size", type=int, default=8192, help="GEMM: m = n = k")
    parser.add_argument("--transpose-b", action=argparse.BooleanOptionalAction, default=True,
                        help="GEMM: B as (n, k) (default) or, with --no-transpose-b, (k, n)")
    parser.add_argument("--seq", type=int, default=8192, help="attention: sequence length (q and kv)")
    parser.add_argument("--head-dim", type=int, default=128, help="attention: head dimension")
    parser.add_argument("--buffer", choices=("smem", "global", "auto"), default="auto",
                        help="where the profiled build keeps its events (profile_buffer)")
    parser.add_argument("--profile-tiles", help="attention: K/V tiles recorded per work item, or 'all' "
                                                "(default: make_attention's 'auto')")
    parser.add_argument("--profile-blocks", type=int, help="attention: record regions in every n-th block "
                                                           "(default: make_attention's PROFILE_BLOCKS)")
    args = parser.parse_args()
    import torch

    gen = torch.Generator(device="cuda").manual_seed(1)
    plain, profiled, run, label, flops = (_gemm if args.kernel == "gemm" else _attention)(args, torch, gen)

    # Alternate rounds so clock or thermal drift hits both alike.
    with GpuSampler() as gpu:
        result = interleaved_rounds(run(profiled), run(plain), 6, warmup=5, iters=20)
    prof_ms, plain_ms, ratio = result.a_runs_ms, result.b_runs_ms, result.ratio
    from statistics import median

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = profiled.last_trace
    figures = {
        "profiler_overhead_ratio": ratio, f"{label}_profiled_vs_plain": ratio,
        f"{label}_plain_ms": median(plain_ms), f"{label}_profiled_ms": median(prof_ms),
        f"{label}_plain_tflops": flops / median(plain_ms) / 1e9,
        "trace_events": trace.num_events, "trace_dropped": trace.dropped,
        "trace_duration_ms": trace.duration_ns / 1e6,
        "trace_warnings": [str(w.message) for w in caught],
    }
    summary = str(trace.summary())
    figures["trace_summary"] = summary.splitlines()
    notes = {"order": "A B B A ... (A = profiled, B = plain)", "kernel": label, "profile_buffer": args.buffer,
             "profile_tiles": args.profile_tiles if args.kernel == "attention" else None,
             "profile_blocks": args.profile_blocks if args.kernel == "attention" else None,
             "profiled_config": {k: str(v) for k, v in profiled.config.items()}}
    path = write_record("profiler", figures, notes=notes, sampler=gpu)
    # The first 8 blocks as a Trace file; `mgpu-lab trace convert` makes Perfetto/Chrome files of it.
    out_dir = Path(os.environ.get("OUT") or Path(__file__).parent / "results")
    trace.filter(block=list(range(8))).save(out_dir / f"{label}_trace_sample.npz")
    print(summary)
    print(table([("kernel", "plain ms", "profiled ms", "profiler_overhead_ratio"),
                 (label, f"{median(plain_ms):.3f}", f"{median(prof_ms):.3f}", f"{ratio:.4f}")]))
    print(f"record: {path}")


if __name__ == "__main__":
    main()
