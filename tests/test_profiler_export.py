"""Chrome JSON and Perfetto protobuf exports of a profiler Trace."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from mgpu_lab.profiler.chrome_export import to_chrome_json
from mgpu_lab.profiler.perfetto_export import perfetto_chunks, to_perfetto_bytes
from mgpu_lab.profiler.trace import FLAG_CLOSED_AT_BLOCK_END, Trace


def perfetto_protos():
    """The perfetto package's generated protos; only the Perfetto tests need them."""
    return pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")


def make_trace() -> Trace:
    """Two blocks on SMs 4 and 0, two warpgroups each; nested regions on block 0 / wg 0.

    Block 0 (SM 4), wg 0:  load [0, 1000] > mma [100, 400] > store [200, 300]; mma [500, 900]
    Block 0 (SM 4), wg 1:  store [10.5, 20.25] (ends inferred: closed at block end)
    Block 1 (SM 0), wg 0:  load [2000, 2600]
    """
    return Trace(
        sm=[4, 4, 4, 4, 4, 0],
        block=[0, 0, 0, 0, 0, 1],
        unit=[0, 0, 0, 0, 1, 0],
        region=[0, 1, 2, 1, 2, 0],
        start_ns=[0.0, 100.0, 200.0, 500.0, 10.5, 2000.0],
        end_ns=[1000.0, 400.0, 300.0, 900.0, 20.25, 2600.0],
        depth=[0, 1, 2, 1, 0, 0],
        flags=[0, 0, 0, 0, FLAG_CLOSED_AT_BLOCK_END, 0],
        region_names=("load", "mma", "store"),
        unit_kind="warpgroup",
        units_per_block=2,
        block_ids=[0, 1],
        block_sm=[4, 0],
        block_start_ns=[0.0, 1900.0],
        block_end_ns=[1000.0, 2700.0],
        kernel_name="gemm",
    )


