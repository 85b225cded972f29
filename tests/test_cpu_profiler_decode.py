"""Profiler decode on the CPU: a block that starts before row 0, and %clock wrap in such a block.

The device writes block rows in whatever order blocks finish their header, so row 0 is not the
earliest block. Time 0 must be the earliest block's start, or every earlier start underflows
(uint64) into ~1.8e19 ns.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_profiler_decode import T0, WRAP, Block, begin, decode_quietly, end, make_spec, write_buffer


def _late_row_zero_buffer():
    spec = make_spec(units=1)
    # Row 0 starts 700 ns after row 1 and 200 ns after row 2; 1 ns per cycle everywhere.
    late = Block(sm=5, block_id=0, timer_start=T0 + 700, timer_end=T0 + 1700, clock_start=0, clock_end=1000)
    late.units = [[(begin(0), 100), (end(0), 300)]]
    early = Block(sm=2, block_id=1, timer_start=T0, timer_end=T0 + 1000, clock_start=WRAP - 400,
                  clock_end=WRAP + 600)  # %clock wraps 400 cycles into this block
    early.units = [[(begin(1), WRAP - 300), (end(1), WRAP + 100)]]
    middle = Block(sm=9, block_id=2, timer_start=T0 + 500, timer_end=T0 + 1500, clock_start=50, clock_end=1050)
    middle.units = [[(begin(2), 50), (end(2), 1050)]]
    return spec, write_buffer(spec, [late, early, middle])


def test_time_zero_is_the_earliest_block_not_row_zero() -> None:
    spec, buffer = _late_row_zero_buffer()
    trace = decode_quietly(buffer, spec)
    assert trace.origin_globaltimer_ns == T0
    np.testing.assert_allclose(trace.block_start_ns, [700.0, 0.0, 500.0])
    np.testing.assert_allclose(trace.block_end_ns, [1700.0, 1000.0, 1500.0])
    assert trace.block_start_ns.min() == 0.0 and trace.duration_ns == pytest.approx(1700.0)
    np.testing.assert_array_equal(trace.block, [0, 1, 2])
    np.testing.assert_allclose(trace.start_ns, [800.0, 100.0, 500.0])
    np.testing.assert_allclose(trace.end_ns, [1000.0, 500.0, 1500.0])
    assert np.all(trace.start_ns >= 0) and np.all(trace.end_ns <= trace.duration_ns)


def test_clock_wrap_in_a_block_that_starts_before_row_zero() -> None:
    spec, buffer = _late_row_zero_buffer()
    assert buffer[1, 9] < buffer[1, 8]  # the early block's end clock really wrapped
    trace = decode_quietly(buffer, spec)
    assert trace.ns_per_cycle == pytest.approx(1.0)
    [early] = [e for e in trace.events() if e.block == 1]
    assert (early.start_ns, early.end_ns) == pytest.approx((100.0, 500.0))
    assert early.sm == 2 and early.name == "mma"


def test_events_keep_nanosecond_resolution_at_absolute_globaltimer_values() -> None:
    """Times are subtracted from the origin in integers: at ~1.8e18 ns float64 steps are 256 ns."""
    spec = make_spec(units=1)
    a = Block(sm=0, block_id=0, timer_start=T0 + 3, timer_end=T0 + 1003, clock_start=0, clock_end=1000)
    a.units = [[(begin(0), 1), (end(0), 2)]]
    b = Block(sm=1, block_id=1, timer_start=T0 + 1, timer_end=T0 + 1001, clock_start=0, clock_end=1000)
    trace = decode_quietly(write_buffer(spec, [a, b]), spec)
    np.testing.assert_allclose(trace.block_start_ns, [2.0, 0.0])
    assert (trace.start_ns[0], trace.end_ns[0]) == pytest.approx((3.0, 4.0))


def _blocks(n, units=1):
    return [Block(sm=i, block_id=i, timer_start=T0, timer_end=T0 + 1000, clock_start=0, clock_end=1000,
                  units=[[] for _ in range(units)]) for i in range(n)]


def test_bad_magic_message_counts_blocks_not_words() -> None:
    import re

    from mgpu_lab.profiler import format as fmt
    from mgpu_lab.profiler.decode import decode_buffer

    spec = make_spec(units=1)
    buffer = write_buffer(spec, _blocks(5))
    buffer[3, 0] = 0x12345678
    expected = (f"profiler buffer block 3: expected MAGIC 0x{fmt.MAGIC:08X}, found 0x12345678; "
                f"1 of 5 blocks have a bad MAGIC")
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        decode_buffer(buffer, spec)


def test_a_device_array_is_copied_to_the_host_with_get() -> None:
    spec = make_spec(units=1)
    buffer = write_buffer(spec, _blocks(2))

    class OnDevice:  # what a CuPy array offers
        def get(self):
            return buffer

    trace = decode_quietly(OnDevice(), spec)
    np.testing.assert_array_equal(trace.block_sm, [0, 1])


def _malformed_with_open_regions(overflowed: bool):
    spec = make_spec(units=1, capacity=5)
    blk = Block(sm=0, block_id=0, timer_start=T0, timer_end=T0 + 1000, clock_start=0, clock_end=1000)
    # A stray end makes the unit malformed (the stack decoder); two regions stay open.
    blk.units = [[(end(2), 5), (begin(0), 10), (begin(2), 15), (end(2), 18), (begin(1), 20)]]
    blk.attempted = [12] if overflowed else None
    return spec, write_buffer(spec, [blk])


@pytest.mark.parametrize("overflowed", [False, True])
def test_open_regions_of_a_repaired_unit_close_at_the_block_end(overflowed) -> None:
    import warnings

    from mgpu_lab.profiler.decode import decode_buffer
    from mgpu_lab.profiler.trace import FLAG_CLOSED_AT_BLOCK_END, FLAG_END_DROPPED

    spec, buffer = _malformed_with_open_regions(overflowed)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        trace = decode_buffer(buffer, spec)
    np.testing.assert_allclose(trace.start_ns, [10.0, 15.0, 20.0])
    np.testing.assert_allclose(trace.end_ns, [1000.0, 18.0, 1000.0])
    np.testing.assert_array_equal(trace.depth, [0, 1, 1])
    flag = FLAG_CLOSED_AT_BLOCK_END | (FLAG_END_DROPPED if overflowed else 0)
    np.testing.assert_array_equal(trace.flags, [flag, 0, flag])
    assert trace.anomalies["stray_end"] == 1
    assert trace.anomalies["end_dropped" if overflowed else "unclosed"] == 2
    assert trace.anomalies["unclosed" if overflowed else "end_dropped"] == 0


def _decode_warnings(buffer, spec, monkeypatch) -> tuple[list, list]:
    """The warnings decode_buffer emits, and the stacklevel each warnings.warn call was given."""
    import warnings

    from mgpu_lab.profiler.decode import decode_buffer

    levels = []
    real_warn = warnings.warn

    def warn(message, category=None, stacklevel=1, source=None):
        levels.append(stacklevel)
        real_warn(message, category, stacklevel + 1, source)  # + this frame

    monkeypatch.setattr(warnings, "warn", warn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        decode_buffer(buffer, spec)
    return caught, levels


def _assert_point_at_this_file(caught, levels) -> None:
    """Each warning names the line that called decode_buffer (this file), not mgpu_lab.

    Under mutation testing (mutmut sets MUTANT_UNDER_TEST) every mutated function is called
    through two frames of mutmut's trampoline, so no fixed stacklevel can reach this file; there
    the stacklevel given is checked instead: decode_buffer -> _warn_* -> warnings.warn is 3."""
    import os

    if "MUTANT_UNDER_TEST" in os.environ:
        assert levels == [3] * len(caught)
    else:
        assert [w.filename for w in caught] == [__file__] * len(caught)


def test_warning_messages_in_full_and_pointing_at_the_caller(monkeypatch) -> None:
    from mgpu_lab.profiler.decode import ProfilerAnomalyWarning, ProfilerOverflowWarning

    spec, buffer = _malformed_with_open_regions(overflowed=False)
    buffer[0, 2] = 0  # block id stays 0
    caught, levels = _decode_warnings(buffer, spec, monkeypatch)
    [anomaly] = caught
    assert anomaly.category is ProfilerAnomalyWarning
    _assert_point_at_this_file(caught, levels)
    assert str(anomaly.message) == (
        "profiler trace has unbalanced regions: 2 unclosed, 1 stray end. Unclosed regions end at their "
        "block's end, stray ends were dropped; see Trace.anomalies and Trace.flags.")
    spec, buffer = _malformed_with_open_regions(overflowed=True)
    caught, levels = _decode_warnings(buffer, spec, monkeypatch)
    overflow = [w for w in caught if w.category is ProfilerOverflowWarning]
    assert len(overflow) == 1
    _assert_point_at_this_file(caught, levels)
    assert str(overflow[0].message) == (
        "profiler buffer overflow: 7 events were dropped in 1 of 1 warpgroups (capacity 5 events per warpgroup; "
        "a capacity of 12 would have held them all). Regions whose end was dropped are closed at their "
        "block's end and flagged.")


def test_zero_globaltimer_spans_fall_back_to_one_ns_per_cycle() -> None:
    """%clock ran but %globaltimer did not tick in any block: the period is unknown, not 0 ns."""
    from mgpu_lab.profiler.decode import ProfilerClockWarning, decode_buffer

    spec = make_spec(units=1)
    blk = Block(sm=0, block_id=0, timer_start=T0, timer_end=T0, clock_start=10, clock_end=110)
    blk.units = [[(begin(0), 10), (end(0), 30)]]
    with pytest.warns(ProfilerClockWarning, match=r"\(sums: 0 ns, 100 cycles\)"):
        trace = decode_buffer(write_buffer(spec, [blk]), spec)
    assert trace.ns_per_cycle == 1.0
    assert trace.end_ns[0] == pytest.approx(20.0)


def test_buffers_of_another_shape_are_refused_with_the_expected_shape() -> None:
    import re

    from mgpu_lab.profiler.decode import decode_buffer

    spec = make_spec(units=1, capacity=7)  # 32 words per block
    blocks = [Block(sm=i, block_id=i, timer_start=T0, timer_end=T0 + 10, clock_start=0, clock_end=10)
              for i in range(2)]
    buffer = write_buffer(spec, blocks)
    # 1-D but not whole blocks; 2-D two blocks wide; no blocks at all (1-D and 2-D); 3-D.
    for bad in (buffer.reshape(-1)[:-1], buffer.reshape(1, -1), buffer.reshape(-1)[:0], buffer[:0],
                buffer.reshape(2, 1, -1)):
        with pytest.raises(ValueError, match="^" + re.escape(
                f"profiler buffer has shape {bad.shape}; expected (num_blocks, 32) or a 1-D multiple of 32 words")):
            decode_buffer(bad, spec)


def test_a_marker_read_just_before_the_start_stamp_begins_at_the_block_start() -> None:
    """A warp reads its first marker's clock while its start barrier is still pending and thread 0
    is still taking the block's start stamp: 40 cycles before it. The region begins at the block's
    start (it cannot run before the barrier), not 2**32 - 40 cycles after it."""
    spec = make_spec(units=2)
    blk = Block(sm=0, block_id=0, timer_start=T0 + 1000, timer_end=T0 + 2000, clock_start=WRAP + 500,
                clock_end=WRAP + 1500)
    blk.units = [[(begin(0), WRAP + 600), (end(0), WRAP + 700)], [(begin(1), WRAP + 460), (end(1), WRAP + 900)]]
    other = Block(sm=1, block_id=1, timer_start=T0, timer_end=T0 + 1000, clock_start=0, clock_end=1000)
    trace = decode_quietly(write_buffer(spec, [blk, other]), spec)
    np.testing.assert_allclose(np.sort(trace.start_ns), [1000.0, 1100.0])
    assert np.all(trace.end_ns >= trace.start_ns) and trace.duration_ns == pytest.approx(2000.0)
    assert np.all(trace.start_ns >= 0) and np.all(trace.end_ns <= trace.duration_ns)
