"""Host-side profiler decoding: synthetic device buffers written in the exact format."""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest

from mgpu_lab.compiler.compiled_kernel import ProfilerSpec
from mgpu_lab.profiler import format as fmt
from mgpu_lab.profiler.decode import (
    ProfilerAnomalyWarning,
    ProfilerClockWarning,
    ProfilerOverflowWarning,
    decode_buffer,
)
from mgpu_lab.profiler.trace import (
    FLAG_CLOSED_AT_BLOCK_END,
    FLAG_END_DROPPED,
    FLAG_IMPLICITLY_CLOSED,
    Event,
    Trace,
)

WRAP = 2**32


def begin(region: int) -> int:
    return fmt.BEGIN_BIT | region


def end(region: int) -> int:
    return region


@dataclass
class Block:
    """What one block writes: header values and, per unit, its (tag, clock) events."""

    sm: int
    block_id: int
    timer_start: int  # %globaltimer ns
    timer_end: int
    clock_start: int  # %clock cycles, unwrapped (written modulo 2**32)
    clock_end: int
    units: list[list[tuple[int, int]]] = field(default_factory=list)  # clocks unwrapped
    attempted: list[int] | None = None  # per unit; default: len(events)


def make_spec(
    units: int = 2, capacity: int = 8, names: tuple[str, ...] = ("load", "mma", "store")
) -> ProfilerSpec:
    return ProfilerSpec(
        region_names=names,
        unit="warpgroup",
        units_per_block=units,
        capacity=capacity,
        words_per_block=fmt.words_per_block(units, capacity),
        smem_offset=0,
    )


def write_buffer(spec: ProfilerSpec, blocks: list[Block]) -> np.ndarray:
    """The buffer the device would produce, written word by word from format.py's layout."""
    rows = np.zeros((len(blocks), spec.words_per_block), dtype=np.uint32)
    for row, blk in zip(rows, blocks, strict=True):
        row[0] = fmt.MAGIC
        row[1] = blk.sm
        row[2] = blk.block_id
        row[3] = spec.units_per_block
        row[4], row[5] = blk.timer_start & 0xFFFFFFFF, blk.timer_start >> 32
        row[6], row[7] = blk.timer_end & 0xFFFFFFFF, blk.timer_end >> 32
        row[8] = blk.clock_start % WRAP
        row[9] = blk.clock_end % WRAP
        for u, events in enumerate(blk.units):
            base = fmt.BLOCK_HEADER_WORDS + u * fmt.unit_words(spec.capacity)
            row[base] = len(events) if blk.attempted is None else blk.attempted[u]
            for k, (tag, clock) in enumerate(events[: spec.capacity]):
                at = base + fmt.UNIT_HEADER_WORDS + fmt.EVENT_WORDS * k
                row[at] = tag
                row[at + 1] = clock % WRAP
    return rows


# A realistic absolute %globaltimer (ns since epoch): beyond float64's exact integers.
T0 = 1_764_000_000_123_456_789


