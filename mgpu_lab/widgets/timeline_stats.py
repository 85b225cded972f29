"""The span of a trace that holds events: where the timeline opens.

(Region shares are not computed here: every view takes them from `profiler.summary`.)
"""

from __future__ import annotations

from typing import Any

import numpy as np


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
