"""Decode the device profiler buffer (layout documented in `profiler.format`) into a `Trace`.

The work is vectorized with numpy because a launch can record millions of events: clocks
are converted for all events at once, and begin/end pairs are matched for all well-formed
units at once (see `_pair_regions`). Only units whose event stream is malformed (an end
with no open region, or an end for a region other than the innermost open one) go through
a per-event Python stack, which is also the reference for what the fast path computes.
"""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass

import numpy as np

from mgpu_lab.compiler.compiled_kernel import ProfilerSpec
from mgpu_lab.profiler import format as fmt
from mgpu_lab.profiler.trace import (
    FLAG_CLOSED_AT_BLOCK_END,
    FLAG_END_DROPPED,
    FLAG_IMPLICITLY_CLOSED,
    MAX_REGIONS,
    MAX_UNITS_PER_BLOCK,
    Trace,
)

# How far before its block's start stamp an event may read the clock (cycles: ~135 ms);
# deltas this close to 2**32 are early reads, placed at the block's start; the rest wrap
# forward (kernels up to ~2 s).
EARLY_CYCLES = 1 << 28

# Keys of `Trace.anomalies`, always all present (0 when the kind was not met):
#   unclosed           began but never ended in a unit that dropped nothing: closed at block end
#   end_dropped        still open when the unit's buffer filled up: closed at block end
#   stray_end          an end with no open region of that id: dropped
#   implicitly_closed  still open when an enclosing region ended: closed at that end
#   unknown_region     region ids beyond ProfilerSpec.region_names (kept, named "<region i>")
ANOMALY_KINDS = ("unclosed", "end_dropped", "stray_end", "implicitly_closed", "unknown_region")


class ProfilerOverflowWarning(UserWarning):
    """Some recording units tried to write more events than the buffer's capacity."""


class ProfilerAnomalyWarning(UserWarning):
    """Begin/end events did not pair up; the decoder repaired the regions it could."""


class ProfilerClockWarning(UserWarning):
    """The buffer's clocks give no cycle period; times fell back to 1 ns per cycle."""


@dataclass(frozen=True)
class _Blocks:
    """Per-row header data the event decoding needs."""

    ids: np.ndarray  # linear block id
    sm: np.ndarray
    start_ns: np.ndarray  # from time 0 (earliest block start)
    end_ns: np.ndarray
    clock_start: np.ndarray  # uint32 %clock at block start
    ns_per_cycle: float
    origin_globaltimer_ns: int


