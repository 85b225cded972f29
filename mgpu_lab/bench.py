"""`mgpu_lab.bench`: time a kernel the way benchmarks should, from a notebook or a script.

    from mgpu_lab import bench
    t = bench.measure(lambda: k(a, b, out=c))              # L2 flushed before every run
    t = bench.measure(k, inputs=[(a0, b0), (a1, b1)])       # or rotate through input sets
    print(t.median_ms, t.spread)

Each run is timed alone with a pair of CUDA events on the current stream, after `warmup`
untimed runs; the figure to report is the median. Between runs either the L2 cache is
flushed (a write over a buffer twice its size, outside the timed events), so every run reads
its inputs from HBM, or the inputs rotate through sets that together exceed L2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .runtime.timing import Timing

__all__ = ["Timing", "measure"]

_H200_L2_BYTES = 60 * 1024 * 1024  # used when the device does not say


def _l2_flush_buffer() -> Any:
    import cupy

    try:
        l2 = cupy.cuda.Device().attributes["L2CacheSize"]
    except (KeyError, AttributeError):
        l2 = _H200_L2_BYTES
    return cupy.empty(2 * max(l2, 1 << 20), dtype=cupy.uint8)


def measure(fn: Callable[..., Any], *, inputs: Sequence[Sequence[Any]] | None = None,
            flush_l2: bool | None = None, warmup: int = 10, iters: int = 50) -> Timing:
    """Time `fn()` (or `fn(*inputs[i % len(inputs)])`) with CUDA events; returns per-run times.

    flush_l2: flush the L2 cache before each run (default: on unless `inputs` rotate)."""
    if inputs is not None and (isinstance(inputs, (str, bytes)) or not len(inputs)):
        raise ValueError(f"inputs: expected a non-empty sequence of argument tuples, got {inputs!r}")
    if not isinstance(warmup, int) or warmup < 0 or not isinstance(iters, int) or iters < 1:
        raise ValueError(f"warmup, iters: expected ints >= 0 and >= 1, got {warmup!r} and {iters!r}")
    import cupy

    def call(i: int) -> None:
        if inputs is None:
            fn()
        else:
            fn(*inputs[i % len(inputs)])

    flush = _l2_flush_buffer() if (flush_l2 if flush_l2 is not None else inputs is None) else None
    stream = cupy.cuda.get_current_stream()
    for i in range(warmup):
        call(i)
    starts = [cupy.cuda.Event() for _ in range(iters)]
    ends = [cupy.cuda.Event() for _ in range(iters)]
    for i in range(iters):
        if flush is not None:
            flush.fill(i & 0xFF)  # outside the events: evicts L2 before the timed run
        starts[i].record(stream)
        call(warmup + i)
        ends[i].record(stream)
    ends[-1].synchronize()
    return Timing(tuple(cupy.cuda.get_elapsed_time(s, e) for s, e in zip(starts, ends)))
