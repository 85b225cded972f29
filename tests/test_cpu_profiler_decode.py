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
