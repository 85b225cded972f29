"""Launch overhead of a checked call against CuPy's RawKernel, interleaved in rounds.

Both launch a vector add of 4096 float32 with the output passed in; each round times a batch
of host calls of one side, the order alternating (A B B A ..., `common.interleaved_rounds`)
so clock and cache drift hit both alike. Figures are medians over rounds of microseconds per
call; the ratio is ours / RawKernel (lower is better, goal <= 1). Also recorded:
`launch_unchecked` and the allocating call against RawKernel (+ cupy.empty), each interleaved
with RawKernel the same way, and the checks alone. SM clock and power are sampled throughout.

Run on a GPU machine:  python benchmarks/bench_launch.py [--rounds 8] [--calls 4000]
Writes benchmarks/results/launch_<date>.json (or $OUT/) and prints a table last.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parent.parent))  # this checkout's mgpu_lab, also without PYTHONPATH
from common import GpuSampler, interleaved_rounds, table, write_record  # noqa: E402

from mgpu_lab.examples.vector_add import make_vector_add  # noqa: E402
from mgpu_lab.runtime.timing import time_host_calls  # noqa: E402

RAW_VECTOR_ADD = r"""
extern "C" __global__ void vadd(const float4* a, const float4* b, float4* out, unsigned n4) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) { float4 x = a[i], y = b[i]; out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
}
"""
N = 1 << 12


def host_timer(calls: int):
    """interleaved_rounds' timer: one block of `calls` host calls, in ms per call."""
    return lambda fn: time_host_calls(lambda: fn(0), calls=calls, repeats=1)


def vector_add_pair() -> tuple:
    """Our vector add and CuPy RawKernel's on the same fresh inputs, outputs NaN-poisoned and
    checked to agree: (ours, raw, a, b, out, out_raw, grid, n4)."""
    import cupy

    ours = make_vector_add(N)
    raw = cupy.RawKernel(RAW_VECTOR_ADD, "vadd")
    rng = np.random.default_rng(0)
    a, b = (cupy.asarray(rng.standard_normal(N, dtype=np.float32)) for _ in range(2))
    out, out_raw = cupy.full_like(a, np.nan), cupy.full_like(a, np.nan)
    grid, n4 = ((N // 4 + 255) // 256,), np.uint32(N // 4)
    ours(a, b, out=out)
    raw(grid, (256,), (a, b, out_raw, n4))
    assert cupy.array_equal(out, out_raw) and not bool(cupy.isnan(out).any()), "the two kernels disagree"
    return ours, raw, a, b, out, out_raw, grid, n4


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=4000)
    opts = parser.parse_args()
    import cupy

    ours, raw, a, b, out, out_raw, grid, n4 = vector_add_pair()
    launcher, device = ours.launcher.checker, cupy.cuda.runtime.getDevice()
    timer = host_timer(opts.calls)

    with GpuSampler() as gpu:
        checked = interleaved_rounds(lambda i: ours(a, b, out=out), lambda i: raw(grid, (256,), (a, b, out_raw, n4)),
                                     opts.rounds, timer=timer)
        unchecked = interleaved_rounds(lambda i: ours.launch_unchecked(a, b, out),
                                       lambda i: raw(grid, (256,), (a, b, out_raw, n4)), opts.rounds, timer=timer)
        allocating = interleaved_rounds(lambda i: ours(a, b),
                                        lambda i: raw(grid, (256,), (a, b, cupy.empty_like(a), n4)),
                                        opts.rounds, timer=timer)
        checks_only = time_host_calls(lambda: launcher.checked((a, b), out, device), calls=opts.calls).median_ms
    us = 1e3
    figures = {
        "launch_us_ours_checked": checked.a_ms * us, "launch_us_rawkernel": checked.b_ms * us,
        "launch_checked_vs_rawkernel": checked.ratio,
        "launch_us_ours_unchecked": unchecked.a_ms * us, "launch_unchecked_vs_rawkernel": unchecked.ratio,
        "launch_us_ours_allocating": allocating.a_ms * us,
        "launch_us_rawkernel_allocating": allocating.b_ms * us,
        "launch_allocating_vs_rawkernel_allocating": allocating.ratio,
        "launch_us_ours_checks_only": checks_only * us,
    }
    runs = {name: {"ours_ms": r.a_runs_ms, "rawkernel_ms": r.b_runs_ms, "order": r.order}
            for name, r in (("checked", checked), ("unchecked", unchecked), ("allocating", allocating))}
    path = write_record("launch", figures, notes={"rounds": opts.rounds, "calls_per_block": opts.calls,
                                                  "runs": runs}, sampler=gpu)
    rows = [("launch (us per call)", "ours", "RawKernel", "ratio")]
    for label, r in (("checked, out= passed", checked), ("launch_unchecked", unchecked),
                     ("output allocated", allocating)):
        rows.append((label, f"{r.a_ms * us:.2f}", f"{r.b_ms * us:.2f}", f"{r.ratio:.3f}"))
    rows.append(("checks alone", f"{checks_only * us:.2f}", "-", "-"))
    print(f"GPU: {gpu.summary()}")
    print(f"record: {path}")
    print(table(rows))


if __name__ == "__main__":
    main()
