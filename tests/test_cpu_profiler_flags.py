"""Inferred ends stay marked in every export: Perfetto's debug annotation and Chrome's args.

A region whose end was not measured (closed at its block's end, end dropped by an overflow,
closed implicitly by an enclosing end) must say so, or a reader trusts an invented duration.
"""

from __future__ import annotations

import pytest

from mgpu_lab.profiler.chrome_export import to_chrome_json
from mgpu_lab.profiler.perfetto_export import to_perfetto_bytes
from mgpu_lab.profiler.trace import FLAG_CLOSED_AT_BLOCK_END, FLAG_END_DROPPED, FLAG_IMPLICITLY_CLOSED, Trace

FLAGS = [0, FLAG_CLOSED_AT_BLOCK_END, FLAG_CLOSED_AT_BLOCK_END | FLAG_END_DROPPED, FLAG_IMPLICITLY_CLOSED, 0]


def flagged_trace() -> Trace:
    """One block, two warpgroups; each event a different region so slices are told apart by name."""
    return Trace(
        sm=[1, 1, 1, 1, 1], block=[0, 0, 0, 0, 0], unit=[0, 0, 1, 1, 1],
        region=[0, 1, 2, 3, 4],
        start_ns=[0.0, 10.0, 0.0, 5.0, 50.0], end_ns=[9.0, 100.0, 100.0, 40.0, 60.0],
        depth=[0, 0, 0, 1, 1], flags=FLAGS,
        region_names=("measured", "closed_at_end", "end_dropped", "implicit", "measured_too"),
        unit_kind="warpgroup", units_per_block=2, block_ids=[0], block_sm=[1],
        block_start_ns=[0.0], block_end_ns=[100.0], kernel_name="k",
    )


def test_perfetto_marks_every_inferred_end_and_nothing_else():
    pb2 = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    packets = list(pb2.Trace.FromString(to_perfetto_bytes(flagged_trace())).packet)
    names = {n.iid: n.name for p in packets for n in p.interned_data.event_names}
    begins = [p.track_event for p in packets
              if p.HasField("track_event") and p.track_event.type == pb2.TrackEvent.TYPE_SLICE_BEGIN]
    notes = {names[e.name_iid]: {a.name: a.int_value for a in e.debug_annotations} for e in begins}
    assert notes == {
        "measured": {},
        "closed_at_end": {"unbalanced_flags": FLAG_CLOSED_AT_BLOCK_END},
        "end_dropped": {"unbalanced_flags": FLAG_CLOSED_AT_BLOCK_END | FLAG_END_DROPPED},
        "implicit": {"unbalanced_flags": FLAG_IMPLICITLY_CLOSED},
        "measured_too": {},
    }


def test_chrome_json_marks_every_inferred_end_and_nothing_else():
    complete = [e for e in to_chrome_json(flagged_trace())["traceEvents"] if e["ph"] == "X"]
    flags = {e["name"]: e.get("args", {}).get("unbalanced_flags", 0) for e in complete}
    assert flags == dict(zip(flagged_trace().region_names, FLAGS, strict=True))
    by_name = {e["name"]: e for e in complete}
    assert by_name["closed_at_end"]["dur"] == pytest.approx(0.09)  # us: the inferred 90 ns is kept
    assert by_name["implicit"]["tid"] == 1 and by_name["measured"]["tid"] == 0


def test_flag_bits_are_distinct():
    bits = [FLAG_CLOSED_AT_BLOCK_END, FLAG_END_DROPPED, FLAG_IMPLICITLY_CLOSED]
    assert all(b and not b & (b - 1) for b in bits) and len(set(bits)) == 3