def decode_buffer(buffer: np.ndarray, spec: ProfilerSpec, kernel_name: str = "") -> Trace:
    """Turn the profiler buffer of one launch into a `Trace`.

    `buffer` is uint32 of shape (num_blocks, spec.words_per_block), or 1-D of that size.
    Raises ValueError for a buffer that does not follow the format (wrong size, bad MAGIC,
    a unit count other than the spec's). Dropped events and unbalanced regions do not
    raise: they are repaired, counted on the Trace, and reported by one warning each
    (`ProfilerOverflowWarning`, `ProfilerAnomalyWarning`).
    """
    _check_spec(spec)
    rows = _as_rows(buffer, spec)
    _check_headers(rows, spec)
    blocks = _block_times(rows)

    units, capacity = spec.units_per_block, spec.capacity
    num_blocks = rows.shape[0]
    unit_area = rows[:, fmt.BLOCK_HEADER_WORDS :].reshape(
        num_blocks, units, fmt.unit_words(capacity)
    )
    attempted = unit_area[:, :, 0].astype(np.int64)
    kept = np.minimum(attempted, capacity)
    dropped = attempted - kept

    # Flatten the kept events in (block row, unit, program order): np.nonzero walks C order.
    records = unit_area[:, :, fmt.UNIT_HEADER_WORDS :].reshape(
        num_blocks, units, capacity, fmt.EVENT_WORDS
    )
    present = np.arange(capacity) < kept[:, :, None]
    row_of, unit_of, _ = np.nonzero(present)
    tags = records[:, :, :, 0][present]
    clocks = records[:, :, :, 1][present]
    _check_region_ids(tags, row_of, unit_of)

    # uint32 subtraction wraps modulo 2**32, which is exactly the unwrap relative to the
    # block's start clock that the format asks for, except for a warp that read its first
    # marker's clock while thread 0 was still taking the start stamp: it issued the read while
    # its start barrier was still pending (BAR.SYNC blocks at a later instruction). Its region
    # cannot run before that barrier, so it begins at the block's start.
    cycles = (clocks - blocks.clock_start[row_of]).astype(np.int64)
    cycles[cycles >= (1 << 32) - EARLY_CYCLES] = 0
    cycles = cycles.astype(np.float64)
    times = blocks.start_ns[row_of] + cycles * blocks.ns_per_cycle

    paired = _pair_regions(
        unit_index=row_of.astype(np.int64) * units + unit_of,
        is_begin=(tags & fmt.BEGIN_BIT) != 0,
        region=(tags & fmt.REGION_ID_MASK).astype(np.int64),
        time=times,
        unit_end_ns=np.repeat(blocks.end_ns, units),
        unit_overflowed=(dropped > 0).reshape(-1),
    )
    anomalies = paired.anomalies
    anomalies["unknown_region"] = int(np.count_nonzero(paired.region >= len(spec.region_names)))

    rows_of_events = paired.unit_index // units
    trace = Trace(
        sm=blocks.sm[rows_of_events],
        block=blocks.ids[rows_of_events],
        unit=paired.unit_index % units,
        region=paired.region,
        start_ns=paired.start_ns,
        end_ns=paired.end_ns,
        depth=paired.depth,
        flags=paired.flags,
        region_names=spec.region_names,
        unit_kind=spec.unit,
        units_per_block=units,
        block_ids=blocks.ids,
        block_sm=blocks.sm,
        block_start_ns=blocks.start_ns,
        block_end_ns=blocks.end_ns,
        dropped_per_unit=dropped,
        anomalies=anomalies,
        kernel_name=kernel_name,
        capacity=capacity,
        ns_per_cycle=blocks.ns_per_cycle,
        origin_globaltimer_ns=blocks.origin_globaltimer_ns,
        buffer=spec.buffer,
    )
    _warn_overflow(trace, attempted)
    _warn_anomalies(trace)
    return trace


def _as_rows(buffer: np.ndarray, spec: ProfilerSpec) -> np.ndarray:
    """The buffer as a C-contiguous uint32 array of shape (num_blocks, words_per_block)."""
    if not isinstance(buffer, np.ndarray) and hasattr(buffer, "get"):
        buffer = buffer.get()  # a CuPy array: copy it to the host
    array = np.asarray(buffer)
    if array.dtype.kind not in "iu":
        raise TypeError(f"profiler buffer must be an integer array (uint32), got {array.dtype}")
    # A signed view of the same bits (int32) casts back losslessly modulo 2**32.
    array = np.ascontiguousarray(array.astype(np.uint32, copy=False))

    words = fmt.words_per_block(spec.units_per_block, spec.capacity)
    if spec.words_per_block != words:
        raise ValueError(
            f"ProfilerSpec.words_per_block is {spec.words_per_block}, but "
            f"{spec.units_per_block} units x capacity {spec.capacity} need {words} words"
        )
    if array.ndim == 1 and array.size % words == 0 and array.size > 0:
        array = array.reshape(-1, words)
    if array.ndim != 2 or array.shape[1] != words or array.shape[0] == 0:
        raise ValueError(
            f"profiler buffer has shape {array.shape}; expected (num_blocks, {words}) "
            f"or a 1-D multiple of {words} words"
        )
    return array


def _check_spec(spec: ProfilerSpec) -> None:
    """The spec's sizes within their declared ranges (a spec read from a file is input too)."""
    for field, value, low, high in (("units_per_block", spec.units_per_block, 1, MAX_UNITS_PER_BLOCK),
                                    ("capacity", spec.capacity, 1, (1 << 30) - 1),
                                    ("region_names", len(spec.region_names), 0, MAX_REGIONS)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"ProfilerSpec.{field}: expected {'a count' if field == 'region_names' else 'an int'} "
                             f"in [{low}, {high}], got {value!r}")


