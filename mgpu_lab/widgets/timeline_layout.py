"""Where each event of a `Trace` goes on the timeline: rows, nesting levels and draw order.

Rows are (SM, slot, unit): blocks that ran one after another on an SM share a slot, blocks
that overlapped on it (occupancy above one) get separate slots, and each recording unit
(warpgroup or warp) of a block has its own row inside its slot. So a launch of many waves
reads as one band per SM, and the block of each bar is in its tooltip.

Inside a row, a region at nesting depth d is drawn on level d. Events are sorted by
(row, level, start) into "lanes"; in a lane they do not overlap, which lets the browser find
the visible ones with a binary search instead of scanning a million events per frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TimelineLayout:
    """Row and lane structure plus the sorted event columns (times in ns from kernel start)."""

    row_labels: tuple[str, ...]
    row_sm: np.ndarray  # int32, per row
    row_levels: np.ndarray  # int32, nesting levels drawn in each row (at least 1)
    lane_row: np.ndarray  # uint32, per lane
    lane_level: np.ndarray  # uint32, per lane
    lane_offsets: np.ndarray  # uint32, lanes + 1: events of lane i are [off[i], off[i+1])
    lane_max_duration: np.ndarray  # float64, per lane: widest event (bounds the search)
    start_ns: np.ndarray  # float64, sorted by (row, level, start)
    end_ns: np.ndarray  # float64
    region: np.ndarray  # uint32
    block: np.ndarray  # uint32, linear block id
    flags: np.ndarray  # uint8, Trace FLAG_* bits
    block_row: np.ndarray  # uint32, first row (unit 0) of each block
    block_start_ns: np.ndarray  # float64
    block_end_ns: np.ndarray  # float64
    block_id: np.ndarray  # uint32
    units_per_block: int
    duration_ns: float

    @property
    def num_rows(self) -> int:
        """Rows of the timeline."""
        return len(self.row_labels)

    def lane_slice(self, lane: int) -> slice:
        """Index range of lane `lane` in the event columns."""
        return slice(int(self.lane_offsets[lane]), int(self.lane_offsets[lane + 1]))


def unit_abbreviation(unit_kind: str) -> str:
    """Short row-label name of a recording unit kind ("wg" for warpgroup)."""
    return "wg" if unit_kind == "warpgroup" else unit_kind


def layout_trace(trace: Any) -> TimelineLayout:
    """Lay out a `mgpu_lab.profiler.trace.Trace` (or anything with its columns)."""
    n = int(np.asarray(trace.start_ns).shape[0])
    ev_unit = np.asarray(trace.unit, dtype=np.int64)
    units = max(int(getattr(trace, "units_per_block", 1)), int(ev_unit.max()) + 1 if n else 1, 1)

    block_ids = np.asarray(trace.block_ids, dtype=np.int64)
    block_sm = np.asarray(trace.block_sm, dtype=np.int64)
    block_start = np.asarray(trace.block_start_ns, dtype=np.float64)
    block_end = np.asarray(trace.block_end_ns, dtype=np.float64)
    block_slot = _assign_slots(block_sm, block_start, block_end)

    # Each event's block position, to find its slot; events of unknown blocks take slot 0.
    ev_block = np.asarray(trace.block, dtype=np.int64)
    ev_sm = np.asarray(trace.sm, dtype=np.int64)
    ev_slot = np.zeros(n, dtype=np.int64)
    if len(block_ids) and n:
        order = np.argsort(block_ids, kind="stable")
        pos = np.clip(np.searchsorted(block_ids[order], ev_block), 0, len(block_ids) - 1)
        found = block_ids[order][pos] == ev_block
        ev_slot[found] = block_slot[order][pos][found]

    # (sm, slot) bands, in SM then slot order; a band has `units` rows.
    # One integer key per (sm, slot): a 1-D unique is far faster than unique rows.
    sm_all = np.concatenate([block_sm, ev_sm])
    slot_all = np.concatenate([block_slot, ev_slot])
    stride = int(slot_all.max()) + 1 if len(slot_all) else 1
    keys, band = np.unique(sm_all * stride + slot_all, return_inverse=True)
    band = band.reshape(-1)
    pairs = np.stack([keys // stride, keys % stride], 1)
    block_band, ev_band = band[: len(block_ids)], band[len(block_ids) :]
    slots_on_sm: dict[int, int] = {}
    for sm, slot in pairs.tolist():
        slots_on_sm[sm] = max(slots_on_sm.get(sm, 0), slot + 1)

    unit_name = unit_abbreviation(getattr(trace, "unit_kind", "warpgroup"))
    labels = []
    for sm, slot in pairs.tolist():
        slot_text = f" #{slot}" if slots_on_sm[sm] > 1 else ""
        labels += [f"SM {sm}{slot_text} {unit_name} {u}" for u in range(units)]
    row_sm = np.repeat(pairs[:, 0], units).astype(np.int32) if len(pairs) else np.zeros(0, np.int32)

    ev_row = ev_band * units + ev_unit
    ev_level = np.asarray(trace.depth, dtype=np.int64)

    order = np.lexsort((np.asarray(trace.start_ns), ev_level, ev_row))
    start = np.asarray(trace.start_ns, dtype=np.float64)[order]
    end = np.asarray(trace.end_ns, dtype=np.float64)[order]
    row_sorted, level_sorted = ev_row[order], ev_level[order]

    num_rows = len(labels)
    row_levels = np.ones(num_rows, dtype=np.int32)
    if n:
        np.maximum.at(row_levels, row_sorted, (level_sorted + 1).astype(np.int32))

    # Lanes: runs of equal (row, level) in the sorted order.
    if n:
        boundary = np.flatnonzero((np.diff(row_sorted) != 0) | (np.diff(level_sorted) != 0)) + 1
        firsts = np.concatenate([[0], boundary])
        offsets = np.concatenate([firsts, [n]]).astype(np.uint32)
        lane_max = np.maximum.reduceat(end - start, firsts)
    else:
        firsts = np.zeros(0, dtype=np.int64)
        offsets = np.zeros(1, dtype=np.uint32)
        lane_max = np.zeros(0, dtype=np.float64)

    flags = getattr(trace, "flags", None)
    return TimelineLayout(
        row_labels=tuple(labels),
        row_sm=row_sm,
        row_levels=row_levels,
        lane_row=row_sorted[firsts].astype(np.uint32),
        lane_level=level_sorted[firsts].astype(np.uint32),
        lane_offsets=offsets,
        lane_max_duration=lane_max.astype(np.float64),
        start_ns=start,
        end_ns=end,
        region=np.asarray(trace.region, dtype=np.uint32)[order],
        block=ev_block[order].astype(np.uint32),
        flags=(np.zeros(n, np.uint8) if flags is None else np.asarray(flags, np.uint8)[order]),
        block_row=(block_band * units).astype(np.uint32),
        block_start_ns=block_start,
        block_end_ns=block_end,
        block_id=block_ids.astype(np.uint32),
        units_per_block=units,
        duration_ns=float(trace.duration_ns),
    )


def _assign_slots(sm: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per block, the lowest slot on its SM free at its start (greedy interval colouring).

    Taken in start order, a free slot always exists among those already opened or a new
    one, and this uses as few slots as the most blocks ever resident at once.
    """
    slot = np.zeros(len(sm), dtype=np.int64)
    slot_ends: dict[int, list[float]] = {}
    for i in np.lexsort((start, sm)).tolist():
        ends = slot_ends.setdefault(int(sm[i]), [])
        for k, busy_until in enumerate(ends):
            if busy_until <= start[i]:
                ends[k] = float(end[i])
                slot[i] = k
                break
        else:
            slot[i] = len(ends)
            ends.append(float(end[i]))
    return slot