def test_chrome_json_structure(tmp_path) -> None:
    trace = make_trace()
    data = to_chrome_json(trace)
    assert data["displayTimeUnit"] == "ns"
    events = data["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == trace.num_events

    load = complete[0]
    assert load["name"] == "load" and load["pid"] == 4 and load["tid"] == 0
    assert isinstance(load["ts"], float) and load["ts"] == 0.0 and load["dur"] == pytest.approx(1.0)
    inferred = complete[4]
    assert inferred["tid"] == 1 and inferred["ts"] == pytest.approx(0.0105)
    assert inferred["dur"] == pytest.approx(0.00975)
    assert inferred["args"]["unbalanced_flags"] == FLAG_CLOSED_AT_BLOCK_END
    assert complete[5]["pid"] == 0 and complete[5]["tid"] == 2  # block 1 * 2 units + unit 0

    meta = [e for e in events if e["ph"] == "M"]
    processes = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert processes == {0: "SM 0", 4: "SM 4"}
    assert threads == {
        (4, 0): "block 0 / warpgroup 0",
        (4, 1): "block 0 / warpgroup 1",
        (0, 2): "block 1 / warpgroup 0",
        (0, 3): "block 1 / warpgroup 1",
    }
    # The file is plain JSON with the same content.
    path = trace.save_chrome_json(tmp_path / "t.json")
    assert json.loads(path.read_text()) == json.loads(json.dumps(data))
    assert trace.to_chrome_json() == data


def _parse(data: bytes):
    parsed = perfetto_protos().Trace.FromString(data)
    packets = list(parsed.packet)
    assert packets, "empty trace"
    return packets


def test_perfetto_tracks_and_nested_slices(tmp_path) -> None:
    pb2 = perfetto_protos()
    trace = make_trace()
    path = trace.save_perfetto(tmp_path / "t.pftrace")
    packets = _parse(path.read_bytes())
    assert all(
        p.trusted_packet_sequence_id == packets[0].trusted_packet_sequence_id for p in packets
    )
    assert packets[0].sequence_flags & pb2.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    names = {n.iid: n.name for p in packets for n in p.interned_data.event_names}
    assert sorted(names.values()) == ["load", "mma", "store"]

    descriptors = [p.track_descriptor for p in packets if p.HasField("track_descriptor")]
    process_tracks = {d.uuid: d.process for d in descriptors if d.HasField("process")}
    thread_tracks = {d.uuid: d for d in descriptors if d.HasField("thread")}
    assert sorted(p.process_name for p in process_tracks.values()) == ["SM 0", "SM 4"]
    assert {d.thread.thread_name for d in thread_tracks.values()} == {
        "block 0 / warpgroup 0",
        "block 0 / warpgroup 1",
        "block 1 / warpgroup 0",
        "block 1 / warpgroup 1",
    }
    for d in thread_tracks.values():  # each thread sits in its SM's process
        parent = process_tracks[d.parent_uuid]
        assert parent.pid == d.thread.pid
        assert parent.process_name == f"SM {d.thread.pid - 1}"

    # Replay the BEGIN/END stream per track: it must nest, with monotone timestamps.
    begin, end = pb2.TrackEvent.TYPE_SLICE_BEGIN, pb2.TrackEvent.TYPE_SLICE_END
    last_ts: dict[int, int] = defaultdict(int)
    slices: dict[str, list[tuple[str, int, int, int]]] = defaultdict(
        list
    )  # thread -> (name, depth, ts, ts_end)
    open_at: dict[int, list[tuple[str, int]]] = defaultdict(list)
    counts = {begin: 0, end: 0}
    for p in packets:
        if not p.HasField("track_event"):
            continue
        event = p.track_event
        assert p.sequence_flags & pb2.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        track = event.track_uuid
        assert track in thread_tracks
        assert p.timestamp >= last_ts[track]
        last_ts[track] = p.timestamp
        counts[event.type] += 1
        if event.type == begin:
            open_at[track].append((names[event.name_iid], p.timestamp))
        else:
            assert event.type == end and open_at[track], "END without BEGIN"
            name, start = open_at[track].pop()
            thread = thread_tracks[track].thread.thread_name
            slices[thread].append((name, len(open_at[track]), start, p.timestamp))
    assert all(not stack for stack in open_at.values()), "BEGIN without END"
    assert counts[begin] == counts[end] == trace.num_events
    assert sorted(slices["block 0 / warpgroup 0"], key=lambda s: s[2]) == [
        ("load", 0, 0, 1000),
        ("mma", 1, 100, 400),
        ("store", 2, 200, 300),
        ("mma", 1, 500, 900),
    ]
    assert slices["block 0 / warpgroup 1"] == [("store", 0, 10, 20)]  # rounded to ns
    assert slices["block 1 / warpgroup 0"] == [("load", 0, 2000, 2600)]
    assert "block 1 / warpgroup 1" not in slices


def test_perfetto_chunks_concatenate_to_one_trace() -> None:
    pb2 = perfetto_protos()
    trace = make_trace()
    whole = to_perfetto_bytes(trace)
    chunks = list(perfetto_chunks(trace, packets_per_chunk=3))
    assert len(chunks) > 3
    assert b"".join(chunks) == whole
    one = pb2.Trace.FromString(whole)
    assert len(one.packet) == 1 + 2 + 4 + 2 * trace.num_events  # names, SMs, units, slices


def test_perfetto_nests_filtered_and_inconsistent_traces() -> None:
    """Filtered traces skip depths, hand-made ones may overlap: the output still nests."""
    pb2 = perfetto_protos()
    trace = Trace(
        sm=[0, 0, 0, 0, 0],
        block=[0, 0, 0, 0, 0],
        unit=[0, 0, 0, 1, 1],
        region=[0, 2, 1, 0, 1],
        # Unit 0: depth-2 'store' starts after 'load' ended (its parent was filtered out),
        # then 'mma' (depth 1) starts while 'store' still runs. Unit 1: a child outlives
        # its parent.
        start_ns=[0.0, 20.0, 50.0, 0.0, 10.0],
        end_ns=[10.0, 60.0, 70.0, 100.0, 150.0],
        depth=[0, 2, 1, 0, 1],
        region_names=("load", "mma", "store"),
        unit_kind="warp",
        units_per_block=2,
        block_ids=[0],
        block_sm=[0],
        block_start_ns=[0.0],
        block_end_ns=[200.0],
    )
    stacks: dict[int, list[int]] = defaultdict(list)
    seen: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for p in _parse(to_perfetto_bytes(trace)):
        if p.HasField("track_event"):
            stack = stacks[p.track_event.track_uuid]
            if p.track_event.type == pb2.TrackEvent.TYPE_SLICE_BEGIN:
                stack.append(p.timestamp)
            else:
                seen[p.track_event.track_uuid].append((stack.pop(), p.timestamp, len(stack)))
    assert not any(stacks.values())
    unit0, unit1 = (sorted(v) for _, v in sorted(seen.items()))
    # mma (depth 1) cannot sit inside store (depth 2): store is cut where mma begins.
    assert unit0 == [(0, 10, 0), (20, 50, 0), (50, 70, 0)]
    # The child is clamped to its parent's end.
    assert unit1 == [(0, 100, 0), (10, 100, 1)]


def test_export_of_empty_trace() -> None:
    trace = make_trace().filter(region=[])
    assert trace.num_events == 0
    assert [e for e in to_chrome_json(trace)["traceEvents"] if e["ph"] == "X"] == []
    packets = _parse(to_perfetto_bytes(trace))
    assert not any(p.HasField("track_event") for p in packets)
    assert np.isclose(trace.duration_ns, 2700.0)