def _check_region_ids(tags: np.ndarray, row_of: np.ndarray, unit_of: np.ndarray) -> None:
    """Refuse a region id no kernel can declare (a corrupt tag): what names regions is sized by them."""
    region = tags & fmt.REGION_ID_MASK
    bad = np.flatnonzero(region >= MAX_REGIONS)
    if bad.size:
        first = int(bad[0])
        raise ValueError(
            f"profiler buffer block {int(row_of[first])} unit {int(unit_of[first])}: region id: expected an int in "
            f"[0, {MAX_REGIONS - 1}], got {int(region[first])}; {bad.size} events have such ids"
        )


def _check_headers(rows: np.ndarray, spec: ProfilerSpec) -> None:
    """Refuse rows that were not written by the device side (or by a different layout)."""
    bad = np.flatnonzero(rows[:, 0] != fmt.MAGIC)
    if bad.size:
        row = int(bad[0])
        found = int(rows[row, 0])
        hint = ""
        if not rows[row].any():
            hint = " (the row is all zeros: the block never wrote its profile)"
        raise ValueError(
            f"profiler buffer block {row}: expected MAGIC 0x{fmt.MAGIC:08X}, found "
            f"0x{found:08X}{hint}; {bad.size} of {rows.shape[0]} blocks have a bad MAGIC"
        )
    units = rows[:, 3]
    bad = np.flatnonzero(units != spec.units_per_block)
    if bad.size:
        row = int(bad[0])
        raise ValueError(
            f"profiler buffer block {row}: header says {int(units[row])} units per block, "
            f"ProfilerSpec says {spec.units_per_block}"
        )


def _block_times(rows: np.ndarray) -> _Blocks:
    """Block start/end in ns from time 0, and the cycle period pooled over all blocks."""
    header = rows[:, : fmt.BLOCK_HEADER_WORDS]
    timer_start = _u64(header[:, 4], header[:, 5])
    timer_end = _u64(header[:, 6], header[:, 7])
    clock_start = header[:, 8]
    clock_span = (header[:, 9] - clock_start).astype(np.int64)  # wraps modulo 2**32
    # As int64, a globaltimer that ran backwards shows up as a negative span.
    timer_span = (timer_end - timer_start).view(np.int64)

    # Pooling (sum of ns over sum of cycles) averages out the globaltimer's coarse tick,
    # which can make a short block's own span 0 or one whole tick.
    usable = (timer_span >= 0) & (clock_span > 0)
    total_ns = int(timer_span[usable].sum())
    total_cycles = int(clock_span[usable].sum())
    if total_ns > 0 and total_cycles > 0:
        ns_per_cycle = total_ns / total_cycles
    else:
        ns_per_cycle = 1.0
        warnings.warn(
            f"profiler buffer: no block has both a %globaltimer span and a %clock span "
            f"(sums: {total_ns} ns, {total_cycles} cycles), so the cycle period is unknown; "
            f"event times use 1 ns per cycle and only their order is meaningful",
            ProfilerClockWarning,
            stacklevel=3,
        )

    origin = int(timer_start.min())
    # Subtract in integers first: absolute globaltimer values (~1e18) exceed float64's
    # 53-bit mantissa, differences within a launch do not.
    start_ns = (timer_start - np.uint64(origin)).astype(np.float64)
    end_ns = start_ns + clock_span.astype(np.float64) * ns_per_cycle
    return _Blocks(
        ids=header[:, 2].astype(np.int64),
        sm=header[:, 1].astype(np.int32),
        start_ns=start_ns,
        end_ns=end_ns,
        clock_start=clock_start,
        ns_per_cycle=ns_per_cycle,
        origin_globaltimer_ns=origin,
    )


def _u64(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))


@dataclass
class _Paired:
    """Region instances (one per begin event), in (unit, begin order)."""

    unit_index: np.ndarray  # block row * units_per_block + unit
    region: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    depth: np.ndarray
    flags: np.ndarray
    anomalies: dict[str, int]