def test_chrome_json_in_full():
    """Every event and field of a small trace, including an unknown region id (== len(names))."""
    import json

    trace = Trace(
        sm=[3, 1], block=[0, 1], unit=[1, 0], region=[0, 2], start_ns=[1000.0, 250.0], end_ns=[3000.0, 500.0],
        depth=[0, 2], flags=[0, FLAG_CLOSED_AT_BLOCK_END], region_names=("load", "mma"), unit_kind="warp",
        units_per_block=2, block_ids=[0, 1], block_sm=[3, 1], block_start_ns=[0.0, 0.0],
        block_end_ns=[4000.0, 500.0], kernel_name="kern", dropped_per_unit=[[0, 2], [0, 0]],
        anomalies={"unclosed": 1},
    )
    meta = [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "SM 1"}},
        {"name": "process_sort_index", "ph": "M", "pid": 1, "tid": 0, "args": {"sort_index": 1}},
        {"name": "process_name", "ph": "M", "pid": 3, "tid": 0, "args": {"name": "SM 3"}},
        {"name": "process_sort_index", "ph": "M", "pid": 3, "tid": 0, "args": {"sort_index": 3}},
    ]
    for block, sm in ((0, 3), (1, 1)):
        for unit in (0, 1):
            tid = 2 * block + unit
            meta += [{"name": "thread_name", "ph": "M", "pid": sm, "tid": tid,
                      "args": {"name": f"block {block} / warp {unit}"}},
                     {"name": "thread_sort_index", "ph": "M", "pid": sm, "tid": tid, "args": {"sort_index": tid}}]
    slices = [
        {"name": "load", "ph": "X", "ts": 1.0, "dur": 2.0, "pid": 3, "tid": 1, "args": {"depth": 0}},
        {"name": trace.region_name(2), "ph": "X", "ts": 0.25, "dur": 0.25, "pid": 1, "tid": 2,
         "args": {"depth": 2, "unbalanced_flags": FLAG_CLOSED_AT_BLOCK_END}},
    ]
    expected = {"traceEvents": meta + slices, "displayTimeUnit": "ns",
                "otherData": {"kernel": "kern", "unit_kind": "warp", "dropped_events": 2,
                              "anomalies": dict(trace.anomalies)}}
    assert to_chrome_json(trace) == expected
    assert trace.region_name(2) == "<region 2>"
    assert json.loads(json.dumps(expected)) == expected


# -- Perfetto: chunking, track ids, timestamps at the edges ---------------------------------------

def _pb2():
    return pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")


def _slices(data: bytes):
    """(tid, kind, ts) of every track event, tid from the track uuid."""
    from mgpu_lab.profiler.perfetto_export import THREAD_UUID_BASE

    pb2 = _pb2()
    return [(p.track_event.track_uuid - THREAD_UUID_BASE, p.track_event.type, p.timestamp)
            for p in pb2.Trace.FromString(data).packet if p.HasField("track_event")]


def test_chunks_hold_exactly_the_packet_limit_and_join_to_the_whole_trace():
    from mgpu_lab.profiler.perfetto_export import perfetto_chunks, to_perfetto_bytes

    pb2 = _pb2()
    trace = flagged_trace()
    chunks = list(perfetto_chunks(trace, packets_per_chunk=3))
    sizes = [len(pb2.Trace.FromString(c).packet) for c in chunks]
    assert sizes[:-1] == [3] * (len(sizes) - 1) and 1 <= sizes[-1] <= 3 and len(sizes) > 3
    whole = to_perfetto_bytes(trace)
    assert pb2.Trace.FromString(whole) == pb2.Trace.FromString(b"".join(chunks))
    assert whole == b"".join(perfetto_chunks(trace))


def test_track_ids_are_shifted_by_one_and_name_the_real_numbers():
    pb2 = _pb2()
    from mgpu_lab.profiler.perfetto_export import to_perfetto_bytes

    packets = pb2.Trace.FromString(to_perfetto_bytes(flagged_trace())).packet
    threads = sorted((p.track_descriptor.thread.pid, p.track_descriptor.thread.tid,
                      p.track_descriptor.thread.thread_name)
                     for p in packets if p.track_descriptor.HasField("thread"))
    assert threads == [(2, 1, "block 0 / warpgroup 0"), (2, 2, "block 0 / warpgroup 1")]


def _two_slices(start_end_depth):
    (s0, e0, d0), (s1, e1, d1) = start_end_depth
    return Trace(sm=[0, 0], block=[0, 0], unit=[0, 0], region=[0, 1], start_ns=[s0, s1], end_ns=[e0, e1],
                 depth=[d0, d1], region_names=("outer", "inner"), unit_kind="warpgroup", units_per_block=1,
                 block_ids=[0], block_sm=[0], block_start_ns=[0.0], block_end_ns=[100.0])


def test_a_slice_starting_where_a_shallower_one_ends_is_not_clamped_into_it():
    from mgpu_lab.profiler.perfetto_export import to_perfetto_bytes

    pb2 = _pb2()
    begin, end = pb2.TrackEvent.TYPE_SLICE_BEGIN, pb2.TrackEvent.TYPE_SLICE_END
    # Depth 1 was filtered out: depth 0 ends at 50 exactly where depth 2 starts.
    got = _slices(to_perfetto_bytes(_two_slices([(0.0, 50.0, 0), (50.0, 80.0, 2)])))
    assert got == [(0, begin, 0), (0, end, 50), (0, begin, 50), (0, end, 80)]


