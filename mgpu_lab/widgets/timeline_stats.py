"""Region shares over the units that recorded, and the span of a trace that holds events.

`Trace.summary()` divides a region's time by every block's lifetime. A filtered trace (the
committed GEMM sample keeps 8 of 2,048 blocks) then reads 0.2% for a region that fills a
third of each recorded warpgroup's life; the viewers divide by the lifetimes of the
(block, unit) pairs that have events instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def recorded_unit_time_ns(trace: Any) -> float:
    """Sum of block lifetimes over the distinct (block, unit) pairs that recorded an event."""
    block = np.asarray(trace.block, dtype=np.int64)
    if not len(block):
        return 0.0
    unit = np.asarray(trace.unit, dtype=np.int64)
    stride = int(unit.max()) + 1
    pairs = np.unique(block * stride + unit)
    ids = np.asarray(trace.block_ids, dtype=np.int64)
    life = np.asarray(trace.block_end_ns, dtype=np.float64) - np.asarray(trace.block_start_ns, dtype=np.float64)
    order = np.argsort(ids, kind="stable")
    pos = np.clip(np.searchsorted(ids[order], pairs // stride), 0, max(len(ids) - 1, 0))
    known = ids[order][pos] == pairs // stride if len(ids) else np.zeros(len(pairs), bool)
    return float(np.sum(life[order][pos][known]))


def recorded_shares(summary: Any, trace: Any) -> list[float]:
    """Per row of `summary` (a RegionSummary): total time / time of the units that recorded."""
    unit_time = recorded_unit_time_ns(trace)
    return [float(row["total_ns"]) / unit_time if unit_time > 0 else 0.0 for row in summary.rows]


def event_span_ns(trace: Any, pad: float = 0.02) -> tuple[float, float]:
    """[first event start, last event end], padded by `pad` of its width, kept inside the kernel.

    The whole kernel when there are no events.
    """
    start = np.asarray(trace.start_ns, dtype=np.float64)
    if not len(start):
        return 0.0, max(float(trace.duration_ns), 1.0)
    t0, t1 = float(start.min()), float(np.asarray(trace.end_ns, dtype=np.float64).max())
    margin = max((t1 - t0) * pad, 1.0)
    return max(t0 - margin, 0.0), min(t1 + margin, max(float(trace.duration_ns), t1))
