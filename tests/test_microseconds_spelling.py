"""One spelling of microseconds in what users read: µs (as Nsight writes it), never "us".

Checked on the output itself, for a trace recorded on the H200: the CLI's `trace summary`, the
trace's repr, the region summary (text and HTML) and the timeline's static outputs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mgpu_lab.cli import main
from mgpu_lab.profiler.trace import Trace

RECORDED = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "gemm_8192_trace_sample.npz"
# "us" as a unit: after a number, in parentheses, or as a column title's last word.
US_AS_A_UNIT = re.compile(r"\d\s?us\b|\(us\)|\b(?:total|mean|p50|p95|min|max) us\b")


def _assert_one_spelling(text: str, where: str) -> None:
    assert not US_AS_A_UNIT.search(text), (where, US_AS_A_UNIT.findall(text)[:3])
    assert "µs" in text, where


def test_recorded_trace_reads_in_microseconds(capsys: pytest.CaptureFixture[str]) -> None:
    from mgpu_lab.widgets import Timeline

    assert main(["trace", "summary", str(RECORDED)]) == 0
    _assert_one_spelling(capsys.readouterr().out, "mgpu-lab trace summary")
    trace = Trace.load(RECORDED)
    summary = trace.summary()
    _assert_one_spelling(repr(trace), "repr(Trace)")
    _assert_one_spelling(str(summary), "str(RegionSummary)")
    _assert_one_spelling(summary._repr_html_(), "RegionSummary._repr_html_")
    timeline = Timeline(trace)
    _assert_one_spelling(timeline.static_outputs()[0]["text/html"], "Timeline static output")
    _assert_one_spelling(timeline.to_html(), "Timeline.to_html")


def test_the_check_catches_the_other_spelling() -> None:
    for text in ("1.5 us", "5us", "time (us)", "total us"):
        with pytest.raises(AssertionError):
            _assert_one_spelling(text + " µs", text)