def decode_quietly(buffer: np.ndarray, spec: ProfilerSpec, **kwargs: str) -> Trace:
    """Decode and fail on any warning: the well-formed cases must not warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return decode_buffer(buffer, spec, **kwargs)


def test_basic_decode_converts_cycles_to_ns() -> None:
    spec = make_spec(units=2)
    # 2000 cycles in 1000 ns: 0.5 ns per cycle. Block 1 starts 500 ns after block 0.
    b0 = Block(
        sm=3, block_id=0, timer_start=T0, timer_end=T0 + 1000, clock_start=5000, clock_end=7000
    )
    b0.units = [[(begin(0), 5200), (end(0), 5600)], [(begin(1), 5000), (end(1), 7000)]]
    b1 = Block(
        sm=7, block_id=1, timer_start=T0 + 500, timer_end=T0 + 1500, clock_start=90, clock_end=2090
    )
    b1.units = [[(begin(2), 1090), (end(2), 1092)], []]
    trace = decode_quietly(write_buffer(spec, [b0, b1]), spec, kernel_name="gemm")

    assert trace.ns_per_cycle == pytest.approx(0.5)
    assert trace.origin_globaltimer_ns == T0
    assert trace.kernel_name == "gemm" and trace.unit_kind == "warpgroup"
    np.testing.assert_allclose(trace.block_start_ns, [0.0, 500.0])
    np.testing.assert_allclose(trace.block_end_ns, [1000.0, 1500.0])
    assert trace.duration_ns == pytest.approx(1500.0)
    assert trace.num_events == 3
    np.testing.assert_array_equal(trace.sm, [3, 3, 7])
    np.testing.assert_array_equal(trace.block, [0, 0, 1])
    np.testing.assert_array_equal(trace.unit, [0, 1, 0])
    np.testing.assert_array_equal(trace.region, [0, 1, 2])
    np.testing.assert_allclose(trace.start_ns, [100.0, 0.0, 1000.0])
    np.testing.assert_allclose(trace.end_ns, [300.0, 1000.0, 1001.0])
    np.testing.assert_array_equal(trace.depth, [0, 0, 0])
    assert trace.dropped == 0 and not trace.flags.any()
    assert all(v == 0 for v in trace.anomalies.values())

    events = list(trace.events())
    assert events[0] == Event(
        sm=3, block=0, unit=0, name="load", start_ns=100.0, end_ns=300.0, depth=0
    )
    assert events[2].name == "store" and events[2].duration_ns == pytest.approx(1.0)


def test_cycle_period_is_pooled_over_blocks() -> None:
    """A block shorter than the globaltimer tick (span 0) still counts its cycles."""
    spec = make_spec(units=1)
    b0 = Block(sm=0, block_id=0, timer_start=T0, timer_end=T0 + 1000, clock_start=0, clock_end=2000)
    b1 = Block(sm=1, block_id=1, timer_start=T0, timer_end=T0, clock_start=0, clock_end=1000)
    b1.units = [[(begin(0), 0), (end(0), 300)]]
    trace = decode_quietly(write_buffer(spec, [b0, b1]), spec)
    assert trace.ns_per_cycle == pytest.approx(1000 / 3000)
    assert trace.end_ns[0] == pytest.approx(100.0)


def test_zero_clock_spans_fall_back_to_one_ns_per_cycle() -> None:
    spec = make_spec(units=1)
    blk = Block(sm=0, block_id=0, timer_start=T0, timer_end=T0, clock_start=10, clock_end=10)
    blk.units = [[(begin(0), 10), (end(0), 30)]]
    with pytest.warns(ProfilerClockWarning, match="1 ns per cycle"):
        trace = decode_buffer(write_buffer(spec, [blk]), spec)
    assert trace.ns_per_cycle == 1.0
    assert trace.end_ns[0] == pytest.approx(20.0)


def test_nesting_depth_and_begin_order() -> None:
    spec = make_spec(units=1, capacity=16)
    blk = Block(sm=0, block_id=0, timer_start=T0, timer_end=T0 + 100, clock_start=0, clock_end=100)
    blk.units = [
        [
            (begin(0), 0),  # outer
            (begin(1), 10),  # inner 1
            (begin(2), 12),  # innermost
            (end(2), 14),
            (end(1), 20),
            (begin(1), 30),  # inner 2
            (end(1), 40),
            (end(0), 50),
            (begin(2), 60),  # a second top-level region
            (end(2), 70),
        ]
    ]
    trace = decode_quietly(write_buffer(spec, [blk]), spec)
    np.testing.assert_array_equal(trace.region, [0, 1, 2, 1, 2])
    np.testing.assert_array_equal(trace.depth, [0, 1, 2, 1, 0])
    np.testing.assert_allclose(trace.start_ns, [0, 10, 12, 30, 60])
    np.testing.assert_allclose(trace.end_ns, [50, 20, 14, 40, 70])


def test_overflow_warns_once_with_needed_capacity() -> None:
    spec = make_spec(units=2, capacity=4)
    blk = Block(
        sm=0, block_id=0, timer_start=T0, timer_end=T0 + 1000, clock_start=0, clock_end=1000
    )
    # Unit 0 tried 10 events; only the first 4 were kept: A open, B closed, B open again.
    blk.units = [
        [(begin(0), 0), (begin(1), 10), (end(1), 20), (begin(1), 30)],
        [(begin(2), 0), (end(2), 5), (begin(2), 6), (end(2), 7)],
    ]
    blk.attempted = [10, 6]
    other = Block(
        sm=1, block_id=1, timer_start=T0, timer_end=T0 + 1000, clock_start=0, clock_end=1000
    )
    other.units = [[(begin(0), 0), (end(0), 1)], []]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = decode_buffer(write_buffer(spec, [blk, other]), spec, kernel_name="k")
    overflow = [w for w in caught if issubclass(w.category, ProfilerOverflowWarning)]
    assert len(overflow) == 1, [str(w.message) for w in caught]
    message = str(overflow[0].message)
    assert "8 events were dropped in 2 of 4 warpgroups" in message
    assert "capacity 4" in message and "a capacity of 10 would have held them all" in message
    # Dropped ends explain the open regions: no separate anomaly warning.
    assert not [w for w in caught if issubclass(w.category, ProfilerAnomalyWarning)]

    assert trace.dropped == 8
    np.testing.assert_array_equal(trace.dropped_per_unit, [[6, 2], [0, 0]])
    assert trace.anomalies["end_dropped"] == 2 and trace.anomalies["unclosed"] == 0
    unit0 = trace.filter(block=0, unit=0)
    np.testing.assert_array_equal(unit0.region, [0, 1, 1])
    np.testing.assert_array_equal(unit0.depth, [0, 1, 1])
    np.testing.assert_allclose(unit0.end_ns, [1000.0, 20.0, 1000.0])
    dropped_end = FLAG_CLOSED_AT_BLOCK_END | FLAG_END_DROPPED
    np.testing.assert_array_equal(unit0.flags, [dropped_end, 0, dropped_end])
    assert [e.unbalanced for e in unit0.events()] == [True, False, True]


def test_begin_without_end_is_closed_at_block_end() -> None:
    spec = make_spec(units=1)
    blk = Block(sm=2, block_id=5, timer_start=T0, timer_end=T0 + 800, clock_start=0, clock_end=800)
    blk.units = [[(begin(0), 100), (end(0), 200), (begin(1), 300)]]  # odd count
    with pytest.warns(ProfilerAnomalyWarning, match="1 unclosed"):
        trace = decode_buffer(write_buffer(spec, [blk]), spec)
    assert trace.anomalies["unclosed"] == 1 and trace.anomalies["end_dropped"] == 0
    np.testing.assert_allclose(trace.end_ns, [200.0, 800.0])
    np.testing.assert_array_equal(trace.flags, [0, FLAG_CLOSED_AT_BLOCK_END])


def test_clock_wrap_across_2_pow_32() -> None:
    spec = make_spec(units=1)
    start = WRAP - 100  # the clock wraps 100 cycles into the block
    blk = Block(
        sm=0,
        block_id=0,
        timer_start=T0,
        timer_end=T0 + 1000,
        clock_start=start,
        clock_end=start + 1000,
    )
    blk.units = [
        [
            (begin(0), start + 50),
            (end(0), start + 250),
            (begin(1), start + 900),
            (end(1), start + 1000),
        ]
    ]
    buffer = write_buffer(spec, [blk])
    assert buffer[0, 9] < buffer[0, 8]  # the written end clock really wrapped
    trace = decode_quietly(buffer, spec)
    assert trace.ns_per_cycle == pytest.approx(1.0)
    np.testing.assert_allclose(trace.start_ns, [50.0, 900.0])
    np.testing.assert_allclose(trace.end_ns, [250.0, 1000.0])
    np.testing.assert_allclose(trace.block_end_ns, [1000.0])


def test_unbalanced_ends_are_repaired_without_crashing() -> None:
    spec = make_spec(units=2, capacity=16)
    blk = Block(
        sm=0, block_id=0, timer_start=T0, timer_end=T0 + 1000, clock_start=0, clock_end=1000
    )
    blk.units = [
        [
            (end(2), 5),  # stray: nothing open
            (begin(0), 10),
            (begin(1), 20),
            (end(0), 30),  # ends A while B is innermost: B closes implicitly at 30
            (end(1), 40),  # stray: B was already closed
            (begin(2), 50),
            (end(2), 60),
        ],
        [(begin(1), 0), (end(1), 100)],  # a well-formed neighbour decodes normally
    ]
    with pytest.warns(ProfilerAnomalyWarning, match="2 stray end.*1 implicitly closed"):
        trace = decode_buffer(write_buffer(spec, [blk]), spec)
    assert trace.anomalies["stray_end"] == 2
    assert trace.anomalies["implicitly_closed"] == 1
    np.testing.assert_array_equal(trace.unit, [0, 0, 0, 1])
    np.testing.assert_array_equal(trace.region, [0, 1, 2, 1])
    np.testing.assert_array_equal(trace.depth, [0, 1, 0, 0])
    np.testing.assert_allclose(trace.start_ns, [10, 20, 50, 0])
    np.testing.assert_allclose(trace.end_ns, [30, 30, 60, 100])
    np.testing.assert_array_equal(trace.flags, [0, FLAG_IMPLICITLY_CLOSED, 0, 0])


def test_unknown_region_id_is_kept_and_named() -> None:
    spec = make_spec(units=1, names=("only",))
    blk = Block(sm=0, block_id=0, timer_start=T0, timer_end=T0 + 10, clock_start=0, clock_end=10)
    blk.units = [[(begin(4), 1), (end(4), 2)]]
    with pytest.warns(ProfilerAnomalyWarning, match="unknown region"):
        trace = decode_buffer(write_buffer(spec, [blk]), spec)
    assert [e.name for e in trace.events()] == ["<region 4>"]


def test_bad_magic_names_the_block() -> None:
    spec = make_spec(units=1)
    blocks = [
        Block(sm=0, block_id=i, timer_start=T0, timer_end=T0 + 10, clock_start=0, clock_end=10)
        for i in range(3)
    ]
    buffer = write_buffer(spec, blocks)
    buffer[1, 0] = 0xDEADBEEF
    buffer[2, :] = 0
    with pytest.raises(
        ValueError, match=r"block 1: expected MAGIC 0x4D475055, found 0xDEADBEEF; 2 of 3"
    ):
        decode_buffer(buffer, spec)
    buffer[1, 0] = fmt.MAGIC
    with pytest.raises(ValueError, match=r"block 2.*all zeros"):
        decode_buffer(buffer, spec)


def test_buffer_shapes() -> None:
    spec = make_spec(units=1, capacity=7)  # 32 words, as wide as 2 units x capacity 3
    blocks = [
        Block(sm=i, block_id=i, timer_start=T0, timer_end=T0 + 10, clock_start=0, clock_end=10)
        for i in range(2)
    ]
    buffer = write_buffer(spec, blocks)
    flat = decode_quietly(buffer.reshape(-1), spec)
    assert flat.num_blocks == 2
    signed = decode_quietly(buffer.view(np.int32), spec)  # same bits through a signed view
    np.testing.assert_array_equal(signed.block_sm, [0, 1])
    with pytest.raises(ValueError, match="shape"):
        decode_buffer(buffer.reshape(-1)[:-1], spec)
    with pytest.raises(ValueError, match="units per block"):
        decode_buffer(buffer, make_spec(units=2, capacity=3))  # same width, other layout


def _reference_pairs(
    units: list[list[tuple[int, int]]], kept: list[int], block_end: int
) -> list[tuple]:
    """The obvious stack decoder for well-nested (possibly truncated) streams."""
    out = []
    for u, events in enumerate(units):
        stack: list[tuple[int, int, int]] = []
        found = []
        for position, (tag, clock) in enumerate(events[: kept[u]]):
            if tag & fmt.BEGIN_BIT:
                stack.append((position, tag & fmt.REGION_ID_MASK, clock))
            else:
                pos, region, start = stack.pop()
                found.append((pos, u, region, start, clock, len(stack)))
        while stack:
            pos, region, start = stack.pop()
            found.append((pos, u, region, start, block_end, len(stack)))
        out += [row[1:] for row in sorted(found, key=lambda r: r[0])]
    return out


def _random_stream(rng: random.Random, length: int, regions: int) -> list[tuple[int, int]]:
    events, stack, clock = [], [], 0
    while len(events) < length:
        clock += rng.randint(0, 3)  # equal clocks happen on the device too
        if stack and (rng.random() < 0.45 or len(stack) > 4):
            events.append((end(stack.pop()), clock))
        else:
            region = rng.randrange(regions)
            stack.append(region)
            events.append((begin(region), clock))
    return events


def test_vectorized_pairing_matches_a_stack_decoder() -> None:
    rng = random.Random(1234)
    spec = make_spec(units=4, capacity=24)
    blocks, expected = [], []
    for b in range(30):
        blk = Block(
            sm=b % 7,
            block_id=b,
            timer_start=T0,
            timer_end=T0 + 10_000,
            clock_start=0,
            clock_end=10_000,
        )
        blk.units = [_random_stream(rng, rng.randrange(0, 31), 3) for _ in range(4)]
        kept = [min(len(events), spec.capacity) for events in blk.units]
        expected += [(b, *row) for row in _reference_pairs(blk.units, kept, 10_000)]
        blocks.append(blk)
    with warnings.catch_warnings():
        # Truncated streams leave regions open: both warnings are expected here.
        warnings.simplefilter("ignore", ProfilerOverflowWarning)
        warnings.simplefilter("ignore", ProfilerAnomalyWarning)
        trace = decode_buffer(write_buffer(spec, blocks), spec)
    got = list(
        zip(
            trace.block.tolist(),
            trace.unit.tolist(),
            trace.region.tolist(),
            trace.start_ns.tolist(),
            trace.end_ns.tolist(),
            trace.depth.tolist(),
            strict=True,
        )
    )
    assert got == [
        tuple(float(x) if i in (3, 4) else x for i, x in enumerate(row)) for row in expected
    ]
    assert trace.anomalies["stray_end"] == 0 and trace.anomalies["implicitly_closed"] == 0


def test_filter_by_region_and_block() -> None:
    spec = make_spec(units=1)
    blocks = []
    for b in range(3):
        blk = Block(
            sm=b, block_id=b, timer_start=T0, timer_end=T0 + 100, clock_start=0, clock_end=100
        )
        blk.units = [[(begin(0), 0), (begin(1), 10), (end(1), 20), (end(0), 30)]]
        blocks.append(blk)
    trace = decode_quietly(write_buffer(spec, blocks), spec)
    assert trace.filter(region="mma").num_events == 3
    assert trace.filter(region=["load", 1], block=[0, 2]).num_events == 4
    only = trace.filter(region=0, block=1)
    assert only.num_events == 1 and only.block.tolist() == [1]
    assert only.duration_ns == trace.duration_ns  # per-block data is kept whole
    with pytest.raises(KeyError, match="no region named 'nope'"):
        trace.filter(region="nope")


def _summary_trace() -> Trace:
    """One block, 2 units, 2000 ns; load takes 100, 200, 300, 400 ns; mma 1500 ns."""
    spec = make_spec(units=2, capacity=8)
    blk = Block(
        sm=0, block_id=0, timer_start=T0, timer_end=T0 + 2000, clock_start=0, clock_end=2000
    )
    blk.units = [
        [
            (begin(0), 0),
            (end(0), 100),
            (begin(0), 100),
            (end(0), 300),
            (begin(0), 300),
            (end(0), 600),
        ],
        [(begin(1), 0), (begin(0), 0), (end(0), 400), (end(1), 1500)],
    ]
    return decode_quietly(write_buffer(spec, [blk]), spec, kernel_name="sum_kernel")


def test_summary_numbers() -> None:
    summary = _summary_trace().summary()
    mma, load = summary.rows  # largest total first
    assert mma["region"] == "mma" and load["region"] == "load"
    assert load["count"] == 4
    assert load["total_ns"] == pytest.approx(1000.0)
    assert load["mean_ns"] == pytest.approx(250.0)
    assert load["p50_ns"] == pytest.approx(250.0)
    assert load["p95_ns"] == pytest.approx(385.0)  # linear: 300 + 0.85 * (400 - 300)
    assert load["min_ns"] == pytest.approx(100.0) and load["max_ns"] == pytest.approx(400.0)
    # share = total / (block duration x units) = 1000 / (2000 x 2)
    assert load["share"] == pytest.approx(0.25)
    assert mma["count"] == 1 and mma["total_ns"] == pytest.approx(1500.0)
    assert mma["share"] == pytest.approx(1500.0 / 4000.0)

    text = str(summary)
    lines = text.splitlines()
    assert lines[0].startswith("sum_kernel: 2.000 µs, 2 warpgroups")
    assert lines[1].split() == [
        "region",
        "count",
        "total",
        "µs",
        "mean",
        "µs",
        "p50",
        "µs",
        "p95",
        "µs",
        "min",
        "µs",
        "max",
        "µs",
        "share",
    ]
    assert lines[3].split() == [
        "mma",
        "1",
        "1.500",
        "1.500",
        "1.500",
        "1.500",
        "1.500",
        "1.500",
        "37.5%",
    ]
    assert lines[4].split() == [
        "load",
        "4",
        "1.000",
        "0.250",
        "0.250",
        "0.385",
        "0.100",
        "0.400",
        "25.0%",
    ]
    assert len({len(line) for line in lines[1:3]}) == 1  # header and rule aligned
    html = summary._repr_html_()
    assert html.count("<tr>") == 3 and "<td" in html and "37.5%" in html


def test_dataframes() -> None:
    pd = pytest.importorskip("pandas")
    trace = _summary_trace()
    frame = trace.to_dataframe()
    assert len(frame) == trace.num_events
    assert list(frame["region"].astype(str)) == ["load", "load", "load", "mma", "load"]
    np.testing.assert_allclose(frame["duration_ns"], [100, 200, 300, 1500, 400])
    summary = trace.summary().to_dataframe()
    assert isinstance(summary, pd.DataFrame)
    assert summary.loc["load", "count"] == 4


def test_save_load_round_trip(tmp_path) -> None:
    spec = make_spec(units=2, capacity=4)
    blk = Block(
        sm=9, block_id=3, timer_start=T0, timer_end=T0 + 1000, clock_start=7, clock_end=2007
    )
    blk.units = [[(begin(0), 7), (begin(1), 9), (end(1), 11), (begin(1), 13)], [(begin(2), 100)]]
    blk.attempted = [7, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = decode_buffer(write_buffer(spec, [blk]), spec, kernel_name="round/trip")
    path = trace.save(tmp_path / "trace")
    assert path.name == "trace.npz" and path.exists()
    loaded = Trace.load(path)
    for column in (
        "sm",
        "block",
        "unit",
        "region",
        "start_ns",
        "end_ns",
        "depth",
        "flags",
        "block_ids",
        "block_sm",
        "block_start_ns",
        "block_end_ns",
        "dropped_per_unit",
    ):
        original, again = getattr(trace, column), getattr(loaded, column)
        assert original.dtype == again.dtype, column
        np.testing.assert_array_equal(original, again, err_msg=column)
    for attribute in (
        "region_names",
        "unit_kind",
        "units_per_block",
        "kernel_name",
        "capacity",
        "ns_per_cycle",
        "origin_globaltimer_ns",
        "anomalies",
        "dropped",
    ):
        assert getattr(trace, attribute) == getattr(loaded, attribute), attribute
    assert list(loaded.events()) == list(trace.events())


def test_share_is_relative_to_unit_lifetime_across_waves() -> None:
    """Two blocks one after the other (two waves): a region covering each unit's whole life has share 1."""
    spec = make_spec(units=1, capacity=4)
    blocks = [Block(sm=0, block_id=b, timer_start=T0 + 1000 * b, timer_end=T0 + 1000 * (b + 1),
                    clock_start=1000 * b, clock_end=1000 * (b + 1),
                    units=[[(begin(0), 1000 * b), (end(0), 1000 * (b + 1))]]) for b in range(2)]
    [row] = decode_quietly(write_buffer(spec, blocks), spec).summary().rows
    assert row["share"] == pytest.approx(1.0)