def _pair_regions(
    unit_index: np.ndarray,
    is_begin: np.ndarray,
    region: np.ndarray,
    time: np.ndarray,
    unit_end_ns: np.ndarray,
    unit_overflowed: np.ndarray,
) -> _Paired:
    """Match begin and end events per unit (inputs in unit, program order).

    Fast path, for every unit at once: the open-region count after each event (a cumulative
    sum of +1/-1 per unit) gives each event a nesting level; a begin at level L is closed
    by the next event of the same unit at level L, which must be an end. Sorting by (unit,
    level, position) puts such pairs next to each other. A unit whose count goes negative
    (an end with nothing open) or whose pairs disagree on the region id is malformed and is
    decoded again by `_pair_with_stack`, which repairs it.
    """
    n = unit_index.size
    counts: Counter[str] = Counter({kind: 0 for kind in ANOMALY_KINDS})
    if n == 0:
        return _Paired(
            unit_index=np.zeros(0, np.int64),
            region=np.zeros(0, np.int64),
            start_ns=np.zeros(0, np.float64),
            end_ns=np.zeros(0, np.float64),
            depth=np.zeros(0, np.int32),
            flags=np.zeros(0, np.uint8),
            anomalies=dict(counts),
        )

    step = np.where(is_begin, 1, -1)
    group_start = np.flatnonzero(np.r_[True, unit_index[1:] != unit_index[:-1]])
    group_len = np.diff(np.r_[group_start, n])
    group_of = np.repeat(np.arange(group_start.size), group_len)
    running = np.cumsum(step)
    open_after = running - np.repeat(running[group_start] - step[group_start], group_len)
    level = np.where(is_begin, open_after - 1, open_after)
    malformed = np.minimum.reduceat(open_after, group_start) < 0

    position = np.arange(n)
    order = np.lexsort((position, level, unit_index))
    sorted_begin = is_begin[order]
    sorted_unit = unit_index[order]
    sorted_level = level[order]
    same_slot = np.r_[
        (sorted_unit[1:] == sorted_unit[:-1]) & (sorted_level[1:] == sorted_level[:-1]), False
    ]
    closes = sorted_begin & same_slot & np.r_[~sorted_begin[1:], False]
    begin_pos = order[closes]
    end_pos = order[np.flatnonzero(closes) + 1]
    open_pos = order[sorted_begin & ~closes]
    # Defensive: in a unit that never goes negative every end is paired; check anyway.
    paired_end = np.zeros(n, dtype=bool)
    paired_end[end_pos] = True
    malformed[group_of[~is_begin & ~paired_end]] = True
    malformed[group_of[begin_pos[region[begin_pos] != region[end_pos]]]] = True

    begin_pos = begin_pos[~malformed[group_of[begin_pos]]]
    end_pos = end_pos[~malformed[group_of[end_pos]]]
    open_pos = open_pos[~malformed[group_of[open_pos]]]
    open_units = unit_index[open_pos]
    open_dropped = unit_overflowed[open_units]
    counts["end_dropped"] += int(np.count_nonzero(open_dropped))
    counts["unclosed"] += int(np.count_nonzero(~open_dropped))

    key = [begin_pos, open_pos]
    start = [time[begin_pos], time[open_pos]]
    end = [time[end_pos], unit_end_ns[open_units]]
    depth = [level[begin_pos], level[open_pos]]
    flags = [
        np.zeros(begin_pos.size, np.uint8),
        np.where(
            open_dropped, FLAG_CLOSED_AT_BLOCK_END | FLAG_END_DROPPED, FLAG_CLOSED_AT_BLOCK_END
        ),
    ]
    for group in np.flatnonzero(malformed).tolist():
        lo = int(group_start[group])
        hi = lo + int(group_len[group])
        unit = int(unit_index[lo])
        repaired = _pair_with_stack(
            first=lo,
            is_begin=is_begin[lo:hi].tolist(),
            region=region[lo:hi].tolist(),
            time=time[lo:hi].tolist(),
            unit_end_ns=float(unit_end_ns[unit]),
            overflowed=bool(unit_overflowed[unit]),
            counts=counts,
        )
        for column, values in zip((key, start, end, depth, flags), repaired, strict=True):
            column.append(np.asarray(values))

    key_all = np.concatenate(key).astype(np.int64)
    by_begin = np.argsort(key_all, kind="stable")
    return _Paired(
        unit_index=unit_index[key_all[by_begin]],
        region=region[key_all[by_begin]],
        start_ns=np.concatenate(start).astype(np.float64)[by_begin],
        end_ns=np.concatenate(end).astype(np.float64)[by_begin],
        depth=np.concatenate(depth).astype(np.int32)[by_begin],
        flags=np.concatenate(flags).astype(np.uint8)[by_begin],
        anomalies=dict(counts),
    )


