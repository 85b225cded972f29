"""Chrome trace-event JSON for a `Trace` (opens in ui.perfetto.dev and chrome://tracing).

Layout: one process per SM (pid = SM id, named "SM n") and one thread per recording unit
(tid = block * units_per_block + unit, named "block b / warpgroup u"), which is unique in
the launch because a block runs on one SM. Every region instance is one complete ("X")
event; ts and dur are microseconds (the format's unit) as floats, so nanoseconds survive.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from mgpu_lab.profiler.trace import Trace, check_finite_times, unit_label


def to_chrome_json(trace: Trace) -> dict[str, Any]:
    """The trace as a Chrome trace-event dict: {"traceEvents": [...], "displayTimeUnit": "ns"}.

    Raises ValueError for NaN or inf times (with their count): the result is always valid JSON."""
    check_finite_times(trace, "to_chrome_json")
    units = trace.units_per_block
    events: list[dict[str, Any]] = []

    for sm in np.unique(trace.block_sm).tolist():
        events.append(_metadata("process_name", sm, 0, {"name": f"SM {sm}"}))
        events.append(_metadata("process_sort_index", sm, 0, {"sort_index": sm}))
    for block, sm in zip(trace.block_ids.tolist(), trace.block_sm.tolist(), strict=True):
        for unit in range(units):
            tid = block * units + unit
            events.append(
                _metadata(
                    "thread_name", sm, tid, {"name": unit_label(block, unit, trace.unit_kind)}
                )
            )
            events.append(_metadata("thread_sort_index", sm, tid, {"sort_index": tid}))

    names = trace.region_names
    tids = (trace.block * units + trace.unit).tolist()
    # Bulk .tolist() conversions keep this loop to plain Python values (it is the hot part).
    columns = zip(
        trace.region.tolist(),
        trace.sm.tolist(),
        tids,
        (trace.start_ns / 1e3).tolist(),
        ((trace.end_ns - trace.start_ns) / 1e3).tolist(),
        trace.depth.tolist(),
        trace.flags.tolist(),
        strict=True,
    )
    for region, sm, tid, ts, dur, depth, flags in columns:
        event: dict[str, Any] = {
            "name": names[region] if 0 <= region < len(names) else trace.region_name(region),
            "ph": "X",
            "ts": ts,
            "dur": dur,
            "pid": sm,
            "tid": tid,
            "args": {"depth": depth},
        }
        if flags:
            # Say that the end was inferred, so nobody reads it as a measured duration.
            event["args"]["unbalanced_flags"] = flags
        events.append(event)

    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "kernel": trace.kernel_name,
            "unit_kind": trace.unit_kind,
            "dropped_events": trace.dropped,
            "anomalies": dict(trace.anomalies),
        },
    }


def save_chrome_json(trace: Trace, path: str | Path) -> Path:
    """Write `to_chrome_json(trace)` to `path` and return the path."""
    out = Path(path)
    document = to_chrome_json(trace)  # before opening: a refused trace leaves no empty file
    with out.open("w") as f:
        # Compact separators: traces can be large and nobody reads this file by eye.
        # allow_nan=False: never the non-JSON tokens NaN/Infinity (times are checked above; this
        # guards every other number).
        json.dump(document, f, separators=(",", ":"), allow_nan=False)
    return out


def _metadata(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}
