"""Perfetto protobuf trace for a `Trace`, built with the `perfetto` package's generated protos.

Layout: one process track per SM (named "SM n"), one thread track per recording unit
(named "block b / warpgroup u"), and each region instance as a TYPE_SLICE_BEGIN /
TYPE_SLICE_END pair of track events on its unit's thread track, timestamps in integer ns
from time 0. Region names are interned once per file (sequence-scoped `event_names`), so
a million slices do not repeat their names.

pid and tid are SM id + 1 and block * units_per_block + unit + 1: the trace processor
reserves pid/tid 0 for the idle "swapper", which would swallow SM 0 / block 0. The
track names carry the real numbers.

The file is written in chunks: a Perfetto trace is a `Trace` message whose only field is
the repeated `packet`, and concatenated serialized messages parse as one message with the
repeated fields appended, so each chunk is a separately built and serialized `Trace`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from mgpu_lab.profiler.trace import Trace, check_finite_times, unit_label

# All packets come from one writer sequence, which scopes the interned names.
SEQUENCE_ID = 1
# Track uuids only need to be unique in the file; disjoint ranges keep them readable.
PROCESS_UUID_BASE = 1 << 40
THREAD_UUID_BASE = 2 << 40
_PACKETS_PER_CHUNK = 50_000


def _perfetto_modules() -> tuple[Any, Any]:
    """(TraceProtoBuilder, perfetto_trace_pb2), or an ImportError that says what to install."""
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
        from perfetto.trace_builder.proto_builder import TraceProtoBuilder
    except ImportError as err:
        raise ImportError(
            "Perfetto export needs the `perfetto` package (with protobuf>=6.31.1): "
            "pip install 'mgpu_lab[notebook]' or pip install perfetto protobuf"
        ) from err
    return TraceProtoBuilder, perfetto_trace_pb2


class _ChunkedTrace:
    """Hands out packets from a TraceProtoBuilder, starting a new one every `limit` packets."""

    def __init__(self, builder_class: Any, limit: int) -> None:
        self._builder_class = builder_class
        self._limit = max(1, limit)
        self._builder = builder_class()
        self._count = 0
        self._finished: list[bytes] = []

    def packet(self) -> Any:
        if self._count >= self._limit:
            self._finished.append(self._builder.serialize())
            self._builder = self._builder_class()
            self._count = 0
        self._count += 1
        new = self._builder.add_packet()
        new.trusted_packet_sequence_id = SEQUENCE_ID
        return new

    def take(self) -> list[bytes]:
        """Chunks completed since the last call."""
        done, self._finished = self._finished, []
        return done

    def finish(self) -> bytes:
        return self._builder.serialize()


def perfetto_chunks(trace: Trace, packets_per_chunk: int = _PACKETS_PER_CHUNK) -> Iterator[bytes]:
    """The serialized trace in pieces; their concatenation is one Perfetto `Trace` message.

    Raises ValueError for NaN or inf times (with their count), before yielding anything."""
    check_finite_times(trace, "perfetto export")
    builder_class, pb2 = _perfetto_modules()
    slice_begin = pb2.TrackEvent.TYPE_SLICE_BEGIN
    slice_end = pb2.TrackEvent.TYPE_SLICE_END
    needs_state = pb2.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    chunks = _ChunkedTrace(builder_class, packets_per_chunk)

    # Interned names first: they reset the sequence's incremental state, which every
    # later event packet declares it needs.
    first = chunks.packet()
    first.sequence_flags = pb2.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    name_iid = _intern_names(trace, first.interned_data)

    units = trace.units_per_block
    for sm in np.unique(trace.block_sm).tolist():
        track = chunks.packet().track_descriptor
        track.uuid = PROCESS_UUID_BASE + sm
        track.process.pid = sm + 1
        track.process.process_name = f"SM {sm}"
    for block, sm in zip(trace.block_ids.tolist(), trace.block_sm.tolist(), strict=True):
        for unit in range(units):
            tid = block * units + unit
            track = chunks.packet().track_descriptor
            track.uuid = THREAD_UUID_BASE + tid
            track.parent_uuid = PROCESS_UUID_BASE + sm
            track.thread.pid = sm + 1
            track.thread.tid = tid + 1
            track.thread.thread_name = unit_label(block, unit, trace.unit_kind)
    yield from chunks.take()

    for is_begin, ts, tid, region, flags in _slice_sequence(trace):
        packet = chunks.packet()
        packet.timestamp = ts
        packet.sequence_flags = needs_state
        event = packet.track_event
        event.track_uuid = THREAD_UUID_BASE + tid
        if is_begin:
            event.type = slice_begin
            event.name_iid = name_iid[region]
            if flags:
                # Mark inferred ends so a reader does not trust the duration blindly.
                note = event.debug_annotations.add()
                note.name = "unbalanced_flags"
                note.int_value = flags
        else:
            event.type = slice_end
        yield from chunks.take()
    yield chunks.finish()


def _intern_names(trace: Trace, interned: Any) -> dict[int, int]:
    """Add one EventName per region id used or declared; return region id -> iid."""
    used = set(np.unique(trace.region).tolist()) | set(range(len(trace.region_names)))
    iids: dict[int, int] = {}
    for region in sorted(used):
        iids[region] = len(iids) + 1  # iid 0 means "not interned"
        entry = interned.event_names.add()
        entry.iid = iids[region]
        entry.name = trace.region_name(region)
    return iids


def _slice_sequence(trace: Trace) -> Iterator[tuple[bool, int, int, int, int]]:
    """(is_begin, ts, tid, region, flags) in an order that nests properly on every thread.

    Slices are visited per thread in (start, depth) order with a stack of open ones; an
    open slice is ended before the next one begins when the next is not inside it (by
    depth, or by time for traces filtered down to non-adjacent depths). A child's end is
    clamped to its parent's, and a slice overlapping its next sibling is cut at the
    sibling's start, so BEGIN/END always nest with monotone timestamps, whatever the input.
    """
    units = trace.units_per_block
    tid_column = trace.block * units + trace.unit
    order = np.lexsort((trace.depth, trace.start_ns, tid_column))
    # Perfetto timestamps are unsigned; decoded traces start at 0, hand-made ones might not.
    starts = np.maximum(np.rint(trace.start_ns[order]), 0).astype(np.int64).tolist()
    ends = np.maximum(np.rint(trace.end_ns[order]), 0).astype(np.int64).tolist()
    columns = zip(
        tid_column[order].tolist(),
        starts,
        ends,
        trace.depth[order].tolist(),
        trace.region[order].tolist(),
        trace.flags[order].tolist(),
        strict=True,
    )
    current_tid = None
    stack: list[tuple[int, int]] = []  # (end ts, depth) of open slices on current_tid
    for tid, start, end, depth, region, flags in columns:
        if tid != current_tid:
            while stack:
                yield False, stack.pop()[0], current_tid, 0, 0
            current_tid = tid
        while stack and (stack[-1][1] >= depth or stack[-1][0] <= start):
            # A slice at the same or a deeper level cannot contain this one; if it claims
            # to run past this start (inconsistent input), cut it here to keep ts monotone.
            yield False, min(stack.pop()[0], start), tid, 0, 0
        end = max(end, start)
        if stack:
            end = min(end, stack[-1][0])
        yield True, start, tid, region, flags
        stack.append((end, depth))
    while stack:
        yield False, stack.pop()[0], current_tid, 0, 0


def to_perfetto_bytes(trace: Trace) -> bytes:
    """The whole Perfetto trace as bytes (parse with perfetto_trace_pb2.Trace.FromString)."""
    return b"".join(perfetto_chunks(trace))


def save_perfetto(trace: Trace, path: str | Path) -> Path:
    """Write the Perfetto trace to `path` chunk by chunk and return the path."""
    out = Path(path)
    with out.open("wb") as f:
        for chunk in perfetto_chunks(trace):
            f.write(chunk)
    return out