def _pair_with_stack(
    first: int,
    is_begin: list[bool],
    region: list[int],
    time: list[float],
    unit_end_ns: float,
    overflowed: bool,
    counts: Counter[str],
) -> tuple[list[int], list[float], list[float], list[int], list[int]]:
    """Pair one unit's events with an explicit stack, repairing what does not nest.

    An end closes the innermost open region with its id; regions opened inside that one
    are closed at the same time (implicitly closed). An end whose id is not open at all is
    dropped. Regions still open at the end are closed at the block's end time. Returns
    columns (key = flat position of the begin, start, end, depth, flags).
    """
    keys: list[int] = []
    starts: list[float] = []
    ends: list[float] = []
    depths: list[int] = []
    flags: list[int] = []

    def close(entry: tuple[int, int, float], end: float, depth: int, flag: int) -> None:
        keys.append(entry[0])
        starts.append(entry[2])
        ends.append(end)
        depths.append(depth)
        flags.append(flag)

    stack: list[tuple[int, int, float]] = []  # (flat position, region id, start time)
    for offset, (begin, region_id, t) in enumerate(zip(is_begin, region, time, strict=True)):
        if begin:
            stack.append((first + offset, region_id, t))
            continue
        match = next((k for k in range(len(stack) - 1, -1, -1) if stack[k][1] == region_id), None)
        if match is None:
            counts["stray_end"] += 1
            continue
        while len(stack) > match + 1:
            inner = stack.pop()
            close(inner, t, len(stack), FLAG_IMPLICITLY_CLOSED)
            counts["implicitly_closed"] += 1
        close(stack.pop(), t, len(stack), 0)

    open_flag = FLAG_CLOSED_AT_BLOCK_END | (FLAG_END_DROPPED if overflowed else 0)
    while stack:
        entry = stack.pop()
        close(entry, unit_end_ns, len(stack), open_flag)
        counts["end_dropped" if overflowed else "unclosed"] += 1
    return keys, starts, ends, depths, flags


def _warn_overflow(trace: Trace, attempted: np.ndarray) -> None:
    """One warning for all dropped events, naming the capacity that would have held them."""
    lost = trace.dropped
    if not lost:
        return
    units_hit = int(np.count_nonzero(trace.dropped_per_unit))
    needed = int(attempted.max())
    kernel = f" of kernel {trace.kernel_name!r}" if trace.kernel_name else ""
    warnings.warn(
        f"profiler buffer overflow{kernel}: {lost} events were dropped in {units_hit} of "
        f"{trace.num_units} {trace.unit_kind}s (capacity {trace.capacity} events per "
        f"{trace.unit_kind}; a capacity of {needed} would have held them all). Regions "
        f"whose end was dropped are closed at their block's end and flagged.",
        ProfilerOverflowWarning,
        stacklevel=3,
    )


def _warn_anomalies(trace: Trace) -> None:
    """One warning for begin/end problems not explained by an overflow."""
    reported = {k: v for k, v in trace.anomalies.items() if v and k != "end_dropped"}
    if not reported:
        return
    kernel = f" of kernel {trace.kernel_name!r}" if trace.kernel_name else ""
    details = ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in reported.items())
    warnings.warn(
        f"profiler trace{kernel} has unbalanced regions: {details}. Unclosed regions end "
        f"at their block's end, stray ends were dropped; see Trace.anomalies and Trace.flags.",
        ProfilerAnomalyWarning,
        stacklevel=3,
    )
