"""One set of figures: every presentation of a trace's region shares (Trace.summary(), its
HTML, `mgpu-lab trace summary`, the Timeline widget's table and its static view) shows the
same percentages and states what they divide by."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "widgets"))
from widget_fixtures import synthetic_trace

from mgpu_lab.cli import main
from mgpu_lab.profiler.summary import SHARE_DENOMINATOR, format_share


def _sampled_trace():
    """8 blocks, of which only 2 recorded (a sampled trace): the case that split the figures."""
    return synthetic_trace(num_sms=4, waves=2, units=2).filter(block=[0, 5])


def test_share_is_region_time_over_the_recorded_units_lifetimes() -> None:
    trace = _sampled_trace()
    life = trace.block_end_ns - trace.block_start_ns
    recorded = 2 * (life[0] + life[5])  # two units in each of the two blocks with events
    for row in trace.summary().rows:
        mask = trace.region == row["region_id"]
        expected = float(np.sum(trace.end_ns[mask] - trace.start_ns[mask])) / recorded
        assert row["share"] == pytest.approx(expected)
    mainloop = next(r for r in trace.summary().rows if r["region"] == "mainloop")
    assert 0.5 < mainloop["share"] < 1.0  # not diluted by the 6 blocks that did not record


def test_every_presentation_shows_the_same_shares(tmp_path, capsys) -> None:
    from mgpu_lab.widgets import Timeline

    trace = _sampled_trace()
    summary = trace.summary()
    shares = {row["region"]: format_share(row["share"]) for row in summary.rows}
    assert len(set(shares.values())) > 1

    text = str(summary)
    html = summary._repr_html_()
    path = trace.save(tmp_path / "t.npz")
    assert main(["trace", "summary", str(path)]) == 0
    cli = capsys.readouterr().out
    view = Timeline(trace)
    static = view.to_html()

    for name, share in shares.items():
        text_row = next(line for line in text.splitlines() if line.split()[:1] == [name])
        assert text_row.split()[-1] == share
        cli_row = next(line for line in cli.splitlines() if line.split()[:1] == [name])
        assert cli_row.split()[-1] == share
        assert share in html and share in static
        widget_row = next(row for row in view.summary_rows if row[0] == name)
        assert widget_row[-1] == share
    for output in (text, html, cli, view.summary_note, static):
        assert SHARE_DENOMINATOR in output
    assert view.summary_shares == pytest.approx([row["share"] for row in summary.rows])


def test_timeline_js_states_the_denominator_and_the_area_share() -> None:
    js = (Path(__file__).parent.parent / "mgpu_lab" / "widgets" / "timeline.js").read_text()
    assert 'model.get("summary_note")' in js
    assert '"share of area"' in js  # the area panel's share is over the area, said so