def test_zero_length_slice_at_time_zero_ends_at_zero():
    from mgpu_lab.profiler.perfetto_export import to_perfetto_bytes

    pb2 = _pb2()
    begin, end = pb2.TrackEvent.TYPE_SLICE_BEGIN, pb2.TrackEvent.TYPE_SLICE_END
    got = _slices(to_perfetto_bytes(_two_slices([(0.0, 0.0, 0), (0.0, 0.0, 1)])))
    assert got == [(0, begin, 0), (0, end, 0), (0, begin, 0), (0, end, 0)]  # a zero-length slice holds nothing


def test_missing_perfetto_package_says_what_to_install(monkeypatch):
    import sys

    from mgpu_lab.profiler.perfetto_export import to_perfetto_bytes

    monkeypatch.setitem(sys.modules, "perfetto.trace_builder.proto_builder", None)
    with pytest.raises(ImportError) as e:
        to_perfetto_bytes(flagged_trace())
    assert str(e.value) == ("Perfetto export needs the `perfetto` package (with protobuf>=6.31.1): "
                            "pip install 'mgpu_lab[notebook]' or pip install perfetto protobuf")


def test_perfetto_names_unknown_and_unused_regions():
    """Every region id used (an unknown one, == len(names), included) or declared gets a name."""
    pb2 = _pb2()
    trace = Trace(sm=[0, 0], block=[0, 0], unit=[0, 0], region=[0, 3], start_ns=[0.0, 20.0], end_ns=[10.0, 30.0],
                  depth=[0, 0], region_names=("load", "mma", "store"), unit_kind="warp", units_per_block=1,
                  block_ids=[0], block_sm=[0], block_start_ns=[0.0], block_end_ns=[40.0])
    packets = pb2.Trace.FromString(to_perfetto_bytes(trace)).packet
    names = {n.iid: n.name for p in packets for n in p.interned_data.event_names}
    assert sorted(names.values()) == sorted(["load", "mma", "store", trace.region_name(3)])
    begins = [names[p.track_event.name_iid] for p in packets
              if p.HasField("track_event") and p.track_event.type == pb2.TrackEvent.TYPE_SLICE_BEGIN]
    assert begins == ["load", "<region 3>"]


def test_an_overlapping_sibling_cuts_the_slice_before_it():
    pb2 = _pb2()
    begin, end = pb2.TrackEvent.TYPE_SLICE_BEGIN, pb2.TrackEvent.TYPE_SLICE_END
    # Two depth-0 slices that overlap (inconsistent input): the first ends where the second begins.
    got = _slices(to_perfetto_bytes(_two_slices([(0.0, 100.0, 0), (50.0, 80.0, 0)])))
    assert got == [(0, begin, 0), (0, end, 50), (0, begin, 50), (0, end, 80)]


def test_a_trace_of_several_chunks_joins_into_one_trace(tmp_path):
    """More packets than one chunk holds (50,000): the bytes are the chunks back to back."""
    import numpy as np

    from mgpu_lab.profiler.perfetto_export import save_perfetto

    pb2 = _pb2()
    n = 26_000  # 2 packets a slice, + names, one SM, one unit: 52,003 packets
    starts = np.arange(n, dtype=np.float64) * 10
    trace = Trace(sm=np.zeros(n), block=np.zeros(n), unit=np.zeros(n), region=np.zeros(n), start_ns=starts,
                  end_ns=starts + 5, depth=np.zeros(n), region_names=("r",), unit_kind="warp", units_per_block=1,
                  block_ids=[0], block_sm=[0], block_start_ns=[0.0], block_end_ns=[10.0 * n])
    data = to_perfetto_bytes(trace)
    assert len(pb2.Trace.FromString(data).packet) == 3 + 2 * n
    assert save_perfetto(trace, tmp_path / "t.perfetto-trace").read_bytes() == data


def test_chrome_json_file_is_compact_json(tmp_path):
    import json

    from mgpu_lab.profiler.chrome_export import save_chrome_json

    trace = flagged_trace()
    text = save_chrome_json(trace, tmp_path / "t.json").read_text()
    assert text == json.dumps(to_chrome_json(trace), separators=(",", ":"))  # no whitespace: traces get large
