"""Launch overhead of a checked call against CuPy's RawKernel, interleaved in rounds.

Both launch a vector add of 4096 float32 with the output passed in; each round times a batch
of host calls of one side, the order alternating (A B B A ...) so clock and cache drift hit
both alike. Figures are medians over rounds of microseconds per call; the ratio is ours /
RawKernel (lower is better, goal <= 1). Also recorded: `launch_unchecked`, the checks alone,
and the allocating call against RawKernel + cupy.empty.

Run on a GPU machine:  python benchmarks/bench_launch.py [--rounds 8] [--calls 4000]
Writes benchmarks/results/launch_<date>.json (or $OUT/) and prints a table last.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import table, write_record  # noqa: E402

from mgpu_lab.examples.vector_add import make_vector_add  # noqa: E402

RAW_VECTOR_ADD = r"""
extern "C" __global__ void vadd(const float4* a, const float4* b, float4* out, unsigned n4) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) { float4 x = a[i], y = b[i]; out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
}
"""
N = 1 << 12


def gpu_state() -> dict:
    """SM clock (MHz) and power (W) now, beside the figures."""
    try:
        from common import gpu_snapshot  # the shared sampler, where benchmarks/common.py has it

        return gpu_snapshot()
    except ImportError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                              "-i", "0"], capture_output=True, text=True, timeout=10).stdout.strip()
        sm, power = (float(v) for v in out.split(",")[:2])
        return {"sm_clock_mhz": sm, "power_w": power}
    except Exception as e:  # noqa: BLE001 - the figures stand without it
        return {"gpu_state_error": str(e)}


def per_call_us(fn, calls: int) -> float:
    import cupy

    stream = cupy.cuda.get_current_stream()
    stream.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - t0
    stream.synchronize()
    return elapsed * 1e6 / calls


def interleaved(sides: dict, rounds: int, calls: int) -> dict[str, list[float]]:
    """Per-round microseconds per call of each side; the order reverses every round."""
    for fn in sides.values():  # warm-up: module loads, caches, CuPy's kernel cache
        per_call_us(fn, 200)
    names = list(sides)
    runs: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            runs[name].append(per_call_us(sides[name], calls))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=4000)
    opts = parser.parse_args()
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

    launcher, device = ours._launcher, cupy.cuda.runtime.getDevice()
    sides = {
        "ours_checked": lambda: ours(a, b, out=out),
        "rawkernel": lambda: raw(grid, (256,), (a, b, out_raw, n4)),
        "ours_unchecked": lambda: ours.launch_unchecked(a, b, out),
        "ours_checks_only": lambda: launcher.checked((a, b), out, device),
        "ours_allocating": lambda: ours(a, b),
        "rawkernel_allocating": lambda: raw(grid, (256,), (a, b, cupy.empty_like(a), n4)),
    }
    state_before = gpu_state()
    runs = interleaved(sides, opts.rounds, opts.calls)
    state_after = gpu_state()
    med = {name: statistics.median(v) for name, v in runs.items()}
    ratios = [o / r for o, r in zip(runs["ours_checked"], runs["rawkernel"])]
    figures = {
        "launch_us_ours_checked": med["ours_checked"], "launch_us_rawkernel": med["rawkernel"],
        "launch_checked_vs_rawkernel": med["ours_checked"] / med["rawkernel"],
        "launch_checked_vs_rawkernel_per_round_max": max(ratios),
        "launch_us_ours_unchecked": med["ours_unchecked"],
        "launch_unchecked_vs_rawkernel": med["ours_unchecked"] / med["rawkernel"],
        "launch_us_ours_checks_only": med["ours_checks_only"],
        "launch_us_ours_allocating": med["ours_allocating"], "launch_us_rawkernel_allocating": med["rawkernel_allocating"],
        "launch_allocating_vs_rawkernel_allocating": med["ours_allocating"] / med["rawkernel_allocating"],
    }
    path = write_record("launch", figures, notes={"rounds": opts.rounds, "calls_per_round": opts.calls,
                                                  "runs_us": runs, "gpu_before": state_before,
                                                  "gpu_after": state_after})
    rows = [("launch (us per call)", "ours", "RawKernel", "ratio")]
    rows.append(("checked, out= passed", f"{med['ours_checked']:.2f}", f"{med['rawkernel']:.2f}",
                 f"{figures['launch_checked_vs_rawkernel']:.3f}"))
    rows.append(("launch_unchecked", f"{med['ours_unchecked']:.2f}", f"{med['rawkernel']:.2f}",
                 f"{figures['launch_unchecked_vs_rawkernel']:.3f}"))
    rows.append(("output allocated", f"{med['ours_allocating']:.2f}", f"{med['rawkernel_allocating']:.2f}",
                 f"{figures['launch_allocating_vs_rawkernel_allocating']:.3f}"))
    rows.append(("checks alone", f"{med['ours_checks_only']:.2f}", "-", "-"))
    print(f"GPU {state_before} -> {state_after}")
    print(f"record: {path}")
    print(table(rows))


if __name__ == "__main__":
    main()
