"""Device timing with CUDA events: warm-up, then the median of many timed runs."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """Per-run milliseconds of a timed function; `median_ms` is the figure to report."""

    runs_ms: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.runs_ms)

    @property
    def min_ms(self) -> float:
        return min(self.runs_ms)

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: how noisy the runs were."""
        s = sorted(self.runs_ms)
        p10, p90 = s[len(s) // 10], s[(len(s) * 9) // 10]
        return (p90 - p10) / self.median_ms


def time_cuda(fn: Callable[[int], object], *, warmup: int = 10, iters: int = 50) -> Timing:
    """Time `fn(i)` (i = run index, for rotating inputs) with CUDA events on the current stream."""
    import cupy

    for i in range(warmup):
        fn(i)
    stream = cupy.cuda.get_current_stream()
    starts = [cupy.cuda.Event() for _ in range(iters)]
    ends = [cupy.cuda.Event() for _ in range(iters)]
    for i in range(iters):
        starts[i].record(stream)
        fn(warmup + i)
        ends[i].record(stream)
    ends[-1].synchronize()
    return Timing(tuple(cupy.cuda.get_elapsed_time(s, e) for s, e in zip(starts, ends)))


def time_host_calls(fn: Callable[[], object], *, calls: int = 2000, repeats: int = 7) -> Timing:
    """Host-side microseconds per call of `fn` (launch overhead), median over `repeats` batches.

    Returned in ms per call like `time_cuda`, so the two compose."""
    import cupy

    for _ in range(100):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    per_call = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t0) * 1e3 / calls)
        cupy.cuda.get_current_stream().synchronize()
    return Timing(tuple(per_call))
