"""Profiler overhead on the warp-specialized bf16 GEMM, measured in one run.

The same GEMM is built twice, with and without profiling (regions around each producer load,
each consumer wait and MMA, and the epilogue); both are timed in alternating rounds (A B B A ...)
with CUDA events (median after warm-up, rotated inputs), the SM clock and power sampled throughout. Key: profiler_overhead_ratio = profiled / plain.
Also records the per-region summary and writes a sample of the trace (the first 8 blocks) as a
Trace file next to the record (`mgpu-lab trace convert` turns it into Perfetto or Chrome JSON).

Run on a GPU machine:  python benchmarks/bench_profiler.py [--size 8192]
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

from common import GpuSampler, interleaved_rounds, table, write_record
from gemm_sweep import cupy_view as _cupy_view

from mgpu_lab.builder.dtypes import numpy_dtype
from mgpu_lab.kernels.gemm import make_gemm

ROTATE = 3  # input sets rotated between runs: 3 x 2 x 128 MiB at 8192^2 bf16 miss L2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--transpose-b", action="store_true", default=True)
    parser.add_argument("--buffer", choices=("smem", "global", "auto"), default="auto",
                        help="where the profiled build keeps its events (profile_buffer)")
    args = parser.parse_args()
    import torch

    size, bf16 = args.size, numpy_dtype("bfloat16")
    gen = torch.Generator(device="cuda").manual_seed(1)
    ta = [torch.randn((size, size), device="cuda", generator=gen).to(torch.bfloat16) for _ in range(ROTATE)]
    tb = [torch.randn((size, size), device="cuda", generator=gen).to(torch.bfloat16) for _ in range(ROTATE)]
    a_sets, b_sets = [_cupy_view(t, bf16) for t in ta], [_cupy_view(t, bf16) for t in tb]
    out = _cupy_view(torch.full((size, size), float("nan"), dtype=torch.bfloat16, device="cuda"), bf16)
    plain = make_gemm(size, size, size, transpose_b=args.transpose_b)
    profiled = make_gemm(size, size, size, transpose_b=args.transpose_b, profile=True, profile_buffer=args.buffer)

    def run(kernel):
        return lambda i: kernel(a_sets[i % ROTATE], b_sets[i % ROTATE], out=out)

    # Alternate rounds so clock or thermal drift hits both alike.
    with GpuSampler() as gpu:
        result = interleaved_rounds(run(profiled), run(plain), 6, warmup=5, iters=20)
    prof_ms, plain_ms, ratio = result.a_runs_ms, result.b_runs_ms, result.ratio
    from statistics import median

    flops = 2.0 * size ** 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = profiled.last_trace
    figures = {
        "profiler_overhead_ratio": ratio,
        f"gemm_{size}_plain_ms": median(plain_ms), f"gemm_{size}_profiled_ms": median(prof_ms),
        f"gemm_{size}_plain_tflops": flops / median(plain_ms) / 1e9,
        "trace_events": trace.num_events, "trace_dropped": trace.dropped,
        "trace_duration_ms": trace.duration_ns / 1e6,
        "trace_warnings": [str(w.message) for w in caught],
    }
    summary = str(trace.summary())
    figures["trace_summary"] = summary.splitlines()
    path = write_record("profiler", figures, notes={"order": "A B B A ... (A = profiled, B = plain)"},
                        sampler=gpu)
    # The first 8 blocks as a Trace file; `mgpu-lab trace convert` makes Perfetto/Chrome files of it.
    out_dir = Path(os.environ.get("OUT") or Path(__file__).parent / "results")
    trace.filter(block=list(range(8))).save(out_dir / f"gemm_{size}_trace_sample.npz")
    print(summary)
    print(table([("gemm", "plain ms", "profiled ms", "profiler_overhead_ratio"),
                 (f"{size}^3 bf16", f"{median(plain_ms):.3f}", f"{median(prof_ms):.3f}", f"{ratio:.4f}")]))
    print(f"record: {path}")


if __name__ == "__main__":
    main()
